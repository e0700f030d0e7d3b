"""I/O graph: packets, bytes or bits per interval, as Wireshark's Statistics > I/O Graphs and
``tshark -q -z io,stat,<interval>``, with the averages people need beside it.

``iograph(cap, ...)`` returns an :class:`IOGraph` with three tables (pandas DataFrames):

- ``series``: one row per interval and group: the I/O graph itself;
- ``summary``: one row per group: averages (each over a named span), the peak interval, the
  number of transfers and their mean rate;
- ``transfers``: one row per transfer (a run of a group's packets without an idle gap longer
  than ``gap`` seconds): ten file transfers in one capture give ten rows.

**Intervals, exactly as tshark 4.0's io,stat** (ui/cli/tap-iostat.c; tests/test_iograph.py
checks every bucket against tshark on real captures):

- time zero is the capture's first packet (in file order: ``frame.time_relative`` = 0), also
  when a filter selects later packets; with several captures, each has its own time zero;
- an interval given in seconds becomes a whole number of microseconds, rounded half up as
  tshark does (``int(interval * 1e6 + 0.5)``; 1 us is the finest, 0.0000004 is refused); the
  result's ``interval_ns`` is that number x 1000;
- a packet's time relative to time zero is rounded to the nearest microsecond (half up), as
  tshark does, and its interval is ``k = floor(rel_us / interval_us)``.  In exact integer
  nanoseconds: ``k = (rel_ns + 500) // interval_ns``.  On microsecond captures this is plain
  ``floor(rel / interval)``; on nanosecond captures a packet less than 0.5 us before an edge
  goes to the next interval, as in tshark;
- ``bytes`` are frame bytes on the wire (``frame_len``, tshark's ``pkt_len``), also when the
  snaplen cut the packet; ``bits`` are bytes x 8;
- values per second are ``count / interval`` for every interval, the last included (it is not
  stretched or shrunk to the capture's end).

Where tshark 4.0's printed table differs (on purpose, pcapstats keeps every packet):

- tshark prints ``ceil(duration / interval)`` rows, so when the capture's duration is a whole
  number of intervals the packets at its very last microsecond fall in a row it never prints;
  pcapstats keeps them in one more interval;
- a packet whose time goes back before the latest interval tshark has opened is counted by
  tshark in that latest interval; pcapstats counts every packet in the interval of its own time
  (one earlier than the capture's first packet gets a negative time and interval index);
- Wireshark's GUI I/O graph (4.0) offers intervals from 1 ms to 10 min, truncates times to the
  millisecond instead of rounding to the microsecond, and plots the count *per interval*
  (its "Bits" at 100 ms are bits per 100 ms); pcapstats gives per-second values, so graphs at
  different intervals share one scale.

**Filters** select what Wireshark's display filters select (AND-ed): ``proto="tcp"`` is ``tcp``,
``stream=N`` is ``tcp.stream==N`` (``udp.stream==N`` with ``proto="udp"``, either without),
``host=X`` is ``ip.addr==X || ipv6.addr==X`` and ``port=N`` is ``tcp.port==N || udp.port==N``.
As in Wireshark, an ICMP error that quotes a TCP/UDP header matches that stream, protocol and
port.  ``host`` matches the packet's own IP header only (Wireshark also matches an address of
an IP header quoted inside an ICMP error).

**Groups** (``by``): ``None`` (one group: everything selected), ``"stream"`` (one per TCP/UDP
stream, keys ``proto``, ``stream``), ``"direction"`` (``a_to_b`` / ``b_to_a`` summed over
streams) or ``"stream+direction"``.  Side A of a stream is the source of its first packet (as in
``ps.throughput``); a packet whose source address and port are side A's goes A to B, every other
packet of the stream B to A.  Grouping by stream or direction leaves out packets that belong to
no TCP/UDP stream (ARP, ICMP echo).  Several captures add a ``capture`` key (the path).

Intervals before a group's first packet and after its last are not listed (they would all be
zero); the intervals in between are, zeros included.  Column definitions: SERIES_COLUMNS,
SUMMARY_COLUMNS, TRANSFER_COLUMNS below (``{unit}`` is bits, bytes or packets).  Rates end in
``_per_sec`` (``*_s`` columns are seconds).
"""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .. import schema
from ..capture import Capture
from ..errors import UsageError

UNITS = ("bits", "bytes", "packets")
GROUPINGS = (None, "stream", "direction", "stream+direction")
DEFAULT_GAP_S = 1.0
DIRECTIONS = np.array(["a_to_b", "b_to_a"], dtype=object)
MAX_SERIES_ROWS = 50_000_000   # intervals x groups: beyond this, ask for a longer interval

SERIES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("interval", "interval index k: the interval covers [k x interval, (k+1) x interval) after "
                 "the capture's first packet (times rounded to the microsecond, as tshark)"),
    ("start_s", "start of the interval, seconds after the capture's first packet (k x interval)"),
    ("packets", "frames in the interval (tshark io,stat: Frames)"),
    ("bytes", "frame bytes on the wire in the interval (tshark io,stat: Bytes)"),
    ("{unit}_per_sec", "the interval's {unit} / interval length in seconds"),
)

SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("packets", "frames of the group"),
    ("bytes", "frame bytes on the wire of the group"),
    ("first_s", "the group's first packet, seconds after the capture's first packet"),
    ("last_s", "the group's last packet, seconds after the capture's first packet"),
    ("active_s", "last_s - first_s: the span the group was active"),
    ("capture_span_s", "the capture's first packet to its last packet (all packets, unfiltered)"),
    ("avg_capture_{unit}_per_sec",
     "{unit} / capture_span_s: Wireshark's average (idle time before, between and after the "
     "group's packets lowers it)"),
    ("avg_active_{unit}_per_sec",
     "{unit} / active_s: the average while the group was active (idle before its first and "
     "after its last packet does not count); empty when active_s is 0"),
    ("peak_{unit}_per_sec", "the largest interval's {unit} / interval length"),
    ("peak_start_s", "start of that interval (the earliest one when several tie)"),
    ("transfers", "runs of the group's packets with no idle gap longer than gap_s"),
    ("mean_transfer_{unit}_per_sec",
     "mean of the transfers' avg_{unit}_per_sec (each over its own first to last packet); "
     "transfers of one instant are left out"),
)

TRANSFER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("transfer", "0, 1, ... in time order within the group"),
    ("packets", "frames of the transfer"),
    ("bytes", "frame bytes on the wire of the transfer"),
    ("first_s", "its first packet, seconds after the capture's first packet"),
    ("last_s", "its last packet, seconds after the capture's first packet"),
    ("duration_s", "last_s - first_s"),
    ("avg_{unit}_per_sec",
     "{unit} / duration_s (over the transfer's own first to last packet); empty when "
     "duration_s is 0"),
)


def column_docs(columns, unit: str) -> list[tuple[str, str]]:
    """A column table with ``{unit}`` filled in (for help texts and notebooks)."""
    return [(name.format(unit=unit), doc.format(unit=unit)) for name, doc in columns]


@dataclass
class IOGraph:
    """The I/O graph of one or several captures; see the module docstring for every definition."""
    series: object          # pandas DataFrame: keys..., SERIES_COLUMNS
    summary: object         # pandas DataFrame: keys..., SUMMARY_COLUMNS
    transfers: object       # pandas DataFrame: keys..., TRANSFER_COLUMNS
    keys: list[str]         # group key columns, first in every table ("capture", "proto", ...)
    unit: str
    interval_ns: int
    gap_ns: int
    by: str | None
    filters: dict = field(default_factory=dict)   # what was selected (stream, proto, host, port)
    series_rows: np.ndarray | None = field(default=None, repr=False)  # series rows per summary row
    capture_rows: np.ndarray | None = field(default=None, repr=False)  # summary rows per capture

    def group_series(self) -> list:
        """Per summary row, its rows of ``series`` (a DataFrame slice), in summary order."""
        ends = np.cumsum(self.series_rows)
        return [self.series.iloc[end - n:end] for n, end in zip(self.series_rows, ends)]

    @property
    def interval_s(self) -> float:
        return self.interval_ns / 1e9

    @property
    def gap_s(self) -> float:
        return self.gap_ns / 1e9

    @property
    def value_column(self) -> str:
        """The per-second column: ``bits_per_sec``, ``bytes_per_sec`` or ``packets_per_sec``."""
        return f"{self.unit}_per_sec"

    @property
    def empty(self) -> bool:
        """Nothing matched the filters."""
        return len(self.summary) == 0

    def group_labels(self) -> list[str]:
        """One readable label per summary row ("tcp 0 a_to_b", "capture.pcap: all")."""
        return [_label(self.summary.iloc[i], self.keys) for i in range(len(self.summary))]

    def _repr_html_(self) -> str:
        return (f"<b>I/O graph</b>: {len(self.summary)} group(s), {len(self.series)} intervals of "
                f"{self.interval_s:g} s, {len(self.transfers)} transfer(s) (gap {self.gap_s:g} s); "
                f"<code>.summary</code>, <code>.series</code>, <code>.transfers</code>"
                + self.summary.to_html(index=False))


def iograph(cap, *, interval: float = 1.0, unit: str = "bits", by: str | None = None,
            stream: int | None = None, proto: str | None = None, host: str | None = None,
            port: int | None = None, gap: float = DEFAULT_GAP_S) -> IOGraph:
    """The I/O graph of a capture: a :class:`~pcapstats.Capture`, a path, or a list of either
    (then as :func:`iograph_many`).  Raises UsageError for a bad argument or an unknown stream;
    returns an empty result (``.empty``) when nothing matches the filters."""
    if isinstance(cap, (list, tuple)):
        return iograph_many(cap, interval=interval, unit=unit, by=by, stream=stream, proto=proto,
                            host=host, port=port, gap=gap)
    options = _Options.checked(interval, unit, by, stream, proto, host, port, gap)
    return _one(_as_capture(cap), options)


def iograph_many(captures, **options) -> IOGraph:
    """Several captures overlaid on relative time (each from its own first packet), with a first
    key column ``capture`` (the path).  Paths are read one at a time."""
    parts = [iograph(cap, **options) for cap in captures]
    paths = [str(cap) if isinstance(cap, (str, os.PathLike)) else cap.path for cap in captures]
    return combine(parts, paths)


def combine(parts: list[IOGraph], names: list[str]) -> IOGraph:
    """One result from the results of several captures, keyed by ``capture`` = names[i]."""
    import pandas as pd
    if not parts:
        raise UsageError("no captures given")
    first = parts[0]

    def stack(attr):
        frames = [getattr(p, attr).assign(capture=name) for p, name in zip(parts, names)]
        joined = pd.concat(frames, ignore_index=True)
        return joined[["capture"] + [c for c in joined.columns if c != "capture"]]
    return IOGraph(stack("series"), stack("summary"), stack("transfers"), ["capture"] + first.keys,
                   first.unit, first.interval_ns, first.gap_ns, first.by, first.filters,
                   np.concatenate([p.series_rows for p in parts]),
                   np.array([len(p.summary) for p in parts], dtype=np.int64))


def check_options(**options) -> None:
    """Raise UsageError for a bad option of :func:`iograph` before any capture is read."""
    _Options.checked(**{"interval": 1.0, "unit": "bits", "by": None, "stream": None, "proto": None,
                        "host": None, "port": None, "gap": DEFAULT_GAP_S, **options})


# -- options ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Options:
    interval_ns: int
    unit: str
    by: str | None
    stream: int | None
    proto: str | None
    host: str | None
    port: int | None
    gap_ns: int

    @classmethod
    def checked(cls, interval, unit, by, stream, proto, host, port, gap) -> _Options:
        return cls(interval_ns(interval), _choice("unit", unit, UNITS),
                   _choice("by", by, GROUPINGS), stream,
                   _choice("proto", proto, (None, "tcp", "udp")), _host(host), _port(port),
                   _gap_ns(gap))

    @property
    def filters(self) -> dict:
        return {k: v for k, v in (("stream", self.stream), ("proto", self.proto),
                                  ("host", self.host), ("port", self.port)) if v is not None}


def interval_ns(interval: float) -> int:
    """Seconds -> nanoseconds of a whole number of microseconds, as tshark's io,stat rounds it."""
    try:
        seconds = float(interval)
    except (TypeError, ValueError):
        raise UsageError(f"interval must be a number of seconds, got {interval!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"interval must be a positive number of seconds, got {interval}",
                         hint="for example 1, 0.1 or 0.001")
    if seconds > 1e6:
        raise UsageError(f"interval {interval} s is longer than 11 days", hint="use a shorter one")
    us = int(seconds * 1e6 + 0.5)
    if us < 1:
        raise UsageError(f"interval {interval} s is below 1 microsecond, the finest tshark and "
                         "pcapstats count in", hint="use 0.000001 or more")
    return us * 1000


def _choice(what, value, allowed):
    if value not in allowed:
        names = ", ".join(a for a in allowed if a is not None)
        raise UsageError(f"unknown {what} {value!r}", hint=f"use one of {names}")
    return value


def _host(host):
    if host is None:
        return None
    try:
        return ipaddress.ip_address(str(host).strip()).compressed
    except ValueError:
        raise UsageError(f"host {host!r} is not an IPv4 or IPv6 address",
                         hint="give an address such as 10.0.0.1 or fd00::1") from None


def _port(port):
    if port is None:
        return None
    if not (isinstance(port, (int, np.integer)) and 0 <= port <= 65535):
        raise UsageError(f"port must be a number from 0 to 65535, got {port!r}")
    return int(port)


def _gap_ns(gap) -> int:
    try:
        seconds = float(gap)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"gap must be a positive number of seconds, got {gap!r}")
    return max(1, round(min(seconds, 1e9) * 1e9))  # 30 years: no gap in any capture is longer


def _as_capture(cap) -> Capture:
    if isinstance(cap, Capture):
        return cap
    if isinstance(cap, (str, os.PathLike)):
        from ..reader import read
        return read(cap)
    raise UsageError(f"iograph needs a Capture or a path, got {type(cap).__name__}")


# -- selection and groups --------------------------------------------------------------------

_PROTO_CODE = {"tcp": 0, "udp": 1}
_PROTO_NAMES = np.array(["tcp", "udp"], dtype=object)


def _transport(cap: Capture):
    """Per packet: protocol code (0 tcp, 1 udp, -1 none), stream index, source and destination
    port; TCP/UDP headers quoted in ICMP errors count, as in Wireshark's display filters."""
    tcp, udp = cap.layer(schema.TCP), cap.layer(schema.UDP)
    code = np.where(tcp, 0, np.where(udp, 1, -1)).astype(np.int8)
    return code, cap.column("tcp_stream"), cap.column("tcp_srcport"), cap.column("tcp_dstport")


def _select(cap: Capture, o: _Options, code, stream_ids, sport, dport) -> np.ndarray:
    keep = np.ones(len(cap), bool)
    if o.proto is not None:
        keep &= code == _PROTO_CODE[o.proto]
    if o.stream is not None:
        protos = [o.proto] if o.proto else ["tcp", "udp"]
        in_stream = np.isin(code, [_PROTO_CODE[p] for p in protos]) & (stream_ids == o.stream)
        if not in_stream.any():
            have = []
            for p in protos:
                ids = stream_ids[code == _PROTO_CODE[p]]
                have.append(f"{p.upper()} streams 0-{ids.max()}" if len(ids) else
                            f"no {p.upper()} streams")
            raise UsageError(f"no {'/'.join(protos).upper()} stream {o.stream} in this capture",
                             path=cap.path, hint="it has " + ", ".join(have))
        keep &= in_stream
    if o.host is not None:
        codes = [i for i, a in enumerate(cap.addresses) if _same_address(a, o.host)]
        ip = cap.layer(schema.IP)
        keep &= ip & (np.isin(cap.column("ip_src"), codes) | np.isin(cap.column("ip_dst"), codes))
    if o.port is not None:
        keep &= (code >= 0) & ((sport == o.port) | (dport == o.port))
    return keep


def _same_address(text, wanted: str) -> bool:
    try:
        return ipaddress.ip_address(text).compressed == wanted
    except ValueError:
        return False


def _group_ids(cap: Capture, rows, by, code, stream_ids, sport):
    """(group id per selected row, key columns per group); rows outside every group dropped."""
    if by is None:
        return rows, np.zeros(len(rows), np.int64), {}
    rows = rows[code[rows] >= 0]                       # only packets of a TCP/UDP stream
    pcode, sid = code[rows].astype(np.int64), stream_ids[rows].astype(np.int64)
    skey = (pcode << 40) | sid
    keys = {}
    if "direction" in by:
        a_addr, a_port = _side_a(cap, rows, skey, sport)
        src = cap.column("ip_src")[rows]
        direction = ((src != a_addr) | (sport[rows] != a_port)).astype(np.int64)
    else:
        direction = np.zeros(len(rows), np.int64)
    if by == "direction":
        full = direction
    else:
        full = (skey << 1) | direction
    uniq, gid = np.unique(full, return_inverse=True)
    if by == "direction":
        keys["direction"] = DIRECTIONS[uniq]
    else:
        keys["proto"] = _PROTO_NAMES[uniq >> 41]
        keys["stream"] = (uniq >> 1) & ((1 << 40) - 1)
        if by == "stream+direction":
            keys["direction"] = DIRECTIONS[uniq & 1]
    return rows, gid.astype(np.int64), keys


def _side_a(cap: Capture, rows, skey, sport):
    """Per row: side A's address code and port, from the stream's first packet of its own
    (a header quoted in an ICMP error names side A only for a stream with nothing else)."""
    quoted = cap.column("l4_quoted")[rows]
    src = cap.column("ip_src")[rows]
    order = np.lexsort((np.arange(len(rows)), quoted, skey))     # own packets first, file order
    sorted_keys = skey[order]
    firsts = order[np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])]
    uniq = skey[firsts]
    at = np.searchsorted(uniq, skey)
    return src[firsts][at], sport[rows][firsts][at]


# -- the computation -------------------------------------------------------------------------

def _one(cap: Capture, o: _Options) -> IOGraph:
    code, stream_ids, sport, dport = _transport(cap)
    rows = np.flatnonzero(_select(cap, o, code, stream_ids, sport, dport))
    rows, gid, keys = _group_ids(cap, rows, o.by, code, stream_ids, sport)
    t_all = cap.column("frame_time_ns")
    t0 = cap.first_time_ns or 0
    span_ns = int(t_all.max()) - t0 if len(t_all) else 0
    t = t_all[rows].astype(np.int64)
    size = cap.column("frame_len")[rows].astype(np.int64)
    key_names = list(keys)
    if len(rows) == 0:
        return _empty(o, key_names)

    # Sort by (group, time): groups become segments, time runs forward inside each.
    order = np.lexsort((t, gid))
    g, t, size = gid[order], t[order], size[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:], len(g)]
    n_groups = len(starts)
    group_keys = keys                 # np.unique numbered the groups: segment i is group i

    bucket = (t - t0 + 500) // o.interval_ns            # tshark: rel time rounded to the us
    b_first, b_last = bucket[starts], bucket[ends - 1]
    lengths = b_last - b_first + 1
    total = int(lengths.sum())
    if total > MAX_SERIES_ROWS:
        raise UsageError(f"{total} intervals of {o.interval_ns / 1e9:g} s are too many to list",
                         path=cap.path, hint="use a longer --interval")
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    seg = np.repeat(np.arange(n_groups), ends - starts)
    cell = offsets[seg] + (bucket - b_first[seg])
    packets = np.bincount(cell, minlength=total).astype(np.int64)
    bytes_ = np.rint(np.bincount(cell, weights=size, minlength=total)).astype(np.int64)
    series_seg = np.repeat(np.arange(n_groups), lengths)
    k = b_first[series_seg] + (np.arange(total) - offsets[series_seg])
    per_s = 1e9 / o.interval_ns
    value = _in_unit(o.unit, packets, bytes_) * per_s

    series = {name: vals[series_seg] for name, vals in group_keys.items()}
    series.update({"interval": k, "start_s": k * o.interval_ns / 1e9, "packets": packets,
                   "bytes": bytes_, f"{o.unit}_per_sec": value})

    # Peaks: the largest interval of each group, the earliest on a tie.
    peak = np.maximum.reduceat(value, offsets)
    hits = np.flatnonzero(value == peak[series_seg])
    first_hit = hits[np.r_[True, series_seg[hits][1:] != series_seg[hits][:-1]]]
    peak_start_s = k[first_hit] * o.interval_ns / 1e9

    # Transfers: runs of a group's packets without a gap longer than gap_ns.
    breaks = np.r_[True, (g[1:] != g[:-1]) | (np.diff(t) > o.gap_ns)]
    tstarts = np.flatnonzero(breaks)
    tends = np.r_[tstarts[1:], len(g)]
    tseg = seg[tstarts]
    t_first, t_last = t[tstarts], t[tends - 1]
    t_packets, t_bytes = tends - tstarts, np.add.reduceat(size, tstarts)
    t_dur_ns = t_last - t_first
    t_avg = _rate(_in_unit(o.unit, t_packets, t_bytes), t_dur_ns)
    t_index = np.arange(len(tstarts)) - np.searchsorted(tseg, tseg)
    valid = ~np.isnan(t_avg)
    n_valid = np.bincount(tseg, weights=valid, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_transfer = np.bincount(tseg, weights=np.where(valid, t_avg, 0),
                                    minlength=n_groups) / n_valid
    transfers = {name: vals[tseg] for name, vals in group_keys.items()}
    transfers.update({"transfer": t_index, "packets": t_packets, "bytes": t_bytes,
                      "first_s": (t_first - t0) / 1e9, "last_s": (t_last - t0) / 1e9,
                      "duration_s": t_dur_ns / 1e9, f"avg_{o.unit}_per_sec": t_avg})

    g_packets, g_bytes = ends - starts, np.add.reduceat(size, starts)
    g_amount = _in_unit(o.unit, g_packets, g_bytes)
    first_ns, last_ns = t[starts], t[ends - 1]
    u = o.unit
    summary = dict(group_keys)
    summary.update({
        "packets": g_packets, "bytes": g_bytes,
        "first_s": (first_ns - t0) / 1e9, "last_s": (last_ns - t0) / 1e9,
        "active_s": (last_ns - first_ns) / 1e9, "capture_span_s": np.full(n_groups, span_ns / 1e9),
        f"avg_capture_{u}_per_sec": _rate(g_amount, np.full(n_groups, span_ns)),
        f"avg_active_{u}_per_sec": _rate(g_amount, last_ns - first_ns),
        f"peak_{u}_per_sec": peak, "peak_start_s": peak_start_s,
        "transfers": np.bincount(tseg, minlength=n_groups).astype(np.int64),
        f"mean_transfer_{u}_per_sec": mean_transfer,
    })
    return _result(o, key_names, series, summary, transfers, lengths)


def _in_unit(unit: str, packets, bytes_) -> np.ndarray:
    if unit == "packets":
        return packets.astype(np.float64)
    return bytes_ * (8.0 if unit == "bits" else 1.0)


def _rate(amount, span_ns) -> np.ndarray:
    """amount per second over span_ns; NaN where the span is 0."""
    span = np.asarray(span_ns, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(span > 0, amount * 1e9 / span, np.nan)


def _result(o: _Options, key_names, series, summary, transfers, series_rows) -> IOGraph:
    import pandas as pd
    return IOGraph(pd.DataFrame(series), pd.DataFrame(summary), pd.DataFrame(transfers),
                   key_names, o.unit, o.interval_ns, o.gap_ns, o.by, o.filters,
                   np.asarray(series_rows, dtype=np.int64))


def _empty(o: _Options, key_names) -> IOGraph:
    def table(columns):
        names = key_names + [n.format(unit=o.unit) for n, _ in columns]
        return {n: np.zeros(0, object if n in ("proto", "direction") else
                            np.float64 if n.endswith(("_s", "_per_sec")) else np.int64)
                for n in names}
    return _result(o, key_names, table(SERIES_COLUMNS), table(SUMMARY_COLUMNS),
                   table(TRANSFER_COLUMNS), [])


def _label(row, keys) -> str:
    parts = []
    for k in keys:
        v = row[k]
        parts.append(os.path.basename(str(v)) + ":" if k == "capture" else
                     "A→B" if v == "a_to_b" else "B→A" if v == "b_to_a" else str(v))
    text = " ".join(parts)
    if not keys or keys == ["capture"]:
        text = (text + " all packets").strip()
    return text
