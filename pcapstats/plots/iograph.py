"""The I/O graph figure: each group's rate per interval, its averages and its peak.

Drawn from an I/O graph result (pcapstats.analyses.iograph.IOGraph) only, through its
``groups()`` (no number is computed here):

- one stepped line per group (stream, direction, capture), each interval drawn over its width;
  the last interval, when the capture ended inside it, dotted (and, on a panel of one capture,
  the time after the capture's last packet shaded): its rate counts only the part of the
  interval that was captured, so its drop is no collapse (:func:`stairs`, :func:`partial_key`);
- in the group's colour: a dashed line at the average over the capture span (Wireshark's
  average, from the capture's first to its last packet), a dotted line at the average while the
  group was active (its first to last packet; drawn only where it differs from the dashed one
  by more than 1 %), a triangle on the peak interval;
- several captures overlaid on one time axis (``layout="overlay"``, each from its own first
  packet: one rate scale for all), or one panel per capture, each named by its capture and
  scaled to its own peak (``layout="side"``);
- legends under the figure (a panel's own lines beside the panel), never on the data;
- ``from_s`` / ``to_s``: Wireshark's zoom on a time window, the rate axis fitted to the
  intervals in it.
"""

from __future__ import annotations


import numpy as np

from .. import plots
from ..errors import UsageError

LAYOUTS = ("overlay", "side")
_RATE_UNITS = {"bits": ("bit/s", "Throughput"), "bytes": ("B/s", "Throughput"),
               "packets": ("packets/s", "Packet rate")}
TIME_LABEL = "Time since the capture's first packet (s)"
PARTIAL = dict(color="0.5", alpha=0.12, hatch="//", lw=0)     # after the capture's end


def iograph_figure(result, *, layout: str = "overlay", ax=None, from_s=None, to_s=None,
                   title: str | None = None):
    """A matplotlib Figure of an I/O graph result (save it with ``pcapstats.plots.save``);
    given ``ax``, drawn into it (one Axes; ``side``: one a capture) and ``ax`` returned."""
    from matplotlib.lines import Line2D
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}", hint="use overlay or side")
    if result.empty:
        raise UsageError("nothing to plot: no packet matched the filters")
    window = plots.time_window(from_s, to_s)
    unit_text, quantity = _RATE_UNITS[result.unit]
    panels = _panels(result.groups(), layout, dict(zip(result.captures, result.names)))
    fig, axes = plots.figure(title or f"I/O graph: {plots.captures_title(result.names)}",
                             TIME_LABEL, quantity, panels=len(panels), sharey=layout == "side",
                             subtitle=_subtitle(result), ax=ax)
    axes = axes if isinstance(axes, list) else [axes]
    several = len(set(result.captures)) > 1 and layout == "overlay"
    rate, interval = result.rate_column, result.interval_s
    groups = [g for _, gs in panels for g in gs]
    span = plots.zoom(axes[0], window, 0.0, max(_end(g, interval) for g in groups),
                      "the capture")
    largest = max(_largest(g, rate, interval, span) for g in groups) or 1.0
    drew_active = drew_partial = shaded = False
    k, lines = 0, len(groups)
    for n, (panel, (panel_name, members)) in enumerate(zip(axes, panels)):
        one = len({g.capture for g in members}) == 1   # a capture's end shaded: not over another
        for n_group, group in enumerate(members):
            active, partial = _draw_group(panel, result, group, plots.colour(k, lines),
                                          unit_text, several, one and n_group == 0)
            partial &= span is None or group.summary["capture_span_s"] < span[1]
            drew_active, k = drew_active | active, k + 1
            drew_partial |= partial
            shaded |= partial and one
        if panel_name:
            plots.panel_title(panel, panel_name)
        if span is not None:
            panel.set_xlim(*span)
        panel.set_ylim(0, largest * 1.12)
        plots.rate_axis(panel, float(largest), unit_text, quantity)
        if n % plots.PANEL_COLUMNS and plots.own(fig):
            panel.set_ylabel("")                 # the first panel of a row names the axis
        if layout == "side":               # each panel's lines, their averages and peaks
            plots.legend(panel, beside=True, fontsize="x-small")
    styles = [Line2D([], [], color="grey", linestyle="--", label="average over the capture span"),
              Line2D([], [], color="grey", marker="v", linestyle="", label="peak interval")]
    if drew_active:       # only where it differs from the capture-span average
        styles.insert(1, Line2D([], [], color="grey", linestyle=":", label="average while active"))
    styles += partial_key(drew_partial, shaded)
    if layout == "side" and plots.own(fig):   # the panels' own lines are beside them
        plots.key(axes[0], styles)
    else:
        plots.legend(axes[0], extra=styles)
    return plots.drawn(fig, ax)


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


def _end(group, interval: float) -> float:
    """Where the group's graph ends: its last interval's end, or the capture's last packet."""
    starts = group.series["start_s"]
    return float(max(starts[-1] + interval, group.summary["capture_span_s"]))


def _largest(group, rate: str, interval: float, span) -> float:
    """The group's largest interval in the zoom (its peak without one)."""
    if span is None:
        return float(group.summary[f"peak_{rate}"])
    starts = np.asarray(group.series["start_s"], float)
    seen = (starts + interval > span[0]) & (starts < span[1])
    return float(np.max(group.series[rate][seen], initial=0.0))


def partial_key(partial: bool, shaded: bool) -> list:
    """The legend entries of a partial last interval (dotted) and the shade after a capture's
    end, where drawn."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    out = [Line2D([], [], color="grey", linestyle=":", label="last interval, only partly "
                  "captured (the capture ended inside it)")] if partial else []
    if shaded:
        out.append(Patch(**PARTIAL, label="after the capture's last packet"))
    return out


def stairs(ax, starts, values, interval: float, capture_span_s: float, colour, *, label=None,
           lw: float = 1.2, shade: bool = True) -> bool:
    """One group's intervals as stairs, each over its width; the last one dotted, and (with
    ``shade``: once an axis and capture) the time after the capture's last packet shaded, when
    the capture ended inside it (its rate counts only the captured part).  True when it was
    partial."""
    starts, values = np.asarray(starts, float), np.asarray(values, float)
    edges = np.r_[starts, starts[-1] + interval]
    partial = capture_span_s < edges[-1] - 1e-9
    whole = len(values) - 1 if partial else len(values)
    if whole:
        ax.stairs(values[:whole], edges[:whole + 1], baseline=None, color=colour, linewidth=lw,
                  label=label)
    if partial:
        ax.stairs(values[-1:], edges[-2:], baseline=None, color=colour, linewidth=lw,
                  linestyle=":", label=None if whole else label)
        if whole:
            ax.vlines(edges[-2], values[-2], values[-1], colors=colour, linewidth=lw,
                      linestyles=":")
        if shade:
            ax.axvspan(capture_span_s, edges[-1], **PARTIAL)
    return bool(partial)


def _draw_group(ax, result, group, colour, unit_text, name_capture: bool,
                shade: bool) -> tuple[bool, bool]:
    """Draw one group's stairs, average line(s) and peak; (drew the active average, its last
    interval was partial)."""
    row, part, rate = group.summary, group.series, result.rate_column
    avg, active = row[f"avg_capture_{rate}"], row[f"avg_active_{rate}"]
    peak, peak_at = row[f"peak_{rate}"], row["peak_start_s"]
    label = group.label
    if name_capture:       # several captures on one axis: the capture names the line
        name = dict(zip(result.captures, result.names))[group.capture]
        label = name if label == "all packets" else f"{name}: {label}"
    partial = stairs(ax, part["start_s"], part[rate], result.interval_s, row["capture_span_s"],
                     colour, label=f"{label} (avg {plots.human_rate(avg, unit_text)}, "
                                   f"peak {plots.human_rate(peak, unit_text)})", shade=shade)
    if avg == avg:
        ax.hlines(avg, 0, row["capture_span_s"], colors=colour, linestyles="--", linewidth=1)
    ax.plot([peak_at + result.interval_s / 2], [peak], marker="v", color=colour, linestyle="")
    if active == active and abs(active - avg) > 0.01 * max(abs(avg), 1e-12):
        ax.hlines(active, row["first_s"], row["last_s"], colors=colour, linestyles=":",
                  linewidth=1.5)
        return True, partial
    return False, partial
