"""A lab run leaves the host as it found it: after a normal end, a failure, Ctrl-C or SIGTERM in
any phase (setting up, measuring the RTT, the transfer, saving), beside another run, and (with
`pcapstats lab cleanup`, which leaves live runs alone) after being killed outright.

What "nothing left" means, checked each time:
- no network namespace of the run (``psl-<pid>-...``): its veths, qdiscs and iptables rules
  live only inside them and go with them;
- no process the run started: each test marks the run's environment with a unique tag that
  every child inherits (``ip netns exec`` keeps the environment), and /proc is searched for it;
- the host's own links, qdiscs and iptables rules are what they were before;
- no unfinished ``.*.partial`` file and no scratch directory of the run.

When the run was interrupted, the capture it was writing is kept and valid (tcpdump was
stopped properly and reported its count) and the sidecar says ``interrupted``; interrupted
before its capture started, it writes no file at all.  A phase is reached deterministically
through the run's test hook (PCAPSTATS_LAB_PAUSE_AT, see pcapstats.lab.run).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from importlib import import_module
from pathlib import Path

import pytest

import pcapstats
from pcapstats.lab import PREFIX, LabError, Scenario, load_sidecar, run
from pcapstats.lab import cleanup as lab_cleanup
from pcapstats.sidecar import sidecar_path
from tests.helpers.paths import CAPTURES
from tests.helpers.tshark_ref import tshark

pytestmark = pytest.mark.netns

TAG_VAR = "PCAPSTATS_LAB_TEST_TAG"
run_module = import_module("pcapstats.lab.run")  # the module; pcapstats.lab.run is the function


def _host_state() -> dict:
    def out(*argv):
        return subprocess.run(argv, capture_output=True, text=True).stdout
    return {"links": sorted(l.split(":")[1].strip().split("@")[0]
                            for l in out("ip", "-o", "link", "show").splitlines()),
            "qdiscs": out("tc", "qdisc", "show"),
            "iptables": out("iptables", "-S"), "ip6tables": out("ip6tables", "-S")}


def _tagged_processes(tag: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            if f"{TAG_VAR}={tag}".encode() in environ.split(b"\0"):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                found.append(f"{pid}: {cmd.decode(errors='replace')[:120]}")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def _namespaces(pid: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith(f"psl-{pid}-")]


def _scratch_dirs(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"{PREFIX}{pid}-*"))


def _assert_nothing_left(pid: int, tag: str, before: dict, out_dir: Path) -> None:
    deadline = time.monotonic() + 5  # a killed process may take a moment to be reaped
    while _tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tagged_processes(tag) == []
    assert _namespaces(pid) == []
    assert _host_state() == before
    assert list(out_dir.glob(".*.partial")) == []
    assert _scratch_dirs(pid) == []


@pytest.fixture
def tagged(monkeypatch):
    """A unique tag in this test's environment, inherited by every process a run starts."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG_VAR, tag)
    return tag


def _valid_capture(path: Path, packets: int) -> None:
    """The file reads to its end in tshark and pcapstats, with tcpdump's own packet count."""
    assert path.stat().st_size > 24
    assert len(tshark("-r", str(path), "-T", "fields", "-e", "frame.number").split()) == packets
    cap = pcapstats.read(path)
    assert len(cap) == packets and cap.warnings == []


def test_a_normal_run_leaves_nothing(tmp_path, tagged):
    before = _host_state()
    doc = run(Scenario(tool="tcp-file", bytes="1MB", delay="2ms", loss="1%", rate="20mbit",
                       snaplen=128, capture="both"), tmp_path / "x.pcap")
    assert doc["status"] == "complete" and doc["reports"][0]["summary"]["checksum_ok"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "x.json", "x.receiver.pcap", "x.sender.pcap"]
    _assert_nothing_left(os.getpid(), tagged, before, tmp_path)


def test_a_failing_tool_leaves_nothing_and_says_failed(tmp_path, tagged, monkeypatch):
    """The tool starts a process that would outlive it, then fails mid-run."""
    before = _host_state()

    def failing_tool(lab, snd, rcv, work, **kwargs):
        lab.popen(snd, "sleep", "60")  # would be left running if the lab forgot it
        lab.run(snd, "ping", "-c", "2", "-i", "0.1", lab.address(rcv))  # traffic on the wire
        lab.run(snd, "sh", "-c", "echo the tool broke >&2; exit 3")  # raises LabError

    monkeypatch.setattr(run_module.traffic, "start_file_transfer", failing_tool)
    with pytest.raises(LabError, match="the tool broke"):
        run(Scenario(tool="tcp-file", delay="2ms", snaplen=128), tmp_path / "f.pcap")
    doc = load_sidecar(tmp_path / "f.json")
    assert doc["status"] == "failed" and "the tool broke" in doc["error"]
    _valid_capture(tmp_path / "f.pcap", doc["captures"][0]["packets_captured"])
    _assert_nothing_left(os.getpid(), tagged, before, tmp_path)


def _start_cli_run(out: Path, tag: str) -> subprocess.Popen:
    """`pcapstats lab run` in its own session, as a terminal would run it; returns once its
    tcpdump has started (the unfinished capture file exists) and a second has gone by."""
    env = {**os.environ, TAG_VAR: tag}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pcapstats", "lab", "run", "--tool", "simpleperf", "-t", "20",
         "--rate", "10mbit", "--delay", "5ms", "--loss", "1%", "--snaplen", "128",
         "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)
    partial = out.with_name(f".{out.name}.partial")
    deadline = time.monotonic() + 30
    while not partial.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the run never started capturing: {proc.communicate()}")
        time.sleep(0.05)
    time.sleep(1.0)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_run_keeps_a_valid_capture_and_leaves_nothing(tmp_path, tagged, sig):
    before = _host_state()
    out = tmp_path / "x.pcap"
    proc = _start_cli_run(out, tagged)
    # Ctrl-C reaches the terminal's foreground process group: the run and nothing else (the
    # lab's programs have sessions of their own).  SIGTERM is sent to the run alone.
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapstats: error: interrupted"), stderr
    doc = load_sidecar(sidecar_path(out))
    assert doc["status"] == "interrupted"
    (cap,) = doc["captures"]
    assert cap["packets_captured"] > 100
    _valid_capture(out, cap["packets_captured"])
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)


def test_cleanup_removes_what_a_killed_run_left(tmp_path, tagged):
    before = _host_state()
    out = tmp_path / "k.pcap"
    proc = _start_cli_run(out, tagged)
    proc.kill()  # SIGKILL: no chance to undo anything
    proc.communicate(timeout=10)
    left = _namespaces(proc.pid)
    assert left, "a killed run should have left its namespaces"
    assert _tagged_processes(tagged), "and its tcpdump and simpleperf"
    assert list(tmp_path.glob(".*.partial")), "and its unfinished capture"
    assert not out.exists() and not sidecar_path(out).exists()  # nothing looks finished

    cleanup = _cleanup()  # without DIR: the namespaces, and a word about partial files
    for name in left:
        assert f"removed network namespace {name}" in cleanup.stdout
    assert "may remain in its output folder" in cleanup.stdout
    assert list(tmp_path.glob(".*.partial"))
    shown = _cleanup(tmp_path)  # with DIR: says what the partial capture is, leaves it
    assert f"found {tmp_path / '.k.pcap.partial'}: the unfinished capture k.pcap" in shown.stdout
    assert "whole packets" in shown.stdout and "--remove-partials" in shown.stdout
    assert list(tmp_path.glob(".*.partial"))
    removed = _cleanup(tmp_path, "--remove-partials")
    assert f"removed {tmp_path / '.k.pcap.partial'}" in removed.stdout
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)
    assert list(tmp_path.iterdir()) == []
    # a second cleanup finds nothing of ours (other runs' leftovers are not ours to judge)
    again = subprocess.run([sys.executable, "-m", "pcapstats", "lab", "cleanup", str(tmp_path)],
                           capture_output=True, text=True, timeout=60)
    assert f"psl-{proc.pid}-" not in again.stdout


# -- a run interrupted in every phase ------------------------------------------------------------

def _cleanup(*args) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pcapstats", "lab", "cleanup", *map(str, args)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def _lab_run(out: Path, tag: str, *args, pause_at: str | None = None,
             pause_s: float | None = None) -> subprocess.Popen:
    """`pcapstats lab run ... -o out` in its own session (as a terminal would run it), pausing
    at a stage if asked (the run's test hook)."""
    env = {**os.environ, TAG_VAR: tag}
    if pause_at:
        env[run_module.PAUSE_AT] = pause_at
        env[run_module.PAUSE_S] = str(pause_s or 60)
    return subprocess.Popen([sys.executable, "-m", "pcapstats", "lab", "run", *map(str, args),
                             "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def _wait_paused(proc: subprocess.Popen, stage: str) -> str:
    """Read the run's stderr until its test hook says it is pausing at stage; returns it."""
    seen, deadline = "", time.monotonic() + 30
    while "pausing" not in seen or f"at '{stage}" not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stderr], [], [], left)[0]:
            proc.kill()
            raise AssertionError(f"the run never paused at {stage!r}: {seen}")
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the run ended before {stage!r}: {seen}{proc.communicate()}")
        seen += line
    return seen


def _signal(proc: subprocess.Popen, sig: int) -> None:
    """Ctrl-C reaches the terminal's foreground group (the run alone: the lab's programs have
    sessions of their own); SIGTERM is sent to the run's process."""
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)


SETUP = ("--tool", "ping", "--ping-count", "3", "--ping-interval", "0.1", "--delay", "5ms",
         "--loss", "1%", "--rate", "10mbit", "--snaplen", "128")


@pytest.mark.parametrize("stage", ["applying the impairment", "measuring the RTT",
                                   "starting tcpdump"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_before_the_capture_leaves_nothing_at_all(tmp_path, tagged, stage, sig):
    """Setting up (the topology built, the impairment not yet applied), with the impairment
    applied (delay line, iptables rules, tbf) before the RTT ping, and just before tcpdump."""
    before = _host_state()
    proc = _lab_run(tmp_path / "x.pcap", tagged, *SETUP, pause_at=stage)
    said = _wait_paused(proc, stage)
    assert _namespaces(proc.pid), "the topology is up"
    _signal(proc, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, said + stderr
    assert stderr.strip().splitlines()[-1].startswith("pcapstats: error: interrupted"), stderr
    assert "kept" not in stderr
    assert list(tmp_path.iterdir()) == []  # no capture, no sidecar, no partial
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_saving_waits_for_the_files_then_ends_the_run(tmp_path, tagged, sig):
    """The traffic has ended; the signal arrives while the capture is being stopped and saved
    (signals are held there).  The files are written whole and say ``complete`` (the traffic
    was), and the run still ends as interrupted: 128 + the signal, one line saying so."""
    before = _host_state()
    out = tmp_path / "x.pcap"
    proc = _lab_run(out, tagged, *SETUP, pause_at="saving the capture", pause_s=2)
    _wait_paused(proc, "saving the capture")
    _signal(proc, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr
    assert stdout == ""  # no report of a normal end
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("pcapstats: error: interrupted") and \
        "after the run had ended" in last and "(status complete)" in last, stderr
    doc = load_sidecar(sidecar_path(out))
    assert doc["status"] == "complete" and doc["error"] is None
    assert doc["reports"][0]["summary"]["median_ms"]
    (cap,) = doc["captures"]
    # the sender's capture: the 3 requests ping sent and every reply it printed (1 % loss may
    # take one)
    (received,) = doc["reports"][0]["summary"]["received"]     # ping's own count, one run
    assert cap["packets_captured"] >= 3 + received >= 4
    _valid_capture(out, cap["packets_captured"])
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)


# -- runs side by side ---------------------------------------------------------------------------

def test_two_runs_at_once_both_complete_and_leave_nothing(tmp_path, tagged):
    before = _host_state()
    outs = [tmp_path / "a.pcap", tmp_path / "b.pcap"]
    procs = [_lab_run(out, tagged, "--tool", "simpleperf", "-t", "1", "--rate", "20mbit",
                      "--delay", "2ms", "--loss", "1%", "--snaplen", "128") for out in outs]
    for proc, out in zip(procs, outs):
        stdout, stderr = proc.communicate(timeout=90)
        assert proc.returncode == 0, stderr
        assert f"wrote {out.name} (" in stdout
        doc = load_sidecar(sidecar_path(out))
        assert doc["status"] == "complete" and doc["error"] is None
        (cap,) = doc["captures"]
        assert cap["packets_captured"] > 100 and cap["packets_dropped_by_kernel"] == 0
        _valid_capture(out, cap["packets_captured"])
        (flow,) = doc["flows"]
        assert flow["protocol_ok"] and flow["streams"] == {out.name: 0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.pcap", "b.json", "b.pcap"]
    for proc in procs:
        _assert_nothing_left(proc.pid, tagged, before, tmp_path)


def test_cleanup_leaves_a_live_run_alone(tmp_path, tagged):
    """`lab cleanup DIR --remove-partials` beside a run still capturing into DIR: it removes
    none of that run's namespaces, processes or files, and says nothing of it but that its
    capture is still being written; the run then ends normally."""
    before = _host_state()
    out = tmp_path / "live.pcap"
    proc = _lab_run(out, tagged, "--tool", "simpleperf", "-t", "3", "--rate", "10mbit",
                    "--delay", "2ms", "--snaplen", "128")
    partial = tmp_path / ".live.pcap.partial"
    deadline = time.monotonic() + 30
    while not partial.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)  # mid-transfer
    namespaces, processes = _namespaces(proc.pid), _tagged_processes(tagged)
    cleanup = _cleanup(tmp_path, "--remove-partials")
    assert proc.poll() is None, "the run was still going"
    assert f"psl-{proc.pid}-" not in cleanup.stdout + cleanup.stderr
    assert f"left {partial}: still being written (pid " in cleanup.stdout
    assert "removed" not in cleanup.stdout.replace("removed network namespace psl-", "")
    assert partial.exists()
    assert _namespaces(proc.pid) == namespaces
    assert set(processes) <= set(_tagged_processes(tagged))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    doc = load_sidecar(sidecar_path(out))
    assert doc["status"] == "complete"
    (cap,) = doc["captures"]
    assert cap["packets_captured"] > 100
    _valid_capture(out, cap["packets_captured"])
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)


# -- what a killed run left in its output folder ------------------------------------------------

def test_cleanup_keeps_a_killed_runs_capture_up_to_its_last_whole_packet(tmp_path, tagged):
    before = _host_state()
    out = tmp_path / "k.pcap"
    proc = _start_cli_run(out, tagged)
    proc.kill()  # SIGKILL: its tcpdump goes on writing until cleanup stops it
    proc.communicate(timeout=10)
    kept = _cleanup(tmp_path, "--keep-partials")
    found = [l for l in kept.stdout.splitlines() if l.startswith("found ")]
    assert len(found) == 1 and (f"the unfinished capture k.pcap (tcpdump of killed run "
                                f"{proc.pid} on sender:eth0, ") in found[0], kept.stdout
    assert "kept it as k.pcap, described in k.json" in kept.stdout
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.json", "k.pcap"]
    doc = load_sidecar(tmp_path / "k.json")
    assert doc["status"] == lab_cleanup.KILLED_STATUS and doc["error"].startswith(
        f"killed: run {proc.pid} ended without saving")
    assert doc["scenario"] is None and doc["flows"] == []
    (cap,) = doc["captures"]
    assert cap["file"] == "k.pcap" and cap["side"] == "sender" and cap["host"] == "sender"
    assert cap["interface"] == "eth0" and cap["snaplen"] == 128
    assert cap["format"] == "pcap" and cap["timestamps"] == "nano"
    assert cap["size_bytes"] == out.stat().st_size and cap["packets_captured"] > 100
    assert f"{cap['packets_captured']} whole packets" in found[0]
    _valid_capture(out, cap["packets_captured"])  # cut after the last whole packet: no warning


def test_keeping_partials_cuts_them_names_them_and_shares_a_runs_sidecar(tmp_path):
    """Without a lab: pieces of a real capture as a killed `--capture both` run and a killed
    pcapng run would leave them (tcpdump's raw pcap, before editcap), and a sidecar half
    written."""
    whole = (CAPTURES / "chain-3hops.pcap").read_bytes()
    cap = pcapstats.read(CAPTURES / "chain-3hops.pcap")
    cut = 3000  # inside a record
    (tmp_path / ".b.sender.pcap.partial").write_bytes(whole[:cut])
    (tmp_path / ".b.receiver.pcap.partial").write_bytes(whole)
    (tmp_path / ".n.pcapng.partial.tmp.pcap").write_bytes(whole[:cut])
    (tmp_path / ".o.json.partial").write_text("{")
    shutil.copy(CAPTURES / "chain-3hops.pcap", tmp_path / "o.pcap")
    (tmp_path / ".o.pcap.partial").write_bytes(whole[:cut])  # o.pcap exists: not overwritten
    partials = [lab_cleanup.inspect_partial(p) for p in lab_cleanup.find_partials([tmp_path])]
    assert [p.writers for p in partials] == [[]] * 5
    short = next(p for p in partials if p.path.name == ".b.sender.pcap.partial")
    assert short.packets < len(cap) and short.whole_bytes < cut and short.size_bytes == cut
    done = dict((p.path.name, text) for p, text in lab_cleanup.keep_partials(partials))
    assert done == {".b.receiver.pcap.partial": "kept it as b.receiver.pcap, described in b.json",
                    ".b.sender.pcap.partial": "kept it as b.sender.pcap, described in b.json",
                    ".n.pcapng.partial.tmp.pcap": "kept it as n.pcapng, described in n.json",
                    ".o.json.partial": "left it: not a capture",
                    ".o.pcap.partial": "left it: o.pcap exists"}
    doc = load_sidecar(tmp_path / "b.json")
    assert doc["status"] == lab_cleanup.KILLED_STATUS and doc["error"].startswith("killed")
    assert [(c["file"], c["side"], c["packets_captured"]) for c in doc["captures"]] == [
        ("b.receiver.pcap", "receiver", len(cap)), ("b.sender.pcap", "sender", short.packets)]
    assert (tmp_path / "b.receiver.pcap").read_bytes() == whole
    assert (tmp_path / "b.sender.pcap").read_bytes() == whole[:short.whole_bytes]
    _valid_capture(tmp_path / "b.sender.pcap", short.packets)
    _valid_capture(tmp_path / "n.pcapng", short.packets)
    assert load_sidecar(tmp_path / "n.json")["captures"][0]["format"] == "pcapng"
    assert sorted(p.name for p in tmp_path.glob(".*")) == [".o.json.partial", ".o.pcap.partial"]


TOPOLOGY = """\
routers = ["r1", "r2"]
[hosts]
a = "r1"
b = "r2"
[[link]]
ends = ["r1", "r2"]
rate = "10mbit"
delay = ["5ms", "3ms"]
loss = ["1%", "0"]
[run]
capture = ["a", "r1:r2"]
snaplen = 128
[[pair]]
from = "a"
to = "b"
tool = "simpleperf"
duration_s = 20
ping_during = true
"""


def test_ctrl_c_mid_topology_run_keeps_its_captures_and_leaves_nothing(tmp_path, tagged):
    """issue 28: a topology file's run, its links' impairments on two routers (chains, queues
    and delay lines of their own), undone on Ctrl-C as a lab run's are."""
    before = _host_state()
    spec = tmp_path / "net.toml"
    spec.write_text(TOPOLOGY)
    out = tmp_path / "t.pcap"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pcapstats", "lab", "run", "--topology", str(spec), "-o",
         str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, TAG_VAR: tagged}, start_new_session=True)
    partial = tmp_path / ".t.a.pcap.partial"
    deadline = time.monotonic() + 60
    while not partial.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the run never started capturing: {proc.communicate()}")
        time.sleep(0.05)
    time.sleep(3.0)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapstats: error: interrupted"), stderr
    doc = load_sidecar(tmp_path / "t.json")
    assert doc["status"] == "interrupted"
    # the measuring pings' captures (finished before the traffic) and the traffic's, all kept
    phases = {c["file"]: c["phase"] for c in doc["captures"]}
    assert phases == {"t.measure-a.pcap": "measure", "t.measure-r1-r2.pcap": "measure",
                      "t.a.pcap": "traffic", "t.r1-r2.pcap": "traffic"}, phases
    for cap in doc["captures"]:
        assert cap["packets_captured"] > (100 if cap["phase"] == "traffic" else 0)
        _valid_capture(tmp_path / cap["file"], cap["packets_captured"])
    (link,) = [link for link in doc["links"] if link["name"] == "r1-r2"]
    assert [d["router"] for d in link["directions"]] == ["r1", "r2"]
    assert all(d["counters"] for d in link["directions"])
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)
