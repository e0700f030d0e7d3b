"""IEEE 802.11 captures (link types 105 and 127): frames, radiotap fields, against tshark.

Crafted captures (tests/helpers/craft.py: 802.11 headers byte by byte, radiotap headers field by
field) whose every column is known by construction -- first confirmed by tshark, then read by
``pcapstats.read`` with each kernel, as in test_linktypes.py -- plus the radio columns
(``radiotap_dbm_antsignal``, ``radiotap_datarate``, ``radiotap_channel_freq``) checked the same
way; the one warning that counts the frames without an IP packet; and public 802.11 captures
(tests/data/README.md) compared with tshark on every column of every packet.
"""

from __future__ import annotations

import re
import struct
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers import craft as c
from tests.helpers.paths import DATA
from tests.helpers.tshark_ref import comparable, packet_reference

import pcapstats as ps
from pcapstats import schema

# the frames without IP warn (test_frames_without_ip_are_counted_in_one_warning checks how)
pytestmark = pytest.mark.filterwarnings("ignore::pcapstats.SkippedPacketsWarning")

BASIC = c.basic()
E, NS, VNS = c.RT_EXT, c.RT_NS_RADIOTAP, c.RT_NS_VENDOR
HTC = bytes.fromhex("0000c0ff")


def _order_without_htc(p: c.Built) -> c.Built:
    """A non-QoS data frame with the Order bit set: it has no HT control field."""
    w = c.wlan(p, name=f"wlan-order-{p.name}")
    return replace(w, data=w.data[:1] + bytes([w.data[1] | 0x80]) + w.data[2:])


def _data_frames() -> list[c.Built]:
    """Every header shape of an 802.11 data frame that carries a packet."""
    out = []
    for p in BASIC:
        out += [c.wlan(p), c.wlan(p, tods=False, fromds=True, qos=0),
                c.wlan(p, tods=True, fromds=True, name=f"wlan-4addr-{p.name}"),
                c.wlan(p, tods=True, fromds=True, qos=0x0005, name=f"wlan-4addr-qos-{p.name}"),
                c.wlan(p, qos=0x0006, htc=HTC, name=f"wlan-qos-htc-{p.name}"),
                c.wlan(p, tods=True, fromds=True, qos=0, htc=HTC, name=f"wlan-4addr-htc-{p.name}"),
                c.wlan(p, oui=c.SNAP_BRIDGE_TUNNEL, name=f"wlan-8021h-{p.name}"),
                c.wlan(p, qos=0, vlans=[42], name=f"wlan-vlan-{p.name}"),
                _order_without_htc(p)]
    return out + [c.wlan(c.arp()), c.wlan(c.arp(), qos=0, tods=False, fromds=True)]


NON_IP = ("beacon", "action", "ack", "rts", "null", "qos-null", "protected", "amsdu", "version1",
          "extension")

# A Linux (iwlwifi-like) monitor-mode header: the combined signal in the radiotap namespace,
# then one radiotap namespace per antenna with its own signal; the frame ends in its FCS.
def _linux_header(signal, rate=12, mhz=2412, fcs=True):
    return ([c.rt_tsft(), c.rt_flags(fcs=fcs), c.rt_rate(rate), c.rt_channel(mhz),
             c.rt_signal(signal), c.rt_field(14)],
            [c.rt_signal(signal + 1), c.rt_field(11, b"\x00")],
            [c.rt_signal(signal - 3), c.rt_field(11, b"\x01")])


def _radiotap_frames() -> list[c.Built]:
    """Common headers on every data frame shape, and headers exercising each field's alignment,
    the rate from Rate and MCS fields, namespaces and vendor namespaces."""
    out = [c.radiotap(f, *_linux_header(-40 - k % 50, rate=2 * (k % 54) + 2))
           for k, f in enumerate(_data_frames())]
    # Atheros-like: no FCS, header padded to 4 bytes (QoS data: 26 -> 28; with HT control 32)
    for p in BASIC[:3]:
        for frame in (c.wlan(p, qos=0, pad=True), c.wlan(p, qos=0, htc=HTC, pad=True),
                      c.wlan(p, tods=True, fromds=True, qos=0, pad=True)):
            out.append(c.radiotap(frame, [c.rt_tsft(), c.rt_flags(datapad=True), c.rt_rate(108),
                                          c.rt_channel(5180, 0x0140), c.rt_signal(-61),
                                          c.rt_field(6, b"\xa0")]))
    # each field's alignment: Flags (one byte) then the field, the signal in the next namespace
    frame = c.wlan(BASIC[1])
    for bit in sorted(set(c.RT_ALIGN_SIZE) - {1, 26}):
        out.append(c.radiotap(frame, [c.rt_flags(), c.rt_field(bit)], [c.rt_signal(-30 - bit)],
                              name=f"rt-align-{bit}"))
    # rates: the Rate field, then 802.11n MCS fields of every width, guard interval and stream
    # count (MCS 32: 40 MHz duplicate; 33-76: unequal modulation); incomplete MCS fields
    for units in (2, 4, 11, 22, 12, 108, 255, 0):
        out.append(c.radiotap(frame, [c.rt_rate(units)], name=f"rt-rate-{units}"))
    for index in (0, 1, 7, 8, 15, 23, 24, 31, 32, 33, 52, 53, 76):
        for bw40 in (False, True):
            for sgi in (False, True):
                out.append(c.radiotap(frame, [c.rt_mcs(index, bw40=bw40, short_gi=sgi)],
                                      name=f"rt-mcs{index}-{40 if bw40 else 20}-{int(sgi)}"))
    out += [c.radiotap(frame, [c.rt_mcs(5, bw_bits=2)], name="rt-mcs-20L"),
            c.radiotap(frame, [c.rt_mcs(5, bw_bits=3, short_gi=True)], name="rt-mcs-20U"),
            c.radiotap(frame, [c.rt_mcs(77)], name="rt-mcs77"),
            c.radiotap(frame, [c.rt_mcs(7, known=0x03)], name="rt-mcs-no-gi"),
            c.radiotap(frame, [c.rt_mcs(7, known=0x06)], name="rt-mcs-no-bw"),
            c.radiotap(frame, [c.rt_mcs(7, known=0x05)], name="rt-mcs-no-index"),
            c.radiotap(frame, [c.rt_rate(108), c.rt_mcs(3)], name="rt-rate-then-mcs"),
            c.radiotap(frame, [c.rt_mcs(3)], [c.rt_rate(22)], name="rt-mcs-then-rate"),
            c.radiotap(frame, [c.rt_mcs(3, known=0x03)], [c.rt_rate(22)],
                       name="rt-incomplete-mcs-then-rate"),
            c.radiotap(frame, [c.rt_field(18, struct.pack("<IHBB", 0x10480, 5180, 36, 20)),
                               c.rt_mcs(15, bw40=True)], name="rt-xchannel-mcs"),
            c.radiotap(frame, [c.rt_signal(-70), c.rt_field(21, bytes.fromhex(
                "4400040092000000000000000000"[:24]))], name="rt-vht-no-rate"),
            c.radiotap(frame, [c.rt_signal(-71), c.rt_field(23)], name="rt-he-no-rate"),
            c.radiotap(frame, [], name="rt-no-fields"),
            c.radiotap(frame, [c.rt_channel(0)], name="rt-channel-0"),
            # namespaces: the first field of a kind is kept; Flags: the last one says FCS
            c.radiotap(frame, [c.rt_flags()], [c.rt_signal(-12), c.rt_channel(5500)],
                       [c.rt_signal(-13), c.rt_rate(4), c.rt_channel(5520)],
                       name="rt-namespaces"),
            c.radiotap(frame, [c.rt_flags(fcs=True)], [c.rt_flags()], name="rt-fcs-then-none"),
            c.radiotap(frame, [c.rt_flags()], [c.rt_flags(fcs=True)], name="rt-none-then-fcs"),
            c.radiotap(frame, [c.rt_flags(), c.rt_signal(-33)], [c.rt_rate(22), c.rt_channel(5745)],
                       vendor=(b"\x00\x11\x22", 1, b"vendor"), name="rt-vendor-namespace"),
            c.radiotap(frame, [c.rt_signal(-34)], vendor=(b"\x00\x11\x22", 0, b""),
                       name="rt-vendor-last"),
            c.radiotap(c.wlan_frame("beacon"), *_linux_header(-77, rate=2), name="rt-beacon"),
            c.radiotap(c.wlan_frame("protected"), *_linux_header(-78, rate=108)),
            c.radiotap(c.wlan_frame("ack"), [c.rt_flags(fcs=True), c.rt_rate(48), c.rt_signal(-79)]),
            ]
    return out


def _word(*bits: int) -> int:
    return sum(1 << b for b in bits)


def _raw_header(words, data: bytes, length=None, version=0) -> bytes:
    body = struct.pack(f"<{len(words)}I", *words) + data
    return struct.pack("<BBH", version, 0, 4 + len(body) if length is None else length) + body


def _damaged_frames() -> list[c.Built]:
    """Radiotap headers a reader must survive, with what tshark makes of them: fields up to the
    first one it cannot place, the 802.11 frame at the header length, or no frame at all."""
    f = c.wlan(BASIC[0], qos=0)
    raw = c.radiotap_raw
    return [
        # the header length ends inside the signal field: no signal; the frame starts there
        raw(f, _raw_header([_word(1, 2, 5)], b"\x02\x04", length=10), rate=2.0,
            name="rt-len-cuts-field"),
        # a TSFT field (8-aligned) that does not fit before the end of the header
        raw(f, _raw_header([_word(0, 2)], bytes(4)), name="rt-len-cuts-tsft"),
        raw(f, _raw_header([_word(5)], b"", length=8), name="rt-len-8-field-past"),
        # presence words claimed past the header length: no fields
        raw(f, _raw_header([E, E], b"", length=12), name="rt-words-past-len"),
        # a presence bitmap that never ends (bit 31 in every word, up to the header's end)
        raw(f, _raw_header([E] * 15, b""), name="rt-bitmap-never-ends"),
        # a field Wireshark 4.0 does not know (25, 28): the fields before it are kept
        raw(f, _raw_header([_word(2, 5, 25) | NS | E, _word(3)], b"\x04\xec" + bytes(2)
                           + struct.pack("<HH", 5180, 0)), signal=-20, rate=2.0,
            name="rt-unknown-bit-25"),
        raw(f, _raw_header([_word(2, 28) | NS | E, _word(5)], b"\x04\x00\x00\xc1"), rate=2.0,
            name="rt-unknown-bit-28"),
        # bits past 31 without a new namespace: unknown too
        raw(f, _raw_header([_word(5) | E, _word(3)], b"\xc3\x00" + struct.pack("<HH", 2412, 0)),
            signal=-61, name="rt-bit-35"),
        # a word with both namespace bits: no fields at all
        raw(f, _raw_header([_word(5) | E, _word(2) | VNS | NS | E, _word(5)],
                           b"\xc0\x00\x00\x11\x22\x00\x00\x00\xc2"), name="rt-both-namespaces"),
        # another version: no fields, the frame read at the header length
        raw(f, _raw_header([_word(2, 5)], b"\x04\xc3", version=1), name="rt-version-1"),
        # a vendor namespace whose data runs past the header
        raw(f, _raw_header([_word(5) | VNS | E, 0], b"\xc9\x00\x00\x11\x22\x00\xff\x00"),
            signal=-55, name="rt-vendor-past-len"),
        # no frame: a 0-length PSDU field (in the second namespace), a length past the packet,
        # a length under 8
        raw(f, _raw_header([_word(5) | NS | E, _word(26)], b"\xc4\x00"), signal=-60,
            decoded=False, kind=c.WLAN_NO_PSDU, name="rt-zero-length-psdu"),
        raw(f, _raw_header([_word(2, 5)], b"\x04\xc5", length=4000), decoded=False,
            name="rt-len-past-packet"),
        raw(f, _raw_header([_word(2, 5)], b"\x04\xc6", length=6), decoded=False,
            name="rt-len-under-8"),
        raw(c.opaque(c.LT_RADIOTAP, b""), b"\x00\x00\x08", decoded=False, name="rt-cut-short"),
        # the 802.11 frame cut inside its header, or inside its LLC/SNAP header (not counted)
        replace(raw(replace(f, data=f.data[:20]), _raw_header([_word(5)], b"\xc7"), signal=-57,
                    decoded=False, frame_control=True, name="rt-dot11-cut"),
                notes=frozenset({"qos_header_cut"})),
        raw(replace(f, data=f.data[:29]), _raw_header([_word(5)], b"\xc8"), signal=-56,
            decoded=False, frame_control=True, name="rt-snap-cut"),
    ]


CASES: dict[str, list[c.Built]] = {
    "dot11-data": _data_frames(),
    "dot11-no-ip": [c.wlan_frame(k) for k in NON_IP] + [c.wlan(BASIC[0])],
    "radiotap": _radiotap_frames(),
    "radiotap-damaged": _damaged_frames(),
}


def _pcap(case: str) -> c.Written:
    frames = CASES[case]
    recs = [c.Record(f, t) for f, t in zip(frames, c.times(len(frames), 1000))]
    return c.pcap(recs, frames[0].link_type, name=f"{case}-pcap")


def _pcapng(case: str) -> c.Written:
    """Every frame on the interface of its own link type (105 and 127 in one file)."""
    frames = CASES[case]
    g = c.Pcapng(f"{case}-pcapng")
    g.section("<")
    ids = {lt: g.interface(lt, tsresol=9) for lt in sorted({f.link_type for f in frames})}
    for f, t in zip(frames, c.times(len(frames))):
        g.epb(ids[f.link_type], f, t)
    return g.written()


def _fcs_cut() -> c.Written:
    """Frames ending in an FCS, cut by the snaplen inside the FCS or inside the payload."""
    frames = [c.radiotap(c.wlan(p, qos=0), *_linux_header(-50)) for p in BASIC[:2]]
    cuts = (1, 2, 4, 5, 8, 10)
    recs = [c.Record(f, t, len(f.data) - cut) for (f, cut), t in
            zip([(f, cut) for cut in cuts for f in frames], c.times(12, 1000))]
    return c.pcap(recs, c.LT_RADIOTAP, name="radiotap-fcs-cut")


FILES = {f"{case}/{fmt.__name__[1:]}": (lambda fmt=fmt, case=case: fmt(case))
         for case in CASES for fmt in (_pcap, _pcapng)}
FILES["radiotap-fcs-cut/pcap"] = _fcs_cut


def _written(tmp_path, key) -> tuple[c.Written, Path]:
    w = FILES[key]()
    path = tmp_path / f"{w.name}.{w.fmt}"
    path.write_bytes(w.data)
    return w, path


def _tshark_rows(path) -> list[dict]:
    """tshark's rows (craft.tshark_rows) with the radio columns added."""
    rows = c.tshark_rows(path)
    for r, radio in zip(rows, c.tshark_radio_rows(path)):
        r.update(radio)
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("key", FILES)
def test_known_answers_agree_with_tshark(key, tmp_path):
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    w, path = _written(tmp_path, key)
    problems = c.compare_rows(key, w.rows, _tshark_rows(path), c.ALL_COLUMNS,
                              c.tshark_excuses(w))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("key", FILES)
def test_read_gives_known_answers(key, kernel, tmp_path):
    w, path = _written(tmp_path, key)
    problems = c.read_problems(f"{key} [{kernel}]", path, w, kernel)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("key", FILES)
def test_raw_arrays_give_known_answers(key, kernel, tmp_path):
    w, path = _written(tmp_path, key)
    problems = c.raw_problems(f"{key} [{kernel}]", path, w, kernel)
    assert not problems, "\n".join(problems)


def test_cases_cover_what_they_claim():
    """Guard on the construction: the cases hold every kind of frame without IP, rates from
    Rate and MCS fields, FCS-ended and padded frames, several namespaces and a vendor one."""
    kinds = {f.fields.get("_wlan_kind") for fs in CASES.values() for f in fs}
    assert {c.WLAN_MANAGEMENT, c.WLAN_CONTROL, c.WLAN_EXTENSION_KIND, c.WLAN_NULL,
            c.WLAN_PROTECTED, c.WLAN_AMSDU, c.WLAN_VERSION, c.WLAN_NO_PSDU} <= kinds
    radio = [f for f in CASES["radiotap"]]
    rates = {f.fields["radiotap_datarate"] for f in radio}
    assert {1.0, 54.0, 127.5, 0.0, 6.5, 7.22222, 150.0, 600.0, 6.23077} <= rates
    assert any(f.data.endswith(c.FCS_BYTES) for f in radio)
    assert any(f.fields.get("_datapad") for f in radio)
    assert sum(f.fields["radiotap_dbm_antsignal"] is None for f in radio) >= 5


def _read_with_warnings(path, kernel):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cap = ps.read(path, kernel=kernel)
    return cap, [w for w in caught if issubclass(w.category, ps.SkippedPacketsWarning)]


@pytest.mark.parametrize("case", ["dot11-no-ip", "radiotap", "radiotap-damaged"])
def test_frames_without_ip_are_counted_in_one_warning(case, kernel, tmp_path):
    """One SkippedPacketsWarning says how many frames of each kind carry no IP packet, at the
    first one's number; their rows stay (frame and radio columns filled, nothing else)."""
    w, path = _written(tmp_path, f"{case}/pcap")
    cap, skipped = _read_with_warnings(path, kernel)
    kinds = [r.get("_wlan_kind") for r in w.rows]
    counts = pd.Series([k for k in kinds if k]).value_counts()
    assert len(skipped) == 1, [str(x.message) for x in skipped]
    text = str(skipped[0].message)
    assert text.startswith(f"{counts.sum()} 802.11 frames carry no IP packet"), text
    for kind, n in counts.items():
        assert f"{n} {kind}" in text, (kind, text)
    first = next(i for i, k in enumerate(kinds) if k) + 1
    assert skipped[0].message.packet == first
    assert len(cap) == len(w.rows) and text in cap.warnings


def test_data_frames_with_ip_give_no_warning(kernel, tmp_path):
    w, path = _written(tmp_path, "dot11-data/pcapng")
    cap, skipped = _read_with_warnings(path, kernel)
    assert skipped == [] and cap.warnings == []
    assert (cap.packets["ip_version"].notna().sum()
            == sum(r["ip_version"] is not None for r in w.rows) == len(BASIC) * 9)


def test_managed_mode_wifi_is_ethernet(kernel, tmp_path):
    """A capture on a Wi-Fi interface in managed mode is Ethernet (link type 1) with no radio
    columns: nothing 802.11-specific is needed to read it."""
    frames = [c.ether(p) for p in BASIC]
    w = c.pcap([c.Record(f, t) for f, t in zip(frames, c.times(6, 1000))], c.LT_ETHERNET)
    path = tmp_path / "managed.pcap"
    path.write_bytes(w.data)
    cap = ps.read(path, kernel=kernel)
    assert not any(cap.present(col).any() for col in c.RADIO_COLUMNS)
    assert not c.compare_rows("managed", w.rows, c.capture_rows(cap), c.ALL_COLUMNS)


def test_radio_columns_are_described_in_the_schema():
    for name, unit, field in (("radiotap_dbm_antsignal", "dBm", "radiotap.dbm_antsignal"),
                              ("radiotap_datarate", "Mbit/s", "radiotap.datarate"),
                              ("radiotap_channel_freq", "MHz", "radiotap.channel.freq")):
        col = schema.BY_NAME[name]
        assert (col.unit, col.wireshark) == (unit, field) and col.layer != schema.FRAME


def test_tshark_engine_reads_the_radio_columns(tmp_path):
    """The reference engine fills the radio columns (and link types 105/127) as the fast one."""
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    _, path = _written(tmp_path, "radiotap/pcapng")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.SkippedPacketsWarning)
        fast, ref = ps.read(path).packets, ps.read(path, engine="tshark").packets
    for name in c.RADIO_COLUMNS + ("link_type", "ip_src", "udp_srcport", "tcp_stream"):
        assert fast[name].astype(str).tolist() == ref[name].astype(str).tolist(), name


# -- public captures -------------------------------------------------------------------------

# file -> what it holds that the comparison relies on (asserted against tshark, see below)
PUBLIC = {
    "ieee802.11_htc.pcap": "QoS data with HT control carrying IPv4/UDP (DHCP), radiotap",
    "ieee802.11_rx-stbc.pcap": "radiotap MCS fields (rates 135 and 150 Mbit/s), protected data",
    "ieee802.11_meshid.pcap": "three radiotap namespaces, a signal in each",
    "ieee802.11_exthdr.pcap": "extended presence bitmaps, management, control and null frames",
    "radiotap-heapoverflow.pcap": "a damaged radiotap header (tcpdump's heap-overflow fix)",
    "Network_Join_Nokia_Mobile.pcap": "plain 802.11 (link type 105): joining a network",
    "wpa-Induction.pcap": "radiotap, EAPOL via LLC/SNAP, protected data",
    "wpa2linkuppassphraseiswireshark.pcap": "radiotap with signals at 5 GHz, EAPOL, QoS data",
}


@pytest.mark.parametrize("name", PUBLIC)
def test_public_capture_matches_tshark(name, kernel):
    """Every column of every packet equals tshark's (tshark_ref.packet_reference)."""
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    path = DATA / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PcapstatsWarning)
        table = ps.read(path, kernel=kernel).packets
    ref = packet_reference(str(path))
    assert len(table) == len(ref.values)
    problems = []
    for col in schema.COLUMNS:
        rows = ref.checked[col.name]
        got = comparable(table[col.name])[rows].reset_index(drop=True)
        want = ref.values[col.name][rows].reset_index(drop=True)
        if col.name == "frame_time_epoch":   # a float of the exact ns column: 1 ulp apart
            g, v = got.to_numpy(float, na_value=np.nan), want.to_numpy(float, na_value=np.nan)
            bad = ~(np.abs(g - v) <= np.spacing(v))
        else:
            bad = (got.isna() != want.isna()).to_numpy().copy()
            both = (got.notna() & want.notna()).to_numpy()
            bad[both] |= got[both].to_numpy() != want[both].to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            problems.append(f"{name} {col.name}: {int(bad.sum())} packets differ, first "
                            f"packet {i + 1}: tshark {want[i]!r}, pcapstats {got[i]!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_public_captures_hold_what_they_are_for():
    """Guard: the facts PUBLIC states, seen by tshark (a replaced file that lost them fails)."""
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    fields = ("frame.protocols", "radiotap.dbm_antsignal", "radiotap.datarate",
              "radiotap.mcs.index", "wlan.fc.type_subtype", "wlan.fc.protected",
              "radiotap.present.ext", "frame.encap_type")

    def rows(name):
        return c.tshark_raw(DATA / name, fields)
    htc = rows("ieee802.11_htc.pcap")
    assert any("wlan:llc:ip:udp" in ":".join(r["frame.protocols"]) for r in htc)
    stbc = rows("ieee802.11_rx-stbc.pcap")
    assert {r["radiotap.datarate"][0] for r in stbc} == {"135", "150"}
    assert all(r["radiotap.mcs.index"] and r["wlan.fc.protected"] == ["1"] for r in stbc)
    assert all(len(r["radiotap.dbm_antsignal"]) == 3 for r in rows("ieee802.11_meshid.pcap"))
    ext = rows("ieee802.11_exthdr.pcap")
    assert any(len(r["radiotap.present.ext"]) > 1 for r in ext)
    assert {int(r["wlan.fc.type_subtype"][0], 0) >> 4 for r in ext} == {0, 1, 2}
    nokia = rows("Network_Join_Nokia_Mobile.pcap")
    assert {r["frame.encap_type"][0] for r in nokia} == {"20"}      # plain IEEE 802.11
    for name in ("wpa-Induction.pcap", "wpa2linkuppassphraseiswireshark.pcap"):
        protocols = [":".join(r["frame.protocols"]) for r in rows(name)]
        assert any(p.endswith("llc:eapol") for p in protocols), name
        assert any(r["wlan.fc.protected"] == ["1"] for r in rows(name)), name
    readme = (DATA / "README.md").read_text()
    for name in PUBLIC:
        assert re.search(re.escape(name), readme), f"{name} is not in tests/data/README.md"
