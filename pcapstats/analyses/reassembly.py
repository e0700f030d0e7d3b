"""TCP reassembly: each stream's payload, per direction, in sequence order, each byte taken once.

Nothing here holds a stream's bytes.  :func:`reassemble` turns the packet table into a compact
*piece map* (where in the capture file each byte of each stream lies) and a list of *holes*
(bytes the capture does not have), with numpy over all TCP packets at once -- no Python object
per packet.  :class:`Reassembly` then reads any byte range from the mapped file on demand, so a
check that needs only lengths, the tail or one region reads only that.

Definitions (stated because retransmissions can disagree):

- **offset**: a byte's position in its direction's stream, 0 for the first payload byte:
  tshark's relative sequence number (``tcp.seq``, from pcapstats.analyses.tcp_analysis) minus 1,
  unwrapped past 4 GiB.  When the SYN of a direction was not captured the base is the first
  segment seen (``start_seen`` False): offsets then start where the capture did, not where the
  stream did.
- **which copy**: a byte carried by several segments (retransmissions, repacketised
  overlaps) is taken from the segment that *starts lowest* among those that carry it captured,
  the earliest frame on ties.  Segments are sorted by (offset, frame) and each one contributes
  only what lies beyond the running maximum of the ends before it (``np.maximum.accumulate``).
- **holes**: gaps in the captured bytes between the stream's start (offset 0 when the SYN was
  seen, else the first segment) and its end (the FIN's offset when the FIN was seen, else the
  end of the highest segment).  A hole is ``cut`` when segments on the wire covered it but the
  snaplen cut their payload, ``lost`` when no captured segment covered it (the capture missed
  the packet, or it was an IP fragment, which pcapstats does not reassemble).

Reading a gzip'd capture reads its inflated copy (pcapstats.ingest.source inflates to a
temporary file and maps that; payload offsets refer to the inflated bytes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import schema
from ..capture import Capture, Needs
from ..errors import UsageError
from ..ingest import read_kept
from ..ingest.groups import ByStream, table_budget
from ..ingest.source import Source, open_source
from .tcpseq import analysis_inputs, run_analyser, tcp_rows

FIN, SYN, RST = 0x001, 0x002, 0x004
HOLE_LOST, HOLE_CUT = 0, 1
HOLE_REASONS = {HOLE_LOST: "not captured", HOLE_CUT: "cut by snaplen"}
_KEY_SPAN = np.int64(1) << np.int64(42)   # offsets stay below 4 TiB; keys are spaced apart by it
SCAN_WINDOW_BYTES = 1 << 20               # file bytes examined at once by scan_for_other_than
# (about 22 bytes of scratch a file byte: 1 MiB windows were faster than 8 MiB and ~150 MB smaller)

# One row per (stream, direction) that sent any TCP packet: (name, meaning).
FLOW_COLUMNS: tuple[tuple[str, str], ...] = (
    ("stream", "tcp.stream"),
    ("direction", "0: from the source of the stream's first packet, 1: the other way"),
    ("start_seen", "the direction's SYN was captured: offset 0 is the stream's first byte"),
    ("syn_frame", "frame of its first SYN (0: none)"),
    ("fin_frame", "frame of its first FIN (0: none)"),
    ("rst_frame", "frame of its first RST (0: none)"),
    ("end_offset", "the FIN's offset (bytes sent before the FIN), or -1 without a FIN"),
    ("seen_end", "end of the highest segment seen (with or without its payload captured)"),
    ("data_segments", "segments with payload (tcp_len > 0), retransmissions included"),
    ("wire_bytes", "sum of tcp_len over those segments (retransmitted bytes counted again)"),
    ("captured_bytes", "distinct stream bytes whose content is in the capture"),
    ("cut_bytes", "stream bytes seen on the wire whose content the snaplen cut"),
    ("lost_bytes", "stream bytes between start and end that no captured segment carried"),
)


@dataclass
class Segments:
    """The data-carrying segments (tcp_len > 0) of all streams, sorted by (key, offset, frame).
    Kept for the whole capture, so in the narrowest types that hold them (int32 where a
    value is a stream key or a segment's length)."""
    key: np.ndarray          # stream * 2 + direction (int32)
    start: np.ndarray        # offset of the first byte (int64)
    length: np.ndarray       # tcp_len (int32)
    cap_len: np.ndarray      # payload bytes present in the file (< length when cut; int32)
    frame: np.ndarray
    time_ns: np.ndarray
    flags: np.ndarray
    file_offset: np.ndarray  # file offset of the payload's first byte (-1: none)

    def of(self, key: int) -> "Segments":
        lo, hi = np.searchsorted(self.key, [key, key + 1])
        return Segments(*(getattr(self, f)[lo:hi] for f in self.__dataclass_fields__))

    def __len__(self) -> int:
        return len(self.key)


def _key(stream, direction) -> int:
    return int(stream) * 2 + int(direction)


class Reassembly:
    """The piece map and holes of every TCP stream of one capture, and reads of its bytes.

    ``pieces`` (key, start, length, frame, file_offset; sorted by key then start, never
    overlapping), ``holes`` (key, start, length, reason), ``segments`` (the data segments) and
    ``flows`` (FLOW_COLUMNS) are dicts / objects of numpy arrays.  Close it (or use ``with``)
    to unmap the file.
    """

    def __init__(self, path: str, pieces: dict, holes: dict, segments: Segments, flows: dict):
        self.path, self.pieces, self.holes, self.segments, self.flows = (
            path, pieces, holes, segments, flows)
        self._source: Source | None = None

    # -- lookups -------------------------------------------------------------------------------
    def _flow_row(self, stream: int, direction: int) -> int | None:
        """The row of ``flows`` of one direction (they are in key order), None if it sent
        nothing."""
        keys, key = self.flows["_key"], _key(stream, direction)
        at = int(np.searchsorted(keys, key))
        return at if at < len(keys) and keys[at] == key else None

    def flow(self, stream: int, direction: int) -> dict | None:
        """The FLOW_COLUMNS of one direction as plain values, or None if it sent nothing."""
        i = self._flow_row(stream, direction)
        if i is None:
            return None
        return {name: self.flows[name][i].item() for name, _ in FLOW_COLUMNS}

    def first_packet(self, stream: int) -> tuple[str, str, int, int] | None:
        """(source, destination, source port, destination port) of the stream's first packet:
        direction 0's first (swapped from direction 1's when direction 0 sent nothing)."""
        for direction in (0, 1):
            i = self._flow_row(stream, direction)
            if i is not None:
                f = self.flows
                src, dst = str(f["_src"][i]), str(f["_dst"][i])
                sport, dport = int(f["_srcport"][i]), int(f["_dstport"][i])
                return (src, dst, sport, dport) if direction == 0 else (dst, src, dport, sport)
        return None

    def syn_flags(self, stream: int, direction: int) -> int:
        """TCP flags of the direction's first SYN (0: none captured)."""
        i = self._flow_row(stream, direction)
        return 0 if i is None else int(self.flows["_syn_flags"][i])

    def piece_map(self, stream: int, direction: int) -> dict:
        """The pieces of one direction: start, length, frame, file_offset (sorted by start)."""
        lo, hi = self._range(self.pieces, _key(stream, direction))
        return {k: v[lo:hi] for k, v in self.pieces.items() if k != "key"}

    def hole_list(self, stream: int, direction: int) -> dict:
        lo, hi = self._range(self.holes, _key(stream, direction))
        return {k: v[lo:hi] for k, v in self.holes.items() if k != "key"}

    def holes_in(self, stream: int, direction: int, start: int, end: int) -> dict:
        """Holes overlapping [start, end), clipped to it."""
        h = self.hole_list(stream, direction)
        a = np.maximum(h["start"], start)
        b = np.minimum(h["start"] + h["length"], end)
        keep = b > a
        return {"start": a[keep], "length": (b - a)[keep], "reason": h["reason"][keep]}

    def segments_of(self, stream: int, direction: int) -> Segments:
        return self.segments.of(_key(stream, direction))

    def first_frame_carrying(self, stream: int, direction: int, offset: int) -> int:
        """Earliest frame whose segment (captured or cut) covers ``offset``; 0 if none."""
        s = self.segments_of(stream, direction)
        hit = (s.start <= offset) & (offset < s.start + s.length)
        return int(s.frame[hit].min()) if hit.any() else 0

    @staticmethod
    def _range(table: dict, key: int) -> tuple[int, int]:
        lo, hi = np.searchsorted(table["key"], [key, key + 1])
        return int(lo), int(hi)

    # -- bytes ---------------------------------------------------------------------------------
    @property
    def buf(self) -> np.ndarray:
        if self._source is None:
            self._source = open_source(self.path)
        return self._source.buf

    def read(self, stream: int, direction: int, start: int, length: int) -> bytes:
        """Bytes [start, start + length) of one direction; UsageError naming the first hole if
        any byte of the range is not in the capture."""
        end = start + length
        holes = self.holes_in(stream, direction, start, end)
        flow = self.flow(stream, direction)
        seen_end = flow["seen_end"] if flow else 0
        if len(holes["start"]):
            raise UsageError(f"stream {stream} direction {direction}: bytes "
                             f"{holes['start'][0]}-{holes['start'][0] + holes['length'][0]} are "
                             f"{HOLE_REASONS[int(holes['reason'][0])]}", path=self.path)
        if end > seen_end or start < 0:
            raise UsageError(f"stream {stream} direction {direction}: bytes {start}-{end} lie "
                             f"outside the {seen_end} bytes seen", path=self.path)
        return b"".join(bytes(chunk) for _, chunk in self.chunks(stream, direction, start, end))

    def chunks(self, stream: int, direction: int, start: int = 0, end: int | None = None):
        """Yield (offset, uint8 array view) of the captured bytes in [start, end), in offset
        order, one piece at a time (views of the mapped file: no copy)."""
        p = self.piece_map(stream, direction)
        if end is None:
            end = int((p["start"] + p["length"]).max()) if len(p["start"]) else 0
        pend = p["start"] + p["length"]
        first = int(np.searchsorted(pend, start, side="right"))
        buf = self.buf
        for i in range(first, len(p["start"])):
            a, b = max(int(p["start"][i]), start), min(int(pend[i]), end)
            if a >= end:
                break
            if b > a:
                f = int(p["file_offset"][i]) + a - int(p["start"][i])
                yield a, buf[f:f + b - a]

    def scan_for_other_than(self, stream: int, direction: int, start: int, end: int,
                            allowed: int) -> tuple[int, int]:
        """(count, lowest offset) of captured bytes in [start, end) that are not ``allowed``
        (count 0 and offset -1 when all are).  Vectorised over the pieces in file order, one
        window of SCAN_WINDOW_BYTES at a time, each window's file pages dropped once scanned,
        so memory does not grow with the stream (pages read again later come back from the file)."""
        p = self.piece_map(stream, direction)
        a = np.maximum(p["start"], start)
        b = np.minimum(p["start"] + p["length"], end)
        keep = b > a
        f0 = (p["file_offset"] + (a - p["start"]))[keep]
        seq0 = a[keep]
        n = (b - a)[keep]
        order = np.argsort(f0, kind="stable")
        f0, seq0, n = f0[order], seq0[order], n[order]
        buf, count, lowest = self.buf, 0, -1
        i = 0
        while i < len(f0):
            lo = int(f0[i])
            # pieces that start in this window (a piece longer than the window gets its own)
            j = max(int(np.searchsorted(f0, lo + SCAN_WINDOW_BYTES, side="left")), i + 1)
            hi = int((f0[i:j] + n[i:j]).max())
            cover = np.zeros(hi - lo + 1, np.int32)
            np.add.at(cover, f0[i:j] - lo, 1)
            np.add.at(cover, f0[i:j] + n[i:j] - lo, -1)
            inside = np.cumsum(cover[:-1]) > 0
            bad = np.flatnonzero(inside & (buf[lo:hi] != allowed))
            if len(bad):
                count += len(bad)
                pos = bad + lo
                k = np.searchsorted(f0[i:j], pos, side="right") - 1 + i
                # a position may lie in several pieces only if file ranges overlapped: they don't
                offsets = seq0[k] + (pos - f0[k])
                m = int(offsets.min())
                lowest = m if lowest < 0 else min(lowest, m)
            self._source.drop(lo, int(f0[j]) if j < len(f0) else hi)
            i = j
        return count, lowest

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- building the map ---------------------------------------------------------------------------

# what reassembly reads of a capture: the TCP packets, the analyser's inputs (for relative
# sequence numbers), where each payload lies in the file, and each direction's addresses
READS = ("tcp_stream", "frame_number", "frame_time_ns", "direction", "ip_src", "ip_dst",
         "ip_fragment", "l4_quoted", "tcp_srcport", "tcp_dstport", "tcp_flags", "tcp_hdr_len",
         "tcp_len", "tcp_seq_raw", "tcp_ack_raw", "tcp_window_size_value",
         "tcp_option_wscale_shift", "tcp_sack_count",
         *(f"tcp_sack_{side}{k}_raw" for k in (1, 2, 3) for side in ("le", "re")),
         "payload_cap_len", "payload_offset", schema.TCP)
NEEDS = Needs(READS, tcp_rows)


def reassemble(cap: Capture) -> Reassembly:
    """The piece map, holes and per-direction facts of every TCP stream in ``cap``."""
    if cap.engine != "fast":
        raise UsageError("reassembly reads payload bytes from the file: read the capture with "
                         "the fast engine", path=cap.path, hint="ps.read(path) (engine='fast')")
    return Reassembly(os.fspath(cap.path), *_built(cap))


def reassemble_file(path, keepers=(), stream: int | None = None) -> tuple[Reassembly, list]:
    """The Reassembly of a capture file, read in one pass for it alone, and what ``keepers``
    (of ``ingest.read_kept``) kept in the same pass.  The TCP rows are kept by stream group,
    spilled to disk past ``ingest.groups.table_budget``, and reassembled a batch of groups at
    a time: each stream lies whole in one batch, so the answer is the whole table's while
    memory holds one batch's working arrays and the (much smaller) maps built so far.
    ``stream``: that TCP stream's rows alone."""
    needs = NEEDS if stream is None else Needs(
        NEEDS.names, lambda w: tcp_rows(w) & (w.column("tcp_stream") == stream))
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0                                      # the reader says what is wrong with it
    with ByStream(needs, table_budget(size)) as keeper:
        kept, *others = read_kept(path, [keeper, *keepers])
        if isinstance(kept, Capture):
            name, whole = kept.path, [kept]
            del kept             # (_built lets the table go once read: nothing else holds it)
            parts = [_built(whole.pop())]
        else:
            name = kept.first.path
            parts = list(map(_built, kept.captures()))     # (map holds no batch while it runs)
    return Reassembly(os.fspath(name), *_joined(parts)), others


def _built(cap: Capture) -> tuple[dict, dict, Segments, dict]:
    """(pieces, holes, segments, flows) of the TCP streams in ``cap``; each working array is
    let go once used (the analyser's inputs are ~50 bytes a packet), and ``cap`` too when
    the caller holds no other reference to it."""
    rows, inputs = analysis_inputs(cap)
    rel = run_analyser(inputs)["rel_seq"] if len(rows) else np.zeros(0, np.uint32)
    for name in ("seq", "ack", "win", "wscale", "sack_count", "sack_le", "sack_re"):
        del inputs[name]
    key = inputs.pop("stream") * 2 + inputs.pop("dir")
    offset = _unwrapped(key, rel) - 1
    del rel
    flags, seglen = inputs["flags"], inputs["seglen"].astype(np.int64)
    analysed = inputs.pop("analysed").astype(bool)
    data = np.flatnonzero(analysed & (seglen > 0))
    order = data[np.lexsort((inputs["frame"][data], offset[data], key[data]))]
    del data
    at = rows[order]
    segs = Segments(key[order].astype(np.int32), offset[order],
                    seglen[order].astype(np.int32),
                    np.minimum(cap.column("payload_cap_len")[at], seglen[order]).astype(np.int32),
                    inputs["frame"][order], inputs["t"][order], flags[order],
                    cap.column("payload_offset")[at])
    del order, at
    flows = _flows(cap, rows, key, offset, flags, seglen, analysed, inputs, segs)
    del cap, key, offset, flags, seglen, analysed, inputs, rows   # (the caller's table too)
    pieces, captured_runs = _cover(segs.key, segs.start, segs.cap_len, segs.frame,
                                   segs.file_offset)
    seen_runs = _runs(segs.key, segs.start, segs.length)
    holes = _holes(captured_runs, seen_runs, flows)
    _count(flows, pieces, holes)
    return pieces, holes, segs, flows


def _joined(parts: list[tuple[dict, dict, Segments, dict]]):
    """One capture's maps from those of its batches: each table's rows put together in key
    order (a key's rows all come from one batch, in order), a column at a time."""
    if len(parts) == 1:
        return parts[0]

    def join(tables: list[dict], key: str) -> dict:
        keys = np.concatenate([t[key] for t in tables])
        order = (slice(None) if (keys[1:] >= keys[:-1]).all()   # (streams under 16: in order)
                 else np.argsort(keys, kind="stable"))
        return {name: np.concatenate([t.pop(name) for t in tables])[order]
                for name in list(tables[0])}

    segs = join([vars(p[2]) for p in parts], "key")
    return (join([p[0] for p in parts], "key"), join([p[1] for p in parts], "key"),
            Segments(**segs), join([p[3] for p in parts], "_key"))


def _unwrapped(key: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Relative sequence numbers as int64, unwrapped per key (frame order) past 2^32: each
    packet moves by the signed 32-bit difference from the previous packet of its key."""
    if not len(key):
        return np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")
    k, r = key[order], rel[order].astype(np.int64)
    step = ((r[1:] - r[:-1] + (1 << 31)) % (1 << 32)) - (1 << 31)
    first = np.r_[True, k[1:] != k[:-1]]
    delta = np.r_[r[0], step]
    delta[first] = r[first]
    total = np.cumsum(delta)
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(k)), 0))
    # cumsum restarts at each key: subtract what the previous keys summed to
    before = np.where(first, total - r, 0)
    before = before[group_start]
    out = np.empty(len(k), np.int64)
    out[order] = total - before
    return out


def _cover(key, start, length, frame, file_offset):
    """Which part of each interval [start, start + length) is new, in (key, start, frame) order.

    Returns the pieces (new parts, with their frame and file offset) and the merged runs
    (key, start, end) of the union of the intervals."""
    keep = length > 0
    key, start, frame, file_offset = key[keep], start[keep], frame[keep], file_offset[keep]
    end = start + length[keep]
    del keep
    prev_end, first = _ends_before(key, start, end)
    eff = np.maximum(start, prev_end)
    new = np.flatnonzero(end > eff)
    pieces = {"key": key[new], "start": eff[new],
              "length": (end[new] - eff[new]).astype(np.int32), "frame": frame[new],
              "file_offset": file_offset[new] + (eff[new] - start[new])}
    del eff, new
    return pieces, _merged(key, start, end, prev_end, first)


def _runs(key, start, length) -> dict:
    """The merged runs (key, start, end) of the intervals [start, start + length), in (key,
    start) order: what _cover gives besides the pieces."""
    keep = length > 0
    key, start = key[keep], start[keep]
    end = start + length[keep]
    return _merged(key, start, end, *_ends_before(key, start, end))


def _ends_before(key, start, end) -> tuple[np.ndarray, np.ndarray]:
    """(the largest end of the key's intervals before each one, -1 for a key's first; where
    each key begins), by one accumulate over all keys, each shifted into its own range."""
    if not len(key):
        return np.zeros(0, np.int64), np.zeros(0, bool)
    lift = key.astype(np.int64) * _KEY_SPAN
    running = end + lift
    np.maximum.accumulate(running, out=running)
    running -= lift
    del lift
    prev_end = np.empty_like(running)
    prev_end[0] = -1
    prev_end[1:] = running[:-1]
    del running
    first = np.r_[True, key[1:] != key[:-1]]
    prev_end[first] = -1
    return prev_end, first


def _merged(key, start, end, prev_end, first) -> dict:
    """The runs: a new one where a key begins or an interval starts past every end before it."""
    idx = np.flatnonzero(first | (start > prev_end))
    if not len(idx):
        empty = np.zeros(0, np.int64)
        return {"key": empty.astype(key.dtype), "start": empty, "end": empty}
    return {"key": key[idx], "start": start[idx], "end": np.maximum.reduceat(end, idx)}


def _flows(cap: Capture, rows, key, offset, flags, seglen, analysed, inputs,
           segs: Segments) -> dict:
    """FLOW_COLUMNS for every key that has a packet, and (``_``-named) the key's first
    packet's addresses and ports and its first SYN's flags."""
    keys, first = np.unique(key, return_index=True)
    n = len(keys)
    first_row = rows[first]

    def first_frame(mask):
        out = np.zeros(n, np.uint32)
        rows = np.flatnonzero(mask)
        if len(rows):
            k, first = np.unique(key[rows], return_index=True)
            out[np.searchsorted(keys, k)] = inputs["frame"][rows[first]]
        return out

    def first_value(mask, values, missing):
        out = np.full(n, missing, np.int64)
        rows = np.flatnonzero(mask)
        if len(rows):
            k, first = np.unique(key[rows], return_index=True)
            out[np.searchsorted(keys, k)] = values[rows[first]]
        return out

    syn = analysed & ((flags & SYN) != 0)
    fin = analysed & ((flags & FIN) != 0)
    rst = (flags & RST) != 0
    seen_end = np.maximum(_per_key(keys, segs.key, segs.start + segs.length, np.maximum), 0)
    data_segments = _per_key(keys, segs.key, np.ones(len(segs), np.int64))
    wire = _per_key(keys, segs.key, segs.length.astype(np.int64))
    # a FIN sits at offset + its payload length
    fin_offset = first_value(fin, offset + seglen, -1)
    return {
        "stream": keys // 2, "direction": (keys % 2).astype(np.uint8),
        "start_seen": first_frame(syn) != 0, "syn_frame": first_frame(syn),
        "fin_frame": first_frame(fin), "rst_frame": first_frame(rst),
        "end_offset": fin_offset, "seen_end": seen_end, "data_segments": data_segments,
        "wire_bytes": wire, "captured_bytes": np.zeros(n, np.int64),
        "cut_bytes": np.zeros(n, np.int64), "lost_bytes": np.zeros(n, np.int64),
        "_key": keys, "_src": cap.addresses[cap.column("ip_src")[first_row]],
        "_dst": cap.addresses[cap.column("ip_dst")[first_row]],
        "_srcport": cap.column("tcp_srcport")[first_row].astype(np.int64),
        "_dstport": cap.column("tcp_dstport")[first_row].astype(np.int64),
        "_syn_flags": first_value(syn, flags, 0),
    }


def _holes(captured: dict, seen: dict, flows: dict) -> dict:
    """Holes of the captured bytes: cut (inside a seen run) and lost (between seen runs, and
    before the first / after the last when the SYN / FIN mark the stream's ends)."""
    # cut: within each seen run, what the captured runs it holds leave uncovered (no sort:
    # both run lists are in (key, start) order, and each captured run lies in one seen run)
    cap_key, cap_start, cap_end = captured["key"], captured["start"], captured["end"]
    inside = np.searchsorted(seen["key"] * _KEY_SPAN + seen["start"],
                             cap_key * _KEY_SPAN + cap_start, side="right") - 1
    opens = np.r_[True, inside[1:] != inside[:-1]] if len(inside) else np.zeros(0, bool)
    before = np.where(opens, seen["start"][inside], np.r_[np.int64(0), cap_end[:-1]])
    del opens
    closes = np.r_[inside[1:] != inside[:-1], True] if len(inside) else np.zeros(0, bool)
    bare = np.ones(len(seen["key"]), bool)                # seen runs with nothing captured
    bare[inside] = False
    holes_key = [cap_key, cap_key[closes], seen["key"][bare]]
    holes_start = [before, cap_end[closes], seen["start"][bare]]
    holes_end = [cap_start, seen["end"][inside[closes]], seen["end"][bare]]
    del inside, closes, bare
    for i in range(3):
        cut = holes_end[i] > holes_start[i]
        holes_key[i], holes_start[i], holes_end[i] = (
            holes_key[i][cut], holes_start[i][cut], holes_end[i][cut])
    reasons = [np.full(sum(len(k) for k in holes_key), HOLE_CUT, np.uint8)]
    holes_key = [np.concatenate(holes_key)]
    holes_start, holes_end = [np.concatenate(holes_start)], [np.concatenate(holes_end)]
    # lost: between consecutive seen runs of a key, and at the known ends
    same = seen["key"][1:] == seen["key"][:-1]
    holes_key.append(seen["key"][1:][same])
    holes_start.append(seen["end"][:-1][same])
    holes_end.append(seen["start"][1:][same])
    fk = flows["_key"]
    first_run = np.searchsorted(seen["key"], fk, side="left")
    last_run = np.searchsorted(seen["key"], fk, side="right") - 1
    has_run = last_run >= first_run
    run_lo = np.where(has_run, seen["start"][np.minimum(first_run, len(seen["key"]) - 1)]
                      if len(seen["key"]) else 0, 0)
    run_hi = np.where(has_run, seen["end"][np.maximum(last_run, 0)]
                      if len(seen["key"]) else 0, 0)
    head = flows["start_seen"] & np.where(has_run, run_lo > 0, flows["end_offset"] > 0)
    holes_key.append(fk[head])
    holes_start.append(np.zeros(int(head.sum()), np.int64))
    holes_end.append(np.where(has_run, run_lo, flows["end_offset"])[head])
    tail = (flows["end_offset"] >= 0) & has_run & (flows["end_offset"] > run_hi)
    holes_key.append(fk[tail])
    holes_start.append(run_hi[tail])
    holes_end.append(flows["end_offset"][tail])
    for extra in range(3):
        reasons.append(np.full(len(holes_key[1 + extra]), HOLE_LOST, np.uint8))
    key = np.concatenate(holes_key).astype(np.int32)
    start = np.concatenate(holes_start).astype(np.int64, copy=False)
    end = np.concatenate(holes_end).astype(np.int64, copy=False)
    reason = np.concatenate(reasons)
    lifted = key * _KEY_SPAN + start
    if (lifted[1:] > lifted[:-1]).all():      # no lost hole: the cut ones came in order
        return {"key": key, "start": start, "length": end - start, "reason": reason}
    order = np.argsort(lifted, kind="stable")
    return {"key": key[order], "start": start[order], "length": (end - start)[order],
            "reason": reason[order]}


def _count(flows: dict, pieces: dict, holes: dict) -> None:
    keys = flows["_key"]
    flows["captured_bytes"] = _per_key(keys, pieces["key"], pieces["length"].astype(np.int64))
    for reason, column in ((HOLE_CUT, "cut_bytes"), (HOLE_LOST, "lost_bytes")):
        m = holes["reason"] == reason
        flows[column] = _per_key(keys, holes["key"][m], holes["length"][m])


def _per_key(keys: np.ndarray, key: np.ndarray, values: np.ndarray, ufunc=np.add) -> np.ndarray:
    """``ufunc`` (sum, maximum) of int64 ``values`` over each run of one ``key`` (sorted), at
    that key's position in ``keys``; 0 for a key with none (ufunc.at is ~20x slower)."""
    out = np.zeros(len(keys), np.int64)
    if len(key):
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        out[np.searchsorted(keys, key[starts])] = ufunc.reduceat(values, starts)
    return out
