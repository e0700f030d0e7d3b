"""Was the application protocol followed?  A verdict per stream, with the evidence.

``verify(cap, sidecar=None)`` recognises simpleperf, iperf3 and ping traffic in a capture and
checks each stream against the tool's own definition.  Every check ends in one of three
verdicts, and a stream's verdict is the worst of its checks (fail > cannot tell > pass):

- **pass**: the capture shows the rule was followed;
- **fail**: the capture shows it was not: the check says what was expected, what was found,
  and where (frame numbers, stream offsets);
- **cannot tell**: the bytes or packets that would decide it are not in the capture (payload
  cut by the snaplen, a segment the capture missed, the start or end of the connection not
  captured, a setting only the sidecar knows).  Never a guess.

What is recognised (by content first; the sidecar's flow list also names streams whose
payload the snaplen cut):

- **simpleperf** (pcapstats.simpleperf): a TCP connection whose client sends ``0`` bytes
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

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import schema
from ..capture import Capture
from ..protocols import (SIMPLEPERF_ACK, SIMPLEPERF_BYE, SIMPLEPERF_MESSAGE,
                         SIMPLEPERF_MESSAGE_BYTES, SIMPLEPERF_PORT)
from .reassembly import HOLE_REASONS, Reassembly, reassemble

PASS, FAIL, CANNOT_TELL = "pass", "fail", "cannot tell"
_RANK = {PASS: 0, CANNOT_TELL: 1, FAIL: 2}

SIMPLEPERF_FILL = SIMPLEPERF_MESSAGE[0]  # every message byte
DURATION_EARLY_S, DURATION_EARLY_FRACTION = 0.1, 0.05
DURATION_LATE_S, DURATION_LATE_FRACTION = 1.0, 0.25

IPERF3_COOKIE_BYTES = 37
IPERF3_STATES = {1: "TEST_START", 2: "TEST_RUNNING", 4: "TEST_END", 9: "PARAM_EXCHANGE",
                 10: "CREATE_STREAMS", 13: "EXCHANGE_RESULTS", 14: "DISPLAY_RESULTS",
                 16: "IPERF_DONE"}
# On the wire (iperf.h writes 0x36373839 / 0x39383736 in host order: these are the bytes a
# little-endian host sends; big-endian hosts swap the constants so the bytes are the same).
IPERF3_UDP_CONNECT, IPERF3_UDP_REPLY = b"9876", b"6789"
IPERF3_UDP_LEGACY_REPLY = (987654321).to_bytes(4, "little")
_COOKIE_RE = re.compile(rb"[a-z0-9]{36}\x00")
PING_LATE_S = 1.0

# The verdict table (one row per stream): (column, meaning).
VERDICT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("stream", "tcp.stream / udp.stream; for ping the index of its (source, destination, id)"),
    ("proto", "tcp, udp or icmp"),
    ("app", "simpleperf, iperf3-control, iperf3-data, ping"),
    ("client", "address:port of the side that opened it (ping: the requester)"),
    ("server", "the other side"),
    ("verdict", "pass, fail or cannot tell (the worst of its checks)"),
    ("passed", "checks passed"),
    ("failed", "checks failed"),
    ("cannot_tell", "checks the capture cannot decide"),
    ("why", "the first failed (else undecided) check: what was expected, what was found"),
)
# The checks table (one row per check; csv/json): (column, meaning).
CHECK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("stream", "as in the verdict table"), ("app", "as in the verdict table"),
    ("check", "the rule's name (see pcapstats.analyses.verify)"),
    ("verdict", "pass, fail or cannot tell"),
    ("expected", "what the rule asks"), ("found", "what the capture shows"),
    ("frames", "frame numbers of the evidence, space-separated"),
    ("offset", "stream offset of the evidence (bytes from the first payload byte), or empty"),
)


@dataclass
class Check:
    name: str
    verdict: str
    expected: str
    found: str
    frames: tuple[int, ...] = ()
    offset: int | None = None


@dataclass
class StreamVerdict:
    stream: int
    proto: str
    app: str
    client: str
    server: str
    checks: list[Check] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)   # facts shown, not judged

    @property
    def verdict(self) -> str:
        return max((c.verdict for c in self.checks), key=_RANK.__getitem__, default=CANNOT_TELL)

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.checks)

    def why(self) -> str:
        for wanted in (FAIL, CANNOT_TELL):
            for c in self.checks:
                if c.verdict == wanted:
                    return f"{c.name}: expected {c.expected}, found {c.found}"
        return ""

    def add(self, *args, **kwargs) -> Check:
        check = Check(*args, **kwargs)
        self.checks.append(check)
        return check


@dataclass
class Verification:
    """verify()'s answer: one StreamVerdict per recognised stream, and what was not checked."""
    path: str
    streams: list[StreamVerdict]
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if not self.streams:
            return CANNOT_TELL
        return max((s.verdict for s in self.streams), key=_RANK.__getitem__)

    def table(self) -> dict[str, np.ndarray]:
        """VERDICT_COLUMNS as numpy columns (for pcapstats.render)."""
        s = self.streams
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

    def checks(self) -> dict[str, np.ndarray]:
        """CHECK_COLUMNS as numpy columns, one row per check."""
        rows = [(v, c) for v in self.streams for c in v.checks]
        return {
            "stream": np.array([v.stream for v, _ in rows], np.int64),
            "app": np.array([v.app for v, _ in rows], object),
            "check": np.array([c.name for _, c in rows], object),
            "verdict": np.array([c.verdict for _, c in rows], object),
            "expected": np.array([c.expected for _, c in rows], object),
            "found": np.array([c.found for _, c in rows], object),
            "frames": np.array([" ".join(map(str, c.frames)) for _, c in rows], object),
            "offset": np.array([np.nan if c.offset is None else c.offset for _, c in rows]),
        }


# -- what the sidecar says ------------------------------------------------------------------

@dataclass
class Expected:
    """What was asked of the tools, when known (from a lab sidecar, or given by hand)."""
    tool: str | None = None
    time_s: float | None = None        # simpleperf -t
    num_bytes: int | None = None       # simpleperf -n, per connection
    parallel: int | None = None        # per host pair
    streams: dict[int, str] = field(default_factory=dict)   # tcp.stream -> tool, this capture

    @classmethod
    def from_sidecar(cls, doc: dict, capture: str | os.PathLike) -> "Expected":
        from ..lab.run import Scenario  # the sidecar's scenario as the lab parses it
        scen = doc.get("scenario") or {}
        tool = scen.get("tool")
        num = None
        if scen.get("bytes") is not None:
            num = Scenario(tool=tool or "simpleperf", bytes=scen["bytes"]).transfer_bytes()
        name = Path(capture).name
        streams = {}
        for flow in doc.get("flows") or []:
            sid = (flow.get("streams") or {}).get(name)
            if sid is not None and flow.get("proto") == "tcp":
                streams[int(sid)] = flow.get("tool") or tool
        return cls(tool=tool, time_s=None if num else scen.get("duration_s"), num_bytes=num,
                   parallel=scen.get("parallel"), streams=streams)


def verify(cap: Capture | str | os.PathLike, sidecar=None, *, expected: Expected | None = None,
           stream: int | None = None) -> Verification:
    """Check every recognised stream of a capture (see the module docstring for the rules).

    cap: a Capture read with the fast engine, or a path.  sidecar: a lab sidecar (path or the
    loaded dict) for what was asked (-t / -n / -P and which streams are simpleperf's); or give
    ``expected`` directly.  stream: only this TCP/UDP stream (and no ping groups)."""
    if not isinstance(cap, Capture):
        from ..reader import read
        cap = read(cap)
    if expected is None:
        expected = Expected()
        if sidecar is not None:
            if not isinstance(sidecar, dict):
                from ..lab.sidecar import load_sidecar
                sidecar = load_sidecar(sidecar)
            expected = Expected.from_sidecar(sidecar, cap.path)
    with reassemble(cap) as r:
        return _Verifier(cap, r, expected, stream).run()


class _Verifier:
    def __init__(self, cap: Capture, r: Reassembly, expected: Expected, stream: int | None):
        self.cap, self.r, self.exp, self.only = cap, r, expected, stream
        self.out: list[StreamVerdict] = []
        self.notes: list[str] = []
        self.time = cap.column("frame_time_ns")

    def run(self) -> Verification:
        tcp_streams = np.unique(self.r.flows["stream"])
        if self.only is not None:
            tcp_streams = tcp_streams[tcp_streams == self.only]
        iperf_controls, iperf_data, simpleperf, unknown = {}, [], [], []
        for s in tcp_streams.tolist():
            kind = self._recognise(s)
            if kind == "simpleperf":
                simpleperf.append(s)
            elif kind == "iperf3-control":
                iperf_controls[s] = None
            elif kind == "iperf3-data":
                iperf_data.append(s)
            else:
                unknown.append(s)
        for s in simpleperf:
            self.out.append(self._simpleperf(s))
        self._parallel_simpleperf([v for v in self.out if v.app == "simpleperf"])
        self._iperf3(list(iperf_controls), iperf_data)
        if self.only is None:
            self._ping()
        if unknown:
            self.notes.append(f"{len(unknown)} TCP stream(s) not recognised as simpleperf or "
                              f"iperf3, not checked: {_ranges(unknown)}")
        self.out.sort(key=lambda v: (v.proto != "tcp", v.proto, v.stream))
        return Verification(os.fspath(self.cap.path), self.out, self.notes)

    # -- helpers --------------------------------------------------------------------------------
    def _t(self, frame: int) -> float:
        return int(self.time[frame - 1]) / 1e9

    def _endpoints(self, s: int, client_dir: int) -> tuple[str, str]:
        row = int(np.flatnonzero(self._rows_of(s))[0])
        src = self.cap.addresses[self.cap.column("ip_src")[row]]
        dst = self.cap.addresses[self.cap.column("ip_dst")[row]]
        sp, dp = self.cap.column("tcp_srcport")[row], self.cap.column("tcp_dstport")[row]
        a, b = _endpoint(src, sp), _endpoint(dst, dp)
        return (a, b) if client_dir == 0 else (b, a)

    def _client_dir(self, s: int) -> int:
        """The direction that sent a SYN without ACK; direction 0 (the first packet's source)
        when that is not in the capture."""
        def opens(d):
            f = self.r.flow(s, d)
            return bool(f and f["syn_frame"]
                        and not self.cap.column("tcp_flags")[f["syn_frame"] - 1] & 0x010)
        return 1 if opens(1) and not opens(0) else 0

    def _head(self, s: int, d: int, n: int) -> bytes | None:
        """The first n bytes (fewer if the direction has fewer), or None if not captured."""
        f = self.r.flow(s, d)
        if not f or not f["start_seen"] and not f["captured_bytes"]:
            return None
        n = min(n, f["seen_end"])
        if self.r.holes_in(s, d, 0, n)["start"].size:
            return None
        return self.r.read(s, d, 0, n) if n else b""

    def _excerpt(self, s: int, d: int, start: int, n: int = 24) -> str:
        """Up to n captured bytes from start, for evidence (repr of the bytes)."""
        got = b""
        for off, chunk in self.r.chunks(s, d, start, start + n):
            if off != start + len(got):
                break
            got += bytes(chunk)
        return repr(got)[1:] if got else "(not captured)"

    def _recognise(self, s: int) -> str | None:
        told = self.exp.streams.get(s)
        if told == "simpleperf":
            return "simpleperf"
        c = self._client_dir(s)
        head = self._head(s, c, IPERF3_COOKIE_BYTES)
        if head is not None and _COOKIE_RE.fullmatch(head or b""):
            back = self._head(s, 1 - c, 1)
            return "iperf3-control" if back == bytes([9]) else "iperf3-data"
        if head and head[:1] in (b"0", b"B") and (head.strip(b"0") in (b"", b"B", b"BY", b"BYE")
                                                 or head.startswith(b"0")):
            return "simpleperf"
        if told:
            return told
        if head is None and SIMPLEPERF_PORT in self._ports(s):
            return "simpleperf"    # payload not captured: simpleperf's default port decides
        return None

    def _ports(self, s: int) -> set[int]:
        rows = np.flatnonzero(self._rows_of(s))
        return {int(self.cap.column("tcp_srcport")[rows[0]]),
                int(self.cap.column("tcp_dstport")[rows[0]])} if len(rows) else set()

    def _rows_of(self, s: int) -> np.ndarray:
        return (self.cap.column("tcp_stream") == s) & self.cap.layer(schema.TCP)

    # -- simpleperf -----------------------------------------------------------------------------
    def _simpleperf(self, s: int) -> StreamVerdict:
        r = self.r
        c = self._client_dir(s)
        client, server = self._endpoints(s, c)
        v = StreamVerdict(s, "tcp", "simpleperf", client, server)
        fc, fs = r.flow(s, c), r.flow(s, 1 - c)
        empty = {"start_seen": False, "syn_frame": 0, "fin_frame": 0, "rst_frame": 0,
                 "end_offset": -1, "seen_end": 0, "captured_bytes": 0, "cut_bytes": 0,
                 "lost_bytes": 0, "data_segments": 0, "wire_bytes": 0}
        fc, fs = fc or empty, fs or empty
        if not fc["start_seen"]:
            v.add("start", CANNOT_TELL, "the client's SYN", "not captured: counts start "
                  "where the capture did")
        else:
            v.add("start", PASS, "the client's SYN", f"frame {fc['syn_frame']}",
                  (fc["syn_frame"],))
        end_known = fc["end_offset"] >= 0
        end = fc["end_offset"] if end_known else fc["seen_end"]
        data_end = max(end - len(SIMPLEPERF_BYE), 0)
        # bye
        bye_frame = r.first_frame_carrying(s, c, end - 1) if end else 0
        tail = self._tail(s, c, end, len(SIMPLEPERF_BYE))
        if end < len(SIMPLEPERF_BYE):
            v.add("bye", FAIL, "'BYE' at the end", f"{end} bytes in all", offset=0)
        elif tail is None:
            v.add("bye", CANNOT_TELL, "'BYE' at the end", f"the last bytes ({end - 3}-{end}) "
                  "are not in the capture", (bye_frame,), end - 3)
        elif tail != SIMPLEPERF_BYE:
            v.add("bye", FAIL, "'BYE' at the end", f"{_text(tail)} at offset {end - 3} "
                  f"(frame {bye_frame}){'' if end_known else ', and no FIN'}",
                  (bye_frame,), end - 3)
        else:
            v.add("bye", PASS, "'BYE' at the end", f"'BYE' at offset {end - 3}, frame "
                  f"{bye_frame}", (bye_frame,), end - 3)
        # messages: every byte before the BYE is '0'
        self._content(v, s, c, 0, data_end, SIMPLEPERF_FILL, "messages",
                      "every message byte '0' (b'0' * 1000 a message)")
        # message bytes: whole messages, or -n
        self._message_bytes(v, fc, data_end, end_known)
        # ack
        self._ack(v, s, c, fs, bye_frame)
        # close
        self._close(v, fc, fs)
        # duration
        self._duration(v, s, c, bye_frame if end_known else 0, fc["start_seen"])
        self._segment_evidence(v, s, c, data_end)
        return v

    def _tail(self, s, d, end, n) -> bytes | None:
        if end < n or self.r.holes_in(s, d, end - n, end)["start"].size:
            return None
        f = self.r.flow(s, d)
        if f is None or f["seen_end"] < end:
            return None
        return self.r.read(s, d, end - n, n)

    def _content(self, v, s, d, start, end, allowed, name, expected) -> None:
        r = self.r
        count, lowest = r.scan_for_other_than(s, d, start, end, allowed)
        if count:
            frame = r.first_frame_carrying(s, d, lowest)
            v.add(name, FAIL, expected, f"{self._excerpt(s, d, lowest)!s} at offset {lowest} "
                  f"(frame {frame}); {count} byte(s) other than {chr(allowed)!r} in all",
                  (frame,), lowest)
            return
        holes = r.holes_in(s, d, start, end)
        if holes["start"].size:
            by = {HOLE_REASONS[k]: int(holes["length"][holes["reason"] == k].sum())
                  for k in np.unique(holes["reason"]).tolist()}
            what = ", ".join(f"{n} bytes {why}" for why, n in by.items())
            v.add(name, CANNOT_TELL, expected, f"no other byte in what was captured, but "
                  f"{what} (first at offset {int(holes['start'][0])})",
                  offset=int(holes["start"][0]))
            return
        v.add(name, PASS, expected, f"{end - start} bytes, all {chr(allowed)!r}")

    def _message_bytes(self, v, fc, n, end_known) -> None:
        exp, size = self.exp, SIMPLEPERF_MESSAGE_BYTES
        whole, rest = divmod(n, size)
        found = f"{n} bytes = {whole} x {size}" + (f" + {rest}" if rest else "")
        if not fc["start_seen"] or not end_known:
            v.add("message_bytes", CANNOT_TELL, "whole 1000-byte messages (or -n bytes)",
                  found + f"; the connection's {'start' if not fc['start_seen'] else 'FIN'} "
                  "was not captured")
        elif exp.num_bytes is not None:
            v.add("message_bytes", PASS if n == exp.num_bytes else FAIL,
                  f"-n {exp.num_bytes} bytes", found)
        elif rest == 0:
            v.add("message_bytes", PASS, "whole 1000-byte messages", found)
        elif exp.time_s is not None:
            v.add("message_bytes", FAIL, f"whole 1000-byte messages (a -t {exp.time_s:g} run)",
                  found + f": the last message is {rest} bytes", offset=whole * size)
        else:
            v.add("message_bytes", CANNOT_TELL, "whole 1000-byte messages (a -t run) or -n "
                  "bytes", found + f": right only for a -n {n}B run; the sidecar would tell",
                  offset=whole * size)

    def _ack(self, v, s, c, fs, bye_frame) -> None:
        r = self.r
        end = fs["end_offset"] if fs["end_offset"] >= 0 else fs["seen_end"]
        ack_frame = r.first_frame_carrying(s, 1 - c, 0) if end else 0
        expected = "the server sends exactly 'ACK: BYE'"
        if end == 0:
            v.add("ack", FAIL, expected, "the server sent nothing" + (
                "" if fs["end_offset"] >= 0 else " (no FIN captured either)"))
            return
        got = self._head(s, 1 - c, end) if end <= 256 else None
        if got is None and end <= 256:
            v.add("ack", CANNOT_TELL, expected, f"{end} bytes, not all captured", (ack_frame,), 0)
        elif got != SIMPLEPERF_ACK:
            shown = _text(got) if got is not None else f"{self._excerpt(s, 1 - c, 0)}..."
            v.add("ack", FAIL, expected, f"{shown} ({end} bytes, frame {ack_frame})",
                  (ack_frame,), 0)
        else:
            v.add("ack", PASS, expected, f"'ACK: BYE', frame {ack_frame}", (ack_frame,), 0)
        if ack_frame and bye_frame:
            ok = ack_frame > bye_frame
            v.add("order", PASS if ok else FAIL, "ACK: BYE after BYE",
                  f"BYE frame {bye_frame}, ACK: BYE frame {ack_frame}", (bye_frame, ack_frame))
        self._ack_frame = ack_frame

    def _close(self, v, fc, fs) -> None:
        ack = getattr(self, "_ack_frame", 0)
        rst = [f for f in (fc["rst_frame"], fs["rst_frame"]) if f]
        fins = (fc["fin_frame"], fs["fin_frame"])
        expected = "FIN from both sides after ACK: BYE, no RST"
        if rst and (not all(fins) or min(rst) < max(fins)):
            v.add("close", FAIL, expected, f"RST at frame {min(rst)}"
                  f"{'' if all(fins) else ' before both FINs'}", tuple(sorted(rst)))
        elif not all(fins):
            missing = " and ".join(w for w, f in zip(("client", "server"), fins) if not f)
            v.add("close", CANNOT_TELL, expected, f"no FIN from the {missing} in the capture")
        elif ack and min(fins) < ack:
            v.add("close", FAIL, expected, f"FIN at frame {min(fins)} before the ACK: BYE "
                  f"(frame {ack})", (min(fins), ack))
        else:
            v.add("close", PASS, expected, f"client FIN frame {fins[0]}, server FIN frame "
                  f"{fins[1]}" + (f"; RST at frame {min(rst)} after both" if rst else ""),
                  fins)

    def _duration(self, v, s, c, bye_frame, start_seen) -> None:
        """bye_frame: the first frame carrying the stream's last byte (0: end unknown)."""
        segs = self.r.segments_of(s, c)
        if not len(segs):
            return
        first = int(segs.frame.min())
        t = self.exp.time_s
        span = self._t(bye_frame) - self._t(first) if bye_frame else None
        if span is not None:
            v.evidence.append(f"first data frame {first}, BYE frame {bye_frame}: {span:.3f} s")
        if t is None or self.exp.num_bytes is not None:
            return
        lo = t - max(DURATION_EARLY_S, DURATION_EARLY_FRACTION * t)
        hi = t + max(DURATION_LATE_S, DURATION_LATE_FRACTION * t)
        expected = f"-t {t:g} s: first data to BYE in {lo:.2f}-{hi:.2f} s"
        if span is None or not start_seen:
            v.add("duration", CANNOT_TELL, expected, "the connection's "
                  f"{'start (SYN)' if not start_seen else 'end (FIN)'} was not captured")
        else:
            v.add("duration", PASS if lo <= span <= hi else FAIL, expected,
                  f"{span:.3f} s (frames {first}-{bye_frame})", (first, bye_frame))

    def _segment_evidence(self, v, s, c, data_end) -> None:
        segs = self.r.segments_of(s, c)
        if not len(segs):
            return
        sizes, counts = np.unique(segs.length, return_counts=True)
        top = np.argsort(-counts, kind="stable")[:5]
        mss = self._mss(s, c)
        hist = ", ".join(f"{int(sizes[i])} B x {int(counts[i])}" for i in top)
        v.evidence.append(f"client segment sizes: {hist} ({len(segs)} segments"
                          + (f", MSS {mss}" if mss else "") + ")")
        if mss:
            full = int((segs.length == mss).sum())
            v.evidence.append(f"{full} MSS-sized segments; {int((segs.length > 1000).sum())} "
                              "are longer than a 1000-byte message (writes coalesced)")
        f = self.r.flow(s, c)
        resent = f["wire_bytes"] - f["captured_bytes"] - f["cut_bytes"]
        if resent:
            v.evidence.append(f"{resent} bytes sent again (retransmissions and overlaps), "
                              "each byte counted once")
        # write boundaries: a segment shorter than the MSS that ends inside a message
        if mss:
            ends = segs.start + segs.length
            odd = (segs.length < mss) & (ends % SIMPLEPERF_MESSAGE_BYTES != 0) & (ends < data_end)
            if odd.any():
                k = int(np.flatnonzero(odd)[0])
                v.evidence.append(f"{int(odd.sum())} short segment(s) end inside a 1000-byte "
                                  f"message, first frame {int(segs.frame[k])} at offset "
                                  f"{int(ends[k])} (a write boundary there, or the window cut it)")
        order = np.argsort(segs.frame)
        v.evidence.append(f"first data frame {int(segs.frame[order[0]])}, last data frame "
                          f"{int(segs.frame[order[-1]])}")

    def _mss(self, s, d) -> int | None:
        rows = np.flatnonzero((self.cap.column("tcp_stream") == s) & self.cap.layer(schema.TCP)
                              & self.cap.present("tcp_option_mss"))
        if not len(rows):
            return None
        # the MSS a side may send is the one its peer announced
        client_syn = self.r.flow(s, d)
        src = self.cap.column("ip_src")[rows]
        peer_rows = rows[src != self.cap.column("ip_src")[(client_syn or {}).get("syn_frame", 1) - 1]]
        pick = peer_rows if len(peer_rows) else rows
        mss = int(self.cap.column("tcp_option_mss")[pick[0]])
        ts = self.cap.present("tcp_option_tsval")[pick[0]]
        return mss - (12 if ts else 0)

    def _parallel_simpleperf(self, verdicts: list[StreamVerdict]) -> None:
        want = self.exp.parallel
        if not want or not verdicts:
            return
        pairs: dict = {}
        for v in verdicts:
            pairs.setdefault((v.client.rsplit(":", 1)[0], v.server), []).append(v)
        for (client, server), group in pairs.items():
            ok = len(group) == want
            for v in group:
                v.add("parallel", PASS if ok else FAIL, f"-P {want} connections {client} -> "
                      f"{server}", f"{len(group)}: streams {_ranges([g.stream for g in group])}")

    # -- iperf3 ---------------------------------------------------------------------------------
    def _iperf3(self, controls: list[int], data: list[int]) -> None:
        by_cookie: dict[bytes, list[int]] = {}
        for s in data:
            c = self._client_dir(s)
            by_cookie.setdefault(self._head(s, c, IPERF3_COOKIE_BYTES), []).append(s)
        for s in controls:
            c = self._client_dir(s)
            cookie = self._head(s, c, IPERF3_COOKIE_BYTES)
            v = StreamVerdict(s, "tcp", "iperf3-control", *self._endpoints(s, c))
            self.out.append(v)
            v.add("cookie", PASS, "37-byte cookie first", f"{_text(cookie)}")
            params, results = self._iperf3_control(v, s, c)
            streams = by_cookie.pop(cookie, [])
            udp = bool(params and params.get("udp"))
            if udp or params is None:
                self._iperf3_udp(v, params or {}, results)
            elif params:
                _parallel(v, int(params.get("parallel", 1)), "tcp", streams)
            for d in streams:
                self.out.append(self._iperf3_data(d, cookie, params, results))
        for cookie, streams in by_cookie.items():
            for d in streams:
                c = self._client_dir(d)
                v = StreamVerdict(d, "tcp", "iperf3-data", *self._endpoints(d, c))
                v.add("cookie", CANNOT_TELL, "the cookie of a control connection",
                      f"{_text(cookie)}: no control connection with it in the capture")
                self.out.append(v)

    def _iperf3_control(self, v, s, c) -> tuple[dict | None, dict | None]:
        """Parse both directions of the control connection; checks its message sequence."""
        fc, fs = self.r.flow(s, c), self.r.flow(s, 1 - c)
        params = results = server_results = None
        cl = self._head(s, c, fc["seen_end"]) if fc else None
        sv = self._head(s, 1 - c, fs["seen_end"]) if fs else None
        if cl is None or sv is None:
            v.add("messages", CANNOT_TELL, "cookie, parameters, TEST_END, results, IPERF_DONE",
                  "the control connection's bytes are not all captured")
            return None, {}
        try:
            at = IPERF3_COOKIE_BYTES
            params, at = _json_message(cl, at)
            client_states = []
            while at < len(cl):
                state = cl[at]
                client_states.append(state)
                at += 1
                if state == 4:     # TEST_END: the client's results follow
                    results, at = _json_message(cl, at)
            expect_client = [4, 16]
            ok_client = client_states == expect_client
            v.add("client_messages", PASS if ok_client else FAIL,
                  "cookie, parameters (JSON), TEST_END, results (JSON), IPERF_DONE",
                  "cookie, parameters, " + ", ".join(
                      _state(x) + (", results" if x == 4 and results else "")
                      for x in client_states))
            server_states, at, server_results = [], 0, None
            while at < len(sv):
                state = sv[at]
                server_states.append(state)
                at += 1
                if state == 13:    # EXCHANGE_RESULTS: the server's results follow
                    server_results, at = _json_message(sv, at)
            expect_server = [9, 10, 1, 2, 13, 14]
            v.add("server_messages", PASS if server_states == expect_server else FAIL,
                  ", ".join(_state(x) for x in expect_server) + " (results after "
                  "EXCHANGE_RESULTS)", ", ".join(_state(x) for x in server_states))
        except ValueError as e:
            v.add("messages", FAIL, "length-prefixed JSON where the protocol puts it", str(e))
            return params, {}
        return params, {"client": results, "server": server_results}

    def _iperf3_data(self, s, cookie, params, results) -> StreamVerdict:
        c = self._client_dir(s)
        v = StreamVerdict(s, "tcp", "iperf3-data", *self._endpoints(s, c))
        v.add("cookie", PASS, "the control connection's cookie first", _text(cookie))
        if not params:
            return v
        reverse = bool(params.get("reverse"))
        sender = 1 - c if reverse else c
        f = self.r.flow(s, sender) or {"seen_end": 0, "captured_bytes": 0}
        wire = f["seen_end"] - (IPERF3_COOKIE_BYTES if sender == c else 0)
        results = results or {}
        sent = _stream_bytes(results.get("server" if reverse else "client"))
        got = _stream_bytes(results.get("client" if reverse else "server"))
        expected = ("bytes after the cookie between what the receiver read and what the sender "
                    "wrote (results of the same stream)")
        if params.get("bidirectional"):
            v.add("bytes", CANNOT_TELL, expected, "bidirectional test: not checked")
        elif params.get("omit"):
            v.add("bytes", CANNOT_TELL, expected, f"omit {params['omit']} s: results leave "
                  "the omitted bytes out")
        elif not sent or len(sent) != len(got):
            v.add("bytes", CANNOT_TELL, expected, "the results were not captured")
        else:
            ok = any(r <= wire <= w for w, r in zip(sent, got))
            v.add("bytes", PASS if ok else FAIL, expected, f"{wire} bytes; written/read per "
                  "stream: " + ", ".join(f"{w}/{r}" for w, r in zip(sent, got)))
        ends = {k: (self.r.flow(s, d) or {}).get(k + "_frame", 0) for d in (c, 1 - c)
                for k in ("fin", "rst")}
        v.evidence.append("ended by " + ", ".join(f"{k.upper()} frame {f}" for k, f in
                                                  ends.items() if f) if any(ends.values())
                          else "end not captured")
        return v

    def _iperf3_udp(self, v, params, results) -> None:
        """UDP data streams on the control connection's server port."""
        cap = self.cap
        udp = cap.layer(schema.UDP) & ~cap.column("l4_quoted").astype(bool)
        server_port = int(v.server.rsplit(":", 1)[1])
        rows = np.flatnonzero(udp & ((cap.column("udp_dstport") == server_port)
                                     | (cap.column("udp_srcport") == server_port)))
        streams = np.unique(cap.column("udp_stream")[rows]).tolist()
        found = []
        reported = sorted(int(x["packets"]) for x in
                          ((results or {}).get("client") or {}).get("streams", []))
        for u in streams:
            mine = rows[cap.column("udp_stream")[rows] == u]
            to_server = cap.column("udp_dstport")[mine] == server_port
            first = _payload(cap, self.r.buf, mine[:1], 4)
            if first is None or first[0] != IPERF3_UDP_CONNECT:
                continue
            found.append(u)
            src_row = mine[0]
            client = _endpoint(cap.addresses[cap.column("ip_src")[src_row]],
                               cap.column("udp_srcport")[src_row])
            sv = StreamVerdict(u, "udp", "iperf3-data", client, v.server)
            sv.add("connect", PASS, "4-byte connect message '9876' first",
                   f"frame {int(cap.column('frame_number')[src_row])}")
            back = mine[~to_server]
            reply = _payload(cap, self.r.buf, back[:1], 4)
            if reply is None or reply[0] not in (IPERF3_UDP_REPLY, IPERF3_UDP_LEGACY_REPLY):
                sv.add("reply", FAIL if reply is not None else CANNOT_TELL,
                       "the server's reply '6789'",
                       "none captured" if reply is None else _text(reply[0]))
            else:
                sv.add("reply", PASS, "the server's reply '6789'",
                       f"frame {int(cap.column('frame_number')[back[0]])}")
            data = mine[to_server][1:]
            width = 8 if params.get("udp_counters_64bit") else 4
            heads = _payload(cap, self.r.buf, data, 8 + width)
            if not params:
                sv.add("sequence", CANNOT_TELL, "packet counts 1..n", "the control "
                       "connection's parameters were not captured: counter width unknown")
            elif heads is None:
                sv.add("sequence", CANNOT_TELL, "packet counts 1..n", "payload not captured")
            else:
                seq = np.array([int.from_bytes(h[8:8 + width], "big") for h in heads], np.int64)
                dup = len(seq) - len(np.unique(seq))
                top = int(seq.max()) if len(seq) else 0
                expected = "packet counts 1..n, each once, n = the client's reported packets"
                ok = dup == 0 and (not reported or top in reported)
                sv.add("sequence", PASS if ok else FAIL, expected,
                       f"{len(seq)} datagrams, counts up to {top}, {dup} duplicate(s); "
                       f"reported {', '.join(map(str, reported)) or 'nothing'}")
                sv.evidence.append(f"{top - len(np.unique(seq))} count(s) missing before the "
                                   "capture point (lost on the way, or not captured)")
            self.out.append(sv)
        if params:
            _parallel(v, int(params.get("parallel", 1)), "udp", found)

    # -- ping -----------------------------------------------------------------------------------
    def _ping(self) -> None:
        cap = self.cap
        echo = np.flatnonzero(cap.layer(schema.ICMP_ECHO) & cap.layer(schema.IP))
        if not len(echo):
            return
        typ = cap.column("icmp_type")[echo]
        ver = cap.column("ip_version")[echo]
        request = ((ver == 4) & (typ == 8)) | ((ver == 6) & (typ == 128))
        reply = ((ver == 4) & (typ == 0)) | ((ver == 6) & (typ == 129))
        src, dst = cap.column("ip_src")[echo], cap.column("ip_dst")[echo]
        ident, seq = cap.column("icmp_ident")[echo], cap.column("icmp_seq")[echo]
        frame = cap.column("frame_number")[echo]
        t = cap.column("frame_time_ns")[echo]
        last_t = int(cap.column("frame_time_ns").max())
        req_rows = np.flatnonzero(request)
        groups = sorted({(int(src[i]), int(dst[i]), int(ident[i])) for i in req_rows},
                        key=lambda g: min(frame[req_rows][(src[req_rows] == g[0]) & (
                            dst[req_rows] == g[1]) & (ident[req_rows] == g[2])]))
        for n, (a, b, ident_) in enumerate(groups):
            rq = req_rows[(src[req_rows] == a) & (dst[req_rows] == b) & (ident[req_rows] == ident_)]
            rp = np.flatnonzero(reply & (src == b) & (dst == a) & (ident == ident_))
            v = StreamVerdict(n, "icmp", "ping", cap.addresses[a], cap.addresses[b])
            v.evidence.append(f"identifier {ident_}, {len(rq)} request(s) and {len(rp)} "
                              f"reply(ies), sequence numbers {_ranges(seq[rq].tolist())}")
            seqs = seq[rq].astype(np.int64)
            uniq, counts = np.unique(seqs, return_counts=True)
            if (counts > 1).any():
                k = int(uniq[counts > 1][0])
                v.add("requests", FAIL, "each sequence number requested once",
                      f"seq {k} requested {int(counts[uniq == k][0])} times",
                      tuple(int(x) for x in frame[rq][seqs == k]))
            else:
                span = int(uniq.max() - uniq.min() + 1) if len(uniq) else 0
                gaps = span - len(uniq)
                v.add("requests", PASS if gaps == 0 else CANNOT_TELL,
                      "consecutive sequence numbers", f"{len(uniq)} requests"
                      + (f", {gaps} sequence number(s) not captured" if gaps else ""))
            rseq = seq[rp].astype(np.int64)
            unanswered, late = [], []
            for i in rq:
                hits = rp[(rseq == int(seq[i])) & (t[rp] >= t[i])]
                if len(hits):
                    continue
                answered_later = bool((t[rp] > t[i]).any())
                near_end = last_t - int(t[i]) < PING_LATE_S * 1e9
                (late if near_end and not answered_later else unanswered).append(i)
            if unanswered:
                v.add("replies", FAIL, "a reply to every request",
                      f"{len(unanswered)} unanswered: seq "
                      f"{_ranges([int(seq[i]) for i in unanswered])}",
                      tuple(int(frame[i]) for i in unanswered[:10]))
            elif late:
                v.add("replies", CANNOT_TELL, "a reply to every request",
                      f"{len(late)} request(s) in the capture's last second without a reply",
                      tuple(int(frame[i]) for i in late))
            else:
                v.add("replies", PASS, "a reply to every request", f"{len(rq)} answered")
            ru, rc = np.unique(rseq, return_counts=True)
            dups = ru[rc > 1]
            if len(dups):
                k = int(dups[0])
                v.add("duplicates", FAIL, "one reply per request",
                      f"{len(dups)} duplicated: seq {k} answered {int(rc[ru == k][0])} times",
                      tuple(int(x) for x in frame[rp][rseq == k]))
            else:
                stray = np.setdiff1d(ru, uniq)
                v.add("duplicates", PASS if not len(stray) else CANNOT_TELL,
                      "one reply per request", "none" if not len(stray) else
                      f"replies to requests not captured: seq {_ranges(stray.tolist())}")
            self.out.append(v)


# -- small helpers ---------------------------------------------------------------------------

def _stream_bytes(results: dict | None) -> list[int]:
    return [int(x["bytes"]) for x in (results or {}).get("streams", [])]


def _parallel(v: StreamVerdict, want: int, proto: str, found: list[int]) -> None:
    v.add("parallel", PASS if len(found) == want else FAIL,
          f"{want} data stream(s) (the parameters' parallel)",
          f"{len(found)}: {proto} streams {_ranges(found)}")


def _endpoint(addr: str, port) -> str:
    return f"[{addr}]:{int(port)}" if ":" in addr else f"{addr}:{int(port)}"


def _text(b: bytes | None) -> str:
    return "(nothing)" if b is None else repr(bytes(b))[1:]


def _state(x: int) -> str:
    return IPERF3_STATES.get(x, f"unknown state {x}")


def _ranges(values) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    values = sorted(set(int(v) for v in values))
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out) or "none"


def _json_message(data: bytes, at: int) -> tuple[dict, int]:
    """A 4-byte big-endian length and that much JSON at ``at``; (object, position after)."""
    if at + 4 > len(data):
        raise ValueError(f"a 4-byte JSON length at offset {at}, found {len(data) - at} bytes")
    n = int.from_bytes(data[at:at + 4], "big")
    body = data[at + 4:at + 4 + n]
    if len(body) != n:
        raise ValueError(f"{n} bytes of JSON at offset {at + 4}, found {len(body)}")
    try:
        return json.loads(body), at + 4 + n
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"JSON at offset {at + 4}: {e}") from None


def _payload(cap: Capture, buf: np.ndarray, rows: np.ndarray, n: int) -> list[bytes] | None:
    """The first n payload bytes of each row (one gather from the mapped file), or None when
    any row has fewer captured."""
    if not len(rows):
        return None
    off = cap.column("payload_offset")[rows]
    have = cap.column("payload_cap_len")[rows]
    if (off < 0).any() or (have < n).any():
        return None
    return [bytes(row) for row in buf[off[:, None] + np.arange(n)]]
