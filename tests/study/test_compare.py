"""`ps.compare` and `pcapstats compare`: every number equals the one its own command gives,
groups are aggregated as numpy and statistics do it, and the command line behaves (order kept
with -j, one line a failing capture, one line for bad input)."""
import contextlib
import io
import json
import math
import statistics
import warnings

import numpy as np
import pandas as pd
import pytest
from tests.helpers.paths import CAPTURES, DATA
from tests.helpers.tshark_ref import tshark_fields

import pcapstats as ps
from pcapstats.analyses.tcp_analysis import resent_packets
from pcapstats.cli import main
from pcapstats.errors import PcapstatsError
from pcapstats.streams import own_transport

SHIPPED = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
# Student's t, 97.5 % quantiles, from a printed table (independent of pcapstats.stats)
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 9: 2.2622}


@contextlib.contextmanager
def _quiet():
    """The shipped captures' warnings are other tests' business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture(scope="module")
def study():
    """Every shipped capture's row, by capture (two workers, as the command runs it)."""
    with _quiet():
        result = ps.compare([str(p) for p in SHIPPED], jobs=2)
    rows = result.table("captures")
    return {c: {k: v[i] for k, v in rows.items()} for i, c in enumerate(rows["capture"])}


def _same(a, b):
    if isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and math.isnan(a)
    return a == b


def _or_nan(run):
    try:
        return run()
    except PcapstatsError:
        return math.nan


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_number_is_the_single_commands(study, path):
    row = study[str(path)]
    with _quiet():
        io_graph = ps.iograph(path).table("summary")
        assert row["avg_bps"] == io_graph["avg_capture_bps"][0]
        assert row["mean_transfer_bps"] == io_graph["mean_transfer_bps"][0]
        assert row["peak_bps"] == io_graph["peak_bps"][0] and row["interval_s"] == 1.0
        counts = ps.retrans(path).table("counts")
        if len(counts["stream"]):
            data = [max(np.flatnonzero(counts["stream"] == s),
                        key=lambda i: counts["payload_bytes"][i])
                    for s in np.unique(counts["stream"])]
            assert row["resent"] == counts["resent"][data].sum()
            assert row["resent_share"] == pytest.approx(
                counts["resent"][data].sum() / counts["packets"][data].sum())
        else:
            assert math.isnan(row["resent"])
        rtt = _or_nan(lambda: ps.rtt(path).table("path")["path_rtt_ms"][0])
        assert _same(row["rtt_ms"], rtt)
        try:      # `pcapstats flavour FILE`'s row of the main stream (rtt's default), if any
            main_stream = ps.rtt(path).stream
            f = ps.flavour(path).table()
            at = np.flatnonzero(f["stream"] == main_stream)
            assert row["tcp_stream"] == main_stream
        except PcapstatsError:
            assert row["flavour"] == "" and math.isnan(row["tcp_stream"])
        else:
            if len(at):
                assert (row["flavour"], row["flavour_confidence"]) == (f["label"][at[0]],
                                                                      f["confidence"][at[0]])
            else:                          # flavour lists only streams it can judge
                assert row["flavour"] == "" and math.isnan(row["flavour_confidence"])
        assert _same(row["jain_index"],
                     _or_nan(lambda: ps.fairness(path).table("summary")["jain_index"][0]))
        try:
            flows = ps.udp(path).table()
            main = int(np.argmax(flows["datagrams"]))
            assert _same(row["udp_loss_pct"], flows["loss_pct"][main])
            assert _same(row["jitter_ms"], flows["jitter_ms"][main])
        except PcapstatsError:
            assert math.isnan(row["udp_loss_pct"]) and math.isnan(row["jitter_ms"])
        verdict = ps.verify(path)
        assert row["verdict"] == (verdict.verdict if verdict.verdicts else "")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_goodput_is_first_time_payload_packet_by_packet(study, path):
    """fairness' definition, from the packets (not from the tables compare reads)."""
    with _quiet():
        cap = ps.read(path)
    tcp_rows, resent = resent_packets(cap)
    good = int(np.where(resent, 0, cap.column("tcp_len")[tcp_rows]).sum())
    udp_rows = np.flatnonzero(own_transport(cap, "udp"))
    good += int(cap.column("payload_len")[udp_rows].sum())
    t = cap.column("frame_time_ns")
    span = (int(t.max()) - int(t[0])) / 1e9
    if len(tcp_rows) + len(udp_rows) == 0:
        assert math.isnan(study[str(path)]["goodput_bps"])
    else:
        assert study[str(path)]["goodput_bps"] == pytest.approx(good * 8 / span, rel=1e-12)


def test_groups_are_mean_sd_and_student_t_interval(tmp_path):
    """Four captures a group (a study file puts them together), checked with numpy, statistics
    and a printed t table."""
    study_file = tmp_path / "study.csv"
    study_file.write_text("file,group\nsp-reno-*.pcap,a\nsp-cubic-*.pcap,b\n"
                          "sp-bbr-loss1pct.pcap,c\n")
    files = sorted(CAPTURES.glob("sp-reno-loss*.pcap")) + \
        sorted(CAPTURES.glob("sp-cubic-loss*.pcap")) + [CAPTURES / "sp-bbr-loss1pct.pcap"]
    with _quiet():
        r = ps.compare(files, by="group", study=study_file)
    caps, groups = r.to_pandas("captures"), r.to_pandas("groups")
    assert list(groups["group"]) == ["a", "b", "c"] and list(groups["n"]) == [4, 4, 1]
    for g, name in enumerate(("a", "b")):
        for m in ("avg_bps", "peak_bps", "goodput_bps", "rtt_ms", "resent_share", "resent"):
            v = caps.loc[caps["group"] == name, m].to_numpy(float)
            assert groups[m][g] == pytest.approx(np.mean(v), rel=1e-12)
            assert groups[f"sd_{m}"][g] == pytest.approx(statistics.stdev(v), rel=1e-9)
            assert groups[f"ci95_{m}"][g] == pytest.approx(
                T975[3] * statistics.stdev(v) / math.sqrt(4), rel=1e-4)
    one = groups.iloc[2]
    assert math.isnan(one["sd_avg_bps"]) and math.isnan(one["ci95_avg_bps"])
    assert one["avg_bps"] == caps.loc[caps["group"] == "c", "avg_bps"].iloc[0]
    assert groups["flavour"][2] == caps.loc[caps["group"] == "c", "flavour"].iloc[0]


def test_student_t_quantiles_against_a_printed_table():
    from pcapstats.stats import mean_interval, t_quantile
    for df, t in T975.items():
        assert t_quantile(0.975, df) == pytest.approx(t, rel=2e-3)
    values = [3.0, 5.0, 4.0, 8.0, np.nan]
    mi = mean_interval(values)
    assert (mi.n, mi.mean) == (4, 5.0)
    assert mi.sd == pytest.approx(statistics.stdev([3, 5, 4, 8]))
    assert mi.ci95 == pytest.approx(T975[3] * mi.sd / 2, rel=1e-3)


def test_labels_sort_numerically_and_metrics_that_do_not_apply_are_empty():
    files = [CAPTURES / f"sp-reno-loss{n}pct.pcap" for n in (30, 10, 1, 0)] + \
        [CAPTURES / "ping-sweep.pcap"]
    with _quiet():
        r = ps.compare(files, by="loss")
    groups = r.table("groups")
    assert list(groups["loss"]) == ["0%", "1%", "10%", "30%", ""]     # no loss set: last
    caps = r.table("captures")
    ping = list(caps["capture"]).index(str(CAPTURES / "ping-sweep.pcap"))
    assert math.isnan(caps["rtt_ms"][ping]) and caps["flavour"][ping] == ""
    assert math.isnan(caps["goodput_bps"][ping]) and caps["verdict"][ping] == "pass"
    assert "no TCP packets" in r.measured[ping].why["rtt"]


def test_a_capture_a_path_or_a_list_and_its_notebook_display():
    path = CAPTURES / "tcp_2streams.pcap"
    with _quiet():
        one = ps.compare(path, metrics="avg_bps,jain_index")
        both = ps.compare([path, ps.read(path)], metrics=["avg_bps", "jain_index"])
    assert "capture" not in one.table() and list(both.table())[0] == "capture"
    assert one.table()["avg_bps"][0] == both.table()["avg_bps"][1]
    assert list(one.table()) == ["cc", "delay", "rate", "pairs", "trial", "tool", "avg_bps",
                                 "jain_index", "interval_s"]
    bundle = both._repr_mimebundle_()
    assert "<table" in bundle["text/html"] and bundle["image/png"][:4] == b"\x89PNG"


def test_bad_requests_raise_before_reading():
    with pytest.raises(ps.UsageError, match="unknown metric 'speed'"):
        ps.compare([CAPTURES / "udp_ping.pcapng"], metrics="speed")
    with pytest.raises(ps.UsageError, match="no capture has a label 'distance'"):
        ps.compare([CAPTURES / "udp_ping.pcapng"], by="distance")
    with pytest.raises(ps.UsageError, match="needs one capture or more"):
        ps.compare([])
    with pytest.raises(ps.UsageError, match="has the name of a column"):
        ps.compare([CAPTURES / "udp_ping.pcapng"], labels=["(?P<n>udp)"])


# -- the command ------------------------------------------------------------------------------

def _run(args, capsys, monkeypatch, width=100):
    monkeypatch.setenv("COLUMNS", str(width))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_csv_and_json_carry_raw_units_and_workers_keep_the_order(capsys, monkeypatch):
    files = [str(p) for p in SHIPPED]
    code, one, _ = _run(["compare", *files, "-f", "csv", "-j", "1"], capsys, monkeypatch)
    code2, two, _ = _run(["compare", *files, "-f", "csv", "-j", "2"], capsys, monkeypatch)
    assert code == code2 == 0 and one == two
    table = pd.read_csv(io.StringIO(one))
    assert list(table.columns[:2]) == ["capture", "cc"]
    assert {"avg_bps", "peak_bps", "goodput_bps", "rtt_ms", "verdict"} <= set(table.columns)
    assert table["avg_bps"].max() > 1e6                       # bits/s, not Mbit/s
    _, out, _ = _run(["compare", *files[:3], "-f", "json", "--by", "tool"], capsys,
                     monkeypatch)
    rows = json.loads(out)
    assert rows[0].keys() >= {"tool", "n", "avg_bps", "sd_avg_bps", "ci95_avg_bps"}


def test_human_tables_fit_and_say_their_units(capsys, monkeypatch):
    files = [str(p) for p in SHIPPED]
    for width in (80, 100, 200):
        for extra in ([], ["--by", "cc,loss"], ["--by", "tool", "--captures"]):
            code, out, _ = _run(["compare", *files, *extra], capsys, monkeypatch, width)
            assert code == 0
            lines = out.splitlines()
            assert all(len(line) <= width for line in lines), (width, extra)
            assert any("Mbit/s" in line for line in lines[1:3])   # under one or two lines
    _, out, _ = _run(["compare", *files, "--by", "cc,loss"], capsys, monkeypatch, 200)
    assert "flavour" in out.splitlines()[0] and "verify" in out.splitlines()[0]


def test_one_failing_capture_is_one_line_and_the_others_go_on(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\xd4\xc3\xb2\xa1" + b"\x00" * 10)
    files = [str(CAPTURES / "sp-reno-loss1pct.pcap"), str(bad),
             str(CAPTURES / "sp-reno-loss10pct.pcap")]
    for jobs in ("1", "2"):
        code, out, err = _run(["compare", *files, "-f", "csv", "-j", jobs], capsys,
                              monkeypatch)
        assert code == 2
        errors = [line for line in err.splitlines() if line.startswith("pcapstats: error:")]
        assert len(errors) == 1 and "bad.pcap" in errors[0], err
        assert "Traceback" not in err
        assert len(pd.read_csv(io.StringIO(out))) == 2


@pytest.mark.parametrize("args, message", [
    (["--by", "distance"], "no capture has a label 'distance'"),
    (["--metrics", "speed"], "unknown metric 'speed'"),
    (["--label", "loss(\\d+"], "bad --label pattern"),
    (["--study", "/nonexistent/study.csv"], "cannot read the study file"),
    (["--iographs"], "--iographs chooses the figure"),
    (["-o", "x.html"], "cannot write '.html' output"),
    (["--interval", "0"], "interval"),
    (["-j", "0"], "-j"),
])
def test_bad_input_is_one_error_line(args, message, capsys, monkeypatch):
    code, out, err = _run(["compare", str(CAPTURES / "udp_ping.pcapng"), *args], capsys,
                          monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("pcapstats: error:"), err
    assert message in lines[0] and "Traceback" not in err


def test_figures_are_written(tmp_path, capsys, monkeypatch):
    files = [str(p) for p in sorted(CAPTURES.glob("sp-*loss*.pcap"))]
    for extra, name in ((["--by", "cc,loss"], "m.png"), (["--by", "loss", "--iographs"],
                                                         "io.svg")):
        code, out, err = _run(["compare", *files, *extra, "-o", str(tmp_path / name)], capsys,
                              monkeypatch)
        assert code == 0 and (tmp_path / name).stat().st_size > 10_000, err
        assert out.strip()                    # the table is still printed


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_bug_on_one_capture_fails_that_capture_alone(jobs, capsys, monkeypatch):
    from pcapstats.study import metrics
    real = metrics._RUN["udp"]

    def broken(cap, interval):
        if cap.path.endswith("udp_ping.pcapng"):
            raise IndexError("index 0 is out of bounds")
        return real(cap, interval)
    monkeypatch.setitem(metrics._RUN, "udp", broken)
    files = [str(CAPTURES / "iperf3-udp-loss1pct.pcap"), str(CAPTURES / "udp_ping.pcapng")]
    code, out, err = _run(["compare", *files, "-f", "csv", "-j", jobs], capsys, monkeypatch)
    assert code == 2 and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "internal error: IndexError" in errors[0]
    assert "udp_ping.pcapng" in errors[0]
    assert list(pd.read_csv(io.StringIO(out))["capture"]) == files[:1]


WIFI = ["ieee802.11_exthdr.pcap", "ieee802.11_meshid.pcap", "ieee802.11_rx-stbc.pcap",
        "wpa2linkuppassphraseiswireshark.pcap"]


def test_signal_is_the_median_tshark_reads_from_radiotap():
    """A distance study puts throughput beside signal: each Wi-Fi capture's signal_dbm is the
    median of tshark's radiotap.dbm_antsignal (the first antenna's where there are several);
    a wired capture has none, and the table shows the column only when some capture has it."""
    paths = [DATA / name for name in WIFI] + [CAPTURES / "tcp_2streams.pcap"]
    with _quiet():
        result = ps.compare(paths)
    got = dict(zip(result.table("captures")["capture"], result.table("captures")["signal_dbm"]))
    for path in paths[:-1]:
        frames = tshark_fields(path, ("radiotap.dbm_antsignal",))   # the first occurrence
        values = [int(v) for v in frames["radiotap.dbm_antsignal"].dropna()]
        assert values and got[str(path)] == statistics.median(values), path.name
    assert math.isnan(got[str(paths[-1])])
    assert "signal_dbm" in [s.column for s in result.view["captures"]]
    with _quiet():
        wired = ps.compare([CAPTURES / "tcp_2streams.pcap", CAPTURES / "udp_ping.pcapng"])
    assert "signal_dbm" not in [s.column for s in wired.view["captures"]]
