"""Impairments on the router's forwarding path: asked rate, delay, jitter and loss come out as
measured by independent tools (iperf3's and ping's own reports, the receiver's own count), the
NFQUEUE delay line keeps order and drops nothing, and everything goes away on every exit path.

Each expectation comes from outside the code under test: iperf3 -J's received bytes, ping's
per-reply times, a receiver counting sequence numbers, tshark reading a capture, the kernel's
/proc/net/netfilter/nfnetlink_queue and iptables counters.  Timing checks take medians and retry
a measurement once (the machine is shared), never a looser tolerance than the issue's 10 %.
"""

from __future__ import annotations

import math
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import time

import pytest

from pcapstats.errors import UsageError
from pcapstats.lab import Lab, LabError, cleanup_leftovers, topologies
from pcapstats.tools import delayline
from tests.helpers.labtools import (expected_goodput_bps, iperf3_tcp, measure_twice, ping,
                                    ping_rtts_ms, received_goodput_bps, rtt_as_asked,
                                    udp_sequence, within)
from pcapstats.lab.impair import Impairment, apply
from pcapstats.units import FRAME_BYTES, parse_loss, parse_rate, parse_tc_size, parse_time



# -- parsers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, bps", [
    ("30mbit", 30e6), ("1.5Mbit", 1.5e6), ("500kbit", 500e3), ("1gbit", 1e9), ("64bit", 64),
    ("1mibit", 2**20), ("100mbps", 800e6), ("1kbps", 8000), ("10bps", 80), (" 2 mbit ", 2e6),
])
def test_parse_rate_follows_tc_units(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text, why", [
    ("30", "no unit"), ("30M", "unknown unit 'm'"), ("fast", "not a number"), ("", "not a number"),
    ("0mbit", "above zero"), ("-5mbit", "not a number"), ("30 mbits", "unknown unit"),
])
def test_parse_rate_refuses_bad_text_in_one_line(text, why):
    with pytest.raises(UsageError) as err:
        parse_rate(text)
    assert why in str(err.value) and repr(text) in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, seconds", [
    ("20ms", 0.020), ("0.5s", 0.5), ("100us", 100e-6), ("2sec", 2), ("5msec", 0.005),
    ("0ms", 0.0),
])
def test_parse_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["20", "20m", "ms", "1h", "-1ms"])
def test_parse_time_refuses(text):
    with pytest.raises(UsageError, match=re.escape(repr(text))):
        parse_time(text)


@pytest.mark.parametrize("text, fraction", [("10%", 0.1), ("0.1", 0.1), ("0%", 0.0),
                                            ("100%", 1.0), ("0.99", 0.99), ("0.5 %", 0.005)])
def test_parse_loss(text, fraction):
    assert parse_loss(text) == pytest.approx(fraction)


@pytest.mark.parametrize("text, why", [("10", "more than all. Write 10% for 10 percent"),
                                       ("1", "drop every packet. Write 1% for 1 percent"),
                                       ("101%", "more than 100"), ("10x", "unknown unit"),
                                       ("lots", "not a number")])
def test_parse_loss_refuses(text, why):
    with pytest.raises(UsageError, match=why):
        parse_loss(text)


@pytest.mark.parametrize("text, size", [("1500", 1500), ("64kb", 65536), ("1mb", 2**20),
                                        ("100p", 100 * FRAME_BYTES), ("3pkt", 3 * FRAME_BYTES)])
def test_parse_size(text, size):
    assert parse_tc_size(text) == size


def test_impairment_refuses_impossible_values():
    with pytest.raises(UsageError, match="jitter"):
        Impairment(delay_s=0.01, jitter_s=0.02)
    with pytest.raises(UsageError, match="fraction"):
        Impairment(loss=1.5)
    with pytest.raises(UsageError, match="one full frame"):
        Impairment(rate_bps=1e6, queue_bytes=100)
    with pytest.raises(UsageError, match="bad rate"):
        Impairment.from_text(rate="30")
    # typos, not experiments: refused before any lab is built (they overflowed later on)
    with pytest.raises(UsageError, match="over 60 s each way"):
        Impairment.from_text(delay="100s")
    with pytest.raises(UsageError, match="longer than a day"):     # every duration's cap
        Impairment.from_text(delay="1e300s")
    with pytest.raises(UsageError, match="over 1 Tbit/s"):
        Impairment.from_text(rate="1e300gbit")
    with pytest.raises(UsageError, match="over 2 GiB"):
        Impairment.from_text(rate="10mbit", queue="1e300")
    assert Impairment.from_text(delay="60s", rate="1tbit", queue="2048mb").delay_s == 60


def test_default_queue_is_one_bdp_with_a_floor():
    imp = Impairment(rate_bps=100e6, delay_s=0.025)
    assert imp.queue_limit_bytes == math.ceil(100e6 * 0.050 / 8)  # 100 Mbit/s x 50 ms RTT
    assert Impairment(rate_bps=1e6).queue_limit_bytes == 16 * FRAME_BYTES
    assert Impairment(rate_bps=1e6, queue_bytes=50_000).queue_limit_bytes == 50_000


def test_verdict_message_layout():
    """The batch verdict as the kernel's uapi lays it out (nlmsghdr, nfgenmsg, one attribute)."""
    msg = delayline.verdict_batch(7, 0x01020304)
    length, kind, flags = int.from_bytes(msg[0:4], sys.byteorder), \
        int.from_bytes(msg[4:6], sys.byteorder), int.from_bytes(msg[6:8], sys.byteorder)
    assert (length, kind, flags) == (len(msg), (3 << 8) | 3, 1)  # NFNL_SUBSYS_QUEUE, BATCH
    assert msg[16:20] == bytes([0, 0, 0, 7])  # AF_UNSPEC, version 0, queue 7 big-endian
    assert msg[20:24] == (12).to_bytes(2, sys.byteorder) + (2).to_bytes(2, sys.byteorder)
    assert msg[24:32] == bytes([0, 0, 0, 1, 1, 2, 3, 4])  # NF_ACCEPT, id, big-endian


def test_kernel_queue_line_parses():
    text = "    0  23566     3 1     0     2     1      4559  1\n"
    q = delayline.read_kernel_queues(text)[0]
    assert (q.portid, q.held, q.queue_dropped, q.user_dropped, q.id_sequence) == \
        (23566, 3, 2, 1, 4559)


@pytest.fixture(scope="module")
def lab():
    with topologies.sender_router_receiver() as lab:
        yield lab


@pytest.fixture
def impaired(lab):
    """apply() with removal guaranteed, whatever the test does."""
    made = []

    def _apply(imp: Impairment, **kw):
        applied = apply(lab, lab.bottleneck, imp, **kw)
        made.append(applied)
        return applied
    yield _apply
    for applied in made:
        applied.remove()


def assert_clean(lab: Lab) -> None:
    """No chain, rule, qdisc or queue of ours is left in the router."""
    for tool in ("iptables", "ip6tables"):
        rules = lab.run("router", tool, "-w", "-S").stdout
        assert "PSL_" not in rules and "NFQUEUE" not in rules, rules
    qdiscs = lab.run("router", "tc", "qdisc", "show").stdout
    assert "tbf" not in qdiscs and "netem" not in qdiscs, qdiscs
    assert lab.run("router", "cat", delayline.PROC_QUEUES).stdout.strip() == ""


# -- rate ----------------------------------------------------------------------------------------
@pytest.mark.netns
@pytest.mark.parametrize("rate_bps", [1e6, 10e6, 100e6])
def test_asked_rate_is_iperf3_goodput(lab, impaired, rate_bps):
    if rate_bps >= 100e6:  # can this machine forward that at all, without the limit?
        free = received_goodput_bps(iperf3_tcp(lab, seconds=1, omit=0))
        if free < 1.3 * rate_bps:
            pytest.skip(f"the unlimited path carries only {free / 1e6:.0f} Mbit/s here")
    applied = impaired(Impairment(rate_bps=rate_bps))
    assert applied.mechanisms["rate"] in ("tbf", "netem")

    def measure():
        report = iperf3_tcp(lab)
        return received_goodput_bps(report), expected_goodput_bps(report, rate_bps)
    first, second = measure_twice(measure, lambda m: within(m[0], m[1], 0.10))
    got, want = second or first
    assert within(got, want, 0.10), f"asked {rate_bps / 1e6:g} Mbit/s: expected goodput " \
        f"{want / 1e6:.3f}, iperf3 received {got / 1e6:.3f} Mbit/s (first try {first[0]/1e6:.3f})"


# -- delay and jitter -------------------------------------------------------------------------
@pytest.mark.netns
@pytest.mark.parametrize("rtt_ms", [10, 50, 100])
def test_asked_delay_is_ping_rtt(lab, impaired, rtt_ms):
    applied = impaired(Impairment(delay_s=rtt_ms / 2 / 1e3))
    assert applied.mechanisms["delay"] in ("nfqueue-delayline", "netem")
    count = 20

    def measure():
        rtts = ping_rtts_ms(lab, count, 0.05)
        assert len(rtts) == count, "ping lost replies with no loss asked"
        return statistics.median(rtts)
    first, second = measure_twice(measure, lambda m: rtt_as_asked(m, rtt_ms))
    got = second if second is not None else first
    assert rtt_as_asked(got, rtt_ms), f"asked RTT {rtt_ms} ms, ping median {got:.2f} ms " \
        f"(first try {first:.2f})"
    applied.check()


@pytest.mark.netns
def test_jitter_spreads_rtt_as_asked(lab, impaired):
    """Uniform +-J in each direction: RTT = 2D + the sum of two uniforms, std J*sqrt(2/3).

    The interval (11 ms) is longer than 2J, so the no-reordering rule never moves a packet.
    The tolerance is 4 standard errors of a sample standard deviation from n replies
    (kurtosis of the sum of two uniforms: 2.4), plus 0.3 ms of the machine's own noise.
    """
    delay_ms, jitter_ms, n = 20, 5, 200
    applied = impaired(Impairment(delay_s=delay_ms / 1e3, jitter_s=jitter_ms / 1e3))
    assert applied.mechanisms["jitter"] in ("nfqueue-delayline", "netem")
    report = ping(lab, n, 0.011)
    assert len(report.rtts_ms) == n
    want_std = jitter_ms * math.sqrt(2 / 3)
    rel_se = 0.5 * math.sqrt((2.4 - 1) / n)
    assert abs(report.mdev_ms - want_std) <= 4 * rel_se * want_std + 0.3, \
        f"ping mdev {report.mdev_ms:.2f} ms, expected {want_std:.2f} ms"
    assert within(report.avg_ms, 2 * delay_ms, 0.10)
    assert 2 * (delay_ms - jitter_ms) <= report.min_ms
    assert report.max_ms <= 2 * (delay_ms + jitter_ms) + 5


# -- loss ------------------------------------------------------------------------------------------
@pytest.mark.netns
@pytest.mark.parametrize("loss", [0.01, 0.10, 0.30])
def test_asked_loss_is_the_counted_loss(lab, impaired, loss):
    """The DROP rule's count over the packets offered is p within 4 binomial sigmas, and the
    receiver got exactly the offered packets minus the counted drops: the counter is the loss."""
    applied = impaired(Impairment(loss=loss))
    assert applied.mechanisms["loss"] in ("iptables-statistic", "netem")
    count = 5000
    seqs = udp_sequence(lab, count, pps=20000)
    data = applied.counters().loss["data"]
    assert data.offered_packets == count  # nothing else crossed the router that way
    sigma = math.sqrt(loss * (1 - loss) / count)
    rate = data.dropped_packets / count
    assert abs(rate - loss) <= 4 * sigma, \
        f"asked {loss:.0%}: dropped {data.dropped_packets} of {count} ({rate:.2%})"
    assert len(seqs) == count - data.dropped_packets
    assert seqs == sorted(set(seqs))


# -- the delay line keeps order and drops nothing ---------------------------------------------
@pytest.mark.netns
def test_delay_line_keeps_order_and_drops_nothing(lab, impaired, tmp_path):
    """Numbered UDP through delay + jitter: every datagram arrives, in order.  Then a TCP
    transfer captured on both ends: the receiver sees exactly the sender's data segments
    (sequence number, length, IP id), in the sender's order.  Comparing the two ends, rather
    than looking for tshark's retransmission flags, leaves TCP free to retransmit on its own
    (a tail loss probe, say) without hiding a drop or a swap on the path."""
    applied = impaired(Impairment(delay_s=0.010, jitter_s=0.005, rate_bps=20e6,
                                  queue_bytes=8 << 20))
    seqs = udp_sequence(lab, 4000, pps=4000)
    assert seqs == list(range(4000))

    pcaps = {end: tmp_path / f"{end}.pcap" for end in ("sender", "receiver")}
    with lab.capture("receiver", "eth0", pcaps["receiver"], snaplen=96), \
            lab.capture("sender", "eth0", pcaps["sender"], snaplen=96):
        iperf3_tcp(lab, seconds=2, omit=0)
    from tests.helpers.tshark_ref import tshark_fields
    sender = lab.address("sender")
    segments = {end: tshark_fields(path, ("ip.src", "ip.id", "tcp.seq_raw", "tcp.len"))
                .loc[lambda t: (t["ip.src"] == sender) & (t["tcp.len"].fillna("0") != "0")]
                .apply(tuple, axis=1).tolist() for end, path in pcaps.items()}
    assert len(segments["sender"]) > 1000
    assert segments["receiver"] == segments["sender"]
    counters = applied.counters()
    assert counters.qdiscs["eth1"].dropped_packets == 0
    for direction, c in counters.delay.items():
        assert c.kernel["queue_dropped"] == 0 and c.kernel["user_dropped"] == 0, direction
    applied.check()
    for line in applied._delay_lines.values():  # no warning either (SCHED_FIFO, imports)
        with open(line.stderr_path) as f:
            assert f.read() == ""
    final = applied.remove()
    for direction, c in final.delay.items():
        p = c.program
        assert p["packets_received"] == p["packets_released"] == c.kernel["id_sequence"]
        assert p["enobufs"] == 0 and p["verdict_errors"] == 0 and p["held_now"] == 0
        assert p["stopped_by"] == "SIGTERM" and c.exit_code == 0


# -- removal -------------------------------------------------------------------------------------
@pytest.mark.netns
def test_remove_leaves_nothing(lab):
    applied = apply(lab, lab.bottleneck, Impairment(loss=0.1, delay_s=0.005, rate_bps=10e6,
                                                     ack_loss=0.05))
    assert set(applied.mechanisms) == {"loss", "ack_loss", "delay", "rate", "queue"}
    pids = [line.proc.pid for line in applied._delay_lines.values()]
    ping_rtts_ms(lab, 3, 0.05)  # traffic through every mechanism
    applied.remove()
    applied.remove()  # idempotent
    assert_clean(lab)
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)
    assert not os.path.exists(applied.settings["stats_dir"])
    assert len(ping_rtts_ms(lab, 3, 0.05)) == 3  # the path forwards again


@pytest.mark.netns
def test_killed_delay_line_fails_loudly_and_is_still_removed(lab):
    applied = apply(lab, lab.bottleneck, Impairment(delay_s=0.005))
    try:
        applied.check()
        victim = applied._delay_lines["data"].proc
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(5)
        with pytest.raises(LabError, match="delay line .* exited with code -9"):
            applied.counters()
        with pytest.raises(LabError, match="dropped"):
            applied.check()
        assert ping_rtts_ms(lab, 2, 0.05) == []  # the queue has no listener: really dropped
    finally:
        applied.remove()
    assert_clean(lab)
    assert len(ping_rtts_ms(lab, 2, 0.05)) == 2


PARENT = r"""
import sys, time
from pcapstats.lab import topologies
from pcapstats.lab.impair import Impairment, apply
with topologies.sender_router_receiver() as lab:
    applied = apply(lab, lab.bottleneck, Impairment(loss=0.1, delay_s=0.02, rate_bps=5e6))
    pids = [line.proc.pid for line in applied._delay_lines.values()]
    print(lab.prefix, applied.settings["stats_dir"], *pids, flush=True)
    if sys.argv[1] != "close":
        time.sleep(60)
"""


@pytest.mark.netns
@pytest.mark.parametrize("how", ["close", "sigint", "sigterm", "sigkill"])
def test_lab_exit_removes_everything(how):
    """Lab close (normal end, Ctrl-C, SIGTERM) stops the delay lines and leaves no namespace
    or scratch directory; after SIGKILL, cleanup_leftovers() removes what the run left."""
    proc = subprocess.Popen([sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    prefix = None
    try:
        assert select.select([proc.stdout], [], [], 30)[0], "the lab did not come up"
        prefix, stats_dir, *pids = proc.stdout.readline().split()
        if how != "close":
            proc.send_signal(getattr(signal, how.upper()))
        proc.wait(30)
        if how == "sigkill":
            assert os.path.isdir(stats_dir) and prefix in list_netns_text()
            removed = cleanup_leftovers(prefix + "-")
            assert stats_dir in removed and f"{prefix}-router" in removed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if prefix:
            cleanup_leftovers(prefix + "-", only_dead=False)
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)
    assert prefix not in list_netns_text()
    assert not os.path.exists(stats_dir)


def list_netns_text() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.mark.netns
def test_netem_is_detected_from_the_kernel(lab):
    """auto picks netem exactly when `tc` can add one (asked independently, in the router)."""
    probe = lab.run("router", "tc", "qdisc", "add", "dev", "lo", "root", "netem", check=False)
    if probe.returncode == 0:
        lab.run("router", "tc", "qdisc", "del", "dev", "lo", "root")
    applied = apply(lab, lab.bottleneck, Impairment(delay_s=0.001))
    try:
        want = "netem" if probe.returncode == 0 else "nfqueue-delayline"
        assert applied.mechanisms["delay"] == want
    finally:
        applied.remove()
    if probe.returncode != 0:
        with pytest.raises(LabError, match="no sch_netem"):
            apply(lab, lab.bottleneck, Impairment(delay_s=0.001), mechanism="netem")
    assert_clean(lab)


@pytest.mark.netns
def test_delay_line_that_cannot_bind_is_one_error_and_nothing_is_left(lab):
    """Queue 0 already has a listener: the kernel refuses a second bind (EBUSY); apply() says
    so in one line and undoes what it had started."""
    squatter = lab.popen("router", sys.executable, "-m", "pcapstats.tools.delayline",
                         "--queue", 0, "--delay-ms", 1, stdout=subprocess.PIPE, text=True)
    try:
        assert select.select([squatter.stdout], [], [], 10)[0]
        assert squatter.stdout.readline() == "ready queue=0\n"
        with pytest.raises(LabError) as err:
            apply(lab, lab.bottleneck, Impairment(delay_s=0.001))
        assert "queue 0" in str(err.value) and "another program" in str(err.value)
        assert "\n" not in str(err.value)
    finally:
        lab.stop(squatter)
    assert_clean(lab)
