"""The capture's clock as data: steps back, huge forward gaps, absurd timestamps.

A capture's timestamps are whatever the capturing host's clock said.  A clock that is stepped
(NTP, a suspended VM, a hand edit, one flipped bit) moves a packet days ahead or seconds back.
The reader reports such anomalies once per capture (:class:`ClockCheck`, one warning line);
analyses that bin or scan time never allocate in proportion to the time span, and those that
need a continuous timeline read it through :func:`without_long_gaps`.

What counts, chosen so that ordinary captures say nothing:

- a **step back**: a packet earlier than the one before it by BACK_NS (1 ms) or more (smaller
  ones are the reordering of multi-queue capture and of merged interfaces);
- a **forward gap**: a packet later than the one before it by GAP_NS (1 hour) or more;
- an **absurd time**: before 1990 or after 2100 (a zeroed or garbled header).
"""

from __future__ import annotations

import numpy as np

BACK_NS = 1_000_000
CHUNK = 1 << 18
GAP_NS = 3600 * 10**9
EARLIEST_NS, LATEST_NS = 631_152_000 * 10**9, 4_102_444_800 * 10**9   # 1990-01-01, 2100-01-01


def span_text(ns: float) -> str:
    """A duration as people say it: 2.1 s, 14 min, 5.2 h, 66 days."""
    s = abs(ns) / 1e9
    if s < 60:
        return f"{s:.3g} s"
    if s < 3600:
        return f"{s / 60:.3g} min"
    if s < 86400 * 2:
        return f"{s / 3600:.3g} h"
    return f"{s / 86400:.3g} days"


class ClockCheck:
    """Fed the timestamps of a capture in order (window by window), says what was odd."""

    def __init__(self):
        self.packets = 0
        self.last_ns: int | None = None
        self.back = 0                     # steps back of BACK_NS or more
        self.first_back: tuple[int, int] | None = None      # (packet number, step ns)
        self.largest_back: tuple[int, int] | None = None
        self.gaps = 0
        self.first_gap: tuple[int, int] | None = None
        self.largest_gap: tuple[int, int] | None = None
        self.absurd = 0
        self.first_absurd: tuple[int, int] | None = None    # (packet number, time ns)

    def feed(self, ts_ns: np.ndarray) -> None:
        """The next packets' timestamps (integer ns since the epoch), in file order; looked at a
        slice of CHUNK at a time, so its scratch memory stays a few MB whatever the capture."""
        for at in range(0, len(ts_ns), CHUNK):
            self._feed(np.asarray(ts_ns[at:at + CHUNK], np.int64))

    def _feed(self, ts: np.ndarray) -> None:
        if not len(ts):
            return
        base = self.packets + 1                          # packet number of ts[0]
        prev = np.r_[ts[0] if self.last_ns is None else self.last_ns, ts[:-1]]
        step = ts - prev
        for kind, where in (("back", np.flatnonzero(step <= -BACK_NS)),
                            ("gap", np.flatnonzero(step >= GAP_NS))):
            if not len(where):
                continue
            size = np.abs(step[where])
            first, largest = (base + int(where[0]), int(size[0])), \
                (base + int(where[size.argmax()]), int(size.max()))
            if kind == "back":
                self.back += len(where)
                self.first_back = self.first_back or first
                if self.largest_back is None or largest[1] > self.largest_back[1]:
                    self.largest_back = largest
            else:
                self.gaps += len(where)
                self.first_gap = self.first_gap or first
                if self.largest_gap is None or largest[1] > self.largest_gap[1]:
                    self.largest_gap = largest
        odd = np.flatnonzero((ts < EARLIEST_NS) | (ts >= LATEST_NS))
        if len(odd):
            self.absurd += len(odd)
            self.first_absurd = self.first_absurd or (base + int(odd[0]), int(ts[odd[0]]))
        self.packets += len(ts)
        self.last_ns = int(ts[-1])

    def message(self) -> str | None:
        """One line for the capture, or None when its clock looked ordinary."""
        parts, at = [], []
        if self.back:
            n, size = self.largest_back
            more = f" ({self.back} steps back in all, the first at packet {self.first_back[0]})" \
                if self.back > 1 else ""
            parts.append(f"clock steps back {span_text(size)} at packet {n}{more}")
            at.append(n)
        if self.gaps:
            n, size = self.largest_gap
            more = f" (largest of {self.gaps})" if self.gaps > 1 else ""
            parts.append(f"{self.gaps} forward gap{'s' if self.gaps > 1 else ''} of "
                         f"{span_text(size)} at packet {n}{more}")
            at.append(n)
        if self.absurd:
            n, t = self.first_absurd
            year = f"year {1970 + t / 1e9 / (365.2425 * 86400):.0f}"
            if t == np.iinfo(np.int64).max:   # where the reader holds a time ns cannot hold
                year += " or after, held where int64 nanoseconds end"
            parts.append(f"{self.absurd} timestamp{'s' if self.absurd > 1 else ''} outside "
                         f"1990-2100 (packet {n}: {year})")
            at.append(n)
        if not parts:
            return None
        parts = [p for _, p in sorted(zip(at, parts))]   # in the order they happen
        return "; ".join(parts) + ": times, durations and rates that span them are the " \
                                  "clock's, not the network's"


def shifted(t_ns: np.ndarray, delta_ns: int) -> np.ndarray:
    """``t_ns + delta_ns`` held within int64 rather than wrapped: the reader keeps times up to
    the last nanosecond int64 holds, so a time plus a window (or minus one) can pass either
    end, and a window read from packets can be any size."""
    t = np.asarray(t_ns, np.int64)
    top = int(np.iinfo(np.int64).max)
    d = max(-top, min(top, int(delta_ns)))
    if d >= 0:
        return np.where(t > top - d, top, t + d)
    return np.where(t < -top - d, -top, t + d)


def without_long_gaps(t_ns: np.ndarray, limit_ns: int) -> np.ndarray:
    """Times with every gap longer than ``limit_ns`` shortened to ``limit_ns`` (and every step
    back to none), so that binning them by a fixed width allocates in proportion to the packets,
    never to a span a clock step made.  Sorted input gives sorted output."""
    t = np.asarray(t_ns, np.int64)
    if len(t) < 2:
        return t.copy()
    step = np.diff(t)
    excess = np.where(step > limit_ns, step - limit_ns, 0) + np.where(step < 0, step, 0)
    return t - np.r_[0, np.cumsum(excess)]
