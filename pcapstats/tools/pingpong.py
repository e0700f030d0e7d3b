"""pingpong: request/answer latency per message size, for the delay model D = a*S + b.

    python3 -m pcapstats.tools.pingpong -s [-b ADDR] [-p PORT] [--udp] [--once] [--report FILE]
    python3 -m pcapstats.tools.pingpong -c SERVER [-p PORT] [--udp] [--sizes LIST]
                                        [-r N] [--interval S] [--order sweep|interleave]
                                        [--timeout S] [--report FILE]
    pcapstats pingpong ...              (the same program, same flags)

The client sends a message of S bytes, the server answers with a message of the same S bytes,
and the client sends the next message only once it has read the whole answer: one message in
flight, ever.  The latency of a message is measured by the client, with
``time.perf_counter_ns()``, from just before it writes the message to the moment it has read
the last byte of the answer.  Latencies are averaged per size over ``-r`` repetitions.

The wire (what a capture shows)
-------------------------------
Every message, in both directions, is an 18-byte header followed by S - 18 fill bytes (so the
smallest message is 18 bytes; S counts the header)::

    offset  bytes  field
    0       2      magic  b"PP"
    2       4      seq    uint32, big-endian: 0, 1, 2, ... in the client's sending order
    6       4      size   uint32, big-endian: S, the whole message, header included
    10      8      time   uint64, big-endian: the client's time.time_ns() (CLOCK_REALTIME,
                          tcpdump's clock) taken just before it writes the message
    18      S-18   fill   b"p" * (S - 18); nobody checks it

The server's answer is exactly S bytes: the request's 18 header bytes echoed byte for byte
(same seq, size, time), then S - 18 fill bytes.  Nothing else is ever sent: no greeting, no
length prefix, no acknowledgement.

Who sends when:

- TCP (the default; TCP_NODELAY on both sides).  The client connects and writes message 0 with
  one ``sendall``.  The server reads the 18-byte header, learns S, reads exactly S - 18 more
  bytes, and only then writes its answer with one ``sendall``.  The client reads exactly S
  bytes, checks the header, sleeps ``--interval`` seconds, and writes message 1, and so on: in
  a capture, the client's payload of message k+1 starts after the last payload byte of answer
  k.  After the last answer the client shuts its side down (FIN), the server sees the end of
  the stream at a message boundary and closes too.  A server refuses a header with a bad magic
  or S outside 18 .. 16 MiB (it never allocates what a header asks for): it closes that
  connection with a warning (a ``--once`` server exits 2 with an error line instead).  The
  server serves clients one after another.
- UDP (``--udp``).  One datagram is one message, S is the datagram's length (at most 65507
  bytes; over 1472 bytes the kernel sends it in IP fragments).  The server answers every valid
  datagram with one datagram to its source.  The client waits ``--timeout`` seconds for the
  answer; without one the message counts as lost (a line says so) and the next one goes out.
  An answer that comes after its timeout (seq lower than the one awaited) is discarded and
  counted in the report's ``late_answers``.  At the end the client sends ``END`` -- a bare
  header with seq 0xFFFFFFFF and size 18 -- up to three times, 50 ms apart (stopping when ICMP
  says the server has gone): the server never answers it; a ``--once`` server exits at the
  first one.

Output (columns separated by at least two spaces, so a row splits on ``\\s{2,}``)
--------------------------------------------------------------------------------
Client: a header line, one ``no answer to seq N (S B) within T s: lost`` line per lost UDP
message (as they happen), then one row per size in the order of ``--sizes``::

    pingpong client to server 127.0.0.1, port 8089, TCP: 7 sizes x 10 repetitions (sweep)
    size (B)        n     lost   avg (ms)   min (ms)   max (ms)  mdev (ms)
          18       10        0      0.041      0.035      0.061      0.007

``n`` is the number of answers (the latencies averaged), ``lost`` the messages without one;
``n + lost`` is the number of repetitions.  mdev is ping's: sqrt(mean(x^2) - mean(x)^2).  A
size with no answer shows ``-`` for the times.

Server: ``pingpong server listening on ADDR:PORT (TCP|UDP)``, then one line per client when it
is done: ``client IP:PORT: N messages answered (B bytes each way), closed|END|protocol error|
server stopped``.

The report (``--report FILE``; schema ``pcapstats.pingpong/1``, one JSON object)
--------------------------------------------------------------------------------
Client: ``schema``, ``role`` ("client"), ``argv``, ``settings`` (``server``, ``port``,
``proto`` "tcp"/"udp", ``sizes``, ``repetitions``, ``interval_s``, ``order``, ``timeout_s``
(UDP; null for TCP)), ``local`` / ``remote`` (``ip:port``), ``start_ns`` (time.time_ns() of
the first send), ``samples`` (one ``[seq, size, send_ns, latency_ns]`` per message in sending
order; ``send_ns`` is perf_counter_ns relative to the first send, ``latency_ns`` null when
lost), ``sizes`` (one row per size: ``size``, ``n``, ``lost``, ``avg_ms``, ``min_ms``,
``max_ms``, ``mdev_ms``; null times when n is 0) and ``late_answers``.

Server: ``schema``, ``role`` ("server"), ``argv``, ``settings`` (``bind``, ``port``,
``proto``, ``once``), ``local`` (the listening ip:port), ``peers`` (one per TCP connection or
UDP source address: ``remote``, ``local``, ``messages`` answered, ``bytes_received``,
``bytes_sent``, ``start_ns`` / ``end_ns`` (time.time_ns()), ``ended`` ("closed", "END",
"protocol error", "server stopped"), ``problem``), and the totals ``messages``,
``bytes_received``, ``bytes_sent``, ``ignored_datagrams`` (UDP datagrams that were not
messages).

Errors are one line, ``pingpong: error: ...``, exit status 2 (bad flags, a size below 18 or
above the limit, a refused connection, a peer breaking the protocol); 130 when the client is
interrupted; never a traceback.  A server stopped with Ctrl-C or SIGTERM exits 0 (that is how
it ends; it still writes its report).  Lost UDP messages are a result, not an error: exit 0.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import re
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pcapstats.addresses import family, socket_endpoint
from pcapstats.tools import program
from pcapstats.tools.program import EXIT_OK
from pcapstats.tools.args import cc_name, count, ip_address, one_line_parser, port
from pcapstats.tools.tcpinfo import set_congestion

HEADER = struct.Struct(">2sIIQ")       # magic, seq, size, time_ns
HEADER_BYTES = HEADER.size             # 18: the smallest message
MAGIC = b"PP"
FILL = b"p"
END_SEQ = 0xFFFFFFFF                   # UDP: the client is done (size 18, never answered)
END_COPIES, END_SPACING_S = 3, 0.05

DEFAULT_PORT = 8089
DEFAULT_SIZES = (18, 64, 256, 1024, 4096, 16384, 65536)
MAX_TCP_SIZE = 16 * 1024 * 1024        # 16 MiB: the most either side sends or accepts
MAX_UDP_SIZE = 65507                   # 65535 - 20 (IPv4) - 8 (UDP)
DEFAULT_UDP_SIZES = DEFAULT_SIZES[:-1] + (MAX_UDP_SIZE,)
MAX_REPETITIONS = 1_000_000
MAX_SECONDS = 3600.0                   # --interval and --timeout
DEFAULT_REPETITIONS, DEFAULT_INTERVAL_S, DEFAULT_TIMEOUT_S = 10, 0.01, 1.0
REPORT_SCHEMA = "pcapstats.pingpong/1"

STALL_S = 60.0            # TCP: no byte for this long in the middle of a message: give up
CLOSE_WAIT_S = 5.0        # the client waits this long for the server's FIN after its own
MAX_UDP_PEERS = 4096      # UDP sources the server keeps apart; more are counted, not listed


class PingpongError(Exception):
    """Something the user can fix or must know; printed as one line."""


_Parser = one_line_parser(PingpongError)


class _PeerError(Exception):
    """The other end broke the protocol (server side: ends that connection)."""


# -- arguments --------------------------------------------------------------------------------

def parse_size(text: str) -> int:
    """``1024`` or ``64KiB`` (x 1024) -> bytes; 18 (the header) to 16 MiB."""
    match = re.fullmatch(r"\s*(\d+)\s*(kib)?\s*", text, re.I)
    if not match:
        raise ValueError(f"invalid size {text!r}: a whole number of bytes, or of KiB (64KiB "
                         "= 65536)")
    size = int(match.group(1)) * (1024 if match.group(2) else 1)
    if size < HEADER_BYTES:
        raise ValueError(f"invalid size {text!r}: the smallest message is {HEADER_BYTES} "
                         "bytes (its header)")
    if size > MAX_TCP_SIZE:
        raise ValueError(f"invalid size {text!r}: the largest message is {MAX_TCP_SIZE} bytes "
                         "(16384KiB)")
    return size


def _sizes(text: str) -> list[int]:
    items = text.split(",")
    try:
        sizes = [parse_size(item) for item in items]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    seen = set()
    for size in sizes:
        if size in seen:
            raise argparse.ArgumentTypeError(f"size {size} is listed twice in {text!r}")
        seen.add(size)
    return sizes


def _seconds(minimum_exclusive: bool):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value > 0 if minimum_exclusive else value >= 0
        if not (low_ok and value <= MAX_SECONDS):
            bound = "> 0" if minimum_exclusive else ">= 0"
            raise argparse.ArgumentTypeError(f"invalid time {text!r}: must be a number of "
                                             f"seconds {bound} and at most {MAX_SECONDS:g}")
        return value
    return parse


_SERVER_ONLY = {"bind": "-b/--bind", "once": "--once"}
_CLIENT_ONLY = {"sizes": "--sizes", "repetitions": "-r/--repetitions",
                "interval": "--interval", "order": "--order", "timeout": "--timeout"}


def build_parser(prog: str = "pingpong") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, allow_abbrev=False,
                description="Measure request/answer latency per message size between a "
                            "pingpong server (-s) and client (-c SERVER): each message of S "
                            "bytes is answered with S bytes before the next one goes.",
                epilog="Sizes are bytes, header (18 B) included; KiB = 1024 B. Times in the "
                       "table are milliseconds.")
    mode = p.add_argument_group("mode (exactly one)")
    mode.add_argument("-s", "--server", action="store_true", help="run as the server")
    mode.add_argument("-c", "--client", metavar="SERVER", default=None,
                      help="run as the client of this server (address or name)")
    both = p.add_argument_group("server and client")
    both.add_argument("-p", "--port", type=port, default=DEFAULT_PORT,
                      help=f"port, 1024-65535 (default {DEFAULT_PORT})")
    both.add_argument("--udp", action="store_true", help="UDP instead of TCP")
    both.add_argument("--cc", type=cc_name, default=None, metavar="NAME",
                      help="TCP congestion control for the socket(s) (reno, cubic, bbr, ...; "
                           "default: the host's)")
    both.add_argument("--report", type=Path, default=None, metavar="FILE",
                      help="write a JSON report (schema pcapstats.pingpong/1)")
    srv = p.add_argument_group("server")
    srv.add_argument("-b", "--bind", type=ip_address, default=None, metavar="ADDR",
                     help="listen on this address (default: all, IPv4 and IPv6)")
    srv.add_argument("--once", action="store_true",
                     help="exit after the first client closes (TCP) / after an END (UDP)")
    cli = p.add_argument_group("client")
    cli.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
                     help="message sizes, comma-separated, bytes or KiB (default "
                          f"{','.join(map(str, DEFAULT_SIZES))}; with --udp the last is "
                          f"{MAX_UDP_SIZE})")
    cli.add_argument("-r", "--repetitions", type=count("number of repetitions", MAX_REPETITIONS), default=None, metavar="N",
                     help=f"messages per size (default {DEFAULT_REPETITIONS})")
    cli.add_argument("--interval", type=_seconds(False), default=None, metavar="S",
                     help=f"pause after each answer (default {DEFAULT_INTERVAL_S:g})")
    cli.add_argument("--order", choices=("sweep", "interleave"), default=None,
                     help="sweep: all repetitions of one size, then the next size; "
                          "interleave: one message of each size in turn (default sweep)")
    cli.add_argument("--timeout", type=_seconds(True), default=None, metavar="S",
                     help=f"UDP: wait this long for an answer, then count the message lost "
                          f"(default {DEFAULT_TIMEOUT_S:g})")
    return p


def parse_args(argv: list[str], prog: str = "pingpong") -> argparse.Namespace:
    """Parse and check the flags; PingpongError (one line) for anything wrong."""
    opts = build_parser(prog).parse_args(argv)
    if opts.server == (opts.client is not None):
        raise PingpongError("choose exactly one mode: -s (server) or -c SERVER (client)")
    given = {k for k, v in vars(opts).items() if v is not None and v is not False}
    wrong = _CLIENT_ONLY if opts.server else _SERVER_ONLY
    misplaced = [flag for key, flag in wrong.items() if key in given]
    if misplaced:
        mode = "server (-s)" if opts.server else "client (-c)"
        raise PingpongError(f"{', '.join(misplaced)} cannot be used in {mode} mode")
    if opts.client is not None:
        if not opts.client.strip():
            raise PingpongError("argument -c/--client: give the server's address")
        if opts.timeout is not None and not opts.udp:
            raise PingpongError("--timeout is for --udp only (TCP loses no message: it "
                                "retransmits)")
        if opts.sizes is None:
            opts.sizes = list(DEFAULT_UDP_SIZES if opts.udp else DEFAULT_SIZES)
        if opts.udp:
            big = [s for s in opts.sizes if s > MAX_UDP_SIZE]
            if big:
                raise PingpongError(f"invalid size {big[0]} with --udp: one datagram carries "
                                    f"at most {MAX_UDP_SIZE} bytes")
        opts.repetitions = opts.repetitions or DEFAULT_REPETITIONS
        opts.interval = DEFAULT_INTERVAL_S if opts.interval is None else opts.interval
        opts.order = opts.order or "sweep"
        opts.timeout = (opts.timeout or DEFAULT_TIMEOUT_S) if opts.udp else None
        if len(opts.sizes) * opts.repetitions >= END_SEQ:
            raise PingpongError("too many messages: sizes x repetitions must stay below "
                                f"{END_SEQ}")
    if opts.cc is not None and opts.udp:
        raise PingpongError("--cc is for TCP: UDP has no congestion control")
    if opts.report is not None and not opts.report.parent.is_dir():
        raise PingpongError(f"cannot write the report {opts.report}: no directory "
                            f"{opts.report.parent}")
    return opts


# -- small things -----------------------------------------------------------------------------

def _set_cc(sock: socket.socket, name: str | None) -> None:
    """TCP_CONGESTION on sock when asked; one line when the kernel refuses."""
    if name:
        try:
            set_congestion(sock, name)
        except ValueError as e:
            raise PingpongError(str(e)) from None


def _say(*lines: str) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def _warn(text: str) -> None:
    print(f"pingpong: warning: {text}", file=sys.stderr, flush=True)




def _write_report(path: Path, doc: dict) -> None:
    try:
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    except OSError as e:
        raise PingpongError(f"cannot write the report {path}: {e.strerror}") from None


def _proto(opts) -> str:
    return "udp" if opts.udp else "tcp"


# -- statistics -------------------------------------------------------------------------------

def summarize(size: int, latencies_ns: list[Optional[int]]) -> dict:
    """One summary row: n answers, lost, avg/min/max/mdev in ms (None when nothing came back).
    mdev as ping's, sqrt(mean(x^2) - mean(x)^2), computed exactly in integers."""
    got = [x for x in latencies_ns if x is not None]
    row = {"size": size, "n": len(got), "lost": len(latencies_ns) - len(got),
           "avg_ms": None, "min_ms": None, "max_ms": None, "mdev_ms": None}
    if got:
        n, total, squares = len(got), sum(got), sum(x * x for x in got)
        variance_n2 = n * squares - total * total   # n^2 * variance, exact and >= 0
        row.update(avg_ms=total / n / 1e6, min_ms=min(got) / 1e6, max_ms=max(got) / 1e6,
                   mdev_ms=math.sqrt(variance_n2) / n / 1e6)
    return row


_WIDTHS = (8, 7, 7, 9, 9, 9, 9)
TABLE_HEADER = ("size (B)", "n", "lost", "avg (ms)", "min (ms)", "max (ms)", "mdev (ms)")


def _line(cells) -> str:
    return "  ".join(f"{cell:>{width}}" for cell, width in zip(cells, _WIDTHS))


def format_table(rows: list[dict]) -> list[str]:
    lines = [_line(TABLE_HEADER)]
    for r in rows:
        times = ["-" if r[k] is None else f"{r[k]:.3f}"
                 for k in ("avg_ms", "min_ms", "max_ms", "mdev_ms")]
        lines.append(_line([str(r["size"]), str(r["n"]), str(r["lost"]), *times]))
    return lines


# -- client -----------------------------------------------------------------------------------

def _plan(sizes: list[int], repetitions: int, order: str):
    """The sizes in sending order (a generator: a million messages need no list)."""
    if order == "sweep":
        for size in sizes:
            for _ in range(repetitions):
                yield size
    else:
        for _ in range(repetitions):
            yield from sizes


def _resolve(server: str, port: int, kind: int) -> tuple:
    try:
        infos = socket.getaddrinfo(server, port, 0, kind)
    except socket.gaierror as e:
        raise PingpongError(f"cannot resolve the server {server!r}: {e.strerror}") from None
    family, _, _, _, addr = infos[0]
    return family, addr


def _mismatch(sent: bytes, got: bytes) -> str:
    """What differs between the request's header and the answer's."""
    names = ("magic", "seq", "size", "time")
    a, b = HEADER.unpack(sent), HEADER.unpack(got)
    return ", ".join(f"{name} {y!r} instead of {x!r}" for name, x, y in zip(names, a, b)
                     if x != y)


class _Client:
    def __init__(self, opts):
        self.opts = opts
        self.samples: list[list] = []
        self.late = 0
        self.local = self.remote = ""
        self.start_ns: Optional[int] = None     # time.time_ns() of the first send
        self.t_first = 0                          # perf_counter_ns() of the first send
        top = max(opts.sizes)
        self.out = bytearray(FILL * top)           # the message: header written in place
        self.inp = bytearray(max(top, 65536))      # the answer

    # one exchange each: returns the latency in ns, or None when lost (UDP)
    def _connect_tcp(self) -> socket.socket:
        opts = self.opts
        family, addr = _resolve(opts.client, opts.port, socket.SOCK_STREAM)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _set_cc(sock, opts.cc)
            program.connect(sock, addr, prog="pingpong", error=PingpongError)
            sock.settimeout(STALL_S)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connect_udp(self) -> socket.socket:
        opts = self.opts
        family, addr = _resolve(opts.client, opts.port, socket.SOCK_DGRAM)
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.connect(addr)  # only the server's datagrams arrive; ICMP errors reach us
        except OSError as e:
            sock.close()
            raise PingpongError(f"cannot send to {socket_endpoint(addr)}: {e.strerror or e}") from None
        return sock

    def _tcp_exchange(self, sock: socket.socket, seq: int, size: int) -> int:
        header = HEADER.pack(MAGIC, seq, size, time.time_ns())
        self.out[:HEADER_BYTES] = header
        message = memoryview(self.out)[:size]
        view = memoryview(self.inp)
        t0 = time.perf_counter_ns()
        self._mark(t0, seq, size)
        sock.sendall(message)
        got = 0
        while got < size:
            try:
                n = sock.recv_into(view[got:size])
            except socket.timeout:
                raise PingpongError(f"no answer from the server {self.remote} for "
                                    f"{STALL_S:g} s (seq {seq}, {size} B; {got} B of the "
                                    "answer arrived)") from None
            if n == 0:
                raise PingpongError(f"the server {self.remote} closed the connection after "
                                    f"{got} of the {size} bytes of the answer to seq {seq}")
            got += n
            if got >= HEADER_BYTES and got - n < HEADER_BYTES:  # the header is complete
                answer = bytes(view[:HEADER_BYTES])
                if answer != header:
                    raise PingpongError(f"the server {self.remote} broke the protocol: the "
                                        f"answer to seq {seq} ({size} B) has "
                                        f"{_mismatch(header, answer)}")
        return time.perf_counter_ns() - t0

    def _udp_exchange(self, sock: socket.socket, seq: int, size: int) -> Optional[int]:
        header = HEADER.pack(MAGIC, seq, size, time.time_ns())
        self.out[:HEADER_BYTES] = header
        message = memoryview(self.out)[:size]
        timeout_ns = int(self.opts.timeout * 1e9)
        t0 = time.perf_counter_ns()
        self._mark(t0, seq, size)
        sock.send(message)
        while True:
            left = t0 + timeout_ns - time.perf_counter_ns()
            if left <= 0:
                return None
            sock.settimeout(left / 1e9)
            try:
                n = sock.recv_into(self.inp)
            except socket.timeout:
                return None
            t1 = time.perf_counter_ns()
            answer = bytes(self.inp[:HEADER_BYTES])
            if n >= HEADER_BYTES and answer[:2] == MAGIC:
                seq_got = HEADER.unpack(answer)[1]
                if seq_got < seq:   # the answer to a message already counted lost
                    self.late += 1
                    continue
                if answer == header and n == size:
                    return t1 - t0
            if n < HEADER_BYTES:
                problem = f"a datagram of {n} bytes, shorter than the {HEADER_BYTES}-byte header"
            elif answer != header:
                problem = _mismatch(header, answer)
            else:
                problem = f"{n} bytes instead of {size}"
            raise PingpongError(f"the server {self.remote} broke the protocol: the answer to "
                                f"seq {seq} ({size} B) has {problem}")

    def _mark(self, t0: int, seq: int, size: int) -> None:
        if self.start_ns is None:
            self.start_ns, self.t_first = time.time_ns(), t0
        self.samples.append([seq, size, t0 - self.t_first, None])

    def run(self) -> list[dict]:
        opts = self.opts
        sock = self._connect_udp() if opts.udp else self._connect_tcp()
        try:
            self.local, self.remote = socket_endpoint(sock.getsockname()), socket_endpoint(sock.getpeername())
            exchange = self._udp_exchange if opts.udp else self._tcp_exchange
            first = True
            for seq, size in enumerate(_plan(opts.sizes, opts.repetitions, opts.order)):
                if not first and opts.interval:
                    time.sleep(opts.interval)
                first = False
                try:
                    latency = exchange(sock, seq, size)
                except ConnectionRefusedError:  # UDP: ICMP port unreachable
                    raise PingpongError(f"no pingpong server at {self.remote} (UDP): "
                                        "connection refused (start one with -s --udp)") from None
                except OSError as e:
                    raise PingpongError(f"the connection to {self.remote} broke at seq {seq}: "
                                        f"{e.strerror or e}") from None
                self.samples[-1][3] = latency
                if latency is None:
                    _say(f"no answer to seq {seq} ({size} B) within {opts.timeout:g} s: lost")
            if opts.udp:
                self._send_end(sock)
            else:
                self._close_tcp(sock)
        finally:
            sock.close()
        by_size: dict[int, list] = {size: [] for size in opts.sizes}
        for _, size, _, latency in self.samples:
            by_size[size].append(latency)
        return [summarize(size, by_size[size]) for size in opts.sizes]

    def _send_end(self, sock: socket.socket) -> None:
        for k in range(END_COPIES):
            if k:
                time.sleep(END_SPACING_S)
            try:
                sock.send(HEADER.pack(MAGIC, END_SEQ, HEADER_BYTES, time.time_ns()))
            except OSError:  # ICMP: the server has gone (a --once server leaves at the first)
                break

    def _close_tcp(self, sock: socket.socket) -> None:
        """FIN, then wait for the server's: a capture ends with both."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(CLOSE_WAIT_S)
            extra = sock.recv(65536)
        except socket.timeout:
            _warn(f"the server {self.remote} did not close within {CLOSE_WAIT_S:g} s")
            return
        except OSError:
            return
        if extra:
            raise PingpongError(f"the server {self.remote} broke the protocol: it sent "
                                f"{len(extra)} bytes after the last answer")


def run_client(opts, argv: list[str]) -> int:
    proto = _proto(opts).upper()
    _say(f"pingpong client to server {opts.client}, port {opts.port}, {proto}: "
         f"{len(opts.sizes)} sizes x {opts.repetitions} repetitions ({opts.order})")
    client = _Client(opts)
    rows = client.run()
    _say(*format_table(rows))
    if client.late:
        _say(f"{client.late} answers came after their timeout (discarded)")
    if opts.report:
        _write_report(opts.report, {
            "schema": REPORT_SCHEMA, "role": "client", "argv": argv,
            "settings": {"server": opts.client, "port": opts.port, "proto": _proto(opts),
                         "sizes": opts.sizes, "repetitions": opts.repetitions,
                         "interval_s": opts.interval, "order": opts.order,
                         "timeout_s": opts.timeout, "cc": opts.cc},
            "local": client.local, "remote": client.remote, "start_ns": client.start_ns,
            "samples": client.samples, "sizes": rows, "late_answers": client.late})
    return EXIT_OK


# -- server -----------------------------------------------------------------------------------

@dataclass
class Peer:
    """One TCP connection, or one UDP source address, as the server saw it."""
    remote: str
    local: str
    start_ns: int = field(default_factory=time.time_ns)
    end_ns: int = 0
    messages: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    ended: str = ""
    problem: str = ""
    ignored: int = 0          # UDP datagrams that were not messages

    def line(self) -> str:
        return (f"client {self.remote}: {self.messages} messages answered "
                f"({self.bytes_sent} bytes each way), {self.ended}")

    def to_json(self) -> dict:
        return {"remote": self.remote, "local": self.local, "messages": self.messages,
                "bytes_received": self.bytes_received, "bytes_sent": self.bytes_sent,
                "start_ns": self.start_ns, "end_ns": self.end_ns, "ended": self.ended,
                "problem": self.problem}


def _bind(opts) -> socket.socket:
    """The server's socket: -b's address, or every IPv4 and IPv6 address (IPv4 alone when the
    host has no IPv6)."""
    kind = socket.SOCK_DGRAM if opts.udp else socket.SOCK_STREAM
    addrs = [opts.bind] if opts.bind else ["::", "0.0.0.0"]
    for addr in addrs:
        try:
            sock = socket.socket(family(addr), kind)
        except OSError as e:
            if addr == "::" and not opts.bind:
                continue
            raise PingpongError(f"cannot open a socket for {addr}: {e.strerror}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if addr == "::":
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((addr, opts.port))
            if not opts.udp:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _set_cc(sock, opts.cc)               # accepted sockets inherit it
                sock.listen(16)
            return sock
        except OSError as e:
            sock.close()
            if addr == "::" and not opts.bind and e.errno in (errno.EADDRNOTAVAIL,
                                                              errno.EAFNOSUPPORT):
                continue
            hint = {errno.EADDRINUSE: " (another server on this port? choose one with -p)",
                    errno.EADDRNOTAVAIL: " (no interface has this address)",
                    errno.EACCES: " (not allowed)"}.get(e.errno, "")
            raise PingpongError(f"cannot listen on {socket_endpoint((addr, opts.port))}: "
                                f"{e.strerror}{hint}") from None
    raise PingpongError(f"cannot listen on port {opts.port}: no IPv4 or IPv6 here")


class _Answers:
    """The answer buffer: fill bytes, grown to the largest message seen (at most the limit);
    the header is written in place, so every answer is one buffer, one send."""

    def __init__(self):
        self.buf = bytearray(FILL * 65536)

    def send(self, send, header: bytes, size: int, *args) -> None:
        """``send(message, *args)`` once, the message being header + fill, S bytes."""
        if len(self.buf) < size:
            self.buf.extend(FILL * (size - len(self.buf)))
        self.buf[:HEADER_BYTES] = header
        with memoryview(self.buf) as view:   # released at once: the buffer may grow later
            send(view[:size], *args)


def _read_exact(sock: socket.socket, view: memoryview, start_of_message: bool) -> int:
    """Fill view; the count read (short only at the end of the stream).  Waits as long as it
    takes for the first byte of a message, at most STALL_S for any other byte."""
    got = 0
    while got < len(view):
        try:
            n = sock.recv_into(view[got:])
        except socket.timeout:
            if start_of_message and got == 0:
                continue
            raise _PeerError(f"sent nothing for {STALL_S:g} s in the middle of a message")
        if n == 0:
            break
        got += n
    return got


def _tcp_session(sock: socket.socket, peer: Peer, answers: _Answers) -> None:
    """Answer messages until the client closes at a message boundary; _PeerError otherwise."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(STALL_S)
    header = bytearray(HEADER_BYTES)
    scratch = memoryview(bytearray(256 * 1024))   # the fill is read and dropped
    while True:
        got = _read_exact(sock, memoryview(header), True)
        if got == 0:
            return
        which = f"message {peer.messages + 1}"
        if got < HEADER_BYTES:
            raise _PeerError(f"closed the connection {got} bytes into the header of {which}")
        magic, seq, size, _ = HEADER.unpack(header)
        if magic != MAGIC:
            raise _PeerError(f"{which} starts with {magic!r}, not {MAGIC!r}")
        if size < HEADER_BYTES:
            raise _PeerError(f"{which} (seq {seq}) says size {size}, less than its "
                             f"{HEADER_BYTES}-byte header")
        if size > MAX_TCP_SIZE:
            raise _PeerError(f"{which} (seq {seq}) says size {size}, above the limit of "
                             f"{MAX_TCP_SIZE} bytes")
        left = size - HEADER_BYTES
        while left:
            chunk = min(left, len(scratch))
            got = _read_exact(sock, scratch[:chunk], False)
            left -= got
            if got < chunk:
                raise _PeerError(f"closed the connection {size - left} bytes into {which} "
                                 f"(seq {seq}, {size} B)")
        peer.bytes_received += size
        answers.send(sock.sendall, bytes(header), size)
        peer.messages += 1
        peer.bytes_sent += size


def _serve_tcp(lsock: socket.socket, opts, peers: list[Peer]) -> None:
    answers = _Answers()
    while True:
        sock, addr = lsock.accept()
        peer = Peer(remote=socket_endpoint(addr), local=socket_endpoint(sock.getsockname()))
        peers.append(peer)
        try:
            _tcp_session(sock, peer, answers)
            peer.ended = "closed"
        except _PeerError as e:
            peer.ended, peer.problem = "protocol error", str(e)
        except OSError as e:
            peer.ended = "protocol error"
            peer.problem = f"the connection broke: {e.strerror or e}"
        finally:
            sock.close()
            peer.end_ns = time.time_ns()
        _say(peer.line())
        if peer.problem:
            if opts.once:
                raise PingpongError(f"client {peer.remote} broke the protocol: {peer.problem}")
            _warn(f"client {peer.remote}: {peer.problem}; connection closed")
        if opts.once:
            return


def _serve_udp(sock: socket.socket, opts, peers: list[Peer], stats: dict) -> None:
    answers = _Answers()
    buf = bytearray(65536)
    local = socket_endpoint(sock.getsockname())
    open_peers: dict[str, Peer] = {}
    try:
        while True:
            n, addr = sock.recvfrom_into(buf)
            key = socket_endpoint(addr)
            peer = open_peers.get(key)
            if peer is None and len(open_peers) < MAX_UDP_PEERS:
                peer = open_peers[key] = Peer(remote=key, local=local)
                peers.append(peer)
            header = bytes(buf[:HEADER_BYTES])
            problem = ""
            if n < HEADER_BYTES:
                problem = f"a datagram of {n} bytes, shorter than the {HEADER_BYTES}-byte header"
            elif header[:2] != MAGIC:
                problem = f"a datagram starting with {header[:2]!r}, not {MAGIC!r}"
            else:
                _, seq, size, _ = HEADER.unpack(header)
                if seq == END_SEQ and size == HEADER_BYTES and n == HEADER_BYTES:
                    if peer is not None:
                        del open_peers[key]
                        peer.ended, peer.end_ns = "END", time.time_ns()
                        if peer.messages or peer.ignored:
                            _say(peer.line())
                        else:       # a repeated END: not a client of its own
                            peers.remove(peer)
                    if opts.once:
                        return
                    continue
                if size != n:
                    problem = f"a datagram of {n} bytes whose header says size {size}"
            if problem:
                stats["ignored_datagrams"] += 1
                if peer is not None:
                    peer.ignored += 1
                    if peer.ignored == 1:
                        peer.problem = problem
                        _warn(f"{key}: ignored {problem} (further ones from there are counted "
                              "in the report only)")
                continue
            try:
                answers.send(sock.sendto, header, n, addr)
            except OSError as e:
                _warn(f"{key}: cannot answer seq {seq}: {e.strerror or e}")
                continue
            stats["untracked_messages"] += peer is None
            if peer is not None:
                peer.messages += 1
                peer.bytes_received += n
                peer.bytes_sent += n
                peer.end_ns = time.time_ns()
    finally:
        for peer in open_peers.values():
            if peer.messages or peer.ignored:
                peer.ended = "server stopped"
                peer.end_ns = peer.end_ns or time.time_ns()
                _say(peer.line())
            else:
                peers.remove(peer)


def run_server(opts, argv: list[str]) -> int:
    sock = _bind(opts)
    peers: list[Peer] = []
    stats = {"ignored_datagrams": 0, "untracked_messages": 0}
    local = socket_endpoint(sock.getsockname())
    error = None
    try:
        _say(f"pingpong server listening on {local} ({_proto(opts).upper()})")
        if opts.udp:
            _serve_udp(sock, opts, peers, stats)
        else:
            _serve_tcp(sock, opts, peers)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the way a server ends
        for peer in peers:
            if not peer.ended:
                peer.ended, peer.end_ns = "server stopped", time.time_ns()
                _say(peer.line())
    except PingpongError as e:
        error = e
    finally:
        sock.close()
    if opts.report:
        doc = {"schema": REPORT_SCHEMA, "role": "server", "argv": argv,
               "settings": {"bind": opts.bind, "port": opts.port, "proto": _proto(opts),
                            "once": opts.once},
               "local": local, "peers": [p.to_json() for p in peers],
               "messages": sum(p.messages for p in peers) + stats["untracked_messages"],
               "bytes_received": sum(p.bytes_received for p in peers),
               "bytes_sent": sum(p.bytes_sent for p in peers),
               "ignored_datagrams": stats["ignored_datagrams"]}
        _write_report(opts.report, doc)
    if error is not None:
        raise error
    return EXIT_OK


# -- entry point ------------------------------------------------------------------------------

def main(argv: Optional[list[str]] = None, prog: str = "pingpong") -> int:
    """Run pingpong with these arguments; returns the exit status (one error line on failure)."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def work() -> int:
        opts = parse_args(argv, prog)
        return run_server(opts, argv) if opts.server else run_client(opts, argv)
    return program.run("pingpong", work, PingpongError)


if __name__ == "__main__":
    sys.exit(main())
