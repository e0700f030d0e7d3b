"""The traffic tools, run between lab hosts: simpleperf, iperf3 TCP/UDP, ping, pingpong, file
transfers.

Each tool has a ``start_<tool>(lab, sender, receiver, work, ...)`` that starts the server side,
waits until it listens and returns a :class:`Running`; ``launch(at_s)`` starts the client (at a
given realtime instant, or now) and ``finish()`` waits for both ends and returns the tool's
*report*, a dict the run puts in the sidecar::

    {"tool": "iperf3", "mode": "tcp", "sender": "sender", "receiver": "receiver",
     "flows":   [{"proto", "src", "sport", "dst", "dport", "cc", ...}],  # one a connection
     "summary": {...},                                                  # the tool's numbers
     "raw":     {...}}                                                  # the tool's own JSON

Starting servers, launching clients and finishing apart lets several host pairs run at once
over one bottleneck: every server is up first, then the clients are launched for one common
instant (a small launcher imports the tool's package, then sleeps until that instant), so the
pairs' transfers start within a few milliseconds of each other, not a Python start-up apart.

Programs write their output to files in ``work`` (a directory the caller owns), never to pipes:
a chatty tool cannot block on a full pipe, and what it said is there to quote when it fails.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from pcapstats._version import __version__
from pcapstats.lab.commands import LabError
from pcapstats.lab.netns import Lab

SIMPLEPERF_PORT, IPERF3_PORT, FILE_PORT, PINGPONG_PORT = 8088, 5201, 5301, 8089
_margin_s = 30.0  # how long past its planned end a tool may take before it counts as hung


@dataclass
class Running:
    """A tool whose server is up: :meth:`launch` starts its client, :meth:`finish` waits for
    both ends and returns the report."""
    tool: str
    _launch: Callable[[float | None], None] = field(repr=False)
    _finish: Callable[[], dict] = field(repr=False)

    def launch(self, at_s: float | None = None) -> "Running":
        """Start the client now, or at realtime ``at_s`` (seconds since the epoch)."""
        self._launch(at_s)
        return self

    def finish(self) -> dict:
        return self._finish()


# Runs a program at a given realtime instant: a Python module (argv "python -m module ...")
# has its package imported first, so only the module's own start remains after the wait.
_AT_LAUNCHER = r"""
import importlib, os, runpy, sys, time
at, argv = float(sys.argv[1]), sys.argv[2:]
module = argv[2] if argv[1:2] == ["-m"] else None
if module:
    importlib.import_module(module.rpartition(".")[0] or module)
time.sleep(max(0.0, at - time.time()))
if module:
    sys.argv = [module, *argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
else:
    os.execvp(argv[0], argv)
"""


class _Spawner:
    """Starts programs in lab hosts with stdout/stderr in files under ``work``."""

    def __init__(self, lab: Lab, work: Path):
        self.lab, self.work = lab, Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self._names: dict[int, str] = {}  # pid -> name of its output files

    def start(self, host: str, name: str, argv: Sequence, at_s: float | None = None
              ) -> subprocess.Popen:
        """Start argv in host now, or (through the launcher) at realtime ``at_s``."""
        if at_s is not None:
            argv = [sys.executable, "-c", _AT_LAUNCHER, repr(at_s), *map(str, argv)]
        out = open(self.work / f"{name}.out", "w")
        err = open(self.work / f"{name}.err", "w")
        try:
            proc = self.lab.popen(host, *argv, stdout=out, stderr=err)
        finally:
            out.close()
            err.close()
        self._names[proc.pid] = name
        return proc

    def output(self, proc: subprocess.Popen) -> str:
        return (self.work / f"{self._names[proc.pid]}.out").read_text()

    def wait(self, proc: subprocess.Popen, what: str, timeout: float) -> str:
        """Wait for proc; its stdout, or LabError quoting the last line it wrote to stderr."""
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.lab.stop(proc)
            raise LabError(f"{what} did not finish within {timeout:.0f} s") from None
        if code != 0:
            lines = ((self.work / f"{self._names[proc.pid]}.err").read_text().strip().splitlines()
                     or self.output(proc).strip().splitlines() or ["(no message)"])
            raise LabError(f"{what} failed with exit code {code}: {lines[-1]}")
        return self.output(proc)


def wait_listening(lab: Lab, host: str, port: int, proto: str = "tcp",
                   proc: subprocess.Popen | None = None, timeout: float = 10.0) -> None:
    """Poll ``ss`` in host until something listens on port (or proc has exited)."""
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    deadline = time.monotonic() + timeout
    while not re.search(rf"[:\]]{port}\s", lab.run(host, "ss", flag).stdout):
        if proc is not None and proc.poll() is not None:
            raise LabError(f"the {proto} server in {host} exited (code {proc.returncode}) "
                           f"before listening on port {port}")
        if time.monotonic() > deadline:
            raise LabError(f"nothing listens on {host}:{port}/{proto} after {timeout:.0f} s")
        time.sleep(0.05)


def _launcher(run: _Spawner, into: list, host: str, name: str, argv: Sequence):
    """Running.launch for a client: start argv (at a given instant) and keep its Popen."""
    def launch(at_s: float | None) -> None:
        into.append(run.start(host, name, argv, at_s))
    return launch


def _reporting(tool: str, run: _Spawner, tag: str, sender: str, receiver: str,
               server: subprocess.Popen, client_argv: Sequence, timeout: float,
               report: Callable[[dict, dict, str, str], dict]) -> Running:
    """Running for one of pcapstats' own tools whose client and server each write a --report
    file (TAG.client.json, TAG.server.json in the work directory): launch starts the client
    in sender, finish waits for both ends (the client ``timeout`` seconds) and gives
    ``report(client's, server's, sender, receiver)``: the sidecar's view of the two."""
    client: list[subprocess.Popen] = []

    def finish() -> dict:
        run.wait(client[0], f"{tool} client in {sender}", timeout)
        run.wait(server, f"{tool} server in {receiver}", _margin_s)
        return report(json.loads((run.work / f"{tag}.client.json").read_text()),
                      json.loads((run.work / f"{tag}.server.json").read_text()),
                      sender, receiver)
    return Running(tool, _launcher(run, client, sender, f"{tag}.client", client_argv), finish)


def _last_json(text: str, what: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise LabError(f"{what} printed no JSON report")


def _planned_s(duration_s: float | None, nbytes: int | None, rate_bps: float | None) -> float:
    if duration_s:
        return duration_s
    if nbytes and rate_bps:
        return 8 * nbytes / rate_bps * 4  # lossy paths take longer than the bare rate says
    return 300.0


# -- simpleperf -------------------------------------------------------------------------------

def start_simpleperf(lab: Lab, sender: str, receiver: str, work: Path, *, port=SIMPLEPERF_PORT,
                     duration_s: float | None = 10, nbytes: int | None = None, parallel: int = 1,
                     cc: str | None = None, sndbuf: int | None = None, rcvbuf: int | None = None,
                     tcp_info_interval_s: float = 0.01, family: int = 4,
                     app_rate_bps: float | None = None) -> Running:
    """simpleperf server in receiver (``--once --report``), client in sender (TCP_INFO on;
    ``app_rate_bps``: its --rate, an application-limited sender)."""
    run = _Spawner(lab, work)
    tag = f"simpleperf-{sender}-{receiver}"
    server_report, client_report = run.work / f"{tag}.server.json", run.work / f"{tag}.client.json"
    addr = lab.address(receiver, family)
    server_argv = [sys.executable, "-m", "pcapstats.tools.simpleperf", "-s", "-b", addr, "-p", port,
                   "--once", "--report", server_report]
    if rcvbuf:
        server_argv += ["--rcvbuf", rcvbuf]
    server = run.start(receiver, f"{tag}.server", server_argv)
    wait_listening(lab, receiver, port, proc=server)
    client_argv = [sys.executable, "-m", "pcapstats.tools.simpleperf", "-c", "-I", addr, "-p", port,
                   "-P", parallel, "--report", client_report,
                   "--tcp-info-interval", tcp_info_interval_s]
    client_argv += ["-n", f"{nbytes}B"] if nbytes else ["-t", duration_s]
    if cc:
        client_argv += ["--cc", cc]
    if sndbuf:
        client_argv += ["--sndbuf", sndbuf]
    if app_rate_bps:
        client_argv += ["--rate", f"{app_rate_bps:.0f}"]
    return _reporting("simpleperf", run, tag, sender, receiver, server, client_argv,
                      _planned_s(duration_s, nbytes, app_rate_bps) + _margin_s,
                      simpleperf_report)


def simpleperf_report(client: dict, server: dict, sender: str, receiver: str) -> dict:
    """The sidecar's view of simpleperf's two --report files: one flow a connection.

    Both files name a connection by its client end (``id``, ``ip:port``); the server's
    ``bytes`` are what arrived.
    """
    served = {c["id"]: c for c in server.get("connections", [])}
    flows = []
    for conn in client.get("connections", []):
        (src, sport), (dst, dport) = _endpoint(conn["local"]), _endpoint(conn["remote"])
        peer = served.get(conn["id"], {})
        flows.append({"proto": "tcp", "src": src, "sport": sport, "dst": dst, "dport": dport,
                      "cc": conn.get("cc"), "sent_bytes": conn.get("bytes"),
                      "received_bytes": peer.get("bytes"), "start_ns": conn.get("start_ns"),
                      "end_ns": conn.get("end_ns"), "protocol_ok": peer.get("protocol_ok"),
                      "tcp_info": conn.get("tcp_info")})
    sent = sum(f["sent_bytes"] or 0 for f in flows)
    received = sum(f["received_bytes"] or 0 for f in flows)
    starts = [f["start_ns"] for f in flows if f["start_ns"]]
    ends = [f["end_ns"] for f in flows if f["end_ns"]]
    seconds = (max(ends) - min(starts)) / 1e9 if starts and ends else None
    return {"tool": "simpleperf", "mode": "tcp", "sender": sender, "receiver": receiver,
            "flows": flows, "raw": {"client": _without_series(client), "server": server},
            "summary": {"sent_bytes": sent, "received_bytes": received, "seconds": seconds,
                        "throughput_bps": 8 * received / seconds if seconds else None,
                        "protocol_ok": all(f["protocol_ok"] for f in flows) if flows else None}}


def _endpoint(text: str) -> tuple[str, int]:
    """simpleperf's ``ip:port`` / ``[ip]:port`` -> (ip, port)."""
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _without_series(report: dict) -> dict:
    """The client's report minus the TCP_INFO series (kept once, in the flows)."""
    out = dict(report)
    out["connections"] = [{k: v for k, v in c.items() if k != "tcp_info"}
                          for c in report.get("connections", [])]
    return out


# -- iperf3 -----------------------------------------------------------------------------------

def start_iperf3(lab: Lab, sender: str, receiver: str, work: Path, *, port=IPERF3_PORT,
                 duration_s: float | None = 10, nbytes: int | None = None, parallel: int = 1,
                 cc: str | None = None, window: int | None = None,
                 udp_rate_bps: float | None = None,
                 udp_length: int | None = None, app_rate_bps: float | None = None,
                 family: int = 4) -> Running:
    """iperf3 server (``-s -1 -J``) in receiver, client (``-J``) in sender; TCP, or UDP if a
    rate is given (``-u -b``).  ``window`` is ``-w`` (both socket buffers).  ``app_rate_bps``
    makes the TCP sender application-limited: iperf3's ``-b`` (it stops writing whenever it
    is ahead of that rate, checked every millisecond: bursts, then silence)."""
    run = _Spawner(lab, work)
    tag = f"iperf3-{sender}-{receiver}"
    server = run.start(receiver, f"{tag}.server", ["iperf3", "-s", "-1", "-J", "-p", port])
    wait_listening(lab, receiver, port, proc=server)
    argv = ["iperf3", "-c", lab.address(receiver, family), "-p", port, "-J", "-P", parallel]
    argv += ["-n", nbytes] if nbytes else ["-t", duration_s]
    if udp_rate_bps:
        argv += ["-u", "-b", int(udp_rate_bps)]
        if udp_length:
            argv += ["-l", udp_length]
    elif app_rate_bps:
        argv += ["-b", int(app_rate_bps)]
    if cc:
        argv += ["-C", cc]
    if window:
        argv += ["-w", window]
    client: list[subprocess.Popen] = []
    timeout = _planned_s(duration_s, nbytes, udp_rate_bps or app_rate_bps) + _margin_s

    def finish() -> dict:
        out = run.wait(client[0], f"iperf3 client in {sender}", timeout)
        client_json = _iperf3_json(out, f"iperf3 client in {sender}")
        server_json = _iperf3_json(run.wait(server, f"iperf3 server in {receiver}", _margin_s),
                                   f"iperf3 server in {receiver}")
        return iperf3_report(client_json, server_json, sender, receiver)
    return Running("iperf3", _launcher(run, client, sender, f"{tag}.client", argv), finish)


def _iperf3_json(text: str, what: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise LabError(f"{what} printed no JSON (iperf3 -J)") from None
    if "error" in data:
        raise LabError(f"{what}: {data['error']}")
    return data


def iperf3_report(client: dict, server: dict, sender: str, receiver: str) -> dict:
    """Flows from iperf3's ``start.connected`` (the client's view); numbers from ``end``."""
    udp = client["start"]["test_start"]["protocol"] == "UDP"
    end = client["end"]
    per_socket = {}
    for s in end.get("streams", []):
        part = s.get("udp") or s.get("sender") or {}
        per_socket[part.get("socket")] = s
    flows = []
    for conn in client["start"]["connected"]:
        s = per_socket.get(conn["socket"], {})
        flow = {"proto": "udp" if udp else "tcp", "src": conn["local_host"],
                "sport": conn["local_port"], "dst": conn["remote_host"],
                "dport": conn["remote_port"],
                "cc": None if udp else end.get("sender_tcp_congestion")}
        if udp:
            flow["sent_bytes"] = s.get("udp", {}).get("bytes")
        else:
            flow["sent_bytes"] = s.get("sender", {}).get("bytes")
            flow["received_bytes"] = s.get("receiver", {}).get("bytes")
            flow["retransmits"] = s.get("sender", {}).get("retransmits")
        flows.append(flow)
    if udp:
        got = end["sum_received"]
        summary = {"sent_bytes": end["sum_sent"]["bytes"], "received_bytes": got["bytes"],
                   "seconds": got["seconds"], "throughput_bps": got["bits_per_second"],
                   "sent_bps": end["sum_sent"]["bits_per_second"],
                   "packets": got["packets"], "lost_packets": got["lost_packets"],
                   "lost_percent": got["lost_percent"], "jitter_ms": got["jitter_ms"],
                   "target_bps": client["start"]["test_start"]["target_bitrate"]}
    else:
        got = end["sum_received"]
        summary = {"sent_bytes": end["sum_sent"]["bytes"], "received_bytes": got["bytes"],
                   "seconds": got["seconds"], "throughput_bps": got["bits_per_second"],
                   "retransmits": end["sum_sent"].get("retransmits"),
                   "cc": end.get("sender_tcp_congestion"),
                   # -b: the application's rate (an application-limited sender); else null
                   "target_bps": client["start"]["test_start"].get("target_bitrate") or None}
    return {"tool": "iperf3", "mode": "udp" if udp else "tcp", "sender": sender,
            "receiver": receiver, "flows": flows, "summary": summary,
            "raw": {"client": client, "server": server}}


# -- ping -------------------------------------------------------------------------------------

_REPLY_RE = re.compile(r"^\[(?P<t>[\d.]+)\] (?P<bytes>\d+) bytes from (?P<src>\S+?):? "
                       r"icmp_seq=(?P<seq>\d+) ttl=(?P<ttl>\d+) time=(?P<ms>[\d.]+) ms")
_SENT_RE = re.compile(r"(?P<tx>\d+) packets transmitted, (?P<rx>\d+) received")
_RTT_RE = re.compile(r"= (?P<min>[\d.]+)/(?P<avg>[\d.]+)/(?P<max>[\d.]+)/(?P<mdev>[\d.]+) ms")


def parse_ping(text: str) -> dict:
    """iputils ping's ``-D`` output: each reply (realtime ns, seq, ttl, rtt_ms) and its summary."""
    replies = []
    for line in text.splitlines():
        m = _REPLY_RE.match(line)
        if m:
            sec, _, frac = m["t"].partition(".")
            replies.append({"time_ns": int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]),
                            "bytes": int(m["bytes"]), "seq": int(m["seq"]),
                            "ttl": int(m["ttl"]), "rtt_ms": float(m["ms"])})
    summary: dict = {}
    if m := _SENT_RE.search(text):
        summary.update(transmitted=int(m["tx"]), received=int(m["rx"]))
    if m := _RTT_RE.search(text):
        summary.update({f"{k}_ms": float(m[k]) for k in ("min", "avg", "max", "mdev")})
    if replies:
        summary["median_ms"] = statistics.median(r["rtt_ms"] for r in replies)
    return {"replies": replies, "summary": summary}


def _ping_argv(lab: Lab, dst: str, count: int, interval_s: float, size: int,
               family: int, address: str | None = None, ident: int | None = None) -> list:
    return ["ping", "-D", "-n", f"-{family}", "-c", count, "-i", interval_s, "-s", size,
            "-W", 2, *(["-e", ident] if ident is not None else []),
            address or lab.address(dst, family)]


def _ping_result(code: int, stdout: str, stderr: str, src: str, size: int, count: int,
                 interval_s: float) -> dict:
    if code not in (0, 1):  # 1: some or all replies missing, which loss can cause
        last = (stderr.strip().splitlines() or ["(no message)"])[-1]
        raise LabError(f"ping from {src} failed with exit code {code}: {last}")
    return {"size_bytes": size, "count": count, "interval_s": interval_s, **parse_ping(stdout)}


def ping(lab: Lab, src: str, dst: str, *, count: int = 5, interval_s: float = 0.2,
         size: int = 56, family: int = 4, address: str | None = None) -> dict:
    """``ping -D -n -c count -i interval -s size``: its replies and summary (lost ones absent);
    ``address``: dst's address to ping (a router's on one link), else its first."""
    proc = lab.run(src, *_ping_argv(lab, dst, count, interval_s, size, family, address),
                   check=False,
                   timeout=count * interval_s + 30)
    return _ping_result(proc.returncode, proc.stdout, proc.stderr, src, size, count, interval_s)


def start_ping(lab: Lab, src: str, dst: str, work: Path, *, count: int = 10,
               interval_s: float = 0.2, size: int = 56, family: int = 4,
               address: str | None = None, ident: int | None = None) -> Running:
    """ping alongside other traffic (the RTT under load); its report is like ping_sweep's.
    ``address``: dst's address to ping (a router's on one link), else its first; ``ident``:
    the ICMP identifier its echoes carry (ping -e), so a capture tells its session apart."""
    run = _Spawner(lab, work)
    proc: list[subprocess.Popen] = []
    name = f"ping-{src}-{dst}-{address or 'host'}"

    def finish() -> dict:
        code = _wait_code(run, proc[0], f"ping from {src}", count * interval_s + _margin_s)
        result = _ping_result(code, run.output(proc[0]),
                              (run.work / f"{name}.err").read_text(), src, size, count,
                              interval_s)
        return _ping_report(src, dst, [result])
    argv = _ping_argv(lab, dst, count, interval_s, size, family, address, ident)
    return Running("ping", _launcher(run, proc, src, name, argv), finish)


def _wait_code(run: "_Spawner", proc: subprocess.Popen, what: str, timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        run.lab.stop(proc)
        raise LabError(f"{what} did not finish within {timeout:.0f} s") from None


def ping_sweep(lab: Lab, src: str, dst: str, sizes: Sequence[int], *, count: int = 10,
               interval_s: float = 0.05, family: int = 4) -> dict:
    """One ping run a payload size (for the delay model D = a*S + b); a report like the rest."""
    runs = [ping(lab, src, dst, count=count, interval_s=interval_s, size=s, family=family)
            for s in sizes]
    return _ping_report(src, dst, runs)


def _ping_report(src: str, dst: str, runs: list[dict]) -> dict:
    return {"tool": "ping", "mode": "icmp", "sender": src, "receiver": dst, "flows": [],
            "summary": {"sizes_bytes": [r["size_bytes"] for r in runs],
                        "median_ms": [r["summary"].get("median_ms") for r in runs],
                        "received": [r["summary"].get("received") for r in runs]},
            "raw": {"runs": runs}}


def measure_rtt_ms(lab: Lab, src: str, dst: str, count: int = 10,
                   interval_s: float = 0.1) -> dict:
    """The pre-transfer RTT: median of ``count`` pings (None if every one was lost)."""
    result = ping(lab, src, dst, count=count, interval_s=interval_s)
    samples = [r["rtt_ms"] for r in result["replies"]]
    return {"from": src, "to": dst, "count": count, "interval_s": interval_s,
            "samples_ms": samples, "median_ms": statistics.median(samples) if samples else None}


# -- pingpong ---------------------------------------------------------------------------------

def start_pingpong(lab: Lab, sender: str, receiver: str, work: Path, *, port=PINGPONG_PORT,
                   sizes: Sequence[int], repetitions: int = 10, interval_s: float = 0.01,
                   udp: bool = False, cc: str | None = None, family: int = 4) -> Running:
    """pingpong server (``--once --report``) in receiver, client in sender: ``repetitions``
    messages of each size, one in flight (the delay model's ping-pong exchange)."""
    run = _Spawner(lab, work)
    tag = f"pingpong-{sender}-{receiver}"
    server_report, client_report = run.work / f"{tag}.server.json", run.work / f"{tag}.client.json"
    addr = lab.address(receiver, family)
    proto = ["--udp"] if udp else (["--cc", cc] if cc else [])
    server = run.start(receiver, f"{tag}.server",
                       [sys.executable, "-m", "pcapstats.tools.pingpong", "-s", "-b", addr,
                        "-p", port, "--once", "--report", server_report, *proto])
    wait_listening(lab, receiver, port, "udp" if udp else "tcp", proc=server)
    client_argv = [sys.executable, "-m", "pcapstats.tools.pingpong", "-c", addr, "-p", port,
                   "--sizes", ",".join(map(str, sizes)), "-r", repetitions,
                   "--interval", interval_s, "--report", client_report, *proto]
    return _reporting("pingpong", run, tag, sender, receiver, server, client_argv,
                      len(sizes) * repetitions * (interval_s + 1.0) + _margin_s,
                      pingpong_report)


def pingpong_report(client: dict, server: dict, sender: str, receiver: str) -> dict:
    """The sidecar's view of pingpong's two reports: one flow, the per-size latencies."""
    (src, sport), (dst, dport) = _endpoint(client["local"]), _endpoint(client["remote"])
    proto, cc = client["settings"]["proto"], client["settings"].get("cc")
    rows = client["sizes"]
    sent = sum(size * (n + lost) for size, n, lost in
               ((r["size"], r["n"], r["lost"]) for r in rows))
    return {"tool": "pingpong", "mode": proto, "sender": sender, "receiver": receiver,
            "flows": [{"proto": proto, "src": src, "sport": sport, "dst": dst, "dport": dport,
                       "cc": cc, "sent_bytes": sent, "received_bytes":
                       server.get("bytes_received"), "start_ns": client.get("start_ns"),
                       "end_ns": None}],
            "summary": {"sizes_bytes": [r["size"] for r in rows],
                        "avg_ms": [r["avg_ms"] for r in rows],
                        "received": [r["n"] for r in rows],
                        "lost": [r["lost"] for r in rows]},
            "raw": {"client": client, "server": server}}


# -- plain file transfers ---------------------------------------------------------------------

def start_file_transfer(lab: Lab, sender: str, receiver: str, work: Path, *, proto: str = "tcp",
                        size_bytes: int = 1_000_000, seed: int = 0, port=FILE_PORT,
                        cc: str | None = None, sndbuf: int | None = None,
                        rcvbuf: int | None = None, udp_rate_bps: float = 10e6,
                        family: int = 4) -> Running:
    """A generated file from sender to receiver over plain TCP or UDP (pcapstats.tools.filexfer)."""
    run = _Spawner(lab, work)
    tag = f"file-{proto}-{sender}-{receiver}"
    addr = lab.address(receiver, family)
    module = [sys.executable, "-m", "pcapstats.tools.filexfer"]
    if proto == "tcp":
        recv_argv = [*module, "tcp-recv", addr, port] + (["--rcvbuf", rcvbuf] if rcvbuf else [])
        send_argv = [*module, "tcp-send", addr, port, size_bytes, seed]
        send_argv += (["--cc", cc] if cc else []) + (["--sndbuf", sndbuf] if sndbuf else [])
    else:
        recv_argv = [*module, "udp-recv", addr, port]
        send_argv = [*module, "udp-send", addr, port, size_bytes, seed, udp_rate_bps]
    server = run.start(receiver, f"{tag}.receiver", recv_argv)
    wait_listening(lab, receiver, port, proto, proc=server)
    client: list[subprocess.Popen] = []
    timeout = _planned_s(None, size_bytes, udp_rate_bps if proto == "udp" else None) + _margin_s

    def finish() -> dict:
        sent = _last_json(run.wait(client[0], f"{proto} file sender in {sender}", timeout),
                          "file sender")
        got = _last_json(run.wait(server, f"{proto} file receiver in {receiver}", _margin_s),
                         "file receiver")
        return file_report(sent, got, sender, receiver)
    return Running("file", _launcher(run, client, sender, f"{tag}.sender", send_argv), finish)


def file_report(sent: dict, got: dict, sender: str, receiver: str) -> dict:
    flow = {"proto": sent["proto"], **{k: sent[k] for k in ("src", "sport", "dst", "dport")},
            "cc": sent.get("cc"), "sent_bytes": sent["sent_bytes"],
            "received_bytes": got["received_bytes"], "start_ns": sent["start_ns"],
            "end_ns": sent["end_ns"]}
    seconds = ((got["end_ns"] - got["start_ns"]) / 1e9
               if got.get("end_ns") and got.get("start_ns") else None)
    summary = {"sent_bytes": sent["sent_bytes"], "received_bytes": got["received_bytes"],
               "sha256": sent["sha256"], "checksum_ok": got["sha256"] == sent["sha256"],
               "seconds": seconds,
               "throughput_bps": 8 * got["received_bytes"] / seconds if seconds else None}
    if sent["proto"] == "udp":
        summary.update(datagrams_sent=sent["datagrams"], datagrams_received=got["datagrams"],
                       missing_chunks=len(got["missing_indices"]))
    return {"tool": "file", "mode": sent["proto"], "sender": sender, "receiver": receiver,
            "flows": [flow], "summary": summary, "raw": {"sender": sent, "receiver": got}}


# -- what was installed -----------------------------------------------------------------------

def _first_line(argv: Sequence[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[0] if lines else None


def tool_versions() -> dict:
    """Versions of everything that shaped a capture (None: the tool is not installed)."""
    tcpdump = subprocess.run(["tcpdump", "--version"], capture_output=True, text=True) \
        if shutil.which("tcpdump") else None
    tcpdump_lines = (tcpdump.stdout + tcpdump.stderr).splitlines() if tcpdump else []
    return {
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pcapstats": __version__,
        "iperf3": _first_line(["iperf3", "-v"]),
        "tcpdump": next((l for l in tcpdump_lines if l.startswith("tcpdump")), None),
        "libpcap": next((l for l in tcpdump_lines if l.startswith("libpcap")), None),
        "ping": _first_line(["ping", "-V"]),
        "tc": _first_line(["tc", "-V"]),
        "iptables": _first_line(["iptables", "--version"]),
    }
