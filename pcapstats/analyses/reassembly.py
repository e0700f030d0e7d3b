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

from ..capture import Capture
from ..errors import UsageError
from ..ingest.source import Source, open_source
from .tcp_analysis import analysis_inputs, run_analyser

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
    """The data-carrying segments (tcp_len > 0) of all streams, sorted by (key, offset, frame)."""
    key: np.ndarray          # stream * 2 + direction
    start: np.ndarray        # offset of the first byte (int64)
    length: np.ndarray       # tcp_len
    cap_len: np.ndarray      # payload bytes present in the file (< length when cut)
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
    def flow(self, stream: int, direction: int) -> dict | None:
        """The FLOW_COLUMNS of one direction as plain values, or None if it sent nothing."""
        hit = np.flatnonzero((self.flows["stream"] == stream)
                             & (self.flows["direction"] == direction))
        if not len(hit):
            return None
        return {name: self.flows[name][hit[0]].item() for name, _ in FLOW_COLUMNS}

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

def reassemble(cap: Capture) -> Reassembly:
    """The piece map, holes and per-direction facts of every TCP stream in ``cap``."""
    if cap.engine != "fast":
        raise UsageError("reassembly reads payload bytes from the file: read the capture with "
                         "the fast engine", path=cap.path, hint="ps.read(path) (engine='fast')")
    rows, inputs, n_streams = analysis_inputs(cap)
    rel = run_analyser(inputs, n_streams)["rel_seq"] if len(rows) else np.zeros(0, np.uint32)
    key = inputs["stream"] * 2 + inputs["dir"]
    offset = _unwrapped(key, rel) - 1
    flags, seglen = inputs["flags"], inputs["seglen"].astype(np.int64)
    analysed = inputs["analysed"].astype(bool)
    cap_len = cap.column("payload_cap_len")[rows].astype(np.int64)
    pay_off = cap.column("payload_offset")[rows]
    data = np.flatnonzero(analysed & (seglen > 0))
    order = data[np.lexsort((inputs["frame"][data], offset[data], key[data]))]
    segs = Segments(key[order], offset[order], seglen[order], np.minimum(cap_len[order],
                    seglen[order]), inputs["frame"][order], inputs["t"][order], flags[order],
                    pay_off[order])
    pieces, captured_runs = _cover(segs.key, segs.start, segs.cap_len, segs.frame,
                                   segs.file_offset)
    _, seen_runs = _cover(segs.key, segs.start, segs.length, segs.frame, segs.file_offset)
    flows = _flows(key, offset, flags, seglen, analysed, inputs, segs)
    holes = _holes(captured_runs, seen_runs, flows)
    _count(flows, pieces, holes)
    return Reassembly(os.fspath(cap.path), pieces, holes, segs, flows)


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
    if not len(key):
        empty = np.zeros(0, np.int64)
        return ({"key": empty, "start": empty, "length": empty, "frame": empty.astype(np.uint32),
                 "file_offset": empty}, {"key": empty, "start": empty, "end": empty})
    # one accumulate over all keys: shift each key's positions into its own range
    lift = key.astype(np.int64) * _KEY_SPAN
    running = np.maximum.accumulate(end + lift) - lift
    prev_end = np.r_[np.int64(-1), running[:-1]]
    first = np.r_[True, key[1:] != key[:-1]]
    prev_end[first] = -1
    eff = np.maximum(start, prev_end)
    new = end > eff
    pieces = {"key": key[new].astype(np.int64), "start": eff[new], "length": (end - eff)[new],
              "frame": frame[new], "file_offset": (file_offset + (eff - start))[new]}
    run_start = first | (start > prev_end)
    idx = np.flatnonzero(run_start)
    runs = {"key": key[idx].astype(np.int64), "start": start[idx],
            "end": np.maximum.reduceat(end, idx)}
    return pieces, runs


def _flows(key, offset, flags, seglen, analysed, inputs, segs: Segments) -> dict:
    """FLOW_COLUMNS for every key that has a packet."""
    keys = np.unique(key)
    n = len(keys)

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
    seen_end = np.full(n, 0, np.int64)
    data_segments = np.zeros(n, np.int64)
    wire = np.zeros(n, np.int64)
    if len(segs):
        at = np.searchsorted(keys, segs.key)
        np.maximum.at(seen_end, at, segs.start + segs.length)
        np.add.at(data_segments, at, 1)
        np.add.at(wire, at, segs.length)
    # a FIN sits at offset + its payload length
    fin_offset = first_value(fin, offset + seglen, -1)
    return {
        "stream": keys // 2, "direction": (keys % 2).astype(np.uint8),
        "start_seen": first_frame(syn) != 0, "syn_frame": first_frame(syn),
        "fin_frame": first_frame(fin), "rst_frame": first_frame(rst),
        "end_offset": fin_offset, "seen_end": seen_end, "data_segments": data_segments,
        "wire_bytes": wire, "captured_bytes": np.zeros(n, np.int64),
        "cut_bytes": np.zeros(n, np.int64), "lost_bytes": np.zeros(n, np.int64),
        "_key": keys,
    }


def _holes(captured: dict, seen: dict, flows: dict) -> dict:
    """Holes of the captured bytes: cut (inside a seen run) and lost (between seen runs, and
    before the first / after the last when the SYN / FIN mark the stream's ends)."""
    # cut: within each seen run, the gaps between the captured runs it contains.
    # Per seen run the sorted positions s.start, c1.start, c1.end, ..., s.end pair up as gaps.
    pos = np.concatenate([seen["start"], captured["start"], captured["end"], seen["end"]])
    kind = np.concatenate([np.zeros(len(seen["start"])), np.ones(len(captured["start"])),
                           np.full(len(captured["end"]), 2), np.full(len(seen["end"]), 3)])
    k = np.concatenate([seen["key"], captured["key"], captured["key"], seen["key"]])
    order = np.lexsort((kind, pos, k))
    pos, k = pos[order], k[order]
    a, b, kk = pos[0::2], pos[1::2], k[0::2]
    cut = b > a
    holes_key, holes_start, holes_end = [kk[cut]], [a[cut]], [b[cut]]
    reasons = [np.full(int(cut.sum()), HOLE_CUT, np.uint8)]
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
    key = np.concatenate(holes_key).astype(np.int64)
    start = np.concatenate(holes_start).astype(np.int64)
    end = np.concatenate(holes_end).astype(np.int64)
    reason = np.concatenate(reasons)
    order = np.lexsort((start, key))
    return {"key": key[order], "start": start[order], "length": (end - start)[order],
            "reason": reason[order]}


def _count(flows: dict, pieces: dict, holes: dict) -> None:
    keys = flows["_key"]
    np.add.at(flows["captured_bytes"], np.searchsorted(keys, pieces["key"]), pieces["length"])
    for reason, column in ((HOLE_CUT, "cut_bytes"), (HOLE_LOST, "lost_bytes")):
        m = holes["reason"] == reason
        np.add.at(flows[column], np.searchsorted(keys, holes["key"][m]), holes["length"][m])
