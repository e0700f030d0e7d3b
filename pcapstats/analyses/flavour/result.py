"""The flavour analysis: its ``streams`` table, the ``Flavour`` result and the ``flavour``
function (every stream that carried enough data, or the one asked for).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ... import catalogue
from ...batch import analysis
from ...capture import Capture
from ...errors import UsageError
from ...plots.flavour import flavour_figure
from ...render import Shown
from ...results import Result, joined, shown
from ...schema import CAPTURE_POINT_COLUMN, STREAM_COLUMN, UNITLESS, Column, TableSpec
from ...streams import choose_stream, id_ranges, stream_summary
from ..tcpseq import STREAM_NEEDS
from ..tcp_flow import SIDE_DOC
from .stream import StreamFlavour, flavour_stream
from .thresholds import MIN_STREAM_BYTES

LABELS = ("reno", "cubic", "bbr", "unknown")

_C = Column
STREAMS = TableSpec("streams", "one row per TCP stream that carried MIN_STREAM_BYTES or more "
                    "(or the one asked for)", (
    STREAM_COLUMN,
    catalogue.column("flavour", values=LABELS),
    catalogue.column("flavour_confidence", doc="see classify"),
    _C("reason", "str", "the evidence in words; for unknown, why"),
    CAPTURE_POINT_COLUMN.but(doc=SIDE_DOC),
    _C("side_evidence", "str", "how the side was told"),
    _C("data_segments", "int64", "data segments of the stream (re-sent ones included)",
       "segments"),
    _C("duration_s", "float64", "first to last data segment, seconds", "s"),
    catalogue.column("srtt_ms", doc="the cwnd analysis'", optional=False),
    _C("mss_bytes", "int64", "the sender's MSS (cwnd analysis)", "bytes"),
    _C("rwnd_limited_share", "float64", "share of the window samples (outside recovery) "
       "receiver-window-limited", "fraction", optional=True),
    _C("app_silence_share", "float64", "share of the time in gaps > 1 RTT ended by new data "
       "sent long after the last ACK: application-limited", "fraction", optional=True),
    _C("loss_events", "int64", "congestion events: loss episodes, those within one RTT of the "
       "previous merged"),
    _C("loss_rounds", "int64", "round trips (RTT-long intervals) with a re-sent segment in them"),
    _C("loss_response", "float64", "the sender's goodput over what Reno or Cubic could send at "
       "this rate of loss rounds and this RTT (the larger of their response functions): "
       "about 1 or less for a sender that backs off, far above for one that does not",
       UNITLESS, optional=True),
    _C("collapses", "int64", "events whose window fell under COLLAPSE_FACTOR x before "
       "(timeouts)"),
    _C("decrease_events", "int64", "events with a decrease factor that counts (window before "
       ">= MIN_WINDOW_MSS[side] segments, not a collapse)"),
    _C("decrease_factor_median", "float64", "median window after / before over those events",
       UNITLESS, optional=True),
    _C("decrease_factor_iqr", "float64", "its interquartile range", UNITLESS, optional=True),
    _C("backed_off", "int64", "events from BACKOFF_MIN_WINDOW_MSS segments whose window after "
       "is at most CUT_FACTOR x before (stage 1: the sender backs off on loss)"),
    _C("kept_window", "int64", "... at least KEPT_FACTOR x before (did not back off: BBR)"),
    _C("votes_reno", "int64", "decrease votes: events whose window after is nearest Reno's "
       "max(W/2, 2)"),
    _C("votes_cubic", "int64", "... nearest Cubic's max(W x 0.7, 2) segments"),
    _C("votes_bbr", "int64", "... nearest W (no back-off)"),
    _C("loss_frames", "str", "frame of the first re-sent segment (or hole) of each event, "
       "first 8"),
    _C("epochs_fitted", "int64", "growth epochs (between events) with 5+ cwnd-limited samples"),
    _C("growth_votes_reno", "int64", "epochs growing RENO_GROWTH_MIN+ segments per RTT (see "
       "growth_vote)"),
    _C("growth_votes_cubic", "int64", "epochs growing within CUBIC_GROWTH segments per RTT"),
    _C("reno_fit_residual", "float64", "median over epochs of the RMS residual of W0 + a t / "
       "mean window", UNITLESS, optional=True),
    _C("cubic_fit_residual", "float64", "... of W_max + C (t - K)^3, W_max the window before "
       "the epoch's loss", UNITLESS, optional=True),
    _C("reno_slope_mss_per_rtt", "float64", "median fitted Reno growth (Reno: about 1)",
       "segments/RTT", optional=True),
    _C("cubic_c", "float64", "median fitted C (Linux Cubic: 0.4)", "segments/s^3",
       optional=True),
    _C("cubic_k_s", "float64", "median fitted K: seconds from the epoch's start to the "
       "plateau", "s", optional=True),
    _C("ack_clocked_share", "float64", "sender side: share of new data segments sent < "
       "ACK_CLOCK_NS after an ACK arrived (ACK-clocked ~1, paced low)", "fraction",
       optional=True),
    _C("departure_gap_cv", "float64", "sender side: coefficient of variation of the gaps "
       "between new data segments", UNITLESS, optional=True),
    _C("gain_cycling_strength", "float64", "power of the send rate per RTT at period 8 RTTs / "
       "median power", UNITLESS, optional=True),
    _C("gain_cycling_amplitude", "float64", "peak-to-peak of the send rate folded on 8 RTTs / "
       "mean", UNITLESS, optional=True),
    _C("probe_rtt_dips", "int64", "runs of flight <= PROBE_RTT_MSS segments for >= "
       "PROBE_RTT_MIN_S"),
    _C("probe_rtt_ranges_s", "str", "their time ranges, seconds (first 5)"),
    _C("slow_start_exit_frame", "int64", "frame of the first loss event (-1: none)"),
    _C("slow_start_exit_s", "float64", "its time, seconds since the capture's first packet", "s",
       optional=True),
    _C("slow_start_exit_bytes", "float64", "the window before it", "bytes", optional=True),
))


class Flavour(Result):
    """The congestion control of each TCP stream's sender (table ``streams``); its figure
    shows one stream's window with the fitted growth curves (``figure(stream=N)``; by
    default the stream with the most payload).  ``details``: per stream, what the figure
    draws."""
    analysis = "flavour"
    specs = (STREAMS,)
    view = {"streams": (Shown("stream", "stream"), shown("flavour"),
                        shown("flavour_confidence"), Shown("side", "side"),
                        Shown("loss events", "loss_events"),
                        Shown("after/before", "decrease_factor_median", minor=True),
                        Shown("ack-clocked", "ack_clocked_share", minor=True),
                        Shown("reason", "reason", wrap=True))}
    draws = True

    def __init__(self, details: StreamDetails, *, capture: str, notes=()):
        rows = [details.rows[s] for s in details]
        table = {c.name: np.array([r[c.name] for r in rows],
                                  dtype=object if c.dtype == "str" else c.dtype)
                 for c in STREAMS.columns}
        super().__init__({"streams": table}, capture=capture, notes=notes)
        self.details = details

    def _figure(self, ax=None, *, stream: int | None = None, title: str | None = None):
        if not self.details:
            raise UsageError("no stream to draw: none carried enough data to judge")
        if stream is None:
            stream = self.details.drawn
        if stream not in self.details:
            raise UsageError(f"no flavour of TCP stream {stream} here",
                             hint=f"streams judged: {id_ranges(self.details)}")
        return flavour_figure(self.details[stream], ax=ax, title=title)


class StreamDetails(Mapping):
    """Per judged stream, in stream order, what its figure draws (a StreamFlavour), made
    again from the capture when it is asked for: a long stream's window samples take tens of
    MB, and a capture of many such streams would otherwise hold them all (8 streams of 888k
    packets: 230 MB), or one while the next batch of a spilled read is analysed.  Only the
    result of one stream asked for (``keep``) keeps its own.  ``source``: a whole Capture, or
    the capture's path."""

    def __init__(self, source, keep: bool = False):
        self.source, self.keep = source, keep
        self.rows: dict[int, dict] = {}
        self.kept: StreamFlavour | None = None

    def add(self, found: StreamFlavour) -> None:
        self.rows[found.row["stream"]] = found.row
        if self.keep:
            self.kept = found

    @property
    def drawn(self) -> int:
        """The stream a figure shows by default: the most data segments (the first of equals)."""
        return max(self.rows.values(),
                   key=lambda row: (row["data_segments"], -row["stream"]))["stream"]

    def __getitem__(self, stream: int) -> StreamFlavour:
        if stream not in self.rows:
            raise KeyError(stream)
        if self.kept is not None and self.kept.row["stream"] == stream:
            return self.kept
        return flavour(self.source, stream=stream).details.kept

    def __iter__(self):
        return iter(sorted(self.rows))

    def __len__(self) -> int:
        return len(self.rows)


def _join(parts: list[Flavour]) -> Flavour:
    out = joined(parts, {"streams": ("stream",)})
    out.details = StreamDetails(parts[0].details.source)
    for part in parts:
        out.details.rows.update(part.details.rows)
    return out


@analysis(needs=STREAM_NEEDS, by_stream=_join)
def flavour(capture: Capture, *, stream: int | None = None) -> Flavour:
    """One row per TCP stream: every stream that carried MIN_STREAM_BYTES or more (no rows
    when none did), or only ``stream``.  UsageError without TCP."""
    if stream is not None:
        streams = [choose_stream(capture, stream).stream]
    else:
        choose_stream(capture, None)           # one clear error when there is no TCP at all
        tcp = stream_summary(capture, proto="tcp")
        payload = tcp["payload_bytes_a_to_b"] + tcp["payload_bytes_b_to_a"]
        streams = [int(s) for s in tcp["stream"][payload >= MIN_STREAM_BYTES]]
    # made again from the path, not from a partial table (a batch of a spilled read)
    details = StreamDetails(capture.whole_or_path, keep=stream is not None)
    for s in streams:
        details.add(flavour_stream(capture, s))
    return Flavour(details, capture=capture.path)


