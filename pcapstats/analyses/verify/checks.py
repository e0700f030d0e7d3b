"""What the app-protocol checks share: verdicts, a stream's checks, what was asked, and the
helpers that read a TCP stream's bytes and packets (:class:`Context`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ... import schema
from ...addresses import endpoint
from ...capture import Capture
from ...units import parse_simpleperf_size
from ..reassembly import HOLE_REASONS, Reassembly

PASS, FAIL, CANNOT_TELL = "pass", "fail", "cannot tell"
RANK = {PASS: 0, CANNOT_TELL: 1, FAIL: 2}


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
    facts: dict = field(default_factory=dict)   # numbers later checks read (not shown)

    @property
    def verdict(self) -> str:
        return max((c.verdict for c in self.checks), key=RANK.__getitem__, default=CANNOT_TELL)

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
class Expected:
    """What was asked of the tools, when known (from a lab sidecar, or given by hand)."""
    tool: str | None = None
    time_s: float | None = None        # simpleperf -t
    num_bytes: int | None = None       # simpleperf -n, per connection
    parallel: int | None = None        # per host pair
    streams: dict[int, str] = field(default_factory=dict)   # tcp.stream -> tool, this capture
    message_bytes: int | None = None   # simpleperf's message size; None: 1000, the spec's

    def over(self, base: "Expected") -> "Expected":
        """This (given by hand) over ``base`` (the sidecar's): what this one sets wins; -t and
        -n are one choice, so setting either replaces both."""
        mode = (self if self.time_s is not None or self.num_bytes is not None else base)
        return Expected(tool=self.tool or base.tool, time_s=mode.time_s,
                        num_bytes=mode.num_bytes,
                        parallel=self.parallel if self.parallel is not None else base.parallel,
                        streams={**base.streams, **self.streams},
                        message_bytes=self.message_bytes if self.message_bytes is not None
                        else base.message_bytes)

    @classmethod
    def from_sidecar(cls, doc: dict, capture: str | os.PathLike) -> "Expected":
        scen = doc.get("scenario") or {}
        tool = scen.get("tool")
        num = None
        if scen.get("bytes") not in (None, "", 0):   # simpleperf -n, as the lab passed it on
            num = (scen["bytes"] if isinstance(scen["bytes"], int)
                   else parse_simpleperf_size(str(scen["bytes"])))
        name = Path(capture).name
        streams = {}
        for flow in doc.get("flows") or []:
            sid = (flow.get("streams") or {}).get(name)
            if sid is not None and flow.get("proto") == "tcp":
                streams[int(sid)] = flow.get("tool") or tool
        return cls(tool=tool, time_s=None if num else scen.get("duration_s"), num_bytes=num,
                   parallel=scen.get("parallel"), streams=streams)


class Context:
    """One capture being verified: its reassembled TCP streams (``r``), the packets besides
    them that the checks read (``cap``: UDP, ICMP echoes and the TCP packets that carry an MSS
    option, or the whole table), what was asked, and the verdicts and notes found so far."""

    def __init__(self, cap: Capture, r: Reassembly, expected: Expected):
        self.cap, self.r, self.exp = cap, r, expected
        self.out: list[StreamVerdict] = []
        self.notes: list[str] = []
        self.pieces = cap.clock.pieces()      # the capture's timeline cut at its clock's breaks
        self.spanning = 0                     # durations measured across a break, said

    def joined(self, t_ns: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """Times on the timeline joined across the clock's breaks, for durations (the times
        themselves when it has none)."""
        return self.pieces.monotonic(t_ns, frames)

    def endpoints(self, s: int, client_dir: int) -> tuple[str, str]:
        src, dst, sp, dp = self.r.first_packet(s)
        a, b = endpoint(src, sp), endpoint(dst, dp)
        return (a, b) if client_dir == 0 else (b, a)

    def client_dir(self, s: int) -> int:
        """The direction that sent a SYN without ACK; direction 0 (the first packet's source)
        when that is not in the capture."""
        def opens(d):
            flags = self.r.syn_flags(s, d)
            return bool(flags and not flags & 0x010)
        return 1 if opens(1) and not opens(0) else 0

    def head(self, s: int, d: int, n: int) -> bytes | None:
        """The first n bytes (fewer if the direction has fewer), or None if not captured."""
        f = self.r.flow(s, d)
        if not f or not f["start_seen"] and not f["captured_bytes"]:
            return None
        n = min(n, f["seen_end"])
        if self.r.holes_in(s, d, 0, n)["start"].size:
            return None
        return self.r.read(s, d, 0, n) if n else b""

    def excerpt(self, s: int, d: int, start: int, n: int = 24) -> str:
        """Up to n captured bytes from start, for evidence (repr of the bytes)."""
        got = b""
        for off, chunk in self.r.chunks(s, d, start, start + n):
            if off != start + len(got):
                break
            got += bytes(chunk)
        return repr(got)[1:] if got else "(not captured)"

    def ports(self, s: int) -> set[int]:
        first = self.r.first_packet(s)
        return set() if first is None else {first[2], first[3]}

    def server_port(self, s: int) -> int | None:
        """The port of the side that did not open stream s (see client_dir)."""
        first = self.r.first_packet(s)
        if first is None:
            return None
        return first[3] if self.client_dir(s) == 0 else first[2]

    def tail(self, s, d, end, n) -> bytes | None:
        if end < n or self.r.holes_in(s, d, end - n, end)["start"].size:
            return None
        f = self.r.flow(s, d)
        if f is None or f["seen_end"] < end:
            return None
        return self.r.read(s, d, end - n, n)

    def content(self, v, s, d, start, end, allowed, name, expected) -> None:
        r = self.r
        count, lowest = r.scan_for_other_than(s, d, start, end, allowed)
        if count:
            frame = r.first_frame_carrying(s, d, lowest)
            v.add(name, FAIL, expected, f"{self.excerpt(s, d, lowest)!s} at offset {lowest} "
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

    def mss(self, s, d) -> int | None:
        """The largest payload direction d may send: the MSS its peer announced (the first
        MSS option from an address other than d's), less a timestamp option's 12 bytes."""
        cap = self.cap
        rows = np.flatnonzero((cap.column("tcp_stream") == s) & cap.layer(schema.TCP)
                              & cap.present("tcp_option_mss"))
        if not len(rows):
            return None
        first = self.r.first_packet(s)
        own = None if first is None or self.r.flow(s, d) is None else first[d]
        peer_rows = rows[cap.addresses[cap.column("ip_src")[rows]] != own]
        pick = peer_rows if len(peer_rows) else rows
        mss = int(cap.column("tcp_option_mss")[pick[0]])
        ts = cap.present("tcp_option_tsval")[pick[0]]
        return mss - (12 if ts else 0)


def text(b: bytes | None) -> str:
    return "(nothing)" if b is None else repr(bytes(b))[1:]


def json_message(data: bytes, at: int) -> tuple[dict, int]:
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


def payload(cap: Capture, buf: np.ndarray, rows: np.ndarray, n: int) -> list[bytes] | None:
    """The first n payload bytes of each row (one gather from the mapped file), or None when
    any row has fewer captured."""
    if not len(rows):
        return None
    off = cap.column("payload_offset")[rows]
    have = cap.column("payload_cap_len")[rows]
    if (off < 0).any() or (have < n).any():
        return None
    return [bytes(row) for row in buf[off[:, None] + np.arange(n)]]
