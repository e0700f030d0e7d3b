"""Make the benchmark's big capture: real iperf3 TCP traffic between two network namespaces.

The recipe is the tests' one, through ``pcapstats.lab`` (two namespaces joined by a veth,
TSO/GSO/GRO off so every packet on the capture is one wire-sized segment, tcpdump with
``--immediate-mode`` so the tail is not lost, everything removed on every exit path), sized
up: two parallel iperf3 streams capped with ``-b`` so tcpdump keeps up, snaplen 128. A
capture is only kept when tcpdump reports 0 packets dropped by the kernel and it holds at least
the packets asked for; otherwise it is made again (longer, or slower when tcpdump fell behind).
The capture is written under a temporary name and renamed when it is good, so a cut or failed
run is never reused. A JSON sidecar records how it was made.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: Packets per second that 2 x 1000 Mbit/s of iperf3 gives on a veth (measured here: ~178k).
_PPS_PER_MBIT = 178_000 / 2000


@dataclass(frozen=True)
class Recipe:
    """What to capture: the least number of packets, and the iperf3 rate per stream."""

    min_packets: int
    mbit_per_stream: int
    streams: int = 2
    snaplen: int = 128

    def seconds_for(self, packets: int) -> int:
        """iperf3 -t that should give ``packets`` at this rate, with 10 % to spare."""
        pps = _PPS_PER_MBIT * self.mbit_per_stream * self.streams
        return max(1, math.ceil(packets * 1.1 / pps))


FULL = Recipe(min_packets=1_500_000, mbit_per_stream=1000)
QUICK = Recipe(min_packets=150_000, mbit_per_stream=400)


def _say(msg: str) -> None:
    print(f"[capture] {msg}", file=sys.stderr, flush=True)


def _capture_once(out: Path, recipe: Recipe, seconds: int, mbit: int) -> dict:
    """One iperf3 run from host a to host b, captured on a's veth into ``out``."""
    from pcapstats.lab import topologies  # the tests' own lab: namespaces, veth, tcpdump, cleanup

    with topologies.two_hosts() as lab:
        server = lab.popen("b", "iperf3", "-s", "-1", "-p", "5201",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        iface = lab.interface("a", "b").name
        with lab.capture("a", iface, out, snaplen=recipe.snaplen, bpf="tcp") as dump:
            time.sleep(0.3)  # let the iperf3 server bind
            client = lab.popen("a", "iperf3", "-c", lab.address("b"), "-p", "5201", "-P",
                               str(recipe.streams), "-b", f"{mbit}M", "-t", str(seconds),
                               "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            t0 = time.monotonic()
            while client.poll() is None:
                time.sleep(1)
                size = out.stat().st_size if out.exists() else 0
                _say(f"  {time.monotonic() - t0:4.0f}/{seconds} s, {size / 1e6:6.0f} MB written")
            report, err = client.communicate()
            if client.returncode != 0:
                raise RuntimeError(f"iperf3 failed: {report[-500:]} {err[-500:]}")
            stats = dump.stop(allow_drops=True)  # drops are judged (and retried) by make()
        server.wait(timeout=10)
    sent = json.loads(report)["end"]["sum_sent"]
    return {"packets": stats.captured, "dropped_by_kernel": stats.dropped_by_kernel,
            "iperf3": {"streams": recipe.streams, "mbit_per_stream": mbit, "seconds": seconds,
                       "bytes_sent": sent["bytes"], "bits_per_second": sent["bits_per_second"],
                       "retransmits": sent.get("retransmits")}}


def make(out: Path, recipe: Recipe, attempts: int = 4) -> dict:
    """Capture into ``out`` (pcap) until it is complete and large enough; returns the sidecar.

    SIGTERM unwinds like Ctrl-C while this runs, so the lab's ``with`` removes the namespaces
    and the half-written file goes too.
    """
    if not shutil.which("iperf3"):
        raise SystemExit("bench: making the capture needs iperf3 (apt-get install iperf3)")
    tmp = out.with_name(out.name + ".part")
    old_handler = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        return _attempts(tmp, out, recipe, attempts)
    finally:
        tmp.unlink(missing_ok=True)
        signal.signal(signal.SIGTERM, old_handler)


def _exit_on_signal(signum, _frame) -> None:
    raise SystemExit(128 + signum)


def _attempts(tmp: Path, out: Path, recipe: Recipe, attempts: int) -> dict:
    seconds, mbit = recipe.seconds_for(recipe.min_packets), recipe.mbit_per_stream
    for attempt in range(1, attempts + 1):
        _say(f"attempt {attempt}: iperf3 -P {recipe.streams} -b {mbit}M -t {seconds}, "
             f"tcpdump -s {recipe.snaplen} (want >= {recipe.min_packets:,} packets)")
        facts = _capture_once(tmp, recipe, seconds, mbit)
        _say(f"  {facts['packets']:,} packets, {facts['dropped_by_kernel']} dropped by kernel")
        if facts["dropped_by_kernel"]:
            mbit = int(mbit * 0.7)  # tcpdump fell behind: slower, and longer to make up
            seconds = recipe.seconds_for(recipe.min_packets) * recipe.mbit_per_stream // mbit
        elif facts["packets"] < recipe.min_packets:
            seconds = math.ceil(seconds * recipe.min_packets / max(facts["packets"], 1) * 1.1)
        else:
            tmp.rename(out)
            facts.update(snaplen=recipe.snaplen, made=time.strftime("%Y-%m-%d %H:%M:%S %z"),
                         recipe="pcapstats.lab.Lab.two_hosts (netns + veth, TSO/GSO/GRO off, "
                                "rps pinned), tcpdump --immediate-mode, nanosecond pcap")
            return facts
    raise SystemExit(f"bench: no complete capture of {recipe.min_packets:,} packets "
                     f"after {attempts} attempts")
