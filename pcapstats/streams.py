"""Stream indices numbered exactly as Wireshark numbers ``tcp.stream`` and ``udp.stream``.

Wireshark (4.0, epan/dissectors/packet-tcp.c and packet-udp.c) gives each new conversation the
next index when its first packet is dissected, so indices follow the order of first appearance.
A conversation is the unordered pair of (address, port) endpoints.  For TCP one more rule splits
a conversation (port reuse): a SYN without ACK whose sequence number differs from the *base
sequence number* already recorded for its direction starts a new stream.  The base of a
direction is set by the first packet of that direction after the stream began (its seq, or
seq - 1 when it is not a SYN), or earlier by the first ACK-bearing packet of the other
direction (its ack - 1), whichever comes first.  A retransmitted SYN (same seq) stays.

Conversation ids come from the kernel's hash (ingest/kernel.py); here only the port-reuse split,
vectorised except for a short loop over the SYNs that could split a conversation.
"""

from __future__ import annotations

import numpy as np

SYN, ACK = 0x002, 0x010


def udp_streams(conv: np.ndarray) -> np.ndarray:
    """udp.stream is the conversation id itself (UDP conversations never split)."""
    return conv


def tcp_streams(conv, reverse, first, flags, seq, ack) -> np.ndarray:
    """tcp.stream from the TCP packets' conversation ids (numbered by first appearance); ``first``
    marks each conversation's first packet."""
    n = len(conv)
    if n == 0:
        return conv
    candidates = np.flatnonzero(((flags & (SYN | ACK)) == SYN) & (first == 0))
    if len(candidates) == 0:
        return conv
    splits = _port_reuse_splits(conv, reverse.astype(bool), flags, seq, ack, candidates)
    if not splits.any():
        return conv
    # segment number within the conversation, then renumber (conversation, segment) by first appearance
    order = np.argsort(conv, kind="stable")
    seg_sorted = np.cumsum(splits[order])
    conv_sorted = conv[order]
    starts = np.r_[0, np.flatnonzero(conv_sorted[1:] != conv_sorted[:-1]) + 1]
    base = np.repeat(seg_sorted[starts], np.diff(np.r_[starts, n]))
    seg = np.empty(n, np.int64)
    seg[order] = seg_sorted - base
    import pandas as pd  # only captures with port reuse get here
    streams, _ = pd.factorize(conv * (int(seg.max()) + 1) + seg)
    return streams.astype(np.int64)


def first_occurrences(codes: np.ndarray) -> np.ndarray:
    """Indices of the first element of each code, for codes numbered by first appearance."""
    if len(codes) == 0:
        return np.zeros(0, np.int64)
    running = np.maximum.accumulate(codes)
    return np.flatnonzero(np.r_[True, running[1:] != running[:-1]])


def _port_reuse_splits(conv, reverse, flags, seq, ack, candidates) -> np.ndarray:
    """Mark the pure SYNs that start a new stream (see the module docstring for the rule)."""
    splits = np.zeros(len(conv), bool)
    has_ack = (flags & ACK) != 0
    is_candidate = np.zeros(len(conv), bool)
    is_candidate[candidates] = True
    # the packets of the conversations that have candidates, grouped by conversation (stable:
    # each group stays in packet order) -- one sort, not one scan of the capture per conversation
    involved = np.flatnonzero(np.isin(conv, np.unique(conv[candidates])))
    grouped = involved[np.argsort(conv[involved], kind="stable")]
    bounds = np.flatnonzero(np.diff(conv[grouped])) + 1
    for idx in np.split(grouped, bounds):          # one conversation's packets, in order
        d = reverse[idx]
        # positions (within idx) of the events that can set each direction's base
        own = [np.flatnonzero(~d), np.flatnonzero(d)]                           # by direction
        acks = [np.flatnonzero(d & has_ack[idx]), np.flatnonzero(~d & has_ack[idx])]  # sets base of dir k
        start = 0
        for j in np.flatnonzero(is_candidate[idx]):
            k = int(d[j])
            base = _base_seq(idx, own[k], acks[k], start, j, flags, seq, ack)
            if base is not None and base != int(seq[idx[j]]):
                splits[idx[j]] = True
                start = j
    return splits


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
