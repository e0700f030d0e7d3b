"""`pcapstats capture` and `pcapstats netem` on a real interface: two namespaces made here,
joined by a veth; pcapstats runs inside host ``a`` (``ip netns exec``) as a user would on their
own machine, on ``a``'s eth0.

Each expectation comes from outside the code under test: the sending program's own count of
refused sends, the receiver's count, a second tcpdump on the same interface, tshark reading
the capture, ping's RTTs, and the kernel's view (tc, iptables, /proc) of what is left.

"Nothing left" means, each time: eth0's only qdisc is the kernel's noqueue again, no
PCAPSTATS chain in any family's mangle table, no NFQUEUE bound, no process started by
pcapstats alive (each run's environment carries a tag that its children inherit), no state
record, no hidden partial file.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import pcapstats as ps
from pcapstats.lab import topologies
from pcapstats.lab.traffic import wait_listening
from pcapstats.sidecar import load_sidecar, placements
from tests.helpers.tshark_ref import tshark

pytestmark = pytest.mark.netns

TAG_VAR = "PCAPSTATS_LIVE_TEST_TAG"
PORT = 5999
UDP_FILTER = f"udp port {PORT}"

RECEIVER = r"""
import select, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
n = 0
timeout = 60.0                      # the first datagram: pcapstats takes a moment to start
while select.select([s], [], [], timeout)[0]:
    s.recv(65535)
    n += 1
    timeout = 1.5                   # then: the sender is done after this much silence
print(n, flush=True)
"""

# Sends N datagrams (N = 0: until killed), 1 ms apart; counts the sends the kernel refused
# (EPERM: a loss rule on this host's own output path); exits with the code asked.
SENDER = r"""
import errno, socket, sys, time
addr, port, count, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent = refused = 0
try:
    while count == 0 or sent + refused < count:
        try:
            s.sendto(bytes(1000), (addr, port))
            sent += 1
        except PermissionError:
            refused += 1
        time.sleep(0.001)
finally:
    print(sent, refused, flush=True)
sys.exit(code)
"""

TCP_SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0
while (b := c.recv(1 << 20)):
    n += len(b)
print(n, flush=True)
"""

TCP_SOURCE = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(bytes(int(sys.argv[3])))
s.close()
"""


# -- fixtures and helpers ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def lab():
    with topologies.two_hosts() as lab:
        yield lab


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("state")


@pytest.fixture
def env(state_dir):
    """The environment of one pcapstats run: its own state directory, a tag for its children."""
    return {**os.environ, "PCAPSTATS_STATE_DIR": str(state_dir), TAG_VAR: uuid.uuid4().hex}


def pcapstats(lab, env, *args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", lab.netns("a"), sys.executable, "-m",
                           "pcapstats", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=kwargs.pop("timeout", 60), **kwargs)


def start_pcapstats(lab, env, *args) -> subprocess.Popen:
    """pcapstats in a session of its own, as a terminal runs a foreground command."""
    return subprocess.Popen(["ip", "netns", "exec", lab.netns("a"), sys.executable, "-m",
                             "pcapstats", *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def start_receiver(lab) -> subprocess.Popen:
    proc = lab.popen_python("b", RECEIVER, PORT, stdout=subprocess.PIPE, text=True)
    assert select.select([proc.stdout], [], [], 10)[0] and proc.stdout.readline() == "ready\n"
    return proc


def sender(count: int, code: int = 0) -> list[str]:
    return ["--", sys.executable, "-c", SENDER, "10.77.0.2", str(PORT), str(count), str(code)]


def tagged(tag: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"{TAG_VAR}={tag}".encode() in Path(f"/proc/{pid}/environ").read_bytes() \
                    .split(b"\0") and Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] \
                    not in "ZX":
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                             .decode(errors="replace")[:100])
        except OSError:
            continue
    return found


def pcapstats_state(lab) -> dict:
    """What pcapstats could have left in host a's namespace."""
    def run(*argv):
        return lab.run("a", *argv, check=False).stdout
    return {"qdiscs": [(q["kind"], q["handle"]) for q in json.loads(
                run("tc", "-j", "qdisc", "show", "dev", "eth0") or "[]")],
            "chains": [line for tool in ("iptables", "ip6tables")
                       for line in run(tool, "-w", "-t", "mangle", "-S").splitlines()
                       if "PCAPSTATS" in line],
            "queues": run("cat", "/proc/net/netfilter/nfnetlink_queue").strip()}


CLEAN = {"qdiscs": [("noqueue", "0:")], "chains": [], "queues": ""}


def assert_nothing_left(lab, env, state_dir: Path, out_dir: Path | None = None) -> None:
    deadline = time.monotonic() + 5  # a process just killed may take a moment to go
    while tagged(env[TAG_VAR]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged(env[TAG_VAR]) == []
    assert pcapstats_state(lab) == CLEAN
    assert list(state_dir.rglob("*.json")) == []
    if out_dir is not None:
        assert list(out_dir.glob(".*")) == []


def frames(path: Path, display_filter: str | None = None) -> list[str]:
    args = ["-r", str(path), "-T", "fields", "-e", "frame.number"]
    return tshark(*args, *(["-Y", display_filter] if display_filter else [])).split()


def within_binomial(k: int, n: int, p: float, sigmas: float = 4.5) -> bool:
    return abs(k - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


# -- capture ----------------------------------------------------------------------------------
def test_loss_counts_agree_with_sender_receiver_and_a_second_tcpdump(lab, env, state_dir,
                                                                      tmp_path):
    n = 2000
    receiver = start_receiver(lab)
    witness = lab.capture("a", "eth0", tmp_path / "witness.pcap", snaplen=128, bpf=UDP_FILTER)
    run = pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "10%", "--filter", UDP_FILTER,
                    "--snaplen", 128, "-o", tmp_path / "x.pcap", *sender(n))
    witnessed = witness.stop().captured
    received = int(receiver.communicate(timeout=10)[0])
    assert run.returncode == 0, run.stderr
    sent, refused = map(int, run.stdout.split())
    doc = load_sidecar(tmp_path / "x.json")
    assert doc["kind"] == "capture" and doc["status"] == "complete"
    imp = doc["impairment"]
    (cap,) = doc["captures"]
    if imp["mechanisms"]["loss"] == "netem":  # a drop in the qdisc: the sender is not told
        dropped = imp["counters"]["qdisc"]["dropped_packets"]
        assert refused == 0 and received == n - dropped
    else:
        assert imp["mechanisms"]["loss"] == "nfqueue-delayline"
        loss = imp["counters"]["loss"]
        dropped = loss["dropped_packets"]
        # The delay line dropped datagrams after they left the program (no send refused):
        # lost on the wire.  It also meets the odd packet of the host's own (IPv6 neighbour
        # discovery...), which it may drop too.
        others = loss["offered_packets"] - n
        assert refused == 0 and sent == n
        assert 0 <= others <= 10 and n - received <= dropped <= n - received + others, \
            (loss, received)
    assert within_binomial(dropped, n, 0.10), f"{dropped} of {n} dropped, asked 10 %"
    # The capture: whole, what tshark reads, exactly what a second tcpdump saw.
    assert cap["packets_captured"] == witnessed == received
    assert cap["packets_dropped_by_kernel"] == 0
    assert len(frames(tmp_path / "x.pcap")) == received
    assert cap["size_bytes"] == (tmp_path / "x.pcap").stat().st_size
    assert doc["run"]["exit_status"] == 0 and doc["run"]["stopped_by"] == "command"
    assert doc["run"]["started_ns"] < doc["run"]["ended_ns"] <= doc["finished_ns"]
    assert any("NFQUEUE" in c for c in imp["commands"]) and \
        any("--loss 0.1" in c for c in imp["commands"]) or imp["mechanisms"]["loss"] == "netem"
    assert "pcapstats: note: eth0: loss 10 % by" in run.stderr
    assert_nothing_left(lab, env, state_dir, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["witness.pcap", "x.json", "x.pcap"]


def test_a_failing_command_passes_on_its_status_and_the_delay_is_as_asked(lab, env, state_dir,
                                                                          tmp_path):
    script = "ping -n -c 8 -i 0.05 10.77.0.2; exit 3"
    run = pcapstats(lab, env, "capture", "-i", "eth0", "--delay", "20ms", "--rate", "20mbit",
                    "--filter", "icmp", "-o", tmp_path / "p.pcapng", "--", "sh", "-c", script)
    assert run.returncode == 3, run.stderr
    doc = load_sidecar(tmp_path / "p.json")
    assert doc["status"] == "complete" and doc["run"]["exit_status"] == 3
    assert doc["impairment"]["mechanisms"] in (
        {"delay": "nfqueue-delayline", "rate": "tbf", "queue": "tbf"},
        {"delay": "netem", "rate": "netem", "queue": "netem"})
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", run.stdout)]
    assert len(rtts) == 8 and 20 <= statistics.median(rtts) < 30, rtts
    # The capture is taken after the egress impairment: its RTTs leave the delay out.
    replies = tshark("-r", str(tmp_path / "p.pcapng"), "-Y", "icmp.resptime", "-T", "fields",
                     "-e", "icmp.resptime").split()
    assert len(replies) == 8 and max(map(float, replies)) < 5, replies
    assert doc["captures"][0]["format"] == "pcapng"
    assert len(frames(tmp_path / "p.pcapng")) == doc["captures"][0]["packets_captured"] == 16
    assert_nothing_left(lab, env, state_dir, tmp_path)


def test_own_tcp_under_loss_is_lost_on_the_wire_and_retransmitted(lab, env, state_dir,
                                                                   tmp_path):
    """The fallback's loss on the sender itself is a real loss, as netem's: segments are
    missing from the capture and TCP re-sends them (an iptables DROP would have been refused
    to the socket and sent again at once, with no retransmission on the wire)."""
    size = 5_000_000
    sink = lab.popen_python("b", TCP_SINK, 5998, stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline() == "ready\n"
    run = pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "10%", "--snaplen", 128,
                    "--filter", "tcp port 5998", "-o", tmp_path / "t.pcap", "--",
                    sys.executable, "-c", TCP_SOURCE, "10.77.0.2", 5998, size)
    assert run.returncode == 0, run.stderr
    assert int(sink.communicate(timeout=10)[0]) == size
    doc = load_sidecar(tmp_path / "t.json")
    loss = doc["impairment"]["counters"].get("loss")
    if loss is not None:
        assert loss["dropped_packets"] > 0
    # tshark sees the holes the drops left and the segments TCP sent again
    data_frames = len(frames(tmp_path / "t.pcap", "tcp.len > 0"))
    resent = len(frames(tmp_path / "t.pcap", "tcp.analysis.retransmission || "
                                              "tcp.analysis.fast_retransmission"))
    assert frames(tmp_path / "t.pcap", "tcp.analysis.lost_segment") != []
    assert 0.03 * data_frames < resent < 0.3 * data_frames, (resent, data_frames)
    assert_nothing_left(lab, env, state_dir, tmp_path)


def test_own_tcp_loss_is_counted_as_packets_on_the_wire(lab, env, state_dir, tmp_path):
    """With segmentation offload on, as on a real host's interface, netfilter meets this
    host's own TCP in GSO bursts of many segments, which NFQUEUE hands the delay line
    segmented: the loss reported is its drops over the packets it was handed -- packets on
    the wire -- within 2 points of what the capture shows (ps.retrans: the data segments the
    sender sent again, over those it sent); drops over the bursts would read several times
    that."""
    lab.run("a", "ethtool", "-K", "eth0", "tso", "on", "gso", "on")
    try:
        server = lab.popen("b", "iperf3", "-s", "-1", "-p", 5997, stdout=subprocess.DEVNULL)
        wait_listening(lab, "b", 5997, proc=server)
        run = pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "10%", "--snaplen", 128,
                        "--filter", "tcp port 5997", "-o", tmp_path / "g.pcap", "--",
                        "iperf3", "-c", "10.77.0.2", "-p", 5997, "-t", 2, "-b", "200M")
        server.wait(10)
    finally:
        lab.run("a", "ethtool", "-K", "eth0", "tso", "off", "gso", "off")
    assert run.returncode == 0, run.stderr
    doc = load_sidecar(tmp_path / "g.json")
    (check,) = [ch for ch in doc["achieved"]["checks"] if ch["quantity"] == "loss"]
    counts = ps.retrans(tmp_path / "g.pcap").to_pandas("counts")
    data = counts.loc[counts.payload_bytes.idxmax()]      # iperf3's data, not its control
    on_wire = data.resent / data.packets
    assert abs(check["achieved"] - on_wire) <= 0.02, (check, on_wire)
    assert check["in_spec"] is True
    loss = doc["impairment"]["counters"]["loss"]
    if doc["impairment"]["mechanisms"]["loss"] == "nfqueue-delayline":
        # netfilter met bursts: far fewer "packets" than went on the wire
        assert loss["offered_packets"] < 0.5 * loss["packets_on_wire"], loss
        assert (f"pcapstats: note: the loss dropped {loss['dropped_packets']} of "
                f"{loss['packets_on_wire']} packets on the wire: ") in run.stderr
    assert_nothing_left(lab, env, state_dir, tmp_path)


def test_delay_and_rate_on_this_hosts_egress_are_said_by_delay_and_rtt(lab, env, state_dir,
                                                                       tmp_path):
    """A delay and a rate on the capturing host's own egress act before tcpdump sees its
    requests: the pingpong client's own latencies (its report) exceed the capture's by the
    delay at least; the capture's sidecar places them there, and delay and rtt say what their
    numbers leave out (never a silent intercept)."""
    server = lab.popen("b", sys.executable, "-m", "pcapstats.tools.pingpong", "-s", "--once",
                       "-p", 8089, stdout=subprocess.DEVNULL)
    wait_listening(lab, "b", 8089, proc=server)
    report = tmp_path / "pingpong.json"
    run = pcapstats(lab, env, "capture", "-i", "eth0", "--delay", "5ms", "--rate", "20mbit",
                    "--snaplen", 128, "--filter", "tcp port 8089", "-o", tmp_path / "d.pcap",
                    "--", sys.executable, "-m", "pcapstats.tools.pingpong", "-c", "10.77.0.2",
                    "-p", 8089, "--cc", "cubic", "--sizes", "18,1000,4000,8000,16000", "-r", 10,
                    "--interval", "0.01", "--report", report)
    server.wait(10)
    assert run.returncode == 0, run.stderr
    doc = load_sidecar(tmp_path / "d.json")
    placed = placements(tmp_path / "d.pcap")
    assert {(p.what, p.amount) for p in placed} == {("delay", "5 ms"), ("rate", "20 Mbit/s")}
    assert all(p.unseen_by_round_trips and p.at == "this host's eth0, egress" for p in placed)
    (delay_check,) = [ch for ch in doc["achieved"]["checks"] if ch["quantity"] == "delay"]
    assert delay_check["in_spec"] is True
    result = ps.delay(tmp_path / "d.pcap")
    sizes = result.to_pandas("sizes")
    tools = json.loads(report.read_text())["sizes"]
    assert sizes["size_bytes"].tolist() == [r["size"] for r in tools]
    for mine, theirs in zip(sizes["latency_mean_ms"], (r["avg_ms"] for r in tools)):
        assert theirs - mine >= 4.5, (mine, theirs)   # the capture leaves the 5 ms out
    (note,) = [n for n in result.notes if "leave out what this host's egress added" in n]
    assert "5 ms delay and 20 Mbit/s rate on this host's eth0, egress" in note.detail
    rtt = ps.rtt(tmp_path / "d.pcap")
    assert any("the RTTs leave out what this host's egress added" in n for n in rtt.notes)
    assert_nothing_left(lab, env, state_dir, tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_capture_keeps_it_and_leaves_nothing(lab, env, state_dir, tmp_path,
                                                                 sig):
    out = tmp_path / "s.pcap"
    proc = start_pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "10%", "--delay", "5ms",
                           "--rate", "20mbit", "--filter", UDP_FILTER, "-o", out, *sender(0))
    partial = tmp_path / ".s.pcap.partial"
    deadline = time.monotonic() + 20
    while not partial.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)
    before = pcapstats_state(lab)
    assert before["chains"] and ("tbf", "5053:") in before["qdiscs"], before
    assert len(tagged(env[TAG_VAR])) >= 2  # the command and the delay line, at least
    # Ctrl-C reaches the terminal's foreground group: pcapstats and its command.  SIGTERM is
    # sent to pcapstats alone, which passes it on.
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, stderr
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith("pcapstats: error: interrupted") and "is kept" in lines[-1]
    assert [l for l in lines if l.startswith("pcapstats: error")] == lines[-1:]
    doc = load_sidecar(tmp_path / "s.json")
    assert doc["status"] == "interrupted" and doc["run"]["stopped_by"] == sig.name
    assert doc["run"]["exit_status"] is not None  # the command was ended, and waited for
    (cap,) = doc["captures"]
    assert cap["packets_captured"] > 100
    assert len(frames(out)) == cap["packets_captured"]
    assert doc["impairment"]["counters"]["loss"]["dropped_packets"] > 0
    assert_nothing_left(lab, env, state_dir, tmp_path)


def test_a_delay_line_that_dies_fails_the_capture_and_still_leaves_nothing(lab, env, state_dir,
                                                                           tmp_path):
    proc = start_pcapstats(lab, env, "capture", "-i", "eth0", "--delay", "5ms", "--loss", "1%",
                           "-o", tmp_path / "d.pcap", "--", "sleep", "2")
    deadline = time.monotonic() + 20
    while not (tmp_path / ".d.pcap.partial").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    pids = [p for p in filter(str.isdigit, os.listdir("/proc"))
            if f"{TAG_VAR}={env[TAG_VAR]}".encode() in _environ(p).split(b"\0")
            and b"pcapstats.tools.delayline" in _cmdline(p)]
    assert len(pids) == 1
    os.kill(int(pids[0]), signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 2, stderr
    (line,) = [l for l in stderr.splitlines() if l.startswith("pcapstats: error")]
    assert "delay line" in line and "not running" in line, line
    doc = load_sidecar(tmp_path / "d.json")
    assert doc["status"] == "failed" and doc["run"]["exit_status"] == 0
    assert any("already exited" in r for r in doc["impairment"]["removed"])
    assert_nothing_left(lab, env, state_dir, tmp_path)


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_qdisc_someone_else_set_is_left_alone_and_refused_in_one_line(lab, env, state_dir,
                                                                       tmp_path):
    lab.run("a", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "7mbit",
            "burst", "4000", "limit", "40000")
    try:
        theirs = lab.run("a", "tc", "qdisc", "show", "dev", "eth0").stdout
        assert "tbf" in theirs
        for args in (["capture", "-i", "eth0", "--loss", "10%", "-o", tmp_path / "r.pcap",
                      "--", "true"],
                     ["netem", "eth0", "--rate", "10mbit"]):
            run = pcapstats(lab, env, *args)
            assert run.returncode == 2 and run.stdout == ""
            (line,) = run.stderr.strip().splitlines()
            assert line.startswith("pcapstats: error: eth0 already has a qdisc tbf") and \
                "pcapstats did not set" in line, line
            assert lab.run("a", "tc", "qdisc", "show", "dev", "eth0").stdout == theirs
            assert pcapstats_state(lab)["chains"] == []
        assert list(tmp_path.iterdir()) == []
        shown = pcapstats(lab, env, "netem", "eth0", "--show")
        assert "pcapstats: nothing set" in shown.stdout
        assert re.search(r"not pcapstats': qdisc tbf \w+: root rate 7Mbit", shown.stdout)
        # Capturing without an impairment touches nothing, and says what was there.
        run = pcapstats(lab, env, "capture", "-i", "eth0", "--duration", "0.3", "-o",
                        tmp_path / "plain.pcap")
        assert run.returncode == 0, run.stderr
        doc = load_sidecar(tmp_path / "plain.json")
        assert doc["impairment"] is None and doc["run"]["stopped_by"] == "duration"
        assert any(q.startswith("qdisc tbf") for q in doc["interface"]["qdiscs_before"])
        assert lab.run("a", "tc", "qdisc", "show", "dev", "eth0").stdout == theirs
    finally:
        lab.run("a", "tc", "qdisc", "del", "dev", "eth0", "root")
    assert_nothing_left(lab, env, state_dir, tmp_path)


@pytest.mark.parametrize("args, why", [
    (["-i", "nope0"], "no interface 'nope0'"),
    (["-i", "eth0", "--filter", "tcp port"], "tcpdump refuses the filter"),
    (["-i", "eth0", "--loss", "10"], "more than all"),
    (["-i", "eth0", "--duration", "2", "--", "true"], "a command and --duration"),
    (["-i", "eth0", "--queue", "100p", "--", "true"], "--queue is the rate limit's queue"),
])
def test_what_cannot_be_done_is_one_line_before_anything_is_touched(lab, env, state_dir,
                                                                     tmp_path, args, why):
    run = pcapstats(lab, env, "capture", "-o", tmp_path / "e.pcap", *args)
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("pcapstats: error: ") and why in line, line
    assert list(tmp_path.iterdir()) == []
    assert_nothing_left(lab, env, state_dir)


@pytest.mark.parametrize("args", [["capture", "-i", "lo", "-o", "n.pcap"],
                                  ["netem", "lo", "--show"]])
def test_not_root_is_one_line(monkeypatch, capsys, tmp_path, args):
    from pcapstats.cli import main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(args) == 2
    assert capsys.readouterr().err == f"pcapstats: error: pcapstats {args[0]} needs root " \
                                      "(tcpdump, tc, iptables). Run it with sudo\n"
    assert list(tmp_path.iterdir()) == []


def test_tcpdump_missing_is_one_line(monkeypatch, capsys, tmp_path):
    import shutil
    from pcapstats.cli import main
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "tcpdump"
                        else which(name, *a, **k))
    assert main(["capture", "-i", "lo", "-o", str(tmp_path / "m.pcap")]) == 2
    assert capsys.readouterr().err == "pcapstats: error: 'tcpdump' is not installed. Install " \
                                      "it: apt-get install tcpdump\n"
    assert list(tmp_path.iterdir()) == []


def test_without_a_command_or_duration_ctrl_c_is_the_normal_end(lab, env, state_dir, tmp_path):
    proc = start_pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "5%", "-o",
                           tmp_path / "o.pcap")
    deadline = time.monotonic() + 20
    while not (tmp_path / ".o.pcap.partial").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    lab.run("a", "ping", "-n", "-c", "3", "-i", "0.05", "10.77.0.2", check=False)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "pcapstats: note: capturing on eth0; Ctrl-C ends it" in stderr
    doc = load_sidecar(tmp_path / "o.json")
    assert doc["status"] == "complete" and doc["run"]["stopped_by"] == "SIGINT"
    assert doc["captures"][0]["packets_captured"] >= 1
    assert_nothing_left(lab, env, state_dir, tmp_path)


# -- netem ------------------------------------------------------------------------------------
def _ping_median_ms(lab) -> float:
    out = lab.run("a", "ping", "-n", "-c", "5", "-i", "0.05", "10.77.0.2").stdout
    return statistics.median(float(x) for x in re.findall(r"time=([\d.]+) ms", out))


def _delay_lines(tag: str) -> list[str]:
    return [c for c in tagged(tag) if "pcapstats.tools.delayline" in c]


def test_netem_set_show_replace_clear_from_later_processes(lab, env, state_dir, tmp_path):
    run = pcapstats(lab, env, "netem", "eth0", "--loss", "10%", "--delay", "10ms")
    assert run.returncode == 0, run.stderr
    assert "loss 10 % by" in run.stdout and "delay 10 ms by" in run.stdout
    # The command has returned: the delay line stands on its own.
    (first,) = _delay_lines(env[TAG_VAR])
    assert 10 <= _ping_median_ms(lab) < 16
    shown = pcapstats(lab, env, "netem", "eth0", "--show").stdout
    assert "pcapstats netem (set " in shown and "delay line: running" in shown, shown
    assert "not pcapstats'" not in shown

    run = pcapstats(lab, env, "netem", "eth0", "--delay", "20ms", "--rate", "10mbit")
    assert run.returncode == 0, run.stderr
    assert "replaced pcapstats' netem setting (loss 10 %, delay 10 ms)" in run.stdout
    (second,) = _delay_lines(env[TAG_VAR])
    assert second != first
    assert 20 <= _ping_median_ms(lab) < 26
    state = pcapstats_state(lab)
    assert ("tbf", "5053:") in state["qdiscs"] and not any("statistic" in c
                                                           for c in state["chains"])
    # A capture with an impairment does not fight a standing setting: one line, nothing changed.
    busy = pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "1%", "-o", tmp_path / "b",
                     "--", "true")
    assert busy.returncode == 2 and "standing `pcapstats netem` setting" in busy.stderr

    run = pcapstats(lab, env, "netem", "eth0", "--clear")
    assert run.returncode == 0 and "delay line" in run.stdout and "tbf 5053:" in run.stdout
    assert_nothing_left(lab, env, state_dir)
    assert _ping_median_ms(lab) < 2
    again = pcapstats(lab, env, "netem", "eth0", "--clear")
    assert again.returncode == 0 and again.stdout == "eth0: nothing set by pcapstats\n"


def test_netem_clears_what_a_killed_capture_left(lab, env, state_dir, tmp_path):
    proc = start_pcapstats(lab, env, "capture", "-i", "eth0", "--loss", "10%", "--delay", "5ms",
                           "-o", tmp_path / "k.pcap", *sender(0))
    partial = tmp_path / ".k.pcap.partial"
    deadline = time.monotonic() + 20
    while not partial.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # pcapstats and its command: no chance to undo
    proc.communicate(timeout=10)
    # tcpdump and the delay line end with it (the kernel signals them); the rules stay.
    deadline = time.monotonic() + 5
    while tagged(env[TAG_VAR]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged(env[TAG_VAR]) == []
    assert pcapstats_state(lab)["chains"]
    shown = pcapstats(lab, env, "netem", "eth0", "--show").stdout
    assert "pcapstats capture (pid" in shown and "left behind" in shown, shown
    assert "delay line: NOT running" in shown
    run = pcapstats(lab, env, "netem", "eth0", "--clear")
    assert run.returncode == 0, run.stderr
    partial.unlink()  # (`pcapstats lab cleanup DIR` removes it too)
    assert_nothing_left(lab, env, state_dir, tmp_path)
