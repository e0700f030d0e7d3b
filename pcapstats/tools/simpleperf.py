"""simpleperf: the course's iperf-like TCP throughput tool, as its spec describes it.

    python3 -m pcapstats.tools.simpleperf -s [-b IP] [-p PORT] [-f B|KB|MB]
    python3 -m pcapstats.tools.simpleperf -c [-I IP] [-p PORT] [-t S | -n SIZE] [-i S] [-P N] [-f UNIT]
    pcapstats simpleperf ...              (the same program, same flags)

Protocol (one TCP connection each; with ``-P N`` the client opens N and they run at once):

1. The client connects (all N connections first, then they start together) and writes
   1000-byte messages, each ``b"0" * 1000`` (ASCII zeros: no message can contain ``BYE``),
   for ``-t`` seconds, or until ``-n`` bytes are written.  When ``-n`` is not a multiple of
   1000 the last message is shorter (``-n 2500B``: 1000 + 1000 + 500 bytes), so exactly ``-n``
   bytes go out.  ``-n`` is per connection.
2. The client writes ``BYE`` and waits for ``ACK: BYE``.
3. The server counts the bytes before ``BYE`` (message bytes only).  When the stream read so
   far ends with ``BYE`` it answers ``ACK: BYE``, waits for the client to close, and closes.
4. The client, on reading ``ACK: BYE``, closes.

Units: 1 KB = 1000 B, 1 MB = 1 000 000 B (decimal, as the spec); bandwidth in Mbps = 10**6
bit/s.  ``-n`` takes an integer and a unit: ``500B``, ``1KB``, ``10MB`` (unit in any case).

Output (a stable format; columns are separated by at least two spaces, so a row splits on
``\\s{2,}``):

Server::

    ---------------------------------------------
    A simpleperf server is listening on port 8088
    ---------------------------------------------
    A simpleperf client with 10.77.1.1:41234 is connected with 10.77.2.1:8088
    ID                     Interval        Received        Rate
    10.77.1.1:41234        0.0 - 2.0       12.34 MB        49.36 Mbps

Client::

    ---------------------------------------------------------------
    A simpleperf client connecting to server 10.77.2.1, port 8088
    ---------------------------------------------------------------
    Client 10.77.1.1:41234 connected with 10.77.2.1 port 8088
    ID                     Interval        Transfer        Bandwidth
    10.77.1.1:41234        0.0 - 1.0       6.17 MB         49.36 Mbps     (-i 1: one row a second)
    10.77.1.1:41234        1.0 - 2.0       6.17 MB         49.36 Mbps
    ---------------------------------------------------------------     (only after -i rows)
    10.77.1.1:41234        0.0 - 2.0       12.34 MB        49.36 Mbps     (summary row)

- ID is the client's end of the connection, ``ip:port`` (``[ip]:port`` for IPv6), on both
  sides, so the server's and the client's rows of one connection carry the same ID.
- Transfer/Received: ``<integer> B`` with ``-f B``, else two decimals and the unit.
- Interval rows (``-i S``) count the message bytes the client handed to its socket in each
  interval (``k*S - (k+1)*S``, seconds since the first message; the last row ends where
  sending ended); their Transfer sums to the summary's.  Bandwidth is bytes*8 / the row's span.
- Client summary: the interval runs from the first message to the arrival of ``ACK: BYE``, so
  its bandwidth is what the server really received per second (data still queued in the
  socket buffer when sending stops is counted until it has arrived).
- Server row: from accepting the connection to reading ``BYE``.

Errors are one line, ``simpleperf: error: ...``, exit status 2 (130 on Ctrl-C for the client);
never a traceback.  A server stopped with Ctrl-C or SIGTERM exits 0 (that is how it ends).
A client that breaks the protocol gives the server a one-line ``simpleperf: warning: ...``.

pcapstats additions (long options only; not in the classic spec):

--cc NAME              TCP_CONGESTION (reno, cubic, bbr, ...) set on the socket before
                       connect (client) / listen (server); error line if the kernel refuses.
--sndbuf/--rcvbuf B    SO_SNDBUF/SO_RCVBUF before connect/listen (the kernel doubles the value
                       and caps it at net.core.[wr]mem_max; the report has what it granted).
--report FILE          a JSON report (client and server), described below.
--tcp-info-interval S  client: TCP_INFO sampling period (default 0.01 s).
--once                 server: exit after the first batch of connections: once at least one
                       connection came, none is open, none waits to be accepted and none has
                       arrived for 0.5 s after the last one closed.  Exit 0, or 2 when a
                       connection of the batch broke the protocol.  (A ``-P N`` client connects
                       all N before sending, so they always fall in one batch.)

The report (``--report``; schema ``pcapstats.simpleperf/1``, compact JSON, one object):
``schema``, ``role`` ("client"/"server"), ``argv``, the settings (client: ``server``,
``format``, ``time_s``, ``num_bytes``, ``parallel``, ``interval_s``, ``message_bytes``,
``tcp_info_interval_s``, and ``sampler``: the TCP_INFO sampler's real period and CPU cost, see
TcpInfoSampler.stats; server: ``port``, ``bind``, ``format``, ``message_bytes``), and
``connections``, one object each (on the server: those that finished):

- ``id`` the client's ip:port (as in the tables), ``local`` / ``remote`` this end's and the
  other end's ip:port; ``cc`` the congestion control the socket ran; ``sndbuf_bytes`` /
  ``rcvbuf_bytes`` what the kernel granted (getsockopt);
- ``bytes`` message bytes (BYE not counted); ``protocol_ok`` and ``problem`` (server: why not);
- ``start_ns`` / ``end_ns`` CLOCK_REALTIME ns (tcpdump's clock: place them on a capture's time
  line), ``start_mono_ns`` / ``end_mono_ns`` CLOCK_MONOTONIC ns; the client's run from the
  first message to ACK: BYE, the server's from accept to BYE; ``duration_s``,
  ``bandwidth_bps`` = bytes * 8 / duration_s; client: ``bye_sent_ns``, ``intervals`` (the -i
  rows: ``start_s``, ``end_s``, ``bytes``);
- ``tcp_info_final``: every TCP_INFO field (pcapstats.tools.tcpinfo), read just before close --
  on the client after ACK: BYE, on the server after the client's FIN (so its
  ``bytes_received`` counts the FIN's sequence number, as ``bytes_acked`` counts the SYN's);
- client: ``tcp_info``, the series sampled every ``--tcp-info-interval`` from connect to just
  before close, as columns: ``t_ns`` (realtime), ``t_mono_ns`` and one list per field of
  tcpinfo.SERIES_FIELDS.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import re
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, TextIO

from pcapstats.addresses import family, socket_endpoint
from pcapstats.tools import program
from pcapstats.tools.program import EXIT_OK
from pcapstats.tools.args import cc_name, count, ip_address, one_line_parser, port
from pcapstats.errors import UsageError
from pcapstats.tools.wire import (SIMPLEPERF_ACK, SIMPLEPERF_BYE, SIMPLEPERF_MESSAGE,
                                 SIMPLEPERF_MESSAGE_BYTES, SIMPLEPERF_PORT)
from pcapstats.tools.tcpinfo import TcpInfoSampler, set_congestion, tcp_congestion, tcp_info
from pcapstats.units import SIMPLEPERF_UNITS, parse_simpleperf_size

DEFAULT_PORT = SIMPLEPERF_PORT
DEFAULT_TIME_S = 25.0
MESSAGE_BYTES, MESSAGE = SIMPLEPERF_MESSAGE_BYTES, SIMPLEPERF_MESSAGE
BYE, ACK = SIMPLEPERF_BYE, SIMPLEPERF_ACK
MAX_PARALLEL = 5
REPORT_SCHEMA = "pcapstats.simpleperf/1"

# program.USER_TIMEOUT_S breaks a connection whose data is unacknowledged that long (not 15 min
# of retries); 30 % loss needs 8 drops in a row of one segment to get there
ACK_WAIT_S = 10.0          # everything delivered, yet no ACK: BYE for this long: give up
CLOSE_WAIT_S = 10.0        # the server waits this long for the client to close after ACK: BYE
ONCE_GRACE_S = 0.5

SEPARATOR_SERVER = "-" * 45
SEPARATOR_CLIENT = "-" * 63


class SimpleperfError(Exception):
    """Something the user can fix or must know; printed as one line."""


_Parser = one_line_parser(SimpleperfError)


# -- arguments --------------------------------------------------------------------------------

def _size(text: str) -> int:
    try:
        return parse_simpleperf_size(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"invalid time {text!r}: must be a number of seconds "
                                         "> 0")
    return value


def _buffer_bytes(text: str) -> int:
    if not re.fullmatch(r"\d+", text) or int(text) == 0:
        raise argparse.ArgumentTypeError(f"invalid buffer size {text!r}: must be a positive "
                                         "number of bytes")
    return int(text)


_SERVER_ONLY = {"bind": "-b/--bind", "once": "--once"}
_CLIENT_ONLY = {"serverip": "-I/--serverip", "time": "-t/--time", "interval": "-i/--interval",
                "parallel": "-P/--parallel", "num": "-n/--num",
                "tcp_info_interval": "--tcp-info-interval", "rate": "--rate"}


def _rate_bps(text: str) -> float:
    """An application rate: bits/s with an optional k/m/g prefix and 'bit' or 'bps'."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:bit|bps|bit/s)?\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a rate: {text!r} (e.g. 5mbit, 800kbit)")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def build_parser(prog: str = "simpleperf") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, allow_abbrev=False,
                description="Measure TCP throughput between a simpleperf server (-s) and "
                            "client (-c).",
                epilog="Units are decimal: 1 KB = 1000 B, 1 MB = 1000000 B; bandwidth in Mbps.")
    mode = p.add_argument_group("mode (exactly one)")
    mode.add_argument("-s", "--server", action="store_true", help="run as the server")
    mode.add_argument("-c", "--client", action="store_true", help="run as the client")
    both = p.add_argument_group("server and client")
    both.add_argument("-p", "--port", type=port, default=DEFAULT_PORT,
                      help=f"port, 1024-65535 (default {DEFAULT_PORT})")
    both.add_argument("-f", "--format", choices=list(SIMPLEPERF_UNITS), default="MB",
                      help="unit of Transfer/Received: B, KB or MB (default MB)")
    srv = p.add_argument_group("server")
    srv.add_argument("-b", "--bind", type=ip_address, default=None,
                     help="listen on this address (default: all, IPv4 and IPv6)")
    cli = p.add_argument_group("client")
    cli.add_argument("-I", "--serverip", type=ip_address, default=None,
                     help="the server's address (default 127.0.0.1)")
    cli.add_argument("-t", "--time", type=_positive_seconds, default=None,
                     help=f"send for this many seconds (default {DEFAULT_TIME_S:g})")
    cli.add_argument("-n", "--num", type=_size, default=None,
                     help="send this many bytes instead (10MB, 1KB, 500B), per connection")
    cli.add_argument("-i", "--interval", type=_positive_seconds, default=None,
                     help="print a row every this many seconds")
    cli.add_argument("-P", "--parallel", type=count("number of connections", MAX_PARALLEL), default=None,
                     help=f"parallel connections, 1-{MAX_PARALLEL} (default 1)")
    lab = p.add_argument_group("pcapstats additions (not in the classic spec)")
    lab.add_argument("--cc", type=cc_name, default=None,
                     help="congestion control for the socket(s): reno, cubic, bbr, ...")
    lab.add_argument("--sndbuf", type=_buffer_bytes, default=None, metavar="BYTES",
                     help="SO_SNDBUF before connect/listen")
    lab.add_argument("--rcvbuf", type=_buffer_bytes, default=None, metavar="BYTES",
                     help="SO_RCVBUF before connect/listen")
    lab.add_argument("--report", type=Path, default=None, metavar="FILE",
                     help="write a JSON report (with the client's TCP_INFO series)")
    lab.add_argument("--tcp-info-interval", type=_positive_seconds, default=None, metavar="S",
                     help="client: TCP_INFO sampling period (default 0.01)")
    lab.add_argument("--rate", type=_rate_bps, default=None, metavar="BPS",
                     help="client: write at most this many bits/s (5mbit, 800kbit): an "
                          "application-limited sender, each 1000-byte message on schedule")
    lab.add_argument("--once", action="store_true",
                     help="server: exit after the first batch of connections has finished")
    return p


def parse_args(argv: list[str], prog: str = "simpleperf") -> argparse.Namespace:
    """Parse and check the flags; SimpleperfError (one line) for anything wrong."""
    opts = build_parser(prog).parse_args(argv)
    if opts.server == opts.client:
        raise SimpleperfError("choose exactly one mode: -s (server) or -c (client)")
    given = {k for k, v in vars(opts).items() if v not in (None, False)}
    wrong = _CLIENT_ONLY if opts.server else _SERVER_ONLY
    misplaced = [flag for key, flag in wrong.items() if key in given]
    if misplaced:
        mode = "server (-s)" if opts.server else "client (-c)"
        raise SimpleperfError(f"{', '.join(misplaced)} cannot be used in {mode} mode")
    if opts.client:
        if opts.time is not None and opts.num is not None:
            raise SimpleperfError("use -t (seconds) or -n (bytes), not both")
        opts.serverip = opts.serverip or "127.0.0.1"
        opts.parallel = opts.parallel or 1
        opts.tcp_info_interval = opts.tcp_info_interval or 0.01
        if opts.num is None and opts.time is None:
            opts.time = DEFAULT_TIME_S
    if opts.report is not None and not opts.report.parent.is_dir():
        raise SimpleperfError(f"cannot write the report {opts.report}: no directory "
                              f"{opts.report.parent}")
    return opts


# -- output -----------------------------------------------------------------------------------

class _Out:
    """Whole lines to a stream, flushed at once (a pipe reader sees each line when it happens),
    one thread at a time."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.lock = threading.Lock()

    def lines(self, *lines: str) -> None:
        with self.lock:
            self.stream.write("".join(line + "\n" for line in lines))
            self.stream.flush()


def _warn(text: str) -> None:
    print(f"simpleperf: warning: {text}", file=sys.stderr, flush=True)



def format_transfer(nbytes: int, unit: str) -> str:
    if unit == "B":
        return f"{nbytes} B"
    return f"{nbytes / SIMPLEPERF_UNITS[unit]:.2f} {unit}"


def format_row(ident: str, start_s: float, end_s: float, nbytes: int, unit: str) -> str:
    """One table row: ID, Interval, Transfer, Bandwidth (Mbps over end_s - start_s)."""
    span = end_s - start_s
    mbps = nbytes * 8 / span / 1e6 if span > 0 else 0.0
    return (f"{ident:<21}  {f'{start_s:.1f} - {end_s:.1f}':<14}  "
            f"{format_transfer(nbytes, unit):<14}  {mbps:.2f} Mbps")


def format_header(third: str, fourth: str) -> str:
    return f"{'ID':<21}  {'Interval':<14}  {third:<14}  {fourth}"


# -- results ----------------------------------------------------------------------------------

@dataclass
class Connection:
    """One connection's measurements, as one end (client or server) saw them."""
    ident: str                     # the client's ip:port: the same ID on both ends
    local: str                     # this end's ip:port
    remote: str                    # the other end's
    cc: str = ""
    sndbuf_bytes: int = 0
    rcvbuf_bytes: int = 0
    bytes: int = 0                 # message bytes (not BYE)
    start_ns: int = 0              # CLOCK_REALTIME
    end_ns: int = 0
    start_mono_ns: int = 0         # CLOCK_MONOTONIC
    end_mono_ns: int = 0
    bye_sent_ns: int = 0           # client: when BYE was written
    protocol_ok: bool = False
    problem: str = ""
    intervals: list = field(default_factory=list)   # client -i rows: start_s, end_s, bytes
    tcp_info: dict | None = None   # client: the TCP_INFO series (columns)
    tcp_info_final: dict | None = None

    @property
    def duration_s(self) -> float:
        return max(self.end_mono_ns - self.start_mono_ns, 0) / 1e9

    @property
    def bandwidth_bps(self) -> float:
        return self.bytes * 8 / self.duration_s if self.duration_s > 0 else 0.0

    def to_json(self) -> dict:
        out = {"id": self.ident, "local": self.local, "remote": self.remote, "cc": self.cc,
               "sndbuf_bytes": self.sndbuf_bytes, "rcvbuf_bytes": self.rcvbuf_bytes,
               "bytes": self.bytes, "start_ns": self.start_ns, "end_ns": self.end_ns,
               "start_mono_ns": self.start_mono_ns, "end_mono_ns": self.end_mono_ns,
               "duration_s": self.duration_s, "bandwidth_bps": self.bandwidth_bps,
               "protocol_ok": self.protocol_ok, "problem": self.problem}
        if self.bye_sent_ns:
            out["bye_sent_ns"] = self.bye_sent_ns
        if self.intervals:
            out["intervals"] = self.intervals
        if self.tcp_info is not None:
            out["tcp_info"] = self.tcp_info
        out["tcp_info_final"] = self.tcp_info_final
        return out


def _write_report(path: Path, role: str, argv: list[str], conns: list[Connection],
                  extra: dict) -> None:
    doc = {"schema": REPORT_SCHEMA, "role": role, "argv": argv, **extra,
           "connections": [c.to_json() for c in conns]}
    try:
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    except OSError as e:
        raise SimpleperfError(f"cannot write the report {path}: {e.strerror}") from None


def _buffers(sock: socket.socket) -> tuple[int, int]:
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


def _prepare(sock: socket.socket, opts) -> None:
    """The pcapstats socket options, before connect/listen."""
    if opts.cc:
        try:
            set_congestion(sock, opts.cc)
        except ValueError as e:
            raise SimpleperfError(str(e)) from None
    if opts.sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, opts.sndbuf)
    if opts.rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, opts.rcvbuf)



# -- client -----------------------------------------------------------------------------------

class _IntervalRows:
    """The -i rows of one connection: row k spans k*S - (k+1)*S seconds after the first
    message; the last row ends where sending ended.  Rows passed while a send blocked are
    emitted when it returns (the bytes go to the first of them)."""

    def __init__(self, sender: "_Sender", out: _Out, opts, t0: float, step: float):
        self.sender, self.out, self.opts, self.t0, self.step = sender, out, opts, t0, step
        self.k, self.bytes_at_row_start = 0, 0
        self.next_mark = t0 + step

    def until(self, now: float, sent: int) -> None:
        """Emit every row that ended by now (monotonic seconds)."""
        while self.next_mark <= now:
            self._emit(self.k * self.step, (self.k + 1) * self.step, sent)
            self.k += 1
            self.next_mark = self.t0 + (self.k + 1) * self.step

    def finish(self, end: float, sent: int) -> None:
        """Rows that ended strictly before the end of sending, then the last, partial one."""
        while self.next_mark < end - 1e-6:  # (a mark at the -t deadline is the end)
            self.until(self.next_mark, sent)
        self._emit(self.k * self.step, max(end - self.t0, self.k * self.step), sent)

    def _emit(self, start_s: float, end_s: float, sent: int) -> None:
        nbytes = sent - self.bytes_at_row_start
        self.bytes_at_row_start = sent
        conn = self.sender.conn
        conn.intervals.append({"start_s": start_s, "end_s": end_s, "bytes": nbytes})
        self.out.lines(format_row(conn.ident, start_s, end_s, nbytes, self.opts.format))


class _Sender:
    """One client connection: send the messages, BYE, wait for ACK: BYE."""

    def __init__(self, sock: socket.socket, conn: Connection, server: str):
        self.sock, self.conn, self.server = sock, conn, server
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self, t0_mono_ns: int, opts, out: _Out) -> None:
        try:
            self._send(t0_mono_ns, opts, out)
            self._await_ack()
            self.conn.protocol_ok = True
        except BaseException as e:  # reported by the main thread
            self.error = e

    def _send(self, t0_mono_ns: int, opts, out: _Out) -> None:
        send, msg, conn = self.sock.sendall, MESSAGE, self.conn
        t0 = t0_mono_ns / 1e9
        deadline = t0 + opts.time if opts.num is None else math.inf
        total = opts.num if opts.num is not None else math.inf
        step = opts.interval or math.inf
        rows = _IntervalRows(self, out, opts, t0, step)
        sent = 0
        clock = time.monotonic
        per_byte = 8 / opts.rate if getattr(opts, "rate", None) else 0.0
        try:
            while sent < total and not self.stop.is_set():
                now = clock()
                if now >= deadline:
                    break
                if per_byte and now < t0 + sent * per_byte:    # ahead of the rate: wait
                    time.sleep(min(t0 + sent * per_byte, deadline) - now)
                    continue
                if now >= rows.next_mark:
                    rows.until(now, sent)
                left = total - sent
                if left >= MESSAGE_BYTES:
                    send(msg)
                    sent += MESSAGE_BYTES
                else:
                    send(msg[:left])
                    sent += left
                conn.bytes = sent
            if opts.interval:  # with -t, rows end at the deadline even if a send overran it
                rows.finish(min(clock(), deadline), sent)
            send(BYE)
        except OSError as e:
            raise SimpleperfError(f"connection {conn.local} -> {self.server} broke while "
                                  f"sending: {e.strerror or e}") from None
        conn.bye_sent_ns = time.time_ns()

    def _await_ack(self) -> None:
        """Read ACK: BYE; give up if it does not come although the server has everything."""
        sock, where = self.sock, f"{self.conn.local} -> {self.server}"
        sock.settimeout(1.0)
        got, idle_since = b"", None
        try:
            while len(got) < len(ACK):
                try:
                    chunk = sock.recv(len(ACK) - len(got))
                except socket.timeout:
                    if self.stop.is_set():
                        raise SimpleperfError(f"{where}: stopped while waiting for ACK: BYE")
                    info = tcp_info(sock)
                    if info.get("unacked") or info.get("notsent_bytes"):
                        idle_since = None  # still delivering: keep waiting
                    elif idle_since is None:
                        idle_since = time.monotonic()
                    elif time.monotonic() - idle_since > ACK_WAIT_S:
                        raise SimpleperfError(f"{where}: the server has received everything "
                                              f"but did not answer BYE within {ACK_WAIT_S:g} s")
                    continue
                if not chunk:
                    raise SimpleperfError(f"{where}: the server closed the connection without "
                                          f"answering BYE (got {got!r})")
                got += chunk
                if not ACK.startswith(got):
                    raise SimpleperfError(f"{where}: the server answered {got!r}, not "
                                          f"{ACK.decode()!r}")
        except OSError as e:
            raise SimpleperfError(f"{where}: connection broke while waiting for ACK: BYE: "
                                  f"{e.strerror or e}") from None
        self.conn.end_mono_ns = time.monotonic_ns()
        self.conn.end_ns = time.time_ns()


def _connect(opts) -> socket.socket:
    sock = socket.socket(family(opts.serverip), socket.SOCK_STREAM)
    try:
        _prepare(sock, opts)
        program.connect(sock, (opts.serverip, opts.port), prog="simpleperf",
                        error=SimpleperfError)
    except BaseException:
        sock.close()
        raise
    return sock


def run_client(opts, out: _Out, argv: list[str]) -> int:
    out.lines(SEPARATOR_CLIENT,
              f"A simpleperf client connecting to server {opts.serverip}, port {opts.port}",
              SEPARATOR_CLIENT)
    sampler = TcpInfoSampler(opts.tcp_info_interval).start() if opts.report else None
    senders: list[_Sender] = []
    try:
        for _ in range(opts.parallel):
            sock = _connect(opts)
            sndbuf, rcvbuf = _buffers(sock)
            local = socket_endpoint(sock.getsockname())
            conn = Connection(ident=local, local=local,
                              remote=socket_endpoint(sock.getpeername()), cc=tcp_congestion(sock),
                              sndbuf_bytes=sndbuf, rcvbuf_bytes=rcvbuf)
            senders.append(_Sender(sock, conn, socket_endpoint((opts.serverip, opts.port))))
            if sampler:
                sampler.add(sock, key=conn.local)
            out.lines(f"Client {conn.local} connected with {opts.serverip} port {opts.port}")
        out.lines(format_header("Transfer", "Bandwidth"))
        t0_mono_ns, t0_ns = time.monotonic_ns(), time.time_ns()
        threads = []
        for s in senders:
            s.conn.start_mono_ns, s.conn.start_ns = t0_mono_ns, t0_ns
            t = threading.Thread(target=s.run, args=(t0_mono_ns, opts, out), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        errors = [s.error for s in senders if s.error is not None]
        if errors:
            raise errors[0]
        lines = [SEPARATOR_CLIENT] if opts.interval else []
        for s in senders:
            c = s.conn
            lines.append(format_row(c.ident, 0.0, c.duration_s, c.bytes, opts.format))
        out.lines(*lines)
    finally:
        for s in senders:
            s.stop.set()
            if sampler:
                s.conn.tcp_info_final = sampler.remove(s.conn.local)
            try:  # wakes a sender still blocked in send (after an error or Ctrl-C)
                s.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.sock.close()
        stats = sampler.stop() if sampler else None
    if opts.report:
        for s in senders:
            s.conn.tcp_info = sampler.series(s.conn.local)
        _write_report(opts.report, "client", argv, [s.conn for s in senders],
                      {"server": socket_endpoint((opts.serverip, opts.port)), "format": opts.format,
                       "time_s": opts.time, "num_bytes": opts.num, "parallel": opts.parallel,
                       "interval_s": opts.interval, "message_bytes": MESSAGE_BYTES,
                       "tcp_info_interval_s": opts.tcp_info_interval, "sampler": stats})
    return EXIT_OK


# -- server -----------------------------------------------------------------------------------

def _listen(opts) -> list[socket.socket]:
    """Listening sockets: the -b address, or all IPv4 and all IPv6 addresses."""
    addrs = [opts.bind] if opts.bind else ["0.0.0.0", "::"]
    socks = []
    try:
        for addr in addrs:
            sock = socket.socket(family(addr), socket.SOCK_STREAM)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if addr == "::":
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            _prepare(sock, opts)
            try:
                sock.bind((addr, opts.port))
            except OSError as e:
                if addr == "::" and not opts.bind and e.errno in (errno.EADDRNOTAVAIL,
                                                                  errno.EAFNOSUPPORT):
                    socks.pop().close()  # no IPv6 here: IPv4 alone
                    continue
                hint = {errno.EADDRINUSE: " (another server on this port? choose one with -p)",
                        errno.EADDRNOTAVAIL: " (no interface has this address)",
                        errno.EACCES: " (not allowed)"}.get(e.errno, "")
                raise SimpleperfError(f"cannot listen on {socket_endpoint((addr, opts.port))}: "
                                      f"{e.strerror}{hint}") from None
            sock.listen(16)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


class _Receiver:
    """One server connection: count message bytes until BYE, answer ACK: BYE, close."""

    def __init__(self, sock: socket.socket, conn: Connection, opts, out: _Out):
        self.sock, self.conn, self.opts, self.out = sock, conn, opts, out

    def run(self) -> None:
        conn = self.conn
        try:
            self._receive()
            conn.protocol_ok = True
        except OSError as e:
            conn.problem = f"connection broke after {conn.bytes} bytes: {e.strerror or e}"
        except SimpleperfError as e:
            conn.problem = str(e)
        finally:
            try:
                conn.tcp_info_final = tcp_info(self.sock)
            except OSError:
                pass
            self.sock.close()
        if conn.problem:
            _warn(f"client {conn.remote}: {conn.problem}")
        self.out.lines(format_header("Received", "Rate"),
                       format_row(conn.ident, 0.0, conn.duration_s, conn.bytes,
                                  self.opts.format))

    def _receive(self) -> None:
        sock, conn = self.sock, self.conn
        buf = bytearray(256 * 1024)
        view = memoryview(buf)
        total, tail = 0, b""
        while True:
            n = sock.recv_into(buf)
            if n == 0:
                conn.bytes = total
                conn.end_mono_ns, conn.end_ns = time.monotonic_ns(), time.time_ns()
                raise SimpleperfError(f"closed the connection after {total} bytes without "
                                      "sending BYE")
            total += n
            tail = bytes(view[n - 3:n]) if n >= 3 else (tail + bytes(view[:n]))[-3:]
            if tail == BYE:  # the stream so far ends with BYE: the client now waits for us
                break
        conn.end_mono_ns, conn.end_ns = time.monotonic_ns(), time.time_ns()
        conn.bytes = total - len(BYE)
        sock.sendall(ACK)
        sock.settimeout(CLOSE_WAIT_S)
        try:
            extra = sock.recv(1024)
        except socket.timeout:
            raise SimpleperfError(f"did not close within {CLOSE_WAIT_S:g} s after ACK: BYE")
        if extra:
            raise SimpleperfError(f"sent {len(extra)} more bytes after BYE")


def run_server(opts, out: _Out, argv: list[str]) -> int:
    listeners = _listen(opts)
    conns: list[Connection] = []
    threads: list[threading.Thread] = []
    last_close = None
    try:
        out.lines(SEPARATOR_SERVER, f"A simpleperf server is listening on port {opts.port}",
                  SEPARATOR_SERVER)
        while True:
            ready, _, _ = select.select(listeners, [], [], 0.1)
            for lsock in ready:
                try:
                    sock, peer = lsock.accept()
                except OSError:
                    continue
                sndbuf, rcvbuf = _buffers(sock)
                conn = Connection(ident=socket_endpoint(peer), local=socket_endpoint(sock.getsockname()),
                                  remote=socket_endpoint(peer), cc=tcp_congestion(sock),
                                  sndbuf_bytes=sndbuf, rcvbuf_bytes=rcvbuf,
                                  start_mono_ns=time.monotonic_ns(), start_ns=time.time_ns())
                conns.append(conn)
                out.lines(f"A simpleperf client with {conn.remote} is connected with "
                          f"{conn.local}")
                t = threading.Thread(target=_Receiver(sock, conn, opts, out).run, daemon=True)
                t.start()
                threads.append(t)
            if opts.once and threads and not ready:
                if any(t.is_alive() for t in threads):
                    last_close = None
                elif last_close is None:
                    last_close = time.monotonic()
                elif time.monotonic() - last_close >= ONCE_GRACE_S:
                    break
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the way a server ends
        pass
    finally:
        for lsock in listeners:
            lsock.close()
    finished = [c for c, t in zip(conns, threads) if not t.is_alive()]
    if opts.report:
        _write_report(opts.report, "server", argv, finished,
                      {"port": opts.port, "bind": opts.bind, "format": opts.format,
                       "message_bytes": MESSAGE_BYTES})
    if opts.once:
        bad = [c for c in finished if not c.protocol_ok]
        if bad:
            raise SimpleperfError(f"{len(bad)} of {len(finished)} connections did not follow "
                                  f"the protocol: {bad[0].remote}: {bad[0].problem}")
    return EXIT_OK


# -- entry point ------------------------------------------------------------------------------

def main(argv: Optional[list[str]] = None, prog: str = "simpleperf") -> int:
    """Run simpleperf with these arguments; returns the exit status (one error line on failure)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = _Out(sys.stdout)

    def work() -> int:
        opts = parse_args(argv, prog)
        return run_server(opts, out, argv) if opts.server else run_client(opts, out, argv)
    return program.run("simpleperf", work, SimpleperfError)


if __name__ == "__main__":
    sys.exit(main())
