"""Ready-made topologies: their documented addresses, their bottleneck, and a dumbbell whose
pairs really share one link (iperf3's own reports add up to the one asked rate)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time

import pytest

from pcapstats.lab import Lab, LabError, topologies
from pcapstats.lab.impair import Impairment, apply
from pcapstats.lab.netns import Bottleneck
from tests.helpers.labtools import (expected_goodput_bps, iperf3_tcp, received_goodput_bps,
                         rtt_as_asked, within)

PAIRS = 3


@pytest.fixture(scope="module")
def dumbbell():
    with topologies.dumbbell(pairs=PAIRS) as lab:
        yield lab


def test_dumbbell_needs_at_least_one_pair():
    with pytest.raises(LabError, match="1 to 100 pairs"):
        topologies.dumbbell(pairs=0)


@pytest.mark.netns
def test_bottlenecks_are_described():
    with topologies.sender_router_receiver() as lab:
        assert lab.bottleneck == Bottleneck("router", egress="eth1", ingress="eth0")
        assert lab.interface("router", "receiver").name == "eth1"
        assert lab.pairs == [("sender", "receiver")]
    with topologies.two_hosts() as lab:
        with pytest.raises(LabError, match="no bottleneck"):
            lab.bottleneck


@pytest.mark.netns
def test_dumbbell_addresses_and_reachability(dumbbell):
    """Each host has the documented addresses; every sender reaches every receiver (v4, v6)
    and the path crosses the router (TTL 63 / hop limit 63)."""
    assert dumbbell.bottleneck == Bottleneck("router", egress="br1", ingress="br0")
    assert sorted(dumbbell.hosts) == sorted(
        ["router"] + [f"sender{i}" for i in range(1, PAIRS + 1)]
        + [f"receiver{i}" for i in range(1, PAIRS + 1)])
    assert dumbbell.pairs == [(f"sender{i}", f"receiver{i}") for i in range(1, PAIRS + 1)]
    for i in range(1, PAIRS + 1):
        assert dumbbell.address(f"sender{i}") == f"10.77.1.{i}"
        assert dumbbell.address(f"receiver{i}", 6) == f"fd00:77:2::{i:x}"
    assert dumbbell.address("router") == "10.77.1.254"
    for i in range(1, PAIRS + 1):
        for j in range(1, PAIRS + 1):
            for family in (4, 6):
                out = dumbbell.run(f"sender{i}", "ping", f"-{family}", "-n", "-c", 1, "-W", 2,
                                   dumbbell.address(f"receiver{j}", family)).stdout
                assert re.search(r"(ttl|hlim)=63 ", out), out


def iperf3_pairs(lab: Lab, pairs: int, seconds: float, omit: int = 1) -> list[dict]:
    """iperf3 -J of sender_i -> receiver_i for every pair, all servers listening first and all
    clients started together, so that the flows overlap for their whole measured time."""
    servers = [lab.popen(f"receiver{i}", "iperf3", "-s", "-1", "-p", 5220 + i,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for i in range(1, pairs + 1)]
    try:
        for i in range(1, pairs + 1):
            deadline = time.monotonic() + 10
            while f":{5220 + i} " not in lab.run(f"receiver{i}", "ss", "-Hltn").stdout:
                assert time.monotonic() < deadline, "iperf3 server did not listen"
                time.sleep(0.05)
        clients = [lab.popen(f"sender{i}", "iperf3", "-c", lab.address(f"receiver{i}"),
                             "-p", 5220 + i, "-t", seconds, "-O", omit, "-J",
                             stdout=subprocess.PIPE, text=True)
                   for i in range(1, pairs + 1)]
        return [json.loads(c.communicate(timeout=seconds + omit + 30)[0]) for c in clients]
    finally:
        for server in servers:
            lab.stop(server)


@pytest.mark.netns
def test_dumbbell_pairs_share_one_bottleneck(dumbbell):
    """PAIRS simultaneous iperf3 transfers through a 12 Mbit/s bottleneck: their goodputs add
    up to the one link's rate (within 10 %), and every pair gets a share."""
    rate_bps = 12e6
    applied = apply(dumbbell, dumbbell.bottleneck, Impairment(rate_bps=rate_bps,
                                                              delay_s=0.005))
    try:
        reports = iperf3_pairs(dumbbell, PAIRS, seconds=4)
        goodputs = [received_goodput_bps(r) for r in reports]
        want = expected_goodput_bps(reports[0], rate_bps)
        assert within(sum(goodputs), want, 0.10), (goodputs, want)
        assert min(goodputs) > 0.1 * want / PAIRS, goodputs
        counters = applied.counters()
        assert counters.qdiscs["br1"].sent_bytes > 0
        assert counters.loss["data"].offered_packets > 0  # FORWARD -o br1 saw the flows
    finally:
        applied.remove()


def test_chain_needs_a_router():
    with pytest.raises(LabError, match="1 to 8 routers"):
        topologies.chain(routers=0)


@pytest.mark.netns
def test_chain_with_an_impairment_per_link():
    """sender - router1 - router2 - receiver: rate on router1's link, delay on router2's; ping
    and iperf3 see both (RTT 2 x delay, goodput of the rate, each within 10 %)."""
    from tests.helpers.labtools import ping
    with topologies.chain(routers=2) as lab:
        assert [b.router for b in lab.bottlenecks] == ["router1", "router2"]
        assert lab.address("receiver") == "10.77.3.2"
        assert lab.address("receiver", 6) == "fd00:77:3::2"
        for family in (4, 6):
            out = lab.run("sender", "ping", f"-{family}", "-n", "-c", 1, "-W", 2,
                          lab.address("receiver", family)).stdout
            assert re.search(r"(ttl|hlim)=62 ", out), out  # two forwarding hops
        rate_bps, delay_s = 10e6, 0.010
        first = apply(lab, lab.bottlenecks[0], Impairment(rate_bps=rate_bps))
        second = apply(lab, lab.bottlenecks[1], Impairment(delay_s=delay_s))
        assert first.mechanisms == {"rate": "tbf", "queue": "tbf"} or \
            first.mechanisms["rate"] == "netem"
        report = ping(lab, 20, 0.03)
        assert rtt_as_asked(statistics.median(report.rtts_ms), 2 * delay_s * 1e3), report
        iperf = iperf3_tcp(lab, seconds=3)
        assert within(received_goodput_bps(iperf), expected_goodput_bps(iperf, rate_bps), 0.10)
        second.remove()
        first.remove()
