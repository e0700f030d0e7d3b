"""One UDP flow's datagrams matched between a capture taken upstream and one taken downstream.

What the numbers mean is written in :mod:`pcapstats.analyses.udp`'s docstring ("matched
captures"); this module does the work, in numpy, with no loop over datagrams:

- :func:`datagram_keys`: each datagram's key, a 64-bit hash of (IPv4 identification -- 0 for
  IPv6 --, UDP length, the first ``min(payload length, cut)`` payload bytes), where ``cut``
  (:func:`common_cut`) is the fewest payload bytes any cut datagram of either capture kept, so
  both captures hash bytes they both have.  The bytes are read from the capture files, eight
  at a time, one length at a time;
- :func:`match`: equal keys are paired first-in-first-out in capture order (the k-th arrival
  of a key is the k-th sending of it); arrivals beyond the sendings of their key are
  duplicates (of the last sending), arrivals whose key was never sent are unmatched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..capture import Capture
from ..clock import shifted

_WORDS_PER_CHUNK = 8 << 20       # uint64 words gathered at once (64 MB)
_MAX_WORDS = 65536 // 8 + 1     # a UDP payload is below 64 KiB
# one random odd multiplier per 8-byte word position (fixed: keys are compared across captures)
_MULTIPLIERS = np.random.default_rng(0x5C0FFEE).integers(0, 2**63, _MAX_WORDS, dtype=np.uint64) \
    * np.uint64(2) + np.uint64(1)
_ID_MULT, _LEN_MULT = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD6E8FEB86659FD93)
_NO_CUT = np.iinfo(np.int64).max


def common_cut(*sides: tuple[Capture, np.ndarray]) -> int:
    """The payload bytes every datagram of every (capture, rows) side has in its file up to
    its payload length: the least ``payload_cap_len`` among datagrams whose payload was cut
    (by a snaplen, or an IP first fragment), a very large number when none was."""
    cut = _NO_CUT
    for cap, rows in sides:
        have = cap.column("payload_cap_len")[rows].astype(np.int64)
        short = have < cap.column("payload_len")[rows].astype(np.int64)
        if short.any():
            cut = min(cut, int(have[short].min()))
    return cut


def datagram_keys(cap: Capture, rows: np.ndarray, buf: np.ndarray, cut: int) -> np.ndarray:
    """The key of each datagram (``rows`` of ``cap``, whose file bytes are ``buf``)."""
    payload = cap.column("payload_len")[rows].astype(np.int64)
    offset = cap.column("payload_offset")[rows].astype(np.int64)
    length = np.where(offset >= 0, np.minimum(payload, cut), 0)
    length = np.minimum(length, cap.column("payload_cap_len")[rows].astype(np.int64))
    hashed = _payload_hashes(buf, offset, length)
    ident = np.where(cap.column("ip_version")[rows] == 4,
                     cap.column("ip_id")[rows].astype(np.uint64), np.uint64(0))
    udp_len = cap.column("udp_length")[rows].astype(np.uint64)
    with np.errstate(over="ignore"):
        return _mix(hashed ^ _mix(ident * _ID_MULT + (udp_len + np.uint64(1)) * _LEN_MULT))


def _payload_hashes(buf: np.ndarray, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
    """A 64-bit hash of ``buf[offset:offset + length]`` for each datagram: the sum of its
    8-byte little-endian words times a multiplier a position (the last word read ending at
    the last byte, overlapping the one before), mixed.  Short payloads a byte at a time."""
    out = np.zeros(len(offset), np.uint64)
    if not len(offset):
        return out
    words = np.ndarray((max(len(buf) - 7, 0),), dtype="<u8", buffer=buf, strides=(1,))
    by_length = np.argsort(length, kind="stable")
    sizes, starts = np.unique(length[by_length], return_index=True)
    bounds = np.r_[starts, len(by_length)]
    for k, size in enumerate(sizes.tolist()):
        if size == 0:
            continue
        at = by_length[bounds[k]:bounds[k + 1]]
        if size < 8:
            columns = offset[at][:, None] + np.arange(size)
            values = buf[columns].astype(np.uint64)
            nwords = size
        else:
            nwords = -(-size // 8)
            columns = np.minimum(np.arange(nwords) * 8, size - 8)
        step = max(1, _WORDS_PER_CHUNK // nwords)
        mult = _MULTIPLIERS[:nwords]
        with np.errstate(over="ignore"):
            for a in range(0, len(at), step):
                part = at[a:a + step]
                w = values[a:a + step] if size < 8 else words[offset[part][:, None] + columns]
                out[part] = w @ mult + np.uint64(size)       # wraps modulo 2^64
    with np.errstate(over="ignore"):
        return _mix(out)


def _mix(k: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: every input bit moves every output bit."""
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


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
        counts = self.sent_index.astype(np.int64) + 1
        if not len(counts):
            return 0
        before = np.r_[0, np.maximum.accumulate(counts)[:-1]]
        return int((counts <= before).sum())


def match(up_keys: np.ndarray, up_ns: np.ndarray, down_keys: np.ndarray, down_ns: np.ndarray,
          down_span_ns: tuple[int, int]) -> Matched:
    """Pair the downstream datagrams (keys and capture times, in capture order) with the
    upstream ones; ``down_span_ns``: the downstream capture's first and last packet times."""
    n = len(up_keys)
    groups, inverse = np.unique(np.concatenate([up_keys, down_keys]), return_inverse=True)
    g_up, g_down = inverse[:n], inverse[n:]
    sent_count = np.bincount(g_up, minlength=len(groups))
    up_order = np.argsort(g_up, kind="stable")          # each key's sendings, in capture order
    group_start = np.r_[0, np.cumsum(sent_count)[:-1]]
    rank = _rank(g_down)                                 # k-th arrival of its key
    have = sent_count[g_down]
    matched = have > 0
    first = matched & (rank < have)
    pick = group_start[g_down] + np.minimum(rank, np.maximum(have - 1, 0))
    sent_index = up_order[pick[matched]]
    transit = down_ns[matched].astype(np.int64) - up_ns[sent_index].astype(np.int64)
    seen = np.zeros(n, bool)
    seen[up_order[pick[first]]] = True
    counted = np.ones(n, bool)
    if first.any():        # the earliest and latest a datagram could have arrived
        fastest, slowest = transit[first[matched]].min(), transit[first[matched]].max()
        start, end = down_span_ns
        up = up_ns.astype(np.int64)
        counted = (shifted(up, slowest) >= start) & (shifted(up, fastest) <= end)
    return Matched(sent=int(counted.sum()), lost=int((counted & ~seen).sum()),
                   duplicates=int((matched & ~first).sum()), unmatched=int((~matched).sum()),
                   outside=int((~counted).sum()), sent_index=sent_index, transit_ns=transit)


def _rank(groups: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements have its group (0 for the first)."""
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    position = np.arange(len(groups))
    first_of_group = np.maximum.accumulate(np.where(starts, position, 0))
    rank = np.empty(len(groups), np.int64)
    rank[order] = position - first_of_group
    return rank
