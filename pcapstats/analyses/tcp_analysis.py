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

The logic is sequential per stream and direction: the compiled ``_tcpseq`` extension runs it
(tcpseq_c.py over _tcpseq.c); without a compiler, tcpseq_python.py gives the same answers,
slowly (about 1 s per 100k packets); tcpseq.py is what both implement.
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture, Needs
from ..errors import UsageError
from ..results import Result, joined
from ..schema import (DIRECTION_COLUMN, FRAME_NUMBER_COLUMN, STREAM, STREAM_COLUMN, TCP, UDP,
                      Column, TableSpec)
from ..streams import DIRECTIONS, own_transport
from . import tcpseq_c, tcpseq_python
from .tcpseq import FLAG_BITS, INPUTS, OUTPUTS, RETRANSMISSIONS, TIMESTAMP_OUTPUTS

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
FLAG_COLUMNS = ("retransmission", *(c for c in FLAG_BITS if c != "generic_retransmission"))
# Integer columns that have a value only on some packets (<NA> in the DataFrame, NaN in numpy).

# the columns and layers the per-stream TCP analyses read (the analyser's inputs, the stream
# summary and choice, tcp_flow's sides and segment sizes); their rows are the TCP packets
STREAM_READS = (
    "tcp_stream", "frame_number", "frame_time_ns", "frame_len", "direction", "ip_src", "ip_dst",
    "ip_ttl", "ip_fragment", "l4_quoted", "payload_len", "tcp_srcport", "tcp_dstport",
    "tcp_flags", "tcp_hdr_len", "tcp_len", "tcp_seq_raw", "tcp_ack_raw", "tcp_window_size_value",
    "tcp_option_mss", "tcp_option_tsval", "tcp_option_tsecr", "tcp_option_wscale_shift",
    "tcp_sack_count", *(f"tcp_sack_{side}{k}_raw" for k in (1, 2, 3) for side in ("le", "re")),
    "udp_stream", "udp_srcport", "udp_dstport", TCP, UDP, STREAM)


def tcp_rows(cap: Capture) -> np.ndarray:
    """The rows the per-stream TCP analyses read: every packet with a TCP header."""
    return cap.layer(TCP)


STREAM_NEEDS = Needs(STREAM_READS, tcp_rows)


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


def packet_analysis(cap: Capture, stream: int | None = None, kernel: str = "auto", *,
                    columns: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """The same numbers for the other TCP analyses, as raw numpy columns: ``tcp_stream``,
    ``direction`` as 0 (a_to_b) / 1, optional numbers float64 with NaN where absent (exact:
    every value is below 2^53); ``row``: each packet's row in ``cap``.  ``columns``: only these,
    each made when asked and every analyser array let go after its last use (a long stream's
    unused columns cost 8 bytes a packet each, and the analyser's ~140 bytes a packet are not
    all held beside the answer)."""
    names = tuple(_MADE) if columns is None else columns
    rows, inputs = analysis_inputs(cap, stream, timestamps="ts_rtt_ns" in names)
    if stream is not None and not len(rows):
        have = np.unique(cap.column("tcp_stream")[own_transport(cap, "tcp")])
        raise UsageError(f"no TCP stream {stream} in this capture", path=cap.path,
                         hint=f"it has TCP streams {have.min()}-{have.max()}" if len(have)
                         else "it has no TCP packets")
    src = {**inputs, **run_analyser(inputs, kernel), "rows": rows}
    del inputs
    return _assembled(src, names)


def _assembled(src: dict[str, np.ndarray], names) -> dict[str, np.ndarray]:
    """The columns ``names`` (of _MADE) from the analyser's inputs and outputs (and ``rows``)
    in ``src``, each array taken out of ``src`` after its last use."""
    uses: dict[str, int] = {}
    for name in names:
        for key in _MADE[name][0]:
            uses[key] = uses.get(key, 0) + 1
    for key in [k for k in src if k not in uses]:
        del src[key]                                # the analyser's own inputs, unasked outputs
    out = {}
    for name in names:
        keys, make = _MADE[name]
        value, present = make(src)
        out[name] = value if present is None else np.where(present, value, np.nan)
        for key in keys:
            uses[key] -= 1
            if not uses[key]:
                del src[key]
    return out


def analysed(src: dict[str, np.ndarray], names, at: np.ndarray | None = None
             ) -> dict[str, np.ndarray]:
    """The columns ``names`` packet_analysis gives, made from one run of the analyser (its
    inputs and outputs and the analysed ``rows``, as AnalysedWindows hands them over), at the
    packets ``at`` of them (all when None)."""
    names = tuple(names)
    keys = {key for name in names for key in _MADE[name][0]}
    return _assembled({k: (src[k] if at is None else src[k][at]) for k in keys}, names)


class AnalysedWindows:
    """A keeper of ``ingest.read_kept``: the sequence analysis of a file a window at a time, as
    the reader walks it.  The analyser's state is carried from window to window, so every
    number is the one the whole table gives.  Each window goes to ``each(window, src,
    first_time_ns)``: the window, the analyser's inputs and outputs for its analysed packets
    and their ``rows`` (:func:`analysed` makes packet_analysis' columns of them), and the
    file's first time; its answer, unless None, is kept in ``parts`` and the window let go, so
    memory follows the streams and what ``each`` keeps, not the file (``src``'s arrays may be
    the reader's, written over by the next window: keep copies, as a selection of rows is).
    ``timestamps``: with ts_rtt; ``stream``: that stream alone.  ``done`` gives this keeper,
    with ``counts``: the analyser's tcpseq.COUNTS rows of every stream and direction."""

    def __init__(self, each, *, stream: int | None = None, timestamps: bool = False,
                 kernel: str = "auto"):
        self.each, self.stream, self.timestamps = each, stream, timestamps
        self.analyser = new_analyser(kernel)
        self.first_time_ns, self.windows, self.parts, self.counts = None, 0, [], None

    @property
    def seen(self) -> bool:
        return self.windows > 0

    def add(self, window: Capture) -> None:
        if not self.windows:
            self.first_time_ns = window.first_time_ns
        self.windows += 1
        rows, inputs = analysis_inputs(window, self.stream, timestamps=self.timestamps)
        src = {**inputs, **run_analyser(inputs, analyser=self.analyser, whole=False),
               "rows": rows}
        del inputs
        part = self.each(window, src, self.first_time_ns)
        if part is not None:
            self.parts.append(part)

    def done(self, total: int) -> "AnalysedWindows":
        self.counts = self.analyser.counts()
        return self


def _flag(bits: int):
    return (("aflags",), lambda v: ((v["aflags"] & bits) != 0, None))


def _optional(key: str, *also: str, when=None):
    """A column from the analyser's ``key``, present where ``when(v)`` (default: non-zero)."""
    test = when or (lambda v: v[key] != 0)
    return ((key, *also), lambda v: (v[key], test(v)))


def _generic_rto(v) -> np.ndarray:
    return ((v["aflags"] & FLAG_BITS["generic_retransmission"]) != 0) & (v["rto"] != 0)


# each column packet_analysis gives: (the analyser inputs and outputs it reads, how it is made
# from them: (values, where present or None)); see the module docstring for what each means
_MADE = {
    "row": (("rows",), lambda v: (v["rows"], None)),
    "frame_number": (("frame",), lambda v: (v["frame"], None)),
    "frame_time_ns": (("t",), lambda v: (v["t"], None)),
    "tcp_stream": (("stream",), lambda v: (v["stream"], None)),
    "direction": (("dir",), lambda v: (v["dir"], None)),
    "tcp_len": (("seglen",), lambda v: (v["seglen"], None)),
    "tcp_flags": (("flags",), lambda v: (v["flags"], None)),     # the header's, as read
    "tcp_seq": (("rel_seq",), lambda v: (v["rel_seq"], None)),
    "tcp_ack": (("rel_ack",), lambda v: (v["rel_ack"], None)),
    "tcp_nxtseq": _optional("nxtseq", "analysed", when=lambda v: v["analysed"].astype(bool)),
    "tcp_window_size": (("window_size",), lambda v: (v["window_size"], None)),
    "window_size_scalefactor": _optional("scalefactor", "flags",
                                         when=lambda v: (v["flags"] & 0x002) == 0),
    "retransmission": _flag(RETRANSMISSIONS),
    **{name: _flag(FLAG_BITS[name]) for name in FLAG_COLUMNS if name != "retransmission"},
    "duplicate_ack_num": _optional("dupack_num"),
    "duplicate_ack_frame": _optional("dupack_frame", "dupack_num",
                                     when=lambda v: v["dupack_num"] != 0),
    "bytes_in_flight": _optional("bytes_in_flight"),
    "push_bytes_sent": _optional("push_bytes", "bytes_in_flight",
                                 when=lambda v: v["bytes_in_flight"] != 0),
    "acks_frame": _optional("acks_frame"),
    "ack_rtt_ns": _optional("ack_rtt", "acks_frame",
                            when=lambda v: (v["acks_frame"] != 0) & (v["ack_rtt"] != 0)),
    "ack_rtt_karn_ns": _optional("ack_rtt", "acks_frame", "karn", when=lambda v: (
        (v["acks_frame"] != 0) & (v["ack_rtt"] != 0) & (v["karn"] != 0))),
    "ts_rtt_ns": (("ts_rtt", "ts_ok"), lambda v: (v["ts_rtt"], v["ts_ok"] != 0)),
    "initial_rtt_ns": _optional("initial_rtt"),
    "rto_ns": _optional("rto", "aflags", when=_generic_rto),
    "rto_frame": _optional("rto_frame", "rto", "aflags", when=_generic_rto),
    "resent": (("resent",), lambda v: (v["resent"].view(bool), None)),
}


# -- inputs and assembly ------------------------------------------------------------------------

def table_index(cap: Capture, rows: np.ndarray, at: np.ndarray | None = None):
    """Where ``rows[at]`` (all of ``rows`` when ``at`` is None) lie in the table, to index its
    arrays with.  ``rows`` ascend; when they are all of the table's rows (a table read for one
    analysis, a batch of one stream) that is ``at`` itself, or every row as a slice: the
    arrays are read in place, not gathered into copies (on a 900k-packet stream, 8 bytes a
    packet a column)."""
    if len(rows) == len(cap):
        return slice(None) if at is None else at
    return rows if at is None else rows[at]


def analysed_rows(cap: Capture, stream: int | None = None) -> np.ndarray:
    """The rows of the TCP packets the analyser takes (with their own TCP header of 20 bytes
    or more), of ``stream`` alone when given."""
    analysed = own_transport(cap, "tcp") & (cap.column("tcp_hdr_len") >= 20)
    if stream is not None:
        analysed &= cap.column("tcp_stream") == stream
    return np.flatnonzero(analysed)


def analysis_inputs(cap: Capture, stream: int | None = None, *, timestamps: bool = False
                    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(rows of the TCP packets analysed, the analyser's input arrays).  ``dir`` is the packet
    table's direction (0: sent by side A).  With ``stream``, that stream's rows alone: the
    analyser keeps no state across streams, so one stream's numbers are the same analysed
    alone, in the time and memory of its own packets.  ``timestamps``: with the TCP
    timestamps option's inputs, for ts_rtt."""
    rows = analysed_rows(cap, stream)
    index = table_index(cap, rows)   # a table of TCP rows alone (read for Needs): no copies
    col = lambda name: cap.column(name)[index]  # noqa: E731
    stream = np.asarray(col("tcp_stream"), np.int64)     # a batch's own column: not copied
    wscale = np.where(cap.present("tcp_option_wscale_shift")[index],
                      col("tcp_option_wscale_shift").astype(np.int16), np.int16(-1))
    # SACK edges: zeros (pages never touched) but on the few packets that carry blocks
    sack = {side: np.zeros((len(rows), 3), np.uint32) for side in ("le", "re")}
    with_sack = rows[cap.column("tcp_sack_count")[rows] > 0]
    at = np.searchsorted(rows, with_sack)
    for side in ("le", "re"):
        for k in (1, 2, 3):
            name = f"tcp_sack_{side}{k}_raw"
            sack[side][at, k - 1] = np.where(cap.present(name)[with_sack],
                                             cap.column(name)[with_sack], 0)
    inputs = {
        "stream": stream, "dir": col("direction"),
        "analysed": (~col("ip_fragment").astype(bool)).astype(np.uint8),
        "flags": col("tcp_flags"), "seq": col("tcp_seq_raw"), "ack": col("tcp_ack_raw"),
        "win": col("tcp_window_size_value"), "seglen": col("tcp_len"),
        "t": col("frame_time_ns"), "frame": col("frame_number"), "wscale": wscale,
        "sack_count": col("tcp_sack_count"), "sack_le": sack["le"], "sack_re": sack["re"],
    }
    if timestamps:
        inputs.update(tsval=col("tcp_option_tsval"), tsecr=col("tcp_option_tsecr"),
                      has_ts=cap.present("tcp_option_tsval")[index])
    return rows, {name: np.ascontiguousarray(inputs[name], dtype) for name, dtype in INPUTS
                  if name in inputs}



# columns and layers resent_packets reads (for an analysis' Needs)
RESENT_READS = (TCP, "l4_quoted", "tcp_hdr_len", "ip_fragment", "tcp_stream", "direction",
                "tcp_flags", "tcp_seq_raw", "tcp_ack_raw", "tcp_len")
_SYN, _ACK, _SYN_FIN = 0x002, 0x010, 0x003


def resent_packets(cap: Capture) -> tuple[np.ndarray, np.ndarray]:
    """(rows of the TCP packets analysed, which of them re-send sequence space): the ``resent``
    column alone, without running the analyser (fairness' goodput needs only this).

    resent_segments compares sequence numbers only within a direction, so any numbers a
    constant apart from the analyser's relative ones give its answers.  The wire's numbers
    are, as long as the direction's base stays put (a SYN, a repeated SYN, a stream caught
    mid-flow, fragments and zero-window probes all leave it); where a SYN/ACK moves the base
    (reused ports), ``_from_base`` moves them with it."""
    rows = analysed_rows(cap)
    col = lambda name: cap.column(name)[rows]  # noqa: E731
    inputs = {"stream": col("tcp_stream"), "dir": col("direction"), "flags": col("tcp_flags"),
              "seglen": col("tcp_len"), "analysed": ~col("ip_fragment").astype(bool, copy=False)}
    return rows, resent_segments(inputs, _from_base(cap, rows, inputs))


def resent_rows(cap: Capture) -> np.ndarray:
    """Bool mask of the rows resent_packets reads: every analysed TCP packet that carries
    sequence space (data, SYN, FIN), and each direction's first analysed packet and first
    analysed ACK, which set its base.  Decided within the rows given, so a window of the file
    keeps a superset of the file's first packets."""
    tcp = own_transport(cap, "tcp") & (cap.column("tcp_hdr_len") >= 20)
    flags = cap.column("tcp_flags")
    need = tcp & ((cap.column("tcp_len") > 0) | ((flags & _SYN_FIN) != 0))
    analysed = np.flatnonzero(tcp & ~cap.column("ip_fragment").astype(bool, copy=False))
    # each direction by its own number (stream ids count packets: a dense table is small)
    key = cap.column("tcp_stream")[analysed] * 2 + cap.column("direction")[analysed]
    size = int(key.max()) + 1 if len(key) else 0
    first, first_ack = np.full(size, len(cap)), np.full(size, len(cap))
    np.minimum.at(first, key, analysed)
    acks = (flags[analysed] & _ACK) != 0
    np.minimum.at(first_ack, key[acks], analysed[acks])
    need[first[first < len(cap)]] = True
    need[first_ack[first_ack < len(cap)]] = True
    return need


def _from_base(cap: Capture, rows: np.ndarray, inputs) -> np.ndarray:
    """The packets' sequence numbers less their direction's base, up to one constant per
    direction.  The analyser sets a direction's base at its first analysed packet (seq, or
    seq - 1 without SYN) or at the peer's first analysed ACK (ack - 1), whichever comes
    first; from then on a SYN/ACK with another seq becomes the base.  So the wire's numbers
    serve, less the moves of the base since it was set: only directions where a SYN/ACK moved
    it are rebased, by a search among those moves."""
    seq = cap.column("tcp_seq_raw")[rows]
    flags = inputs["flags"]
    synack = np.flatnonzero((flags & (_SYN | _ACK)) == (_SYN | _ACK))
    if not len(synack):
        return seq
    # where each direction's base was set, if before its last SYN/ACK (later ones move nothing)
    n, head = len(rows), int(synack[-1]) + 1
    key = inputs["stream"][:head] * 2 + inputs["dir"][:head]
    analysed = np.flatnonzero(inputs["analysed"][:head])
    acking = analysed[(flags[analysed] & _ACK) != 0]
    own_first = np.full(int(key.max()) // 2 * 2 + 2, n)     # both directions of each stream
    ack_first = own_first.copy()
    np.minimum.at(own_first, key[analysed], analysed)
    np.minimum.at(ack_first, key[acking], acking)
    keys = np.unique(key[synack])
    own, peer = own_first[keys], ack_first[keys ^ 1]
    first = np.minimum(own, peer)
    keys, own, peer, first = (a[first < n] for a in (keys, own, peer, first))
    if not len(keys):
        return seq
    by_own = own < peer
    base = np.empty(len(keys), np.uint32)
    base[by_own] = seq[own[by_own]] - ((flags[own[by_own]] & _SYN) == 0)
    base[~by_own] = cap.column("tcp_ack_raw")[rows[peer[~by_own]]] - np.uint32(1)
    # the SYN/ACKs from then on, each the base in turn: events (direction, position, base)
    at = np.minimum(np.searchsorted(keys, key[synack]), len(keys) - 1)
    later = synack[(keys[at] == key[synack]) & (synack >= first[at])]
    ev_key, ev_pos, ev_base = np.r_[keys, key[later]], np.r_[first, later], np.r_[base, seq[later]]
    order = np.lexsort((ev_pos, ev_key))
    ev_key, ev_pos, ev_base = ev_key[order], ev_pos[order], ev_base[order]
    opens = np.r_[True, ev_key[1:] != ev_key[:-1]]
    moved = np.r_[np.uint32(0), ev_base[1:] - ev_base[:-1]]     # how far each event moved it
    moved[opens] = 0
    if not moved.any():
        return seq
    # in the directions it moved: the moves up to each analysed packet, subtracted (mod 2^32)
    movers = np.unique(ev_key[moved != 0])
    keep = np.isin(ev_key, movers)
    ev_key, ev_pos, moved = ev_key[keep], ev_pos[keep], moved[keep]
    opens = np.flatnonzero(np.r_[True, ev_key[1:] != ev_key[:-1]])
    total = np.cumsum(moved, dtype=np.uint64)
    total -= np.repeat(total[opens], np.diff(np.r_[opens, len(ev_key)]))
    analysed = np.flatnonzero(inputs["analysed"])
    key = inputs["stream"][analysed] * 2 + inputs["dir"][analysed]
    hit = np.isin(key, movers)
    affected, rank = analysed[hit], np.searchsorted(movers, key[hit])
    ev_rank = np.searchsorted(movers, ev_key)
    # the latest event at or before each packet (an analysed packet follows its base's setting)
    last = np.searchsorted(ev_rank * (n + 1) + ev_pos, rank * (n + 1) + affected, "right") - 1
    seq[affected] -= total[last].astype(np.uint32)
    return seq


def resent_segments(inputs: dict[str, np.ndarray], rel_seq: np.ndarray) -> np.ndarray:
    """Per packet: it carries sequence space (data, SYN, FIN) starting below the highest
    sequence number its (stream, direction) had sent before it.  Sequence numbers are
    unwrapped within each direction (steps of less than 2^31), so streams past 4 GB count too,
    and compared only within it (any constant per direction gives the same answer)."""
    flags, seglen = inputs["flags"], inputs["seglen"]
    synfin = (flags & _SYN_FIN) != 0
    out = np.zeros(len(seglen), bool)
    rows = np.flatnonzero(((seglen > 0) | synfin) & (inputs["analysed"] != 0))
    if len(rows) == 0:
        return out
    key = inputs["stream"][rows] * 2 + inputs["dir"][rows]
    lengths = np.bincount(key)
    lengths = lengths[lengths > 0]                  # each direction's segments, by key
    starts = np.r_[0, np.cumsum(lengths[:-1])]
    # each direction's segments in packet order: a stable sort (radix, when keys fit 16 bits)
    if key.max() < 1 << 16:
        key = key.astype(np.uint16)
    rows = rows[np.argsort(key, kind="stable")]
    del key
    seq = rel_seq[rows].astype(np.int64)
    step = np.empty_like(seq)
    step[0] = 0
    np.subtract(seq[1:], seq[:-1], out=step[1:])
    del seq
    step += 1 << 31                                 # signed, mod 2^32: a re-send steps back
    step &= (1 << 32) - 1
    step -= 1 << 31
    step[starts] = 0
    seq = np.cumsum(step, out=step)                 # unwrapped, plus a constant per direction
    end = seq + seglen[rows]
    end += synfin[rows]
    base = seq[starts]
    low = int((np.minimum.reduceat(seq, starts) - base).min())
    span = int((np.maximum.reduceat(end, starts) - base).max()) - low + 1
    if len(starts) * span < (1 << 62):
        # the highest end sent before each segment, within its direction: directions laid end
        # to end on one number line (each in a band of its own), then one running maximum
        shift = np.repeat(np.arange(len(starts)) * span - low - base, lengths)
        seq += shift
        end += shift
        del shift
        np.maximum.accumulate(end, out=end)
        out[rows[1:]] = seq[1:] < end[:-1]
    else:                                           # too wide to lay out: one at a time
        for a, b in zip(starts, np.r_[starts[1:], len(rows)]):
            before = np.maximum.accumulate(end[a:b])
            out[rows[a + 1:b]] = seq[a + 1:b] < before[:-1]
    return out


# -- the analyser ---------------------------------------------------------------------------------

def new_analyser(kernel: str = "auto"):
    """The analyser (tcpseq.py's ``Analyser``), its state kept between feeds: the compiled one
    or the Python one."""
    if kernel not in ("auto", "c", "python"):
        raise UsageError(f"unknown kernel {kernel!r}", hint="use auto, c or python")
    lib = tcpseq_c.load() if kernel in ("auto", "c") else None
    if kernel == "c" and lib is None:
        raise UsageError("the compiled TCP analyser is not available in this install",
                         hint="reinstall with a C compiler present (pip install -e .), "
                              "or use kernel='python'")
    return tcpseq_python.Analyser() if lib is None else tcpseq_c.Analyser(lib)


def run_analyser(inputs: dict[str, np.ndarray], kernel: str = "auto", *, analyser=None,
                 whole: bool = True) -> dict[str, np.ndarray]:
    """The per-packet outputs (tcpseq.OUTPUTS; ts_rtt and ts_ok only with the timestamps
    inputs) of the packets ``inputs`` holds: all there are (``whole``) or the next of a file
    ``analyser`` goes on with."""
    n = len(inputs["stream"])
    out = {name: np.zeros(n, dtype) for name, dtype in OUTPUTS
           if name not in TIMESTAMP_OUTPUTS or "tsval" in inputs}
    (analyser or new_analyser(kernel)).feed(inputs, out, whole)
    return out
