"""pcapstats' ``resent`` (a segment that carries sequence space its direction had already
sent) without running the analyser: from the wire's sequence numbers, rebased where a SYN/ACK
moved a direction's base.
"""

from __future__ import annotations

import numpy as np

from ...capture import Capture
from ...schema import TCP
from ...streams import own_transport
from .inputs import analysed_rows

# columns and layers resent_packets reads (for an analysis' Needs)
RESENT_READS = (TCP, "l4_quoted", "tcp_hdr_len", "ip_fragment", "tcp_stream", "direction",
                "tcp_flags", "tcp_seq_raw", "tcp_ack_raw", "tcp_len")
_SYN, _ACK, _SYN_FIN = 0x002, 0x010, 0x003


def resent_packets(cap: Capture) -> tuple[np.ndarray, np.ndarray]:
    """(rows of the TCP packets analysed, which of them re-send sequence space): the ``resent``
    column alone, without running the analyser (fairness' goodput needs only this).

    resent_segments compares sequence numbers only within a direction, so any numbers a
    constant apart from the analyser's relative ones give its answers.  The wire's numbers
    are, as long as the direction's base stays put (a SYN, a repeated SYN, a stream caught
    mid-flow, fragments and zero-window probes all leave it); where a SYN/ACK moves the base
    (reused ports), ``_from_base`` moves them with it."""
    rows = analysed_rows(cap)
    col = lambda name: cap.column(name)[rows]  # noqa: E731
    inputs = {"stream": col("tcp_stream"), "dir": col("direction"), "flags": col("tcp_flags"),
              "seglen": col("tcp_len"), "analysed": ~col("ip_fragment").astype(bool, copy=False)}
    return rows, resent_segments(inputs, _from_base(cap, rows, inputs))


def resent_rows(cap: Capture) -> np.ndarray:
    """Bool mask of the rows resent_packets reads: every analysed TCP packet that carries
    sequence space (data, SYN, FIN), and each direction's first analysed packet and first
    analysed ACK, which set its base.  Decided within the rows given, so a window of the file
    keeps a superset of the file's first packets."""
    tcp = own_transport(cap, "tcp") & (cap.column("tcp_hdr_len") >= 20)
    flags = cap.column("tcp_flags")
    need = tcp & ((cap.column("tcp_len") > 0) | ((flags & _SYN_FIN) != 0))
    analysed = np.flatnonzero(tcp & ~cap.column("ip_fragment").astype(bool, copy=False))
    # each direction by its own number (stream ids count packets: a dense table is small)
    key = cap.column("tcp_stream")[analysed] * 2 + cap.column("direction")[analysed]
    size = int(key.max()) + 1 if len(key) else 0
    first, first_ack = np.full(size, len(cap)), np.full(size, len(cap))
    np.minimum.at(first, key, analysed)
    acks = (flags[analysed] & _ACK) != 0
    np.minimum.at(first_ack, key[acks], analysed[acks])
    need[first[first < len(cap)]] = True
    need[first_ack[first_ack < len(cap)]] = True
    return need


def _from_base(cap: Capture, rows: np.ndarray, inputs) -> np.ndarray:
    """The packets' sequence numbers less their direction's base, up to one constant per
    direction.  The analyser sets a direction's base at its first analysed packet (seq, or
    seq - 1 without SYN) or at the peer's first analysed ACK (ack - 1), whichever comes
    first; from then on a SYN/ACK with another seq becomes the base.  So the wire's numbers
    serve, less the moves of the base since it was set: only directions where a SYN/ACK moved
    it are rebased, by a search among those moves."""
    seq = cap.column("tcp_seq_raw")[rows]
    flags = inputs["flags"]
    synack = np.flatnonzero((flags & (_SYN | _ACK)) == (_SYN | _ACK))
    if not len(synack):
        return seq
    # where each direction's base was set, if before its last SYN/ACK (later ones move nothing)
    n, head = len(rows), int(synack[-1]) + 1
    key = inputs["stream"][:head] * 2 + inputs["dir"][:head]
    analysed = np.flatnonzero(inputs["analysed"][:head])
    acking = analysed[(flags[analysed] & _ACK) != 0]
    own_first = np.full(int(key.max()) // 2 * 2 + 2, n)     # both directions of each stream
    ack_first = own_first.copy()
    np.minimum.at(own_first, key[analysed], analysed)
    np.minimum.at(ack_first, key[acking], acking)
    keys = np.unique(key[synack])
    own, peer = own_first[keys], ack_first[keys ^ 1]
    first = np.minimum(own, peer)
    keys, own, peer, first = (a[first < n] for a in (keys, own, peer, first))
    if not len(keys):
        return seq
    by_own = own < peer
    base = np.empty(len(keys), np.uint32)
    base[by_own] = seq[own[by_own]] - ((flags[own[by_own]] & _SYN) == 0)
    base[~by_own] = cap.column("tcp_ack_raw")[rows[peer[~by_own]]] - np.uint32(1)
    # the SYN/ACKs from then on, each the base in turn: events (direction, position, base)
    at = np.minimum(np.searchsorted(keys, key[synack]), len(keys) - 1)
    later = synack[(keys[at] == key[synack]) & (synack >= first[at])]
    ev_key, ev_pos, ev_base = np.r_[keys, key[later]], np.r_[first, later], np.r_[base, seq[later]]
    order = np.lexsort((ev_pos, ev_key))
    ev_key, ev_pos, ev_base = ev_key[order], ev_pos[order], ev_base[order]
    opens = np.r_[True, ev_key[1:] != ev_key[:-1]]
    moved = np.r_[np.uint32(0), ev_base[1:] - ev_base[:-1]]     # how far each event moved it
    moved[opens] = 0
    if not moved.any():
        return seq
    # in the directions it moved: the moves up to each analysed packet, subtracted (mod 2^32)
    movers = np.unique(ev_key[moved != 0])
    keep = np.isin(ev_key, movers)
    ev_key, ev_pos, moved = ev_key[keep], ev_pos[keep], moved[keep]
    opens = np.flatnonzero(np.r_[True, ev_key[1:] != ev_key[:-1]])
    total = np.cumsum(moved, dtype=np.uint64)
    total -= np.repeat(total[opens], np.diff(np.r_[opens, len(ev_key)]))
    analysed = np.flatnonzero(inputs["analysed"])
    key = inputs["stream"][analysed] * 2 + inputs["dir"][analysed]
    hit = np.isin(key, movers)
    affected, rank = analysed[hit], np.searchsorted(movers, key[hit])
    ev_rank = np.searchsorted(movers, ev_key)
    # the latest event at or before each packet (an analysed packet follows its base's setting)
    last = np.searchsorted(ev_rank * (n + 1) + ev_pos, rank * (n + 1) + affected, "right") - 1
    seq[affected] -= total[last].astype(np.uint32)
    return seq


def resent_segments(inputs: dict[str, np.ndarray], rel_seq: np.ndarray) -> np.ndarray:
    """Per packet: it carries sequence space (data, SYN, FIN) starting below the highest
    sequence number its (stream, direction) had sent before it.  Sequence numbers are
    unwrapped within each direction (steps of less than 2^31), so streams past 4 GB count too,
    and compared only within it (any constant per direction gives the same answer)."""
    flags, seglen = inputs["flags"], inputs["seglen"]
    synfin = (flags & _SYN_FIN) != 0
    out = np.zeros(len(seglen), bool)
    rows = np.flatnonzero(((seglen > 0) | synfin) & (inputs["analysed"] != 0))
    if len(rows) == 0:
        return out
    key = inputs["stream"][rows] * 2 + inputs["dir"][rows]
    lengths = np.bincount(key)
    lengths = lengths[lengths > 0]                  # each direction's segments, by key
    starts = np.r_[0, np.cumsum(lengths[:-1])]
    # each direction's segments in packet order: a stable sort (radix, when keys fit 16 bits)
    if key.max() < 1 << 16:
        key = key.astype(np.uint16)
    rows = rows[np.argsort(key, kind="stable")]
    del key
    seq = rel_seq[rows].astype(np.int64)
    step = np.empty_like(seq)
    step[0] = 0
    np.subtract(seq[1:], seq[:-1], out=step[1:])
    del seq
    step += 1 << 31                                 # signed, mod 2^32: a re-send steps back
    step &= (1 << 32) - 1
    step -= 1 << 31
    step[starts] = 0
    seq = np.cumsum(step, out=step)                 # unwrapped, plus a constant per direction
    end = seq + seglen[rows]
    end += synfin[rows]
    base = seq[starts]
    low = int((np.minimum.reduceat(seq, starts) - base).min())
    span = int((np.maximum.reduceat(end, starts) - base).max()) - low + 1
    if len(starts) * span < (1 << 62):
        # the highest end sent before each segment, within its direction: directions laid end
        # to end on one number line (each in a band of its own), then one running maximum
        shift = np.repeat(np.arange(len(starts)) * span - low - base, lengths)
        seq += shift
        end += shift
        del shift
        np.maximum.accumulate(end, out=end)
        out[rows[1:]] = seq[1:] < end[:-1]
    else:                                           # too wide to lay out: one at a time
        for a, b in zip(starts, np.r_[starts[1:], len(rows)]):
            before = np.maximum.accumulate(end[a:b])
            out[rows[a + 1:b]] = seq[a + 1:b] < before[:-1]
    return out

