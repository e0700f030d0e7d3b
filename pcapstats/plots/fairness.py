"""The fairness figure: each flow's share of the goodput per interval (counted from its own
start) against the fair-share band and when it converged, Jain's index per interval over the
common window with the run's index as a line, and each flow's goodput in start order (a
fairness result's tables; nothing computed here)."""

from __future__ import annotations

import numpy as np

from .. import plots
from .tcp import TIME_LABEL


def fairness_figure(result, *, ax=None, title: str | None = None):
    summary, series, flows = result.table("summary"), result.table("series"), result.table("flows")
    shares = result.table("shares")
    given = ax
    fig, (over_time, index_ax, bars) = plots.figure(
        title or f"Fairness: {plots.captures_title(result.names)}",
        TIME_LABEL, "Share of the goodput (%)", panels=3, sharey=False, size=(14.0, 4.8),
        subtitle=f"{int(summary['flows'][0])} flows by {summary['by'][0]}, goodput", ax=given)
    names = list(flows["flow"])
    n = len(names)
    _shares_panel(over_time, summary, shares, flows, names)
    _index_panel(index_ax, summary, series, n)
    index_ax.set_xlim(over_time.get_xlim())
    if plots.own(fig):              # one legend under the figure for both time panels
        plots.key(over_time, [e for a in (over_time, index_ax)
                              for e in zip(*a.get_legend_handles_labels())])
    else:
        plots.legend(over_time)
        plots.legend(index_ax)
    by_order = np.argsort(flows["order"], kind="stable")
    bars.barh(range(n), flows["goodput_bps"][by_order],
              color=[plots.colour(int(k), n) for k in by_order])
    bars.set_yticks(range(n), [f"{int(flows['order'][k])}. " + names[k].replace(" (", "\n(", 1)
                               for k in by_order], fontsize="small")
    bars.invert_yaxis()
    plots.rate_axis(bars, float(max(flows["goodput_bps"])), "bit/s",
                    "Goodput while all sent" if summary["window"][0] == "common"
                    else "Goodput over its own span", axis="x")
    bars.set_ylabel("")
    plots.panel_title(bars, "Each flow, in start order")
    return plots.drawn(fig, given)


def _shares_panel(ax, summary, shares, flows, names) -> None:
    """Each flow's share per interval of its own, drawn to the interval's end; the fair share
    with its band while every flow was sending; the moment the last flow started and the one
    the flows converged."""
    plots.panel_title(ax, "Each flow's share, intervals from its own start")
    window_start, window = float(summary["window_start_s"][0]), float(summary["window_s"][0])
    n = len(names)
    for k, name in enumerate(names):
        mine = shares["flow"] == name
        t, share = shares["time_s"][mine], shares["share"][mine]
        if not len(t):
            continue
        step = (shares["since_start_s"][mine][1] - shares["since_start_s"][mine][0]
                if len(t) > 1 else 1.0)
        ax.step(np.r_[t, t[-1] + step], np.r_[share, share[-1]], where="post",
                color=plots.colour(k, n), lw=1.2, label=f"{int(flows['order'][k])}. {name}")
    if window == window:                     # a common window: the band, the two moments
        end = window_start + window
        ax.fill_between([window_start, end], 0.9 / n, 1.1 / n, color="0.6", alpha=0.3, lw=0,
                        label=f"fair share 1/{n}, ±10 %")
        ax.axvline(window_start, color="0.3", ls=":", lw=1, label="last flow starts")
        converged = float(summary["convergence_s"][0])
        if converged == converged:
            ax.axvline(window_start + converged, color="tab:green", ls="--", lw=1.2,
                       label=f"converged after {converged:.1f} s")
        else:
            plots.note(ax, "the flows did not converge (3 intervals in a row within 10 % of "
                           "the fair share)")
    ax.set_ylim(0, 1.05)
    ax.yaxis.set_major_formatter(_percent())


def _index_panel(ax, summary, series, n: int) -> None:
    """Jain's index per interval of the common window, the run's index, and 1/n."""
    plots.panel_title(ax, "Jain's index per interval, all sending")
    index = float(summary["jain_index"][0])
    if len(series["time_s"]):       # each interval drawn to its end
        step = (series["time_s"][1] - series["time_s"][0] if len(series["time_s"]) > 1
                else float(summary["window_s"][0]))
        ax.step(list(series["time_s"]) + [series["time_s"][-1] + step],
                list(series["jain_index"]) + [series["jain_index"][-1]], where="post",
                color="tab:blue", label="Jain's index per interval")
    ax.axhline(index, color="tab:blue", linestyle="--", label=f"Jain over the run: {index:.3f}")
    ax.axhline(1 / n, color="0.5", linestyle=":", lw=1,
               label=f"1/n = {1 / n:.2f} (one flow takes all)")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("Jain's index")


def _percent():
    from matplotlib.ticker import PercentFormatter
    return PercentFormatter(1.0, decimals=0)
