"""The numpy kernel gives exactly what the C kernel gives, on every input, valid or not.

``pcapstats.ingest.kernel_numpy.NumpyKernel`` is the fallback for installs without a compiler;
it must be indistinguishable from ``CKernel``: same records, interfaces and walk status (code,
offset, packet number, byte order) on every file, the same decode arrays (values and dtypes)
for every packet, and the same address codes and conversation ids from what was decoded.  The
C kernel is the reference here: these tests check agreement, not correctness (test_formats.py
checks the answers against tshark and known constructions).

Inputs:

- a catalogue of packets built with scapy (and by hand where scapy will not make a malformed
  header), on every link type, cut at every length, with several original lengths;
- pcap and pcapng files written by tests/helpers/craft.py, every truncation of them, targeted damage to
  every length field, and random mutations (hypothesis; ``PCAPSTATS_FUZZ_EXAMPLES`` raises the
  number of examples from 200);
- a 200k-packet synthetic capture, also used to print the numpy/C speed ratio (not asserted).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import (ICMPv6EchoRequest, ICMPv6ND_NS, IPv6, IPv6ExtHdrDestOpt,
                                IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting,
                                Jumbo)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP
from scapy.packet import Raw

from pcapstats.errors import UsageError
from pcapstats.ingest import contract as K
from pcapstats.ingest.kernel import get_kernel
from pcapstats.ingest.kernel_numpy import NumpyKernel

from tests.helpers import craft as c

FUZZ_EXAMPLES = int(os.environ.get("PCAPSTATS_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def ck():
    try:
        return get_kernel("c")
    except UsageError as e:
        pytest.skip(f"no compiled kernel to compare with: {e}")


@pytest.fixture(scope="module")
def nk():
    return NumpyKernel()


# -- running both kernels the way the reader does ----------------------------------------------

PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def _blank_records(capacity: int) -> K.Records:
    """Records whose every byte starts as 0xA5: a write outside the rows walked would show.
    Plain arrays of the contract's types: the tests walk thousands of small files, and the
    reader's per-array maps (contract.table_array) cost a few system calls each."""
    return K.Records(*(np.full(capacity * np.dtype(t).itemsize, 0xA5, np.uint8).view(t)
                       for t in (np.int64, np.uint32, np.uint32, np.int64, np.uint32)))


def _outputs(n: int) -> dict[str, np.ndarray]:
    """Zeroed decode outputs for n packets, as contract.new_outputs makes them, plus the n x 16
    address scratch; plain arrays (see _blank_records)."""
    out = {name: np.zeros(n, dtype) for name, dtype in K.DECODE_OUTPUTS}
    for name in ("ip_src", "ip_dst", "q_src", "q_dst"):
        out[name] = np.zeros((n, 16), np.uint8)
    return out


@dataclasses.dataclass
class Walked:
    steps: list               # (n, Status, pcapng state after the call) per window
    rec: K.Records            # the whole table, rows beyond n included
    ifs: K.Interfaces | None
    n: int
    linktype: np.ndarray      # per packet, as the reader derives it


def walk(kern, data: bytes, window: int | None = None, capacity: int | None = None,
         max_caplen: int = 262144) -> Walked:
    """Walk a whole file as ingest/fast.py does: window by window (one window when None),
    carrying on after a record cut by the window's end, doubling a window too small for one."""
    buf = np.frombuffer(data, np.uint8)
    size = len(buf)
    rec = _blank_records(size // 16 + 1 if capacity is None else capacity)
    window = window or max(size, 1)
    ng = data[:4] == PCAPNG_MAGIC
    state, ifs, pos = np.zeros(4, np.int64), K.Interfaces.empty() if ng else None, 24
    if not ng:
        swapped = data[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d")
        nsec = data[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    total, steps = 0, []
    while True:
        end = min(size, (int(state[0]) if ng else pos) + window)
        if ng:
            n, status = kern.walk_pcapng(buf, end, state, rec.at(total), ifs)
        else:
            n, status = kern.walk_pcap(buf, pos, end, swapped, nsec, max_caplen, rec.at(total))
            pos = status.offset if status.code != K.ST_OK else end
        total += n
        steps.append((n, status, state.tolist()))
        if status.code == K.ST_TRUNCATED and end < size and len(steps) < 10_000:
            window = window * 2 if n == 0 else window
            continue
        break
    if ng:
        linktype = ifs.linktype.astype(np.uint16)[rec.iface[:total]]
    else:
        head = struct.unpack((">" if swapped else "<") + "I", data[20:24])[0] if size >= 24 else 1
        linktype = np.full(total, head & 0xFFFF, np.uint16)   # the reader keeps 16 bits
    return Walked(steps, rec, ifs, total, linktype)


def assert_same_arrays(label, a, b):
    assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{label}: C {a.dtype}{a.shape}, numpy " \
                                                     f"{b.dtype}{b.shape}"
    if not np.array_equal(a, b):
        bad = np.flatnonzero((a != b).reshape(len(a), -1).any(axis=1))
        raise AssertionError(f"{label}: {len(bad)} rows differ, first {bad[:5].tolist()}: "
                             f"C {a[bad[:3]].tolist()} numpy {b[bad[:3]].tolist()}")


def assert_same_walk(c: Walked, n: Walked, label=""):
    """Every window's count, status and state, every row of the tables (also the untouched)."""
    assert c.steps == n.steps, f"{label}: C {c.steps[-3:]} numpy {n.steps[-3:]}"
    for part in ("rec", "ifs"):
        if getattr(c, part) is not None:
            for f in dataclasses.fields(getattr(c, part)):
                assert_same_arrays(f"{label} {part}.{f.name}", getattr(getattr(c, part), f.name),
                                   getattr(getattr(n, part), f.name))


def decode(kern, buf, off, cap, orig, lt, windows=1, sack_capacity=None):
    """Decode, then hash, in ``windows`` consecutive calls sharing the SACK table and the hash
    tables, as ingest/fast.py does (a TCP/UDP header quoted in an ICMP error is hashed with
    its quoted addresses); returns every array either step produced."""
    n = len(off)
    out = _outputs(n)
    sack = K.SackTable(n if sack_capacity is None else sack_capacity)
    interner, convs = kern.new_interner(), kern.new_conversations()
    hashed = {name: [] for name in ("src_code", "dst_code", "q_src_code", "q_dst_code", "conv",
                                    "reverse", "first")}
    bounds = np.linspace(0, n, windows + 1).astype(int)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        part = {name: a[lo:hi] for name, a in out.items()}
        kern.decode(buf, off[lo:hi], cap[lo:hi], orig[lo:hi], lt[lo:hi], part, sack)
        src, dst = interner.intern(part["ip_version"], part["ip_src"], part["ip_dst"])
        quoted = part["l4_quoted"] != 0
        q_src, q_dst = interner.intern(np.where(quoted, part["ip_version"], 0), part["q_src"],
                                       part["q_dst"])
        l4 = np.where(quoted, part["l4_quoted"], part["l4"])
        conv = convs.assign(l4, np.where(quoted, q_src, src), np.where(quoted, q_dst, dst),
                            part["srcport"], part["dstport"])
        for name, a in zip(hashed, (src, dst, q_src, q_dst) + tuple(conv)):
            hashed[name].append(a)
    result = dict(out, sack_rows=sack.rows, sack_used=sack.used)
    result.update({name: np.concatenate(a) for name, a in hashed.items()})
    result["addresses"], result["address_v6"] = interner.addresses()
    return result


def assert_same_decode(ck, nk, buf, off, cap, orig, lt, label="", windows=1, sack_capacity=None):
    args = (np.asarray(off, np.int64), np.asarray(cap, np.uint32), np.asarray(orig, np.uint32),
            np.asarray(lt, np.uint16))
    a = decode(ck, buf, *args, windows=windows, sack_capacity=sack_capacity)
    b = decode(nk, buf, *args, windows=windows, sack_capacity=sack_capacity)
    assert list(a) == list(b)
    for name in a:
        try:
            assert_same_arrays(name, a[name], b[name])
        except AssertionError as e:
            bad = (a[name] != b[name]).reshape(len(a[name]), -1).any(axis=1)
            i = int(np.flatnonzero(bad)[0])
            if len(a[name]) != len(args[0]):   # not a per-packet array
                raise
            start = int(args[0][i])
            raise AssertionError(
                f"{label} packet {i} (link type {args[3][i]}, caplen {args[1][i]}, origlen "
                f"{args[2][i]}, bytes {bytes(buf[start:start + min(int(args[1][i]), 96)]).hex()}): "
                f"{e}") from None
    return a


def walk_and_decode(ck, nk, data: bytes, label="", window=None, capacity=None):
    """Walk a file with both kernels and compare; decode and hash what was walked, compare."""
    buf = np.frombuffer(data, np.uint8)
    if data[:4] != PCAPNG_MAGIC:   # the record length limit: a tight one, then the reader's
        assert_same_walk(walk(ck, data, window, capacity, 100),
                         walk(nk, data, window, capacity, 100), label)
    c = walk(ck, data, window, capacity)
    assert_same_walk(c, walk(nk, data, window, capacity), label)
    rec = c.rec.at(0, c.n)
    assert_same_decode(ck, nk, buf, rec.data_off, rec.caplen, rec.origlen, c.linktype, label,
                       windows=len(c.steps))
    return c


# -- the packet catalogue ----------------------------------------------------------------------

A4, B4 = "192.0.2.1", "198.51.100.2"
A6, B6 = "2001:db8::1", "2001:db8::2"
IPV4, IPV6, ARP_ET = 0x0800, 0x86DD, 0x0806


def tcp_bytes(options=b"", *, doff=None, payload=b"", flags=0x18, seq=1, ack=2) -> bytes:
    """A TCP header by hand, so that option lists and data offsets can be malformed."""
    options += bytes(-len(options) % 4)
    doff = (20 + len(options)) // 4 if doff is None else doff
    return struct.pack("!HHIIHHHH", 1234, 80, seq, ack, doff << 12 | flags, 501, 0, 0) + options \
        + payload


def v4(l4, proto=None, **ip) -> bytes:
    layer = IP(src=A4, dst=B4, **ip) if proto is None else IP(src=A4, dst=B4, proto=proto, **ip)
    return bytes(layer / (Raw(l4) if isinstance(l4, bytes) else l4))


def v6(*layers, **ip) -> bytes:
    p = IPv6(**{"src": A6, "dst": B6, **ip})
    for layer in layers:
        p = p / (Raw(layer) if isinstance(layer, bytes) else layer)
    return bytes(p)


def with_ip_len(packet: bytes, total: int) -> bytes:
    """An IPv4 packet whose total-length field says ``total`` (checksum left stale)."""
    return packet[:2] + struct.pack("!H", total) + packet[4:]


SACK = bytes([5, 10]) + struct.pack("!II", 100, 200)
TS = bytes([8, 10]) + struct.pack("!II", 0xDEADBEEF, 7)
TCP_OPTION_LISTS = [
    bytes([2, 4, 5, 180]), bytes([2, 5, 5, 180, 0]), bytes([3, 3, 7]), bytes([3, 4, 7, 0]),
    bytes([4, 2]), bytes([4, 3, 0]), TS, bytes([8, 9]) + bytes(7), SACK,
    bytes([5, 18]) + struct.pack("!4I", 1, 2, 3, 4),
    bytes([5, 26]) + struct.pack("!6I", *range(6)), bytes([5, 34]) + struct.pack("!8I", *range(8)),
    bytes([1, 1]) + bytes([5, 18]) + struct.pack("!4I", 9, 8, 7, 6) + bytes([5, 18]) +
    struct.pack("!4I", 5, 4, 3, 2),                       # SACK blocks across two options
    bytes([5, 11]) + bytes(9), bytes([5, 2]), bytes([5, 9]) + bytes(7), bytes([5, 1]),
    bytes([0]) + bytes([2, 4, 1, 1]), bytes([1] * 40), bytes([30, 6, 1, 2, 3, 4]) + TS,
    bytes([2, 0, 1, 1]), bytes([2, 1, 1, 1]), bytes([8, 10, 0]), bytes([1, 1, 1, 2]),
    bytes([2, 4, 1, 1, 2, 4, 2, 2]), TS + TS + bytes([1, 1]) + SACK + bytes([3, 3, 14, 1]),
    bytes([2, 4, 5, 180, 4, 2, 8, 10]) + bytes(8) + bytes([1, 3, 3, 7]),   # a Linux SYN
    bytes([254, 4, 0xF9, 0x89]), bytes([2, 40]) + bytes(38),
]


def ipv4_packets() -> list[bytes]:
    tcp_plain = tcp_bytes(payload=b"x" * 30)
    out = [v4(tcp_bytes(o, payload=b"d" * 5), proto=6) for o in TCP_OPTION_LISTS]
    out += [
        v4(tcp_bytes(doff=4), proto=6), v4(tcp_bytes(doff=15), proto=6),
        v4(tcp_bytes(bytes([1]) * 40, doff=15), proto=6), v4(tcp_bytes(doff=0), proto=6),
        with_ip_len(v4(tcp_plain, proto=6), 0),                     # TSO: length 0
        with_ip_len(v4(tcp_plain, proto=6), 10),                    # shorter than its header
        with_ip_len(v4(tcp_plain, proto=6), 20),                    # header only
        with_ip_len(v4(tcp_plain, proto=6), 39),                    # cuts the TCP header
        with_ip_len(v4(tcp_plain, proto=6), 45),                    # trims the payload
        with_ip_len(v4(tcp_plain, proto=6), 1500),                  # longer than the frame
        bytes([0x44]) + v4(tcp_plain, proto=6)[1:],                 # IHL 4
        bytes([0x54]) + v4(tcp_plain, proto=6)[1:],                 # version 5
        bytes([0x46]) + v4(tcp_plain, proto=6)[1:],                 # IHL 6 over TCP bytes
        bytes([0x4F]) + v4(tcp_plain, proto=6)[1:],                 # IHL 15, "options" = TCP
        v4(UDP(sport=5, dport=6) / Raw(b"u" * 20), options=b"\x94\x04\x00\x00" * 10),
        v4(UDP(sport=5, dport=6) / Raw(b"u" * 20), flags="MF"),
        v4(UDP(sport=5, dport=6) / Raw(b"u" * 20), flags="DF"),
        v4(UDP(sport=5, dport=6) / Raw(b"u" * 20), frag=100, flags="MF"),
        v4(tcp_plain, proto=6, frag=3),
        v4(tcp_plain, proto=6, flags="DF+MF", frag=0),
        v4(UDP(sport=5, dport=6, len=3) / Raw(b"u" * 20)),
        v4(UDP(sport=5, dport=6, len=8) / Raw(b"u" * 20)),
        v4(UDP(sport=5, dport=6, len=1000) / Raw(b"u" * 20)),
        v4(UDP(sport=53, dport=5353) / Raw(b"q" * 3)),
        v4(UDP(sport=53, dport=5353)),
        v4(b"\x01\x02", proto=17), v4(b"\x08\x00\x01", proto=1), v4(b"\x00" * 5, proto=1),
        v4(b"\x08\x00\x00\x00\x12\x34\x00", proto=1),
        v4(b"\x3a\x00" * 10, proto=58), v4(b"\x80\x00" * 10, proto=58),
        v4(b"\x11" * 8, proto=2), v4(b"\x22" * 30, proto=47), v4(b"\x33" * 30, proto=50),
        v4(b"", proto=6), v4(b"", proto=255),
    ]
    for total in (24, 26, 27, 28, 39):   # the IP length ends in the transport header, the frame
        # goes on
        out += [with_ip_len(v4(l4), total) for l4 in (ICMP(id=1, seq=2) / Raw(b"p" * 30),
                                                      UDP(sport=7, dport=8) / Raw(b"u" * 30))]
    for t in (0, 8, 13, 14, 15, 16, 17, 18, 19, 12, 3, 11, 5):
        out.append(v4(ICMP(type=t, code=1, id=0x1234, seq=0x5678) / Raw(b"p" * 12)))
    return out


def ipv6_packets() -> list[bytes]:
    tcp_plain = tcp_bytes(bytes([2, 4, 5, 160]), payload=b"y" * 25)
    dst = IPv6ExtHdrDestOpt
    out = [
        v6(tcp_plain, nh=6), v6(UDP(sport=1, dport=2) / Raw(b"z" * 9)),
        v6(ICMPv6EchoRequest(id=7, seq=8, data=b"e" * 10)),
        v6(ICMPv6EchoRequest(type=129, id=7, seq=8)), v6(ICMPv6EchoRequest(type=1, id=7, seq=8)),
        v6(ICMPv6ND_NS(tgt=B6)), v6(b"\x80\x00\x00", nh=58), v6(b"\x80\x00\x00\x00\x00\x01", nh=58),
        v6(b"\x08\x00" * 8, nh=1),
        v6(IPv6ExtHdrHopByHop(), dst(), IPv6ExtHdrRouting(addresses=[A6]), tcp_plain, nh=0),
        v6(IPv6ExtHdrHopByHop(nh=6), tcp_plain),
        v6(IPv6ExtHdrFragment(nh=17, offset=0, m=1, id=0xABCDEF01), UDP(sport=1, dport=2)),
        v6(IPv6ExtHdrFragment(nh=17, offset=5, m=1, id=0x01020304), b"f" * 40),
        v6(IPv6ExtHdrFragment(nh=6, offset=0, m=0, id=9), tcp_plain),          # atomic
        v6(IPv6ExtHdrFragment(nh=44, offset=0, m=1, id=1),
           IPv6ExtHdrFragment(nh=6, offset=0, m=0, id=2), tcp_plain),         # two of them
        v6(AH(nh=6, payloadlen=4, icv=b"i" * 12), tcp_plain),
        v6(AH(nh=59, payloadlen=1, icv=b""), b"", nh=51),
        v6(b"\x00" * 40, nh=50), v6(b"\x3b\x00" + b"\x00" * 6 + b"m" * 10, nh=135),
        v6(b"\x06\x00" + b"\x00" * 6 + tcp_plain, nh=139),
        v6(b"\x11\x00" + b"\x00" * 6 + bytes(UDP(sport=3, dport=4)), nh=140),
        v6(b"junk after no next header", nh=59),
        v6(b"".join(bytes([60, 0]) + bytes(6) for _ in range(40)) + tcp_plain, nh=60),  # > 32
        v6(b"".join(bytes([60, 0]) + bytes(6) for _ in range(31)) + bytes([6, 0]) + bytes(6)
           + tcp_plain, nh=60),                                                    # 32 exactly
        v6(b"\x06\xff" + bytes(30), nh=0),                 # a hop-by-hop header past the end
        v6(b"\x06", nh=0), v6(b"\x06\x00\x00", nh=44), v6(b"\x06\x00" + bytes(5), nh=44),
        v6(b"\x06\x03", nh=51),
        v6(IPv6ExtHdrHopByHop(nh=6, options=[Jumbo(jumboplen=100)]), tcp_plain, plen=0),
        v6(tcp_plain, nh=6, plen=0), v6(nh=6, plen=0), v6(tcp_plain, nh=6, plen=10),
        v6(tcp_plain, nh=6, plen=400),
        v6(ICMPv6EchoRequest(id=7, seq=8, data=b"e" * 10), plen=6),
        v6(UDP(sport=1, dport=2) / Raw(b"z" * 9), plen=4),
    ]
    out.append(bytes([0x40]) + out[0][1:])   # version nibble 4 behind the IPv6 ethertype
    return out


def icmp_errors() -> list[tuple[bytes, int]]:
    """ICMP and ICMPv6 errors quoting whole or cut TCP/UDP packets (decoded into the same
    fields, as Wireshark does), and messages that quote nothing decodable."""
    opts = bytes([1, 1]) + TS + bytes([1, 1]) + SACK
    tcp4 = v4(tcp_bytes(opts, payload=b"q" * 10), proto=6)
    udp4 = v4(UDP(sport=53, dport=3333) / Raw(b"r" * 12))
    tcp6 = v6(tcp_bytes(opts, payload=b"q" * 10), nh=6)
    udp6 = v6(IPv6ExtHdrHopByHop(), IPv6ExtHdrFragment(nh=17, m=1, id=5), UDP(sport=1, dport=2))
    quoted4 = [tcp4, udp4, tcp4[:28], tcp4[:40], with_ip_len(tcp4, 0), with_ip_len(tcp4, 10),
               v4(UDP(sport=5, dport=6) / Raw(b"x" * 8), frag=3),
               v4(UDP(sport=5, dport=6), options=b"\x94\x04\x00\x00"), tcp6,
               v4(b"\x08" * 9, proto=1)]
    quoted6 = [tcp6, udp6, tcp6[:48], tcp6[:60], v6(tcp_bytes(), nh=6, plen=0), tcp4,
               v6(IPv6ExtHdrFragment(nh=6, offset=9, id=7), tcp_bytes())]
    out = []
    for t in (3, 4, 5, 11, 12, 0, 13):
        out += [(v4(bytes([t, 1]) + bytes(6) + q, proto=1), IPV4) for q in quoted4]
    for t in (1, 2, 3, 4, 5, 128):
        out += [(v6(bytes([t, 0]) + bytes(6) + q, nh=58), IPV6) for q in quoted6]
    out += [(v6(bytes([1, 0]) + bytes(6) + tcp6, nh=58, plen=30), IPV6),
            (v6(bytes([1, 0]) + bytes(6) + v6(IPv6ExtHdrHopByHop(nh=6), tcp_bytes(), plen=4),
                nh=58), IPV6)]   # the quoted extension header runs past the quoted length
    # the IP length ends the ICMP message early; the frame goes on with what it quoted
    out += [(with_ip_len(v4(bytes([3, 3]) + bytes(6) + udp4, proto=1), total), IPV4)
            for total in (27, 28, 29, 40)]
    return out


def l3_catalogue() -> list[tuple[bytes, int]]:
    """(network-layer bytes, ethertype): craft's zoo and this file's odd packets."""
    built = c.zoo() + c.basic()
    out = [(b.data, b.ethertype) for b in built]
    out += [(p, IPV4) for p in ipv4_packets()] + [(p, IPV6) for p in ipv6_packets()]
    out += icmp_errors()
    # an IPv6 address whose bytes are an IPv4 address's (the version keeps them apart), and a
    # packet from an endpoint to itself
    out += [(v6(UDP(sport=9, dport=9), src="c000:201::", dst="c633:6402::"), IPV6),
            (bytes(IP(src=A4, dst=A4) / TCP(sport=7, dport=7)), IPV4),
            (bytes(IP(src=A4, dst=A4) / UDP(sport=7, dport=7)), IPV4)]
    out += [(bytes(ARP(psrc=A4, pdst=B4)), ARP_ET), (b"\x02\x01" + bytes(40), 0x88CC),
            (b"", IPV4), (b"\x45", IPV4), (b"\x60" + bytes(10), IPV6)]
    return out


MAC = bytes.fromhex("020000000001020000000002")


def framings(l3: bytes, ethertype: int) -> list[tuple[int, bytes]]:
    """The packet on every link type the decoder knows (and one it does not)."""
    et = struct.pack("!H", ethertype)
    vlan = lambda tpid, vid: struct.pack("!HH", tpid, vid)  # noqa: E731
    family = 24 if ethertype == IPV6 else 2 if ethertype == IPV4 else 7
    out = [
        (1, MAC + et + l3),
        (1, MAC + vlan(0x8100, 0xF123)[:2] + struct.pack("!H", 0x6123) + et + l3),
        (1, MAC + vlan(0x88A8, 10)[:2] + struct.pack("!H", 10) + vlan(0x8100, 20)[2:] + et + l3),
        (1, MAC + struct.pack("!HHHHHH", 0x9100, 1, 0x8100, 2, 0x88A8, 3) + et + l3),
        (113, struct.pack("!HHH8s", 0, 1, 6, b"\xaa" * 8) + et + l3),
        (113, struct.pack("!HHH8sHH", 4, 1, 6, b"\xaa" * 8, 0x8100, 77) + et + l3),
        (276, et + struct.pack("!HIHBB8s", 0, 3, 1, 0, 6, b"\xbb" * 8) + l3),
        (276, struct.pack("!H", 0x8100) + struct.pack("!HIHBB8s", 0, 3, 1, 0, 6, b"\xbb" * 8)
         + struct.pack("!HH", 5, ethertype) + l3),
        (101, l3), (12, l3), (14, l3), (228, l3), (229, l3),
        (0, struct.pack("<I", family) + l3), (0, struct.pack(">I", family) + l3),
        (0, struct.pack("<I", 30 if ethertype == IPV6 else 0x20000) + l3),
        (108, struct.pack(">I", family) + l3), (108, struct.pack(">I", 28) + l3),
        (0, struct.pack("<I", 10) + l3), (0, struct.pack("<I", 0) + l3),
        (105, MAC + et + l3), (65535, l3),
        # IEEE 802.11: QoS data, 4 addresses, LLC/SNAP; under radiotap, with an FCS and a
        # header padded to 4 bytes
        (105, WLAN_QOS + SNAP + et + l3),
        (105, WLAN_4ADDR + SNAP + struct.pack("!HH", 0x8100, 9) + et + l3),
        (127, RADIOTAP_LINUX + WLAN_QOS + SNAP + et + l3 + b"\x01\x02\x03\x04"),
        (127, RADIOTAP_PAD + WLAN_QOS + b"\x00\x00" + SNAP + et + l3),
    ]
    return out


WLAN_QOS = c.dot11_header(2, 8, qos=0)
WLAN_4ADDR = c.dot11_header(2, 0, tods=True, fromds=True)
SNAP = b"\xaa\xaa\x03\x00\x00\x00"
RADIOTAP_LINUX = c.radiotap_header(
    [c.rt_tsft(), c.rt_flags(fcs=True), c.rt_rate(12), c.rt_channel(2412), c.rt_signal(-40),
     c.rt_field(14)], [c.rt_signal(-41), c.rt_field(11)], [c.rt_signal(-43), c.rt_field(11)])
RADIOTAP_PAD = c.radiotap_header([c.rt_flags(datapad=True), c.rt_mcs(7, bw40=True), c.rt_signal(-50)])


def _rt(words, data=b"", length=None, version=0) -> bytes:
    body = struct.pack(f"<{len(words)}I", *words) + data
    return struct.pack("<BBH", version, 0, 4 + len(body) if length is None else length) + body


def radiotap_frames() -> list[tuple[int, bytes]]:
    """Radiotap headers of every shape the walk handles or refuses, on a frame with IP, and
    802.11 frames of every kind, each under a radiotap header and without one."""
    dot11 = WLAN_QOS + SNAP + b"\x08\x00" + v4(tcp_bytes(TS, payload=b"w" * 20), proto=6)
    bit = lambda *bits: sum(1 << b for b in bits)  # noqa: E731
    E, NS, VNS = c.RT_EXT, c.RT_NS_RADIOTAP, c.RT_NS_VENDOR
    headers = [c.radiotap_header([c.rt_flags(), c.rt_field(b)], [c.rt_signal(-30)])
               for b in sorted(c.RT_ALIGN_SIZE)]
    headers += [c.radiotap_header([c.rt_mcs(i, bw40=w, short_gi=g, known=k)])
                for i in (0, 31, 32, 76, 77, 255) for w in (0, 1) for g in (0, 1)
                for k in (7, 3, 0xFF)]
    headers += [
        c.radiotap_header([c.rt_flags(), c.rt_signal(-3)], [c.rt_rate(4)], vendor=(b"\0\x11\x22", 1, b"v" * 7)),
        c.radiotap_header([c.rt_flags(fcs=True)], [c.rt_flags(datapad=True)], [c.rt_flags()]),
        c.radiotap_header([c.rt_channel(5180)]), c.radiotap_header([c.rt_rate(2), c.rt_channel(2412)]),
        _rt([bit(2, 5, 25) | NS | E, bit(3)], b"\x04\xec\x00\x00" + struct.pack("<HH", 5180, 0)),
        _rt([bit(2, 28) | NS | E, bit(5)], b"\x04\x00\x00\xc1"),
        _rt([bit(5) | E, bit(3)], b"\xc3\x00" + struct.pack("<HH", 2412, 0)),
        _rt([bit(5) | E, bit(2) | VNS | NS | E, bit(5)], bytes(9)),
        _rt([bit(5) | VNS | E, 0], b"\xc9\x00\x00\x11\x22\x00\xff\x00"),
        _rt([bit(5) | VNS | E, bit(0, 1, 5) | VNS | E, bit(3) | NS | E, bit(5)], bytes(40)),
        _rt([bit(5) | NS | E, bit(26)], b"\xc4\x00"),
        _rt([bit(1, 2, 5)], b"\x02\x04", length=10), _rt([bit(0, 2)], bytes(4)),
        _rt([bit(5)], b"", length=8), _rt([E, E], b"", length=12), _rt([E] * 15),
        _rt([E] * 3000), _rt([0xFFFFFFFF] * 40), _rt([0x7FFFFFFF]) + bytes(200),
        _rt([bit(2, 5)], b"\x04\xc5", length=4000), _rt([bit(2, 5)], b"\x04\xc6", length=6),
        _rt([bit(2, 5)], b"\x04\xc3", version=1), _rt([bit(1)], b"\x10"), _rt([bit(1)], b"\x30"),
        _rt([bit(29, 31), bit(30, 31), bit(29, 31), bit(30, 31), bit(5)], bytes(64)),
        b"", b"\x00", b"\x00\x00\x08",
    ]
    out = [(127, h + dot11) for h in headers]
    kinds = [c.wlan_frame(k).data for k in ("beacon", "action", "ack", "rts", "null", "qos-null",
                                             "protected", "amsdu", "version1", "extension")]
    kinds += [c.dot11_header(2, 8, qos=0, htc=bytes(4)) + SNAP + b"\x86\xdd" + v6(tcp_bytes(), nh=6),
              c.dot11_header(2, 0) + bytes.fromhex("aaaa030000f8") + b"\x08\x00" + v4(b"", proto=17),
              c.dot11_header(2, 0) + bytes.fromhex("aaaa03123456") + b"\x08\x00",
              c.dot11_header(2, 0) + b"\x42\x42\x03" + bytes(20), dot11[:1],
              # the frame control's flags: Retry, From DS, both DS bits, on data and management
              c.dot11_header(2, 8, qos=0, tods=False, fromds=True, retry=True) + SNAP
              + b"\x08\x00" + v4(tcp_bytes(TS), proto=6),
              c.dot11_header(0, 8, tods=False, retry=True) + bytes(12)]
    for k in kinds:
        out += [(105, k), (127, RADIOTAP_LINUX + k), (127, RADIOTAP_PAD + k)]
    return out


@functools.lru_cache(maxsize=None)
def all_frames() -> tuple[tuple[int, bytes], ...]:
    """Every catalogue packet in every framing, plus frames that are only link header."""
    frames = [f for l3, et in l3_catalogue() for f in framings(l3, et)]
    frames += [(1, MAC + b"\x81\x00" * n) for n in range(1, 12)]        # tags all the way
    frames += [(1, MAC + b"\x81\x00" * 700 + b"\x08\x00" + v4(tcp_bytes(TS), proto=6))]
    frames += [(1, MAC + b"\x88\xa8\x00\x05" * 300 + b"\x86\xdd")]
    frames += [(1, b""), (1, bytes(13)), (113, bytes(15)), (276, bytes(19)), (0, b"\x02\x00")]
    frames += radiotap_frames()
    return tuple(frames)


# -- decode: every packet, every link type, cut at every length ----------------------------------

@pytest.mark.slow
def test_decode_every_frame_at_every_length(ck, nk):
    """Each frame at each captured length, with the original length equal, whole, and longer."""
    rng = np.random.default_rng(1)
    chunks, off, cap, orig, lt = [], [], [], [], []
    pos = 0
    for link, frame in all_frames():
        junk = rng.integers(0, 256, 16, dtype=np.uint8).tobytes()   # bytes past the frame
        chunks.append(frame + junk)
        for k in range(len(frame) + 1):
            for o in {k, len(frame), len(frame) + 7, 0}:
                off.append(pos), cap.append(k), orig.append(o), lt.append(link)
        pos += len(frame) + len(junk)
    buf = np.frombuffer(b"".join(chunks), np.uint8)
    out = assert_same_decode(ck, nk, buf, off, cap, orig, lt, "catalogue")
    # the catalogue reaches every outcome of the decoder, so the comparison covers them
    assert set(np.unique(out["status"])) == set(range(9))      # every way a decode can end
    assert set(np.unique(out["l4"])) == {K.L4_NONE, K.L4_ICMP, K.L4_TCP, K.L4_UDP}
    assert set(np.unique(out["l4_quoted"])) == {K.L4_NONE, K.L4_TCP, K.L4_UDP}
    assert np.bitwise_or.reduce(out["tcp_opts"]) == 15 and out["tcp_sack_count"].max() == 4
    assert out["vlan_count"].max() == 255 and set(np.unique(out["ip_flags"])) >= {0, 1, 4, 6, 7}
    assert set(np.unique(out["wlan_kind"])) == set(range(9))       # every kind of 802.11 frame
    assert (out["vlan_ad"] == 0xFF).any() and out["l3_offset"].max() > 1000   # 300 S-tags
    assert set(np.unique(out["rt_present"])) == set(range(16))     # radio fields in every mix
    fc = out["wlan_fc"][(out["rt_present"] & K.RT_WLAN) != 0]
    assert set(np.unique(fc & 3)) == {0, 1, 2, 3} and (fc & 0x08).any()   # DS bits, Retry
    assert (out["rt_rate"] >= K.RT_MCS_RATE).any() and (out["rt_rate"] < K.RT_MCS_RATE).any()


def test_decode_in_windows_with_a_small_sack_table(ck, nk):
    """SACK table rows go to packets in order across windows; a full table leaves the rest out."""
    frames = [f for f in all_frames() if f[0] == 1]
    buf = np.frombuffer(b"".join(f for _, f in frames), np.uint8)
    off = np.cumsum([0] + [len(f) for _, f in frames[:-1]])
    lengths = [len(f) for _, f in frames]
    wanted = None
    for windows in (1, 3, 7):
        for room in (len(frames), 0, 1, 5, 20):
            out = assert_same_decode(ck, nk, buf, off, lengths, lengths, [1] * len(frames),
                                     f"{windows} windows, {room} rows", windows, room)
            wanted = wanted or int(out["sack_used"][0])   # rows taken with room for all
            assert out["sack_used"][0] == min(len(out["sack_rows"]), wanted)
    assert wanted > 20    # more SACK-bearing headers than the small tables hold


@pytest.mark.slow
def test_decode_frames_ending_the_buffer(ck, nk):
    """A packet whose last captured byte is the buffer's last byte: no read may pass it."""
    frames = [f for f in all_frames() if len(f[1]) < 200][::97]  # a call per length: a sample
    assert len({link for link, _ in frames}) > 10
    for link, frame in frames:
        for k in range(len(frame) + 1):
            buf = np.frombuffer(frame[:k], np.uint8)
            assert_same_decode(ck, nk, buf, [0], [k], [len(frame)], [link], f"end-{k}")


def guard_page_decodes(batch: int = 4096) -> int:
    """Decode every catalogue frame cut at every length with the C kernel, each frame's last
    captured byte the last byte before a page the process may not read (PROT_NONE), so that
    any read past the packet is a segfault.  Each cut frame has a readable page of its own
    before a guard page, and ``batch`` of them are decoded in one call (a call each took
    minutes, and only every 7th non-802.11 frame was tried).  Returns the number of cut frames
    decoded.  Run in a child process by the test below."""
    import ctypes
    import mmap
    page = mmap.PAGESIZE
    mem = mmap.mmap(-1, 2 * page * batch)
    whole = np.frombuffer(mem, np.uint8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for i in range(batch):                        # pages 1, 3, 5, ...: no access
        if libc.mprotect(whole.ctypes.data + (2 * i + 1) * page, page, 0) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")
    kern = get_kernel("c")
    cuts = [(link, frame[:page], k) for link, frame in all_frames()
            for k in range(len(frame[:page]) + 1)]
    for lo in range(0, len(cuts), batch):
        part = cuts[lo:lo + batch]
        ends = (2 * np.arange(len(part)) + 1) * page      # each packet ends at a guard page
        for end, (_, frame, k) in zip(ends.tolist(), part):
            whole[end - k:end] = np.frombuffer(frame[:k], np.uint8)
        kern.decode(whole, ends - [k for _, _, k in part],
                    np.array([k for _, _, k in part], np.uint32),
                    np.array([len(frame) + 4 for _, frame, _ in part], np.uint32),
                    np.array([link for link, _, _ in part], np.uint16), _outputs(len(part)),
                    K.SackTable(len(part)))
    return len(cuts)


@pytest.mark.slow
def test_c_decode_reads_nothing_past_the_packet(ck):
    """guard_page_decodes in a child process: a read past a packet kills it (SIGSEGV)."""
    import subprocess
    import sys
    from tests.helpers.paths import ROOT
    code = ("from tests.ingest.test_kernel_equivalence import guard_page_decodes; "
            "print(guard_page_decodes())")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-3000:]}"
    assert int(proc.stdout.split()[-1]) > 500_000


def test_decode_huge_extension_chain(ck, nk):
    """32 extension headers of 2 KB (a jumbogram: hop-by-hop first, payload length 0), then TCP:
    the IPv6 header length and the payload offset pass 0xFFFF (both stored clamped); a 33rd
    header is not walked."""
    chain = b"".join(bytes([nh, 255]) + bytes(2046) for nh in [60] * 31 + [6])
    frame = v6(chain + tcp_bytes(TS), nh=0, plen=0)
    buf = np.frombuffer(frame, np.uint8)
    caps = [len(frame), len(frame) - 1, 40 + 2048 * 31 + 1, 40 + 2048 * 31 + 2, 40 + 2048 * 20]
    out = assert_same_decode(ck, nk, buf, [0] * 5, caps, [len(frame)] * 5, [229] * 5, "chain")
    assert out["ip_hdr_len"][0] == 0xFFFF and out["payload_rel"][0] == 0xFFFF
    assert out["l4"][0] == K.L4_TCP
    frame = v6(chain[:-2048] + bytes([60, 255]) + bytes(2046) + chain[-2048:], nh=0, plen=0)
    out = assert_same_decode(ck, nk, np.frombuffer(frame, np.uint8), [0], [len(frame)],
                             [len(frame)], [229], "33 headers")
    assert out["ip_proto"][0] == 60 and out["l4"][0] == K.L4_NONE


def test_decode_empty_and_odd_inputs(ck, nk):
    buf = np.frombuffer(MAC + b"\x08\x00" + v4(tcp_bytes(TS), proto=6), np.uint8)
    assert_same_decode(ck, nk, buf, [], [], [], [], "no packets")
    # link types arrive as uint16 in both kernels: 65537 is Ethernet, 65812 SLL2 (no IP here)
    lt = np.array([1, 65537, 65536 + 276], np.int32)
    a, b = (decode(k, buf, np.zeros(3, np.int64), np.full(3, len(buf), np.uint32),
                   np.full(3, len(buf), np.uint32), lt) for k in (ck, nk))
    for name in a:
        assert_same_arrays(name, a[name], b[name])
    assert a["l4"].tolist() == [K.L4_TCP, K.L4_TCP, K.L4_NONE]


# -- walks ------------------------------------------------------------------------------------

def _records(link, frames, unit=1000, cut=None):
    return [c.Record(c.opaque(link, f), t, cut) for f, t in zip(frames, c.times(len(frames), unit))]


def _ether_frames():
    return [f for link, f in all_frames() if link == 1][:60]


def pcap_files() -> dict[str, bytes]:
    frames = _ether_frames()
    out = {}
    for endian in "<>":
        for nano in (False, True):
            recs = _records(1, frames, 1 if nano else 1000)
            out[f"pcap{endian}{'ns' if nano else 'us'}"] = c.pcap(recs, 1, endian=endian,
                                                                  nano=nano).data
    out["pcap-snaplen64"] = c.pcap(_records(1, frames), 1, snaplen=64).data
    raw = [f for link, f in all_frames() if link == 101][:30]
    out["pcap-raw-be"] = c.pcap(_records(101, raw), 101, endian=">").data
    return out


def pcapng_files() -> dict[str, bytes]:
    frames = _ether_frames()
    raw = [f for link, f in all_frames() if link == 101][:20]
    sll2 = [f for link, f in all_frames() if link == 276][:20]
    null = [f for link, f in all_frames() if link == 0][:10]
    out = {}
    for endian in "<>":
        g = c.Pcapng(f"ng{endian}")
        g.section(endian, comment="first")
        eth = g.interface(1, snaplen=80, if_name="eth0")
        ip = g.interface(101, tsresol=9, tsoffset=-3)
        g.nrb()
        for i, (f, r, t) in enumerate(zip(frames, raw, c.times(40, 1000))):
            g.epb(eth, c.opaque(1, f), t, flags=1)
            g.opb(ip, c.opaque(101, r), t + 1000) if i % 3 else g.epb(ip, c.opaque(101, r), t)
            if i % 5 == 0:
                g.isb(eth), g.custom(), g.unknown()
        g.spb(c.opaque(1, frames[-1]))
        g.section(">" if endian == "<" else "<", real_length=True)
        s2 = g.interface(276, tsresol=0x83, tsoffset=1 << 20)     # 1/8 s units
        nl = g.interface(0, snaplen=30)
        for f, t in zip(sll2, c.times(20, 125_000_000)):
            g.epb(s2, c.opaque(276, f), t)
        for f, t in zip(null, c.times(10, 1000)):
            g.epb(nl, c.opaque(0, f), t)
        g.spb(c.opaque(276, max(sll2, key=len)))   # section's first interface: no snaplen
        g.section(endian)
        g.interface(1)
        g.spb(c.opaque(1, max(frames, key=len)))
        out[f"pcapng{endian}"] = g.written().data
    return out


def test_walks_of_valid_files(ck, nk):
    for name, data in {**pcap_files(), **pcapng_files()}.items():
        for window in (None, 1000, 64):      # one window; several; windows smaller than records
            res = walk_and_decode(ck, nk, data, name, window)
            assert res.steps[-1][1].code == K.ST_OK and res.n > 10, name
            assert window is None or len(res.steps) > 3
    ng = pcapng_files()   # Status.swapped: the byte order of the section the walk ended in
    assert walk_and_decode(ck, nk, ng["pcapng>"], "be").steps[-1][1].swapped is True
    assert walk_and_decode(ck, nk, ng["pcapng<"], "le").steps[-1][1].swapped is False


def test_walks_out_of_room(ck, nk):
    """Tables smaller than the file needs: ST_CAPACITY, at the same record in both."""
    for name, data in {**pcap_files(), **pcapng_files()}.items():
        for capacity in (0, 1, 7):
            res = walk_and_decode(ck, nk, data, name, capacity=capacity)
            assert res.steps[-1][1].code == K.ST_CAPACITY and res.n == capacity


@pytest.mark.slow
def test_walks_of_every_truncation(ck, nk):
    files = {**pcap_files(), **pcapng_files()}
    for name in ("pcap<us", "pcap>ns", "pcapng<", "pcapng>"):
        data = files[name][:2000]
        codes = set()
        for k in range(len(data) + 1):
            codes.add(walk_and_decode(ck, nk, data[:k], f"{name}[:{k}]").steps[-1][1].code)
        assert K.ST_TRUNCATED in codes and K.ST_OK in codes, (name, codes)


def _damaged(written: c.Written):
    """The file with each length field, in turn, set to values that break the walk."""
    for at, size, endian in written.length_fields:
        value = struct.unpack(endian + "I", written.data[at:at + 4])[0]
        for bad in {0, 1, 11, 12, 13, 16, 20, 28, 31, 32, value - 4, value + 4, value + 1,
                    K.ABSURD_RECORD, K.ABSURD_RECORD + 4, 0xFFFFFFFC, 0xFFFFFFFF}:
            data = bytearray(written.data)
            data[at:at + 4] = struct.pack(endian + "I", bad & 0xFFFFFFFF)
            yield bytes(data)


@pytest.mark.slow
def test_walks_of_damaged_length_fields(ck, nk):
    frames = _ether_frames()[:8]
    written = [c.pcap(_records(1, frames), 1), c.pcap(_records(1, frames), 1, endian=">")]
    for endian in "<>":
        g = c.Pcapng()
        g.section(endian)
        i = g.interface(1, tsresol=6)
        for k, f in enumerate(frames):
            (g.epb if k % 2 else g.opb)(i, c.opaque(1, f), c.times(8)[k] // 1000 * 1000)
        g.spb(c.opaque(1, frames[0]))
        written.append(g.written())
    codes = set()
    for w in written:
        for data in _damaged(w):
            for window in (None, 300):
                codes.add(walk_and_decode(ck, nk, data, w.name, window).steps[-1][1].code)
    assert {K.ST_ABSURD_LENGTH, K.ST_TRAILER_MISMATCH, K.ST_BAD_BLOCK, K.ST_TRUNCATED} <= codes


# pcapng blocks by hand, for the rules craft's writer never breaks (e = byte order)

def block(btype, body, e="<", trailer=None):
    body += bytes(-len(body) % 4)
    n = 12 + len(body)
    trailer = n if trailer is None else trailer
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", trailer)


def shb(e="<", magic=0x1A2B3C4D):
    return block(0x0A0D0D0A, struct.pack(e + "IHHq", magic, 1, 0, -1), e)


def idb(lt=1, snap=0, e="<", opts=b""):
    return block(1, struct.pack(e + "HHI", lt, 0, snap) + opts, e)


def epb(ifid=0, data=b"\x00" * 60, e="<", caplen=None):
    caplen = len(data) if caplen is None else caplen
    return block(6, struct.pack(e + "IIIII", ifid, 1, 2, caplen, len(data)) + data, e)


def opb(ifid, drops, data, e="<"):
    return block(2, struct.pack(e + "HHIIII", ifid, drops, 1, 2, len(data), len(data)) + data, e)


def spb(origlen, data, e="<"):
    return block(3, struct.pack(e + "I", origlen) + data, e)


def opt(e, code, value):
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def test_pcapng_block_edge_cases(ck, nk):
    pkt = MAC + b"\x08\x00" + v4(tcp_bytes(TS, payload=b"p" * 40), proto=6)
    cases = {
        "bad magic": shb() + shb(magic=0x12345678),
        "short shb": shb() + struct.pack("<II", 0x0A0D0D0A, 28) + b"\x4d\x3c",
        "shb too short for its type": shb() + block(0x0A0D0D0A, struct.pack("<I", 0x1A2B3C4D)),
        "idb too short": shb() + block(1, b"\x01\x00"),
        "epb too short": shb() + idb() + block(6, bytes(16)),
        "spb too short": shb() + idb() + block(3, b""),
        "epb caplen past block": shb() + idb() + epb(data=pkt, caplen=len(pkt) + 8),
        "unknown interface": shb() + idb() + epb(ifid=1, data=pkt),
        "no interface at all": shb() + epb(data=pkt),
        "spb without interface": shb() + spb(len(pkt), pkt),
        "spb snaplen": shb() + idb(snap=30) + spb(len(pkt), pkt),
        "spb longer than block": shb() + idb() + spb(5000, pkt),
        "opb drops (BE)": shb(">") + idb(e=">") + opb(0, 7, pkt, ">"),
        "opb id 1 (BE)": shb(">") + idb(e=">") + opb(1, 0, pkt, ">"),
        "no shb first": idb() + epb(data=pkt),
        "idb options": shb() + idb(opts=opt("<", 9, b"\x89") + opt("<", 14, struct.pack("<q", -5))
                                   + opt("<", 14, struct.pack("<q", 1 << 62))
                                   + opt("<", 2, b"eth0")) + epb(data=pkt),
        "idb options BE": shb(">") + idb(e=">", opts=opt(">", 14, struct.pack(">q", -(1 << 40)))
                                         + opt(">", 9, b"\x03\x00")) + epb(data=pkt, e=">"),
        "idb short options": shb() + idb(opts=opt("<", 9, b"") + opt("<", 14, b"1234567"))
        + epb(data=pkt),
        "idb option past end": shb() + idb(opts=struct.pack("<HH", 9, 200) + b"\x05\x00\x00\x00"),
        "idb endofopt first": shb() + idb(opts=struct.pack("<HH", 0, 0) + opt("<", 9, b"\x05")),
        "idb huge linktype": shb() + idb(lt=0xFFFF) + epb(data=pkt),
        "trailer mismatch": shb() + idb() + block(6, bytes(40), trailer=44),
        "trailing garbage < 12": shb() + idb() + epb(data=pkt) + b"\x01\x02\x03",
        "interface of an earlier section": shb() + idb() + idb() + shb() + idb() + epb(1, pkt),
        "many sections": b"".join(shb(e) + idb(k, e=e) + idb(1, e=e) + epb(1, pkt, e)
                                  for k, e in zip(range(6), "<><><>")),
    }
    for name, data in cases.items():
        walk_and_decode(ck, nk, data, name)


def test_too_many_interfaces(ck, nk):
    data = shb() + idb() * (K.MAX_INTERFACES + 1)
    res = walk_and_decode(ck, nk, data, "65537 interfaces")
    assert res.steps[-1][1].code == K.ST_TOO_MANY_INTERFACES


def test_walk_pcap_arguments(ck, nk):
    """Any start, window end and length limit: the same records and status."""
    data = pcap_files()["pcap<us"]
    buf = np.frombuffer(data, np.uint8)
    for pos in (24, 25, 40, len(data) - 1, len(data), len(data) + 10):
        for end in (0, 24, 100, 1000, len(data)):
            for max_caplen in (0, 59, 60, 262144, 0xFFFFFFFF):
                c, n = _blank_records(80), _blank_records(80)
                assert (ck.walk_pcap(buf, pos, end, False, False, max_caplen, c)
                        == nk.walk_pcap(buf, pos, end, False, False, max_caplen, n))
                for f in dataclasses.fields(c):
                    assert_same_arrays(f"pos {pos} end {end} {f.name}", getattr(c, f.name),
                                       getattr(n, f.name))


# -- random damage (hypothesis) ------------------------------------------------------------------

INTERESTING_U32 = [0, 1, 4, 11, 12, 16, 20, 28, 32, 0x0A0D0D0A, 0x1A2B3C4D, 0x4D3C2B1A, 6, 2, 3,
                   0xFFFFFFFF, 0x7FFFFFFF, K.ABSURD_RECORD, 262145]
_BASES: list[bytes] = []


def _bases() -> list[bytes]:
    if not _BASES:
        files = {**pcap_files(), **pcapng_files()}
        _BASES.extend(files[k][:6000] for k in ("pcap<us", "pcap>ns", "pcapng<", "pcapng>"))
    return _BASES


@st.composite
def mutated_file(draw):
    data = bytearray(_bases()[draw(st.integers(0, 3))])
    for _ in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["byte", "u32", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if what == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif what == "u32":
            at &= ~3
            value = draw(st.sampled_from(INTERESTING_U32) | st.integers(0, 0xFFFFFFFF))
            data[at:at + 4] = struct.pack(draw(st.sampled_from("<>")) + "I", value)
        elif what == "cut":
            del data[at:]
        elif what == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        else:
            del data[at:at + draw(st.integers(1, 64))]
    return bytes(data)


@pytest.mark.slow
@FUZZ
@given(mutated_file())
def test_fuzz_damaged_files(ck, nk, data):
    walk_and_decode(ck, nk, data, "mutated")


@st.composite
def mutated_frames(draw):
    """A batch of catalogue frames with a few bytes changed (mostly in the headers)."""
    frames = all_frames()
    batch = []
    for _ in range(16):
        link, frame = frames[draw(st.integers(0, len(frames) - 1))]
        frame = bytearray(frame)
        for _ in range(draw(st.integers(0, 4))):
            if frame:
                frame[draw(st.integers(0, min(len(frame), 100) - 1))] = draw(st.integers(0, 255))
        link = draw(st.sampled_from([link] * 4 + [0, 1, 101, 105, 108, 113, 127, 228, 229, 276,
                                                  7]))
        cap = draw(st.integers(0, len(frame)))
        orig = draw(st.sampled_from([cap, len(frame), 0]) | st.integers(0, 0xFFFFFFFF))
        batch.append((link, bytes(frame), cap, orig))
    return batch




@pytest.mark.slow
@FUZZ
@given(mutated_frames())
def test_fuzz_damaged_packets(ck, nk, batch):
    data, off, pos = [], [], 0
    for _, frame, _, _ in batch:
        data.append(frame)
        off.append(pos)
        pos += len(frame)
    buf = np.frombuffer(b"".join(data) or b"\x00", np.uint8)
    assert_same_decode(ck, nk, buf, off, [b[2] for b in batch], [b[3] for b in batch],
                       [b[0] for b in batch], "mutated packets", windows=2, sack_capacity=3)


# -- a big synthetic capture: agreement, and the speed ratio (printed, not asserted) -------------

def synthetic(n=200_000, snaplen=128):
    """n frames like a bulk TCP transfer's (timestamps + SACK) mixed with VLAN, IPv6, UDP, ICMP."""
    tcp4 = [v4(tcp_bytes(bytes([1, 1]) + TS, payload=b"d" * 1448, seq=s), proto=6, flags="DF")
            for s in range(4)]
    kinds = [MAC + b"\x08\x00" + p for p in tcp4] + [
        MAC + b"\x08\x00" + v4(tcp_bytes(bytes([1, 1]) + TS + bytes([1, 1]) + SACK), proto=6),
        MAC + b"\x81\x00\x00\x07\x08\x00" + tcp4[0],
        MAC + b"\x86\xdd" + v6(tcp_bytes(bytes([1, 1]) + TS, payload=b"y" * 1200), nh=6),
        MAC + b"\x08\x00" + v4(UDP(sport=5201, dport=40000) / Raw(b"u" * 1000)),
        MAC + b"\x08\x00" + v4(ICMP(id=3, seq=4) / Raw(b"p" * 56)),
        MAC + b"\x08\x06" + bytes(ARP()),
    ]
    pick = np.random.default_rng(7).choice(len(kinds), n, p=[.2, .2, .2, .2, .05, .05, .04, .03,
                                                             .02, .01])
    records = []
    for i, k in enumerate(pick.tolist()):
        frame = kinds[k]
        cap = min(len(frame), snaplen)
        records.append(struct.pack("<IIII", 1_700_000_000 + i // 1000, i % 1000 * 997, cap,
                                   len(frame)) + frame[:cap])
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1) + b"".join(records)


def _best_of(f, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def _timings(kern, buf, walked: Walked) -> dict[str, float]:
    """Seconds for each kernel step alone on the whole capture (outputs allocated outside)."""
    n, rec = walked.n, walked.rec.at(0, walked.n)
    table = K.Records.empty(n + 1)
    out = K.new_outputs(n)
    for name in ("ip_src", "ip_dst", "q_src", "q_dst"):
        out[name] = np.zeros((n, 16), np.uint8)
    times = {"walk_pcap": _best_of(lambda: kern.walk_pcap(buf, 24, len(buf), False, False,
                                                          262144, table)),
             "decode": _best_of(lambda: kern.decode(buf, rec.data_off, rec.caplen, rec.origlen,
                                                    walked.linktype, out, K.SackTable(n)))}

    def hash_all():
        src, dst = kern.new_interner().intern(out["ip_version"], out["ip_src"], out["ip_dst"])
        kern.new_conversations().assign(out["l4"], src, dst, out["srcport"], out["dstport"])
    times["hash"] = _best_of(hash_all)
    return times


@pytest.mark.slow
def test_big_synthetic_capture_and_speed(ck, nk, capsys):
    """Agreement on a 200k-packet capture read in 1 MB windows; the speed ratio is printed."""
    data = synthetic()
    walked = walk_and_decode(ck, nk, data, "synthetic", window=1 << 20)
    assert walked.steps[-1][1].code == K.ST_OK and walked.n == 200_000
    buf = np.frombuffer(data, np.uint8)
    tc, tn = _timings(ck, buf, walked), _timings(nk, buf, walked)
    with capsys.disabled():
        print(f"\n[kernel speed, {walked.n} packets, best of 3] " + "; ".join(
            f"{step}: C {tc[step] * 1e3:.1f} ms, numpy {tn[step] * 1e3:.1f} ms "
            f"({tn[step] / tc[step]:.1f}x)" for step in tc))
