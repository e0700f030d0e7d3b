"""What theory says a TCP sender can get, from the numbers a capture gives: the formulas only.

- **Mathis** (Mathis, Semke, Mahdavi and Ott, CCR 1997): a Reno sender losing a share ``p`` of
  its segments, with a round trip of ``rtt_s``, keeps about MSS / RTT x sqrt(3/2) / sqrt(p)
  (bits/s: x 8);
- **Padhye** (Padhye, Firoiu, Towsley and Kurose, SIGCOMM 1998, their full model with
  timeouts): packets/s = min(Wmax / RTT, 1 / (RTT sqrt(2bp/3) + T0 min(1, 3 sqrt(3bp/8))
  p (1 + 32 p^2))), ``b`` segments acknowledged by one ACK (2: delayed ACKs), ``T0`` the
  retransmission timeout, ``Wmax`` the receiver's largest window in segments;
- the **window bound**: a sender can have no more than the receiver's window unacknowledged,
  so it gets at most window x 8 / RTT;
- the **bandwidth-delay product**: rate x RTT / 8 bytes must be in flight to fill a path;
  a window below it caps the rate (what window scaling is for: without it 65535 bytes);
- **queueing delay**: the RTT under load less the base RTT, against what a full queue holds
  (its limit in bytes x 8 / the bottleneck rate).
"""

from __future__ import annotations

import math

SQRT_3_2 = math.sqrt(1.5)
DELAYED_ACK = 2          # Padhye's b: segments a Linux receiver acknowledges per ACK, mostly
UNSCALED_WINDOW = 65535  # the largest window without window scaling (RFC 7323)
MIN_RTO_S = 0.2          # Linux's smallest retransmission timeout (TCP_RTO_MIN)


def mathis_bps(mss_bytes: float, rtt_s: float, loss: float) -> float:
    """The Mathis bound in bits/s (NaN without loss or a round trip)."""
    if not (loss > 0 and rtt_s > 0):
        return math.nan
    return 8 * mss_bytes / rtt_s * SQRT_3_2 / math.sqrt(loss)


def padhye_bps(mss_bytes: float, rtt_s: float, loss: float, rto_s: float,
               window_bytes: float = math.inf, acked_per_ack: int = DELAYED_ACK) -> float:
    """Padhye's full model in bits/s, timeouts included (NaN without loss or a round trip);
    ``window_bytes``: the receiver's largest window (its bound, Wmax / RTT)."""
    if not (loss > 0 and rtt_s > 0):
        return math.nan
    b, p = acked_per_ack, loss
    per_s = 1 / (rtt_s * math.sqrt(2 * b * p / 3)
                 + rto_s * min(1.0, 3 * math.sqrt(3 * b * p / 8)) * p * (1 + 32 * p * p))
    bound = window_bytes / mss_bytes / rtt_s if window_bytes < math.inf else math.inf
    return 8 * mss_bytes * min(per_s, bound)


def window_bound_bps(window_bytes: float, rtt_s: float) -> float:
    """The most a window lets through in bits/s: window x 8 / RTT."""
    return 8 * window_bytes / rtt_s if rtt_s > 0 else math.nan


def bdp_bytes(rate_bps: float, rtt_s: float) -> float:
    """The bandwidth-delay product in bytes: what must be in flight to fill the path."""
    return rate_bps * rtt_s / 8


def full_queue_ms(queue_bytes: float, rate_bps: float) -> float:
    """What a full queue of ``queue_bytes`` adds to the round trip at ``rate_bps``, in ms."""
    return 8e3 * queue_bytes / rate_bps if rate_bps > 0 else math.nan
