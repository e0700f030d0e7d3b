"""A study's figures, drawn from a comparison result's tables (no number is computed here):

- :func:`compare_figure`: one panel a metric against the first ``by`` label, each group's mean
  with its 95 % confidence interval as an error bar, a colour for each value of the other
  ``by`` labels, every capture's own value as a faint dot beside it; without ``by``, one point
  a capture.  Each panel says its n (the group's captures that have the metric).  An interval
  is clipped to the values the quantity can take (rates, counts and times from 0, shares and
  indices 0..1); one that reaches below the quantity's floor (with n = 2, t = 12.7: a mean of
  5 Mbit/s +- 50) cannot tell the mean from nothing: it is not drawn, the mean is hollow and
  the panel says so.  A capture whose flavour is ``unknown`` is the word "unknown" on the
  confidence panel, never a confidence of 0;
- :func:`iographs_figure`: small multiples of I/O graphs, one panel a group (its captures
  overlaid, named in the panel's legend) or, without ``by``, a capture; each capture's
  average line over its span dashed in its colour, its peak interval marked, a partial last
  interval dotted (:func:`pcapstats.plots.iograph.stairs`).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from .. import plots
from ..errors import UsageError
from ..stats import t_quantile
from .iograph import partial_key, stairs

MAX_PANELS = 36
TITLES = {"goodput_bps": "Goodput", "utilisation": "Link use (goodput / asked rate)",
          "avg_capture_bps": "Average on the wire (capture span)",
          "avg_transfer_bps": "Average on the wire while transferring",
          "peak_bps": "Peak interval on the wire", "resent": "Re-sent segments",
          "resent_share": "Re-sent share of data packets",
          "rtt_min_ms": "Base RTT (min), main TCP transfer",
          "rtt_median_ms": "RTT under load (median), main TCP transfer",
          "datagram_loss": "UDP loss, main flow", "capture_jitter_ms": "UDP jitter at the capture point, main flow",
          "app_jitter_ms": "UDP jitter, iperf3's own (receiver), main flow",
          "jain_index": "Jain's fairness index", "flavour_confidence": "Flavour confidence",
          "convergence_s": "Time the flows took to converge",
          "signal_dbm": "Signal strength (radiotap median)",
          "datarate_bps": "802.11 data rate (median)", "retry_share": "802.11 retries"}
_RATES = ("bit/s",)
_AXIS = {"ms": "ms", "segments": "segments", "%": "%", "fraction": "%", "dBm": "dBm",
         "s": "Time (s)"}
# the values a quantity can take: shares and indices 0..1, a signal in dBm any, all else >= 0
_BOUNDS_OF_UNIT = {"fraction": (0.0, 1.0), "dBm": (-math.inf, math.inf)}
_BOUNDS = {"jain_index": (0.0, 1.0), "flavour_confidence": (0.0, 1.0)}
TIME_LABEL = "Time since the capture's first packet (s)"


def bounds(column) -> tuple[float, float]:
    """The values a metric can take (its confidence interval is clipped to them)."""
    return _BOUNDS.get(column.name, _BOUNDS_OF_UNIT.get(column.unit or "", (0.0, math.inf)))


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


def compare_figure(result, *, metrics=None, ax=None, title: str | None = None):
    from matplotlib.lines import Line2D
    from matplotlib.ticker import PercentFormatter
    columns = _drawn(result, metrics)
    if not columns:
        raise UsageError("no numeric metric has a value to draw",
                         hint="compare --metrics names the metrics; text ones (flavour, "
                              "verdict) are in the table")
    captures = result.table("captures")
    by = list(result.by)
    x_name = by[0] if by else "capture"
    if by:
        # the labels as written ("10%"), in the rows' order (by number: 1% before 10%)
        texts = {b: result.label_text(b) for b in by}
        categories = list(dict.fromkeys(texts[by[0]]))
        series = list(dict.fromkeys(tuple(texts[b][i] for b in by[1:])
                                    for i in range(result.rows())))
    else:
        categories = result.row_names()
        series = [()]
    rows = -(-len(columns) // plots.PANEL_COLUMNS)
    cols = min(len(columns), plots.PANEL_COLUMNS)
    tall = (0.0 if by else min(max(len(n) for n in categories), 40) * 0.06) + 0.6
    subtitle = (f"mean of each group's captures with its 95 % confidence interval "
                f"(Student's t), clipped to the values the quantity can take; x: {x_name}"
                + (f"; colour: {', '.join(by[1:])}" if len(by) > 1 else "")
                if by else "one point a capture")
    if "peak_bps" in [c.name for c in columns]:
        subtitle += f"; peak: the busiest {result.interval_s:g} s interval"
    fig, axes = plots.figure(title or f"Comparison: {plots.captures_title(result.names)}",
                             x_name, "", panels=len(columns), sharey=False,
                             size=(min(4.6 * cols, 14.0), (3.0 + tall) * rows + 1.4),
                             subtitle=subtitle, ax=ax)
    axes = axes if isinstance(axes, list) else [axes]
    width = 0.7 / max(len(series), 1)
    unknown_flavour = "flavour" in captures and (captures["flavour"] == "unknown").any()
    too_wide_any = False
    for k, (panel, c) in enumerate(zip(axes, columns)):
        said = _Panel()
        for s, key in enumerate(series):
            offset = (s - (len(series) - 1) / 2) * width
            colour = plots.colour(s, len(series))
            name = ", ".join(f"{b} {v or '(none)'}" for b, v in zip(by[1:], key)) or None
            picked = [i for i in range(result.rows())
                      if not by or tuple(texts[b][i] for b in by[1:]) == key]
            xs = [(categories.index(texts[by[0]][i]) if by else i) + offset for i in picked]
            if by:
                _group_points(panel, result, c, categories, key, offset, colour,
                              name if k == 0 else None, said)
            panel.plot(xs, [captures[c.name][i] for i in picked], ".", color=colour,
                       alpha=0.45 if by else 0.9, ms=5 if by else 7, zorder=2)
            if c.name == "flavour_confidence" and unknown_flavour:
                said.unknown += _unknown(panel, xs, [captures["flavour"][i] for i in picked],
                                         colour)
        if not by:
            said.n = [sum(1 for v in captures[c.name] if v == v)]
        plots.panel_title(panel, _panel_title(TITLES[c.name], said, bool(by)))
        too_wide_any |= said.too_wide > 0
        names = [v or "(none)" for v in categories] if by else categories
        crowded = not by or sum(len(v) + 2 for v in names) * 7 > 330   # points across a panel
        panel.set_xticks(range(len(categories)), names, fontsize="small" if by else "x-small",
                         rotation=(30 if by else 90) if crowded else 0,
                         ha="right" if crowded and by else "center",
                         rotation_mode="anchor" if crowded and by else "default")
        panel.set_xlim(-0.6, len(categories) - 0.4)
        _value_axis(panel, c, captures[c.name], said.tops)
        if c.unit == "fraction":
            panel.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
        if k + cols < len(columns) and plots.own(fig):   # the bottom panel says the x axis
            panel.set_xlabel("")
            if not by:
                panel.tick_params(labelbottom=False)
    extra = [Line2D([], [], color="0.3", marker=".", linestyle="", alpha=0.6,
                    label="one capture")]
    if by:
        extra.insert(0, Line2D([], [], color="0.3", marker="o", linestyle="",
                               label="group mean, bar: 95 % CI"))
    if too_wide_any:
        extra.insert(1, Line2D([], [], color="0.3", marker="o", mfc="white", linestyle="",
                               label="group mean whose 95 % CI is too wide to mean much "
                                     "(it reaches below 0): not drawn"))
    plots.legend(axes[0], extra=extra)
    return plots.drawn(fig, ax)


def _unknown(ax, xs, flavours, colour) -> int:
    """The word "unknown" up the middle of the confidence panel where captures' flavour is
    unknown (no confidence: not a value on the axis); how many there were."""
    at = Counter(x for x, f in zip(xs, flavours) if f == "unknown")
    for x, k in at.items():
        ax.text(x, 0.5, "unknown" if k == 1 else f"{k} unknown", rotation=90, ha="center",
                va="center", fontsize="x-small", style="italic", color=colour,
                transform=ax.get_xaxis_transform())
    return sum(at.values())


class _Panel:
    """What one panel drew, for its title and axis: each group's n, how many intervals were
    too wide, unknown flavours, the tops of the bars drawn."""

    def __init__(self):
        self.n, self.too_wide, self.groups, self.unknown, self.tops = [], 0, 0, 0, []


def _panel_title(name: str, said: _Panel, grouped: bool) -> str:
    """"Goodput" over "n = 2 a group" (or "n = 1 to 3 a group"; without groups, "12
    captures"), the intervals too wide to draw and the unknown flavours."""
    lines = [name]
    ns = sorted(set(said.n))
    if ns:
        each = f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]} to {ns[-1]}"
        lines.append((f"{each} a group" + (": no interval" if ns == [1] else ""))
                     if grouped else f"{ns[0]} captures")
    if said.too_wide:
        lines[-1] += (f"; CI too wide to mean much for {said.too_wide} of {said.groups}"
                      + (f" (t = {t_quantile(0.975, ns[0] - 1):.1f})" if len(ns) == 1 else ""))
    if said.unknown:
        lines.append(f"flavour unknown in {said.unknown}: no confidence (not 0)")
    return "\n".join(lines)


def _group_points(ax, result, column, categories, key, offset, colour, label,
                  said: _Panel) -> None:
    """Each group's mean with its interval clipped to ``bounds(column)``; a mean whose interval
    reaches below the floor hollow, without a bar (counted in ``said``)."""
    groups, captures, by = result.table("groups"), result.table("captures"), list(result.by)
    metric = column.name
    low, high = bounds(column)
    # a group's captures by the labels as written (a typed label's number is NaN where its
    # text does not read, and NaN equals nothing)
    rows_of = [tuple(result.label_text(b)[i] for b in by) for i in range(result.rows())]
    group_of = [tuple(result.label_text(b, "groups")[g] for b in by)
                for g in range(result.rows("groups"))]
    for g, labels in enumerate(group_of):
        if labels[1:] != key:
            continue
        x = categories.index(labels[0]) + offset
        mean, ci = groups[metric][g], groups[f"ci95_{metric}"][g]
        if mean != mean:
            continue
        said.groups += 1
        said.n.append(sum(1 for i in range(result.rows())
                          if rows_of[i] == labels and captures[metric][i] == captures[metric][i]))
        if ci != ci:                 # one capture: no interval
            ax.plot([x], [mean], "o", color=colour, ms=6, zorder=3, label=label)
        elif mean - ci < low:        # it cannot tell the mean from the floor
            said.too_wide += 1
            ax.plot([x], [mean], "o", color=colour, mfc="white", ms=6, zorder=3, label=label)
        else:
            top = min(mean + ci, high)
            ax.errorbar([x], [mean], yerr=[[mean - max(mean - ci, low)], [top - mean]],
                        fmt="o", color=colour, capsize=4, ms=6, zorder=3, label=label)
            said.tops.append(top)
            said.tops.append(max(mean - ci, low))
        label = None


def _value_axis(ax, column, values, bars) -> None:
    """The y axis in the metric's unit, from 0 (rates by prefix, like every rate axis), fitted
    to the captures' values and the bars drawn (``bars``: their ends); a metric below 0 (a
    signal in dBm) spans its values and bars, with a margin."""
    present = [v for v in values if v == v] + list(bars)
    largest = max(present, default=1.0) or 1.0
    if column.unit in _RATES:
        plots.rate_axis(ax, largest, column.unit, "Rate")
    else:
        ax.set_ylabel(_AXIS.get(column.unit or "", ""))
    if largest < 0:
        lowest = min(present)
        margin = max(0.1 * (largest - lowest), 1.0)
        ax.set_ylim(lowest - margin, largest + margin)
        return
    low = min(0.0, min(present, default=0.0))
    ax.set_ylim(low, largest * 1.15 if largest > 0 else 1.0)


def iographs_figure(result, *, ax=None, title: str | None = None):
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
                                         else "a capture"), ax=ax)
    axes = axes if isinstance(axes, list) else [axes]
    partial_any = shaded = False
    for n, (panel, (name, rows)) in enumerate(zip(axes, panels)):
        shown = [i for i in rows if not graphs[i].empty]
        for k, i in enumerate(shown):
            group = graphs[i].groups()[0]
            colour = plots.colour(k, len(shown))
            label = result.row_names()[i] if result.by else None
            series, row = group.series, group.summary
            partial = stairs(panel, series["start_s"], series["bps"], interval,
                             row["capture_span_s"], colour, label=label, lw=1.1,
                             shade=len(shown) == 1)       # not over another capture's data
            partial_any, shaded = partial_any | partial, shaded | (partial and len(shown) == 1)
            panel.hlines(row["avg_capture_bps"], 0, row["capture_span_s"], colors=colour,
                         linestyles="--", lw=1)
            panel.plot([row["peak_start_s"] + interval / 2], [row["peak_bps"]], "v",
                       color=colour)
        plots.panel_title(panel, name)
        panel.set_ylim(0, largest * 1.15)
        plots.rate_axis(panel, largest, "bit/s", "Throughput")
        if n % plots.PANEL_COLUMNS and plots.own(fig):
            panel.set_ylabel("")
        if result.by and shown:      # beside every panel (the lines fill it; widths agree)
            plots.legend(panel, beside=True, fontsize="x-small", handlelength=1.2)
    styles = [Line2D([], [], color="grey", linestyle="--",
                     label="average over the capture span (Wireshark's)"),
              Line2D([], [], color="grey", marker="v", linestyle="", label="peak interval")]
    if not result.by or len(panels) == 1:
        styles.insert(0, Line2D([], [], color="C0", label="bits per second in each interval"))
    styles += partial_key(partial_any, shaded)
    if plots.own(fig):              # the panels' own lines are beside them
        plots.key(axes[0], styles)
    else:              # the caller's Axes: beside the first panel, with its own lines
        plots.legend(axes[0], extra=styles, fontsize="x-small")
    return plots.drawn(fig, ax)


def models_figure(result, *, ax=None, title: str | None = None):
    """Each capture's goodput against its loss rate (the share of its segments re-sent), both
    axes logarithmic, coloured by its first --by label other than loss (else one colour),
    with Mathis' and Padhye's curves for the captures' median MSS and RTT
    (``Compare.model_curves``): where a run sits against theory."""
    from matplotlib.ticker import FuncFormatter
    t = result.table("captures")
    if "goodput_bps" not in t or "resent_share" not in t:
        raise UsageError("the models figure needs goodput and re-sent share",
                         hint="leave them in --metrics")
    lossy = (t["resent_share"] > 0) & ~np.isnan(t["goodput_bps"])
    if not lossy.any():
        raise UsageError("no capture lost anything: no loss rate to put the models against")
    curves = result.model_curves()
    fig, axes = plots.figure(title or f"Goodput against loss: "
                             f"{plots.captures_title(result.names)}",
                             "Segments re-sent (share of the data direction's, log)",
                             "Goodput (log)", ax=ax,
                             subtitle="each capture's main TCP transfer; the curves at the "
                                      "captures' median MSS and RTT under load")
    colour_by = next((b for b in result.by if b != "loss"), None)
    keys = list(dict.fromkeys(t[colour_by][lossy])) if colour_by else [None]
    for k, key in enumerate(keys):
        mine = lossy & ((t[colour_by] == key) if colour_by else True)
        axes.scatter(t["resent_share"][mine], t["goodput_bps"][mine], s=28, zorder=3,
                     color=plots.colour(k, len(keys)),
                     label=f"{colour_by} {key}" if colour_by else "a capture's goodput")
    if len(curves["loss"]):
        axes.plot(curves["loss"], curves["mathis_bps"], "-", color="black", lw=1,
                  label=f"Mathis (MSS {curves['mss_bytes'][0]:.0f} B, RTT "
                        f"{curves['rtt_ms'][0]:.1f} ms)")
        axes.plot(curves["loss"], curves["padhye_bps"], "--", color="black", lw=1,
                  label="Padhye, with timeouts (RTO 200 ms)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * 100:g} %"))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: plots.human_rate(v)))
    plots.legend(axes)
    return plots.drawn(fig, ax)
