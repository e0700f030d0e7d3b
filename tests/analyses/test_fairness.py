"""pcapstats fairness against answers known by construction and against iperf3's own reports.

- hand-built TCP flows with known goodput in their common window, re-sent segments left out;
  parallel connections of one host pair added up with ``by="pair"``;
- lab runs of three iperf3 pairs sharing a bottleneck: the index within 0.01 of the one from
  iperf3's per-flow receiver reports.
"""
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import craft as c
from tests.helpers.partial import assert_answers_as_on_the_whole_file
from tests.helpers.paths import CAPTURES, DATA

import pcapstats as ps
from pcapstats.analyses.fairness import GROUPINGS, READS, jain, rows_needed
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
