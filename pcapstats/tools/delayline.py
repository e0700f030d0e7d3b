"""A delay line for kernels without ``sch_netem``: hold queued packets, release them in order.

Run inside the router's network namespace (NFQUEUE queues are per namespace)::

    python3 -m pcapstats.tools.delayline --queue 0 --delay-ms 25 [--jitter-ms 5] [--stats F]

An iptables rule ``-j NFQUEUE --queue-num N`` hands each forwarded packet to the kernel's
``nfnetlink_queue``; the kernel keeps the packet and tells this program its id.  The program
answers, ``delay`` later, with an ACCEPT verdict and the packet goes on its way.  Only ids
travel: the queue is bound in copy mode META, the payload never crosses into user space.

The protocol is spoken over a plain ``AF_NETLINK`` / ``NETLINK_NETFILTER`` socket with the
standard library (message layouts from the kernel's uapi ``linux/netfilter/nfnetlink.h`` and
``nfnetlink_queue.h``), so nothing needs a compiler or ``libnetfilter_queue``.

Timing and order:
- with ``--rate-bps R`` each packet first waits its serialisation at R: it leaves the "link"
  size x 8 / R after the previous one left it (or after it arrived, if the link was idle),
  size being its IP length plus an Ethernet header, as netem's ``rate`` does.  Only the first
  six bytes of each packet are copied to read its length.  The bytes waiting for the link are
  the link's queue, at most ``--queue-bytes`` (the lab passes the bottleneck's queue limit):
  a packet that would make it longer is dropped on arrival (``NF_DROP``, counted apart from
  ``--loss``: a full queue's tail drop).  So a train of any length up to the queue leaves at
  R exactly -- none of it is handed on early -- and the rate's own qdisc (tbf) behind it,
  at the same rate, meets packets already R apart;
- a packet's due time is its arrival (when its message is read) + its delay; with jitter the
  delay is drawn per packet, uniform on [delay - jitter, delay + jitter] (netem's default when it
  has no distribution table) or ``--distribution normal`` (mean delay, standard deviation
  jitter, cut at 0);
- packets are never reordered: a due time earlier than the previous packet's is raised to it
  (as netem does when it also limits the rate).  When packets arrive closer together than
  2 x jitter this pushes the spread upwards; at ping's pace it never binds;
- at each release instant ONE ``NFQNL_MSG_VERDICT_BATCH`` accepts every id up to the newest due
  one: the kernel's queue is in id order, so arrival order is kept by construction;
- with ``--loss P`` each packet is dropped on arrival with probability P (``NF_DROP``, its own
  verdict, before any delay or serialisation, as netem's loss): lost for real, also for a
  host's own packets -- an iptables DROP on a host's own output is refused to the sending
  socket, which sends again at once, while a packet a queue program drops has left it.

Capacity: the kernel queue's length (``--maxlen``) and the socket's receive buffer are raised
(the defaults, 1024 packets and ~200 kB, overflowed at 100 Mbit/s x 50 ms).  Overflows are not
hidden: the kernel counts them in ``/proc/net/netfilter/nfnetlink_queue`` (queue_dropped,
user_dropped), read into the stats, and an ``ENOBUFS`` from the socket is counted too.

Life cycle (see ../shared/DESIGN.md): packets of a queue nobody listens to are dropped, so
this program binds first and prints ``ready queue=N`` on stdout; only then is the rule added,
and the rule is removed before the program is stopped.  On SIGTERM/SIGINT it keeps releasing
on schedule what it holds (and what still arrives) for at most delay + jitter + 0.2 s, accepts
whatever is left, prints its stats as one JSON line on stdout (and to ``--stats``) and exits 0.
``--stats F --stats-interval S`` also rewrites F every S seconds while running.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import errno
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass

# linux/netlink.h
NETLINK_NETFILTER = 12
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
SOL_NETLINK = 270
# linux/netfilter/nfnetlink.h, nfnetlink_queue.h
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 1, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META, NFQNL_COPY_PACKET = 1, 2
NFQA_PAYLOAD = 10
ETHERNET_HEADER = 14          # a frame's bytes on the link: the IP packet and this header
COPY_BYTES = 6                # enough of each packet for its length (IPv4 @2, IPv6 @4)
FULL_FRAME = 1514
DEFAULT_QUEUE_BYTES = 2 * FULL_FRAME   # the serialisation queue without --queue-bytes
NF_DROP, NF_ACCEPT = 0, 1

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, portid (host order)
_NFGENMSG = struct.Struct("!BBH")  # family, version, res_id (queue number, network order)
_NLATTR = struct.Struct("=HH")  # len, type (host order)
_HDR_LEN = _NLMSGHDR.size + _NFGENMSG.size
# A packet message's first attribute is NFQA_PACKET_HDR (the kernel builds it first): its
# packet_id (be32) then sits at a fixed offset.  Anything else is walked attribute by attribute.
_FIRST_ATTR_AT = _HDR_LEN
_PACKET_TYPE = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
_LEN_TYPE = struct.Struct("=IH")

PROC_QUEUES = "/proc/net/netfilter/nfnetlink_queue"
DEFAULT_MAXLEN = 16384
DEFAULT_RCVBUF_BYTES = 32 << 20
DRAIN_MARGIN_S = 0.2


class DelayLineError(Exception):
    """The queue cannot be bound or configured; the message is one line for the caller."""


@dataclass
class KernelQueue:
    """One line of /proc/net/netfilter/nfnetlink_queue: the kernel's own counts for a queue."""
    queue: int
    portid: int
    held: int  # queue_total: packets waiting for a verdict right now
    copy_mode: int
    copy_range: int
    queue_dropped: int  # dropped because the queue was full (maxlen)
    user_dropped: int  # dropped because the message could not reach the program (ENOBUFS)
    id_sequence: int  # id of the last packet queued: packets queued since the bind


def read_kernel_queues(text: str | None = None) -> dict[int, KernelQueue]:
    """Parse /proc/net/netfilter/nfnetlink_queue (this namespace's, or the text given)."""
    if text is None:
        try:
            with open(PROC_QUEUES) as f:
                text = f.read()
        except FileNotFoundError:
            return {}
    queues = {}
    for line in text.splitlines():
        fields = [int(x) for x in line.split()]
        if len(fields) >= 8:
            queues[fields[0]] = KernelQueue(*fields[:8])
    return queues


def _attr(kind: int, payload: bytes) -> bytes:
    data = _NLATTR.pack(_NLATTR.size + len(payload), kind) + payload
    return data + bytes(-len(data) % 4)


def _message(msg_type: int, queue: int, attrs: bytes, flags: int, seq: int = 0) -> bytes:
    body = _NFGENMSG.pack(socket.AF_UNSPEC, 0, queue) + attrs
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type,
                          flags, seq, 0) + body


def verdict_batch(queue: int, up_to_id: int) -> bytes:
    """ACCEPT every packet of the queue with an id up to ``up_to_id``, in one message."""
    return _message(NFQNL_MSG_VERDICT_BATCH, queue,
                    _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, up_to_id)),
                    NLM_F_REQUEST)


def verdict_drop(queue: int, packet: int) -> bytes:
    """DROP the one packet with this id."""
    return _message(NFQNL_MSG_VERDICT, queue,
                    _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_DROP, packet)), NLM_F_REQUEST)


def packet_id(msg: memoryview) -> int | None:
    """The packet id of one NFQNL_MSG_PACKET message (None if it carries no packet header)."""
    if len(msg) >= _FIRST_ATTR_AT + 8 and _NLATTR.unpack_from(msg, _FIRST_ATTR_AT)[1] \
            == NFQA_PACKET_HDR:
        return struct.unpack_from("!I", msg, _FIRST_ATTR_AT + 4)[0]
    at = _HDR_LEN
    while at + _NLATTR.size <= len(msg):
        length, kind = _NLATTR.unpack_from(msg, at)
        if length < _NLATTR.size:
            return None
        if kind & 0x3fff == NFQA_PACKET_HDR:
            return struct.unpack_from("!I", msg, at + 4)[0]
        at += (length + 3) & ~3
    return None


def frame_bytes(msg: memoryview) -> int:
    """The frame length of a queued packet (its IP length + an Ethernet header) from the bytes
    of its NFQA_PAYLOAD attribute; a full frame when they are missing."""
    at = _HDR_LEN
    while at + _NLATTR.size <= len(msg):
        length, kind = _NLATTR.unpack_from(msg, at)
        if length < _NLATTR.size:
            break
        if kind & 0x3fff == NFQA_PAYLOAD and length >= _NLATTR.size + COPY_BYTES:
            first = msg[at + 4]
            if first >> 4 == 4:
                return struct.unpack_from("!H", msg, at + 6)[0] + ETHERNET_HEADER
            if first >> 4 == 6:
                return struct.unpack_from("!H", msg, at + 8)[0] + 40 + ETHERNET_HEADER
        at += (length + 3) & ~3
    return FULL_FRAME


@dataclass
class Stats:
    """What the delay line did; printed as JSON (keys as here, kernel counts under "kernel")."""
    queue: int
    delay_ms: float
    jitter_ms: float
    distribution: str
    loss: float = 0.0
    packets_received: int = 0   # held for their delay (not counting those dropped)
    packets_dropped: int = 0    # dropped on arrival by --loss
    packets_overflowed: int = 0  # dropped on arrival with the serialisation queue full
    queued_max_bytes: int = 0   # the most bytes waiting for serialisation (an arrival included)
    packets_released: int = 0
    held_now: int = 0
    held_max: int = 0
    verdicts_sent: int = 0  # verdict messages: one per release instant
    verdict_errors: int = 0  # error answers from the kernel to a verdict (should stay 0)
    enobufs: int = 0  # times the socket reported lost messages (the kernel counts the packets)
    late_us_max: float = 0.0  # how long after its due time a packet was released, at most
    late_us_mean: float = 0.0
    cpu_s: float = 0.0  # user + system; system includes forwarding each released packet
    cpu_user_s: float = 0.0
    wall_s: float = 0.0
    stopped_by: str | None = None
    kernel: dict | None = None  # this queue's line of /proc/net/netfilter/nfnetlink_queue

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class DelayLine:
    """One bound queue: receives packet ids, releases them in order after their delay."""

    def __init__(self, queue: int, delay_s: float, jitter_s: float = 0.0,
                 distribution: str = "uniform", *, maxlen: int = DEFAULT_MAXLEN,
                 rcvbuf_bytes: int = DEFAULT_RCVBUF_BYTES, seed: int | None = None,
                 rate_bps: float | None = None, queue_bytes: int = DEFAULT_QUEUE_BYTES,
                 loss: float = 0.0):
        self.queue, self.delay_ns = queue, round(delay_s * 1e9)
        self.loss = loss
        self._lose = random.Random(None if seed is None else seed + 1).random
        self.ns_per_byte = 8e9 / rate_bps if rate_bps else 0.0
        self.queue_bytes = queue_bytes
        self._link_free_ns = 0
        self.jitter_ns = round(jitter_s * 1e9)
        self.stats = Stats(queue, delay_s * 1e3, jitter_s * 1e3, distribution, loss)
        self._draw = self._sampler(distribution, random.Random(seed))
        self._held: collections.deque[tuple[int, int]] = collections.deque()  # (due_ns, id)
        self._last_due_ns = 0
        self._late_ns_total = 0
        self._user0_s = os.times().user
        self._buf = bytearray(65536)
        self._verdict = bytearray(verdict_batch(queue, 0))  # the id is its last 4 bytes
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, rcvbuf_bytes)  # SO_RCVBUFFORCE
            self.sock.bind((0, 0))
            self._configure(maxlen)
        except BaseException:
            self.sock.close()
            raise
        self.sock.setblocking(False)

    def _sampler(self, distribution: str, rng: random.Random):
        d, j = self.delay_ns, self.jitter_ns
        if j == 0:
            return lambda: d
        if distribution == "uniform":
            return lambda: d + rng.randint(-j, j)
        if distribution == "normal":
            return lambda: max(0, round(rng.gauss(d, j)))
        raise DelayLineError(f"unknown jitter distribution {distribution!r} "
                             "(uniform or normal)")

    # -- configuration: each request acknowledged, errors named -------------------------------
    def _request(self, attrs: bytes, seq: int, what: str) -> None:
        self.sock.send(_message(NFQNL_MSG_CONFIG, self.queue, attrs, NLM_F_REQUEST | NLM_F_ACK,
                                seq))
        while True:
            data = self.sock.recv(65536)
            length, kind, _, got_seq, _ = _NLMSGHDR.unpack_from(data)
            if kind == NLMSG_ERROR and got_seq == seq:
                err = -struct.unpack_from("=i", data, _NLMSGHDR.size)[0]
                if err == 0:
                    return
                hint = ""
                if err == errno.EPERM:  # the kernel's answer to both of these
                    other = read_kernel_queues().get(self.queue)
                    hint = (f": another program (netlink portid {other.portid}) has bound "
                            "this queue" if other else ": needs CAP_NET_ADMIN (root)")
                raise DelayLineError(f"nfqueue {self.queue}: {what} failed: "
                                     f"{os.strerror(err)}{hint}")

    def _configure(self, maxlen: int) -> None:
        self._request(_attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)), 1,
                      "bind")
        if self.ns_per_byte:      # the length of each packet is needed: its first bytes
            self._request(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", COPY_BYTES,
                                                             NFQNL_COPY_PACKET)), 2,
                          f"copy mode PACKET, {COPY_BYTES} bytes")
        else:
            self._request(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)), 2,
                          "copy mode META")
        self._request(_attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)), 3,
                      f"queue length {maxlen}")

    # -- the work ---------------------------------------------------------------------------
    def receive(self) -> None:
        """Read every message waiting; note each packet with its due time.

        The hot path of the program (one message a packet): kept free of per-message objects.
        """
        buf, recv_into, view = self._buf, self.sock.recv_into, memoryview(self._buf)
        while True:
            try:
                n = recv_into(buf)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                self.stats.enobufs += 1  # the kernel dropped (and counted) packets
                continue
            now = time.monotonic_ns()
            at = 0
            while at + _NLMSGHDR.size <= n:
                length, kind = _LEN_TYPE.unpack_from(buf, at)
                if length < _NLMSGHDR.size:
                    break
                if kind == _PACKET_TYPE:
                    msg = view[at:at + length]
                    pid = packet_id(msg)
                    if pid is not None and self.loss and self._lose() < self.loss:
                        self.sock.send(verdict_drop(self.queue, pid))
                        self.stats.packets_dropped += 1
                    elif pid is not None:
                        left = self._serialised(frame_bytes(msg), now) if self.ns_per_byte \
                            else now
                        if left is None:                  # the link's queue is full
                            self.sock.send(verdict_drop(self.queue, pid))
                            self.stats.packets_overflowed += 1
                        else:
                            self._hold(pid, left)
                elif kind == NLMSG_ERROR and struct.unpack_from("=i", buf, at + 16)[0]:
                    self.stats.verdict_errors += 1
                at += (length + 3) & ~3

    def _serialised(self, size: int, now_ns: int) -> int | None:
        """When the packet has left the link: after the previous one, size x 8 / rate later;
        None when the bytes still waiting for the link and its own pass the queue."""
        start = max(self._link_free_ns, now_ns)
        waiting = round((start - now_ns) / self.ns_per_byte) + size
        if waiting > self.queue_bytes:
            return None
        if waiting > self.stats.queued_max_bytes:
            self.stats.queued_max_bytes = waiting
        self._link_free_ns = start + round(size * self.ns_per_byte)   # integers: exact
        return self._link_free_ns

    def _hold(self, pid: int, now_ns: int) -> None:
        due = now_ns + self._draw()
        if due < self._last_due_ns:
            due = self._last_due_ns
        self._last_due_ns = due
        held = self._held
        held.append((due, pid))
        self.stats.packets_received += 1
        if len(held) > self.stats.held_max:
            self.stats.held_max = len(held)

    def release_due(self, now_ns: int | None = None, everything: bool = False) -> None:
        """One verdict accepting every held packet whose time has come (or all of them)."""
        held = self._held
        if not held:
            return
        now = time.monotonic_ns() if now_ns is None else now_ns
        last_id, count = None, 0
        while held and (everything or held[0][0] <= now):
            due, last_id = held.popleft()
            if now > due:
                late = now - due
                self._late_ns_total += late
                if late > self.stats.late_us_max * 1000:
                    self.stats.late_us_max = late / 1000
            count += 1
        if last_id is None:
            return
        struct.pack_into("!I", self._verdict, len(self._verdict) - 4, last_id)
        self.sock.send(self._verdict)  # the kernel takes it at once
        self.stats.verdicts_sent += 1
        self.stats.packets_released += count

    def next_due_s(self) -> float | None:
        """Seconds until the oldest held packet is due (None if nothing is held)."""
        if not self._held:
            return None
        return max(0.0, (self._held[0][0] - time.monotonic_ns()) / 1e9)

    def snapshot(self, started_s: float, cpu0_s: float) -> Stats:
        s = self.stats
        s.held_now = len(self._held)
        s.late_us_mean = (self._late_ns_total / 1000 / s.packets_released
                          if s.packets_released else 0.0)
        s.cpu_s = round(time.process_time() - cpu0_s, 4)
        s.cpu_user_s = round(os.times().user - self._user0_s, 4)
        s.wall_s = round(time.monotonic() - started_s, 4)
        kq = read_kernel_queues().get(self.queue)
        s.kernel = asdict(kq) if kq else None
        return s

    def close(self) -> None:
        self.sock.close()


def _tight_timers(realtime_priority: int) -> None:
    """Wake when asked: 1 ns timer slack (not 50 us) and, if > 0, SCHED_FIFO at that priority.

    The program stands in for a qdisc's kernel timer; on a busy machine a normal task waits
    for a CPU for milliseconds after its timer fires.  It sleeps between release instants, and
    the kernel keeps 5 % of each CPU for normal tasks in any case (sched_rt_runtime_us).
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass
    if realtime_priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(realtime_priority))
        except OSError as e:
            print(f"delayline: warning: no SCHED_FIFO ({e.strerror}): timing will be looser",
                  file=sys.stderr)


def _write_stats(path: str | None, stats: Stats) -> None:
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(stats.as_json() + "\n")
        os.replace(tmp, path)


def serve(line: DelayLine, stats_path: str | None = None, stats_interval_s: float = 0.0) -> Stats:
    """Run until SIGTERM/SIGINT, then drain on schedule and accept what is left.

    Signal handlers only set a flag; ``set_wakeup_fd`` makes the waiting ``select`` return at
    once (a handler alone would not: Python retries the interrupted select).
    """
    stop: list[str] = []
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.append(signal.Signals(signum).name))
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    started, cpu0 = time.monotonic(), time.process_time()
    next_stats = started + stats_interval_s if stats_interval_s > 0 else None
    drain_until = None
    max_delay_s = (line.delay_ns + 3 * line.jitter_ns) / 1e9
    fds = [line.sock, wake_r]
    if stats_path:
        _write_stats(stats_path, line.snapshot(started, cpu0))
    while True:
        if stop and drain_until is None:
            drain_until = time.monotonic() + max_delay_s + DRAIN_MARGIN_S
        now = time.monotonic()
        due = line.next_due_s()
        if drain_until is not None and (now >= drain_until or due is None):
            break
        waits = [t for t in (due, next_stats and next_stats - now,
                             drain_until and drain_until - now) if t is not None]
        ready = select.select(fds, [], [], max(0.0, min(waits)) if waits else None)[0]
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 64):
                        break
                except BlockingIOError:
                    break
        if line.sock in ready:
            line.receive()
        line.release_due()
        if next_stats is not None and time.monotonic() >= next_stats:
            _write_stats(stats_path, line.snapshot(started, cpu0))
            next_stats += stats_interval_s
    line.receive()
    line.release_due(everything=True)
    line.stats.stopped_by = stop[0] if stop else None
    stats = line.snapshot(started, cpu0)
    signal.set_wakeup_fd(-1)
    os.close(wake_r)
    os.close(wake_w)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m pcapstats.tools.delayline",
        description="Delay packets of one NFQUEUE queue in order (run in the router's netns).")
    parser.add_argument("--queue", type=int, required=True, help="NFQUEUE queue number")
    parser.add_argument("--delay-ms", type=float, required=True, help="delay of each packet")
    parser.add_argument("--jitter-ms", type=float, default=0.0,
                        help="uniform: +- this; normal: standard deviation (default 0)")
    parser.add_argument("--distribution", choices=("uniform", "normal"), default="uniform")
    parser.add_argument("--maxlen", type=int, default=DEFAULT_MAXLEN,
                        help=f"kernel queue length in packets (default {DEFAULT_MAXLEN})")
    parser.add_argument("--rcvbuf-bytes", type=int, default=DEFAULT_RCVBUF_BYTES,
                        help="netlink socket receive buffer (default 32 MiB)")
    parser.add_argument("--stats", metavar="FILE", help="write the stats JSON here too")
    parser.add_argument("--stats-interval", type=float, default=0.0, metavar="S",
                        help="rewrite --stats every S seconds while running")
    parser.add_argument("--seed", type=int, help="seed of the jitter draws")
    parser.add_argument("--rate-bps", type=float, default=None, metavar="R",
                        help="serialise each packet at R bit/s first (netem's rate)")
    parser.add_argument("--queue-bytes", type=int, default=DEFAULT_QUEUE_BYTES, metavar="B",
                        help="the link's queue: most bytes waiting for serialisation (more "
                        "are dropped)")
    parser.add_argument("--loss", type=float, default=0.0, metavar="P",
                        help="drop each packet with probability P (0-1) on arrival")
    parser.add_argument("--realtime-priority", type=int, default=0, metavar="P",
                        help="run SCHED_FIFO at priority P (1-99; default 0: normal)")
    args = parser.parse_args(argv)
    if args.delay_ms < 0 or args.jitter_ms < 0:
        parser.error("--delay-ms and --jitter-ms must not be negative")
    if not 0 <= args.loss <= 1:
        parser.error("--loss is a probability, from 0 to 1")
    try:
        line = DelayLine(args.queue, args.delay_ms / 1e3, args.jitter_ms / 1e3,
                         args.distribution, maxlen=args.maxlen,
                         rcvbuf_bytes=args.rcvbuf_bytes, seed=args.seed,
                         rate_bps=args.rate_bps, queue_bytes=args.queue_bytes,
                         loss=args.loss)
    except (DelayLineError, OSError) as e:
        print(f"delayline: error: {e}", file=sys.stderr)
        return 2
    _tight_timers(args.realtime_priority)
    try:
        print(f"ready queue={args.queue}", flush=True)
        stats = serve(line, args.stats, args.stats_interval)
    finally:
        line.close()
    _write_stats(args.stats, stats)
    print(stats.as_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
