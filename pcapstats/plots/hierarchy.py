"""The protocol hierarchy figure: each protocol's share of the packets and of the bytes, as bars
(a hierarchy result's ``protocols`` table; nothing computed here).

A row a protocol, in the table's order (the tree in pre-order), its name indented by its depth
as in Wireshark's dialog; the dark bar is its share of the capture's bytes, the light bar
behind it its share of the packets.  The root (every packet) is said in the subtitle, not
drawn.  At most MAX_ROWS rows: a capture with more protocols shows the busiest subtrees'
(a row kept keeps the rows above it), and a note says how many were left out.
"""

from __future__ import annotations

import numpy as np

from .. import plots
from ..errors import UsageError

MAX_ROWS = 40
_BYTES, _PACKETS = "C0", "C0"


def hierarchy_figure(result, *, ax=None, title: str | None = None):
    from matplotlib.patches import Patch
    table = result.table("protocols")
    if len(table["path"]) < 2:
        raise UsageError("no protocol to draw",
                         hint="`pcapstats hierarchy` says what the capture holds")
    rows = _rows(table)
    depth = table["depth"][rows]
    labels = ["  " * (int(d) - 1) + str(p) for d, p in zip(depth, table["protocol"][rows])]
    packets, size = int(table["packets"][0]), int(table["bytes"][0])
    subtitle = (f"{packets} packets, {_bytes(size)}"
                + (f" over {result.span_s:.3g} s" if result.span_s > 0 else "")
                + "; each protocol's share of them")
    fig, axes = plots.figure(title or f"Protocol hierarchy: {plots.captures_title(result.names)}",
                             "Share of the capture (%)", "",
                             size=(8.0, 1.9 + 0.32 * len(rows)), subtitle=subtitle, ax=ax,
                             over_figure=True)
    y = np.arange(len(rows))
    axes.barh(y, 100 * table["packets_share"][rows], height=0.8, color=_PACKETS, alpha=0.25,
              lw=0)
    axes.barh(y, 100 * table["bytes_share"][rows], height=0.45, color=_BYTES, lw=0)
    for k, i in enumerate(rows):
        axes.text(100 * max(table["bytes_share"][i], table["packets_share"][i]) + 1, k,
                  f"{_bytes(int(table['bytes'][i]))}, {_packets(int(table['packets'][i]))}",
                  va="center", fontsize="x-small", color="0.3")
    # the names left-aligned, so that their indent draws the tree (monospace: a space as wide
    # as a letter); the tick labels' pad makes room for the longest
    size_pt = 9.0
    axes.set_yticks(y, labels, fontsize=size_pt, family="monospace", ha="left")
    axes.tick_params(axis="y", pad=0.62 * size_pt * max(map(len, labels)) + 4)
    axes.set_ylim(len(rows) - 0.5, -0.5)          # the tree from the top
    axes.set_xlim(0, 135)                          # room for the counts after a full bar
    axes.set_xticks(range(0, 101, 20))
    axes.grid(True, axis="x", alpha=0.3)
    axes.grid(False, axis="y")
    legend = [Patch(color=_BYTES, lw=0, label="share of the bytes (frame bytes)"),
              Patch(color=_PACKETS, alpha=0.25, lw=0, label="share of the packets")]
    plots.key(axes, legend)
    left_out = len(table["path"]) - 1 - len(rows)
    if left_out:
        plots.note(axes, f"{left_out} protocol rows with the fewest bytes left out")
    return plots.drawn(fig, ax)


def _rows(table) -> np.ndarray:
    """The rows drawn, in table order, the root left out: all of them, or the MAX_ROWS with
    the most bytes, each with the rows above it (so the tree stays a tree)."""
    n = len(table["path"])
    rows = np.arange(1, n)
    if len(rows) <= MAX_ROWS:
        return rows
    parent = {}
    by_path = {p: i for i, p in enumerate(table["path"])}
    for i in rows.tolist():
        path = str(table["path"][i])
        parent[i] = by_path.get(path.rsplit("/", 1)[0], 0) if "/" in path else 0
    keep: set[int] = set()
    for i in sorted(rows.tolist(), key=lambda i: -int(table["bytes"][i])):
        chain = []
        while i and i not in keep:
            chain.append(i)
            i = parent[i]
        if len(keep) + len(chain) > MAX_ROWS:
            break
        keep.update(chain)
    return np.array(sorted(keep), np.int64)


def _packets(n: int) -> str:
    return f"{n} packet{'s' * (n != 1)}"


def _bytes(n: int) -> str:
    """Frame bytes for people, 1000-based as the tables count them: three significant digits,
    or four whole ones (1741 B, 7966 kB), never an exponent."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= 10 * scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 999.5 else f"{value:.3g} {unit}"
    return f"{n} B"
