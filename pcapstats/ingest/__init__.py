"""Bytes to packet table: map the file, walk and decode it window by window, number streams.

``read_fast(path)`` is the whole path of the fast engine.  The file is processed in windows
(4 MiB by default): each window's records are walked, decoded and hashed by the kernel into
arrays preallocated for the whole file, then the window's pages are released, so the file is
never resident in full next to its table.  No Python object is made per packet.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import warnings

import numpy as np

from .. import schema
from ..capture import AtRows, Capture, WholeFile
from ..clock import ClockCheck
from ..errors import ClockWarning, SkippedPacketsWarning
from ..streams import TcpStreams
from . import formats
from . import contract as K
from .kernel import get_kernel
from .linktypes import linktype_name
from .source import open_source

WINDOW_BYTES = 4 << 20  # measured: 2-8 MiB read fastest (cache) and keep a streaming pass under 50 MB
_PROGRESS = contextvars.ContextVar("pcapstats_progress", default=None)


@contextlib.contextmanager
def reporting_progress(callback):
    """Within the block, readers that were given no ``progress`` call ``callback(fraction)``
    as they move through their file (how pcapstats.batch.each follows many captures without
    every analysis passing a callback along)."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _progress_or_ambient(progress):
    """``progress(done_bytes, total_bytes)`` as given, else the ambient callback adapted."""
    if progress is not None:
        return progress
    ambient = _PROGRESS.get()
    return (lambda done, total: ambient(done / max(total, 1))) if ambient else None


def read_fast(path, kernel: str = "auto", window_bytes: int = WINDOW_BYTES, progress=None) -> Capture:
    """Read a capture with the fast engine; ``progress(done_bytes, total_bytes)`` per window."""
    kern = get_kernel(kernel)
    progress = _progress_or_ambient(progress)
    with _collected_warnings() as caught, open_source(path) as src:
        walker = formats.walker_for(src.buf, src.path)
        table = _read_windows(src, walker, kern, max(window_bytes, 1 << 16), progress)
        cap = _capture(src, walker, table, kern)
        clock = ClockCheck()
        clock.feed(cap.column("frame_time_ns"))
        _warn_clock(clock, src.path)
    cap.warnings.extend(str(w.message) for w in caught)
    return cap


def _warn_clock(clock: ClockCheck, path) -> None:
    said = clock.message()
    if said:
        warnings.warn(ClockWarning(said, path=str(path)), stacklevel=3)


@contextlib.contextmanager
def _collected_warnings():
    """Record the reader's warnings (every one, even repeats), then re-emit them for the caller's
    own filters; the list is kept for Capture.warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


class _Table:
    """Arrays for every packet the file can hold (untouched rows cost no memory), filled in order."""

    def __init__(self, capacity: int, kern):
        self.n = 0
        self.rec = K.Records.empty(capacity)
        self.out = K.new_outputs(capacity)
        self.sack = K.SackTable(capacity)
        self.linktype = K.table_array(capacity, np.uint16)
        self.interface_id = K.table_array(capacity, np.uint32)
        self.ip_src, self.ip_dst = K.table_array(capacity, np.int32), K.table_array(capacity, np.int32)
        self.stream = K.table_array(capacity, np.int64)   # tcp.stream / udp.stream, -1 elsewhere
        self.interner, self.conversations = kern.new_interner(), kern.new_conversations()
        self.tcp_streams = TcpStreams()
        self._scratch = None  # 16-byte address scratch of one window: source, dest, quoted pair
        self.reused = False   # rows are written again (streaming): they must be cleared first
        self.total = 0        # packets of the earlier windows
        self.skipped = []     # per window: link types of undecodable packets, first one's number
        self.wlan = []        # per window: 802.11 frames without IP by kind (counts), first's number

    def add_window(self, buf, walker, kern, k: int) -> None:
        lo, hi = self.n, self.n + k
        rec = self.rec.at(lo, hi)
        self.linktype[lo:hi], self.interface_id[lo:hi] = walker.finish(rec)
        out = {name: a[lo:hi] for name, a in self.out.items()}
        if self.reused:  # the decoder writes only the fields a packet has: clear the last window's
            for column in out.values():
                column.fill(0)
        if self._scratch is None or self._scratch.shape[1] < k:  # reused: memset beats fresh pages
            self._scratch = np.empty((4, max(k, 1 << 16), 16), np.uint8)
        scratch = self._scratch[:, :k]
        scratch.fill(0)
        out["ip_src"], out["ip_dst"], out["q_src"], out["q_dst"] = scratch
        kern.decode(buf, rec.data_off, rec.caplen, rec.origlen, self.linktype[lo:hi], out, self.sack)
        unknown = np.flatnonzero(out["status"] == K.DS_UNKNOWN_LINKTYPE)
        if len(unknown):  # link types, and the file's packet number of the first
            self.skipped.append((self.linktype[lo:hi][unknown], self.total + int(unknown[0]) + 1))
        wlan = np.flatnonzero(out["wlan_kind"])
        if len(wlan):
            self.wlan.append((np.bincount(out["wlan_kind"][wlan], minlength=len(K.WLAN_KINDS) + 1),
                              self.total + int(wlan[0]) + 1))
        src, dst = self.interner.intern(out["ip_version"], out["ip_src"], out["ip_dst"])
        self.ip_src[lo:hi], self.ip_dst[lo:hi] = src, dst
        # a TCP/UDP header quoted in an ICMP error joins its own conversation, as in Wireshark
        quoted = out["l4_quoted"] != 0
        l4 = out["l4"]
        if quoted.any():
            q_src, q_dst = self.interner.intern(np.where(quoted, out["ip_version"], 0),
                                                out["q_src"], out["q_dst"])
            l4 = np.where(quoted, out["l4_quoted"], l4)
            src, dst = np.where(quoted, q_src, src), np.where(quoted, q_dst, dst)
        conv, reverse, first = self.conversations.assign(l4, src, dst, out["srcport"], out["dstport"])
        stream = self.stream[lo:hi]
        stream[:] = conv
        tcp = np.flatnonzero(l4 == K.L4_TCP)
        if len(tcp):
            stream[tcp] = self.tcp_streams.assign(conv[tcp], reverse[tcp], first[tcp],
                                                  out["tcp_flags"][tcp], out["tcp_seq"][tcp],
                                                  out["tcp_ack"][tcp])
        self.n = hi


def _read_windows(src, walker, kern, window: int, progress, on_window=None) -> _Table:
    """Walk, decode and hash the file window by window into one table.  With ``on_window``
    (streaming), the table holds one window at a time: on_window(table, k) gets its k packets,
    then the rows are reused, so memory does not grow with the capture."""
    buf, size, base = src.buf, len(src.buf), window
    table = _Table((window // 16 + 1) if on_window else size // 16 + 1, kern)
    while True:
        end = min(size, walker.pos + window)
        src.populate(walker.pos, end)
        k, status = walker.walk(kern, end, table.rec.at(table.n))
        if k:
            table.add_window(buf, walker, kern, k)
            table.total += k
            if on_window:
                on_window(table, k)
                table.n, table.sack.used[0], table.reused = 0, 0, True
            window = base
        src.release(walker.pos)
        if progress:
            progress(walker.pos, size)
        more = walker.pos < size and (end < size or status.code == K.ST_CAPACITY)
        if status.code in (K.ST_OK, K.ST_TRUNCATED, K.ST_CAPACITY) and more:
            if k == 0 and status.code == K.ST_TRUNCATED:
                window *= 2  # one record larger than the window
            continue  # the window ended (at a record boundary, inside a record, or full): next one
        formats.check_status(status, walker, table.total - k)
        if table.skipped:
            _warn_skipped(np.concatenate([t for t, _ in table.skipped]), table.skipped[0][1],
                          src.path)
        if table.wlan:
            _warn_wlan(sum(c for c, _ in table.wlan), table.wlan[0][1], src.path)
        return table


def stream_windows(path, on_window, kernel: str = "auto", window_bytes: int = WINDOW_BYTES,
                   progress=None):
    """Read a capture window by window without keeping it (memory bounded by the window).

    ``on_window(columns)`` gets each window's packets as numpy arrays: frame_time_ns, frame_len,
    payload_len, ip_src, ip_dst (address codes), srcport, dstport, l4, l4_quoted, stream (tcp.stream
    or udp.stream).  Returns (packets read, address strings by code).  Errors and warnings as
    read_fast.
    """
    kern = get_kernel(kernel)
    progress = _progress_or_ambient(progress)

    clock = ClockCheck()

    def deliver(table, k):
        out, rec = table.out, table.rec
        clock.feed(rec.ts[:k])
        on_window({"frame_time_ns": rec.ts[:k], "frame_len": rec.origlen[:k],
                   "payload_len": out["payload_len"][:k], "ip_src": table.ip_src[:k],
                   "ip_dst": table.ip_dst[:k], "srcport": out["srcport"][:k],
                   "dstport": out["dstport"][:k], "l4": out["l4"][:k],
                   "l4_quoted": out["l4_quoted"][:k], "stream": table.stream[:k]})

    with _collected_warnings(), open_source(path) as src:
        walker = formats.walker_for(src.buf, src.path)
        table = _read_windows(src, walker, kern, max(window_bytes, 1 << 16), progress, deliver)
        _warn_clock(clock, src.path)
    return table.total, _addresses(table.interner)


def packet_windows(path, on_window, kernel: str = "auto", window_bytes: int = WINDOW_BYTES,
                   progress=None) -> int:
    """Read a capture window by window as full packet tables, without keeping them (memory
    bounded by the window): ``on_window(cap)`` gets a :class:`Capture` of each window's packets,
    every column as ``read_fast`` gives it -- frame numbers and ``frame_time_relative`` counted
    from the file's first packet, stream indices and ``direction`` carried across windows -- and
    must be done with it before it returns (its arrays are reused).  Returns the packets read.

    One difference from the whole-file table, rare enough to say rather than buffer for: a stream
    whose first packets are only ICMP errors quoting it, and whose own first packet comes in a
    later window, takes side A from the quoted header in the earlier windows (the whole-file rule
    prefers the own header); a warning counts such streams."""
    kern = get_kernel(kernel)
    progress = _progress_or_ambient(progress)
    clock, sides, names = ClockCheck(), _StreamSides(), _AddressNames()
    start = []                                    # the first packet's time

    def deliver(table, k):
        ts = table.rec.ts[:k]
        clock.feed(ts)
        if not start:
            start.append(int(ts[0]))
        cap = _capture(src, walker, table, kern, addresses=names.update(table.interner))
        first = table.total - k + 1
        cap.arrays["frame_number"] = np.arange(first, first + k, dtype=np.uint32)
        cap.arrays["frame_time_relative"] = lambda: (ts - start[0]) / 1e9
        tcp, udp = cap.layer(schema.TCP), cap.layer(schema.UDP)
        cap.arrays["direction"] = sides.directions(
            tcp, udp, table.stream[:k], table.ip_src[:k],
            table.out["srcport"][:k], table.out["l4_quoted"][:k] != 0)
        on_window(cap)

    with _collected_warnings(), open_source(path) as src:
        walker = formats.walker_for(src.buf, src.path)
        table = _read_windows(src, walker, kern, max(window_bytes, 1 << 16), progress, deliver)
        _warn_clock(clock, src.path)
        if sides.changed:
            warnings.warn(SkippedPacketsWarning(
                f"{sides.changed} streams were quoted in ICMP errors before their own first "
                "packet, in an earlier window: those quoted packets' direction is taken from "
                "the quoted header", path=str(src.path),
                hint="pcapstats.read gives the whole-file direction"), stacklevel=2)
    return table.total


def read_needed(path, needs, kernel: str = "auto", window_bytes: int | None = None,
                progress=None) -> Capture:
    """Read only what one analysis needs (a :class:`pcapstats.capture.Needs`): the file is
    streamed as ``packet_windows`` does, and of each window only ``needs.rows`` and
    ``needs.names`` are kept, so memory follows the rows and columns the analysis uses, not
    the file.  The Capture keeps the file's facts (first time, packets, layer counts) in
    ``whole``; its numbers are those of the whole-file table at those rows."""
    return read_kept(path, [Kept(needs)], kernel, window_bytes, progress)[0]


def read_kept(path, keepers, kernel: str = "auto", window_bytes: int | None = None,
              progress=None) -> list:
    """One streaming pass (``packet_windows``) handing every window's Capture to each keeper's
    ``add(window)``, then ``done(packets_in_file)`` of each, in order: what each keeps (a
    :class:`Kept` gives a partial Capture, an analysis' own keeper what it keeps), so several
    tables can be read for one analysis in one pass.  An empty file is one empty window.
    ``window_bytes``: WINDOW_BYTES when None (as it is when this is called)."""
    window_bytes = WINDOW_BYTES if window_bytes is None else window_bytes
    with _collected_warnings() as caught:
        def add(window: Capture) -> None:
            for keeper in keepers:
                keeper.add(window)
        total = packet_windows(path, add, kernel, window_bytes, progress)
        if not any(keeper.seen for keeper in keepers):   # an empty file
            add(read_fast(path, kernel))
        out = [keeper.done(total) for keeper in keepers]
    said = [str(w.message) for w in caught]
    for kept in out:
        if isinstance(getattr(kept, "warnings", None), list):   # a Capture, a Spilled
            kept.warnings.extend(said)
    return out


class Kept:
    """The rows ``needs`` asks for, copied from each window straight into arrays sized for the
    most rows the file could hold (rows never written cost no memory: contract.table_array),
    so the table is built without a list of windows to join (no second copy at the end).
    A keeper of ``read_kept``: ``done(packets_in_file)`` is the partial Capture."""

    def __init__(self, needs):
        self.needs, self.first, self.last, self.n, self.counts = needs, None, None, 0, {}
        self.latest_ns = None
        self.columns, self.layers, self.same = [], [], {}
        self.store = {}

    @property
    def seen(self) -> bool:
        return self.first is not None

    def add(self, window: Capture, rows: np.ndarray | None = None) -> None:
        """Keep ``window``'s rows that ``needs`` asks for (``rows``: that mask, when the caller
        has it already)."""
        rows = np.asarray(self.needs.rows(window) if rows is None else rows, bool)
        if self.first is None:                 # its arrays are reused: keep the facts, not them
            self.first, self.start_ns = window, window.first_time_ns
            self.columns, self.layers = window.kept_names(self.needs)
            # columns that are one array in the reader (TCP's and UDP's ports and stream
            # index) are kept once: a name's first holder
            holder = {}
            self.same = {n: holder.setdefault(id(window.arrays[n]), n) for n in self.columns}
            self.columns = [n for n in self.columns if self.same[n] == n]
            capacity = max(window.file_size // 16 + 1, 1 << 16)
            self.store = {n: K.table_array(capacity, window.column(n).dtype) for n in self.columns}
            self.store.update({n: K.table_array(capacity, bool) for n in self.layers})
        self.last = window
        k = int(np.count_nonzero(rows))
        every = k == len(rows)                          # the usual window of a ping flood, say
        at = None if every else np.flatnonzero(rows)
        for name, store in self.store.items():
            if self.n + k > len(store):                 # a gzipped file: more than its size
                grown = K.table_array(2 * (self.n + k), store.dtype)
                grown[:self.n] = store[:self.n]
                self.store[name] = grown
        for name in (*self.columns, *self.layers) if k else ():
            values = window.column(name) if name in self.columns else window.layer(name)
            if not values.any():
                continue        # the store is zeros already, its pages left untouched: free
            store = self.store[name]
            if every:
                store[self.n:self.n + k] = values
            else:
                np.take(values, at, out=store[self.n:self.n + k])  # compress(out=) is 10x slower
        self.n += k
        self.count(window)

    def count(self, window: Capture) -> None:
        """Add ``window``'s layer counts and latest time to the whole file's."""
        latest = window.latest_time_ns
        if latest is not None and (self.latest_ns is None or latest > self.latest_ns):
            self.latest_ns = latest
        for name, count in window.counted(self.layers).items():
            self.counts[name] = self.counts.get(name, 0) + count

    def done(self, total: int) -> Capture:
        n = self.n
        return partial_capture(self.first, self.last,
                               {name: self.store[held][:n] for name, held in self.same.items()},
                               {name: self.store[name][:n] for name in self.layers},
                               WholeFile(total, self.start_ns, self.counts, self.latest_ns))


def partial_capture(first: Capture, last: Capture, arrays: dict, layers: dict,
                    whole: WholeFile) -> Capture:
    """A Capture of kept rows: the file's facts from its first and last windows, ``whole``'s
    for what the file has beyond them."""
    return Capture(path=first.path, format=first.format, compressed=first.compressed,
                   file_size=first.file_size, interfaces=last.interfaces, arrays=arrays,
                   layers=layers, addresses=last.addresses, engine="fast", kernel=first.kernel,
                   whole=whole)


class _StreamSides:
    """Side A of every stream seen so far, for ``direction`` over windows: the rule of
    pcapstats.streams.packet_directions (the source of the stream's first packet with its own
    header, else of its first quoted one), kept from window to window."""

    def __init__(self):
        self.side = np.zeros(0, np.int64)          # by stream * 2 + udp: address << 16 | port, -1
        self.quoted = np.zeros(0, bool)            # the side came from a quoted header
        self.changed = 0                           # quoted sides an own packet later overruled

    def directions(self, tcp, udp, stream, src, sport, quoted) -> np.ndarray:
        out = np.zeros(len(stream), np.uint8)
        rows = np.flatnonzero(tcp | udp)
        if len(rows) == 0:
            return out
        key = stream[rows].astype(np.int64) * 2 + udp[rows]
        source = src[rows].astype(np.int64) << 16 | sport[rows].astype(np.int64)
        own = ~quoted[rows]
        size, n = int(key.max()) + 1, len(rows)
        if size > len(self.side):
            grow = size - len(self.side)
            self.side = np.r_[self.side, np.full(grow, -1, np.int64)]
            self.quoted = np.r_[self.quoted, np.zeros(grow, bool)]
        where = np.arange(n, dtype=np.int64)
        first_own, first_any = np.full(size, n, np.int64), np.full(size, n, np.int64)
        np.minimum.at(first_own, key[own], where[own])
        np.minimum.at(first_any, key, where)
        has_own = first_own < n
        side, was_quoted = self.side[:size], self.quoted[:size]   # views: updated in place
        overrule = has_own & was_quoted
        if overrule.any():
            self.changed += int((side[overrule] != source[first_own[overrule]]).sum())
            side[overrule], was_quoted[overrule] = source[first_own[overrule]], False
        new = (side == -1) & (first_any < n)
        pick = np.where(has_own, first_own, first_any)
        side[new], was_quoted[new] = source[pick[new]], ~has_own[new]
        out[rows] = source != side[key]
        return out


class _AddressNames:
    """The interner's addresses as text, formatting only the ones new since the last window."""

    def __init__(self):
        self.names = np.zeros(0, object)

    def update(self, interner) -> np.ndarray:
        addr16, v6 = interner.addresses()
        if len(addr16) > len(self.names):
            new = [_format_address(bytes(a), bool(v))
                   for a, v in zip(addr16[len(self.names):], v6[len(self.names):])]
            self.names = np.r_[self.names, np.array(new, dtype=object)]
        return self.names


def _addresses(interner) -> np.ndarray:
    addr16, v6 = interner.addresses()
    return np.array([_format_address(bytes(a), bool(v)) for a, v in zip(addr16, v6)], dtype=object)


def _capture(src, walker, t: _Table, kern, addresses=None) -> Capture:
    n = t.n
    out = {name: a[:n] for name, a in t.out.items()}
    rec = t.rec.at(0, n)
    addresses = _addresses(t.interner) if addresses is None else addresses
    l4, quoted, opts, flags = out["l4"], out["l4_quoted"], out["tcp_opts"], out["ip_flags"]
    radio = out["rt_present"]
    stream = t.stream[:n]
    ts = rec.ts
    sack_rows, sack_table = out["tcp_sack_row"], t.sack.trimmed()
    a: dict = {
        "frame_number": lambda: np.arange(1, n + 1, dtype=np.uint32),
        "frame_time_ns": ts,
        "frame_time_epoch": lambda: ts / 1e9,
        "frame_time_relative": lambda: (ts - ts[0]) / 1e9 if n else np.zeros(0),
        "frame_len": rec.origlen, "frame_cap_len": rec.caplen,
        "frame_interface_id": t.interface_id[:n], "link_type": t.linktype[:n],
        "vlan_id": out["vlan_id"], "vlan_count": out["vlan_count"], "frame_offset": rec.data_off,
        "ip_version": out["ip_version"], "ip_src": t.ip_src[:n], "ip_dst": t.ip_dst[:n],
        "ip_hdr_len": out["ip_hdr_len"], "ip_len": out["ip_len"], "ip_proto": out["ip_proto"],
        "ip_ttl": out["ip_ttl"], "ip_id": out["ip_id"],
        "ip_flags_df": lambda: (flags & K.IPF_DF) != 0, "ip_flags_mf": lambda: (flags & K.IPF_MF) != 0,
        "ip_frag_offset": out["ip_frag_offset"],
        "ip_fragment": lambda: (flags & K.IPF_FRAGMENT) != 0,
        "tcp_srcport": out["srcport"], "tcp_dstport": out["dstport"],
        "tcp_stream": stream,
        "tcp_seq_raw": out["tcp_seq"], "tcp_ack_raw": out["tcp_ack"],
        "tcp_hdr_len": out["tcp_hdr_len"], "tcp_flags": out["tcp_flags"],
        "tcp_window_size_value": out["tcp_win"], "tcp_len": out["tcp_len"],
        "tcp_option_mss": out["tcp_mss"], "tcp_option_wscale_shift": out["tcp_ws"],
        "tcp_option_sack_perm": lambda: (opts & K.OPT_SACK_PERM) != 0,
        "tcp_option_tsval": out["tcp_tsval"], "tcp_option_tsecr": out["tcp_tsecr"],
        "tcp_sack_count": out["tcp_sack_count"],
        "udp_srcport": out["srcport"], "udp_dstport": out["dstport"], "udp_length": out["udp_length"],
        "udp_stream": stream,
        "icmp_type": out["icmp_type"], "icmp_code": out["icmp_code"],
        "icmp_ident": out["icmp_ident"], "icmp_seq": out["icmp_seq"],
        "l4_quoted": lambda: quoted != 0,
        "payload_offset": AtRows(lambda r: np.where(
            l4[r] != 0, rec.data_off[r] + out["payload_rel"][r], -1)),
        "payload_len": out["payload_len"],
        "payload_cap_len": AtRows(lambda r: np.where(
            l4[r] != 0, np.clip(rec.caplen[r].astype(np.int64) - out["payload_rel"][r], 0,
                                out["payload_len"][r]), 0).astype(np.uint32)),
        "radiotap_dbm_antsignal": out["rt_signal"],
        "radiotap_datarate": lambda: np.where((radio & K.RT_RATE) != 0,
                                              K.RATE_MBPS[out["rt_rate"]], 0.0),
        "radiotap_channel_freq": out["rt_freq"],
    }
    for k in range(1, 5):
        a[f"tcp_sack_le{k}_raw"] = _sack_column(sack_rows, out["tcp_sack_count"], sack_table, k, 2 * k - 2)
        a[f"tcp_sack_re{k}_raw"] = _sack_column(sack_rows, out["tcp_sack_count"], sack_table, k, 2 * k - 1)
    layers = {
        schema.VLAN: lambda: out["vlan_count"] > 0,
        schema.IP: lambda: out["ip_version"] > 0,
        schema.TCP: lambda: (l4 == K.L4_TCP) | (quoted == K.L4_TCP),
        schema.UDP: lambda: (l4 == K.L4_UDP) | (quoted == K.L4_UDP),
        schema.ICMP: lambda: l4 == K.L4_ICMP, schema.ICMP_ECHO: lambda: out["icmp_echo"] != 0,
        schema.TCP_OPT_MSS: lambda: (opts & K.OPT_MSS) != 0,
        schema.TCP_OPT_WS: lambda: (opts & K.OPT_WS) != 0,
        schema.TCP_OPT_SACK_PERM: lambda: (opts & K.OPT_SACK_PERM) != 0,
        schema.TCP_OPT_TS: lambda: (opts & K.OPT_TS) != 0,
        schema.RADIOTAP_SIGNAL: lambda: (radio & K.RT_SIGNAL) != 0,
        schema.RADIOTAP_RATE: lambda: (radio & K.RT_RATE) != 0,
        schema.RADIOTAP_CHANNEL: lambda: (radio & K.RT_FREQ) != 0,
    }
    for k, layer in enumerate((schema.TCP_SACK1, schema.TCP_SACK2, schema.TCP_SACK3,
                               schema.TCP_SACK4), start=1):
        layers[layer] = (lambda k=k: out["tcp_sack_count"] >= k)
    return Capture(path=src.path, format=walker.format, compressed=src.compressed,
                   file_size=src.file_size, interfaces=walker.interfaces, arrays=a, layers=layers,
                   addresses=addresses, engine="fast", kernel=kern.name)


def _sack_column(rows, count, table, k: int, col: int):
    def column():
        values = np.zeros(len(rows), np.uint32)
        has = count >= k
        values[has] = table[rows[has], col]
        return values
    return column


def _format_address(raw16: bytes, v6: bool) -> str:
    return str(ipaddress.IPv6Address(raw16)) if v6 else str(ipaddress.IPv4Address(raw16[:4]))


def _warn_wlan(counts, first_packet: int, path) -> None:
    """One warning for the 802.11 frames that carry no IP packet, by kind."""
    what = ", ".join(f"{counts[k]} {name}" for k, name in K.WLAN_KINDS.items() if counts[k])
    warnings.warn(SkippedPacketsWarning(
        f"{int(counts.sum())} 802.11 frames carry no IP packet (counted, not decoded): {what}",
        path=path, packet=first_packet,
        hint="their rows keep the radiotap columns (signal, rate, channel) where the capture "
             "has them; protected frames show IP only once decrypted (airdecap-ng, or "
             "Wireshark with the keys)"))


def _warn_skipped(linktypes, first_packet: int, path) -> None:
    """One warning for the packets of link types the reader cannot decode."""
    types, counts = np.unique(linktypes, return_counts=True)
    what = ", ".join(f"{c} of link type {t} ({linktype_name(int(t))})" for t, c in zip(types, counts))
    warnings.warn(SkippedPacketsWarning(
        f"{len(linktypes)} packets counted but not decoded: {what}", path=path,
        packet=first_packet, hint="`--engine tshark` decodes every link type tshark knows"))
