"""Per-stream throughput: Wireshark's Statistics > Conversations (TCP, UDP) plus payload and peak rates.

Definitions (each number can be checked in Wireshark):

- A conversation is one ``tcp_stream`` or ``udp_stream``.  Side **A** is the source of the
  stream's first packet, as in tshark 4.0's ``-z conv,tcp`` / ``conv,udp`` (newer Wireshark
  versions order the sides by port instead).  ``*_a_to_b`` counts packets sent by A.
- ``bytes`` are frame bytes on the wire (``frame_len``); ``payload_bytes`` are transport payload
  bytes by the headers (``tcp_len``; UDP length - 8).
- ``rel_start_s`` is the first packet's time relative to the first packet of the capture;
  ``duration_s`` is last packet minus first packet of the stream, both directions.
- ``bps_*`` = bytes x 8 / duration_s, the average over the stream's lifetime (Wireshark's
  "Bits/s A -> B"); empty when the duration is 0.
- ``peak_*bps_*``: the largest bytes x 8 / interval over intervals of ``interval`` seconds aligned
  to the capture's first packet (the buckets of Wireshark's I/O graph).
"""

from __future__ import annotations

import numpy as np

from .. import schema
from ..capture import Capture
from ..errors import UsageError
from .iograph import interval_ns  # the peak is the busiest I/O-graph interval

THROUGHPUT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("stream", "tcp_stream or udp_stream index, as Wireshark numbers it"),
    ("proto", "tcp or udp"),
    ("address_a", "address of side A (the source of the stream's first packet)"),
    ("port_a", "port of side A"),
    ("address_b", "address of side B"),
    ("port_b", "port of side B"),
    ("packets", "frames, both directions"),
    ("bytes", "frame bytes on the wire, both directions"),
    ("packets_a_to_b", "frames sent by A"),
    ("bytes_a_to_b", "frame bytes sent by A"),
    ("packets_b_to_a", "frames sent by B"),
    ("bytes_b_to_a", "frame bytes sent by B"),
    ("rel_start_s", "first frame of the stream, seconds after the capture's first frame"),
    ("duration_s", "last frame minus first frame of the stream, seconds"),
    ("bps_a_to_b", "bytes_a_to_b x 8 / duration_s (on-wire bits/s)"),
    ("bps_b_to_a", "bytes_b_to_a x 8 / duration_s"),
    ("payload_bytes_a_to_b", "transport payload bytes sent by A (tcp_len, udp length - 8)"),
    ("payload_bytes_b_to_a", "transport payload bytes sent by B"),
    ("payload_bps_a_to_b", "payload_bytes_a_to_b x 8 / duration_s (goodput incl. retransmissions)"),
    ("payload_bps_b_to_a", "payload_bytes_b_to_a x 8 / duration_s"),
    ("peak_bps_a_to_b", "largest on-wire bits/s sent by A in one interval"),
    ("peak_bps_b_to_a", "largest on-wire bits/s sent by B in one interval"),
    ("peak_payload_bps_a_to_b", "largest payload bits/s sent by A in one interval"),
    ("peak_payload_bps_b_to_a", "largest payload bits/s sent by B in one interval"),
)


_PROTOS = {"tcp": (schema.TCP, "tcp_stream", "tcp_srcport", "tcp_dstport"),
           "udp": (schema.UDP, "udp_stream", "udp_srcport", "udp_dstport")}
_L4 = {"tcp": 6, "udp": 17}   # the kernel's l4 codes


def throughput(cap: Capture, *, interval: float = 1.0, stream: int | None = None,
               proto: str | None = None):
    """One row per TCP/UDP stream (TCP first, each by stream index), as a pandas DataFrame with
    the columns of THROUGHPUT_COLUMNS."""
    import pandas as pd
    return pd.DataFrame(throughput_columns(cap, interval=interval, stream=stream, proto=proto))


def throughput_columns(cap: Capture, *, interval: float = 1.0, stream: int | None = None,
                       proto: str | None = None) -> dict[str, np.ndarray]:
    """The same table as numpy columns (the CLI renders these without loading pandas)."""
    bin_ns, protos = interval_ns(interval), _protos(proto)
    return _assemble([_one_proto(cap, p, bin_ns) for p in protos], protos, stream, cap.path)


def throughput_file(path, *, interval: float = 1.0, stream: int | None = None,
                    proto: str | None = None, engine: str = "fast", kernel: str = "auto",
                    window_bytes: int | None = None, progress=None) -> tuple[dict, int]:
    """The throughput table of a capture file, read in one streaming pass whose memory does not
    grow with the capture (the fast engine); returns (columns, packets read).  If time goes
    backwards across windows, the capture is read whole instead."""
    from ..ingest import WINDOW_BYTES, read_fast, stream_windows
    from ..reader import read
    bin_ns, protos = interval_ns(interval), _protos(proto)
    if engine != "fast":
        cap = read(path, engine=engine, kernel=kernel)
        return throughput_columns(cap, interval=interval, stream=stream, proto=proto), len(cap)
    totals: dict[str, StreamTotals] = {}

    def on_window(w):
        if not totals:
            t0 = int(w["frame_time_ns"][0])
            totals.update({p: StreamTotals(p, bin_ns, t0) for p in protos})
        own = w["l4_quoted"] == 0
        for p, acc in totals.items():
            rows = np.flatnonzero((w["l4"] == _L4[p]) & own)
            if len(rows):
                acc.add(w["stream"][rows], w["ip_src"][rows], w["ip_dst"][rows], w["srcport"][rows],
                        w["dstport"][rows], w["frame_time_ns"][rows], w["frame_len"][rows],
                        w["payload_len"][rows], close=True)
    try:
        n, addresses = stream_windows(path, on_window, kernel=kernel,
                                      window_bytes=window_bytes or WINDOW_BYTES, progress=progress)
    except TimeWentBack:
        cap = read_fast(path, kernel=kernel)
        return throughput_columns(cap, interval=interval, stream=stream, proto=proto), len(cap)
    parts = [totals[p].columns(addresses) if p in totals else _empty() for p in protos]
    return _assemble(parts, protos, stream, str(path)), n


def _protos(proto):
    if proto is None:
        return ["tcp", "udp"]
    if proto not in _PROTOS:
        raise UsageError(f"unknown protocol {proto!r}", hint="use tcp or udp")
    return [proto]


def _assemble(parts, protos, stream, path) -> dict[str, np.ndarray]:
    """One table from the protocols' parts, cut to ``stream`` when one is asked for."""
    table = {name: np.concatenate([part[name] for part in parts]) for name, _ in THROUGHPUT_COLUMNS}
    if stream is None:
        return table
    keep = table["stream"] == stream
    if not keep.any():
        have = {p: table["stream"][table["proto"] == p] for p in protos}
        hint = "it has " + ", ".join(f"{p.upper()} streams {v.min()}-{v.max()}" if len(v) else
                                     f"no {p.upper()} streams" for p, v in have.items())
        raise UsageError(f"no {'/'.join(protos).upper()} stream {stream} in this capture",
                         path=path, hint=hint)
    return {name: values[keep] for name, values in table.items()}


_TEXT_COLUMNS = ("proto", "address_a", "address_b")


def _empty() -> dict[str, np.ndarray]:
    return {name: np.zeros(0, object if name in _TEXT_COLUMNS else
                           np.float64 if name.endswith("_s") or "bps" in name else np.int64)
            for name, _ in THROUGHPUT_COLUMNS}


_CHUNK_ROWS = 1 << 18  # packets fed to the accumulator at a time: bounds its temporaries


def _one_proto(cap: Capture, proto: str, interval_ns: int) -> dict[str, np.ndarray]:
    layer, stream_col, sport_col, dport_col = _PROTOS[proto]
    mask = cap.layer(layer) & ~cap.column("l4_quoted")  # as Wireshark's conversation tables
    names = (stream_col, "ip_src", "ip_dst", sport_col, dport_col, "frame_time_ns", "frame_len",
             "payload_len")
    columns = [cap.column(name) for name in names]
    every = bool(mask.all())          # an all-TCP capture: slices of the columns, no gathering
    rows = None if every else np.flatnonzero(mask)
    n = len(mask) if every else len(rows)
    for chunk in (_CHUNK_ROWS, None):  # in chunks; whole if time goes back between chunks
        totals = StreamTotals(proto, interval_ns, cap.first_time_ns)
        step = chunk or max(n, 1)
        try:
            for lo in range(0, n, step):
                part = slice(lo, lo + step) if every else rows[lo:lo + step]
                totals.add(*(c[part] for c in columns), close=chunk is not None)
            break
        except TimeWentBack:
            continue
    return totals.columns(cap.addresses)


class TimeWentBack(Exception):
    """A window held a packet in an interval already closed: the streaming pass cannot finish."""


class StreamTotals:
    """Per-stream sums of one protocol, fed in packet order, all at once or window by window.

    Packets, bytes and payload per direction, first and last time, side A (the source of the
    stream's first packet) and, for the peaks, the byte sums of (stream, direction, interval)
    cells.  Fed window by window, a cell whose interval lies before the window's earliest
    packet is closed (folded into the peak and forgotten), so memory holds only the streams
    and the open cells; a packet falling into a closed interval (time going backwards across
    windows) raises TimeWentBack, and the caller reads the capture whole instead.
    """

    def __init__(self, proto: str, interval_ns: int, t0: int | None):
        self.proto, self.interval_ns, self.t0 = proto, interval_ns, t0
        self.seen = np.zeros(0, bool)
        self.sums = np.zeros((0, 2, 3), np.int64)          # packets, frame bytes, payload bytes
        self.t_min = np.zeros(0, np.int64)
        self.t_max = np.zeros(0, np.int64)
        self.ends = np.zeros((0, 4), np.int64)             # a_addr, a_port, b_addr, b_port
        self.peak = np.zeros((0, 2, 2))                    # best cell: frame bytes, payload bytes
        self.open_cells = np.zeros(0, np.int64)            # (stream x 2 + direction) << 32 | bin
        self.open_sums = np.zeros((0, 2))
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
        self._close(below=None)
        sid = np.flatnonzero(self.seen)
        n = len(sid)
        if n == 0:
            return _empty()
        sums, ends = self.sums[sid], self.ends[sid]
        packets, frame_bytes, payload_bytes = sums[:, :, 0], sums[:, :, 1], sums[:, :, 2]
        t_min, t_max = self.t_min[sid], self.t_max[sid]
        duration = (t_max - t_min) / 1e9
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(duration > 0, 8.0 / duration, np.nan)[:, None]
        to_bps = 8e9 / self.interval_ns
        peak, peak_payload = self.peak[sid, :, 0] * to_bps, self.peak[sid, :, 1] * to_bps
        bps, payload_bps = frame_bytes * rate, payload_bytes * rate
        columns = {
            "stream": sid.astype(np.int64),
            "proto": np.full(n, self.proto, dtype=object),
            "address_a": addresses[ends[:, 0]].astype(object), "port_a": ends[:, 1],
            "address_b": addresses[ends[:, 2]].astype(object), "port_b": ends[:, 3],
            "packets": packets.sum(axis=1), "bytes": frame_bytes.sum(axis=1),
            "packets_a_to_b": packets[:, 0], "bytes_a_to_b": frame_bytes[:, 0],
            "packets_b_to_a": packets[:, 1], "bytes_b_to_a": frame_bytes[:, 1],
            "rel_start_s": (t_min - self.t0) / 1e9, "duration_s": duration,
            "bps_a_to_b": bps[:, 0], "bps_b_to_a": bps[:, 1],
            "payload_bytes_a_to_b": payload_bytes[:, 0], "payload_bytes_b_to_a": payload_bytes[:, 1],
            "payload_bps_a_to_b": payload_bps[:, 0], "payload_bps_b_to_a": payload_bps[:, 1],
            "peak_bps_a_to_b": peak[:, 0], "peak_bps_b_to_a": peak[:, 1],
            "peak_payload_bps_a_to_b": peak_payload[:, 0], "peak_payload_bps_b_to_a": peak_payload[:, 1],
        }
        return {name: columns[name] for name, _ in THROUGHPUT_COLUMNS}

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
        packed = (cell_key << 32) | (cell_bin + (1 << 31))
        merged, inverse = np.unique(np.concatenate([self.open_cells, packed]), return_inverse=True)
        both = np.concatenate([self.open_sums, sums])
        self.open_cells = merged
        self.open_sums = np.stack([np.bincount(inverse, weights=both[:, i], minlength=len(merged))
                                   for i in (0, 1)], 1)

    def _close(self, below: int | None) -> None:
        """Fold the cells of intervals before ``below`` (all when None) into the peaks."""
        if len(self.open_cells) == 0:
            return
        bins = (self.open_cells & 0xFFFFFFFF) - (1 << 31)
        done = np.ones(len(bins), bool) if below is None else bins < below
        keys = self.open_cells[done] >> 32
        flat = self.peak.reshape(-1, 2)
        for i in (0, 1):
            np.maximum.at(flat[:, i], keys, self.open_sums[done, i])
        self.open_cells, self.open_sums = self.open_cells[~done], self.open_sums[~done]
        if below is not None:
            self.closed_below = below if self.closed_below is None else max(self.closed_below, below)


def _cell_sums(key, bins, frame_len, payload_len):
    """Packets, frame bytes and payload bytes of each occupied (key, interval bin) cell:
    (cell keys, cell bins, sums[cell, 3]).  Counted densely when the grid is small, else
    by sorting."""
    b0, n_bins = int(bins.min()), int(bins.max() - bins.min()) + 1
    k0, n_keys = int(key.min()), int(key.max() - key.min()) + 1
    cell = (key - k0) * n_bins + (bins - b0)
    if n_keys * n_bins <= _DENSE_LIMIT:
        size = n_keys * n_bins
        count = np.bincount(cell, minlength=size)
        cells = np.flatnonzero(count)
        sums = np.stack([count[cells]] + [np.bincount(cell, weights=w, minlength=size)[cells]
                                          for w in (frame_len, payload_len)], 1)
    else:
        cells, inverse = np.unique(cell, return_inverse=True)
        sums = np.stack([np.bincount(inverse, minlength=len(cells))]
                        + [np.bincount(inverse, weights=w, minlength=len(cells))
                           for w in (frame_len, payload_len)], 1)
    return cells // n_bins + k0, cells % n_bins + b0, sums.astype(np.float64)


def _first_rows(ids, rows) -> np.ndarray:
    """Of ``rows`` (increasing), the first row of each distinct id, in row order."""
    first = np.full(int(ids[rows].max()) + 1, len(ids), np.int64)
    np.minimum.at(first, ids[rows], rows)
    return np.sort(first[first < len(ids)])


_DENSE_LIMIT = 1 << 24  # (stream, direction, interval) cells counted in one dense array
