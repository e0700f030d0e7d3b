"""Crafted captures whose every column value is known by construction.

Packets are built with scapy from explicit parameters, and the expected value of each column is
computed from those same parameters (never by parsing the bytes back), so a reader is checked
against what was put in.  The capture files are written by the small writers below with
``struct.pack`` -- not by scapy -- so every byte of every header (magic, byte order, resolution,
block layout, lengths) is under the test's control and every packet's file offset is known.

Three layers:

- transport builders (``tcp``, ``udp``, ``icmp``) -> ``L4``;
- network builders (``ipv4``, ``ipv6``, ``arp``) -> ``Built`` (an L3 packet with its columns);
- link wrappers (``ether``, ``sll``, ``sll2``, ``raw``, ``null``, ``loop``) -> ``Built`` with a
  link type;

then the writers (``pcap``, ``Pcapng``, ``gzipped``) lay records into a file and return
``Written``: the bytes plus one expected row per packet, with the frame columns (number, time,
lengths, interface, offsets) filled in and streams numbered by first appearance.

``tshark_rows`` reads a file with tshark into the same column names, and ``compare_rows`` diffs
two sets of rows; the tests use them to confirm each known answer independently and then to
hold ``pcapstats.read`` to it.
"""

from __future__ import annotations

import functools
import gzip
import ipaddress
import math
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction

from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6, ICMPv6DestUnreach, ICMPv6EchoReply, ICMPv6EchoRequest
from scapy.layers.l2 import ARP
from scapy.packet import Raw

NS = 1_000_000_000

# LINKTYPE_* values (https://www.tcpdump.org/linktypes.html).
LT_NULL, LT_ETHERNET, LT_RAW, LT_LOOP, LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2 = (
    0, 1, 101, 108, 113, 228, 229, 276)
ETH_IPV4, ETH_IPV6, ETH_ARP, ETH_8021Q, ETH_8021AD = 0x0800, 0x86DD, 0x0806, 0x8100, 0x88A8

# The columns a crafted row describes: everything in the schema that crafting can know.
FRAME_COLUMNS = ("frame_number", "frame_time_ns", "frame_time_epoch", "frame_time_relative",
                 "frame_len", "frame_cap_len", "frame_interface_id", "link_type", "vlan_id",
                 "vlan_count", "frame_offset", "payload_offset", "payload_len", "payload_cap_len",
                 "l4_quoted")
IP_COLUMNS = ("ip_version", "ip_src", "ip_dst", "ip_hdr_len", "ip_len", "ip_proto", "ip_ttl",
              "ip_id", "ip_flags_df", "ip_flags_mf", "ip_frag_offset", "ip_fragment")
TCP_COLUMNS = ("tcp_srcport", "tcp_dstport", "tcp_stream", "tcp_seq_raw", "tcp_ack_raw",
               "tcp_hdr_len", "tcp_flags", "tcp_window_size_value", "tcp_len",
               "tcp_option_mss", "tcp_option_wscale_shift", "tcp_option_sack_perm",
               "tcp_option_tsval", "tcp_option_tsecr", "tcp_sack_count",
               *(f"tcp_sack_{edge}{k}_raw" for k in range(1, 5) for edge in ("le", "re")))
UDP_COLUMNS = ("udp_srcport", "udp_dstport", "udp_stream", "udp_length")
ICMP_COLUMNS = ("icmp_type", "icmp_code", "icmp_ident", "icmp_seq")
STREAM_COLUMNS = ("direction",)
RADIO_COLUMNS = ("radiotap_dbm_antsignal", "radiotap_datarate", "radiotap_channel_freq")
WLAN_COLUMNS = ("wlan_fc_type", "wlan_fc_ds", "wlan_fc_retry")
ALL_COLUMNS = (FRAME_COLUMNS + IP_COLUMNS + TCP_COLUMNS + UDP_COLUMNS + ICMP_COLUMNS + STREAM_COLUMNS
               + RADIO_COLUMNS + WLAN_COLUMNS)


# -- transport --------------------------------------------------------------------------------

@dataclass(frozen=True)
class L4:
    """A transport header (scapy layer, checksummed once stacked on IP) and its columns."""
    layer: object
    proto: int
    hdr_len: int
    fields: dict
    payload_len: int          # payload bytes by the headers
    notes: frozenset = frozenset()    # see Built.notes


# Encoded length of each TCP option kind in the spec lists below (scapy's names).
_TCP_OPT_LEN = {"MSS": 4, "WScale": 3, "SAckOK": 2, "Timestamp": 10, "NOP": 1, "EOL": 1}


def _tcp_option_columns(options) -> tuple[int, dict]:
    """Encoded length and expected columns of a TCP option list; parsing stops at EOL."""
    cols = {"tcp_option_mss": None, "tcp_option_wscale_shift": None,
            "tcp_option_sack_perm": False, "tcp_option_tsval": None, "tcp_option_tsecr": None,
            "tcp_sack_count": 0}
    for k in range(1, 5):
        cols[f"tcp_sack_le{k}_raw"] = cols[f"tcp_sack_re{k}_raw"] = None
    length, ended = 0, False
    for kind, value in options:
        length += 2 + 4 * len(value) if kind == "SAck" else _TCP_OPT_LEN[kind]
        if ended:
            continue
        if kind == "EOL":
            ended = True
        elif kind == "MSS":
            cols["tcp_option_mss"] = value
        elif kind == "WScale":
            cols["tcp_option_wscale_shift"] = value
        elif kind == "SAckOK":
            cols["tcp_option_sack_perm"] = True
        elif kind == "Timestamp":
            cols["tcp_option_tsval"], cols["tcp_option_tsecr"] = value
        elif kind == "SAck":
            cols["tcp_sack_count"] = len(value) // 2
            for k in range(len(value) // 2):
                cols[f"tcp_sack_le{k + 1}_raw"] = value[2 * k]
                cols[f"tcp_sack_re{k + 1}_raw"] = value[2 * k + 1]
    return length, cols


def tcp(sport, dport, *, seq=0, ack=0, flags=0x010, window=65535, options=(), payload=b"",
        reserved=0) -> L4:
    """A TCP segment.  ``flags`` holds the 9 flag bits, ``reserved`` the 3 bits above them."""
    opt_len, cols = _tcp_option_columns(options)
    hdr_len = 20 + -(-opt_len // 4) * 4
    assert hdr_len <= 60, "TCP options longer than 40 bytes"
    layer = TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, reserved=reserved,
                window=window, options=list(options)) / Raw(payload)
    cols.update(tcp_srcport=sport, tcp_dstport=dport, tcp_seq_raw=seq, tcp_ack_raw=ack,
                tcp_hdr_len=hdr_len, tcp_flags=flags | reserved << 9,
                tcp_window_size_value=window, tcp_len=len(payload))
    return L4(layer, 6, hdr_len, cols, len(payload))


def udp(sport, dport, payload=b"") -> L4:
    length = 8 + len(payload)
    layer = UDP(sport=sport, dport=dport, len=length) / Raw(payload)
    cols = dict(udp_srcport=sport, udp_dstport=dport, udp_length=length)
    return L4(layer, 17, 8, cols, len(payload))


_ICMP_ECHO = {4: (8, 0), 6: (128, 129)}


def icmp(version, type_, code=0, *, ident=None, seq=None, body=b"", quote=None,
         quote_len=None) -> L4:
    """ICMP (version 4) or ICMPv6 (6): an echo request/reply with ``body``, or an error quoting
    the first ``quote_len`` bytes (default: all) of the packet ``quote`` (a ``Built``).

    A quoted TCP/UDP header that is there whole is decoded into the tcp/udp columns (as
    Wireshark does), with ``l4_quoted`` set; it joins its own conversation for stream numbers.
    """
    echo = type_ in _ICMP_ECHO[version]
    cols = dict(icmp_type=type_, icmp_code=code,
                icmp_ident=ident if echo else None, icmp_seq=seq if echo else None)
    notes = set()
    if quote is not None:
        body = quote.data[:quote_len]
        whole = quote.payload_start is not None and len(body) >= quote.payload_start
        proto = quote.fields.get("ip_proto")
        if whole and proto in (6, 17):
            names = TCP_COLUMNS if proto == 6 else UDP_COLUMNS
            cols.update({k: quote.fields[k] for k in names if k in quote.fields})
            cols.update(l4_quoted=True, _q_src=quote.fields["ip_src"],
                        _q_dst=quote.fields["ip_dst"], _q_headers=quote.payload_start)
            notes.add("quoted_tcp" if proto == 6 else "quoted_udp")
        elif proto in (6, 17) and len(body) > quote.fields["ip_hdr_len"]:
            notes.add("quoted_partial")
    if version == 4:
        layer = (ICMP(type=type_, code=code, id=ident, seq=seq) if echo
                 else ICMP(type=type_, code=code)) / Raw(body)
    elif echo:
        cls = ICMPv6EchoRequest if type_ == 128 else ICMPv6EchoReply
        layer = cls(id=ident, seq=seq, data=body)
    else:
        assert type_ == 1, "only destination unreachable is built for ICMPv6 errors"
        layer = ICMPv6DestUnreach(code=code) / Raw(body)
    return L4(layer, 1 if version == 4 else 58, 8, cols, len(body), frozenset(notes))


# -- network ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Built:
    """Bytes of a packet and the column values it must read back as.

    ``payload_start``/``ip_end`` index into ``data``: where the transport payload starts (None
    when no transport header is decoded) and where the IP packet ends (bytes after it are link
    padding, not payload).
    """
    data: bytes
    fields: dict
    name: str
    ethertype: int = 0
    payload_start: int | None = None
    ip_end: int = 0
    link_type: int | None = None
    # Where tshark's view differs on purpose ("quoted_tcp", "quoted_udp", "quoted_partial",
    # "fragmented_tcp", "untimed"): see tshark_excuses.
    notes: frozenset = frozenset()

    def shifted(self, prefix: bytes, link_type: int, **fields) -> Built:
        """The same packet behind a link-layer header ``prefix``."""
        start = None if self.payload_start is None else self.payload_start + len(prefix)
        return replace(self, data=prefix + self.data, fields={**self.fields, **fields},
                       payload_start=start, ip_end=self.ip_end + len(prefix),
                       link_type=link_type)


def _with_transport(l4: L4, frag_first: bool, ip_len: int, ip_hdr_len: int):
    """Transport columns and payload start of an IP packet carrying ``l4`` (or a fragment of
    it: only a first fragment carries the header)."""
    if not frag_first:
        return {}, None
    cols = dict(l4.fields)
    if l4.proto == 6:   # the TCP payload is whatever follows the header inside this IP packet
        cols["tcp_len"] = ip_len - ip_hdr_len - l4.hdr_len
        payload_len = cols["tcp_len"]
    else:
        payload_len = l4.payload_len
    cols["payload_len"] = payload_len
    return cols, ip_hdr_len + l4.hdr_len


def _transport_bytes(l4: L4, ip_layer) -> bytes:
    """The transport header + payload with its checksum over ``ip_layer``'s pseudo-header."""
    whole = bytes(ip_layer / l4.layer)
    return whole[len(bytes(ip_layer)):]


def ipv4(l4: L4, src, dst, *, ttl=64, ident=0, df=False, options=b"", frag=None,
         name="") -> Built:
    """An IPv4 packet.  ``frag=(offset_units, more, size)`` sends ``size`` bytes of the
    transport bytes starting at ``offset_units * 8`` (no transport decoded unless offset 0)."""
    assert len(options) % 4 == 0 and len(options) <= 40
    transport = _transport_bytes(l4, IP(src=src, dst=dst))
    offset, mf = 0, False
    if frag is not None:
        offset, mf, size = frag
        transport = transport[offset * 8: offset * 8 + size]
    hdr_len = 20 + len(options)
    ip_len = hdr_len + len(transport)
    layer = IP(src=src, dst=dst, ttl=ttl, id=ident, proto=l4.proto, ihl=hdr_len // 4,
               flags=(2 if df else 0) | (1 if mf else 0), frag=offset, len=ip_len)
    data = bytes(layer)[:20] + options + transport
    data = _ipv4_checksummed(data, hdr_len)
    cols = dict(ip_version=4, ip_src=src, ip_dst=dst, ip_hdr_len=hdr_len, ip_len=ip_len,
                ip_proto=l4.proto, ip_ttl=ttl, ip_id=ident, ip_flags_df=df, ip_flags_mf=mf,
                ip_frag_offset=offset, ip_fragment=mf or offset > 0)
    tcols, start = _with_transport(l4, offset == 0, ip_len, hdr_len)
    cols.update(tcols)
    return Built(data, cols, name or f"ipv4-{_l4_name(l4)}", ETH_IPV4, start, ip_len,
                 notes=_notes(l4, offset, mf))


def _notes(l4: L4, offset: int, mf: bool) -> frozenset:
    """The transport's notes when this packet carries its header, plus first-fragment TCP."""
    if offset:
        return frozenset()
    return l4.notes | ({"fragmented_tcp"} if l4.proto == 6 and mf else set())


def _ipv4_checksummed(data: bytes, hdr_len: int) -> bytes:
    hdr = bytearray(data[:hdr_len])
    hdr[10:12] = b"\0\0"
    total = sum(struct.unpack(f"!{hdr_len // 2}H", hdr))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    hdr[10:12] = struct.pack("!H", ~total & 0xFFFF)
    return bytes(hdr) + data[hdr_len:]


# IPv6 extension headers are laid out here byte by byte so their lengths are known exactly.
HOPOPT, ROUTING, FRAGMENT, DSTOPTS = 0, 43, 44, 60


def ext_options(kind, units=0):
    """A hop-by-hop or destination-options header of (units + 1) * 8 bytes, filled with PadN."""
    assert kind in (HOPOPT, DSTOPTS)
    return (kind, lambda nh: bytes([nh, units, 1, units * 8 + 4]) + bytes(units * 8 + 4))


def ext_routing(addresses):
    """A type-0 routing header listing ``addresses`` (8 + 16 * n bytes)."""
    body = b"".join(ipaddress.IPv6Address(a).packed for a in addresses)
    n = len(addresses)
    return (ROUTING, lambda nh: bytes([nh, 2 * n, 0, n]) + bytes(4) + body)


def ipv6(l4: L4, src, dst, *, hlim=64, ext=(), frag=None, name="") -> Built:
    """An IPv6 packet with extension headers ``ext`` (from ``ext_options``/``ext_routing``) and,
    if ``frag=(ident, offset_units, more, size)``, a fragment header last."""
    transport = _transport_bytes(l4, IPv6(src=src, dst=dst))
    headers = list(ext)
    ident, offset, mf = 0, 0, False
    if frag is not None:
        ident, offset, mf, size = frag
        transport = transport[offset * 8: offset * 8 + size]
        headers.append((FRAGMENT, lambda nh: struct.pack("!BBHI", nh, 0, offset << 3 | mf,
                                                         ident)))
    chain = b""
    for i, (_, make) in enumerate(headers):
        nh = headers[i + 1][0] if i + 1 < len(headers) else l4.proto
        chain += make(nh)
    first_nh = headers[0][0] if headers else l4.proto
    payload = chain + transport
    data = bytes(IPv6(src=src, dst=dst, hlim=hlim, nh=first_nh, plen=len(payload))) + payload
    hdr_len, ip_len = 40 + len(chain), 40 + len(payload)
    cols = dict(ip_version=6, ip_src=_canon(src), ip_dst=_canon(dst), ip_hdr_len=hdr_len,
                ip_len=ip_len, ip_proto=l4.proto, ip_ttl=hlim, ip_id=ident, ip_flags_df=False,
                ip_flags_mf=mf, ip_frag_offset=offset, ip_fragment=mf or offset > 0)
    tcols, start = _with_transport(l4, offset == 0, ip_len, hdr_len)
    cols.update(tcols)
    return Built(data, cols, name or f"ipv6-{_l4_name(l4)}", ETH_IPV6, start, ip_len,
                 notes=_notes(l4, offset, mf))


def arp(name="arp") -> Built:
    data = bytes(ARP(op=1, hwsrc="02:00:00:00:00:01", psrc="10.0.0.1", pdst="10.0.0.2"))
    return Built(data, {}, name, ETH_ARP, None, len(data))


def _canon(address: str) -> str:
    return ipaddress.ip_address(address).compressed


def _l4_name(l4: L4) -> str:
    return {6: "tcp", 17: "udp", 1: "icmp", 58: "icmpv6"}[l4.proto]


# -- link layers ------------------------------------------------------------------------------

MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def ether(p: Built, vlans=(), pad_to=0, outer_tpid=ETH_8021AD) -> Built:
    """Ethernet II, optionally tagged: ``vlans`` outermost first; with two or more tags the
    outer one uses ``outer_tpid`` (802.1ad QinQ).  ``pad_to`` pads the frame like a NIC does."""
    tags = b""
    for i, vid in enumerate(vlans):
        tpid = outer_tpid if i == 0 and len(vlans) > 1 else ETH_8021Q
        tags += struct.pack("!HH", tpid, (3 << 13) | vid)      # PCP 3, DEI 0
    prefix = MAC_A + MAC_B + tags + struct.pack("!H", p.ethertype)
    vlan = dict(vlan_id=vlans[0] if vlans else None, vlan_count=len(vlans))
    out = p.shifted(prefix, LT_ETHERNET, **vlan)
    if len(out.data) < pad_to:
        out = replace(out, data=out.data + bytes(pad_to - len(out.data)))
    return out


def sll(p: Built) -> Built:
    """Linux cooked capture v1: packet type, ARPHRD, address length, 8 address bytes, protocol."""
    prefix = struct.pack("!HHH8sH", 4, 1, 6, MAC_A, p.ethertype)    # 4 = sent by us
    return p.shifted(prefix, LT_SLL, vlan_id=None, vlan_count=0)


def sll2(p: Built) -> Built:
    """Linux cooked capture v2: protocol, reserved, ifindex, ARPHRD, packet type, addr len, addr."""
    prefix = struct.pack("!HHIHBB8s", p.ethertype, 0, 7, 1, 0, 6, MAC_A)
    return p.shifted(prefix, LT_SLL2, vlan_id=None, vlan_count=0)


def raw(p: Built, link_type=LT_RAW) -> Built:
    return p.shifted(b"", link_type, vlan_id=None, vlan_count=0)


# BSD loopback address families for IPv6 differ by OS; all three are in use in the wild.
AF_INET, AF_INET6_BSD, AF_INET6_FREEBSD, AF_INET6_DARWIN = 2, 24, 28, 30


def null(p: Built, byteorder="<", family=None) -> Built:
    """BSD null/loopback (DLT_NULL): a 4-byte address family in the *capturing host's* order."""
    fam = family if family is not None else (AF_INET if p.ethertype == ETH_IPV4 else AF_INET6_BSD)
    return p.shifted(struct.pack(byteorder + "I", fam), LT_NULL, vlan_id=None, vlan_count=0)


def loop(p: Built, family=None) -> Built:
    """OpenBSD loopback (LINKTYPE_LOOP): like null, but the family is always big-endian."""
    return replace(null(p, ">", family), link_type=LT_LOOP)


def opaque(link_type: int, data: bytes, name="opaque") -> Built:
    """A frame of a link type the reader is not expected to decode."""
    return Built(data, {"vlan_id": None, "vlan_count": 0}, name, 0, None, len(data), link_type)


# -- expected rows ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """One packet as a writer lays it down: the frame, its time, and where the snaplen cut it."""
    frame: Built
    ts_ns: int
    cap_len: int | None = None      # None: the whole frame
    interface: int = 0


@dataclass
class Written:
    """A capture file's bytes and what reading it must give."""
    data: bytes
    rows: list[dict]
    name: str
    fmt: str                          # "pcap" or "pcapng"
    record_offsets: list[int] = field(default_factory=list)   # record header / block starts
    # (offset, size, byte order) of every record/block length field, for fuzzing
    length_fields: list[tuple[int, int, str]] = field(default_factory=list)
    notes: list[frozenset] = field(default_factory=list)      # per packet, see tshark_excuses


def _row(number, frame: Built, ts_ns, cap_len, interface, offset, first_ts) -> dict:
    """The expected columns of one packet: its built fields plus the frame-level values."""
    row = dict.fromkeys(ALL_COLUMNS)
    row["l4_quoted"] = False
    row.update(frame.fields)
    row["_name"] = frame.name
    row.update(frame_number=number, frame_time_ns=ts_ns, frame_time_epoch=ts_ns / NS,
               frame_time_relative=(ts_ns - first_ts) / NS, frame_len=len(frame.data),
               frame_cap_len=cap_len, frame_interface_id=interface, link_type=frame.link_type,
               frame_offset=offset)
    if frame.payload_start is not None:
        headers = frame.payload_start + frame.fields.get("_q_headers", 0)   # + quoted ones
        if cap_len < headers:
            raise ValueError(f"{frame.name}: a cut at {cap_len} bytes falls inside the headers, "
                             "where no answer is known by construction")
    if frame.payload_start is None:
        row.update(payload_offset=-1, payload_len=0, payload_cap_len=0)
    else:
        present = min(cap_len, frame.ip_end) - frame.payload_start
        row.update(payload_offset=offset + frame.payload_start,
                   payload_cap_len=max(0, min(present, row["payload_len"])))
    return row


def _number_streams(rows: list[dict]) -> None:
    """tcp.stream / udp.stream by first appearance of each address-port pair, headers quoted in
    ICMP errors included (no port reuse in crafted captures: this is Wireshark's numbering)."""
    for proto in ("tcp", "udp"):
        ids: dict = {}
        for r in rows:
            if r[f"{proto}_srcport"] is None:
                continue
            src, dst = r.get("_q_src", r["ip_src"]), r.get("_q_dst", r["ip_dst"])
            key = frozenset([(src, r[f"{proto}_srcport"]), (dst, r[f"{proto}_dstport"])])
            r[f"{proto}_stream"] = ids.setdefault(key, len(ids))
    _directions(rows)


def _directions(rows: list[dict]) -> None:
    """direction within its stream: a_to_b when the packet's (source address, port) is side
    A's, the source of the stream's first packet with its own transport header (of its first
    quoted one when it has none); the outer IP source counts, as in the packet table."""
    side_a: dict = {}
    for own in (True, False):
        for r in rows:
            for proto in ("tcp", "udp"):
                if r[f"{proto}_stream"] is not None and bool(r["l4_quoted"]) != own:
                    side_a.setdefault((proto, r[f"{proto}_stream"]),
                                      (r["ip_src"], r[f"{proto}_srcport"]))
    for r in rows:
        for proto in ("tcp", "udp"):
            if r[f"{proto}_stream"] is not None:
                a = side_a[(proto, r[f"{proto}_stream"])]
                r["direction"] = "a_to_b" if (r["ip_src"], r[f"{proto}_srcport"]) == a \
                    else "b_to_a"


def _finish(data, entries, name, fmt, record_offsets, length_fields) -> Written:
    """entries: (frame, ts_ns, cap_len, interface, data offset, notes) per packet, file order."""
    first_ts = entries[0][1] if entries else 0
    rows = [_row(i + 1, f, ts, cap, ifc, off, first_ts)
            for i, (f, ts, cap, ifc, off, _) in enumerate(entries)]
    _number_streams(rows)
    notes = [f.notes | frozenset(extra) for f, *_, extra in entries]
    return Written(bytes(data), rows, name, fmt, record_offsets, length_fields, notes)


# -- classic pcap -----------------------------------------------------------------------------

PCAP_MAGIC_US, PCAP_MAGIC_NS = 0xA1B2C3D4, 0xA1B23C4D


def pcap(records, link_type, *, endian="<", nano=False, snaplen=65535, name="pcap") -> Written:
    """Classic pcap (2.4) in byte order ``endian``, microsecond or nanosecond timestamps."""
    magic = PCAP_MAGIC_NS if nano else PCAP_MAGIC_US
    out = bytearray(struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type))
    units = 1 if nano else 1000
    entries, offsets, lengths = [], [], []
    for r in records:
        assert r.frame.link_type == link_type, (r.frame.name, r.frame.link_type, link_type)
        sec, sub = divmod(r.ts_ns, NS)
        assert sub % units == 0, f"{r.ts_ns} ns is not representable in this resolution"
        cap = min(len(r.frame.data), snaplen, r.cap_len or len(r.frame.data))
        offsets.append(len(out))
        lengths.append((len(out) + 8, 4, endian))
        out += struct.pack(endian + "IIII", sec, sub // units, cap, len(r.frame.data))
        entries.append((r.frame, r.ts_ns, cap, 0, len(out), ()))
        out += r.frame.data[:cap]
    return _finish(out, entries, name, "pcap", offsets, lengths)


# -- pcapng -----------------------------------------------------------------------------------

SHB, IDB, OPB, SPB, NRB, ISB, EPB = 0x0A0D0D0A, 1, 2, 3, 4, 5, 6
CUSTOM_COPY, CUSTOM_NOCOPY = 0x00000BAD, 0x40000BAD
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_ENDOFOPT, OPT_COMMENT, IF_NAME, IF_TSRESOL, IF_TSOFFSET, EPB_FLAGS = 0, 1, 2, 9, 14, 2


def tsresol_ns(tsresol: int) -> Fraction:
    """Nanoseconds per timestamp unit for an if_tsresol byte (10^-v, or 2^-v with bit 7 set)."""
    if tsresol & 0x80:
        return Fraction(NS, 2 ** (tsresol & 0x7F))
    return Fraction(NS, 10 ** tsresol)


@dataclass
class _Interface:
    link_type: int
    snaplen: int
    tsresol: int
    tsoffset: int


class Pcapng:
    """Writes a pcapng file block by block; each method returns the block's file offset."""

    def __init__(self, name="pcapng"):
        self.name = name
        self.out = bytearray()
        self.entries: list = []
        self.block_offsets: list[int] = []
        self.length_fields: list[tuple[int, int, str]] = []
        self.endian = "<"
        self.interfaces: list[_Interface] = []
        self._shb_length_at: int | None = None

    # generic pieces
    def options(self, opts) -> bytes:
        """Encode (code, bytes) options, padded to 32 bits, ended by opt_endofopt."""
        if not opts:
            return b""
        e, body = self.endian, b""
        for code, value in opts:
            body += struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)
        return body + struct.pack(e + "HH", OPT_ENDOFOPT, 0)

    def block(self, btype: int, body: bytes, *, trailer_delta=0) -> int:
        """A block: type, total length, body (padded), total length again (+ trailer_delta)."""
        e = self.endian
        body += bytes(-len(body) % 4)
        total = 12 + len(body)
        offset = len(self.out)
        self.block_offsets.append(offset)
        self.length_fields.append((offset + 4, 4, e))
        self.length_fields.append((offset + total - 4, 4, e))
        self.out += struct.pack(e + "II", btype, total) + body
        self.out += struct.pack(e + "I", total + trailer_delta)
        return offset

    # sections and interfaces
    def section(self, endian="<", *, real_length=False, comment: str | None = None) -> int:
        """A new section (SHB) in byte order ``endian``; its interfaces start again at id 0.
        ``real_length`` writes the section length instead of -1 (patched when it ends)."""
        self._close_section()
        self.endian, self.interfaces = endian, []
        opts = self.options([(OPT_COMMENT, comment.encode())] if comment else [])
        body = struct.pack(endian + "IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + opts
        offset = self.block(SHB, body)
        self._shb_length_at = offset + 16 if real_length else None
        self._section_body_start = offset + 12 + len(body) + 4
        return offset

    def _close_section(self):
        if self._shb_length_at is not None:
            length = len(self.out) - self._section_body_start
            self.out[self._shb_length_at:self._shb_length_at + 8] = struct.pack(
                self.endian + "q", length)
            self._shb_length_at = None

    def interface(self, link_type, *, snaplen=0, tsresol=None, tsoffset=None,
                  if_name=None) -> int:
        """An IDB; returns the new interface id.  ``tsresol`` None means the default (10^-6)."""
        opts = []
        if if_name:
            opts.append((IF_NAME, if_name.encode()))
        if tsresol is not None:
            opts.append((IF_TSRESOL, bytes([tsresol])))
        if tsoffset is not None:
            opts.append((IF_TSOFFSET, struct.pack(self.endian + "q", tsoffset)))
        body = struct.pack(self.endian + "HHI", link_type, 0, snaplen) + self.options(opts)
        self.block(IDB, body)
        self.interfaces.append(_Interface(link_type, snaplen, 6 if tsresol is None else tsresol,
                                          tsoffset or 0))
        return len(self.interfaces) - 1

    # packets
    def _cap(self, ifc: _Interface, frame: Built, cap_len):
        cap = len(frame.data) if cap_len is None else min(cap_len, len(frame.data))
        return min(cap, ifc.snaplen) if ifc.snaplen else cap

    def _ts_units(self, ifc: _Interface, ts_ns: int) -> int:
        units = Fraction(ts_ns - ifc.tsoffset * NS) / tsresol_ns(ifc.tsresol)
        assert units.denominator == 1 and units >= 0, f"{ts_ns} ns not representable"
        return int(units)

    def _packet(self, btype, head: bytes, frame: Built, cap, ts_ns, if_id, opts=(),
                notes=()) -> int:
        body = head + frame.data[:cap] + bytes(-cap % 4) + self.options(list(opts))
        offset = self.block(btype, body)
        assert frame.link_type == self.interfaces[if_id].link_type, frame.name
        self.entries.append((frame, ts_ns, cap, if_id, offset + 8 + len(head), notes))
        return offset

    def epb(self, if_id, frame: Built, ts_ns, *, cap_len=None, flags=None) -> int:
        ifc = self.interfaces[if_id]
        cap = self._cap(ifc, frame, cap_len)
        t = self._ts_units(ifc, ts_ns)
        head = struct.pack(self.endian + "IIIII", if_id, t >> 32, t & 0xFFFFFFFF, cap,
                           len(frame.data))
        self.length_fields.append((len(self.out) + 20, 4, self.endian))
        opts = [(EPB_FLAGS, struct.pack(self.endian + "I", flags))] if flags is not None else []
        return self._packet(EPB, head, frame, cap, ts_ns, if_id, opts)

    def opb(self, if_id, frame: Built, ts_ns, *, cap_len=None, drops=0) -> int:
        """Obsolete Packet Block (type 2): 16-bit interface id and drop count."""
        ifc = self.interfaces[if_id]
        cap = self._cap(ifc, frame, cap_len)
        t = self._ts_units(ifc, ts_ns)
        head = struct.pack(self.endian + "HHIIII", if_id, drops, t >> 32, t & 0xFFFFFFFF, cap,
                           len(frame.data))
        self.length_fields.append((len(self.out) + 20, 4, self.endian))
        return self._packet(OPB, head, frame, cap, ts_ns, if_id)

    def spb(self, frame: Built) -> int:
        """Simple Packet Block: interface 0, original length only, no timestamp.  The expected
        time is 0 (pcapstats' choice; tshark shows no time at all, see tshark_excuses)."""
        cap = self._cap(self.interfaces[0], frame, None)
        head = struct.pack(self.endian + "I", len(frame.data))
        return self._packet(SPB, head, frame, cap, 0, 0, notes=("untimed",))

    # blocks a packet reader must step over
    def nrb(self) -> int:
        e = self.endian
        rec = ipaddress.IPv4Address("10.0.0.1").packed + b"host.example\0"
        body = struct.pack(e + "HH", 1, len(rec)) + rec + bytes(-len(rec) % 4)
        return self.block(NRB, body + struct.pack(e + "HH", 0, 0))

    def isb(self, if_id, ts_ns=0) -> int:
        ifc = self.interfaces[if_id]
        t = self._ts_units(ifc, ts_ns) if ts_ns else 0
        return self.block(ISB, struct.pack(self.endian + "III", if_id, t >> 32, t & 0xFFFFFFFF))

    def custom(self, copy=True, data=b"custom!") -> int:
        body = struct.pack(self.endian + "I", 32473) + data    # 32473: PEN for documentation
        return self.block(CUSTOM_COPY if copy else CUSTOM_NOCOPY, body)

    def unknown(self, btype=0x00000F00, data=b"\x01\x02\x03\x04\x05") -> int:
        return self.block(btype, data)

    def written(self) -> Written:
        self._close_section()
        return _finish(self.out, self.entries, self.name, "pcapng", self.block_offsets,
                       self.length_fields)


def gzipped(w: Written) -> Written:
    """The same capture gzip-compressed; offsets still count in the decompressed bytes."""
    return replace(w, data=gzip.compress(w.data, mtime=0), name=w.name + ".gz")


# -- timestamps -------------------------------------------------------------------------------

BASE_NS = 1_700_000_000 * NS + 123_456_789


def times(n, unit_ns=1, base=BASE_NS, step=1_234_567_891):
    """``n`` increasing timestamps on a grid of ``unit_ns``, with uneven sub-second parts."""
    return [(base + i * step + i * i * 7_777) // unit_ns * unit_ns for i in range(n)]


# -- a catalogue of packets -------------------------------------------------------------------

A4, B4, C4 = "192.0.2.1", "198.51.100.2", "203.0.113.3"
A6, B6, C6 = "2001:db8::1", "2001:db8:0:1::2", "2001:db8:ff::3"
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR, NS_ = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100


def zoo() -> list[Built]:
    """IP packets (no link header) exercising every decoded field, option and extension header.

    Most ICMP errors quote packets that appear earlier; two quote new conversations, which
    Wireshark numbers too (so every later stream index shifts)."""
    syn_opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1111, 0)), ("NOP", None),
                ("WScale", 7)]
    ts = ("Timestamp", (2222, 3333))
    udp4 = ipv4(udp(5353, 53, b"q" * 50), A4, B4, ttl=1, ident=7, name="udp4")
    syn4 = ipv4(tcp(40000, 80, seq=1000, flags=SYN, window=64240, options=syn_opts),
                A4, B4, ident=0x1234, df=True, name="tcp-syn-mss-sackok-ts-nop-ws")
    udp6 = ipv6(udp(6000, 7000, b"u" * 33), A6, B6, hlim=200,
                ext=[ext_options(HOPOPT), ext_options(DSTOPTS, 1)], name="udp6-hbh-dstopts")
    big = b"".join(bytes([i % 251]) for i in range(1200))
    return [
        syn4,
        ipv4(tcp(80, 40000, seq=5000, ack=1001, flags=SYN | ACK, window=65160,
                 options=[("MSS", 1400), ("NOP", None), ("NOP", None), ("SAckOK", b""),
                          ("NOP", None), ("WScale", 14)]),
             B4, A4, ttl=63, df=True, name="tcp-synack-ws14"),
        ipv4(tcp(40000, 80, seq=1001, ack=5001, flags=ACK, window=502,
                 options=[("NOP", None), ("NOP", None), ts, ("NOP", None), ("NOP", None),
                          ("SAck", (6000, 6100))]), A4, B4, ident=2, df=True,
             name="tcp-ts-sack1"),
        ipv4(tcp(40000, 80, seq=1001, ack=5001, window=502,
                 options=[("NOP", None), ("NOP", None), ts, ("NOP", None), ("NOP", None),
                          ("SAck", (6000, 6100, 6200, 6300))]), A4, B4, ident=3,
             name="tcp-ts-sack2"),
        ipv4(tcp(40000, 80, seq=1001, ack=5001, window=502,
                 options=[("NOP", None), ("NOP", None), ts, ("NOP", None), ("NOP", None),
                          ("SAck", (6000, 6100, 6200, 6300, 6400, 6500))]), A4, B4, ident=4,
             name="tcp-ts-sack3"),
        ipv4(tcp(40000, 80, seq=1001, ack=5001, window=502,
                 options=[("NOP", None), ("NOP", None),
                          ("SAck", (0xFFFFFF00, 0xFFFFFFFF, 1, 2, 30, 40, 500, 600))]),
             A4, B4, ident=5, name="tcp-sack4-wrapping"),
        ipv4(tcp(80, 40000, seq=0xFFFFFFF0, ack=1001, flags=PSH | ACK | ECE | CWR | NS_,
                 reserved=0b101, window=0, payload=b"d" * 100), B4, A4, ttl=255,
             ident=0xFFFF, name="tcp-data-all-flag-bits"),
        ipv4(tcp(40000, 80, seq=1001, ack=0xFFFFFFFF, flags=FIN | ACK | URG,
                 options=[("MSS", 536), ("EOL", None), ("Timestamp", (9, 9))]),
             A4, B4, name="tcp-fin-options-after-eol"),
        ipv4(tcp(40000, 80, seq=1002, flags=RST), A4, B4, name="tcp-rst"),
        udp4,
        ipv4(icmp(4, 8, ident=0x4242, seq=0x0102, body=b"p" * 56), A4, C4, name="icmp-echo"),
        ipv4(icmp(4, 0, ident=0x4242, seq=0x0102, body=b"p" * 56), C4, A4, name="icmp-reply"),
        ipv4(icmp(4, 3, 3, quote=udp4, quote_len=28), B4, A4, name="icmp-unreachable-udp"),
        ipv4(icmp(4, 11, 0, quote=syn4, quote_len=28), C4, A4, name="icmp-ttl-tcp-8-bytes"),
        ipv4(icmp(4, 11, 0, quote=syn4), C4, A4, name="icmp-ttl-tcp-whole"),
        ipv4(icmp(4, 3, 1, quote=ipv4(tcp(45000, 8080, seq=9, flags=SYN), A4, C4)), B4, A4,
             name="icmp-unreachable-new-tcp-conversation"),
        ipv4(icmp(4, 3, 3, quote=ipv4(udp(7777, 9999, b"?" * 9), A4, C4)), C4, A4,
             name="icmp-unreachable-new-udp-conversation"),
        ipv4(udp(1234, 4321, b"o" * 10), A4, C4, options=bytes.fromhex("9404000001010100"),
             name="ipv4-options-router-alert"),
        ipv4(udp(1111, 2222, big), A4, C4, ident=0xBEEF, frag=(0, True, 608),
             name="ipv4-frag-first-udp"),
        ipv4(udp(1111, 2222, big), A4, C4, ident=0xBEEF, frag=(76, False, 600),
             name="ipv4-frag-last"),
        ipv4(tcp(2000, 3000, seq=7, ack=8, payload=big), A4, C4, ident=0xCAFE,
             frag=(0, True, 520), name="ipv4-frag-first-tcp"),
        ipv6(tcp(50000, 443, seq=77, flags=SYN, window=28800, options=syn_opts), A6, B6,
             name="tcp6-syn"),
        udp6,
        ipv6(tcp(50001, 443, seq=1, ack=2, flags=PSH | ACK, payload=b"r" * 20), A6, B6,
             ext=[ext_routing([C6, B6])], name="tcp6-routing"),
        ipv6(udp(6001, 7001, big), A6, B6, frag=(0xABCDEF01, 0, True, 512),
             ext=[ext_options(HOPOPT)], name="udp6-frag-first"),
        ipv6(udp(6001, 7001, big), A6, B6, frag=(0xABCDEF01, 64, False, 696),
             name="udp6-frag-last"),
        ipv6(icmp(6, 128, ident=0x0A0B, seq=3, body=b"e" * 16), A6, C6,
             ext=[ext_options(HOPOPT)], name="icmp6-echo-hbh"),
        ipv6(icmp(6, 129, ident=0x0A0B, seq=3, body=b"e" * 16), C6, A6, name="icmp6-reply"),
        ipv6(icmp(6, 1, 4, quote=udp6), B6, A6, name="icmp6-unreachable-udp-ext-headers"),
    ]


def basic() -> list[Built]:
    """A few packets of each IP version and transport, for link-type checks."""
    return [
        ipv4(tcp(33000, 22, seq=10, ack=20, flags=PSH | ACK, payload=b"s" * 30,
                 options=[("NOP", None), ("NOP", None), ("Timestamp", (5, 6))]),
             A4, B4, ident=9, df=True, name="tcp4"),
        ipv4(udp(5000, 5001, b"x" * 12), B4, A4, ttl=3, name="udp4"),
        ipv4(icmp(4, 8, ident=1, seq=2, body=b"ping"), A4, C4, name="icmp4"),
        ipv6(tcp(33001, 22, seq=1, flags=SYN, options=[("MSS", 1220)]), A6, B6, name="tcp6"),
        ipv6(udp(5002, 5003, b"y" * 7), B6, A6, ext=[ext_options(DSTOPTS)], name="udp6"),
        ipv6(icmp(6, 128, ident=5, seq=6, body=b"pong"), A6, C6, name="icmp6"),
    ]



@functools.lru_cache(maxsize=None)
def many_flows(n: int) -> tuple[Built, ...]:
    """``n`` IP packets of ~100 interleaved TCP/UDP flows over IPv4 and IPv6, both directions,
    payloads of varied sizes (files big enough to span many read windows).  No SYN, FIN or
    RST, so Wireshark numbers streams by first appearance."""
    out = []
    for i in range(n):
        flow, back = (i * 7) % 97, i % 2 == 1
        if flow % 3 == 0:
            ends = [(A4, 20000 + flow), (B4, 53)]
            (src, sp), (dst, dp) = ends[::-1] if back else ends
            out.append(ipv4(udp(sp, dp, bytes([i % 256]) * ((i * 13) % 300)), src, dst,
                            ident=i % 65536, name=f"udp4-flow{flow}"))
        elif flow % 3 == 1:
            ends = [(A4, 30000 + flow), (B4, 443)]
            (src, sp), (dst, dp) = ends[::-1] if back else ends
            seg = tcp(sp, dp, seq=i * 1000, ack=i * 7, flags=PSH | ACK,
                      options=[("NOP", None), ("NOP", None), ("Timestamp", (i, i + 1))],
                      payload=b"t" * ((i * 29) % 1400))
            out.append(ipv4(seg, src, dst, ident=i % 65536, df=True, name=f"tcp4-flow{flow}"))
        else:
            ends = [(A6, 40000 + flow), (B6, 22)]
            (src, sp), (dst, dp) = ends[::-1] if back else ends
            seg = tcp(sp, dp, seq=2**32 - 1 - i, ack=i, flags=ACK,
                      options=[("NOP", None), ("NOP", None), ("SAck", (i, i + 10))],
                      payload=b"6" * ((i * 17) % 900))
            out.append(ipv6(seg, src, dst, hlim=i % 256, name=f"tcp6-flow{flow}"))
    return tuple(out)

# -- tshark, the independent reader ----------------------------------------------------------

TSHARK = shutil.which("tshark")
# Wireshark's dissection that matches pcapstats' rules: no reassembly, raw sequence numbers.
TSHARK_PREFS = ("-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
                "-o", "tcp.relative_sequence_numbers:FALSE",
                "-o", "tcp.desegment_tcp_streams:FALSE")
_TSHARK_FIELDS = (
    "frame.number", "frame.time_epoch", "frame.time_relative", "frame.len", "frame.cap_len",
    "frame.interface_id", "vlan.id", "ieee8021ad.id",
    "ip.version", "ip.src", "ip.dst", "ip.hdr_len", "ip.len", "ip.proto", "ip.ttl", "ip.id",
    "ip.flags.df", "ip.flags.mf", "ip.frag_offset",
    "ipv6.version", "ipv6.src", "ipv6.dst", "ipv6.plen", "ipv6.nxt", "ipv6.hlim",
    "ipv6.hopopts.nxt", "ipv6.routing.nxt", "ipv6.dstopts.nxt", "ipv6.fraghdr.nxt",
    "ipv6.fraghdr.offset", "ipv6.fraghdr.more", "ipv6.fraghdr.ident",
    "tcp.srcport", "tcp.dstport", "tcp.stream", "tcp.seq_raw", "tcp.ack_raw", "tcp.hdr_len",
    "tcp.flags", "tcp.window_size_value", "tcp.len", "tcp.options.mss_val",
    "tcp.options.wscale.shift", "tcp.options.sack_perm", "tcp.options.timestamp.tsval",
    "tcp.options.timestamp.tsecr", "tcp.options.sack.count", "tcp.options.sack_le",
    "tcp.options.sack_re",
    "udp.srcport", "udp.dstport", "udp.stream", "udp.length",
    "icmp.type", "icmp.code", "icmp.ident", "icmp.seq",
    "icmpv6.type", "icmpv6.code", "icmpv6.echo.identifier", "icmpv6.echo.sequence_number",
)


def tshark_raw(path, fields=_TSHARK_FIELDS, prefs=TSHARK_PREFS) -> list[dict[str, list[str]]]:
    """tshark's fields per packet, each as the list of all its occurrences (outer first)."""
    cmd = [TSHARK, "-n", "-r", str(path), *prefs, "-T", "fields", "-E", "occurrence=a",
           "-E", "aggregator=|", "-E", "separator=/t"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"tshark failed on {path}: {out.stderr}"
    rows = []
    for line in out.stdout.splitlines():
        values = line.split("\t")
        rows.append({f: (v.split("|") if v else []) for f, v in zip(fields, values)})
    return rows


def _ns(text: str) -> int:
    return int(Decimal(text) * NS)


def _first(raw, name, conv=int):
    vals = raw[name]
    return conv(vals[0]) if vals else None


def _as_int(text: str) -> int:
    return int(text, 0)


def _as_bool(text: str) -> bool:
    return bool(int(text, 0))


def _ipv6_upper(raw) -> int | None:
    """The protocol after the outer IPv6 header's extension chain, from tshark's nxt fields."""
    by_type = {HOPOPT: "ipv6.hopopts.nxt", ROUTING: "ipv6.routing.nxt",
               DSTOPTS: "ipv6.dstopts.nxt", FRAGMENT: "ipv6.fraghdr.nxt"}
    used = dict.fromkeys(by_type, 0)
    nh = _first(raw, "ipv6.nxt")
    while nh in by_type:
        vals = raw[by_type[nh]]
        if used[nh] >= len(vals):
            break
        nxt = int(vals[used[nh]])
        used[nh] += 1
        nh = nxt
    return nh


def tshark_rows(path) -> list[dict]:
    """tshark's view of a capture in pcapstats' column names and units (None where absent).

    Columns tshark has no field for (link_type, frame_offset, payload_*, IPv6 ip_hdr_len) are
    left out of the dicts.  Where a packet quotes another (ICMP errors) the outer IP header's
    occurrence is taken; the tcp/udp fields are the quoted header's (the only one there is).
    """
    rows = []
    for raw in tshark_raw(path):
        v6 = not raw["ip.src"] and bool(raw["ipv6.src"])
        v4 = bool(raw["ip.src"])
        r: dict = {
            "frame_number": _first(raw, "frame.number"),
            "frame_time_ns": _first(raw, "frame.time_epoch", _ns),
            "frame_len": _first(raw, "frame.len"),
            "frame_cap_len": _first(raw, "frame.cap_len"),
            "frame_interface_id": _first(raw, "frame.interface_id"),
            # An 802.1ad S-tag is ieee8021ad.id, not vlan.id: outermost is the S-tag if any.
            "vlan_id": _first(raw, "ieee8021ad.id" if raw["ieee8021ad.id"] else "vlan.id"),
            "vlan_count": len(raw["ieee8021ad.id"]) + len(raw["vlan.id"]),
        }
        r["frame_time_relative"] = _first(raw, "frame.time_relative", Decimal)
        ip = dict.fromkeys(IP_COLUMNS)
        if v4:
            mf = _first(raw, "ip.flags.mf", _as_int)
            off = _first(raw, "ip.frag_offset")
            ip.update(ip_version=4, ip_src=_first(raw, "ip.src", str),
                      ip_dst=_first(raw, "ip.dst", str),
                      ip_hdr_len=_first(raw, "ip.hdr_len"), ip_len=_first(raw, "ip.len"),
                      ip_proto=_first(raw, "ip.proto"), ip_ttl=_first(raw, "ip.ttl"),
                      ip_id=_first(raw, "ip.id", _as_int),
                      ip_flags_df=_first(raw, "ip.flags.df", _as_bool),
                      ip_flags_mf=None if mf is None else bool(mf), ip_frag_offset=off,
                      ip_fragment=None if off is None else bool(mf) or off > 0)
        elif v6:
            mf = bool(_first(raw, "ipv6.fraghdr.more", _as_int))
            off = _first(raw, "ipv6.fraghdr.offset") or 0
            plen = _first(raw, "ipv6.plen")
            ip.update(ip_version=6, ip_src=_first(raw, "ipv6.src", str),
                      ip_dst=_first(raw, "ipv6.dst", str),
                      ip_len=None if plen is None else plen + 40, ip_proto=_ipv6_upper(raw),
                      ip_ttl=_first(raw, "ipv6.hlim"),
                      ip_id=_first(raw, "ipv6.fraghdr.ident", _as_int) or 0,
                      ip_flags_df=False, ip_flags_mf=mf, ip_frag_offset=off,
                      ip_fragment=mf or off > 0)
            del ip["ip_hdr_len"]     # tshark has no IPv6 header-length field
        r.update(ip)
        sack_le, sack_re = raw["tcp.options.sack_le"], raw["tcp.options.sack_re"]
        has_tcp = bool(raw["tcp.srcport"])
        r.update(
            tcp_srcport=_first(raw, "tcp.srcport"), tcp_dstport=_first(raw, "tcp.dstport"),
            tcp_stream=_first(raw, "tcp.stream"), tcp_seq_raw=_first(raw, "tcp.seq_raw"),
            tcp_ack_raw=_first(raw, "tcp.ack_raw"), tcp_hdr_len=_first(raw, "tcp.hdr_len"),
            tcp_flags=_first(raw, "tcp.flags", _as_int),
            tcp_window_size_value=_first(raw, "tcp.window_size_value"),
            tcp_len=_first(raw, "tcp.len"),
            tcp_option_mss=_first(raw, "tcp.options.mss_val"),
            tcp_option_wscale_shift=_first(raw, "tcp.options.wscale.shift"),
            tcp_option_sack_perm=bool(raw["tcp.options.sack_perm"]) if has_tcp else None,
            tcp_option_tsval=_first(raw, "tcp.options.timestamp.tsval"),
            tcp_option_tsecr=_first(raw, "tcp.options.timestamp.tsecr"),
            tcp_sack_count=len(sack_le) if has_tcp else None,
        )
        for k in range(1, 5):
            r[f"tcp_sack_le{k}_raw"] = int(sack_le[k - 1]) if len(sack_le) >= k else None
            r[f"tcp_sack_re{k}_raw"] = int(sack_re[k - 1]) if len(sack_re) >= k else None
        r.update(udp_srcport=_first(raw, "udp.srcport"), udp_dstport=_first(raw, "udp.dstport"),
                 udp_stream=_first(raw, "udp.stream"), udp_length=_first(raw, "udp.length"))
        fam = "icmp" if raw["icmp.type"] else "icmpv6"
        r.update(icmp_type=_first(raw, f"{fam}.type"), icmp_code=_first(raw, f"{fam}.code"),
                 icmp_ident=_first(raw, "icmp.ident" if fam == "icmp"
                                   else "icmpv6.echo.identifier", _as_int),
                 icmp_seq=_first(raw, "icmp.seq" if fam == "icmp"
                                 else "icmpv6.echo.sequence_number", _as_int))
        rows.append(r)
    return rows


def tshark_excuses(w: Written):
    """Cells where tshark's field is defined differently from the column, on purpose:

    - classic pcap has no interface: tshark prints no frame.interface_id, the column says 0;
    - a TCP header quoted whole in an ICMP error: tshark prints no tcp.seq_raw and no tcp.len
      for it, the columns hold the quoted header's (seq as written, length from its IP header);
    - a TCP header quoted in part (the classic 8 bytes): tshark prints its ports, pcapstats
      decodes no TCP layer from a partial header;
    - a first fragment carrying TCP: tshark prints no tcp.len (it is not the segment length);
    - a pcapng Simple Packet Block has no timestamp: tshark prints no time, the column says 0;
    - a QoS data frame cut inside its 802.11 header: tshark prints none of its frame control
      (a plain data frame cut so still has it), the wlan columns read the two bytes there are.
    """
    def skip(i, col):
        notes = w.notes[i]
        return ((col == "frame_interface_id" and w.fmt == "pcap")
                or ("quoted_tcp" in notes and col in ("tcp_seq_raw", "tcp_len"))
                or ("quoted_partial" in notes and col in TCP_COLUMNS)
                or ("fragmented_tcp" in notes and col == "tcp_len")
                or ("untimed" in notes and col.startswith("frame_time"))
                or ("qos_header_cut" in notes and col in WLAN_COLUMNS))
    return skip


# -- comparing --------------------------------------------------------------------------------

def same(expected, got) -> bool:
    """Equality for column values: floats to the last bits, NA/None alike, bools as ints."""
    if expected is None or got is None:
        return expected is None and got is None
    if isinstance(expected, (float, Decimal)) or isinstance(got, (float, Decimal)):
        return math.isclose(float(expected), float(got), rel_tol=4e-16, abs_tol=1e-12)
    if isinstance(expected, str) or isinstance(got, str):
        return str(expected) == str(got)
    return int(expected) == int(got)


def compare_rows(label, expected: list[dict], got: list[dict], columns, skip=None) -> list[str]:
    """Every difference as 'label: packet N (name) column: expected X, got Y'.

    ``skip(i, column)`` may excuse a cell (a documented difference of definition)."""
    problems = []
    if len(expected) != len(got):
        problems.append(f"{label}: {len(got)} packets, expected {len(expected)}")
    for i, (e, g) in enumerate(zip(expected, got)):
        for col in columns:
            if col not in e or col not in g or (skip and skip(i, col)):
                continue
            if not same(e[col], g[col]):
                problems.append(f"{label}: packet {i + 1} ({e.get('_name', '?')}) {col}: "
                                f"expected {e[col]!r}, got {g[col]!r}")
    return problems


# -- pcapstats' view --------------------------------------------------------------------------

def _py(value):
    """A DataFrame cell as a plain Python value, None for <NA>."""
    import pandas as pd
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def capture_rows(cap, columns=ALL_COLUMNS) -> list[dict]:
    """pcapstats' packet table as one dict per packet (only ``columns`` that it has)."""
    df = cap.packets
    cols = {c: [_py(v) for v in df[c].tolist()] for c in columns if c in df.columns}
    return [{c: cols[c][i] for c in cols} for i in range(len(df))]


def raw_array_problems(label, cap, rows, zero_where_absent=False) -> list[str]:
    """``cap.present`` must be True exactly where a value is expected, and ``cap.column`` must
    hold that value there (addresses as codes into ``cap.addresses``); with
    ``zero_where_absent``, also 0 everywhere else (the contract in the project brief)."""
    import numpy as np
    problems = []
    for col in ALL_COLUMNS:
        expected_present = np.array([r[col] is not None for r in rows], bool)
        present = np.asarray(cap.present(col), bool)
        raw_col = np.asarray(cap.column(col))
        if not np.array_equal(present, expected_present):
            bad = np.flatnonzero(present != expected_present)[:5] + 1
            problems.append(f"{label}: present({col}) wrong on packets {bad.tolist()}")
            continue
        if zero_where_absent and col not in ("ip_src", "ip_dst"):
            nonzero = np.flatnonzero(~present & (raw_col != 0))
            if len(nonzero):
                i = nonzero[0]
                problems.append(f"{label}: column({col}) is {raw_col[i]!r} on packet {i + 1} "
                                f"where absent, expected 0 ({len(nonzero)} such packets)")
        for i in np.flatnonzero(present):
            got = raw_col[i]
            if col in ("ip_src", "ip_dst"):
                got = cap.addresses[got]
            elif col == "direction":
                got = ("a_to_b", "b_to_a")[got]
            if not same(rows[i][col], _py(got)):
                problems.append(f"{label}: column({col})[packet {i + 1}] is {got!r}, "
                                f"expected {rows[i][col]!r}")
                break
    return problems


def read_problems(label, path, w: Written, kernel, skip=None) -> list[str]:
    """Everything ``pcapstats.read`` gets wrong in the packet table of a crafted capture."""
    import pcapstats as ps
    cap = ps.read(path, kernel=kernel)
    return compare_rows(label, w.rows, capture_rows(cap), ALL_COLUMNS, skip)


def raw_problems(label, path, w: Written, kernel, zero_where_absent=False) -> list[str]:
    """Everything ``cap.column``/``cap.present`` get wrong about a crafted capture."""
    import pcapstats as ps
    cap = ps.read(path, kernel=kernel)
    if len(cap) != len(w.rows):
        return [f"{label}: {len(cap)} packets, expected {len(w.rows)}"]
    return raw_array_problems(label, cap, w.rows, zero_where_absent)


def kernel_unavailable(kernel) -> str | None:
    """Why ``kernel`` cannot be used in this install (None when it can)."""
    import pcapstats as ps
    w = pcap([Record(raw(ipv4(udp(1, 2), A4, B4)), BASE_NS // 1000 * 1000)], LT_RAW)
    fd, path = tempfile.mkstemp(suffix=".pcap")
    try:
        os.write(fd, w.data)
        os.close(fd)
        ps.read(path, kernel=kernel)
    except ps.UsageError as e:
        return str(e)
    except ImportError as e:
        return f"kernel {kernel!r} cannot be imported: {e}"
    finally:
        os.unlink(path)
    return None


# -- IEEE 802.11 and radiotap -----------------------------------------------------------------
#
# 802.11 frames are laid out byte by byte (scapy's Dot11 picks lengths and flags itself) and
# radiotap headers field by field, each field aligned as radiotap.org defines it, so that the
# expected columns follow from the parameters: the 802.11 wrappers give the inner packet's
# columns (or none, for frames without an IP packet), ``radiotap`` computes the radio columns
# from the fields it is given -- the first signal, Channel and rate field in header order, a
# rate from an MCS field only when its bandwidth, index and guard interval are all known.

LT_IEEE802_11, LT_RADIOTAP = 105, 127
MAC_C, MAC_D, MAC_BROADCAST = (bytes.fromhex(x) for x in ("020000000003", "020000000004",
                                                           "ffffffffffff"))
SNAP_RFC1042, SNAP_BRIDGE_TUNNEL = b"\0\0\0", b"\0\0\xf8"
_NO_RADIO = dict.fromkeys(RADIO_COLUMNS)
# What pcapstats.ingest counts an 802.11 frame without an IP packet as (its warning's words).
WLAN_MANAGEMENT, WLAN_CONTROL, WLAN_EXTENSION_KIND = "management", "control", "extension"
WLAN_NULL, WLAN_PROTECTED, WLAN_AMSDU = ("data without payload (null)", "protected (encrypted)",
                                         "A-MSDU (aggregates, not split)")
WLAN_VERSION, WLAN_NO_PSDU = "802.11 protocol version 1-3", "radiotap 0-length PSDU (no frame)"


def dot11_header(type_=2, subtype=0, *, tods=True, fromds=False, qos=None, htc=None,
                 protected=False, version=0, pad=False, retry=False) -> bytes:
    """Frame control, duration, three addresses, sequence control; a fourth address when both
    ToDS and FromDS are set; QoS control (``qos``, its 16-bit value); HT control (``htc``, 4
    bytes, which sets the Order bit); zeros to a multiple of 4 bytes with ``pad``; ``retry``
    sets the Retry flag."""
    fc = bytes([version | type_ << 2 | subtype << 4,
                int(tods) | int(fromds) << 1 | (0x08 if retry else 0)
                | (0x40 if protected else 0) | (0x80 if htc is not None else 0)])
    h = fc + struct.pack("<H", 44) + MAC_A + MAC_B + MAC_C + struct.pack("<H", 0x1230)
    if tods and fromds:
        h += MAC_D
    if qos is not None:
        h += struct.pack("<H", qos)
    if htc is not None:
        h += htc
    return h + bytes(-len(h) % 4 if pad else 0)


def snap(ethertype: int, oui=SNAP_RFC1042, vlans=()) -> bytes:
    """LLC/SNAP (AA AA 03, OUI) carrying an ethertype, behind 802.1Q tags ``vlans``."""
    types = [ETH_8021Q] * len(vlans) + [ethertype]
    out = b"\xaa\xaa\x03" + oui + struct.pack("!H", types[0])
    for vid, inner in zip(vlans, types[1:]):
        out += struct.pack("!HH", vid, inner)
    return out


def wlan_columns(fc: bytes) -> dict:
    """The 802.11 frame-control columns of a frame whose frame control is ``fc`` (none for
    protocol versions other than 0, whose flags Wireshark does not dissect)."""
    if fc[0] & 3:
        return dict.fromkeys(WLAN_COLUMNS)
    return {"wlan_fc_type": fc[0] >> 2 & 3, "wlan_fc_ds": fc[1] & 3,
            "wlan_fc_retry": bool(fc[1] & 0x08)}


def wlan(p: Built, *, qos=None, tods=True, fromds=False, htc=None, oui=SNAP_RFC1042, vlans=(),
         pad=False, retry=False, name=None) -> Built:
    """``p`` in an 802.11 data frame (QoS data when ``qos`` is given), link type 105.  ``pad``
    pads the header to 4 bytes: only valid under a radiotap header whose flags say so."""
    hdr = dot11_header(2, 8 if qos is not None else 0, tods=tods, fromds=fromds, qos=qos,
                       htc=htc, pad=pad, retry=retry)
    out = p.shifted(hdr + snap(p.ethertype, oui, vlans), LT_IEEE802_11,
                    vlan_id=vlans[0] if vlans else None, vlan_count=len(vlans), _datapad=pad,
                    **_NO_RADIO, **wlan_columns(hdr[:2]))
    return replace(out, name=name or f"wlan-{p.name}")


def wlan_frame(kind: str) -> Built:
    """An 802.11 frame with no IP packet, which the reader counts and skips: "beacon",
    "action", "ack", "rts", "null", "qos-null", "protected" (CCMP), "amsdu" (an A-MSDU whose one
    subframe is ARP), "version1", "extension" (a DMG beacon)."""
    ccmp = bytes([1, 0, 0, 0x20, 0, 0, 0, 0])
    frames = {
        "beacon": (bytes([0x80, 0]) + bytes(2) + MAC_BROADCAST + MAC_B + MAC_B
                   + struct.pack("<HQHH", 0x10, 123456, 100, 0x0401) + b"\x00\x09pcapstats",
                   WLAN_MANAGEMENT),
        "action": (bytes([0xd0, 0]) + bytes(2) + MAC_A + MAC_B + MAC_B + bytes(2) + b"\x03\x00",
                   WLAN_MANAGEMENT),
        "ack": (bytes([0xd4, 0]) + bytes(2) + MAC_A, WLAN_CONTROL),
        "rts": (bytes([0xb4, 0]) + struct.pack("<H", 100) + MAC_A + MAC_B, WLAN_CONTROL),
        "null": (dot11_header(2, 4), WLAN_NULL),
        "qos-null": (dot11_header(2, 12, qos=0), WLAN_NULL),
        "protected": (dot11_header(2, 8, qos=5, protected=True) + ccmp + bytes(range(60)),
                      WLAN_PROTECTED),
        "amsdu": (dot11_header(2, 8, qos=0x80) + MAC_B + MAC_A
                  + struct.pack("!H", 8 + len(arp().data)) + snap(ETH_ARP) + arp().data,
                  WLAN_AMSDU),
        "version1": (bytes([0x09, 0x01]) + bytes(22), WLAN_VERSION),
        "extension": (bytes([0x0c, 0]) + bytes(2) + MAC_A + bytes(20), WLAN_EXTENSION_KIND),
    }
    data, counted = frames[kind]
    return Built(data, {"vlan_id": None, "vlan_count": 0, "_wlan_kind": counted, **_NO_RADIO,
                        **wlan_columns(data[:2])},
                 f"wlan-{kind}", 0, None, len(data), LT_IEEE802_11)


# radiotap fields: bit -> (alignment, size), from the field definitions on radiotap.org
RT_ALIGN_SIZE = {0: (8, 8), 1: (1, 1), 2: (1, 1), 3: (2, 4), 4: (2, 2), 5: (1, 1), 6: (1, 1),
                 7: (2, 2), 8: (2, 2), 9: (2, 2), 10: (1, 1), 11: (1, 1), 12: (1, 1), 13: (1, 1),
                 14: (2, 2), 15: (2, 2), 16: (1, 1), 17: (1, 1), 18: (4, 8), 19: (1, 3),
                 20: (4, 8), 21: (2, 12), 22: (8, 12), 23: (2, 12), 24: (2, 12), 26: (1, 1),
                 27: (2, 4)}
RT_NS_RADIOTAP, RT_NS_VENDOR, RT_EXT = 1 << 29, 1 << 30, 1 << 31


def rt_field(bit: int, data: bytes | None = None) -> tuple[int, bytes]:
    """A radiotap field: its presence bit and bytes (zeros of its size when not given)."""
    return bit, bytes(RT_ALIGN_SIZE[bit][1]) if data is None else data


def rt_tsft(us=1_000_000):
    return rt_field(0, struct.pack("<Q", us))


def rt_flags(*, fcs=False, datapad=False, other=0x02):
    """Flags: bit 0x10 the frame ends in its FCS, 0x20 the 802.11 header is padded to 4 bytes
    (``other``: 0x02 short preamble, which changes nothing here)."""
    return rt_field(1, bytes([other | (0x10 if fcs else 0) | (0x20 if datapad else 0)]))


def rt_rate(units_500k: int):
    return rt_field(2, bytes([units_500k]))


def rt_channel(mhz: int, flags=0x00A0):
    return rt_field(3, struct.pack("<HH", mhz, flags))


def rt_signal(dbm: int):
    return rt_field(5, struct.pack("<b", dbm))


def rt_mcs(index: int, *, bw40=False, short_gi=False, known=0x07, bw_bits=None):
    """MCS: known (0x01 bandwidth, 0x02 index, 0x04 guard interval), flags (bandwidth 0-3, 0x04
    short GI), index.  ``bw_bits`` sets the raw bandwidth value (2, 3: 20L/20U)."""
    bw = (1 if bw40 else 0) if bw_bits is None else bw_bits
    return rt_field(19, bytes([known, bw | (0x04 if short_gi else 0), index]))


# data bits per symbol of the 802.11n MCS indexes at 20 MHz (IEEE 802.11-2020, 19.5)
HT_DBPS = (26, 52, 78, 104, 156, 208, 234, 260, 52, 104, 156, 208, 312, 416, 468, 520, 78, 156,
           234, 312, 468, 624, 702, 780, 104, 208, 312, 416, 624, 832, 936, 1040, 12, 156, 208,
           260, 234, 312, 390, 208, 260, 260, 312, 364, 364, 416, 312, 390, 390, 468, 546, 546,
           624, 260, 312, 364, 312, 364, 416, 468, 416, 468, 520, 520, 572, 390, 468, 546, 468,
           546, 624, 702, 624, 702, 780, 780, 858)


def ht_rate_mbps(index: int, bw40: bool, short_gi: bool) -> float:
    """An 802.11n rate as tshark prints radiotap.datarate: computed in float32 (Wireshark's
    ieee80211_htrate: 52 or 108 data subcarriers, 4 or 3.6 us symbols), 6 significant digits."""
    rate = struct.unpack("<f", struct.pack(
        "<f", HT_DBPS[index] * (108 if bw40 else 52) / 52.0 / (3.6 if short_gi else 4.0)))[0]
    return float(f"{rate:.6g}")


def _radio_columns(namespaces) -> tuple[dict, bool, bool, bool]:
    """(radio columns, FCS, data pad, 0-length PSDU) of radiotap fields, by their meaning."""
    cols = dict(_NO_RADIO)
    fcs = datapad = no_psdu = False
    for fields in namespaces:
        for bit, data in sorted(fields, key=lambda f: f[0]):
            if bit == 1:
                fcs, datapad = bool(data[0] & 0x10), datapad or bool(data[0] & 0x20)
            elif bit == 2 and cols["radiotap_datarate"] is None:
                cols["radiotap_datarate"] = data[0] / 2
            elif bit == 3 and cols["radiotap_channel_freq"] is None:
                cols["radiotap_channel_freq"] = struct.unpack("<H", data[:2])[0]
            elif bit == 5 and cols["radiotap_dbm_antsignal"] is None:
                cols["radiotap_dbm_antsignal"] = struct.unpack("<b", data)[0]
            elif (bit == 19 and cols["radiotap_datarate"] is None and data[0] & 7 == 7
                  and data[2] < len(HT_DBPS)):
                cols["radiotap_datarate"] = ht_rate_mbps(data[2], data[1] & 3 == 1,
                                                         bool(data[1] & 4))
            elif bit == 26:
                no_psdu = True
    return cols, fcs, datapad, no_psdu


def radiotap_header(*namespaces, vendor: tuple[bytes, int, bytes] | None = None) -> bytes:
    """A radiotap header: each namespace a list of fields (``rt_*``) in bit order, the first the
    radiotap namespace, each further one a radiotap namespace again (bit 29 of the word before);
    ``vendor=(oui, sub-namespace, data)`` puts a vendor namespace after the first one (bit 30,
    its header aligned to 2, its data skipped by its length; one presence word of its own)."""
    words = []
    for k, fields in enumerate(namespaces):
        word = 0
        for bit, _ in fields:
            word |= 1 << bit
        if k == 0 and vendor:
            word |= RT_EXT | RT_NS_VENDOR
        elif k + 1 < len(namespaces):
            word |= RT_EXT | RT_NS_RADIOTAP
        words.append(word)
        if k == 0 and vendor:
            words.append(0x3 | (RT_EXT | RT_NS_RADIOTAP if len(namespaces) > 1 else 0))
    body = bytearray(struct.pack(f"<{len(words)}I", *words))

    def put(data: bytes, align: int):
        body.extend(bytes(-(4 + len(body)) % align))
        body.extend(data)
    for k, fields in enumerate(namespaces):
        for bit, data in sorted(fields, key=lambda f: f[0]):
            put(data, RT_ALIGN_SIZE[bit][0])
        if k == 0 and vendor:
            oui, subns, vdata = vendor
            put(oui + bytes([subns]) + struct.pack("<H", len(vdata)) + vdata, 2)
    return struct.pack("<BBH", 0, 0, 4 + len(body)) + bytes(body)


FCS_BYTES = b"\x5a\xa5\x0f\xf0"


def radiotap(frame: Built, *namespaces, vendor=None, name=None) -> Built:
    """The 802.11 frame ``frame`` (from ``wlan``/``wlan_frame``) behind a radiotap header made
    of ``namespaces`` (see ``radiotap_header``), link type 127; an FCS is appended when its
    Flags say so.  The radio columns come from the fields; a 0-length-PSDU field means no frame
    follows (``frame`` must then be empty: ``wlan_frame`` bytes are not decoded either way)."""
    cols, fcs, datapad, no_psdu = _radio_columns(namespaces)
    assert datapad == bool(frame.fields.get("_datapad")), "header padding and radiotap disagree"
    out = frame.shifted(radiotap_header(*namespaces, vendor=vendor), LT_RADIOTAP, **cols)
    if no_psdu:
        out = _undecoded(out, cols, WLAN_NO_PSDU)
    if fcs:
        out = replace(out, data=out.data + FCS_BYTES)
    return replace(out, name=name or f"rt-{frame.name}")


def radiotap_raw(frame: Built, header: bytes, *, signal=None, rate=None, freq=None,
                 decoded=True, kind=None, frame_control=False, name="rt-raw") -> Built:
    """``frame`` behind hand-made radiotap bytes ``header`` whose radio columns the caller
    states (damaged headers: what a reader must make of them is the test's claim, checked
    against tshark); ``decoded=False``: no 802.11 frame is read (a header length past the
    packet or under 8: malformed; a 0-length PSDU, ``kind=WLAN_NO_PSDU``), or only its frame
    control (``frame_control``: the frame is cut inside its header)."""
    cols = {"radiotap_dbm_antsignal": signal, "radiotap_datarate": rate,
            "radiotap_channel_freq": freq}
    out = frame.shifted(header, LT_RADIOTAP, **cols)
    if not decoded and frame_control:
        cols.update(wlan_columns(frame.data[:2]))
    return replace(_undecoded(out, cols, kind) if not decoded else out, name=name)


def _undecoded(b: Built, cols: dict, kind) -> Built:
    """The same bytes read as a frame of which nothing past the radio columns (and those of
    ``cols``) is decoded; ``kind``: what the reader counts it as (None: nothing, a malformed
    header)."""
    fields = {"vlan_id": None, "vlan_count": 0, **dict.fromkeys(WLAN_COLUMNS), **cols}
    if kind:
        fields["_wlan_kind"] = kind
    return Built(b.data, fields, b.name, 0, None, len(b.data), b.link_type)


def tshark_radio_rows(path) -> list[dict]:
    """tshark's radiotap.dbm_antsignal, radiotap.datarate and radiotap.channel.freq per packet
    (their first occurrences), in the radio columns' names; and wlan.fc.type, wlan.fc.ds and
    wlan.fc.retry where tshark dissects the frame control's flags (protocol version 0: of
    another version it prints a type of that version's own layout, and no flags)."""
    fields = ("radiotap.dbm_antsignal", "radiotap.datarate", "radiotap.channel.freq",
              "wlan.fc.type", "wlan.fc.ds", "wlan.fc.retry")
    rows = []
    for raw in tshark_raw(path, fields):
        flags = bool(raw["wlan.fc.retry"])
        rows.append({"radiotap_dbm_antsignal": _first(raw, fields[0]),
                     "radiotap_datarate": _first(raw, fields[1], float),
                     "radiotap_channel_freq": _first(raw, fields[2]),
                     "wlan_fc_type": _first(raw, fields[3], _as_int) if flags else None,
                     "wlan_fc_ds": _first(raw, fields[4], _as_int) if flags else None,
                     "wlan_fc_retry": _first(raw, fields[5], _as_bool)})
    return rows
