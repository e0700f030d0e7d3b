"""What held each TCP sender back: the receiver's window, the congestion window, loss recovery,
the sender itself, a zero window, or nothing to send -- as shares of the stream's time, the
runs over time, and the rate it got.

Built on the cwnd estimate (:mod:`pcapstats.analyses.cwnd`; its module docstring defines each
sample's state): between two window samples the sender was held by the state of the first, a
silence with nothing outstanding is idle and the time the receiver's window stood at zero is
a zero window (``cwnd.limit_runs``).  Shares are of time, from the stream's first window
sample to its last.  What a capture point can tell apart differs:

- at the **sender** (or mid-path, analysed as the sender) every limit is seen: an ACK that
  finds the flight at the window and is answered at once by new data is the cwnd; a flight at
  the receiver's edge is its window; a sender that has room in both and does not use it at
  once is held by itself (its application, its send buffer, or pacing);
- at the **receiver** the sender's answer to each ACK is not seen, only what arrived: a sender
  pacing itself or held by its application below the path's rate looks like one held by its
  window, so ``sender_share`` counts only its silences and the rest is in ``cwnd_share``
  (``undistinguished`` says so); the receiver's own window and zero window are seen exactly.

The Linux sender keeps its own account in TCP_INFO (``tcpi_rwnd_limited``,
``tcpi_sndbuf_limited``, ``tcpi_busy_time``); the lab's sidecar records it every 10 ms, and
the tests hold these shares to it.  ``limit`` is the largest share; ``goodput_bps`` the data
direction's payload sent for the first time over its first to last data segment.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import catalogue
from ..batch import analysis, data_streams, stacked_streams
from ..capture import Capture
from ..errors import Note, UsageError
from ..render import Shown
from ..results import Result, joined, shown
from ..schema import CAPTURE_POINT_COLUMN, STREAM_COLUMN, Column, TableSpec
from ..streams import DIRECTIONS
from ..sidecar import asked_queue_bytes, asked_rate_bps
from . import tcp_models
from .cwnd import LIMITED, LIMITS, Cwnd, cwnd, derived_tables, estimate, side_note
from .rtt import stream_rtt
from .tcp_flow import capture_side, data_direction, stream_rows
from .tcpseq import STREAM_NEEDS

FEWEST_SEGMENTS = 10      # a stream with fewer data segments has no limit worth a row
UNDISTINGUISHED = {"receiver": "sender, cwnd"}     # the limits a capture side cannot tell apart
RECEIVER_BLIND = ("a sender held by itself below the path's rate arrives as one held by its "
                  "window: cwnd_share holds both, sender_share counts the sender's silences only")
_C = Column
STREAMS = TableSpec("streams", "one row per TCP stream with data: what held its sender back", (
    STREAM_COLUMN,
    CAPTURE_POINT_COLUMN.but(doc="where the capture was taken: sender, receiver (of the "
                             "data), middle or unknown (analysed as the sender)"),
    _C("data_direction", "str", "the direction carrying the data", values=DIRECTIONS),
    _C("duration_s", "float64", "the span the shares are of: the first window sample to the "
       "last", "s"),
    catalogue.column("goodput_bps", doc="here the data direction's over its first to last "
                     "data segment"),
    catalogue.column("limit", values=LIMITS),
    *(catalogue.column(f"{limit}_share") for limit in LIMITS),
    _C("undistinguished", "str", "limits this capture side cannot tell apart, counted as one "
       "(empty at the sender)"),
))
MODELS = TableSpec("models", "one row per stream: what theory says its sender could get, from "
                   "this capture's own numbers", (
    STREAM_COLUMN,
    catalogue.column("goodput_bps", doc="here the data direction's over its first to last "
                     "data segment"),
    catalogue.column("resent_data_share"),
    _C("mss_bytes", "int64", "the sender's MSS (the cwnd estimate's)", "bytes"),
    catalogue.column("rtt_min_ms", doc="here of the path's estimate (rtt's path table)"),
    catalogue.column("rtt_median_ms", doc="here of the path's estimate: the RTT the models "
                     "take"),
    _C("rto_ms", "float64", "the retransmission timeout RFC 6298 gives over the path's RTT "
       "samples (srtt + 4 rttvar, 200 ms at least, as Linux), their median: Padhye's T0", "ms",
       optional=True),
    catalogue.column("mathis_bps"),
    catalogue.column("padhye_bps"),
    catalogue.column("rwnd_max_bytes"),
    catalogue.column("window_bound_bps"),
    catalogue.column("bdp_bytes"),
    catalogue.column("queue_delay_ms"),
    catalogue.column("full_queue_ms"),
))


class Limits(Result):
    """What held each TCP stream's sender back (``streams``) and when (``limited``)."""
    analysis = "limits"
    specs = (STREAMS, LIMITED, MODELS)
    draws = True
    view = {"streams": (Shown("stream", "stream"), Shown("side", "side"), shown("goodput_bps"),
                        shown("limit"), *(shown(f"{limit}_share") for limit in LIMITS),
                        Shown("undistinguished", "undistinguished", minor=True))}
    view["models"] = (Shown("stream", "stream"), shown("goodput_bps"),
                      shown("resent_data_share"),
                      shown("rtt_median_ms"), shown("mathis_bps"), shown("padhye_bps"),
                      shown("window_bound_bps"), shown("rwnd_max_bytes", minor=True),
                      shown("bdp_bytes"), shown("queue_delay_ms"),
                      shown("full_queue_ms", minor=True))
    legend = {"streams": "shares of the stream's time from its first window sample to its "
                         "last; limit: the largest.  `pcapstats columns limits` defines each.",
              "models": "Mathis, Padhye: what a Reno sender gets at this loss rate and RTT "
                        "(Padhye with timeouts); window bound: the largest receiver window / "
                        "RTT; BDP: the asked rate x base RTT; queueing: RTT median - min, "
                        "against a full queue's (the lab's queue limit / rate)."}

    def __init__(self, tables, *, capture: str, source=None, side: str = "auto", notes=()):
        super().__init__(tables, capture=capture, notes=notes)
        # each stream's cwnd estimate, for figures: made again when one is drawn, not held
        # (a long stream's per-segment flight is tens of MB, held while the next is analysed)
        self.cwnds = Estimates(source, side, [int(s) for s in tables["streams"]["stream"]])

    def _figure(self, ax=None, *, stream: int | None = None, **options):
        from ..plots.limits import limits_figure  # lazy: matplotlib only when a figure is drawn
        return limits_figure(self, ax=ax, stream=stream, **options)


class Estimates(Mapping):
    """Stream -> its cwnd result (``cwnd(source, stream=s, side=side)``: what limits' shares
    were made from), made when asked; ``source``: a whole Capture, or the capture's path."""

    def __init__(self, source, side: str, streams):
        self.source, self.side, self.streams = source, side, list(streams)

    def __getitem__(self, stream: int) -> Cwnd:
        if stream not in self.streams:
            raise KeyError(stream)
        return cwnd(self.source, stream=stream, side=self.side)

    def __iter__(self):
        return iter(self.streams)

    def __len__(self) -> int:
        return len(self.streams)


def _join(parts: list[Limits]) -> Limits:
    out = joined(parts, {"streams": ("stream",), "limited": ("stream", "start_s"),
                         "models": ("stream",)})
    first = parts[0].cwnds
    out.cwnds = Estimates(first.source, first.side, [s for p in parts for s in p.cwnds])
    return out


@analysis(needs=STREAM_NEEDS, by_stream=_join)
def limits(capture: Capture, *, stream: int | None = None, side: str = "auto") -> Limits:
    """What held the sender of each TCP stream with data back (of one with ``stream``);
    ``side`` forces "sender" or "receiver" when the handshake cannot tell."""
    ids = [stream] if stream is not None else data_streams(capture)
    source = capture.whole_or_path     # what figures make a stream's estimate again from
    done, made = {}, {}
    for s in ids:
        try:
            flow = stream_rows(capture, s)       # read once: the RTTs first (they only read)
            found = capture_side(flow, data_direction(flow))      # and its side told once
            path = stream_rtt(capture, s, flow, found)
            est = estimate(capture, s, side=side, flow=flow, found=found)
        except UsageError as e:
            if stream is not None:
                raise
            done[s] = e
            continue
        done[s] = (s, est, path)
        if stream is not None or est.flight["time_s"].size >= FEWEST_SEGMENTS:
            # its row now: a long stream's estimate is let go before the next is made (a
            # short one's, small, is kept in case no stream is longer)
            made[s] = done[s] = _result(capture, source, side, s, est, path)
        del est, path
    if not made:          # every stream short (or none analysed): the short ones
        made = {s: _result(capture, source, side, *done[s]) for s in ids
                if isinstance(done[s], tuple)}
    results = [made[s] for s in ids if s in made]
    if not results:
        return stacked_streams(capture.path, ids, done)        # the one clear error
    out = results[0] if len(results) == 1 else _join(results)
    out.notes += [Note("left out", about=f"stream {s}", detail=str(done[s])) for s in ids
                  if isinstance(done[s], UsageError)]
    return out


def _result(capture: Capture, source, side: str, s: int, est, path) -> Limits:
    runs, summary = derived_tables(est)     # (not a Cwnd: its tables' stream columns)
    flight = est.flight
    new = ~np.asarray(flight["resent"], bool)
    payload = capture.column("tcp_len")[est.flight_rows[new]].sum(dtype=np.int64)
    t = flight["time_s"]
    span = float(t.max() - t.min()) if len(t) else 0.0
    goodput = 8 * float(payload) / span if span > 0 else np.nan
    shares = {f"{limit}_share": float(summary[f"{limit}_share"][0]) for limit in LIMITS}
    largest = max(LIMITS, key=lambda k: shares[f"{k}_share"]
                  if shares[f"{k}_share"] == shares[f"{k}_share"] else -1)
    row = {"stream": s, "side": est.side, "data_direction": DIRECTIONS[est.data_direction],
           "duration_s": float((runs["end_s"] - runs["start_s"]).sum()),
           "goodput_bps": goodput, "limit": largest, **shares,
           "undistinguished": UNDISTINGUISHED.get(est.analysed_as, "")}
    table = {c.name: np.array([row[c.name]], dtype=object if c.dtype == "str" else c.dtype)
             for c in STREAMS.columns}
    notes = [side_note(est)]
    if est.analysed_as == "receiver":
        notes.append(Note("at the receiver: sender and cwnd limits look alike",
                          about=f"stream {s}", detail=RECEIVER_BLIND))
    models = _models(capture, s, est, path, goodput, float(summary["rwnd_max_bytes"][0]))
    return Limits({"streams": table, "limited": runs, "models": models}, capture=capture.path,
                  source=source, side=side, notes=notes)


def _models(capture: Capture, s: int, est, path, goodput: float, rwnd_max: float) -> dict:
    """The models' row of one stream (tcp_models' formulas on this capture's numbers; ``path``:
    its rtt result)."""
    row = path.table("path")
    base, load = float(row["rtt_min_ms"][0]) / 1e3, float(row["rtt_median_ms"][0]) / 1e3
    resent = np.asarray(est.flight["resent"], bool)
    loss = float(resent.mean()) if len(resent) else 0.0       # data segments re-sent
    rto = _rto_s(path)
    rate, queue = asked_rate_bps(capture.path), asked_queue_bytes(capture.path)
    values = {"stream": s, "goodput_bps": goodput, "resent_data_share": loss,
              "mss_bytes": est.mss_bytes, "rtt_min_ms": base * 1e3, "rtt_median_ms": load * 1e3,
              "rto_ms": rto * 1e3,
              "mathis_bps": tcp_models.mathis_bps(est.mss_bytes, load, loss),
              "padhye_bps": tcp_models.padhye_bps(est.mss_bytes, load, loss, rto, rwnd_max),
              "rwnd_max_bytes": rwnd_max,
              "window_bound_bps": tcp_models.window_bound_bps(rwnd_max, load),
              "bdp_bytes": tcp_models.bdp_bytes(rate, base) if rate else np.nan,
              "queue_delay_ms": (load - base) * 1e3,
              "full_queue_ms": tcp_models.full_queue_ms(queue, rate) if rate and queue
              else np.nan}
    return {c.name: np.array([values[c.name]], dtype=c.dtype) for c in MODELS.columns}


def _rto_s(path) -> float:
    """The median RFC 6298 timeout over the path estimate's samples in time order (srtt and
    rttvar from the first sample, then smoothed: 1/8 and 1/4), at least Linux's 200 ms."""
    estimate = path.table("path")["estimate"][0].split()
    samples = path.table("samples")
    if len(estimate) != 2:
        return max(tcp_models.MIN_RTO_S, 3 * float(path.table("path")["rtt_median_ms"][0]) / 1e3)
    series, direction = estimate
    keep = (samples["direction"] == direction) & ~np.isnan(samples[series])
    r = (samples[series][keep] / 1e3).tolist()   # Python floats: the same doubles, 4x faster
    if not len(r):
        return np.nan
    srtt, var, out, least = r[0], r[0] / 2, [], tcp_models.MIN_RTO_S
    for x in r[1:]:
        var = 0.75 * var + 0.25 * abs(srtt - x)
        srtt = 0.875 * srtt + 0.125 * x
        out.append(max(least, srtt + 4 * var))
    return float(np.median(out)) if out else max(tcp_models.MIN_RTO_S, 3 * r[0])
