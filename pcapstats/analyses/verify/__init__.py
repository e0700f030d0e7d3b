"""Was the application protocol followed?  A verdict per stream, with the evidence.

``verify(capture)`` recognises simpleperf, iperf3 and ping traffic in a capture and checks
each stream against the tool's own definition; one module a protocol (``simpleperf.py``,
``iperf3.py``, ``ping.py``) over what they share (``checks.py``), and ``report.py`` for a
simpleperf client's printed report.  Every check ends in one of three verdicts, and a stream's
verdict is the worst of its checks (fail > cannot tell > pass):

- **pass**: the capture shows the rule was followed;
- **fail**: the capture shows it was not: the check says what was expected, what was found,
  and where (frame numbers, stream offsets);
- **cannot tell**: the bytes or packets that would decide it are not in the capture (payload
  cut by the snaplen, a segment the capture missed, the start or end of the connection not
  captured, a setting only the sidecar knows).  Never a guess.

What is recognised (by content first; the sidecar's flow list also names streams whose
payload the snaplen cut):

- **simpleperf** (anyone's: the course's tool, pcapstats.tools.simpleperf): a TCP connection
  with the exchange's shape -- its server's bytes begin with ``ACK: BYE``, or its client's
  bytes end with ``BYE`` (at the client's FIN, else where its data ends) while its server sent
  at most 256 bytes -- whatever the fill (``x``, ``0``, random), the port, the message size
  and the quirks (``BYE`` in the last data segment, the server closing first, the client not
  reading ``ACK: BYE``); or whose client's first bytes are pcapstats' simpleperf's (``0``
  messages); or which the sidecar lists as a simpleperf flow; or -- when its first bytes are
  not in the capture -- whose port is simpleperf's default 8088.
- **iperf3** (esnet/iperf's protocol): a TCP connection whose client first sends the 37-byte
  cookie (36 characters of ``[a-z2-7]`` and a NUL); the control connection is the one whose
  server answers with the state byte PARAM_EXCHANGE (9); data connections send the same
  cookie.  UDP data streams start with the 4-byte connect message.
- **ping**: ICMP / ICMPv6 echo requests, grouped by (source, destination, identifier).

A stream that looks like none of them is checked only when told: ``port`` (``--port N``) makes
every TCP stream whose server port is N the protocol ``app`` names (default simpleperf),
whatever it looks like; ``app`` alone (``--app simpleperf|iperf3``) makes every TCP stream
nothing recognised that protocol (iperf3: a control connection if its server's first byte is
PARAM_EXCHANGE, else a data connection).  ping needs no help: echo requests are always
recognised.

simpleperf rules (client -> server, then server -> client), with their tolerances; the message
size is 1000 bytes unless ``Expected.message_bytes`` (``--size``) says otherwise:

====================  ==========================================================================
start / end           SYN of the client captured (else counts are "cannot tell"); the end is
                      the client's FIN, or without one its BYE (else the data seen, flagged)
bye                   the client's bytes end with exactly one ``BYE``.  Bytes after it fail, at
                      the frame of the first of them (the BYE is the last one the client sent
                      before the server's first answer)
messages              every byte before the BYE is the fill of the first message (``0`` for
                      pcapstats' simpleperf, ``x`` ...), so a ``BYE`` among them is a second
                      BYE; a first message that is not one repeated byte (random fill) leaves
                      the content free: a ``BYE`` inside it is data (only ``BYEBYE`` at the end
                      fails)
message_bytes         the message bytes are a whole number of messages (a ``-t`` run), or
                      exactly ``-n`` bytes (a ``-n`` run: the last message is shorter when
                      -n is not a multiple of the size).  Not a multiple and neither -t nor -n
                      known: cannot tell (right for a ``-n`` run of that size, wrong for ``-t``)
ack                   the server sends exactly ``ACK: BYE`` and nothing after it
order                 the ACK: BYE's first frame comes after the first frame that carried BYE
close                 both sides send FIN, the server's after its ACK: BYE (the server may close
                      first; the client may close before ACK: BYE arrives); no RST before both
                      FINs -- but the client's RST after its own FIN and the ACK: BYE is its
                      kernel answering bytes that reached a closed socket (a client that closes
                      without reading ACK: BYE), not a reset
duration (-t)         first data frame to the BYE's first frame lies in
                      [t - max(0.1 s, 5 %), t + max(1 s, 25 %)]: the client checks its clock
                      only between messages (never early by more than thread start-up), and BYE
                      waits behind the data still in the socket buffer (late by up to its drain
                      time at the bottleneck rate)
parallel (-P)         as many simpleperf connections between the pair as asked (the sidecar's
                      ``parallel``, or ``Expected.parallel``)
====================  ==========================================================================

What was asked (-t, -n, -P, the message size) comes from the lab sidecar or by hand
(``expected``; on the command line ``--time``, ``--num``, ``--parallel``, ``--size``).  With the
client's printed report (``client_output``, ``--client-output FILE``) its Transfer and
Bandwidth are checked against the wire too: see ``report.py``.

iperf3 rules (facts from esnet/iperf: iperf.h, iperf_api.c, iperf_client_api.c, iperf_udp.c):
the control connection's client sends the cookie, then the parameters as a 4-byte big-endian
length and JSON, later TEST_END (4), its results (length + JSON) and IPERF_DONE (16); its server
sends PARAM_EXCHANGE (9), CREATE_STREAMS (10), TEST_START (1), TEST_RUNNING (2),
EXCHANGE_RESULTS (13), its results (length + JSON) and DISPLAY_RESULTS (14).  Each data
connection sends the same cookie first; there are ``parallel`` of them; the bytes each one
carries after its cookie lie between what the receiver read and what the sender wrote, as the
two exchanged results say (``bytes``: sent minus omitted, so only with ``omit`` 0).  iperf3
3.12's server ends the data connections with RST while data is still arriving, so the wire
holds less than was written and the FIN is not a rule.  A UDP data stream starts with the client's
4-byte connect message, bytes ``9876`` on the wire, and the server's reply ``6789`` (an old
server's 987654321 also accepted); every datagram
after that carries a 32-bit (64-bit with ``udp_counters_64bit``) packet count at byte 8, and
the highest count equals the client's reported ``packets``.

ping rules: every echo request has exactly one reply with the same identifier and sequence
number (a request in the capture's last second, with no reply to anything after it, may be
answered after the capture stopped: cannot tell); sequence numbers without a gap.
"""

from __future__ import annotations

import os
import textwrap
import warnings

import numpy as np

from ... import catalogue, schema
from ...batch import analysis
from ...capture import Capture, Needs
from ...clock import touched
from ...errors import Note, PcapstatsWarning, UsageError
from ...ingest import Kept
from ...render import Shown, path_shown, terminal_width
from ...results import Result
from ...schema import STREAM_COLUMN, Column, TableSpec
from ...sidecar import SidecarError, load_sidecar, sidecar_for
from ...streams import id_ranges
from ...tools.wire import SIMPLEPERF_PORT
from ..reassembly import reassemble, reassemble_file
from . import iperf3, ping, report, simpleperf
from .checks import CANNOT_TELL, FAIL, PASS, RANK, Check, Context, Expected, StreamVerdict
from .report import ClientOutput, parse_client_output

__all__ = ["verify", "Verification", "Expected", "Check", "StreamVerdict", "PASS", "FAIL",
           "CANNOT_TELL", "APP_CHOICES", "ClientOutput", "parse_client_output"]

_C = Column
VERDICTS = ("pass", "fail", "cannot tell")
_STREAM = STREAM_COLUMN.but(note="for ping the index of its (source, destination, "
                            "identifier)")
_APP = _C("app", "str", "simpleperf, iperf3-control, iperf3-data, ping",
          values=("simpleperf", "iperf3-control", "iperf3-data", "ping"))
STREAMS = TableSpec("streams", "one row per recognised stream: its verdict", (
    _STREAM,
    _C("proto", "str", "tcp, udp or icmp", values=("tcp", "udp", "icmp")),
    _APP,
    _C("client", "str", "address:port of the side that opened it (ping: the requester)"),
    _C("server", "str", "the other side"),
    catalogue.column("verdict", doc="a stream's is the worst of its checks'",
                     values=VERDICTS),
    _C("passed", "int64", "checks passed"),
    _C("failed", "int64", "checks failed"),
    _C("cannot_tell", "int64", "checks the capture cannot decide"),
    _C("why", "str", "the first failed (else undecided) check: what was expected, what was "
       "found"),
))
CHECKS = TableSpec("checks", "one row per check of every recognised stream", (
    _STREAM, _APP,
    _C("check", "str", "the rule's name (see pcapstats.analyses.verify)"),
    catalogue.column("verdict", doc="here of this check", values=VERDICTS),
    _C("expected", "str", "what the rule asks"),
    _C("found", "str", "what the capture shows"),
    _C("frames", "str", "frame numbers of the evidence, space-separated"),
    _C("offset_bytes", "int64", "stream offset of the evidence (bytes from the first payload "
       "byte), or empty", "bytes", optional=True),
    _C("stream_verdict", "str", "the verdict of the check's stream", values=VERDICTS),
))


class Verification(Result):
    """verify()'s answer: ``streams`` (a verdict each) and ``checks`` (a row each);
    ``verdicts``: the StreamVerdict objects with their evidence; ``verdict``: the capture's."""
    analysis = "verify"
    specs = (STREAMS, CHECKS)
    view = {"streams": (Shown("stream", join="{proto} {stream}"), Shown("app", "app"),
                        Shown("client → server", join="{client} → {server}", wrap=True),
                        Shown("verdict", "verdict"), Shown("pass", "passed", minor=True),
                        Shown("fail", "failed", minor=True),
                        Shown("can't tell", "cannot_tell", minor=True),
                        Shown("why", "why", wrap=True))}

    def __init__(self, verdicts: list[StreamVerdict], *, capture: str, notes=()):
        super().__init__({"streams": _verdict_table(verdicts), "checks": _check_table(verdicts)},
                         capture=capture, notes=notes)
        self.verdicts = verdicts

    @property
    def verdict(self) -> str:
        """The worst verdict of every stream of every capture; cannot tell when none."""
        found = [v.verdict for part in self.parts for v in part.verdicts]
        return max(found, key=RANK.__getitem__) if found else CANNOT_TELL

    def to_text(self, name: str | None = None, fmt: str = "table", *, all_columns: bool = False,
                width: int | None = None) -> str:
        """The human table is a report: per capture the verdicts, then each stream's checks
        and evidence, wrapped to ``width``; other formats and tables as every result."""
        if fmt != "table" or name not in (None, "streams"):
            return super().to_text(name, fmt, all_columns=all_columns, width=width)
        width = width or terminal_width()
        return "\n".join(_report(part, width, all_columns) for part in self.parts) + "\n"


APPS = ("simpleperf", "iperf3-control", "iperf3-data")   # the TCP app protocols checked here
APP_CHOICES = ("simpleperf", "iperf3", "ping")           # what ``app`` / --app may name


@analysis(reads=False)
def verify(capture: Capture | str | os.PathLike, *, sidecar="auto",
           expected: Expected | None = None, stream: int | None = None, app: str | None = None,
           port: int | None = None, client_output=None) -> Verification:
    """Check every recognised stream of a capture (see the module docstring for the rules).

    sidecar: the lab sidecar (a path or the loaded dict) saying what was asked (-t / -n / -P
    and which streams are simpleperf's); ``"auto"``: the one beside the capture, if any;
    None: none.  expected: what was asked, by hand (``Expected(time_s=10)``,
    ``Expected(message_bytes=1024)``): what it sets wins over the sidecar's.  stream: only this
    TCP/UDP stream (and no ping groups).  app / port: the protocol of streams that look like
    none (APP_CHOICES; ``port``: the streams with that server port, ``app`` default
    simpleperf).  client_output: the simpleperf client's printed report (a path, or a
    ClientOutput), checked against the wire."""
    _check_force(app, port)
    path = capture.path if isinstance(capture, Capture) else os.fspath(capture)
    told = Expected()
    if isinstance(sidecar, str) and sidecar == "auto":
        sidecar = _sidecar_beside(path)
    if sidecar is not None:
        doc = sidecar if isinstance(sidecar, dict) else load_sidecar(sidecar)
        told = Expected.from_sidecar(doc, path)
    expected = expected.over(told) if expected is not None else told
    printed = parse_client_output(client_output) if client_output is not None else None
    if isinstance(capture, Capture):
        r, others = reassemble(capture), capture
    else:       # read for verify alone: the TCP streams a group at a time, the rest kept
        r, (others,) = reassemble_file(capture, [Kept(OTHERS_NEEDS)], stream)
    with r:
        ctx = Context(others, r, expected)
        _verify(ctx, stream, app, port, printed)
    result = Verification(ctx.out, capture=os.fspath(path), notes=ctx.notes)
    if len(ctx.pieces) > 1:
        n = ctx.spanning
        result.clock_touched = touched("verify", joined=[
            f"{n} simpleperf duration{'s' if n > 1 else ''} (first data to BYE)"] if n else [])
    return result


def _others(cap: Capture) -> np.ndarray:
    """The packets verify reads besides the TCP streams' bytes: UDP (iperf3's UDP tests), ICMP
    echoes (ping) and TCP packets with an MSS option (each side's largest segment)."""
    return (cap.layer(schema.UDP) | (cap.layer(schema.ICMP_ECHO) & cap.layer(schema.IP))
            | (cap.layer(schema.TCP) & cap.present("tcp_option_mss")))


OTHERS_NEEDS = Needs(("frame_number", "frame_time_ns", "ip_src", "ip_dst", "ip_version",
                      "ip_ttl", "l4_quoted", "payload_offset", "payload_cap_len", "icmp_type",
                      "icmp_ident", "icmp_seq", "udp_stream", "udp_srcport", "udp_dstport",
                      "tcp_stream", "tcp_option_mss", "tcp_option_tsval", schema.UDP,
                      schema.ICMP_ECHO, schema.IP, schema.TCP), _others)


def _sidecar_beside(path) -> dict | None:
    """The lab sidecar beside a capture, loaded; None without one.  A NAME.json that is not
    a lab sidecar (iperf3 -J output saved beside the capture, say) is warned about and left
    out, as compare does: what was asked then comes from the capture alone."""
    found = sidecar_for(path)
    if not os.path.exists(found):        # False for a name too long, never an OSError
        return None
    try:
        return load_sidecar(found)
    except SidecarError as e:
        warnings.warn(PcapstatsWarning(f"{e}; verify reads what was asked from the capture "
                                       "alone", hint="--sidecar PATH names a lab sidecar"),
                      stacklevel=3)
        return None


def _check_force(app: str | None, port: int | None) -> None:
    if app is not None and app not in APP_CHOICES:
        raise UsageError(f"unknown app {app!r}", hint=f"use one of {', '.join(APP_CHOICES)}")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                             or not 1 <= port <= 65535):
        raise UsageError(f"invalid port {port!r}: a TCP port is 1-65535")
    if app == "ping" and port is not None:
        raise UsageError("ping has no port: its echo requests are always recognised",
                         hint="--port names the server port of simpleperf or iperf3 streams")


def _verify(ctx: Context, only: int | None, app: str | None, port: int | None,
            printed: ClientOutput | None) -> None:
    """Recognise each TCP stream, run its protocol's checks, then ping's (all streams)."""
    tcp_streams = np.unique(ctx.r.flows["stream"])
    if only is not None:
        tcp_streams = tcp_streams[tcp_streams == only]
    kinds: dict[str | None, list[int]] = {kind: [] for kind in (*APPS, None)}
    forced, at_port = [], []
    for s in tcp_streams.tolist():
        kind, by_option = _recognise(ctx, s, app, port)
        kinds[kind].append(s)
        if by_option:
            forced.append(s)
        if port is not None and ctx.server_port(s) == port:
            at_port.append(s)
    for s in kinds["simpleperf"]:
        ctx.out.append(simpleperf.check(ctx, s))
    simpleperf.check_parallel(ctx, [v for v in ctx.out if v.app == "simpleperf"])
    iperf3.check(ctx, kinds["iperf3-control"], kinds["iperf3-data"])
    if only is None:
        ping.check(ctx)
    if printed is not None:
        _check_report(ctx, printed)
    if forced:
        what = "--port" if port is not None else "--app"
        ctx.notes.append(f"{len(forced)} TCP stream(s) checked as {app or 'simpleperf'} "
                         f"because {what} said so: {id_ranges(forced)}")
    if port is not None and not at_port:
        ctx.notes.append(f"no TCP stream has server port {port} (--port)")
    if app == "ping":
        ctx.notes.append("ping needs no --app: echo requests are always recognised")
    if kinds[None]:
        ctx.notes.append(Note("no app recognised: not checked",
                              about=f"TCP stream{'s' if len(kinds[None]) > 1 else ''} "
                                    f"{id_ranges(kinds[None])}",
                              detail="not recognised as simpleperf or iperf3; --app / --port "
                                     "force a protocol"))
    ctx.out.sort(key=lambda v: (v.proto != "tcp", v.proto, v.stream))


def _check_report(ctx: Context, printed: ClientOutput) -> None:
    """The client's printed report against the simpleperf connections; a note for its rows
    that are no connection of this capture."""
    verdicts = [v for v in ctx.out if v.app == "simpleperf"]
    name = os.path.basename(printed.path)
    if not verdicts:
        ctx.notes.append(f"client output {name}: no simpleperf connection in the capture to "
                         "check it against")
        return
    report.check(ctx, verdicts, printed)
    stray = sorted(set(printed.by_id()) - set(report.matched(verdicts, printed.by_id()).values()))
    if stray:
        ctx.notes.append(Note(f"{len(stray)} ID(s) are no connection of this capture",
                              about=f"client output {name}", detail=", ".join(stray)))


def _recognise(ctx: Context, s: int, app: str | None, port: int | None
               ) -> tuple[str | None, bool]:
    """What app protocol TCP stream s carries, and whether an option said so: ``port``'s
    streams are ``app``'s; else the sidecar's word for simpleperf, else its client's first
    bytes (iperf3's cookie, pcapstats' simpleperf's ``0``), else simpleperf's shape, else the
    sidecar's word if it names one of APPS (a lab tool with no checks here, pingpong or a file
    transfer, is not recognised), else (bytes not captured) simpleperf's default port, else
    ``app`` alone; None when nothing fits."""
    if port is not None and ctx.server_port(s) == port:
        return _as(ctx, s, app or "simpleperf"), True
    told = ctx.exp.streams.get(s)
    if told == "simpleperf":
        return "simpleperf", False
    c = ctx.client_dir(s)
    head = ctx.head(s, c, iperf3.COOKIE_BYTES)
    if iperf3.is_cookie(head):
        return _as(ctx, s, "iperf3"), False
    if simpleperf.looks_like(head) or simpleperf.shape(ctx, s):
        return "simpleperf", False
    if told in APPS:
        return told, False
    if head is None and SIMPLEPERF_PORT in ctx.ports(s):
        return "simpleperf", False    # payload not captured: simpleperf's default port decides
    if app in ("simpleperf", "iperf3") and port is None:
        return _as(ctx, s, app), True
    return None, False


def _as(ctx: Context, s: int, app: str) -> str:
    """The APPS kind of stream s taken as ``app``: iperf3's control connection is the one
    whose server's first byte is PARAM_EXCHANGE."""
    if app != "iperf3":
        return app
    return ("iperf3-control" if ctx.head(s, 1 - ctx.client_dir(s), 1) == iperf3.PARAM_EXCHANGE
            else "iperf3-data")


def _verdict_table(verdicts: list[StreamVerdict]) -> dict[str, np.ndarray]:
    s = verdicts
    return {
        "stream": np.array([v.stream for v in s], np.int64),
        "proto": np.array([v.proto for v in s], object),
        "app": np.array([v.app for v in s], object),
        "client": np.array([v.client for v in s], object),
        "server": np.array([v.server for v in s], object),
        "verdict": np.array([v.verdict for v in s], object),
        "passed": np.array([v.count(PASS) for v in s], np.int64),
        "failed": np.array([v.count(FAIL) for v in s], np.int64),
        "cannot_tell": np.array([v.count(CANNOT_TELL) for v in s], np.int64),
        "why": np.array([v.why() for v in s], object),
    }


def _check_table(verdicts: list[StreamVerdict]) -> dict[str, np.ndarray]:
    rows: list[tuple[StreamVerdict, Check]] = [(v, c) for v in verdicts for c in v.checks]
    return {
        "stream": np.array([v.stream for v, _ in rows], np.int64),
        "app": np.array([v.app for v, _ in rows], object),
        "check": np.array([c.name for _, c in rows], object),
        "verdict": np.array([c.verdict for _, c in rows], object),
        "expected": np.array([c.expected for _, c in rows], object),
        "found": np.array([c.found for _, c in rows], object),
        "frames": np.array([" ".join(map(str, c.frames)) for _, c in rows], object),
        "offset_bytes": np.array([np.nan if c.offset is None else c.offset for _, c in rows],
                                 np.float64),
        "stream_verdict": np.array([v.verdict for v, _ in rows], object),
    }


def _report(result: Verification, width: int, all_columns: bool) -> str:
    """One capture's verdict table, then each stream's checks and evidence, indented and
    wrapped to ``width``."""
    out = textwrap.wrap(f"{path_shown(result.captures[0])}: {result.verdict.upper()}", width,
                        break_long_words=False, break_on_hyphens=False)
    if not result.verdicts:
        return "\n".join(out + ["  (nothing recognised)", ""])
    out.append(Result.to_text(result, "streams", all_columns=all_columns,
                              width=width).rstrip("\n"))

    def line(first: str, text: str, indent: int) -> None:
        out.extend(textwrap.wrap(text, width, initial_indent=first,
                                 subsequent_indent=" " * indent))
    for v in result.verdicts:
        line("  ", f"{v.proto} stream {v.stream} ({v.app}, {v.client} -> {v.server}): "
                   f"{v.verdict}", 4)
        for c in v.checks:
            where = f"  [frames {' '.join(map(str, c.frames))}]" if c.frames else ""
            line(f"    {c.verdict:<11}  ", f"{c.name}: expected {c.expected}; found "
                                          f"{c.found}{where}", 17)
        for e in v.evidence:
            line("    evidence     ", e, 17)
    out.append("")
    return "\n".join(out)
