"""Running commands for the lab: one clear error when a tool is missing or a command fails.

The bottom of the lab package: every other lab module runs ``ip``, ``tc``, ``iptables`` and
the traffic tools through these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Sequence

from pcapstats.errors import PcapstatsError


class LabError(PcapstatsError):
    """The lab cannot do what was asked: not root, a tool missing, a command inside failed."""


def require_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, veth, tcpdump)",
                       hint="run as root, e.g. with sudo")
    for tool in tools:
        if shutil.which(tool) is None:
            package = {"ip": "iproute2", "editcap": "wireshark-common"}.get(tool, tool)
            raise LabError(f"the lab needs '{tool}', which is not installed",
                           hint=f"install it: apt-get install {package}")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return checked(["ip", *args], check=check)


def show(argv: Sequence[str]) -> str:
    """A command for a one-line message: program text (python -c ...) shown as '<source>'."""
    return " ".join("<source>" if "\n" in a else a for a in map(str, argv))


def checked(argv: Sequence[str], *, check: bool = True, timeout: float | None = 60,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run argv; on failure raise LabError naming the command and tool's last stderr line."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              input=input)
    except FileNotFoundError:
        raise LabError(f"'{argv[0]}' is not installed") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"'{show(argv)}' did not finish within {timeout} s") from None
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise LabError(f"'{show(argv)}' failed with exit code {proc.returncode}: {last}")
    return proc
