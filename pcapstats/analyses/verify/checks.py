"""What the app-protocol checks share: verdicts, a stream's checks, what was asked, and the
helpers that read a TCP stream's bytes and packets (:class:`Context`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ... import schema
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
    """One capture being verified: its packets, its reassembled TCP streams, what was asked,
    and the verdicts and notes found so far."""

    def __init__(self, cap: Capture, r: Reassembly, expected: Expected):
        self.cap, self.r, self.exp = cap, r, expected
        self.out: list[StreamVerdict] = []
        self.notes: list[str] = []
        self.time = cap.column("frame_time_ns")

    def t(self, frame: int) -> float:
        """Seconds since the epoch of a frame (1-based)."""
        return int(self.time[frame - 1]) / 1e9

    def endpoints(self, s: int, client_dir: int) -> tuple[str, str]:
        row = int(np.flatnonzero(self.rows_of(s))[0])
        src = self.cap.addresses[self.cap.column("ip_src")[row]]
        dst = self.cap.addresses[self.cap.column("ip_dst")[row]]
        sp, dp = self.cap.column("tcp_srcport")[row], self.cap.column("tcp_dstport")[row]
        a, b = endpoint(src, sp), endpoint(dst, dp)
        return (a, b) if client_dir == 0 else (b, a)

    def client_dir(self, s: int) -> int:
        """The direction that sent a SYN without ACK; direction 0 (the first packet's source)
        when that is not in the capture."""
        def opens(d):
            f = self.r.flow(s, d)
            return bool(f and f["syn_frame"]
                        and not self.cap.column("tcp_flags")[f["syn_frame"] - 1] & 0x010)
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
        rows = np.flatnonzero(self.rows_of(s))
        return {int(self.cap.column("tcp_srcport")[rows[0]]),
                int(self.cap.column("tcp_dstport")[rows[0]])} if len(rows) else set()

    def server_port(self, s: int) -> int | None:
        """The port of the side that did not open stream s (see client_dir)."""
        rows = np.flatnonzero(self.rows_of(s))
        if not len(rows):
            return None
        which = "tcp_dstport" if self.client_dir(s) == 0 else "tcp_srcport"
        return int(self.cap.column(which)[rows[0]])

    def rows_of(self, s: int) -> np.ndarray:
        return (self.cap.column("tcp_stream") == s) & self.cap.layer(schema.TCP)

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


def endpoint(addr: str, port) -> str:
    return f"[{addr}]:{int(port)}" if ":" in addr else f"{addr}:{int(port)}"


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
