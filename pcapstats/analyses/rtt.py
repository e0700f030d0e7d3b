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
series and direction) and ``samples`` (one row per packet with a sample).  On a capture taken at the
data sender, the ACKs coming back (direction != the data direction) carry the path's RTT;
on the receiver's side they show only the receiver-to-capture leg (almost zero) and the data
packets' ts_rtt_ms carries the round trip instead.
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..plots.tcp import rtt_figure
from ..results import Result
from ..schema import Column, TableSpec
from ..streams import DIRECTIONS, choose_stream
from .tcp_flow import data_direction, stream_rows

RTT_SERIES = ("ack_rtt_ms", "ack_rtt_karn_ms", "ts_rtt_ms")
_C = Column
_STREAM = _C("stream", "int64", "tcp.stream index, as Wireshark numbers it")
_DIRECTION = _C("direction", "str", "direction of the packet closing the round trip (a_to_b: "
                "sent by side A, the source of the stream's first packet)", values=DIRECTIONS)
SAMPLES = TableSpec("samples", "one row per packet that closes a round trip", (
    _STREAM,
    _C("frame_number", "int64", "the packet that closes the round trip"),
    _C("time_s", "float64", "its time, seconds since the capture's first packet", "s"),
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
    _C("min_ms", "float64", "smallest", "ms"), _C("median_ms", "float64", "median", "ms"),
    _C("p90_ms", "float64", "90th percentile (linear)", "ms"),
    _C("max_ms", "float64", "largest", "ms"),
))


class Rtt(Result):
    """One TCP stream's round-trip times: ``summary`` and ``samples``.  ``stream``,
    ``data_direction`` (a_to_b | b_to_a): the stream and the direction carrying its data."""
    analysis = "rtt"
    specs = (SUMMARY, SAMPLES)
    draws = True

    def __init__(self, tables, *, capture: str, stream: int, data_direction: str, notes=()):
        super().__init__(tables, capture=capture, notes=notes)
        self.stream, self.data_direction = stream, data_direction

    def _figure(self, *, title: str | None = None):
        return rtt_figure(self, title=title)


@analysis()
def rtt(capture: Capture, *, stream: int | None = None) -> Rtt:
    """The RTT samples of one TCP stream (by default the one with the most payload) and their
    summary per series and direction."""
    choice = choose_stream(capture, stream)
    df = stream_rows(capture, choice.stream)
    data_dir = data_direction(df)
    ns = {name: df[name.replace("_ms", "_ns")].to_numpy(np.float64, na_value=np.nan)
          for name in RTT_SERIES}
    keep = np.zeros(len(df), bool)
    for v in ns.values():
        keep |= ~np.isnan(v)
    t0 = capture.column("frame_time_ns")[0]
    d = df["direction"].to_numpy()[keep]
    samples = {
        "stream": np.full(int(keep.sum()), choice.stream, np.int64),
        "frame_number": df["frame_number"].to_numpy()[keep],
        "time_s": (df["frame_time_ns"].to_numpy()[keep] - t0) / 1e9,
        "direction": np.asarray(DIRECTIONS, object)[d], "is_data_ack": d != data_dir,
        **{name: v[keep] / 1e6 for name, v in ns.items()},
    }
    return Rtt({"summary": _summary(choice.stream, samples), "samples": samples},
               capture=capture.path, stream=choice.stream, data_direction=DIRECTIONS[data_dir],
               notes=[choice.note()])


def _summary(stream: int, samples: dict) -> dict[str, np.ndarray]:
    """Per series and direction with samples: count, min, median, p90, max."""
    rows = []
    for name in RTT_SERIES:
        for direction in DIRECTIONS:
            v = samples[name][samples["direction"] == direction]
            v = v[~np.isnan(v)]
            if len(v):
                rows.append((stream, name, direction, len(v), v.min(), np.median(v),
                             np.percentile(v, 90), v.max()))
    return {c.name: np.array([r[k] for r in rows],
                             dtype=object if c.dtype == "str" else c.dtype)
            for k, c in enumerate(SUMMARY.columns)}
