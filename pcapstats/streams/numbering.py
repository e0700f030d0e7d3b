"""Stream numbering: stream indices exactly as Wireshark numbers ``tcp.stream`` and
``udp.stream``.

**How Wireshark numbers streams** (4.0, epan/dissectors/packet-tcp.c and packet-udp.c): each new
conversation gets the next index when its first packet is dissected, so indices follow the
order of first appearance.  A conversation is the unordered pair of (address, port) endpoints.
For TCP one more rule splits a conversation (port reuse): a SYN without ACK whose sequence
number differs from the *base sequence number* already recorded for its direction starts a new
stream.  The base of a direction is set by the first packet of that direction after the stream
began (its seq, or seq - 1 when it is not a SYN), or earlier by the first ACK-bearing packet of
the other direction (its ack - 1), whichever comes first.  A retransmitted SYN (same seq) stays.

Conversation ids come from the ingest kernel's hash; here only the port-reuse split, window by
window (TcpStreams), vectorised except for a short loop over the SYNs that could split a
conversation.
"""

from __future__ import annotations

import numpy as np

SYN, ACK = 0x002, 0x010


def udp_streams(conv: np.ndarray) -> np.ndarray:
    """udp.stream is the conversation id itself (UDP conversations never split)."""
    return conv


def tcp_streams(conv, reverse, first, flags, seq, ack) -> np.ndarray:
    """tcp.stream of TCP packets given all at once (see TcpStreams for windows)."""
    return TcpStreams().assign(conv, reverse, first, flags, seq, ack)


class TcpStreams:
    """tcp.stream numbering fed window by window (the reader's windows, or a streaming pass).

    Stream ids follow the first appearance of (conversation, segment), where a port-reuse split
    starts a new segment.  Without splits the id is the conversation id.  With them, the id of
    a conversation's first segment is its conversation id plus the splits that came before its
    first packet, and the id of the k-th split overall is the number of conversations seen
    before it plus k.  So only the splits are remembered, not every packet: per conversation,
    the base sequence numbers of both directions and its latest split; per split, how many
    conversations had been seen.
    """

    def __init__(self):
        self.base_set = np.zeros((0, 2), bool)
        self.base = np.zeros((0, 2), np.int64)
        self.last_split = np.zeros(0, np.int64)     # index of the conversation's latest split, -1
        self.convs_at_split: list[int] = []          # conversations seen when split k happened
        self.convs_seen = 0

    def assign(self, conv, reverse, first, flags, seq, ack) -> np.ndarray:
        """Stream ids of the next window's TCP packets (in order); updates the state."""
        conv = np.asarray(conv, np.int64)
        n = len(conv)
        if n == 0:
            return conv
        self._grow(int(conv.max()) + 1)
        rev = np.asarray(reverse).astype(bool)
        has_ack = (flags & ACK) != 0
        split_at = self.last_split[conv]            # latest split index of each packet's segment
        seg_start = np.zeros(len(self.last_split), np.int64)  # where each conversation's segment starts here
        candidates = np.flatnonzero(((flags & (SYN | ACK)) == SYN) & (first == 0))
        seen_before = self.convs_seen
        if len(candidates):
            is_candidate = np.zeros(n, bool)
            is_candidate[candidates] = True
            # the conversations with candidates, grouped (stable: each group in packet order)
            involved = np.flatnonzero(np.isin(conv, np.unique(conv[candidates])))
            grouped = involved[np.argsort(conv[involved], kind="stable")]
            seen = np.maximum.accumulate(conv) + 1   # conversations seen up to each packet
            found = []                               # (packet, conversation) of each split
            for idx in np.split(grouped, np.flatnonzero(np.diff(conv[grouped])) + 1):
                found += self._splits_of(int(conv[idx[0]]), idx, rev, has_ack, is_candidate,
                                         flags, seq, ack)
            for row, c in sorted(found):
                self.convs_at_split.append(max(int(seen[row]), seen_before))
                number = len(self.convs_at_split) - 1
                split_at[(conv == c) & (np.arange(n) >= row)] = number
                self.last_split[c] = number
                seg_start[c] = row
                self.base_set[c] = False
        self._update_bases(conv, rev, has_ack, flags, seq, ack, seg_start)
        self.convs_seen = max(self.convs_seen, int(conv.max()) + 1)
        if not self.convs_at_split:
            return conv
        at = np.asarray(self.convs_at_split, np.int64)
        own_first = conv + np.searchsorted(at, conv, side="right")
        split = np.maximum(split_at, 0)
        return np.where(split_at < 0, own_first, at[split] + split)

    def _grow(self, n_conv: int) -> None:
        extra = n_conv - len(self.last_split)
        if extra > 0:
            self.base_set = np.vstack([self.base_set, np.zeros((extra, 2), bool)])
            self.base = np.vstack([self.base, np.zeros((extra, 2), np.int64)])
            self.last_split = np.concatenate([self.last_split, np.full(extra, -1, np.int64)])

    def _splits_of(self, c, idx, rev, has_ack, is_candidate, flags, seq, ack) -> list:
        """Packets (rows) of conversation c in this window at which a pure SYN starts a new stream."""
        d = rev[idx]
        own = [np.flatnonzero(~d), np.flatnonzero(d)]                                # by direction
        acks = [np.flatnonzero(d & has_ack[idx]), np.flatnonzero(~d & has_ack[idx])]  # set base of k
        carried = True   # until a split here, bases from earlier windows hold
        start, found = 0, []
        for j in np.flatnonzero(is_candidate[idx]):
            k = int(d[j])
            if carried and self.base_set[c, k]:
                base = int(self.base[c, k])
            else:
                base = _base_seq(idx, own[k], acks[k], start, j, flags, seq, ack)
            if base is not None and base != int(seq[idx[j]]):
                found.append((int(idx[j]), c))
                start, carried = j, False
        return found

    def _update_bases(self, conv, rev, has_ack, flags, seq, ack, seg_start) -> None:
        """Bases still unset get the first event of the window's part of the current segment."""
        rows = np.arange(len(conv))
        # only conversations with a base still unset need looking at (after its first packets
        # both directions of a conversation have theirs)
        live = (rows >= seg_start[conv]) & ~(self.base_set[conv, 0] & self.base_set[conv, 1])
        if not live.any():
            return
        own = np.flatnonzero(live)
        own_key = conv[own] * 2 + rev[own]
        own_val = np.where(flags[own] & SYN, seq[own].astype(np.int64),
                           (seq[own].astype(np.int64) - 1) & 0xFFFFFFFF)
        acked = np.flatnonzero(live & has_ack)
        ack_key = conv[acked] * 2 + ~rev[acked]
        ack_val = (ack[acked].astype(np.int64) - 1) & 0xFFFFFFFF
        keys = np.concatenate([own_key, ack_key])
        if len(keys) == 0:
            return
        pos = np.concatenate([own, acked])
        vals = np.concatenate([own_val, ack_val])
        order = np.lexsort((pos, keys))              # by key, then earliest packet
        keys, vals = keys[order], vals[order]
        first = np.r_[True, keys[1:] != keys[:-1]]
        keys, vals = keys[first], vals[first]
        flat_set, flat_base = self.base_set.reshape(-1), self.base.reshape(-1)
        unset = ~flat_set[keys]
        flat_base[keys[unset]] = vals[unset]
        flat_set[keys[unset]] = True


def first_occurrences(codes: np.ndarray) -> np.ndarray:
    """Indices of the first element of each code, for codes numbered by first appearance."""
    if len(codes) == 0:
        return np.zeros(0, np.int64)
    running = np.maximum.accumulate(codes)
    return np.flatnonzero(np.r_[True, running[1:] != running[:-1]])


def _base_seq(idx, own, acks, start, j, flags, seq, ack):
    """Base sequence number of one direction as set by packets start..j-1, or None if unset."""
    a = np.searchsorted(own, start)
    b = np.searchsorted(acks, start)
    p_own = own[a] if a < len(own) and own[a] < j else None
    p_ack = acks[b] if b < len(acks) and acks[b] < j else None
    if p_own is None and p_ack is None:
        return None
    if p_ack is None or (p_own is not None and p_own < p_ack):
        pkt = idx[p_own]
        return int(seq[pkt]) if flags[pkt] & SYN else (int(seq[pkt]) - 1) & 0xFFFFFFFF
    return (int(ack[idx[p_ack]]) - 1) & 0xFFFFFFFF

