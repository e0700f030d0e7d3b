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
from ..capture import FILE_FACTS, Capture
from ..clock import ClockCheck, touched
from ..errors import NothingToReport
from ..ingest import Kept, read_kept
from ..reader import as_capture
from ..render import Shown
from ..results import Result, shown
from ..schema import TIME_COLUMN, Column, TableSpec
from ..streams import DIRECTIONS, choose_stream, require_tcp
from .tcp_analysis import PACKETS
from .tcpseq import COUNTS as COUNTED, FLAG_BITS, AnalysedWindows, analysed

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
    TIME_COLUMN,
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


# the columns of packet_analysis listed (the counts are the analyser's own)
_READS = ("tcp_stream", "direction", "tcp_len", "frame_number", "frame_time_ns", "tcp_seq",
          "tcp_nxtseq", "tcp_ack", "duplicate_ack_num", RESENT, *FLAGS)


@analysis(reads=False)
def retrans(capture, *, stream: int | None = None) -> Retrans:
    """Counts and events of every TCP stream (of one with ``stream``), from one pass of the
    sequence analyser: over a path's windows as they are read (nothing of the file kept but
    the flagged packets' rows and the counts), or over a Capture given."""
    if isinstance(capture, Capture):
        if stream is not None:
            choose_stream(capture, stream)   # one clear error for a UDP or missing stream
        require_tcp(capture)
        pass_ = _pass(stream)
        pass_.add(capture)
        pass_.done(len(capture))
        if not len(pass_.counts):            # TCP headers only inside ICMP errors
            raise NothingToReport(f"no TCP stream in {capture.path} ({capture.holds()})",
                                  hint="`pcapstats throughput` lists the streams there are")
        return _result(pass_, capture.path, capture.clock)
    pass_, probe = read_kept(capture, [_pass(stream), Kept(FILE_FACTS)])
    if not len(pass_.counts):                # no such TCP stream, or none: the error the
        return retrans(as_capture(capture), stream=stream)     # whole table gives
    return _result(pass_, str(capture), probe.clock)      # (the file's clock, read to its end)


def _pass(stream: int | None) -> AnalysedWindows:
    """The analyser's pass, keeping the events of each window (the flagged packets alone)."""
    return AnalysedWindows(_window_events, stream=stream)


def _window_events(window, src: dict, t0: int | None) -> dict[str, np.ndarray]:
    """The events of one window: its analysed packets that are re-sent or carry a flag."""
    flagged = np.flatnonzero(src["resent"] | (src["aflags"] & _ANY_FLAG))
    return _events(analysed(src, _READS, flagged), t0)


_ANY_FLAG = sum(FLAG_BITS.values())


def _result(pass_: AnalysedWindows, path, clock: ClockCheck) -> Retrans:
    """The tables of the analyser's pass; on a broken ``clock`` (the file's), the warning's
    words: re-sent counts come from sequence numbers, Wireshark's flags from the times."""
    counts = pass_.counts
    table = {"stream": counts[:, 0], "direction": np.asarray(DIRECTIONS, object)[counts[:, 1]],
             **{name: counts[:, 2 + k] for k, name in enumerate(COUNTED)}}
    events = {name: np.concatenate([part[name] for part in pass_.parts])
              for name in EVENTS.names}
    result = Retrans({"counts": {name: table[name] for name in COUNTS.names},
                      "events": events}, capture=path)
    if len(clock.pieces()) > 1:
        result.clock_touched = touched("retrans", as_tshark=["Wireshark's flags"],
                                       counts="re-sent counts (sequence numbers)")
    return result


def _events(a: dict, t0: int | None) -> dict[str, np.ndarray]:
    flags = np.stack([a[flag] for flag in (RESENT, *FLAGS)], axis=1).astype(bool)
    rows = np.flatnonzero(flags.any(axis=1))
    names = np.array((RESENT, *FLAGS), dtype=object)
    events = np.array(["+".join(names[f]) for f in flags[rows]], dtype=object)
    return {
        "frame_number": a["frame_number"][rows],
        "time_s": (a["frame_time_ns"][rows] - (t0 or 0)) / 1e9,
        "stream": a["tcp_stream"][rows],
        "direction": np.asarray(DIRECTIONS, object)[a["direction"][rows]],
        "events": events, "tcp_seq": a["tcp_seq"][rows], "tcp_nxtseq": a["tcp_nxtseq"][rows],
        "tcp_ack": a["tcp_ack"][rows], "tcp_len": a["tcp_len"][rows],
        "duplicate_ack_num": a["duplicate_ack_num"][rows],
    }
