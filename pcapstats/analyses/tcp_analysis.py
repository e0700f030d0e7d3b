"""TCP sequence analysis: Wireshark 4.0's ``tcp.analysis.*`` verdicts and numbers, per TCP packet.

One row per TCP packet (ICMP errors quoting a TCP header are left out), in frame order, with
columns named after the tshark fields they equal (see TCP_ANALYSIS_COLUMNS).  The definitions
are Wireshark 4.0's (epan/dissectors/packet-tcp.c: tcp_analyze_sequence_number and the code
around its call in dissect_tcp), as tshark computes them in one pass with its default
preferences (``tcp.analyze_sequence_numbers``, ``tcp.relative_sequence_numbers``, bytes in flight
tracked from the segments seen, not from sequence numbers; no reassembly of IP fragments).
What those definitions are, in short (each flag is about the packet's own direction, "the
peer" is the other one):

- **lost_segment** ("previous segment not captured"): the segment starts after the highest
  sequence number seen so far (not on RST).  **ack_lost_segment** ("ACKed unseen segment"):
  it acknowledges beyond the peer's highest contiguous sequence number (once per hole).
- **keep_alive**: 0 or 1 byte starting one byte before the next expected sequence number (not
  SYN/FIN/RST); Linux's zero-window probes look like this too.  Checked before the
  retransmission rules, and a keep-alive is never a retransmission.
- **retransmission** is tshark's field: present for generic, fast and spurious retransmissions
  alike.  A segment with data (or SYN/FIN) that does not advance the sequence number is, in
  this order: **spurious_retransmission** if all of it lies below the peer's last ACK;
  **fast_retransmission** if the peer sent at least two duplicate ACKs for exactly its start,
  the last of them under 20 ms before; **out_of_order** if it came less than the initial RTT
  (3 ms when unknown) after the segment that set the highest sequence number and does not end
  exactly there; a generic retransmission otherwise.  A segment of more than one byte starting
  one byte before the next expected number is not counted as "not advancing" (it follows a
  zero-window probe).  On a receiver-side capture the retransmission of a segment lost on the
  way is often ``out_of_order`` too: that is tshark's definition, not real reordering.
- **duplicate_ack**: no data, same window (not 0), same seq and ack as the previous packet of
  its direction, not SYN/FIN/RST; ``duplicate_ack_num`` counts them since the ack last moved,
  ``duplicate_ack_frame`` is the frame that last moved it.  **window_update**: the same but with
  a new window (not 0).  **keep_alive_ack** / **zero_window_probe_ack**: a duplicate ACK (the
  latter with window 0) answering a keep-alive / zero-window probe.
- **zero_window**: window 0, not SYN/FIN/RST.  **zero_window_probe**: exactly 1 byte at the next
  expected sequence number while the peer's window is 0.  **window_full**: the segment ends
  exactly at the peer's last ACK + its window (scaled unless the peer's window scale is unknown,
  or it has not yet sent an ACK after its SYN).
- **bytes_in_flight**: after this segment, the span of sequence space covered by its direction's
  unacknowledged segments (at most 10000 are remembered), less the bytes in the first three SACK
  blocks of the peer's last packet, minus 1 on SYN/FIN; only on segments with data, and not
  after a lost segment until the peer ACKs again.  **push_bytes_sent**: bytes sent since the
  last PSH (shown where bytes_in_flight is).
- **acks_frame** / **ack_rtt_ns**: this packet's ACK number equals the end of an unacknowledged
  segment of the peer: the oldest such segment's frame and the time since it was sent.
  Wireshark applies no Karn rule: after a retransmission this is timed from the *first*
  transmission, so it includes the retransmission timeout.
- **initial_rtt_ns**: from the last SYN to the first ACK without SYN (tshark's iRTT).
- **rto_ns** / **rto_frame**: on a generic retransmission, time since the oldest unacknowledged
  segment of its direction (or since the highest one, when none is remembered).
- Relative numbers: ``tcp_seq`` = seq - the direction's base (the SYN's seq, else the first
  seq - 1, or the peer's first ACK - 1 when that came first); ``tcp_ack`` relative when the ACK
  flag is set, else as on the wire; ``tcp_nxtseq`` = tcp_seq + tcp_len (+1 on SYN/FIN).  IP
  fragments are not analysed: their numbers stay raw, and they have no nxtseq.
- ``tcp_window_size``: the window field scaled by the direction's window-scale shift, except on
  SYNs.  ``window_size_scalefactor``: 2^shift, or -1 (unknown: the SYNs were not captured;
  the window is then left unscaled) or -2 (no scaling: a SYN came without the option).

pcapstats' own additions (no tshark field):

- **resent**: the segment carries sequence space its direction had already sent (data, SYN or
  FIN starting below the highest sequence number sent before it), whatever Wireshark's rules
  call it: a retransmission, a fast or spurious one, ``out_of_order``, a tail-loss probe.  On a
  capture taken at the sender this counts what the sender's kernel counts as re-sent segments
  (TCP_INFO ``total_retrans``); tshark's ``retransmission`` flag does not: within one initial
  RTT of the highest segment its rules call a re-send ``out_of_order``.

- **ack_rtt_karn_ns**: ``ack_rtt_ns`` with Karn's rule: empty when any segment this ACK takes off
  the peer's unacknowledged list was *re-sent*, i.e. started below the highest sequence number
  its direction had already sent (retransmissions, spurious and fast ones, out-of-order
  segments, keep-alives with data).  The samples left time one transmission each.
- **ts_rtt_ns** (TCP timestamps, RFC 7323): on a packet with the ACK flag whose TSecr echoes a
  TSval, the time since the peer first sent that TSval, on the first packet of its direction
  that echoes it (later echoes of the same value give none).  It includes the receiver's
  delayed-ACK wait and the gap between the first and the acknowledged segment of one TSval
  tick, but never a retransmission timeout (a retransmission carries a new TSval).

Deliberate differences from tshark (documented in tests/analyses/test_tcp_analysis.py too): ICMP errors
quoting TCP headers are not rows and do not touch the streams' state (tshark lets them reset the
SACK memory of their direction); packets whose TCP header length is below 20 bytes are not
analysed; ``reused_ports`` is reported only where a SYN/ACK changes its direction's base, not
on the SYN that starts a new stream on reused ports.

The logic is sequential per stream and direction, in the TCP base the other TCP analyses
share (``tcpseq/``): the compiled ``_tcpseq`` extension runs it (tcpseq/kernel_c.py over
tcpseq/_tcpseq.c); without a compiler, tcpseq/kernel_python.py gives the same answers, slowly
(about 1 s per 100k packets); tcpseq/contract.py is what both implement.  This module is the
analysis itself: the ``packets`` table and what its columns mean.
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..results import Result, joined
from ..schema import DIRECTION_COLUMN, FRAME_NUMBER_COLUMN, STREAM_COLUMN, Column, TableSpec
from ..streams import DIRECTIONS
from .tcpseq import STREAM_NEEDS, packet_analysis

_C = Column
PACKETS = TableSpec("packets", "one row per TCP packet (ICMP errors quoting a TCP header left "
                    "out), in frame order", (
    FRAME_NUMBER_COLUMN,
    _C("frame_time_ns", "int64", "capture time, integer ns since the epoch", unit="ns"),
    STREAM_COLUMN,
    DIRECTION_COLUMN,
    _C("tcp_len", "int64", "payload bytes", unit="bytes", wireshark="tcp.len"),
    _C("tcp_seq", "int64", "relative sequence number", wireshark="tcp.seq"),
    _C("tcp_ack", "int64",
       "relative acknowledgement number (raw when the ACK flag is clear)", wireshark="tcp.ack"),
    _C("tcp_nxtseq", "int64",
       "relative sequence number after this segment (SYN/FIN count 1)",
       wireshark="tcp.nxtseq", optional=True),
    _C("tcp_window_size", "int64",
       "receive window after window scaling, bytes", unit="bytes", wireshark="tcp.window_size"),
    _C("window_size_scalefactor", "int64",
       "2^shift; -1 unknown (SYN not captured), -2 no scaling; empty on SYNs",
       wireshark="tcp.window_size_scalefactor", optional=True),
    _C("retransmission", "bool",
       "any retransmission: generic, fast or spurious (tshark's field)",
       wireshark="tcp.analysis.retransmission"),
    _C("fast_retransmission", "bool",
       "fast retransmission", wireshark="tcp.analysis.fast_retransmission"),
    _C("spurious_retransmission", "bool",
       "retransmission of data the peer had acknowledged",
       wireshark="tcp.analysis.spurious_retransmission"),
    _C("out_of_order", "bool", "out-of-order segment", wireshark="tcp.analysis.out_of_order"),
    _C("lost_segment", "bool",
       "previous segment not captured", wireshark="tcp.analysis.lost_segment"),
    _C("ack_lost_segment", "bool",
       "ACKs a segment not captured", wireshark="tcp.analysis.ack_lost_segment"),
    _C("duplicate_ack", "bool", "duplicate ACK", wireshark="tcp.analysis.duplicate_ack"),
    _C("duplicate_ack_num", "int64",
       "duplicate ACKs so far (1, 2, ...)",
       wireshark="tcp.analysis.duplicate_ack_num", optional=True),
    _C("duplicate_ack_frame", "int64",
       "frame of the original ACK", wireshark="tcp.analysis.duplicate_ack_frame", optional=True),
    _C("zero_window", "bool", "window 0", wireshark="tcp.analysis.zero_window"),
    _C("zero_window_probe", "bool",
       "1-byte probe of a zero window", wireshark="tcp.analysis.zero_window_probe"),
    _C("zero_window_probe_ack", "bool",
       "ACK of a zero-window probe", wireshark="tcp.analysis.zero_window_probe_ack"),
    _C("window_full", "bool",
       "segment fills the peer's window", wireshark="tcp.analysis.window_full"),
    _C("keep_alive", "bool", "keep-alive", wireshark="tcp.analysis.keep_alive"),
    _C("keep_alive_ack", "bool", "ACK of a keep-alive", wireshark="tcp.analysis.keep_alive_ack"),
    _C("window_update", "bool", "window update", wireshark="tcp.analysis.window_update"),
    _C("reused_ports", "bool",
       "SYN/ACK with a new ISN on reused ports", wireshark="tcp.analysis.reused_ports"),
    _C("resent", "bool", "carries sequence space already sent (any re-send, whatever "
       "Wireshark's label: see the module docstring)"),
    _C("bytes_in_flight", "int64",
       "unacknowledged bytes after this segment",
       unit="bytes", wireshark="tcp.analysis.bytes_in_flight", optional=True),
    _C("push_bytes_sent", "int64",
       "bytes sent since the last PSH flag",
       unit="bytes", wireshark="tcp.analysis.push_bytes_sent", optional=True),
    _C("acks_frame", "int64",
       "frame of the segment this ACK acknowledges",
       wireshark="tcp.analysis.acks_frame", optional=True),
    _C("ack_rtt_ns", "int64",
       "ns from that segment's first transmission to this ACK",
       unit="ns", wireshark="tcp.analysis.ack_rtt", optional=True),
    _C("ack_rtt_karn_ns", "int64",
       "ack_rtt_ns, empty when a re-sent segment was acknowledged (Karn)",
       unit="ns", optional=True),
    _C("ts_rtt_ns", "int64",
       "ns from the peer's first TSval to this packet's first echo of it",
       unit="ns", optional=True),
    _C("initial_rtt_ns", "int64",
       "ns from the SYN to the first pure ACK (iRTT)",
       unit="ns", wireshark="tcp.analysis.initial_rtt", optional=True),
    _C("rto_ns", "int64",
       "retransmission: ns since the oldest unacknowledged segment",
       unit="ns", wireshark="tcp.analysis.rto", optional=True),
    _C("rto_frame", "int64",
       "that segment's frame", wireshark="tcp.analysis.rto_frame", optional=True),
))


class TcpAnalysis(Result):
    """tshark's tcp.analysis per TCP packet (table ``packets``; definitions in the module
    docstring, columns named after the tshark fields they equal)."""
    analysis = "tcp_analysis"
    specs = (PACKETS,)


def _join(parts: list[TcpAnalysis]) -> TcpAnalysis:
    return joined(parts, {"packets": ("frame_number",)})


@analysis(needs=STREAM_NEEDS, by_stream=_join)
def tcp_analysis(capture: Capture, *, stream: int | None = None,
                 kernel: str = "auto") -> TcpAnalysis:
    """The analysis of every TCP packet (of one stream with ``stream``).  kernel: ``"auto"``
    (the compiled analyser when built), ``"c"`` or ``"python"``."""
    values = packet_analysis(capture, stream, kernel)
    table = {c.name: values[c.name] for c in PACKETS.columns if c.name in values}
    table["stream"] = values["tcp_stream"]
    table["direction"] = np.asarray(DIRECTIONS, object)[values["direction"]]
    return TcpAnalysis({"packets": table}, capture=capture.path)

