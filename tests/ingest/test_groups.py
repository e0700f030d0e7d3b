"""ingest.groups: a per-stream analysis of a path read grouped by TCP stream and spilled to disk
past a table budget answers bit for bit as on the whole table -- every stream, one stream, the
default stream, their errors -- and its scratch directory goes however the analysis ends.  The
whole-table answers are checked against tshark and the sender's kernel in tests/analyses; here
the per-stream flags of a spilled read are also counted against tshark directly."""

import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import pcapstats as ps
from pcapstats.analyses.reassembly import reassemble, reassemble_file
from pcapstats.analyses.tcpseq import STREAM_NEEDS
from pcapstats.ingest import read_kept
from pcapstats.ingest.groups import BUCKETS, BUDGET_ENV, ByStream, Spilled, table_budget
from tests.helpers.partial import answer
from tests.helpers.tshark_ref import tshark_fields

ROOT = Path(__file__).resolve().parents[2]
MULTI = [ROOT / "captures" / n for n in (
    "sp-3pairs-reno+cubic+bbr.pcap", "iperf3-4flows.pcap", "tcp_2streams.pcap",
    "udp_ping.pcapng")] + [ROOT / "tests" / "data" / "tcp_dupack.pcapng"]
MANY = ROOT / "tests" / "data" / "of13_ericsson.pcapng"   # 21 TCP streams: groups hold two
# (analysis, options): every stream, one, the default, all, one missing, the receiver side
RUNS = [("retrans", {}), ("retrans", {"stream": 1}), ("retrans", {"stream": 42}),
        ("flavour", {}), ("flavour", {"stream": 2}),
        ("cwnd", {}), ("cwnd", {"stream": 1, "side": "receiver"}), ("cwnd", {"stream": "all"}),
        ("rtt", {}), ("rtt", {"stream": 3}), ("rtt", {"stream": "all"}),
        ("seqgraph", {}), ("seqgraph", {"stream": "all"}),
        ("tcp_analysis", {}), ("tcp_analysis", {"stream": 2}), ("tcp_analysis", {"stream": 1}),
        ("verify", {}), ("verify", {"stream": 1}), ("verify", {"app": "iperf3"})]
BUDGETS = ("1", "30000")     # bytes: spill at the first window, or a few windows in


@pytest.fixture
def spill_dir(tmp_path, monkeypatch):
    """Scratch directories go to a folder of this test's, so what is left is seen."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("path", MULTI + [MANY], ids=lambda p: p.name)
def test_spilled_reads_answer_as_the_whole_table(path, spill_dir, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = ps.read(path)
        for name, options in RUNS:
            analysis = getattr(ps, name)
            want = answer(analysis, whole, **options)
            for budget in BUDGETS:
                monkeypatch.setenv(BUDGET_ENV, budget)
                assert answer(analysis, path, **options) == want, (name, options, budget)
    assert not list(spill_dir.iterdir())


@pytest.mark.parametrize("path", MULTI + [MANY], ids=lambda p: p.name)
def test_verify_reassembles_a_spilled_read_as_the_whole_table(path, spill_dir, monkeypatch):
    """Every map reassembly keeps (in its own types) and verify's whole report, evidence lines
    included, from batches of stream groups equal those of the whole table."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = reassemble(ps.read(path))
        report = ps.verify(ps.read(path)).to_text(width=200)
        for budget in BUDGETS:
            monkeypatch.setenv(BUDGET_ENV, budget)
            grouped, _ = reassemble_file(path)
            for name in ("pieces", "holes", "flows"):
                want, got = getattr(whole, name), getattr(grouped, name)
                assert list(got) == list(want), name
                for column in want:
                    assert got[column].dtype == want[column].dtype, (name, column)
                    assert np.array_equal(got[column], want[column]), (name, column, budget)
            for column, values in vars(whole.segments).items():
                assert np.array_equal(getattr(grouped.segments, column), values), column
            assert ps.verify(path).to_text(width=200) == report, budget
    assert not list(spill_dir.iterdir())


def _spilled(path, budget):
    keeper = ByStream(STREAM_NEEDS, budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = read_kept(path, [keeper], window_bytes=1 << 16)[0]
    return keeper, kept


def test_a_batch_holds_whole_streams_in_frame_order(spill_dir):
    path = MULTI[1]                                   # four iperf3 flows and the control one
    whole = ps.read(path)
    keeper, kept = _spilled(path, 1)
    with keeper:
        assert isinstance(kept, Spilled)
        seen = []
        for cap in kept.captures():
            frames = cap.column("frame_number")
            assert np.all(np.diff(frames) > 0)
            streams = np.unique(cap.column("tcp_stream"))
            seen += streams.tolist()
            rows = np.flatnonzero(whole.layer("tcp") & np.isin(whole.column("tcp_stream"), streams))
            for name in ("frame_time_ns", "tcp_seq_raw", "tcp_sack_le1_raw", "direction", "ip_ttl"):
                assert np.array_equal(cap.column(name), whole.column(name)[rows]), name
            assert cap.packets_in_file == len(whole)
            assert cap.first_time_ns == whole.first_time_ns
        assert sorted(seen) == np.unique(whole.column("tcp_stream")[whole.layer("tcp")]).tolist()
        assert len(os.listdir(keeper.spill.dir)) == BUCKETS
    assert not list(spill_dir.iterdir())


def test_the_scratch_directory_goes_when_the_analysis_is_interrupted(spill_dir, monkeypatch):
    monkeypatch.setenv(BUDGET_ENV, "1")
    from pcapstats.analyses.flavour import result as module   # where flavour() calls it

    def interrupted(cap, stream):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "flavour_stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ps.flavour(MULTI[0])
    assert not list(spill_dir.iterdir())


def test_a_file_that_fits_is_not_spilled(spill_dir, monkeypatch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    keeper, kept = _spilled(MULTI[0], table_budget(os.path.getsize(MULTI[0])))
    with keeper:
        assert isinstance(kept, ps.Capture) and keeper.spill is None
    assert not list(spill_dir.iterdir())


def test_the_budget(monkeypatch):
    from pcapstats.ingest import groups
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    monkeypatch.setattr(groups, "memory_room", lambda: None)
    assert table_budget(10 << 20) == 64 << 20            # small files: 64 MiB
    assert table_budget(1000 << 20) == 400 << 20         # 40 % of the file
    assert table_budget(100 << 30) == 1 << 30            # at most 1 GiB
    monkeypatch.setattr(groups, "memory_room", lambda: 400 << 20)
    assert table_budget(1000 << 20) == 100 << 20         # a quarter of the room left
    monkeypatch.setenv(BUDGET_ENV, "12345")
    assert table_budget(1 << 30) == 12345


def test_the_room_is_the_systems_available_memory_at_most():
    from pcapstats.ingest.groups import memory_room
    with open("/proc/meminfo") as f:
        available = next(int(line.split()[1]) * 1024 for line in f
                         if line.startswith("MemAvailable:"))
    room = memory_room()
    assert room is not None and 0 < room <= available * 1.1


def test_spilled_flags_per_stream_equal_tsharks(spill_dir, monkeypatch):
    """retrans' Wireshark flags of each stream, read with the budget that spills the other
    per-stream analyses (retrans itself keeps no table: it analyses the windows as they are
    read), against tshark's own tcp.analysis fields on the same capture."""
    path = MULTI[0]
    monkeypatch.setenv(BUDGET_ENV, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counts = ps.retrans(path).table("counts")
    ref = tshark_fields(path, ("tcp.stream", "tcp.analysis.retransmission",
                               "tcp.analysis.out_of_order", "tcp.analysis.duplicate_ack",
                               "tcp.analysis.lost_segment"))
    for flag, field in (("retransmission", "tcp.analysis.retransmission"),
                        ("out_of_order", "tcp.analysis.out_of_order"),
                        ("duplicate_ack", "tcp.analysis.duplicate_ack"),
                        ("lost_segment", "tcp.analysis.lost_segment")):
        flagged = ref[ref[field].notna()]
        want = flagged.groupby(flagged["tcp.stream"].astype(int)).size().to_dict()
        got = {}
        for s, n in zip(counts["stream"], counts[flag]):
            got[int(s)] = got.get(int(s), 0) + int(n)
        assert {s: n for s, n in got.items() if n} == want, flag
    assert not list(spill_dir.iterdir())


def test_a_killed_processs_scratch_directory_goes_at_the_next_spill(spill_dir, monkeypatch):
    """SIGKILL (or the kernel's OOM killer) runs no exit path: the next spill removes the
    directories of processes that are gone, and leaves a live one's and others' alone."""
    import subprocess
    import sys
    from pcapstats.ingest.groups import SPILL_PREFIX
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = spill_dir / f"{SPILL_PREFIX}{int(child.stdout)}-abc"
    alive = spill_dir / f"{SPILL_PREFIX}{os.getpid()}-def"
    other = spill_dir / "pcapstats-spill-notapid"
    for d in (dead, alive, other):
        d.mkdir()
        (d / "0.bin").write_bytes(b"x")
    monkeypatch.setenv(BUDGET_ENV, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ps.tcp_analysis(MULTI[0])
    assert not dead.exists() and alive.exists() and other.exists()


def test_one_long_flow_is_not_spilled_for_nothing(spill_dir):
    """The largest group is loaded whole anyway: a capture of one flow stays in memory past
    the budget, one whose rows spread over streams is spilled."""
    one = ROOT / "captures" / "sp-reno-loss1pct.pcap"          # one simpleperf connection
    keeper, kept = _spilled(one, 1)
    with keeper:
        assert isinstance(kept, ps.Capture) and keeper.spill is None
    keeper, kept = _spilled(MULTI[1], 1)                       # four iperf3 flows
    with keeper:
        assert isinstance(kept, Spilled)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("retrans", "flavour", "cwnd"):
            want = answer(getattr(ps, name), ps.read(one))
            os.environ[BUDGET_ENV] = "1"
            try:
                assert answer(getattr(ps, name), one) == want, name
            finally:
                del os.environ[BUDGET_ENV]
    assert not list(spill_dir.iterdir())
