"""The rules that turn a stream's evidence into a verdict (``classify``), in order, every
threshold named (``thresholds``, with where it came from).

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
"""

from __future__ import annotations

import numpy as np

from .thresholds import (DECREASES_DECIDE, DECREASES_OVERRULE, MAX_IDLE_SHARE, MAX_LIMITED_SHARE,
                         MIN_DATA_SEGMENTS, MIN_MAJORITY, MIN_RTTS, MIN_VOTES, PACED_SHARE,
                         PACED_WEIGHT, PACING_VOTES, RESPONSE_FACTOR, RESPONSE_VOTES,
                         RESPONSE_WEIGHT, SIDE_FACTOR, UNPACED_SHARE)


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
