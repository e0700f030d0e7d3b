"""The fairness figure: Jain's index per interval over the common window, the run's index as a
line, and each flow's share (a fairness result's tables; nothing computed here)."""

from __future__ import annotations

from .. import plots
from .tcp import TIME_LABEL


def fairness_figure(result, *, ax=None, title: str | None = None):
    summary, series, flows = result.table("summary"), result.table("series"), result.table("flows")
    index = float(summary["jain_index"][0])
    given = ax
    fig, (ax, bars) = plots.figure(
        title or f"Jain's fairness index: {plots.captures_title(result.names)}",
        TIME_LABEL, "Jain's index", panels=2, sharey=False, size=(11.0, 4.6),
        subtitle=f"{int(summary['flows'][0])} flows by {summary['by'][0]}, goodput", ax=given)
    if len(series["time_s"]):       # each interval drawn to its end
        step = (series["time_s"][1] - series["time_s"][0] if len(series["time_s"]) > 1
                else float(summary["window_s"][0]))
        ax.step(list(series["time_s"]) + [series["time_s"][-1] + step],
                list(series["jain_index"]) + [series["jain_index"][-1]], where="post",
                color="tab:blue", label="per interval")
    ax.axhline(index, color="tab:blue", linestyle="--", label=f"over the run: {index:.3f}")
    ax.axhline(1 / len(flows["flow"]), color="0.5", linestyle=":", lw=1,
               label=f"1/n = {1 / len(flows['flow']):.2f} (one flow takes all)")
    ax.set_ylim(0, 1.05)
    plots.legend(ax)
    names = list(flows["flow"])
    bars.barh(range(len(names)), flows["goodput_bps"],
              color=[plots.colour(k, len(names)) for k in range(len(names))])
    bars.set_yticks(range(len(names)), [n.replace(" (", "\n(", 1) for n in names],
                    fontsize="small")
    bars.invert_yaxis()
    plots.rate_axis(bars, float(max(flows["goodput_bps"])), "bit/s", "Goodput", axis="x")
    bars.set_ylabel("")
    return plots.drawn(fig, given)
