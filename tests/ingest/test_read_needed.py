"""ingest.read_needed: a path read for one analysis alone (the rows and columns its Needs name)
holds exactly the whole-file table's values at those rows, window edges or not."""

import gzip
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import pcapstats as ps
from pcapstats import schema
from pcapstats.capture import Needs
from pcapstats.ingest import read_needed

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


def test_the_clock_warning_is_said_once_as_for_the_whole_read():
    path = ROOT / "tests" / "data" / "fuzz" / "cwnd-rtt-past-int64.pcapng"
    with pytest.warns(ps.ClockWarning) as said:
        got = read_needed(path, ECHO)
    assert len([w for w in said if issubclass(w.category, ps.ClockWarning)]) == 1
    assert got.warnings and "1970" in got.warnings[0]
