"""One lab run: a :class:`Scenario` in, capture(s) and a sidecar out, the host left as it was.

:func:`run` builds the topology (sender - router - receiver, a dumbbell of N pairs sharing
the router's bottleneck, or a chain of K routers), applies the impairment on the bottleneck
(on each router's link toward the receiver, in a chain), measures the RTT with ping,
starts tcpdump, runs the traffic, stops the capture (flushed: tcpdump's own report is awaited),
reads the impairment's counters, tears the lab down and writes capture(s) + sidecar (see
:mod:`pcapstats.lab.sidecar` for the names and every field).

Every exit path tears the lab down.  Ctrl-C, SIGTERM or SIGHUP during a run (in the main
thread) unwind like an exception: the capture so far is still flushed and written, with a
sidecar whose status says ``interrupted``, and the interruption is then raised again.  Before
tcpdump started there is nothing to keep: no file is written.  A run that fails after its
capture started keeps what was captured too, as ``failed``.

Once the traffic has ended (or been interrupted), stopping the captures, writing the files and
tearing the lab down are not interrupted: a signal arriving then waits until all of it is done,
and is raised then.  The files say what happened to the traffic -- ``complete`` if it had
ended -- and the interruption still ends the run (the CLI exits 128 + the signal), so a script
or a ``--trials`` loop stops as it was asked to.

While a capture is unfinished (``.NAME.pcap.partial``), some process of the run keeps it open:
tcpdump while it captures, the run itself until the file has its final name.  That is how
``pcapstats lab cleanup DIR`` tells a live run's file from one a killed run left.

A test hook: with ``PCAPSTATS_LAB_PAUSE_AT=<stage>`` in the environment, the run stops for
``PCAPSTATS_LAB_PAUSE_S`` seconds (default 60) when it reports a stage (see ``progress``)
starting with that text, after saying so on stderr; the stages are "building the topology",
"applying the impairment", "measuring the RTT", "starting tcpdump on HOST:IFACE", "running
TOOL", "saving the capture" (signals are held there) and "wrote PATH".
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pcapstats.errors import UsageError
from pcapstats import units
from pcapstats.units import (FRAME_BYTES, parse_loss, parse_rate, parse_simpleperf_size,
                             parse_tc_size, parse_time)
from pcapstats import sidecar
from pcapstats.lab import accuracy, impair, topologies, traffic
from pcapstats.lab.cleanup import SignalsBlocked, signals_unwind
from pcapstats.lab.commands import LabError, require_tools
from pcapstats.lab.netns import Lab
from pcapstats.lab.sidecar import lab_placements, stream_ids, write_sidecar
from pcapstats.tools.tcpinfo import available_congestion_controls

CLIENT_START_S = 1.0  # pairs' clients start together this long after the last server is up
TOOLS = ("simpleperf", "iperf3", "iperf3-udp", "ping", "pingpong", "pingpong-udp", "tcp-file",
         "udp-file")
PER_HOP = ("loss", "delay", "jitter", "rate", "queue")  # a comma list gives one per router
CAPTURE_SIDES = ("sender", "receiver", "both", "router", "all")
# The files each capture choice writes, by side ("both", "all": NAME.<side>.pcap; else NAME.pcap).
CAPTURE_FILES = {"both": ("sender", "receiver"), "all": ("sender", "router", "receiver")}
FORMATS = ("pcap", "pcapng")
PAUSE_AT, PAUSE_S = "PCAPSTATS_LAB_PAUSE_AT", "PCAPSTATS_LAB_PAUSE_S"  # the test hook
WITNESS_SNAPLEN = 96  # the lab's own captures for achieved vs asked: the IPv4 header is enough
MAX_DATAGRAM_PAYLOAD = 65507  # 65535 - 20 (IPv4) - 8 (ICMP or UDP): the most ping -s sends
MTU = FRAME_BYTES - 14        # IPv4 packets of the lab's links
MESSAGE_MARGIN_FRAMES = 2     # a queue holds a run's longest message and this many frames more
HEADERS = {"ping": 20 + 8, "UDP message": 20 + 8}  # IPv4 and ICMP/UDP, once a datagram


def message_wire_bytes(what: str, size: int, timestamps: bool = True) -> int:
    """The bytes of frames one message takes on the wire (Ethernet headers included, as tbf
    and the delay line count them): a ping or UDP message of ``size`` bytes in IP fragments
    of MTU, a TCP message in segments of the MSS (1448 bytes with timestamps, else 1460)."""
    if what == "TCP message":
        options = 12 if timestamps else 0
        mss = MTU - 40 - options
        return size + math.ceil(size / mss) * (14 + 40 + options)
    datagram = size + HEADERS[what] - 20                   # the IP payload
    fragments = max(1, math.ceil(datagram / (MTU - 20)))
    return datagram + fragments * (14 + 20)


@dataclass
class Scenario:
    """Everything a run can be asked; values as a user writes them ("10%", "20ms", "30mbit").

    ``delay`` and ``jitter`` are one-way, applied in each direction (so the RTT is about
    2 x delay).  ``cc`` is one name for every flow, or a list with one name per host pair.
    ``duration_s`` (-t) or ``bytes`` (-n, e.g. "10MB") bounds a transfer; ``bytes`` wins.
    ``ping_during`` pings (ping_count, ping_interval_s, first of ping_sizes) from the first
    sender to its receiver while the transfer runs: the RTT under load.  The pingpong tools
    send ping_count messages of each of ping_sizes, ping_interval_s apart.  ``hops`` > 1 makes
    the path a chain of that many routers (one pair); ``serialize`` makes each packet wait
    size/rate too, both ways (``one_way``: toward the receiver alone, the way back carrying
    the delay only: a link shaped one way); ``loss``, ``delay``, ``jitter``,
    ``rate`` and ``queue`` then take one value for every router or a comma list (or list)
    with one per router, each on its link toward the receiver.  ``window_scaling``,
    ``timestamps`` and ``sack`` set net.ipv4.tcp_window_scaling / tcp_timestamps / tcp_sack
    in every sender and receiver.  ``app_rate`` makes the TCP sender application-limited:
    iperf3 (its ``-b``) or simpleperf (its ``--rate``) writes at that rate, below what the path
    could carry.  ``capture``:
    "sender", "receiver", "router" (the router's interface toward the sender: mid-path,
    before the impairment), "both" (sender and receiver) or "all" (sender, router and
    receiver; one pair).  ``start_offset_s`` staggers several pairs: pair K's client starts
    (K - 1) x this many seconds after the first pair's (start order in a fairness study).
    """
    tool: str = "simpleperf"
    loss: str | float | None = None
    delay: str | None = None
    jitter: str | None = None
    rate: str | None = None
    queue: str | int | None = None
    serialize: bool = False
    one_way: bool = False
    hops: int = 1
    cc: str | list[str] | None = None
    duration_s: float = 10.0
    bytes: str | int | None = None
    parallel: int | list[int] = 1
    pairs: int = 1
    start_offset_s: float = 0.0
    udp_rate: str | None = None
    ping_count: int = 10
    ping_interval_s: float = 0.2
    ping_sizes: list[int] = field(default_factory=lambda: [56])
    ping_during: bool = False
    sndbuf: int | None = None
    rcvbuf: int | None = None
    window_scaling: bool = True
    timestamps: bool = True
    sack: bool = True
    app_rate: str | None = None
    capture: str = "sender"
    snaplen: int = 262144
    format: str = "pcap"
    tcp_info_interval_s: float = 0.01
    trial: int = 1
    seed: int = 0

    def cc_of_pair(self, k: int) -> str | None:
        return self.cc[k] if isinstance(self.cc, list) else self.cc

    def parallel_of_pair(self, k: int) -> int:
        return self.parallel[k] if isinstance(self.parallel, list) else self.parallel

    def validate(self) -> None:
        """UsageError naming the first thing that cannot be run."""
        def bad(what, hint=None, field=None):
            error = UsageError(what, hint=hint)
            error.field = field     # the Scenario field at fault: a spec's error names it
            raise error
        self.check_numbers()
        if self.tool not in TOOLS:
            bad(f"unknown tool {self.tool!r}", f"use one of {', '.join(TOOLS)}", field="tool")
        if self.capture not in CAPTURE_SIDES:
            bad(f"unknown capture side {self.capture!r}", f"use {', '.join(CAPTURE_SIDES)}", field="capture")
        if self.format not in FORMATS:
            bad(f"unknown capture format {self.format!r}", "use pcap or pcapng", field="format")
        if not 1 <= int(self.pairs) <= 8:
            bad(f"pairs must be 1..8, not {self.pairs}", field="pairs")
        if not 1 <= int(self.hops) <= topologies.MAX_ROUTERS:
            bad(f"hops must be 1..{topologies.MAX_ROUTERS} routers, not {self.hops}", field="hops")
        if self.hops > 1 and self.pairs > 1:
            bad("a chain of routers (--hops) carries one pair", "give --pairs 1 or --hops 1", field="hops")
        counts = self.parallel if isinstance(self.parallel, list) else [self.parallel]
        if isinstance(self.parallel, list) and len(self.parallel) != self.pairs:
            bad(f"parallel (-P): {len(self.parallel)} counts for {self.pairs} pairs",
                "give one for all, or one per pair (2,1,1)", field="parallel")
        for count in counts:
            if not 1 <= int(count) <= (5 if self.tool == "simpleperf" else 128):
                bad(f"parallel (-P) must be 1..5 for simpleperf, 1..128 for iperf3, "
                    f"not {count}", field="parallel")
        if not self.bytes and not (self.duration_s and self.duration_s > 0):
            bad("a transfer needs a duration (-t SECONDS > 0) or a size (-n BYTES)", field="duration_s")
        if self.duration_s and not math.isfinite(self.duration_s):
            bad(f"duration (-t) must be a finite number of seconds, not {self.duration_s}", field="duration_s")
        if not (math.isfinite(self.start_offset_s) and self.start_offset_s >= 0):
            bad(f"start offset must be 0 s or more, not {self.start_offset_s}", field="start_offset_s")
        if self.start_offset_s and (self.pairs < 2 or self.tool == "ping"):
            bad("a start offset staggers the pairs' clients: it needs --pairs 2 or more and a "
                "tool other than ping", field="start_offset_s")
        if self.start_offset_s and not self.bytes and self.start_offset_s >= self.duration_s:
            bad(f"a start offset of {self.start_offset_s:g} s is not under the duration "
                f"({self.duration_s:g} s): the pairs would not send at the same time", field="start_offset_s")
        if isinstance(self.cc, list) and len(self.cc) != self.pairs:
            bad(f"{len(self.cc)} congestion controls for {self.pairs} pairs",
                "give one for all, or one per pair", field="cc")
        if self.snaplen < 64:
            bad(f"snaplen {self.snaplen} is too small to keep the TCP/IP headers",
                "use 128 (headers only) or more", field="snaplen")
        if self.capture == "all" and int(self.pairs) > 1:
            bad("capture all (sender, router, receiver) needs one pair: with several pairs the "
                "sender and router captures are both the router's bridge toward the senders",
                "give --pairs 1, or --capture both", field="capture")
        if self.app_rate and self.tool not in ("iperf3", "simpleperf"):
            bad(f"an application-limited sender (app_rate) needs tool iperf3 or simpleperf, "
                f"not {self.tool}", "iperf3's -b and simpleperf's --rate limit what their TCP "
                "sender writes; the other tools send as fast as they can", field="app_rate")
        if self.tool in ("iperf3-udp",) and not self.udp_rate:
            bad("iperf3-udp needs a rate (--udp-rate, e.g. 20mbit)", field="udp_rate")
        if self.tool.startswith("ping") and not self.ping_sizes:
            bad(f"{self.tool} needs at least one size", field="ping_sizes")
        if self.tool in ("ping", "pingpong-udp") or self.ping_during:
            sizes = self.ping_sizes if self.tool.startswith("ping") else self.ping_sizes[:1]
            big = [size for size in sizes if size > MAX_DATAGRAM_PAYLOAD]
            if big:
                bad(f"{'ping' if self.tool != 'pingpong-udp' else 'a UDP message'} of "
                    f"{big[0]} bytes cannot be sent: an IPv4 datagram holds at most "
                    f"{MAX_DATAGRAM_PAYLOAD} bytes after its headers",
                    f"use sizes up to {MAX_DATAGRAM_PAYLOAD}", field="ping_sizes")
        wanted = {c for c in (self.cc if isinstance(self.cc, list) else [self.cc]) if c}
        available = _available_ccs()
        if available and wanted - set(available):
            bad(f"congestion control {', '.join(sorted(wanted - set(available)))} is not "
                f"available here", f"available: {' '.join(available)}", field="cc")
        for name, parse in (("loss", parse_loss), ("delay", parse_time),
                            ("jitter", parse_time), ("rate", parse_rate),
                            ("queue", parse_tc_size), ("bytes", lambda _: self.transfer_bytes()),
                            ("udp_rate", lambda _: self.udp_rate_bps()),
                            ("app_rate", lambda _: self.app_rate_bps())):
            try:
                for value in (self._per_hop(name) if name in PER_HOP else [getattr(self, name)]):
                    if value not in (None, ""):
                        parse(str(value))
            except UsageError as e:
                bad(f"{name}: {e.what}" if not e.what.startswith(name) else e.what, e.hint,
                    field=name)
        try:
            self.impairments()  # the values together (jitter over delay, a queue too small)
        except UsageError as e:
            bad(e.what, e.hint, field=getattr(e, "field", None))

    def check_numbers(self) -> None:
        """Each number checked by the one validator of its kind (pcapstats.units), as `lab
        run`'s options are: a spec's ``duration_s = 1e30`` is refused as ``-t 1e30`` is."""
        def checked(name, check, value):
            try:
                check(value)
            except UsageError as e:
                e.field = name          # the Scenario field at fault: a spec's error names it
                raise
        for name, check in _NUMBERS.items():
            value = getattr(self, name)
            for one in (value if isinstance(value, list) else [value]):  # -P 2,1,1: one a pair
                if one is not None and not (name in ("sndbuf", "rcvbuf") and one == 0):
                    checked(name, lambda v: check(v, name), one)
        sizes = self.ping_sizes if isinstance(self.ping_sizes, list) else [self.ping_sizes]
        for size in sizes:          # ping's payloads fit one IPv4 packet; pingpong's messages
            checked("ping_sizes", lambda v: units.check_limit(
                v, "ping size", "message" if self.tool == "pingpong" else "ping_size"), size)
        for name in ("tool", "capture", "format"):
            if not isinstance(getattr(self, name), str):
                error = UsageError(f"{name} {getattr(self, name)!r}: not a word",
                                   hint=f"for example {name} = {getattr(Scenario, name)!r}")
                error.field = name
                raise error

    def impairments(self) -> list:
        """One Impairment per router on the path (router 1, the sender's side, first).

        A router with a rate queues the run's longest message whole (:meth:`longest_message`):
        its default queue is raised to hold it (:meth:`queue_notes` says so), a queue given
        too small for it is refused -- such a message is lost every time, which no run
        should find out after the fact.  Whole: its frames and MESSAGE_MARGIN_FRAMES more (an
        ACK or another message's last frame queued beside it)."""
        values = {name: self._per_hop(name) for name in PER_HOP}
        message = self.longest_message()
        need = message[1] + MESSAGE_MARGIN_FRAMES * FRAME_BYTES if message else 0
        out = []
        for k in range(self.hops):
            imp = impair.Impairment.from_text(
                **{n: v[k] for n, v in values.items()}, serialize=self.serialize,
                one_way=self.one_way, queue_floor_bytes=need)
            if message and imp.rate_bps and imp.queue_bytes is not None \
                    and imp.queue_bytes < need:
                where = f" of router {k + 1}" if self.hops > 1 else ""
                raise UsageError(
                    f"the queue{where} ({imp.queue_bytes} bytes) cannot hold a {message[0]} "
                    f"of {message[2]} bytes ({message[1]} bytes in frames): it would be lost "
                    "every time",
                    hint=f"give --queue {math.ceil(need / 1024)}kb or more, or smaller "
                         "--ping-sizes")
            out.append(imp)
        return out

    def longest_message(self) -> tuple[str, int, int] | None:
        """(what, its bytes in frames on the wire, its size) of the largest message a ping or
        pingpong run sends at once, None for the other tools: IPv4 at MTU 1500, a ping or a UDP
        message in IP fragments, a TCP message in segments of the MSS."""
        if self.tool.startswith("ping") or self.ping_during:
            sizes = self.ping_sizes if self.tool.startswith("ping") else self.ping_sizes[:1]
            if not sizes:
                return None
            size = max(sizes)
            what = {"pingpong": "TCP message", "pingpong-udp": "UDP message"}.get(
                self.tool, "ping")
            return what, message_wire_bytes(what, size, self.timestamps), size
        return None

    def queue_notes(self) -> list[str]:
        """What to know before the run of its messages against its queues: one line a router
        whose default queue was raised to hold the longest message, and one if pings, sent
        every ping_interval_s whatever the answers, take longer than that to cross the
        slowest rate (each then waits behind the one before: its latency is not the path's,
        and the queue drops what does not fit)."""
        message = self.longest_message()
        if not message:
            return []
        out = []
        rates = [imp.rate_bps for imp in self.impairments() if imp.rate_bps]
        if rates and (self.tool == "ping" or self.ping_during):
            crossing_s = message[1] * 8 / min(rates)
            if crossing_s >= self.ping_interval_s:
                out.append(f"a ping of {message[2]} bytes takes {crossing_s * 1e3:.0f} ms to "
                           f"cross {min(rates) / 1e6:g} Mbit/s, more than the "
                           f"{self.ping_interval_s * 1e3:g} ms between pings: each waits "
                           "behind the one before; give --ping-interval "
                           f"{math.ceil(crossing_s * 1.5 * 100) / 100:g} or more")
        for k, imp in enumerate(self.impairments()):
            base = dataclasses.replace(imp, queue_floor_bytes=0)
            if imp.rate_bps and imp.queue_bytes is None \
                    and imp.queue_limit_bytes > base.queue_limit_bytes:
                where = f"router {k + 1}'s queue" if self.hops > 1 else "the queue"
                out.append(f"{where} is {imp.queue_limit_bytes} bytes, not the default "
                           f"{base.queue_limit_bytes}: it holds a {message[0]} of "
                           f"{message[2]} bytes whole")
        return out

    def _per_hop(self, name: str) -> list[str | None]:
        """A per-hop option as one text per router: one value for all, or one each."""
        value = getattr(self, name)
        if value in (None, ""):
            return [None] * self.hops
        parts = value if isinstance(value, list) else str(value).split(",")
        parts = [None if str(p).strip() in ("", "0") and name != "loss" else str(p).strip()
                 for p in parts]
        if len(parts) == 1:
            return parts * self.hops
        if len(parts) != self.hops:
            raise UsageError(f"{len(parts)} values of {name} for {self.hops} router(s)",
                             hint="give one for every router, or one each (a comma list)")
        return parts

    def transfer_bytes(self) -> int | None:
        if self.bytes in (None, "", 0):
            return None
        if isinstance(self.bytes, int):
            return self.bytes
        try:
            return parse_simpleperf_size(str(self.bytes))
        except UsageError as e:
            raise UsageError(f"bad transfer size {self.bytes!r}: {e}") from None

    def udp_rate_bps(self) -> float | None:
        if not self.udp_rate:
            return None
        return parse_rate(self.udp_rate)

    def app_rate_bps(self) -> float | None:
        if not self.app_rate:
            return None
        try:
            return parse_rate(self.app_rate)
        except UsageError as e:
            raise UsageError(f"bad application rate {self.app_rate!r}: {e}") from None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "Scenario":
        """The scenario of a spec's fields, each of the kind its field takes (UsageError with
        ``field`` set naming the first that is not)."""
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            error = UsageError(f"unknown scenario field {', '.join(unknown)}",
                               hint=f"fields: {', '.join(sorted(fields))}")
            error.field = unknown[0]
            raise error
        for name, value in values.items():
            kinds = [k.strip() for k in str(fields[name]).split("|")]
            if not any(_is_kind(value, kind) for kind in kinds):
                error = UsageError(f"{name}: expected {' or '.join(KIND_WORDS[k] for k in kinds)}"
                                   f", not {value!r}")
                error.field = name
                raise error
            if isinstance(value, float) and "int" in kinds and "float" not in kinds:
                values = {**values, name: int(value)}
        return cls(**values)


KIND_WORDS = {"str": "text", "int": "a whole number", "float": "a number", "bool": "true or false",
              "None": "nothing", "list[str]": "a list of texts (one a pair)",
              "list[int]": "a list of whole numbers (one a pair or size)"}


def _is_kind(value, kind: str) -> bool:
    """Is ``value`` (read from TOML) of the annotated ``kind`` ("int", "list[str]", ...)?"""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind.startswith("list["):
        inner = kind[5:-1]
        return isinstance(value, list) and bool(value) and all(_is_kind(v, inner)
                                                               for v in value)
    return {"str": isinstance(value, str), "int": number and float(value).is_integer(),
            "float": number, "bool": isinstance(value, bool), "None": value is None}[kind]


_NUMBERS = {
    "duration_s": lambda v, o: units.check_duration(v, o, zero=True),   # 0 with -n
    "ping_interval_s": units.check_interval,
    "tcp_info_interval_s": units.check_interval,
    **{name: (lambda q: lambda v, o: units.check_limit(v, o, q))(quantity)
       for name, quantity in (("hops", "hops"), ("parallel", "parallel"), ("pairs", "pairs"),
                              ("ping_count", "ping_count"), ("trial", "trials"),
                              ("seed", "seed"), ("snaplen", "snaplen"), ("sndbuf", "buffer"),
                              ("rcvbuf", "buffer"))},
}


def _available_ccs() -> list[str]:
    return available_congestion_controls()


def required_tools(scenario: Scenario) -> list[str]:
    tools = ["ip", "ethtool", "tc", "iptables", "tcpdump", "ping"]
    if scenario.tool.startswith("iperf3"):
        tools.append("iperf3")
    if scenario.format == "pcapng":
        tools.append("editcap")
    return tools


def _no_interruptions() -> SignalsBlocked:
    """Hold Ctrl-C/SIGTERM/SIGHUP while the run's results are being saved and the lab undone;
    one that arrives meanwhile is raised once that is done."""
    return SignalsBlocked()


def _pausing(say: Callable[[str], None]) -> Callable[[str], None]:
    """The test hook (module docstring): ``say``, then a pause at the stage asked."""
    at = os.environ.get(PAUSE_AT)
    if not at:
        return say
    seconds = float(os.environ.get(PAUSE_S) or 60)

    def pausing(stage: str) -> None:
        say(stage)
        if stage.startswith(at):
            print(f"pcapstats: test hook: pausing {seconds:g} s at {stage!r}", file=sys.stderr,
                  flush=True)
            time.sleep(seconds)
    return pausing


def _interruption_text(exc: BaseException) -> str:
    return f"interrupted ({exc.args[0]})" if exc.args else "interrupted (Ctrl-C)"


def run(scenario: Scenario, out_path: str | os.PathLike, *,
        progress: Callable[[str], None] | None = None, command: list[str] | None = None
        ) -> dict:
    """Run the scenario; write its capture(s) and sidecar for ``out_path``; return the sidecar.

    Raises UsageError for a scenario that cannot run, LabError when the lab cannot do it, and
    re-raises an interruption (KeyboardInterrupt) after saving what was captured.
    """
    scenario.validate()
    require_tools(*required_tools(scenario))
    say = _pausing(progress or (lambda stage: None))
    out_path = _capture_output(out_path, scenario.format)
    with signals_unwind():
        return _Run(scenario, out_path, say, command).go()


def _capture_output(out_path: str | Path, fmt: str) -> Path:
    """The capture's path, its format's suffix added when it has none a capture has; a
    UsageError before any work when its directory does not exist."""
    out_path = Path(out_path)
    if out_path.suffix not in sidecar.CAPTURE_SUFFIXES:
        out_path = out_path.with_name(out_path.name + "." + fmt)
    if not out_path.parent.is_dir():
        raise UsageError("the output directory does not exist", path=str(out_path.parent),
                         hint="create it first")
    return out_path


class _Run:
    """The state of one run, so every exit path can save what it has."""

    def __init__(self, scenario: Scenario, out_path: Path, say, command):
        self.scenario, self.out_path, self.say = scenario, out_path, say
        self.doc = {"schema": sidecar.SCHEMA, "status": None, "error": None, "command": command,
                    "started_ns": time.time_ns(), "finished_ns": None,
                    "scenario": scenario.to_dict() if scenario else None,
                    "tools": traffic.tool_versions(),
                    "topology": None, "impairment": None, "hops": None, "rtt": None,
                    "captures": [],
                    "flows": [], "reports": [], "measured": None, "achieved": None}
        self.captures: list[tuple[dict, object, Path]] = []  # (sidecar entry, tcpdump, partial)
        self.witnesses: dict[str, tuple[object, Path]] = {}  # side -> the lab's own capture
        self.held: list[int] = []  # fds keeping unfinished captures open: "a live run's"
        self.applied: list[impair.Applied] = []   # one per router, the sender's side first

    def go(self) -> dict:
        failure: BaseException | None = None
        lab = None
        try:
            self.say("building the topology")
            lab = self._build()
            self._impair(lab)
            self.say("measuring the RTT")
            self._measure_rtt(lab)
            self._start_captures(lab)
            self.say(f"running {self._running()}")
            self._traffic(lab, Path(lab.scratch_dir("tools")))  # removed with the lab
            self.doc["status"] = "complete"
        except KeyboardInterrupt as e:
            failure = e
            self.doc["status"], self.doc["error"] = "interrupted", _interruption_text(e)
        except Exception as e:  # noqa: BLE001 -- saved, then raised again below
            failure = e
            self.doc["status"], self.doc["error"] = "failed", str(e)
        finally:
            with _no_interruptions():
                try:
                    self._finish(lab)
                finally:
                    if lab is not None:
                        lab.close()
                    self._discard_partials()
                    for fd in self.held:
                        os.close(fd)
        if failure is not None:
            raise failure
        if self.doc["status"] != "complete":  # tcpdump dropped packets: the files are kept
            raise LabError(self.doc["error"], path=str(sidecar.sidecar_path(self.out_path)))
        return self.doc

    # -- the steps ----------------------------------------------------------------------------
    def _build(self) -> Lab:
        s = self.scenario
        if s.hops > 1:
            name, lab = "chain", topologies.chain(routers=s.hops)
        elif s.pairs > 1:
            name, lab = "dumbbell", topologies.dumbbell(pairs=s.pairs)
        else:
            name, lab = "sender_router_receiver", topologies.sender_router_receiver()
        try:
            pairs = lab.pairs
            for k, (snd, rcv) in enumerate(pairs):
                for host in (snd, rcv):
                    lab.sysctl(host, "net.ipv4.tcp_window_scaling", int(bool(s.window_scaling)))
                    lab.sysctl(host, "net.ipv4.tcp_timestamps", int(bool(s.timestamps)))
                    lab.sysctl(host, "net.ipv4.tcp_sack", int(bool(s.sack)))
            self.doc["topology"] = {
                "name": name,
                "pairs": [{"sender": snd, "receiver": rcv, "sender_ip": lab.address(snd),
                           "receiver_ip": lab.address(rcv), "cc": s.cc_of_pair(k)}
                          for k, (snd, rcv) in enumerate(pairs)],
                "bottleneck": dataclasses.asdict(lab.bottleneck),
                "window_scaling": bool(s.window_scaling),
                "timestamps": bool(s.timestamps), "sack": bool(s.sack)}
            if s.hops > 1:
                self.doc["topology"]["bottlenecks"] = [dataclasses.asdict(b)
                                                       for b in lab.bottlenecks]
        except BaseException:
            lab.close()
            raise
        self.pairs = pairs
        return lab

    def _impair(self, lab: Lab) -> None:
        """Each router's impairment on its link toward the receiver; the sidecar's
        ``impairment`` is the first router's, ``hops`` lists every router's on a chain."""
        self.say("applying the impairment")
        entries = []
        for bottleneck, wanted in zip(lab.bottlenecks, self.scenario.impairments()):
            applied = impair.apply(lab, bottleneck, wanted)
            self.applied.append(applied)
            described = applied.as_dict()
            entries.append({"router": bottleneck.router,
                            "asked": {**described["impairment"],
                                      "queue_limit_bytes": wanted.queue_limit_bytes},
                            "mechanisms": described["mechanisms"],
                            "settings": described["settings"], "counters": None})
        self.doc["impairment"] = {k: v for k, v in entries[0].items() if k != "router"}
        if len(entries) > 1:
            self.doc["hops"] = entries

    def _measure_rtt(self, lab: Lab) -> None:
        snd, rcv = self.pairs[0]
        rtt = traffic.measure_rtt_ms(lab, snd, rcv)
        delay_s = sum(i.delay_s for i in self.scenario.impairments())
        rtt["asked_ms"] = 2e3 * delay_s if delay_s else None
        self.doc["rtt"] = rtt

    def _start_captures(self, lab: Lab) -> None:
        s = self.scenario
        several = s.capture in CAPTURE_FILES
        for side in CAPTURE_FILES.get(s.capture, (s.capture,)):
            final = sidecar.capture_path(self.out_path, side if several else None, s.format)
            host, iface = _capture_point(lab, side, self.pairs)
            partial = sidecar.partial_path(final)
            self.say(f"starting tcpdump on {host}:{iface}")
            tcpdump = lab.capture(host, iface, partial, snaplen=s.snaplen, nano=True,
                                  pcapng=s.format == "pcapng")
            self._hold(partial.with_name(partial.name + ".tmp.pcap")
                       if s.format == "pcapng" else partial)  # what tcpdump writes
            entry = {"file": final.name, "side": side, "host": host, "interface": iface,
                     "snaplen": s.snaplen, "format": s.format, "timestamps": "nano",
                     "impairments": lab_placements(self.doc, side)}
            self.captures.append((entry, tcpdump, partial))
        if not self.doc["impairment"]:
            return
        # Achieved against asked needs the packets before the path and after it: the lab's own
        # headers-only capture where the run's do not sit there (see accuracy).
        sides = CAPTURE_FILES.get(s.capture, (s.capture,))
        missing = [side for side in ("sender", "receiver") if side not in sides]
        work = Path(lab.scratch_dir("witness")) if missing else None
        for side in missing:
            host, iface = _capture_point(lab, side, self.pairs)
            path = work / f"{side}.pcap"
            self.witnesses[side] = (lab.capture(host, iface, path, snaplen=WITNESS_SNAPLEN,
                                                nano=True), path)

    def _traffic(self, lab: Lab, work: Path) -> None:
        s = self.scenario
        if s.tool == "ping":
            snd, rcv = self.pairs[0]
            report = traffic.ping_sweep(lab, snd, rcv, s.ping_sizes, count=s.ping_count,
                                        interval_s=s.ping_interval_s)
            self._add_report(0, report)
            return
        running = [(k, self._start_tool(lab, work, k, snd, rcv))
                   for k, (snd, rcv) in enumerate(self.pairs)]
        if s.ping_during:  # from every pair's sender to its receiver: each pair's RTT under load
            running += [(k, traffic.start_ping(lab, snd, rcv, work, count=s.ping_count,
                                               interval_s=s.ping_interval_s,
                                               size=s.ping_sizes[0]))
                        for k, (snd, rcv) in enumerate(self.pairs)]
        # Every server is up: the clients start together (one pair: at once), or pair K
        # (K - 1) start offsets after the first.
        at_s = time.time() + CLIENT_START_S if len(running) > 1 else None
        for pair, r in running:
            r.launch(at_s if at_s is None else at_s + pair * s.start_offset_s)
        for pair, r in running:
            self._add_report(pair, r.finish())

    def _start_tool(self, lab: Lab, work: Path, k: int, snd: str, rcv: str) -> traffic.Running:
        s = self.scenario
        nbytes, cc = s.transfer_bytes(), s.cc_of_pair(k)
        if s.tool == "simpleperf":
            return traffic.start_simpleperf(
                lab, snd, rcv, work, duration_s=s.duration_s, nbytes=nbytes,
                parallel=s.parallel_of_pair(k), cc=cc, sndbuf=s.sndbuf, rcvbuf=s.rcvbuf,
                tcp_info_interval_s=s.tcp_info_interval_s, app_rate_bps=s.app_rate_bps())
        if s.tool in ("iperf3", "iperf3-udp"):
            udp = s.tool == "iperf3-udp"
            return traffic.start_iperf3(
                lab, snd, rcv, work, duration_s=s.duration_s, nbytes=nbytes,
                parallel=s.parallel_of_pair(k), cc=None if udp else cc, window=s.sndbuf,
                udp_rate_bps=s.udp_rate_bps() if udp else None,
                app_rate_bps=None if udp else s.app_rate_bps())
        if s.tool.startswith("pingpong"):
            return traffic.start_pingpong(lab, snd, rcv, work, sizes=s.ping_sizes,
                                          repetitions=s.ping_count,
                                          interval_s=s.ping_interval_s,
                                          udp=s.tool == "pingpong-udp",
                                          cc=None if s.tool == "pingpong-udp" else cc)
        proto = "tcp" if s.tool == "tcp-file" else "udp"
        return traffic.start_file_transfer(
            lab, snd, rcv, work, proto=proto, size_bytes=nbytes or 1_000_000,
            seed=s.seed + k, cc=cc, sndbuf=s.sndbuf, rcvbuf=s.rcvbuf,
            udp_rate_bps=s.udp_rate_bps() or 10e6)

    def _add_report(self, pair: int, report: dict) -> None:
        for flow in report.pop("flows"):
            self.doc["flows"].append({"pair": pair, "tool": report["tool"], **flow})
        self.doc["reports"].append({"pair": pair, **report})

    # -- saving -------------------------------------------------------------------------------
    def _finish(self, lab: Lab | None) -> None:
        """Stop captures, read counters, write files (also on a failing or interrupted run)."""
        if not self.captures:
            return  # nothing was captured: no files at all
        self.say("saving the capture")
        drops = []
        for entry, tcpdump, partial in self.captures:
            try:
                stats = tcpdump.stop(allow_drops=True)
            except LabError as e:
                self._fail(str(e))
                continue
            if entry["format"] == "pcapng":
                self._hold(partial)  # editcap's file, now the unfinished capture
            entry.update(packets_captured=stats.captured,
                         packets_received_by_filter=stats.received,
                         packets_dropped_by_kernel=stats.dropped_by_kernel,
                         packets_dropped_by_interface=stats.dropped_by_interface)
            if stats.dropped_by_kernel:
                drops.append(f"{entry['file']}: tcpdump reported {stats.dropped_by_kernel} "
                             "packets dropped by kernel")
        if drops:
            self._fail("; ".join(drops))
        for side, (tcpdump, _) in self.witnesses.items():
            try:
                tcpdump.stop(allow_drops=True)
            except LabError:  # achieved vs asked is then not measured, the run is whole
                self.witnesses[side] = (tcpdump, None)
        for k, counters in enumerate(self._counters()):
            if k == 0:
                self.doc["impairment"]["counters"] = counters
            if self.doc["hops"]:
                self.doc["hops"][k]["counters"] = counters
        self.doc["finished_ns"] = time.time_ns()
        self._stream_ids()
        self.doc["measured"] = self._measured()
        for entry, _, partial in self.captures:
            if partial.exists():
                final = partial.with_name(entry["file"])
                entry["size_bytes"] = partial.stat().st_size
                os.replace(partial, final)
        self.doc["captures"] = [entry for entry, _, partial in self.captures
                                if "size_bytes" in entry]
        self.doc["achieved"] = self._achieved()
        write_sidecar(sidecar.sidecar_path(self.out_path), self.doc)
        self.say(f"wrote {sidecar.sidecar_path(self.out_path)}")

    def _counters(self) -> list[dict]:
        """Each applied impairment's final counters, in order, the impairment removed; a delay
        line that died or overflowed fails the run (its capture is wrong: say so)."""
        out = []
        for applied in self.applied:
            try:
                applied.check()
            except LabError as e:
                self._fail(str(e))
            # remove() reads the rules' counts, then stops the delay lines for their final ones
            out.append(applied.remove().as_dict())
        return out

    def _running(self) -> str:
        return self.scenario.tool

    def _measured(self) -> dict:
        return _measured(self.doc)

    def _achieved(self) -> dict | None:
        """Achieved against asked (:mod:`.accuracy`) from the captures before and after the
        path: the run's own files where they sit there, else the lab's; None without an
        impairment or without both."""
        if not self.doc["impairment"]:
            return None
        files = {entry["side"]: self.out_path.parent / entry["file"]
                 for entry in self.doc["captures"]}
        files.update({side: path for side, (_, path) in self.witnesses.items()})
        before, after = files.get("sender"), files.get("receiver")
        if not (before and after and before.exists() and after.exists()):
            return None
        return accuracy.measured(accuracy.lab_run, self.doc, before, after)

    def _fail(self, text: str) -> None:
        if self.doc["status"] == "complete" or self.doc["status"] is None:
            self.doc["status"], self.doc["error"] = "failed", text
        else:
            self.doc["error"] += f"; {text}"

    def _stream_ids(self) -> None:
        flows = self.doc["flows"]
        for flow in flows:
            flow["streams"] = {}
        for entry, _, partial in self.captures:
            if not partial.exists() or not flows:
                continue
            ids = stream_ids(partial, flows)
            for flow, sid in zip(flows, ids):
                flow["streams"][entry["file"]] = sid

    def _hold(self, path: Path) -> None:
        """Keep the unfinished file open until the run ends (see the module docstring)."""
        with contextlib.suppress(FileNotFoundError):
            self.held.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))

    def _discard_partials(self) -> None:
        for _, _, partial in self.captures:
            for leftover in (partial, partial.with_name(partial.name + ".tmp.pcap")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()


# -- topology helpers -------------------------------------------------------------------------

def _capture_point(lab: Lab, side: str, pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """(host, interface) tcpdump listens on for a side.

    One pair: the sender's or receiver's own eth0, or the router's interface toward the sender.
    Several pairs (one file must hold every flow): the router's bridge toward the senders
    (sender, router: what the senders sent, before any impairment) or toward the receivers
    (receiver: after loss, delay and the rate limit, what the receivers get).
    """
    b = lab.bottleneck
    if len(pairs) == 1 and side in ("sender", "receiver"):
        host = pairs[0][0] if side == "sender" else pairs[0][1]
        return host, lab.interfaces(host)[0].name
    return b.router, b.egress if side == "receiver" else b.ingress


def _total_throughput_bps(doc: dict) -> float | None:
    """Received bytes of every flow over the span from the first start to the last end.

    Flows with their own times (simpleperf, file transfers) give that span; iperf3 runs exactly
    its -t from a common start, so its reports' rates add up.
    """
    flows = [f for f in doc["flows"] if f.get("received_bytes") is not None]
    timed = [f for f in flows if f.get("start_ns") and f.get("end_ns")]
    if timed and len(timed) == len(flows):
        span_s = (max(f["end_ns"] for f in timed) - min(f["start_ns"] for f in timed)) / 1e9
        return 8 * sum(f["received_bytes"] for f in timed) / span_s if span_s > 0 else None
    rates = [r["summary"].get("throughput_bps") for r in doc["reports"] if r["mode"] != "icmp"]
    return sum(rates) if rates and None not in rates else None


def _measured(doc: dict) -> dict:
    """Asked vs measured at a glance (see sidecar.FIELDS "measured"); over a chain, the path's:
    the slowest rate, the loss of all routers' rules together."""
    links = doc.get("hops") or ([doc["impairment"]] if doc.get("impairment") else [])
    throughput = _total_throughput_bps(doc)
    retrans = [f["tcp_info"]["total_retrans"][-1] for f in doc["flows"]
               if f.get("tcp_info") and f["tcp_info"].get("total_retrans")]
    rates = [link["asked"]["rate_bps"] for link in links if link["asked"].get("rate_bps")]
    asked = [link["asked"].get("loss") or 0.0 for link in links]
    measured = []
    for link in links:
        data_path = (((link.get("counters") or {}).get("loss") or {}).get("data") or {})
        seen, dropped = data_path.get("offered_packets"), data_path.get("dropped_packets")
        measured.append(dropped / seen if seen else None)
    return {
        "rtt_asked_ms": (doc.get("rtt") or {}).get("asked_ms"),
        "rtt_ms": (doc.get("rtt") or {}).get("median_ms"),
        "rate_asked_bps": min(rates) if rates else None,
        "throughput_bps": throughput,
        "loss_asked": _path_loss(asked),
        "loss_measured": _path_loss(measured),
        "retransmitted_segments": sum(retrans) if retrans else None,
    }


def _path_loss(per_link: list[float | None]) -> float | None:
    """The share lost over links in series: 1 - the product of what each keeps (None if a
    link's is unknown)."""
    if not per_link or None in per_link:
        return None
    if len(per_link) == 1:
        return per_link[0]
    return 1 - math.prod(1 - f for f in per_link)


# -- what the host can do ---------------------------------------------------------------------

def check_host() -> list[tuple[str, bool, str]]:
    """(what, ok, detail) for everything the lab relies on, for `pcapstats lab check`."""

    root = os.geteuid() == 0
    rows = [("root", root, "yes" if root else "no: run the lab as root (sudo)")]
    for tool, package in (("ip", "iproute2"), ("ethtool", "ethtool"), ("tc", "iproute2"),
                          ("iptables", "iptables"), ("tcpdump", "tcpdump"),
                          ("ping", "iputils-ping"), ("iperf3", "iperf3"),
                          ("editcap", "wireshark-common"), ("tshark", "tshark")):
        path = shutil.which(tool)
        rows.append((tool, path is not None,
                     path or f"missing: apt-get install {package}"))
    if root and shutil.which("ip") and shutil.which("ethtool") and shutil.which("tc"):
        with Lab() as lab:
            lab.add_host("probe")
            netem = impair.netem_available()
            queue = lab.run("probe", "sh", "-c", "test -e /proc/net/netfilter/nfnetlink_queue "
                            "|| iptables -w -A OUTPUT -o lo -j NFQUEUE --queue-num 9 "
                            "--queue-bypass", check=False).returncode == 0
        rows.append(("netem", True, "sch_netem: loss, delay and jitter by netem, rate by tbf"
                     if netem else "no sch_netem: fallback tbf (rate) + iptables statistic "
                     "(loss) + NFQUEUE delay line (delay, jitter)"))
        if not netem:
            rows.append(("nfqueue", queue, "NFQUEUE available (delay line)" if queue else
                         "no NFQUEUE: delays cannot be applied"))
    ccs = available_congestion_controls()
    rows.append(("congestion controls", bool(ccs), " ".join(ccs) or "unknown"))
    return rows
