"""Round-trip times of one TCP stream: three series and their summary.

The samples come from :mod:`pcapstats.analyses.tcp_analysis` (definitions there):

- ``ack_rtt_ms``: Wireshark's ``tcp.analysis.ack_rtt`` (its RTT graph): data segment -> the ACK
  that first covers its end, timed from the segment's *first* transmission (no Karn rule, so
  after a retransmission it includes the retransmission timeout);
- ``ack_rtt_karn_ms``: the same with Karn's rule (no sample when the ACK covers a re-sent
  segment);
- ``ts_rtt_ms``: TSval -> first echo of it in TSecr (RFC 7323), which includes the receiver's
  delayed-ACK wait but never a retransmission timeout.

Each sample belongs to the packet that closes the round trip (the ACK, or for ts_rtt any
packet echoing a TSval); ``direction`` is that packet's direction.  Tables: ``summary`` (per
series and direction), ``samples`` (one row per packet with a sample) and ``path``: which
estimate is the path's round trip on this capture's side, and why:

- captured at the data **sender**: the Karn-filtered ACK RTT of the ACKs coming back (a segment
  leaves here, its ACK returns one round trip later; re-sent segments left out);
- at the data **receiver**: the timestamp-echo RTT on the data (an ACK leaves here carrying a
  TSval; the data it released arrives echoing it one round trip later).  The ACK RTT there is
  only the receiver's own ACK delay, microseconds;
- in the **middle** of the path (or without timestamps at the receiver): the handshake's SYN
  to first ACK (tshark's iRTT), a full round trip from any capture point, but one sample,
  taken before any queue built up.  On a capture taken at the
data sender, the ACKs coming back (direction != the data direction) carry the path's RTT;
on the receiver's side they show only the receiver-to-capture leg (almost zero) and the data
packets' ts_rtt_ms carries the round trip instead.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue
from ..batch import analysis, each_stream
from ..capture import FILE_FACTS, Capture
from ..errors import Note
from ..ingest import Kept, read_kept
from ..plots.tcp import rtt_figure
from ..render import Shown
from ..results import Result, shown
from ..schema import (CAPTURE_POINT_COLUMN, DIRECTION_COLUMN, FRAME_NUMBER_COLUMN, STREAM_COLUMN,
                      TIME_COLUMN, Column, TableSpec)
from ..reader import as_capture
from ..sidecar import placements
from ..streams import DIRECTIONS, SummaryKeeper, stream_names
from .tcpseq import AnalysedWindows
from .tcp_flow import (SIDE_DOC, FlowDigests, capture_side, data_direction,
                       first_value, optional, stream_rows)

RTT_SERIES = ("ack_rtt_ms", "ack_rtt_karn_ms", "ts_rtt_ms")
STATISTICS = ("rtt_min_ms", "rtt_avg_ms", "rtt_median_ms", "rtt_p95_ms", "rtt_max_ms")
PATH_STATISTICS = ("rtt_min_ms", "rtt_median_ms", "rtt_p95_ms")   # base, under load, tail
# The series that span the whole round trip on each capture side ("ack": in the ACKs'
# direction, "data": in the data's), the path's estimate first: at the sender every series the
# ACKs close (Wireshark's ACK RTT keeps a re-sent segment's timeout in, the timestamp echo the
# receiver's delayed-ACK wait); at the receiver only the echo on the data.  Every other series
# times one leg from the capture point (the receiver's own ACK delay, the sender's turnaround),
# and in the middle of the path every series does: no round trip.
ROUND_TRIPS = {"sender": (("ack_rtt_karn_ms", "ack"), ("ack_rtt_ms", "ack"),
                          ("ts_rtt_ms", "ack")),
               "receiver": (("ts_rtt_ms", "data"),)}
_C = Column
_STREAM = STREAM_COLUMN
_DIRECTION = DIRECTION_COLUMN.but(note="of the packet closing the round trip")
SAMPLES = TableSpec("samples", "one row per packet that closes a round trip", (
    _STREAM,
    FRAME_NUMBER_COLUMN.but(note="the packet that closes the round trip"),
    TIME_COLUMN.but(note="its time"),
    _DIRECTION,
    _C("is_data_ack", "bool", "True when it travels against the data direction (an ACK of "
       "the data)"),
    _C("ack_rtt_ms", "float64", "Wireshark's tcp.analysis.ack_rtt", "ms",
       wireshark="tcp.analysis.ack_rtt", optional=True),
    _C("ack_rtt_karn_ms", "float64", "ack_rtt with Karn's rule", "ms", optional=True),
    _C("ts_rtt_ms", "float64", "timestamp-echo RTT", "ms", optional=True),
))
SUMMARY = TableSpec("summary", "one row per series and direction with samples", (
    _STREAM,
    _C("series", "str", "ack_rtt_ms, ack_rtt_karn_ms or ts_rtt_ms", values=RTT_SERIES),
    _DIRECTION,
    _C("samples", "int64", "number of samples"),
    *(catalogue.column(name, doc="of the series in this direction", optional=False)
      for name in STATISTICS),
    _C("path_rtt", "bool", "this series and direction is the path's round trip on this "
       "capture's side (see the path table)"),
))
PATH = TableSpec("path", "one row per stream: the estimate of the path's round trip", (
    _STREAM,
    CAPTURE_POINT_COLUMN.but(doc=SIDE_DOC),
    *(catalogue.column(name, doc="of the path's round trip: the estimate's samples")
      for name in PATH_STATISTICS),
    _C("estimate", "str", "which: 'ack_rtt_karn_ms b_to_a', 'ts_rtt_ms a_to_b' or 'handshake'"),
    _C("why", "str", "why that estimate on this side"),
))


class Rtt(Result):
    """One TCP stream's round-trip times: ``summary``, ``samples`` and ``path``.  ``stream``,
    ``data_direction`` (a_to_b | b_to_a): the stream and the direction carrying its data."""
    analysis = "rtt"
    specs = (SUMMARY, SAMPLES, PATH)
    series = "samples"
    view = {"summary": (Shown("stream", "stream"), Shown("series", "series"),
                        Shown("direction", "direction"), Shown("samples", "samples", minor=True),
                        shown("rtt_min_ms"), shown("rtt_avg_ms"), shown("rtt_median_ms"),
                        shown("rtt_p95_ms", minor=True), shown("rtt_max_ms"),
                        Shown("path RTT", "path_rtt")),
            "path": (Shown("stream", "stream"), Shown("side", "side"),
                     *(shown(name) for name in PATH_STATISTICS), Shown("estimate", "estimate"),
                     Shown("why", "why", wrap=True))}
    draws = True

    def __init__(self, tables, *, capture: str, stream: int, data_direction: str, notes=(),
                 name: str = ""):
        super().__init__(tables, capture=capture, notes=notes)
        self.stream, self.data_direction = stream, data_direction
        self.name = name            # the stream's endpoints, and what the lab ran on it

    def round_trips(self) -> list[tuple[str, str]]:
        """(series, direction) of the samples that are round trips on this capture's side
        (ROUND_TRIPS), the path's estimate first; none in the middle of the path."""
        side = self.table("path")["side"][0]
        ack = DIRECTIONS[1 - DIRECTIONS.index(self.data_direction)]
        return [(series, self.data_direction if role == "data" else ack)
                for series, role in ROUND_TRIPS.get(side, ())]

    def _figure(self, ax=None, **options):
        return rtt_figure(self, ax=ax, **options)


@analysis(reads=False)
def rtt(capture, *, stream: int | str | None = None) -> Rtt:
    """The RTT samples of one TCP stream (by default the one with the most payload; "all":
    every stream with data), their summary per series and direction, and the path's RTT.
    Given a path, one pass of the sequence analyser over its windows keeps every stream's
    digest (tcp_flow.FlowDigests), not its packets; given a Capture, the stream's rows."""
    if isinstance(capture, Capture):
        return each_stream(capture, stream, lambda s: stream_rtt(capture, s))
    named = isinstance(stream, (int, np.integer)) and not isinstance(stream, bool)
    digests, summary = FlowDigests(), SummaryKeeper()
    pass_, streams, probe = read_kept(capture, [
        AnalysedWindows(digests, stream=stream if named else None, timestamps=True),
        summary, Kept(FILE_FACTS)])
    if streams is None:            # time went back across windows: the whole table
        return rtt(as_capture(capture), stream=stream)
    summary.put(probe, streams)
    payload = {}
    for row in pass_.counts:
        payload.setdefault(int(row[0]), [0, 0])[row[1]] = row[3]

    def one(s: int) -> Rtt:
        flow = digests.digest(s, payload.get(s, (0, 0)))
        if flow is None:
            raise _NoRows
        return stream_rtt(probe, s, flow)
    try:
        return each_stream(probe, stream, one)
    except _NoRows:                # a stream with no analysed packet: the whole table's error
        return rtt(as_capture(capture), stream=stream)


class _NoRows(Exception):
    """A stream the summary knows that the analyser saw no packet of."""


def stream_rtt(capture: Capture, stream: int, flow: dict | None = None,
               found: tuple[str, str] | None = None) -> Rtt:
    """One stream's result from its rows (tcp_flow.stream_rows; read here when not given,
    never written) or its digest (``found``: capture_side's answer on them, when known)."""
    flow = stream_rows(capture, stream) if flow is None else flow
    data_dir = data_direction(flow)
    keep = np.zeros(len(flow["frame_number"]), bool)
    for name in RTT_SERIES:
        keep |= flow["has_" + name.replace("_ms", "_ns")]
    # each series at the rows with a sample alone (a float column of every row: 8 bytes a
    # packet a series)
    ns = {name: optional(flow, name.replace("_ms", "_ns"), keep) for name in RTT_SERIES}
    t0 = capture.first_time_ns
    d = flow["direction"][keep]
    samples = {
        "stream": np.full(int(keep.sum()), stream, np.int64),
        "frame_number": flow["frame_number"][keep],
        "time_s": (flow["frame_time_ns"][keep] - t0) / 1e9,
        "direction": np.asarray(DIRECTIONS, object)[d], "is_data_ack": d != data_dir,
        **{name: v / 1e6 for name, v in ns.items()},
    }
    side, side_evidence = capture_side(flow, data_dir) if found is None else found
    irtt = first_value(flow, "initial_rtt_ns")
    path = _path(stream, side, samples, DIRECTIONS[data_dir],
                 irtt / 1e6 if irtt is not None else np.nan)
    summary = _summary(stream, samples, path["estimate"][0])
    note = Note(f"{side}-side capture", about=f"stream {stream}",
                detail=f"{side_evidence}; so the path RTT is {path['estimate'][0]}: min "
                       f"{path['rtt_min_ms'][0]:.3f} ms, median "
                       f"{path['rtt_median_ms'][0]:.3f} ms")
    hidden = [p for p in placements(capture.path) if p.unseen_by_round_trips
              and p.what in ("delay", "jitter", "rate")] if capture.path else []
    notes = [note]
    if hidden:
        notes.append(Note("the RTTs leave out what this host's egress added",
                          about=f"stream {stream}", detail=" and ".join(
                              p.text() for p in hidden) + " act on what this host sends "
                          "before this capture point sees it (tcpdump's tap is after the "
                          "qdisc and netfilter; the capture's sidecar says so): a round trip "
                          "is timed here from after them"))
    return Rtt({"summary": summary, "samples": samples, "path": path}, capture=capture.path,
               stream=stream, data_direction=DIRECTIONS[data_dir], notes=notes,
               name=stream_names(capture).get(("tcp", stream), ""))


def _summary(stream: int, samples: dict, path_estimate: str) -> dict[str, np.ndarray]:
    """Per series and direction with samples: count, min, mean, median, p95, max, and whether
    it is the path's round trip."""
    rows = []
    for name in RTT_SERIES:
        for direction in DIRECTIONS:
            v = samples[name][samples["direction"] == direction]
            v = v[~np.isnan(v)]
            if len(v):
                rows.append((stream, name, direction, len(v), v.min(), v.mean(), np.median(v),
                             np.percentile(v, 95), v.max(), path_estimate == f"{name} {direction}"))
    # the columns in SUMMARY's order: STATISTICS are min, avg (mean), median, p95, max
    return {c.name: np.array([r[k] for r in rows],
                             dtype=object if c.dtype == "str" else c.dtype)
            for k, c in enumerate(SUMMARY.columns)}


_WHY = {
    "sender": "captured at the data sender: a segment leaves here and its ACK comes back one "
              "round trip later (Karn's rule leaves re-sent segments out)",
    "receiver": "captured at the data receiver: an ACK leaves here and the data it released "
                "arrives echoing its timestamp one round trip later; the ACK RTT here is only "
                "the receiver's own ACK delay",
    "handshake": "SYN to the first ACK (tshark's iRTT) spans a full round trip from any capture "
                 "point; one sample, before any queue",
}


def _path(stream: int, side: str, samples: dict, data_dir: str, irtt_ms: float) -> dict:
    """Which estimate is the path's round trip on this side (the module docstring's rule)."""
    ack_dir = DIRECTIONS[1 - DIRECTIONS.index(data_dir)]
    chosen = {"sender": ("ack_rtt_karn_ms", ack_dir), "receiver": ("ts_rtt_ms", data_dir)}
    name, direction = chosen.get(side, (None, None))
    if name is not None:
        v = samples[name][samples["direction"] == direction]
        v = v[~np.isnan(v)]
        if len(v):
            return _row(stream, side, v, f"{name} {direction}", _WHY[side])
    why = _WHY["handshake"] + {"receiver": " (no timestamps to echo)",
                               "middle": " (the capture is in the middle of the path)",
                               "unknown": " (the capture side is not known)"}.get(side, "")
    return _row(stream, side, np.array([irtt_ms]), "handshake", why)


def _row(stream, side, rtt_ms: np.ndarray, estimate, why) -> dict:
    """The path table's row from the estimate's samples (one, the iRTT, for the handshake)."""
    return {"stream": np.array([stream], np.int64), "side": np.array([side], object),
            "rtt_min_ms": np.array([np.min(rtt_ms)]),
            "rtt_median_ms": np.array([np.median(rtt_ms)]),
            "rtt_p95_ms": np.array([np.percentile(rtt_ms, 95)]),
            "estimate": np.array([estimate], object), "why": np.array([why], object)}
