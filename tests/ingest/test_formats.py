"""Every capture format variant, read back to exactly the values written into it.

Each variant is a crafted file (tests/helpers/craft.py) whose every column is known by construction.
Checks per variant:

- ``test_known_answers_agree_with_tshark``: tshark reads the file and agrees with the known
  answers (so the construction itself is confirmed by an independent reader);
- ``test_read_gives_known_answers``: ``pcapstats.read`` with each kernel gives those answers,
  column by column, packet by packet, in ``cap.packets``;
- ``test_raw_arrays_give_known_answers``: the same through ``cap.column``/``cap.present``.

Then: packets cut inside their headers (against tshark), pcapng custom blocks, and files that
span many read windows (records and sections across window edges, a window ending exactly on
a record boundary).
"""

from __future__ import annotations

import struct
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import craft as c

import pcapstats as ps
from pcapstats import schema

NS = c.NS


def _ethernet_zoo():
    """The catalogue on Ethernet (NICs pad short frames to 60 bytes) plus an ARP frame."""
    return [c.ether(p, pad_to=60) for p in c.zoo()] + [c.ether(c.arp(), pad_to=60)]


def _classic(endian, nano, snaplen=65535, cut=None):
    def build():
        frames = _ethernet_zoo()
        unit = 1 if nano else 1000
        caps = [cut if cut and len(f.data) > cut else None for f in frames]
        recs = [c.Record(f, t, cap) for f, t, cap in zip(frames, c.times(len(frames), unit), caps)]
        name = f"pcap-{'le' if endian == '<' else 'be'}-{'ns' if nano else 'us'}"
        return c.pcap(recs, c.LT_ETHERNET, endian=endian, nano=nano, snaplen=snaplen, name=name)
    return build


def _pcap_times_past_2038():
    """ts_sec is unsigned 32-bit: seconds past 2^31 (and up to 2^32-1) are not negative."""
    frames = [c.ether(p) for p in c.basic()[:3]]
    ts = [2**31 * NS, 3_000_000_000 * NS + 999_999_000, (2**32 - 1) * NS + 1000]
    return c.pcap([c.Record(f, t) for f, t in zip(frames, ts)], c.LT_ETHERNET, endian=">",
                  name="pcap-be-past-2038")


def _pcapng_single(endian):
    def build():
        g = c.Pcapng(f"pcapng-{'le' if endian == '<' else 'be'}")
        g.section(endian)
        i = g.interface(c.LT_ETHERNET)
        frames = _ethernet_zoo()
        for f, t in zip(frames, c.times(len(frames), 1000)):
            g.epb(i, f, t)
        return g.written()
    return build


def _pcapng_interfaces():
    """One section, five interfaces of different link types, resolutions, offsets, snaplens,
    packets interleaved, with blocks a reader must step over in between."""
    b = c.basic()
    g = c.Pcapng("pcapng-interfaces")
    g.section("<", comment="crafted by pcapstats tests")
    eth = g.interface(c.LT_ETHERNET, tsresol=9, if_name="eth0")              # 10^-9
    raw = g.interface(c.LT_RAW, tsresol=0x80 | 16, tsoffset=1_600_000_000)   # 2^-16, offset
    sl2 = g.interface(c.LT_SLL2, tsresol=3, snaplen=80)                      # 10^-3, snaplen
    nul = g.interface(c.LT_NULL, tsresol=0x80 | 10)                          # 2^-10
    sl1 = g.interface(c.LT_SLL)                                              # default 10^-6
    g.epb(eth, c.ether(b[0]), c.BASE_NS, flags=1)
    g.epb(raw, c.raw(b[1]), 1_600_001_000 * NS + 3 * 1_953_125)      # 3 * 128 units of 2^-16
    g.nrb()
    g.epb(sl2, c.sll2(b[2]), 1_700_000_002 * NS + 5_000_000)
    g.epb(nul, c.null(b[3]), 1_700_000_003 * NS + 500_000_000)       # 512 units of 2^-10
    g.isb(eth, c.BASE_NS + 9 * NS)
    g.unknown()
    g.epb(sl1, c.sll(b[4]), 1_700_000_004 * NS + 999_999_000)
    g.epb(sl2, c.sll2(c.ipv4(c.tcp(1, 2, payload=b"z" * 500), c.A4, c.B4)),
          1_700_000_005 * NS)                                        # cut by snaplen 80
    g.epb(eth, c.ether(b[5]), 1_700_000_006 * NS + 1, cap_len=64)    # cut by the record
    g.epb(raw, c.raw(b[0]), 1_600_000_000 * NS)                       # unit 0 = the offset itself
    return g.written()


def _pcapng_sections():
    """Three sections: little-endian, big-endian with a real section length, little-endian;
    interface ids restart at 0 in each and link types differ."""
    b = c.basic()
    t = iter(c.times(20, 1000))
    g = c.Pcapng("pcapng-sections")
    g.section("<")
    e0, s1 = g.interface(c.LT_ETHERNET), g.interface(c.LT_SLL)
    g.epb(e0, c.ether(b[0]), next(t))
    g.epb(s1, c.sll(b[1]), next(t))
    g.section(">", real_length=True)
    r0, e1 = g.interface(c.LT_IPV6, tsresol=9), g.interface(c.LT_ETHERNET, snaplen=80)
    g.epb(r0, c.raw(b[3], c.LT_IPV6), next(t))
    g.epb(e1, c.ether(b[4], vlans=[42]), next(t))
    g.epb(r0, c.raw(b[5], c.LT_IPV6), next(t))
    g.section("<")
    r4 = g.interface(c.LT_IPV4, tsresol=0x80 | 20)
    g.epb(r4, c.raw(b[2], c.LT_IPV4), 1_700_000_100 * NS + 1_953_125 * 4)  # 4 * 2^-9 s: 2048 units
    return g.written()


def _pcapng_obsolete_and_simple():
    """Obsolete Packet Blocks (type 2) and Simple Packet Blocks (interface 0, no time)."""
    b = c.basic()
    g = c.Pcapng("pcapng-opb-spb")
    g.section(">")
    e0, e1 = g.interface(c.LT_ETHERNET, snaplen=200), g.interface(c.LT_ETHERNET, tsresol=9)
    g.opb(e0, c.ether(b[0]), c.BASE_NS // 1000 * 1000, drops=3)
    g.opb(e1, c.ether(b[1]), c.BASE_NS + 1)
    g.spb(c.ether(b[2]))
    g.spb(c.ether(c.ipv4(c.udp(9, 9, b"w" * 400), c.A4, c.B4)))          # cut by snaplen 200
    g.epb(e1, c.ether(b[3]), c.BASE_NS + 2 * NS)
    return g.written()


def _gz(build):
    return lambda: c.gzipped(build())


VARIANTS = {
    "pcap-le-us": _classic("<", False),
    "pcap-be-us": _classic(">", False),
    "pcap-le-ns": _classic("<", True),
    "pcap-be-ns": _classic(">", True),
    "pcap-le-us-snaplen160": _classic("<", False, snaplen=160),
    "pcap-be-ns-record-cut": _classic(">", True, cut=170),
    "pcap-be-past-2038": _pcap_times_past_2038,
    "pcapng-le": _pcapng_single("<"),
    "pcapng-be": _pcapng_single(">"),
    "pcapng-interfaces": _pcapng_interfaces,
    "pcapng-sections": _pcapng_sections,
    "pcapng-opb-spb": _pcapng_obsolete_and_simple,
    "pcap-le-ns.gz": _gz(_classic("<", True)),
    "pcapng-interfaces.gz": _gz(_pcapng_interfaces),
    "pcapng-sections.gz": _gz(_pcapng_sections),
}


def _write(tmp_path, w: c.Written) -> Path:
    path = tmp_path / (w.name + ("" if w.name.endswith(".gz") else "." + w.fmt))
    path.write_bytes(w.data)
    return path




@pytest.mark.parametrize("variant", VARIANTS)
def test_read_gives_known_answers(variant, kernel, tmp_path):
    w = VARIANTS[variant]()
    problems = c.read_problems(f"{variant} [{kernel}]", _write(tmp_path, w), w, kernel)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("variant", VARIANTS)
def test_raw_arrays_give_known_answers(variant, kernel, tmp_path):
    """``cap.present(col)`` is True exactly where a value was written and ``cap.column(col)``
    holds it there."""
    w = VARIANTS[variant]()
    problems = c.raw_problems(f"{variant} [{kernel}]", _write(tmp_path, w), w, kernel)
    assert not problems, "\n".join(problems)


def test_crafted_rows_cover_the_schema():
    """Every schema column is checked by these tests, and every checked column exists."""
    names = [col.name for col in schema.COLUMNS]
    assert sorted(set(names) - set(c.ALL_COLUMNS)) == [], "columns no crafted test checks"
    assert sorted(set(c.ALL_COLUMNS) - set(names)) == [], "crafted columns missing from schema"


def test_sections_restart_interface_ids():
    """Guard on the construction: the sections variant really reuses interface ids 0 and 1
    with different link types, so a reader that numbers interfaces across sections fails."""
    rows = _pcapng_sections().rows
    seen = {(r["frame_interface_id"], r["link_type"]) for r in rows}
    assert {(0, c.LT_ETHERNET), (0, c.LT_IPV6), (0, c.LT_IPV4), (1, c.LT_SLL),
            (1, c.LT_ETHERNET)} <= seen


def test_snaplen_cut_packets_keep_header_fields():
    """Guard on the construction: some packets really are cut, with payload by the headers
    larger than what was captured (so tcp_len/udp_length must come from the IP length)."""
    rows = VARIANTS["pcap-le-us-snaplen160"]().rows
    cut = [r for r in rows if r["frame_cap_len"] < r["frame_len"]]
    assert len(cut) >= 3
    assert any(r["tcp_len"] and r["payload_cap_len"] < r["tcp_len"] for r in cut)
    assert any(r["udp_length"] and r["payload_cap_len"] < r["udp_length"] - 8 for r in cut)


@pytest.mark.parametrize("variant", ["pcap-le-us", "pcapng-interfaces"])
def test_gzip_matches_plain(variant, kernel, tmp_path):
    """A gzipped file reads to the same table as the plain one (offsets in decompressed bytes)."""
    w = VARIANTS[variant]()
    plain = ps.read(_write(tmp_path, w), kernel=kernel).packets
    gz = ps.read(_write(tmp_path, c.gzipped(w)), kernel=kernel).packets
    assert plain.equals(gz)


def test_custom_blocks_are_not_packets(kernel, tmp_path):
    """pcapng Custom Blocks (0x00000BAD, 0x40000BAD) carry no packet.

    tshark 4.0 lists each custom block as a frame of its own ("PCAPNG Custom Block", with a
    frame number), so frame.number of later packets is shifted there; pcapstats counts packets
    only.  The other columns must be as written."""
    b = c.basic()
    g = c.Pcapng("pcapng-custom")
    g.section("<")
    i = g.interface(c.LT_ETHERNET)
    g.epb(i, c.ether(b[0]), c.BASE_NS // 1000 * 1000)
    g.custom(copy=True)
    g.epb(i, c.ether(b[1]), c.BASE_NS // 1000 * 1000 + NS)
    g.custom(copy=False)
    g.epb(i, c.ether(b[2]), c.BASE_NS // 1000 * 1000 + 2 * NS)
    w = g.written()
    problems = c.read_problems("pcapng-custom", _write(tmp_path, w), w, kernel)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("variant", ["pcap-le-us", "pcapng-be"])
def test_cuts_inside_headers_agree_with_tshark(variant, kernel, tmp_path):
    """A TCP-with-options packet cut at every length: where tshark still shows a field, and
    pcapstats decodes that layer, they agree; frame fields always agree."""
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    full = c.ether(c.ipv4(c.tcp(40000, 80, seq=1, ack=2, options=[
        ("MSS", 1460), ("SAckOK", b""), ("Timestamp", (7, 8)), ("NOP", None), ("WScale", 7)],
        payload=b"a" * 20), c.A4, c.B4))
    t = c.times(len(full.data), 1000)
    if variant.startswith("pcap-"):
        data = _raw_pcap_cuts(full, t)
    else:
        g = c.Pcapng()
        g.section(">")
        g.interface(c.LT_ETHERNET)
        for cap, ts in zip(range(len(full.data)), t):
            _raw_epb(g, full, ts, cap)
        data = bytes(g.out)
    path = tmp_path / f"cuts.{variant}"
    path.write_bytes(data)
    mine = c.capture_rows(ps.read(path, kernel=kernel))
    theirs = c.tshark_rows(path)
    frame_cols = ("frame_number", "frame_time_ns", "frame_len", "frame_cap_len")
    problems = c.compare_rows(variant, theirs, mine, frame_cols)
    layer_cols = [col for col in c.IP_COLUMNS + c.TCP_COLUMNS
                  if col not in ("tcp_stream", "tcp_len", "tcp_sack_count",
                                 "tcp_option_sack_perm")]
    problems += c.compare_rows(variant, theirs, mine, layer_cols,
                               skip=lambda i, col: mine[i][col] is None)
    assert not problems, "\n".join(problems)


def _raw_pcap_cuts(frame, times) -> bytes:
    """A pcap of ``frame`` captured at every length 0..len-1 (no known answer beyond frame)."""
    out = bytearray(struct.pack("<IHHiIII", c.PCAP_MAGIC_US, 2, 4, 0, 0, 65535, c.LT_ETHERNET))
    for cap, ts in zip(range(len(frame.data)), times):
        out += struct.pack("<IIII", ts // NS, ts % NS // 1000, cap, len(frame.data))
        out += frame.data[:cap]
    return bytes(out)


def _raw_epb(g: c.Pcapng, frame, ts, cap):
    """An EPB on interface 0 (microseconds) of ``frame`` cut at ``cap``: no known answer."""
    t = ts // 1000
    head = struct.pack(g.endian + "IIIII", 0, t >> 32, t & 0xFFFFFFFF, cap, len(frame.data))
    g.block(c.EPB, head + frame.data[:cap])


# -- files spanning many read windows ---------------------------------------------------------

WINDOW = 1 << 16      # the smallest window read_fast accepts: many windows in a small file


def _big_pcap():
    """~1500 packets (~700 KB) with one 150 kB record (a frame with a long trailer), so records
    straddle window boundaries and one record is larger than a window."""
    frames = [c.ether(p) for p in c.many_flows(1500)]
    giant = c.ether(c.ipv4(c.udp(7, 7, b"g" * 100), c.A4, c.C4, name="giant"))
    giant = replace(giant, data=giant.data + bytes(150_000))
    frames.insert(700, giant)
    recs = [c.Record(f, t) for f, t in zip(frames, c.times(len(frames), 1000, step=1_000_003))]
    return c.pcap(recs, c.LT_ETHERNET, snaplen=262144, name="big-pcap")


def _big_pcapng():
    """The same flows in a new section every 400 packets (byte order alternating, interfaces in
    a different order each time), so section and interface state crosses windows."""
    flows = c.many_flows(1500)
    t = iter(c.times(len(flows), 1, step=1_000_003))
    g = c.Pcapng("big-pcapng")
    for k, start in enumerate(range(0, len(flows), 400)):
        g.section("<" if k % 2 == 0 else ">")
        if k % 2:
            raw, eth = g.interface(c.LT_RAW), g.interface(c.LT_ETHERNET, tsresol=9)
        else:
            eth, raw = g.interface(c.LT_ETHERNET, tsresol=9), g.interface(c.LT_RAW)
        for i, p in enumerate(flows[start:start + 400]):
            ts = next(t)
            if i % 3 == 0:
                g.epb(raw, c.raw(p), ts // 1000 * 1000)
            else:
                g.epb(eth, c.ether(p), ts)
    return g.written()


BIG = {"big-pcap": _big_pcap, "big-pcapng": _big_pcapng,
       "big-pcapng.gz": _gz(_big_pcapng)}


@pytest.mark.parametrize("variant", BIG)
def test_windowed_reads_give_known_answers(variant, kernel, tmp_path):
    """Read in 64 KiB windows (records cut by window edges, a record larger than a window,
    sections changing mid-file): the same known answers as a whole-file read."""
    from pcapstats.ingest import read_fast
    w = BIG[variant]()
    path = _write(tmp_path, w)
    cap = read_fast(path, kernel=kernel, window_bytes=WINDOW)
    problems = c.compare_rows(f"{variant} [{kernel}]", w.rows, c.capture_rows(cap), c.ALL_COLUMNS)
    assert not problems, "\n".join(problems[:50])


@pytest.mark.slow
@pytest.mark.parametrize("variant", [*VARIANTS, *BIG])
def test_known_answers_agree_with_tshark(variant, tmp_path):
    """The answers by construction are what tshark reads too (the big files: in windows)."""
    if not c.TSHARK:
        pytest.skip("tshark not installed")
    w = {**VARIANTS, **BIG}[variant]()
    path = _write(tmp_path, w)
    problems = c.compare_rows(variant, w.rows, c.tshark_rows(path), c.ALL_COLUMNS,
                              c.tshark_excuses(w))
    assert not problems, "\n".join(problems[:50])


def _flows_file(fmt: str) -> c.Written:
    """600 packets of many flows (~300 kB) in one pcap or one single-section pcapng."""
    frames = [c.ether(p) for p in c.many_flows(600)]
    ts = c.times(len(frames), 1000, step=1_000_003)
    if fmt == "pcap":
        return c.pcap([c.Record(f, t) for f, t in zip(frames, ts)], c.LT_ETHERNET,
                      name="flows")
    g = c.Pcapng("flows")
    g.section("<")
    i = g.interface(c.LT_ETHERNET)
    for f, t in zip(frames, ts):
        g.epb(i, f, t)
    return g.written()


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_window_ending_exactly_on_a_record_boundary(fmt, kernel, tmp_path):
    """Window sizes chosen so that a window ends exactly where a record ends (whatever the
    walk's start: after the file header, or at 0): every packet is still read, no warning.

    (A reader that takes "walked up to the window's end, status OK" for "end of file" stops
    there silently.)"""
    from pcapstats.ingest import read_fast
    w = _flows_file(fmt)
    path = _write(tmp_path, w)
    ends = [off for off in w.record_offsets if WINDOW <= off < 3 * WINDOW][:8]
    starts = (0, 24 if fmt == "pcap" else w.record_offsets[2])   # pcapng: SHB + IDB
    windows = sorted({end - start for end in ends for start in starts if end - start >= WINDOW})
    assert windows
    lost = []
    for window in windows:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = len(read_fast(path, kernel=kernel, window_bytes=window))
        if n != len(w.rows) or caught:
            lost.append(f"window {window}: {n} of {len(w.rows)} packets, "
                        f"warnings {[str(x.message) for x in caught]}")
    assert not lost, "\n".join(lost)


def test_default_window_edge_on_a_record_boundary(kernel, tmp_path):
    """The same through the public ``ps.read``: a pcap of 1024-byte records (16 + 1008) whose
    record ends exactly where the default first read window ends (file header + window)."""
    from pcapstats.ingest import WINDOW_BYTES
    frame = c.ether(c.ipv4(c.udp(1000, 2000, b"u" * 966), c.A4, c.B4)).data
    assert len(frame) == 1008 and WINDOW_BYTES % 1024 == 0
    n = WINDOW_BYTES // 1024 + 1000
    header = struct.pack("<IHHiIII", c.PCAP_MAGIC_US, 2, 4, 0, 0, 65535, c.LT_ETHERNET)
    record = struct.pack("<IIII", 1_700_000_000, 0, len(frame), len(frame)) + frame
    path = tmp_path / "aligned.pcap"
    path.write_bytes(header + record * n)
    assert len(ps.read(path, kernel=kernel)) == n
