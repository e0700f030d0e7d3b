"""pcapstats fairness against answers known by construction and against iperf3's own reports.

- hand-built TCP flows with known goodput in their common window, re-sent segments left out;
  parallel connections of one host pair added up with ``by="pair"``;
- lab runs of three iperf3 pairs sharing a bottleneck: the index within 0.01 of the one from
  iperf3's per-flow receiver reports;
- each flow's share per interval from its own start, and the time the flows took to converge:
  hand-built flows whose rates are set second by second, and a lab run of two iperf3 pairs,
  the second started 5 s after the first, against iperf3's own per-second receiver counts.
"""
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import craft as c
from tests.helpers.partial import assert_answers_as_on_the_whole_file
from tests.helpers.paths import CAPTURES, DATA

import pcapstats as ps
from pcapstats.analyses.fairness import (CONVERGE_HOLD, GROUPINGS, READS, WITHIN, jain,
                                         rows_needed)
from pcapstats.capture import Needs
from pcapstats.errors import NothingToReport
from pcapstats.sidecar import load_sidecar

T0 = 1_700_000_000 * 10**9
MS = 1_000_000
RCV = "198.51.100.9"


def _flow(src, sport, times_ms, *, resend_every=0, size=1000):
    """Data segments of ``size`` bytes at times_ms; every resend_every-th also sent again 1 ms
    later.  Returns [(t_ns, frame, goodput bytes)]."""
    out, seq = [], 1000
    for k, t in enumerate(times_ms):
        seg = c.ipv4(c.tcp(sport, 80, seq=seq, ack=1, flags=c.ACK | c.PSH, payload=b"d" * size),
                     src, RCV)
        out.append((T0 + int(t * MS), seg, size))
        if resend_every and k % resend_every == resend_every - 1:
            out.append((T0 + int((t + 1) * MS), seg, 0))
        seq += size
    return out


def _write(tmp_path, *flows):
    packets = sorted((p for f in flows for p in f), key=lambda p: p[0])
    path = tmp_path / "flows.pcap"
    path.write_bytes(c.pcap([c.Record(c.raw(f), t) for t, f, _ in packets], c.LT_RAW,
                            nano=True).data)
    return path


def _expected(flows):
    """Goodput bytes of each flow inside the common window, and the window in s."""
    start = max(min(t for t, _, _ in f) for f in flows)
    end = min(max(t for t, _, _ in f) for f in flows)
    good = [sum(g for t, _, g in f if start <= t <= end) for f in flows]
    return good, (end - start) / 1e9


def test_goodput_over_the_common_window_leaves_resends_out(tmp_path):
    a = _flow("192.0.2.1", 1000, np.arange(0, 1000, 10), resend_every=4)   # 100 kB/s
    b = _flow("192.0.2.2", 1001, np.arange(5, 1500, 20))                  # 50 kB/s, longer
    cc = _flow("192.0.2.3", 1002, np.arange(100, 990, 5))                 # 200 kB/s, later
    result = ps.fairness(_write(tmp_path, a, b, cc))
    good, window = _expected([a, b, cc])
    flows = result.to_pandas("flows")
    assert flows["goodput_bytes"].tolist() == good
    assert np.allclose(flows["goodput_bps"], np.array(good) * 8 / window)
    summary = result.to_pandas("summary").iloc[0]
    x = np.array(good, float)
    assert summary.jain_index == pytest.approx(x.sum() ** 2 / (3 * (x ** 2).sum()))
    assert summary.window == "common" and summary.window_s == pytest.approx(window)


def test_parallel_connections_of_a_pair_count_as_one_flow(tmp_path):
    one = _flow("192.0.2.1", 1000, np.arange(0, 1000, 10))
    two = _flow("192.0.2.1", 1001, np.arange(0, 1000, 10))     # same hosts, a second port
    other = _flow("192.0.2.2", 1002, np.arange(0, 1000, 5))
    path = _write(tmp_path, one, two, other)
    by_stream = ps.fairness(path).to_pandas("summary").iloc[0]
    by_pair = ps.fairness(path, by="pair").to_pandas("summary").iloc[0]
    good, _ = _expected([one, two, other])
    assert by_stream.flows == 3 and by_pair.flows == 2
    assert by_stream.jain_index == pytest.approx(jain(good))
    assert by_pair.jain_index == pytest.approx(jain([good[0] + good[1], good[2]]))


def _paced(src, sport, start_s, per_second):
    """1000-byte segments, per_second[k] of them evenly spread over second k after start_s."""
    times = [1000 * (start_s + k) + j * 1000 / n for k, n in enumerate(per_second)
             for j in range(n)]
    return _flow(src, sport, times)


@pytest.mark.slow
def test_shares_from_each_flows_own_start_and_the_time_to_converge(tmp_path):
    """A sends 100 segments a second for 8 s; B joins at 2 s with 25, 50, 90, 100, 110, 100
    a second.  B's shares, second by second from its own start: 25/125, 50/150, 90/190 (within
    10 % of 1/2), 100/200, 110/210; A's from its own: 1 alone, then 100/125, 100/150, 100/190
    ...  Both first hold the band 3 intervals in a row from 4 s: converged 2 s after B
    joined.  A started first: order 1, start 0 s."""
    a = _paced("192.0.2.1", 1000, 0, [100] * 8)
    b = _paced("192.0.2.2", 1001, 2, [25, 50, 90, 100, 110, 100])
    result = ps.fairness(_write(tmp_path, a, b))
    shares = result.to_pandas("shares")
    b_rows = shares[shares["order"] == 2]
    want = np.array([25 / 125, 50 / 150, 90 / 190, 100 / 200, 110 / 210])
    assert b_rows["since_start_s"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]   # full intervals
    assert np.allclose(b_rows["share"], want)
    assert np.allclose(b_rows["goodput_bps"], np.array([25, 50, 90, 100, 110]) * 8000)
    assert b_rows["within"].tolist() == list(np.abs(want - 0.5) <= WITHIN * 0.5)
    a_rows = shares[shares["order"] == 1]
    assert np.allclose(a_rows["share"], [1, 1, 100 / 125, 100 / 150, 100 / 190, 100 / 200,
                                         100 / 210])
    assert a_rows["fair_share"].tolist() == [1, 1, .5, .5, .5, .5, .5]
    assert a_rows["sharing"].tolist() == [False, False, True, True, True, True, True]
    flows = result.to_pandas("flows")
    assert flows["order"].tolist() == [1, 2] and np.allclose(flows["start_s"], [0, 2])
    assert np.allclose(flows["convergence_s"], [2.0, 2.0])
    assert result.to_pandas("summary").iloc[0].convergence_s == pytest.approx(2.0)
    assert any(n.startswith("start order: the first to start had") for n in result.notes)


@pytest.mark.slow
def test_a_flow_that_never_holds_the_band_did_not_converge(tmp_path):
    """B keeps to 25 segments a second against A's 100 (a share of 20 %), but for one second
    at 100: never CONVERGE_HOLD intervals in a row within 10 % of 1/2."""
    a = _paced("192.0.2.1", 1000, 0, [100] * 8)
    b = _paced("192.0.2.2", 1001, 2, [25, 25, 100, 25, 25, 25])
    result = ps.fairness(_write(tmp_path, a, b))
    assert CONVERGE_HOLD > 1
    assert np.isnan(result.to_pandas("summary").iloc[0].convergence_s)
    assert np.isnan(result.to_pandas("flows")["convergence_s"]).all()
    assert any("did not converge" in n for n in result.notes)


def test_one_flow_is_one_clear_error(tmp_path):
    with pytest.raises(NothingToReport, match="needs two flows or more"):
        ps.fairness(_write(tmp_path, _flow("192.0.2.1", 1000, np.arange(0, 1000, 10))))


def test_jain_bounds():
    assert jain([5, 5, 5]) == pytest.approx(1.0)
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)


@pytest.fixture(scope="module")
def three_pairs():
    """Three iperf3 pairs (reno, cubic, reno) through one 30 Mbit/s bottleneck, 10 ms RTT."""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-fair-") as tmp:
        out = Path(tmp) / "pairs.pcap"
        run(Scenario(tool="iperf3", pairs=3, cc=["reno", "cubic", "reno"], rate="30mbit",
                     delay="5ms", duration_s=6, snaplen=128, capture="receiver"), out)
        yield load_sidecar(out.with_suffix(".json")), out


@pytest.mark.netns
def test_three_pairs_equal_iperf3s_own_reports(three_pairs):
    doc, path = three_pairs
    reported = [r["summary"]["throughput_bps"] for r in doc["reports"]]
    assert len(reported) == 3
    result = ps.fairness(path)
    assert result.to_pandas("summary").iloc[0].flows == 3
    assert abs(result.to_pandas("summary").iloc[0].jain_index - jain(reported)) <= 0.01, \
        (result.to_pandas("flows"), reported)
    by_cc = ps.fairness(path, by="cc").to_pandas("flows")
    assert sorted(by_cc["flow"]) == ["cc cubic", "cc reno"]


@pytest.fixture(scope="module")
def staggered():
    """Two iperf3 pairs (cubic) through one 30 Mbit/s bottleneck, 10 ms RTT, the second
    started 5 s after the first, each sending 15 s."""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-stagger-") as tmp:
        out = Path(tmp) / "staggered.pcap"
        run(Scenario(tool="iperf3", pairs=2, start_offset_s=5.0, cc="cubic", rate="30mbit",
                     delay="5ms", duration_s=15, snaplen=128, capture="receiver"), out)
        yield load_sidecar(out.with_suffix(".json")), out


def _iperf3_per_second(report) -> np.ndarray:
    """The iperf3 server's (receiver's) bits/s in each of its full intervals, counted from its
    own start."""
    rows = report["raw"]["server"]["intervals"]
    return np.array([r["sum"]["bytes"] * 8 / r["sum"]["seconds"] for r in rows
                     if r["sum"]["seconds"] > 0.99])


@pytest.mark.netns
def test_convergence_of_a_flow_started_5_s_later_equals_iperf3s(staggered):
    """The second pair's share of each of its seconds, by iperf3's own per-second receiver
    counts (the first pair's second 5 + k beside the second's k: the lab started it 5 s
    later), and the convergence those give by the same rule, against fairness' own."""
    doc, path = staggered
    assert doc["scenario"]["start_offset_s"] == 5.0
    first, second = (_iperf3_per_second(r) for r in sorted(doc["reports"],
                                                           key=lambda r: r["pair"]))
    result = ps.fairness(path)
    flows = result.to_pandas("flows").sort_values("order")
    assert abs(np.diff(flows["start_s"])[0] - 5.0) < 0.1, flows
    shares = result.to_pandas("shares")
    # each flow's goodput per interval of its own: iperf3's per-second counts
    for order, reported in ((1, first), (2, second)):
        mine = shares[shares["order"] == order]["goodput_bps"].to_numpy()
        n = min(len(mine), len(reported))
        assert n >= 14
        off = np.abs(mine[:n] - reported[:n]) / reported[:n]
        assert off.max() < 0.06 and np.median(off) < 0.01, (order, off)
    # the second flow's share while both sent, and when it held the band 3 seconds in a row
    n = min(len(second), len(first) - 5)
    share = second[:n] / (second[:n] + first[5:5 + n])
    within = np.abs(share - 0.5) <= WITHIN * 0.5
    clear = np.abs(np.abs(share - 0.5) - WITHIN * 0.5) > 0.015      # not on the band's edge
    rows = shares[(shares["order"] == 2) & shares["sharing"]]
    ours = rows["within"].to_numpy()[:n]
    assert (ours == within[:len(ours)])[clear[:len(ours)]].all(), (share, ours)
    run = [k for k in range(n - CONVERGE_HOLD + 1) if within[k:k + CONVERGE_HOLD].all()]
    reported = float(run[0]) if run else float("nan")
    # the second flow's own convergence (the summary's is the slowest flow's: the first flow's
    # seconds, counted from its own start, straddle the second's and need not hold the band)
    got = flows[flows["order"] == 2].iloc[0].convergence_s
    assert (np.isnan(got) and np.isnan(reported)) or abs(got - reported) <= 1.0, \
        (got, reported, share)


def test_parallel_connections_equal_iperf3s_per_stream_reports():
    """The shipped iperf3 -P 4 run: the index over its four connections against the one
    computed from the iperf3 server's own per-stream receiver rates; by pair, one flow."""
    path = CAPTURES / "iperf3-4flows.pcap"
    doc = load_sidecar(path.with_suffix(".json"))
    streams = doc["reports"][0]["raw"]["server"]["end"]["streams"]
    reported = [s["receiver"]["bits_per_second"] for s in streams]
    summary = ps.fairness(path).to_pandas("summary").iloc[0]
    assert summary.flows == len(reported) == 4
    x = np.array(reported)
    assert abs(summary.jain_index - x.sum() ** 2 / (len(x) * (x ** 2).sum())) <= 0.01, \
        (summary, reported)
    with pytest.raises(NothingToReport, match="has 1"):
        ps.fairness(path, by="pair")


# shipped captures with two flows or more (by stream), the clock-step one among them
SEVERAL_FLOWS = [CAPTURES / n for n in (
    "iperf3-4flows.pcap", "pingpong-sweep.pcap", "sp-2pairs-reno+cubic.pcap",
    "sp-3pairs-reno+cubic+bbr.pcap", "tcp_2streams.pcap")] + [
    DATA / "fuzz" / "fairness-timestamp-2106.pcap"]


@pytest.mark.parametrize("by", GROUPINGS)
@pytest.mark.parametrize("path", SEVERAL_FLOWS, ids=lambda p: p.name)
def test_the_rows_and_columns_it_names_give_the_whole_files_answers(path, by):
    """rows_needed's rows and READS' columns alone (cut from the whole table, or read in
    windows that each decide their own rows) give the whole file's tables bit for bit, the
    same notes or the same error, at a coarse and a fine interval."""
    for interval in (1.0, 0.01):
        assert_answers_as_on_the_whole_file(ps.fairness, Needs(READS, rows_needed), path,
                                            by=by, interval=interval)


def test_pure_acks_are_left_out_but_each_directions_first_packets_kept():
    cap = ps.read(CAPTURES / "sp-2pairs-reno+cubic.pcap")
    need = rows_needed(cap)
    pure_ack = (cap.layer("tcp") & (cap.column("tcp_len") == 0)
                & ((cap.column("tcp_flags") & 0x003) == 0))
    assert pure_ack.sum() > 1000 and (need & pure_ack).sum() < 40
    tcp = np.flatnonzero(cap.layer("tcp"))
    key = cap.column("tcp_stream")[tcp] * 2 + cap.column("direction")[tcp]
    assert need[tcp[np.unique(key, return_index=True)[1]]].all()
