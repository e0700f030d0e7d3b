"""tcpdump inside a lab host, stopped so that nothing is lost.

tcpdump is started with ``--immediate-mode`` (else the last second of packets can be lost)
and stopped with SIGINT, waiting for its final "packets captured" report; a capture that the
kernel dropped packets from is an error, not a silently thinner file.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pcapstats.lab.commands import LabError, checked, require_tools

if TYPE_CHECKING:
    from pcapstats.lab.netns import Lab


@dataclass(frozen=True)
class CaptureStats:
    """What tcpdump said on exit."""
    captured: int
    received: int
    dropped_by_kernel: int
    dropped_by_interface: int = 0


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
        self.argv = argv  # the exact command (a sidecar records it)
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

    @property
    def alive(self) -> bool:
        """tcpdump is still running (it has not been stopped, nor died)."""
        return self._proc.poll() is None

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
            checked(["editcap", "-F", "pcapng", str(self._raw), str(self.path)])
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
