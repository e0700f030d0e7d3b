"""Every threshold of flavour's evidence and rules, with where it came from beside it.

   about one segment blurred, so its votes are fewer and noisier).

Thresholds were chosen on trial 1 of bench/flavour_eval.py's matrix and reported on trials
"""

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
