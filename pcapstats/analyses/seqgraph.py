"""The data of Wireshark's Stevens and tcptrace graphs for one TCP stream's data direction.

- ``segments``: one row per data segment: frame, time, relative seq and next seq (tshark's
  tcp.seq / tcp.nxtseq), and ``resent`` (it carries sequence space already sent: tcp_analysis'
  rule, the count `pcapstats retrans` gives, whatever tshark's flag);
- ``acks``: one row per packet of the other direction with the ACK flag: the relative ACK
  number and the right edge of its advertised window (ACK + calculated window);
- ``sacks``: one row per SACK block in those packets: its edges relative to the data
  direction's base sequence number (the first three blocks, as Wireshark keeps).
"""

from __future__ import annotations

import numpy as np

from .. import catalogue
from ..batch import analysis, each_stream
from ..capture import Capture
from ..errors import UsageError
from ..plots.tcp import seqgraph_figure
from ..render import Shown
from ..results import Result, shown
from ..schema import FRAME_NUMBER_COLUMN, STREAM_COLUMN, TIME_COLUMN, Column, TableSpec
from ..streams import DIRECTIONS, stream_names
from .tcpseq import STREAM_NEEDS, packet_analysis
from .tcp_flow import data_direction

# the packet_analysis columns the graph reads: asked alone, a 900k-packet stream holds these
# (mostly views of the table and the analyser's uint32 outputs), not stream_rows' ~80 bytes a
# packet of RTTs, flags and header fields it never draws
FLOW_COLUMNS = ("frame_number", "frame_time_ns", "direction", "tcp_len", "tcp_flags",
                "tcp_seq", "tcp_ack", "tcp_nxtseq", "tcp_window_size", "resent")

STYLES = ("stevens", "tcptrace")
_C = Column
_STREAM, _FRAME, _TIME = STREAM_COLUMN, FRAME_NUMBER_COLUMN, TIME_COLUMN
SUMMARY = TableSpec("summary", "one row per stream: its data direction at a glance", (
    _STREAM,
    _C("data_direction", "str", "the direction carrying the data", values=DIRECTIONS),
    _C("segments", "int64", "data segments", "segments"),
    catalogue.column("resent_data", doc="of the data segments", optional=False),
    _C("sequence_bytes", "int64", "sequence space the data covered: highest next seq - lowest "
       "seq", "bytes"),
    _C("first_s", "float64", "first data segment, seconds since the capture's first packet", "s"),
    _C("duration_s", "float64", "first to last data segment", "s"),
    _C("acks", "int64", "packets of the other direction with the ACK flag"),
    _C("sack_blocks", "int64", "SACK blocks in them (the first three of each)"),
))
SEGMENTS = TableSpec("segments", "one row per data segment of the data direction", (
    _STREAM, _FRAME, _TIME,
    _C("tcp_seq", "int64", "relative sequence number", wireshark="tcp.seq"),
    _C("tcp_nxtseq", "int64", "relative next sequence number", wireshark="tcp.nxtseq",
       optional=True),
    _C("resent", "bool", "it carries sequence space already sent (tcp_analysis' resent)"),
))
ACKS = TableSpec("acks", "one row per packet of the other direction with the ACK flag", (
    _STREAM, _FRAME, _TIME,
    _C("tcp_ack", "int64", "relative acknowledgement number", wireshark="tcp.ack"),
    _C("window_edge", "int64", "right edge of the advertised window: ACK + calculated window"),
))
SACKS = TableSpec("sacks", "one row per SACK block in those ACKs (the first three, as "
                  "Wireshark keeps)", (
    _STREAM, _FRAME, _TIME,
    _C("left", "int64", "left edge, relative to the data direction's base sequence number"),
    _C("right", "int64", "right edge, relative likewise"),
))


class SeqGraph(Result):
    """One TCP stream's sequence graph data: ``segments``, ``acks``, ``sacks``.  ``stream``,
    ``data_direction`` (a_to_b | b_to_a)."""
    analysis = "seqgraph"
    specs = (SUMMARY, SEGMENTS, ACKS, SACKS)
    series = "segments"
    draws = True
    view = {"summary": (Shown("stream", "stream"), Shown("data", "data_direction"),
                        Shown("segments", "segments"), shown("resent_data"),
                        Shown("sequence", "sequence_bytes"), Shown("start", "first_s"),
                        Shown("duration", "duration_s"), Shown("ACKs", "acks"),
                        Shown("SACK blocks", "sack_blocks"))}

    def __init__(self, tables, *, capture: str, stream: int, data_direction: str, notes=(),
                 name: str = ""):
        super().__init__(tables, capture=capture, notes=notes)
        self.stream, self.data_direction = stream, data_direction
        self.name = name            # the stream's endpoints, and what the lab ran on it

    def _figure(self, ax=None, *, style: str = "stevens", **options):
        """``style``: stevens or tcptrace; ``from_s`` / ``to_s``: the zoom, ``title``."""
        if style not in STYLES:
            raise UsageError(f"unknown style {style!r}", hint="use stevens or tcptrace")
        return seqgraph_figure(self, style=style, ax=ax, **options)


@analysis(needs=STREAM_NEEDS, one_stream=True)
def seqgraph(capture: Capture, *, stream: int | str | None = None) -> SeqGraph:
    """The segments, ACKs and SACK blocks of one TCP stream (by default the one with the most
    payload; "all": every stream with data), for the Stevens and tcptrace graphs."""
    return each_stream(capture, stream, lambda s: _seqgraph(capture, s))


def _seqgraph(capture: Capture, stream: int) -> SeqGraph:
    flow = packet_analysis(capture, stream, columns=FLOW_COLUMNS)
    data_dir = data_direction(flow)
    t0 = capture.first_time_ns
    d = flow["direction"]
    seconds = lambda rows: (flow["frame_time_ns"][rows] - t0) / 1e9  # noqa: E731 (at rows)
    frames = flow["frame_number"]
    data = np.flatnonzero((d == data_dir) & (flow["tcp_len"] > 0))
    segments = {
        "frame_number": frames[data], "time_s": seconds(data),
        "tcp_seq": np.asarray(flow["tcp_seq"][data], np.int64),
        "tcp_nxtseq": np.asarray(flow["tcp_nxtseq"][data], np.float64),
        "resent": np.asarray(flow["resent"][data], bool)}
    acks = np.flatnonzero((d != data_dir) & ((flow["tcp_flags"] & 0x10) != 0))
    ack = np.asarray(flow["tcp_ack"][acks], np.int64)
    ack_table = {
        "frame_number": frames[acks], "time_s": seconds(acks), "tcp_ack": ack,
        "window_edge": ack + np.asarray(flow["tcp_window_size"][acks], np.int64)}
    tables = {"segments": segments, "acks": ack_table,
              "sacks": _sacks(capture, flow, data_dir, acks, ack_table["time_s"])}
    for table in tables.values():
        table["stream"] = np.full(len(table["frame_number"]), stream, np.int64)
    tables["summary"] = _summary(stream, DIRECTIONS[data_dir], tables)
    return SeqGraph(tables, capture=capture.path, stream=stream,
                    data_direction=DIRECTIONS[data_dir],
                    name=stream_names(capture).get(("tcp", stream), ""))


def _summary(stream: int, data_dir: str, tables: dict) -> dict[str, np.ndarray]:
    seg = tables["segments"]
    n = len(seg["tcp_seq"])
    ends = seg["tcp_nxtseq"][~np.isnan(seg["tcp_nxtseq"])]
    span = int(ends.max() - seg["tcp_seq"].min()) if n and len(ends) else 0
    t = seg["time_s"]
    row = {"stream": stream, "data_direction": data_dir, "segments": n,
           "resent_data": int(seg["resent"].sum()), "sequence_bytes": span,
           "first_s": float(t.min()) if n else np.nan,
           "duration_s": float(t.max() - t.min()) if n else np.nan,
           "acks": len(tables["acks"]["tcp_ack"]), "sack_blocks": len(tables["sacks"]["left"])}
    return {c.name: np.array([row[c.name]], dtype=object if c.dtype == "str" else c.dtype)
            for c in SUMMARY.columns}


def _sacks(cap, flow, data_dir, acks, ack_seconds):
    """SACK blocks of the ACKs (at ``ack_seconds``), relative to the data direction's base
    sequence number."""
    frames = flow["frame_number"]
    d = flow["direction"]
    sent = d == data_dir
    out = {"frame_number": [], "time_s": [], "left": [], "right": []}
    empty = {"frame_number": np.zeros(0, np.int64), "time_s": np.zeros(0),
             "left": np.zeros(0, np.int64), "right": np.zeros(0, np.int64)}
    if sent.any() and len(acks):
        first_sent = int(sent.argmax())           # the data direction's first row
        all_frames = cap.column("frame_number")
        first = np.searchsorted(all_frames, frames[first_sent])
        base = (int(cap.column("tcp_seq_raw")[first]) - int(flow["tcp_seq"][first_sent])) \
            % (1 << 32)
        rows = np.searchsorted(all_frames, frames[acks])
        for k in (1, 2, 3):
            has = cap.present(f"tcp_sack_le{k}_raw")[rows]
            le = (cap.column(f"tcp_sack_le{k}_raw")[rows].astype(np.int64) - base) % (1 << 32)
            re = (cap.column(f"tcp_sack_re{k}_raw")[rows].astype(np.int64) - base) % (1 << 32)
            out["frame_number"].append(frames[acks][has])
            out["time_s"].append(ack_seconds[has])
            out["left"].append(le[has])
            out["right"].append(re[has])
        out = {k: np.concatenate(v) for k, v in out.items()}
        order = np.argsort(out["frame_number"], kind="stable")
        return {k: v[order] for k, v in out.items()}
    return empty
