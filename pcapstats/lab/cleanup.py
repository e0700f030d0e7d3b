"""Leaving the host as it was: every exit path closes every open lab, and what a killed run
left behind can be found and removed.

- every namespace a lab makes is named ``<run prefix>-<host>``, the run prefix being
  ``psl-<pid>-<n>``, so a leftover from a killed run is recognisable and
  :func:`cleanup_leftovers` removes it (only runs whose process has ended, by default);
- an open lab is registered: ``atexit`` and SIGTERM / SIGHUP (when nobody else handles them:
  the handler closes every open lab, then lets the signal kill the process as it would have)
  close it.  SIGINT already unwinds as KeyboardInterrupt;
- :class:`SignalsBlocked` keeps a second Ctrl-C from cutting an undo short.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pcapstats.lab.commands import LabError, ip, require_tools

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
            delete_netns(netns)
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


def register(lab: "Lab") -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_close_all)
        _atexit_registered = True
    if not _open_labs and threading.current_thread() is threading.main_thread():
        for sig in _EXIT_SIGNALS:
            if signal.getsignal(sig) == signal.SIG_DFL:  # never override someone's handler
                _saved_handlers[sig] = signal.signal(sig, _on_exit_signal)
    _open_labs.append(lab)


def unregister(lab: "Lab") -> None:
    if lab in _open_labs:
        _open_labs.remove(lab)
    if not _open_labs and threading.current_thread() is threading.main_thread():
        for sig, old in list(_saved_handlers.items()):
            if signal.getsignal(sig) is _on_exit_signal:
                signal.signal(sig, old)
            del _saved_handlers[sig]


class SignalsBlocked:
    """Block exit signals while the lab is being undone, so a second Ctrl-C cannot cut it short."""
    _SIGS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

    def __enter__(self):
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, self._SIGS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old)
