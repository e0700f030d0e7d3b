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

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..errors import UsageError
from ..render import Shown
from ..results import Result
from ..schema import Column, TableSpec
from ..sidecar import stream_flows, stream_labels
from ..streams import endpoint, own_transport
from .tcp_analysis import resent_packets

MIN_FLOW_BYTES = 10_000
DENSE_INTERVALS = 1_000_000
GROUPINGS = ("stream", "pair", "cc", "tool")
_C = Column
SUMMARY = TableSpec("summary", "one row: the index over the run", (
    _C("by", "str", "what a flow is: stream, pair (host pair), or a sidecar field"),
    _C("flows", "int64", "flows compared"),
    _C("jain_index", "float64", "Jain's fairness index of their goodput"),
    _C("window", "str", "'common' (every flow sending) or 'own' (each flow's own span: they "
       "never overlapped)", values=("common", "own")),
    _C("window_start_s", "float64", "common window start, seconds since the capture's first "
       "packet", "s", optional=True),
    _C("window_s", "float64", "common window length", "s", optional=True),
    _C("total_bps", "float64", "the flows' goodput added up", "bit/s"),
    _C("min_share", "float64", "the smallest flow's share of the total", "fraction"),
    _C("max_share", "float64", "the largest flow's share of the total", "fraction"),
))
FLOWS = TableSpec("flows", "one row per flow compared", (
    _C("flow", "str", "the flow: endpoints, host pair or sidecar value"),
    _C("streams", "str", "the TCP/UDP streams it adds up (proto and index)"),
    _C("goodput_bytes", "int64", "payload delivered for the first time within the window",
       "bytes"),
    _C("goodput_bps", "float64", "goodput_bytes x 8 / the window", "bit/s"),
    _C("share", "float64", "its part of the flows' total", "fraction"),
))
SERIES = TableSpec("series", "one row per interval of the common window", (
    _C("time_s", "float64", "interval start, seconds since the capture's first packet", "s"),
    _C("active", "int64", "flows with goodput in the interval"),
    _C("jain_index", "float64", "the index over every flow's goodput in the interval"),
))


class Fairness(Result):
    """The index over the run (``summary``), the flows (``flows``), per interval (``series``)."""
    analysis = "fairness"
    specs = (SUMMARY, FLOWS, SERIES)
    series = "series"
    draws = True
    view = {"series": (Shown("time", "time_s"), Shown("active flows", "active"),
                       Shown("Jain index", "jain_index")),
            "summary": (Shown("by", "by"), Shown("flows", "flows"),
                        Shown("Jain index", "jain_index"), Shown("window", "window"),
                        Shown("length", "window_s"), Shown("total", "total_bps"),
                        Shown("min share", "min_share"), Shown("max share", "max_share")),
            "flows": (Shown("flow", "flow", wrap=True), Shown("streams", "streams", minor=True),
                      Shown("goodput", "goodput_bps"), Shown("share", "share"))}
    legend = {"summary": "Jain's index of goodput (first-time payload) over the window where "
                         "every flow was sending; --flows for each flow, --series per interval."}

    def _figure(self, **options):
        from ..plots.fairness import fairness_figure  # lazy: matplotlib only for a figure
        return fairness_figure(self, **options)


def jain(x) -> float:
    """Jain's index of the values x (nan for none, or all zero)."""
    x = np.asarray(x, dtype=np.float64)
    total = (x ** 2).sum()
    return float(x.sum() ** 2 / (len(x) * total)) if len(x) and total > 0 else float("nan")


@analysis()
def fairness(capture: Capture, *, by: str = "stream", interval: float = 1.0) -> Fairness:
    """Jain's index of the capture's data flows (see the module docstring)."""
    if by not in GROUPINGS:
        raise UsageError(f"unknown grouping {by!r}", hint="by stream, pair, cc or tool")
    if not interval > 0:
        raise UsageError(f"interval must be above 0 s, not {interval}")
    packets = _data_packets(capture)
    groups = _groups(capture, packets, by)
    if len(groups) < 2:
        raise UsageError(f"fairness needs two flows or more; {capture.path} has "
                         f"{len(groups)} (flows of {MIN_FLOW_BYTES} payload bytes or more, "
                         f"by {by})", hint="`pcapstats throughput` lists the streams")
    t0 = int(capture.column("frame_time_ns")[0])
    firsts = np.array([packets["t"][g["rows"]].min() for g in groups])
    lasts = np.array([packets["t"][g["rows"]].max() for g in groups])
    start, end = int(firsts.max()), int(lasts.min())
    common = end > start
    notes = []
    if common:
        spans = np.full(len(groups), (end - start) / 1e9)
        inside = [(packets["t"][g["rows"]] >= start) & (packets["t"][g["rows"]] <= end)
                  for g in groups]
    else:
        spans = (lasts - firsts) / 1e9
        inside = [np.ones(len(g["rows"]), bool) for g in groups]
        notes.append("the flows never all sent at once: each is measured over its own first "
                     "to last data packet, so the index compares rates at different times")
    good = np.array([int(packets["good"][g["rows"]][m].sum()) for g, m in zip(groups, inside)])
    bps = np.where(spans > 0, good * 8 / np.where(spans > 0, spans, 1), np.nan)
    total = float(np.nansum(bps))
    share = bps / total if total > 0 else np.full(len(bps), np.nan)
    summary = {"by": np.array([by], object), "flows": np.array([len(groups)]),
               "jain_index": np.array([jain(np.nan_to_num(bps))]),
               "window": np.array(["common" if common else "own"], object),
               "window_start_s": np.array([(start - t0) / 1e9 if common else np.nan]),
               "window_s": np.array([(end - start) / 1e9 if common else np.nan]),
               "total_bps": np.array([total]),
               "min_share": np.array([np.nanmin(share)]), "max_share": np.array([np.nanmax(share)])}
    flows = {"flow": np.array([g["name"] for g in groups], object),
             "streams": np.array([g["streams"] for g in groups], object),
             "goodput_bytes": good, "goodput_bps": bps, "share": share}
    series = _series(packets, groups, start, end, int(round(interval * 1e9)), t0, notes) \
        if common \
        else {"time_s": np.zeros(0), "active": np.zeros(0, np.int64), "jain_index": np.zeros(0)}
    return Fairness({"summary": summary, "flows": flows, "series": series},
                    capture=capture.path, notes=notes)


def _data_packets(cap: Capture) -> dict[str, np.ndarray]:
    """Every TCP and UDP packet: its flow key (proto, stream, direction), time, and goodput
    bytes (payload delivered for the first time)."""
    parts = []
    tcp_rows = np.flatnonzero(own_transport(cap, "tcp"))
    if len(tcp_rows):
        rows, resent = resent_packets(cap)
        parts.append({"proto": np.zeros(len(rows), np.int64),
                      "stream": cap.column("tcp_stream")[rows].astype(np.int64),
                      "direction": cap.column("direction")[rows].astype(np.int64),
                      "t": cap.column("frame_time_ns")[rows].astype(np.int64),
                      "good": np.where(resent, 0, cap.column("tcp_len")[rows]).astype(np.int64)})
    udp_rows = np.flatnonzero(own_transport(cap, "udp"))
    if len(udp_rows):
        parts.append({"proto": np.ones(len(udp_rows), np.int64),
                      "stream": cap.column("udp_stream")[udp_rows].astype(np.int64),
                      "direction": cap.column("direction")[udp_rows].astype(np.int64),
                      "t": cap.column("frame_time_ns")[udp_rows].astype(np.int64),
                      "good": cap.column("payload_len")[udp_rows].astype(np.int64)})
    if not parts:
        raise UsageError(f"no TCP or UDP packets in {cap.path}",
                         hint="fairness compares the data flows of TCP/UDP streams")
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["key"] = (out["proto"] << 40) | (out["stream"] << 1) | out["direction"]
    return out


def _groups(cap: Capture, packets: dict, by: str) -> list[dict]:
    """The flows to compare: each a name, the streams it adds up, and its packet rows."""
    keys, inverse = np.unique(packets["key"], return_inverse=True)
    payload = np.bincount(inverse, weights=packets["good"], minlength=len(keys))
    # a stream's data direction: the one with more payload
    stream_key = keys >> 1
    flows = []
    for k, key in enumerate(keys):
        other = np.flatnonzero((stream_key == stream_key[k]) & (keys != key))
        if payload[k] < MIN_FLOW_BYTES or (len(other) and payload[other[0]] > payload[k]):
            continue
        flows.append(k)
    labels = stream_flows(cap.path) if by not in ("stream", "pair") else {}
    said = stream_labels(cap.path) if by == "stream" else {}
    groups: dict[str, dict] = {}
    for k in flows:
        rows = np.flatnonzero(inverse == k)
        proto = "udp" if keys[k] >> 40 else "tcp"
        stream = int((keys[k] >> 1) & ((1 << 39) - 1))
        first = _first_row(cap, proto, stream, int(keys[k] & 1))
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
        g = groups.setdefault(name, {"name": name, "streams": [], "rows": []})
        g["streams"].append(f"{proto} {stream}")
        g["rows"].append(rows)
    out = []
    for g in groups.values():
        out.append({"name": g["name"], "streams": ", ".join(g["streams"]),
                    "rows": np.concatenate(g["rows"])})
    return out


def _first_row(cap: Capture, proto: str, stream: int, direction: int) -> int:
    rows = np.flatnonzero(own_transport(cap, proto)
                          & (cap.column(f"{proto}_stream") == stream)
                          & (cap.column("direction") == direction))
    return int(rows[0])


def _series(packets, groups, start: int, end: int, step: int, t0: int, notes: list[str]
            ) -> dict:
    """Per interval of the common window: flows with goodput, and the index.  Every interval
    is listed unless there would be more than DENSE_INTERVALS (or 4 a packet: a clock step
    or a tiny interval); then only those where some flow sent, with a note."""
    n = max(int((end - start) // step), 1)
    rows = np.concatenate([g["rows"] for g in groups])
    flow = np.repeat(np.arange(len(groups)), [len(g["rows"]) for g in groups])
    t = packets["t"][rows]
    inside = (t >= start) & (t < start + n * step)
    k = (t[inside] - start) // step
    if n <= max(DENSE_INTERVALS, 4 * len(rows)):
        listed = np.arange(n)
    else:
        listed = np.unique(k)
        notes.append(f"{n - len(listed)} intervals of {step / 1e9:g} s in which no flow sent "
                     "are not listed (the common window spans far more intervals than there "
                     "are packets: a clock step?)")
    column = np.searchsorted(listed, k)
    per_flow = np.zeros((len(groups), len(listed)))
    np.add.at(per_flow, (flow[inside], column), packets["good"][rows][inside])
    total, squares = per_flow.sum(axis=0), (per_flow ** 2).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        index = np.where(squares > 0, total ** 2 / (len(groups) * squares), np.nan)
    return {"time_s": (start - t0 + listed * step) / 1e9,
            "active": (per_flow > 0).sum(axis=0).astype(np.int64), "jain_index": index}
