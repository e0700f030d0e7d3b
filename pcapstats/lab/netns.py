"""Network-namespace lab: hosts joined by veth pairs, commands inside them, tcpdump -- all undone.

A :class:`Lab` owns a set of network namespaces (one per *host*) joined by veth pairs.  It is the
only place in pcapstats that touches the host's network, and it puts everything back:

- every namespace is named ``<run prefix>-<host>``, the run prefix being ``psl-<pid>-<n>``, so
  a leftover from a killed run is recognisable (and removable with :func:`cleanup_leftovers`);
- veth pairs are created with both ends directly inside their namespaces, so nothing ever
  appears in the host's own namespace, and deleting the namespaces deletes the veths;
- processes started with :meth:`Lab.popen` / :meth:`Lab.capture` get a session of their own
  (a terminal's Ctrl-C reaches only us, and we stop them in order) and are killed on close,
  together with anything else still running inside the lab's namespaces;
- :meth:`Lab.close` runs on every exit path: ``with Lab() as lab``, ``atexit``, and SIGTERM /
  SIGHUP (when nobody else handles them: the handler closes every open lab, then lets the
  signal kill the process as it would have).  SIGINT already unwinds as KeyboardInterrupt.

Every veth gets TSO/GSO/GRO switched off (the capture then shows the packets the wire would
carry, not 64 kB super-packets) and its receive queue's ``rps_cpus`` pinned to CPU 0 (veth
hops otherwise reorder a few packets per hundred thousand); see ../shared/DESIGN.md.

tcpdump is started with ``--immediate-mode`` (else the last second of packets can be lost)
and stopped with SIGINT, waiting for its final "packets captured" report; a capture that the
kernel dropped packets from is an error, not a silently thinner file.

Ready-made topologies: :meth:`Lab.two_hosts`, :meth:`Lab.sender_router_receiver`,
:meth:`Lab.dumbbell` (N pairs sharing one link) and :meth:`Lab.chain` (K routers in a row).  The
last three describe their shared link as :attr:`Lab.bottleneck` (a :class:`Bottleneck`; a chain
lists one per router in :attr:`Lab.bottlenecks`): where :mod:`pcapstats.lab.impair` puts rate,
loss and delay.  Work that must be undone before the lab's processes stop (an NFQUEUE rule
before its delay line) registers with :meth:`Lab.on_close`.

Example::

    with Lab.sender_router_receiver() as lab:
        with lab.capture("receiver", "eth0", "out.pcap", snaplen=128):
            lab.run("sender", "ping", "-c", "3", lab.address("receiver"))
"""

from __future__ import annotations

import atexit
import itertools
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from pcapstats.errors import PcapstatsError

PREFIX = "psl-"
_RUN_RE = re.compile(r"^psl-(\d+)-\d+-")
_counter = itertools.count()
_IFNAMSIZ = 15


class LabError(PcapstatsError):
    """The lab cannot do what was asked: not root, a tool missing, a command inside failed."""


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
    ingress: str  # router's interface toward the senders


@dataclass(frozen=True)
class CaptureStats:
    """What tcpdump said on exit."""
    captured: int
    received: int
    dropped_by_kernel: int
    dropped_by_interface: int = 0


@dataclass
class _Host:
    name: str
    netns: str
    interfaces: list[Interface] = field(default_factory=list)


def require_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, veth, tcpdump)",
                       hint="run as root, e.g. with sudo")
    for tool in tools:
        if shutil.which(tool) is None:
            package = {"ip": "iproute2", "editcap": "wireshark-common"}.get(tool, tool)
            raise LabError(f"the lab needs '{tool}', which is not installed",
                           hint=f"install it: apt-get install {package}")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _checked(["ip", *args], check=check)


def _show(argv: Sequence[str]) -> str:
    """A command for a one-line message: program text (python -c ...) shown as '<source>'."""
    return " ".join("<source>" if "\n" in a else a for a in map(str, argv))


def _checked(argv: Sequence[str], *, check: bool = True, timeout: float | None = 60,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run argv; on failure raise LabError naming the command and tool's last stderr line."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              input=input)
    except FileNotFoundError:
        raise LabError(f"'{argv[0]}' is not installed") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"'{_show(argv)}' did not finish within {timeout} s") from None
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise LabError(f"'{_show(argv)}' failed with exit code {proc.returncode}: {last}")
    return proc


def list_netns() -> list[str]:
    """Names of all network namespaces known to `ip netns`."""
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_netns_processes(netns: str) -> None:
    """SIGKILL whatever still runs inside netns (only ever our lab's namespaces)."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", netns, check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise LabError(f"processes in namespace {netns} survive SIGKILL")


def _delete_netns(netns: str) -> None:
    _kill_netns_processes(netns)
    _ip("netns", "delete", netns, check=False)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_leftovers(prefix: str = PREFIX, *, only_dead: bool = True) -> list[str]:
    """Delete namespaces (and kill processes in them) and scratch directories named prefix...

    With ``only_dead`` (the default) only those named ``psl-<pid>-<n>-...`` whose run process
    ``<pid>`` has ended are removed: one run cannot tear down another's lab, nor something
    someone else named.  Scratch directories are :meth:`Lab.scratch_dir`'s, in the temporary
    directory.  Returns the namespaces and directories deleted.
    """
    require_tools("ip")

    def dead(name: str) -> bool:
        match = _RUN_RE.match(name)
        return not only_dead or (match is not None and not pid_alive(int(match.group(1))))

    removed = []
    for netns in list_netns():
        if netns.startswith(prefix) and dead(netns):
            _delete_netns(netns)
            removed.append(netns)
    for path in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*")):
        if path.is_dir() and dead(path.name):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


# -- every exit path closes every open lab ----------------------------------------------------
_open_labs: list["Lab"] = []
_saved_handlers: dict[int, object] = {}
_atexit_registered = False
_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _close_all() -> None:
    for lab in list(_open_labs):
        lab.close()


def _on_exit_signal(signum, frame):
    """Close every lab, then die of the same signal as if we had not caught it."""
    try:
        _close_all()
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _register(lab: "Lab") -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_close_all)
        _atexit_registered = True
    if not _open_labs and threading.current_thread() is threading.main_thread():
        for sig in _EXIT_SIGNALS:
            if signal.getsignal(sig) == signal.SIG_DFL:  # never override someone's handler
                _saved_handlers[sig] = signal.signal(sig, _on_exit_signal)
    _open_labs.append(lab)


def _unregister(lab: "Lab") -> None:
    if lab in _open_labs:
        _open_labs.remove(lab)
    if not _open_labs and threading.current_thread() is threading.main_thread():
        for sig, old in list(_saved_handlers.items()):
            if signal.getsignal(sig) is _on_exit_signal:
                signal.signal(sig, old)
            del _saved_handlers[sig]


class _SignalsBlocked:
    """Block exit signals while the lab is being undone, so a second Ctrl-C cannot cut it short."""
    _SIGS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

    def __enter__(self):
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, self._SIGS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old)


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
        _register(self)

    # -- building -----------------------------------------------------------------------------
    def add_host(self, name: str) -> str:
        """Create a namespace for host `name` (loopback up); returns the namespace's name."""
        if name in self._hosts:
            raise LabError(f"host {name!r} exists already in lab {self.prefix}")
        netns = f"{self.prefix}-{name}"
        self._hosts[name] = _Host(name, netns)  # recorded first: close() removes half-made ones
        _ip("netns", "add", netns)
        _ip("-n", netns, "link", "set", "lo", "up")
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
        _ip("link", "add", name_a, "netns", ha.netns, "type", "veth",
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
            _ip("-n", ns, "link", "set", dev, "mtu", str(mtu))
        if iface.ipv4:
            _ip("-n", ns, "addr", "add", iface.ipv4, "dev", dev)
        if iface.ipv6:
            _ip("-n", ns, "-6", "addr", "add", iface.ipv6, "dev", dev, "nodad")
        _ip("-n", ns, "link", "set", dev, "up")

    def bridge(self, host: str, name: str, ports: Sequence[str], *, ipv4: str | None = None,
               ipv6: str | None = None) -> Interface:
        """Make a bridge in host enslaving its interfaces ``ports``; addresses go on the bridge.

        Bridged frames are kept out of iptables (``bridge-nf-call-*tables=0``, per namespace:
        this kernel has br_netfilter built in and on), so a routed packet meets FORWARD once.
        """
        h = self._host(host)
        for table in ("arptables", "iptables", "ip6tables"):
            self.sysctl(host, f"net.bridge.bridge-nf-call-{table}", 0)
        _ip("-n", h.netns, "link", "add", name, "type", "bridge", "forward_delay", "0")
        for port in ports:
            _ip("-n", h.netns, "link", "set", port, "master", name)
            h.interfaces = [replace(i, bridge=name) if i.name == port else i
                            for i in h.interfaces]
        iface = Interface(host, name, f"lan:{name}", ipv4, ipv6)
        h.interfaces.append(iface)
        if ipv4:
            _ip("-n", h.netns, "addr", "add", ipv4, "dev", name)
        if ipv6:
            _ip("-n", h.netns, "-6", "addr", "add", ipv6, "dev", name, "nodad")
        _ip("-n", h.netns, "link", "set", name, "up")
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
                    out = _ip("-n", host.netns, "-6", "addr", "show", "dev", iface.name,
                              "scope", "link").stdout
                    if "inet6" in out and "tentative" not in out:
                        break
                    if time.monotonic() > deadline:
                        raise LabError(f"{host.name}:{iface.name} not ready after {timeout} s")
                    time.sleep(0.05)

    def route(self, host: str, destination: str, via: str) -> None:
        """Add a route (``default`` or a prefix) in host's namespace; v4/v6 by the gateway."""
        family = "-6" if ":" in via else "-4"
        _ip("-n", self._host(host).netns, family, "route", "add", destination, "via", via)

    def sysctl(self, host: str, key: str, value: str | int) -> None:
        self.run(host, "sysctl", "-q", "-w", f"{key}={value}")

    def enable_forwarding(self, host: str) -> None:
        self.sysctl(host, "net.ipv4.ip_forward", 1)
        self.sysctl(host, "net.ipv6.conf.all.forwarding", 1)

    # -- ready-made topologies ------------------------------------------------------------------
    @classmethod
    def _built(cls, run_prefix: str | None, build: Callable[["Lab"], None]) -> "Lab":
        """A new lab that ``build`` fills, ready for traffic; closed again if building fails."""
        lab = cls(run_prefix)
        try:
            build(lab)
            lab.wait_ready()
        except BaseException:
            lab.close()
            raise
        return lab

    @classmethod
    def two_hosts(cls, run_prefix: str | None = None) -> "Lab":
        """Hosts ``a`` (10.77.0.1, fd00:77::1) and ``b`` (10.77.0.2, fd00:77::2), one link."""
        def build(lab: Lab) -> None:
            lab.add_host("a")
            lab.add_host("b")
            lab.link("a", "b", ipv4=("10.77.0.1/24", "10.77.0.2/24"),
                     ipv6=("fd00:77::1/64", "fd00:77::2/64"))
            lab.pairs = [("a", "b")]
        return cls._built(run_prefix, build)

    @classmethod
    def sender_router_receiver(cls, run_prefix: str | None = None) -> "Lab":
        """``sender`` (10.77.1.1) - ``router`` (.254 on both nets) - ``receiver`` (10.77.2.1).

        IPv6 alike: fd00:77:1::1 - fd00:77:1::fe | fd00:77:2::fe - fd00:77:2::1.  The router
        forwards; the end hosts route everything through it.  Put impairments on the router's
        egress so the capture shows real in-network loss (see DESIGN.md).
        """
        def build(lab: Lab) -> None:
            for host in ("sender", "router", "receiver"):
                lab.add_host(host)
            # Before the links: switching IPv6 forwarding on later restarts the interfaces'
            # IPv6 setup, and the router then ignores neighbour solicitations for a second.
            lab.enable_forwarding("router")
            lab.link("sender", "router", ipv4=("10.77.1.1/24", "10.77.1.254/24"),
                     ipv6=("fd00:77:1::1/64", "fd00:77:1::fe/64"))
            lab.link("router", "receiver", ipv4=("10.77.2.254/24", "10.77.2.1/24"),
                     ipv6=("fd00:77:2::fe/64", "fd00:77:2::1/64"))
            for host, net in (("sender", 1), ("receiver", 2)):
                lab.route(host, "default", f"10.77.{net}.254")
                lab.route(host, "default", f"fd00:77:{net}::fe")
            lab._bottleneck = Bottleneck("router", egress="eth1", ingress="eth0")
            lab.pairs = [("sender", "receiver")]
        return cls._built(run_prefix, build)

    MAX_PAIRS = 100
    MAX_ROUTERS = 8

    @classmethod
    def chain(cls, routers: int = 2, run_prefix: str | None = None) -> "Lab":
        """``sender`` - ``router1`` - ... - ``routerK`` - ``receiver``: a path of K routers.

        Link i (1..K+1, counted from the sender) is 10.77.i.0/24 and fd00:77:i::/64; its
        sender-side end is .1 (::1), its receiver-side end .2 (::2)::

            sender 10.77.1.1 ─ 10.77.1.2 router1 10.77.2.1 ─ 10.77.2.2 router2 10.77.3.1 ─
            10.77.3.2 receiver                                   (K = 2)

        Every router forwards and knows every subnet (static routes toward its neighbours).
        ``lab.bottlenecks`` lists each router's link toward the receiver (``eth1``, ingress
        ``eth0``): apply a different impairment on each for per-link rate and delay.
        ``lab.bottleneck`` is router1's.
        """
        if not 1 <= routers <= cls.MAX_ROUTERS:
            raise LabError(f"a chain needs 1 to {cls.MAX_ROUTERS} routers, not {routers}")
        nodes = ["sender", *(f"router{k}" for k in range(1, routers + 1)), "receiver"]
        def build(lab: Lab) -> None:
            for node in nodes:
                lab.add_host(node)
                if node.startswith("router"):
                    lab.enable_forwarding(node)  # before the links: see sender_router_receiver
            for i, (left, right) in enumerate(zip(nodes, nodes[1:]), start=1):
                lab.link(left, right, ipv4=(f"10.77.{i}.1/24", f"10.77.{i}.2/24"),
                         ipv6=(f"fd00:77:{i:x}::1/64", f"fd00:77:{i:x}::2/64"))
            links = len(nodes) - 1
            lab.route("sender", "default", "10.77.1.2")
            lab.route("sender", "default", "fd00:77:1::2")
            lab.route("receiver", "default", f"10.77.{links}.1")
            lab.route("receiver", "default", f"fd00:77:{links:x}::1")
            for k in range(1, routers + 1):  # router k sits between links k and k + 1
                for j in range(1, links + 1):
                    if j in (k, k + 1):
                        continue
                    hop = (k, 1) if j < k else (k + 1, 2)  # (link, end) of the next hop
                    lab.route(f"router{k}", f"10.77.{j}.0/24", f"10.77.{hop[0]}.{hop[1]}")
                    lab.route(f"router{k}", f"fd00:77:{j:x}::/64",
                              f"fd00:77:{hop[0]:x}::{hop[1]}")
            lab._bottlenecks = [Bottleneck(f"router{k}", egress="eth1", ingress="eth0")
                                for k in range(1, routers + 1)]
            lab._bottleneck = lab._bottlenecks[0]
            lab.pairs = [("sender", "receiver")]
        return cls._built(run_prefix, build)

    @classmethod
    def dumbbell(cls, pairs: int = 2, run_prefix: str | None = None) -> "Lab":
        """``sender1..N`` and ``receiver1..N`` sharing one bottleneck: the router's ``br1``.

        One router, two LANs, each a bridge inside the router's namespace::

            sender_i  10.77.1.i  fd00:77:1::i ─┐                    ┌─ receiver_i 10.77.2.i
                                    router br0 10.77.1.254 | br1 10.77.2.254   fd00:77:2::i
                                               fd00:77:1::fe | fd00:77:2::fe

        (i in decimal for IPv4, in hex for IPv6: receiver10 is fd00:77:2::a.)  Every sender's
        traffic to any receiver is routed out of ``br1``: that one device's qdisc and one
        ``FORWARD -o br1`` rule see every flow, so the pairs share a single rate, queue, loss and
        delay, and a capture on ``router`` ``br1`` is the bottleneck wire.  ``dumbbell(1)`` is
        ``sender_router_receiver()`` with a bridge on each side and the hosts numbered.

        Why one router with bridges rather than two routers joined by the bottleneck: the path
        has the same single forwarding hop and the same addresses as sender_router_receiver
        (impairments, sidecars and tests treat both alike), and fewer veth crossings, which
        cost CPU on a small shared machine.  Each sender/receiver link is its own veth, a port
        of its LAN's bridge, so a capture on ``lab.interface("router", "receiver2")`` or on a
        host's ``eth0`` shows that host's flows alone.
        """
        if not 1 <= pairs <= cls.MAX_PAIRS:
            raise LabError(f"dumbbell needs 1 to {cls.MAX_PAIRS} pairs, not {pairs}")
        def build(lab: Lab) -> None:
            lab.add_host("router")
            lab.enable_forwarding("router")  # before the links: see sender_router_receiver
            for side, net in (("sender", 1), ("receiver", 2)):
                ports = []
                for i in range(1, pairs + 1):
                    host = f"{side}{i}"
                    lab.add_host(host)
                    end, port = lab.link(host, "router", ipv4=(f"10.77.{net}.{i}/24", None),
                                         ipv6=(f"fd00:77:{net}::{i:x}/64", None))
                    ports.append(port.name)
                    lab.route(host, "default", f"10.77.{net}.254")
                    lab.route(host, "default", f"fd00:77:{net}::fe")
                lab.bridge("router", f"br{net - 1}", ports, ipv4=f"10.77.{net}.254/24",
                           ipv6=f"fd00:77:{net}::fe/64")
            lab._bottleneck = Bottleneck("router", egress="br1", ingress="br0")
            lab.pairs = [(f"sender{i}", f"receiver{i}") for i in range(1, pairs + 1)]
        return cls._built(run_prefix, build)

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
                           hint="build it with Lab.sender_router_receiver() or Lab.dumbbell()")
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
        return _checked(self._argv(host, argv), check=check, timeout=timeout, input=input)

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
        with _SignalsBlocked():
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
                _delete_netns(netns)
            for path in self._dirs:
                shutil.rmtree(path, ignore_errors=True)
            self._closed = True
            _unregister(self)
        if failed is not None:
            raise failed

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TcpdumpCapture:
    """A tcpdump running in a lab host; :meth:`stop` returns once the file is complete."""

    _STAT_RE = {
        "captured": re.compile(r"(\d+) packets? captured"),
        "received": re.compile(r"(\d+) packets? received by filter"),
        "dropped_by_kernel": re.compile(r"(\d+) packets? dropped by kernel"),
        "dropped_by_interface": re.compile(r"(\d+) packets? dropped by interface"),
    }

    def __init__(self, lab: Lab, host: str, interface: str, path: Path, *, snaplen: int,
                 nano: bool, pcapng: bool, bpf: str | None, buffer_kib: int | None = None,
                 ready_timeout: float = 10.0):
        require_tools("tcpdump", *(["editcap"] if pcapng else []))
        self.lab, self.path, self.pcapng = lab, path, pcapng
        self.stats: CaptureStats | None = None
        self._raw = path.with_name(path.name + ".tmp.pcap") if pcapng else path
        argv = ["tcpdump", "-n", "-i", interface, "-w", str(self._raw), "-s", str(snaplen),
                "--immediate-mode", "-Z", "root",  # -Z: stay root, the file may be anywhere
                "--time-stamp-precision", "nano" if nano else "micro"]
        if buffer_kib:
            argv += ["-B", str(buffer_kib)]
        if bpf:
            argv.append(bpf)
        self._proc = lab.popen(host, *argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        self._stderr = self._wait_listening(ready_timeout)

    def _wait_listening(self, timeout: float) -> str:
        """Read tcpdump's stderr until "listening on": from then on it sees every packet."""
        seen = ""
        deadline = time.monotonic() + timeout
        fd = self._proc.stderr.fileno()
        while "listening on" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or self._proc.poll() is not None:
                self.lab.stop(self._proc)
                rest = seen.strip().splitlines()
                raise LabError(f"tcpdump did not start: {rest[-1] if rest else 'no message'}",
                               path=str(self.path))
            if select.select([fd], [], [], min(left, 0.2))[0]:
                chunk = os.read(fd, 4096).decode(errors="replace")
                if not chunk:  # EOF: it exited; the poll above reports it
                    time.sleep(0.05)
                seen += chunk
        return seen

    def stop(self, settle: float = 0.3, allow_drops: bool = False) -> CaptureStats:
        """Wait `settle` s for packets in flight, SIGINT tcpdump, wait for its report.

        Raises LabError if tcpdump does not report, or if the kernel dropped packets (unless
        allow_drops).  Converts to pcapng last, if asked.
        """
        if self.stats is not None:
            return self.stats
        time.sleep(settle)
        if self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGINT)
        try:
            _, err = self._proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.lab.stop(self._proc, signal.SIGKILL)
            raise LabError("tcpdump did not exit after SIGINT; the capture may be incomplete",
                           path=str(self.path)) from None
        report = self._stderr + (err or "")
        values = {k: int(m.group(1)) for k, rx in self._STAT_RE.items()
                  if (m := rx.search(report))}
        if "captured" not in values or self._proc.returncode not in (0, -signal.SIGINT):
            last = (report.strip().splitlines() or ["no message"])[-1]
            raise LabError(f"tcpdump ended without its report (exit {self._proc.returncode}): "
                           f"{last}", path=str(self.path))
        self.stats = CaptureStats(values["captured"], values.get("received", 0),
                                  values.get("dropped_by_kernel", 0),
                                  values.get("dropped_by_interface", 0))
        if self.pcapng:  # the file is whole even if packets were dropped: convert it anyway
            _checked(["editcap", "-F", "pcapng", str(self._raw), str(self.path)])
            self._raw.unlink()
        if self.stats.dropped_by_kernel and not allow_drops:
            raise LabError(f"tcpdump: {self.stats.dropped_by_kernel} packets dropped by kernel",
                           path=str(self.path),
                           hint="capture less traffic, a smaller snaplen or a larger buffer_kib")
        return self.stats

    def __enter__(self) -> "TcpdumpCapture":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.stop()
        else:  # already failing: stop it, but do not hide the first error behind a second
            try:
                self.stop()
            except LabError:
                pass
