"""A sender - router(s) - receiver path built the way a user or a course builds one, without
``pcapstats.lab``: its own ``ip netns`` / veth / ``tc`` / ``iptables`` / ``tcpdump`` /
``iperf3`` commands.  It makes captures under conditions the project's lab does not:

- offloads left at the kernel's defaults (veth: TSO and GSO on, so the sender's capture shows
  segments of up to 64 KB; the lab turns them off).  They are read back with ``ethtool -k``;
- no added propagation delay: the RTT is the bottleneck's queue (``tbf`` on the last
  router's egress toward the receiver);
- loss from ``iptables -m statistic`` on the first router's FORWARD chain, random or every Nth
  packet (deterministic: the tests' way not to flake).  The rule counts *skbs*: a GSO
  super-packet of several segments is dropped whole;
- capture at three points of the same run, ``tcpdump -s 128``: the sender's interface, the
  receiver's, and mid-path.  With one router (``routers=1``) mid-path is the router's ingress
  from the sender: before the loss rule and the bottleneck, and its packets are of the same
  kind as the sender's (the data has crossed no router, the ACKs one: same TTLs, ACK -> data
  gaps of ~20 us).  With two (``routers=2``: sender - router - router2 - receiver) it is
  router2's ingress from router: after the loss, before the bottleneck, both directions
  having crossed a router.  ``truth.json`` says which, per point;
- ``iperf3 -C CC`` as the sender (the socket's congestion control; a namespace's default cc
  cannot always be set here), one or several flows sharing the bottleneck (one iperf3 client
  and server pair a flow, started together).

Every name it creates starts with ``ps-ind-<pid>-<n>-`` (never the lab's ``psl-``), and it
undoes everything it made on every exit path: its processes are stopped (by their process
group, which it created) and its namespaces deleted, which takes their veths, qdiscs and
iptables rules with them.  SIGTERM and SIGHUP unwind like Ctrl-C while it runs (when nobody
else handles them), and teardown defers signals until it is done.  It never touches a
namespace or process it did not create.

Use::

    run = make_path_captures(out_dir, cc="cubic", loss=0.02, loss_mode="nth")
    run.captures["sender"], run.captures["receiver"], run.captures["middle"], run.truth

or, from a shell (root): ``python3 -m tests.helpers.independent_path OUT_DIR --cc bbr``.

``truth.json`` holds what is known without pcapstats: the cc of each flow by its client port
(asked, and the one iperf3 reports it used), the loss asked (and the rule's own drop counters,
the tbf queue's drops), the offloads read back, tcpdump's own packet and drop counts, and
iperf3's ``-J`` report of each flow.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

POINTS = ("sender", "receiver", "middle")
CCS = ("reno", "cubic", "bbr")
PREFIX = "ps-ind-"
TOOLS = {"ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "iptables": "iptables",
         "ethtool": "ethtool", "tcpdump": "tcpdump", "iperf3": "iperf3", "ping": "iputils-ping"}
SENDER_NET, RECEIVER_NET, ROUTERS_NET = "10.201.1", "10.201.2", "10.201.3"
SERVER_PORT = 5201                  # flow k listens on SERVER_PORT + k
OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload",
            "generic-receive-offload", "large-receive-offload", "rx-gro-list",
            "scatter-gather", "tx-checksumming", "rx-checksumming")

_counter = itertools.count()


class PathError(RuntimeError):
    """One line: what failed and what to do."""


@dataclass
class PathRun:
    """What one run left in its directory."""
    out_dir: Path
    captures: dict[str, Path]        # "sender" | "receiver" | "middle" -> pcap
    truth_path: Path
    truth: dict = field(repr=False)

    def cc_by_client_port(self) -> dict[int, str]:
        return {f["client_port"]: f["cc"] for f in self.truth["flows"]}


def unavailable() -> str | None:
    """Why a path cannot be built here (one line), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, iptables)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        packages = sorted({TOOLS[t] for t in missing})
        return f"needs {', '.join(missing)} (apt-get install {' '.join(packages)})"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"'ip netns' does not work here: {probe.stderr.strip()}"
    return None


def loss_every(loss: float) -> int:
    """The N of ``--mode nth --every N`` for a loss share (2 % -> every 50th packet)."""
    return max(1, round(1 / loss))


# -- signals ---------------------------------------------------------------------------------

class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP while a path was up: unwinds like Ctrl-C."""


@contextlib.contextmanager
def _signals_unwind():
    """SIGTERM / SIGHUP raise Interrupted while the path is up (main thread only, and only for
    signals nobody else handles)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Interrupted(f"signal {signal.Signals(signum).name}")

    taken = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, interrupt)
            taken.append(sig)
    try:
        yield
    finally:
        for sig in taken:
            signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def _signals_deferred():
    """Teardown runs to its end: SIGINT / SIGTERM / SIGHUP arriving meanwhile are held and
    delivered (to the handler there was) once it is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending, saved = [], {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        saved[sig] = signal.getsignal(sig)
        signal.signal(sig, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


# -- the path --------------------------------------------------------------------------------

class IndependentPath:
    """sender (eth0) - (eth-snd) router (eth-rcv) - (eth0) receiver, or with ``routers=2``
    sender (eth0) - (eth-snd) router (eth-r2) - (eth-r1) router2 (eth-rcv) - (eth0) receiver;
    tbf on eth-rcv's egress, the loss rule on router's FORWARD for packets in from eth-snd.
    A context manager: ``with IndependentPath(...) as path: run = path.transfer(out_dir)``;
    leaving it undoes all."""

    def __init__(self, *, cc: str | tuple[str, ...] | list[str] = "cubic",
                 loss: float = 0.0, loss_mode: str = "random", rate: str = "20mbit",
                 burst: str = "32kbit", latency: str = "50ms", seconds: float = 8,
                 flows: int | None = None, snaplen: int = 128, gro: bool | None = None,
                 routers: int = 1):
        ccs = (cc,) * (flows or 1) if isinstance(cc, str) else tuple(cc)
        if flows is not None and len(ccs) != flows:
            raise PathError(f"{flows} flows but {len(ccs)} congestion controls ({ccs})")
        bad = [c for c in ccs if c not in CCS]
        if bad or not ccs:
            raise PathError(f"unknown congestion control {bad or ccs}: use {', '.join(CCS)}")
        if loss_mode not in ("random", "nth"):
            raise PathError(f"unknown loss mode {loss_mode!r}: use random or nth")
        if not 0 <= loss < 1:
            raise PathError(f"loss {loss} is not a share in [0, 1)")
        if routers not in (1, 2):
            raise PathError(f"routers={routers}: 1 or 2")
        self.ccs, self.loss, self.loss_mode = ccs, float(loss), loss_mode
        self.rate, self.burst, self.latency = rate, burst, latency
        self.seconds, self.snaplen, self.gro, self.routers = seconds, snaplen, gro, routers
        self.prefix = f"{PREFIX}{os.getpid()}-{next(_counter)}-"
        self.ns = {"sender": self.prefix + "snd", "router": self.prefix + "rtr",
                   **({"router2": self.prefix + "rt2"} if routers == 2 else {}),
                   "receiver": self.prefix + "rcv"}
        self.last = "router2" if routers == 2 else "router"     # tbf on its eth-rcv
        self.created: list[str] = []          # namespaces this object made, in order
        self.procs: list[subprocess.Popen] = []
        self._unwind = None

    # -- running commands

    def _cmd(self, host: str | None, *args) -> list[str]:
        args = [str(a) for a in args]
        return ["ip", "netns", "exec", self.ns[host], *args] if host else args

    def run(self, host: str | None, *args, check: bool = True, timeout: float = 30
            ) -> subprocess.CompletedProcess:
        cmd = self._cmd(host, *args)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PathError(f"{' '.join(cmd)}: no answer in {timeout} s") from None
        if check and done.returncode != 0:
            why = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise PathError(f"{' '.join(cmd)}: {why[-1] if why else f'exit {done.returncode}'}")
        return done

    def popen(self, host: str, *args, **kw) -> subprocess.Popen:
        # its own process group (ours to signal as a whole; `ip netns exec` execs the command,
        # so the pid is the program's own), away from the terminal's Ctrl-C
        # (start_new_session), and it gets SIGTERM should this process die without unwinding
        # (SIGKILL): no tcpdump or iperf3 outlives it, only the namespaces (see --clean-stale)
        proc = subprocess.Popen(self._cmd(host, *args), start_new_session=True,
                                preexec_fn=_die_with_parent, **kw)
        self.procs.append(proc)
        return proc

    # -- building

    def __enter__(self) -> "IndependentPath":
        why = unavailable()
        if why:
            raise PathError(why)
        self._unwind = _signals_unwind()
        self._unwind.__enter__()
        try:
            self.build()
        except BaseException:
            self.close(unwinding=True)
            raise
        return self

    def __exit__(self, kind, value, tb) -> None:
        self.close(unwinding=kind is not None)

    def build(self) -> None:
        existing = set(_namespaces())
        clash = [n for n in self.ns.values() if n in existing]
        if clash:
            raise PathError(f"namespace {clash[0]} exists already (not ours: left alone)")
        for name in self.ns.values():
            self.created.append(name)          # before: a signal right after `add` still undoes it
            self.run(None, "ip", "netns", "add", name)
        for host in self.ns:
            self.run(host, "ip", "link", "set", "lo", "up")
        last = self.last
        # each veth end is created inside its namespace: nothing appears in the root namespace
        self._veth("sender", "eth0", "router", "eth-snd")
        self._veth("receiver", "eth0", last, "eth-rcv")
        self.run("sender", "ip", "addr", "add", f"{SENDER_NET}.1/24", "dev", "eth0")
        self.run("receiver", "ip", "addr", "add", f"{RECEIVER_NET}.1/24", "dev", "eth0")
        self.run("router", "ip", "addr", "add", f"{SENDER_NET}.254/24", "dev", "eth-snd")
        self.run(last, "ip", "addr", "add", f"{RECEIVER_NET}.254/24", "dev", "eth-rcv")
        if self.routers == 2:
            self._veth("router", "eth-r2", "router2", "eth-r1")
            self.run("router", "ip", "addr", "add", f"{ROUTERS_NET}.1/24", "dev", "eth-r2")
            self.run("router2", "ip", "addr", "add", f"{ROUTERS_NET}.2/24", "dev", "eth-r1")
        for host, dev in self.interfaces():
            self.run(host, "ip", "link", "set", dev, "up")
            if self.gro is not None:
                self.run(host, "ethtool", "-K", dev, "gro", "on" if self.gro else "off")
        self.run("sender", "ip", "route", "add", "default", "via", f"{SENDER_NET}.254")
        self.run("receiver", "ip", "route", "add", "default", "via", f"{RECEIVER_NET}.254")
        if self.routers == 2:
            self.run("router", "ip", "route", "add", f"{RECEIVER_NET}.0/24", "via",
                     f"{ROUTERS_NET}.2")
            self.run("router2", "ip", "route", "add", f"{SENDER_NET}.0/24", "via",
                     f"{ROUTERS_NET}.1")
        for host in self.ns:
            if host.startswith("router"):
                self.run(host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        self.run(last, "tc", "qdisc", "add", "dev", "eth-rcv", "root", "tbf", "rate",
                 self.rate, "burst", self.burst, "latency", self.latency)
        self._wait_until_forwarding()
        if self.loss > 0:
            self.run("router", "iptables", *self.loss_rule())

    def _wait_until_forwarding(self, timeout: float = 10) -> None:
        """Until the kernel's link watch activates a fresh veth (up to ~1 s), what is sent on it
        is dropped: the first SYN (or the router's first ARP request) would be lost and iperf3
        would wait 1 s for its retry.  Ping through until a reply comes (also fills the ARP
        caches, as on a path in use); before the captures and the loss rule."""
        deadline = time.monotonic() + timeout
        while self.run("sender", "ping", "-n", "-q", "-c", 1, "-W", 0.5, f"{RECEIVER_NET}.1",
                       check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise PathError(f"no ping reply through the path in {timeout} s")

    def _veth(self, host: str, dev: str, peer_host: str, peer_dev: str) -> None:
        self.run(None, "ip", "link", "add", dev, "netns", self.ns[host], "type", "veth",
                 "peer", "name", peer_dev, "netns", self.ns[peer_host])

    def interfaces(self) -> list[tuple[str, str]]:
        middle = [("router", "eth-r2"), ("router2", "eth-r1")] if self.routers == 2 else []
        return [("sender", "eth0"), ("router", "eth-snd"), *middle, (self.last, "eth-rcv"),
                ("receiver", "eth0")]

    def points(self) -> dict[str, dict]:
        """Where each capture point is, and what its packets crossed before it (known from
        the topology, not from the packets)."""
        two = self.routers == 2
        return {
            "sender": {"host": "sender", "interface": "eth0", "data_routers_before": 0,
                       "ack_routers_before": self.routers, "after_loss": False,
                       "after_bottleneck": False},
            "receiver": {"host": "receiver", "interface": "eth0",
                         "data_routers_before": self.routers, "ack_routers_before": 0,
                         "after_loss": True, "after_bottleneck": True},
            "middle": {"host": "router2" if two else "router",
                       "interface": "eth-r1" if two else "eth-snd",
                       "data_routers_before": 1 if two else 0, "ack_routers_before": 1,
                       "after_loss": two, "after_bottleneck": False},
        }

    def loss_rule(self) -> list[str]:
        """The iptables rule (after ``iptables``).  nth: here (iptables 1.8.9 nf_tables, kernel
        6.18) ``--packet P`` drops packet P + 1 first, so ``--packet 0`` would drop the first
        SYN (iperf3 then waits 1 s): N - 1 makes the first drop the Nth packet."""
        every = loss_every(self.loss) if self.loss > 0 else 0
        match = (["--mode", "random", "--probability", f"{self.loss:.6f}"]
                 if self.loss_mode == "random" else
                 ["--mode", "nth", "--every", str(every), "--packet", str(every - 1)])
        return ["-A", "FORWARD", "-i", "eth-snd", "-m", "statistic", *match, "-j", "DROP"]

    # -- the run

    def transfer(self, out_dir: Path | str) -> PathRun:
        """Capture at the three points while the flows run; write the pcaps and truth.json."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        captures = {p: out / f"{p}.pcap" for p in POINTS}
        points = self.points()
        where = {p: (points[p]["host"], points[p]["interface"]) for p in POINTS}
        truth = {"made_by": "tests/helpers/independent_path.py", "prefix": self.prefix,
                 "created_unix_s": time.time(), "path": self._path_doc(),
                 "offloads": self._offloads()}
        servers = [self._start_server(k) for k in range(len(self.ccs))]
        dumps = {p: self._start_tcpdump(*where[p], captures[p]) for p in POINTS}
        clients = []
        for k, cc in enumerate(self.ccs):
            clients.append(self.popen(
                "sender", "iperf3", "-c", f"{RECEIVER_NET}.1", "-p", SERVER_PORT + k,
                "-t", self.seconds, "-C", cc, "-J",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        flows = []
        for k, (cc, client) in enumerate(zip(self.ccs, clients)):
            try:
                stdout, stderr = client.communicate(timeout=self.seconds + 30)
            except subprocess.TimeoutExpired:
                raise PathError(f"iperf3 client {k} did not finish in {self.seconds + 30} s"
                                ) from None
            flows.append(self._flow_doc(k, cc, client.returncode, stdout, stderr))
        time.sleep(0.5)                       # the FINs and last ACKs reach every capture point
        truth["tcpdump"] = {p: self._stop_tcpdump(d, p) for p, d in dumps.items()}
        for server in servers:
            self._stop(server, signal.SIGTERM, grace=2)
        truth["flows"] = flows
        truth["drops"] = self._drop_counters()
        truth["captures"] = {p: {"file": captures[p].name, **points[p],
                                 "namespace": self.ns[points[p]["host"]]} for p in POINTS}
        truth_path = out / "truth.json"
        truth_path.write_text(json.dumps(truth, indent=1) + "\n")
        return PathRun(out, captures, truth_path, truth)

    def _path_doc(self) -> dict:
        doc = {"rate": self.rate, "burst": self.burst, "latency": self.latency,
               "qdisc": f"tbf on {self.last} eth-rcv egress", "routers": self.routers,
               "propagation_delay_ms": 0, "seconds": self.seconds, "snaplen": self.snaplen,
               "loss": self.loss, "loss_mode": self.loss_mode, "gro_set": self.gro}
        if self.loss > 0:
            doc["loss_rule"] = "iptables " + " ".join(self.loss_rule())
            if self.loss_mode == "nth":
                doc["loss_every"] = loss_every(self.loss)
        return doc

    def _offloads(self) -> dict:
        found = {}
        for host, dev in self.interfaces():
            text = self.run(host, "ethtool", "-k", dev).stdout
            features = dict(re.findall(r"^\s*([\w-]+): (\S+)", text, re.M))
            found[f"{host}:{dev}"] = {k: features.get(k) for k in OFFLOADS}
        return found

    def _start_server(self, k: int) -> subprocess.Popen:
        port = SERVER_PORT + k
        log = tempfile.TemporaryFile("w+")
        server = self.popen("receiver", "iperf3", "-s", "-1", "-p", port,
                            stdout=log, stderr=subprocess.STDOUT)
        server.log = log
        deadline = time.monotonic() + 10
        while f":{port}" not in self.run("receiver", "ss", "-Hltn", f"sport = :{port}").stdout:
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                said = log.read().strip().splitlines()
                raise PathError(f"iperf3 server on port {port} did not listen"
                                + (f": {said[-1]}" if said else ""))
            time.sleep(0.05)
        return server

    def _start_tcpdump(self, host: str, dev: str, path: Path) -> subprocess.Popen:
        # -Z root: Debian's tcpdump otherwise writes as user tcpdump (no access to a root
        # 0700 directory such as pytest's tmp_path); --immediate-mode -U: no packet waits in
        # a buffer when it is stopped
        dump = self.popen(host, "tcpdump", "-i", dev, "-n", "-s", self.snaplen, "-U",
                          "--immediate-mode", "-Z", "root", "-w", path,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        said = b""
        while b"listening on" not in said:
            left = deadline - time.monotonic()
            if dump.poll() is not None or left <= 0:
                rest = said + (dump.stderr.read() if dump.poll() is not None else b"")
                lines = rest.decode(errors="replace").strip().splitlines()
                raise PathError(f"tcpdump on {host} {dev} did not start"
                                + (f": {lines[-1]}" if lines else ""))
            if select.select([dump.stderr], [], [], left)[0]:
                chunk = os.read(dump.stderr.fileno(), 4096)
                said += chunk
        return dump

    def _stop_tcpdump(self, dump: subprocess.Popen, point: str) -> dict:
        """SIGINT, then tcpdump's own counts (captured, received by filter, dropped by
        kernel)."""
        self._stop(dump, signal.SIGINT, grace=5)
        text = dump.stderr.read().decode(errors="replace")
        counts = {}
        for key, pattern in (("captured", r"(\d+) packets? captured"),
                             ("received_by_filter", r"(\d+) packets? received by filter"),
                             ("dropped_by_kernel", r"(\d+) packets? dropped by kernel")):
            m = re.search(pattern, text)
            counts[key] = int(m.group(1)) if m else None
        return counts

    def _flow_doc(self, k: int, cc: str, code: int, stdout: str, stderr: str) -> dict:
        try:
            report = json.loads(stdout)
        except ValueError:
            report = None
        if code != 0 or report is None or "error" in report:
            why = (report or {}).get("error") or stderr.strip() or f"exit {code}"
            raise PathError(f"iperf3 -C {cc} (flow {k}) failed: {why}")
        connected = report["start"]["connected"]
        end = report["end"]
        return {"flow": k, "cc": cc, "server_port": SERVER_PORT + k,
                "client_port": int(connected[0]["local_port"]),
                "client_address": connected[0]["local_host"],
                "server_address": connected[0]["remote_host"],
                "cc_used": end.get("sender_tcp_congestion"),
                "sender_bps": end["sum_sent"]["bits_per_second"],
                "receiver_bps": end["sum_received"]["bits_per_second"],
                "retransmits": end["sum_sent"].get("retransmits"),
                "iperf3": report}

    def _drop_counters(self) -> dict:
        doc = {}
        if self.loss > 0:
            text = self.run("router", "iptables", "-L", "FORWARD", "-v", "-x", "-n").stdout
            m = re.search(r"^\s*(\d+)\s+(\d+)\s+DROP\b", text, re.M)
            doc["loss_rule_packets"], doc["loss_rule_bytes"] = \
                (int(m.group(1)), int(m.group(2))) if m else (None, None)
        text = self.run(self.last, "tc", "-s", "qdisc", "show", "dev", "eth-rcv").stdout
        m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", text)
        if m:
            doc.update(tbf_sent_bytes=int(m.group(1)), tbf_sent_packets=int(m.group(2)),
                       tbf_dropped=int(m.group(3)), tbf_overlimits=int(m.group(4)))
        m = re.search(r"burst (\d+)(b|Kb|Mb)\b", text)     # as tc prints it (K = 1024)
        if m:
            # tbf passes a GSO packet up to this size whole (segments only larger ones): the
            # receiver's capture holds segments of up to burst bytes, not only of the MSS
            doc["tbf_burst_bytes"] = int(m.group(1)) * {"b": 1, "Kb": 1024,
                                                         "Mb": 1 << 20}[m.group(2)]
        return doc

    # -- undoing

    def _stop(self, proc: subprocess.Popen, sig: int, grace: float) -> None:
        """Signal our process group, then SIGKILL after `grace` seconds."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        log = getattr(proc, "log", None)
        if log is not None:
            log.close()

    def close(self, unwinding: bool = False) -> None:
        """Stop every process started, delete every namespace created (their veths, qdisc and
        rules go with them).  Idempotent; signals wait until it is done.  What could not be
        undone is an error, or (``unwinding``: another exception is on its way) a line on
        stderr."""
        problems = []
        try:
            self._teardown(problems)
        finally:
            if self._unwind is not None:     # after the deferred signals: they unwind too
                unwind, self._unwind = self._unwind, None
                unwind.__exit__(None, None, None)
        left = [n for n in _namespaces() if n.startswith(self.prefix)]
        if left or problems:
            message = f"independent path {self.prefix}*: teardown left " + "; ".join(
                problems + [f"namespace {n}" for n in left])
            if not unwinding:
                raise PathError(message)
            print(message, file=sys.stderr)

    def _teardown(self, problems: list[str]) -> None:
        with _signals_deferred():
            for proc in reversed(self.procs):
                try:
                    self._stop(proc, signal.SIGTERM, grace=2)
                except Exception as e:        # keep going: the namespaces must still go
                    problems.append(f"pid {proc.pid}: {e}")
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
            self.procs.clear()
            existing = set(_namespaces())
            for name in reversed(self.created):
                if name in existing:
                    try:
                        self.run(None, "ip", "netns", "del", name)
                    except PathError as e:
                        problems.append(str(e))
            self.created.clear()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux PR_SET_PDEATHSIG, kept
    across exec)."""
    import ctypes  # lazy: only in forked children
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def _namespaces() -> list[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def stale_namespaces() -> list[str]:
    """Namespaces this helper made in a process that is gone (it was SIGKILLed)."""
    stale = []
    for name in _namespaces():
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)-\d+-\w+", name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            stale.append(name)
    return stale


def make_path_captures(out_dir: Path | str, *, cc: str | tuple[str, ...] | list[str],
                       loss: float = 0.02, loss_mode: str = "random", rate: str = "20mbit",
                       burst: str = "32kbit", latency: str = "50ms", seconds: float = 8,
                       flows: int | None = None, snaplen: int = 128,
                       gro: bool | None = None, routers: int = 1) -> PathRun:
    """Build the path, run the flows (``cc``: one name, or one a flow), capture at the three
    points, tear it all down; returns what was written to ``out_dir``."""
    with IndependentPath(cc=cc, loss=loss, loss_mode=loss_mode, rate=rate, burst=burst,
                         latency=latency, seconds=seconds, flows=flows, snaplen=snaplen,
                         gro=gro, routers=routers) as path:
        return path.transfer(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="independent_path", description="sender - router(s) - receiver in namespaces, "
        "iperf3 -C CC through tbf and an iptables loss rule, captured at three points")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--cc", default="cubic", help="one cc, or one a flow: reno,cubic")
    parser.add_argument("--loss", type=float, default=0.02)
    parser.add_argument("--loss-mode", choices=("random", "nth"), default="random")
    parser.add_argument("--rate", default="20mbit")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--routers", type=int, choices=(1, 2), default=1)
    parser.add_argument("--gro", choices=("default", "on", "off"), default="default")
    parser.add_argument("--clean-stale", action="store_true",
                        help="only delete namespaces this helper left when it was killed")
    args = parser.parse_args(argv)
    try:
        if args.clean_stale:
            for name in stale_namespaces():
                pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                      text=True).stdout.split()
                for pid in pids:           # in a namespace of ours: ours
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                subprocess.run(["ip", "netns", "del", name], check=True)
                print(f"deleted {name}")
            return 0
        run = make_path_captures(args.out_dir, cc=tuple(args.cc.split(",")), loss=args.loss,
                                 loss_mode=args.loss_mode, rate=args.rate,
                                 seconds=args.seconds, routers=args.routers,
                                 gro={"default": None, "on": True, "off": False}[args.gro])
    except PathError as e:
        print(f"independent_path: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"independent_path: interrupted ({str(e) or 'SIGINT'}), path removed",
              file=sys.stderr)
        return 130
    for point, path in run.captures.items():
        print(f"{point}: {path}")
    for f in run.truth["flows"]:
        print(f"flow {f['flow']}: {f['cc']} (used {f['cc_used']}) client port "
              f"{f['client_port']}: {f['receiver_bps'] / 1e6:.2f} Mbit/s received")
    print(f"truth: {run.truth_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
