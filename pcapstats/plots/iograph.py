"""The I/O graph figure: each group's rate per interval, its averages and its peak.

Drawn from an I/O graph result (pcapstats.analyses.iograph.IOGraph) only, through its
``groups()`` (no number is computed here):

- one stepped line per group (stream, direction, capture), each interval drawn over its width;
- in the group's colour: a dashed line at the average over the capture span (Wireshark's
  average, from the capture's first to its last packet), a dotted line at the average while the
  group was active (its first to last packet; drawn only where it differs from the dashed one
  by more than 1 %), a triangle on the peak interval;
- several captures overlaid on one time axis (``layout="overlay"``, each from its own first
  packet: one rate scale for all), or one panel per capture, each scaled to its own peak
  (``layout="side"``).
"""

from __future__ import annotations



from .. import plots
from ..errors import UsageError

LAYOUTS = ("overlay", "side")
_RATE_UNITS = {"bits": ("bit/s", "Throughput"), "bytes": ("B/s", "Throughput"),
               "packets": ("packets/s", "Packet rate")}
TIME_LABEL = "Time since the capture's first packet (s)"


def iograph_figure(result, *, layout: str = "overlay", title: str | None = None):
    """A matplotlib Figure of an I/O graph result (save it with ``pcapstats.plots.save``)."""
    from matplotlib.lines import Line2D
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}", hint="use overlay or side")
    if result.empty:
        raise UsageError("nothing to plot: no packet matched the filters")
    unit_text, quantity = _RATE_UNITS[result.unit]
    panels = _panels(result.groups(), layout, dict(zip(result.captures, result.names)))
    fig, axes = plots.figure(title or f"I/O graph: {plots.captures_title(result.names)}",
                             TIME_LABEL, quantity, panels=len(panels), sharey=layout == "side",
                             subtitle=_subtitle(result))
    axes = axes if isinstance(axes, list) else [axes]
    several = len(set(result.captures)) > 1 and layout == "overlay"
    rate = result.rate_column
    largest = max(g.summary[f"peak_{rate}"] for _, groups in panels for g in groups)
    drew_active, k, lines = False, 0, sum(len(groups) for _, groups in panels)
    for n, (ax, (panel_name, groups)) in enumerate(zip(axes, panels)):
        for group in groups:
            drew_active |= _draw_group(ax, result, group, plots.colour(k, lines), unit_text,
                                       several)
            k += 1
        if panel_name:
            ax.set_title(panel_name, fontsize="small")
        ax.set_ylim(0, largest * 1.12)
        plots.rate_axis(ax, float(largest), unit_text, quantity)
        if n % plots.PANEL_COLUMNS:
            ax.set_ylabel("")                 # the first panel of a row names the axis
        if layout == "side" and len(groups) > 1:
            plots.legend(ax, fontsize="x-small")
    styles = [Line2D([], [], color="grey", linestyle="--", label="average over the capture span"),
              Line2D([], [], color="grey", marker="v", linestyle="", label="peak interval")]
    if drew_active:       # only where it differs from the capture-span average
        styles.insert(1, Line2D([], [], color="grey", linestyle=":", label="average while active"))
    if layout == "side":
        fig.legend(handles=styles, loc="outside lower center", ncols=len(styles),
                   fontsize="small")
    else:
        entries = len(axes[0].get_legend_handles_labels()[0]) + len(styles)
        plots.legend(axes[0], extra=styles, below=entries > 5)
    return fig


def _subtitle(result) -> str:
    filters = ", ".join(f"{k} {v}" for k, v in result.filters.items())
    return f"{result.interval_s:g} s intervals" + (f"; only {filters}" if filters else "")


def _panels(groups, layout, names: dict):
    """[(panel title, [groups])]: one panel, or one per capture (``names``: each capture's
    name, Result.names)."""
    if layout == "overlay":
        return [("", groups)]
    captures = list(dict.fromkeys(g.capture for g in groups))
    return [(names[c], [g for g in groups if g.capture == c]) for c in captures]


def _draw_group(ax, result, group, colour, unit_text, name_capture: bool) -> bool:
    """Draw one group's stairs, average line(s) and peak; True if it drew the active average."""
    row, part, rate = group.summary, group.series, result.rate_column
    edges = list(part["start_s"]) + [part["start_s"][-1] + result.interval_s]
    avg, active = row[f"avg_capture_{rate}"], row[f"avg_active_{rate}"]
    peak, peak_at = row[f"peak_{rate}"], row["peak_start_s"]
    label = group.label
    if name_capture:       # several captures on one axis: the capture names the line
        name = dict(zip(result.captures, result.names))[group.capture]
        label = name if label == "all packets" else f"{name}: {label}"
    ax.stairs(part[rate], edges, baseline=None, color=colour, linewidth=1.2,
              label=f"{label} (avg {plots.human_rate(avg, unit_text)}, "
                    f"peak {plots.human_rate(peak, unit_text)})")
    if avg == avg:
        ax.hlines(avg, 0, row["capture_span_s"], colors=colour, linestyles="--", linewidth=1)
    ax.plot([peak_at + result.interval_s / 2], [peak], marker="v", color=colour, linestyle="")
    if active == active and abs(active - avg) > 0.01 * max(abs(avg), 1e-12):
        ax.hlines(active, row["first_s"], row["last_s"], colors=colour, linestyles=":",
                  linewidth=1.5)
        return True
    return False
