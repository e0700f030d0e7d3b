"""An impairment on a lab router's forwarding path, toward the receivers and back: installed
with netem where the kernel has it, else tbf + iptables ``statistic`` + an NFQUEUE delay line
(:mod:`.mechanisms` says which value goes where), counted, and undone.

    imp = Impairment(loss=0.1, delay_s=0.020, rate_bps=30e6)
    applied = apply(lab, lab.bottleneck, imp)
    applied.mechanisms   # {"rate": "tbf", "loss": "iptables-statistic", "delay": ...}
    applied.counters()   # what the kernel counted: drops, tbf backlog, delay line's queue
    applied.remove()     # also done when the lab closes

On the forwarding path, never a sender's own output: a drop there is re-sent without
reaching the wire (see ../shared/DESIGN.md).  Data leaves the router through the bottleneck's
``egress`` (loss, delay, serialisation, then the rate's tbf), ACKs through its ``ingress``
(ack loss, delay, serialisation unless ``one_way``).  ``delay_s`` is one-way and applied in
EACH direction, so ping's RTT is about 2 x delay + the base RTT (about 0.1 ms here, plus
~0.5 ms for the two delay-line passes).

Two chains of the router's filter table, ``PSL_DATA`` and ``PSL_ACK``, are entered from FORWARD
by ``-o <egress>`` / ``-o <ingress>`` with either mechanism; the jump's counter is the number of
packets offered.  The fallback's chains hold the loss rule (its counter: the number lost), then
the NFQUEUE rule, so a lost packet is not held for nothing; FORWARD runs before the egress
qdisc, so data packets are delayed, then queue in tbf.  On a netem host the chains hold no rule
(they count) and the number lost is netem's drops less its tbf child's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
from dataclasses import asdict, dataclass, field
from typing import Callable

from pcapstats.tools.delayline import PROC_QUEUES, read_kernel_queues
from pcapstats.lab.commands import LabError
from pcapstats.lab.impair.mechanisms import (NETEM_HANDLE, RATE_CHILD_HANDLE,
                                             RATE_CHILD_PARENT, Impairment, delay_line_argv,
                                             delay_line_hold_s, netem_args, tbf_args,
                                             tbf_settings, use_netem, wait_ready)
from pcapstats.lab.netns import Bottleneck, Lab

DATA_QUEUE, ACK_QUEUE = 0, 1  # NFQUEUE numbers (per namespace)
CHAINS = {"data": "PSL_DATA", "ack": "PSL_ACK"}
JUMPS = ("FORWARD", "OUTPUT")  # OUTPUT only for a router's own packets (``local``)
WHO_SETS = {"netem": {"rate": "tbf", "queue": "tbf", "loss": "netem", "ack_loss": "netem",
                      "delay": "netem", "jitter": "netem", "serialisation": "netem"},
            "fallback": {"rate": "tbf", "queue": "tbf", "loss": "iptables-statistic",
                         "ack_loss": "iptables-statistic", "delay": "nfqueue-delayline",
                         "jitter": "nfqueue-delayline", "serialisation": "nfqueue-delayline"}}
STATS_INTERVAL_S = 0.5


# -- what the kernel counted ----------------------------------------------------------------------
@dataclass(frozen=True)
class PathCounters:
    """One direction's packets offered (its chain's jump, IPv4 + IPv6) and lost at random: by
    the DROP rule (fallback) or by netem (its drops less its tbf child's; no byte count)."""
    offered_packets: int
    offered_bytes: int
    dropped_packets: int
    dropped_bytes: int | None


@dataclass(frozen=True)
class QdiscCounters:
    """``tc -s qdisc`` of one qdisc of ours: the rate's tbf, or a netem."""
    device: str
    kind: str
    sent_bytes: int
    sent_packets: int
    dropped_packets: int  # tbf: queue full; netem: its loss and its tbf child's drops
    overlimits: int  # tbf: times a packet had to wait for tokens
    backlog_bytes: int
    backlog_packets: int


@dataclass(frozen=True)
class DelayLineCounters:
    """One direction's delay line: the kernel's queue line plus the program's own stats."""
    direction: str
    queue: int
    alive: bool
    exit_code: int | None
    kernel: dict | None  # delayline.KernelQueue as a dict; None: nobody is bound to the queue
    program: dict | None  # delayline.Stats as a dict (periodic snapshot, exact after remove())


@dataclass(frozen=True)
class Counters:
    loss: dict[str, PathCounters] = field(default_factory=dict)  # "data" / "ack"
    qdiscs: dict[str, QdiscCounters] = field(default_factory=dict)  # the rate's tbf, by device
    delay: dict[str, DelayLineCounters] = field(default_factory=dict)  # "data" / "ack"
    netem: dict[str, QdiscCounters] = field(default_factory=dict)  # by device

    def as_dict(self) -> dict:
        return asdict(self)


class _DelayLine:
    """The delay line of one direction, a Lab process in the router's namespace."""

    def __init__(self, lab: Lab, host: str, queue: int, imp: Impairment, stats_dir: str,
                 direction: str):
        self.lab, self.host, self.queue = lab, host, queue
        base = os.path.join(stats_dir, f"delayline-{queue}")
        self.stats_path, self.stdout_path, self.stderr_path = \
            f"{base}.json", f"{base}.out", f"{base}.err"
        self.argv = delay_line_argv(queue, imp, self.stats_path, interval_s=STATS_INTERVAL_S,
                                    serialize=imp.serialises(direction))
        self.hold_s = delay_line_hold_s(imp)
        self.final: dict | None = None
        # files, not pipes: a pipe nobody reads could fill
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = lab.popen(host, *self.argv, stdout=out, stderr=err)

    def wait_ready(self) -> None:
        """Return once it has bound its queue; LabError (and the process gone) if it cannot."""
        error = wait_ready(self.proc, self.queue, self.stdout_path, self.stderr_path)
        if error is not None:
            self.lab.stop(self.proc, signal.SIGKILL)
            raise LabError(f"the delay line for queue {self.queue} in {self.host} did not "
                           f"start: {error}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def program_stats(self) -> dict | None:
        """Its stats: the periodic snapshot, the final ones once it has stopped."""
        if self.final is not None:
            return self.final
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def stop(self) -> None:
        """SIGTERM, wait while it releases what it holds, keep its final stats (it writes them
        to its stats file as it exits; killed, its file holds a snapshot)."""
        code = self.lab.stop(self.proc, signal.SIGTERM, timeout=self.hold_s + 5)
        if code == 0 and self.final is None:
            self.final = self.program_stats()


class Applied:
    """An impairment installed on a bottleneck: which mechanism set what, counters, removal.

    ``mechanisms`` maps each value asked for ("rate", "queue", "loss", "ack_loss", "delay",
    "jitter") to what set it ("netem", "tbf", "iptables-statistic", "nfqueue-delayline").
    ``settings`` holds the parameters and every command run, in order.
    """

    def __init__(self, lab: Lab, bottleneck: Bottleneck, impairment: Impairment, *,
                 slot: int = 0, local: bool = False):
        self.lab, self.bottleneck, self.impairment = lab, bottleneck, impairment
        # Several links impaired on one router (a topology file's) each take a slot: chains
        # PSL_DATA<slot> / PSL_ACK<slot> and NFQUEUE numbers 2 slot, 2 slot + 1 of their own.
        self.chain_names = {d: c + (str(slot) if slot else "") for d, c in CHAINS.items()}
        self.queues = {"data": DATA_QUEUE + 2 * slot, "ack": ACK_QUEUE + 2 * slot}
        self.local = local  # the router's own packets (its pings) meet the impairment too
        self.mechanisms: dict[str, str] = {}
        self.settings: dict = {"commands": []}
        self.final_counters: Counters | None = None
        self._undo: list[Callable[[], object]] = []
        self._delay_lines: dict[str, _DelayLine] = {}
        self._chains: dict[str, str] = {}  # direction -> chain, once its FORWARD jump exists
        self._qdiscs: list[str] = []  # devices with a root qdisc of ours
        self._removed = False
        lab.on_close(self.remove)

    # -- installing ---------------------------------------------------------------------------
    def _run(self, *argv, record: bool = True, check: bool = True):
        if record:
            self.settings["commands"].append(shlex.join(map(str, argv)))
        return self.lab.run(self.bottleneck.router, *argv, check=check)

    def _iptables(self, *args, record: bool = True, check: bool = True) -> None:
        for tool in ("iptables", "ip6tables"):
            self._run(tool, "-w", *args, record=record, check=check)

    def _add_qdisc(self, device: str, *spec) -> None:
        """A root qdisc (``spec``: [handle H] kind words); deleting it removes its children."""
        self._undo.append(lambda: self._run("tc", "qdisc", "del", "dev", device, "root",
                                            record=False, check=False))
        self._run("tc", "qdisc", "add", "dev", device, "root", *spec)
        self._qdiscs.append(device)

    def _add_tbf(self, device: str, under_netem: bool) -> None:
        words = tbf_args(self.impairment)
        self.settings["tbf"] = tbf_settings(self.impairment)
        if under_netem:     # removed with its parent
            self._run("tc", "qdisc", "add", "dev", device, "parent", RATE_CHILD_PARENT,
                      "handle", RATE_CHILD_HANDLE, "tbf", *words)
        else:
            self._add_qdisc(device, "tbf", *words)

    def _start_delay_lines(self, queues: dict[str, int]) -> None:
        """One program per direction, started together; returns once all are listening."""
        stats_dir = self.settings["stats_dir"] = self.lab.scratch_dir("delayline")
        self._undo.append(lambda: shutil.rmtree(stats_dir, True))
        for direction, queue in queues.items():
            line = _DelayLine(self.lab, self.bottleneck.router, queue, self.impairment,
                              stats_dir, direction)
            self._delay_lines[direction] = line
            self.settings["commands"].append(shlex.join(line.argv))
            self._undo.append(line.stop)
        for line in self._delay_lines.values():
            line.wait_ready()

    def _add_chain(self, direction: str, device: str, loss: float, queue: int | None) -> None:
        """Chain PSL_DATA/PSL_ACK: random DROP, then NFQUEUE; FORWARD jumps in last."""
        chain = self.chain_names[direction]
        # Each undo is registered before its command (a half-done command is undone too).
        self._undo.append(lambda: self._iptables("-X", chain, record=False, check=False))
        self._undo.append(lambda: self._iptables("-F", chain, record=False, check=False))
        self._iptables("-N", chain)
        if loss > 0:
            self._iptables("-A", chain, "-m", "statistic", "--mode", "random",
                           "--probability", f"{loss:.10f}", "-j", "DROP")
        if queue is not None:
            self._iptables("-A", chain, "-j", "NFQUEUE", "--queue-num", queue)
        # Undone first: the jump goes before the delay line stops (else its packets drop).
        for hook in JUMPS if self.local else JUMPS[:1]:
            self._undo.append(lambda hook=hook: self._iptables(
                "-D", hook, "-o", device, "-j", chain, record=False, check=False))
            self._iptables("-A", hook, "-o", device, "-j", chain)
        self._chains[direction] = chain

    def _install_netem(self) -> None:
        """netem on each direction that drops, delays or serialises; tbf for the rate, under
        the data direction's netem; chains that count what each direction offers."""
        imp, b = self.impairment, self.bottleneck
        self.settings["netem"] = {}
        for direction, device, loss in self._directions():
            netem = bool(loss or imp.delayed)
            rate_child = netem and direction == "data" and bool(imp.rate_bps)
            if netem:
                words = netem_args(imp, loss=loss, rate_child=rate_child,
                                   serialize=imp.serialises(direction))
                self.settings["netem"][device] = words
                self._add_qdisc(device, "handle", NETEM_HANDLE, "netem", *words)
            if direction == "data" and imp.rate_bps:
                self._add_tbf(device, under_netem=netem)
            self._add_chain(direction, device, 0.0, None)
        self.mechanisms.update({v: WHO_SETS["netem"][v] for v in imp.asked()})

    def _install_fallback(self) -> None:
        imp, b = self.impairment, self.bottleneck
        directions = self._directions()
        queue_of = {d: self.queues[d] for d, _, _ in directions} if imp.delayed else {}
        if imp.delayed:  # listening before any rule sends packets to the queues
            self._start_delay_lines(queue_of)
        if imp.rate_bps:
            self._add_tbf(b.egress, under_netem=False)
        # The chains count what each direction offers, even where nothing is dropped.
        for direction, device, loss in directions:
            self._add_chain(direction, device, loss, queue_of.get(direction))
        self.mechanisms.update({v: WHO_SETS["fallback"][v] for v in imp.asked()})

    def _directions(self) -> list[tuple[str, str, float]]:
        """(direction, device, loss) of each direction impaired: the data's on the egress, the
        ACKs' on the ingress unless the bottleneck has none (one direction of a link)."""
        b, imp = self.bottleneck, self.impairment
        out = [("data", b.egress, imp.loss)]
        if b.ingress:
            out.append(("ack", b.ingress, imp.ack_loss))
        return out

    # -- reading --------------------------------------------------------------------------------
    def check(self) -> None:
        """LabError if a delay line has died or unbound, or the kernel dropped in its queue.

        A queue with no program bound drops every packet sent to it: a capture made then is
        wrong without a sign.  Call before trusting a capture; counters() calls it too.
        """
        self._check_listeners()
        for d, c in self._delay_counters().items():
            k = c.kernel or {}
            if k.get("queue_dropped") or k.get("user_dropped"):
                raise LabError(f"the {d} delay line (queue {c.queue}) lost packets: "
                               f"{k['queue_dropped']} with its queue full, {k['user_dropped']} "
                               "undelivered to the program",
                               hint="lower the rate or the delay; the loss was not the asked one")

    def _check_listeners(self) -> None:
        if not self._delay_lines or self._removed:
            return
        queues = self._kernel_queues()
        for d, line in self._delay_lines.items():
            if not line.alive:
                raise LabError(f"the {d} delay line (queue {line.queue}, pid {line.proc.pid}) "
                               f"exited with code {line.proc.returncode}: packets sent to its "
                               "queue are dropped, anything captured since is wrong",
                               hint="remove() this impairment and apply it again")
            if line.queue not in queues:
                raise LabError(f"nothing is bound to NFQUEUE {line.queue} in "
                               f"{self.bottleneck.router}: its packets are dropped")

    def _kernel_queues(self) -> dict:
        text = self._run("cat", PROC_QUEUES, record=False, check=False).stdout
        return read_kernel_queues(text)

    def _delay_counters(self) -> dict[str, DelayLineCounters]:
        queues = self._kernel_queues() if self._delay_lines else {}
        out = {}
        for d, line in self._delay_lines.items():
            kq = queues.get(line.queue)
            program = line.program_stats()
            kernel = asdict(kq) if kq else (program or {}).get("kernel")
            out[d] = DelayLineCounters(d, line.queue, line.alive, line.proc.returncode,
                                       kernel, program)
        return out

    def _loss_counters(self, netem: dict[str, QdiscCounters] | None = None,
                       rate: dict[str, QdiscCounters] | None = None) -> dict[str, PathCounters]:
        """Each direction's offered packets (its chain's jump) and random drops: the DROP
        rule's, or netem's less its tbf child's (netem counts its child's drops as its own)."""
        if not self._chains:
            return {}
        sums = {d: [0, 0, 0, 0] for d in self._chains}
        for tool in ("iptables", "ip6tables"):
            text = self._run(tool, "-w", "-S", "-v", record=False).stdout
            for d, chain in self._chains.items():
                for line in text.splitlines():
                    m = re.search(r"-c (\d+) (\d+)", line)
                    if not m:
                        continue
                    jump = line.startswith(("-A FORWARD ", "-A OUTPUT "))
                    if jump and line.endswith(f"-j {chain}"):
                        sums[d][0] += int(m.group(1))
                        sums[d][1] += int(m.group(2))
                    elif line.startswith(f"-A {chain} ") and line.endswith("-j DROP"):
                        sums[d][2] += int(m.group(1))
                        sums[d][3] += int(m.group(2))
        devices = {"data": self.bottleneck.egress, "ack": self.bottleneck.ingress}
        for d in sums:
            q = (netem or {}).get(devices[d])
            if q is not None:
                child = (rate or {}).get(devices[d])
                sums[d][2] = q.dropped_packets - (child.dropped_packets if child else 0)
                sums[d][3] = None
        return {d: PathCounters(*v) for d, v in sums.items()}

    def _qdisc_counters(self) -> tuple[dict[str, QdiscCounters], dict[str, QdiscCounters]]:
        """(the rate's tbf, netem) counts, by device (``tc -s -j qdisc show``)."""
        rate, netem = {}, {}
        for dev in self._qdiscs:
            text = self._run("tc", "-s", "-j", "qdisc", "show", "dev", dev, record=False).stdout
            for q in json.loads(text or "[]"):
                ours = q.get("root") or q.get("parent") == RATE_CHILD_PARENT
                if not ours or q.get("kind") not in ("tbf", "netem"):
                    continue
                (rate if q["kind"] == "tbf" else netem)[dev] = QdiscCounters(
                    dev, q["kind"], q["bytes"], q["packets"], q["drops"], q["overlimits"],
                    q["backlog"], q["qlen"])
        return rate, netem

    def counters(self) -> Counters:
        """What the kernel counted so far (after remove(): the final counts).

        Raises LabError when a delay line has died (its path drops everything: see check()).
        """
        if self._removed:
            return self.final_counters or Counters()
        self._check_listeners()
        rate, netem = self._qdisc_counters()
        return Counters(self._loss_counters(netem, rate), rate, self._delay_counters(), netem)

    # -- undoing --------------------------------------------------------------------------------
    def remove(self) -> Counters:
        """Undo everything, rules before delay lines; return the final counts.  Idempotent."""
        if self._removed:
            return self.final_counters or Counters()
        loss = qdiscs = netem = {}
        try:  # the rules' counts go with the rules: read them first
            qdiscs, netem = self._qdisc_counters()
            loss = self._loss_counters(netem, qdiscs)
        except LabError:
            pass
        try:
            while self._undo:
                self._undo.pop()()
        finally:
            self._removed = True
            delay = {}
            for d, line in self._delay_lines.items():
                program = line.program_stats()
                delay[d] = DelayLineCounters(d, line.queue, line.alive, line.proc.returncode,
                                             (program or {}).get("kernel"), program)
            self.final_counters = Counters(loss, qdiscs, delay, netem)
        return self.final_counters

    def as_dict(self) -> dict:
        """For a sidecar: what was asked, which mechanism set it, the exact settings."""
        return {"impairment": asdict(self.impairment), "bottleneck": asdict(self.bottleneck),
                "mechanisms": dict(self.mechanisms), "settings": self.settings}

    def __enter__(self) -> "Applied":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


# -- the entry point ------------------------------------------------------------------------------
def apply(lab: Lab, bottleneck: Bottleneck | None, impairment: Impairment, *,
          mechanism: str = "auto", slot: int = 0, local: bool = False) -> Applied:
    """Install impairment on the bottleneck (None: ``lab.bottleneck``); undone by remove().

    ``mechanism``: "auto" (netem if the kernel has it, else the fallback), "netem" or
    "fallback" (either forced; "netem" fails where the kernel has none).  A bottleneck
    without ``ingress`` is one direction of a link: the data direction alone.  ``slot``: the
    k-th impairment on one router (its own chains and queues); ``local``: the router's own
    packets (pings from it) meet it too.
    """
    netem = use_netem(mechanism)
    applied = Applied(lab, bottleneck or lab.bottleneck, impairment, slot=slot, local=local)
    try:
        applied._install_netem() if netem else applied._install_fallback()
    except BaseException:
        applied.remove()
        raise
    return applied
