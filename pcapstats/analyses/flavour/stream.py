"""One stream's evidence and verdict (``flavour_stream``): the cwnd analysis' samples and loss
episodes turned into the evidence (``evidence``), weighed by the rules (``rules``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...capture import Capture
from ...streams import stream_names
from ..cwnd import Cwnd, CwndEstimate, estimate
from .evidence import (ack_clocked_share, app_silence_share, congestion_events, decrease_factors,
                       departure_gap_cv, gain_cycling, growth_fits, growth_vote, loss_response,
                       probe_rtt_dips, vote)
from .rules import classify
from .thresholds import (BACKOFF_MIN_WINDOW_MSS, CUT_FACTOR, GROWTH_MIN_WINDOW_MSS, KEPT_FACTOR,
                         MIN_WINDOW_MSS)


@dataclass
class StreamFlavour:
    """The row of one stream plus what its figure draws (the cwnd result, made from the
    estimate when first asked for: a result of every stream keeps only the rows, and a Cwnd
    adds a stream column to each of its per-segment tables; and the fits)."""
    row: dict
    estimate: CwndEstimate
    capture: str | None                          # the path the Cwnd names
    name: str                                    # the stream's endpoints (stream_names)
    epochs: list = field(default_factory=list)   # (t0_s, t1_s, GrowthFit) per epoch fitted
    event_starts_s: list = field(default_factory=list)  # start of each congestion event
    _cwnd: Cwnd | None = field(default=None, repr=False)

    @property
    def cwnd(self) -> Cwnd:
        if self._cwnd is None:
            self._cwnd = Cwnd(self.estimate, capture=self.capture, name=self.name)
        return self._cwnd


def flavour_stream(cap: Capture, stream: int) -> StreamFlavour:
    """Evidence and verdict for one TCP stream (see evidence.py and rules.py)."""
    cw = estimate(cap, stream)
    s, losses, flight = cw.samples, cw.losses, cw.flight
    mss, rtt_s = max(cw.mss_bytes, 1), cw.rtt_s
    t0 = cap.first_time_ns
    new = ~np.asarray(flight["resent"], bool)
    # the new segments' times in ns (and the first and last segment's), not every segment's:
    # each an array of 8 bytes a data segment held through the evidence
    new_t_ns = (flight["time_s"][new] * 1e9).astype(np.int64)
    new_t_ns += t0
    ends_ns = (flight["time_s"][[0, -1]] * 1e9).astype(np.int64) + t0 if len(new) else None
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
    new_lengths = cap.column("tcp_len")[cw.flight_rows[new]]     # uint32: made float where read
    new_bytes = float(new_lengths.sum(dtype=np.int64))             # (exact, as the float sum)
    gaps_cv = departure_gap_cv(new_t_ns) if cw.side == "sender" else np.nan
    # the last use of the new segments' times: binned in their own array
    strength, amplitude = gain_cycling(new_t_ns, new_lengths, int(rtt_s * 1e9), own=True)
    del new_t_ns
    duration_s = float((ends_ns[-1] - ends_ns[0]) / 1e9) if len(new) > 1 else 0.0
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
                   loss_response(flight["time_s"], ~new, new_bytes,
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
        "departure_gap_cv": gaps_cv,
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
    return StreamFlavour(row, cw, cap.path, stream_names(cap).get(("tcp", stream), ""), epochs,
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

