"""`pcapstats export`: Parquet datasets partitioned by capture.

The numbers are checked against sources that do not share the export's code: DuckDB's sums over
the exported packet dataset against `pcapstats throughput` (its streaming accumulator) and
tshark's ``-z conv,tcp``; the streamed packet table (many row groups) against ``ps.read``'s
DataFrame; every file's schema metadata against the column definitions (schema.COLUMNS and each
result's specs).  Bad input: one line and exit 2, the other captures still written.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import pcapstats as ps  # noqa: E402
from pcapstats import export as ex  # noqa: E402
from pcapstats import schema  # noqa: E402
from pcapstats.analyses import load_all  # noqa: E402
from pcapstats.cli import main  # noqa: E402
from pcapstats.results import RESULT_TYPES  # noqa: E402
from tests.helpers.paths import CAPTURES, DATA  # noqa: E402
from tests.helpers.tshark_ref import conv_table  # noqa: E402

SHIPPED = sorted(str(p) for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))

# The README's query: per-stream sums straight from the exported packets.
PER_STREAM = """
SELECT capture, proto, stream,
       arg_min(ip_src, frame_number) FILTER (direction = 'a_to_b') AS address_a,
       arg_min(port, frame_number) FILTER (direction = 'a_to_b') AS port_a,
       arg_min(ip_dst, frame_number) FILTER (direction = 'a_to_b') AS address_b,
       count(*) AS packets, sum(frame_len) AS bytes,
       count(*) FILTER (direction = 'a_to_b') AS packets_a_to_b,
       count(*) FILTER (direction = 'b_to_a') AS packets_b_to_a,
       coalesce(sum(frame_len) FILTER (direction = 'a_to_b'), 0) AS bytes_a_to_b,
       coalesce(sum(frame_len) FILTER (direction = 'b_to_a'), 0) AS bytes_b_to_a,
       coalesce(sum(payload_len) FILTER (direction = 'a_to_b'), 0) AS payload_bytes_a_to_b,
       coalesce(sum(payload_len) FILTER (direction = 'b_to_a'), 0) AS payload_bytes_b_to_a
FROM (SELECT *, if(tcp_stream IS NOT NULL, 'tcp', 'udp') AS proto,
             coalesce(tcp_stream, udp_stream) AS stream,
             coalesce(tcp_srcport, udp_srcport) AS port
      FROM read_parquet('{dir}/packets/*/*.parquet', hive_partitioning = true)
      WHERE NOT l4_quoted AND coalesce(tcp_stream, udp_stream) IS NOT NULL)
GROUP BY capture, proto, stream
"""
SUMS = ["packets", "bytes", "packets_a_to_b", "packets_b_to_a", "bytes_a_to_b", "bytes_b_to_a",
        "payload_bytes_a_to_b", "payload_bytes_b_to_a"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every shipped capture exported once through the command (two worker processes)."""
    out = tmp_path_factory.mktemp("export")
    assert main(["export", *SHIPPED, "-o", str(out), "--tables", "packets,streams,tcp_analysis",
                 "-j", "2"]) == 0
    return out


def _duckdb_streams(directory) -> pd.DataFrame:
    return duckdb.sql(PER_STREAM.format(dir=directory)).df()


@pytest.mark.slow
def test_duckdb_sums_over_packets_equal_throughput(exported):
    got = _duckdb_streams(exported).set_index(["capture", "proto", "stream"]).sort_index()
    want = ps.throughput(SHIPPED).to_pandas()
    want["capture"] = [p.rsplit("/", 1)[-1] for p in want["capture"]]
    want = want.set_index(["capture", "proto", "stream"]).sort_index()
    assert len(want) > 30 and got.index.equals(want.index)
    for column in SUMS:
        assert (got[column].astype("int64") == want[column].astype("int64")).all(), column
    for column in ("address_a", "port_a", "address_b"):
        assert (got[column].astype(str) == want[column].astype(str)).all(), column
    captures = duckdb.sql(f"SELECT DISTINCT capture FROM read_parquet('{exported}/packets/*/"
                          "*.parquet', hive_partitioning = true)").fetchall()
    assert sorted(c for (c,) in captures) == sorted(p.rsplit("/", 1)[-1] for p in SHIPPED)


def test_readmes_query_gives_throughputs_tcp_numbers(exported):
    """The README's DuckDB example, run as printed (out/ is the export)."""
    readme = (CAPTURES.parent / "README.md").read_text()
    query = re.search(r"```sql\n(.*?)```", readme, re.S)[1].replace("'out/", f"'{exported}/")
    got = duckdb.sql(query).df().set_index(["capture", "stream"])
    want = ps.throughput(SHIPPED, proto="tcp").to_pandas()
    want["capture"] = [p.rsplit("/", 1)[-1] for p in want["capture"]]
    want = want.set_index(["capture", "stream"]).sort_index()
    assert len(want) > 20 and got.index.equals(want.index)
    for column in ("packets", "bytes", "bytes_a_to_b"):
        assert (got[column].astype("int64") == want[column].astype("int64")).all(), column


def test_exported_streams_table_is_throughputs(exported):
    """The streams dataset holds throughput's table, read back with its capture column."""
    got = duckdb.sql(f"SELECT * FROM read_parquet('{exported}/streams/*/*.parquet', "
                     "hive_partitioning = true)").df()
    packets = _duckdb_streams(exported)
    merged = got.merge(packets, on=["capture", "proto", "stream"], suffixes=("", "_pk"))
    assert len(merged) == len(got) == len(packets)
    for column in SUMS:
        assert (merged[column].astype("int64") == merged[f"{column}_pk"].astype("int64")).all()


@pytest.mark.parametrize("name", ["tcp_2streams.pcap", "iperf3-4flows.pcap",
                                  "sp-2pairs-reno+cubic.pcap"])
def test_duckdb_per_stream_packets_equal_tshark_conv(exported, name):
    conv = conv_table(CAPTURES / name, "tcp")
    ours = _duckdb_streams(exported)
    ours = ours[(ours["capture"] == name) & (ours["proto"] == "tcp")]
    key = ["address_a", "port_a", "address_b"]
    ours = ours.astype({"port_a": "int64"})
    joined = conv.merge(ours, on=key, how="outer", indicator=True, suffixes=("_tshark", ""))
    assert (joined["_merge"] == "both").all(), joined[key + ["_merge"]]
    assert len(joined) >= 2
    for column in ("packets", "packets_a_to_b", "packets_b_to_a"):
        assert (joined[f"{column}_tshark"] == joined[column]).all(), column


@pytest.mark.parametrize("name", ["tcp_2streams.pcap", "udp_ping.pcapng",
                                  "sp-reno-loss10pct.pcap"])
def test_streamed_packets_equal_the_whole_table(tmp_path, name):
    """64 KiB windows: many row groups, each window's packets; the file read back equals
    ps.read's DataFrame column by column (frame numbers, relative times, directions and
    addresses carried across windows; <NA> where a layer is missing)."""
    path = CAPTURES / name
    written = ex.export_capture(path, directory=tmp_path, tables=["packets"],
                                window_bytes=1 << 16)
    part = ex.partition(tmp_path, "packets", path)
    meta = pq.ParquetFile(part).metadata
    assert written.row_groups["packets"] == meta.num_row_groups >= path.stat().st_size // (1 << 16)
    got = pq.read_table(part).to_pandas()
    want = ps.read(path).packets
    assert list(got.columns) == list(want.columns) == [c.name for c in schema.COLUMNS]
    assert len(got) == len(want) == written.rows["packets"]
    for c in schema.COLUMNS:
        g, w = got[c.name], want[c.name]
        assert (g.isna().to_numpy() == w.isna().to_numpy()).all(), c.name
        have = ~w.isna().to_numpy()
        if c.dtype in ("category", "str"):
            assert (g[have].astype(str).to_numpy() == w[have].astype(str).to_numpy()).all(), c.name
        else:
            assert np.array_equal(g[have].to_numpy(dtype="float64"),
                                  w[have].to_numpy(dtype="float64")), c.name


def test_packet_schema_metadata_is_the_column_definitions(exported):
    part = next((exported / "packets").glob("*/part-0.parquet"))
    got = pq.read_schema(part)
    assert got.names == [c.name for c in schema.COLUMNS]
    assert got.metadata[b"pcapstats.table"] == b"packets"
    for c in schema.COLUMNS:
        assert got.metadata[f"{c.name}.doc".encode()].decode() == c.doc
        assert got.field(c.name).metadata[b"doc"].decode() == c.doc
        unit = got.metadata.get(f"{c.name}.unit".encode())
        assert (unit.decode() if unit else None) == c.unit, c.name
        assert got.field(c.name).nullable == (c.layer != schema.FRAME), c.name
    # DuckDB reads the same schema back (ip_src as text, the capture from the directory)
    kinds = {row[0]: row[1] for row in duckdb.sql(
        f"DESCRIBE SELECT * FROM read_parquet('{exported}/packets/*/*.parquet', "
        "hive_partitioning = true)").fetchall()}
    assert kinds["ip_src"] == "VARCHAR" and kinds["frame_len"] == "UINTEGER"
    assert kinds["capture"] == "VARCHAR"


def test_tcp_analysis_dataset_has_a_row_per_tcp_packet(exported):
    counts = duckdb.sql(
        f"SELECT capture, count(*) AS n FROM read_parquet('{exported}/tcp_analysis/*/*.parquet',"
        " hive_partitioning = true) GROUP BY capture").df().set_index("capture")["n"]
    tcp = duckdb.sql(
        f"SELECT capture, count(*) AS n FROM read_parquet('{exported}/packets/*/*.parquet', "
        "hive_partitioning = true) WHERE tcp_stream IS NOT NULL AND NOT l4_quoted "
        "GROUP BY capture").df().set_index("capture")["n"]
    assert counts.sum() > 10_000
    assert counts.reindex(tcp.index).fillna(0).astype(int).equals(tcp.astype(int))


# Every analysis on a capture it applies to.
FITTING = {"throughput": "tcp_2streams.pcap", "iograph": "tcp_2streams.pcap",
           "tcp_analysis": "sp-reno-loss1pct.pcap", "retrans": "sp-reno-loss1pct.pcap",
           "rtt": "sp-reno-loss1pct.pcap", "seqgraph": "sp-reno-loss1pct.pcap",
           "cwnd": "sp-reno-loss1pct.pcap", "flavour": "sp-reno-loss1pct.pcap",
           "limits": "sp-reno-loss1pct.pcap",
           "verify": "sp-reno-loss1pct.pcap", "ping": "ping-sweep.pcap",
           "udp": "iperf3-udp-loss1pct.pcap", "fairness": "sp-2pairs-reno+cubic.pcap",
           "delay": "ping-sweep-sender.pcap", "hierarchy": "udp_ping.pcapng",
           "wifi": DATA / "wpa2linkuppassphraseiswireshark.pcap"}     # a path: not shipped


def test_every_analysis_is_listed():
    load_all()
    assert set(FITTING) | {"compare"} == set(RESULT_TYPES)


@pytest.mark.parametrize("analysis", sorted(FITTING) + ["compare"])
def test_to_parquet_of_every_result_carries_its_spec(tmp_path, analysis):
    if analysis == "compare":
        result = ps.compare([str(CAPTURES / "sp-reno-loss1pct.pcap"),
                             str(CAPTURES / "sp-reno-loss10pct.pcap")])
    else:
        result = getattr(ps, analysis)(CAPTURES / FITTING[analysis])
    for name in result.table_names:
        path = tmp_path / f"{name}.parquet"
        result.to_parquet(path, name)
        spec = result.spec(name)
        table = pq.read_table(path)
        assert table.column_names == spec.names
        assert table.num_rows == result.rows(name)
        meta = table.schema.metadata
        assert meta[b"pcapstats.table"].decode() == f"{analysis}.{name}"
        for c in spec.columns:
            assert meta[f"{c.name}.doc".encode()].decode() == c.doc
            assert table.schema.field(c.name).metadata[b"doc"].decode() == c.doc
            assert meta.get(f"{c.name}.unit".encode(), b"").decode() == (c.unit or "")
        if result.rows(name):    # the numbers survive: the first numeric column, row by row
            numeric = [c.name for c in spec.columns if c.dtype in ("int64", "float64")]
            if numeric:
                want = pd.to_numeric(result.to_pandas(name)[numeric[0]]).to_numpy("float64",
                                                                                na_value=np.nan)
                got = table.column(numeric[0]).to_numpy(zero_copy_only=False).astype("float64")
                assert np.array_equal(got, want, equal_nan=True)


def test_tables_by_analysis_name_and_table(tmp_path):
    path = CAPTURES / "sp-reno-loss1pct.pcap"
    assert main(["export", str(path), "-o", str(tmp_path), "--tables",
                 "throughput,cwnd.losses,retrans,iograph.series"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwnd.losses", "iograph.series",
                                                          "retrans", "streams"]
    losses = pq.read_table(ex.partition(tmp_path, "cwnd.losses", path))
    assert losses.column_names == ps.cwnd(path, stream="all").spec("losses").names
    assert losses.num_rows == ps.cwnd(path, stream="all").rows("losses") > 0


# -- bad input ---------------------------------------------------------------------------------

def test_unreadable_capture_fails_alone(tmp_path, capsys):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all, longer than a header")
    good = CAPTURES / "tcp_2streams.pcap"
    out = tmp_path / "out"
    assert main(["export", str(bad), str(good), "-o", str(out), "--tables", "packets,streams",
                 "-j", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pcapstats: error: ") and "bad.pcap" in err[0]
    assert ex.partition(out, "packets", good).exists()
    assert ex.partition(out, "streams", good).exists()
    assert not (out / "packets" / "capture=bad.pcap" / "part-0.parquet").exists()
    assert not list(out.rglob("*.partial"))


def test_an_analysis_that_does_not_apply_has_nothing_to_report(tmp_path, capsys):
    """ping of a capture without echoes: one line, no table; the packets still written, so
    the export answered (exit 0); asked alone, nothing was (exit 1)."""
    path = CAPTURES / "tcp_2streams.pcap"
    assert main(["export", str(path), "-o", str(tmp_path), "--tables", "packets,ping"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pcapstats: nothing to report: "), err
    assert "ping:" in err[0] and "tcp_2streams.pcap" in err[0] and "1414 TCP" in err[0]
    assert ex.partition(tmp_path, "packets", path).exists()
    assert not (tmp_path / "ping").exists()
    assert main(["export", str(path), "-o", str(tmp_path / "b"), "--tables", "ping"]) == 1


@pytest.mark.parametrize("args, said", [
    (["--tables", "packets,nonsense"], "no table named 'nonsense'"),
    (["--tables", "cwnd.nonsense"], "no table named 'cwnd.nonsense'"),
    (["--tables", ","], "names no table"),
])
def test_unknown_table_is_one_line(tmp_path, capsys, args, said):
    out = tmp_path / "out"
    assert main(["export", str(CAPTURES / "tcp_2streams.pcap"), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0]
    assert not out.exists()


def test_unwritable_directory_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["export", str(CAPTURES / "tcp_2streams.pcap"), "-o", str(blocker / "d")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write the export" in err[0] and str(blocker) in err[0]


def test_two_captures_of_one_name_are_told_apart(tmp_path, capsys):
    """t1/run.pcap and t2/run.pcap (two different captures): partitions capture=t1%2Frun.pcap
    and capture=t2%2Frun.pcap, read back by DuckDB as t1/run.pcap and t2/run.pcap, each with
    its own file's packets."""
    sources = {"t1": CAPTURES / "tcp_2streams.pcap", "t2": CAPTURES / "sp-reno-loss1pct.pcap"}
    for d, source in sources.items():
        (tmp_path / d).mkdir()
        (tmp_path / d / "run.pcap").write_bytes(source.read_bytes())
    files = [str(tmp_path / d / "run.pcap") for d in sources]
    out = tmp_path / "out"
    assert main(["export", *files, "-o", str(out), "--tables", "packets"]) == 0
    assert sorted(p.name for p in (out / "packets").iterdir()) == [
        "capture=t1%2Frun.pcap", "capture=t2%2Frun.pcap"]
    counts = dict(duckdb.sql(f"SELECT capture, count(*) FROM read_parquet('{out}/packets/*/"
                             "*.parquet', hive_partitioning = true) GROUP BY capture").fetchall())
    assert counts == {f"{d}/run.pcap": len(ps.read(source)) for d, source in sources.items()}