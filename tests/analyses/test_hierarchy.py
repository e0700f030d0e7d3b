"""The protocol hierarchy (``pcapstats hierarchy``) against ``tshark -q -z io,phs``.

tshark's output is parsed here, on its own: each line a protocol, indented two spaces a level,
with its frames and bytes.  Down to the transport layer every row of ours must be tshark's --
the same path, packets and bytes, siblings in the same order -- and every row tshark has under
one of our link or network rows that pcapstats read (``decoded``) must be ours; under a
transport pcapstats shows ``payload`` instead of tshark's application protocols, and those
rows are checked against tshark's own per-packet fields (``tcp.len``, ``udp.length``).

On: every shipped capture, every public one in tests/data (tshark reads them all), packets
built by hand on every link type (tests/helpers/craft.py), IP fragments reassembled (or not)
in every way tshark does, and packets cut at every length; and a hand-built capture whose
every number is known without tshark.  The differences the module's docstring admits are held
to what it says.
"""

from __future__ import annotations

import struct
import subprocess
import warnings
from unittest import mock

import numpy as np
import pytest
from scapy.layers.inet6 import IPv6

import pcapstats as ps
from pcapstats.analyses import protocol_names as names
from pcapstats.analyses.hierarchy import hierarchy
from tests.helpers import craft as c
from tests.helpers.paths import CAPTURES, DATA

SHIPPED = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
PUBLIC = sorted(p for p in DATA.iterdir() if p.suffix in (".pcap", ".pcapng"))
FUZZ = sorted((DATA / "fuzz").iterdir())
TRANSPORT_PARENTS = ("ip", "ipv6")

pytestmark = pytest.mark.skipif(subprocess.run(["which", "tshark"], capture_output=True)
                                .returncode != 0, reason="tshark is not installed")


# -- tshark's side ------------------------------------------------------------------------------

def phs(path) -> list[tuple[str, int, int]]:
    """``tshark -q -z io,phs``: (path, frames, bytes) a line, in its order; a ``frame`` root
    (tshark prints one when something references the frame protocol) is left out."""
    out = subprocess.run(["tshark", "-n", "-q", "-z", "io,phs", "-r", str(path)],
                         capture_output=True, text=True, check=True).stdout
    rows, stack = [], []
    for line in out.splitlines():
        head, found, rest = line.partition(" frames:")
        if not found:
            continue
        name = head.rstrip()
        depth = (len(name) - len(name.lstrip(" "))) // 2
        frames, _, size = rest.partition(" bytes:")
        stack = stack[:depth] + [name.strip()]
        rows.append(("/".join(stack), int(frames), int(size)))
    if rows and rows[0][0] == "frame":
        rows = [(p.split("/", 1)[1], f, b) for p, f, b in rows[1:]]
    return rows


# the link layers pcapstats reads before an IP header (its link type's, then the others, and
# the ethertype dissector tshark lists between them): an IP header after others is not read
LINKS = {"eth", "sll", "raw", "null", "radiotap", "wlan"}
THEN = {"wlan_radio", "wlan", "llc", "vlan", "ieee8021ad", "ethertype"}


def payload_reference(path) -> dict[str, tuple[int, int]]:
    """(packets, bytes) of the packets whose own transport (the protocol right after an IP
    header pcapstats reads, IPv6 extension headers and AH skipped) is TCP with tcp.len > 0 or
    UDP with udp.length > 8 and whose header the capture holds whole (its last field, TCP's
    urgent pointer or UDP's checksum, is there), by tshark's fields (its defaults: IP
    reassembled; tcp.len only where the header length is not bogus)."""
    fields = ("frame.len", "frame.protocols", "tcp.len", "tcp.urgent_pointer", "udp.length",
              "udp.checksum")
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=/t",
                          "-E", "occurrence=f", *(x for f in fields for x in ("-e", f))],
                         capture_output=True, text=True, check=True).stdout
    found = {"tcp": [0, 0], "udp": [0, 0]}
    for line in out.splitlines():
        size, protocols, tcp_len, urgent, udp_len, checksum = (line.split("\t") + [""] * 6)[:6]
        layers = protocols.split(":")
        ip = next((i for i, p in enumerate(layers) if p in TRANSPORT_PARENTS), None)
        if ip is None or ip and (layers[0] not in LINKS or not set(layers[1:ip]) <= THEN):
            continue
        after = [p for p in layers[ip + 1:]        # IPv6's extension headers (AH among
                 if not (layers[ip] == "ipv6" and (p.startswith("ipv6.") or p == "ah"))]
        own = after[0] if after else None
        carries = (own == "tcp" and urgent and tcp_len and int(tcp_len) > 0
                   or own == "udp" and checksum and udp_len and int(udp_len) > 8)
        if carries:
            found[own][0] += 1
            found[own][1] += int(size)
    return {k: tuple(v) for k, v in found.items()}


# -- the comparison -------------------------------------------------------------------------

def differences(result, tshark_rows) -> list[str]:
    """Where ``result`` differs from tshark's rows by the module docstring's rule."""
    t = result.table()
    ours = {p: (int(n), int(b), bool(d), k) for k, (p, n, b, d) in enumerate(
        zip(t["path"], t["packets"], t["bytes"], t["decoded"])) if p != "frame"}
    theirs = {p: (n, b) for p, n, b in tshark_rows}
    out = []
    for p, (n, b, _, _) in ours.items():
        if p.rsplit("/", 1)[-1] == "payload":
            continue
        if p not in theirs:
            out.append(f"only pcapstats has {p} ({n} packets, {b} bytes)")
        elif theirs[p] != (n, b):
            out.append(f"{p}: pcapstats {n} packets {b} bytes, tshark {theirs[p]}")
    for p, (n, b) in theirs.items():
        up = p.rsplit("/", 1)[0] if "/" in p else None
        if p in ours:
            continue
        grand = up.rsplit("/", 1)[-2] if up and "/" in up else None
        under_transport = grand is not None and grand.rsplit("/", 1)[-1] in TRANSPORT_PARENTS
        if up is None or (up in ours and ours[up][2] and not under_transport):
            out.append(f"only tshark has {p} ({n} packets, {b} bytes)")
    shared = [p for p, _, _ in tshark_rows if p in ours]
    if shared != sorted(shared, key=lambda p: ours[p][3]):
        out.append(f"siblings in another order: tshark {shared}")
    return out


def assert_as_tshark(path, result=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = result if result is not None else hierarchy(path)
    problems = differences(result, phs(path))
    assert not problems, f"{path}:\n" + "\n".join(problems)
    t = result.table()
    for transport, (packets, size) in payload_reference(path).items():
        rows = [i for i, p in enumerate(t["path"])
                if p.endswith(f"/{transport}/payload") or p == f"{transport}/payload"]
        assert (int(t["packets"][rows].sum()), int(t["bytes"][rows].sum())) == (packets, size), \
            f"{path}: {transport} payload"
    return result


def written(tmp_path, frames, link_type, name, cap_lens=None):
    """A pcap of ``frames`` (craft Builts or raw bytes) of one link type, each cut to its
    ``cap_lens`` entry when given (at any length, inside headers too)."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, link_type))
    for i, f in enumerate(frames):
        data = f.data if hasattr(f, "data") else f
        cap = len(data) if cap_lens is None else min(len(data), cap_lens[i])
        out += struct.pack("<IIII", 1_700_000_000 + i, 0, cap, len(data)) + data[:cap]
    path = tmp_path / f"{name}.pcap"
    path.write_bytes(bytes(out))
    return path


# -- the names ------------------------------------------------------------------------------

def test_protocol_names_are_tshark_s():
    """The ethertype, IP protocol and SLL protocol tables are the installed tshark's."""
    out = subprocess.run(["tshark", "-G", "decodes"], capture_output=True, text=True).stdout
    tables = {"ethertype": {}, "ip.proto": {}, "sll.ltype": {}}
    for line in out.splitlines():
        table, value, protocol = (line.split("\t") + ["", "", ""])[:3]
        if table in tables:
            tables[table][int(value)] = protocol
    assert names.ETHERTYPES == tables["ethertype"]
    assert names.IP_PROTOCOLS == tables["ip.proto"]
    assert names.SLL_PROTOCOLS == tables["sll.ltype"]


# -- real captures --------------------------------------------------------------------------

@pytest.mark.parametrize("path", SHIPPED + PUBLIC + FUZZ, ids=lambda p: p.name)
def test_equals_tshark_on_every_shipped_and_public_capture(path):
    result = assert_as_tshark(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = hierarchy(ps.read(path))        # a Capture summed whole: the same table
    for name, values in result.table().items():
        np.testing.assert_array_equal(whole.table()[name], values, err_msg=name)


@pytest.mark.parametrize("path", [CAPTURES / "ping-sweep-sender.pcap",
                                  CAPTURES / "udp_ping.pcapng", DATA / "wpa-Induction.pcap",
                                  CAPTURES / "sp-2pairs-reno+cubic.pcap"], ids=lambda p: p.name)
def test_a_path_read_in_small_windows_gives_the_same_table(path):
    """Sums, siblings' order, reassembly and the capture span carried across windows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = hierarchy(ps.read(path)).table()
        with mock.patch("pcapstats.ingest.keepers.WINDOW_BYTES", 1 << 12):
            small = hierarchy(path).table()
    for name, values in whole.items():
        np.testing.assert_array_equal(small[name], values, err_msg=name)


@pytest.mark.netns
@pytest.mark.parametrize("name", ("recv_nano.pcap", "recv_nano.pcapng", "router_s96_bpf.pcap"))
def test_equals_tshark_on_the_lab_s_real_captures(real_captures, name):
    """Real traffic made for the tests (conftest.py): fragmented pings and UDP echoes whole at
    the receiver (reassembled) and cut at the router (snaplen 96: not), ICMP errors quoting
    UDP, IPv6."""
    result = assert_as_tshark(real_captures[name])
    paths = set(result.table()["path"])
    assert {"eth/ip/data", "eth/ip/icmp", "eth/ip/udp", "eth/ipv6"} <= paths, paths


# -- packets built by hand ------------------------------------------------------------------

def _eth(ethertype: int, payload: bytes) -> bytes:
    return c.MAC_A + c.MAC_B + struct.pack("!H", ethertype) + payload


def _set(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


def _ipv6(nh: int, plen: int, body: bytes) -> bytes:
    return bytes(IPv6(src=c.A6, dst=c.B6, nh=nh, plen=plen)) + body


WOL = b"\xff" * 6 + c.MAC_B * 16


def ethernet_zoo() -> list:
    """Every packet of craft's catalogues on Ethernet, VLAN tags of every kind, ethertypes and
    IP protocols pcapstats names but does not read, and headers that are not what they say."""
    b, tcp4 = c.basic(), c.ether(c.basic()[0]).data
    out = [c.ether(x) for x in c.zoo() + b]
    out += [c.ether(c.arp()), c.ether(b[0], vlans=[5]), c.ether(b[1], vlans=[5, 6]),
            c.ether(b[2], vlans=[5, 6], outer_tpid=0x8100),
            c.ether(b[3], vlans=[5, 6], outer_tpid=0x9100), c.ether(c.arp(), vlans=[7]),
            c.ether(b[4], vlans=list(range(1, 11))), c.ether(b[0], pad_to=80)]
    out += [_eth(et, bytes(46)) for et in (0x88CC, 0x888E, 0x8847, 0x8863, 0x8864, 0x88B5,
                                           0x9000, 0x1234, 0x22F0, 0x8035, 0x0600, 0x05DC,
                                           0x0010, 0x05FF)]
    out += [_eth(0x0842, WOL + bytes(4)), _eth(0x002E, bytes.fromhex("424203") + bytes(43))]
    out += [_set(tcp4, 14 + 9, bytes([p])) for p in (2, 47, 4, 41, 50, 51, 132, 89, 253, 143,
                                                     0, 58, 17, 103, 112)]
    out += [_set(tcp4, 14, b"\x55"), _set(tcp4, 14, b"\x44"), _set(tcp4, 16, b"\x00\x0a"),
            _set(tcp4, 16, b"\x00\x1e"), _set(tcp4, 14 + 20 + 12, b"\x30"),
            _set(tcp4, 14 + 20 + 12, b"\xf0"),
            _set(c.ether(b[1]).data, 14 + 20 + 4, b"\x00\x04"),
            _set(c.ether(b[1]).data, 14 + 20 + 4, b"\x01\xf4")]
    out += [_eth(0x86DD, _ipv6(nh, plen, body)) for nh, plen, body in (
        (59, 8, bytes(8)), (59, 0, b""), (17, 0, bytes(8)),
        (60, 16, bytes([17, 0]) + bytes(6) + bytes(8)), (60, 16, bytes([17, 5]) + bytes(14)),
        (1, 8, bytes([8, 0, 0, 0, 0, 1, 0, 1])),
        (51, 48, bytes([17, 4]) + bytes(22) + c.udp(1, 2, b"ah").layer.build()[:8] + bytes(16)))]
    return out


def wifi_zoo() -> list:
    b = c.basic()
    kinds = ["beacon", "action", "ack", "rts", "null", "qos-null", "protected", "amsdu",
             "version1", "extension"]
    return ([c.wlan_frame(k) for k in kinds] + [c.wlan(x) for x in c.zoo() + b]
            + [c.wlan(c.arp()), c.wlan(b[0], vlans=[42]), c.wlan(b[1], qos=0),
               c.wlan(b[1], oui=c.SNAP_BRIDGE_TUNNEL),
               c.dot11_header(2, 0) + bytes([0x42, 0x42, 0x03]) + bytes(35),
               c.dot11_header(2, 0) + bytes.fromhex("aaaa0300000c2000") + bytes(20)])


def link_zoos():
    b, z = c.basic(), c.zoo()
    wifi = wifi_zoo()
    header = [c.rt_flags(), c.rt_rate(12)]
    radio = [c.radiotap(f, header).data if hasattr(f, "fields") else
             c.radiotap_header(header) + f for f in wifi]
    radio += [c.radiotap(c.wlan(b[0]), [c.rt_flags(fcs=True), c.rt_signal(-40)]).data,
              c.radiotap_header([c.rt_flags(), c.rt_field(26)])]     # a 0-length PSDU
    sll_types = [struct.pack("!HHH8sH", 4, 1, 6, c.MAC_A, p) + body for p, body in (
        (3, c.ether(b[0]).data), (4, bytes.fromhex("424203") + bytes(40)), (7, bytes(20)),
        (0x9999, bytes(20)), (0x8100, b"\x00\x05\x08\x00" + b[1].data))]
    return {
        "ethernet": (ethernet_zoo(), c.LT_ETHERNET),
        "sll": ([c.sll(x) for x in z + b] + [c.sll(c.arp())] + sll_types, c.LT_SLL),
        "sll2": ([c.sll2(x) for x in z + b] + [c.sll2(c.arp())], c.LT_SLL2),
        "raw": ([c.raw(x) for x in z + b] + [bytes([0x55]) + bytes(39)], c.LT_RAW),
        "raw4": ([c.raw(x, c.LT_IPV4) for x in z + b if x.fields["ip_version"] == 4],
                 c.LT_IPV4),
        "raw6": ([c.raw(x, c.LT_IPV6) for x in z + b if x.fields["ip_version"] == 6],
                 c.LT_IPV6),
        "null": ([c.null(x) for x in z + b], c.LT_NULL),
        "loop": ([c.loop(x) for x in z + b], c.LT_LOOP),
        "wlan": (wifi, c.LT_IEEE802_11),
        "radiotap": (radio, c.LT_RADIOTAP),
    }


@pytest.mark.parametrize("link", sorted(link_zoos()))
def test_equals_tshark_on_packets_built_by_hand(tmp_path, link):
    frames, link_type = link_zoos()[link]
    assert_as_tshark(written(tmp_path, frames, link_type, link))


def _fragments(l4, sizes, src=c.A4, dst=c.C4, ident=7):
    """IPv4 fragments of ``l4`` (a transport from craft) of ``sizes`` bytes each, in order."""
    out, at = [], 0
    for k, size in enumerate(sizes):
        out.append(c.ipv4(l4, src, dst, ident=ident, frag=(at // 8, k + 1 < len(sizes), size)))
        at += size
    return out


BIG = bytes(range(256)) * 12


def reassembly_cases() -> dict[str, tuple[list, list[str]]]:
    """(packets, the path of each, as tshark puts it): a datagram is complete when its
    fragments cover it from 0 to the end the last one says; the completing fragment carries
    its protocol, the others are data."""
    udp = c.udp(1111, 2222, BIG)
    f = [c.ether(x) for x in _fragments(udp, [1000, 1000, 1080])]
    v6 = [c.ether(c.ipv6(udp, c.A6, c.B6, frag=(0xABCDEF01, at, more, size)))
          for at, more, size in ((0, True, 1000), (125, True, 1000), (250, False, 1080))]
    private = _fragments(udp, [1000, 2080], src="10.0.0.1", dst="10.0.0.2")
    public = _fragments(udp, [1000, 2080])
    tcp = _fragments(c.tcp(1, 2, payload=BIG), [16, 1000, 2076], ident=9)   # a tiny first one
    other = _fragments(c.tcp(1, 2, payload=BIG), [1000, 2092], ident=7 ^ 17 ^ 6)
    data, udp_, tcp_ = "eth/ip/data", "eth/ip/udp", "eth/ip/tcp"
    return {
        "in order": (f, [data, data, udp_]),
        "out of order": ([f[2], f[0], f[1]], [data, data, udp_]),
        "one missing": ([f[0], f[2]], [data, data]),
        "a duplicate after": (f + [f[0]], [data, data, udp_, data]),
        "a duplicate before the end": ([f[0], f[0], f[1], f[2]], [data, data, data, udp_]),
        "two datagrams interleaved": (
            [f[0], c.ether(_fragments(udp, [1000, 2080], ident=8)[0]), f[1], f[2],
             c.ether(_fragments(udp, [1000, 2080], ident=8)[1])],
            [data, data, data, udp_, udp_]),
        "ipv6": (v6, ["eth/ipv6/data", "eth/ipv6/data", "eth/ipv6/udp"]),
        "private addresses in two VLANs": (
            [c.ether(private[0], vlans=[5]), c.ether(private[1], vlans=[6])],
            ["eth/vlan/ip/data", "eth/vlan/ip/data"]),
        "public addresses in two VLANs": (
            [c.ether(public[0], vlans=[5]), c.ether(public[1], vlans=[6])],
            ["eth/vlan/ip/data", "eth/vlan/ip/udp"]),
        "a first fragment too small for its TCP header": ([c.ether(x) for x in tcp],
                                                           [data, data, tcp_]),
        "protocol xor identification alike": ([f[0], c.ether(other[1])], [data, tcp_]),
    }


@pytest.mark.parametrize("case", sorted(reassembly_cases()))
def test_ip_fragments_are_reassembled_as_tshark_reassembles_them(tmp_path, case):
    frames, paths = reassembly_cases()[case]
    path = written(tmp_path, frames, c.LT_ETHERNET, "fragments")
    result = assert_as_tshark(path)
    t = result.table()
    want: dict = {}
    for p in paths:
        want[p] = want.get(p, 0) + 1
    for p, n in want.items():                # each packet where the case says (known answers)
        assert t["packets"][list(t["path"]).index(p)] == n, (case, p)


def test_fragments_cut_by_the_snaplen_are_not_reassembled(tmp_path):
    """A fragment not captured whole: an IPv4 first one carries its protocol, the others are
    data; every IPv6 one is data."""
    udp = c.udp(1111, 2222, BIG)
    frames = [c.ether(x) for x in _fragments(udp, [1000, 1000, 1080])]
    frames += [c.ether(c.ipv6(udp, c.A6, c.B6, frag=(0xABCDEF01, at, more, size)))
               for at, more, size in ((0, True, 1000), (125, True, 1000), (250, False, 1080))]
    path = written(tmp_path, frames, c.LT_ETHERNET, "cut", cap_lens=[128] * 6)
    t = assert_as_tshark(path).table()
    count = dict(zip(t["path"], t["packets"].tolist()))
    assert (count["eth/ip/udp"], count["eth/ip/data"], count["eth/ip/udp/payload"]) == (1, 2, 1)
    assert count["eth/ipv6/data"] == 3 and "eth/ipv6/udp" not in count


def cut_stacks() -> dict[str, tuple[object, int]]:
    """Packets cut at every length: every link type over IPv4 and IPv6, TCP, UDP and ICMP;
    VLAN tags; protocols pcapstats names but does not read; 802.11 data frames and beacons."""
    b = c.basic()
    out = {f"ethernet {x.name}": (c.ether(x), c.LT_ETHERNET) for x in b}
    out.update({f"sll {x.name}": (c.sll(x), c.LT_SLL) for x in b})
    out.update({f"sll2 {x.name}": (c.sll2(x), c.LT_SLL2) for x in b})
    out.update({f"raw {x.name}": (c.raw(x), c.LT_RAW) for x in b})
    out.update({f"null {x.name}": (c.null(x), c.LT_NULL) for x in b})
    out.update({f"raw4 {x.name}": (c.raw(x, c.LT_IPV4), c.LT_IPV4) for x in b[:3]})
    out.update({f"raw6 {x.name}": (c.raw(x, c.LT_IPV6), c.LT_IPV6) for x in b[3:]})
    out.update({f"wlan {x.name}": (c.wlan(x), c.LT_IEEE802_11) for x in b})
    out.update({f"radiotap {x.name}": (c.radiotap(c.wlan(x), [c.rt_flags(), c.rt_rate(12)]),
                                       c.LT_RADIOTAP) for x in b})
    out.update({
        "qinq": (c.ether(b[0], vlans=[5, 6]), c.LT_ETHERNET),
        "arp": (c.ether(c.arp()), c.LT_ETHERNET),
        "vlan arp": (c.ether(c.arp(), vlans=[5]), c.LT_ETHERNET),
        "unknown ethertype": (_eth(0x88B5, bytes(46)), c.LT_ETHERNET),
        "lldp": (_eth(0x88CC, bytes(46)), c.LT_ETHERNET),
        "802.3 llc": (_eth(0x002E, bytes.fromhex("424203") + bytes(43)), c.LT_ETHERNET),
        "wlan beacon": (c.wlan_frame("beacon"), c.LT_IEEE802_11),
        "radiotap beacon": (c.radiotap(c.wlan_frame("beacon"), [c.rt_flags(), c.rt_rate(12)]),
                            c.LT_RADIOTAP),
    })
    return out


@pytest.mark.parametrize("stack", sorted(cut_stacks()))
def test_packets_cut_at_every_length_equal_tshark(tmp_path, stack):
    """Each packet cut at every length from 1 byte to whole (what a snaplen does): where it
    ends inside a header, under the protocol tshark shows for that many of its bytes."""
    frame, link_type = cut_stacks()[stack]
    data = frame.data if hasattr(frame, "data") else frame
    lengths = list(range(1, len(data) + 1))
    assert_as_tshark(written(tmp_path, [data] * len(lengths), link_type, "cut", lengths))


# -- known answers without tshark -----------------------------------------------------------

def test_known_answers(tmp_path):
    """Three TCP data segments and two ACKs, a UDP datagram with payload and one without, an
    ARP request and an ICMPv6 echo, a second apart: every number of the table by hand."""
    tcp = [c.ipv4(c.tcp(4000, 80, seq=k, payload=b"x" * 100), c.A4, c.B4) for k in range(3)]
    acks = [c.ipv4(c.tcp(80, 4000, ack=k), c.B4, c.A4) for k in range(2)]
    frames = ([c.ether(x) for x in tcp[:2] + acks[:1] + tcp[2:] + acks[1:]]
              + [c.ether(c.ipv4(c.udp(5000, 53, b"q" * 20), c.A4, c.B4)),
                 c.ether(c.ipv4(c.udp(5000, 53), c.A4, c.B4)), c.ether(c.arp()),
                 c.ether(c.ipv6(c.icmp(6, 128, ident=1, seq=1, body=b"e" * 8), c.A6, c.B6))])
    path = written(tmp_path, frames, c.LT_ETHERNET, "known")
    size = [len(f.data) for f in frames]
    t = hierarchy(path).table()
    data, ack = size[0], size[2]                     # 14 + 20 + 20 + 100, 14 + 20 + 20
    assert (data, ack) == (154, 54)
    udp_sizes, arp, icmp6 = size[5:7], size[7], size[8]
    total = sum(size)
    want = [("frame", 0, 9, total, True), ("eth", 1, 9, total, True),
            ("eth/ip", 2, 7, 3 * data + 2 * ack + sum(udp_sizes), True),
            ("eth/ip/tcp", 3, 5, 3 * data + 2 * ack, True),
            ("eth/ip/tcp/payload", 4, 3, 3 * data, False),
            ("eth/ip/udp", 3, 2, sum(udp_sizes), True),
            ("eth/ip/udp/payload", 4, 1, udp_sizes[0], False),
            ("eth/arp", 2, 1, arp, False),
            ("eth/ipv6", 2, 1, icmp6, True), ("eth/ipv6/icmpv6", 3, 1, icmp6, True)]
    got = list(zip(t["path"], t["depth"].tolist(), t["packets"].tolist(), t["bytes"].tolist(),
                   t["decoded"].tolist()))
    assert got == want
    assert list(t["protocol"]) == [p.rsplit("/", 1)[-1] for p, *_ in want]
    np.testing.assert_allclose(t["packets_share"], t["packets"] / 9)
    np.testing.assert_allclose(t["bytes_share"], t["bytes"] / total)
    span = len(frames) - 1                            # a second apart
    np.testing.assert_allclose(t["avg_capture_bps"], t["bytes"] * 8 / span)


def test_a_capture_without_packets_has_nothing_to_report(tmp_path):
    path = written(tmp_path, [], c.LT_ETHERNET, "empty")
    with pytest.raises(ps.NothingToReport, match="no packets"):
        hierarchy(path)


def test_a_table_read_by_tshark_is_refused_in_one_clear_error():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = ps.read(CAPTURES / "tcp_2streams.pcap", engine="tshark")
    with pytest.raises(ps.UsageError, match="how pcapstats' reader decoded"):
        hierarchy(cap)


# -- the differences the docstring admits ---------------------------------------------------

def test_an_icmp_error_cut_inside_its_quote_is_counted(tmp_path):
    """tshark 4.0's io,phs leaves such a packet out altogether (its ICMP dissector leaves the
    packet marked as an error packet, which the tap skips); pcapstats counts it, under icmp,
    as Wireshark's own dialog does."""
    error = c.ether(c.ipv4(c.icmp(4, 3, 3, quote=c.ipv4(c.udp(1, 2, b"xyz"), c.A4, c.B4)),
                           c.B4, c.A4))
    path = written(tmp_path, [error, error], c.LT_ETHERNET, "icmp", cap_lens=[50, 100])
    assert sum(n for p, n, _ in phs(path) if "/" not in p) == 1       # tshark: one of two
    t = hierarchy(path).table()
    assert dict(zip(t["path"], t["packets"].tolist()))["eth/ip/icmp"] == 2


def test_what_pcapstats_does_not_name_as_tshark(tmp_path):
    """A null/loopback family other than IP is data (tshark: osi, ddp, ipx by family); an
    IPv4 header whose version nibble is 6 is ip, not read (tshark reads on as IPv6); an
    ethertype's protocol is named even where tshark's dissector turns the packet down."""
    wol = written(tmp_path, [_eth(0x0842, bytes(46))], c.LT_ETHERNET, "wol")
    assert list(hierarchy(wol).table()["path"]) == ["frame", "eth", "eth/wol"]
    assert [p for p, _, _ in phs(wol)] == ["eth", "eth/data"]
    tcp4 = c.basic()[0].data
    null = written(tmp_path, [struct.pack("<I", f) + tcp4 for f in (7, 16, 23)], c.LT_NULL,
                   "null")
    t = hierarchy(null).table()
    assert list(t["path"]) == ["frame", "null", "null/data"]
    eth = written(tmp_path, [_set(c.ether(c.basic()[0]).data, 14, b"\x65")], c.LT_ETHERNET,
                  "v6")
    t = hierarchy(eth).table()
    assert list(t["path"]) == ["frame", "eth", "eth/ip"] and not t["decoded"][2]
    assert "eth/ip/ipv6" in [p for p, _, _ in phs(eth)]


@pytest.mark.filterwarnings("ignore::pcapstats.SkippedPacketsWarning")     # the ACK: not IP
def test_802_11_frames_cut_inside_their_header(tmp_path):
    """A QoS data frame cut 10 bytes into its 26-byte 802.11 header: pcapstats shows wlan (2
    bytes are enough for a frame without QoS), tshark only a whole one; an ACK cut after 8 of
    its 10 bytes: pcapstats does not know its header's length and ends it at wlan, tshark in
    _ws.short under it."""
    header = [c.rt_flags(), c.rt_rate(12)]
    qos = c.radiotap(c.wlan(c.basic()[1], qos=0), header).data
    ack = c.radiotap(c.wlan_frame("ack"), header).data
    rt = len(c.radiotap_header(header))
    path = written(tmp_path, [qos, ack], c.LT_RADIOTAP, "wifi", cap_lens=[rt + 10, rt + 8])
    t = hierarchy(path).table()
    mine = dict(zip(t["path"], t["packets"].tolist()))
    theirs = {p: n for p, n, _ in phs(path)}
    wlan = "radiotap/wlan_radio/wlan"
    assert (mine[wlan], mine[f"{wlan}/_ws.short"]) == (2, 1)
    assert (theirs[wlan], theirs["radiotap/wlan_radio/_ws.short"]) == (1, 1)
    assert theirs[f"{wlan}/_ws.short"] == 1


@pytest.mark.parametrize("name", ["wpa-Induction.pcap", "Network_Join_Nokia_Mobile.pcap"])
def test_the_frames_the_reader_skips_are_counted_not_warned_of(name):
    """The reader warns that 802.11 frames without IP were not decoded; the hierarchy counts
    and names each of them (tshark's wlan.mgt, data ...), so it does not pass that on -- but
    the clock's warnings and the rest still come through."""
    path = DATA / name
    with warnings.catch_warnings(record=True) as read:
        warnings.simplefilter("always")
        ps.read(path)
    assert any(isinstance(w.message, ps.SkippedPacketsWarning) for w in read)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        t = hierarchy(path).table()
    assert not [w for w in got if isinstance(w.message, ps.SkippedPacketsWarning)]
    assert {p: n for p, n, _ in phs(path)} == dict(zip(t["path"][1:], t["packets"][1:]))
