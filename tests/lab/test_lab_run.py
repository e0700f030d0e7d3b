"""Lab runs measured against independent sources: tshark on the capture, the sender kernel's
TCP_INFO, iperf3's and ping's own reports, the impairment's kernel counters.

Runs are short (2-3 s) and slow (10-30 Mbit/s) so the machine's other work hardly matters;
tolerances are the issue's (RTT and rate within 10 % of what was asked) or derived from the
statistics of the thing measured (random loss: binomial).
"""

from __future__ import annotations

import math

import pytest

import pcapstats as ps
from pcapstats.errors import UsageError
from pcapstats.lab import Scenario, load_sidecar, run, run_matrix
from pcapstats.sidecar import placements, sidecar_path
from tests.helpers.tshark_ref import tshark, tshark_fields
from tests.helpers.labtools import rtt_as_asked

pytestmark = pytest.mark.netns


def _frames(path, display_filter: str = "") -> int:
    args = ["-r", str(path), "-T", "fields", "-e", "frame.number"]
    if display_filter:
        args += ["-Y", display_filter]
    return len(tshark(*args).split())


def _tshark_stream(path, flow) -> int:
    proto = flow["proto"]
    rows = tshark_fields(path, ("ip.src", f"{proto}.srcport", "ip.dst", f"{proto}.dstport",
                                f"{proto}.stream"))
    mine = rows[(rows["ip.src"] == flow["src"]) & (rows[f"{proto}.srcport"] == str(flow["sport"]))
                & (rows["ip.dst"] == flow["dst"])
                & (rows[f"{proto}.dstport"] == str(flow["dport"]))]
    streams = set(mine[f"{proto}.stream"])
    assert len(streams) == 1, streams
    return int(streams.pop())


@pytest.fixture(scope="module")
def lossy_run(tmp_path_factory):
    """simpleperf, reno, 10 % loss, 2 x 5 ms delay, 20 Mbit/s, 3 s; captured at the sender."""
    out = tmp_path_factory.mktemp("lossy") / "reno10.pcap"
    scenario = Scenario(tool="simpleperf", loss="10%", delay="5ms", rate="20mbit", cc="reno",
                        duration_s=3, snaplen=128)
    run(scenario, out)
    return out, load_sidecar(sidecar_path(out))


def test_loss_shows_retransmissions_on_the_wire_as_many_as_the_sender_kernel_counted(lossy_run):
    path, doc = lossy_run
    assert doc["status"] == "complete"
    (flow,) = doc["flows"]
    assert flow["cc"] == "reno"
    data = (f"ip.src=={flow['src']} && tcp.srcport=={flow['sport']} && tcp.len>0 && "
            f"tcp.stream=={flow['streams'][path.name]}")
    assert _frames(path, f"{data} && tcp.analysis.retransmission") > 0
    # tshark calls a retransmission sent within an RTT of the previous segment "out of order";
    # the sender's own interface cannot reorder, so both verdicts are retransmissions here.
    on_wire = _frames(path, f"{data} && (tcp.analysis.retransmission || "
                            "tcp.analysis.out_of_order)")
    total_retrans = flow["tcp_info"]["total_retrans"][-1]
    # The last sample is taken just before close, after ACK: BYE: every data retransmission
    # has happened; the capture sees each one.  Allow 2 or 5 % for a retransmitted FIN/BYE race.
    assert abs(on_wire - total_retrans) <= max(2, 0.05 * total_retrans), (on_wire, total_retrans)


def test_tcp_info_series_is_present_and_monotone(lossy_run):
    _, doc = lossy_run
    series = doc["flows"][0]["tcp_info"]
    t = series["t_ns"]
    assert len(t) >= 0.5 * 3 / 0.01  # 10 ms sampling over 3 s, on a busy machine
    assert all(b > a for a, b in zip(t, t[1:]))
    for counter in ("total_retrans", "bytes_acked", "segs_out"):
        values = series[counter]
        assert all(b >= a for a, b in zip(values, values[1:])), counter
    # samples lie within the flow's own time span (same clock as the capture)
    flow = doc["flows"][0]
    assert flow["start_ns"] - 1e9 <= t[0] and t[-1] <= flow["end_ns"] + 1e9


def test_the_sidecar_describes_the_capture(lossy_run):
    path, doc = lossy_run
    (cap,) = doc["captures"]
    assert cap["file"] == path.name and cap["side"] == "sender"
    assert cap["size_bytes"] == path.stat().st_size
    assert cap["packets_captured"] == _frames(path)  # tcpdump's report vs the file
    flow = doc["flows"][0]
    assert flow["streams"][path.name] == _tshark_stream(path, flow)
    assert doc["impairment"]["mechanisms"]["loss"] in ("netem", "iptables-statistic")
    assert doc["tools"]["kernel"] and doc["tools"]["tcpdump"].startswith("tcpdump")
    assert doc["scenario"]["loss"] == "10%"
    # server and client agree: what simpleperf's server counted is what its client sent
    assert flow["received_bytes"] == flow["sent_bytes"] > 0


def test_asked_loss_and_delay_come_out_as_measured(lossy_run):
    _, doc = lossy_run
    m = doc["measured"]
    assert m["rtt_asked_ms"] == 10.0
    assert rtt_as_asked(m["rtt_ms"], 10.0), doc["rtt"]
    counters = doc["impairment"]["counters"]["loss"]["data"]
    n = counters["offered_packets"]
    sd = math.sqrt(0.1 * 0.9 / n)
    assert abs(m["loss_measured"] - 0.1) <= 4 * sd, (m["loss_measured"], n)


def test_the_loss_reported_is_the_loss_on_the_wire(lossy_run):
    """The run's loss (measured, and achieved against asked) within 2 points of what the
    capture shows dropped: the data segments the sender sent again (ps.retrans, at the sender,
    where every transmission is seen), over the data segments it sent."""
    path, doc = lossy_run
    counts = ps.retrans(path).to_pandas("counts")
    flow = doc["flows"][0]
    # the sender opened the connection: side A, its data a_to_b
    mine = counts[(counts.stream == flow["streams"][path.name]) & (counts.direction == "a_to_b")]
    (data,) = mine.itertuples()
    on_wire = data.resent / data.packets
    assert abs(doc["measured"]["loss_measured"] - on_wire) <= 0.02, (doc["measured"], on_wire)
    (loss,) = [ch for ch in doc["achieved"]["checks"] if ch["quantity"] == "loss"]
    assert loss["achieved"] == doc["measured"]["loss_measured"] and loss["in_spec"] is True
    assert "  loss → receiver  " in _summary(doc)


def _summary(doc) -> str:
    from pcapstats.lab.accuracy import lines
    return "\n".join(lines(doc["achieved"]))


def test_the_sidecar_places_each_impairment_against_the_capture_point(lossy_run):
    """At the sender's own interface the routers' data direction acts after the capture
    point (its drops are re-sent in it), the way back before it (ACKs arrive delayed)."""
    path, doc = lossy_run
    placed = {(p.what, p.packets): p for p in placements(path)}
    assert set(placed) == {("loss", "toward the receiver"), ("delay", "toward the receiver"),
                           ("rate", "toward the receiver"), ("delay", "toward the sender")}
    assert placed[("loss", "toward the receiver")].after_capture
    assert placed[("loss", "toward the receiver")].sources == (doc["flows"][0]["src"],)
    assert placed[("delay", "toward the sender")].where == "before"
    assert not any(p.unseen_by_round_trips for p in placed.values())
    # the achieved delay each way, timed across the path, is the asked one
    delays = [ch for ch in doc["achieved"]["checks"] if ch["quantity"] == "delay"]
    assert [ch["direction"] for ch in delays] == ["toward the receiver", "toward the sender"]
    assert all(ch["in_spec"] is True and abs(ch["achieved"] - 5.0) < 0.5 for ch in delays)


def test_window_scaling_is_on_by_default(lossy_run):
    path, _ = lossy_run
    assert _frames(path, "tcp.flags.syn==1 && tcp.options.wscale.shift") >= 2


@pytest.mark.parametrize("udp_rate, below", [("10mbit", True), ("30mbit", False)])
def test_iperf3_udp_below_and_above_the_bottleneck(tmp_path, udp_rate, below):
    out = tmp_path / "udp.pcap"
    doc = run(Scenario(tool="iperf3-udp", udp_rate=udp_rate, rate="20mbit", duration_s=2,
                       capture="both", snaplen=128), out)
    summary = doc["reports"][0]["summary"]
    if below:  # everything arrives, at the rate sent
        assert summary["lost_percent"] < 1.0
        assert abs(summary["throughput_bps"] - 10e6) <= 0.1 * 10e6
    else:  # the bottleneck's rate arrives, the rest is lost in its queue
        assert abs(summary["throughput_bps"] - 20e6) <= 0.1 * 20e6, summary
        assert summary["lost_percent"] > 20
        drops = doc["impairment"]["counters"]["qdiscs"]
        assert sum(q["dropped_packets"] for q in drops.values()) > 0
    # every datagram iperf3 says arrived is in the receiver's capture
    (flow,) = doc["flows"]
    receiver = tmp_path / "udp.receiver.pcap"
    assert flow["streams"]["udp.receiver.pcap"] == _tshark_stream(receiver, flow)
    arrived = summary["packets"] - summary["lost_packets"]
    seen = _frames(receiver, f"udp.srcport=={flow['sport']} && udp.dstport=={flow['dport']}")
    assert abs(seen - arrived) <= max(2, 0.01 * arrived), (seen, arrived)


def test_ping_sweep_rtt_is_twice_the_asked_delay(tmp_path):
    out = tmp_path / "ping.pcapng"
    doc = run(Scenario(tool="ping", delay="20ms", ping_count=5, ping_interval_s=0.05,
                       ping_sizes=[56, 1000], format="pcapng", capture="receiver"), out)
    assert doc["captures"][0]["format"] == "pcapng"
    assert tshark("-r", str(out), "-T", "fields", "-e", "frame.interface_id")  # pcapng reads
    runs = doc["reports"][0]["raw"]["runs"]
    assert [r["size_bytes"] for r in runs] == [56, 1000]
    for r in runs:
        assert r["summary"]["received"] == len(r["replies"]) == 5
        assert abs(r["summary"]["median_ms"] - 40.0) <= 4.0, r["summary"]
    # each echo request of the sweep reached the receiver's wire (the RTT check's pings came
    # before the capture started)
    assert _frames(out, "icmp.type==8") == sum(r["summary"]["transmitted"] for r in runs)


def test_chain_path_latency_is_the_sum_of_its_links(tmp_path):
    """--hops 3 with a delay per router: ping's RTT over the chain is twice the asked sum, and
    the sum of the RTTs ping measures over each link alone (one-router runs), less what the
    extra passes through the lab's own hops add; the capture holds the same echoes."""
    delays_ms = (2, 5, 10)
    chain = run(Scenario(tool="ping", hops=3, delay=",".join(f"{d}ms" for d in delays_ms),
                         rate="0,10mbit,0", ping_count=5, ping_interval_s=0.05),
                tmp_path / "chain.pcap")
    assert chain["topology"]["name"] == "chain"
    assert [h["router"] for h in chain["hops"]] == ["router1", "router2", "router3"]
    assert [h["asked"]["delay_s"] * 1e3 for h in chain["hops"]] == pytest.approx(delays_ms)
    assert "rate" in chain["hops"][1]["mechanisms"] and "rate" not in chain["hops"][0]["mechanisms"]
    assert chain["measured"]["rate_asked_bps"] == 10e6
    path_ms = chain["reports"][0]["summary"]["median_ms"][0]
    assert rtt_as_asked(path_ms, 2 * sum(delays_ms)), path_ms
    links_ms = [run(Scenario(tool="ping", delay=f"{d}ms", ping_count=5, ping_interval_s=0.05),
                    tmp_path / f"link{d}.pcap")["reports"][0]["summary"]["median_ms"][0]
                for d in delays_ms]
    # each one-router run also crosses an unimpaired hop or two (about 0.05 ms each way)
    assert abs(path_ms - sum(links_ms)) <= max(0.1 * path_ms, 2.0), (path_ms, links_ms)
    pings = ps.ping(tmp_path / "chain.pcap").to_pandas()
    assert pings["received"].sum() == 5
    assert abs(pings["rtt_avg_ms"].iloc[0] - path_ms) <= 1.0


def test_a_chain_refuses_more_values_than_routers_and_several_pairs(tmp_path):
    with pytest.raises(UsageError, match="3 values of delay for 2 router"):
        run(Scenario(tool="ping", hops=2, delay="1ms,2ms,3ms"), tmp_path / "x.pcap")
    with pytest.raises(UsageError, match="carries one pair"):
        run(Scenario(tool="simpleperf", hops=2, pairs=2), tmp_path / "x.pcap")


def test_two_pairs_share_the_bottleneck_each_with_its_own_cc(tmp_path):
    """... each with its own -P (issue 28: -P 2,1) and its own pings under load."""
    out = tmp_path / "pairs.pcap"
    doc = run(Scenario(tool="simpleperf", pairs=2, cc=["reno", "cubic"], rate="20mbit",
                       delay="5ms", duration_s=2, snaplen=128, capture="receiver",
                       window_scaling=False, parallel=[2, 1], ping_during=True,
                       ping_count=8), out)
    flows = doc["flows"]
    assert [f["cc"] for f in flows] == ["reno", "reno", "cubic"]
    assert [f["pair"] for f in flows] == [0, 0, 1]
    pings = [r for r in doc["reports"] if r["mode"] == "icmp"]
    assert [(r["pair"], r["sender"], r["receiver"]) for r in pings] == [
        (0, "sender1", "receiver1"), (1, "sender2", "receiver2")]
    assert all(r["summary"]["received"] == [8] for r in pings)
    ids = [f["streams"]["pairs.pcap"] for f in flows]
    assert ids == [_tshark_stream(out, f) for f in flows] and len(set(ids)) == len(flows)
    # together they fill the shared 20 Mbit/s, within 10 %
    assert abs(doc["measured"]["throughput_bps"] - 20e6) <= 0.1 * 20e6
    assert _frames(out, "tcp.flags.syn==1") >= 4
    assert _frames(out, "tcp.flags.syn==1 && tcp.options.wscale.shift") == 0


def test_file_transfers_arrive_whole(tmp_path):
    tcp = run(Scenario(tool="tcp-file", bytes="2MB", loss="1%", rate="20mbit", cc="cubic",
                       snaplen=128), tmp_path / "tcp.pcap")
    assert tcp["reports"][0]["summary"]["checksum_ok"] is True
    assert tcp["flows"][0]["received_bytes"] == 2_000_000
    udp = run(Scenario(tool="udp-file", bytes="500KB", udp_rate="5mbit", rate="20mbit",
                       capture="receiver", snaplen=128), tmp_path / "udp.pcap")
    summary = udp["reports"][0]["summary"]
    assert summary["checksum_ok"] is True and summary["missing_chunks"] == 0
    flow = udp["flows"][0]
    seen = _frames(tmp_path / "udp.pcap", f"udp.srcport=={flow['sport']} && "
                   f"udp.dstport=={flow['dport']} && udp.length != 11")  # not the 3-byte ENDs
    assert seen == summary["datagrams_received"]


def test_matrix_runs_each_cell_once_and_resumes(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\ntool = "ping"\nping_count = 2\nping_interval_s = 0.05\n'
                    'snaplen = 128\n[axes]\ndelay = ["5ms", "10ms"]\n')
    first = run_matrix(spec, tmp_path / "runs")
    assert [r.status for r in first] == ["done", "done"]
    for r, delay_ms in zip(first, (5, 10)):
        assert rtt_as_asked(r.measured["rtt_ms"], 2 * delay_ms), r.measured
    (tmp_path / "runs" / "delay-10ms.json").unlink()  # as if killed before its sidecar
    second = run_matrix(spec, tmp_path / "runs")
    assert [r.status for r in second] == ["skipped", "done"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "delay-10ms.json", "delay-10ms.pcap", "delay-5ms.json", "delay-5ms.pcap"]


def _documented() -> set[str]:
    """Every field path FIELDS names ("a.b / c" names a.b and a.c)."""
    from pcapstats.sidecar import FIELDS
    names = set()
    for entry, _ in FIELDS:
        first, *rest = entry.split(" / ")
        names.add(first)
        prefix = first[:first.rfind(".") + 1]  # "flows[]." of "flows[].proto", or ""
        names.update(prefix + r for r in rest)
    return names | {n[:-2] for n in names if n.endswith("[]")}


def test_every_field_of_a_real_sidecar_is_documented(lossy_run):
    _, doc = lossy_run
    documented = _documented()
    missing = [k for k in doc if k not in documented and not any(
        d.startswith(k + ".") or d.startswith(k + "[]") for d in documented)]
    missing += [f"captures[].{k}" for k in doc["captures"][0]
                if f"captures[].{k}" not in documented]
    missing += [f"flows[].{k}" for k in doc["flows"][0] if f"flows[].{k}" not in documented]
    missing += [f"topology.{k}" for k in doc["topology"] if f"topology.{k}" not in documented]
    missing += [f"impairment.{k}" for k in doc["impairment"]
                if f"impairment.{k}" not in documented]
    assert missing == []
