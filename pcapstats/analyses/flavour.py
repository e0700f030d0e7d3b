"""Which congestion control the sender ran (reno, cubic, bbr, or unknown), from a capture.

Built on :mod:`pcapstats.analyses.cwnd` (window samples, loss-recovery episodes with the window
before and after, the side the capture was taken on, the receiver's ACKs), itself built on
tcp_analysis.  Nothing here re-derives a window or a loss episode.

**Evidence** (each a function of arrays, tested on series whose answer is known by construction):

- *congestion events* (:func:`congestion_events`): the cwnd analysis' loss episodes, those
  starting within one RTT of the previous one's end merged (one reduction per window of data;
  a receiver-side capture otherwise splits one sender recovery into two);
- *multiplicative decrease* (:func:`decrease_factors`, :func:`vote`): each event's window after
  / before.  Linux Reno leaves max(W/2, 2) segments, Cubic max(0.7 W, 2), BBR restores the
  window it had (no back-off on random loss).  Each event votes for the control whose
  expected window after is nearest the one seen (abstaining within VOTE_MARGIN_MSS), if its
  window before held MIN_WINDOW_MSS[side] segments (smaller windows round the factors into
  each other) and it is not a collapse (after < COLLAPSE_FACTOR x before: a timeout);
- *pacing* (:func:`ack_clocked_share`, sender-side captures only): the share of new data
  segments that left within ACK_CLOCK_NS of an ACK.  Reno and Cubic are ACK-clocked (an ACK
  opens the window and the stack sends at once: 87-100 % on the matrix), BBR paces (4-36 %).
  After the bottleneck (a receiver-side capture) every flow arrives spaced by the link, so
  there is no pacing evidence there;
- *growth between losses* (:func:`growth_fits`): on each epoch's cwnd-limited samples, the Reno
  line W0 + a t and the Cubic curve W_max + C (t - K)^3 (W_max: the window before the epoch's
  loss); RMS residuals and fitted parameters.  Evidence only, not in the rules: Linux Cubic
  grows like Reno ("TCP-friendly region") while its window is small or the RTT short;
- *gain cycling* (:func:`gain_cycling`): the strength of the period-8-RTT component of the send
  rate (BBR's pacing gains 1.25, 0.75, 1 x 6), RTT = the cwnd analysis' smoothed RTT.
  Evidence only: on the matrix Reno's sawtooth scored higher than BBR (medians 6-8 vs 5-6);
- *ProbeRTT* (:func:`probe_rtt_dips`): the flight at or under PROBE_RTT_MSS segments for
  PROBE_RTT_MIN_S or more, nothing re-sent inside.  Evidence only (12 s transfers with random
  loss seldom show one: BBR's min RTT is refreshed before its 10 s expire);
- *slow-start exit*: the first congestion event (frame, time, window before);
- *limits*: receiver-window-limited share (the cwnd analysis' rwnd state), idle share
  (:func:`app_silence_share`: application-limited).

**Rules** (:func:`classify`), in order, every threshold with where it came from beside it:

1. ``unknown`` when the stream is too short, mostly receiver-window-limited, or idle
   (application-limited), saying which.
2. Stage 1, does the sender back off on loss?  Every event from BACKOFF_MIN_WINDOW_MSS
   segments votes "backed off" (after <= CUT_FACTOR x before) or "kept" (>= KEPT_FACTOR);
   a paced sender adds PACING_VOTES "kept" votes, an ACK-clocked one PACING_VOTES "backed
   off" votes; p_bbr = (kept + 1) / (kept + backed + 2).  (Linux BBR always paces, but where
   the RTT is short its pacing rate is the rate the ACKs come back at: on a path with no
   added delay 78-85 % of its segments left at an ACK, and its "kept" events outvoted the
   "backed off" ones 4 to 1: pacing is evidence, not a veto.)  A goodput RESPONSE_FACTOR x
   or more above what Reno or Cubic could send at the flow's rate of loss rounds adds
   RESPONSE_VOTES "kept" votes, or RESPONSE_WEIGHT of the events' votes if more: where the
   windows are noise (1 Gbit/s, no path delay) a thousand events must not drown it.  bbr
   when p_bbr >= MIN_MAJORITY with MIN_VOTES votes (or paced); ``unknown`` when neither side
   reaches MIN_MAJORITY or there are fewer than MIN_VOTES votes (too few loss events).
3. Stage 2, Reno or Cubic: decrease votes (events of MIN_WINDOW_MSS[side] segments or more:
   after nearest max(W/2, 2) or max(0.7 W, 2)) plus growth votes (epochs growing >=
   RENO_GROWTH_MIN or within CUBIC_GROWTH segments per RTT); p = (votes + 1) / (all + 2).
   Where the decrease votes number DECREASES_DECIDE and agree (share >= MIN_MAJORITY), they
   decide the label and p is the larger of their own share and the combined one (issue 16's
   matrix, trial 1: such decrease votes were right for all of 270 flows, growth votes for
   97 %: at the receiver and where the RTT is mostly queue, growth per RTT is blurred); against
   the growth votes they decide only with a share of DECREASES_OVERRULE; fewer agreeing
   decrease votes, or a smaller share, against the combined verdict make it ``unknown``.
   ``unknown`` under MIN_VOTES votes or when p < MIN_MAJORITY (split evidence).
4. confidence = the stage shares multiplied (p_bbr; or (1 - p_bbr) x p) x SIDE_FACTOR[side]
   (a receiver-side capture estimates windows from the receiver's ACKs and the arrivals:
   about one segment blurred, so its votes are fewer and noisier).

Thresholds were chosen on trial 1 of bench/flavour_eval.py's matrix and reported on trials
2-3 (held out); RESPONSE_WEIGHT and DECREASES_OVERRULE were then chosen on trials 2-3 and are
reported on trial 4 (held out); results in bench/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import catalogue
from ..batch import analysis
from ..capture import Capture
from ..clock import GAP_NS, without_long_gaps
from ..errors import UsageError
from ..plots.flavour import flavour_figure
from ..render import Shown
from ..results import Result, joined, shown
from ..schema import Column, TableSpec
from ..streams import choose_stream, id_ranges, stream_names, stream_summary
from .cwnd import SIDES, Cwnd, estimate
from .tcpseq import STREAM_NEEDS
from .tcp_flow import SIDE_DOC

LABELS = ("reno", "cubic", "bbr", "unknown")

# -- thresholds (measured on the tuning split of bench/flavour_eval.py, see bench/README.md) --
MIN_WINDOW_MSS = {"sender": 8, "receiver": 11, "middle": 11, "unknown": 11}
                            # a congestion event's window before must hold this many segments
                            # to vote: below, the votes were right < 75 % of the time on the
                            # tuning split (Reno's after is W/2 rounded down, Cubic's 0.7 W:
                            # 1-2 segments apart, the receiver's estimate ~1 segment high)
BACKOFF_MIN_WINDOW_MSS = 4  # stage 1 (backed off or not) counts events from this window up
CUT_FACTOR = 0.75           # after / before at most this: backed off (Reno 0.5, Cubic 0.7)
KEPT_FACTOR = 0.85          # ... at least this: did not back off (BBR); between: no vote.
                            # Tuning split, events of 4-10 segments: Reno and Cubic "kept"
                            # 0-6 %, BBR (larger windows) "kept" 73-97 %
COLLAPSE_FACTOR = 0.35      # after / before under this: collapse (timeout), not a decrease
VOTE_MARGIN_MSS = 0.5       # the nearest expected window must be nearer by this many segments
MIN_VOTES = 3               # votes (decrease and growth) needed to tell reno from cubic
MIN_MAJORITY = 0.6          # Laplace share a verdict needs at each stage
DECREASES_DECIDE = 5        # agreeing decrease votes, at least this many, decide Reno or Cubic
                            # (issue 16's matrix, trial 1: right for 270 of 270 flows with 5 or
                            # more, 13 of 14 with 3-4)
DECREASES_OVERRULE = 0.8    # ... and where the growth votes say the other, only with this
                            # share (trials 2-3: the two such flows decided under 0.7 were
                            # wrong, the three from 0.84 right)
ACK_CLOCK_NS = 100_000      # a new segment leaving this soon after an ACK was sent by it
CYCLE_GAP_RTTS = 64         # gain cycling: an idle time longer than this many RTTs is cut to it
PACED_SHARE = 0.5           # sender side: ACK-clocked share of new segments at most this: paced
                            # (tuning split: bbr 0.04-0.36)
UNPACED_SHARE = 0.8         # ... at least this: not paced (tuning split: reno, cubic 0.87-1.00)
PACING_VOTES = 3            # a paced sender counts as this many votes for "no back-off"
                            # (pacing alone, no loss: 4/5 = 0.8; every Linux BBR paces, but a
                            # host with the fq qdisc paces Reno and Cubic too: not decisive)
PACED_WEIGHT = 0.5          # ... or this share of its events' votes, if more (issue 16's
                            # matrix, trial 1: a paced BBR's events at RTT 1 ms "kept" 35-56 %
                            # of the time, Reno's and Cubic's 0-7 %)
RESPONSE_FACTOR = 3         # goodput at least this many times what Reno or Cubic could send
                            # at the flow's rate of loss rounds (loss_response): it did not
                            # back off (issue 16's matrix, trial 1: reno and cubic 0.03-2.1,
                            # bbr 0.6-15.5, median 4.9; the receiver-side BBR flows that showed
                            # too few loss episodes to judge, in perpetual recovery: 10-15)
RESPONSE_VOTES = 3          # ... counted as this many votes for "no back-off"
RESPONSE_WEIGHT = 0.5       # ... or this share of its events' votes, if more (trials 2-3:
                            # at 1 Gbit/s with no path delay, the windows of a thousand events
                            # are noise (kept 45-60 % for every cc) while the goodput of BBR
                            # was 5-6x that bound and Reno's and Cubic's 0.5-0.9x; no Reno or
                            # Cubic flow of trials 1-3 went above 2.1x)
GROWTH_MIN_WINDOW_MSS = 3   # an epoch's previous maximum must hold this many segments to vote
GROWTH_MIN_RTTS = 5         # ... and the epoch last this many RTTs
RENO_GROWTH_MIN = 0.7       # growth >= this many segments per RTT: a Reno vote (Reno: +1 per RTT;
                            # tuning split: 10th percentile of Reno epochs 0.62-0.94)
CUBIC_GROWTH = (0.1, 0.55)  # growth in this range: a Cubic vote (Linux Cubic's TCP-friendly
                            # region; tuning split: 10th-90th percentile 0.18-0.52); per-epoch
                            # votes with these bounds were 99 % right on the tuning split
CUBIC_C = 0.4               # RFC 8312's C (segments / s^3): an epoch votes on growth only if
                            # Cubic's own curve starts slower than CUBIC_GROWTH[1] per RTT there
PROBE_RTT_MSS = 4           # BBR's ProbeRTT flight, segments
PROBE_RTT_MIN_S = 0.2       # ... held at least this long
MIN_DATA_SEGMENTS = 200     # shorter: "too short"
MIN_RTTS = 20               # a flow must last this many RTTs
MAX_LIMITED_SHARE = 0.5     # receiver-window-limited share of the samples above this: unknown
IDLE_AFTER_ACK_RTTS = 1.5   # see app_silence_share: the receiver sees data an RTT after its ACK
MAX_IDLE_SHARE = 0.3        # idle share of the flow's time above this: application-limited
IDLE_MIN_S = 0.001          # an idle gap is longer than the RTT and than this (issue 16's
                            # matrix: at 1 Gbit/s with no path delay the RTT is 30-40 us and a
                            # busy sender's scheduling left 30-49 % of the time in such gaps)
SIDE_FACTOR = {"sender": 1.0, "receiver": 0.9, "middle": 0.8, "unknown": 0.8}


MIN_STREAM_BYTES = 65_536   # streams carrying less are not listed by flavour() (nothing to judge)

_C = Column
STREAMS = TableSpec("streams", "one row per TCP stream that carried MIN_STREAM_BYTES or more "
                    "(or the one asked for)", (
    _C("stream", "int64", "tcp.stream index, as Wireshark numbers it"),
    catalogue.column("flavour", values=LABELS),
    catalogue.column("flavour_confidence", doc="see classify"),
    _C("reason", "str", "the evidence in words; for unknown, why"),
    _C("side", "str", SIDE_DOC, values=SIDES),
    _C("side_evidence", "str", "how the side was told"),
    _C("data_segments", "int64", "data segments of the stream (re-sent ones included)",
       "segments"),
    _C("duration_s", "float64", "first to last data segment, seconds", "s"),
    catalogue.column("srtt_ms", doc="the cwnd analysis'", optional=False),
    _C("mss_bytes", "int64", "the sender's MSS (cwnd analysis)", "bytes"),
    _C("rwnd_limited_share", "float64", "share of the window samples (outside recovery) "
       "receiver-window-limited", optional=True),
    _C("app_silence_share", "float64", "share of the time in gaps > 1 RTT ended by new data "
       "sent long after the last ACK: application-limited", optional=True),
    _C("loss_events", "int64", "congestion events: loss episodes, those within one RTT of the "
       "previous merged"),
    _C("loss_rounds", "int64", "round trips (RTT-long intervals) with a re-sent segment in them"),
    _C("loss_response", "float64", "the sender's goodput over what Reno or Cubic could send at "
       "this rate of loss rounds and this RTT (the larger of their response functions): "
       "about 1 or less for a sender that backs off, far above for one that does not",
       optional=True),
    _C("collapses", "int64", "events whose window fell under COLLAPSE_FACTOR x before "
       "(timeouts)"),
    _C("decrease_events", "int64", "events with a decrease factor that counts (window before "
       ">= MIN_WINDOW_MSS[side] segments, not a collapse)"),
    _C("decrease_factor_median", "float64", "median window after / before over those events",
       optional=True),
    _C("decrease_factor_iqr", "float64", "its interquartile range", optional=True),
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
       "mean window", optional=True),
    _C("cubic_fit_residual", "float64", "... of W_max + C (t - K)^3, W_max the window before "
       "the epoch's loss", optional=True),
    _C("reno_slope_mss_per_rtt", "float64", "median fitted Reno growth (Reno: about 1)",
       "segments/RTT", optional=True),
    _C("cubic_c", "float64", "median fitted C (Linux Cubic: 0.4)", "segments/s^3",
       optional=True),
    _C("cubic_k_s", "float64", "median fitted K: seconds from the epoch's start to the "
       "plateau", "s", optional=True),
    _C("ack_clocked_share", "float64", "sender side: share of new data segments sent < "
       "ACK_CLOCK_NS after an ACK arrived (ACK-clocked ~1, paced low)", optional=True),
    _C("departure_gap_cv", "float64", "sender side: coefficient of variation of the gaps "
       "between new data segments", optional=True),
    _C("gain_cycling_strength", "float64", "power of the send rate per RTT at period 8 RTTs / "
       "median power", optional=True),
    _C("gain_cycling_amplitude", "float64", "peak-to-peak of the send rate folded on 8 RTTs / "
       "mean", optional=True),
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
    """Per judged stream, in stream order, what its figure draws (a StreamFlavour).  Only the
    stream drawn by default (the most data segments) is kept; another is made again from the
    capture when it is asked for: a long stream's window samples take tens of MB, and a
    capture of many such streams would otherwise hold them all (8 streams of 888k packets:
    230 MB).  ``source``: a whole Capture, or the capture's path."""

    def __init__(self, source):
        self.source = source
        self.rows: dict[int, dict] = {}
        self.kept: StreamFlavour | None = None

    def add(self, found: StreamFlavour) -> None:
        self.rows[found.row["stream"]] = found.row
        if self.kept is None or _drawn_before(found.row, self.kept.row):
            self.kept = found

    @property
    def drawn(self) -> int:
        """The stream a figure shows by default: the most data segments (the first of equals)."""
        return self.kept.row["stream"]

    def __getitem__(self, stream: int) -> StreamFlavour:
        if stream not in self.rows:
            raise KeyError(stream)
        if self.kept.row["stream"] == stream:
            return self.kept
        return flavour(self.source, stream=stream).details.kept

    def __iter__(self):
        return iter(sorted(self.rows))

    def __len__(self) -> int:
        return len(self.rows)


def _drawn_before(a: dict, b: dict) -> bool:
    return (a["data_segments"], -a["stream"]) > (b["data_segments"], -b["stream"])


def _join(parts: list[Flavour]) -> Flavour:
    out = joined(parts, {"streams": ("stream",)})
    out.details = StreamDetails(parts[0].details.source)
    for part in parts:
        out.details.rows.update(part.details.rows)
        if part.details.kept is not None:
            out.details.add(part.details.kept)
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
    details = StreamDetails(capture if capture.whole is None else capture.path)
    for s in streams:
        details.add(flavour_stream(capture, s))
    return Flavour(details, capture=capture.path)


# -- evidence ------------------------------------------------------------------------------------

def congestion_events(start_s, end_s, before_bytes, after_bytes, rtt_s: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first episode index, window before, window after) of each congestion event: loss
    episodes that start within one RTT of the previous one's end are one event (a sender
    reduces once per window of data, RFC 6582; a receiver-side capture sees two holes of one
    sender recovery as two episodes, the first "after" taken while the sender still recovers)."""
    start, end = np.asarray(start_s, np.float64), np.asarray(end_s, np.float64)
    first, before, after = [], [], []
    for k in range(len(start)):
        if first and not np.isnan(end[k - 1]) and start[k] - end[k - 1] <= rtt_s:
            after[-1] = after_bytes[k]
            continue
        first.append(k)
        before.append(before_bytes[k])
        after.append(after_bytes[k])
    return (np.asarray(first, np.int64), np.asarray(before, np.float64),
            np.asarray(after, np.float64))


def decrease_factors(before_bytes, after_bytes, mss_bytes: int, min_window_mss: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(factor per event, NaN where it does not count; collapsed mask) from the windows
    before and after each congestion event; a window before under ``min_window_mss``
    segments does not count."""
    before = np.asarray(before_bytes, np.float64)
    after = np.asarray(after_bytes, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = after / before
    counted = (before >= min_window_mss * mss_bytes) & np.isfinite(ratio)
    collapsed = counted & (ratio < COLLAPSE_FACTOR)
    return np.where(counted & ~collapsed, ratio, np.nan), collapsed


def expected_after(before_segments) -> dict[str, np.ndarray]:
    """The window each congestion control leaves after a loss, in segments, from the window
    before it (Linux: Reno ssthresh = max(W / 2, 2) and Cubic max(W x 717 / 1024, 2), both
    rounded down; BBR restores the window it had before recovery)."""
    w = np.floor(np.asarray(before_segments, np.float64))
    return {"reno": np.maximum(np.floor(w / 2), 2),
            "cubic": np.maximum(np.floor(w * 717 / 1024), 2),
            "bbr": w}


def vote(before_bytes, after_bytes, mss_bytes: int) -> np.ndarray:
    """Per congestion event: the control whose expected window after (in segments) is nearest
    the one seen, "" when the nearest is not nearer than the runner-up by VOTE_MARGIN_MSS or
    the event does not count (NaN factor)."""
    before = np.asarray(before_bytes, np.float64) / mss_bytes
    after = np.asarray(after_bytes, np.float64) / mss_bytes
    names = np.array(["reno", "cubic", "bbr"])
    exp = expected_after(before)
    dist = np.abs(np.vstack([exp[n] for n in names]) - after)
    order = np.argsort(dist, axis=0)
    rows = np.arange(len(after))
    margin = dist[order[1], rows] - dist[order[0], rows]
    out = names[order[0]].astype(object)
    out[(margin < VOTE_MARGIN_MSS) | np.isnan(after) | np.isnan(before)] = ""
    return out


@dataclass
class GrowthFit:
    """Both growth models fitted on one epoch; residuals are RMS / mean window."""
    reno_residual: float
    cubic_residual: float
    reno_slope_bytes_per_s: float
    reno_w0_bytes: float
    cubic_c: float           # bytes / s^3
    cubic_k_s: float         # time of the plateau (W = W_max) after the epoch's start
    w_max_bytes: float


def growth_fits(t_s, w_bytes, w_max_bytes: float) -> GrowthFit | None:
    """Fit W0 + a t (Reno) and W_max + C (t - K)^3 (Cubic, plateau at the previous maximum)
    to one epoch's window samples, t from the epoch's start.  None under 5 samples."""
    t = np.asarray(t_s, np.float64)
    w = np.asarray(w_bytes, np.float64)
    if len(t) < 5 or np.ptp(t) <= 0:
        return None
    scale = float(np.mean(w))
    slope, w0 = np.polyfit(t, w, 1)
    reno = float(np.sqrt(np.mean((w - (w0 + slope * t)) ** 2)) / scale)
    sse, c, k = _cubic_least_squares(t, w - w_max_bytes)
    cubic = float(np.sqrt(sse / len(t)) / scale)
    return GrowthFit(reno, cubic, float(slope), float(w0), c, k, float(w_max_bytes))


CUBIC_K_STEPS = 81          # plateau times tried, 0 to twice the epoch's length
_FIT_CELLS = 1 << 22        # (K, sample) cells computed at once: bounds the temporaries


def _cubic_least_squares(t, y) -> tuple[float, float, float]:
    """(sse, C, K) of the best y = C (t - K)^3, C >= 0, over CUBIC_K_STEPS values of K (the
    first best on a tie): all of them at once, a block of samples at a time."""
    ks = np.linspace(0.0, 2.0 * t.max(), CUBIC_K_STEPS)
    step = max(1, _FIT_CELLS // len(ks))
    one = len(t) <= step            # one block (most epochs): its cubes serve both passes
    xx, xy = np.zeros(len(ks)), np.zeros(len(ks))
    for a in range(0, len(t), step):
        x = (t[None, a:a + step] - ks[:, None]) ** 3
        xx += np.einsum("ij,ij->i", x, x)
        xy += x @ y[a:a + step]
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(xx > 0, np.maximum(xy / xx, 0.0), 0.0)
    sse = np.zeros(len(ks))
    for a in range(0, len(t), step):
        if not one:                 # made again a block at a time: bounded temporaries
            x = (t[None, a:a + step] - ks[:, None]) ** 3
        sse += (((y[None, a:a + step] - c[:, None] * x)) ** 2).sum(axis=1)
    sse[xx <= 0] = np.inf
    best = int(np.argmin(sse))
    if not np.isfinite(sse[best]):
        return np.inf, 0.0, 0.0
    return float(sse[best]), float(c[best]), float(ks[best])


def growth_vote(fit: GrowthFit, duration_s: float, rtt_s: float, mss_bytes: int) -> str:
    """"reno", "cubic" or "" for one epoch from its growth per RTT (the fitted line's slope):
    Reno adds a segment per RTT, Linux Cubic about 0.4 where its TCP-friendly region rules.
    Abstains on short epochs, tiny windows, and where Cubic's own curve, 3 C K^2 segments/s at
    the start (K = cbrt(W_max (1 - 0.7) / C)), could grow faster than CUBIC_GROWTH[1]."""
    w_max = fit.w_max_bytes / mss_bytes
    if w_max < GROWTH_MIN_WINDOW_MSS or duration_s < GROWTH_MIN_RTTS * rtt_s:
        return ""
    k_s = (w_max * 0.3 / CUBIC_C) ** (1 / 3)
    if 3 * CUBIC_C * k_s ** 2 * rtt_s > CUBIC_GROWTH[1]:
        return ""
    slope = fit.reno_slope_bytes_per_s * rtt_s / mss_bytes
    if slope >= RENO_GROWTH_MIN:
        return "reno"
    if CUBIC_GROWTH[0] <= slope <= CUBIC_GROWTH[1]:
        return "cubic"
    return ""


def ack_clocked_share(data_t_s, ack_t_s) -> float:
    """Share of new data segments that left within ACK_CLOCK_NS after an ACK arrived (sender
    side): about all of them for an ACK-clocked sender (Reno, Cubic: an ACK opens the window,
    the stack sends at once), few for a paced one (BBR sends on its pacing timer)."""
    data, acks = np.asarray(data_t_s, np.float64), np.asarray(ack_t_s, np.float64)
    j = np.searchsorted(acks, data, side="right") - 1
    ok = j >= 0
    if not ok.any():
        return np.nan
    return float(np.mean(data[ok] - acks[j[ok]] < ACK_CLOCK_NS / 1e9))


def departure_gap_cv(t_ns) -> float:
    """Coefficient of variation of the gaps between new data segments (regularity; evidence
    only: on this lab it did not separate paced from ACK-clocked senders, both send pairs)."""
    gaps = np.diff(np.asarray(t_ns, np.int64)).astype(np.float64)
    return float(gaps.std() / gaps.mean()) if len(gaps) > 1 and gaps.mean() > 0 else np.nan


def gain_cycling(t_ns, length_bytes, rtt_ns: int) -> tuple[float, float]:
    """(strength, amplitude) of the period-8 component of the send rate per RTT: the
    power at 1/8 cycle per RTT over the median power of all periods, and the peak-to-peak of
    the rate folded on 8 phases relative to its mean.  NaN under 32 RTTs of data."""
    t = np.asarray(t_ns, np.int64)
    if len(t) < 2 or rtt_ns <= 0:
        return np.nan, np.nan
    t = without_long_gaps(t, CYCLE_GAP_RTTS * rtt_ns)   # idle time is no cycle: bounded bins
    if (t[-1] - t[0]) // rtt_ns > CYCLE_GAP_RTTS * len(t):
        return np.nan, np.nan                  # an RTT too fine for these packets to show one
    bins = ((t - t[0]) // rtt_ns).astype(np.int64)
    rate = np.bincount(bins, weights=np.asarray(length_bytes, np.float64))
    rate = rate[len(rate) // 10:]          # skip startup
    if len(rate) < 32 or rate.mean() <= 0:
        return np.nan, np.nan
    x = rate / rate.mean() - 1.0
    power = np.abs(np.fft.rfft(x)) ** 2
    freq = np.fft.rfftfreq(len(x))
    at = int(np.argmin(np.abs(freq - 0.125)))
    near = power[max(at - 1, 1):at + 2].max()
    strength = float(near / np.median(power[1:])) if np.median(power[1:]) > 0 else np.nan
    n8 = len(x) // 8 * 8
    folded = x[:n8].reshape(-1, 8).mean(axis=0)
    return strength, float(np.ptp(folded))


def probe_rtt_dips(t_s, flight_bytes, resent, mss_bytes: int) -> list[tuple[float, float]]:
    """(start_s, end_s) of the runs where the flight stayed at or under PROBE_RTT_MSS segments
    for at least PROBE_RTT_MIN_S with nothing re-sent (a timeout's slow restart re-sends)."""
    t = np.asarray(t_s, np.float64)
    low = np.asarray(flight_bytes, np.float64) <= PROBE_RTT_MSS * mss_bytes
    resent = np.asarray(resent, bool)
    edges = np.flatnonzero(np.diff(np.r_[0, low.astype(np.int8), 0]))
    a, b = edges[::2], edges[1::2]              # each run of low flight: rows a to b - 1
    resent_before = np.r_[0, np.cumsum(resent)]
    dip = (t[b - 1] - t[a] >= PROBE_RTT_MIN_S) & (resent_before[b] == resent_before[a])
    return list(zip(t[a[dip]].tolist(), t[b[dip] - 1].tolist()))


def loss_response(data_t_s, resent, new_bytes: float, rtt_s: float, mss_bytes: int
                  ) -> tuple[int, float]:
    """(loss rounds, goodput / the most Reno or Cubic could send): a loss round is an RTT-long
    interval of the flow with a re-sent segment in it; p = rounds / new segments is the rate
    of loss events a loss-based sender answers (one decrease a round).  Reno's window
    sqrt(3 / (2 p)) segments (Mathis et al. 1997) and Cubic's 1.054 (RTT^3 / p^3)^(1/4)
    (RFC 8312 5.1, C = 0.4, beta 0.7), each sent once an RTT, bound what they deliver; a
    sender far above the larger has not backed off (BBR).  NaN without a loss round."""
    t = np.asarray(data_t_s, np.float64)
    resent = np.asarray(resent, bool)
    if len(t) < 2 or not rtt_s > 0 or not resent.any():    # NaN: the RTT is not known
        return 0, np.nan
    duration = float(t[-1] - t[0])
    rounds = len(np.unique(((t[resent] - t[0]) // rtt_s).astype(np.int64)))
    p = rounds / max(int((~resent).sum()), 1)
    window = max(np.sqrt(1.5 / p), 1.054 * (rtt_s ** 3 / p ** 3) ** 0.25)   # segments
    most = window * mss_bytes / rtt_s                                      # bytes / s
    return rounds, (float(new_bytes / duration / most) if duration > 0 else np.nan)


def app_silence_share(data_t_s, resent, ack_t_s, rtt_s: float) -> float:
    """Share of the flow's time in gaps of more than one RTT (and IDLE_MIN_S) before a new
    data segment that came more than IDLE_AFTER_ACK_RTTS RTTs after the last ACK: the sender
    had been told and sent nothing (application-limited).  A gap ended by a re-sent segment (a timeout) or by
    a segment sent at an ACK (a window waiting for it; on the receiver side the data follows
    the ACK by one RTT) is not idle.  The flow's time is the sum of its steps forward; a step
    back or a gap the clock module calls a clock's (clock.GAP_NS) counts neither way."""
    t = np.asarray(data_t_s, np.float64)
    acks = np.asarray(ack_t_s, np.float64)
    if len(t) < 2:
        return np.nan
    gap = np.diff(t)
    lived = (gap > 0) & (gap < GAP_NS / 1e9)
    if not gap[lived].sum() > 0:
        return np.nan
    rtt_s = max(rtt_s, IDLE_MIN_S)          # shorter silences are the host's, not the app's
    # the gaps long enough, ended by new data; of those, the ones long after the last ACK
    long = np.flatnonzero(lived & (gap > rtt_s) & ~np.asarray(resent, bool)[1:])
    end = t[1:][long]
    if len(acks):
        j = np.searchsorted(acks, end, side="right") - 1
        since_ack = np.where(j >= 0, end - acks[np.maximum(j, 0)], np.inf)
    else:                                   # no window sample at all: nothing to wait for
        since_ack = np.full(len(long), np.inf)
    idle = long[since_ack > IDLE_AFTER_ACK_RTTS * rtt_s]
    return float(gap[idle].sum() / gap[lived].sum())


# -- one stream ----------------------------------------------------------------------------------

@dataclass
class StreamFlavour:
    """The row of one stream plus what its figure draws (the cwnd result and the fits)."""
    row: dict
    cwnd: Cwnd
    epochs: list = field(default_factory=list)   # (t0_s, t1_s, GrowthFit) per epoch fitted
    event_starts_s: list = field(default_factory=list)  # start of each congestion event


def flavour_stream(cap: Capture, stream: int) -> StreamFlavour:
    """Evidence and verdict for one TCP stream (see the module docstring)."""
    cw = estimate(cap, stream)
    s, losses, flight = cw.samples, cw.losses, cw.flight
    mss, rtt_s = max(cw.mss_bytes, 1), cw.rtt_s
    t0 = cap.first_time_ns
    data_t_ns = (flight["time_s"] * 1e9).astype(np.int64) + t0
    new = ~np.asarray(flight["resent"], bool)
    new_t_ns = data_t_ns[new]
    states = s["state"]
    n_out = max(int((states != "recovery").sum()), 1)

    first, before, after = congestion_events(
        losses["start_s"], losses["end_s"],
        losses["cwnd_before_bytes"], losses["cwnd_after_bytes"], rtt_s)
    min_window = MIN_WINDOW_MSS.get(cw.side, MIN_WINDOW_MSS["unknown"])
    factors, collapsed = decrease_factors(before, after, mss, min_window)
    coarse, _ = decrease_factors(before, after, mss, BACKOFF_MIN_WINDOW_MSS)
    counted = ~np.isnan(factors)
    ballots = vote(np.where(counted, before, np.nan), np.where(counted, after, np.nan), mss)
    votes = {name: int((ballots == name).sum()) for name in ("reno", "cubic", "bbr")}
    epochs = _epochs(s, losses, mss, GROWTH_MIN_WINDOW_MSS)
    fits = [f for _, _, f in epochs]
    growth = [growth_vote(f, t1 - t0, rtt_s, mss) for t0, t1, f in epochs]
    dips = probe_rtt_dips(flight["time_s"], flight["bytes_in_flight"], flight["resent"], mss)
    new_lengths = cap.column("tcp_len")[cw.flight_rows[new]].astype(np.float64)
    strength, amplitude = gain_cycling(new_t_ns, new_lengths, int(rtt_s * 1e9))
    duration_s = float((data_t_ns[-1] - data_t_ns[0]) / 1e9) if len(data_t_ns) > 1 else 0.0
    row = {
        "stream": cw.stream,
        "side": cw.side,
        "side_evidence": cw.side_evidence,
        "data_segments": int(len(flight["time_s"])),
        "duration_s": duration_s,
        "srtt_ms": rtt_s * 1e3,
        "mss_bytes": cw.mss_bytes,
        "rwnd_limited_share": float((states == "rwnd").sum() / n_out),
        "app_silence_share": app_silence_share(flight["time_s"], ~new, cw.rwnd["time_s"],
                                 rtt_s),
        "loss_events": int(len(first)),
        **dict(zip(("loss_rounds", "loss_response"),
                   loss_response(flight["time_s"], ~new, new_lengths.sum(),
                                 rtt_s if cw.rtt_from != "default" else np.nan, mss))),
        "collapses": int(collapsed.sum()),
        "decrease_events": int((~np.isnan(factors)).sum()),
        "decrease_factor_median": _nanmedian(factors),
        "decrease_factor_iqr": _nan_iqr(factors),
        "backed_off": int((coarse <= CUT_FACTOR).sum()),
        "kept_window": int((coarse >= KEPT_FACTOR).sum()),
        "votes_reno": votes["reno"], "votes_cubic": votes["cubic"], "votes_bbr": votes["bbr"],
        "loss_frames": _frames(losses["start_frame"][first]),
        "epochs_fitted": len(fits),
        "growth_votes_reno": growth.count("reno"),
        "growth_votes_cubic": growth.count("cubic"),
        "reno_fit_residual": _nanmedian([f.reno_residual for f in fits]),
        "cubic_fit_residual": _nanmedian([f.cubic_residual for f in fits]),
        "reno_slope_mss_per_rtt": _nanmedian([f.reno_slope_bytes_per_s * rtt_s / mss
                                              for f in fits]),
        "cubic_c": _nanmedian([f.cubic_c / mss for f in fits]),   # segments / s^3
        "cubic_k_s": _nanmedian([f.cubic_k_s for f in fits]),
        "ack_clocked_share": (ack_clocked_share(flight["time_s"][new],
                                                cw.rwnd["time_s"])
                              if cw.side == "sender" else np.nan),
        "departure_gap_cv": departure_gap_cv(new_t_ns) if cw.side == "sender" else np.nan,
        "gain_cycling_strength": strength,
        "gain_cycling_amplitude": amplitude,
        "probe_rtt_dips": len(dips),
        "probe_rtt_ranges_s": "; ".join(f"{a:.2f}-{b:.2f}" for a, b in dips[:5]),
        "slow_start_exit_frame": int(losses["start_frame"][0]) if len(losses["start_s"]) else -1,
        "slow_start_exit_s": float(losses["start_s"][0]) if len(losses["start_s"]) else np.nan,
        "slow_start_exit_bytes": (float(losses["cwnd_before_bytes"][0]) if len(losses["start_s"])
                                  else np.nan),
    }
    row.update(classify(row))
    return StreamFlavour(row, Cwnd(cw, capture=cap.path,
                                   name=stream_names(cap).get(("tcp", stream), "")), epochs,
                         [float(x) for x in losses["start_s"][first]])


def _epochs(samples, losses, mss: int, min_window_mss: int) -> list:
    """(t0_s, t1_s, GrowthFit) for each stretch of cwnd-limited samples between the end of one
    loss episode and the start of the next; W_max = the window before the first."""
    t = samples["sender_time_s"]
    w = np.asarray(samples["cwnd_bytes"], np.float64)
    out = []
    starts = losses["start_s"]
    ends = losses["end_s"]
    before = losses["cwnd_before_bytes"]
    windowed = np.flatnonzero(~np.isnan(w))     # the cwnd-limited samples, by time:
    order = windowed[np.argsort(t[windowed], kind="stable")]   # one sort, a search an epoch
    by_time = t[order]
    for k in range(len(starts)):
        if np.isnan(ends[k]) or before[k] < min_window_mss * mss:
            continue
        stop = starts[k + 1] if k + 1 < len(starts) else np.inf
        keep = np.sort(order[np.searchsorted(by_time, ends[k], side="right"):
                             np.searchsorted(by_time, stop, side="left")])
        fit = growth_fits(t[keep] - ends[k], w[keep], before[k])
        if fit is not None:
            out.append((float(ends[k]), float(min(stop, t[keep].max())), fit))
    return out


def _frames(frames, limit: int = 8) -> str:
    f = [str(int(x)) for x in frames]
    return " ".join(f[:limit]) + (f" ... ({len(f)})" if len(f) > limit else "")


def _nanmedian(values) -> float:
    v = np.asarray(values, np.float64)
    v = v[~np.isnan(v)]
    return float(np.median(v)) if len(v) else np.nan


def _nan_iqr(values) -> float:
    v = np.asarray(values, np.float64)
    v = v[~np.isnan(v)]
    return float(np.subtract(*np.percentile(v, [75, 25]))) if len(v) else np.nan


def classify(row: dict) -> dict:
    """``flavour``, ``flavour_confidence`` and ``reason`` from a row's evidence: the rules of
    the module docstring, in order."""
    rtt_s = row["srtt_ms"] / 1e3
    if row["data_segments"] < MIN_DATA_SEGMENTS or row["duration_s"] < MIN_RTTS * rtt_s:
        return _unknown(f"too short: {row['data_segments']} data segments over "
                        f"{row['duration_s']:.2f} s (need {MIN_DATA_SEGMENTS} and "
                        f"{MIN_RTTS} RTTs of {row['srtt_ms']:.1f} ms)")
    if row["rwnd_limited_share"] > MAX_LIMITED_SHARE:
        return _unknown(f"receiver-window-limited {row['rwnd_limited_share']:.0%} of the time: "
                        "the sender's own window never showed")
    if row["app_silence_share"] > MAX_IDLE_SHARE:
        return _unknown(f"application-limited: the sender was idle {row['app_silence_share']:.0%} "
                        "of the time (gaps longer than one RTT after the last ACK)")
    sender = row["side"] == "sender"
    clocked = row["ack_clocked_share"]
    paced = bool(sender and clocked <= PACED_SHARE)
    ack_clocked = bool(sender and clocked >= UNPACED_SHARE)
    kept, cut = row["kept_window"], row["backed_off"]
    reno = row["votes_reno"] + row["growth_votes_reno"]
    cubic = row["votes_cubic"] + row["growth_votes_cubic"]
    pacing = (f"paced ({clocked:.0%} of new segments sent at an ACK)" if paced else
              f"ACK-clocked ({clocked:.0%} sent at an ACK)" if ack_clocked else
              f"pacing unclear ({clocked:.0%} sent at an ACK)" if sender else
              "pacing not visible on this side")
    if row["loss_response"] == row["loss_response"]:      # not NaN
        pacing += (f"; goodput {row['loss_response']:.1f} x what Reno or Cubic could send at "
                   f"{row['loss_rounds']} loss rounds")
    text = (f"{cut} decreases backed off, {kept} did not; decrease votes reno "
            f"{row['votes_reno']}, cubic {row['votes_cubic']}; growth votes reno "
            f"{row['growth_votes_reno']}, cubic {row['growth_votes_cubic']}; {pacing}")
    side_factor = SIDE_FACTOR.get(row["side"], SIDE_FACTOR["unknown"])
    # stage 1: does the sender back off on loss?  (pacing counts as votes either way)
    pacing_votes = max(PACING_VOTES, PACED_WEIGHT * (kept + cut)) if paced else \
        PACING_VOTES * ack_clocked
    unbowed = bool(row["loss_response"] >= RESPONSE_FACTOR)   # NaN: False
    response_votes = max(RESPONSE_VOTES, RESPONSE_WEIGHT * (kept + cut)) * unbowed
    p_bbr = (kept + 1 + pacing_votes * paced + response_votes) / (
        kept + cut + 2 + pacing_votes + response_votes)
    if p_bbr >= MIN_MAJORITY and (kept + cut >= MIN_VOTES or paced or unbowed):
        return _verdict("bbr", p_bbr * side_factor, text)
    if 1 - p_bbr < MIN_MAJORITY or (kept + cut < MIN_VOTES and not ack_clocked):
        if kept + cut < MIN_VOTES:
            return _unknown(f"too few loss events: {kept + cut} with a window large enough to "
                            f"judge ({row['loss_events']} in all, {row['collapses']} timeouts); "
                            + text)
        return _unknown("evidence split on backing off: " + text)
    # stage 2: Reno or Cubic: by decreases and growth together, or by the decreases alone
    # where they agree among themselves, whichever says more (growth per RTT is the blurred
    # evidence: it may weaken agreeing decreases, never overrule them)
    if reno + cubic < MIN_VOTES:
        return _unknown("too few loss events and growth epochs to tell reno from cubic: " + text)
    decrease_reno, decrease_cubic = row["votes_reno"], row["votes_cubic"]
    p_both = (reno + 1) / (reno + cubic + 2)
    p_decrease = (decrease_reno + 1) / (decrease_reno + decrease_cubic + 2)
    decrease_share = max(p_decrease, 1 - p_decrease)
    agree = decrease_reno + decrease_cubic >= MIN_VOTES and decrease_share >= MIN_MAJORITY
    against = agree and (p_decrease >= 0.5) != (p_both >= 0.5)
    if agree and decrease_reno + decrease_cubic >= DECREASES_DECIDE and \
            (decrease_share >= DECREASES_OVERRULE or not against):
        p_reno = p_decrease if against else \
            (max(p_both, p_decrease) if p_decrease >= 0.5 else min(p_both, p_decrease))
    elif against:
        return _unknown("the decreases and the growth disagree: " + text)
    else:
        p_reno = p_both
    label, p = ("reno", p_reno) if p_reno >= 0.5 else ("cubic", 1 - p_reno)
    if p < MIN_MAJORITY:
        return _unknown("evidence split between reno and cubic: " + text)
    return _verdict(label, (1 - p_bbr) * p * side_factor, text)


def _verdict(label: str, confidence: float, reason: str) -> dict:
    return {"flavour": label, "flavour_confidence": round(float(confidence), 3),
            "reason": reason}


def _unknown(reason: str) -> dict:
    return {"flavour": "unknown", "flavour_confidence": np.nan, "reason": reason}
