"""I/O graph: packets, bytes or bits per interval, as Wireshark's Statistics > I/O Graphs and
``tshark -q -z io,stat,<interval>``, with the averages people need beside it.

``iograph(cap, ...)`` returns an :class:`IOGraph` result with three tables:

- ``series``: one row per interval and group: the I/O graph itself;
- ``summary``: one row per group: averages (each over a named span), the peak interval, the
  number of transfers and their mean rate;
- ``transfers``: one row per transfer (a run of a group's packets without an idle gap longer
  than ``gap`` seconds): ten file transfers in one capture give ten rows.

**Intervals, exactly as tshark 4.0's io,stat** (ui/cli/tap-iostat.c; tests/analyses/test_iograph.py
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
streams) or ``"stream+direction"``.  A packet's direction is the packet table's (side A of a
stream is the source of its first packet, as in ``ps.throughput``; see pcapstats.streams).  Grouping by stream or direction leaves out packets that belong to
no TCP/UDP stream (ARP, ICMP echo).  Several captures add a ``capture`` key (the path).

Intervals before a group's first packet and after its last are not listed (they would all be
zero); the intervals in between are, zeros included -- unless there would be more than
``max(DENSE_ROWS, DENSE_PER_PACKET x packets)`` of them (a clock that jumped days ahead, or a
tiny interval over a long idle capture): then only the intervals with packets are listed, each
run of empty ones by its first (a zero row, so a step plot still drops to zero), and a note
says how many were left out.  Nothing is allocated in proportion to the time span.  Column definitions: ``pcapstats
columns iograph``.  The rate columns are named by the unit: ``bps`` (bits/s), ``bytes_per_s``
or ``packets_per_s``.
"""

from __future__ import annotations

import ipaddress
import math
import warnings
from dataclasses import dataclass

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import FILE_FACTS, Capture, Needs
from ..errors import Note, UsageError
from ..ingest import Kept, read_kept
from ..plots.iograph import iograph_figure
from ..render import Shown
from ..results import Result
from ..schema import Column, TableSpec
from ..reader import as_capture
from ..units import interval_ns
from ..streams import DIRECTIONS, PROTOS, SummaryKeeper, stream_names
from .throughput import PEAK_BELOW

UNITS = ("bits", "bytes", "packets")
RATE_NAMES = {"bits": "bps", "bytes": "bytes_per_s", "packets": "packets_per_s"}
RATE_UNITS = {"bits": "bit/s", "bytes": "bytes/s", "packets": "packets/s"}
GROUPINGS = (None, "stream", "direction", "stream+direction")
DEFAULT_GAP_S = 1.0
DENSE_ROWS, DENSE_PER_PACKET = 1_000_000, 4   # past both, empty intervals are not listed

_C = Column
KEY_COLUMNS = {
    "proto": _C("proto", "str", "the group's transport protocol (by stream)", values=PROTOS),
    "stream": schema.STREAM_COLUMN.but(note="by stream"),
    "direction": schema.DIRECTION_COLUMN.but(note="by direction"),
}


GROUP_KEYS = {None: [], "direction": ["direction"], "stream": ["proto", "stream"],
              "stream+direction": ["proto", "stream", "direction"]}   # by -> _key_columns' keys


def _specs(keys: list[str], unit: str) -> tuple[TableSpec, ...]:
    """The three tables for a grouping and a unit; ``{rate}`` in a name is the rate column's
    name for the unit (``bps``, ``bytes_per_s``, ``packets_per_s``)."""
    rate, per_s = RATE_NAMES[unit], RATE_UNITS[unit]

    def column(name, dtype, doc, unit_, optional):
        """A column; a bit/s one that is a catalogue metric is declared as that metric (its
        bytes/s and packets/s twins are headed as it is)."""
        metric = name.format(rate="bps")
        if unit == "bits" and catalogue.heading(metric):
            return catalogue.column(metric, doc=f"here {doc.format(unit=unit)}",
                                    optional=optional)
        return _C(name.format(rate=rate), dtype, doc.format(unit=unit),
                  unit_ and unit_.format(r=per_s), optional=optional,
                  heading=catalogue.heading(metric))

    def cols(*defs):
        return (*(KEY_COLUMNS[k] for k in keys), *(column(*d) for d in defs))
    summary = cols(
        ("packets", "int64", "frames of the group", "packets", False),
        ("bytes", "int64", "frame bytes on the wire of the group", "bytes", False),
        ("first_s", "float64", "the group's first packet, seconds after the capture's first "
         "packet", "s", False),
        ("last_s", "float64", "the group's last packet, seconds after the capture's first packet",
         "s", False),
        ("active_s", "float64", "last_s - first_s: the span the group was active", "s", False),
        ("capture_span_s", "float64", "the capture's first packet to its last packet (all "
         "packets, unfiltered)", "s", False),
        ("avg_capture_{rate}", "float64", "{unit} / capture_span_s: Wireshark's average (idle "
         "time before, between and after the group's packets lowers it)", "{r}", True),
        ("avg_active_{rate}", "float64", "{unit} / active_s: the average while the group was "
         "active (idle before its first and after its last packet does not count); empty when "
         "active_s is 0", "{r}", True),
        ("peak_{rate}", "float64", "the largest interval's {unit} / interval length", "{r}", False),
        ("peak_start_s", "float64", "start of that interval (the earliest one when several tie)",
         "s", False),
        ("transfers", "int64", "runs of the group's packets with no idle gap longer than gap_s "
         "that last longer than an instant (a lone packet, say an ARP or a router "
         "solicitation, is a row of the transfers table but not a transfer here)", None, False),
        ("avg_transfer_{rate}", "float64", "the rate while transferring: the transfers' "
         "{unit} / the sum of their durations (a rate weighted by how long each lasted, so a "
         "two-packet keep-alive barely counts); transfers of one instant are left out", "{r}",
         True),
    )
    series = cols(
        ("interval", "int64", "interval index k: the interval covers [k x interval, (k+1) x "
         "interval) after the capture's first packet (times rounded to the microsecond, as "
         "tshark)", None, False),
        ("start_s", "float64", "start of the interval, seconds after the capture's first packet "
         "(k x interval)", "s", False),
        ("packets", "int64", "frames in the interval (tshark io,stat: Frames)", "packets", False),
        ("bytes", "int64", "frame bytes on the wire in the interval (tshark io,stat: Bytes)",
         "bytes", False),
        ("{rate}", "float64", "the interval's {unit} / interval length in seconds", "{r}", False),
    )
    transfers = cols(
        ("transfer", "int64", "0, 1, ... in time order within the group", None, False),
        ("packets", "int64", "frames of the transfer", "packets", False),
        ("bytes", "int64", "frame bytes on the wire of the transfer", "bytes", False),
        ("first_s", "float64", "its first packet, seconds after the capture's first packet", "s",
         False),
        ("last_s", "float64", "its last packet, seconds after the capture's first packet", "s",
         False),
        ("duration_s", "float64", "last_s - first_s", "s", False),
        ("avg_transfer_{rate}", "float64", "{unit} / duration_s (over the transfer's own first "
         "to last packet); empty when duration_s is 0", "{r}", True),
    )
    return (TableSpec("summary", "one row per group: averages, peak interval, transfers",
                      summary),
            TableSpec("series", "one row per interval and group: the I/O graph itself", series),
            TableSpec("transfers", "one row per transfer (a run of a group's packets without "
                      "an idle gap longer than gap_s)", transfers))


class IOGraph(Result):
    """The I/O graph of one capture (of several after :func:`pcapstats.concat`); every
    definition is in the module docstring.  ``keys``: the group key columns; ``unit``,
    ``interval_ns``, ``gap_ns``, ``by``, ``filters``: what was asked."""
    analysis = "iograph"
    specs = _specs(["proto", "stream", "direction"], "bits")   # `pcapstats columns iograph`
    series = "series"
    draws = overlays = True

    @classmethod
    def specs_for(cls, *, unit: str = "bits", by: str | None = None, **options):
        """The tables of a run grouped ``by`` in ``unit``: its key columns first."""
        return _specs(GROUP_KEYS[_choice("by", by, GROUPINGS)], _choice("unit", unit, UNITS))

    def __init__(self, tables, *, capture: str, options: "_Options", keys: list[str],
                 series_rows, stream_names: dict | None = None, notes: list[str] = ()):
        super().__init__(tables, capture=capture, specs=_specs(keys, options.unit),
                         notes=list(notes))
        self.keys = keys
        self.unit, self.interval_ns, self.gap_ns, self.by = (options.unit, options.interval_ns,
                                                             options.gap_ns, options.by)
        self.filters = options.filters
        self.series_rows = np.asarray(series_rows, np.int64)   # series rows of each group
        self.stream_names = stream_names or {}       # (proto, stream) -> endpoints, lab label
        self.view = {"summary": _view(keys, RATE_NAMES[options.unit])}
        self.notes += _partial_peaks(self.table("summary"), keys, RATE_NAMES[options.unit],
                                     options.interval_ns / 1e9)

    @property
    def interval_s(self) -> float:
        return self.interval_ns / 1e9

    @property
    def gap_s(self) -> float:
        return self.gap_ns / 1e9

    @property
    def rate_column(self) -> str:
        """The per-second column: ``bps``, ``bytes_per_s`` or ``packets_per_s``."""
        return RATE_NAMES[self.unit]

    def groups(self) -> list["Group"]:
        """Every group of every capture: its label, its summary row and its series rows."""
        out = []
        for part in self.parts:
            summary, series = part.table("summary"), part.table("series")
            ends = np.cumsum(part.series_rows)
            for i, (n, end) in enumerate(zip(part.series_rows, ends)):
                row = {name: values[i] for name, values in summary.items()}
                out.append(Group(part.captures[0], part._label(row), row,
                                 {name: values[end - n:end] for name, values in series.items()}))
        return out

    def _label(self, row: dict) -> str:
        """A group's name in a legend: "tcp 0 A→B 10.0.0.1:5000 → 10.0.0.2:80 (reno)", or
        what the filters kept: "udp packets", "all packets"."""
        words = ["A→B" if row[k] == "a_to_b" else "B→A" if row[k] == "b_to_a" else str(row[k])
                 for k in self.keys]
        if "stream" in self.keys:
            words.append(self.stream_names.get((row["proto"], int(row["stream"])), ""))
        if words:
            return " ".join(w for w in words if w)
        f = self.filters
        if "stream" in f:
            return f"{f.get('proto', 'tcp/udp')} stream {f['stream']}"
        kept = [f"{f['proto']} packets" if "proto" in f else "all packets"]
        kept += [f"{k} {f[k]}" for k in ("host", "port") if k in f]
        return ", ".join(kept)

    def _figure(self, ax=None, **options):
        """``layout``: overlay or side; ``from_s`` / ``to_s``: the zoom, ``title``."""
        return iograph_figure(self, ax=ax, **options)


def _view(keys: list[str], rate: str) -> dict:
    """The summary's human table for a grouping: the keys, then what people compare."""
    shown = []
    if "stream" in keys:
        shown.append(Shown("stream", join="{proto} {stream}"))
    if "direction" in keys:
        shown.append(Shown("direction", "direction"))
    def metric(name: str, **options) -> Shown:   # headed as its bit/s metric is
        return Shown(catalogue.heading(f"{name}_bps"), f"{name}_{rate}", **options)
    return (*shown, Shown("packets", "packets", minor=True), Shown("bytes", "bytes"),
            Shown("active", "active_s"), metric("avg_capture"), metric("avg_active"),
            metric("peak"), Shown("peak at", "peak_start_s", minor=True),
            Shown("transfers", "transfers", minor=True), metric("avg_transfer"))


def _partial_peaks(summary: dict, keys: list[str], rate: str, interval_s: float) -> list[str]:
    """A note for each group whose busiest interval reads below its average while active
    because it was active less than two intervals, so it never filled one."""
    with np.errstate(invalid="ignore"):
        low = ((summary[f"peak_{rate}"] < summary[f"avg_active_{rate}"])
               & (summary["active_s"] < 2 * interval_s) & (summary["packets"] >= 10))
    return [Note(PEAK_BELOW, about=' '.join(str(summary[k][i]) for k in keys) or "all packets",
                 detail=f"active {summary['active_s'][i]:.3g} s, so no {interval_s:g} s "
                        "interval was busy all through; a shorter --interval shows its rate")
            for i in np.flatnonzero(low)]


@dataclass
class Group:
    """One line of the I/O graph: its capture, label, summary row and series."""
    capture: str
    label: str
    summary: dict
    series: dict[str, np.ndarray]


# the packet-table columns and layers the I/O graph reads; it counts every packet
READS = ("frame_time_ns", "frame_len", "payload_len", "direction", "ip_src", "ip_dst",
         "l4_quoted", "tcp_stream", "tcp_srcport", "tcp_dstport", "udp_stream", "udp_srcport",
         "udp_dstport", schema.IP, schema.TCP, schema.UDP, schema.STREAM)


def every_row(cap: Capture) -> np.ndarray:
    return np.ones(len(cap), bool)


@analysis(reads=False)
def iograph(capture, *, interval: float = 1.0, unit: str = "bits",
            by: str | None = None, stream: int | None = None, proto: str | None = None,
            host: str | None = None, port: int | None = None,
            gap: float = DEFAULT_GAP_S) -> IOGraph:
    """The I/O graph of a capture.  Raises UsageError for a bad option or an unknown stream;
    returns an empty result (``.empty``) when nothing matches the filters.  Given a path, its
    sums are made as the file is read, window by window (``_Sums``): memory follows the
    groups, intervals and transfers, not the packets."""
    o = _Options.checked(interval, unit, by, stream, proto, host, port, gap)
    if isinstance(capture, Capture):
        return _one(capture, o)
    sums, summary = _Sums(o), SummaryKeeper()
    named = "stream" in GROUP_KEYS[o.by]                 # stream names from the summary
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got = read_kept(capture, [sums, summary, Kept(FILE_FACTS)] if named else [sums])
    if sums.went_back or (named and got[1] is None):      # a clock stepping back across
        return _one(as_capture(capture, Needs(READS, every_row)), o)   # windows: the table
    for w in said:                                        # (which warns again, itself)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if named:
        summary.put(got[2], got[1])
    return sums.graph(lambda: stream_names(got[2]))


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


# -- selection and groups --------------------------------------------------------------------

_PROTO_CODE = {"tcp": 0, "udp": 1}
_PROTO_NAMES = np.array(["tcp", "udp"], dtype=object)


def _transport(cap: Capture):
    """Per packet: protocol code (0 tcp, 1 udp, -1 none), stream index, source and destination
    port; TCP/UDP headers quoted in ICMP errors count, as in Wireshark's display filters."""
    tcp, udp = cap.layer(schema.TCP), cap.layer(schema.UDP)
    code = np.where(tcp, 0, np.where(udp, 1, -1)).astype(np.int8)
    return code, cap.column("tcp_stream"), cap.column("tcp_srcport"), cap.column("tcp_dstport")


def _same_address(text, wanted: str) -> bool:
    try:
        return ipaddress.ip_address(text).compressed == wanted
    except ValueError:
        return False


_DIRECTION_NAMES = np.array(DIRECTIONS, dtype=object)


def _group_keys(cap: Capture, rows, by, code, stream_ids):
    """(the selected rows in a group, each one's group key: one number that sorts as the keys
    do); rows outside every group dropped (by anything but None: packets of no TCP/UDP
    stream)."""
    if by is None:
        return rows, np.zeros(len(rows), np.int64)
    rows = rows[code[rows] >= 0]                       # only packets of a TCP/UDP stream
    direction = (cap.column("direction")[rows].astype(np.int64) if "direction" in by
                 else np.zeros(len(rows), np.int64))
    if by == "direction":
        return rows, direction
    pcode, sid = code[rows].astype(np.int64), stream_ids[rows].astype(np.int64)
    return rows, (((pcode << 40) | sid) << 1) | direction


def _key_columns(keys: np.ndarray, by) -> dict[str, np.ndarray]:
    """The key columns of the groups whose keys (``_group_keys``') are ``keys``."""
    if by is None:
        return {}
    if by == "direction":
        return {"direction": _DIRECTION_NAMES[keys]}
    out = {"proto": _PROTO_NAMES[keys >> 41], "stream": (keys >> 1) & ((1 << 40) - 1)}
    if by == "stream+direction":
        out["direction"] = _DIRECTION_NAMES[keys & 1]
    return out


# -- the computation -------------------------------------------------------------------------

def _one(cap: Capture, o: _Options) -> IOGraph:
    """The I/O graph of a Capture: its packets summed as one window."""
    sums = _Sums(o)
    sums.add(cap)
    return sums.graph(lambda: stream_names(cap))


class _Sums:
    """The sums an I/O graph is made of, fed a capture's packets in file order a window at a
    time (a keeper of ``ingest.read_kept``) or all at once: per group its packets, bytes, first
    and last time; per group and interval with packets, its packets and bytes; each group's
    transfers, its last one left open until a packet more than the gap after it closes it.
    Memory follows the groups, intervals and transfers, not the packets.  A window holding a
    group's packet earlier than that group's latest in an earlier window (a clock stepping
    back across windows) sets ``went_back``: the transfers then need the whole table."""

    def __init__(self, o: _Options):
        self.o = o
        self.windows, self.path, self.t0, self.latest_ns = 0, None, 0, None
        self.cells: list[tuple] = []      # per window: group key, interval, packets, bytes
        self.totals: list[tuple] = []     # per window: group key, packets, bytes, first, last
        self.closed: list[tuple] = []     # transfers: group key, first, last, packets, bytes
        self.open: dict[int, list] = {}   # group key -> its open transfer, as a closed one's
        self.went_back = False
        self.in_stream = False            # a packet of the stream asked for was seen
        self.top_stream = {0: -1, 1: -1}  # the highest stream index of each protocol
        self.host_codes, self.addresses_checked = [], 0

    @property
    def seen(self) -> bool:
        return self.windows > 0

    def add(self, cap: Capture) -> None:
        if not self.windows:
            self.path, self.t0 = cap.path, cap.first_time_ns or 0
        self.windows += 1
        t_all = cap.column("frame_time_ns")
        if len(t_all):
            latest = int(t_all.max())
            self.latest_ns = latest if self.latest_ns is None else max(self.latest_ns, latest)
        if self.went_back:
            return
        o = self.o
        code, stream_ids, sport, dport = _transport(cap)
        rows = np.flatnonzero(self._select(cap, code, stream_ids, sport, dport))
        rows, key = _group_keys(cap, rows, o.by, code, stream_ids)
        if not len(rows):
            return
        t = t_all[rows].astype(np.int64)
        size = cap.column("frame_len")[rows].astype(np.int64)
        # Sort by (group, time): groups become segments, time runs forward inside each.
        order = np.lexsort((t, key))
        g, t, size = key[order], t[order], size[order]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        ends = np.r_[starts[1:], len(g)]
        for k, first in zip(g[starts].tolist(), t[starts].tolist()):
            if k in self.open and first < self.open[k][2]:
                self.went_back = True
                return
        self.totals.append((g[starts], ends - starts, np.add.reduceat(size, starts),
                            t[starts], t[ends - 1]))
        # tshark: rel time rounded to the us, (rel + 500) // interval -- taken apart so that a
        # span of the whole int64 range (a clock the reader held at its ends) cannot overflow
        whole, part = np.divmod(t - self.t0, o.interval_ns)
        bucket = whole + (part + 500 >= o.interval_ns)
        cell = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (bucket[1:] != bucket[:-1])])
        self.cells.append((g[cell], bucket[cell], np.diff(np.r_[cell, len(g)]),
                           np.add.reduceat(size, cell)))
        # Transfers: runs of a group's packets without a gap longer than gap_ns.
        run = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (np.diff(t) > o.gap_ns)])
        run_end = np.r_[run[1:], len(g)]
        runs = [g[run], t[run], t[run_end - 1], run_end - run, np.add.reduceat(size, run)]
        first_run = np.r_[True, runs[0][1:] != runs[0][:-1]]
        last_run = np.r_[first_run[1:], True]
        for i in np.flatnonzero(first_run).tolist():
            k = int(runs[0][i])
            before = self.open.pop(k, None)
            if before is None:
                continue
            if runs[1][i] - before[2] > o.gap_ns:
                self.closed.append(tuple(np.array([v]) for v in before))
            else:                                      # the open transfer goes on
                runs[1][i] = before[1]
                runs[3][i] += before[3]
                runs[4][i] += before[4]
        done = ~last_run
        if done.any():
            self.closed.append(tuple(v[done] for v in runs))
        for i in np.flatnonzero(last_run).tolist():
            self.open[int(runs[0][i])] = [int(v[i]) for v in runs]

    def _select(self, cap: Capture, code, stream_ids, sport, dport) -> np.ndarray:
        """The packets the filters keep (module docstring); what the stream filter's error
        says the file has is noted as it goes."""
        o = self.o
        keep = np.ones(len(cap), bool)
        if o.proto is not None:
            keep &= code == _PROTO_CODE[o.proto]
        if o.stream is not None:
            protos = [o.proto] if o.proto else ["tcp", "udp"]
            for p in protos:
                ids = stream_ids[code == _PROTO_CODE[p]]
                if len(ids):
                    self.top_stream[_PROTO_CODE[p]] = max(self.top_stream[_PROTO_CODE[p]],
                                                          int(ids.max()))
            in_stream = (np.isin(code, [_PROTO_CODE[p] for p in protos])
                         & (stream_ids == o.stream))
            self.in_stream |= bool(in_stream.any())
            keep &= in_stream
        if o.host is not None:
            new = cap.addresses[self.addresses_checked:]
            self.host_codes += [self.addresses_checked + i for i, a in enumerate(new)
                                if _same_address(a, o.host)]
            self.addresses_checked = len(cap.addresses)
            ip = cap.layer(schema.IP)
            keep &= ip & (np.isin(cap.column("ip_src"), self.host_codes)
                          | np.isin(cap.column("ip_dst"), self.host_codes))
        if o.port is not None:
            keep &= (code >= 0) & ((sport == o.port) | (dport == o.port))
        return keep

    def done(self, total: int) -> "_Sums":
        return self

    def graph(self, names) -> IOGraph:
        """The I/O graph of what was fed (``names()``: the stream names, when grouped by
        stream)."""
        o = self.o
        if o.stream is not None and not self.in_stream:
            protos = [o.proto] if o.proto else ["tcp", "udp"]
            have = [f"{p.upper()} streams 0-{self.top_stream[_PROTO_CODE[p]]}"
                    if self.top_stream[_PROTO_CODE[p]] >= 0 else f"no {p.upper()} streams"
                    for p in protos]
            raise UsageError(f"no {'/'.join(protos).upper()} stream {o.stream} in this capture",
                             path=self.path, hint="it has " + ", ".join(have))
        key_names = list(GROUP_KEYS[o.by])
        if not self.totals:
            return _empty(self.path, o, key_names)
        for k, v in self.open.items():
            self.closed.append(tuple(np.array([x]) for x in v))
        t0 = self.t0
        span_ns = self.latest_ns - t0 if self.latest_ns is not None else 0

        # the groups, numbered in key order (np.unique's)
        key, packets, size, first, last = (np.concatenate(c) for c in zip(*self.totals))
        group_keys, seg = np.unique(key, return_inverse=True)
        n_groups = len(group_keys)
        g_packets = np.zeros(n_groups, np.int64)
        np.add.at(g_packets, seg, packets)
        g_bytes = np.zeros(n_groups, np.int64)
        np.add.at(g_bytes, seg, size)
        first_ns = np.full(n_groups, np.iinfo(np.int64).max)
        last_ns = np.full(n_groups, np.iinfo(np.int64).min)
        np.minimum.at(first_ns, seg, first)
        np.maximum.at(last_ns, seg, last)
        keys = _key_columns(group_keys, o.by)

        # the intervals with packets: cells of (group, interval), merged across windows
        key, bucket, c_packets, c_bytes = (np.concatenate(c) for c in zip(*self.cells))
        c_seg = np.searchsorted(group_keys, key)
        order = np.lexsort((bucket, c_seg))
        c_seg, bucket, c_packets, c_bytes = (v[order] for v in (c_seg, bucket, c_packets,
                                                                 c_bytes))
        new = np.flatnonzero(np.r_[True, (c_seg[1:] != c_seg[:-1])
                                   | (bucket[1:] != bucket[:-1])])
        c_seg, bucket = c_seg[new], bucket[new]
        c_packets, c_bytes = np.add.reduceat(c_packets, new), np.add.reduceat(c_bytes, new)
        k, series_seg, cell, left_out = listed_intervals(bucket, c_seg, int(g_packets.sum()))
        lengths = np.bincount(series_seg, minlength=n_groups)
        offsets = np.r_[0, np.cumsum(lengths)[:-1]]
        total = len(k)
        packets, bytes_ = np.zeros(total, np.int64), np.zeros(total, np.int64)
        packets[cell], bytes_[cell] = c_packets, c_bytes
        notes = []
        if left_out:
            notes.append(Note(f"{left_out} empty intervals of {o.interval_ns / 1e9:g} s not "
                              "listed", detail="the capture spans far more intervals than it "
                              "has packets (a clock step, or a long idle time); each run of "
                              "empty intervals is shown by its first"))
        per_s = 1e9 / o.interval_ns
        value = _in_unit(o.unit, packets, bytes_) * per_s

        series = {name: vals[series_seg] for name, vals in keys.items()}
        rate = RATE_NAMES[o.unit]
        series.update({"interval": k, "start_s": k * o.interval_ns / 1e9, "packets": packets,
                       "bytes": bytes_, rate: value})

        # Peaks: the largest interval of each group, the earliest on a tie.
        peak = np.maximum.reduceat(value, offsets)
        hits = np.flatnonzero(value == peak[series_seg])
        first_hit = hits[np.r_[True, series_seg[hits][1:] != series_seg[hits][:-1]]]
        peak_start_s = k[first_hit] * o.interval_ns / 1e9

        # Transfers, in group and time order
        key, t_first, t_last, t_packets, t_bytes = (np.concatenate(c) for c in zip(*self.closed))
        tseg = np.searchsorted(group_keys, key)
        order = np.lexsort((t_first, tseg))
        tseg, t_first, t_last, t_packets, t_bytes = (v[order] for v in (
            tseg, t_first, t_last, t_packets, t_bytes))
        t_dur_ns = t_last - t_first
        t_avg = _rate(_in_unit(o.unit, t_packets, t_bytes), t_dur_ns)
        t_index = np.arange(len(tseg)) - np.searchsorted(tseg, tseg)
        lasting = t_dur_ns > 0                     # transfers of one instant have no rate
        amount = np.bincount(tseg, weights=np.where(lasting, _in_unit(o.unit, t_packets,
                                                                       t_bytes), 0),
                             minlength=n_groups)
        mean_transfer = _rate(amount, np.bincount(tseg, weights=np.where(lasting, t_dur_ns, 0),
                                                  minlength=n_groups))
        transfers = {name: vals[tseg] for name, vals in keys.items()}
        transfers.update({"transfer": t_index, "packets": t_packets, "bytes": t_bytes,
                          "first_s": (t_first - t0) / 1e9, "last_s": (t_last - t0) / 1e9,
                          "duration_s": t_dur_ns / 1e9, f"avg_transfer_{rate}": t_avg})

        g_amount = _in_unit(o.unit, g_packets, g_bytes)
        summary = dict(keys)
        summary.update({
            "packets": g_packets, "bytes": g_bytes,
            "first_s": (first_ns - t0) / 1e9, "last_s": (last_ns - t0) / 1e9,
            "active_s": (last_ns - first_ns) / 1e9,
            "capture_span_s": np.full(n_groups, span_ns / 1e9),
            f"avg_capture_{rate}": _rate(g_amount, np.full(n_groups, span_ns)),
            f"avg_active_{rate}": _rate(g_amount, last_ns - first_ns),
            f"peak_{rate}": peak, "peak_start_s": peak_start_s,
            "transfers": np.bincount(tseg[lasting], minlength=n_groups).astype(np.int64),
            f"avg_transfer_{rate}": mean_transfer,
        })
        return IOGraph({"summary": summary, "series": series, "transfers": transfers},
                       capture=self.path, options=o, keys=key_names, series_rows=lengths,
                       stream_names=names() if "stream" in key_names else None, notes=notes)


def listed_intervals(bucket, seg, n_packets):
    """The intervals the series lists, as (interval index, group, the series row of each cell,
    how many empty intervals were left out).  ``bucket`` and ``seg`` are the intervals with
    packets and their groups, sorted by group then interval.  Every interval from a group's
    first packet to its last, or (past the dense limit) those with packets and the first of
    each empty run after them."""
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    ends = np.r_[starts[1:], len(seg)]
    b_first, b_last = bucket[starts], bucket[ends - 1]
    lengths = b_last - b_first + 1
    # summed as Python ints: groups of 2^53 intervals each (a 1 us interval over a clock step)
    # would overflow an int64 sum into a negative count
    dense = sum(map(int, lengths))
    if dense <= max(DENSE_ROWS, DENSE_PER_PACKET * n_packets):
        offsets = np.r_[0, np.cumsum(lengths)[:-1]]
        series_seg = np.repeat(np.arange(len(starts)), lengths)
        k = b_first[series_seg] + (np.arange(dense) - offsets[series_seg])
        return k, series_seg, offsets[seg] + (bucket - b_first[seg]), 0
    last_of_group = np.r_[seg[1:] != seg[:-1], True]
    gap_after = ~last_of_group & (np.r_[bucket[1:], 0] != bucket + 1)
    k = np.r_[bucket, bucket[gap_after] + 1]
    series_seg = np.r_[seg, seg[gap_after]]
    order = np.lexsort((k, series_seg))
    k, series_seg = k[order], series_seg[order]
    cell = np.argsort(order)[:len(bucket)]              # where each one with packets went
    return k, series_seg, cell, dense - len(k)


def _in_unit(unit: str, packets, bytes_) -> np.ndarray:
    if unit == "packets":
        return packets.astype(np.float64)
    return bytes_ * (8.0 if unit == "bits" else 1.0)


def _rate(amount, span_ns) -> np.ndarray:
    """amount per second over span_ns; NaN where the span is 0."""
    span = np.asarray(span_ns, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(span > 0, amount * 1e9 / span, np.nan)


def _empty(path, o: _Options, key_names) -> IOGraph:
    tables = {spec.name: {c.name: np.zeros(0, object if c.dtype == "str" else c.dtype)
                          for c in spec.columns} for spec in _specs(key_names, o.unit)}
    return IOGraph(tables, capture=path, options=o, keys=key_names, series_rows=[])
