"""Was the application protocol followed?  A verdict per stream, with the evidence.

``verify(capture)`` recognises simpleperf, iperf3 and ping traffic in a capture and checks
each stream against the tool's own definition; one module a protocol (``simpleperf.py``,
``iperf3.py``, ``ping.py``) over what they share (``checks.py``).  Every check ends in one of three
verdicts, and a stream's verdict is the worst of its checks (fail > cannot tell > pass):

- **pass**: the capture shows the rule was followed;
- **fail**: the capture shows it was not: the check says what was expected, what was found,
  and where (frame numbers, stream offsets);
- **cannot tell**: the bytes or packets that would decide it are not in the capture (payload
  cut by the snaplen, a segment the capture missed, the start or end of the connection not
  captured, a setting only the sidecar knows).  Never a guess.

What is recognised (by content first; the sidecar's flow list also names streams whose
payload the snaplen cut):

- **simpleperf** (pcapstats.tools.simpleperf): a TCP connection whose client sends ``0`` bytes
  (messages are ``b"0" * 1000``) and ``BYE``, or which the sidecar lists as a simpleperf flow,
  or -- when its first bytes are not in the capture -- whose port is simpleperf's default 8088.
- **iperf3** (esnet/iperf's protocol): a TCP connection whose client first sends the 37-byte
  cookie (36 characters of ``[a-z2-7]`` and a NUL); the control connection is the one whose
  server answers with the state byte PARAM_EXCHANGE (9); data connections send the same
  cookie.  UDP data streams start with the 4-byte connect message.
- **ping**: ICMP / ICMPv6 echo requests, grouped by (source, destination, identifier).

simpleperf rules (client -> server, then server -> client), with their tolerances:

====================  ==========================================================================
start / end           SYN of the client captured (else counts are "cannot tell"); the end is
                      the client's FIN (or the data seen, flagged)
messages              every byte before the final BYE is ``0`` (0x30)
message_bytes         the message bytes are a whole number of 1000-byte messages (a ``-t`` run),
                      or exactly ``-n`` bytes (a ``-n`` run: the last message is shorter when
                      -n is not a multiple of 1000).  Not a multiple of 1000 and no sidecar:
                      cannot tell (right for a ``-n`` run of that size, wrong for ``-t``)
bye                   the stream ends with exactly one ``BYE``
ack                   the server sends exactly ``ACK: BYE`` and nothing else
order                 the ACK: BYE's first frame comes after the first frame that carried BYE
close                 both sides send FIN after the ACK: BYE; no RST before both FINs
duration (-t)         first data frame to the BYE's first frame lies in
                      [t - max(0.1 s, 5 %), t + max(1 s, 25 %)]: the client checks its clock
                      only between messages (never early by more than thread start-up), and BYE
                      waits behind the data still in the socket buffer (late by up to its drain
                      time at the bottleneck rate)
parallel              as many simpleperf connections between the pair as the sidecar's
                      ``parallel``
====================  ==========================================================================

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

import numpy as np

from ...batch import analysis
from ...capture import Capture
from ...render import Shown, terminal_width
from ...results import Result
from ...schema import Column, TableSpec
from ...sidecar import load_sidecar, sidecar_for
from ...streams import id_ranges
from ...tools.wire import SIMPLEPERF_PORT
from ..reassembly import reassemble
from . import iperf3, ping, simpleperf
from .checks import CANNOT_TELL, FAIL, PASS, RANK, Check, Context, Expected, StreamVerdict

__all__ = ["verify", "Verification", "Expected", "Check", "StreamVerdict", "PASS", "FAIL",
           "CANNOT_TELL"]

_C = Column
VERDICTS = ("pass", "fail", "cannot tell")
_STREAM = _C("stream", "int64", "tcp.stream / udp.stream; for ping the index of its (source, "
             "destination, identifier)")
_APP = _C("app", "str", "simpleperf, iperf3-control, iperf3-data, ping",
          values=("simpleperf", "iperf3-control", "iperf3-data", "ping"))
STREAMS = TableSpec("streams", "one row per recognised stream: its verdict", (
    _STREAM,
    _C("proto", "str", "tcp, udp or icmp", values=("tcp", "udp", "icmp")),
    _APP,
    _C("client", "str", "address:port of the side that opened it (ping: the requester)"),
    _C("server", "str", "the other side"),
    _C("verdict", "str", "pass, fail or cannot tell (the worst of its checks)", values=VERDICTS),
    _C("passed", "int64", "checks passed"),
    _C("failed", "int64", "checks failed"),
    _C("cannot_tell", "int64", "checks the capture cannot decide"),
    _C("why", "str", "the first failed (else undecided) check: what was expected, what was "
       "found"),
))
CHECKS = TableSpec("checks", "one row per check of every recognised stream", (
    _STREAM, _APP,
    _C("check", "str", "the rule's name (see pcapstats.analyses.verify)"),
    _C("verdict", "str", "pass, fail or cannot tell", values=VERDICTS),
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


@analysis()
def verify(capture: Capture, *, sidecar="auto", expected: Expected | None = None,
           stream: int | None = None) -> Verification:
    """Check every recognised stream of a capture (see the module docstring for the rules).

    sidecar: the lab sidecar (a path or the loaded dict) saying what was asked (-t / -n / -P
    and which streams are simpleperf's); ``"auto"``: the one beside the capture, if any;
    None: none.  Or give ``expected`` directly.  stream: only this TCP/UDP stream (and no
    ping groups)."""
    if expected is None:
        expected = Expected()
        if isinstance(sidecar, str) and sidecar == "auto":
            found = sidecar_for(capture.path)
            sidecar = found if found.exists() else None
        if sidecar is not None:
            doc = sidecar if isinstance(sidecar, dict) else load_sidecar(sidecar)
            expected = Expected.from_sidecar(doc, capture.path)
    with reassemble(capture) as r:
        ctx = Context(capture, r, expected)
        _verify(ctx, stream)
    return Verification(ctx.out, capture=os.fspath(capture.path), notes=ctx.notes)


def _verify(ctx: Context, only: int | None) -> None:
    """Recognise each TCP stream, run its protocol's checks, then ping's (all streams)."""
    tcp_streams = np.unique(ctx.r.flows["stream"])
    if only is not None:
        tcp_streams = tcp_streams[tcp_streams == only]
    kinds: dict[str | None, list[int]] = {app: [] for app in (*APPS, None)}
    for s in tcp_streams.tolist():
        kinds[_recognise(ctx, s)].append(s)
    for s in kinds["simpleperf"]:
        ctx.out.append(simpleperf.check(ctx, s))
    simpleperf.check_parallel(ctx, [v for v in ctx.out if v.app == "simpleperf"])
    iperf3.check(ctx, kinds["iperf3-control"], kinds["iperf3-data"])
    if only is None:
        ping.check(ctx)
    if kinds[None]:
        ctx.notes.append(f"{len(kinds[None])} TCP stream(s) not recognised as simpleperf or "
                         f"iperf3, not checked: {id_ranges(kinds[None])}")
    ctx.out.sort(key=lambda v: (v.proto != "tcp", v.proto, v.stream))


APPS = ("simpleperf", "iperf3-control", "iperf3-data")   # the TCP app protocols checked here


def _recognise(ctx: Context, s: int) -> str | None:
    """What app protocol TCP stream s carries: the sidecar's word for simpleperf, else its
    client's first bytes, else the sidecar's word if it names one of APPS (a lab tool with no
    checks here, pingpong or a file transfer, is not recognised), else (bytes not captured)
    simpleperf's default port; None when nothing fits."""
    told = ctx.exp.streams.get(s)
    if told == "simpleperf":
        return "simpleperf"
    c = ctx.client_dir(s)
    head = ctx.head(s, c, iperf3.COOKIE_BYTES)
    if iperf3.is_cookie(head):
        return "iperf3-control" if ctx.head(s, 1 - c, 1) == iperf3.PARAM_EXCHANGE else \
            "iperf3-data"
    if simpleperf.looks_like(head):
        return "simpleperf"
    if told in APPS:
        return told
    if head is None and SIMPLEPERF_PORT in ctx.ports(s):
        return "simpleperf"    # payload not captured: simpleperf's default port decides
    return None


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
    out = [f"{result.captures[0]}: {result.verdict.upper()}"]
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
