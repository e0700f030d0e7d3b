"""The throughput figure: each stream's average and peak rate in both directions, as bars (a
throughput result's ``streams`` table; nothing computed here).

A row a stream (several captures: each stream named by its capture too), a bar a direction:
the dark bar is the stream's average (Wireshark's Conversations Bits/s: frame bits over the
stream's duration), the light bar behind it the busiest interval (the peak).  At most
MAX_STREAMS streams, those with the most bytes, and a note says how many were left out.
"""

from __future__ import annotations

import numpy as np

from .. import plots
from ..errors import UsageError
from ..naming import text as name_text

MAX_STREAMS = 30
_DIRECTIONS = (("a_to_b", "A→B", "C0"), ("b_to_a", "B→A", "C1"))


def throughput_figure(result, *, ax=None, title: str | None = None):
    from matplotlib.patches import Patch
    table = result.table("streams")
    if not len(table["stream"]):
        raise UsageError("no TCP or UDP stream to draw",
                         hint="`pcapstats throughput` says what the capture holds")
    rows = np.arange(len(table["stream"]))
    if len(rows) > MAX_STREAMS:    # the busiest, in the table's order
        rows = np.sort(np.argsort(-table["bytes"], kind="stable")[:MAX_STREAMS])
    several = "capture" in table and len(set(result.captures)) > 1
    named = dict(zip(map(name_text, result.captures), result.names))   # t1/run.pcap, t2/run
    names = [("" if not several else named[table["capture"][i]] + ": ")
             + f"{table['proto'][i]} {table['stream'][i]}\n{table['address_a'][i]}:"
             f"{table['port_a'][i]} → {table['address_b'][i]}:{table['port_b'][i]}"
             for i in rows]
    interval = f"{result.interval_s:g} s"
    fig, axes = plots.figure(title or f"Throughput: {plots.captures_title(result.names)}",
                             "Rate", "", size=(8.0, 1.8 + 0.55 * max(len(rows), 1)),
                             subtitle="frames at this capture point, headers included; each "
                                      f"stream's average and its busiest {interval} interval",
                             ax=ax, over_figure=True)
    y = np.arange(len(rows))
    height = 0.38
    largest = 1.0
    for k, (direction, arrow, colour) in enumerate(_DIRECTIONS):
        at = y + (k - 0.5) * height
        avg = np.nan_to_num(table[f"avg_stream_bps_{direction}"][rows].astype(float))
        peak = np.nan_to_num(table[f"peak_bps_{direction}"][rows].astype(float))
        axes.barh(at, peak, height=height, color=colour, alpha=0.3, lw=0)
        axes.barh(at, avg, height=height * 0.55, color=colour, lw=0)
        largest = max(largest, float(peak.max(initial=0)), float(avg.max(initial=0)))
    axes.set_yticks(y, names, fontsize="small")
    axes.set_ylim(len(rows) - 0.5, -0.5)          # the first stream on top
    axes.set_xlim(0, largest * 1.08)
    plots.rate_axis(axes, largest, "bit/s", "Rate", axis="x")
    axes.grid(True, axis="x", alpha=0.3)
    axes.grid(False, axis="y")
    extra = [Patch(color=colour, alpha=alpha, lw=0, label=f"{arrow} {what}")
             for _, arrow, colour in _DIRECTIONS
             for alpha, what in ((1.0, "stream avg (Wireshark's Bits/s)"),
                                 (0.3, f"peak: the busiest {interval} interval"))]
    plots.legend(axes, extra=extra)
    left = len(table["stream"]) - len(rows)
    if left:
        plots.note(axes, f"{left} more streams not drawn: these are the {len(rows)} with the "
                         "most bytes (`pcapstats throughput` lists them all).")
    return plots.drawn(fig, ax)
