"""One UDP flow's datagrams matched between a capture taken upstream and one taken downstream.

What the numbers mean is written in :mod:`pcapstats.analyses.udp`'s docstring ("matched
captures"); this module does the work, in numpy, with no loop over datagrams:

- :func:`datagram_keys`: each datagram's key, a 64-bit hash of (IPv4 identification -- 0 for
  IPv6 --, UDP length, the first ``min(payload length, cut)`` payload bytes), where ``cut``
  (:func:`common_cut`) is the fewest payload bytes any cut datagram of either capture kept, so
  both captures hash bytes they both have.  The bytes are read from the capture files, eight
  at a time, one length at a time, each part's file pages dropped once read;
- :func:`match`: equal keys are paired first-in-first-out in capture order (the k-th arrival
  of a key is the k-th sending of it); arrivals beyond the sendings of their key are
  duplicates (of the last sending), arrivals whose key was never sent are unmatched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..clock import shifted
from ..ingest.source import Source

_WORDS_PER_CHUNK = 1 << 20       # uint64 words gathered at once (8 MB, and 8 MB of offsets)
_MAX_WORDS = 65536 // 8 + 1     # a UDP payload is below 64 KiB
# one random odd multiplier per 8-byte word position (fixed: keys are compared across captures)
_MULTIPLIERS = np.random.default_rng(0x5C0FFEE).integers(0, 2**63, _MAX_WORDS, dtype=np.uint64) \
    * np.uint64(2) + np.uint64(1)
_ID_MULT, _LEN_MULT = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD6E8FEB86659FD93)
_NO_CUT = np.iinfo(np.int64).max


class Columns(Protocol):
    """What is read here of a capture: a Capture, or a caller's view of one."""
    def column(self, name: str) -> np.ndarray: ...


def common_cut(*sides: tuple[Columns, np.ndarray]) -> int:
    """The payload bytes every datagram of every (capture, rows) side has in its file up to
    its payload length: the least ``payload_cap_len`` among datagrams whose payload was cut
    (by a snaplen, or an IP first fragment), a very large number when none was."""
    cut = _NO_CUT
    for cap, rows in sides:
        have = cap.column("payload_cap_len")[rows]
        short = have < cap.column("payload_len")[rows]
        if short.any():
            cut = min(cut, int(have[short].min()))
    return cut


def datagram_keys(cap: Columns, rows: np.ndarray, source: Source, cut: int) -> np.ndarray:
    """The key of each datagram (``rows`` of ``cap``, whose file is ``source``)."""
    offset = cap.column("payload_offset")[rows].astype(np.int64, copy=False)
    length = cap.column("payload_len")[rows].astype(np.int64)
    np.minimum(length, cut, out=length)
    length[offset < 0] = 0
    np.minimum(length, cap.column("payload_cap_len")[rows], out=length)
    hashed = _payload_hashes(source, offset, length)
    del offset, length
    key = cap.column("ip_id")[rows].astype(np.uint64)
    key[cap.column("ip_version")[rows] != 4] = 0     # IPv6: no identification
    with np.errstate(over="ignore"):
        key *= _ID_MULT
        udp_len = cap.column("udp_length")[rows].astype(np.uint64)
        udp_len += np.uint64(1)
        udp_len *= _LEN_MULT
        key += udp_len
        del udp_len
        key = _mix(key)
        key ^= hashed
        return _mix(key)


def _payload_hashes(source: Source, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
    """A 64-bit hash of the file's bytes ``[offset, offset + length)`` for each datagram: the
    sum of its 8-byte little-endian words times a multiplier a position (the last word read
    ending at the last byte, overlapping the one before), mixed.  Short payloads a byte at a
    time.  Datagrams of one length are read together, in file order, a chunk at a time."""
    out = np.zeros(len(offset), np.uint64)
    if not len(offset):
        return out
    by_length = None                                 # when they come by length already
    if (length[1:] < length[:-1]).any():
        by_length = np.argsort(length, kind="stable")
    ordered = length if by_length is None else length[by_length]
    bounds = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, len(ordered)].tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        size = int(ordered[lo])
        if size == 0:
            continue
        mult = _MULTIPLIERS[:size if size < 8 else -(-size // 8)]
        step = max(1, _WORDS_PER_CHUNK // len(mult))
        which = np.arange(lo, hi) if by_length is None else by_length[lo:hi]
        with np.errstate(over="ignore"):
            for i, payloads in source.records_at(offset[which], size, step):
                part = which[i:i + len(payloads)]
                out[part] = _weighted_sum(payloads, size, mult) + np.uint64(size)
    with np.errstate(over="ignore"):
        return _mix(out)


def _weighted_sum(payloads: np.ndarray, size: int, mult: np.ndarray) -> np.ndarray:
    """Each payload's units times their multipliers, summed modulo 2^64: its bytes when under
    8, else its 8-byte little-endian words, the last ending at its last byte (read as views
    of the payloads, which are gathered whole, not word by word)."""
    if size < 8:
        return payloads.view(np.uint8).reshape(len(payloads), size).astype(np.uint64) @ mult
    full = size // 8
    total = np.ndarray((len(payloads), full), "<u8", buffer=payloads, strides=(size, 8)) \
        @ mult[:full]
    if size % 8:       # the last word overlaps the one before
        total += np.ndarray((len(payloads),), "<u8", buffer=payloads, offset=size - 8,
                            strides=(size,)) * mult[full]
    return total


def _mix(k: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: every input bit moves every output bit.  In place (a
    fresh array from each caller)."""
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@dataclass
class Matched:
    """One flow's datagrams, upstream against downstream.

    ``sent``: upstream datagrams that could have been seen downstream (``outside``: those
    left out, sent too early or too late for the downstream capture's span); ``lost``: of
    those, never seen downstream; ``arrivals``: downstream datagrams matched to a sent one
    (duplicates included), with ``sent_index`` (0-based, upstream capture order) and
    ``transit_ns`` (downstream time - upstream time) in downstream capture order;
    ``duplicates``: arrivals of a datagram already seen; ``unmatched``: downstream datagrams
    whose key none of the upstream ones has."""
    sent: int
    lost: int
    duplicates: int
    unmatched: int
    outside: int
    sent_index: np.ndarray
    transit_ns: np.ndarray

    @property
    def arrivals(self) -> int:
        return len(self.sent_index)

    @property
    def out_of_order(self) -> int:
        """Arrivals whose sent index is not above every earlier arrival's (iperf3's rule with
        the upstream capture's order as the count: duplicates are out of order too)."""
        index = self.sent_index       # the first arrival is never out of order
        return int(np.count_nonzero(index[1:] <= np.maximum.accumulate(index)[:-1]))


def match(up_keys: np.ndarray, up_ns: np.ndarray, down_keys: np.ndarray, down_ns: np.ndarray,
          down_span_ns: tuple[int, int]) -> Matched:
    """Pair the downstream datagrams (keys and capture times, in capture order) with the
    upstream ones; ``down_span_ns``: the downstream capture's first and last packet times."""
    n = len(up_keys)
    have, rank, sending = _arrivals(up_keys, down_keys)
    matched = have > 0
    first = matched & (rank < have)
    sent_index = sending[matched]
    transit = (down_ns[matched].astype(np.int64, copy=False)
               - up_ns[sent_index].astype(np.int64, copy=False))
    seen = np.zeros(n, bool)
    seen[sending[first]] = True
    counted = np.ones(n, bool)
    if first.any():        # the earliest and latest a datagram could have arrived
        fastest, slowest = transit[first[matched]].min(), transit[first[matched]].max()
        start, end = down_span_ns
        up = up_ns.astype(np.int64, copy=False)
        counted = (shifted(up, slowest) >= start) & (shifted(up, fastest) <= end)
    return Matched(sent=int(counted.sum()), lost=int((counted & ~seen).sum()),
                   duplicates=int((matched & ~first).sum()), unmatched=int((~matched).sum()),
                   outside=int((~counted).sum()), sent_index=sent_index, transit_ns=transit)


def _arrivals(up_keys: np.ndarray, down_keys: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each downstream datagram, in capture order: how many upstream datagrams have its
    key, how many earlier downstream ones have it (its rank), and the upstream datagram it
    pairs with: its key's rank-th sending in capture order, or the last (meaningless when
    none has its key).

    One sort of both sides' keys, not stable (several times faster than a stable one); then
    one sort of (key, place) pairs, packed into one int64 as (the key's rank among the
    distinct keys, place), puts each key's datagrams in capture order, upstream first.
    Each answer is then read off a datagram's place in that order.  (Each array, of both
    captures' datagrams, is let go once used.)"""
    n, keys = len(up_keys), np.concatenate([up_keys, down_keys])
    total = len(keys)
    order = np.argsort(keys)
    ordered = keys[order]
    del keys
    new = np.empty(total, bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    del ordered
    group = np.cumsum(new, dtype=np.int64)
    group -= 1                                  # each place's key, ranked
    starts = np.flatnonzero(new)                # where each key's places begin
    del new
    packed = group * total
    packed += order
    del order
    packed.sort()
    order = np.remainder(packed, total, out=packed)
    up = order < n
    sendings = np.bincount(group[up], minlength=len(starts))
    places = np.flatnonzero(~up)                # of the downstream datagrams
    del up
    key = group[places]
    del group
    have, first = sendings[key], starts[key]
    del key, sendings, starts
    rank = places - first
    rank -= have
    pick = np.maximum(have - 1, 0)
    np.minimum(rank, pick, out=pick)
    pick += first
    del first
    sending = order[pick]
    del pick
    arrival = order[places]
    arrival -= n
    del order, places
    out = []
    for values in (have, rank, sending):          # into the downstream capture's order
        out.append(np.empty(len(arrival), np.int64))
        out[-1][arrival] = values
    return tuple(out)
