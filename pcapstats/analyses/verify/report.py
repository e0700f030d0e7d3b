"""The simpleperf client's printed report (``--client-output``), checked against the wire.

The report is the client's ``ID  Interval  Transfer  Bandwidth`` table (pcapstats.tools.
simpleperf's docstring has the format; course tools print the same columns with their own
spacing)::

    ID                     Interval        Transfer        Bandwidth
    10.0.0.1:41234         0.0 - 1.0       1.25 MB         10.00 Mbps     (-i 1: a row each)
    10.0.0.1:41234         0.0 - 10.0      12 MB           9.60 Mbps      (the summary row)

A row is an ID (the client's ``ip:port``, ``[ip]:port`` for IPv6), an interval ``A - B`` in
seconds (``s`` / ``sec`` after it allowed), a Transfer in B, KB or MB (decimal: 1 KB = 1000 B;
GB too) and a Bandwidth in bps, Kbps, Mbps or Gbps (10**6 bit/s a Mbps).  Anything else in the
file (banners, ``Client ... connected``, separators) is skipped; rows under a ``Received`` /
``Rate`` header are a server's and are skipped too.  A file with no client row is an error.
Per ID the summary row is the last one that starts at 0 and ends last (within 0.05 s); the
others are interval rows (``-i``).

A printed value is right when the true value rounds to it: a value printed with d decimals is
right within half a unit of its last digit (``12.34 MB``: 12 335 000-12 345 000 bytes, ``12
MB``: 11.5-12.5 MB, ``10.0`` s: 9.95-10.05 s; an interval's start of 0 is exact).  The
checks, each on the simpleperf connection whose client is the row's ID, with the connection's
first data frame and BYE frame as evidence:

- **report_row**: a row for every connection of a client (address) the report speaks of, and
  a summary among each connection's rows (rows of IDs that are no connection of the capture
  are said in a note: the report may be another run's);
- **report_transfer**: the summary's Transfer is the message bytes on the wire (before BYE);
- **report_bandwidth**: the summary's Bandwidth is those bytes x 8 over the printed interval
  (its rounding included): the interval is the client's own clock, so it is taken as printed;
- **report_intervals** (with ``-i``): the interval rows' Transfers add up to the message bytes
  on the wire, and each row's Bandwidth is its Transfer x 8 over its interval.  (The bytes of
  one interval are what the client handed to its socket then, not what the wire carried then,
  so they are not compared with the wire one by one.)
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from ...paths import read_side_file
from .checks import CANNOT_TELL, FAIL, PASS, Context, StreamVerdict

BYTE_UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3}
BIT_PREFIXES = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
_NUM = r"\d+(?:\.\d+)?"
ROW = re.compile(rf"""^\s*(?P<id>\[[0-9A-Fa-f:.]+\]:\d+|[0-9A-Za-z_.\-]+:\d+)\s+
    (?P<start>{_NUM})\s*-\s*(?P<end>{_NUM})(?:\s*(?:s|secs?)\b)?\s+
    (?P<transfer>{_NUM})\s*(?P<tunit>[KMGkmg]?B)\s+
    (?P<bandwidth>{_NUM})\s*(?P<bunit>[KMGkmg]?bps)\s*$""", re.X)
_HEADER = re.compile(r"\bID\b.*\bInterval\b.*\b(Transfer|Received)\b", re.I)
EXAMPLE = "10.0.0.1:41234  0.0 - 10.0  12.00 MB  9.60 Mbps"
SUMMARY_SLACK_S = 0.05       # an interval row may end this much after the summary (rounding)


@dataclass(frozen=True)
class Printed:
    """A number as printed: its text, its value and half a unit of its last digit, both in
    base units (bytes, bit/s, seconds)."""
    text: str
    value: float
    half: float

    @classmethod
    def of(cls, number: str, unit: str = "", scale: float = 1.0) -> "Printed":
        decimals = len(number.partition(".")[2])
        return cls(f"{number} {unit}".strip(), float(number) * scale,
                   0.5 * 10.0**-decimals * scale)

    @property
    def lo(self) -> float:
        return self.value - self.half

    @property
    def hi(self) -> float:
        return self.value + self.half


@dataclass(frozen=True)
class Row:
    line: int            # 1-based line number in the file
    ident: str
    start: Printed       # seconds
    end: Printed
    transfer: Printed    # bytes
    bandwidth: Printed   # bit/s

    @property
    def interval(self) -> str:
        return f"{self.start.text} - {self.end.text}"

    def span(self) -> tuple[float, float]:
        """The interval's length, lowest and highest the printed numbers allow (a start of 0
        is exact: the client's clock starts there)."""
        width = self.end.value - self.start.value
        slack = (self.start.half if self.start.value else 0.0) + self.end.half
        return max(width - slack, 0.0), width + slack


@dataclass
class ClientOutput:
    """The parsed report: the client's rows, in file order."""
    path: str
    rows: list[Row]

    def by_id(self) -> dict[str, list[Row]]:
        out: dict[str, list[Row]] = {}
        for row in self.rows:
            out.setdefault(row.ident, []).append(row)
        return out


def parse_client_output(source) -> ClientOutput:
    """Read a client's printed report (a path, or a ClientOutput already read); UsageError,
    one line, when the file cannot be read or holds no such table."""
    if isinstance(source, ClientOutput):
        return source
    path = os.fspath(source)
    lines = read_side_file(path, "client output", strict=False).splitlines()
    rows, server_rows, server_table = [], 0, False
    for n, line in enumerate(lines, 1):
        head = _HEADER.search(line)
        if head:
            server_table = head.group(1).lower() == "received"
            continue
        m = ROW.match(line)
        if not m:
            continue
        if server_table:
            server_rows += 1
            continue
        tunit = m["tunit"].upper()
        rows.append(Row(n, m["id"], Printed.of(m["start"]), Printed.of(m["end"]),
                        Printed.of(m["transfer"], tunit, BYTE_UNITS[tunit]),
                        Printed.of(m["bandwidth"], m["bunit"],
                                   BIT_PREFIXES[m["bunit"][:-3].upper()])))
    if not rows:
        what = (f"a simpleperf server's table ({server_rows} rows under 'Received  Rate'), not "
                "the client's" if server_rows else "no simpleperf client table in it (rows "
                f"'ID  Interval  Transfer  Bandwidth', e.g. '{EXAMPLE}')")
        raise UsageError(what, path=path, hint="give the file the client's output was saved "
                         "in (simpleperf -c ... > client.txt)")
    return ClientOutput(path, rows)


def split(rows: list[Row]) -> tuple[Row | None, list[Row]]:
    """(the summary row, the interval rows) of one ID: the summary is the last row starting
    at 0 whose end is the latest (within rounding); None when no row spans the others."""
    latest = max(r.end.value for r in rows)
    spanning = [r for r in rows if r.start.value == 0
                and r.end.value >= latest - SUMMARY_SLACK_S]
    if not spanning:
        return None, rows
    summary = spanning[-1]
    return summary, [r for r in rows if r is not summary]


def matched(verdicts: list[StreamVerdict], by_id: dict) -> dict[int, str]:
    """Which printed ID speaks of which connection (by stream): its client's ip:port; and
    when the report has one ID that is no connection's and the capture one connection, that
    ID (a client that prints its server's address, or a name, as its ID: with one connection
    nothing else can be meant)."""
    out = {v.stream: v.client for v in verdicts if v.client in by_id}
    stray = [ident for ident in by_id if ident not in {v.client for v in verdicts}]
    if not out and len(verdicts) == 1 and len(stray) == 1:
        out[verdicts[0].stream] = stray[0]
    return out


def check(ctx: Context, verdicts: list[StreamVerdict], output: ClientOutput) -> None:
    """The report checks on the simpleperf connections (the module docstring).  A connection
    no row speaks of fails report_row when the report speaks of its client host or of no
    connection at all (never a pass by default); the rows of other IDs are said in a note."""
    by_id = output.by_id()
    hosts = {ident.rsplit(":", 1)[0] for ident in by_id}
    name = Path(output.path).name
    ids = matched(verdicts, by_id)
    for v in verdicts:
        ident = ids.get(v.stream)
        rows = by_id.get(ident) if ident is not None else None
        if rows is None:
            if v.client.rsplit(":", 1)[0] in hosts or not ids:
                v.add("report_row", FAIL, f"a row for connection {v.client} in {name}",
                      f"none; its rows are for {', '.join(sorted(by_id))}")
            continue
        if ident != v.client:
            v.evidence.append(f"{name} speaks of {ident}, not the client's {v.client}: with "
                              "one connection in the capture, its rows are taken as this "
                              "connection's")
        summary, intervals = split(rows)
        where = f"{name} line"
        n = v.facts.get("message_bytes")
        frames = tuple(f for f in (v.facts.get("first_frame"), v.facts.get("bye_frame")) if f)
        wire = (f"the wire: {n} bytes" + (f" (frames {frames[0]}-{frames[-1]})" if frames
                                           else "")) if n is not None else ""
        if summary is None:
            v.add("report_row", FAIL, "a summary row (starting at 0, spanning the interval "
                  "rows)", f"{len(rows)} interval rows, {where}s "
                  f"{rows[0].line}-{rows[-1].line}, none spanning the others")
        else:
            _transfer(v, summary, n, wire, frames, where)
            _bandwidth(v, summary, n, frames, where)
        if intervals:
            _intervals(v, intervals, n, wire, frames, where)


def _transfer(v, row: Row, n, wire, frames, where) -> None:
    expected = "Transfer = the message bytes on the wire, within the printed rounding"
    t = row.transfer
    printed = f"'{t.text}' ({where} {row.line}) = {_bytes(t.lo, t.hi)} bytes"
    if n is None:
        v.add("report_transfer", CANNOT_TELL, expected, printed + "; the capture does not "
              "show the connection's start and end", frames)
        return
    ok = _within(n, t.lo, t.hi)
    hint = "" if ok else _binary_hint(n, t)
    v.add("report_transfer", PASS if ok else FAIL, expected, f"{printed}; {wire}{hint}",
          frames)


def _bandwidth(v, row: Row, n, frames, where) -> None:
    expected = ("Bandwidth = the wire's message bytes x 8 / the printed interval, within the "
                "printed roundings")
    b = row.bandwidth
    printed = f"'{b.text}' over {row.interval} s ({where} {row.line})"
    if n is None:
        v.add("report_bandwidth", CANNOT_TELL, expected, printed + "; the message bytes are "
              "not known", frames)
        return
    lo_s, hi_s = row.span()
    rate_lo = n * 8 / hi_s if hi_s > 0 else math.inf
    rate_hi = n * 8 / lo_s if lo_s > 0 else math.inf
    ok = rate_lo <= b.hi * (1 + 1e-9) and b.lo <= rate_hi * (1 + 1e-9)
    v.add("report_bandwidth", PASS if ok else FAIL, expected,
          f"{printed}; the wire's {n} bytes over {lo_s:.3f}-{hi_s:.3f} s: "
          f"{_mbps(rate_lo)}-{_mbps(rate_hi)} Mbps", frames)


def _intervals(v, rows: list[Row], n, wire, frames, where) -> None:
    expected = ("interval rows: Transfers adding up to the message bytes on the wire, each "
                "Bandwidth = its Transfer x 8 / its interval")
    for row in rows:
        lo_s, hi_s = row.span()
        rate_lo = row.transfer.lo * 8 / hi_s if hi_s > 0 else math.inf
        rate_hi = row.transfer.hi * 8 / lo_s if lo_s > 0 else math.inf
        b = row.bandwidth
        if not (rate_lo <= b.hi * (1 + 1e-9) and b.lo <= rate_hi * (1 + 1e-9)):
            v.add("report_intervals", FAIL, expected, f"'{b.text}' over {row.interval} s "
                  f"({where} {row.line}) with '{row.transfer.text}': {_mbps(rate_lo)}-"
                  f"{_mbps(rate_hi)} Mbps", frames)
            return
    lo = sum(r.transfer.lo for r in rows)
    hi = sum(r.transfer.hi for r in rows)
    summed = (f"{len(rows)} rows ({where}s {rows[0].line}-{rows[-1].line}) adding up to "
              f"{_bytes(lo, hi)} bytes")
    if n is None:
        v.add("report_intervals", CANNOT_TELL, expected, summed + "; the message bytes on "
              "the wire are not known", frames)
        return
    v.add("report_intervals", PASS if _within(n, lo, hi) else FAIL, expected,
          f"{summed}; {wire}", frames)


def _within(n: float, lo: float, hi: float) -> bool:
    eps = 1e-9 * max(abs(lo), abs(hi), 1.0)
    return lo - eps <= n <= hi + eps


def _binary_hint(n: int, t: Printed) -> str:
    """Say so when the printed Transfer is right in units of 1024 (the spec's are 1000)."""
    for unit, k in (("KB", 1), ("MB", 2), ("GB", 3)):
        if t.text.endswith(" " + unit):
            scale = 1024**k / 1000**k
            if _within(n, t.lo * scale, t.hi * scale):
                return (f"; it is right in units of 1024 (1 {unit} = {1024**k} B), the spec's "
                        f"are decimal (1 {unit} = {1000**k} B)")
    return ""


def _bytes(lo: float, hi: float) -> str:
    return f"{math.ceil(lo - 1e-9)}-{math.floor(hi + 1e-9)}"


def _mbps(bps: float) -> str:
    return "inf" if math.isinf(bps) else f"{bps / 1e6:.3f}"
