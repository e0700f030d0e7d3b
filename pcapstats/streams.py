"""The streams layer: which stream each packet belongs to, its direction, and per-stream facts.

Everything the analyses ask about streams is answered here, once:

- **numbering** (:class:`TcpStreams`, :func:`udp_streams`): stream indices exactly as Wireshark
  numbers ``tcp.stream`` and ``udp.stream`` (below);
- **own transport header** (:func:`own_transport`): a packet's TCP/UDP header is its own, not
  one quoted inside an ICMP error.  Wireshark gives a quoted header a stream index too, but its
  conversation tables leave those packets out;
- **direction** (:func:`packet_directions`): side A of a stream is the source (address, port)
  of its first packet with an own header (of its first quoted one when it has none, as
  Wireshark's filters see it); a packet whose source address and port are A's goes ``a_to_b``,
  every other packet of the stream ``b_to_a``.  tshark 4.0's ``-z conv`` names side A the same
  way (newer Wireshark versions order the sides by port instead);
- **the per-stream summary** (:func:`stream_summary`, fed by :class:`StreamTotals`): endpoints,
  packets, frame and payload bytes each way, first and last packet, the busiest interval each
  way -- what ``pcapstats throughput`` shows, stream choice reads and the lab's sidecar looks
  stream ids up in;
- **stream choice** (:func:`choose_stream`): the stream a per-stream analysis was asked for,
  checked, or the TCP stream with the most payload.

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

The functions here read a capture through ``cap.column`` / ``cap.layer`` only, so this module
sits below :mod:`pcapstats.capture`, which derives its ``direction`` column from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import schema
from .addresses import endpoint
from .errors import Note, NothingToReport, UsageError
from .sidecar import stream_labels

if TYPE_CHECKING:
    from .capture import Capture

SYN, ACK = 0x002, 0x010
DIRECTIONS = schema.DIRECTIONS   # direction codes 0 and 1, by name
PROTOS = ("tcp", "udp")


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


# -- own headers and directions -----------------------------------------------------------------

def own_transport(cap: "Capture", proto: str | None = None) -> np.ndarray:
    """Mask of the packets whose TCP (``proto="tcp"``), UDP (``"udp"``) or either (None) header
    is their own, not one quoted inside an ICMP error: the packets Wireshark's conversation
    tables count."""
    if proto is None:
        layer = cap.layer(schema.STREAM)
    elif proto in PROTOS:
        layer = cap.layer(schema.TCP if proto == "tcp" else schema.UDP)
    else:
        raise UsageError(f"unknown protocol {proto!r}", hint="use tcp or udp")
    return layer & ~cap.column("l4_quoted")


REASSEMBLY_NS = 30 * 10**9   # Linux's ipfrag_time: fragments further apart are not one datagram


def whole_datagrams(cap: "Capture", rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``rows``: the IP payload bytes of its whole datagram, when the last of its
    fragments was captured, and that fragment's row.  A datagram over the MTU travels in IPv4
    fragments and only the first carries the transport header (the row an analysis holds); its
    receiver has it when the last fragment arrives.  The fragments of a datagram share source,
    destination and IP identification: each later fragment belongs to the last first fragment
    with its key captured before it (else, when a sender sends its fragments last first, the
    first one after it), within REASSEMBLY_NS of it on the capture's timeline joined across
    clock breaks (``clock.Pieces.monotonic``), so a clock step between fragments parts none
    and an identification used again later is another datagram; the last is the one captured
    last.  Rows that are no first fragment keep their own IP payload, time
    and row.  (IPv6 fragments are not followed.)"""
    rows = np.asarray(rows, np.int64)
    carried = (cap.column("ip_len")[rows].astype(np.int64)
               - cap.column("ip_hdr_len")[rows].astype(np.int64))
    last = rows.copy()
    first = (cap.layer(schema.IP)[rows] & cap.column("ip_fragment")[rows].astype(bool)
             & (cap.column("ip_frag_offset")[rows] == 0))
    if first.any():
        _add_fragments(cap, rows[first], np.flatnonzero(first), carried, last)
    return carried, cap.column("frame_time_ns")[last].astype(np.int64), last


def _add_fragments(cap: "Capture", heads: np.ndarray, index: np.ndarray, carried: np.ndarray,
                   last: np.ndarray) -> None:
    """whole_datagrams' later fragments: each added to the datagram of the first fragment
    ``heads[k]`` (``index[k]``: its place in ``carried`` and ``last``) it belongs to."""
    rest = np.flatnonzero(cap.layer(schema.IP) & cap.column("ip_fragment").astype(bool)
                          & (cap.column("ip_frag_offset") > 0))
    if not len(rest):
        return

    def key(r: np.ndarray) -> np.ndarray:
        return ((cap.column("ip_src")[r].astype(np.int64) << 40)
                ^ (cap.column("ip_dst")[r].astype(np.int64) << 16)
                ^ cap.column("ip_id")[r].astype(np.int64))
    # a key's first fragments in the capture's order, as (key number, row) codes
    _, which = np.unique(np.r_[key(heads), key(rest)], return_inverse=True)
    which = which.ravel().astype(np.int64)
    span = len(cap) + 1
    head_code, rest_code = which[:len(heads)] * span + heads, which[len(heads):] * span + rest
    by_code = np.argsort(head_code, kind="stable")
    sorted_code = head_code[by_code]
    after = np.searchsorted(sorted_code, rest_code)            # the nearest one after, if any
    before = after - 1
    same = which[len(heads):]
    ok_before = (before >= 0) & (sorted_code[np.maximum(before, 0)] // span == same)
    ok_after = (after < len(heads)) & (
        sorted_code[np.minimum(after, len(heads) - 1)] // span == same)
    frame = cap.column("frame_number")
    t = cap.clock.pieces().monotonic(cap.column("frame_time_ns"), frame)
    head_rows = heads[by_code]
    cand_before = head_rows[np.maximum(before, 0)]
    cand_after = head_rows[np.minimum(after, len(heads) - 1)]
    near_before = ok_before & (np.abs(t[rest] - t[cand_before]) <= REASSEMBLY_NS)
    near_after = ok_after & (np.abs(t[cand_after] - t[rest]) <= REASSEMBLY_NS)
    take_after = near_after & ~near_before
    owner = np.where(take_after, np.minimum(after, len(heads) - 1), before)
    belongs = near_before | near_after
    if not belongs.any():
        return
    at = index[by_code[owner[belongs]]]
    rest = rest[belongs]
    np.add.at(carried, at, cap.column("ip_len")[rest].astype(np.int64)
              - cap.column("ip_hdr_len")[rest].astype(np.int64))
    np.maximum.at(last, at, rest)                          # the one captured last


def packet_directions(tcp, udp, stream, src, sport, quoted) -> np.ndarray:
    """Per packet: 0 (a_to_b) or 1 (b_to_a) within its stream, 0 where it has none.

    tcp, udp: layer masks; stream: tcp.stream / udp.stream; src: source address codes; sport:
    source ports; quoted: the transport header is quoted inside an ICMP error.  Side A is the
    source of the stream's first packet with an own header, else of its first quoted one."""
    n = len(stream)
    out = np.zeros(n, np.uint8)
    rows = np.flatnonzero(tcp | udp)
    if len(rows) == 0:
        return out
    n = len(rows)
    key = stream[rows].astype(np.int64) * 2 + udp[rows]          # (stream, proto), both protos
    where = np.arange(n, dtype=np.int64)
    first = np.full(int(key.max()) + 1, 2 * n, np.int64)
    np.minimum.at(first, key, np.where(quoted[rows], n + where, where))  # own packets first
    a = first[key] % n
    source = src[rows].astype(np.int64) << 16 | sport[rows].astype(np.int64)
    out[rows] = source != source[a]
    return out


def stream_names(cap: "Capture") -> dict[tuple[str, int], str]:
    """(proto, stream) -> how a figure names it: "10.0.0.1:5000 → 10.0.0.2:80", plus what the
    lab ran on it when a sidecar says ("reno, pair 1, simpleperf").  Cached on the capture."""
    if "stream_names" not in cap.derived:
        s, labels = stream_summary(cap), stream_labels(cap.path)
        names = {}
        for i in range(len(s["stream"])):
            key = (s["proto"][i], int(s["stream"][i]))
            names[key] = (f"{endpoint(s['address_a'][i], s['port_a'][i])} → "
                          f"{endpoint(s['address_b'][i], s['port_b'][i])}"
                          + (f" ({labels[key]})" if key in labels else ""))
        cap.derived["stream_names"] = names
    return cap.derived["stream_names"]


def id_ranges(ids) -> str:
    """[0, 1, 2, 5] -> '0-2, 5' (for messages that list stream indices)."""
    values = sorted({int(v) for v in ids})
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out) or "none"


# -- the per-stream summary -----------------------------------------------------------------------

_C = schema.Column
STREAM_SUMMARY_COLUMNS: tuple[schema.Column, ...] = (
    schema.STREAM_COLUMN,
    _C("proto", "str", "the stream's transport protocol", values=PROTOS),
    *schema.ENDPOINT_COLUMNS,
    _C("packets", "int64", "frames, both directions", "packets"),
    _C("bytes", "int64", "frame bytes on the wire, both directions", "bytes"),
    _C("packets_a_to_b", "int64", "frames sent by A", "packets"),
    _C("bytes_a_to_b", "int64", "frame bytes sent by A", "bytes"),
    _C("packets_b_to_a", "int64", "frames sent by B", "packets"),
    _C("bytes_b_to_a", "int64", "frame bytes sent by B", "bytes"),
    _C("rel_start_s", "float64", "first frame of the stream, seconds after the capture's first "
       "frame", "s"),
    _C("duration_s", "float64", "last frame minus first frame of the stream, seconds", "s"),
    _C("payload_bytes_a_to_b", "int64", "transport payload bytes sent by A (tcp_len, UDP "
       "length - 8)", "bytes"),
    _C("payload_bytes_b_to_a", "int64", "transport payload bytes sent by B", "bytes"),
    _C("peak_bytes_a_to_b", "int64", "frame bytes sent by A in its busiest interval", "bytes"),
    _C("peak_bytes_b_to_a", "int64", "frame bytes sent by B in its busiest interval", "bytes"),
    _C("peak_payload_bytes_a_to_b", "int64", "payload bytes sent by A in its busiest interval",
       "bytes"),
    _C("peak_payload_bytes_b_to_a", "int64", "payload bytes sent by B in its busiest interval",
       "bytes"),
)
_L4_LAYER = {"tcp": schema.TCP, "udp": schema.UDP}
_CHUNK_ROWS = 1 << 18  # packets fed to the accumulator at a time: bounds its temporaries


def stream_summary(cap: "Capture", *, proto: str | None = None,
                   interval_ns: int = 1_000_000_000) -> dict[str, np.ndarray]:
    """One row per TCP/UDP stream (TCP first, each by stream index), columns
    STREAM_SUMMARY_COLUMNS; the busiest interval is counted on intervals of ``interval_ns``
    aligned to the capture's first packet.  Packets whose header is quoted in an ICMP error
    are left out, as in Wireshark's conversation tables.  Cached on the capture, each
    protocol's apart: both protocols' summary stacks theirs (a TCP analysis asks for TCP's,
    then names its streams from both: TCP's rows are summed once)."""
    key = ("stream_summary", proto, interval_ns)
    if key not in cap.derived:
        own_transport(cap, proto)   # one clear error for an unknown protocol
        cap.derived[key] = (stack_summaries([_summary_of(cap, proto, interval_ns)])
                            if proto is not None else
                            stack_summaries([stream_summary(cap, proto=p, interval_ns=interval_ns)
                                             for p in PROTOS]))
    return cap.derived[key]


def stack_summaries(parts: list[dict]) -> dict[str, np.ndarray]:
    """Summaries (of each protocol) one after the other."""
    return {c.name: np.concatenate([part[c.name] for part in parts])
            for c in STREAM_SUMMARY_COLUMNS}


def _summary_of(cap: "Capture", proto: str, interval_ns: int) -> dict[str, np.ndarray]:
    mask = own_transport(cap, proto)
    names = (f"{proto}_stream", "ip_src", "ip_dst", f"{proto}_srcport", f"{proto}_dstport",
             "frame_time_ns", "frame_len", "payload_len")
    columns = [cap.column(name) for name in names]
    every = bool(mask.all())          # an all-TCP capture: slices of the columns, no gathering
    rows = None if every else np.flatnonzero(mask)
    n = len(mask) if every else len(rows)
    t0 = cap.first_time_ns if len(cap) else None
    for chunk in (_CHUNK_ROWS, None):  # in chunks; whole if time goes back between chunks
        totals = StreamTotals(proto, interval_ns, t0)
        step = chunk or max(n, 1)
        try:
            for lo in range(0, n, step):
                part = slice(lo, lo + step) if every else rows[lo:lo + step]
                totals.add(*(c[part] for c in columns), close=chunk is not None)
            break
        except TimeWentBack:
            continue
    return totals.columns(cap.addresses)


class SummaryKeeper:
    """A keeper of ``ingest.read_kept``: the whole file's stream summary (one interval, both
    protocols) fed window by window, so an analysis that holds only some rows still chooses
    and names streams as on the whole table (``put``).  ``done`` gives None where time went
    back across windows (the summary then needs the whole table)."""

    def __init__(self, interval_ns: int = 1_000_000_000):
        self.interval_ns, self.totals, self.failed, self.last = interval_ns, {}, False, None

    @property
    def seen(self) -> bool:
        return self.last is not None

    def add(self, window: "Capture") -> None:
        if not self.totals:
            self.totals = {p: StreamTotals(p, self.interval_ns, window.first_time_ns)
                           for p in PROTOS}
        self.last = window
        if self.failed or not len(window):
            return
        names = ("ip_src", "ip_dst", "frame_time_ns", "frame_len", "payload_len")
        for proto, totals in self.totals.items():
            rows = np.flatnonzero(own_transport(window, proto))
            if not len(rows):
                continue
            src, dst, t, frame_len, payload = (window.column(n)[rows] for n in names)
            try:
                totals.add(window.column(f"{proto}_stream")[rows], src, dst,
                           window.column(f"{proto}_srcport")[rows],
                           window.column(f"{proto}_dstport")[rows], t, frame_len, payload,
                           close=True)
            except TimeWentBack:
                self.failed = True
                return

    def done(self, total: int) -> dict[str, dict] | None:
        if self.failed:
            return None
        parts = {p: self.totals[p].columns(self.last.addresses) if self.totals else
                 empty_summary() for p in PROTOS}
        return {**parts, None: stack_summaries([parts[p] for p in PROTOS])}

    def put(self, cap: "Capture", summaries: dict) -> None:
        """Make ``cap``'s stream summary (at this interval) the whole file's."""
        for proto, summary in summaries.items():
            cap.derived[("stream_summary", proto, self.interval_ns)] = summary


def empty_summary() -> dict[str, np.ndarray]:
    return {c.name: np.zeros(0, object if c.dtype == "str" else c.dtype)
            for c in STREAM_SUMMARY_COLUMNS}


class TimeWentBack(Exception):
    """A window held a packet in an interval already closed: the streaming pass cannot finish."""


class StreamTotals:
    """Per-stream sums of one protocol, fed in packet order, all at once or window by window.

    Packets, bytes and payload per direction, first and last time, side A (the source of the
    stream's first packet) and, for the busiest interval, the byte sums of (stream, direction,
    interval) cells.  Fed window by window, a cell whose interval lies before the window's
    earliest packet is closed (folded into the peak and forgotten), so memory holds only the
    streams and the open cells; a packet falling into a closed interval (time going backwards
    across windows) raises TimeWentBack, and the caller reads the capture whole instead.
    """

    def __init__(self, proto: str, interval_ns: int, t0: int | None):
        self.proto, self.interval_ns, self.t0 = proto, interval_ns, t0
        self.seen = np.zeros(0, bool)
        self.sums = np.zeros((0, 2, 3), np.int64)          # packets, frame bytes, payload bytes
        self.t_min = np.zeros(0, np.int64)
        self.t_max = np.zeros(0, np.int64)
        self.ends = np.zeros((0, 4), np.int64)             # a_addr, a_port, b_addr, b_port
        self.peak = np.zeros((0, 2, 2))                    # best cell: frame bytes, payload bytes
        self.open_keys = np.zeros(0, np.int64)             # open cells: stream x 2 + direction,
        self.open_bins = np.zeros(0, np.int64)             # interval bin (any int64: a clock
        self.open_sums = np.zeros((0, 2))                  # step makes bins past 2^31)
        self.closed_below: int | None = None

    def add(self, ids, src, dst, sport, dport, t, frame_len, payload_len, close: bool = False):
        ids = ids.astype(np.int64, copy=False)
        self._grow(int(ids.max()) + 1)
        new = ~self.seen[ids]
        if new.any():  # the first packet of a stream names its side A
            rows = np.flatnonzero(new)
            firsts = _first_rows(ids, rows)
            sid = ids[firsts]
            self.ends[sid] = np.stack([src[firsts], sport[firsts], dst[firsts], dport[firsts]], 1)
            self.seen[sid] = True
            self.t_min[sid] = np.iinfo(np.int64).max
            self.t_max[sid] = np.iinfo(np.int64).min
        # np.take of a column: 4-7x faster than fancy indexing the 2-D array on 1.77M packets
        key = ids * 2 + ((src != np.take(self.ends[:, 0], ids)) |
                         (sport != np.take(self.ends[:, 1], ids)))
        np.minimum.at(self.t_min, ids, t)
        np.maximum.at(self.t_max, ids, t)
        bins = (t - self.t0) // self.interval_ns
        low = int(bins.min())
        if close and self.closed_below is not None and low < self.closed_below:
            raise TimeWentBack(low)
        cell_key, cell_bin, sums = _cell_sums(key, bins, frame_len, payload_len)
        flat = self.sums.reshape(-1, 3)  # row stream x 2 + direction
        for i in range(3):  # the stream totals are the sums of their cells
            flat[:, i] += np.bincount(cell_key, weights=sums[:, i],
                                      minlength=len(flat)).round().astype(np.int64)
        self._open(cell_key, cell_bin, sums[:, 1:])
        if close:
            self._close(below=low)

    def columns(self, addresses) -> dict[str, np.ndarray]:
        """The summary (STREAM_SUMMARY_COLUMNS) of the streams seen so far."""
        self._close(below=None)
        sid = np.flatnonzero(self.seen)
        n = len(sid)
        if n == 0:
            return empty_summary()
        sums, ends = self.sums[sid], self.ends[sid]
        packets, frame_bytes, payload_bytes = sums[:, :, 0], sums[:, :, 1], sums[:, :, 2]
        t_min, t_max = self.t_min[sid], self.t_max[sid]
        peak = self.peak[sid].round().astype(np.int64)
        columns = {
            "stream": sid.astype(np.int64),
            "proto": np.full(n, self.proto, dtype=object),
            "address_a": addresses[ends[:, 0]].astype(object), "port_a": ends[:, 1],
            "address_b": addresses[ends[:, 2]].astype(object), "port_b": ends[:, 3],
            "packets": packets.sum(axis=1), "bytes": frame_bytes.sum(axis=1),
            "packets_a_to_b": packets[:, 0], "bytes_a_to_b": frame_bytes[:, 0],
            "packets_b_to_a": packets[:, 1], "bytes_b_to_a": frame_bytes[:, 1],
            "rel_start_s": (t_min - self.t0) / 1e9, "duration_s": (t_max - t_min) / 1e9,
            "payload_bytes_a_to_b": payload_bytes[:, 0], "payload_bytes_b_to_a": payload_bytes[:, 1],
            "peak_bytes_a_to_b": peak[:, 0, 0], "peak_bytes_b_to_a": peak[:, 1, 0],
            "peak_payload_bytes_a_to_b": peak[:, 0, 1], "peak_payload_bytes_b_to_a": peak[:, 1, 1],
        }
        return {c.name: columns[c.name] for c in STREAM_SUMMARY_COLUMNS}

    def _grow(self, n: int) -> None:
        extra = n - len(self.seen)
        if extra <= 0:
            return
        grow = max(extra, len(self.seen))  # amortised doubling
        self.seen = np.concatenate([self.seen, np.zeros(grow, bool)])
        self.sums = np.concatenate([self.sums, np.zeros((grow, 2, 3), np.int64)])
        self.t_min = np.concatenate([self.t_min, np.zeros(grow, np.int64)])
        self.t_max = np.concatenate([self.t_max, np.zeros(grow, np.int64)])
        self.ends = np.concatenate([self.ends, np.zeros((grow, 4), np.int64)])
        self.peak = np.concatenate([self.peak, np.zeros((grow, 2, 2))])

    def _open(self, cell_key, cell_bin, sums) -> None:
        """Merge byte sums of (stream x 2 + direction, interval) cells into the open cells."""
        keys, bins, idx = _cells(np.concatenate([self.open_keys, cell_key]),
                                 np.concatenate([self.open_bins, cell_bin]))
        both = np.concatenate([self.open_sums, sums])
        self.open_keys, self.open_bins = keys, bins
        self.open_sums = np.stack([np.bincount(idx, weights=both[:, i], minlength=len(keys))
                                   for i in (0, 1)], 1)

    def _close(self, below: int | None) -> None:
        """Fold the cells of intervals before ``below`` (all when None) into the peaks."""
        if len(self.open_keys) == 0:
            return
        done = np.ones(len(self.open_bins), bool) if below is None else self.open_bins < below
        flat = self.peak.reshape(-1, 2)
        for i in (0, 1):
            np.maximum.at(flat[:, i], self.open_keys[done], self.open_sums[done, i])
        keep = ~done
        self.open_keys, self.open_bins = self.open_keys[keep], self.open_bins[keep]
        self.open_sums = self.open_sums[keep]
        if below is not None:
            self.closed_below = below if self.closed_below is None else max(self.closed_below, below)


def _cells(key: np.ndarray, bins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (key, bin) pairs, sorted, and each input row's pair index: by sorting the
    two columns, so no product of their ranges has to fit in 64 bits."""
    if len(key) == 0:
        return key, bins, np.zeros(0, np.int64)
    order = np.lexsort((bins, key))
    k, b = key[order], bins[order]
    first = np.empty(len(k), bool)
    first[0] = True
    first[1:] = (k[1:] != k[:-1]) | (b[1:] != b[:-1])
    idx = np.empty(len(k), np.int64)
    idx[order] = np.cumsum(first) - 1
    return k[first], b[first], idx


def _cell_sums(key, bins, frame_len, payload_len):
    """Packets, frame bytes and payload bytes of each occupied (key, interval bin) cell:
    (cell keys, cell bins, sums[cell, 3]).  Counted densely when the grid is small, else
    by sorting."""
    b0, n_bins = int(bins.min()), int(bins.max()) - int(bins.min()) + 1
    k0, n_keys = int(key.min()), int(key.max() - key.min()) + 1
    if n_keys * n_bins <= _DENSE_LIMIT:
        cell = (key - k0) * n_bins + (bins - b0)
        size = n_keys * n_bins
        count = np.bincount(cell, minlength=size)
        cells = np.flatnonzero(count)
        sums = np.stack([count[cells]] + [np.bincount(cell, weights=w, minlength=size)[cells]
                                          for w in (frame_len, payload_len)], 1)
        return cells // n_bins + k0, cells % n_bins + b0, sums.astype(np.float64)
    keys, cell_bins, idx = _cells(key, bins)
    sums = np.stack([np.bincount(idx, minlength=len(keys))]
                    + [np.bincount(idx, weights=w, minlength=len(keys))
                       for w in (frame_len, payload_len)], 1)
    return keys, cell_bins, sums.astype(np.float64)


def _first_rows(ids, rows) -> np.ndarray:
    """Of ``rows`` (increasing), the first row of each distinct id, in row order."""
    first = np.full(int(ids[rows].max()) + 1, len(ids), np.int64)
    np.minimum.at(first, ids[rows], rows)
    return np.sort(first[first < len(ids)])


_DENSE_LIMIT = 1 << 24  # (stream, direction, interval) cells counted in one dense array


# -- stream choice --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StreamChoice:
    """The TCP stream a per-stream analysis works on, and how it was picked."""
    stream: int
    chosen: bool           # True when picked by default (the analysis says which in a note)
    payload_bytes: int
    streams_with_data: int

    def note(self) -> Note | None:
        """What to tell the user when the stream was picked for them, else None."""
        if not self.chosen or self.streams_with_data <= 1:
            return None
        return Note("the most payload; --stream N picks another",
                    about=f"TCP stream {self.stream}",
                    detail=f"{self.payload_bytes} payload bytes, the most of the "
                           f"{self.streams_with_data} streams with data; pick another with "
                           "stream=N (--stream N)")


def require_tcp(cap: "Capture") -> None:
    """NothingToReport when the capture has no TCP packet: the one line every TCP analysis
    says then, with what the capture holds."""
    if not cap.layer_count(schema.TCP):
        raise NothingToReport(f"no TCP packets in {cap.path} ({cap.holds()})",
                              hint="this analysis works on TCP streams; `pcapstats throughput` "
                                   "lists the streams there are")


def choose_stream(cap: "Capture", stream: int | None) -> StreamChoice:
    """The TCP stream asked for, checked, or by default the one with the most payload bytes;
    one clear error when there is none to analyse (no TCP: NothingToReport; a UDP stream, no
    such stream: UsageError)."""
    tcp = stream_summary(cap, proto="tcp")
    ids = tcp["stream"]
    if len(ids) == 0:
        require_tcp(cap)
        raise NothingToReport(f"no TCP stream in {cap.path} ({cap.holds()})",
                              hint="`pcapstats throughput` lists the streams there are")
    payload = tcp["payload_bytes_a_to_b"] + tcp["payload_bytes_b_to_a"]
    with_data = int((payload > 0).sum())
    if stream is None:
        best = int(np.argmax(payload))
        return StreamChoice(int(ids[best]), True, int(payload[best]), with_data)
    at = np.flatnonzero(ids == stream)
    if len(at) == 0:
        udp = stream_summary(cap, proto="udp")["stream"]
        what = (f"stream {stream} is a UDP stream, not TCP" if (udp == stream).any()
                else f"no TCP stream {stream} in this capture")
        raise UsageError(what, path=cap.path, hint=f"TCP streams here: {id_ranges(ids)}")
    return StreamChoice(int(stream), False, int(payload[at[0]]), with_data)
