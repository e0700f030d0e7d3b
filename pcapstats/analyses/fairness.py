"""Jain's fairness index of the data flows of a capture, over the run and per interval.

J = (sum x)^2 / (n * sum x^2) over the n flows' throughputs x: 1 when all get the same, 1/n
when one gets everything.

- **A flow** is a TCP or UDP stream's data direction (the direction with more payload) that
  carried at least MIN_FLOW_BYTES of payload; ``by="pair"`` adds up the flows between one
  pair of hosts (parallel connections count as one), ``by=`` a sidecar field (``cc``,
  ``pair``, ``tool``) adds up the flows the lab ran with the same value.
- **Throughput** is goodput: payload bytes delivered for the first time (TCP re-sends, by
  tcp_analysis' ``resent``, left out; UDP datagrams as captured) x 8, divided by the
  **common window**: from the moment the last flow started to the moment the first one ended,
  when every flow was sending.  Flows that never overlap have no common window; then each is
  measured over its own first to last data packet, and the summary says so.
- **Per interval** (``series``): the index over the flows' goodput in each interval of the
  common window, aligned to its start (flows with nothing in an interval count as 0).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import Capture, Needs
from ..errors import Note, NothingToReport, UsageError
from ..ingest import read_kept, read_needed
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from ..sidecar import stream_flows, stream_labels
from ..streams import PROTOS, endpoint, own_transport
from ..units import check_interval
from .tcp_analysis import (RESENT_READS, AnalysedWindows, analysed_rows, resent_packets,
                           resent_rows)

MIN_FLOW_BYTES = 10_000
# the packet-table columns and layers fairness reads of a Capture (resent_packets' with them);
# the rows it reads are rows_needed's.  A Capture of only these gives the same result as the
# whole table (a path is read in windows, twice: see fairness())
READS = tuple(dict.fromkeys((*RESENT_READS, schema.UDP, "udp_stream", "payload_len",
                             "frame_time_ns", "ip_src", "ip_dst", "tcp_srcport", "tcp_dstport",
                             "udp_srcport", "udp_dstport")))
DENSE_INTERVALS = 1_000_000
GROUPINGS = ("stream", "pair", "cc", "tool")
_C = Column
SUMMARY = TableSpec("summary", "one row: the index over the run", (
    _C("by", "str", "what a flow is: stream, pair (host pair), or a sidecar field"),
    _C("flows", "int64", "flows compared"),
    catalogue.column("jain_index", doc="over the window", optional=False),
    _C("window", "str", "'common' (every flow sending) or 'own' (each flow's own span: they "
       "never overlapped)", values=("common", "own")),
    _C("window_start_s", "float64", "common window start, seconds since the capture's first "
       "packet", "s", optional=True),
    _C("window_s", "float64", "common window length", "s", optional=True),
    catalogue.column("total_goodput_bps", optional=False),
    _C("min_share", "float64", "the smallest flow's share of the total", "fraction"),
    _C("max_share", "float64", "the largest flow's share of the total", "fraction"),
))
FLOWS = TableSpec("flows", "one row per flow compared", (
    _C("flow", "str", "the flow: endpoints, host pair or sidecar value"),
    _C("streams", "str", "the TCP/UDP streams it adds up (proto and index)"),
    _C("goodput_bytes", "int64", "payload delivered for the first time within the window",
       "bytes"),
    catalogue.column("goodput_bps", doc="here goodput_bytes x 8 / the window", optional=False),
    _C("share", "float64", "its part of the flows' total", "fraction"),
))
SERIES = TableSpec("series", "one row per interval of the common window", (
    _C("time_s", "float64", "interval start, seconds since the capture's first packet", "s"),
    _C("active", "int64", "flows with goodput in the interval"),
    catalogue.column("jain_index", doc="over every flow's goodput in the interval",
                     optional=False),
))


class Fairness(Result):
    """The index over the run (``summary``), the flows (``flows``), per interval (``series``)."""
    analysis = "fairness"
    specs = (SUMMARY, FLOWS, SERIES)
    series = "series"
    draws = True
    view = {"series": (Shown("time", "time_s"), Shown("active flows", "active"),
                       shown("jain_index")),
            "summary": (Shown("by", "by"), Shown("flows", "flows"),
                        shown("jain_index"), Shown("window", "window"),
                        Shown("length", "window_s"), shown("total_goodput_bps"),
                        Shown("min share", "min_share"), Shown("max share", "max_share")),
            "flows": (Shown("flow", "flow", wrap=True), Shown("streams", "streams", minor=True),
                      shown("goodput_bps"), Shown("share", "share"))}
    legend = {"summary": "Jain's index of goodput (first-time payload) over the window where "
                         "every flow was sending; --flows for each flow, --series per interval."}

    def _figure(self, ax=None, **options):
        from ..plots.fairness import fairness_figure  # lazy: matplotlib only for a figure
        return fairness_figure(self, ax=ax, **options)


def jain(x) -> float:
    """Jain's index of the values x (nan for none, or all zero)."""
    x = np.asarray(x, dtype=np.float64)
    total = (x ** 2).sum()
    return float(x.sum() ** 2 / (len(x) * total)) if len(x) and total > 0 else float("nan")


def rows_needed(cap: Capture) -> np.ndarray:
    """Bool mask of the rows fairness reads: the TCP packets resent_packets needs (those that
    carry data or sequence space, each direction's first analysed packet and first ACK), the
    UDP datagrams with payload, and of each stream direction its first packet (which names
    it) and its earliest and latest ones (its span).  Pure ACKs and empty datagrams count for
    nothing else.  Each rule holds within any run of rows, so a window of the file keeps a
    superset of what the whole file needs."""
    need = resent_rows(cap)
    need |= own_transport(cap, "udp") & (cap.column("payload_len") > 0)
    t = cap.column("frame_time_ns")
    for proto in PROTOS:
        own = np.flatnonzero(own_transport(cap, proto))
        key = cap.column(f"{proto}_stream")[own] * 2 + cap.column("direction")[own]
        # the span counts the packets the analyser takes (of TCP, headers of 20 bytes or more)
        counted = cap.column("tcp_hdr_len")[own] >= 20 if proto == "tcp" else slice(None)
        size = int(key.max()) + 1 if len(key) else 0  # directions by number: stream ids
        first = np.full(size, len(cap))               # count packets, a dense table is small
        earliest = np.full(size, np.iinfo(np.int64).max)
        latest = np.full(size, np.iinfo(np.int64).min)
        np.minimum.at(first, key, own)
        own, key = own[counted], key[counted]
        np.minimum.at(earliest, key, t[own])
        np.maximum.at(latest, key, t[own])
        need[first[first < len(cap)]] = True
        need[own[(t[own] == earliest[key]) | (t[own] == latest[key])]] = True
    return need


@analysis(reads=False)
def fairness(capture, *, by: str = "stream", interval: float = 1.0) -> Fairness:
    """Jain's index of the capture's data flows (see the module docstring).  Given a path, two
    passes over its windows, the sequence analyser telling re-sends in each: the flows, their
    spans and the common window (``_Flows``), then each flow's goodput in it (``_Goodput``);
    memory follows the flows and intervals, not the packets.  Given a Capture, the same sums
    of its rows (re-sends from ``tcp_analysis.resent_packets``: no analyser)."""
    if by not in GROUPINGS:
        raise UsageError(f"unknown grouping {by!r}", hint="by stream, pair, cc or tool")
    interval = check_interval(interval, "interval")   # 1 us to a day, as every interval
    flows = _Flows()
    if isinstance(capture, Capture):
        tcp_rows, resent = resent_packets(capture)
        flows.add(capture, tcp_rows, resent)

        def rows(sums):
            sums.add(capture, tcp_rows, resent)
    else:
        told = _Resent(flows)
        read_kept(capture, [AnalysedWindows(told.first_pass)])

        def rows(sums):                     # the file again: its warnings were said
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                read_kept(capture, [_Again(told, sums)])
    if not flows.any:
        if not isinstance(capture, Capture):     # what the file holds: its partial table's
            with warnings.catch_warnings():      # (its warnings were said)
                warnings.simplefilter("ignore")
                capture = read_needed(capture, Needs(READS, rows_needed))
        raise NothingToReport(f"no TCP or UDP packets in {capture.path} ({capture.holds()})",
                              hint="fairness compares the data flows of TCP/UDP streams")
    path = flows.path
    groups = _groups(path, flows, by)
    if len(groups) < 2:
        raise NothingToReport(f"fairness needs two flows or more; {path} has "
                              f"{len(groups)} (flows of {MIN_FLOW_BYTES} payload bytes or "
                              f"more, by {by})",
                              hint="`pcapstats throughput` lists the streams")
    t0 = flows.t0
    firsts = np.array([flows.earliest[g["keys"]].min() for g in groups])
    lasts = np.array([flows.latest[g["keys"]].max() for g in groups])
    start, end = int(firsts.max()), int(lasts.min())
    common = end > start
    notes = []
    step = int(round(interval * 1e9))
    if common:
        spans = np.full(len(groups), (end - start) / 1e9)
        sums = _Goodput(flows, groups, start, end, step)
        rows(sums)
        delivered = sums.delivered
    else:
        spans = (lasts - firsts) / 1e9
        delivered = flows.good
        notes.append(Note("the flows never all sent at once",
                          detail="each is measured over its own first to last data packet, so "
                                 "the index compares rates at different times"))
    goodput = np.array([int(delivered[g["keys"]].sum()) for g in groups])
    bps = np.where(spans > 0, goodput * 8 / np.where(spans > 0, spans, 1), np.nan)
    total = float(np.nansum(bps))
    share = bps / total if total > 0 else np.full(len(bps), np.nan)
    summary = {"by": np.array([by], object), "flows": np.array([len(groups)]),
               "jain_index": np.array([jain(np.nan_to_num(bps))]),
               "window": np.array(["common" if common else "own"], object),
               "window_start_s": np.array([(start - t0) / 1e9 if common else np.nan]),
               "window_s": np.array([(end - start) / 1e9 if common else np.nan]),
               "total_goodput_bps": np.array([total]),
               "min_share": np.array([np.nanmin(share)]), "max_share": np.array([np.nanmax(share)])}
    flow_table = {"flow": np.array([g["name"] for g in groups], object),
                  "streams": np.array([g["streams"] for g in groups], object),
                  "goodput_bytes": goodput, "goodput_bps": bps, "share": share}
    series = sums.series(t0, notes) if common \
        else {"time_s": np.zeros(0), "active": np.zeros(0, np.int64), "jain_index": np.zeros(0)}
    return Fairness({"summary": summary, "flows": flow_table, "series": series},
                    capture=path, notes=notes)


def _data_packets(cap: Capture, tcp_rows: np.ndarray, resent: np.ndarray) -> list[dict]:
    """The packets fairness counts of a Capture (or a window): every TCP packet the sequence
    analysis takes (``tcp_rows``, which of them ``resent``) and every UDP packet with its own
    header, each protocol's as its stream * 2 + direction (``key``), time, goodput bytes
    (payload delivered for the first time) and whether it carried payload; and, to name each
    direction by its first packet with its own header, those packets (``own``: of TCP also
    those whose header the analyser skips)."""
    out = []
    for proto in PROTOS:
        own = own_transport(cap, proto)
        if not own.any():
            out.append(None)
            continue
        if proto == "tcp":
            rows = tcp_rows
            payload = cap.column("tcp_len")[rows]
            good = np.where(resent, np.uint32(0), payload)
        else:
            rows = np.flatnonzero(own)
            payload = good = cap.column("payload_len")[rows]
        own = np.flatnonzero(own)
        stream, direction = cap.column(f"{proto}_stream"), cap.column("direction")
        out.append({"key": stream[rows] * 2 + direction[rows],
                    "t": cap.column("frame_time_ns")[rows], "good": good, "data": payload > 0,
                    "own_key": stream[own] * 2 + direction[own], "own": own})
    return out


class _Flows:
    """The first pass: of each direction of each TCP and UDP stream (a key: stream * 2 +
    direction, by protocol), the packets fairness counts, their goodput bytes, the earliest
    and latest of their times, and the addresses and ports of its first packet with its own
    header; fed a Capture's packets or a file's windows in order."""

    def __init__(self):
        self.path, self.t0, self.addresses, self.any = None, None, None, False
        self.by_proto = [_KeySums(p) for p in PROTOS]

    def add(self, cap: Capture, tcp_rows: np.ndarray, resent: np.ndarray) -> None:
        """The packets of ``cap`` (the TCP ones at ``tcp_rows``, which ``resent`` tells)."""
        if self.path is None:
            self.path, self.t0 = cap.path, cap.first_time_ns
        self.addresses = cap.addresses
        for sums, part in zip(self.by_proto, _data_packets(cap, tcp_rows, resent)):
            if part is not None:
                self.any = True
                sums.add(cap, part)

    def __getattr__(self, name):          # seen, good, earliest, latest, src, dst, sport, dport
        """A per-key array over every key: TCP's, then UDP's from ``udp_from``."""
        if name.startswith("_") or name not in _KeySums.ARRAYS:
            raise AttributeError(name)
        return np.concatenate([sums.array(name) for sums in self.by_proto])

    @property
    def udp_from(self) -> int:
        return self.by_proto[0].top


class _KeySums:
    """One protocol's per-key sums of ``_Flows`` (arrays by key, grown as keys come)."""
    ARRAYS = {"seen": 0, "good": 0, "earliest": np.iinfo(np.int64).max,
              "latest": np.iinfo(np.int64).min, "src": -1, "dst": -1, "sport": -1, "dport": -1}

    def __init__(self, proto: str):
        self.proto = proto
        self.arrays = {name: np.full(0, fill, np.int64) for name, fill in self.ARRAYS.items()}
        self.top = 0              # the keys counted: both directions of streams up to the last

    def add(self, cap: Capture, part: dict) -> None:
        key, own_key = part["key"], part["own_key"]
        n = max(int(key.max()) + 1 if len(key) else 0, int(own_key.max()) + 1)
        have = len(self.arrays["seen"])
        if n > have:
            for name, fill in self.ARRAYS.items():
                self.arrays[name] = np.r_[self.arrays[name], np.full(n - have, fill, np.int64)]
        a = self.arrays
        if len(key):
            self.top = max(self.top, int(key.max()) // 2 * 2 + 2)
            np.add.at(a["seen"], key, 1)
            np.add.at(a["good"], key, part["good"].astype(np.int64))
            np.minimum.at(a["earliest"], key, part["t"])
            np.maximum.at(a["latest"], key, part["t"])
        keys, first = np.unique(own_key, return_index=True)
        new = a["src"][keys] < 0                       # named by an earlier window already
        keys, at = keys[new], part["own"][first[new]]
        a["src"][keys], a["dst"][keys] = cap.column("ip_src")[at], cap.column("ip_dst")[at]
        a["sport"][keys] = cap.column(f"{self.proto}_srcport")[at]
        a["dport"][keys] = cap.column(f"{self.proto}_dstport")[at]

    def array(self, name: str) -> np.ndarray:
        """``name`` of the keys counted (those past the arrays' end: their defaults)."""
        values = self.arrays[name][:self.top]
        return np.r_[values, np.full(self.top - len(values), self.ARRAYS[name], np.int64)]


class _Resent:
    """A file's two passes: the first runs the sequence analyser over its windows (feeding
    ``_Flows``) and keeps which of each window's TCP packets it analysed were re-sent, a bit a
    packet; the second (``_Again``) reads them back instead of analysing again."""

    def __init__(self, flows: _Flows):
        self.flows, self.bits = flows, []

    def first_pass(self, cap: Capture, src: dict, t0) -> None:
        resent = src["resent"].view(bool)
        self.bits.append(np.packbits(resent))
        self.flows.add(cap, src["rows"], resent)


class _Again:
    """The second pass' keeper (of ``ingest.read_kept``): each window's packets to ``sums``,
    with the re-sends the first pass told."""

    def __init__(self, told: _Resent, sums: _Goodput):
        self.told, self.sums, self.windows = told, sums, 0

    @property
    def seen(self) -> bool:
        return self.windows > 0

    def add(self, cap: Capture) -> None:
        rows = analysed_rows(cap)
        bits = self.told.bits[self.windows]
        self.windows += 1
        self.sums.add(cap, rows, np.unpackbits(bits, count=len(rows)).view(bool))

    def done(self, total: int) -> _Goodput:
        return self.sums


def _groups(path, flows: _Flows, by: str) -> list[dict]:
    """The flows to compare: each a name, the streams it adds up, and its flow keys."""
    udp_from = flows.udp_from
    seen, payload = flows.seen, flows.good
    n_keys = len(seen)
    # a stream's data direction: the one with more payload
    other = np.arange(n_keys) ^ 1
    chosen = np.flatnonzero((payload >= MIN_FLOW_BYTES)
                            & ~((seen[other] > 0) & (payload[other] > payload)))
    labels = stream_flows(path) if by not in ("stream", "pair") else {}
    said = stream_labels(path) if by == "stream" else {}
    src, dst, sport, dport = flows.src, flows.dst, flows.sport, flows.dport
    groups: dict[str, dict] = {}
    for k in chosen.tolist():
        proto = "udp" if k >= udp_from else "tcp"
        stream = (k - (udp_from if proto == "udp" else 0)) >> 1
        a_src, a_dst = flows.addresses[src[k]], flows.addresses[dst[k]]
        if by == "stream":
            name = f"{endpoint(a_src, sport[k])} → {endpoint(a_dst, dport[k])}"
            if said.get((proto, stream)):
                name += f" ({said[(proto, stream)]})"
        elif by == "pair":
            name = f"{a_src} → {a_dst}"
        else:
            flow = labels.get((proto, stream))
            if flow is None or flow.get(by) is None:
                raise UsageError(f"{proto} stream {stream} of {path} has no {by!r} in a "
                                 "lab sidecar", hint="group by stream or pair instead")
            value = flow[by]
            name = f"{by} {value + 1 if by == 'pair' else value}"
        g = groups.setdefault(name, {"name": name, "streams": [], "keys": []})
        g["streams"].append(f"{proto} {stream}")
        g["keys"].append(k)
    return [{"name": g["name"], "streams": ", ".join(g["streams"]),
             "keys": np.array(g["keys"], np.int64)} for g in groups.values()]


def _summed(flow: np.ndarray, k: np.ndarray, good: np.ndarray) -> tuple:
    """(flow, interval, goodput bytes) with one row a (flow, interval): a batch's packets
    added up, so what is kept follows the intervals, not the packets."""
    if not len(flow):
        return flow, k, good
    order = np.lexsort((k, flow))
    flow, k, good = flow[order], k[order], good[order]
    first = np.flatnonzero(np.r_[True, (flow[1:] != flow[:-1]) | (k[1:] != k[:-1])])
    return flow[first], k[first], np.add.reduceat(good, first)


class _Goodput:
    """The second pass: each key's goodput bytes within the common window [start, end], and
    each flow's per interval of ``step`` from ``start`` (the series), fed as ``_Flows`` is."""

    def __init__(self, flows: _Flows, groups: list[dict], start: int, end: int, step: int):
        self.udp_from, self.groups = flows.udp_from, groups
        self.start, self.end, self.step = start, end, step
        self.n = max(int((end - start) // step), 1)
        self.group_of = np.full(len(flows.seen), -1, np.int32)
        for g, group in enumerate(groups):
            self.group_of[group["keys"]] = g
        self.delivered = np.zeros(len(flows.seen), np.int64)
        self.sent = 0                   # packets with payload of the flows, at any time
        self.cells: list[tuple] = []    # (flow, interval, goodput bytes) of each batch

    def add(self, cap: Capture, tcp_rows: np.ndarray, resent: np.ndarray) -> None:
        for offset, part in zip((0, self.udp_from), _data_packets(cap, tcp_rows, resent)):
            if part is None or not len(part["key"]):
                continue
            key, t, good = part["key"] + offset, part["t"], part["good"]
            inside = np.flatnonzero((t >= self.start) & (t <= self.end))
            np.add.at(self.delivered, key[inside], good[inside].astype(np.int64))
            flow = self.group_of[key]
            sent = (flow >= 0) & part["data"]
            self.sent += int(np.count_nonzero(sent))
            rows = np.flatnonzero(sent & (t >= self.start)
                                  & (t < self.start + self.n * self.step))
            self.cells.append(_summed(flow[rows].astype(np.int64),
                                      (t[rows] - self.start) // self.step,
                                      good[rows].astype(np.int64)))

    def series(self, t0: int, notes: list[str]) -> dict:
        """Per interval of the common window: flows with goodput, and the index.  Every
        interval is listed unless there would be more than DENSE_INTERVALS (or 4 a packet with
        payload of the flows: a clock step or a tiny interval); then only those where a flow
        sent payload, with a note."""
        flow, k, good = (np.concatenate(c) for c in zip(*self.cells)) if self.cells else \
            (np.zeros(0, np.int64),) * 3
        n, step = self.n, self.step
        if n <= max(DENSE_INTERVALS, 4 * self.sent):
            listed, column = np.arange(n), k
        else:
            listed = np.unique(k)
            column = np.searchsorted(listed, k)
            notes.append(Note(f"{n - len(listed)} intervals of {step / 1e9:g} s with no "
                              "flow sending not listed", detail="the common window spans far "
                              "more intervals than there are packets: a clock step?"))
        groups = len(self.groups)
        cell = flow * len(listed) + column
        per_flow = np.zeros(groups * len(listed), np.int64)
        np.add.at(per_flow, cell, good)
        per_flow = per_flow.astype(np.float64).reshape(groups, len(listed))
        total, squares = per_flow.sum(axis=0), (per_flow ** 2).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            index = np.where(squares > 0, total ** 2 / (groups * squares), np.nan)
        return {"time_s": (self.start - t0 + listed * step) / 1e9,
                "active": (per_flow > 0).sum(axis=0).astype(np.int64), "jain_index": index}
