"""What pcapstats added on a host's interface, written down so that any later process can show
it and take it away -- and nothing else.

The state record.  ``$PCAPSTATS_STATE_DIR`` (default ``/run/pcapstats``, gone at boot like
the rules it describes) / ``net-<inode of the network namespace>`` / ``IFACE.json``: the
owner (``netem`` or ``capture``, pid and start time), what was asked, the mechanisms, the
qdisc handle and kind (and its tbf child's under a netem), the chain, the NFQUEUE number, the
delay line's pid and start time, the commands.  It is written before the first change, so a
process killed half-way leaves a record that ``pcapstats netem IFACE --clear`` removes (the
next capture or setting on that interface removes a killed capture's too).  Removal
(:func:`remove_record`) checks each item is still the one recorded (the root qdisc's handle and
kind, the delay line's start time and command line) and leaves alone what has changed hands.
One pcapstats at a time changes impairments: :func:`locked`.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pcapstats.lab.commands import LabError, checked
from pcapstats.lab.impair.mechanisms import RATE_CHILD_PARENT

STATE_DIR_ENV = "PCAPSTATS_STATE_DIR"
DEFAULT_STATE_DIR = "/run/pcapstats"
TABLE, HOOK = "mangle", "POSTROUTING"   # where a host's chain is jumped to from


# -- processes ------------------------------------------------------------------------------------
def process_start(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22); None if it is
    gone or a zombie.  With the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def die_with_parent(sig: int):
    """A ``preexec_fn`` that has the kernel send ``sig`` to the child when its parent dies
    (PR_SET_PDEATHSIG): a capture killed outright leaves no tcpdump or delay line behind."""
    def preexec() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
    return preexec


def same_process(pid: int | None, start: int | None) -> bool:
    return pid is not None and start is not None and process_start(pid) == start


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def netns_inode() -> int:
    """This process's network namespace, as the inode of /proc/self/ns/net."""
    return os.stat("/proc/self/ns/net").st_ino


# -- the record -----------------------------------------------------------------------------------
def state_root() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


def state_dir() -> Path:
    return state_root() / f"net-{netns_inode()}"


def record_path(iface: str) -> Path:
    return state_dir() / f"{iface}.json"


_lock_depth = 0


@contextlib.contextmanager
def locked():
    """One pcapstats at a time changes impairments (any interface, any namespace): an flock
    on the state directory.  Re-entrant within a process."""
    global _lock_depth
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    root = state_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o755)
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _lock_depth = 1
        yield
    finally:
        _lock_depth = 0
        os.close(fd)


@dataclass
class Record:
    """What pcapstats added on one interface (the state file's content)."""
    owner: str                     # "netem" (standing) or "capture" (while one runs)
    pid: int                       # the process that set it
    pid_start: int | None
    interface: str
    ifindex: int
    netns: int
    created_ns: int
    asked: dict
    mechanisms: dict = field(default_factory=dict)
    qdisc: dict | None = None      # {"handle": "5053:", "kind": "tbf" | "netem"}
    chain: str | None = None       # in TABLE, jumped to from HOOK -o interface
    families: list = field(default_factory=list)   # iptables tools the chain is in
    queue: int | None = None       # NFQUEUE number of the delay line
    delay_line: dict | None = None  # pid, start, argv, stats, stdout, stderr files
    settings: dict = field(default_factory=dict)
    commands: list = field(default_factory=list)

    @property
    def owner_alive(self) -> bool:
        return same_process(self.pid, self.pid_start)

    def save(self) -> None:
        path = record_path(self.interface)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        tmp = path.with_name(f".{path.name}.partial")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=1) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, iface: str) -> "Record | None":
        """The record for iface in this namespace; None if there is none (or it is of another
        interface that had this name and index before: then it is dropped)."""
        path = record_path(iface)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as e:
            raise LabError(f"cannot read pcapstats' state record: {e}", path=str(path),
                           hint="remove it by hand once you have checked the interface") from None
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def forget(self) -> None:
        for path in (record_path(self.interface), *self._files()):
            with contextlib.suppress(FileNotFoundError):
                Path(path).unlink()
        with contextlib.suppress(OSError):
            state_dir().rmdir()  # only when empty

    def _files(self) -> list[str]:
        d = self.delay_line or {}
        return [d[k] for k in ("stats", "stdout", "stderr") if d.get(k)] + \
            ([d["stats"] + ".tmp"] if d.get("stats") else [])

    def describe(self) -> str:
        """"loss 10 %, delay 20 ms, rate 10 Mbit/s" as asked."""
        return describe_asked(self.asked)


def describe_asked(asked: dict) -> str:
    parts = []
    if asked.get("loss"):
        parts.append(f"loss {asked['loss'] * 100:g} %")
    if asked.get("delay_s"):
        parts.append(f"delay {asked['delay_s'] * 1e3:g} ms")
    if asked.get("jitter_s"):
        parts.append(f"jitter {asked['jitter_s'] * 1e3:g} ms")
    if asked.get("rate_bps"):
        parts.append(f"rate {asked['rate_bps'] / 1e6:g} Mbit/s")
    if asked.get("queue_bytes"):
        parts.append(f"queue {asked['queue_bytes']} bytes")
    return ", ".join(parts) or "nothing"


def read_json(d: dict | None, key: str) -> dict | None:
    if not d or not d.get(key):
        return None
    try:
        return json.loads(Path(d[key]).read_text())
    except (OSError, json.JSONDecodeError):
        return None


# -- what is on the interface ---------------------------------------------------------------------
def current_qdiscs(iface: str, *, stats: bool = False) -> list[dict]:
    """The interface's qdiscs as ``tc [-s] -j qdisc show dev IFACE`` gives them; none when tc
    cannot say (the interface is gone)."""
    proc = checked(["tc", *(["-s"] if stats else []), "-j", "qdisc", "show", "dev", iface],
                   check=False)
    return json.loads(proc.stdout or "[]") if proc.returncode == 0 else []


def is_ours(q: dict, ours: dict | None) -> bool:
    """Is q the root qdisc a record names (``{"handle", "kind", "child"?}``), or its child?"""
    if not ours:
        return False
    if q.get("root"):
        return q.get("handle") == ours.get("handle") and q.get("kind") == ours.get("kind")
    child = ours.get("child")
    return bool(child) and q.get("parent") == RATE_CHILD_PARENT \
        and q.get("handle") == child["handle"] and q.get("kind") == child["kind"]


def iptables_tools() -> list[str]:
    return [t for t in ("iptables", "ip6tables") if shutil.which(t)]


def chain_exists(tool: str, chain: str) -> bool:
    return checked([tool, "-w", "-t", TABLE, "-S", chain], check=False).returncode == 0


def jumps(tool: str, chain: str) -> list[str]:
    text = checked([tool, "-w", "-t", TABLE, "-S", HOOK, "-v"], check=False).stdout
    return [line for line in text.splitlines()
            if line.startswith(f"-A {HOOK} ") and line.endswith(f"-j {chain}")]


# -- removal (from a record alone: any process can do it) -----------------------------------------
def remove_record(record: Record, *, proc: subprocess.Popen | None = None
                  ) -> tuple[list[str], dict | None]:
    """Undo what the record says, rules first, then the qdisc, then the delay line (which
    releases what it holds); forget the record.  Returns one line per item, saying what was
    done (items that changed hands since are left alone, and said so), and the delay line's
    final stats (None without one)."""
    done = []
    if record.chain:
        gone = True
        for tool in record.families or iptables_tools():
            for line in jumps(tool, record.chain):
                spec = shlex.split(line)[1:]
                spec = _without_counters(spec)
                checked([tool, "-w", "-t", TABLE, "-D", *spec], check=False)
            if chain_exists(tool, record.chain):
                gone = False
                checked([tool, "-w", "-t", TABLE, "-F", record.chain], check=False)
                checked([tool, "-w", "-t", TABLE, "-X", record.chain], check=False)
        done.append(f"iptables chain {record.chain} ({TABLE} {HOOK} -o {record.interface})"
                    + (" was already gone" if gone else " removed"))
    if record.qdisc:
        root = next((q for q in current_qdiscs(record.interface) if q.get("root")), None)
        if root and is_ours(root, record.qdisc):
            checked(["tc", "qdisc", "del", "dev", record.interface, "root"], check=False)
            child = record.qdisc.get("child")
            with_child = f" with its {child['kind']} {child['handle']}" if child else ""
            done.append(f"qdisc {root['kind']} {root['handle']} removed{with_child} (the "
                        "kernel's default is back)")
        elif root and not (root.get("handle") == "0:"):
            done.append(f"root qdisc {root.get('kind')} {root.get('handle')} left alone: "
                        f"not the {record.qdisc['kind']} {record.qdisc['handle']} pcapstats set")
        else:
            done.append(f"qdisc {record.qdisc['kind']} {record.qdisc['handle']} was already gone")
    stats = None
    if record.delay_line and record.delay_line.get("pid"):
        done.append(_stop_delay_line(record, proc))
        stats = read_json(record.delay_line, "stats")
    record.forget()
    return done, stats


def _without_counters(spec: list[str]) -> list[str]:
    out, skip = [], 0
    for k, word in enumerate(spec):
        if skip:
            skip -= 1
            continue
        if word == "-c" and k + 2 < len(spec) and spec[k + 1].isdigit():
            skip = 2
            continue
        out.append(word)
    return out


def _stop_delay_line(record: Record, proc: subprocess.Popen | None) -> str:
    d = record.delay_line
    pid, start = d["pid"], d.get("start")
    if not same_process(pid, start) or "pcapstats.tools.delayline" not in _cmdline(pid):
        if proc is not None:
            proc.poll()
        return f"delay line (pid {pid}) had already exited"
    wait_s = (record.asked.get("delay_s") or 0) + (record.asked.get("jitter_s") or 0) + 5
    os.kill(pid, signal.SIGTERM)  # it releases what it holds, on schedule, then exits
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        if proc is None and not same_process(pid, start):
            break
        time.sleep(0.02)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if proc is not None:
            proc.wait(5)
        return f"delay line (pid {pid}) killed: it did not exit within {wait_s:g} s"
    return f"delay line (pid {pid}, NFQUEUE {record.queue}) stopped"
