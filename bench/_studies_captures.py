"""Make the study benchmark's big captures: flood pings and iperf3 UDP between two lab hosts.

Same recipe as bench/_capture.py (the tests' lab: two network namespaces joined by a veth,
TSO/GSO/GRO off, tcpdump ``--immediate-mode``, nanosecond pcap, everything removed on every
exit path), with other traffic:

- **pings**: a short iperf3 TCP transfer first (``-n 100K``: a few hundred packets, so
  ``pcapstats throughput`` -- which exits 1 on a capture with no TCP or UDP stream -- has a
  stream to report and can be timed on the same file), then ``ping -f -q -c N -s S`` for
  each size, one after the other, captured on host a's veth (the pinging host);
- **udp**: ``iperf3 -u -b RATE -l 200 -t T``, captured on host b's veth (the receiver).

A capture is kept only when tcpdump reports 0 packets dropped by the kernel and it holds at
least the packets asked for; otherwise it is made again (slower after drops: a ping interval
instead of flood, a lower iperf3 rate; longer when short). It is written under a temporary
name and renamed when good; the JSON written beside it says how it was made.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SNAPLEN = 128
TCP_PRELUDE = "100K"  # iperf3 -n: the TCP stream the pings capture carries for `throughput`


@dataclass(frozen=True)
class PingRecipe:
    """Flood pings: ``count`` echoes of each size (2 packets an echo)."""

    min_packets: int
    count: int
    sizes: tuple[int, ...] = (56, 1000)
    snaplen: int = SNAPLEN


@dataclass(frozen=True)
class UdpRecipe:
    """iperf3 UDP: ``mbit`` Mbit/s of ``length``-byte datagrams, long enough for min_packets."""

    min_packets: int
    mbit: float
    length: int = 200
    snaplen: int = SNAPLEN

    def seconds_for(self, packets: int, mbit: float) -> int:
        pps = mbit * 1e6 / (self.length * 8)
        return max(2, math.ceil(packets * 1.1 / pps))


PINGS_FULL = PingRecipe(min_packets=1_100_000, count=300_000)
PINGS_QUICK = PingRecipe(min_packets=100_000, count=26_000)
UDP_FULL = UdpRecipe(min_packets=1_000_000, mbit=80)      # 50k datagrams/s, ~22 s
UDP_QUICK = UdpRecipe(min_packets=100_000, mbit=40)


def _say(msg: str) -> None:
    print(f"[capture] {msg}", file=sys.stderr, flush=True)


def _need(*tools: str) -> None:
    import os
    if os.geteuid() != 0:
        raise SystemExit("studies: making the captures needs root (network namespaces); "
                         "run as root, or copy made captures into bench/data")
    for tool in tools:
        if not shutil.which(tool):
            raise SystemExit(f"studies: making the captures needs {tool} "
                             f"(apt-get install {'iputils-ping' if tool == 'ping' else tool})")


def _exit_on_signal(signum, _frame) -> None:
    raise SystemExit(128 + signum)


def _attempts(out: Path, attempts: int, once, adjust, enough) -> dict:
    """Run ``once(tmp, setting)`` until ``enough(facts)``; ``adjust`` gives the next setting.

    SIGTERM unwinds like Ctrl-C meanwhile, so the lab's ``with`` removes the namespaces and
    the half-written file goes too.
    """
    tmp = out.with_name(out.name + ".part")
    old = signal.signal(signal.SIGTERM, _exit_on_signal)
    setting = None
    try:
        for attempt in range(1, attempts + 1):
            facts = once(tmp, setting, attempt)
            _say(f"  {facts['packets']:,} packets, {facts['dropped_by_kernel']} dropped by kernel")
            if enough(facts):
                tmp.rename(out)
                facts.update(snaplen=SNAPLEN, pcap_bytes=out.stat().st_size,
                             made=time.strftime("%Y-%m-%d %H:%M:%S %z"),
                             attempt=attempt,
                             recipe="pcapstats.lab.topologies.two_hosts (netns + veth, "
                                    "TSO/GSO/GRO off, rps pinned), tcpdump --immediate-mode "
                                    f"-s {SNAPLEN}, nanosecond pcap")
                return facts
            setting = adjust(facts)
    finally:
        tmp.unlink(missing_ok=True)
        signal.signal(signal.SIGTERM, old)
    raise SystemExit(f"studies: no complete capture for {out.name} after {attempts} attempts")


# -- pings ------------------------------------------------------------------------------------

def make_pings(out: Path, recipe: PingRecipe, attempts: int = 4) -> dict:
    """Flood pings (after a short TCP prelude) into ``out``; returns the facts for its JSON."""
    _need("ip", "ethtool", "tcpdump", "ping", "iperf3")

    def once(tmp: Path, setting, attempt: int) -> dict:
        count, interval = (setting or (recipe.count, None))
        how = "-f (flood)" if interval is None else f"-i {interval:.6f}"
        _say(f"attempt {attempt}: ping {how} -c {count:,} -s {'/'.join(map(str, recipe.sizes))}"
             f", tcpdump -s {recipe.snaplen} (want >= {recipe.min_packets:,} packets)")
        return _pings_once(tmp, recipe, count, interval)

    def adjust(facts: dict):
        runs = facts["ping"]["runs"]
        count = facts["ping"]["count"]
        if facts["dropped_by_kernel"]:  # tcpdump fell behind: a fixed, slower pace
            per_s = min(r["transmitted"] / r["seconds"] for r in runs if r["seconds"] > 0)
            return count, 1 / (0.7 * per_s)
        wanted = math.ceil(count * recipe.min_packets / max(facts["packets"], 1) * 1.05)
        return wanted, facts["ping"]["interval_s"]

    return _attempts(out, attempts, once, adjust,
                     lambda f: not f["dropped_by_kernel"] and f["packets"] >= recipe.min_packets)


def _pings_once(tmp: Path, recipe: PingRecipe, count: int, interval: float | None) -> dict:
    from pcapstats.lab import topologies  # lazy: root-only, and the lab is only needed here
    from pcapstats.lab.traffic import parse_ping, wait_listening

    runs = []
    with topologies.two_hosts() as lab:
        peer = lab.address("b")
        server = lab.popen("b", "iperf3", "-s", "-1", "-p", "5201",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(lab, "b", 5201, proc=server)
        iface = lab.interface("a", "b").name
        with lab.capture("a", iface, tmp, snaplen=recipe.snaplen) as dump:
            lab.run("a", "iperf3", "-c", peer, "-p", "5201", "-n", TCP_PRELUDE, timeout=60)
            for size in recipe.sizes:
                pace = ["-f"] if interval is None else ["-i", f"{interval:.6f}"]
                argv = ["ping", "-q", "-n", *pace, "-c", count, "-s", size, "-W", 1, peer]
                t0 = time.monotonic()
                # at worst flood ping sends 100 a second (a reply missing for 10 ms)
                proc = lab.run("a", *argv, check=False,
                               timeout=count / (1 / interval if interval else 2000) + 120)
                seconds = time.monotonic() - t0
                if proc.returncode not in (0, 1):
                    raise RuntimeError(f"{' '.join(map(str, argv))} exited {proc.returncode}: "
                                       f"{proc.stderr.strip()[-300:]}")
                summary = parse_ping(proc.stdout)["summary"]
                _say(f"  ping -s {size}: {summary.get('transmitted', 0):,} sent, "
                     f"{summary.get('received', 0):,} answered in {seconds:.1f} s")
                runs.append({"size_bytes": size, "seconds": round(seconds, 3), **summary,
                             "argv": ["ping", *map(str, argv[1:-1]), "<b>"]})
            stats = dump.stop(allow_drops=True)  # judged (and retried) by the caller
        server.wait(timeout=10)
    return {"kind": "pings", "packets": stats.captured,
            "dropped_by_kernel": stats.dropped_by_kernel,
            "tcp_prelude": f"iperf3 -c <b> -n {TCP_PRELUDE} (TCP, before the pings)",
            "ping": {"count": count, "interval_s": interval, "sizes": list(recipe.sizes),
                     "runs": runs}}


# -- udp --------------------------------------------------------------------------------------

def make_udp(out: Path, recipe: UdpRecipe, attempts: int = 4) -> dict:
    """iperf3 UDP into ``out``, captured at the receiver; returns the facts for its JSON."""
    _need("ip", "ethtool", "tcpdump", "iperf3")

    def once(tmp: Path, setting, attempt: int) -> dict:
        mbit, seconds = setting or (recipe.mbit, recipe.seconds_for(recipe.min_packets,
                                                                    recipe.mbit))
        _say(f"attempt {attempt}: iperf3 -u -b {mbit:g}M -l {recipe.length} -t {seconds}, "
             f"tcpdump -s {recipe.snaplen} (want >= {recipe.min_packets:,} packets)")
        return _udp_once(tmp, recipe, mbit, seconds)

    def adjust(facts: dict):
        mbit, seconds = facts["iperf3"]["mbit"], facts["iperf3"]["seconds"]
        if facts["dropped_by_kernel"]:
            mbit = mbit * 0.7
            return mbit, recipe.seconds_for(recipe.min_packets, mbit)
        return mbit, math.ceil(seconds * recipe.min_packets / max(facts["packets"], 1) * 1.1)

    return _attempts(out, attempts, once, adjust,
                     lambda f: not f["dropped_by_kernel"] and f["packets"] >= recipe.min_packets)


def _udp_once(tmp: Path, recipe: UdpRecipe, mbit: float, seconds: int) -> dict:
    from pcapstats.lab import topologies  # lazy: root-only
    from pcapstats.lab.traffic import wait_listening

    with tempfile.TemporaryDirectory(prefix="studies-udp-") as work, \
            topologies.two_hosts() as lab:
        work = Path(work)
        with open(work / "server.json", "w") as s_out:
            server = lab.popen("b", "iperf3", "-s", "-1", "-J", "-p", "5201", stdout=s_out,
                               stderr=subprocess.STDOUT)
        wait_listening(lab, "b", 5201, proc=server)
        iface = lab.interface("b", "a").name
        with lab.capture("b", iface, tmp, snaplen=recipe.snaplen) as dump:
            argv = ["iperf3", "-c", lab.address("b"), "-p", "5201", "-u", "-b", f"{mbit:g}M",
                    "-l", recipe.length, "-t", seconds, "-J"]
            with open(work / "client.json", "w") as c_out:
                client = lab.popen("a", *argv, stdout=c_out, stderr=subprocess.STDOUT)
            t0 = time.monotonic()
            while client.poll() is None:
                time.sleep(1)
                size = tmp.stat().st_size if tmp.exists() else 0
                _say(f"  {time.monotonic() - t0:4.0f}/{seconds} s, {size / 1e6:6.0f} MB written")
            stats = dump.stop(allow_drops=True)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            lab.stop(server)
        texts = [(work / f"{n}.json").read_text() for n in ("client", "server")]
    if client.returncode != 0:
        raise RuntimeError(f"iperf3 client failed: {texts[0][-500:]}")
    sent = json.loads(texts[0])["end"]["sum"]
    try:
        got = json.loads(texts[1])["end"]["sum"]
    except (json.JSONDecodeError, KeyError):
        got = {}
    return {"kind": "udp", "packets": stats.captured,
            "dropped_by_kernel": stats.dropped_by_kernel,
            "iperf3": {"mbit": mbit, "length": recipe.length, "seconds": seconds,
                       "argv": ["iperf3", "-c", "<b>", *map(str, argv[3:])],
                       "client_packets": sent.get("packets"),
                       "client_bits_per_second": sent.get("bits_per_second"),
                       "server_packets": got.get("packets"),
                       "server_lost_packets": got.get("lost_packets"),
                       "server_jitter_ms": got.get("jitter_ms")}}
