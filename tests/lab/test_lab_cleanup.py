"""A lab run leaves the host as it found it: after a normal end, a failure, Ctrl-C, SIGTERM,
and (with `pcapstats lab cleanup`) after being killed outright.

What "nothing left" means, checked each time:
- no network namespace of the run (``psl-<pid>-...``): its veths, qdiscs and iptables rules
  live only inside them and go with them;
- no process the run started: each test marks the run's environment with a unique tag that
  every child inherits (``ip netns exec`` keeps the environment), and /proc is searched for it;
- the host's own links, qdiscs and iptables rules are what they were before;
- no unfinished ``.*.partial`` file and no scratch directory of the run.

When the run was interrupted, the capture it was writing is kept and valid (tcpdump was
stopped properly and reported its count) and the sidecar says ``interrupted``.
"""

from __future__ import annotations

import os
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
from pcapstats.sidecar import sidecar_path
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

    cleanup = subprocess.run([sys.executable, "-m", "pcapstats", "lab", "cleanup",
                              str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert cleanup.returncode == 0, cleanup.stderr
    for name in left:
        assert f"removed network namespace {name}" in cleanup.stdout
    assert ".k.pcap.partial" in cleanup.stdout
    _assert_nothing_left(proc.pid, tagged, before, tmp_path)
    # a second cleanup finds nothing of ours (other runs' leftovers are not ours to judge)
    again = subprocess.run([sys.executable, "-m", "pcapstats", "lab", "cleanup", str(tmp_path)],
                           capture_output=True, text=True, timeout=60)
    assert f"psl-{proc.pid}-" not in again.stdout
