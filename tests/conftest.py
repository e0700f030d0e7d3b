"""Shared fixtures: real captures, made once per test session in network namespaces.

``real_captures`` builds sender - router - receiver with :mod:`pcapstats.lab.netns`, runs real
traffic through the router and captures it with tcpdump at three places/formats:

====================  ================================================================
recv_nano.pcap        receiver's eth0, full packets, nanosecond pcap
recv_nano.pcapng      the same file converted with ``editcap -F pcapng``
router_s96_bpf.pcap   router's sender-side eth0, snaplen 96 (payloads cut), microsecond
                      pcap, capture filter ``not (udp and dst port 5304)``: the datagram to
                      the closed port is not captured, the ICMP error quoting it is
====================  ================================================================

Traffic (test_real_captures.py checks that each kind is really in the captures):
iperf3 TCP with 2 parallel streams plus its control connection, 4 concurrent plain-socket TCP
transfers at the same time, one client port reused for two connections to the same server port,
iperf3 UDP, a datagram to a closed port (ICMP port unreachable) then a plain UDP echo (with a
datagram big enough to be fragmented, and one after the echo server has gone: ICMP port
unreachable quoting a known UDP flow), IPv4
and IPv6 pings (also fragmented ones), and a TCP transfer over IPv6.  Addresses live only inside
the namespaces (10.77.x.x, fd00:77:x::x).

The lab is torn down before the first test runs; the files live in a temporary directory that
is removed at the end of the session, also when tests fail.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

CAPTURE_NAMES = ("recv_nano.pcap", "recv_nano.pcapng", "router_s96_bpf.pcap")
# (what, port): facts about the traffic the tests verify are present in the captures.
# Ports no Wireshark dissector claims (6000 would be decoded as X11, udp 7000 as AFS RX).  The
# reused client port is below the server's, so "side A" tells first-packet-source from
# higher-port rules apart.
TCP_SINK_PORT, REUSE_SERVER_PORT, REUSE_CLIENT_PORT = 5301, 5302, 4001
UDP_ECHO_PORT, UDP_CLOSED_PORT, IPERF_PORT = 5303, 5304, 5201
CONCURRENT_TCP = 4

_TOOLS = ("ip", "ethtool", "tcpdump", "iperf3", "ping", "tshark", "editcap")


# Hypothesis writes its example database (and, since 6.1xx, a constants cache) under the working
# directory even with database=None: keep it in a temporary directory the session removes.
_HYPOTHESIS_DIR = tempfile.mkdtemp(prefix="pcapstats-hypothesis-")
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", _HYPOTHESIS_DIR)


def pytest_unconfigure(config):
    shutil.rmtree(_HYPOTHESIS_DIR, ignore_errors=True)


@pytest.fixture(params=["c", "numpy"])
def kernel(request):
    """Each ingest kernel in turn; one not built in this install is skipped with the reason."""
    from tests.helpers import craft
    why = craft.kernel_unavailable(request.param)
    if why:
        pytest.skip(why)
    return request.param


def netns_unavailable() -> str | None:
    """Why the netns tests cannot run here, or None. Only a missing prerequisite skips."""
    if os.geteuid() != 0:
        return "needs root for network namespaces (run the tests as root)"
    missing = [t for t in _TOOLS if shutil.which(t) is None]
    if missing:
        return f"needs {', '.join(missing)} (apt-get install iproute2 ethtool tcpdump iperf3 " \
               "iputils-ping tshark)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"'ip netns' is unavailable: {probe.stderr.strip()}"
    return None


def require_netns() -> None:
    """Skip (from a fixture) when netns tests cannot run here, saying why."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)


def _builds_namespaces(item) -> bool:
    """The test, or a fixture it uses (directly or through another), calls require_netns()."""
    funcs = [getattr(item, "function", None)]
    funcs += [defs[-1].func for defs in item._fixtureinfo.name2fixturedefs.values() if defs]
    return any("require_netns" in getattr(getattr(f, "__code__", None), "co_names", ())
               for f in funcs)


def pytest_configure(config):
    """pytest-xdist's workers get COLUMNS=80 from their parent's terminal: drop it, so a test
    sees the width a command gets when its output is not a terminal (render.DEFAULT_WIDTH)
    whether .ci/test runs it in a worker or not; tests of a width set their own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)


# The test files whose netns tests run one at a time with nothing beside them (marked
# `alone`; .ci/test runs the other netns tests two files at a time): those that hold a rate,
# a delay or a share of time to a tolerance (against iperf3, ping, TCP_INFO or the asked
# value), and those that change this host's own namespace -- its interfaces, qdiscs, iptables
# rules, /run/pcapstats -- or check that nothing is left there, which a test beside them would
# see or disturb.
ALONE = {
    # timings
    "tests/analyses/test_cwnd.py", "tests/analyses/test_delay.py",
    "tests/analyses/test_fairness.py", "tests/analyses/test_limits.py",
    "tests/analyses/test_ping.py", "tests/analyses/test_tcp_analysis.py",
    "tests/analyses/test_udp.py", "tests/lab/test_accuracy.py",
    "tests/lab/test_impair.py", "tests/lab/test_measure_pings.py", "tests/lab/test_pingpong.py",
    "tests/lab/test_topology.py",
    # this host's own namespace
    "tests/lab/test_capture_live.py", "tests/lab/test_lab_cleanup.py",
    "tests/lab/test_netem_path.py",
}


def pytest_collection_modifyitems(config, items):
    """netns tests are slow tests: real traffic takes seconds, and `-m "not slow"` (the
    edit-test loop) leaves them out.  A test that builds namespaces through a fixture is a
    netns test even when it does not say so (so `-m "not netns"` never starts one in
    parallel with the timing-sensitive ones)."""
    reason = netns_unavailable()
    for item in items:
        if "netns" not in item.keywords and _builds_namespaces(item):
            item.add_marker(pytest.mark.netns)
        if "netns" in item.keywords:
            item.add_marker(pytest.mark.slow)
            if item.nodeid.split("::", 1)[0] in ALONE:
                item.add_marker(pytest.mark.alone)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


# -- traffic programs, run inside the namespaces ---------------------------------------------
# Each server prints "ready" once it listens, so the client never races it.

TCP_SINK = r"""
import socket, struct, sys, threading
family, addr, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
srv = socket.socket(socket.AF_INET6 if family == "6" else socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr, port)); srv.listen(16)
print("ready", flush=True)
def serve(conn):
    # 8-byte size, then that many bytes; answer BYE and close first (this side's TIME_WAIT).
    want = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))[0]
    got = 0
    while got < want:
        chunk = conn.recv(min(65536, want - got))
        if not chunk:
            break
        got += len(chunk)
    conn.sendall(b"BYE")
    conn.close()
threads = []
for _ in range(count):
    conn, _ = srv.accept()
    t = threading.Thread(target=serve, args=(conn,)); t.start(); threads.append(t)
for t in threads:
    t.join()
"""

TCP_SOURCE = r"""
import errno, socket, struct, sys, threading, time
family, addr, port, nconn, nbytes, bind_port = sys.argv[1:7]
port, nconn, nbytes, bind_port = int(port), int(nconn), int(nbytes), int(bind_port)
fam = socket.AF_INET6 if family == "6" else socket.AF_INET
together = threading.Barrier(1 if bind_port else nconn)  # concurrent: all connect, then send
def connect():
    if not bind_port:
        return socket.create_connection((addr, port))
    # The same client port every time: port reuse on one 4-tuple.  Until the peer has acked
    # our last FIN the old socket still holds the 4-tuple (EADDRNOTAVAIL): try again shortly.
    for attempt in range(100):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", bind_port))
        try:
            s.connect((addr, port))
            return s
        except OSError as e:
            s.close()
            if e.errno != errno.EADDRNOTAVAIL:
                raise
            time.sleep(0.02)
    raise SystemExit("client port stayed busy")
def transfer():
    s = connect()
    together.wait(10)
    s.sendall(struct.pack("!Q", nbytes))
    block = bytes(1000)
    for _ in range(nbytes // 1000):
        s.sendall(block)
    reply = b""
    while chunk := s.recv(16):
        reply += chunk
    assert reply == b"BYE", reply
    s.close()
if bind_port:
    for k in range(nconn):
        time.sleep(0.2 if k else 0)  # the ISN clock moves on: the server's TIME_WAIT takes the SYN
        transfer()
else:
    threads = [threading.Thread(target=transfer) for _ in range(nconn)]
    for t in threads: t.start()
    for t in threads: t.join()
"""

UDP_ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(data, peer)
    if data == b"END":
        break
"""

UDP_CLIENT = r"""
import socket, sys, time
addr, port, closed_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# First a flow of its own to a closed port: ICMP port unreachable.  Where a capture filter
# hides the datagram, the ICMP error quotes a flow never seen, before the echo flow starts.
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
probe.sendto(b"to a closed port", (addr, closed_port))
time.sleep(0.1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
for size in [500] * 20 + [3000]:  # 3000 > MTU: sent, and echoed, as IPv4 fragments
    s.sendto(bytes(size), (addr, port))
    assert len(s.recvfrom(65535)[0]) == size
s.sendto(b"END", (addr, port)); s.recvfrom(65535)
time.sleep(0.2)  # the echo server has exited: ICMP port unreachable quoting a known flow
s.sendto(b"anyone there?", (addr, port))
time.sleep(0.2)
"""


def _start_server(lab, host: str, source: str, *args) -> subprocess.Popen:
    """Start a traffic program in host and wait for its "ready" line."""
    proc = lab.popen_python(host, source, *args, stdout=subprocess.PIPE, text=True)
    if not select.select([proc.stdout], [], [], 10)[0] or proc.stdout.readline() != "ready\n":
        raise RuntimeError(f"traffic server in {host} did not start: {source.split()[1]}")
    return proc


def _wait_tcp_listen(lab, host: str, port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while f":{port} " not in lab.run(host, "ss", "-Hltn").stdout:
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listens on {host}:{port}")
        time.sleep(0.05)


def _finish(proc: subprocess.Popen, what: str, timeout: float = 30) -> None:
    if proc.wait(timeout) != 0:
        raise RuntimeError(f"{what} failed with exit code {proc.returncode}")


def run_traffic(lab) -> None:
    """All the traffic phases, sender -> router -> receiver; about 6 seconds."""
    rcv4, rcv6 = lab.address("receiver", 4), lab.address("receiver", 6)
    iperf = lab.popen("receiver", "iperf3", "-s", "-p", IPERF_PORT,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_tcp_listen(lab, "receiver", IPERF_PORT)

    # (a) + (b): iperf3 TCP (2 streams + control) while 4 plain-socket transfers run.
    sink = _start_server(lab, "receiver", TCP_SINK, 4, rcv4, TCP_SINK_PORT, CONCURRENT_TCP)
    iperf_tcp = lab.popen("sender", "iperf3", "-c", rcv4, "-p", IPERF_PORT, "-P", 2, "-t", 2,
                          "-b", "20M", stdout=subprocess.DEVNULL)
    lab.python("sender", TCP_SOURCE, 4, rcv4, TCP_SINK_PORT, CONCURRENT_TCP, 300_000, 0)
    _finish(iperf_tcp, "iperf3 TCP client")
    _finish(sink, "TCP sink")

    # (c) one client port, two connections to one server port, one after the other.
    sink = _start_server(lab, "receiver", TCP_SINK, 4, rcv4, REUSE_SERVER_PORT, 2)
    lab.python("sender", TCP_SOURCE, 4, rcv4, REUSE_SERVER_PORT, 2, 50_000, REUSE_CLIENT_PORT)
    _finish(sink, "TCP sink (port reuse)")

    # (d) + (e): iperf3 UDP while a UDP echo exchange and pings run.
    iperf_udp = lab.popen("sender", "iperf3", "-c", rcv4, "-p", IPERF_PORT, "-u", "-b", "2M",
                          "-l", 1000, "-t", 1, stdout=subprocess.DEVNULL)
    echo = _start_server(lab, "receiver", UDP_ECHO, rcv4, UDP_ECHO_PORT)
    lab.python("sender", UDP_CLIENT, rcv4, UDP_ECHO_PORT, UDP_CLOSED_PORT)
    _finish(echo, "UDP echo server")
    lab.run("sender", "ping", "-c", 3, "-i", 0.1, rcv4)
    lab.run("sender", "ping", "-c", 2, "-i", 0.1, "-s", 3000, rcv4)  # IPv4 fragments
    _finish(iperf_udp, "iperf3 UDP client")
    lab.stop(iperf)

    # (e) IPv6: pings (also fragmented: fragment extension headers) and a TCP transfer.
    lab.run("sender", "ping", "-6", "-c", 3, "-i", 0.1, rcv6)
    lab.run("sender", "ping", "-6", "-c", 2, "-i", 0.1, "-s", 3000, rcv6)
    sink = _start_server(lab, "receiver", TCP_SINK, 6, rcv6, TCP_SINK_PORT, 1)
    lab.python("sender", TCP_SOURCE, 6, rcv6, TCP_SINK_PORT, 1, 100_000, 0)
    _finish(sink, "TCP sink (IPv6)")


def make_real_captures(directory: Path) -> dict[str, Path]:
    """Build the lab, capture the traffic, tear the lab down; returns name -> path."""
    from pcapstats.lab import topologies

    paths = {name: directory / name for name in CAPTURE_NAMES}
    with topologies.sender_router_receiver() as lab:
        for host in lab.hosts:  # empty neighbour caches: ARP and ND show up in the captures
            lab.run(host, "ip", "neigh", "flush", "all")
        captures = [
            lab.capture("receiver", "eth0", paths["recv_nano.pcap"], nano=True),
            lab.capture("router", lab.interface("router", "sender").name,
                        paths["router_s96_bpf.pcap"], snaplen=96, nano=False,
                        bpf=f"not (udp and dst port {UDP_CLOSED_PORT})"),
        ]
        try:
            run_traffic(lab)
        finally:
            for capture in captures:
                capture.stop()
    subprocess.run(["editcap", "-F", "pcapng", paths["recv_nano.pcap"],
                    paths["recv_nano.pcapng"]], check=True, capture_output=True)
    return paths


@contextlib.contextmanager
def _sigterm_unwinds():
    """Let SIGTERM (e.g. from `timeout`) unwind like Ctrl-C, so teardown still runs.

    Only when nobody else handles SIGTERM; pytest stops on KeyboardInterrupt and runs the
    session's finalizers, which remove the captures and (during setup) the lab.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL):
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(scope="session")
def real_captures() -> dict[str, Path]:
    """name -> path of each real capture (see the module docstring); removed after the session."""
    require_netns()
    with _sigterm_unwinds(), tempfile.TemporaryDirectory(prefix="pcapstats-real-") as tmp:
        yield make_real_captures(Path(tmp))
