"""Retransmissions and the other trouble tshark's sequence analysis flags, counted and listed.

Built on :mod:`pcapstats.analyses.tcp_analysis` (every flag is Wireshark 4.0's
``tcp.analysis.*``, read its docstring for the definitions): nothing is re-derived here.

- table ``counts``: one row per stream and direction that has packets, with the number of
  packets carrying each flag of RETRANS_EVENTS.  ``retransmission`` is tshark's field, so it
  counts fast and spurious retransmissions too (``tshark -Y tcp.analysis.retransmission``
  gives the same number).
- table ``events``: one row per packet carrying at least one of those flags: frame number,
  time, stream, direction, the flags joined by "+" (in RETRANS_EVENTS order), relative seq /
  next seq / ack, payload bytes, and the duplicate-ACK number.
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..results import Result
from ..schema import Column, TableSpec
from ..streams import DIRECTIONS, choose_stream
from .tcp_analysis import PACKETS, packet_analysis

# the tcp_analysis flags counted and listed, in this order
RETRANS_EVENTS = ("retransmission", "fast_retransmission", "spurious_retransmission",
                  "out_of_order", "lost_segment", "ack_lost_segment", "duplicate_ack",
                  "zero_window", "window_full")
_C = Column
_TCP = {c.name: c for c in PACKETS.columns}
COUNTS = TableSpec("counts", "one row per TCP stream and direction that has packets", (
    _TCP["stream"], _TCP["direction"],
    _C("packets", "int64", "TCP packets in this direction", "packets"),
    _C("payload_bytes", "int64", "payload bytes in this direction (retransmissions included)",
       "bytes"),
    *(_C(flag, "int64", f"packets flagged tcp.analysis.{flag}", "packets",
         wireshark=f"tcp.analysis.{flag}") for flag in RETRANS_EVENTS),
))
EVENTS = TableSpec("events", "one row per packet carrying a flag of the counts, in frame order", (
    _TCP["frame_number"],
    _C("time_s", "float64", "seconds since the capture's first packet", "s"),
    _TCP["stream"], _TCP["direction"],
    _C("events", "str", "the packet's flags, joined by '+'"),
    _TCP["tcp_seq"], _TCP["tcp_nxtseq"], _TCP["tcp_ack"], _TCP["tcp_len"],
    _TCP["duplicate_ack_num"],
))


class Retrans(Result):
    """Counts per stream and direction (``counts``) and the flagged packets (``events``)."""
    analysis = "retrans"
    specs = (COUNTS, EVENTS)


@analysis()
def retrans(capture: Capture, *, stream: int | None = None) -> Retrans:
    """Counts and events of every TCP stream (of one with ``stream``)."""
    if stream is not None:
        choose_stream(capture, stream)   # one clear error for a UDP or missing stream
    a = packet_analysis(capture, stream)
    return Retrans({"counts": _counts(a), "events": _events(a, capture)}, capture=capture.path)


def _counts(a: dict) -> dict[str, np.ndarray]:
    key = a["tcp_stream"].astype(np.int64) * 2 + a["direction"]
    keys, group = np.unique(key, return_inverse=True)
    out = {"stream": keys // 2, "direction": np.asarray(DIRECTIONS, object)[keys % 2],
           "packets": np.bincount(group, minlength=len(keys)),
           "payload_bytes": np.bincount(group, weights=a["tcp_len"], minlength=len(keys))
           .astype(np.int64)}
    for flag in RETRANS_EVENTS:
        out[flag] = np.bincount(group, weights=a[flag].astype(np.int64),
                                minlength=len(keys)).astype(np.int64)
    return out


def _events(a: dict, cap: Capture) -> dict[str, np.ndarray]:
    flags = np.stack([a[flag] for flag in RETRANS_EVENTS], axis=1).astype(bool)
    rows = np.flatnonzero(flags.any(axis=1))
    names = np.array(RETRANS_EVENTS, dtype=object)
    events = np.array(["+".join(names[f]) for f in flags[rows]], dtype=object)
    t0 = cap.column("frame_time_ns")[0] if len(cap) else 0
    return {
        "frame_number": a["frame_number"][rows],
        "time_s": (a["frame_time_ns"][rows] - t0) / 1e9,
        "stream": a["tcp_stream"][rows],
        "direction": np.asarray(DIRECTIONS, object)[a["direction"][rows]],
        "events": events, "tcp_seq": a["tcp_seq"][rows], "tcp_nxtseq": a["tcp_nxtseq"][rows],
        "tcp_ack": a["tcp_ack"][rows], "tcp_len": a["tcp_len"][rows],
        "duplicate_ack_num": a["duplicate_ack_num"][rows],
    }
