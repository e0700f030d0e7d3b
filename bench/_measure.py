"""Running one command as a whole process and measuring it: what several bench scripts share.

``timed`` runs a command under GNU time (wall, CPU and the largest resident size of any one
process of its tree) and, when asked, samples the memory of its whole process tree from
/proc (a command with worker processes has no single process whose peak says what it used).
``load_average`` and ``OtherWork`` say how busy the machine was meanwhile; ``Refused`` and
``need_tools`` are how a bench script says, in one line, that it cannot run.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

GNU_TIME = "/usr/bin/time"  # Debian package "time"
SAMPLE_S = 0.01             # the tree sampler's period: /proc/PID/status costs ~20 us a read


# -- refusing to run ---------------------------------------------------------------------------

class Refused(SystemExit):
    """One clear line and exit 1 (a tool or a file missing), named after the script run."""

    def __init__(self, msg: str):
        super().__init__(f"{Path(sys.argv[0]).stem}: error: {msg}")


def need_tools(tools, why: str) -> None:
    """Refuse unless every tool (a name on PATH, or an absolute path) is there."""
    for tool in tools:
        if not (Path(tool).exists() if tool.startswith("/") else shutil.which(tool)):
            package = {"ip": "iproute2", "tc": "iproute2", "ping": "iputils-ping",
                       GNU_TIME: "time", "tshark": "tshark", "editcap": "wireshark-common",
                       "mergecap": "wireshark-common", "capinfos": "wireshark-common"
                       }.get(tool, tool)
            raise Refused(f"{why} needs {tool}, which is not installed "
                          f"(apt-get install {package})")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: numbers taken beside other work must say so."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class OtherWork:
    """How many cores everything but this script, its children and the process trees in
    ``ours`` (a cluster it started and still runs) kept busy since it was made.

    The load average counts the bench's own runs too; this takes the machine's busy CPU time
    (/proc/stat: user, nice, system, irq, softirq) less this process's and its waited-for
    children's (getrusage) and ``ours``' (/proc/PID/stat), over the wall time: another job's
    share, which a table measured beside it must state."""

    def __init__(self, ours=()):
        self.ours = tuple(ours)
        self.start = self._now()

    def _now(self) -> tuple[float, float, float]:
        cpu = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq = cpu[:7]
        busy = (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
        mine = sum(getattr(resource.getrusage(who), f) for f in ("ru_utime", "ru_stime")
                   for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return time.monotonic(), busy, mine + sum(tree_cpu_s(pid) for pid in self.ours)

    def cores(self) -> float:
        """Other processes' average number of busy cores since this was made."""
        (t0, busy0, ours0), (t1, busy1, ours1) = self.start, self._now()
        return max(0.0, (busy1 - busy0) - (ours1 - ours0)) / max(t1 - t0, 1e-9)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds a live process tree has used: each member's user and system time and its
    reaped children's (/proc/PID/stat fields 14-17)."""
    ticks = 0
    for member in tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


# -- a process tree's memory -------------------------------------------------------------------

def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (GNU time's child, a pool's workers, tshark's dumpcap)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def status_kb(pid: int, keys) -> dict[str, int]:
    """The ``keys`` (VmRSS, RssAnon, RssFile, ...) of /proc/PID/status in kB; {} once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    found = (re.search(rf"^{key}:\s+(\d+) kB", text, re.M) for key in keys)
    return {key: int(m.group(1)) for key, m in zip(keys, found) if m}


class TreeSampler:
    """Peaks of /proc/PID/status fields over the descendants of ``root`` (not ``root`` itself:
    GNU time), read every ``every`` s in a thread: per field, the largest any one process
    reached (``max_kb``) and the largest sum over the processes alive at one sample
    (``sum_kb``). A peak shorter than the period can be missed; the sum counts pages that
    processes share (a forked worker's copy-on-write pages, a file both map) once per process."""

    def __init__(self, root: int, keys=("VmRSS",), every: float = SAMPLE_S):
        self.root, self.keys, self.every = root, tuple(keys), every
        self.max_kb = dict.fromkeys(self.keys, 0)
        self.sum_kb = dict.fromkeys(self.keys, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            members = [status_kb(pid, self.keys) for pid in tree(self.root)[1:]]
            for key in self.keys:
                values = [m.get(key, 0) for m in members]
                self.max_kb[key] = max(self.max_kb[key], *values, 0)
                self.sum_kb[key] = max(self.sum_kb[key], sum(values))
            self._stop.wait(self.every)


# -- one measured run --------------------------------------------------------------------------

@dataclass
class Run:
    """One whole-process run: GNU time's figures, what it printed, and the sampled peaks."""

    wall_s: float
    cpu_s: float            # user + system of the process and every child it waited for
    rss_kb: int             # GNU time's %M: the largest peak RSS of any one process of the tree
    stdout: str
    stderr: str = ""
    returncode: int = 0
    max_kb: dict = field(default_factory=dict)   # TreeSampler's, when sampled
    sum_kb: dict = field(default_factory=dict)

    @property
    def rss_mb(self) -> float:
        return self.rss_kb * 1024 / 1e6

    def error_line(self) -> str:
        """What the command said went wrong: its last 'error' line, else its last line."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()
                 and not ln.startswith("Command exited with non-zero status")]
        named = [ln for ln in lines if "error" in ln.lower()]
        return (named or lines or [f"exit {self.returncode}"])[-1][:200]


def timed(cmd: list[str], *, keep_stdout: bool = True, sample=(), every: float = SAMPLE_S,
          cwd: str | Path | None = None, env: dict | None = None) -> Run:
    """Run ``cmd`` once under GNU time, whatever its exit status; ``sample``: the
    /proc/PID/status fields whose tree peaks to record (none: no sampler thread).

    Peak RSS comes from GNU time, not from our own wait4: Linux carries the RSS high-water
    mark of the forking process over exec, so a child forked straight from this (large)
    Python process would report at least our size. stdout goes to a temporary file (read
    back afterwards) or, if not kept, to /dev/null.
    """
    with tempfile.TemporaryFile("w+", errors="replace") as out, \
            tempfile.NamedTemporaryFile("r") as rusage:
        t0 = time.perf_counter()
        proc = subprocess.Popen([GNU_TIME, "-f", "%U %S %M", "-o", rusage.name, *cmd],
                                stdout=out if keep_stdout else subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                cwd=cwd, env=env)
        if sample:
            with TreeSampler(proc.pid, sample, every) as sampler:
                _, err = proc.communicate()
            peaks = sampler.max_kb, sampler.sum_kb
        else:
            _, err = proc.communicate()
            peaks = {}, {}
        wall = time.perf_counter() - t0
        user, system, rss_kb = rusage.read().split()[-3:]
        out.seek(0)
        return Run(wall, float(user) + float(system), int(rss_kb), out.read(), err,
                   proc.returncode, *peaks)
