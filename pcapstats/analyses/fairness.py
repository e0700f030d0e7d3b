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

Times are those of the timeline joined across the breaks of the capture's clock
(:mod:`pcapstats.clock`: a step back, a forward jump of an hour or more), the captured times
when it has none: a step can neither empty the common window nor stretch it, and the
capture's clock warning says when a flow spans a break.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import Capture, Needs
from ..clock import touched
from ..errors import Note, NothingToReport, UsageError
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from ..sidecar import stream_flows, stream_labels
from ..streams import PROTOS, endpoint, own_transport
from .tcp_analysis import RESENT_READS, resent_packets, resent_rows

MIN_FLOW_BYTES = 10_000
# the packet-table columns and layers fairness reads (resent_packets' with them); the rows it
# reads are rows_needed's.  A Capture of only these gives the same result as the whole table.
READS = tuple(dict.fromkeys((*RESENT_READS, schema.UDP, "udp_stream", "payload_len",
                             "frame_time_ns", "frame_number", "ip_src", "ip_dst", "tcp_srcport",
                             "tcp_dstport", "udp_srcport", "udp_dstport")))
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
    _C("window_s", "float64", "common window length (across a clock break: over the pieces "
       "either side)", "s", optional=True),
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
    superset of what the whole file needs (the span on the timeline joined across the
    clock's breaks, which a window's clock knows up to its end)."""
    need = resent_rows(cap)
    need |= own_transport(cap, "udp") & (cap.column("payload_len") > 0)
    t = _joined(cap, slice(None))
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


@analysis(needs=Needs(READS, rows_needed))
def fairness(capture: Capture, *, by: str = "stream", interval: float = 1.0) -> Fairness:
    """Jain's index of the capture's data flows (see the module docstring)."""
    if by not in GROUPINGS:
        raise UsageError(f"unknown grouping {by!r}", hint="by stream, pair, cc or tool")
    if not interval > 0:
        raise UsageError(f"interval must be above 0 s, not {interval}")
    packets = _data_packets(capture)
    groups = _groups(capture, packets, by)
    if len(groups) < 2:
        raise NothingToReport(f"fairness needs two flows or more; {capture.path} has "
                              f"{len(groups)} (flows of {MIN_FLOW_BYTES} payload bytes or "
                              f"more, by {by})",
                              hint="`pcapstats throughput` lists the streams")
    t0 = capture.first_time_ns
    key, t = packets["key"], packets["t"]
    n_keys = len(packets["first_row"])
    earliest = np.full(n_keys, np.iinfo(np.int64).max)
    latest = np.full(n_keys, np.iinfo(np.int64).min)
    np.minimum.at(earliest, key, t)
    np.maximum.at(latest, key, t)
    firsts = np.array([earliest[g["keys"]].min() for g in groups])
    lasts = np.array([latest[g["keys"]].max() for g in groups])
    spanning = _spanning(capture, packets, groups)
    start, end = int(firsts.max()), int(lasts.min())
    common = end > start
    notes = []
    if common:
        spans = np.full(len(groups), (end - start) / 1e9)
        inside = np.flatnonzero((t >= start) & (t <= end))
    else:
        spans = (lasts - firsts) / 1e9
        inside = slice(None)
        notes.append(Note("the flows never all sent at once",
                          detail="each is measured over its own first to last data packet, so "
                                 "the index compares rates at different times"))
    delivered = np.zeros(n_keys, np.int64)
    np.add.at(delivered, key[inside], packets["good"][inside].astype(np.int64))
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
    flows = {"flow": np.array([g["name"] for g in groups], object),
             "streams": np.array([g["streams"] for g in groups], object),
             "goodput_bytes": goodput, "goodput_bps": bps, "share": share}
    series = _series(packets, groups, start, end, int(round(interval * 1e9)), t0, notes) \
        if common \
        else {"time_s": np.zeros(0), "active": np.zeros(0, np.int64), "jain_index": np.zeros(0)}
    result = Fairness({"summary": summary, "flows": flows, "series": series},
                      capture=capture.path, notes=notes)
    if spanning is not None:
        result.clock_touched = touched("fairness", joined=[
            f"the window and goodput of {spanning} flow{'s' if spanning > 1 else ''}"]
            if spanning else [])
    return result


def _joined(cap: Capture, rows) -> np.ndarray:
    """The times of ``rows`` on the timeline joined across the clock's breaks."""
    return cap.clock.pieces().monotonic(cap.column("frame_time_ns")[rows],
                                        cap.column("frame_number")[rows])


def _spanning(cap: Capture, packets: dict, groups: list[dict]) -> int | None:
    """How many flows have packets in several pieces of the capture's clock (None: it never
    broke)."""
    pieces = cap.clock.pieces()
    if len(pieces) == 1:
        return None
    piece = pieces.of(packets["frame"])
    key = packets["key"]
    low = np.full(len(packets["first_row"]), np.iinfo(np.int64).max)
    high = np.full(len(low), -1)
    np.minimum.at(low, key, piece)
    np.maximum.at(high, key, piece)
    return sum(int(high[g["keys"]].max() > low[g["keys"]].min()) for g in groups)


def _data_packets(cap: Capture) -> dict[str, np.ndarray]:
    """Every TCP packet the sequence analysis takes and every UDP packet with its own header:
    its flow key (stream * 2 + direction; UDP's numbered after TCP's, from ``udp_from``), time,
    goodput bytes (payload delivered for the first time) and whether it carried payload; and
    each key's first packet with its own header (``first_row``, which names the flow)."""
    parts, first_rows, udp_from = [], [], 0
    for proto in PROTOS:
        own = own_transport(cap, proto)
        if not own.any():
            continue
        if proto == "tcp":
            rows, resent = resent_packets(cap)
            payload = cap.column("tcp_len")[rows]
            good = np.where(resent, np.uint32(0), payload)
            del resent
        else:
            rows = np.flatnonzero(own)
            payload = good = cap.column("payload_len")[rows]
        key = cap.column(f"{proto}_stream")[rows] * 2 + cap.column("direction")[rows]
        first = np.full(int(key.max()) // 2 * 2 + 2 if len(key) else 0, len(cap))
        np.minimum.at(first, key, rows)
        if proto == "tcp":                   # own headers the analyser skips still name it
            short = np.flatnonzero(own & (cap.column("tcp_hdr_len") < 20))
            short_key = cap.column("tcp_stream")[short] * 2 + cap.column("direction")[short]
            known = short_key < len(first)
            np.minimum.at(first, short_key[known], short[known])
        key += udp_from
        parts.append({"key": key, "t": _joined(cap, rows), "good": good,
                      "data": payload > 0, "frame": cap.column("frame_number")[rows]})
        del rows, key, payload, good
        first_rows.append(first)
        if proto == "tcp":
            udp_from = len(first)
    if not parts:
        raise NothingToReport(f"no TCP or UDP packets in {cap.path} ({cap.holds()})",
                              hint="fairness compares the data flows of TCP/UDP streams")
    out = {k: parts[0][k] if len(parts) == 1 else np.concatenate([p[k] for p in parts])
           for k in parts[0]}
    out["first_row"] = np.concatenate(first_rows)
    out["udp_from"] = udp_from
    return out


def _groups(cap: Capture, packets: dict, by: str) -> list[dict]:
    """The flows to compare: each a name, the streams it adds up, and its flow keys."""
    key, first_row, udp_from = packets["key"], packets["first_row"], packets["udp_from"]
    n_keys = len(first_row)
    seen = np.bincount(key, minlength=n_keys)
    payload = np.bincount(key, weights=packets["good"], minlength=n_keys)
    # a stream's data direction: the one with more payload
    other = np.arange(n_keys) ^ 1
    flows = np.flatnonzero((payload >= MIN_FLOW_BYTES)
                           & ~((seen[other] > 0) & (payload[other] > payload)))
    labels = stream_flows(cap.path) if by not in ("stream", "pair") else {}
    said = stream_labels(cap.path) if by == "stream" else {}
    groups: dict[str, dict] = {}
    for k in flows.tolist():
        proto = "udp" if k >= udp_from else "tcp"
        stream = (k - (udp_from if proto == "udp" else 0)) >> 1
        first = int(first_row[k])
        src, dst = cap.addresses[cap.column("ip_src")[first]], cap.addresses[cap.column("ip_dst")[first]]
        if by == "stream":
            name = (f"{endpoint(src, cap.column(f'{proto}_srcport')[first])} → "
                    f"{endpoint(dst, cap.column(f'{proto}_dstport')[first])}")
            if said.get((proto, stream)):
                name += f" ({said[(proto, stream)]})"
        elif by == "pair":
            name = f"{src} → {dst}"
        else:
            flow = labels.get((proto, stream))
            if flow is None or flow.get(by) is None:
                raise UsageError(f"{proto} stream {stream} of {cap.path} has no {by!r} in a "
                                 "lab sidecar", hint="group by stream or pair instead")
            value = flow[by]
            name = f"{by} {value + 1 if by == 'pair' else value}"
        g = groups.setdefault(name, {"name": name, "streams": [], "keys": []})
        g["streams"].append(f"{proto} {stream}")
        g["keys"].append(k)
    return [{"name": g["name"], "streams": ", ".join(g["streams"]),
             "keys": np.array(g["keys"], np.int64)} for g in groups.values()]


def _series(packets, groups, start: int, end: int, step: int, t0: int, notes: list[str]
            ) -> dict:
    """Per interval of the common window: flows with goodput, and the index.  Every interval
    is listed unless there would be more than DENSE_INTERVALS (or 4 a packet with payload of
    the flows: a clock step or a tiny interval); then only those where a flow sent payload,
    with a note."""
    n = max(int((end - start) // step), 1)
    group_of = np.full(len(packets["first_row"]), -1, np.int32)
    for g, group in enumerate(groups):
        group_of[group["keys"]] = g
    flow = group_of[packets["key"]]
    sent = (flow >= 0) & packets["data"]
    t = packets["t"]
    rows = np.flatnonzero(sent & (t >= start) & (t < start + n * step))
    k = (t[rows] - start) // step
    if n <= max(DENSE_INTERVALS, 4 * int(np.count_nonzero(sent))):
        listed, column = np.arange(n), k
    else:
        listed = np.unique(k)
        column = np.searchsorted(listed, k)
        notes.append(Note(f"{n - len(listed)} intervals of {step / 1e9:g} s with no flow "
                          "sending not listed", detail="the common window spans far more "
                                                       "intervals than there are packets: a "
                                                       "clock step?"))
    cell = flow[rows].astype(np.int64) * len(listed) + column
    per_flow = np.bincount(cell, weights=packets["good"][rows],
                           minlength=len(groups) * len(listed)).reshape(len(groups), len(listed))
    total, squares = per_flow.sum(axis=0), (per_flow ** 2).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        index = np.where(squares > 0, total ** 2 / (len(groups) * squares), np.nan)
    return {"time_s": (start - t0 + listed * step) / 1e9,
            "active": (per_flow > 0).sum(axis=0).astype(np.int64), "jain_index": index}
