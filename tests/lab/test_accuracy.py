"""Achieved against asked (pcapstats.lab.accuracy), the delay line's serialisation queue and a
run's messages against its queue.

Without namespaces: captures built here of packets sent through a simulated link -- a FIFO at
a known rate behind a known delay -- whose rate, delay and longest queue are the simulation's
own numbers; the delay line's serialisation driven packet by packet (its arithmetic is the
truth).  With them (``netns``): a rate this host cannot reach, asked of ``lab run`` and
``lab matrix``, is marked out of spec (the achieved rate is what the lab's own delay line
released, far under it), retried once in the matrix and reported so in its table.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pcapstats.errors import UsageError
from pcapstats.lab import Scenario, accuracy
from pcapstats.lab.run import message_wire_bytes
from pcapstats.lab.sidecar import lab_placements
from pcapstats.tools.delayline import DelayLine
from tests.helpers import craft as c

T0 = 1_700_000_000 * 10**9
SENDER, RECEIVER = "10.77.1.1", "10.77.2.1"
RATE_BPS, DELAY_NS = 20e6, 5_000_000
PAYLOAD = 1472                               # IPv4 + UDP: 1500-byte packets (raw link type)


def _write(path, records):
    records = sorted(records, key=lambda r: r[0])
    path.write_bytes(c.pcap([c.Record(c.raw(f), t) for t, f in records], c.LT_RAW,
                            nano=True).data)
    return path


def _through_a_link(tmp_path, bursts: int = 8, burst: int = 30, lost=()):
    """Bursts of ``burst`` 1500-byte datagrams sent back to back (10 us apart), 100 ms apart,
    through a FIFO that serialises at RATE_BPS and then delays DELAY_NS; ``lost``: indexes
    the path drops (absent after it).  Returns the captures before and after the path."""
    before, after = [], []
    link_free = 0
    k = 0
    for b in range(bursts):
        for i in range(burst):
            sent = T0 + b * 100_000_000 + i * 10_000
            packet = c.ipv4(c.udp(5000, 5001, b"x" * PAYLOAD), SENDER, RECEIVER, ident=k + 1)
            before.append((sent, packet))
            if k not in lost:
                start = max(sent, link_free)
                link_free = start + round(len(packet.data) * 8 / RATE_BPS * 1e9)
                after.append((link_free + DELAY_NS, packet))
            k += 1
    return _write(tmp_path / "before.pcap", before), _write(tmp_path / "after.pcap", after)


def _doc(rate_bps=RATE_BPS, limit=60_000, loss=0.0, offered=0, dropped=0, tbf_drops=0):
    asked = {"loss": loss, "delay_s": DELAY_NS / 1e9, "jitter_s": 0.0, "rate_bps": rate_bps,
             "queue_bytes": None, "ack_loss": 0.0, "serialize": True, "one_way": True,
             "queue_floor_bytes": 0, "queue_limit_bytes": limit}
    counters = {"loss": {"data": {"offered_packets": offered, "dropped_packets": dropped}},
                "qdiscs": {"eth1": {"dropped_packets": tbf_drops}}, "delay": {}}
    return {"impairment": {"asked": asked, "counters": counters}, "hops": None,
            "topology": {"pairs": [{"sender_ip": SENDER, "receiver_ip": RECEIVER}],
                         "bottleneck": {"router": "router", "egress": "eth1",
                                        "ingress": "eth0"}}}


def _checks(achieved: dict) -> dict:
    return {(ch["quantity"], ch["direction"]): ch for ch in achieved["checks"]}


def test_a_simulated_link_gives_its_own_rate_delay_and_queue(tmp_path):
    before, after = _through_a_link(tmp_path)
    achieved = accuracy.lab_run(_doc(), before, after)
    checks = _checks(achieved)
    rate = checks[("rate", "toward the receiver")]
    # 8 bursts: 8 trains of 30 packets, each left at exactly the link's rate
    assert rate["trains"] == 8 and rate["achieved"] == pytest.approx(RATE_BPS, rel=1e-6)
    assert rate["low"] == pytest.approx(RATE_BPS, rel=1e-6) == rate["high"]
    assert rate["in_spec"] is True
    delay = checks[("delay", "toward the receiver")]
    # the first packet of each burst waited for nobody: its delay is the link's, exactly
    assert delay["achieved"] == pytest.approx(DELAY_NS / 1e6, abs=1e-6)
    # the last packet of a burst arrived with the 29 others still on the link: 30 x 1500 B
    assert checks[("queue", None)]["achieved"] == 30 * 1500
    assert achieved["in_spec"] is True and achieved["out_of_spec"] == []
    # no packet the other way: nothing to judge there, and it says so
    back = checks[("delay", "toward the sender")]
    assert back["achieved"] is None and back["in_spec"] is None and back["why_not"]


def test_asking_more_than_the_link_did_is_out_of_spec_in_one_line(tmp_path):
    before, after = _through_a_link(tmp_path)
    achieved = accuracy.lab_run(_doc(rate_bps=40e6, limit=20_000, tbf_drops=3), before, after)
    checks = _checks(achieved)
    assert checks[("rate", "toward the receiver")]["in_spec"] is False
    # 45 kB queued, against a 20 kB limit
    assert checks[("queue", None)]["in_spec"] is False
    assert achieved["in_spec"] is False
    assert achieved["out_of_spec"][0] == ("rate toward the receiver 20.0 Mbit/s, asked "
                                          "40.0 Mbit/s (within ±10 %)")
    lines = accuracy.lines(achieved)
    assert lines[0] == "achieved against asked:"
    assert sum("OUT OF SPEC" in line for line in lines) == 2


def test_loss_is_judged_against_the_binomial_spread_of_what_was_offered():
    def judged(dropped, offered, asked=0.1):
        return accuracy.loss_check("toward the receiver", asked, dropped, offered, "")["in_spec"]
    # sd of 10 % over 10 000 packets: 0.3 points; 4.5 of them: 1.35 points
    assert judged(1100, 10_000) and judged(900, 10_000)
    assert not judged(1200, 10_000) and not judged(800, 10_000)
    assert accuracy.loss_check(None, 0.1, 0, 0, "")["in_spec"] is None


def test_packets_lost_on_the_path_are_not_matched_and_nothing_else_moves(tmp_path):
    before, after = _through_a_link(tmp_path, lost={3, 40, 41, 200})
    ids = {}
    m = accuracy.path_measures(accuracy.read_packets(before, ids),
                               accuracy.read_packets(after, ids), 8 / RATE_BPS, 0.0)
    assert (m["sent"], m["matched"]) == (240, 236)
    assert m["delay_s"] == pytest.approx(DELAY_NS / 1e9, abs=1e-9)


# -- the delay line's serialisation queue ------------------------------------------------------
class _Line(DelayLine):
    """A DelayLine's serialisation without its socket."""

    def __init__(self, rate_bps, queue_bytes):
        from pcapstats.tools.delayline import Stats
        self.ns_per_byte, self.queue_bytes, self._link_free_ns = 8e9 / rate_bps, queue_bytes, 0
        self.stats = Stats(0, 0.0, 0.0, "uniform")


def test_a_train_up_to_the_queue_leaves_at_the_rate_and_the_rest_is_dropped():
    """40 full frames at once into a 20 Mbit/s link with a 30-frame queue: the first 30 leave
    one frame time (605.6 us) apart, none early; the 10 past the queue are dropped."""
    line = _Line(20e6, 30 * 1514)
    left = [line._serialised(1514, T0) for _ in range(40)]
    kept = [t for t in left if t is not None]
    assert len(kept) == 30 and left[30:] == [None] * 10
    assert np.diff(kept) == pytest.approx(1514 * 8 / 20e6 * 1e9, abs=1)
    assert kept[0] - T0 == pytest.approx(1514 * 8 / 20e6 * 1e9, abs=1)
    assert line.stats.queued_max_bytes == 30 * 1514
    # once the link has sent some, there is room again
    assert line._serialised(1514, kept[4]) is not None


# -- a run's messages against its queue ---------------------------------------------------------
def test_message_bytes_on_the_wire():
    # ping -s 56: one frame of 14 + 20 + 8 + 56; -s 65507: 45 fragments of at most 1480 bytes
    assert message_wire_bytes("ping", 56) == 98
    assert message_wire_bytes("ping", 65507) == 65507 + 8 + 45 * 34
    # 65535 bytes of TCP in 1448-byte segments (timestamps): 46 segments of 66 header bytes
    assert message_wire_bytes("TCP message", 65535) == 65535 + 46 * 66
    assert message_wire_bytes("TCP message", 1460, timestamps=False) == 1514


def test_the_default_queue_holds_the_longest_message_and_says_so():
    s = Scenario(tool="ping", rate="20mbit", delay="5ms", serialize=True,
                 ping_sizes=[18, 65507])
    s.validate()
    (imp,) = s.impairments()
    assert imp.queue_limit_bytes == message_wire_bytes("ping", 65507) + 2 * 1514
    assert s.queue_notes() == [f"the queue is {imp.queue_limit_bytes} bytes, not the default "
                               "25000: it holds a ping of 65507 bytes whole"]
    assert Scenario(tool="ping", rate="20mbit", ping_sizes=[1000]).queue_notes() == []


def test_a_queue_given_too_small_for_a_message_is_refused_naming_what_would_do():
    s = Scenario(tool="pingpong", rate="20mbit", queue="25kb", ping_sizes=[18, 65535])
    with pytest.raises(UsageError) as e:
        s.validate()
    assert "cannot hold a TCP message of 65535 bytes" in str(e.value)
    # 68571 bytes of frames and two more frames: 71599 bytes, 70 kb (tc's kb: 1024)
    assert "--queue 70kb" in e.value.hint
    Scenario(tool="pingpong", rate="20mbit", queue="70kb", ping_sizes=[18, 65535]).validate()


# -- where each impairment sits ----------------------------------------------------------------
def test_each_side_sees_the_data_direction_and_the_way_back_on_opposite_sides():
    doc = _doc(loss=0.1)
    doc["impairment"]["asked"].update(ack_loss=0.05, one_way=False)
    sender, receiver = lab_placements(doc, "sender"), lab_placements(doc, "receiver")
    where = {(p["what"], p["packets"]): p["where"] for p in sender}
    assert where == {("loss", "toward the receiver"): "after",
                     ("delay", "toward the receiver"): "after",
                     ("rate", "toward the receiver"): "after",
                     ("serialisation", "toward the receiver"): "after",
                     ("ack_loss", "toward the sender"): "before",
                     ("delay", "toward the sender"): "before",
                     ("serialisation", "toward the sender"): "before"}
    assert all(p["where"] != q["where"] for p, q in zip(sender, receiver))
    assert not any(p["own_egress"] for p in sender + receiver)
    assert sender[0]["sources"] == [SENDER] and sender[0]["at"] == "router eth1, egress"


# -- a rate this host cannot reach (netns) ------------------------------------------------------
OUT_OF_REACH = ("--tool", "iperf3", "-t", "1", "--serialize", "--rate", "100gbit",
                "--snaplen", "96")


def _pcapstats(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pcapstats", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.netns
def test_a_rate_this_host_cannot_reach_is_out_of_spec_in_the_run_and_the_matrix(tmp_path):
    """100 Gbit/s serialised by the lab's delay line (a Python program) and a veth: a TCP
    transfer's packets queue behind the program and leave the router at the rate it releases
    them, far under it (the run's own capture and its witness say how fast; iperf3's own
    throughput says the path carried less than 10 Gbit/s).  Its queue, the kernel's queue
    in front of the program, holds far more than the limit: out of spec too."""
    from tests.conftest import require_netns
    require_netns()
    run = _pcapstats("lab", "run", *OUT_OF_REACH, "-o", tmp_path / "far.pcap")
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "far.json").read_text())
    checks = _checks(doc["achieved"])
    rate = checks[("rate", "toward the receiver")]
    assert doc["reports"][0]["summary"]["throughput_bps"] < 10e9
    assert rate["in_spec"] is False and rate["achieved"] < 0.5 * 100e9, rate
    assert checks[("queue", None)]["in_spec"] is False
    assert checks[("rate", "toward the sender")]["in_spec"] is not True
    assert doc["achieved"]["in_spec"] is False and doc["achieved"]["retried_after"] is None
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("  rate → receiver")]
    assert line.endswith("asked 100.00 Gbit/s (±10 %): OUT OF SPEC"), line
    assert "pcapstats: warning: out of spec: rate toward the receiver" in run.stderr
    # the same in a matrix: run once more, then reported out of spec in its table
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\ntool = "iperf3"\nduration_s = 1\nserialize = true\n'
                    'rate = "100gbit"\nsnaplen = 96\n[axes]\ndelay = ["1ms"]\n')
    matrix = _pcapstats("lab", "matrix", spec, "-o", tmp_path / "m", "-f", "csv")
    assert matrix.returncode == 0, matrix.stderr
    (row,) = [line for line in matrix.stdout.splitlines() if line.startswith("delay-1ms")]
    assert ",out of spec," in row and "rate toward the receiver" in row
    cell = json.loads((tmp_path / "m" / "delay-1ms.json").read_text())
    assert cell["achieved"]["in_spec"] is False
    assert cell["achieved"]["retried_after"][0].startswith("rate toward the receiver")
    assert "cell delay-1ms: out of spec: rate toward the receiver" in matrix.stderr
