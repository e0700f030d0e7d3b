"""Loss, delay and rate on a real interface of this host (its egress), with a state record so
that any later process can find, show and remove exactly what pcapstats added -- and nothing
else.  Used by ``pcapstats capture`` (for the capture's duration) and ``pcapstats netem`` (a
standing setting).

    imp = Impairment.from_text(loss="10%", delay="20ms", rate="10mbit")
    with InterfaceImpairment.install("eth0", imp, owner="capture") as applied:
        applied.mechanisms   # {"loss": "nfqueue-delayline", "delay": ..., "rate": "tbf"}
        ...
    # applied.final_counters: the kernel's counts, read just before removal

Where each value goes (everything on the interface's EGRESS; delay is one way):

==========  ==============================  =====================================================
value       netem kernel                    fallback (this machine: no sch_netem)
==========  ==============================  =====================================================
rate,queue  ``tbf``, the same words both ways: the root qdisc (handle :data:`QDISC_HANDLE`), or
            netem's child (``parent 5053:1``, handle 5054:) where netem is there too
loss        netem ``loss`` (root qdisc      :mod:`pcapstats.tools.delayline` (``--loss``: a
delay       :data:`QDISC_HANDLE`)           dropped packet gets NF_DROP) on an NFQUEUE of a chain
jitter      ``delay``                       ``PCAPSTATS-<8 hex>`` of the ``mangle`` table, jumped
                                            to from POSTROUTING ``-o IFACE`` (IPv4 and IPv6,
                                            ``--queue-bypass``), its own process
==========  ==============================  =====================================================

With netem and a loss, an empty chain of the same name is jumped to the same way: its counter
is what the loss was offered, read as the fallback's is, beside netem's drops (less its tbf
child's, which netem counts as its own).

Why mangle POSTROUTING and not filter OUTPUT + FORWARD: one rule sees both what this host sends
and what it forwards, after the filter table has decided (a packet the user's firewall
accepts early still meets the impairment), and a packet the delay line accepts resumes at the
next hook -- in filter OUTPUT it would skip the user's remaining filter rules.  A drop there
behaves for the local stack exactly as one in OUTPUT (measured: both refuse the packet to its
sender with EPERM).  ``--queue-bypass``: should the delay line die, packets pass undelayed
instead of the host's interface going dark; :meth:`InterfaceImpairment.problems` says so.

What each mechanism cannot do on a host's own output path (measured on this kernel, 6.18, two
namespaces joined by a veth; see :data:`LIMITS`, which the commands print and the sidecar
keeps):

- loss is the delay line's, not iptables ``statistic``'s: an iptables DROP of a packet this
  host sends itself is refused to its sender, not lost on the wire (TCP sent it again at once:
  20 MB under a 10 % rule, 69 of 622 packets dropped, 0 retransmissions on the wire; UDP's
  ``sendto`` failed with EPERM), and netfilter meets this host's own TCP in GSO bursts of up
  to 64 kB, dropped whole.  A packet the queue program drops (NF_DROP) has left the socket
  and the queue hands it over segmented: a real loss, retransmitted by TCP as from the wire
  (10 %: 400 of 3859 segments dropped, 399 retransmitted, 311 holes in the capture).
- ``tbf``: a burst dropped whole is reported to TCP (NET_XMIT_DROP: TCPRetransFail) and sent
  again locally; part of a burst dropped, and UDP datagrams, are lost on the wire with no
  error to the sender (3000 datagrams as fast as they go into 10 Mbit/s and a 16-frame queue:
  2903 dropped, sendto never failed).
- the NFQUEUE delay line: TCP Small Queues counts the held packets of this host's own sockets
  against them, so a TCP flow from this host carries only a few packets per delay: 20 MB took
  70 s (2.3 Mbit/s) with 20 ms on the data's egress, 0.3 s with the same 20 ms on the ACKs'.
  netem avoids this by orphaning the packets it holds (kernel source, not measurable here).
- all of them act before tcpdump sees an outgoing packet (its tap is after netfilter and the
  qdisc): dropped packets are absent from a capture on the interface, delayed ones appear
  when they leave, so an RTT read from that capture leaves the added delay out.

Default or user set.  A root qdisc is the kernel's own when its handle is ``0:`` (the kernel
attaches defaults without a handle; ``tc qdisc add`` always gets one, ``8001:``...) and its
kind is noqueue, pfifo_fast, mq, fq_codel or ``net.core.default_qdisc``; the same for mq's
children.  Anything else on the egress (root or child) was set by someone: pcapstats refuses
to impair that interface rather than replace it.  Ingress/clsact qdiscs are left alone and do
not block.  Removing pcapstats' root qdisc gives the interface back its kernel default.

The state record that lets a later process show and remove exactly this: :mod:`.state`.
A capture's delay line ends with the capture (PR_SET_PDEATHSIG); a standing setting's is a
daemon of its own (own session, cwd /, its output in the state directory).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pcapstats.errors import UsageError
from pcapstats.tools import delayline
from pcapstats.units import FRAME_BYTES
from pcapstats.lab.commands import LabError, checked
from pcapstats.lab.cleanup import SignalsBlocked
from pcapstats.lab.impair.mechanisms import (NETEM_HANDLE, RATE_CHILD_HANDLE, RATE_CHILD_PARENT,
                                             Impairment, delay_line_argv, netem_args,
                                             tbf_args, tbf_settings, use_netem, wait_ready)
from pcapstats.lab.impair.state import (HOOK, TABLE, Record, chain_exists, current_qdiscs,
                                        die_with_parent, iptables_tools, is_ours, jumps,
                                        locked, netns_inode, process_start, read_json,
                                        remove_record, same_process, state_dir)

QDISC_HANDLE = NETEM_HANDLE     # the root qdisc pcapstats adds (its tbf is 5054: under a netem)
QUEUE_BASE = 0x5053             # first NFQUEUE number tried for a delay line
QUEUE_TRIES = 16
CHAIN_PREFIX = "PCAPSTATS-"
DEFAULT_KINDS = ("noqueue", "pfifo_fast", "mq", "fq_codel")
NOT_EGRESS = ("ingress", "clsact")
OWNERS = ("netem", "capture")
# tbf on a host's own egress meets TCP's GSO bursts of up to 64 kB at once: a queue of the
# lab's 16 frames dropped 11 % of a lone flow's frames at 10 Mbit/s, 64 frames 1.8 %.
LIVE_QUEUE_FLOOR_BYTES = 64 * FRAME_BYTES
STATS_INTERVAL_S = 1.0
WHO_SETS = {"netem": {"loss": "netem", "delay": "netem", "jitter": "netem", "rate": "tbf",
                      "queue": "tbf"},
            "fallback": {"loss": "nfqueue-delayline", "delay": "nfqueue-delayline",
                         "jitter": "nfqueue-delayline", "rate": "tbf", "queue": "tbf"}}

LIMITS = {
    "tbf": (
        "tbf drops before tcpdump sees a packet; when it drops a whole burst of this host's "
        "own TCP the sender is told and sends it again locally, part of a burst and UDP "
        "datagrams are lost on the wire without an error to the sender"),
    "nfqueue-delayline": (
        "the delay line drops and holds packets before tcpdump sees them: lost packets are "
        "missing from the capture (their retransmissions are in it), and RTTs read from it "
        "leave the delay out; TCP Small Queues counts held packets of this host's own sockets, "
        "so with a delay a TCP flow sent from this host carries only a few packets per delay "
        "(measured 2.3 Mbit/s with 20 ms); forwarded traffic is not limited"),
    "netem": (
        "netem drops and delays before tcpdump sees a packet: lost packets are missing from "
        "the capture, and RTTs read from it leave the delay out; a lost packet is reported "
        "as sent, so TCP recovers as from a loss on the wire"),
}


# -- small facts about this host ------------------------------------------------------------------
def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise LabError(f"{what} needs root (tcpdump, tc, iptables)",
                       hint="run it with sudo")


def require(tool: str) -> None:
    if shutil.which(tool) is None:
        package = {"tc": "iproute2", "ip": "iproute2"}.get(tool, tool)
        raise LabError(f"'{tool}' is not installed", hint=f"install it: apt-get install {package}")


def link(iface: str) -> dict:
    """``ip -j link show dev IFACE``'s entry; LabError when there is no such interface here."""
    require("ip")
    proc = checked(["ip", "-j", "link", "show", "dev", iface], check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise LabError(f"no interface {iface!r} in this network namespace",
                       hint="`ip link` lists them")
    return json.loads(proc.stdout)[0]


def default_kinds() -> set[str]:
    kinds = set(DEFAULT_KINDS)
    with contextlib.suppress(OSError):
        kinds.add(Path("/proc/sys/net/core/default_qdisc").read_text().strip())
    return kinds


def is_kernel_default(q: dict, kinds: set[str] | None = None) -> bool:
    """Attached by the kernel (handle 0:, a default kind), not by ``tc qdisc add``."""
    return q.get("handle") == "0:" and q.get("kind") in (kinds or default_kinds())


def describe_qdisc(q: dict, iface: str) -> str:
    """tc's own line for the qdisc ("qdisc tbf 8001: root rate 10Mbit burst 3000b lat 216ms")."""
    head = f"qdisc {q.get('kind')} {q.get('handle')} "
    text = checked(["tc", "qdisc", "show", "dev", iface], check=False).stdout
    for line in text.splitlines():
        if line.startswith(head):
            line = re.sub(r" dev \S+| refcnt \d+| -{4,}", "", line)
            return line.strip()
    return head + ("root" if q.get("root") else f"parent {q.get('parent')}")


def foreign_egress_qdiscs(iface: str, ours: dict | None = None) -> list[dict]:
    """Egress qdiscs neither the kernel's default nor pcapstats' own (``ours``: its record)."""
    kinds = default_kinds()
    out = []
    for q in current_qdiscs(iface):
        if q.get("kind") in NOT_EGRESS or str(q.get("parent", "")).startswith("ffff:"):
            continue
        if is_kernel_default(q, kinds) or is_ours(q, ours):
            continue
        out.append(q)
    return out


def rules_naming(iface: str, skip_chains: tuple[str, ...] = ()) -> list[str]:
    """Rules of every table that match ``-i IFACE`` / ``-o IFACE`` (``tool -t table -A ...``),
    except jumps to ``skip_chains`` (pcapstats' own)."""
    out = []
    pattern = re.compile(rf"(^|\s)-[io] {re.escape(iface)}(\s|$)")
    for tool in iptables_tools():
        for table in ("filter", "mangle", "nat", "raw"):
            proc = checked([tool, "-w", "-t", table, "-S"], check=False)
            for line in proc.stdout.splitlines():
                if line.startswith("-A ") and pattern.search(line) \
                        and not any(line.endswith(f"-j {c}") for c in skip_chains):
                    out.append(f"{tool} -t {table} {line}")
    return out


_netem_cache: dict[str, bool] = {}


# -- installing -----------------------------------------------------------------------------------
def _run(record: Record | None, *argv, check: bool = True) -> subprocess.CompletedProcess:
    if record is not None:
        record.commands.append(shlex.join(map(str, argv)))
    return checked(list(map(str, argv)), check=check)


def _used_queues() -> set[int]:
    used = set(delayline.read_kernel_queues())
    for tool in iptables_tools():
        for table in ("filter", "mangle", "raw", "nat"):
            text = checked([tool, "-w", "-t", table, "-S"], check=False).stdout
            used.update(int(n) for n in re.findall(r"--queue-num (\d+)", text))
            for a, b in re.findall(r"--queue-balance (\d+):(\d+)", text):
                used.update(range(int(a), int(b) + 1))
    return used


def check_impairment(imp: Impairment) -> None:
    """UsageError for what an interface's egress cannot be asked (before anything is done)."""
    if imp.queue_bytes is not None and not imp.rate_bps:
        raise UsageError("--queue is the rate limit's queue", hint="give --rate too")
    if imp.ack_loss or imp.serialize:
        raise UsageError("ACK loss and serialisation are the lab's (a router's two directions)",
                         hint="on an interface: --loss, --delay, --jitter, --rate, --queue")


class InterfaceImpairment:
    """An impairment on an interface's egress, recorded in the state file until removed.

    ``mechanisms`` maps each value asked ("loss", "delay", "jitter", "rate", "queue") to
    what set it ("netem", "tbf", "nfqueue-delayline"); ``settings`` the
    parameters; ``record.commands`` every command run, in order; ``limits`` what each mechanism
    cannot do on this host's own traffic (see :data:`LIMITS`).
    """

    def __init__(self, record: Record, impairment: Impairment, proc=None):
        self.record, self.impairment = record, impairment
        self._proc: subprocess.Popen | None = proc  # the delay line, when we are its parent
        self.final_counters: dict | None = None
        self.removed_lines: list[str] = []  # what remove() did, one line per item
        self.replaced: list[str] = []  # what install() removed of an earlier setting
        self._removed = False

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def install(cls, iface: str, impairment: Impairment, *, owner: str,
                mechanism: str = "auto", daemon: bool = False) -> "InterfaceImpairment":
        """Apply ``impairment`` to iface's egress.  LabError, with nothing changed, when the
        interface carries a qdisc someone else set or a live pcapstats setting of another
        owner.  A standing (``netem``) setting of pcapstats' is replaced when owner is netem;
        leftovers of a capture whose process has died are removed either way."""
        if owner not in OWNERS:
            raise ValueError(owner)
        check_impairment(impairment)
        require("tc")
        info = link(iface)
        with locked():
            previous = Record.load(iface)
            if previous is not None and previous.ifindex != info["ifindex"]:
                previous.forget()  # a record of an interface that no longer exists
                previous = None
            if previous is not None and not (owner == "netem" and previous.owner == "netem") \
                    and not (previous.owner == "capture" and not previous.owner_alive):
                raise LabError(_busy_text(iface, previous),
                               hint=f"clear it first: pcapstats netem {iface} --clear"
                               if previous.owner == "netem" else "wait for it to end")
            foreign = foreign_egress_qdiscs(iface, previous.qdisc if previous else None)
            if foreign:
                raise LabError(f"{iface} already has a {describe_qdisc(foreign[0], iface)} that "
                               "pcapstats did not set: it is left as it is",
                               hint=f"remove it yourself (tc qdisc del dev {iface} root) if "
                               "it may go")
            netem = use_netem(mechanism)
            if not netem and (impairment.loss or impairment.delayed):
                require("iptables")
            replaced = []
            if previous is not None:
                replaced = [f"{previous.owner} setting ({previous.describe()}): {line}"
                            for line in remove_record(previous)[0]]
            if impairment.rate_bps and impairment.queue_bytes is None:
                impairment = dataclasses.replace(impairment, queue_bytes=max(
                    impairment.default_queue_bytes(), LIVE_QUEUE_FLOOR_BYTES))
            record = Record(owner=owner, pid=os.getpid(), pid_start=process_start(os.getpid()),
                            interface=iface, ifindex=info["ifindex"], netns=netns_inode(),
                            created_ns=time.time_ns(), asked=dataclasses.asdict(impairment))
            applied = cls(record, impairment)
            applied.replaced = replaced
            try:
                applied._install(netem, daemon)
                record.save()
            except BaseException:
                applied.remove()
                raise
        return applied

    @property
    def mechanisms(self) -> dict:
        return self.record.mechanisms

    @property
    def limits(self) -> dict:
        """mechanism -> what it cannot do on this host's own traffic (one sentence)."""
        return {m: LIMITS[m] for m in dict.fromkeys(self.mechanisms.values())}

    def _install(self, use_netem: bool, daemon: bool) -> None:
        """Record what will be done, then do it: netem (loss, delay, jitter) or the delay line
        behind an iptables chain; tbf for the rate (netem's child where netem is there); a
        chain that counts what the loss is offered (netem: nothing in it)."""
        imp, r = self.impairment, self.record
        netem = use_netem and bool(imp.loss or imp.delayed)
        queued = not use_netem and bool(imp.loss or imp.delayed)  # the delay line's work
        # IPv6 too where this host has it (ip6tables works); IPv4 is a must for the delay line.
        tools = [t for t in iptables_tools()
                 if checked([t, "-w", "-t", TABLE, "-S"], check=False).returncode == 0]
        if queued and "iptables" not in tools:
            raise LabError(f"iptables cannot use the {TABLE} table here",
                           hint="the loss and delay fallbacks need it (iptables -t mangle -S)")
        if queued or (netem and imp.loss and tools):
            r.chain = CHAIN_PREFIX + secrets.token_hex(4)
            r.families = tools
            r.settings["iptables"] = {"table": TABLE, "hook": HOOK, "match": f"-o {r.interface}",
                                      "chain": r.chain, "tools": tools,
                                      "comment": self._comment()}
        netem_words = netem_args(imp, loss=imp.loss, rate_child=bool(imp.rate_bps))
        if netem:
            r.qdisc = {"handle": QDISC_HANDLE, "kind": "netem"}
            r.settings["netem"] = {"limit_packets": int(netem_words[1]), "spec": netem_words[2:]}
        if imp.rate_bps:
            tbf = {"handle": RATE_CHILD_HANDLE if netem else QDISC_HANDLE, "kind": "tbf"}
            if netem:
                r.qdisc["child"] = tbf
            else:
                r.qdisc = tbf
            r.settings["tbf"] = tbf_settings(imp)
        r.save()  # recorded before the first change: a process killed now leaves a record
        if queued:  # bound to its queue before any rule sends packets there
            self._start_delay_line(daemon)
        if netem:
            _run(r, "tc", "qdisc", "add", "dev", r.interface, "root", "handle", QDISC_HANDLE,
                 "netem", *netem_words)
        if imp.rate_bps:
            where = (["parent", RATE_CHILD_PARENT, "handle", RATE_CHILD_HANDLE]
                     if netem else ["root", "handle", QDISC_HANDLE])
            _run(r, "tc", "qdisc", "add", "dev", r.interface, *where, "tbf", *tbf_args(imp))
        r.mechanisms.update(
            {v: WHO_SETS["netem" if use_netem else "fallback"][v] for v in imp.asked()})
        if r.chain:
            for tool in r.families:
                _run(r, tool, "-w", "-t", TABLE, "-N", r.chain)
                if queued:
                    _run(r, tool, "-w", "-t", TABLE, "-A", r.chain, "-j", "NFQUEUE",
                         "--queue-num", r.queue, "--queue-bypass")
                _run(r, tool, "-w", "-t", TABLE, "-I", HOOK, "1", "-o", r.interface,
                     "-m", "comment", "--comment", self._comment(), "-j", r.chain)

    def _comment(self) -> str:
        return f"pcapstats {self.record.owner} pid {self.record.pid}"

    def _start_delay_line(self, daemon: bool) -> None:
        imp, r = self.impairment, self.record
        base = state_dir() / f"{r.interface}.delayline"
        files = {k: f"{base}.{k}" for k in ("stats", "stdout", "stderr")}
        files["stats"] += ".json"
        used = _used_queues()
        candidates = [q for q in range(QUEUE_BASE, QUEUE_BASE + 4 * QUEUE_TRIES)
                      if q not in used][:QUEUE_TRIES]
        last_error = "no free NFQUEUE number"
        for queue in candidates:
            argv = delay_line_argv(queue, imp, files["stats"], interval_s=STATS_INTERVAL_S,
                                   loss=imp.loss)
            env = dict(os.environ)
            package_root = str(Path(delayline.__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join(
                [package_root, *filter(None, [env.get("PYTHONPATH")])])
            with open(files["stdout"], "w") as out, open(files["stderr"], "w") as err:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True, cwd="/", env=env,
                                        close_fds=True, preexec_fn=None if daemon else
                                        die_with_parent(signal.SIGTERM))
            r.queue = queue
            r.delay_line = {"pid": proc.pid, "start": None, "argv": argv, **files,
                            "daemon": daemon}
            # the start time is read at once: the record names this process, not its pid
            r.delay_line["start"] = process_start(proc.pid)
            r.save()
            self._proc = None if daemon else proc
            error = wait_ready(proc, queue, files["stdout"], files["stderr"])
            if error is None:
                r.commands.append(shlex.join(argv))
                r.settings["delay_line"] = {"queue": queue, "pid": proc.pid,
                                            "bypass": True, "daemon": daemon}
                return
            last_error = error
            r.delay_line, r.queue, self._proc = None, None, None
            r.save()
            if "another program" not in error:
                break
        raise LabError(f"the delay line did not start: {last_error}")

    # -- reading ----------------------------------------------------------------------------
    def counters(self) -> dict:
        """What the kernel and the delay line counted so far (after remove(): the final counts).

        ``loss``: packets the loss was offered (the chain's jump, IPv4 + IPv6, as netfilter
        sees them: this host's own TCP in GSO bursts), dropped (by the delay line, or by
        netem less its tbf) and, where the delay line counted them, offered as packets on the
        wire (:func:`loss_counted` reads the share); ``qdisc``: the rate's tbf; ``netem``:
        netem's counts;
        ``delay_line``: the program's stats and the kernel's queue line.
        """
        if self._removed:
            return self.final_counters or {}
        return read_counters(self.record)

    def problems(self) -> list[str]:
        """Sentences for what made the impairment not the one asked: the delay line died (its
        packets then passed undelayed) or the kernel dropped packets in its queue."""
        return delay_line_problems(self.record, self.counters().get("delay_line"))

    # -- undoing ----------------------------------------------------------------------------
    def remove(self) -> dict:
        """Undo everything (idempotent); returns the final counters, read just before."""
        if self._removed:
            return self.final_counters or {}
        counts = {}
        with contextlib.suppress(LabError, OSError, ValueError):
            counts = read_counters(self.record)
        stats = None
        try:
            with SignalsBlocked(), locked():         # not cut short by Ctrl-C or SIGTERM
                self.removed_lines, stats = remove_record(self.record, proc=self._proc)
        finally:
            self._removed = True
            if stats is not None:  # its final stats, written as it exited
                counts.setdefault("delay_line", {})["program"] = stats
                counts["delay_line"]["alive"] = False
                if "loss" in counts:  # its drops until the rule went, not its last rewrite
                    counts["loss"]["dropped_packets"] = stats.get("packets_dropped", 0)
                    counts["loss"]["packets_on_wire"] = packets_on_wire(stats)
            self.final_counters = counts
        return counts

    def as_dict(self) -> dict:
        """For a sidecar: what was asked, which mechanism set it, the exact settings."""
        r = self.record
        return {"interface": r.interface, "asked": r.asked, "mechanisms": dict(r.mechanisms),
                "settings": r.settings, "commands": list(r.commands), "limits": self.limits}

    def __enter__(self) -> "InterfaceImpairment":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _busy_text(iface: str, previous: Record) -> str:
    who = ("a standing `pcapstats netem` setting" if previous.owner == "netem"
           else f"a running `pcapstats capture` (pid {previous.pid})")
    return f"{iface} already carries {who} ({previous.describe()})"


# -- reading --------------------------------------------------------------------------------------
def read_counters(record: Record) -> dict:
    """The kernel's counts for what the record installed (see InterfaceImpairment.counters)."""
    out: dict = {}
    if record.qdisc:
        for q in current_qdiscs(record.interface, stats=True):
            if is_ours(q, record.qdisc):
                out["netem" if q["kind"] == "netem" else "qdisc"] = {
                    "kind": q["kind"], "handle": q["handle"], "sent_bytes": q.get("bytes"),
                    "sent_packets": q.get("packets"), "dropped_packets": q.get("drops"),
                    "overlimits": q.get("overlimits"), "backlog_bytes": q.get("backlog"),
                    "backlog_packets": q.get("qlen")}
    if record.chain:
        offered = [0, 0]             # the chain's jump: every packet the loss was offered
        for tool in record.families:
            for line in jumps(tool, record.chain):
                m = re.search(r"-c (\d+) (\d+)", line)
                if m:
                    offered[0] += int(m.group(1))
                    offered[1] += int(m.group(2))
        on_wire = None
        if record.delay_line:
            program = read_json(record.delay_line, "stats") or {}
            dropped, on_wire = program.get("packets_dropped", 0), packets_on_wire(program)
        else:                        # netem's drops less its tbf child's (counted in both)
            dropped = ((out.get("netem") or {}).get("dropped_packets") or 0) - \
                ((out.get("qdisc") or {}).get("dropped_packets") or 0)
        out["loss"] = {"offered_packets": offered[0], "offered_bytes": offered[1],
                       "dropped_packets": dropped, "packets_on_wire": on_wire}
    if record.delay_line:
        d = record.delay_line
        kernel = delayline.read_kernel_queues().get(record.queue)
        out["delay_line"] = {"queue": record.queue, "pid": d.get("pid"),
                             "alive": same_process(d.get("pid"), d.get("start")),
                             "kernel": dataclasses.asdict(kernel) if kernel else None,
                             "program": read_json(d, "stats")}
    return out


def packets_on_wire(program: dict) -> int:
    """The packets a delay line was handed (its stats ``program``): those it held and those it
    dropped, each a packet as on the wire -- NFQUEUE hands a GSO burst of this host's own TCP
    over segmented, while the chain's jump counts the burst once."""
    return sum(program.get(k) or 0 for k in ("packets_received", "packets_dropped",
                                             "packets_overflowed"))


def loss_counted(loss: dict | None) -> tuple[int, int, str] | None:
    """(dropped, out of, what both count) for the ``loss`` block of a host's counters, or None
    when nothing was offered: packets on the wire where the delay line counted them; with
    netem, GSO bursts -- netem drops a burst whole and counts it once, as the chain's jump
    does (its share of bursts is, for a random loss, its share of packets in expectation)."""
    if not loss:
        return None
    if loss.get("packets_on_wire") is not None:
        dropped, offered = loss["dropped_packets"], loss["packets_on_wire"]
        unit = "packets on the wire"
    else:
        dropped, offered = loss["dropped_packets"], loss["offered_packets"]
        unit = "packets as queued (GSO bursts whole)"
    return (dropped, offered, unit) if offered else None


def delay_line_problems(record: Record, counts: dict | None) -> list[str]:
    if not record.delay_line or counts is None:
        return []
    out = []
    if not counts.get("alive"):
        out.append(f"the delay line (pid {record.delay_line.get('pid')}) is not running: "
                   "packets pass undelayed (--queue-bypass)")
    k = counts.get("kernel") or (counts.get("program") or {}).get("kernel") or {}
    if k.get("queue_dropped") or k.get("user_dropped"):
        out.append(f"the delay line's queue lost packets: {k.get('queue_dropped')} with its "
                   f"queue full, {k.get('user_dropped')} undelivered to the program")
    return out


# -- for `pcapstats netem`: what is on an interface, clearing it ----------------------------------
@dataclass
class Shown:
    interface: str
    ifindex: int
    record: Record | None
    present: list[str]          # the record's items that are really there
    missing: list[str]          # the record's items that are gone
    counters: dict
    problems: list[str]
    foreign_qdiscs: list[str]   # set by someone else
    default_qdiscs: list[str]   # the kernel's own
    foreign_rules: list[str]    # iptables rules naming the interface, not pcapstats'


def show(iface: str) -> Shown:
    """What is set on iface: pcapstats' record checked against the kernel, and the rest."""
    info = link(iface)
    record = Record.load(iface)
    if record is not None and record.ifindex != info["ifindex"]:
        record = None
    present, missing = [], []
    counts: dict = {}
    if record is not None:
        now = current_qdiscs(iface)
        if record.qdisc:
            root, child = record.qdisc, record.qdisc.get("child")
            items = [(f"qdisc {root['kind']} {root['handle']} root", {**root, "root": True})]
            if child:
                items.append((f"qdisc {child['kind']} {child['handle']} parent "
                              f"{root['handle'].rstrip(':')}:1",
                              {**child, "parent": root["handle"].rstrip(":") + ":1"}))
            for item, want in items:
                ok = any(is_ours(q, record.qdisc) and q.get("handle") == want["handle"]
                         for q in now)
                (present if ok else missing).append(item)
        if record.chain:
            item = f"iptables chain {record.chain} ({TABLE} {HOOK} -o {iface})"
            ok = any(chain_exists(t, record.chain) for t in record.families)
            (present if ok else missing).append(item)
        if record.delay_line:
            d = record.delay_line
            item = f"delay line pid {d.get('pid')} on NFQUEUE {record.queue}"
            (present if same_process(d.get("pid"), d.get("start")) else missing).append(item)
        counts = read_counters(record)
    kinds = default_kinds()
    foreign, default = [], []
    for q in current_qdiscs(iface):
        if record and is_ours(q, record.qdisc):
            continue
        (default if is_kernel_default(q, kinds) else foreign).append(describe_qdisc(q, iface))
    rules = rules_naming(iface, (record.chain,) if record and record.chain else ())
    problems = delay_line_problems(record, counts.get("delay_line")) if record else []
    return Shown(iface, info["ifindex"], record, present, missing, counts, problems, foreign,
                 default, rules)


def clear(iface: str) -> list[str] | None:
    """Remove what pcapstats recorded on iface; None when there is no record.  A capture that
    is still running is not cleared (LabError): it removes its own on exit."""
    info = link(iface)
    with locked():
        record = Record.load(iface)
        if record is None:
            return None
        if record.ifindex != info["ifindex"]:
            record.forget()
            return ["a record of an earlier interface of this name, forgotten"]
        if record.owner == "capture" and record.owner_alive:
            raise LabError(_busy_text(iface, record),
                           hint="it removes its impairment when it ends; stop it (Ctrl-C)")
        return remove_record(record)[0]
