"""What can be asked of a path, and how each mechanism is told it: netem's words, tbf's words,
the delay line's command and its start, and the one question that chooses between them --
does this kernel have ``sch_netem``? -- asked once a process.

The lab's router (:mod:`.router`) and a host's own interface (:mod:`.host`) both apply an
:class:`Impairment` through these, so a value means the same wherever it is set:

==========  ==============================  =====================================================
value       a kernel with netem             without (the fallback)
==========  ==============================  =====================================================
rate,queue  ``tbf``, the same words (:func:`tbf_args`) both ways; netem's child where netem
            is there too (``parent 5053:1``, handle :data:`RATE_CHILD_HANDLE`)
loss        netem ``loss``                  the router: iptables ``statistic``; a host: the
                                            delay line's NF_DROP (:mod:`pcapstats.tools.delayline`)
delay       netem ``delay D [J]``           the NFQUEUE delay line (:func:`delay_line_argv`)
jitter
serialize   netem ``rate`` (the router's    the delay line's ``--rate-bps`` (each packet waits
            two directions, or the data's   size/rate behind the previous one, in a queue of
            alone: ``one_way``)             ``--queue-bytes``, the queue limit, tail-dropped)
==========  ==============================  =====================================================

So a packet meets the loss, then the delay (and serialisation), then the rate's queue, on
either host.  What still differs is netem's code (read, not run here: this machine has no
netem): with jitter and no serialisation netem lets packets whose delays cross overtake each
other, the delay line never does; with serialisation the delay line's queue is the queue limit
(a packet past it is dropped, as a link's full queue drops it, and tbf behind it meets
packets already at the rate), while netem's holds up to its packet limit
(:func:`netem_limit_packets`), so under overload netem queues longer.

Queue size: ``queue_bytes`` if given, else one bandwidth-delay product at the asked rate and
RTT 2 x (delay + jitter), at least :data:`QUEUE_FLOOR_PACKETS` full frames (so short RTTs
still absorb a burst), at most :data:`MAX_QUEUE_BYTES` (tbf's limit is 32-bit).  One BDP is the
classic size that lets a single Reno flow keep the link busy; more only adds queueing delay.
tbf's ``burst`` is the larger of two full frames and 1 ms at the rate (tbf's timer then needs
no faster tick than 1 kHz).

Rate, size and time texts (parsed by pcapstats.units) follow tc(8): ``kbit``/``mbit``/``gbit``
are bits per second (SI, ``kibit``... binary), ``bps``/``kbps``/``mbps``/``gbps`` are BYTES per
second (``1mbps`` is 8 Mbit/s); times ``s``/``ms``/``us`` (``sec``, ``msec``, ``usec`` too);
sizes ``b`` (or none), ``kb``/``mb`` (x1024, as tc), or ``p``/``pkt`` full frames of
:data:`FRAME_BYTES`.  A bare number is refused for rates and times (tc would read bits/s and
microseconds, rarely what was meant).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pcapstats.errors import UsageError
from pcapstats.units import FRAME_BYTES, parse_loss, parse_rate, parse_tc_size, parse_time
from pcapstats.lab.commands import LabError, checked

QUEUE_FLOOR_PACKETS = 16
# Bounds of what can be asked: beyond them a value is a typo, not an experiment.
MAX_DELAY_S = 60.0        # each way; the delay line holds every packet that long
MAX_RATE_BPS = 1e12       # 1 Tbit/s, far above what a veth carries
# tc counts rates in bytes/s (1bit is tbf's "no rate" and netem's none at all), and below
# 1 kbit/s one queue of frames takes minutes to drain: a unit left out.
MIN_RATE_BPS = 1e3
MAX_QUEUE_BYTES = 2**31   # far past any BDP here, and under tbf's 32-bit byte limit
MECHANISMS = ("auto", "netem", "fallback")
NETEM_LIMIT_PACKETS = 16384  # what netem may hold besides its rate's packets (the delay line's)
NETEM_MAX_LIMIT_PACKETS = 2**32 - 1  # tc reads netem's limit as a u32 and refuses more
MIN_FRAME_BYTES = 42      # the smallest frame (an ARP request): a byte queue in packets, at most
NETEM_HANDLE, RATE_CHILD_HANDLE = "5053:", "5054:"  # 0x5053 "PS"; tbf hangs from netem's class 1
RATE_CHILD_PARENT = NETEM_HANDLE.rstrip(":") + ":1"
# SCHED_FIFO priority of the delay lines (see delayline._tight_timers); 0 = a normal task.
DELAY_LINE_PRIORITY = 10
READY_TIMEOUT_S = 10.0    # a delay line binds its queue in well under this


# -- what to apply --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Impairment:
    """What a bottleneck does to packets.  Delay and jitter apply in EACH direction."""
    loss: float = 0.0  # fraction of data-direction packets dropped at random
    delay_s: float = 0.0  # one-way delay, each direction: RTT ~ 2 x delay_s + base
    jitter_s: float = 0.0  # per-packet delay uniform on delay_s +- jitter_s (see the docstring)
    rate_bps: float | None = None  # data direction (frames as tbf/netem count them)
    queue_bytes: int | None = None  # None: see default_queue_bytes
    ack_loss: float = 0.0  # fraction of ACK-direction packets dropped at random
    serialize: bool = False  # each packet also waits size/rate, both directions (netem's rate)
    one_way: bool = False  # serialisation on the data direction only; the way back: the delay
    queue_floor_bytes: int = 0  # the default queue holds at least this (a run's longest message)

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
        if self.one_way and not self.serialize:
            raise UsageError("one way is serialisation's: without --serialize the rate already "
                             "shapes only the way toward the receiver (tbf)",
                             hint="give --serialize too, or leave --one-way out")
        if self.queue_bytes is not None and self.queue_bytes > MAX_QUEUE_BYTES:
            raise UsageError(f"queue {self.queue_bytes:g} bytes is over 2 GiB, the most the lab "
                             "sets", hint="give it in kb, mb or p (full frames)")

    @classmethod
    def from_text(cls, *, loss: str | None = None, delay: str | None = None,
                  jitter: str | None = None, rate: str | None = None, queue: str | None = None,
                  ack_loss: str | None = None, serialize: bool = False, one_way: bool = False,
                  queue_floor_bytes: int = 0) -> "Impairment":
        """Build from CLI words: ``from_text(loss="10%", delay="20ms", rate="30mbit")``."""
        return cls(loss=parse_loss(loss) if loss else 0.0,
                   delay_s=parse_time(delay) if delay else 0.0,
                   jitter_s=parse_time(jitter) if jitter else 0.0,
                   rate_bps=parse_rate(rate) if rate else None,
                   queue_bytes=parse_tc_size(queue) if queue else None,
                   ack_loss=parse_loss(ack_loss) if ack_loss else 0.0, serialize=serialize,
                   one_way=one_way, queue_floor_bytes=queue_floor_bytes)

    def asked(self) -> list[str]:
        """The values asked, by the names a mechanisms record gives them."""
        return [name for name, on in (
            ("rate", self.rate_bps), ("queue", self.rate_bps), ("loss", self.loss),
            ("ack_loss", self.ack_loss), ("delay", self.delay_s or self.jitter_s),
            ("jitter", self.jitter_s), ("serialisation", self.serialize)) if on]

    @property
    def delayed(self) -> bool:
        """Packets go through a delay: a delay, jitter, or serialisation at the rate."""
        return self.delay_s > 0 or self.jitter_s > 0 or self.serialize

    def default_queue_bytes(self) -> int:
        """One BDP at rate x 2 x (delay + jitter), at least QUEUE_FLOOR_PACKETS full frames and
        ``queue_floor_bytes``, at most MAX_QUEUE_BYTES (tbf's limit is 32-bit)."""
        bdp = (self.rate_bps or 0) * 2 * (self.delay_s + self.jitter_s) / 8
        return min(max(math.ceil(bdp), QUEUE_FLOOR_PACKETS * FRAME_BYTES,
                       self.queue_floor_bytes), MAX_QUEUE_BYTES)

    def serialises(self, direction: str) -> bool:
        """Does the ``direction`` ("data": toward the receivers, "ack": back) wait size/rate?"""
        return self.serialize and (direction == "data" or not self.one_way)

    @property
    def queue_limit_bytes(self) -> int:
        return self.queue_bytes or self.default_queue_bytes()

    def tbf_burst_bytes(self) -> int:
        return max(2 * FRAME_BYTES, math.ceil((self.rate_bps or 0) / 8 * 1e-3))


# -- netem's and tbf's words ----------------------------------------------------------------------
def netem_args(imp: Impairment, *, loss: float, rate_child: bool,
               serialize: bool | None = None) -> list[str]:
    """netem's words for one direction: ``limit N [delay D [J]] [loss P%] [rate R]``.

    netem drops (``loss``) and delays; with ``serialize`` (default: ``imp.serialize``) its
    ``rate`` makes each packet wait size/rate, as the delay line does.  The rate limit and
    its queue are tbf's on every host (:func:`tbf_args`, under netem's class 1 when
    ``rate_child``), so both mechanisms shape alike.  The limit is every packet netem may
    hold (:func:`netem_limit_packets`): netem's drops are then its loss alone.
    """
    serialize = imp.serialize if serialize is None else serialize
    words = ["limit", str(netem_limit_packets(imp, rate_child=rate_child))]
    if imp.delayed:
        words += ["delay", f"{round(imp.delay_s * 1e6)}us"]
        if imp.jitter_s:
            words.append(f"{round(imp.jitter_s * 1e6)}us")
    if loss:
        words += ["loss", f"{loss * 100:.6f}%"]
    if serialize:
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


def tbf_settings(imp: Impairment) -> dict:
    """tbf's parameters for the rate and its queue (a sidecar's ``settings.tbf``)."""
    return {"rate_bps": round(imp.rate_bps), "burst_bytes": imp.tbf_burst_bytes(),
            "limit_bytes": imp.queue_limit_bytes}


def tbf_args(imp: Impairment) -> list[str]:
    """tbf's words for them: ``rate Rbit burst B limit L`` (bytes)."""
    t = tbf_settings(imp)
    return ["rate", f"{t['rate_bps']}bit", "burst", str(t["burst_bytes"]),
            "limit", str(t["limit_bytes"])]


# -- does this kernel have netem? -----------------------------------------------------------------
_probes: dict[str, tuple[bool, str]] = {}   # kernel release -> (netem, what tc said)


def netem_probe() -> tuple[bool, str]:
    """(does the running kernel have sch_netem, tc's last word when it does not).

    Asked by adding a netem on the loopback of a throwaway network namespace (``unshare
    --net``): the kernel itself answers (it loads the module if there is one) and no interface
    of this host or of a lab is touched.  /proc/modules and ``modprobe -n`` cannot tell on a
    kernel built without modules (this one: ``CONFIG_MODULES is not set``, ``#
    CONFIG_NET_SCH_NETEM is not set``).  Kept for the process: a kernel does not change under
    it.  Any failure counts as no netem: the fallback works on every kernel.
    """
    kernel = os.uname().release
    if kernel not in _probes:
        if shutil.which("unshare") is None:
            _probes[kernel] = (False, "cannot ask: unshare is not installed")
        else:
            probe = checked(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root",
                             "netem"], check=False)
            said = (probe.stderr.strip().splitlines() or [""])[-1]
            _probes[kernel] = (probe.returncode == 0, said)
    return _probes[kernel]


def netem_available() -> bool:
    return netem_probe()[0]


def use_netem(mechanism: str) -> bool:
    """The choice: "auto" (netem if the kernel has it), "netem" or "fallback" (forced; a
    LabError where the kernel has no netem)."""
    if mechanism not in MECHANISMS:
        raise UsageError(f"unknown impairment mechanism {mechanism!r}",
                         hint=f"one of {', '.join(MECHANISMS)}")
    if mechanism == "fallback":
        return False
    netem, said = netem_probe()
    if mechanism == "netem" and not netem:
        raise LabError(f"this kernel has no sch_netem ({said})",
                       hint="use mechanism 'auto' or 'fallback'")
    return netem


# -- the delay line -------------------------------------------------------------------------------
def delay_line_argv(queue: int, imp: Impairment, stats: str | os.PathLike, *,
                    interval_s: float, loss: float | None = None,
                    serialize: bool | None = None) -> list[str]:
    """The delay line's command for one NFQUEUE: delay and jitter, with ``loss`` its drops
    (a host's), with ``serialize`` (default: ``imp.serialize``) its serialisation at the rate
    in a queue of the queue limit, its stats rewritten to ``stats`` every ``interval_s``."""
    argv = [sys.executable, "-m", "pcapstats.tools.delayline", "--queue", str(queue),
            "--delay-ms", repr(imp.delay_s * 1e3), "--jitter-ms", repr(imp.jitter_s * 1e3)]
    if loss is not None:
        argv += ["--loss", repr(loss)]
    if imp.serialize if serialize is None else serialize:
        argv += ["--rate-bps", repr(imp.rate_bps), "--queue-bytes", str(imp.queue_limit_bytes)]
    return argv + ["--stats", str(stats), "--stats-interval", str(interval_s),
                   "--realtime-priority", str(DELAY_LINE_PRIORITY)]


def delay_line_hold_s(imp: Impairment) -> float:
    """The longest a delay line holds a packet: what its stop may take to release."""
    return imp.delay_s + imp.jitter_s + (
        imp.queue_limit_bytes * 8 / imp.rate_bps if imp.serialize else 0.0)


def wait_ready(proc: subprocess.Popen, queue: int, stdout: str | os.PathLike,
               stderr: str | os.PathLike, timeout_s: float = READY_TIMEOUT_S) -> str | None:
    """None once the delay line says (on its stdout, a file) it has bound its queue; else why
    not -- its last word on stderr, or that it did not answer (it is then killed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if f"ready queue={queue}" in Path(stdout).read_text():
                return None
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            try:
                err = Path(stderr).read_text().strip().splitlines()
            except FileNotFoundError:
                err = []
            return err[-1] if err else f"exit code {proc.returncode}"
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    return f"no answer within {timeout_s:g} s"
