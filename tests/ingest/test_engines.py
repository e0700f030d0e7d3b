"""The tshark engine and the fast engine build the same tables (each checks the other)."""
import shutil

import pandas as pd
import pytest

import pcapstats as ps
from tests.helpers.paths import CAPTURES

SHIPPED = sorted(CAPTURES.glob("*.pcap*"))
pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
# columns the tshark engine cannot know (file positions), documented in engines/tshark.py
NO_TSHARK = {"frame_offset", "payload_offset", "payload_cap_len"}


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_throughput_same_with_both_engines(path):
    fast = ps.throughput(ps.read(path)).to_pandas()
    tshark_cap = ps.read(path, engine="tshark")
    ref = ps.throughput(tshark_cap).to_pandas()
    # Not vacuous: one row for each stream tshark numbered (an ICMP-only capture has none).
    packets = tshark_cap.packets
    assert len(fast) == packets["tcp_stream"].nunique() + packets["udp_stream"].nunique()
    pd.testing.assert_frame_equal(fast, ref, check_dtype=False)


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_packet_tables_same_with_both_engines(path):
    fast, ref = ps.read(path), ps.read(path, engine="tshark")
    assert len(fast) == len(ref) > 0
    for name in fast.packets.columns:
        if name in NO_TSHARK:
            continue
        a, b = fast.packets[name], ref.packets[name]
        assert a.astype(str).tolist() == b.astype(str).tolist(), name


def test_tshark_engine_reports_its_failure_in_one_line(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(10))  # header cut short
    with pytest.raises(ps.PcapstatsError):
        ps.read(bad, engine="tshark")
