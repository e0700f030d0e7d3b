"""Leaving the host as it was: every exit path closes every open lab, and what a killed run
left behind can be found and removed.

- every namespace a lab makes is named ``<run prefix>-<host>``, the run prefix being
  ``psl-<pid>-<n>``, so a leftover from a killed run is recognisable and
  :func:`cleanup_leftovers` removes it (only runs whose process has ended, by default);
- an open lab is registered: ``atexit`` and SIGTERM / SIGHUP (when nobody else handles them:
  the handler closes every open lab, then lets the signal kill the process as it would have)
  close it.  SIGINT already unwinds as KeyboardInterrupt;
- :class:`SignalsBlocked` keeps a second Ctrl-C from cutting an undo short;
- a killed run also leaves its unfinished capture (``.NAME.pcap.partial``) in its output
  folder: :func:`find_partials` finds those no live process holds open (a live run keeps its
  own open, see :mod:`pcapstats.lab.run`), :func:`inspect_partial` says what each holds,
  :func:`keep_partials` finishes them (cut after the last whole packet, renamed, a sidecar
  saying the run was killed).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pcapstats import sidecar
from pcapstats.errors import PcapstatsError, TruncatedCaptureWarning
from pcapstats.lab.commands import LabError, checked, ip, require_tools
from pcapstats.lab.sidecar import write_sidecar
from pcapstats.reader import read

if TYPE_CHECKING:
    from pcapstats.lab.netns import Lab

PREFIX = "psl-"
_RUN_RE = re.compile(r"^psl-(\d+)-\d+-")


def list_netns() -> list[str]:
    """Names of all network namespaces known to `ip netns`."""
    out = ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def kill_netns_processes(netns: str) -> None:
    """SIGKILL whatever still runs inside netns (only ever our lab's namespaces)."""
    for _ in range(50):
        pids = [int(p) for p in ip("netns", "pids", netns, check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise LabError(f"processes in namespace {netns} survive SIGKILL")


def delete_netns(netns: str) -> None:
    kill_netns_processes(netns)
    ip("netns", "delete", netns, check=False)


def pid_alive(pid: int) -> bool:
    """The process runs (a zombie, killed but not yet waited for by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
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
            delete_netns(netns)
            removed.append(netns)
    for path in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*")):
        if path.is_dir() and dead(path.name):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


# -- unfinished files a killed run left in its output folder ------------------------------------
# The status of a kept partial capture's sidecar: pcapstats.sidecar.STATUSES has no "killed", so
# it is "failed" with an error line that starts "killed".
KILLED_STATUS = "failed"


@dataclass
class Partial:
    """An unfinished file (``.NAME.partial``, or tcpdump's ``.NAME.pcapng.partial.tmp.pcap``)."""
    path: Path
    writers: list[int] = field(default_factory=list)  # live processes holding it: in use
    run_pid: int | None = None         # the killed run whose tcpdump was still writing it,
    host: str | None = None            # its host,
    tcpdump: list[str] | None = None   # and its command line
    size_bytes: int = 0
    packets: int | None = None         # whole packets in it (None: not a readable capture)
    whole_bytes: int | None = None     # its length up to the end of the last whole packet
    problem: str | None = None         # why it cannot be read

    @property
    def final(self) -> Path | None:
        """The capture file this was to become (None: not a capture, e.g. a sidecar)."""
        name = self.path.name
        for tail in (".partial.tmp.pcap", ".partial"):
            if name.startswith(".") and name.endswith(tail):
                final = self.path.with_name(name[1:-len(tail)])
                return final if final.suffix in sidecar.CAPTURE_SUFFIXES else None
        return None

    def option(self, flag: str) -> str | None:
        """The value after ``flag`` in the tcpdump command line, if known."""
        argv = self.tcpdump or []
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def find_partials(directories) -> list[Partial]:
    """The unfinished files in these folders, with who holds each open.

    Call it before :func:`cleanup_leftovers`: a killed run's tcpdump, still writing in the
    run's namespace, then says which run, host and interface the file is from.  Any other
    process holding the file open is a live run (or ``pcapstats capture``) still writing it.
    """
    paths = sorted({p for d in directories for pattern in (".*.partial", ".*.partial.tmp.pcap")
                    for p in Path(d).glob(pattern) if p.is_file()})
    found = [Partial(p, size_bytes=p.stat().st_size) for p in paths]
    if not found:
        return found
    dead_runs = {}  # pid of a process in a dead run's namespace -> that namespace
    for netns in list_netns():
        match = _RUN_RE.match(netns)
        if match and not pid_alive(int(match.group(1))):
            for pid in ip("netns", "pids", netns, check=False).stdout.split():
                dead_runs[int(pid)] = netns
    for partial, pids in zip(found, _holders([p.path for p in found])):
        for pid in pids:
            netns = dead_runs.get(pid)
            if netns is None:
                partial.writers.append(pid)
                continue
            match = _RUN_RE.match(netns)
            partial.run_pid, partial.host = int(match.group(1)), netns[match.end():]
            with contextlib.suppress(OSError):
                partial.tcpdump = Path(f"/proc/{pid}/cmdline").read_bytes().decode(
                    errors="replace").split("\0")[:-1]
    return found


def _holders(paths: list[Path]) -> list[list[int]]:
    """For each file, the processes (not this one) with it open."""
    wanted = {}
    for k, path in enumerate(paths):
        st = path.stat()
        wanted[(st.st_dev, st.st_ino)] = k
    names = {p.name for p in paths}
    out: list[list[int]] = [[] for _ in paths]
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry.name}/fd"):
                link = f"/proc/{entry.name}/fd/{fd}"
                with contextlib.suppress(OSError):
                    if Path(os.readlink(link).removesuffix(" (deleted)")).name in names:
                        st = os.stat(link)
                        k = wanted.get((st.st_dev, st.st_ino))
                        if k is not None and int(entry.name) not in out[k]:
                            out[k].append(int(entry.name))
    return out


def inspect_partial(partial: Partial) -> Partial:
    """Fill in what an unfinished capture holds: its whole packets and where the last ends."""
    partial.size_bytes = partial.path.stat().st_size
    if partial.final is None:
        return partial
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cap = read(partial.path)
        except PcapstatsError as e:
            partial.problem = str(e)
            return partial
    partial.packets = len(cap)
    cut = [w.message for w in caught if isinstance(w.message, TruncatedCaptureWarning)]
    partial.whole_bytes = cut[0].offset if cut and cut[0].offset is not None \
        else partial.size_bytes
    return partial


def keep_partials(partials: list[Partial]) -> list[tuple[Partial, str]]:
    """Finish each readable unfinished capture of a killed run: cut after its last whole packet,
    named as the run would have named it, with a sidecar (status :data:`KILLED_STATUS`, an error
    line starting "killed") listing what is known.  The captures of one run (``--capture both``)
    share a sidecar.  Returns (partial, what was done or why not) for every one given."""
    done: list[tuple[Partial, str]] = []
    runs: dict[Path, list[Partial]] = {}
    for p in partials:
        if p.final is None or p.packets is None:
            done.append((p, f"left it: {p.problem or 'not a capture'}"))
        else:
            runs.setdefault(sidecar.sidecar_for(p.final), []).append(p)
    for side_path, group in runs.items():
        there = [f for f in [side_path, *(p.final for p in group)] if f.exists()]
        if there or len({p.final for p in group}) < len(group):
            why = f"{there[0].name} exists" if there else "two unfinished files for one capture"
            done += [(p, f"left it: {why}") for p in group]
            continue
        entries = [_finish_partial(p) for p in group]
        pids = sorted({p.run_pid for p in group if p.run_pid})
        who = f"run {', '.join(map(str, pids))}" if pids else "the run"
        write_sidecar(side_path, {
            "schema": sidecar.SCHEMA, "status": KILLED_STATUS,
            "error": f"killed: {who} ended without saving its capture (SIGKILL, a crash or a "
                     "power cut); `pcapstats lab cleanup --keep-partials` kept the whole "
                     "packets tcpdump had written (packets_captured counts them; tcpdump's "
                     "own report was never made)",
            "command": None, "started_ns": None, "finished_ns": None, "scenario": None,
            "tools": None, "topology": None, "impairment": None, "hops": None, "rtt": None,
            "captures": entries, "flows": [], "reports": [], "measured": None})
        done += [(p, f"kept it as {p.final.name}, described in {side_path.name}")
                 for p in group]
    return done


def _finish_partial(p: Partial) -> dict:
    final, fmt = p.final, p.final.suffix[1:]
    os.truncate(p.path, p.whole_bytes)
    if p.path.name.endswith(".tmp.pcap"):  # tcpdump's pcap, to be pcapng as the run would have
        checked(["editcap", "-F", "pcapng", str(p.path), str(final)])
        p.path.unlink()
    else:
        os.replace(p.path, final)
    with open(final, "rb") as f:
        magic = f.read(4)
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") or \
        p.option("--time-stamp-precision") == "nano"
    side = final.stem.rpartition(".")[2]
    snaplen = p.option("-s")
    return {"file": final.name,
            "side": side if side in sidecar.SIDES else p.host if p.host in sidecar.SIDES
            else None,
            "host": p.host, "interface": p.option("-i"),
            "snaplen": int(snaplen) if snaplen and snaplen.isdigit() else None,
            "format": fmt, "timestamps": "nano" if nano else "micro" if fmt == "pcap" else None,
            "packets_captured": p.packets, "packets_received_by_filter": None,
            "packets_dropped_by_kernel": None, "packets_dropped_by_interface": None,
            "size_bytes": final.stat().st_size}


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


def register(lab: "Lab") -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_close_all)
        _atexit_registered = True
    if not _open_labs and threading.current_thread() is threading.main_thread():
        for sig in _EXIT_SIGNALS:
            if _handler(sig) == signal.SIG_DFL:  # never override someone's handler
                _saved_handlers[sig] = _handler(sig)
                _set_handler(sig, _on_exit_signal)
    _open_labs.append(lab)


def unregister(lab: "Lab") -> None:
    if lab in _open_labs:
        _open_labs.remove(lab)
    if not _open_labs and threading.current_thread() is threading.main_thread():
        for sig, old in list(_saved_handlers.items()):
            if _handler(sig) is _on_exit_signal:
                _set_handler(sig, old)
            del _saved_handlers[sig]


class RunInterrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived during a run: unwinds like Ctrl-C; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def signals_unwind():
    """In the main thread, SIGTERM/SIGHUP raise RunInterrupted (unless someone handles them), so
    a run or a live capture unwinds through its finally blocks as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = {}

    def interrupt(signum, frame):
        raise RunInterrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            taken[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, old in taken.items():
            signal.signal(sig, old)


class SignalsBlocked:
    """Hold Ctrl-C, SIGTERM and SIGHUP while the lab is being undone (or a run saved), so that
    a signal cannot cut it short; one that arrives meanwhile is delivered when the block ends.

    In the main thread this swaps in Python handlers that note the signal, and raises it again
    on exit under the handlers restored.  Not the thread's signal mask: that is per thread, and
    this process has others (numpy's OpenBLAS starts one at import) that take a signal the main
    thread blocks -- its Python handler then runs in the main thread all the same, mid-undo.
    Elsewhere (no handlers can be set from there) it blocks the thread's mask.  Code that sets a
    handler during a block goes through :func:`_set_handler`.
    """
    _SIGS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        self._caught: list[int] = []
        if threading.current_thread() is not threading.main_thread():
            self._mask, self._old = signal.pthread_sigmask(signal.SIG_BLOCK, self._SIGS), None
            return self
        self._old = {sig: signal.signal(sig, self._note) for sig in self._SIGS}
        _blocks.append(self)
        return self

    def _note(self, signum, frame) -> None:
        self._caught.append(signum)

    def __exit__(self, *exc):
        if self._old is None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            return
        _blocks.remove(self)
        for sig, old in self._old.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)
        for sig in dict.fromkeys(self._caught):
            signal.raise_signal(sig)  # its handler runs now (KeyboardInterrupt, or death)


_blocks: list[SignalsBlocked] = []  # SignalsBlocked in force in the main thread, outermost first


def _handler(sig: int):
    """The handler in force for sig, seen through any SignalsBlocked holding it."""
    return _blocks[0]._old[sig] if _blocks else signal.getsignal(sig)


def _set_handler(sig: int, handler) -> None:
    """Set sig's handler; during a SignalsBlocked, the one it restores on exit."""
    if _blocks:
        _blocks[0]._old[sig] = handler
    else:
        signal.signal(sig, handler)
