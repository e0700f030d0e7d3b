"""Streaming passes that keep one window: the file read as ``read_fast`` reads it, each
window handed on and its rows reused, so memory is bounded by the window, not the file.

``stream_windows`` hands on the few columns throughput sums; ``packet_windows`` a ``Capture``
a window, with what the whole-file table counts across windows carried over (frame numbers,
times since the first packet, each stream's side A, the clock up to the window's end).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import schema
from ..clock import ClockCheck
from ..errors import SkippedPacketsWarning
from . import formats
from .fast import (WINDOW_BYTES, _addresses, _capture, _collected_warnings, _format_address,
                   _progress_or_ambient, _read_windows, _warn_clock)
from .kernel import get_kernel
from .source import open_source

def stream_windows(path, on_window, kernel: str = "auto", window_bytes: int = WINDOW_BYTES,
                   progress=None):
    """Read a capture window by window without keeping it (memory bounded by the window).

    ``on_window(columns)`` gets each window's packets as numpy arrays: frame_time_ns, frame_len,
    payload_len, ip_src, ip_dst (address codes), srcport, dstport, l4, l4_quoted, stream (tcp.stream
    or udp.stream).  Returns (packets read, address strings by code).  Errors and warnings as
    read_fast.
    """
    kern = get_kernel(kernel)
    progress = _progress_or_ambient(progress)

    clock = ClockCheck()

    def deliver(table, k):
        out, rec = table.out, table.rec
        clock.feed(rec.ts[:k])
        on_window({"frame_time_ns": rec.ts[:k], "frame_len": rec.origlen[:k],
                   "payload_len": out["payload_len"][:k], "ip_src": table.ip_src[:k],
                   "ip_dst": table.ip_dst[:k], "srcport": out["srcport"][:k],
                   "dstport": out["dstport"][:k], "l4": out["l4"][:k],
                   "l4_quoted": out["l4_quoted"][:k], "stream": table.stream[:k]})

    with _collected_warnings(), open_source(path) as src:
        walker = formats.walker_for(src.buf, src.path)
        table = _read_windows(src, walker, kern, max(window_bytes, 1 << 16), progress, deliver)
        _warn_clock(clock, src.path)
    return table.total, _addresses(table.interner)


def packet_windows(path, on_window, kernel: str = "auto", window_bytes: int = WINDOW_BYTES,
                   progress=None) -> int:
    """Read a capture window by window as full packet tables, without keeping them (memory
    bounded by the window): ``on_window(cap)`` gets a :class:`Capture` of each window's packets,
    every column as ``read_fast`` gives it -- frame numbers and ``frame_time_relative`` counted
    from the file's first packet, stream indices and ``direction`` carried across windows -- and
    must be done with it before it returns (its arrays are reused).  Returns the packets read.

    One difference from the whole-file table, rare enough to say rather than buffer for: a stream
    whose first packets are only ICMP errors quoting it, and whose own first packet comes in a
    later window, takes side A from the quoted header in the earlier windows (the whole-file rule
    prefers the own header); a warning counts such streams."""
    kern = get_kernel(kernel)
    progress = _progress_or_ambient(progress)
    clock, sides, names = ClockCheck(), _StreamSides(), _AddressNames()
    start = []                                    # the first packet's time

    def deliver(table, k):
        ts = table.rec.ts[:k]
        clock.feed(ts)
        if not start:
            start.append(int(ts[0]))
        cap = _capture(src, walker, table, kern, addresses=names.update(table.interner))
        first = table.total - k + 1
        cap.arrays["frame_number"] = np.arange(first, first + k, dtype=np.uint32)
        cap.arrays["frame_time_relative"] = lambda: (ts - start[0]) / 1e9
        cap.derived["clock"] = clock              # the file's, up to this window
        tcp, udp = cap.layer(schema.TCP), cap.layer(schema.UDP)
        cap.arrays["direction"] = sides.directions(
            tcp, udp, table.stream[:k], table.ip_src[:k],
            table.out["srcport"][:k], table.out["l4_quoted"][:k] != 0)
        on_window(cap)

    with _collected_warnings(), open_source(path) as src:
        walker = formats.walker_for(src.buf, src.path)
        table = _read_windows(src, walker, kern, max(window_bytes, 1 << 16), progress, deliver)
        _warn_clock(clock, src.path)
        if sides.changed:
            warnings.warn(SkippedPacketsWarning(
                f"{sides.changed} streams were quoted in ICMP errors before their own first "
                "packet, in an earlier window: those quoted packets' direction is taken from "
                "the quoted header", path=str(src.path),
                hint="pcapstats.read gives the whole-file direction"), stacklevel=2)
    return table.total



class _StreamSides:
    """Side A of every stream seen so far, for ``direction`` over windows: the rule of
    pcapstats.streams.packet_directions (the source of the stream's first packet with its own
    header, else of its first quoted one), kept from window to window."""

    def __init__(self):
        self.side = np.zeros(0, np.int64)          # by stream * 2 + udp: address << 16 | port, -1
        self.quoted = np.zeros(0, bool)            # the side came from a quoted header
        self.changed = 0                           # quoted sides an own packet later overruled

    def directions(self, tcp, udp, stream, src, sport, quoted) -> np.ndarray:
        out = np.zeros(len(stream), np.uint8)
        rows = np.flatnonzero(tcp | udp)
        if len(rows) == 0:
            return out
        key = stream[rows].astype(np.int64) * 2 + udp[rows]
        source = src[rows].astype(np.int64) << 16 | sport[rows].astype(np.int64)
        own = ~quoted[rows]
        size, n = int(key.max()) + 1, len(rows)
        if size > len(self.side):
            grow = size - len(self.side)
            self.side = np.r_[self.side, np.full(grow, -1, np.int64)]
            self.quoted = np.r_[self.quoted, np.zeros(grow, bool)]
        where = np.arange(n, dtype=np.int64)
        first_own, first_any = np.full(size, n, np.int64), np.full(size, n, np.int64)
        np.minimum.at(first_own, key[own], where[own])
        np.minimum.at(first_any, key, where)
        has_own = first_own < n
        side, was_quoted = self.side[:size], self.quoted[:size]   # views: updated in place
        overrule = has_own & was_quoted
        if overrule.any():
            self.changed += int((side[overrule] != source[first_own[overrule]]).sum())
            side[overrule], was_quoted[overrule] = source[first_own[overrule]], False
        new = (side == -1) & (first_any < n)
        pick = np.where(has_own, first_own, first_any)
        side[new], was_quoted[new] = source[pick[new]], ~has_own[new]
        out[rows] = source != side[key]
        return out


class _AddressNames:
    """The interner's addresses as text, formatting only the ones new since the last window."""

    def __init__(self):
        self.names = np.zeros(0, object)

    def update(self, interner) -> np.ndarray:
        addr16, v6 = interner.addresses()
        if len(addr16) > len(self.names):
            new = [_format_address(bytes(a), bool(v))
                   for a, v in zip(addr16[len(self.names):], v6[len(self.names):])]
            self.names = np.r_[self.names, np.array(new, dtype=object)]
        return self.names

