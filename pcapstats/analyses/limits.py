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

import numpy as np

from .. import catalogue
from ..batch import analysis, data_streams, stacked_streams
from ..capture import Capture
from ..errors import Note, UsageError
from ..render import Shown
from ..results import Result, joined, shown
from ..schema import Column, TableSpec
from ..streams import DIRECTIONS, stream_names
from .cwnd import LIMITED, LIMITS, SIDES, Cwnd, estimate
from .tcp_analysis import STREAM_NEEDS

FEWEST_SEGMENTS = 10      # a stream with fewer data segments has no limit worth a row
UNDISTINGUISHED = {"receiver": "sender and cwnd: a sender held by itself below the path's "
                               "rate arrives as one held by its window (sender_share counts "
                               "its silences only)"}
_C = Column
STREAMS = TableSpec("streams", "one row per TCP stream with data: what held its sender back", (
    _C("stream", "int64", "tcp.stream index, as Wireshark numbers it"),
    _C("side", "str", "where the capture was taken: sender, receiver (of the data), middle or "
       "unknown (analysed as the sender)", values=SIDES),
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


class Limits(Result):
    """What held each TCP stream's sender back (``streams``) and when (``limited``)."""
    analysis = "limits"
    specs = (STREAMS, LIMITED)
    draws = True
    view = {"streams": (Shown("stream", "stream"), Shown("side", "side"), shown("goodput_bps"),
                        shown("limit"), *(shown(f"{limit}_share") for limit in LIMITS),
                        Shown("undistinguished", "undistinguished", wrap=True, minor=True))}
    legend = {"streams": "shares of the stream's time from its first window sample to its "
                         "last; limit: the largest.  `pcapstats columns limits` defines each."}

    def __init__(self, tables, *, capture: str, cwnds: list[Cwnd], notes=()):
        super().__init__(tables, capture=capture, notes=notes)
        self.cwnds = {c.stream: c for c in cwnds}       # each stream's estimate, for figures

    def _figure(self, ax=None, *, stream: int | None = None, **options):
        from ..plots.limits import limits_figure  # lazy: matplotlib only when a figure is drawn
        return limits_figure(self, ax=ax, stream=stream, **options)


def _join(parts: list[Limits]) -> Limits:
    out = joined(parts, {"streams": ("stream",), "limited": ("stream", "start_s")})
    out.cwnds = {k: v for p in parts for k, v in p.cwnds.items()}
    return out


@analysis(needs=STREAM_NEEDS, by_stream=_join)
def limits(capture: Capture, *, stream: int | None = None, side: str = "auto") -> Limits:
    """What held the sender of each TCP stream with data back (of one with ``stream``);
    ``side`` forces "sender" or "receiver" when the handshake cannot tell."""
    ids = [stream] if stream is not None else data_streams(capture)
    done = {}
    for s in ids:
        try:
            done[s] = (s, estimate(capture, s, side=side))
        except UsageError as e:
            if stream is not None:
                raise
            done[s] = e
    kept = [s for s in ids if isinstance(done[s], tuple)]
    if stream is None:
        short = [s for s in kept if done[s][1].flight["time_s"].size < FEWEST_SEGMENTS]
        kept = [s for s in kept if s not in short] or kept
    results = [_result(capture, *done[s]) for s in kept]
    if not results:
        return stacked_streams(capture.path, ids, done)        # the one clear error
    out = results[0] if len(results) == 1 else _join(results)
    out.notes += [Note("left out", about=f"stream {s}", detail=str(done[s])) for s in ids
                  if not isinstance(done[s], tuple)]
    return out


def _result(capture: Capture, s: int, est) -> Limits:
    cw = Cwnd(est, capture=capture.path, name=stream_names(capture).get(("tcp", s), ""))
    runs = cw.table("limited")
    summary = cw.table("summary")
    flight = est.flight
    new = ~np.asarray(flight["resent"], bool)
    payload = capture.column("tcp_len")[est.flight_rows].astype(np.int64)
    t = flight["time_s"]
    span = float(t.max() - t.min()) if len(t) else 0.0
    goodput = 8 * float(payload[new].sum()) / span if span > 0 else np.nan
    shares = {f"{limit}_share": float(summary[f"{limit}_share"][0]) for limit in LIMITS}
    largest = max(LIMITS, key=lambda k: shares[f"{k}_share"]
                  if shares[f"{k}_share"] == shares[f"{k}_share"] else -1)
    row = {"stream": s, "side": est.side, "data_direction": DIRECTIONS[est.data_direction],
           "duration_s": float((runs["end_s"] - runs["start_s"]).sum()),
           "goodput_bps": goodput, "limit": largest, **shares,
           "undistinguished": UNDISTINGUISHED.get(est.analysed_as, "")}
    table = {c.name: np.array([row[c.name]], dtype=object if c.dtype == "str" else c.dtype)
             for c in STREAMS.columns}
    notes = [n for n in cw.notes]
    if est.analysed_as == "receiver":
        notes.append(Note("at the receiver: sender and cwnd limits look alike",
                          about=f"stream {s}", detail=UNDISTINGUISHED["receiver"]))
    return Limits({"streams": table, "limited": runs}, capture=capture.path, cwnds=[cw],
                  notes=notes)
