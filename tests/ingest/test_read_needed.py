"""ingest.read_needed: a path read for one analysis alone (the rows and columns its Needs name)
holds exactly the whole-file table's values at those rows, window edges or not."""

import gzip
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import pcapstats as ps
from pcapstats import schema
from pcapstats.capture import Needs
from pcapstats.ingest import Kept, read_kept, read_needed
from pcapstats.ingest.source import open_source

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = [ROOT / "captures" / n for n in (
    "ping-sweep-sender.pcap", "iperf3-udp-loss10pct.pcap", "sp-2pairs-reno+cubic.pcap",
    "chain-3hops.pcap")] + [ROOT / "tests" / "data" / n for n in (
        "tcp_retransmissions.pcapng", "dns_isp_hijack.pcapng", "of13_ericsson.pcapng",
        "wpa-Induction.pcap")]

EVERY_COLUMN = Needs(tuple(c.name for c in schema.COLUMNS) + ("direction",),
                     lambda cap: (cap.column("frame_number") % 3) != 1)   # every third left out
ECHO = Needs(("frame_time_ns", "frame_number", "icmp_seq", "ip_src", "payload_len"),
             lambda cap: cap.layer(schema.ICMP_ECHO))


def _read(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ps.read(path) if not kw else read_needed(path, **kw)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("window", [1 << 16, 4 << 20])
def test_the_rows_read_equal_the_whole_tables_rows(path, window):
    whole = _read(path)
    got = _read(path, needs=EVERY_COLUMN, window_bytes=window)
    mask = EVERY_COLUMN.rows(whole)
    assert len(got) == int(mask.sum()) and got.packets_in_file == len(whole)
    assert got.first_time_ns == whole.first_time_ns
    for name in (*(c.name for c in schema.COLUMNS), "direction"):
        assert np.array_equal(got.column(name), whole.column(name)[mask]), name
    for layer in (schema.IP, schema.TCP, schema.UDP, schema.ICMP):
        assert got.layer_count(layer) == int(whole.layer(layer).sum()), layer
    assert list(got.addresses) == list(whole.addresses)


def test_a_selection_keeps_only_its_columns_and_says_which_are_missing():
    path = ROOT / "captures" / "ping-sweep-sender.pcap"
    got = _read(path, needs=ECHO)
    whole = _read(path)
    assert len(got) == int(whole.layer(schema.ICMP_ECHO).sum())
    assert got.first_time_ns == whole.first_time_ns            # the file's, not the first echo's
    with pytest.raises(LookupError, match="tcp_seq_raw.*not read"):
        got.column("tcp_seq_raw")
    assert got.present("icmp_seq").all()                       # a column's layer comes along


def test_a_gzipped_file_and_an_empty_one(tmp_path):
    src = ROOT / "captures" / "ping-sweep-sender.pcap"
    gz = tmp_path / "x.pcap.gz"
    with open(src, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    assert np.array_equal(_read(gz, needs=ECHO).column("icmp_seq"),
                          _read(src, needs=ECHO).column("icmp_seq"))
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(src.read_bytes()[:24])                   # the file header alone
    got = _read(empty, needs=ECHO)
    assert len(got) == 0 and got.packets_in_file == 0 and got.first_time_ns is None


def _echo_flood(pings: int) -> bytes:
    """A raw-IP pcap of ``pings`` echo requests from 192.0.2.1, each answered once: built
    byte by byte (the sequence number is the only field that changes), so it compresses to
    far less than 16 bytes a packet."""
    def echo(icmp_type: int, src: bytes, dst: bytes, seq: int) -> bytes:
        icmp = struct.pack("!BBHHH", icmp_type, 0, 0, 7, seq) + bytes(16)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0, 64, 1, 0, src, dst)
        return ip + icmp
    a, b = bytes([192, 0, 2, 1]), bytes([198, 51, 100, 2])
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))  # raw IP
    for k in range(pings):
        for n, frame in ((2 * k, echo(8, a, b, k % 65536)), (2 * k + 1, echo(0, b, a, k % 65536))):
            out += struct.pack("<IIII", 1_700_000_000 + n // 1000, n % 1000 * 1000, len(frame),
                               len(frame)) + frame
    return bytes(out)


def test_a_gzipped_file_holding_more_packets_than_its_size_says(tmp_path):
    """The keepers size their arrays from the file's size on disk (16 bytes a packet at the
    least); a gzipped file holds more: they grow (contract.room_for) and keep every row, for
    read_needed's Kept and ping's Echoes alike."""
    pings = 70_000                                       # more requests than 65,536 rows
    plain, gz = tmp_path / "flood.pcap", tmp_path / "flood.pcap.gz"
    plain.write_bytes(_echo_flood(pings))
    gz.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    assert (gz.stat().st_size // 16 + 1) < pings        # so the first guess is too small
    got, want = _read(gz, needs=ECHO), _read(plain, needs=ECHO)
    assert len(got) == 2 * pings
    for name in ("frame_time_ns", "frame_number", "icmp_seq", "ip_src", "payload_len"):
        assert np.array_equal(got.column(name), want.column(name)), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sessions = ps.ping(gz).table("sessions")
    assert sessions["transmitted"].tolist() == [pings] and sessions["received"].tolist() == [pings]


def test_the_clock_warning_is_said_once_as_for_the_whole_read():
    path = ROOT / "tests" / "data" / "fuzz" / "cwnd-rtt-past-int64.pcapng"
    with pytest.warns(ps.ClockWarning) as said:
        got = read_needed(path, ECHO)
    assert len([w for w in said if issubclass(w.category, ps.ClockWarning)]) == 1
    assert got.warnings and "1970" in got.warnings[0]


UDP_ROWS = Needs(("frame_number", "udp_srcport", "payload_len"), lambda cap: cap.layer(schema.UDP))


@pytest.mark.parametrize("path", CAPTURES[:3], ids=lambda p: p.name)
def test_several_keepers_in_one_pass_keep_what_each_alone_would(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        echo, udp = read_kept(path, [Kept(ECHO), Kept(UDP_ROWS)], window_bytes=1 << 16)
        for got, needs in ((echo, ECHO), (udp, UDP_ROWS)):
            alone = read_needed(path, needs)
            assert got.packets_in_file == alone.packets_in_file
            columns, layers = alone.kept_names(needs)
            for name in columns:
                assert np.array_equal(got.column(name), alone.column(name)), name
            for name in layers:
                assert np.array_equal(got.layer(name), alone.layer(name)), name


def test_derived_columns_at_some_rows_equal_the_whole_columns_there():
    cap = _read(ROOT / "captures" / "ping-sweep-sender.pcap")
    rows = np.flatnonzero(cap.layer(schema.ICMP_ECHO))[::3]
    mask = (cap.column("frame_number") % 2) == 0
    for name in ("payload_offset", "payload_cap_len", "frame_time_ns", "ip_fragment"):
        for at in (rows, mask, slice(2, 9)):
            got, want = cap.column_at(name, at), cap.column(name)[at]
            assert got.dtype == want.dtype and np.array_equal(got, want), name


def test_read_at_gives_the_bytes_at_each_offset_plain_or_gzipped(tmp_path):
    src = ROOT / "captures" / "ping-sweep-sender.pcap"
    gz = tmp_path / "x.pcap.gz"
    with open(src, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    data = src.read_bytes()
    offsets = np.array([0, 24, 1000, len(data) - 16])
    for path in (src, gz):
        with open_source(path) as s:
            got = s.read_at(offsets, 16)
            assert got.dtype == np.uint8 and got.shape == (4, 16)
            assert [bytes(r) for r in got] == [data[o:o + 16] for o in offsets]
            with pytest.raises(IndexError):
                s.read_at(np.array([len(data) - 8]), 16)
