"""The lab's hosts: network namespaces joined by veth pairs, commands inside them -- all undone.

A :class:`Lab` owns a set of network namespaces (one per *host*) joined by veth pairs.  It is the
only place in pcapstats that touches the host's network, and it puts everything back:

- every namespace is named ``<run prefix>-<host>`` (see :mod:`pcapstats.lab.cleanup`, which
  also closes every open lab on every exit path: ``with Lab() as lab``, ``atexit``, SIGTERM /
  SIGHUP; SIGINT unwinds as KeyboardInterrupt);
- veth pairs are created with both ends directly inside their namespaces, so nothing ever
  appears in the host's own namespace, and deleting the namespaces deletes the veths;
- processes started with :meth:`Lab.popen` / :meth:`Lab.capture` (tcpdump,
  :mod:`pcapstats.lab.tcpdump`) get a session of their own (a terminal's Ctrl-C reaches only
  us, and we stop them in order) and are killed on close, together with anything else still
  running inside the lab's namespaces.  Work that must be undone before the lab's processes
  stop (an NFQUEUE rule before its delay line) registers with :meth:`Lab.on_close`.

Every veth gets TSO/GSO/GRO switched off (the capture then shows the packets the wire would
carry, not 64 kB super-packets) and its receive queue's ``rps_cpus`` pinned to CPU 0 (veth
hops otherwise reorder a few packets per hundred thousand); see ../shared/DESIGN.md.
Ready-made topologies: :mod:`pcapstats.lab.topologies`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from pcapstats.lab.cleanup import (PREFIX, SignalsBlocked, delete_netns, list_netns, register,
                                   unregister)
from pcapstats.lab.commands import LabError, checked, ip, require_tools
from pcapstats.lab.tcpdump import TcpdumpCapture

_counter = itertools.count()
_IFNAMSIZ = 15


@dataclass(frozen=True)
class Interface:
    """One end of a veth pair (or a bridge), as seen from inside its host's namespace."""
    host: str
    name: str
    peer: str  # the host at the other end; for a bridge, "lan:<bridge name>"
    ipv4: str | None = None  # "10.77.1.1/24"
    ipv6: str | None = None  # "fd00:77:1::1/64"
    bridge: str | None = None  # the bridge this end is a port of (it then has no address)


@dataclass(frozen=True)
class Bottleneck:
    """The link a topology's flows share, seen from the router that forwards across it.

    Data (senders -> receivers) leaves the router through ``egress``: rate, queue and the data
    direction's loss and delay go there.  ACKs leave through ``ingress``, toward the senders:
    the return direction's delay (and ACK loss, if asked) goes there.
    """
    router: str
    egress: str  # router's interface toward the receivers
    ingress: str | None  # router's interface toward the senders; None: one direction only


@dataclass
class _Host:
    name: str
    netns: str
    interfaces: list[Interface] = field(default_factory=list)


class Lab:
    """Network namespaces joined by veth pairs; everything made is undone by :meth:`close`."""

    def __init__(self, run_prefix: str | None = None):
        """``run_prefix`` defaults to ``psl-<pid>-<n>``; only that form is found again by
        :func:`cleanup_leftovers` once the run has died."""
        require_tools("ip", "ethtool")
        self.prefix = run_prefix or f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self._hosts: dict[str, _Host] = {}
        self._procs: list[subprocess.Popen] = []
        self._undo: list[Callable[[], object]] = []
        self._dirs: list[str] = []
        self._bottleneck: Bottleneck | None = None
        self._bottlenecks: list[Bottleneck] = []
        self.pairs: list[tuple[str, str]] = []  # (sender, receiver) hosts of a ready-made topology
        self._closed = False
        register(self)

    # -- building -----------------------------------------------------------------------------
    def add_host(self, name: str) -> str:
        """Create a namespace for host `name` (loopback up); returns the namespace's name."""
        if name in self._hosts:
            raise LabError(f"host {name!r} exists already in lab {self.prefix}")
        netns = f"{self.prefix}-{name}"
        self._hosts[name] = _Host(name, netns)  # recorded first: close() removes half-made ones
        ip("netns", "add", netns)
        ip("-n", netns, "link", "set", "lo", "up")
        # No duplicate address detection: a tentative link-local address holds up neighbour
        # discovery (IPv6 pings took 2 s), and there is nobody on these links to collide with.
        for scope in ("all", "default"):
            self.sysctl(name, f"net.ipv6.conf.{scope}.accept_dad", 0)
        return netns

    def link(self, a: str, b: str, *, ipv4: tuple[str, str] | None = None,
             ipv6: tuple[str, str] | None = None, mtu: int | None = None
             ) -> tuple[Interface, Interface]:
        """Join hosts a and b with a veth pair, offloads off, rps pinned, addresses set, up.

        Each end is named ``eth<k>`` inside its namespace (k counting that host's links), so
        captures show familiar names.  ``ipv4``/``ipv6`` are (a's, b's) addresses with prefix
        length; IPv6 addresses skip duplicate address detection so they work at once.
        """
        ha, hb = self._host(a), self._host(b)
        name_a, name_b = f"eth{len(ha.interfaces)}", f"eth{len(hb.interfaces)}"
        ip("link", "add", name_a, "netns", ha.netns, "type", "veth",
            "peer", "name", name_b, "netns", hb.netns)
        ends = []
        for k, (host, name, peer) in enumerate(((ha, name_a, b), (hb, name_b, a))):
            iface = Interface(host.name, name, peer, ipv4 and ipv4[k], ipv6 and ipv6[k])
            host.interfaces.append(iface)
            self._configure(host, iface, mtu)
            ends.append(iface)
        return ends[0], ends[1]

    def _configure(self, host: _Host, iface: Interface, mtu: int | None) -> None:
        ns, dev = host.netns, iface.name
        self.run(host.name, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
        # ip netns exec mounts the namespace's own /sys, so this reaches the right device.
        self.run(host.name, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/queues/rx-0/rps_cpus")
        if mtu:
            ip("-n", ns, "link", "set", dev, "mtu", str(mtu))
        if iface.ipv4:
            ip("-n", ns, "addr", "add", iface.ipv4, "dev", dev)
        if iface.ipv6:
            ip("-n", ns, "-6", "addr", "add", iface.ipv6, "dev", dev, "nodad")
        ip("-n", ns, "link", "set", dev, "up")

    def bridge(self, host: str, name: str, ports: Sequence[str], *, ipv4: str | None = None,
               ipv6: str | None = None) -> Interface:
        """Make a bridge in host enslaving its interfaces ``ports``; addresses go on the bridge.

        Bridged frames are kept out of iptables (``bridge-nf-call-*tables=0``, per namespace:
        this kernel has br_netfilter built in and on), so a routed packet meets FORWARD once.
        """
        h = self._host(host)
        for table in ("arptables", "iptables", "ip6tables"):
            self.sysctl(host, f"net.bridge.bridge-nf-call-{table}", 0)
        ip("-n", h.netns, "link", "add", name, "type", "bridge", "forward_delay", "0")
        for port in ports:
            ip("-n", h.netns, "link", "set", port, "master", name)
            h.interfaces = [replace(i, bridge=name) if i.name == port else i
                            for i in h.interfaces]
        iface = Interface(host, name, f"lan:{name}", ipv4, ipv6)
        h.interfaces.append(iface)
        if ipv4:
            ip("-n", h.netns, "addr", "add", ipv4, "dev", name)
        if ipv6:
            ip("-n", h.netns, "-6", "addr", "add", ipv6, "dev", name, "nodad")
        ip("-n", h.netns, "link", "set", name, "up")
        return iface

    def wait_ready(self, timeout: float = 5.0) -> None:
        """Wait until every link is up with its IPv6 link-local address usable.

        The kernel sees a veth's carrier through linkwatch, up to a second late, and IPv6 on
        that interface (neighbour discovery included) starts only then: traffic sent earlier
        waits for it (the first IPv6 ping took 1 s).  Call this after building a topology.
        """
        deadline = time.monotonic() + timeout
        for host in self._hosts.values():
            for iface in host.interfaces:
                if iface.bridge:  # a bridge port: its bridge carries the addresses
                    continue
                while True:
                    out = ip("-n", host.netns, "-6", "addr", "show", "dev", iface.name,
                              "scope", "link").stdout
                    if "inet6" in out and "tentative" not in out:
                        break
                    if time.monotonic() > deadline:
                        raise LabError(f"{host.name}:{iface.name} not ready after {timeout} s")
                    time.sleep(0.05)

    def route(self, host: str, destination: str, via: str) -> None:
        """Add a route (``default`` or a prefix) in host's namespace; v4/v6 by the gateway."""
        family = "-6" if ":" in via else "-4"
        ip("-n", self._host(host).netns, family, "route", "add", destination, "via", via)

    def sysctl(self, host: str, key: str, value: str | int) -> None:
        self.run(host, "sysctl", "-q", "-w", f"{key}={value}")

    def enable_forwarding(self, host: str) -> None:
        self.sysctl(host, "net.ipv4.ip_forward", 1)
        self.sysctl(host, "net.ipv6.conf.all.forwarding", 1)

    # -- looking things up ------------------------------------------------------------------
    def _host(self, name: str) -> _Host:
        try:
            return self._hosts[name]
        except KeyError:
            raise LabError(f"no host {name!r} in lab {self.prefix}",
                           hint=f"hosts: {', '.join(self._hosts) or 'none'}") from None

    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    @property
    def bottlenecks(self) -> list[Bottleneck]:
        """Every link of the topology that can carry an impairment (chain: one per router)."""
        return list(self._bottlenecks) if self._bottlenecks else [self.bottleneck]

    @property
    def bottleneck(self) -> Bottleneck:
        """The shared link of a ready-made topology (LabError if this lab has none)."""
        if self._bottleneck is None:
            raise LabError(f"lab {self.prefix} has no bottleneck",
                           hint="build it with topologies.sender_router_receiver() or .dumbbell()")
        return self._bottleneck

    def netns(self, host: str) -> str:
        return self._host(host).netns

    def interfaces(self, host: str) -> list[Interface]:
        return list(self._host(host).interfaces)

    def interface(self, host: str, peer: str) -> Interface:
        """host's end of the link to peer."""
        for iface in self._host(host).interfaces:
            if iface.peer == peer:
                return iface
        raise LabError(f"host {host!r} has no link to {peer!r}")

    def address(self, host: str, family: int = 4) -> str:
        """host's first address of that family, without prefix length."""
        for iface in self._host(host).interfaces:
            addr = iface.ipv4 if family == 4 else iface.ipv6
            if addr:
                return addr.split("/")[0]
        raise LabError(f"host {host!r} has no IPv{family} address")

    # -- running things ---------------------------------------------------------------------
    def _argv(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self._host(host).netns, *map(str, argv)]

    def run(self, host: str, *argv, check: bool = True, timeout: float | None = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command inside host's namespace and wait; LabError if it fails (check)."""
        return checked(self._argv(host, argv), check=check, timeout=timeout, input=input)

    def python(self, host: str, source: str, *args, check: bool = True,
               timeout: float | None = 60) -> subprocess.CompletedProcess[str]:
        """Run Python source (this interpreter) inside host's namespace; args in sys.argv[1:]."""
        return self.run(host, sys.executable, "-c", source, *args, check=check, timeout=timeout)

    def popen(self, host: str, *argv, **kwargs) -> subprocess.Popen:
        """Start a command inside host's namespace; it is killed on close() if still running.

        ``ip netns exec`` execs the command, so the Popen's pid is the command's own.  It gets
        a session of its own: a terminal's Ctrl-C reaches only us, and we stop it in order.
        """
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self._argv(host, argv), start_new_session=True, **kwargs)
        self._procs.append(proc)
        return proc

    def popen_python(self, host: str, source: str, *args, **kwargs) -> subprocess.Popen:
        return self.popen(host, sys.executable, "-c", source, *args, **kwargs)

    @staticmethod
    def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Signal a started process's group, wait; SIGKILL if it does not go. Returns its code."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)  # its own group: we gave it a session of its own
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
        return proc.returncode

    def capture(self, host: str, interface: str, path: str | os.PathLike, *,
                snaplen: int = 262144, nano: bool = True, pcapng: bool = False,
                bpf: str | None = None, buffer_kib: int = 32768) -> "TcpdumpCapture":
        """Start tcpdump on host's interface writing path; returns once it is listening.

        ``nano`` writes the nanosecond pcap magic; ``pcapng`` converts the finished file with
        ``editcap -F pcapng`` (tcpdump writes only classic pcap), keeping the resolution.
        ``buffer_kib`` is tcpdump's kernel buffer (-B): its 2 MiB default dropped packets here
        at ~40 Mbit/s on a busy 2-CPU machine, and a drop makes :meth:`stop` fail.
        """
        return TcpdumpCapture(self, host, interface, Path(path), snaplen=snaplen, nano=nano,
                              pcapng=pcapng, bpf=bpf, buffer_kib=buffer_kib)

    def scratch_dir(self, purpose: str) -> str:
        """A new directory for the lab's own files (e.g. a delay line's stats), removed on close.

        Named ``<run prefix>-<purpose>-XXXX`` in the temporary directory, so that
        :func:`cleanup_leftovers` also finds it once the run has died.
        """
        path = tempfile.mkdtemp(prefix=f"{self.prefix}-{purpose}-")
        self._dirs.append(path)
        return path

    # -- undoing ------------------------------------------------------------------------------
    def on_close(self, undo: Callable[[], object]) -> None:
        """Have close() call ``undo`` first (last registered first), before any process stops.

        For work whose order matters: an NFQUEUE rule must go before the delay line that
        serves it, or the packets in between are dropped.  ``undo`` should be idempotent (it may
        have run already).  An error from it does not stop the rest of close(), whose deletion
        of the namespaces removes rules and qdiscs anyway; any but a LabError is raised after.
        """
        self._undo.append(undo)

    def close(self) -> None:
        """Undo on_close work, stop our processes, kill what is left, delete the namespaces.

        Idempotent, and safe to call on a half-built lab.  Namespaces are found by the run
        prefix as well as by our records, so one created just before an interruption goes too.
        """
        if self._closed:
            return
        failed: Exception | None = None  # a bug in an undo: raised once the lab is gone
        with SignalsBlocked():
            while self._undo:
                try:
                    self._undo.pop()()
                except LabError:
                    pass
                except Exception as e:
                    failed = failed or e
            for proc in self._procs:
                self.stop(proc, timeout=2.0)
            self._procs.clear()
            names = {h.netns for h in self._hosts.values()}
            names.update(n for n in list_netns() if n.startswith(self.prefix + "-"))
            for netns in sorted(names):
                delete_netns(netns)
            for path in self._dirs:
                shutil.rmtree(path, ignore_errors=True)
            self._closed = True
            unregister(self)
        if failed is not None:
            raise failed

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


