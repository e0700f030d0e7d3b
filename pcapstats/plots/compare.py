"""A study's figures, drawn from a comparison result's tables (no number is computed here):

- :func:`compare_figure`: one panel a metric against the first ``by`` label, each group's mean
  with its 95 % confidence interval as an error bar, a colour for each value of the other
  ``by`` labels, every capture's own value as a faint dot beside it; without ``by``, one point
  a capture;
- :func:`iographs_figure`: small multiples of I/O graphs, one panel a group (its captures
  overlaid, named in the panel's legend) or, without ``by``, a capture; each capture's
  average line over its span dashed in its colour, its peak interval marked.
"""

from __future__ import annotations


from .. import plots
from ..errors import UsageError

MAX_PANELS = 36
TITLES = {"goodput_bps": "Goodput", "utilisation": "Link use (goodput / asked rate)",
          "avg_capture_bps": "Average on the wire (capture span)",
          "avg_transfer_bps": "Average on the wire while transferring",
          "peak_bps": "Peak interval on the wire", "resent": "Re-sent segments",
          "resent_share": "Re-sent share of data packets",
          "rtt_min_ms": "Base RTT (min), main TCP transfer",
          "rtt_median_ms": "RTT under load (median), main TCP transfer",
          "datagram_loss": "UDP loss, main flow", "jitter_ms": "UDP jitter, main flow",
          "jain_index": "Jain's fairness index", "flavour_confidence": "Flavour confidence",
          "signal_dbm": "Signal strength (radiotap median)"}
_RATES = ("bit/s",)
_AXIS = {"ms": "ms", "segments": "segments", "%": "%", "fraction": "%", "dBm": "dBm"}
TIME_LABEL = "Time since the capture's first packet (s)"


def _drawn(result, metrics) -> list:
    """The numeric metric columns with at least one value, in table order."""
    table = result.table("captures")
    out = []
    for c in result.spec("captures").columns:
        if c.name not in TITLES or (metrics and c.name not in metrics):
            continue
        if c.name in result.metrics and (table[c.name] == table[c.name]).any():
            out.append(c)
    return out


def compare_figure(result, *, metrics=None, title: str | None = None):
    from matplotlib.lines import Line2D
    from matplotlib.ticker import PercentFormatter
    columns = _drawn(result, metrics)
    if not columns:
        raise UsageError("no numeric metric has a value to draw",
                         hint="compare --metrics names the metrics; text ones (flavour, "
                              "verdict) are in the table")
    captures, groups = result.table("captures"), result.table("groups")
    by = list(result.by)
    x_name = by[0] if by else "capture"
    if by:
        said = {b: result.label_text(b) for b in by}        # the labels as written: "10%"
        categories = list(dict.fromkeys(said[by[0]]))
        series = list(dict.fromkeys(tuple(said[b][i] for b in by[1:])
                                    for i in range(result.rows())))
    else:
        categories = result.row_names()
        series = [()]
    rows = -(-len(columns) // plots.PANEL_COLUMNS)
    cols = min(len(columns), plots.PANEL_COLUMNS)
    tall = (0.0 if by else min(max(len(n) for n in categories), 40) * 0.06) + 0.3
    subtitle = (f"mean of each group's captures with its 95 % confidence interval "
                f"(Student's t); x: {x_name}" + (f"; colour: {', '.join(by[1:])}"
                                                 if len(by) > 1 else "")
                if by else "one point a capture")
    if "peak_bps" in [c.name for c in columns]:
        subtitle += f"; peak: the busiest {result.interval_s:g} s interval"
    fig, axes = plots.figure(title or f"Comparison: {plots.captures_title(result.names)}",
                             x_name, "", panels=len(columns), sharey=False,
                             size=(min(4.6 * cols, 14.0), (3.0 + tall) * rows + 1.4),
                             subtitle=subtitle)
    axes = axes if isinstance(axes, list) else [axes]
    width = 0.7 / max(len(series), 1)
    for k, (ax, c) in enumerate(zip(axes, columns)):
        for s, key in enumerate(series):
            offset = (s - (len(series) - 1) / 2) * width
            colour = plots.colour(s, len(series))
            name = ", ".join(f"{b} {v or '(none)'}" for b, v in zip(by[1:], key)) or None
            if by:
                _group_points(ax, result, c.name, categories, key, offset, colour,
                              name if k == 0 else None)
            picked = [i for i in range(result.rows())
                      if not by or tuple(said[b][i] for b in by[1:]) == key]
            xs = [(categories.index(said[by[0]][i]) if by else i) + offset for i in picked]
            ax.plot(xs, [captures[c.name][i] for i in picked], ".", color=colour,
                    alpha=0.45 if by else 0.9, ms=5 if by else 7, zorder=2)
        ax.set_title(TITLES[c.name], fontsize="small")
        names = [v or "(none)" for v in categories] if by else categories
        crowded = not by or sum(len(v) + 2 for v in names) * 7 > 330   # points across a panel
        ax.set_xticks(range(len(categories)), names, fontsize="small" if by else "x-small",
                      rotation=(30 if by else 90) if crowded else 0,
                      ha="right" if crowded and by else "center",
                      rotation_mode="anchor" if crowded and by else "default")
        ax.set_xlim(-0.6, len(categories) - 0.4)
        _value_axis(ax, c, captures[c.name], groups if by else None)
        if c.unit == "fraction":
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
        if k + cols < len(columns):            # the bottom panel of a column says the x axis
            ax.set_xlabel("")
            if not by:
                ax.tick_params(labelbottom=False)
    extra = [Line2D([], [], color="0.3", marker=".", linestyle="", alpha=0.6,
                    label="one capture")]
    if by:
        extra.insert(0, Line2D([], [], color="0.3", marker="o", linestyle="",
                               label="group mean, bar: 95 % CI"))
    plots.legend(axes[0], extra=extra, below=True)
    return fig


def _group_points(ax, result, metric, categories, key, offset, colour, label) -> None:
    groups, by = result.table("groups"), list(result.by)
    for g in range(result.rows("groups")):
        if tuple(result.label_text(b, "groups")[g] for b in by[1:]) != key:
            continue
        x = categories.index(result.label_text(by[0], "groups")[g]) + offset
        mean, ci = groups[metric][g], groups[f"ci95_{metric}"][g]
        if mean != mean:
            continue
        ax.errorbar([x], [mean], yerr=[[ci if ci == ci else 0], [ci if ci == ci else 0]],
                    fmt="o", color=colour, capsize=4, ms=6, zorder=3, label=label)
        label = None


def _value_axis(ax, column, values, groups) -> None:
    """The y axis in the metric's unit, from 0 (rates by prefix, like every rate axis); a
    metric below 0 (a signal in dBm) spans its values and their bars, with a margin.
    ``groups``: the groups table when groups are drawn (--by), else None."""
    import numpy as np
    present = [v for v in values if v == v]
    drawn = [] if groups is None else [g for g in range(len(groups["n"]))
                                       if groups[column.name][g] == groups[column.name][g]]
    spread = [np.nan_to_num(groups[f"ci95_{column.name}"][g]) for g in drawn]
    means = [groups[column.name][g] for g in drawn]
    tops = [m + e for m, e in zip(means, spread)]
    largest = max(present + tops, default=1.0) or 1.0
    if column.unit in _RATES:
        plots.rate_axis(ax, largest, column.unit, "Rate")
    else:
        ax.set_ylabel(_AXIS.get(column.unit or "", ""))
    if largest < 0:
        lowest = min(present + [m - e for m, e in zip(means, spread)])
        margin = max(0.1 * (largest - lowest), 1.0)
        ax.set_ylim(lowest - margin, largest + margin)
        return
    low = min(0.0, min(present, default=0.0))
    ax.set_ylim(low, largest * 1.15 if largest > 0 else 1.0)


def iographs_figure(result, *, title: str | None = None):
    """Small multiples of the captures' I/O graphs (see the module docstring)."""
    from matplotlib.lines import Line2D
    graphs = result.iographs()
    if any(g is None for g in graphs):
        raise UsageError("the I/O graphs were not kept", hint="ps.compare(..., iographs=True)")
    if result.by:
        panels = result.groups_of_captures()
    else:
        panels = [(name, [i]) for i, name in enumerate(result.names)]
    if len(panels) > MAX_PANELS:
        raise UsageError(f"{len(panels)} I/O graphs are too many for one figure "
                         f"(at most {MAX_PANELS})",
                         hint="group the captures with --by: one panel a group")
    lines = [(i, graphs[i].groups()[0]) for _, rows in panels for i in rows
             if not graphs[i].empty]
    largest = max((float(g.summary["peak_bps"]) for _, g in lines), default=1.0) or 1.0
    interval = result.interval_s
    fig, axes = plots.figure(title or f"I/O graphs: {plots.captures_title(result.names)}",
                             TIME_LABEL, "Throughput", panels=len(panels), sharey=True,
                             subtitle=f"every packet, {interval:g} s intervals; one panel "
                                      + ("a group, its captures overlaid" if result.by
                                         else "a capture"))
    axes = axes if isinstance(axes, list) else [axes]
    for n, (ax, (name, rows)) in enumerate(zip(axes, panels)):
        shown = [i for i in rows if not graphs[i].empty]
        for k, i in enumerate(shown):
            group = graphs[i].groups()[0]
            colour = plots.colour(k, len(shown))
            label = result.row_names()[i] if result.by else None
            series, row = group.series, group.summary
            edges = list(series["start_s"]) + [series["start_s"][-1] + interval]
            ax.stairs(series["bps"], edges, baseline=None, color=colour, lw=1.1, label=label)
            ax.hlines(row["avg_capture_bps"], 0, row["capture_span_s"], colors=colour,
                      linestyles="--", lw=1)
            ax.plot([row["peak_start_s"] + interval / 2], [row["peak_bps"]], "v",
                    color=colour)
        ax.set_title(name, fontsize="small")
        ax.set_ylim(0, largest * 1.15)
        plots.rate_axis(ax, largest, "bit/s", "Throughput")
        if n % plots.PANEL_COLUMNS:
            ax.set_ylabel("")
        if result.by and shown:      # beside every panel (the lines fill it; widths agree)
            ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      borderaxespad=0, handlelength=1.2)
    styles = [Line2D([], [], color="grey", linestyle="--",
                     label="average over the capture span (Wireshark's)"),
              Line2D([], [], color="grey", marker="v", linestyle="", label="peak interval")]
    if not result.by or len(panels) == 1:
        styles.insert(0, Line2D([], [], color="C0", label="bits per second in each interval"))
    fig.legend(handles=styles, loc="outside lower center", ncols=len(styles), fontsize="small")
    return fig
