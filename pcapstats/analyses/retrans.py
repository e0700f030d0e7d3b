"""Re-sent segments and the other trouble tshark's sequence analysis flags, counted and listed.

Built on :mod:`pcapstats.analyses.tcp_analysis` (read its docstring for every definition):
nothing is re-derived here.  Two kinds of count stand side by side, and the table says which:

- ``resent``: every segment that carries sequence space its direction had already sent,
  whatever Wireshark calls it.  On a capture taken at the sender it equals the sender kernel's
  TCP_INFO ``total_retrans`` (tests/analyses check it on lab runs): the number a loss study
  wants;
- Wireshark 4.0's ``tcp.analysis.*`` flags, counted as tshark counts them
  (``tshark -Y tcp.analysis.retransmission`` gives ``retransmission``, which includes fast and
  spurious ones).  By Wireshark's rules a re-send that comes within an initial RTT of the
  highest segment is ``out_of_order``, not a retransmission, so ``retransmission`` alone
  undercounts re-sends, often by half.

A step of the capture's clock changes no ``resent`` count (sequence numbers alone decide it);
Wireshark's flags read the times, so across a step they are what tshark says of the stepped
capture (a re-send just after a step back is a retransmission, not out of order), and the
capture's clock warning says so.

Tables: ``counts``, one row per stream and direction that has packets; ``events``, one row per
packet that is re-sent or carries a flag: frame number, time, stream, direction, the flags
joined by "+" (RESENT first, then FLAGS' order), relative seq / next seq / ack, payload bytes,
and the duplicate-ACK number.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue
from ..batch import analysis
from ..capture import Capture
from ..clock import touched
from ..errors import NothingToReport
from ..render import Shown
from ..results import Result, joined, shown
from ..schema import Column, TableSpec
from ..streams import DIRECTIONS, choose_stream, require_tcp
from .tcp_analysis import PACKETS, STREAM_NEEDS, packet_analysis

# tshark's tcp.analysis flags, counted and listed, in this order (tcp_analysis' columns)
FLAGS = ("retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
         "lost_segment", "ack_lost_segment", "duplicate_ack", "zero_window",
         "zero_window_probe", "zero_window_probe_ack", "window_full", "keep_alive",
         "keep_alive_ack", "window_update", "reused_ports")
RESENT = "resent"
_C = Column
_TCP = {c.name: c for c in PACKETS.columns}
COUNTS = TableSpec("counts", "one row per TCP stream and direction that has packets", (
    _TCP["stream"], _TCP["direction"],
    _C("packets", "int64", "TCP packets in this direction", "packets"),
    _C("payload_bytes", "int64", "payload bytes in this direction (retransmissions included)",
       "bytes"),
    catalogue.column(RESENT, doc="in this direction, whatever Wireshark calls each",
                     optional=False),
    *(_C(flag, "int64", f"packets tshark flags tcp.analysis.{flag} (Wireshark's rule)",
         "packets", wireshark=f"tcp.analysis.{flag}") for flag in FLAGS),
))
EVENTS = TableSpec("events", "one row per packet carrying a flag of the counts, in frame order", (
    _TCP["frame_number"],
    _C("time_s", "float64", "seconds since the capture's first packet", "s"),
    _TCP["stream"], _TCP["direction"],
    _C("events", "str", "'resent' if it re-sends sequence space, then tshark's flags, joined "
       "by '+'"),
    _TCP["tcp_seq"], _TCP["tcp_nxtseq"], _TCP["tcp_ack"], _TCP["tcp_len"],
    _TCP["duplicate_ack_num"],
))


class Retrans(Result):
    """Counts per stream and direction (``counts``) and the flagged packets (``events``)."""
    analysis = "retrans"
    specs = (COUNTS, EVENTS)
    view = {"counts": (Shown("stream", "stream"), Shown("direction", "direction"),
                       Shown("packets", "packets"), shown(RESENT),
                       Shown("retrans*", "retransmission"), Shown("fast*", "fast_retransmission"),
                       Shown("spurious*", "spurious_retransmission"),
                       Shown("out-of-ord*", "out_of_order"), Shown("lost*", "lost_segment"),
                       Shown("dup-ACK*", "duplicate_ack"))}
    legend = {"counts": "re-sent: every segment re-sending sequence space (what the sender's "
                        "kernel counts).  * Wireshark's tcp.analysis flags: by its rules many "
                        "re-sends are out-of-order, not retransmissions.  --all: every flag."}


# the columns of packet_analysis counted and listed
_READS = ("tcp_stream", "direction", "tcp_len", "frame_number", "frame_time_ns", "tcp_seq",
          "tcp_nxtseq", "tcp_ack", "duplicate_ack_num", RESENT, *FLAGS)


def _join(parts: list[Retrans]) -> Retrans:
    return joined(parts, {"counts": ("stream", "direction"), "events": ("frame_number",)})


@analysis(needs=STREAM_NEEDS, by_stream=_join)
def retrans(capture: Capture, *, stream: int | None = None) -> Retrans:
    """Counts and events of every TCP stream (of one with ``stream``)."""
    if stream is not None:
        choose_stream(capture, stream)   # one clear error for a UDP or missing stream
    require_tcp(capture)
    a = packet_analysis(capture, stream, columns=_READS)
    counts = _counts(a)
    if not len(counts["stream"]):        # TCP headers only inside ICMP errors
        raise NothingToReport(f"no TCP stream in {capture.path} ({capture.holds()})",
                              hint="`pcapstats throughput` lists the streams there are")
    result = Retrans({"counts": counts, "events": _events(a, capture)}, capture=capture.path)
    if len(capture.clock.pieces()) > 1:
        result.clock_touched = touched("retrans", as_tshark=["Wireshark's flags"],
                                       counts="re-sent counts (sequence numbers)")
    return result


def _counts(a: dict) -> dict[str, np.ndarray]:
    """Per (stream, direction): packets, payload, re-sent segments and each flag's packets."""
    key = a["tcp_stream"].astype(np.int64) * 2 + a["direction"]
    keys, group = np.unique(key, return_inverse=True)
    out = {"stream": keys // 2, "direction": np.asarray(DIRECTIONS, object)[keys % 2],
           "packets": np.bincount(group, minlength=len(keys)),
           "payload_bytes": np.bincount(group, weights=a["tcp_len"], minlength=len(keys))
           .astype(np.int64)}
    for flag in (RESENT, *FLAGS):
        out[flag] = np.bincount(group, weights=a[flag].astype(np.int64),
                                minlength=len(keys)).astype(np.int64)
    return out


def _events(a: dict, cap: Capture) -> dict[str, np.ndarray]:
    flags = np.stack([a[flag] for flag in (RESENT, *FLAGS)], axis=1).astype(bool)
    rows = np.flatnonzero(flags.any(axis=1))
    names = np.array((RESENT, *FLAGS), dtype=object)
    events = np.array(["+".join(names[f]) for f in flags[rows]], dtype=object)
    t0 = cap.first_time_ns or 0
    return {
        "frame_number": a["frame_number"][rows],
        "time_s": (a["frame_time_ns"][rows] - t0) / 1e9,
        "stream": a["tcp_stream"][rows],
        "direction": np.asarray(DIRECTIONS, object)[a["direction"][rows]],
        "events": events, "tcp_seq": a["tcp_seq"][rows], "tcp_nxtseq": a["tcp_nxtseq"][rows],
        "tcp_ack": a["tcp_ack"][rows], "tcp_len": a["tcp_len"][rows],
        "duplicate_ack_num": a["duplicate_ack_num"][rows],
    }
