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
- **Each flow's share over time** (``shares``): each full interval of a flow's own span,
  counted from its own start (its first packet, as iperf3 counts its intervals from its own
  start): the flow's goodput, its share of every flow's goodput in that same span, and its
  fair share, 1 / the flows sending then (started, not yet ended).
- **Convergence** (``convergence_s``): a flow has converged at the first of CONVERGE_HOLD
  intervals in a row, inside the common window, in which its share was within WITHIN (10 %)
  of its fair share; its time is counted from the common window's start (the last flow's
  start: the moment the path became shared).  A run's is its slowest flow's; a flow that
  never held the band did not converge (NaN, and a note).  **Start order**: ``flows`` says when
  each flow started and in which order, beside its share of the common window.

Times are those of the timeline joined across the breaks of the capture's clock
(:mod:`pcapstats.clock`: a step back, a forward jump of an hour or more), the captured times
when it has none: a step can neither empty the common window nor stretch it, nor move a
flow's intervals, shares or convergence, and the capture's clock warning says when a flow
spans a break.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import Capture, Needs
from ..clock import touched
from ..errors import Note, NothingToReport, UsageError
from ..ingest import read_kept, read_needed
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from ..sidecar import stream_flows, stream_labels
from ..addresses import endpoint
from ..streams import PROTOS, own_transport
from ..units import check_interval
from .tcpseq import (RESENT_READS, AnalysedWindows, analysed_rows, resent_packets,
                           resent_rows)

MIN_FLOW_BYTES = 10_000
# the packet-table columns and layers fairness reads of a Capture (resent_packets' with them);
# the rows it reads are rows_needed's.  A Capture of only these gives the same result as the
# whole table (a path is read in windows, twice: see fairness())
READS = tuple(dict.fromkeys((*RESENT_READS, schema.UDP, "udp_stream", "payload_len",
                             "frame_time_ns", "frame_number", "ip_src", "ip_dst", "tcp_srcport",
                             "tcp_dstport", "udp_srcport", "udp_dstport")))
DENSE_INTERVALS = 1_000_000
GROUPINGS = ("stream", "pair", "cc", "tool")
WITHIN = 0.10            # a share this close to the fair share (relative) is fair
CONVERGE_HOLD = 3        # intervals in a row within it: converged
_C = Column
SUMMARY = TableSpec("summary", "one row: the index over the run", (
    _C("by", "str", "what a flow is: stream, pair (host pair), or a sidecar field"),
    _C("flows", "int64", "flows compared"),
    catalogue.column("jain_index", doc="over the window", optional=False),
    _C("window", "str", "'common' (every flow sending) or 'own' (each flow's own span: they "
       "never overlapped)", values=("common", "own")),
    _C("window_start_s", "float64", "common window start, seconds since the capture's first "
       "packet", "s", optional=True),
    _C("window_s", "float64", "common window length (across a clock break: over the pieces "
       "either side)", "s", optional=True),
    catalogue.column("total_goodput_bps", optional=False),
    _C("min_share", "float64", "the smallest flow's share of the total", "fraction"),
    _C("max_share", "float64", "the largest flow's share of the total", "fraction"),
    catalogue.column("convergence_s", doc="here the slowest flow's"),
))
FLOWS = TableSpec("flows", "one row per flow compared", (
    _C("flow", "str", "the flow: endpoints, host pair or sidecar value"),
    _C("streams", "str", "the TCP/UDP streams it adds up (proto and index)"),
    _C("goodput_bytes", "int64", "payload delivered for the first time within the window",
       "bytes"),
    catalogue.column("goodput_bps", doc="here goodput_bytes x 8 / the window", optional=False),
    _C("share", "float64", "its part of the flows' total", "fraction"),
    _C("order", "int64", "start order: 1 for the flow that started first"),
    _C("start_s", "float64", "its first packet, seconds since the capture's first packet", "s"),
    catalogue.column("convergence_s", doc="here the flow's"),
))
SERIES = TableSpec("series", "one row per interval of the common window", (
    schema.TIME_COLUMN.but(note="the interval's start"),
    _C("active", "int64", "flows with goodput in the interval"),
    catalogue.column("jain_index", doc="over every flow's goodput in the interval",
                     optional=False),
))


SHARES = TableSpec("shares", "one row per flow and full interval of its own span, counted "
                   "from its own start", (
    _C("flow", "str", "the flow: endpoints, host pair or sidecar value"),
    _C("order", "int64", "the flow's start order (flows' order): 1 for the first to start"),
    schema.TIME_COLUMN.but(note="the interval's start"),
    _C("since_start_s", "float64", "interval start, seconds since the flow's own start (its "
       "first packet)", "s"),
    catalogue.column("goodput_bps", doc="here the flow's in the interval", optional=False),
    _C("share", "float64", "the flow's part of every flow's goodput in the same interval "
       "(empty when none had any)", "fraction", optional=True),
    _C("fair_share", "float64", "1 / the flows sending in the interval (started, not yet "
       "ended)", "fraction"),
    _C("within", "bool", f"the share is within {100 * WITHIN:.0f} % of the fair share "
       "(|share - fair| "
       f"<= {WITHIN:g} x fair)"),
    _C("sharing", "bool", "the interval lies inside the common window (every flow sending): "
       "the intervals convergence is judged on"),
))


class Fairness(Result):
    """The index over the run (``summary``), the flows (``flows``), per interval (``series``)."""
    analysis = "fairness"
    specs = (SUMMARY, FLOWS, SERIES, SHARES)
    series = "series"
    draws = True
    view = {"series": (Shown("time", "time_s"), Shown("active flows", "active"),
                       shown("jain_index")),
            "summary": (Shown("by", "by"), Shown("flows", "flows"),
                        shown("jain_index"), Shown("window", "window"),
                        Shown("length", "window_s"), shown("total_goodput_bps"),
                        Shown("min share", "min_share"), Shown("max share", "max_share"),
                        shown("convergence_s")),
            "flows": (Shown("order", "order"), Shown("flow", "flow", wrap=True),
                      Shown("streams", "streams", minor=True), Shown("start", "start_s"),
                      shown("goodput_bps"), Shown("share", "share"), shown("convergence_s")),
            "shares": (Shown("flow", "order", key=True),
                       Shown("endpoints", "flow", wrap=True, minor=True), Shown("time", "time_s"),
                       Shown("since start", "since_start_s"), shown("goodput_bps"),
                       Shown("share", "share"), Shown("fair share", "fair_share"),
                       Shown("within 10 %", "within"), Shown("all sending", "sharing"))}
    legend = {"summary": "Jain's index of goodput (first-time payload) over the window where "
                         "every flow was sending; --flows for each flow, --series for each "
                         "flow's share per interval, --jain-series for the index per interval.",
              "shares": f"Each flow's intervals from its own start (flows in start order: "
                        f"--flows names them); converged: {CONVERGE_HOLD} intervals in a row "
                        f"within {100 * WITHIN:.0f} % of the fair share while all were "
                        "sending."}

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
    superset of what the whole file needs (the span on the timeline joined across the
    clock's breaks, which a window's clock knows up to its end)."""
    need = resent_rows(cap)
    need |= own_transport(cap, "udp") & (cap.column("payload_len") > 0)
    t = _joined(cap, slice(None))[0]
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
    of its rows (re-sends from ``tcpseq.resent_packets``: no analyser)."""
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
    spanning = flows.spanning(groups)
    start, end = int(firsts.max()), int(lasts.min())
    common = end > start
    notes = []
    step = int(round(interval * 1e9))
    sums = _Goodput(flows, groups, start, end, step,
                    _Shares(groups, firsts, lasts, step, _packets_of(flows, groups)))
    rows(sums)                 # the second pass: the common window's goodput, each flow's shares
    if common:
        spans = np.full(len(groups), (end - start) / 1e9)
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
    order = np.empty(len(groups), np.int64)
    order[np.argsort(firsts, kind="stable")] = np.arange(1, len(groups) + 1)
    shares, converged = sums.shares.table(order, start, end, common, t0, notes)
    flow_table.update(order=order, start_s=(firsts - t0) / 1e9, convergence_s=converged)
    summary["convergence_s"] = np.array([converged.max() if common else np.nan])
    if common:
        notes.extend(_order_notes(flow_table, share, firsts, step, len(groups),
                                  float(summary["convergence_s"][0])))
    result = Fairness({"summary": summary, "flows": flow_table, "series": series,
                       "shares": shares}, capture=path, notes=notes)
    if spanning is not None:
        result.clock_touched = touched("fairness", joined=[
            f"the window, goodput, shares and convergence of {spanning} "
            f"flow{'s' if spanning > 1 else ''}"]
            if spanning else [])
    return result


def _joined(cap: Capture, rows) -> tuple[np.ndarray, np.ndarray | None]:
    """The times of ``rows`` on the timeline joined across the clock's breaks, and the piece
    of each (None while the clock has not broken: all in the first).  A window's clock is the
    file's up to the window's end, and a break moves only the times after it, so a window's
    joined times are the whole table's."""
    pieces = cap.clock.pieces()
    t = cap.column("frame_time_ns")[rows]
    if len(pieces) == 1:
        return t, None
    frames = cap.column("frame_number")[rows]
    return pieces.monotonic(t, frames), pieces.of(frames)


def _data_packets(cap: Capture, tcp_rows: np.ndarray, resent: np.ndarray) -> list[dict]:
    """The packets fairness counts of a Capture (or a window): every TCP packet the sequence
    analysis takes (``tcp_rows``, which of them ``resent``) and every UDP packet with its own
    header, each protocol's as its stream * 2 + direction (``key``), time on the joined
    timeline and piece of the clock (``_joined``), goodput bytes (payload delivered for the
    first time) and whether it carried payload; and, to name each direction by its first
    packet with its own header, those packets (``own``: of TCP also those whose header the
    analyser skips)."""
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
        t, piece = _joined(cap, rows)
        out.append({"key": stream[rows] * 2 + direction[rows], "t": t, "piece": piece,
                    "good": good, "data": payload > 0,
                    "own_key": stream[own] * 2 + direction[own], "own": own})
    return out


class _Flows:
    """The first pass: of each direction of each TCP and UDP stream (a key: stream * 2 +
    direction, by protocol), the packets fairness counts, their goodput bytes, the earliest
    and latest of their times (joined across the clock's breaks), the first and last piece of
    the clock they are in, and the addresses and ports of its first packet with its own
    header; fed a Capture's packets or a file's windows in order."""

    def __init__(self):
        self.path, self.t0, self.addresses, self.any = None, None, None, False
        self.clock = None           # the file's clock, whole once the last window is added
        self.by_proto = [_KeySums(p) for p in PROTOS]

    def add(self, cap: Capture, tcp_rows: np.ndarray, resent: np.ndarray) -> None:
        """The packets of ``cap`` (the TCP ones at ``tcp_rows``, which ``resent`` tells)."""
        if self.path is None:
            self.path, self.t0 = cap.path, cap.first_time_ns
        self.addresses, self.clock = cap.addresses, cap.clock
        for sums, part in zip(self.by_proto, _data_packets(cap, tcp_rows, resent)):
            if part is not None:
                self.any = True
                sums.add(cap, part)

    def spanning(self, groups: list[dict]) -> int | None:
        """How many of ``groups`` have packets in several pieces of the file's clock (None:
        it never broke)."""
        if self.clock is None or len(self.clock.pieces()) == 1:
            return None
        low, high = self.low_piece, self.high_piece
        return sum(int(high[g["keys"]].max() > low[g["keys"]].min()) for g in groups)

    def __getattr__(self, name):     # seen, good, earliest, latest, low/high_piece, src, ...
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
              "latest": np.iinfo(np.int64).min, "low_piece": np.iinfo(np.int64).max,
              "high_piece": -1, "src": -1, "dst": -1, "sport": -1, "dport": -1}

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
            piece = part["piece"]
            if piece is None:             # no break yet: every packet so far in piece 0
                a["low_piece"][key] = a["high_piece"][key] = 0
            else:
                np.minimum.at(a["low_piece"], key, piece)
                np.maximum.at(a["high_piece"], key, piece)
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

    def __init__(self, flows: _Flows, groups: list[dict], start: int, end: int, step: int,
                 shares: "_Shares"):
        self.udp_from, self.groups, self.shares = flows.udp_from, groups, shares
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
            self.shares.add(flow, t, good)
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


def _packets_of(flows: _Flows, groups: list[dict]) -> int:
    """The packets the flows' keys counted (the first pass' ``seen``)."""
    seen = flows.seen
    return int(sum(int(seen[g["keys"]].sum()) for g in groups))


class _Shares:
    """The ``shares`` table's sums, fed the second pass' packets (each window's, or a
    Capture's) and kept as cumulative goodput at each flow's interval edges, so memory
    follows the intervals, not the packets: at every edge q of any flow's grid (its first
    packet + k x step), the goodput of every flow's packets before q; at each of a flow's own
    edges, its own packets' before q.  An interval's bytes are the difference of its two
    edges.  Every full interval of each flow's span is listed unless all of them would be
    more than DENSE_INTERVALS (or 4 a packet: a clock step): then none, with a note."""

    def __init__(self, groups: list[dict], firsts, lasts, step: int, packets: int):
        self.firsts, self.lasts, self.step = firsts, lasts, step
        self.full = np.maximum((lasts - firsts) // step, 0)
        self.dense = int(self.full.sum()) <= max(DENSE_INTERVALS, 4 * packets)
        full = self.full if self.dense else np.zeros(len(groups), np.int64)
        # each flow's edges, one after the other; all of them sorted, for every flow's bytes
        self.bounds = np.r_[0, np.cumsum(full + 1)]
        self.edges = np.concatenate([firsts[g] + np.arange(full[g] + 1) * step
                                     for g in range(len(groups))])
        self.by_time = np.argsort(self.edges, kind="stable")
        self.sorted_edges = self.edges[self.by_time]
        self.every = np.zeros(len(self.edges) + 1, np.int64)   # before each sorted edge (+ tail)
        self.own = np.zeros(len(self.edges) + 1, np.int64)     # before each own edge
        self.names = [g["name"] for g in groups]

    def add(self, flow: np.ndarray, t: np.ndarray, good: np.ndarray) -> None:
        mine = np.flatnonzero((flow >= 0) & (good > 0))
        if not len(mine) or not len(self.edges):
            return
        flow, t, good = flow[mine], t[mine], good[mine].astype(np.int64)
        _before(self.every, self.sorted_edges, 0, len(self.edges), t, good)
        order = np.lexsort((t, flow))
        flow, t, good = flow[order], t[order], good[order]
        cuts = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1], True])
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            g = int(flow[lo])
            _before(self.own, self.edges, int(self.bounds[g]), int(self.bounds[g + 1]),
                    t[lo:hi], good[lo:hi])

    def table(self, order, start: int, end: int, common: bool, t0: int, notes: list
              ) -> tuple[dict, np.ndarray]:
        """The shares table (see the module docstring) and each flow's convergence_s."""
        every = np.empty(len(self.edges), np.int64)
        every[self.by_time] = np.cumsum(self.every)[:-1]      # at each edge, in flow order
        own = np.cumsum(self.own)[:-1]
        starts, ends = np.sort(self.firsts), np.sort(self.lasts)
        parts, converged = [], np.full(len(self.names), np.nan)
        for g, name in enumerate(self.names):
            lo, hi = int(self.bounds[g]), int(self.bounds[g + 1])
            a, k = self.edges[lo:hi - 1], np.arange(hi - lo - 1, dtype=np.int64)
            b = a + self.step
            mine_bytes = np.diff(own[lo:hi])
            all_bytes = np.diff(every[lo:hi])
            sending = np.searchsorted(starts, b) - np.searchsorted(ends, a)
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.where(all_bytes > 0, mine_bytes / all_bytes, np.nan)
            fair = 1 / np.maximum(sending, 1)
            within = np.abs(share - fair) <= WITHIN * fair
            sharing = (a >= start) & (b <= end) if common else np.zeros(len(k), bool)
            converged[g] = _converged(k, within & sharing, a, start)
            parts.append({"flow": np.full(len(k), name, object),
                          "order": np.full(len(k), order[g], np.int64),
                          "time_s": (a - t0) / 1e9, "since_start_s": k * self.step / 1e9,
                          "goodput_bps": mine_bytes * 8e9 / self.step, "share": share,
                          "fair_share": fair, "within": within, "sharing": sharing})
        if not self.dense:
            notes.append(Note("each flow's share per interval not listed (--series)",
                              detail="the flows span far more intervals than there are "
                                     "packets: a clock step?"))
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}, converged


def _before(sums: np.ndarray, edges: np.ndarray, lo: int, hi: int, t: np.ndarray,
            good: np.ndarray) -> None:
    """Add the ``good`` bytes of the packets before each of the sorted ``edges[lo:hi]`` to the
    difference array ``sums`` (its running total at j is the bytes before edges[j]; hi ends
    the segment).  The edges after every packet take all of them, those at or before the first
    none, so only the edges within the packets' span cost a search."""
    if hi <= lo or not len(t):
        return
    order = np.argsort(t, kind="stable")
    t, good = t[order], good[order]
    cum = np.r_[0, np.cumsum(good)]
    e = edges[lo:hi]
    inside = lo + np.searchsorted(e, t[0], side="right")    # first edge past the first packet
    after = lo + np.searchsorted(e, t[-1], side="right")    # first edge past the last
    if inside < after:
        partial = cum[np.searchsorted(t, edges[inside:after])]
        sums[inside:after] += np.diff(np.r_[0, partial])
        sums[after] += cum[-1] - partial[-1]
    else:
        sums[after] += cum[-1]
    sums[hi] -= cum[-1]               # the next flow's edges (or the tail) start again from 0


def _converged(k: np.ndarray, fair: np.ndarray, a: np.ndarray, start: int) -> float:
    """Seconds from ``start`` to the first of CONVERGE_HOLD consecutive intervals (numbers k)
    that are all ``fair``; NaN when there are none."""
    if len(k) < CONVERGE_HOLD:
        return float("nan")
    run = np.ones(len(k) - CONVERGE_HOLD + 1, bool)
    for j in range(CONVERGE_HOLD):
        run &= fair[j:len(k) - CONVERGE_HOLD + 1 + j]
    run &= k[CONVERGE_HOLD - 1:] - k[:len(k) - CONVERGE_HOLD + 1] == CONVERGE_HOLD - 1
    first = np.flatnonzero(run)
    return (int(a[first[0]]) - start) / 1e9 if len(first) else float("nan")


def _order_notes(flows: dict, share: np.ndarray, firsts: np.ndarray, step: int, n: int,
                 convergence_s: float) -> list[Note]:
    """What start order did (when the flows started an interval or more apart) and whether
    they converged."""
    notes = []
    if firsts.max() - firsts.min() >= step:
        first = int(np.argmin(firsts))
        notes.append(Note(f"start order: the first to start had {100 * share[first]:.0f} % "
                          f"of the goodput, fair {100 / n:.0f} %",
                          detail=f"{flows['flow'][first]} started "
                                 f"{(firsts.max() - firsts[first]) / 1e9:.1f} s before the last "
                                 "flow; --flows gives each flow's start, order and share"))
    if np.isnan(convergence_s):
        notes.append(Note(f"flows did not converge within {100 * WITHIN:.0f} % of the fair "
                          "share", detail=f"a flow never had {CONVERGE_HOLD} intervals in a row "
                          f"with its share within {100 * WITHIN:.0f} % of its fair share while "
                          "all were sending; "
                          "--series shows each flow's share per interval, and a longer "
                          "--interval smooths TCP's sawtooth"))
    return notes
