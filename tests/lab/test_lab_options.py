"""Lab options for capturing TCP as flavour meets it anywhere (issue 16): TCP timestamps and
SACK switched off, an application-limited sender, and one run captured at the sender, the
router and the receiver at once.

Each run is short (2-3 s) and slow (20 Mbit/s); what the captures hold is read back with
pcapstats.read (the options in the SYNs, packet counts) and set beside the kernel's own
counters and iperf3's report.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcapstats as ps
from pcapstats.errors import UsageError
from pcapstats.lab import Scenario, load_sidecar, run
from pcapstats.sidecar import sidecar_for, sidecar_path

pytestmark = pytest.mark.netns

SYN = 0x02


def _syn_options(path) -> dict[str, np.ndarray]:
    """Per SYN (and SYN/ACK) of the capture: whether it carried a timestamp and SACK-permitted."""
    cap = ps.read(path)
    syn = (cap.column("tcp_flags") & SYN) != 0
    return {"ts": cap.present("tcp_option_tsval")[syn],
            "sack_perm": cap.column("tcp_option_sack_perm")[syn].astype(bool)}


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """simpleperf, reno, 3 % loss, 2 x 2 ms, 20 Mbit/s, 2 s; timestamps and SACK off; captured
    at the sender, the router and the receiver."""
    out = tmp_path_factory.mktemp("plain") / "plain.pcap"
    run(Scenario(tool="simpleperf", loss="3%", delay="2ms", rate="20mbit", cc="reno",
                 duration_s=2, snaplen=128, timestamps=False, sack=False, capture="all"), out)
    return out, load_sidecar(sidecar_path(out))


@pytest.fixture(scope="module")
def app_limited_run(tmp_path_factory):
    """iperf3 writing 5 Mbit/s over a 20 Mbit/s path for 3 s (timestamps, SACK as default)."""
    out = tmp_path_factory.mktemp("applimited") / "app.pcap"
    run(Scenario(tool="iperf3", app_rate="5mbit", rate="20mbit", delay="2ms", cc="cubic",
                 duration_s=3, snaplen=128), out)
    return out, load_sidecar(sidecar_path(out))


def test_timestamps_and_sack_off_leave_them_out_of_every_syn(plain_run):
    path, doc = plain_run
    assert doc["status"] == "complete"
    assert doc["topology"]["timestamps"] is False and doc["topology"]["sack"] is False
    assert doc["scenario"]["timestamps"] is False and doc["scenario"]["sack"] is False
    for cap in doc["captures"]:
        file = path.parent / cap["file"]
        options = _syn_options(file)
        assert len(options["ts"]) >= 2, cap["file"]  # simpleperf's SYN and SYN/ACK (+ resent)
        assert not options["ts"].any() and not options["sack_perm"].any(), cap["file"]
        # 3 % loss and still no SACK block anywhere, and no timestamp on any packet
        read = ps.read(file)
        assert not read.present("tcp_option_tsval").any()
        assert int(read.column("tcp_sack_count").max()) == 0


def test_by_default_syns_carry_timestamps_and_sack_permitted(app_limited_run):
    path, doc = app_limited_run
    assert doc["topology"]["timestamps"] is True and doc["topology"]["sack"] is True
    options = _syn_options(path)
    assert len(options["ts"]) >= 4  # iperf3's control and data connections
    assert options["ts"].all() and options["sack_perm"].all()


def test_capture_all_writes_sender_router_and_receiver_files(plain_run):
    path, doc = plain_run
    files = {c["side"]: path.parent / c["file"] for c in doc["captures"]}
    assert {s: f.name for s, f in files.items()} == {
        "sender": "plain.sender.pcap", "router": "plain.router.pcap",
        "receiver": "plain.receiver.pcap"}
    assert [c["host"] for c in doc["captures"]] == ["sender", "router", "receiver"]
    assert sidecar_for(files["router"]) == sidecar_path(path)
    count = {s: ps.read(f).packets_in_file for s, f in files.items()}
    for c in doc["captures"]:
        assert c["packets_captured"] == count[c["side"]] and c["packets_dropped_by_kernel"] == 0
    # The router listens before the impairment: it sees the TCP packets the sender sent and got
    # (offloads are off, so packet for packet); the receiver sees those less what the loss rule
    # and the queue dropped.  ARP/ND/MLD differ between the two links, so only TCP is counted.
    counters = doc["impairment"]["counters"]
    dropped = counters["loss"]["data"]["dropped_packets"] + sum(
        q["dropped_packets"] for q in counters["qdiscs"].values())
    assert dropped > 0
    tcp = {s: int(ps.read(f).present("tcp_stream").sum()) for s, f in files.items()}
    assert tcp["sender"] == tcp["router"] > tcp["receiver"], tcp
    assert abs(tcp["router"] - tcp["receiver"] - dropped) <= 2, (tcp, dropped)
    # every file has the flow, and its streams map names each file
    (flow,) = doc["flows"]
    assert set(flow["streams"]) == {f.name for f in files.values()}
    assert all(sid is not None for sid in flow["streams"].values())


def test_an_application_limited_sender_sends_at_its_rate_below_the_link(app_limited_run):
    path, doc = app_limited_run
    assert doc["scenario"]["app_rate"] == "5mbit" and doc["status"] == "complete"
    report = doc["reports"][0]
    assert report["summary"]["target_bps"] == 5_000_000
    sent = report["raw"]["client"]["end"]["sum_sent"]["bits_per_second"]
    assert abs(sent - 5e6) <= 0.1 * 5e6, sent  # iperf3's own count
    assert doc["measured"]["throughput_bps"] < 0.5 * 20e6
    # the capture agrees: the data stream's bytes over the transfer's 3 s
    (flow,) = doc["flows"]
    assert flow["cc"] == "cubic"
    cap = ps.read(path)
    mine = (cap.column("tcp_stream") == flow["streams"][path.name]) & cap.present("tcp_stream")
    payload = int(cap.column("tcp_len")[mine].sum())
    assert abs(8 * payload / 3 - 5e6) <= 0.15 * 5e6, payload


def test_options_the_lab_cannot_honour_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(UsageError, match="needs tool iperf3 or simpleperf"):
        run(Scenario(tool="ping", app_rate="5mbit"), tmp_path / "x.pcap")
    with pytest.raises(UsageError, match="bad application rate"):
        run(Scenario(tool="iperf3", app_rate="fast"), tmp_path / "x.pcap")
    with pytest.raises(UsageError, match="needs one pair"):
        run(Scenario(tool="simpleperf", pairs=2, capture="all"), tmp_path / "x.pcap")
    with pytest.raises(UsageError, match="needs --pairs 2 or more"):
        run(Scenario(tool="iperf3", start_offset_s=5), tmp_path / "x.pcap")
    with pytest.raises(UsageError, match="not under the duration"):
        run(Scenario(tool="iperf3", pairs=2, start_offset_s=10, duration_s=10),
            tmp_path / "x.pcap")
    with pytest.raises(UsageError, match="0 s or more"):
        run(Scenario(tool="iperf3", pairs=2, start_offset_s=-1), tmp_path / "x.pcap")
    assert list(tmp_path.iterdir()) == []


def test_run_command_carries_the_new_options(monkeypatch, tmp_path):
    """`pcapstats lab run` takes each new field and the command line a matrix cell prints
    for it (captures/make_captures.py) gives the same scenario back."""
    from importlib import import_module
    from pcapstats.cli.lab import run_command
    from pcapstats.cli import main
    seen = []

    def fake_run(scenario, out, **kwargs):
        seen.append(scenario)
        raise KeyboardInterrupt  # stop there: nothing to build

    monkeypatch.setattr(import_module("pcapstats.lab.run"), "run", fake_run)
    wanted = Scenario(tool="iperf3", app_rate="5mbit", timestamps=False, sack=False,
                      capture="all", rate="20mbit", duration_s=2.5, snaplen=128)
    argv = run_command(wanted, tmp_path / "x.pcap")
    assert {"--no-timestamps", "--no-sack", "--app-rate"} <= set(argv)
    assert main(argv[1:]) == 130
    assert seen == [wanted]
    staggered = Scenario(tool="iperf3", pairs=2, start_offset_s=5.0, duration_s=15)
    argv = run_command(staggered, tmp_path / "x.pcap")
    assert "--start-offset" in argv
    assert main(argv[1:]) == 130
    assert seen[-1] == staggered
