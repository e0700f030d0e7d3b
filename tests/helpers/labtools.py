"""Measuring a lab path with the tools' own reports (iperf3 -J, ping), shared by the lab tests."""

from __future__ import annotations

import json
import re
import select
import subprocess
import time
from dataclasses import dataclass

from pcapstats.lab import Lab

# Ethernet 14 + IPv4 20 + TCP 20 + timestamp option 12: what a full TCP segment carries on
# top of its MSS, in the frames tbf counts.
TCP_FRAME_OVERHEAD_BYTES = 66
IPERF_PORT = 5211
UDP_PORT = 5212


def iperf3_tcp(lab: Lab, seconds: float = 3, omit: int = 1, sender: str = "sender",
               receiver: str = "receiver", port: int = IPERF_PORT) -> dict:
    """iperf3 -J of one TCP transfer sender -> receiver (the client's JSON report)."""
    server = lab.popen(receiver, "iperf3", "-s", "-1", "-p", port, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while f":{port} " not in lab.run(receiver, "ss", "-Hltn").stdout:
            assert time.monotonic() < deadline, "iperf3 server did not listen"
            time.sleep(0.05)
        out = lab.run(sender, "iperf3", "-c", lab.address(receiver), "-p", port, "-t", seconds,
                      "-O", omit, "-J", timeout=seconds + omit + 30).stdout
    finally:
        lab.stop(server)
    return json.loads(out)


def received_goodput_bps(report: dict) -> float:
    return report["end"]["sum_received"]["bytes"] * 8 / report["end"]["sum_received"]["seconds"]


def expected_goodput_bps(report: dict, rate_bps: float) -> float:
    """Payload bits/s a link of rate_bps carries in full frames of the MSS iperf3 reports."""
    mss = report["start"]["tcp_mss_default"]
    return rate_bps * mss / (mss + TCP_FRAME_OVERHEAD_BYTES)


@dataclass
class PingReport:
    """ping's own report: per-reply times (printed with 3 significant digits: 1 ms steps from
    100 ms up) and its summary line (microsecond precision; mdev is its standard deviation)."""
    rtts_ms: list[float]
    min_ms: float | None = None
    avg_ms: float | None = None
    max_ms: float | None = None
    mdev_ms: float | None = None


def ping(lab: Lab, count: int, interval_s: float, host: str = "sender",
         target: str = "receiver") -> PingReport:
    """Ping target from host; a reply later than 2 s counts as lost."""
    out = lab.run(host, "ping", "-n", "-c", count, "-i", interval_s, "-W", 2,
                  lab.address(target), check=False, timeout=count * interval_s + 30).stdout
    report = PingReport([float(t) for t in re.findall(r"time=([\d.]+) ms", out)])
    summary = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
    if summary:
        report.min_ms, report.avg_ms, report.max_ms, report.mdev_ms = \
            map(float, summary.groups())
    return report


def ping_rtts_ms(lab: Lab, count: int, interval_s: float) -> list[float]:
    return ping(lab, count, interval_s).rtts_ms


def within(got: float, want: float, tolerance: float) -> bool:
    return abs(got - want) <= tolerance * want


def rtt_as_asked(got_ms: float, asked_ms: float) -> bool:
    """A delayed path's RTT as asked.  A delay line can only be late, never early (0.2 ms:
    ping's printed precision), and it is late by the wake-ups of its thread: 0.3-0.7 ms on
    a quiet machine, 1.2 ms once at 10 ms in CI on a busy shared VM.  So: up to 10 % or
    2 ms late, whichever is more -- a delay left out, halved or doubled still fails."""
    return asked_ms - 0.2 <= got_ms <= asked_ms + max(0.10 * asked_ms, 2.0)


def measure_twice(measure, check) -> tuple:
    """Measure; if the check fails, measure once more (the machine is shared): both returned."""
    first = measure()
    if check(first):
        return first, None
    return first, measure()


# -- numbered UDP datagrams: what the path let through, in the order it did ------------------
UDP_COUNTER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(10.0)
print("ready", flush=True)
seqs = []
try:
    while True:
        seqs.append(int.from_bytes(s.recv(2048)[:4], "big"))
        s.settimeout(1.0)  # the sender is done once nothing came for a second
except socket.timeout:
    pass
print(" ".join(map(str, seqs)))
"""

UDP_SENDER = r"""
import socket, sys, time
addr, port, count, pps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start = time.monotonic()
for k in range(count):
    while time.monotonic() < start + k / pps:
        pass
    s.sendto(k.to_bytes(4, "big") + bytes(196), (addr, port))
"""


def udp_sequence(lab: Lab, count: int, pps: float) -> list[int]:
    """Send count numbered datagrams sender -> receiver; the sequence numbers, as received."""
    counter = lab.popen_python("receiver", UDP_COUNTER, lab.address("receiver"), UDP_PORT,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert select.select([counter.stdout], [], [], 10)[0]
        assert counter.stdout.readline() == "ready\n"
        lab.python("sender", UDP_SENDER, lab.address("receiver"), UDP_PORT, count, pps,
                   timeout=count / pps + 30)
        out, _ = counter.communicate(timeout=30)
    finally:
        lab.stop(counter)
    return [int(x) for x in out.split()]
