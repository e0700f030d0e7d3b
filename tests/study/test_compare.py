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
from pcapstats.analyses.tcpseq import resent_packets
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


def _transfers(path) -> list[int]:
    """TCP streams with at least 1 % of the capture's payload, the largest first (throughput's
    table, read here apart from pcapstats.study.metrics)."""
    t = ps.throughput(path).to_pandas()
    t["payload"] = t["payload_bytes_a_to_b"] + t["payload_bytes_b_to_a"]
    keep = t[(t["proto"] == "tcp") & (t["payload"] > 0)
             & (t["payload"] >= 0.01 * t["payload"].sum())]
    return keep.sort_values(["payload", "stream"], ascending=[False, True])["stream"].tolist()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_number_is_the_single_commands(study, path):
    row = study[str(path)]
    with _quiet():
        io_graph = ps.iograph(path).table("summary")
        assert row["avg_capture_bps"] == io_graph["avg_capture_bps"][0]
        assert row["avg_transfer_bps"] == io_graph["avg_transfer_bps"][0]
        assert row["peak_bps"] == io_graph["peak_bps"][0] and row["interval_s"] == 1.0
        transfers = _transfers(path)
        if transfers:
            counts = ps.retrans(path).table("counts")
            data = [max(np.flatnonzero(counts["stream"] == s),
                        key=lambda i: counts["payload_bytes"][i]) for s in transfers]
            assert row["resent"] == counts["resent"][data].sum()
            assert row["resent_share"] == pytest.approx(
                counts["resent"][data].sum() / counts["packets"][data].sum())
            path_rtt = ps.rtt(path, stream=transfers[0]).table("path")
            assert row["rtt_min_ms"] == path_rtt["rtt_min_ms"][0]
            assert row["rtt_median_ms"] == path_rtt["rtt_median_ms"][0]
            assert row["tcp_stream"] == transfers[0]
            f = _or_nan(lambda: ps.flavour(path).table())
            at = [] if not isinstance(f, dict) else np.flatnonzero(f["stream"] == transfers[0])
            if len(at):
                assert row["flavour"] == f["flavour"][at[0]]
                assert _same(row["flavour_confidence"], f["flavour_confidence"][at[0]])
            else:                          # flavour lists only streams it can judge
                assert row["flavour"] == "" and math.isnan(row["flavour_confidence"])
        else:                              # no TCP, or only a UDP test's control connection
            for m in ("resent", "resent_share", "rtt_min_ms", "rtt_median_ms", "tcp_stream",
                      "flavour_confidence"):
                assert math.isnan(row[m]), m
            assert row["flavour"] == ""
        assert _same(row["jain_index"],
                     _or_nan(lambda: ps.fairness(path).table("summary")["jain_index"][0]))
        try:
            flows = ps.udp(path).table()
            main = int(np.argmax(flows["datagrams"]))
            assert _same(row["datagram_loss"], flows["datagram_loss"][main])
            assert _same(row["capture_jitter_ms"], flows["capture_jitter_ms"][main])
        except PcapstatsError:
            assert math.isnan(row["datagram_loss"]) and math.isnan(row["capture_jitter_ms"])
        verdict = ps.verify(path)
        assert row["verdict"] == (verdict.verdict if verdict.verdicts else "")


def test_a_udp_test_takes_nothing_from_its_tcp_control_connection(study):
    """iperf3 -u at 10 % loss: its control connection lost packets too (tshark sees them
    re-sent), but the test's row has no re-sends, RTT or flavour."""
    path = CAPTURES / "iperf3-udp-loss10pct.pcap"
    with _quiet():
        counts = ps.retrans(path).table("counts")
    assert counts["resent"].sum() > 0          # the control connection's own re-sends
    row = study[str(path)]
    assert math.isnan(row["resent"]) and math.isnan(row["rtt_median_ms"])
    assert row["datagram_loss"] > 0.05


def test_utilisation_is_goodput_over_the_asked_rate(study):
    """The sidecar asked 10 Mbit/s; utilisation = goodput / 10e6, and empty without a rate."""
    from pcapstats.sidecar import sidecar_for
    asked = 0
    for path in SHIPPED:
        row = study[str(path)]
        where = sidecar_for(path)
        doc = json.loads(where.read_text()) if where.exists() else {}
        rate = (doc.get("measured") or {}).get("rate_asked_bps")
        if rate and not math.isnan(row["goodput_bps"]):
            assert row["utilisation"] == pytest.approx(row["goodput_bps"] / rate, rel=1e-12)
            asked += 1
        else:
            assert math.isnan(row["utilisation"])
    assert asked >= 10


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
        for m in ("avg_capture_bps", "peak_bps", "goodput_bps", "rtt_median_ms", "resent_share",
                  "resent"):
            v = caps.loc[caps["group"] == name, m].to_numpy(float)
            assert groups[m][g] == pytest.approx(np.mean(v), rel=1e-12)
            assert groups[f"sd_{m}"][g] == pytest.approx(statistics.stdev(v), rel=1e-9)
            assert groups[f"ci95_{m}"][g] == pytest.approx(
                T975[3] * statistics.stdev(v) / math.sqrt(4), rel=1e-4)
    one = groups.iloc[2]
    assert math.isnan(one["sd_goodput_bps"]) and math.isnan(one["ci95_goodput_bps"])
    assert one["goodput_bps"] == caps.loc[caps["group"] == "c", "goodput_bps"].iloc[0]
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


# Student's t, 97.5 % quantiles for 1 to 30 degrees of freedom, from a printed table
T975_30 = dict(enumerate((12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                          2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                          2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
                         start=1))


def _fewest_trials(sd: float, half_width: float):
    """The smallest n in the printed table whose t x sd / sqrt(n) is within half_width, and
    whether the table's three decimals could tip it (then the case proves nothing)."""
    for n in range(2, 32):
        width = T975_30[n - 1] * sd / math.sqrt(n)
        if width <= half_width:
            close = abs(width - half_width) < 2e-3 * width or (
                n > 2 and abs(T975_30[n - 2] * sd / math.sqrt(n - 1) - half_width)
                < 2e-3 * half_width)
            return n, close
    return None, False


def test_the_trials_a_width_needs_are_the_fewest_a_printed_t_table_allows():
    """stats.trials_for against a brute search of a printed t table: the smallest n whose
    95 % half-width t(0.975, n - 1) x sd / sqrt(n) is within the width wanted."""
    from pcapstats.stats import trials_for
    checked = 0
    for ratio in np.linspace(0.45, 2.6, 60):         # sd / the half-width wanted: n to 30
        n, close = _fewest_trials(ratio, 1.0)
        if n is None or close:
            continue
        assert trials_for(ratio, 1.0) == n, ratio
        checked += 1
    assert checked > 40
    assert trials_for(0.0, 1.0) == 2                   # no spread: two trials show it
    assert math.isnan(trials_for(float("nan"), 1.0))   # one trial: no spread to go by
    assert math.isnan(trials_for(1.0, 0.0)) and math.isnan(trials_for(1.0, 1e-4))


def test_the_trials_table_sizes_each_group_from_its_own_spread(tmp_path):
    """Groups of four (a study file): the trials table carries the groups table's n, mean, sd
    and interval, the width asked (a share of the mean, or a value) and the fewest trials a
    printed t table gives for it; a group of one has no spread, so no estimate."""
    study_file = tmp_path / "study.csv"
    study_file.write_text("file,group\nsp-reno-*.pcap,a\nsp-cubic-*.pcap,b\n"
                          "sp-bbr-loss1pct.pcap,c\n")
    files = sorted(CAPTURES.glob("sp-reno-loss*.pcap")) + \
        sorted(CAPTURES.glob("sp-cubic-loss*.pcap")) + [CAPTURES / "sp-bbr-loss1pct.pcap"]
    with _quiet():
        r = ps.compare(files, by="group", study=study_file, metrics="goodput,rtt_median")
    groups, caps = r.to_pandas("groups"), r.to_pandas("captures")
    share = r.to_pandas("trials")                       # the default: 10 % of goodput's mean
    assert list(share["n_goodput_bps"]) == [4, 4, 1]
    for g, name in enumerate(("a", "b")):
        v = caps.loc[caps["group"] == name, "goodput_bps"].to_numpy(float)
        assert share["wanted_ci95_goodput_bps"][g] == pytest.approx(0.1 * v.mean(), rel=1e-12)
        assert share["sd_goodput_bps"][g] == pytest.approx(statistics.stdev(v), rel=1e-9)
        n, _ = _fewest_trials(statistics.stdev(v), 0.1 * v.mean())
        assert n is None and share["trials_needed"][g] > 31    # a spread this wide: many
        assert share["more_trials"][g] == share["trials_needed"][g] - 4
    assert math.isnan(share["trials_needed"][2])
    for g, name in enumerate(("a", "b")):       # a width the printed table reaches
        v = caps.loc[caps["group"] == name, "rtt_median_ms"].to_numpy(float)
        sd = statistics.stdev(v)
        want = sd / 1.9                # 17 trials by the printed table
        with _quiet():
            asked = ps.compare(files, by="group", study=study_file, metrics="goodput,rtt_median",
                               trials_for=f"rtt median={want}ms").to_pandas("trials")
        n, close = _fewest_trials(sd, want)
        assert not close and asked["trials_needed"][g] == n
        assert asked["wanted_ci95_rtt_median_ms"][g] == pytest.approx(want)
        assert asked["ci95_rtt_median_ms"][g] == groups["ci95_rtt_median_ms"][g]


def test_small_groups_are_said_and_the_n_behind_each_mean_kept():
    """n = 2 (t = 12.7) and n = 1 groups get a note each; the groups table says for each metric
    the captures its mean is over."""
    paths = [*sorted(CAPTURES.glob("sp-*-loss0pct.pcap")),
             *sorted(CAPTURES.glob("sp-*-loss30pct.pcap")), CAPTURES / "sp-2pairs-reno+cubic.pcap"]
    with _quiet():
        r = ps.compare(paths, by="cc")
    groups = r.to_pandas("groups")
    assert sorted(groups["n"]) == [1, 2, 2, 2]
    assert (groups["n_goodput_bps"] == groups["n"]).all()
    said = [str(n) for n in r.notes]
    assert "1 of 4 groups: one capture, no sd and no ±" in said, said
    few = next(n for n in r.notes if "wider than their spread" in n)
    assert str(few).startswith("3 of 4 groups: 3 trials or fewer")
    assert "t(0.975, 1) = 12.7" in few.detail


def test_labels_sort_numerically_and_metrics_that_do_not_apply_are_empty():
    files = [CAPTURES / f"sp-reno-loss{n}pct.pcap" for n in (30, 10, 1, 0)] + \
        [CAPTURES / "ping-sweep.pcap"]
    with _quiet():
        r = ps.compare(files, by="loss")
    groups = r.table("groups")
    assert list(groups["loss_label"]) == ["0%", "1%", "10%", "30%", ""]   # no loss set: last
    assert np.array_equal(groups["loss"], [0, 0.01, 0.1, 0.3, np.nan], equal_nan=True)
    caps = r.table("captures")
    ping = list(caps["capture"]).index(str(CAPTURES / "ping-sweep.pcap"))
    assert math.isnan(caps["rtt_median_ms"][ping]) and caps["flavour"][ping] == ""
    assert math.isnan(caps["goodput_bps"][ping]) and caps["verdict"][ping] == "pass"
    assert "no TCP transfer" in r.measured[ping].why["rtt"]


def test_a_capture_a_path_or_a_list_and_its_notebook_display():
    path = CAPTURES / "tcp_2streams.pcap"
    with _quiet():
        one = ps.compare(path, metrics="avg,Jain")           # a heading or a word for it
        both = ps.compare([path, ps.read(path)], metrics=["avg_capture_bps", "jain_index"])
    assert "capture" not in one.table() and list(both.table())[0] == "capture"
    assert one.table()["avg_capture_bps"][0] == both.table()["avg_capture_bps"][1]
    assert list(one.table()) == ["cc", "delay_s", "delay_label", "rate_bps", "rate_label",
                                 "pairs", "trial", "tool", "avg_capture_bps", "jain_index",
                                 "interval_s"]
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


@pytest.mark.slow
def test_csv_and_json_carry_raw_units_and_workers_keep_the_order(capsys, monkeypatch):
    files = [str(p) for p in SHIPPED]
    code, one, _ = _run(["compare", *files, "-f", "csv", "-j", "1"], capsys, monkeypatch)
    code2, two, _ = _run(["compare", *files, "-f", "csv", "-j", "2"], capsys, monkeypatch)
    assert code == code2 == 0 and one == two
    table = pd.read_csv(io.StringIO(one))
    assert list(table.columns[:2]) == ["capture", "cc"]
    assert {"avg_capture_bps", "peak_bps", "goodput_bps", "rtt_min_ms", "rtt_median_ms",
            "verdict"} <= set(table.columns)
    assert table["avg_capture_bps"].max() > 1e6               # bits/s, not Mbit/s
    _, out, _ = _run(["compare", *files[:3], "-f", "json", "--by", "tool"], capsys,
                     monkeypatch)
    rows = json.loads(out)
    assert rows[0].keys() >= {"tool", "n", "goodput_bps", "sd_goodput_bps", "ci95_goodput_bps"}


@pytest.mark.slow
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
    assert "flavour" in out          # in a block of its own if need be, never dropped


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
    (["--study", "/nonexistent/study.csv"], "no such study file"),
    (["--iographs"], "--iographs chooses the figure"),
    (["-o", "x.html"], "cannot write '.html' output"),
    (["--interval", "0"], "interval"),
    (["-j", "0"], "-j"),
    (["--trials-for", "goodput=2ms"], "is not a width of goodput_bps"),
    (["--trials-for", "verdict=10%"], "verdict is text, it has no interval"),
    (["-m", "goodput", "--trials-for", "rtt median=2ms"], "is not among the metrics compared"),
    (["--trials-for", "rtt median=fast"], "is not a width of rtt_median_ms"),
    (["--trials-for", "0%"], "not a share above 0"),
    (["--trials-for", "10%", "-o", "x.png"], "--trials-for gives a table"),
])
def test_bad_input_is_one_error_line(args, message, capsys, monkeypatch):
    code, out, err = _run(["compare", str(CAPTURES / "udp_ping.pcapng"), *args], capsys,
                          monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("pcapstats: error:"), err
    assert message in lines[0] and "Traceback" not in err


@pytest.mark.slow
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
    real = metrics.udp

    def broken(cap, **options):
        if cap.path.endswith("udp_ping.pcapng"):
            raise IndexError("index 0 is out of bounds")
        return real(cap, **options)
    monkeypatch.setattr(metrics, "udp", broken)
    files = [str(CAPTURES / "iperf3-udp-loss1pct.pcap"), str(CAPTURES / "udp_ping.pcapng")]
    code, out, err = _run(["compare", *files, "-f", "csv", "-j", jobs], capsys, monkeypatch)
    assert code == 2 and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "internal error: IndexError" in errors[0]
    assert "udp_ping.pcapng" in errors[0]
    assert list(pd.read_csv(io.StringIO(out))["capture"]) == files[:1]


WIFI = ["ieee802.11_exthdr.pcap", "ieee802.11_meshid.pcap", "ieee802.11_rx-stbc.pcap",
        "wpa2linkuppassphraseiswireshark.pcap"]


def _radio_of_the_busier_data_frames(path) -> tuple:
    """(signal, data rate, retry share, which frames) by tshark's fields: the 802.11 data
    frames (wlan.fc.type 2) of the To/From DS value whose frames carried the most bytes, or
    every frame when there are no data frames; medians of the first radiotap occurrences."""
    df = tshark_fields(path, ("frame.len", "radiotap.dbm_antsignal", "radiotap.datarate",
                              "wlan.fc.type", "wlan.fc.ds", "wlan.fc.retry"))
    data = df[df["wlan.fc.type"] == "2"]
    names = {"0x01": "data to AP", "0x02": "data from AP", "0x00": "data, no AP",
             "0x03": "data, AP to AP"}
    if len(data):
        sizes = data.groupby("wlan.fc.ds")["frame.len"].apply(lambda v: v.astype(int).sum())
        ds = sizes.idxmax()
        frames, which = data[data["wlan.fc.ds"] == ds], names[ds]
    else:
        frames, which = df, "all"
    signals = [int(v) for v in frames["radiotap.dbm_antsignal"].dropna()]
    rates = [float(v) * 1e6 for v in frames["radiotap.datarate"].dropna()]
    flags = frames["wlan.fc.retry"].dropna()
    return (statistics.median(signals) if signals else math.nan,
            statistics.median(rates) if rates else math.nan,
            (flags == "1").sum() / len(flags) if len(flags) else math.nan, which)


@pytest.mark.slow
def test_signal_rate_and_retries_are_tsharks_of_the_busier_data_frames():
    """A distance study puts goodput beside the radio: each Wi-Fi capture's signal_dbm,
    datarate_bps and retry_share are those of the 802.11 data frames that went the busier way
    (wifi's main row), computed here from tshark's fields; a wired capture has none, and the
    table shows the columns only when some capture has them."""
    paths = [DATA / name for name in WIFI] + [CAPTURES / "tcp_2streams.pcap"]
    with _quiet():
        result = ps.compare(paths)
    table = result.to_pandas("captures").set_index("capture")
    for path in paths[:-1]:
        row = table.loc[str(path)]
        signal, rate, retries, which = _radio_of_the_busier_data_frames(path)
        assert row.wifi_frames == which, path.name
        for got, want in ((row.signal_dbm, signal), (row.datarate_bps, rate),
                          (row.retry_share, retries)):
            assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want), \
                (path.name, got, want)
    assert math.isnan(table.loc[str(paths[-1]), "signal_dbm"])
    shown = [s.column for s in result.view["captures"]]
    assert {"signal_dbm", "datarate_bps", "retry_share"} <= set(shown)
    with _quiet():
        wired = ps.compare([CAPTURES / "tcp_2streams.pcap", CAPTURES / "udp_ping.pcapng"])
    assert not {"signal_dbm", "datarate_bps", "retry_share"} & \
        {s.column for s in wired.view["captures"]}


# -- typed labels ------------------------------------------------------------------------------

@pytest.mark.slow
def test_labels_are_numbers_a_notebook_can_plot_with_their_text_kept(capsys, monkeypatch,
                                                                     tmp_path):
    """loss a fraction, delay seconds, rate bit/s, trial a number, each sorting as a number in
    pandas; the human table still reads "10%", CSV, JSON and Parquet carry both."""
    files = [CAPTURES / f"sp-reno-loss{n}pct.pcap" for n in (30, 10, 1, 0)]
    with _quiet():
        r = ps.compare(files, by="loss")
    df = r.to_pandas()
    assert df["loss"].tolist() == [0.0, 0.01, 0.1, 0.3]
    assert df.sort_values("loss")["loss_label"].tolist() == ["0%", "1%", "10%", "30%"]
    assert df["delay_s"].tolist() == [0.01] * 4 and df["rate_bps"].tolist() == [10e6] * 4
    assert str(df["trial"].dtype).lower() == "int64" and df["trial"].tolist() == [1] * 4
    groups = r.to_pandas("groups")
    assert groups["loss"].tolist() == [0.0, 0.01, 0.1, 0.3]
    spec = {c.name: c for c in r.spec().columns}
    assert (spec["loss"].unit, spec["delay_s"].unit, spec["rate_bps"].unit) == \
        ("fraction", "s", "bit/s")
    code, out, _ = _run(["compare", *map(str, files), "--by", "loss"], capsys, monkeypatch)
    rows = [line.split()[0] for line in out.splitlines() if line[:1].isdigit()]  # under headings
    assert code == 0 and rows == ["0%", "1%", "10%", "30%"], out
    _, out, _ = _run(["compare", *map(str, files), "-f", "csv"], capsys, monkeypatch)
    table = pd.read_csv(io.StringIO(out))
    assert table["loss"].tolist() == [0.0, 0.01, 0.1, 0.3]
    assert table["loss_label"].tolist() == ["0%", "1%", "10%", "30%"]
    _, out, _ = _run(["compare", *map(str, files), "-f", "json", "--by", "loss"], capsys,
                     monkeypatch)
    assert [(g["loss"], g["loss_label"]) for g in json.loads(out)] == [
        (0.0, "0%"), (0.01, "1%"), (0.1, "10%"), (0.3, "30%")]
    pq = pytest.importorskip("pyarrow.parquet")
    r.to_parquet(tmp_path / "c.parquet", "captures")
    back = pq.read_table(tmp_path / "c.parquet")
    assert back.column("loss").to_pylist() == [0.0, 0.01, 0.1, 0.3]
    assert back.column("loss_label").to_pylist() == ["0%", "1%", "10%", "30%"]
    assert back.schema.field("loss").metadata[b"unit"] == b"fraction"


def test_study_file_and_pattern_labels_are_typed_the_same_way(tmp_path):
    """A study file's rate and a pattern's number read with units as the sidecar's do; a value
    that does not read is empty in the number column, kept as text, and said in a note."""
    study = tmp_path / "study.csv"
    study.write_text("file,bottleneck,delay\nsp-reno-loss1pct.pcap,10mbit,20ms\n"
                     "sp-reno-loss10pct.pcap,500kbit,several\n")
    files = [CAPTURES / "sp-reno-loss1pct.pcap", CAPTURES / "sp-reno-loss10pct.pcap"]
    with _quiet():
        r = ps.compare(files, study=study, labels=[r"loss(?P<loss_pct>\d+)pct"],
                       by="bottleneck_bps")
    df = r.to_pandas()
    assert df["bottleneck_bps"].tolist() == [500e3, 10e6]          # by number: 500k first
    assert df["bottleneck_label"].tolist() == ["500kbit", "10mbit"]
    assert df["loss_pct"].tolist() == [10, 1]
    assert df["delay_label"].tolist() == ["several", "20ms"]
    assert math.isnan(df["delay_s"][0]) and df["delay_s"][1] == 0.02
    assert any("label delay: 'several' does not read" in n for n in r.notes), r.notes
