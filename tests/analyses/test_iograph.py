"""I/O graph: buckets equal to tshark's io,stat on real captures, averages and transfers on
captures built by hand, the figure, and the CLI's one-line errors.

Independent sources: ``tshark -q -z io,stat`` (frames and bytes per interval, and its own
"Interval:" header for how an interval in seconds is rounded), tshark's frame.time_relative
(which packets tshark's table leaves out at the capture's end), captures written by hand whose
answers are known by construction, and the lab's sender (how many transfers it made).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import craft as c
from tests.helpers.paths import CAPTURES, ROOT
from tests.helpers.tshark_ref import epoch_ns, tshark

import pcapstats as ps
from pcapstats import plots
from pcapstats.analyses.iograph import interval_ns, iograph
from pcapstats.plots.iograph import iograph_figure

SHIPPED = sorted(p for p in CAPTURES.glob("*.pcap*")       # not files being written
                 if not p.name.startswith(".") and not p.name.endswith(".partial"))
INTERVALS = (1.0, 0.1, 0.01, 0.001, 0.37)   # 0.37 s divides no capture's span
NS = 1_000_000_000
T0 = 1_700_000_000 * NS
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")


# -- tshark io,stat --------------------------------------------------------------------------

def tshark_iostat(path, interval, filters: list[str]) -> tuple[int, list[np.ndarray]]:
    """``tshark -q -z io,stat,<interval>,,<filter>...``: (interval in us from tshark's header,
    one (rows x 2) array of frames, bytes per column; column 0 is every packet)."""
    # "1", not "1.0": tshark 4.0.17 given a whole number of seconds written with a decimal point
    # and no filter after it looks for a "," that is not there, takes a garbage precision and
    # dies of SIGFPE about one run in two (tap-iostat.c, iostat_init / iostat_draw)
    text_interval = interval if isinstance(interval, str) else repr(interval).removesuffix(".0")
    arg = f"io,stat,{text_interval}" + "".join("," + f for f in [""] + filters if filters)
    text = tshark("-r", str(path), "-q", "-z", arg)
    m = re.search(r"^\| Interval:\s+([\d.]+) secs", text, re.M)
    assert m, text
    interval_us = round(float(m.group(1)) * 1e6)
    rows = []
    for line in text.splitlines():
        if "<>" not in line:
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        start = float(cells[0].split("<>")[0])
        # tshark's own alignment: row i starts at i x interval after the first packet
        assert start == pytest.approx(len(rows) * interval_us / 1e6, abs=0.51 * 10 ** -_decimals(cells[0])), line
        rows.append([int(v) for v in cells[1:]])
    table = np.array(rows, dtype=np.int64).reshape(len(rows), -1)
    assert table.shape[1] == 2 * (len(filters) + 1), text
    return interval_us, [table[:, 2 * i:2 * i + 2] for i in range(len(filters) + 1)]


def _decimals(cell: str) -> int:
    left = cell.split("<>")[0].strip()
    return len(left.split(".")[1]) if "." in left else 0


@dataclass
class TsharkPackets:
    """The packets a display filter selects, by tshark: relative times rounded to the
    microsecond as io,stat rounds them, and frame lengths, in file order."""
    rel_us: np.ndarray
    length: np.ndarray

    @classmethod
    def of(cls, path, display_filter: str | None = None) -> TsharkPackets:
        args = ["-r", str(path), "-T", "fields", "-e", "frame.time_relative", "-e", "frame.len"]
        text = tshark(*args, *(["-Y", display_filter] if display_filter else []))
        pairs = [line.split("\t") for line in text.splitlines()]
        rel_ns = np.array([epoch_ns(t) for t, _ in pairs], dtype=np.int64)
        return cls((rel_ns + 500) // 1000, np.array([int(n) for _, n in pairs], dtype=np.int64))

    def buckets(self, interval_us: int) -> np.ndarray:
        """Each packet's own interval."""
        return self.rel_us // interval_us

    def tshark_buckets(self, interval_us: int) -> np.ndarray:
        """Where tshark's io,stat counts each packet: its own interval, or the latest one opened
        so far when its time went back before that (tap-iostat.c keeps only the last one)."""
        return np.maximum.accumulate(self.buckets(interval_us)) if len(self.rel_us) else self.rel_us


def per_interval(buckets: np.ndarray, length: np.ndarray) -> dict[int, tuple[int, int]]:
    """{interval: (frames, bytes)} of the non-empty intervals."""
    out: dict[int, list[int]] = {}
    for b, n in zip(buckets.tolist(), length.tolist()):
        cell = out.setdefault(b, [0, 0])
        cell[0] += 1
        cell[1] += n
    return {b: tuple(v) for b, v in out.items()}


def assert_equals_tshark(label, interval_us: int, column: np.ndarray, result,
                         packets: TsharkPackets, capture_rel_us_max: int) -> None:
    """Our intervals are tshark's, in two steps that each rest on tshark alone:

    1. tshark's printed table is its own packets (times, lengths, filter) counted by the
       definition in pcapstats.analyses.iograph, with two tshark quirks: a packet whose time went
       back before the latest interval is counted there, and rows stop at ceil(duration /
       interval), so packets at the capture's last microsecond are left out when the duration
       is a whole number of intervals;
    2. our series is the same packets counted in the interval of their own time, every packet
       kept.  Without time going back across an edge, 1 and 2 mean our rows equal tshark's.
    """
    rows = len(column)
    printed = {i: (int(f), int(b)) for i, (f, b) in enumerate(column) if f or b}
    late = per_interval(packets.tshark_buckets(interval_us), packets.length)
    assert {i: v for i, v in late.items() if i < rows} == printed, f"{label}: tshark's own rule"
    left_out = [i for i in late if i >= rows]
    assert left_out in ([], [rows]), f"{label}: tshark left out intervals {left_out}"
    if left_out:
        assert capture_rel_us_max == rows * interval_us, label
    ours = {int(k): (int(f), int(b)) for k, f, b in
            zip(result.to_pandas("series")["interval"], result.to_pandas("series")["packets"], result.to_pandas("series")["bytes"]) if f}
    assert ours == per_interval(packets.buckets(interval_us), packets.length), label
    moved = packets.tshark_buckets(interval_us) != packets.buckets(interval_us)
    if not moved.any():
        extra = {k: v for k, v in ours.items() if k >= rows}
        assert {k: v for k, v in ours.items() if k < rows} == printed, label
        assert sorted(extra) == left_out, label


def filters_for(cap) -> list[tuple[str, dict]]:
    """(tshark display filter, the same selection as iograph arguments) for this capture:
    protocols, every TCP/UDP stream (ICMP errors quoting one included), a host, a port."""
    pk = cap.packets
    out = [(p, {"proto": p}) for p in ("tcp", "udp") if pk[f"{p}_stream"].notna().any()]
    for proto in ("tcp", "udp"):
        for s in sorted(pk[f"{proto}_stream"].dropna().unique())[:6]:
            out.append((f"{proto}.stream=={s}", {"proto": proto, "stream": int(s)}))
    hosts = pk["ip_src"].dropna().value_counts()
    for address in list(hosts.index[:2]):
        field = "ipv6.addr" if ":" in address else "ip.addr"
        out.append((f"{field}=={address}", {"host": address}))
    ports = pk["tcp_dstport"].dropna().value_counts()
    if len(ports):
        p = int(ports.index[0])
        out.append((f"tcp.port=={p} || udp.port=={p}", {"port": p}))
        if len(pk["tcp_stream"].dropna()):
            out.append((f"tcp.port=={p} && tcp", {"port": p, "proto": "tcp"}))
    return out


def shorter_than_the_interval(label, interval_us, interval, last_us, result,
                              packets: TsharkPackets) -> bool:
    """tshark 4.0 shrinks the interval to the capture's duration (printed to the ms) when the
    capture is shorter than it: then every packet is in our one interval 0."""
    if interval_us * 1000 == interval_ns(interval):
        return False
    assert last_us < interval_ns(interval) / 1000 and abs(interval_us - last_us) <= 500, label
    series = result.to_pandas("series")
    assert series["interval"].tolist() == [0], label
    assert (int(series["packets"].sum()), int(series["bytes"].sum())) == \
        (len(packets.rel_us), int(packets.length.sum())), label
    return True


def check_all_packets(path, interval) -> None:
    packets = TsharkPackets.of(path)
    interval_us, columns = tshark_iostat(path, interval, [])
    if shorter_than_the_interval(str(path), interval_us, interval, int(packets.rel_us.max()),
                                 iograph(ps.read(path), interval=interval), packets):
        return
    assert_equals_tshark(str(path), interval_us, columns[0], iograph(ps.read(path), interval=interval),
                         packets, int(packets.rel_us.max()))


def check_against_tshark(path, intervals=INTERVALS) -> None:
    cap = ps.read(path)
    chosen = [(None, {})] + filters_for(cap)
    selected = {flt: TsharkPackets.of(path, flt) for flt, _ in chosen}
    last_us = int(selected[None].rel_us.max())
    for interval in intervals:
        interval_us, columns = tshark_iostat(path, interval, [f for f, _ in chosen[1:]])
        if shorter_than_the_interval(f"{path} at {interval} s", interval_us, interval, last_us,
                                     iograph(cap, interval=interval), selected[None]):
            continue
        for (flt, kwargs), column in zip(chosen, columns):
            assert selected[flt].rel_us.size, f"{path}: tshark selects nothing with {flt}"
            assert_equals_tshark(f"{path} [{flt or 'all'}] at {interval} s", interval_us, column,
                                 iograph(cap, interval=interval, **kwargs), selected[flt], last_us)


@pytest.mark.slow
@needs_tshark
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_buckets_equal_tshark_on_shipped_captures(path):
    """Every shipped capture (there are many): three intervals each; the real and lab captures
    below get all of INTERVALS."""
    check_against_tshark(path, (1.0, 0.01, 0.37))


@needs_tshark
@pytest.mark.netns
@pytest.mark.parametrize("name", ["recv_nano.pcap", "recv_nano.pcapng", "router_s96_bpf.pcap"])
def test_buckets_equal_tshark_on_real_captures(real_captures, name):
    check_against_tshark(real_captures[name])


@needs_tshark
@pytest.mark.parametrize("text", ["1", "2", "0.1", "0.001", "0.0000015", "0.0000025", "1.0000005",
                                  "0.1234565", "0.37", "1.5"])
def test_interval_rounded_as_tshark_rounds_it(text, tmp_path):
    """tshark's own "Interval:" header says how it took the number; we take it the same way."""
    # three intervals long: tshark takes an interval longer than the capture as its duration
    length_ns = -(-3 * float(text) * 1e9 // 1000) * 1000
    path = write(tmp_path, "tiny.pcap", [(0, _frame(1)), (int(length_ns), _frame(2))])
    interval_us, _ = tshark_iostat(path, text, [])
    assert interval_ns(float(text)) == interval_us * 1000


@pytest.mark.parametrize("bad", [0, -1, -0.5, float("nan"), float("inf"), 0.0000004, "x"])
def test_bad_intervals_refused(bad):
    with pytest.raises(ps.UsageError, match="interval"):
        interval_ns(bad)


# -- captures built by hand --------------------------------------------------------------------

def _frame(payload: int, sport=40000, dport=5001, src=c.A4, dst=c.B4, udp=False) -> bytes:
    l4 = c.udp(sport, dport, bytes(payload)) if udp else c.tcp(sport, dport, flags=c.ACK,
                                                               payload=bytes(payload))
    return c.ether(c.ipv4(l4, src, dst))


def write(tmp_path, name, records) -> Path:
    """A nanosecond pcap of (time_ns after T0, Built frame) records."""
    w = c.pcap([c.Record(f, T0 + t) for t, f in records], c.LT_ETHERNET, nano=True)
    path = tmp_path / name
    path.write_bytes(w.data)
    return path


@pytest.fixture
def two_transfers(tmp_path):
    """A UDP marker at 0 s and 5 s; between them one TCP stream: 11 packets of 100-byte payload
    every 0.1 s from 1.0 s to 2.0 s, idle 1.5 s, 6 packets of 1000-byte payload every 0.1 s from
    3.5 s to 4.0 s.  Idle time before (1 s) and after (1 s) the stream."""
    marker = _frame(10, 7000, 7001, udp=True)
    small, big = _frame(100), _frame(1000)
    records = [(0, marker)]
    records += [(NS + i * NS // 10, small) for i in range(11)]
    records += [(3 * NS + NS // 2 + i * NS // 10, big) for i in range(6)]
    records += [(5 * NS, marker)]
    return write(tmp_path, "two.pcap", records), len(small.data), len(big.data)


def test_averages_and_transfers_by_construction(two_transfers):
    path, small, big = two_transfers
    r = iograph(ps.read(path), proto="tcp", by="stream", interval=1.0)
    row = r.to_pandas("summary").iloc[0]
    total = 11 * small + 6 * big
    assert (row.proto, row.stream, row.packets, row.bytes) == ("tcp", 0, 17, total)
    assert (row.first_s, row.last_s, row.active_s, row.capture_span_s) == (1.0, 4.0, 3.0, 5.0)
    assert row.avg_capture_bps == pytest.approx(total * 8 / 5.0, rel=1e-12)
    assert row.avg_active_bps == pytest.approx(total * 8 / 3.0, rel=1e-12)
    # the peak: [3 s, 4 s) holds the 5 big packets at 3.5 .. 3.9 s (4.0 s opens the next one)
    assert 5 * big > 10 * small
    assert (row.peak_bps, row.peak_start_s) == (5 * big * 8, 3.0)
    # two transfers, each over its own first to last packet, and their mean
    first = 11 * small * 8 / 1.0
    second = 6 * big * 8 / 0.5
    t = r.to_pandas("transfers")
    assert t["transfer"].tolist() == [0, 1] and t["packets"].tolist() == [11, 6]
    assert t["first_s"].tolist() == [1.0, 3.5] and t["duration_s"].tolist() == [1.0, 0.5]
    assert t["avg_transfer_bps"].to_numpy() == pytest.approx([first, second], rel=1e-12)
    assert row.transfers == 2
    # the rate while transferring: both transfers' bits over both their durations
    assert row.avg_transfer_bps == pytest.approx((11 * small + 6 * big) * 8 / 1.5, rel=1e-12)
    # a gap threshold above the idle 1.5 s makes it one transfer
    assert iograph(ps.read(path), proto="tcp", gap=2.0).to_pandas("summary").iloc[0].transfers == 1
    # so does any longer one, up to one past what nanoseconds in an int64 can hold
    assert iograph(ps.read(path), proto="tcp", gap=1e300).to_pandas("summary").iloc[0].transfers == 1
    # the series: zeros inside the stream's span, nothing before its first or after its last
    s = r.to_pandas("series")
    assert s["interval"].tolist() == [1, 2, 3, 4]
    assert s["packets"].tolist() == [10, 1, 5, 1]
    assert s["bps"].tolist() == [10 * small * 8, small * 8, 5 * big * 8, big * 8]


def test_units(two_transfers):
    path, small, big = two_transfers
    cap = ps.read(path)
    bits, by, pk = (iograph(cap, proto="tcp", interval=0.5, unit=u)
                    for u in ("bits", "bytes", "packets"))
    assert (bits.to_pandas("series")["bps"] == by.to_pandas("series")["bytes_per_s"] * 8).all()
    assert (pk.to_pandas("series")["packets_per_s"] == pk.to_pandas("series")["packets"] / 0.5).all()
    assert pk.to_pandas("summary").iloc[0]["avg_active_packets_per_s"] == pytest.approx(17 / 3.0, rel=1e-12)


def test_ten_transfers_ten_rows(tmp_path):
    """Ten bursts, 2 s apart, each 1 + k packets of 500-byte payload 10 ms apart: ten rows, each
    rate known, and the rate while transferring (all their bits over all their durations)."""
    frame = _frame(500)
    records, expected, bits, seconds = [], [], 0, 0.0
    for k in range(10):
        start = k * 2 * NS
        n = 2 + k
        records += [(start + i * NS // 100, frame) for i in range(n)]
        expected.append(n * len(frame.data) * 8 / ((n - 1) / 100))
        bits, seconds = bits + n * len(frame.data) * 8, seconds + (n - 1) / 100
    r = iograph(ps.read(write(tmp_path, "ten.pcap", records)))
    assert len(r.to_pandas("transfers")) == 10
    assert r.to_pandas("transfers")["avg_transfer_bps"].to_numpy() == pytest.approx(expected, rel=1e-12)
    assert r.to_pandas("summary").iloc[0].avg_transfer_bps == pytest.approx(bits / seconds, rel=1e-12)


def test_a_keep_alive_barely_weighs_on_the_transfer_rate(tmp_path):
    """A 1 s transfer at a known rate, then two packets 10 us apart (a keep-alive and its ACK,
    say) after an idle gap: their own rate is huge, the rate while transferring is not."""
    frame = _frame(1000)
    records = [(i * NS // 100, frame) for i in range(101)]               # 1 s of data
    records += [(3 * NS, _frame(0)), (3 * NS + 10_000, _frame(0))]        # a keep-alive
    r = iograph(ps.read(write(tmp_path, "ka.pcap", records)))
    row = r.to_pandas("summary").iloc[0]
    steady = 101 * len(frame.data) * 8 / 1.0
    keep_alive = r.to_pandas("transfers")["avg_transfer_bps"].iloc[1]
    assert row.transfers == 2 and keep_alive > 5 * steady
    assert row.avg_transfer_bps == pytest.approx(steady, rel=0.002)   # its 108 bytes: 0.1 %


def test_directions_and_streams(tmp_path):
    """Stream 0: A sends 3 x 1000 B, B answers 2 x 0 B; stream 1 starts later, its first packet
    from the other host (so its side A is that host)."""
    ab, ba = _frame(1000), _frame(0, 5001, 40000, c.B4, c.A4)
    other = _frame(200, 5002, 40001, c.B4, c.A4)
    back = _frame(0, 40001, 5002, c.A4, c.B4)
    path = write(tmp_path, "dir.pcap", [(0, ab), (1000, ba), (2000, ab), (3000, ab), (4000, ba),
                                        (NS, other), (NS + 10, back), (NS + 20, other)])
    r = iograph(ps.read(path), by="stream+direction")
    got = {(row.stream, row.direction): (row.packets, row.bytes) for row in r.to_pandas("summary").itertuples()}
    assert got == {(0, "a_to_b"): (3, 3 * len(ab.data)), (0, "b_to_a"): (2, 2 * len(ba.data)),
                   (1, "a_to_b"): (2, 2 * len(other.data)), (1, "b_to_a"): (1, len(back.data))}
    d = iograph(ps.read(path), by="direction").to_pandas("summary")
    assert d["direction"].tolist() == ["a_to_b", "b_to_a"]
    assert d["packets"].tolist() == [5, 3]
    assert iograph(ps.read(path), host=c.B4).to_pandas("summary").iloc[0].packets == 8


def test_host_matches_canonical_ipv6(tmp_path):
    f6 = c.ether(c.ipv6(c.tcp(1, 2, flags=c.ACK, payload=b"x"), c.A6, c.B6))
    path = write(tmp_path, "v6.pcap", [(0, f6), (NS, _frame(1))])
    assert iograph(ps.read(path), host="2001:DB8:0:0:0:0:0:1").to_pandas("summary").iloc[0].packets == 1
    assert iograph(ps.read(path), host="192.0.2.1").to_pandas("summary").iloc[0].packets == 1
    assert iograph(ps.read(path), host="10.9.9.9").empty


@pytest.mark.slow
@needs_tshark
def test_microsecond_rounding_at_edges_equals_tshark(tmp_path):
    """Nanosecond times around interval edges: 501, 500 and 499 ns before, exactly on, 1 ns
    after; tshark decides where each goes (it rounds to the microsecond first)."""
    records = [(0, _frame(1))]
    for k, offset in enumerate([-501, -500, -499, 0, 1, -1]):
        records.append(((k + 1) * NS // 10 + offset, _frame(10 * (k + 1))))
    records.append((NS + 7, _frame(3)))
    path = write(tmp_path, "edges.pcap", records)
    for interval in (0.1, 0.05, 1.0):
        check_all_packets(path, interval)


@needs_tshark
def test_last_microsecond_left_out_by_tshark_is_kept(tmp_path):
    """A capture lasting exactly 2 intervals: tshark prints 2 rows and drops the last packet;
    we keep it in a third interval."""
    path = write(tmp_path, "whole.pcap", [(0, _frame(1)), (NS // 2, _frame(2)), (2 * NS, _frame(3))])
    _, columns = tshark_iostat(path, 1.0, [])
    assert len(columns[0]) == 2 and columns[0][:, 0].sum() == 2
    r = iograph(ps.read(path), interval=1.0)
    assert r.to_pandas("series")["packets"].tolist() == [2, 0, 1]
    check_all_packets(path, 1.0)


@needs_tshark
def test_time_going_back(tmp_path):
    """Packets out of time order: tshark counts the late one in the latest interval it opened
    (1.5 s), we in the interval of its own time (0.7 s); both as assert_equals_tshark says."""
    path = write(tmp_path, "back.pcap", [(0, _frame(1)), (3 * NS // 2, _frame(2)),
                                         (7 * NS // 10, _frame(3)), (5 * NS // 2, _frame(4))])
    _, columns = tshark_iostat(path, 1.0, [])
    assert columns[0][:, 0].tolist() == [1, 2, 1]          # tshark: 0.7 s counted in [1 s, 2 s)
    assert iograph(ps.read(path)).to_pandas("series")["packets"].tolist() == [2, 1, 1]
    check_all_packets(path, 1.0)


def test_unknown_stream_and_bad_arguments(two_transfers):
    cap = ps.read(two_transfers[0])
    with pytest.raises(ps.UsageError, match="no TCP stream 7") as e:
        iograph(cap, proto="tcp", stream=7)
    assert "TCP streams 0-0" in str(e.value)
    for kwargs, what in [({"unit": "bauds"}, "unit"), ({"by": "host"}, "by"),
                         ({"proto": "icmp"}, "proto"), ({"host": "not-an-ip"}, "host"),
                         ({"port": 70000}, "port"), ({"gap": 0}, "gap")]:
        with pytest.raises(ps.UsageError, match=what):
            iograph(cap, **kwargs)
    assert iograph(cap, port=9).empty


def test_several_captures_keyed_and_each_from_its_own_start(two_transfers, tmp_path):
    path = two_transfers[0]
    later = write(tmp_path, "later.pcap", [(0, _frame(5)), (NS // 4, _frame(5))])
    r = iograph([path, later])
    assert r.keys == [] and list(r.table())[0] == "capture"
    assert r.to_pandas("summary")["capture"].tolist() == [str(path), str(later)]
    assert r.to_pandas("summary")["first_s"].tolist() == [0.0, 0.0]
    assert iograph([path, later]).to_pandas("summary")["packets"].tolist() == [19, 2]


# -- the figure ----------------------------------------------------------------------------------

def test_figure_has_title_units_legend_and_saves(two_transfers, tmp_path):
    import matplotlib.pyplot as plt
    open_before = plt.get_fignums()
    r = iograph(ps.read(two_transfers[0]), by="stream", interval=0.5)
    fig = iograph_figure(r)
    ax = fig.axes[0]
    assert ax.get_title().startswith("I/O graph")
    assert ax.get_xlabel().endswith("(s)")
    assert re.search(r"\((k|M|G)?bit/s\)$", ax.get_ylabel()), ax.get_ylabel()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]   # under the figure
    assert any(label.startswith("tcp 0") for label in labels)
    assert "average over the capture span" in labels and "peak interval" in labels
    png, svg = plots.save(fig, tmp_path / "io.png"), plots.save(fig, tmp_path / "io.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert plt.get_fignums() == open_before     # no pyplot state leaked
    for bad in (tmp_path / "io.pdf", tmp_path / "io"):
        with pytest.raises(ps.PcapstatsError, match="png or .svg"):
            plots.save(fig, bad)
    with pytest.raises(ps.PcapstatsError, match="cannot write plot"):
        plots.save(fig, tmp_path / "no" / "such" / "dir" / "io.png")


def test_side_by_side_figure_has_a_panel_per_capture(two_transfers, tmp_path):
    later = write(tmp_path, "later.pcap", [(0, _frame(5)), (NS // 4, _frame(5))])
    fig = iograph_figure(iograph([two_transfers[0], later]), layout="side")
    assert [ax.get_title() for ax in fig.axes] == ["two.pcap", "later.pcap"]
    assert fig.get_suptitle().startswith("I/O graph")


@pytest.mark.parametrize("value, text", [(950, "950 bit/s"), (3_200_000, "3.2 Mbit/s"),
                                         (12_500, "12.5 kbit/s"), (2e9, "2 Gbit/s")])
def test_human_rate(value, text):
    assert plots.human_rate(value) == text


# -- the command line --------------------------------------------------------------------------

def run_cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "PCAPSTATS_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pcapstats", "iograph", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env)


def assert_one_error_line(proc, status=2, *needles):
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    kind = "error" if status == 2 else "nothing to report"
    assert len(lines) == 1 and lines[0].startswith(f"pcapstats: {kind}: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args, needle", [
    (["--interval", "0"], "interval"), (["--interval", "-1"], "interval"),
    (["--unit", "bauds"], "bauds"), (["--stream", "7", "--proto", "tcp"], "no TCP stream 7"),
    (["--gap", "0"], "gap"), (["--host", "nohost"], "nohost"),
    (["-o", "io.pdf"], "png or .svg"),
    (["-o", "/no/such/dir/io.png"], "cannot write the output: no such directory /no/such/dir"),
    (["--series", "--transfers"], "--series"),
])
def test_cli_one_line_errors(two_transfers, args, needle):
    assert_one_error_line(run_cli(two_transfers[0], *args), 2, needle)


def test_cli_nothing_matched_exits_1(two_transfers):
    proc = run_cli(two_transfers[0], "--port", "9")
    assert_one_error_line(proc, 1, "nothing matched", "port 9")


@pytest.mark.slow
def test_cli_outputs(two_transfers, tmp_path):
    path = two_transfers[0]
    r = iograph(ps.read(path), by="stream", interval=0.5)
    proc = run_cli(path, "--by", "stream", "-i", "0.5", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [row["peak_bps"] for row in rows] == r.to_pandas("summary")["peak_bps"].tolist()
    proc = run_cli(path, "--by", "stream", "-i", "0.5", "--series", "-o", tmp_path / "s.csv")
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    import pandas as pd
    got = pd.read_csv(tmp_path / "s.csv")
    assert got["bps"].tolist() == r.to_pandas("series")["bps"].tolist()
    proc = run_cli(path, "--transfers", "--proto", "tcp", "--format", "csv")
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1 + 2, proc.stdout
    other = tmp_path / "other.pcap"
    other.write_bytes(path.read_bytes())
    proc = run_cli(path, other, "-o", tmp_path / "io.svg", "--layout", "side")
    assert proc.returncode == 0, proc.stderr
    assert ET.parse(tmp_path / "io.svg").getroot().tag.endswith("svg")
    titles = [line for line in proc.stdout.splitlines() if line.endswith(".pcap:")]
    assert titles == [f"{path}:", f"{other}:"], proc.stdout    # a block a capture


# -- a lab capture: two streams with different start times, transfers with idle gaps ---------

LAB_SENDER = r"""
import socket, sys, time
addr = sys.argv[1]
first = socket.create_connection((addr, 5001))
time.sleep(0.7)
second = socket.create_connection((addr, 5002))
second.sendall(bytes(100_000)); second.close()
for burst in range(3):                 # three transfers on one connection, idle 1.5 s between
    if burst:
        time.sleep(1.5)
    first.sendall(bytes(200_000))
first.close()
"""

LAB_SINK = r"""
import socket, sys, threading
srvs = []
for port in (5001, 5002):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], port)); s.listen(1); srvs.append(s)
print("ready", flush=True)
def drain(s):
    conn, _ = s.accept()
    while conn.recv(65536):
        pass
    conn.close()
threads = [threading.Thread(target=drain, args=(s,)) for s in srvs]
for t in threads: t.start()
for t in threads: t.join()
"""


@pytest.fixture(scope="module")
def lab_capture(tmp_path_factory):
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import topologies
    path = tmp_path_factory.mktemp("iograph-lab") / "gaps.pcap"
    with topologies.two_hosts() as lab:
        b = lab.address("b")
        sink = lab.popen_python("b", LAB_SINK, b, stdout=subprocess.PIPE, text=True)
        assert sink.stdout.readline() == "ready\n"
        with lab.capture("b", lab.interface("b", "a").name, path, snaplen=128):
            lab.python("a", LAB_SENDER, b)
            assert sink.wait(30) == 0
    return path


@needs_tshark
@pytest.mark.netns
def test_lab_capture_equals_tshark_and_counts_transfers(lab_capture):
    check_against_tshark(lab_capture)
    r = iograph(ps.read(lab_capture), proto="tcp", by="stream", gap=1.0)
    by_stream = {row.stream: row for row in r.to_pandas("summary").itertuples()}
    assert by_stream[0].transfers == 3        # what the sender did: three bursts
    assert by_stream[1].transfers == 1
    assert by_stream[1].first_s > 0.5         # started 0.7 s after the first connection
    assert math.isclose(by_stream[0].capture_span_s, by_stream[1].capture_span_s)
    # the idle gaps lower the capture-span average, not the per-transfer mean
    assert by_stream[0].avg_capture_bps < by_stream[0].avg_transfer_bps


@pytest.mark.parametrize("name", ["tcp_2streams.pcap", "udp_ping.pcapng", "sp-3pairs-reno+cubic+bbr.pcap"])
def test_read_for_its_columns_alone_it_answers_as_on_the_whole_table(name):
    """A path is read for the I/O graph's columns only (every packet, ~40 bytes of the
    table's ~120 a packet): the same tables, notes and errors as on the whole table."""
    from pcapstats.analyses.iograph import READS, every_row
    from pcapstats.capture import Needs
    from tests.helpers.partial import assert_answers_as_on_the_whole_file
    path = CAPTURES / name
    for options in ({}, {"by": "stream"}, {"by": "direction", "unit": "packets"},
                    {"stream": 1}, {"proto": "udp"}, {"host": "10.77.1.1", "interval": 0.1}):
        assert_answers_as_on_the_whole_file(ps.iograph, Needs(READS, every_row), path, **options)
