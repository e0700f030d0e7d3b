"""The few statistics more than one module needs: Student's t, least squares, a mean's interval,
the rate a train of packets arrived at.

Plain numpy and math, at the bottom of the package (no scipy: it would be a dependency for three
functions).  The delay model fits its line with :func:`ols`; a study aggregates trials with
:func:`mean_interval`.  Both take Student's t from :func:`t_quantile`.  The delay model times
its answers' arrival, and the lab the packets leaving its bottleneck back to back, with
:func:`train_rate` and :func:`median_rate`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile, exact to 1e-12 for whole degrees of freedom up to EXACT_DF (the
    distribution function in closed form, inverted by bisection); above that a Cornish-Fisher
    expansion of the normal quantile (within 1e-8 there)."""
    if df <= EXACT_DF and df == int(df):
        if p == 0.5:
            return 0.0
        sign = 1.0 if p > 0.5 else -1.0
        target = p if p > 0.5 else 1 - p
        lo, hi = 0.0, 1.0
        while t_cdf(hi, int(df)) < target:
            hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if t_cdf(mid, int(df)) < target else (lo, mid)
            if hi - lo < 1e-13 * max(hi, 1.0):
                break
        return sign * (lo + hi) / 2
    z = _normal_quantile(p)
    v = float(df)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z)
            / (92160 * v ** 4))


EXACT_DF = 1_000


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` whole degrees of freedom, in closed form
    (Abramowitz and Stegun 26.7.3-4: a finite series in cos(theta), theta = atan(t / sqrt(df)))."""
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:                                   # odd
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for k in range(3, df - 1, 2):        # cos^(k) terms, k = 3, 5, ..., df - 2
                term *= c2 * (k - 1) / k
                total += term
        inside = 2 / math.pi * (theta + s * total)
    else:                                        # even
        term = total = 1.0
        for k in range(2, df - 1, 2):            # cos^(k) terms, k = 2, 4, ..., df - 2
            term *= c2 * (k - 1) / k
            total += term
        inside = s * total
    return 0.5 + inside / 2 if t >= 0 else 0.5 - inside / 2


def _normal_quantile(p: float) -> float:
    """The standard normal quantile by bisection on erf (exact to 1e-12)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def ols(x: np.ndarray, y: np.ndarray) -> dict:
    """Least squares y = a*x + b, with 95 % confidence intervals (Student's t) and r^2.  Keys
    are the delay model's column names (a_ms_per_byte, b_ms, a_low ... r2)."""
    n = len(x)
    xm, ym = x.mean(), y.mean()
    sxx = ((x - xm) ** 2).sum()
    a = float(((x - xm) * (y - ym)).sum() / sxx) if sxx > 0 else float("nan")
    b = float(ym - a * xm)
    residual = y - (a * x + b)
    sst = ((y - ym) ** 2).sum()
    out = {"a_ms_per_byte": a, "b_ms": b,
           "r2": float(1 - (residual ** 2).sum() / sst) if sst > 0 else float("nan")}
    if n > 2 and sxx > 0:
        s2 = (residual ** 2).sum() / (n - 2)
        t = t_quantile(0.975, n - 2)
        da = t * math.sqrt(s2 / sxx)
        db = t * math.sqrt(s2 * (1 / n + xm ** 2 / sxx))
        out.update(a_low=a - da, a_high=a + da, b_low=b - db, b_high=b + db)
    else:
        out.update(a_low=np.nan, a_high=np.nan, b_low=np.nan, b_high=np.nan)
    return out


@dataclass(frozen=True)
class MeanInterval:
    """n values' mean, sample standard deviation (n - 1 in the denominator) and the half-width
    of the mean's 95 % confidence interval (Student's t, n - 1 degrees of freedom).  With one
    value the spread and the interval are NaN; with none, everything but n."""
    n: int
    mean: float
    sd: float
    ci95: float


def mean_interval(values) -> MeanInterval:
    """The MeanInterval of the values that are not NaN."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return MeanInterval(0, math.nan, math.nan, math.nan)
    mean = float(v.mean())
    if n == 1:
        return MeanInterval(1, mean, math.nan, math.nan)
    sd = float(v.std(ddof=1))
    return MeanInterval(n, mean, sd, t_quantile(0.975, n - 1) * sd / math.sqrt(n))


MOST_TRIALS = 100_000     # past this a wanted interval is out of a study's reach


def trials_for(sd: float, half_width: float) -> float:
    """The fewest trials n (2 or more) whose mean's 95 % interval, t(0.975, n - 1) x sd /
    sqrt(n), is no wider than ``half_width``, taking ``sd`` as the spread they will have;
    NaN when sd is unknown, when a spread cannot be narrowed to a width of 0, or when more
    than MOST_TRIALS would be needed.  The half-width falls with n, so a bisection finds it."""
    if not (sd == sd and half_width == half_width) or sd < 0 or half_width < 0:
        return math.nan
    if sd == 0:
        return 2.0
    if half_width == 0:
        return math.nan

    def wide(n: int) -> float:
        return t_quantile(0.975, n - 1) * sd / math.sqrt(n)

    if wide(MOST_TRIALS) > half_width:
        return math.nan
    lo, hi = 1, MOST_TRIALS           # wide(hi) fits; lo is below every n that fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 2 and wide(mid) <= half_width:
            hi = mid
        else:
            lo = mid
    return float(hi)


SKIPPED_PACKETS = 2    # a train's first packets may pass a token bucket's burst at once
FEWEST_TIMED = 3       # packets after those, to time a train's arrival rate by


def train_rate(t_ns: np.ndarray, payload: np.ndarray, wire: np.ndarray) -> tuple:
    """How one train's packets (``t_ns``, their ``payload`` and ``wire`` -- frame -- bytes, in
    any order) arrived after its first SKIPPED_PACKETS: (bits/s on the wire, wire bytes a
    payload byte); NaNs for a train of too few."""
    if len(t_ns) < SKIPPED_PACKETS + FEWEST_TIMED:
        return np.nan, np.nan
    order = np.argsort(t_ns, kind="stable")
    t_ns, payload, wire = t_ns[order], payload[order], wire[order]
    # each packet's arrival against the bytes that arrived with it since the burst: a line
    # whose slope is seconds a byte (one late or early packet tilts it less than the ends)
    t = (t_ns[SKIPPED_PACKETS - 1:] - t_ns[SKIPPED_PACKETS - 1]) / 1e9
    sent = np.cumsum(np.r_[0, wire[SKIPPED_PACKETS:]]).astype(np.float64)
    slope = np.polyfit(sent, t, 1)[0] if t[-1] > 0 else 0.0
    on_wire = float(wire[SKIPPED_PACKETS:].sum())
    return (8 / slope if slope > 0 else np.inf,
            on_wire / max(float(payload[SKIPPED_PACKETS:].sum()), 1.0))


def median_rate(trains: list[tuple]) -> tuple:
    """The median rate of the trains that could be timed (:func:`train_rate`'s), their median
    wire factor, and the median rate's 95 % interval (distribution-free: the order statistics
    n/2 -+ 0.98 sqrt(n); NaN for fewer than 6 trains)."""
    timed = sorted(a for a in trains if a[0] == a[0])
    if not timed:
        return np.nan, np.nan, np.nan, np.nan
    rates = np.array([a[0] for a in timed])
    n, low, high = len(rates), np.nan, np.nan
    if n >= 6:
        half = 0.98 * np.sqrt(n)
        low = rates[max(int(np.floor(n / 2 - half)), 0)]
        high = rates[min(int(np.ceil(n / 2 + half)), n - 1)]
    return (float(np.median(rates)), float(np.median([a[1] for a in timed])), low, high)
