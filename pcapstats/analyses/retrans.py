"""Retransmissions and the other trouble tshark's sequence analysis flags, counted and listed.

Built on :mod:`pcapstats.analyses.tcp_analysis` (every flag is Wireshark 4.0's
``tcp.analysis.*``, read its docstring for the definitions): nothing is re-derived here.

- :func:`retrans_counts`: one row per stream and direction (direction 0 sent the stream's first
  packet) that has packets, with the number of packets carrying each flag of RETRANS_EVENTS.
  ``retransmission`` is tshark's field, so it counts fast and spurious retransmissions too
  (``tshark -Y tcp.analysis.retransmission`` gives the same number).
- :func:`retrans_events`: one row per packet carrying at least one of those flags: frame
  number, time, stream, direction, the flags joined by "+" (in RETRANS_EVENTS order), relative
  seq / next seq / ack, payload bytes, and the duplicate-ACK number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..capture import Capture
from .tcp_analysis import tcp_analysis_columns
from .tcp_flow import choose_stream

if TYPE_CHECKING:
    import pandas as pd

# (flag column of tcp_analysis, count column name)
RETRANS_EVENTS = (
    ("retransmission", "retransmissions"), ("fast_retransmission", "fast_retransmissions"),
    ("spurious_retransmission", "spurious_retransmissions"), ("out_of_order", "out_of_order"),
    ("lost_segment", "lost_segments"), ("ack_lost_segment", "acked_unseen"),
    ("duplicate_ack", "duplicate_acks"), ("zero_window", "zero_windows"),
    ("window_full", "window_full"),
)
RETRANS_COUNT_COLUMNS = (
    ("tcp_stream", "stream index, as Wireshark numbers it"),
    ("direction", "0: sent by the source of the stream's first packet, 1: the other side"),
    ("packets", "TCP packets in this direction"),
    ("data_bytes", "payload bytes in this direction (retransmissions included)"),
    *((count, f"packets with tcp.analysis.{flag}") for flag, count in RETRANS_EVENTS),
)
RETRANS_EVENT_COLUMNS = (
    ("frame_number", "packet number in the file"),
    ("time_s", "seconds since the capture's first packet"),
    ("tcp_stream", "stream index"), ("direction", "0 or 1, as in the counts"),
    ("events", "the packet's flags, joined by '+'"),
    ("tcp_seq", "relative sequence number"), ("tcp_nxtseq", "relative next sequence number"),
    ("tcp_ack", "relative acknowledgement number"), ("tcp_len", "payload bytes"),
    ("duplicate_ack_num", "duplicate ACK number (duplicate ACKs only)"),
)


def _table(cap: Capture, stream: int | None) -> dict[str, np.ndarray]:
    if stream is not None:
        choose_stream(cap, stream)   # one clear error for a UDP or missing stream
    return tcp_analysis_columns(cap, stream=stream)


def retrans_counts(cap: Capture, *, stream: int | None = None) -> dict[str, np.ndarray]:
    """Counts per stream and direction (columns: RETRANS_COUNT_COLUMNS), as numpy columns."""
    a = _table(cap, stream)
    key = a["tcp_stream"].astype(np.int64) * 2 + a["direction"]
    keys, group = np.unique(key, return_inverse=True)
    out = {"tcp_stream": keys // 2, "direction": keys % 2,
           "packets": np.bincount(group, minlength=len(keys)),
           "data_bytes": np.bincount(group, weights=a["tcp_len"], minlength=len(keys))
           .astype(np.int64)}
    for flag, count in RETRANS_EVENTS:
        out[count] = np.bincount(group, weights=a[flag].astype(np.int64),
                                 minlength=len(keys)).astype(np.int64)
    return out


def retrans_events(cap: Capture, *, stream: int | None = None) -> dict[str, np.ndarray]:
    """The flagged packets (columns: RETRANS_EVENT_COLUMNS), in frame order."""
    a = _table(cap, stream)
    flags = np.stack([a[flag] for flag, _ in RETRANS_EVENTS], axis=1).astype(bool)
    rows = np.flatnonzero(flags.any(axis=1))
    names = np.array([flag for flag, _ in RETRANS_EVENTS], dtype=object)
    events = np.array(["+".join(names[f]) for f in flags[rows]], dtype=object)
    t0 = cap.column("frame_time_ns")[0] if len(cap) else 0
    return {
        "frame_number": a["frame_number"][rows],
        "time_s": (a["frame_time_ns"][rows] - t0) / 1e9,
        "tcp_stream": a["tcp_stream"][rows], "direction": a["direction"][rows],
        "events": events, "tcp_seq": a["tcp_seq"][rows], "tcp_nxtseq": a["tcp_nxtseq"][rows],
        "tcp_ack": a["tcp_ack"][rows], "tcp_len": a["tcp_len"][rows],
        "duplicate_ack_num": a["duplicate_ack_num"][rows],
    }


class Retrans(NamedTuple):
    counts: "pd.DataFrame"   # RETRANS_COUNT_COLUMNS
    events: "pd.DataFrame"   # RETRANS_EVENT_COLUMNS


def retrans(cap: Capture, *, stream: int | None = None) -> Retrans:
    """Counts and events as pandas DataFrames: ``r = retrans(cap); r.counts, r.events``."""
    import pandas as pd
    return Retrans(pd.DataFrame(retrans_counts(cap, stream=stream)),
                   pd.DataFrame(retrans_events(cap, stream=stream)))
