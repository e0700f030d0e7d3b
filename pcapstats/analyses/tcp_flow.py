"""One TCP stream's rows, which direction carries the data, its segment size, and where the
capture was taken.

Shared by the per-stream TCP analyses (cwnd, rtt, seqgraph, flavour): they all need one
stream's sequence analysis, its data direction, and (cwnd) whether the capture saw the data
*sender's* view or the *receiver's*.  Which stream: pcapstats.streams.choose_stream.

- :func:`stream_rows`: tcp_analysis of one stream plus the header fields the analyses need;
- :func:`data_direction`: the direction (0 a_to_b / 1 b_to_a) that sent more payload bytes;
- :func:`segment_size`: the sender's MSS, from the SYNs' MSS option less the options the data
  carries, else from the lengths seen.  Not the largest segment: a capture on a host with
  segmentation offload (TSO/GSO at the sender, GRO at the receiver: the kernel's default)
  shows segments of several MSS, up to 64 KB;
- :func:`capture_side`: "sender", "receiver" (of the data), "middle" (of the path) or
  "unknown", from the first of these that tells:

  1. *the handshake's timing*: a capture point near a host sees that host's packets leave at
     once and the peer's answers a full round trip later: near the client, SYN -> SYN/ACK
     takes about the whole initial RTT and SYN/ACK -> ACK almost nothing; near the server the
     other way round; an even split of a round trip of HANDSHAKE_MIN_NS or more is the middle.
     A path with no propagation delay (a LAN, Mininet, a shaped link whose RTT is its queue,
     empty at the start) has a handshake of microseconds that tells nothing;
  2. *which packets trigger which*: at the sender new data leaves within microseconds of the
     ACK that opened room for it (an ACK-clocked sender), at the receiver an ACK leaves within
     microseconds of the data it answers; so the median gap from an ACK to the data right
     after it is tiny at the sender and the median gap from data to the ACK right after it
     tiny at the receiver.  A paced sender (BBR) or a point in the middle shows neither;
  3. *TTLs*: a packet captured where it was sent still carries an initial TTL
     (schema.sent_here); data with one and ACKs without: the sender; the reverse: the
     receiver; neither: the middle (routers on both sides); both: no router on the path,
     nothing told;
  4. without a handshake: Wireshark's ack_rtt of the data (data -> its ACK) against the
     timestamp RTT of the data packets (receiver's ACK -> the data echoing it).

- :class:`FlowDigests`: what the capture side and the RTTs are read from, for every stream at
  once, kept as the file is analysed window by window (``tcpseq.AnalysedWindows``): of a
  stream's rows only those that carry an RTT sample, the SYNs, the first pure ACK of each
  direction after each SYN/ACK, and the rows where the direction changes (the pairs the
  triggers time, each row beside the one it was next to), with its TTLs counted.  Each
  function above gives the same answer on a digest's rows (``digest``) as on all the rows:
  on a bulk transfer a few rows an ACK, not one a segment.
"""

from __future__ import annotations

import numpy as np

from ..capture import Capture
from ..schema import sent_here
from .tcpseq import analysed, keep_as_runs, packet_analysis, table_index

# capture_side in a sentence: the `side` column's definition (`pcapstats columns`), and the
# long form of the analyses' "stream N: sender-side capture" notes without the numbers
SIDE_DOC = ("where the capture was taken: sender, receiver (of the data), middle (of the path) "
            "or unknown, told by the first of: the handshake's timing (near the client SYN -> "
            "SYN/ACK takes the whole round trip, near the server SYN/ACK -> ACK does); which "
            "packets trigger which (at the sender new data leaves microseconds after an ACK, at "
            "the receiver an ACK microseconds after the data); the TTLs (a packet captured "
            "where it was sent still has its initial TTL); without a handshake, the data's ACK "
            "RTT against its timestamp RTT")
# the tcp_analysis columns the stream analyses read (stream_rows adds header fields)
FLOW_COLUMNS = ("row", "frame_number", "frame_time_ns", "direction", "tcp_len", "tcp_seq",
                "tcp_ack", "tcp_nxtseq", "tcp_window_size", "bytes_in_flight", "retransmission",
                "out_of_order", "keep_alive", "zero_window_probe", "lost_segment", "resent",
                "ack_rtt_ns", "ack_rtt_karn_ns", "ts_rtt_ns", "initial_rtt_ns")
NEAR_FRACTION = 0.75   # the near side's share of the round trip needed to call the side
HANDSHAKE_MIN_NS = 1_000_000   # a handshake round trip shorter than this tells no side: the
                               # hosts' own processing (10-50 us) is then as long as the path
TRIGGER_NS = 200_000   # the median gap from the packet that triggers to the one triggered is
                       # at most this (measured: 3-12 us at the host, on veths and tbf paths)
TRIGGER_RATIO = 4      # ... and the median gap the other way round at least this many times
                       # longer (measured: 60-200 times at the host; paced BBR: 1.3 times)
MIN_TRIGGERS = 20      # pairs of each kind needed to judge
MSS_MIN_BYTES = 536    # a segment size read from the lengths is at least IPv4's default MSS
# tcp_analysis' RTT columns, which a stream's rows and digests keep where present alone, as
# runs of equal values (tcpseq.runs: on a bulk stream one ACK in tens carries an RTT, the iRTT
# is one value on every packet, and a column of every row costs 8 bytes a packet)
SAMPLED = ("ack_rtt_ns", "ack_rtt_karn_ns", "ts_rtt_ns", "initial_rtt_ns")


def data_direction(flow) -> int:
    """0 or 1: the direction of the stream's rows (tcp_analysis) that sent more payload."""
    if "payload_bytes" in flow:             # a digest: its stream's payload by direction
        sent = flow["payload_bytes"]
        return 0 if sent[0] >= sent[1] else 1
    lens = flow["tcp_len"]                  # unsigned: summed as uint64, no copies
    d = flow["direction"]
    return 0 if lens.sum(where=d == 0) >= lens.sum(where=d == 1) else 1


def stream_rows(cap: Capture, stream: int) -> dict[str, np.ndarray]:
    """One stream's rows as columns: tcp_analysis (packet_analysis' raw columns: direction
    0/1, optional numbers as the analyser gives them with their ``has_`` masks, the RTTs
    (SAMPLED) where present alone as runs: read them with :func:`optional`, :func:`measured`
    and :func:`first_value`)
    plus the header fields the stream analyses need:
    ``tcp_flags``, ``tcp_hdr_len``, ``ip_ttl``, ``mss_option`` (where ``has_mss``),
    ``tsval``/``tsecr`` (where ``has_ts``), as the table holds them.  Plain arrays, no
    DataFrame: on a 1M-packet stream a DataFrame copied every column once more; on a table of
    the stream's rows alone the header fields are the capture's own arrays, not copies (read
    them, never write them; float copies with NaN cost 24 bytes a packet)."""
    flow = packet_analysis(cap, stream, columns=FLOW_COLUMNS, masks=True, sampled=SAMPLED)
    at = table_index(cap, flow["row"])
    flow["tcp_flags"] = cap.column("tcp_flags")[at]
    flow["tcp_hdr_len"] = cap.column("tcp_hdr_len")[at]
    flow["ip_ttl"] = cap.column("ip_ttl")[at]
    flow["mss_option"] = cap.column("tcp_option_mss")[at]
    flow["has_mss"] = cap.present("tcp_option_mss")[at]
    for name in ("tsval", "tsecr"):
        flow[name] = cap.column(f"tcp_option_{name}")[at]
    flow["has_ts"] = cap.present("tcp_option_tsval")[at]
    return flow


def _present(flow, name: str) -> np.ndarray:
    """The values of the RTT column ``name`` (of SAMPLED) where present, in row order."""
    return np.repeat(flow[name], flow[f"{name}_runs"])


def first_value(flow, name: str, below: float | None = None):
    """The first value of the RTT column ``name`` (of SAMPLED), the first under ``below``
    when given; None when there is none."""
    values = flow[name]                     # its runs' values, in row order
    if below is not None:
        values = values[values < below]
    return values[0] if len(values) else None


def optional(flow, name: str, at: np.ndarray | None = None) -> np.ndarray:
    """The RTT column ``name`` (of SAMPLED) of a stream's rows or digest, at the rows where
    the mask ``at`` holds (all when None), as tcp_analysis has it: float64, NaN where absent;
    made at the rows read alone."""
    present = flow[f"has_{name}"]
    values = _present(flow, name) if at is None else _present(flow, name)[at[present]]
    out = np.full(len(present) if at is None else int(np.count_nonzero(at)), np.nan)
    out[present if at is None else present[at]] = values
    return out


def measured(flow, name: str, where: np.ndarray | None = None) -> np.ndarray:
    """The values of the RTT column ``name`` (of SAMPLED) where it has one (and the mask
    ``where`` holds), in row order, float64: :func:`optional` without its NaNs."""
    values = _present(flow, name)
    values = values if where is None else values[where[flow[f"has_{name}"]]]
    return values.astype(np.float64)


def segment_size(flow, data_dir: int) -> tuple[int, str]:
    """(the data sender's MSS in payload bytes, how it was found) for one stream's rows (from
    :func:`stream_rows`); 0 without data.  A sender's segments are at most the smaller of the
    two SYNs' MSS options less the TCP options each segment carries (RFC 9293 3.7.1); with
    segmentation offload the capture shows several of them as one packet, whose length is a
    multiple of the MSS."""
    d = flow["direction"]
    data = (d == data_dir) & (flow["tcp_len"] > 0)
    if not data.any():
        return 0, "no data"
    largest = int(np.max(flow["tcp_len"], where=data, initial=0))   # (no copy of the data's)
    flags = flow["tcp_flags"]
    with_option = ((flags & 0x02) != 0) & flow["has_mss"]      # the SYNs carrying the option
    option = np.asarray(flow["mss_option"][with_option], np.float64)
    if len(option):
        options = int(np.median(flow["tcp_hdr_len"][data])) - 20
        mss = int(option.min()) - max(options, 0)
        if mss > 0:
            return mss, (f"SYN MSS option {int(option.min())} less {options} bytes of options"
                         + (f"; segments of up to {largest} bytes: segmentation offload"
                            if largest > mss else ""))
    lens = np.asarray(flow["tcp_len"], np.int64)
    values, counts = np.unique(lens[data], return_counts=True)
    frequent = values[(counts >= max(3, 0.01 * data.sum())) & (values >= MSS_MIN_BYTES)]
    for size in frequent[frequent < largest]:
        larger = lens[data][lens[data] >= size]
        if np.mean(larger % size == 0) >= 0.9:
            return int(size), ("no MSS option seen; the segments are this size or multiples "
                               f"of it, up to {largest} bytes: segmentation offload")
    return largest, "no MSS option seen; the largest segment"


def capture_side(flow, data_dir: int) -> tuple[str, str]:
    """(sender, receiver, middle or unknown: of schema.CAPTURE_POINTS; the evidence in words)
    for one stream's rows (from :func:`stream_rows`): the first evidence of the module docstring's list that tells, except that TTLs showing
    both directions past a router (the middle) come before the triggers, which only say which
    end the point is near (:func:`near_end`); what the others said follows."""
    flags = flow["tcp_flags"]
    handshake, triggers, ttls = (_side_from_handshake(flow, data_dir, flags),
                                 _side_from_triggers(flow, data_dir),
                                 _side_from_ttls(flow, data_dir))
    order = [handshake] + ([ttls, triggers] if ttls[0] == "middle" else [triggers, ttls])
    for k, (side, text) in enumerate(order):
        if side is not None:
            return side, "; ".join([text] + [t for j, (_, t) in enumerate(order)
                                             if j != k and t])
    side, text = _side_from_rtts(flow, data_dir)
    return side, "; ".join([text] + [t for _, t in order if t])


def near_end(flow, data_dir: int) -> str | None:
    """"sender" or "receiver": the end of the path a capture point is near, from which packets
    trigger which (module docstring, 2.); None when that does not tell.  A point in the middle
    is analysed as the end it is near."""
    return _side_from_triggers(flow, data_dir)[0]


def _side_from_handshake(flow, data_dir, flags) -> tuple[str | None, str]:
    t = flow["frame_time_ns"]
    d = flow["direction"]
    syn = (flags & 0x12) == 0x02
    synack = (flags & 0x12) == 0x12
    ack = (flags & 0x17) == 0x10
    if not (syn.any() and synack.any()):
        return None, ""
    # the SYN that was answered: the last one before the first SYN/ACK from the other side
    first_synack = np.flatnonzero(synack)[0]
    before = np.flatnonzero(syn[:first_synack])
    if len(before) == 0:
        return None, ""
    i_syn = before[-1]
    client = d[i_syn]
    # the first SYN/ACK answering it, the first pure ACK after that (argmax: the first True,
    # without an index of every pure ACK, which on a bulk stream is every data segment)
    answer = synack[i_syn + 1:] & (d[i_syn + 1:] != client)
    if not answer.any():
        return None, ""
    i_sa = int(answer.argmax()) + i_syn + 1
    del answer
    acked = ack[i_sa + 1:] & (d[i_sa + 1:] == client)
    if not acked.any():
        return None, ""
    i_ack = int(acked.argmax()) + i_sa + 1
    first, second = t[i_sa] - t[i_syn], t[i_ack] - t[i_sa]
    total = first + second
    text = (f"handshake: SYN -> SYN/ACK {first / 1e6:.3f} ms, SYN/ACK -> ACK "
            f"{second / 1e6:.3f} ms")
    if first < 0 or second < 0:                # a clock step inside the handshake
        return None, ""
    if total < HANDSHAKE_MIN_NS:
        return None, text + " (too short to tell)"
    near_client = first / total
    if near_client >= NEAR_FRACTION:
        near = client
    elif near_client <= 1 - NEAR_FRACTION:
        near = 1 - client
    else:
        return "middle", text + ": a capture in the middle of the path"
    who = "the client" if near == client else "the server"
    side = "sender" if near == data_dir else "receiver"
    return side, f"{text}: captured near {who}, the data {side}"


def _side_from_triggers(flow, data_dir) -> tuple[str | None, str]:
    """Which packets follow which within microseconds (module docstring, 2.)."""
    t = np.asarray(flow["frame_time_ns"], np.int64)
    d = flow["direction"]
    data = (d == data_dir) & (flow["tcp_len"] > 0)
    new = data & ~np.asarray(flow["resent"], bool)
    ack = d != data_dir
    # the gaps from each row to the next, at the pairs asked only (not np.diff of every row)
    gap = lambda first: t[first + 1] - t[first]  # noqa: E731
    ack_to_data = gap(np.flatnonzero(ack[:-1] & new[1:]))
    data_to_ack = gap(np.flatnonzero(data[:-1] & ack[1:]))
    if len(ack_to_data) < MIN_TRIGGERS or len(data_to_ack) < MIN_TRIGGERS:
        return None, ""
    a, b = float(np.median(ack_to_data)), float(np.median(data_to_ack))
    text = f"median ACK -> next data {a / 1e3:.0f} us, data -> next ACK {b / 1e3:.0f} us"
    if a <= TRIGGER_NS and b >= TRIGGER_RATIO * a:
        return "sender", text + ": the data leaves at the ACKs, captured at the data sender"
    if b <= TRIGGER_NS and a >= TRIGGER_RATIO * b:
        return "receiver", text + ": the ACKs answer the data at once, captured at the receiver"
    return None, text


def _ttl_counts(flow, data_dir) -> tuple[np.ndarray, np.ndarray]:
    """How many data packets and how many ACKs (packets against the data) carry each TTL."""
    if "ttl_counts" in flow:                # a digest: by (direction, carries data, TTL)
        counts = flow["ttl_counts"]
        return counts[data_dir, 1], counts[1 - data_dir].sum(axis=0)
    d = flow["direction"]
    ttl = flow["ip_ttl"]                    # bytes: counted as they are, no int64 copy
    return (np.bincount(ttl[(d == data_dir) & (flow["tcp_len"] > 0)], minlength=256),
            np.bincount(ttl[d != data_dir], minlength=256))


def _side_from_ttls(flow, data_dir) -> tuple[str | None, str]:
    """Initial TTLs on one direction, decremented ones on the other (module docstring, 3.)."""
    data, acks = _ttl_counts(flow, data_dir)
    if not data.any() or not acks.any():
        return None, ""
    data_ttl, ack_ttl = int(data.argmax()), int(acks.argmax())   # the most common, the least
    data_here, ack_here = sent_here(data_ttl), sent_here(ack_ttl)
    text = f"TTL of the data {data_ttl}, of the ACKs {ack_ttl}"
    if data_here and not ack_here:
        return "sender", text + ": the data was captured where it was sent"
    if ack_here and not data_here:
        return "receiver", text + ": the ACKs were captured where they were sent"
    if not data_here and not ack_here:
        return "middle", text + ": both crossed a router before the capture point"
    return None, text + " (no router on the path)"


def _side_from_rtts(flow, data_dir) -> tuple[str, str]:
    """Wireshark's RTTs of the data and of its timestamp echoes (module docstring, 4.)."""
    d = flow["direction"]
    ack_rtt = measured(flow, "ack_rtt_ns", d != data_dir)
    ts_rtt = measured(flow, "ts_rtt_ns", d == data_dir)
    if len(ack_rtt) == 0 or len(ts_rtt) == 0:
        return "unknown", "nothing tells the side (no handshake, no timestamps)"
    a, b = float(np.median(ack_rtt)), float(np.median(ts_rtt))
    text = f"median data -> ACK {a / 1e6:.3f} ms, ACK -> data echoing it {b / 1e6:.3f} ms"
    if a >= NEAR_FRACTION * (a + b):
        return "sender", text + ": captured near the data sender"
    if b >= NEAR_FRACTION * (a + b):
        return "receiver", text + ": captured near the data receiver"
    return "unknown", text + " (a capture in the middle of the path)"


# -- every stream's digest, kept window by window -------------------------------------------------

_SYN, _ACK, _SYN_ACK, _PURE_ACK = 0x02, 0x10, 0x12, 0x17   # (_PURE_ACK: the bits a pure ACK
#                                                              has only ACK of)
DIGEST_COLUMNS = ("frame_number", "frame_time_ns", "direction", "tcp_len",
                  "resent", "tcp_flags", "ack_rtt_ns", "ack_rtt_karn_ns", "ts_rtt_ns")


class FlowDigests:
    """Every stream's digest (module docstring), made as the file is analysed window by
    window: call it as ``tcpseq.AnalysedWindows``' ``each``.  Between windows it keeps,
    by stream id, the direction of the stream's last row and whether a pure ACK of each
    direction is still awaited after a SYN/ACK; its rows, TTL counts and first iRTT grow with
    what it keeps, not with the packets."""

    def __init__(self):
        self.parts: list[tuple] = []     # per window: streams, their bounds, the rows kept
        self.last_dir = np.full(0, -1, np.int8)           # by stream: -1 no row yet
        self.awaited = np.zeros((0, 2), bool)             # by stream and direction
        self.ttls: dict[int, int] = {}                    # key (_ttl_key) -> packets
        self.irtt: dict[int, int] = {}                    # stream -> its iRTT, ns

    def __call__(self, window: Capture, src: dict, t0) -> None:
        stream = src["stream"]
        if not len(stream):
            return
        top = int(stream.max()) + 1
        if top > len(self.last_dir):
            grow = top - len(self.last_dir)
            self.last_dir = np.r_[self.last_dir, np.full(grow, -1, np.int8)]
            self.awaited = np.r_[self.awaited, np.zeros((grow, 2), bool)]
        d, flags = src["dir"], src["flags"]
        keep = ((src["acks_frame"] != 0) & (src["ack_rtt"] != 0)) | (src["ts_ok"] != 0)
        keep |= (flags & _SYN) != 0
        keep |= self._turns(stream, d)
        for direction in (0, 1):
            keep |= self._first_acks(stream, d, flags, direction)
        self._count_ttls(window.column("ip_ttl")[table_index(window, src["rows"])], stream, d,
                         src["seglen"])
        with_irtt = np.flatnonzero(src["initial_rtt"] != 0)
        if len(with_irtt):
            ids, first = np.unique(stream[with_irtt], return_index=True)
            for s, at in zip(ids.tolist(), with_irtt[first].tolist()):
                self.irtt.setdefault(s, int(src["initial_rtt"][at]))
        kept = np.flatnonzero(keep)
        kept = kept[np.argsort(stream[kept], kind="stable")]      # by stream, in frame order
        ids, starts = np.unique(stream[kept], return_index=True)
        # stream ids[i]'s rows are [bounds[i], bounds[i + 1])
        self.parts.append((ids, np.r_[starts, len(kept)],
                           analysed(src, DIGEST_COLUMNS, kept, masks=True)))

    def _turns(self, stream, d) -> np.ndarray:
        """Rows next to a row of the other direction in their stream (the previous one, from
        an earlier window too), and each stream's last row here (the next may be in the next
        window).  A row kept beside them changes no pair the triggers time: it lies inside a
        run of one direction, between that run's first and last rows, which are kept."""
        order = np.argsort(stream, kind="stable")
        s, dd = stream[order], d[order].astype(np.int8)
        same_before = np.r_[False, s[1:] == s[:-1]]
        before = np.where(same_before, np.r_[np.int8(-1), dd[:-1]], self.last_dir[s])
        last = np.r_[s[1:] != s[:-1], True]
        after_differs = np.r_[dd[1:] != dd[:-1], False] & ~last
        turns = ((before >= 0) & (before != dd)) | after_differs | last
        self.last_dir[s[last]] = dd[last]
        out = np.zeros(len(stream), bool)
        out[order] = turns
        return out

    def _first_acks(self, stream, d, flags, direction: int) -> np.ndarray:
        """The first pure ACK of ``direction`` after each SYN/ACK of its stream."""
        synack = (flags & _SYN_ACK) == _SYN_ACK
        ack = ((flags & _PURE_ACK) == _ACK) & (d == direction)
        events = np.flatnonzero(synack | ack)
        out = np.zeros(len(stream), bool)
        if not len(events):
            return out
        order = events[np.argsort(stream[events], kind="stable")]
        s, is_synack = stream[order], synack[order]
        same_before = np.r_[False, s[1:] == s[:-1]]
        after_synack = np.where(same_before, np.r_[False, is_synack[:-1]],
                                self.awaited[s, direction])
        out[order[~is_synack & after_synack]] = True
        last = np.r_[s[1:] != s[:-1], True]
        self.awaited[s[last], direction] = is_synack[last]
        return out

    def _count_ttls(self, ttl, stream, d, seglen) -> None:
        keys, counts = np.unique(_ttl_key(stream, d, seglen > 0, ttl), return_counts=True)
        for key, n in zip(keys.tolist(), counts.tolist()):
            self.ttls[key] = self.ttls.get(key, 0) + n

    def digest(self, stream: int, payload_bytes) -> dict[str, np.ndarray] | None:
        """Stream ``stream``'s rows (DIGEST_COLUMNS as stream_rows has them, in frame order;
        ``initial_rtt_ns`` absent but on the first row, which holds the stream's iRTT when it
        has one) with
        ``ttl_counts`` and ``payload_bytes`` (its two directions', from the analyser's
        counts) for data_direction and capture_side; None when it has no rows."""
        pieces = []
        for ids, bounds, part in self.parts:
            i = np.searchsorted(ids, stream)
            if i < len(ids) and ids[i] == stream:
                pieces.append({name: values[bounds[i]:bounds[i + 1]]
                               for name, values in part.items()})
        if not pieces:
            return None
        flow = {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}
        n = len(flow["frame_number"])
        flow["initial_rtt_ns"] = np.zeros(n, np.int64)
        flow["has_initial_rtt_ns"] = np.zeros(n, bool)
        if stream in self.irtt:
            flow["initial_rtt_ns"][0], flow["has_initial_rtt_ns"][0] = self.irtt[stream], True
        keep_as_runs(flow, SAMPLED)         # as stream_rows keeps them: where present, runs
        counts = np.zeros((2, 2, 256), np.int64)
        for key, n in self.ttls.items():
            if key >> 10 == stream:
                counts[(key >> 9) & 1, (key >> 8) & 1, key & 255] = n
        flow["ttl_counts"], flow["payload_bytes"] = counts, np.asarray(payload_bytes)
        return flow


def _ttl_key(stream, d, data, ttl) -> np.ndarray:
    """One number for (stream, direction, carries data, TTL)."""
    return ((stream.astype(np.int64) << 10) | (d.astype(np.int64) << 9)
            | (data.astype(np.int64) << 8) | ttl)
