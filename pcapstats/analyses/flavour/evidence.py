"""The evidence flavour weighs, each a function of arrays (tested on series whose answer is
known by construction); ``stream`` gathers it for one stream, ``rules`` weighs it.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...clock import GAP_NS, without_long_gaps
from .thresholds import (ACK_CLOCK_NS, COLLAPSE_FACTOR, CUBIC_C, CUBIC_GROWTH, CYCLE_GAP_RTTS,
                         GROWTH_MIN_RTTS, GROWTH_MIN_WINDOW_MSS, IDLE_AFTER_ACK_RTTS, IDLE_MIN_S,
                         PROBE_RTT_MIN_S, PROBE_RTT_MSS, RENO_GROWTH_MIN, VOTE_MARGIN_MSS)


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


def gain_cycling(t_ns, length_bytes, rtt_ns: int, *, own: bool = False
                 ) -> tuple[float, float]:
    """(strength, amplitude) of the period-8 component of the send rate per RTT: the
    power at 1/8 cycle per RTT over the median power of all periods, and the peak-to-peak of
    the rate folded on 8 phases relative to its mean.  NaN under 32 RTTs of data."""
    t = np.asarray(t_ns, np.int64)
    if len(t) < 2 or rtt_ns <= 0:
        return np.nan, np.nan
    # idle time is no cycle: bounded bins (``own``: the caller's int64 times written over)
    t = without_long_gaps(t, CYCLE_GAP_RTTS * rtt_ns, in_place=own)
    if (t[-1] - t[0]) // rtt_ns > CYCLE_GAP_RTTS * len(t):
        return np.nan, np.nan                  # an RTT too fine for these packets to show one
    bins = t                               # without_long_gaps' array: binned in place
    bins -= t[0]
    np.floor_divide(bins, rtt_ns, out=bins)
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
    # (int8 steps and int32 counts: a long flow's data segments, not 8 bytes each in copies)
    edges = np.flatnonzero(np.diff(low.astype(np.int8), prepend=np.int8(0), append=np.int8(0)))
    a, b = edges[::2], edges[1::2]              # each run of low flight: rows a to b - 1
    resent_before = np.zeros(len(resent) + 1, np.int32 if len(resent) < 1 << 31 else np.int64)
    np.cumsum(resent, out=resent_before[1:])
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

