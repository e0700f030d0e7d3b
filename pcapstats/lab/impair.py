"""Loss, delay, jitter and rate on a lab's bottleneck: with netem where the kernel has it, else
with tbf + iptables ``statistic`` + an NFQUEUE delay line.  Everything is undone.

    imp = Impairment(loss=0.1, delay_s=0.020, rate_bps=30e6)
    applied = apply(lab, lab.bottleneck, imp)
    applied.mechanisms   # {"rate": "tbf", "loss": "iptables-statistic", "delay": ...}
    applied.counters()   # what the kernel counted: drops, tbf backlog, delay line's queue
    applied.remove()     # also done when the lab closes

Where each value goes (the router's forwarding path, never a sender's own output: a drop there
is re-sent without reaching the wire; see ../shared/DESIGN.md):

==========  ==============================  =====================================================
value       netem kernel                    fallback (this machine: no sch_netem)
==========  ==============================  =====================================================
rate,queue  ``tbf`` on the egress toward the receivers, the same words both ways: the root
            qdisc, or netem's child (``parent 5053:1``) where netem is there too
loss        netem ``loss`` on the data      iptables ``-m statistic --mode random -j DROP`` in the
            egress                          router's FORWARD path, data direction (IPv4 and IPv6)
ack_loss    netem ``loss`` (ack egress)     the same rule on the ACK direction
delay       netem ``delay`` on both         :mod:`pcapstats.tools.delayline`: NFQUEUE, one queue and
jitter      egresses                        one program per direction (data 0, ACKs 1), uniform
serialize   netem ``rate`` on both          the delay lines with ``--rate-bps``: each packet waits
            egresses                        size/rate behind the previous one, up to a queue
                                            limit's backlog (tbf alone passes a lone packet at
                                            once: no latency grows with size).  Under overload
                                            this backlog and tbf's queue add up
==========  ==============================  =====================================================

So a packet meets, on either host: the loss, then the delay (and serialisation), then the
rate's queue.  Both mechanisms keep the two chains below (on a netem host with no rule in them:
they count what each direction offers, the loss ratio's denominator).  Where they still
differ (netem's code, not run here): with jitter and no serialisation netem reorders packets
whose delays cross, the delay line never does; with serialisation netem's own queue holds what
the delay line would pass on to tbf past one queue of backlog, so under overload netem queues
longer before tbf drops.

``delay_s`` is one-way and applied in EACH direction, so ping's RTT is about 2 x delay + the
base RTT (about 0.1 ms here, plus ~0.5 ms for the two delay-line passes).  The fallback's
iptables work lives in two chains of the router's filter table, ``PSL_DATA`` and ``PSL_ACK``,
entered from FORWARD by ``-o <egress>`` / ``-o <ingress>``; the jump's counter is the number of
packets offered, the DROP rule's the number lost.  In each chain the loss rule comes before the
NFQUEUE rule, so a lost packet is not held for nothing.  FORWARD runs before the egress
qdisc: data packets are delayed, then queue in tbf.

Queue size: ``queue_bytes`` if given, else one bandwidth-delay product at the asked rate and
RTT 2 x (delay + jitter), but at least :data:`QUEUE_FLOOR_PACKETS` full frames (so short RTTs
still absorb a burst).  One BDP is the classic size that lets a single Reno flow keep the link
busy; more only adds queueing delay.  tbf's ``burst`` is the larger of two full frames and
1 ms at the rate (tbf's timer then needs no faster tick than 1 kHz).

Rate, size and time texts (parsed by pcapstats.units) follow tc(8): ``kbit``/``mbit``/``gbit`` are bits per second (SI,
``kibit``... binary), ``bps``/``kbps``/``mbps``/``gbps`` are BYTES per second (``1mbps`` is 8
Mbit/s); times ``s``/``ms``/``us`` (``sec``, ``msec``, ``usec`` too); sizes ``b`` (or none),
``kb``/``mb`` (x1024, as tc), or ``p``/``pkt`` full frames of :data:`FRAME_BYTES`.  A bare number
is refused for rates and times (tc would read bits/s and microseconds, rarely what was meant).
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable

from pcapstats.errors import UsageError
from pcapstats.tools.delayline import PROC_QUEUES, read_kernel_queues
from pcapstats.units import FRAME_BYTES, parse_loss, parse_rate, parse_tc_size, parse_time
from pcapstats.lab.commands import LabError
from pcapstats.lab.netns import Bottleneck, Lab


QUEUE_FLOOR_PACKETS = 16
# Upper bounds of what can be asked: beyond them a value is a typo, not an experiment.
MAX_DELAY_S = 60.0        # each way; the delay line holds every packet that long
MAX_RATE_BPS = 1e12       # 1 Tbit/s, far above what a veth carries
# ...and a lower one: tc counts rates in bytes/s (1bit is tbf's "no rate" and netem's none at
# all), and below 1 kbit/s one queue of frames takes minutes to drain: a unit left out.
MIN_RATE_BPS = 1e3
MAX_QUEUE_BYTES = 2**31   # far past any BDP here, and under tbf's 32-bit byte limit
DATA_QUEUE, ACK_QUEUE = 0, 1  # NFQUEUE numbers (per namespace)
CHAINS = {"data": "PSL_DATA", "ack": "PSL_ACK"}
MECHANISMS = ("auto", "netem", "fallback")
NETEM_LIMIT_PACKETS = 16384  # what netem may hold besides its rate's packets (the delay line's)
NETEM_MAX_LIMIT_PACKETS = 2**32 - 1  # tc reads netem's limit as a u32 and refuses more
MIN_FRAME_BYTES = 42      # the smallest frame (an ARP request): a byte queue in packets, at most
NETEM_HANDLE, RATE_CHILD_HANDLE = "5053:", "5054:"  # 0x5053 "PS"; tbf hangs from netem's class 1
_READY_TIMEOUT_S = 10.0
# SCHED_FIFO priority of the delay lines (see delayline._tight_timers); 0 = a normal task.
DELAY_LINE_PRIORITY = 10
_STATS_INTERVAL_S = 0.5


# -- what to apply --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Impairment:
    """What a bottleneck does to packets.  Delay and jitter apply in EACH direction."""
    loss: float = 0.0  # fraction of data-direction packets dropped at random
    delay_s: float = 0.0  # one-way delay, each direction: RTT ~ 2 x delay_s + base
    jitter_s: float = 0.0  # per-packet delay uniform on delay_s +- jitter_s (no reordering)
    rate_bps: float | None = None  # data direction (frames as tbf/netem count them)
    queue_bytes: int | None = None  # None: see default_queue_bytes
    ack_loss: float = 0.0  # fraction of ACK-direction packets dropped at random
    serialize: bool = False  # each packet also waits size/rate, both directions (netem's rate)

    def __post_init__(self):
        for name in ("loss", "ack_loss"):
            if not 0 <= getattr(self, name) <= 1:
                raise UsageError(f"{name} {getattr(self, name)!r} is not a fraction in [0, 1]")
        if self.delay_s < 0 or self.jitter_s < 0:
            raise UsageError("delay and jitter must not be negative")
        if self.delay_s > MAX_DELAY_S:
            raise UsageError(f"delay {self.delay_s:g} s is over {MAX_DELAY_S:g} s each way",
                             hint="delay is one way, e.g. 20ms for an RTT of about 40 ms")
        if self.jitter_s > self.delay_s:
            raise UsageError(f"jitter {self.jitter_s * 1e3:g} ms exceeds delay "
                             f"{self.delay_s * 1e3:g} ms",
                             hint="a packet cannot leave before it arrived: keep jitter <= delay")
        if self.rate_bps is not None and self.rate_bps <= 0:
            raise UsageError(f"rate {self.rate_bps!r} bit/s must be above zero")
        if self.rate_bps is not None and 0 < self.rate_bps < MIN_RATE_BPS:
            raise UsageError(f"rate {self.rate_bps:g} bit/s is under 1 kbit/s",
                             hint="rates are bits per second with a unit, e.g. 30mbit")
        if self.rate_bps is not None and self.rate_bps > MAX_RATE_BPS:
            raise UsageError(f"rate {self.rate_bps:g} bit/s is over 1 Tbit/s",
                             hint="leave the rate out for no limit")
        if self.queue_bytes is not None and self.queue_bytes < FRAME_BYTES:
            raise UsageError(f"queue {self.queue_bytes} bytes cannot hold one full frame "
                             f"({FRAME_BYTES} bytes)")
        if self.serialize and not self.rate_bps:
            raise UsageError("serialisation needs a link rate", hint="give --rate too")
        if self.queue_bytes is not None and self.queue_bytes > MAX_QUEUE_BYTES:
            raise UsageError(f"queue {self.queue_bytes:g} bytes is over 2 GiB, the most the lab "
                             "sets", hint="give it in kb, mb or p (full frames)")

    @classmethod
    def from_text(cls, *, loss: str | None = None, delay: str | None = None,
                  jitter: str | None = None, rate: str | None = None, queue: str | None = None,
                  ack_loss: str | None = None, serialize: bool = False) -> "Impairment":
        """Build from CLI words: ``from_text(loss="10%", delay="20ms", rate="30mbit")``."""
        return cls(loss=parse_loss(loss) if loss else 0.0,
                   delay_s=parse_time(delay) if delay else 0.0,
                   jitter_s=parse_time(jitter) if jitter else 0.0,
                   rate_bps=parse_rate(rate) if rate else None,
                   queue_bytes=parse_tc_size(queue) if queue else None,
                   ack_loss=parse_loss(ack_loss) if ack_loss else 0.0, serialize=serialize)

    @property
    def delayed(self) -> bool:
        """Packets go through a delay: a delay, jitter, or serialisation at the rate."""
        return self.delay_s > 0 or self.jitter_s > 0 or self.serialize

    def default_queue_bytes(self) -> int:
        """One BDP at rate x 2 x (delay + jitter), at least QUEUE_FLOOR_PACKETS full frames and
        at most MAX_QUEUE_BYTES (tbf's limit is 32-bit)."""
        bdp = (self.rate_bps or 0) * 2 * (self.delay_s + self.jitter_s) / 8
        return min(max(math.ceil(bdp), QUEUE_FLOOR_PACKETS * FRAME_BYTES), MAX_QUEUE_BYTES)

    @property
    def queue_limit_bytes(self) -> int:
        return self.queue_bytes or self.default_queue_bytes()

    def tbf_burst_bytes(self) -> int:
        return max(2 * FRAME_BYTES, math.ceil((self.rate_bps or 0) / 8 * 1e-3))


# -- the netem kernel's words ------------------------------------------------------------------
def netem_args(imp: Impairment, *, loss: float, rate_child: bool) -> list[str]:
    """netem's words for one direction: ``limit N [delay D [J]] [loss P%] [rate R]``.

    netem drops (``loss``) and delays; with ``serialize`` its ``rate`` makes each packet wait
    size/rate, as the delay line does.  The rate limit and its queue are tbf's on every host
    (:func:`tbf_args`, under netem's class 1 when ``rate_child``), so both mechanisms shape
    alike.  The limit is every packet netem may hold (:func:`netem_limit_packets`): netem's
    drops are then its loss alone.
    """
    words = ["limit", str(netem_limit_packets(imp, rate_child=rate_child))]
    if imp.delayed:
        words += ["delay", f"{round(imp.delay_s * 1e6)}us"]
        if imp.jitter_s:
            words.append(f"{round(imp.jitter_s * 1e6)}us")
    if loss:
        words += ["loss", f"{loss * 100:.6f}%"]
    if imp.serialize:
        words += ["rate", f"{round(imp.rate_bps)}bit"]
    return words


def netem_limit_packets(imp: Impairment, *, rate_child: bool) -> int:
    """What netem may hold: NETEM_LIMIT_PACKETS (the delay line's queue length), the full
    frames in flight at the rate during the delay, with serialisation its backlog, and under a
    tbf child that tbf's queue in the smallest frames (netem counts its child's packets as its
    own); at most the u32 tc reads."""
    in_delay = (imp.rate_bps or 0) * (imp.delay_s + imp.jitter_s) / 8 / FRAME_BYTES
    backlog = imp.queue_limit_bytes / FRAME_BYTES if imp.serialize else 0.0
    child = imp.queue_limit_bytes / MIN_FRAME_BYTES if rate_child else 0.0
    return min(NETEM_LIMIT_PACKETS + math.ceil(in_delay + backlog + child),
               NETEM_MAX_LIMIT_PACKETS)


def tbf_args(imp: Impairment) -> list[str]:
    """tbf's words for the rate and its queue: ``rate Rbit burst B limit L`` (bytes)."""
    return ["rate", f"{round(imp.rate_bps)}bit", "burst", str(imp.tbf_burst_bytes()),
            "limit", str(imp.queue_limit_bytes)]


# -- what was applied, and what the kernel counted ----------------------------------------------
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
    """``tc -s qdisc`` of one root qdisc (tbf or netem)."""
    device: str
    kind: str
    sent_bytes: int
    sent_packets: int
    dropped_packets: int  # queue full (tbf: limit) or netem loss
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


class _DelayLineProcess:
    """The delay line of one direction, as a Lab process in the router's namespace."""

    def __init__(self, lab: Lab, host: str, direction: str, queue: int, imp: Impairment,
                 stats_dir: str):
        self.lab, self.host, self.direction, self.queue = lab, host, direction, queue
        self.stats_path = os.path.join(stats_dir, f"delayline-{queue}.json")
        self.argv = [sys.executable, "-m", "pcapstats.tools.delayline", "--queue", str(queue),
                     "--delay-ms", repr(imp.delay_s * 1e3), "--jitter-ms",
                     repr(imp.jitter_s * 1e3), "--stats", self.stats_path,
                     "--stats-interval", str(_STATS_INTERVAL_S),
                     *(["--rate-bps", repr(imp.rate_bps), "--backlog-bytes",
                        str(imp.queue_limit_bytes)] if imp.serialize else []),
                     "--realtime-priority", str(DELAY_LINE_PRIORITY)]
        self.max_delay_s = imp.delay_s + imp.jitter_s + (
            imp.queue_limit_bytes * 8 / imp.rate_bps if imp.serialize else 0.0)
        self.final: dict | None = None
        self.stderr_path = os.path.join(stats_dir, f"delayline-{queue}.err")
        with open(self.stderr_path, "w") as err:  # a file: a pipe nobody reads could fill
            self.proc = lab.popen(host, *self.argv, stdout=subprocess.PIPE, stderr=err,
                                  text=True)

    def wait_ready(self) -> None:
        """Return once it has bound its queue; LabError (and the process gone) if it cannot."""
        ready = select.select([self.proc.stdout], [], [], _READY_TIMEOUT_S)[0]
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != f"ready queue={self.queue}":
            err = f"no answer within {_READY_TIMEOUT_S:g} s"
            if ready and not line:  # end of its output: it is exiting
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is not None:  # it said why on stderr
                with open(self.stderr_path) as f:
                    err = (f.read().strip().splitlines() or ["no message"])[-1]
            self.lab.stop(self.proc, signal.SIGKILL)
            raise LabError(f"the delay line for queue {self.queue} in {self.host} did not "
                           f"start: {err}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def program_stats(self) -> dict | None:
        if self.final is not None:
            return self.final
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def stop(self) -> None:
        """SIGTERM, wait while it releases what it holds, keep its final stats."""
        if self.final is not None or self.proc.stdout is None or self.proc.stdout.closed:
            self.lab.stop(self.proc, signal.SIGKILL)  # nothing to read: just make sure it ended
            return
        if self.alive:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=self.max_delay_s + 5)
        except subprocess.TimeoutExpired:
            self.lab.stop(self.proc, signal.SIGKILL)
            out = ""
        lines = (out or "").strip().splitlines()
        if lines and lines[-1].startswith("{"):
            self.final = json.loads(lines[-1])


class Applied:
    """An impairment installed on a bottleneck: which mechanism set what, counters, removal.

    ``mechanisms`` maps each value asked for ("rate", "queue", "loss", "ack_loss", "delay",
    "jitter") to what set it ("netem", "tbf", "iptables-statistic", "nfqueue-delayline").
    ``settings`` holds the parameters and every command run, in order.
    """

    def __init__(self, lab: Lab, bottleneck: Bottleneck, impairment: Impairment):
        self.lab, self.bottleneck, self.impairment = lab, bottleneck, impairment
        self.mechanisms: dict[str, str] = {}
        self.settings: dict = {"commands": []}
        self.final_counters: Counters | None = None
        self._undo: list[Callable[[], object]] = []
        self._delay_lines: dict[str, _DelayLineProcess] = {}
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
        self.settings["tbf"] = {"rate_bps": round(self.impairment.rate_bps),
                                "burst_bytes": self.impairment.tbf_burst_bytes(),
                                "limit_bytes": self.impairment.queue_limit_bytes}
        if under_netem:     # removed with its parent
            self._run("tc", "qdisc", "add", "dev", device, "parent",
                      NETEM_HANDLE.rstrip(":") + ":1", "handle", RATE_CHILD_HANDLE, "tbf",
                      *words)
        else:
            self._add_qdisc(device, "tbf", *words)
        self.mechanisms["rate"] = self.mechanisms["queue"] = "tbf"

    def _start_delay_lines(self, queues: dict[str, int]) -> None:
        """One program per direction, started together; returns once all are listening."""
        stats_dir = self.settings["stats_dir"] = self.lab.scratch_dir("delayline")
        self._undo.append(lambda: shutil.rmtree(stats_dir, True))
        for direction, queue in queues.items():
            line = _DelayLineProcess(self.lab, self.bottleneck.router, direction, queue,
                                     self.impairment, stats_dir)
            self._delay_lines[direction] = line
            self.settings["commands"].append(shlex.join(line.argv))
            self._undo.append(line.stop)
        for line in self._delay_lines.values():
            line.wait_ready()

    def _add_chain(self, direction: str, device: str, loss: float, queue: int | None) -> None:
        """Chain PSL_DATA/PSL_ACK: random DROP, then NFQUEUE; FORWARD jumps in last."""
        chain = CHAINS[direction]
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
        self._undo.append(lambda: self._iptables("-D", "FORWARD", "-o", device, "-j", chain,
                                                 record=False, check=False))
        self._iptables("-A", "FORWARD", "-o", device, "-j", chain)
        self._chains[direction] = chain

    def _install_netem(self) -> None:
        """netem on each direction that drops, delays or serialises; tbf for the rate, under
        the data direction's netem; chains that count what each direction offers."""
        imp, b = self.impairment, self.bottleneck
        self.settings["netem"] = {}
        for direction, device, loss in (("data", b.egress, imp.loss),
                                        ("ack", b.ingress, imp.ack_loss)):
            netem = bool(loss or imp.delayed)
            rate_child = netem and direction == "data" and bool(imp.rate_bps)
            if netem:
                words = netem_args(imp, loss=loss, rate_child=rate_child)
                self.settings["netem"][device] = words
                self._add_qdisc(device, "handle", NETEM_HANDLE, "netem", *words)
            if direction == "data" and imp.rate_bps:
                self._add_tbf(device, under_netem=netem)
            self._add_chain(direction, device, 0.0, None)
        for value, asked in (("loss", imp.loss), ("ack_loss", imp.ack_loss),
                             ("delay", imp.delay_s or imp.jitter_s), ("jitter", imp.jitter_s),
                             ("serialisation", imp.serialize)):
            if asked:
                self.mechanisms[value] = "netem"

    def _install_fallback(self) -> None:
        imp, b = self.impairment, self.bottleneck
        if imp.delayed:  # listening before any rule sends packets to the queues
            self._start_delay_lines({"data": DATA_QUEUE, "ack": ACK_QUEUE})
            if imp.delay_s or imp.jitter_s:
                self.mechanisms["delay"] = "nfqueue-delayline"
            if imp.serialize:
                self.mechanisms["serialisation"] = "nfqueue-delayline"
            if imp.jitter_s:
                self.mechanisms["jitter"] = "nfqueue-delayline"
        if imp.rate_bps:
            self._add_tbf(b.egress, under_netem=False)
        # The chains count what each direction offers, even where nothing is dropped.
        queue_of = {"data": DATA_QUEUE, "ack": ACK_QUEUE} if imp.delayed else {}
        for direction, device, loss in (("data", b.egress, imp.loss),
                                        ("ack", b.ingress, imp.ack_loss)):
            self._add_chain(direction, device, loss, queue_of.get(direction))
        if imp.loss:
            self.mechanisms["loss"] = "iptables-statistic"
        if imp.ack_loss:
            self.mechanisms["ack_loss"] = "iptables-statistic"

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
                    if line.startswith("-A FORWARD") and line.endswith(f"-j {chain}"):
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
                ours = q.get("root") or str(q.get("parent", "")) == \
                    NETEM_HANDLE.rstrip(":") + ":1"
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
_netem_cache: dict[str, bool] = {}


def netem_available(lab: Lab, host: str) -> bool:
    """Does the running kernel have sch_netem?  Asked by adding one on host's loopback.

    ``tc qdisc add dev lo root netem`` inside a lab namespace asks the kernel itself (it loads
    the module if there is one) and touches nothing outside the lab.  /proc/modules and
    ``modprobe -n`` cannot tell on a kernel built without modules (this one: its
    /proc/config.gz says ``CONFIG_MODULES is not set`` and ``# CONFIG_NET_SCH_NETEM is not
    set``).  The answer is kept for the process: a kernel does not change under it.
    """
    kernel = os.uname().release
    if kernel not in _netem_cache:
        probe = lab.run(host, "tc", "qdisc", "add", "dev", "lo", "root", "netem", check=False)
        if probe.returncode == 0:
            lab.run(host, "tc", "qdisc", "del", "dev", "lo", "root", check=False)
        elif "unknown" not in probe.stderr.lower():
            raise LabError(f"cannot tell whether the kernel has netem: {probe.stderr.strip()}")
        _netem_cache[kernel] = probe.returncode == 0
    return _netem_cache[kernel]


def apply(lab: Lab, bottleneck: Bottleneck | None, impairment: Impairment, *,
          mechanism: str = "auto") -> Applied:
    """Install impairment on the bottleneck (None: ``lab.bottleneck``); undone by remove().

    ``mechanism``: "auto" (netem if the kernel has it, else the fallback), "netem" or
    "fallback" (either forced; "netem" fails where the kernel has none).
    """
    if mechanism not in MECHANISMS:
        raise UsageError(f"unknown impairment mechanism {mechanism!r}",
                         hint=f"one of {', '.join(MECHANISMS)}")
    bottleneck = bottleneck or lab.bottleneck
    use_netem = mechanism == "netem" or (mechanism == "auto"
                                         and netem_available(lab, bottleneck.router))
    if mechanism == "netem" and not netem_available(lab, bottleneck.router):
        raise LabError("this kernel has no sch_netem", hint="use mechanism 'auto' or 'fallback'")
    applied = Applied(lab, bottleneck, impairment)
    try:
        applied._install_netem() if use_netem else applied._install_fallback()
    except BaseException:
        applied.remove()
        raise
    return applied
