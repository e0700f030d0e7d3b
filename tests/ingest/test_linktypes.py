"""Every link type the fast reader decodes, read back to exactly the values written.

Each case wraps the same IPv4/IPv6 TCP/UDP/ICMP packets (plus ARP and other non-IP frames
where the link type can carry them) in one link-layer header, in a classic pcap and in a
pcapng.  As in test_formats.py, tshark first confirms the known answers, then
``pcapstats.read`` (each kernel) must give them.
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest

from tests.helpers import craft as c

import pcapstats as ps

V4 = [p for p in c.basic() if p.fields["ip_version"] == 4]
V6 = [p for p in c.basic() if p.fields["ip_version"] == 6]
IPV6_FAMILIES = (c.AF_INET6_BSD, c.AF_INET6_FREEBSD, c.AF_INET6_DARWIN)


def _lldp() -> c.Built:
    """An Ethernet frame of a type that is not IP (LLDP): frame columns only."""
    data = c.MAC_A + bytes.fromhex("0180c200000e") + struct.pack("!H", 0x88CC) + bytes(46)
    return c.opaque(c.LT_ETHERNET, data, "lldp")


def _llc() -> c.Built:
    """An IEEE 802.3 frame (length field instead of an EtherType) carrying STP via LLC."""
    body = bytes.fromhex("424203") + bytes(35)
    data = bytes.fromhex("0180c2000000") + c.MAC_A + struct.pack("!H", len(body)) + body
    return c.opaque(c.LT_ETHERNET, data, "802.3-llc-stp")


CASES: dict[str, list[c.Built]] = {
    "ethernet": [c.ether(p, pad_to=60) for p in c.basic()] + [c.ether(c.arp()), _lldp(), _llc()],
    "802.1q": [c.ether(p, vlans=[100]) for p in c.basic()]
              + [c.ether(c.arp(), vlans=[4094]), c.ether(V4[0], vlans=[0])],   # priority tag
    "qinq-802.1ad": [c.ether(p, vlans=[300, 7]) for p in c.basic()],
    "qinq-double-8021q": [c.ether(p, vlans=[1, 2], outer_tpid=c.ETH_8021Q) for p in c.basic()],
    "vlan-triple": [c.ether(p, vlans=[5, 6, 7]) for p in c.basic()],
    "sll": [c.sll(p) for p in c.basic()] + [c.sll(c.arp())],
    "sll2": [c.sll2(p) for p in c.basic()] + [c.sll2(c.arp())],
    "raw-101": [c.raw(p) for p in c.basic()],
    "raw-228-ipv4": [c.raw(p, c.LT_IPV4) for p in V4],
    "raw-229-ipv6": [c.raw(p, c.LT_IPV6) for p in V6],
    **{f"null-{name}": [c.null(p, order) for p in V4]
       + [c.null(p, order, fam) for p in V6 for fam in IPV6_FAMILIES]
       for name, order in (("le", "<"), ("be", ">"))},
    "loop-108": [c.loop(p) for p in V4] + [c.loop(p, fam) for p in V6 for fam in IPV6_FAMILIES],
    # 802.11 data frames (every header shape, radiotap fields, frames without IP: test_wifi.py)
    "802.11-105": [c.wlan(p) for p in c.basic()] + [c.wlan(c.arp())],
    "802.11-radiotap-127": [c.radiotap(c.wlan(p, qos=0), [c.rt_flags(fcs=True), c.rt_rate(22),
                                                         c.rt_channel(2462), c.rt_signal(-55)])
                            for p in c.basic()],
}


def _pcap(case: str) -> c.Written:
    frames = CASES[case]
    recs = [c.Record(f, t) for f, t in zip(frames, c.times(len(frames), 1000))]
    return c.pcap(recs, frames[0].link_type, name=f"{case}-pcap")


def _pcapng(case: str) -> c.Written:
    frames = CASES[case]
    g = c.Pcapng(f"{case}-pcapng")
    g.section(">")
    i = g.interface(frames[0].link_type, tsresol=9)
    for f, t in zip(frames, c.times(len(frames))):
        g.epb(i, f, t)
    return g.written()


FILES = {f"{case}/{fmt.__name__[1:]}": (fmt, case) for case in CASES for fmt in (_pcap, _pcapng)}


def _written(tmp_path, key) -> tuple[c.Written, Path]:
    fmt, case = FILES[key]
    w = fmt(case)
    path = tmp_path / f"{w.name}.{w.fmt}"
    path.write_bytes(w.data)
    return w, path


@pytest.mark.parametrize("key", FILES)
def test_known_answers_agree_with_tshark(key, tmp_path):
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    w, path = _written(tmp_path, key)
    problems = c.compare_rows(key, w.rows, c.tshark_rows(path), c.ALL_COLUMNS,
                              c.tshark_excuses(w))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("key", FILES)
def test_read_gives_known_answers(key, kernel, tmp_path):
    w, path = _written(tmp_path, key)
    problems = c.read_problems(f"{key} [{kernel}]", path, w, kernel)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("key", FILES)
def test_raw_arrays_give_known_answers(key, kernel, tmp_path):
    """As in test_formats: presence masks and raw arrays (0 where absent)."""
    w, path = _written(tmp_path, key)
    problems = c.raw_problems(f"{key} [{kernel}]", path, w, kernel)
    assert not problems, "\n".join(problems)


def test_link_type_is_per_interface(kernel, tmp_path):
    """A pcapng mixing interfaces decodes each packet with its own interface's link type."""
    g = c.Pcapng("mixed-link-types")
    g.section("<")
    order = ["ethernet", "sll2", "raw-229-ipv6", "null-be", "qinq-802.1ad", "loop-108", "sll",
             "802.11-105", "802.11-radiotap-127"]
    ids = {case: g.interface(CASES[case][0].link_type) for case in order}
    t = iter(c.times(100, 1000))
    for k in range(3):
        for case in order:
            frames = CASES[case]
            g.epb(ids[case], frames[k % len(frames)], next(t))
    w = g.written()
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(w.data)
    if c.TSHARK:
        assert not c.compare_rows("mixed (tshark)", w.rows, c.tshark_rows(path), c.ALL_COLUMNS,
                                  c.tshark_excuses(w))
    problems = c.read_problems(f"mixed [{kernel}]", path, w, kernel)
    assert not problems, "\n".join(problems)


USER0 = 147     # LINKTYPE_USER0: private use, no reader can know what is inside


def test_unknown_link_type_is_counted_and_skipped(kernel, tmp_path):
    """Packets of a link type the reader does not know keep their row (frame columns, right
    frame numbers) with no layer decoded, and one SkippedPacketsWarning says how many."""
    g = c.Pcapng("unknown-link-type")
    g.section("<")
    eth, usr = g.interface(c.LT_ETHERNET), g.interface(USER0)
    t = iter(c.times(10, 1000))
    g.epb(eth, c.ether(V4[0]), next(t))
    for n in range(3):
        g.epb(usr, c.opaque(USER0, bytes(c.ether(V4[1]).data), f"user0-{n}"), next(t))
        g.epb(eth, c.ether(c.basic()[n + 1]), next(t))
    w = g.written()
    path = tmp_path / "user0.pcapng"
    path.write_bytes(w.data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cap = ps.read(path, kernel=kernel)
    skipped = [x for x in caught if issubclass(x.category, ps.SkippedPacketsWarning)]
    assert len(skipped) == 1, [str(x.message) for x in caught]
    text = str(skipped[0].message)
    assert "3" in text and str(USER0) in text, text
    assert len(cap.warnings) == 1 and cap.warnings[0] == text
    problems = c.compare_rows("unknown-link-type", w.rows, c.capture_rows(cap), c.ALL_COLUMNS)
    assert not problems, "\n".join(problems)
