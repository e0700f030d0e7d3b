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

A step back or a forward gap is a **break**: it cuts the capture's timeline into monotonic
**pieces** (:class:`Pieces`).  Within a piece, differences of times are the network's; across
a break only the packets' order is known.  So counts are taken from identifiers and order,
never from time, and a duration or rate across a break is measured over the pieces, joined end
to end (:meth:`Pieces.monotonic`): the time between the last packet before a break and the first
after it is unknown and counted as none.  An analysis says which of its numbers a break touched
(:func:`touched`), and the capture's one warning line then names them.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from .errors import ClockWarning

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
        self.first_ns: int | None = None
        self._breaks: list[tuple[np.ndarray, np.ndarray]] = []   # (packet numbers, steps ns)
        self._pieces: tuple[int, Pieces] | None = None

    def feed(self, ts_ns: np.ndarray, frames: np.ndarray | None = None) -> None:
        """The next packets' timestamps (integer ns since the epoch), in file order; looked at a
        slice of CHUNK at a time, so its scratch memory stays a few MB whatever the capture.
        ``frames``: their packet numbers, when they are not the next ones counted (some rows
        of a file: its breaks are then only those its rows show)."""
        for at in range(0, len(ts_ns), CHUNK):
            self._feed(np.asarray(ts_ns[at:at + CHUNK], np.int64),
                       None if frames is None else np.asarray(frames[at:at + CHUNK], np.int64))

    def _feed(self, ts: np.ndarray, frames: np.ndarray | None = None) -> None:
        if not len(ts):
            return
        base = self.packets + 1                          # packet number of ts[0]
        if self.first_ns is None:
            self.first_ns = int(ts[0])
        prev = np.r_[ts[0] if self.last_ns is None else self.last_ns, ts[:-1]]
        step = ts - prev
        cut = np.flatnonzero((step <= -BACK_NS) | (step >= GAP_NS))
        if len(cut):
            self._breaks.append((base + cut if frames is None else frames[cut], step[cut]))
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

    def pieces(self) -> Pieces:
        """The capture's timeline cut at its breaks (steps back and forward gaps) so far."""
        if self._pieces is None or self._pieces[0] != self.packets:
            at, step = ((np.concatenate(parts) for parts in zip(*self._breaks))
                        if self._breaks else (np.zeros(0, np.int64),) * 2)
            self._pieces = (self.packets, Pieces(at, step))
        return self._pieces[1]

    @property
    def breaks(self) -> int:
        return self.back + self.gaps

    def span_ns(self) -> int:
        """First to last packet over the pieces (the breaks' steps taken out): the capture's
        span as the network saw it, never negative; plain last - first without a break."""
        if self.first_ns is None:
            return 0
        steps = sum(sum(step.tolist()) for _, step in self._breaks)    # ints: no overflow
        return max(0, self.last_ns - self.first_ns - steps)

    def message(self, says: str | None = None) -> str | None:
        """One line for the capture, or None when its clock looked ordinary.  ``says``: what
        the steps did to an analysis' numbers (:func:`touched`), instead of the general
        caution."""
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
        return "; ".join(parts) + ": " + (says or CAUTION)


CAUTION = "times, durations and rates that span them are the clock's, not the network's"


def touched(analysis: str, left_out: list[str] = (), joined: list[str] = (),
            as_tshark: list[str] = (), counts: str = "counts") -> str:
    """The tail of a capture's clock warning for one analysis: which of its numbers the
    breaks touched -- ``left_out``: unknowable across a break, so left empty (``1 RTT``);
    ``joined``: measured over the pieces either side (``the duration of 1 flow``);
    ``as_tshark``: defined by Wireshark's rules on the times as captured, so read as tshark
    reads them (``Wireshark's flags``) -- or that none did.  Its ``counts`` never are: they
    come from identifiers and order."""
    said = [f"{analysis}: {counts} untouched"]
    if as_tshark:
        said.append(f"read on the clock's times as tshark reads them: {', '.join(as_tshark)}")
    if left_out:
        said.append(f"unknowable across it, left out: {', '.join(left_out)}")
    if joined:
        said.append(f"over the pieces either side: {', '.join(joined)}")
    if len(said) == 1:
        said.append("none of its durations, rates or RTTs spans it")
    return "; ".join(said)


@contextlib.contextmanager
def restating():
    """Hold the ClockWarnings said inside the block (the reader's, as a path is read) and say
    them again at its end, with ``says`` of the object yielded, when it was set (``touched``:
    what the analysis run in the block did with the breaks), in place of the general caution;
    every other warning is said again as it was."""
    box = _Says()
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield box
    finally:
        for w in caught:
            message = w.message
            if (box.says and isinstance(message, ClockWarning)
                    and message.what.endswith(CAUTION)):
                message = ClockWarning(message.what[:-len(CAUTION)] + box.says,
                                       path=message.path, packet=message.packet,
                                       hint=message.hint)
            warnings.warn_explicit(message, w.category, w.filename, w.lineno)


class _Says:
    says: str = ""


class Pieces:
    """A capture's timeline cut at its clock's breaks: piece 0 up to the first break, piece k
    from the packet of the k-th break on.  ``at``: the packet numbers where pieces 1, 2, ...
    begin (rising), ``step_ns``: each break's step (that packet's time less the one before).

    ``monotonic`` joins the pieces end to end: each break's step is taken out of every later
    time, so the first packet after a break comes at the instant of the last one before it
    (the real time between them is unknown: counted as none).  Within a piece it changes no
    difference of times; across pieces it turns a step back into no time and a day's jump
    into none, so first-to-last spans are the pieces' spans added up: never negative, never a
    step's size."""

    def __init__(self, at: np.ndarray, step_ns: np.ndarray):
        self.at = np.asarray(at, np.int64)
        steps = np.asarray(step_ns, np.int64)
        total = np.cumsum(steps.astype(np.float64))
        if len(steps) and np.abs(total).max() < 2.0**62:      # (the usual: a few steps)
            self.shift = -np.cumsum(steps)
        else:                                 # sums past int64: held at its ends (shifted)
            top = int(np.iinfo(np.int64).max)
            running, out = 0, []
            for step in steps.tolist():
                running -= step
                out.append(max(-top, min(top, running)))
            self.shift = np.array(out, np.int64)

    def __len__(self) -> int:
        """How many pieces (1 when the clock never broke)."""
        return len(self.at) + 1

    def of(self, frames) -> np.ndarray:
        """The piece of each packet (by its frame number)."""
        return np.searchsorted(self.at, np.asarray(frames, np.int64), side="right")

    def monotonic(self, t_ns, frames) -> np.ndarray:
        """``t_ns`` (the times of the packets numbered ``frames``) on the joined timeline; the
        times themselves (no copy) when the clock never broke."""
        t = np.asarray(t_ns, np.int64)
        if not len(self.at):
            return t
        piece = self.of(frames)
        out = t.copy()
        later = np.flatnonzero(piece > 0)
        if len(later):
            out[later] = _add_held(t[later], self.shift[piece[later] - 1])
        return out

    def apart(self, frames_a, frames_b) -> np.ndarray:
        """Whether each pair of packets lies in different pieces (a break between them)."""
        if not len(self.at):
            return np.zeros(np.broadcast(np.asarray(frames_a), np.asarray(frames_b)).shape,
                            bool)
        return self.of(frames_a) != self.of(frames_b)


def _add_held(t: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``t + d`` element by element, held within int64 rather than wrapped."""
    top = int(np.iinfo(np.int64).max)
    with np.errstate(over="ignore"):
        out = t + d
    wrapped = ((d > 0) & (out < t)) | ((d < 0) & (out > t))
    if wrapped.any():
        out[wrapped] = np.where(d[wrapped] > 0, top, -top)
    return out


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


def without_long_gaps(t_ns: np.ndarray, limit_ns: int, *, in_place: bool = False
                      ) -> np.ndarray:
    """Times with every gap longer than ``limit_ns`` shortened to ``limit_ns`` (and every step
    back to none), so that binning them by a fixed width allocates in proportion to the packets,
    never to a span a clock step made.  Sorted input gives sorted output.  ``in_place``: an
    int64 ``t_ns`` is written over (its caller's last use of it: one array fewer)."""
    t = np.asarray(t_ns, np.int64)
    if len(t) < 2:
        return t.copy()
    excess = np.diff(t)
    # each step's excess: past the limit, and any step back
    if limit_ns < 0:                # a step may be both
        excess = (np.where(excess > limit_ns, excess - limit_ns, 0)
                  + np.where(excess < 0, excess, 0))
    else:                           # none is both: made in place (on a long flow's packets
        over = excess > limit_ns    # every temporary is 8 bytes a packet)
        np.subtract(excess, limit_ns, out=excess, where=over)
        excess[~over & (excess >= 0)] = 0
        del over
    np.cumsum(excess, out=excess)
    out = t if in_place and t is t_ns else t.copy()
    out[1:] -= excess
    return out
