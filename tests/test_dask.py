"""pcapstats on Dask, on a real distributed.LocalCluster of two worker processes: the commands'
--scheduler gives what -j 1 gives here; pcapstats.dask's tables equal the analyses' own and
the packet DataFrame's per-stream sums equal throughput's; a scheduler that is not there is
one error line within seconds; and nothing imports Dask unless asked."""
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from tests.helpers.paths import CAPTURES, ROOT

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
psd = pytest.importorskip("pcapstats.dask")

import pcapstats as ps  # noqa: E402
from pcapstats.cli import main  # noqa: E402

SP = sorted(str(p) for p in CAPTURES.glob("sp-*loss*pct.pcap"))[:6]
MIXED = [str(CAPTURES / n) for n in ("tcp_2streams.pcap", "sp-2pairs-reno+cubic.pcap",
                                     "iperf3-udp-loss1pct.pcap", "udp_ping.pcapng",
                                     "ping-sweep.pcap")]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, silence_logs=40) as cluster:
        with distributed.Client(cluster) as client:
            where = client.run(lambda: __import__("pcapstats").__file__)
            assert len(where) == 2 and all(f.startswith(str(ROOT)) for f in where.values()), \
                f"the workers import another pcapstats: {where}"
            yield cluster, client


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["compare", *SP, "--by", "cc,loss"],
                                  ["compare", *MIXED, "-f", "csv"],
                                  ["throughput", *MIXED, "-f", "csv"],
                                  ["rtt", *MIXED, "-f", "csv"]],
                         ids=["compare-groups", "compare-captures", "throughput", "rtt"])
def test_scheduler_gives_what_one_process_gives(cluster, argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    transitions = lambda: cluster[1].run_on_scheduler(  # noqa: E731
        lambda dask_scheduler: dask_scheduler.transition_counter)
    here = _run(capsys, [*argv, "-j", "1"])
    before = transitions()
    there = _run(capsys, [*argv, "--scheduler", cluster[0].scheduler_address])
    assert transitions() > before, "nothing ran on the cluster"
    assert there == here
    assert here[1].count("\n") > 3


@pytest.mark.slow
def test_export_on_the_cluster_writes_the_same_files(cluster, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    here, there = tmp_path / "here", tmp_path / "there"
    assert main(["export", *MIXED[:3], "-o", str(here), "-j", "1"]) == 0
    assert main(["export", *MIXED[:3], "-o", str(there),
                 "--scheduler", cluster[0].scheduler_address]) == 0
    files = sorted(p.relative_to(here) for p in here.rglob("*.parquet"))
    assert files == sorted(p.relative_to(there) for p in there.rglob("*.parquet")) and files
    for f in files:
        assert pq.read_table(here / f).equals(pq.read_table(there / f)), f


@pytest.mark.slow
def test_tables_equal_the_analyses_own(cluster):
    """On the cluster (the client is the default): the same rows, columns and dtypes as the
    analysis run here (Dask's own string conversion off, so the declared meta is checked)."""
    with dask.config.set({"dataframe.convert-string": False}):
        for analysis, name, options in [("throughput", None, {}),
                                        (ps.retrans, "counts", {}),
                                        ("iograph", "series", {"by": "stream", "unit": "bytes"}),
                                        ("udp", None, {}),
                                        ("cwnd", "samples", {"stream": "all"})]:
            files = MIXED[:3] if analysis != "udp" else MIXED[2:4]
            frame = psd.table(analysis, files, name, **options)
            got = frame.compute().reset_index(drop=True)
            kind = getattr(analysis, "analysis", analysis)
            want = getattr(ps, kind)(files, **options).to_pandas(name)
            assert len(got) > 0
            pd.testing.assert_frame_equal(got, want)
            assert list(frame._meta.dtypes) == list(got.dtypes), kind


@pytest.mark.slow
def test_packets_per_stream_sums_equal_throughput(cluster):
    files = [MIXED[0], MIXED[1], SP[0]]
    pk = psd.packets(files)
    assert list(pk.columns) == ["capture", *(c.name for c in ps.schema.COLUMNS)]
    tcp = pk[pk.tcp_stream.notnull() & ~pk.l4_quoted]
    tcp = tcp.assign(ab=tcp.frame_len.where(tcp.direction == "a_to_b", 0))
    sums = (tcp.groupby(["capture", "tcp_stream"])
            .agg(packets=("frame_len", "count"), bytes=("frame_len", "sum"),
                 bytes_a_to_b=("ab", "sum"))
            .compute().sort_index())
    want = ps.throughput(files, proto="tcp").to_pandas()
    want = want.set_index(["capture", "stream"]).sort_index()
    assert len(sums) == len(want) >= 4
    for column in ("packets", "bytes", "bytes_a_to_b"):
        assert np.array_equal(sums[column].to_numpy(np.int64), want[column].to_numpy(np.int64)), \
            column
    assert [c for c, _ in sums.index] == [c for c, _ in want.index]


@pytest.mark.slow
def test_packet_meta_has_the_dtypes_of_a_read(cluster):
    frame = ps.read(MIXED[0]).packets
    meta = psd.packet_meta()
    for name in frame.columns:
        if isinstance(frame[name].dtype, pd.CategoricalDtype) and not \
                ps.schema.BY_NAME[name].values:
            assert isinstance(meta[name].dtype, pd.CategoricalDtype)   # addresses: unknown
        else:
            assert meta[name].dtype == frame[name].dtype, name


def test_compare_is_not_a_table_a_capture():
    with pytest.raises(ps.UsageError, match="scheduler"):
        psd.table("compare", MIXED)
    with pytest.raises(ps.UsageError, match="no table 'nope'"):
        psd.table("cwnd", MIXED, "nope")


def test_iograph_declares_the_tables_its_options_give():
    for by in (None, "stream", "direction", "stream+direction"):
        for unit in ("bits", "bytes", "packets"):
            result = ps.iograph(MIXED[0], by=by, unit=unit)
            assert ps.IOGraph.specs_for(by=by, unit=unit) == result.table_specs, (by, unit)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("address", ["tcp://127.0.0.1:{free_port}", "nonsense",
                                     "tcp://no-such-host.invalid:8786"])
def test_a_scheduler_that_is_not_there_is_one_line(address):
    # the free port is found when the test runs: a test's id is the same in every process
    # that collects it (pytest-xdist's workers must agree on them)
    address = address.format(free_port=_free_port())
    t = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pcapstats", "throughput", MIXED[0], MIXED[1],
                          "--scheduler", address], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert time.monotonic() - t < 20
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith(f"pcapstats: error: cannot reach the Dask scheduler at "
                                 f"{address}") and run.stderr.count("\n") == 1, run.stderr


def test_a_server_that_is_not_a_scheduler_is_one_line():
    """Something answers, but not Dask (here: a server that writes garbage and closes)."""
    import threading
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer():
        for _ in range(3):
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)
            conn.close()
    threading.Thread(target=answer, daemon=True).start()
    try:
        run = subprocess.run([sys.executable, "-m", "pcapstats", "throughput", MIXED[0],
                              "--scheduler", f"tcp://127.0.0.1:{server.getsockname()[1]}"],
                             capture_output=True, text=True, cwd=ROOT, timeout=60)
    finally:
        server.close()
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "Traceback" not in run.stderr


def test_dask_is_imported_only_when_asked():
    code = ("import sys, pcapstats; from pcapstats.cli import main; "
            "main(['throughput', sys.argv[1], sys.argv[2], '-j', '2', '-f', 'csv']); "
            "main(['compare', sys.argv[1], sys.argv[2], '-j', '2', '-f', 'csv']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')"
            " or m == 'pcapstats.dask'), file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code, *MIXED[:2]], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "[]", run.stderr


@pytest.mark.slow
def test_dask_option_starts_a_local_cluster_with_the_same_output(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    here = _run(capsys, ["flavour", *MIXED, "-j", "1"])
    there = _run(capsys, ["flavour", *MIXED, "--dask", "-j", "2"])
    assert there == here and here[1].strip()


@pytest.mark.slow
def test_a_scheduler_without_workers_is_one_line(capsys):
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                                  silence_logs=40) as empty:
        t = time.monotonic()
        code, out, err = _run(capsys, ["throughput", *MIXED[:2],
                                       "--scheduler", empty.scheduler_address])
        assert time.monotonic() - t < 20
    assert code == 2 and out == "" and err.count("\n") == 1 and "has no worker" in err, err


@pytest.mark.slow
def test_dask_option_says_nothing_when_the_dashboard_port_is_taken():
    """--dask's cluster takes a free port for its dashboard: with 8787 taken (another cluster,
    a notebook) distributed had warned in four lines on stderr, beside the one-line policy."""
    import socket
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 8787))
            taken.listen()
        except OSError:        # taken already (another test's cluster): the case to test
            pass
        run = subprocess.run([sys.executable, "-m", "pcapstats", "throughput", *MIXED[:2],
                              "--dask", "-j", "2", "-f", "csv"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "8787" not in run.stderr and "Traceback" not in run.stderr, run.stderr
