"""A live capture from a real interface of this host, optionally around a command and under
loss, delay and rate on the interface's egress for the capture's duration (``pcapstats
capture``); a sidecar beside it; the interface left as it was on every exit path.

    doc = capture(LiveCapture("eth0", "run.pcap", impairment=Impairment(loss=0.1),
                              command=["iperf3", "-c", "10.0.0.2", "-t", "5"]))
    doc["run"]["exit_status"]   # the command's

The order: check everything that can be checked (root, tcpdump, the interface, the filter,
a qdisc or pcapstats setting already there) before touching anything; apply the impairment
(:mod:`pcapstats.lab.impair.host`, which records it in its state file); start tcpdump with
``--immediate-mode`` and wait until it is listening; run the command (in pcapstats' own
process group: a terminal's Ctrl-C reaches both) until it exits -- or wait ``duration_s``, or
until Ctrl-C / SIGTERM; then wait for packets still held (the delay, the shaper's queue: at
most :data:`DRAIN_MAX_S` of it), stop tcpdump and wait for its own report, read the kernel's
counters, remove the impairment, rename the hidden ``.NAME.pcap.partial`` into place and write
the sidecar (kind ``capture``, fields in :data:`pcapstats.sidecar.CAPTURE_FIELDS`).

Every exit path does the second half: a normal end, a failing command (its exit status is
passed on), Ctrl-C (SIGINT) and SIGTERM / SIGHUP (the command gets the signal too, a few
seconds to end, then SIGKILL; the sidecar says ``interrupted`` and the interruption is raised
again once everything is saved and removed), an exception (``failed``).  Without a command or
a duration, Ctrl-C or SIGTERM is the way to end the capture: it then ends ``complete``.  A run
killed outright (SIGKILL) takes tcpdump and the delay line with it (the kernel signals them:
PR_SET_PDEATHSIG) but leaves its rules, qdisc and state record: ``pcapstats netem IFACE
--clear`` removes them (so does the next capture or netem on that interface), and
``pcapstats lab cleanup DIR`` the partial file.

tcpdump's own "dropped by kernel" count is kept in the sidecar and said as a warning; unlike a
lab run it does not fail the capture (a busy host's interface is not the lab's quiet veth).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from pcapstats import sidecar
from pcapstats.errors import UsageError
from pcapstats.lab import accuracy
from pcapstats.lab.impair import host, state
from pcapstats.lab.commands import LabError, checked
from pcapstats.lab.impair.mechanisms import Impairment
from pcapstats.lab.netns import Lab
from pcapstats.lab.cleanup import SignalsBlocked, signals_unwind
from pcapstats.lab.sidecar import interface_placements, write_sidecar
from pcapstats.lab.tcpdump import TcpdumpCapture
from pcapstats.lab.traffic import tool_versions

FORMATS = ("pcap", "pcapng")
SNAPLEN_MIN, SNAPLEN_MAX = 64, 262144
TCPDUMP_BUFFER_KIB = 32768
SETTLE_S = 0.3            # after the command: packets in flight reach tcpdump
DRAIN_MAX_S = 5.0         # ... and the shaper's full queue, at most this long (1 kbit/s: 13 min)
INTERRUPT_GRACE_S = 1.0   # Ctrl-C reached the command too (one process group): let it end
COMMAND_TERM_S = 3.0      # then the signal again, then SIGTERM, then SIGKILL, this far apart
KIND = "capture"


class _ThisHost:
    """What :class:`~pcapstats.lab.tcpdump.TcpdumpCapture` needs of a Lab, for the namespace
    pcapstats itself runs in (tcpdump gets a session of its own, as in a lab)."""

    @staticmethod
    def popen(host, *argv, **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        # SIGINT if pcapstats is killed outright: tcpdump then flushes the file and exits.
        return subprocess.Popen(list(map(str, argv)), start_new_session=True,
                                preexec_fn=state.die_with_parent(signal.SIGINT), **kwargs)

    stop = staticmethod(Lab.stop)


@dataclass
class LiveCapture:
    """What ``pcapstats capture`` was asked (values parsed: Impairment, seconds)."""
    interface: str
    output: str | os.PathLike
    duration_s: float | None = None
    bpf: str | None = None
    snaplen: int = SNAPLEN_MAX
    format: str | None = None         # None: from the output's suffix (.pcapng), else pcap
    impairment: Impairment | None = None
    command: Sequence[str] | None = None

    def paths(self) -> tuple[Path, str]:
        """(the capture's final path, its format); UsageError for what cannot be written."""
        out = Path(self.output)
        fmt = self.format
        if out.suffix in sidecar.CAPTURE_SUFFIXES:
            if fmt and out.suffix != f".{fmt}":
                raise UsageError(f"--format {fmt} does not match the file name {out.name}",
                                 hint=f"name it {out.stem}.{fmt}, or leave --format out")
            fmt = out.suffix[1:]
        else:
            fmt = fmt or "pcap"
            out = out.with_name(f"{out.name}.{fmt}")
        if fmt not in FORMATS:
            raise UsageError(f"unknown capture format {fmt!r}", hint="use pcap or pcapng")
        if not out.parent.is_dir():
            raise UsageError("the output directory does not exist", path=str(out.parent),
                             hint="create it first")
        return out, fmt

    def validate(self) -> None:
        if self.impairment is not None:
            host.check_impairment(self.impairment)
        if not SNAPLEN_MIN <= self.snaplen <= SNAPLEN_MAX:
            raise UsageError(f"snaplen {self.snaplen} is not in {SNAPLEN_MIN}..{SNAPLEN_MAX}",
                             hint="128 keeps the TCP/IP headers; the default keeps everything")
        if self.duration_s is not None and not (0 < self.duration_s < float("inf")):
            raise UsageError(f"duration {self.duration_s} must be a number of seconds above 0")
        if self.command and self.duration_s is not None:
            raise UsageError("a command and --duration together: the command's end ends the "
                             "capture", hint=f"bound the command instead: -- timeout "
                             f"{self.duration_s:g} {' '.join(self.command)}")
        if self.command and shutil.which(self.command[0]) is None:
            raise UsageError(f"command {self.command[0]!r} not found",
                             hint="give its path, or check the spelling")
        self.paths()


def check_host(req: LiveCapture) -> dict:
    """Everything that can be refused before anything is touched; returns the interface's
    ``ip -j link`` entry.  LabError (one line) for root, tcpdump, the interface, the filter."""
    host.require_root("pcapstats capture")
    host.require("tcpdump")
    info = host.link(req.interface)
    if req.bpf:  # compile it now: a typo is one line before the interface is touched
        probe = checked(["tcpdump", "-d", "-i", req.interface, req.bpf], check=False)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["no message"])[-1]
            raise UsageError(f"tcpdump refuses the filter {req.bpf!r}: "
                             f"{last.removeprefix('tcpdump: ')}")
    if req.format == "pcapng" or Path(req.output).suffix == ".pcapng":
        host.require("editcap")
    return info


def _signal_name(exc: BaseException) -> str:
    return signal.Signals(getattr(exc, "signum", signal.SIGINT)).name


def capture(req: LiveCapture, *, argv: list[str] | None = None,
            say: Callable[[str, str], None] | None = None) -> dict:
    """Run the capture; write it and its sidecar; return the sidecar.

    UsageError / LabError before anything is touched for what cannot be done.  After the
    capture started: LabError (files kept, status ``failed``) when something broke, and the
    interruption re-raised (files kept, status ``interrupted``) on Ctrl-C / SIGTERM / SIGHUP
    -- except without a command or duration, where they are the normal end.
    """
    req.validate()
    info = check_host(req)
    final, fmt = req.paths()
    with signals_unwind():
        return _Run(req, final, fmt, info, argv, say or (lambda kind, text: None)).go()


class _Run:
    """The state of one capture, so every exit path can save what it has and undo the rest."""

    def __init__(self, req: LiveCapture, final: Path, fmt: str, info: dict, argv, say):
        self.req, self.final, self.fmt, self.say = req, final, fmt, say
        self.partial = sidecar.partial_path(final)
        self.applied: host.InterfaceImpairment | None = None
        self.tcpdump: TcpdumpCapture | None = None
        self.proc: subprocess.Popen | None = None
        self.open_ended = not req.command and req.duration_s is None
        qdiscs = state.current_qdiscs(req.interface)
        before = state.Record.load(req.interface)
        self.doc = {
            "schema": sidecar.SCHEMA, "kind": KIND, "status": None, "error": None,
            "command": argv, "started_ns": time.time_ns(), "finished_ns": None,
            "scenario": None, "flows": [],
            "interface": {"name": req.interface, "ifindex": info.get("ifindex"),
                          "mtu": info.get("mtu"), "netns": state.netns_inode(),
                          "host": socket.gethostname(), "addresses": _addresses(req.interface),
                          "qdiscs_before": [host.describe_qdisc(q, req.interface)
                                            for q in qdiscs],
                          "pcapstats_before": (None if before is None else
                                               {"owner": before.owner, "pid": before.pid,
                                                "asked": before.asked})},
            "impairment": None,
            "captures": [],
            "run": {"argv": list(req.command) if req.command else None, "pid": None,
                    "duration_s": req.duration_s, "started_ns": None, "ended_ns": None,
                    "exit_status": None, "signal": None, "stopped_by": None},
            "tools": None,
            "achieved": None,
        }

    # -- the capture ------------------------------------------------------------------------------
    def go(self) -> dict:
        failure: BaseException | None = None
        try:
            self._impair()
            self._start_tcpdump()
            self._wait()
            self.doc["status"] = "complete"
        except KeyboardInterrupt as e:
            name = _signal_name(e)
            self._end_command(e)
            if self.open_ended and self.tcpdump is not None:
                self.doc["status"], self.doc["run"]["stopped_by"] = "complete", name
            else:
                failure = e
                self.doc["status"], self.doc["error"] = "interrupted", f"interrupted ({name})"
                self.doc["run"]["stopped_by"] = name
        except Exception as e:  # noqa: BLE001 -- saved, then raised again below
            failure = e
            self.doc["status"], self.doc["error"] = "failed", str(e)
            self.doc["run"]["stopped_by"] = self.doc["run"]["stopped_by"] or "error"
            self._end_command(None)
        finally:
            with SignalsBlocked():
                try:
                    self._finish()
                finally:
                    self._undo()
        if failure is not None:
            raise failure
        if self.doc["status"] != "complete":
            raise LabError(self.doc["error"], path=str(sidecar.sidecar_path(self.final)))
        return self.doc

    def _impair(self) -> None:
        imp = self.req.impairment
        if imp is None or not (imp.loss or imp.delayed or imp.rate_bps):
            return
        self.applied = host.InterfaceImpairment.install(
            self.req.interface, imp, owner="capture")
        a = self.applied
        for line in a.replaced:
            self.say("note", f"removed what a killed capture left on {self.req.interface}: "
                             f"{line}")
        self.doc["impairment"] = {**a.as_dict(), "counters": None, "problems": [],
                                  "removed": None}
        self.say("note", f"{self.req.interface}: {describe_mechanisms(a.record)}")
        for mechanism, limit in a.limits.items():
            self.say("note", f"on this host's own traffic, {limit}")

    def _start_tcpdump(self) -> None:
        r = self.req
        self.tcpdump = TcpdumpCapture(_ThisHost(), None, r.interface, self.partial,
                                      snaplen=r.snaplen, nano=True, pcapng=self.fmt == "pcapng",
                                      bpf=r.bpf, buffer_kib=TCPDUMP_BUFFER_KIB)
        self.doc["captures"] = [{
            "file": self.final.name, "side": None, "host": self.doc["interface"]["host"],
            "interface": r.interface, "snaplen": r.snaplen, "format": self.fmt,
            "timestamps": "nano", "filter": r.bpf, "tcpdump": self.tcpdump.argv,
            "impairments": [] if self.applied is None else interface_placements(
                self.applied.record.asked, r.interface, self.doc["interface"]["addresses"])}]

    def _wait(self) -> None:
        run = self.doc["run"]
        if self.req.command:
            run["started_ns"] = time.time_ns()
            self.proc = subprocess.Popen(list(self.req.command))
            run["pid"] = self.proc.pid
            code = self.proc.wait()
            self._command_ended(code)
            run["stopped_by"] = "command"
            return
        if self.open_ended:
            self.say("note", f"capturing on {self.req.interface}; Ctrl-C ends it")
        deadline = None if self.open_ended else time.monotonic() + self.req.duration_s
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic())))
            if not self.tcpdump.alive:
                raise LabError(f"tcpdump ended during the capture on {self.req.interface}")
        run["stopped_by"] = "duration"

    def _command_ended(self, code: int) -> None:
        run = self.doc["run"]
        run["ended_ns"] = time.time_ns()
        if code < 0:
            run["signal"] = signal.Signals(-code).name
            run["exit_status"] = 128 - code
        else:
            run["exit_status"] = code

    def _end_command(self, exc: BaseException | None) -> None:
        """The capture is ending before the command: have it end too, in order."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            if proc is not None and self.doc["run"]["exit_status"] is None:
                self._command_ended(proc.returncode)
            return
        sig = getattr(exc, "signum", signal.SIGINT) if exc is not None else signal.SIGTERM
        # A terminal's Ctrl-C reached the command too: first give it a moment on its own.
        steps = ([None] if sig == signal.SIGINT else []) + \
            list(dict.fromkeys([sig, signal.SIGTERM, signal.SIGKILL]))
        with SignalsBlocked():
            for step in steps:
                if step is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, step)
                try:
                    proc.wait(INTERRUPT_GRACE_S if step is None else COMMAND_TERM_S)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._command_ended(proc.returncode)

    # -- saving ----------------------------------------------------------------------------------
    def _settle_s(self) -> float:
        imp = self.applied.impairment if self.applied else None
        if imp is None:
            return SETTLE_S
        drain = imp.queue_limit_bytes * 8 / imp.rate_bps if imp.rate_bps else 0.0
        return SETTLE_S + imp.delay_s + imp.jitter_s + min(drain, DRAIN_MAX_S)

    def _finish(self) -> None:
        """Stop tcpdump, read the counters, remove the impairment, write the files."""
        if self.tcpdump is not None:
            try:
                stats = self.tcpdump.stop(settle=self._settle_s(), allow_drops=True)
                self.doc["captures"][0].update(
                    packets_captured=stats.captured, packets_received_by_filter=stats.received,
                    packets_dropped_by_kernel=stats.dropped_by_kernel,
                    packets_dropped_by_interface=stats.dropped_by_interface)
                if stats.dropped_by_kernel:
                    self.say("warning", f"tcpdump reported {stats.dropped_by_kernel} packets "
                                        "dropped by kernel: the capture misses them")
            except LabError as e:
                self._fail(str(e))
        if self.applied is not None:
            problems = []
            with contextlib.suppress(LabError):
                problems = self.applied.problems()
            counters = self.applied.remove()
            self.doc["impairment"].update(counters=counters, problems=problems,
                                          removed=self.applied.removed_lines)
            for p in problems:
                self._fail(p)
        if self.tcpdump is None:
            return  # nothing was captured: no files at all
        self.doc["finished_ns"] = time.time_ns()
        self.doc["tools"] = tool_versions()
        if self.partial.exists():
            self.doc["captures"][0]["size_bytes"] = self.partial.stat().st_size
            os.replace(self.partial, self.final)
            if self.applied is not None:
                self.doc["achieved"] = accuracy.measured(accuracy.capture, self.doc,
                                                          self.final)
        else:
            self.doc["captures"] = []
        write_sidecar(sidecar.sidecar_path(self.final), self.doc)

    def _fail(self, text: str) -> None:
        if self.doc["status"] in ("complete", None):
            self.doc["status"], self.doc["error"] = "failed", text
        else:
            self.doc["error"] += f"; {text}"

    def _undo(self) -> None:
        """Whatever _finish could not do: tcpdump stopped, impairment removed, partials gone."""
        if self.tcpdump is not None and self.tcpdump.alive:
            with contextlib.suppress(Exception):
                self.tcpdump.stop(settle=0, allow_drops=True)
        if self.applied is not None:
            self.applied.remove()
        for leftover in (self.partial, self.partial.with_name(self.partial.name + ".tmp.pcap")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _addresses(iface: str) -> list[str]:
    """The interface's own IP addresses (``ip -j addr``): what it sends is from them."""
    proc = checked(["ip", "-j", "addr", "show", "dev", iface], check=False)
    try:
        entries = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return []
    return [a["local"] for e in entries for a in e.get("addr_info") or [] if a.get("local")]


def describe_mechanisms(record: state.Record) -> str:
    """"loss 10 % by the NFQUEUE delay line (...), rate 10 Mbit/s by tbf (...)"."""
    a, m, s = record.asked, record.mechanisms, record.settings
    tbf = (record.qdisc or {}).get("child") or record.qdisc or {}
    parts = []
    where = {
        "nfqueue-delayline": lambda: f"the NFQUEUE delay line (queue {record.queue}, pid "
                                     f"{(record.delay_line or {}).get('pid')})",
        "tbf": lambda: f"tbf {tbf['handle']} (queue {s['tbf']['limit_bytes']} bytes)",
        "netem": lambda: f"netem {(record.qdisc or {}).get('handle')}",
    }
    for value, text in (("loss", f"loss {a.get('loss', 0) * 100:g} %"),
                        ("delay", f"delay {a.get('delay_s', 0) * 1e3:g} ms"),
                        ("jitter", f"jitter {a.get('jitter_s', 0) * 1e3:g} ms"),
                        ("rate", f"rate {(a.get('rate_bps') or 0) / 1e6:g} Mbit/s")):
        if value in m:
            parts.append(f"{text} by {where[m[value]]()}")
    return ", ".join(parts)


def summary(doc: dict) -> list[str]:
    """A few lines on what a capture made and what the kernel counted (for the CLI)."""
    lines = []
    path = doc["captures"][0]["file"] if doc["captures"] else None
    if path:
        cap = doc["captures"][0]
        lines.append(f"wrote {path} ({cap.get('packets_captured')} packets) and its sidecar")
    imp = doc.get("impairment") or {}
    counts = imp.get("counters") or {}
    loss = host.loss_counted(counts.get("loss"))
    if loss and imp["asked"].get("loss"):
        dropped, seen, unit = loss
        lines.append(f"the loss dropped {dropped} of {seen} {unit}: "
                     f"{dropped / seen * 100:.2f} %, asked {imp['asked']['loss'] * 100:g} %")
    q = counts.get("qdisc")
    if q:
        lines.append(f"{q['kind']} sent {q['sent_packets']} packets, dropped "
                     f"{q['dropped_packets']}")
    d = (counts.get("delay_line") or {}).get("program")
    if d:
        lines.append(f"the delay line held {d.get('packets_received')} packets "
                     f"{d.get('delay_ms'):g} ms each")
    n = counts.get("netem")
    if n:
        lines.append(f"netem sent {n['sent_packets']} packets, dropped {n['dropped_packets']}")
    if imp.get("removed") is not None:
        lines.append(f"removed from {doc['interface']['name']}: "
                     + "; ".join(imp["removed"]))
    return lines + accuracy.lines(doc.get("achieved"))


__all__ = ["LiveCapture", "capture", "check_host", "describe_mechanisms", "summary"]
