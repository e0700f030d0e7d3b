"""How streams are named to people: a stream's endpoints and what the lab ran on it (its
sidecar), and a list of stream indices as ranges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..addresses import endpoint
from ..sidecar import stream_labels
from .summary import stream_summary

if TYPE_CHECKING:
    from ..capture import Capture


def stream_names(cap: "Capture") -> dict[tuple[str, int], str]:
    """(proto, stream) -> how a figure names it: "10.0.0.1:5000 → 10.0.0.2:80", plus what the
    lab ran on it when a sidecar says ("reno, pair 1, simpleperf").  Cached on the capture."""
    if "stream_names" not in cap.derived:
        s, labels = stream_summary(cap), stream_labels(cap.path)
        names = {}
        for i in range(len(s["stream"])):
            key = (s["proto"][i], int(s["stream"][i]))
            names[key] = (f"{endpoint(s['address_a'][i], s['port_a'][i])} → "
                          f"{endpoint(s['address_b'][i], s['port_b'][i])}"
                          + (f" ({labels[key]})" if key in labels else ""))
        cap.derived["stream_names"] = names
    return cap.derived["stream_names"]


def id_ranges(ids) -> str:
    """[0, 1, 2, 5] -> '0-2, 5' (for messages that list stream indices)."""
    values = sorted({int(v) for v in ids})
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out) or "none"

