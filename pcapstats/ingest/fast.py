"""The fast read: map the file, walk and decode it window by window into one packet table.

``read_fast(path)`` is the whole path of the fast engine.  The file is processed in windows
(4 MiB by default): each window's records are walked, decoded and hashed by the kernel into
arrays preallocated for the whole file, then the window's pages are released, so the file is
never resident in full next to its table.  No Python object is made per packet.  The streaming
passes (``windows``) run the same walk with a table of one window.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import warnings

import numpy as np

from .. import schema
from ..capture import AtRows, Capture
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
        cap.derived["clock"] = clock
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
        "wlan_fc_type": lambda: ((out["wlan_fc"] >> 10) & 3).astype(np.uint8),
        "wlan_fc_ds": lambda: (out["wlan_fc"] & 3).astype(np.uint8),
        "wlan_fc_retry": lambda: (out["wlan_fc"] & 0x08) != 0,
        # the decode's own facts, beside the packet table (schema.DECODE_FACTS)
        "decode_status": out["status"], "ethertype": out["ethertype"], "vlan_ad": out["vlan_ad"],
        "l3_offset": out["l3_offset"], "wlan_kind": out["wlan_kind"],
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
        schema.WLAN: lambda: (radio & K.RT_WLAN) != 0,
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
             "has them and the 802.11 ones (type, direction, retry): `pcapstats wifi` reads "
             "them; protected frames show IP only once decrypted (airdecap-ng, or Wireshark "
             "with the keys)"))


def _warn_skipped(linktypes, first_packet: int, path) -> None:
    """One warning for the packets of link types the reader cannot decode."""
    types, counts = np.unique(linktypes, return_counts=True)
    what = ", ".join(f"{c} of link type {t} ({linktype_name(int(t))})" for t, c in zip(types, counts))
    warnings.warn(SkippedPacketsWarning(
        f"{len(linktypes)} packets counted but not decoded: {what}", path=path,
        packet=first_packet, hint="`--engine tshark` decodes every link type tshark knows"))
