"""One capture's numbers for a study, each taken from the analysis that defines it.

A study puts captures side by side, so each capture is reduced to one value a metric.  No
number is computed here from packets: each is read from an analysis' table (the one its single
command prints), and where an analysis gives several rows the rule that picks one is below.

- ``avg_bps``, ``mean_transfer_bps``, ``peak_bps``: the I/O graph of every packet
  (``pcapstats iograph FILE --interval I``): Wireshark's average line over the capture span
  (``avg_capture_bps``), the average over the active time (the transfers' bits over their
  durations, idle gaps over 1 s left out), the busiest interval of ``interval`` seconds.
  (iograph's ``avg_active_bps`` is not used: over every packet its first and last packets are
  the capture's, so it always equals ``avg_bps``);
- ``goodput_bps``: payload delivered for the first time, as fairness defines goodput (TCP
  segments that re-send sequence space left out, UDP payload as captured), over the same
  capture span as ``avg_bps``: throughput's payload bytes of every stream, both directions,
  less the payload of retrans' re-sent segments, x 8 / iograph's ``capture_span_s``;
- ``resent``, ``resent_share``: retrans' ``resent`` in each TCP stream's data direction (the
  direction that sent more payload: what the sender's kernel counts as total_retrans), and
  its share of that direction's packets;
- ``rtt_ms``: rtt's path RTT of the main TCP stream (``tcp_stream``: the one with the most
  payload, as rtt, cwnd and flavour pick by default);
- ``flavour``, ``flavour_confidence``: flavour's label of the main TCP stream, when it
  carried enough to judge (flavour's own MIN_STREAM_BYTES);
- ``udp_loss_pct``, ``jitter_ms``: udp's numbers for the main UDP flow (``udp_stream``: the
  stream and direction with the most datagrams);
- ``jain_index``: fairness' index over the capture's flows (by stream);
- ``verdict``: verify's verdict for the capture (the worst of its streams');
- ``signal_dbm``: the median received signal of a monitor-mode Wi-Fi capture, over the frames
  whose radiotap header has one (the packet column ``radiotap_dbm_antsignal``, Wireshark's
  ``radiotap.dbm_antsignal``: the one number read from the packet table, as no analysis
  summarises it), so a distance study can put throughput beside signal.

A metric whose analysis refuses the capture (no TCP, one flow only, nothing to verify) is
empty -- NaN or "" -- and ``Measured.why`` keeps the analysis' one-line reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..analyses.fairness import fairness
from ..analyses.flavour import MIN_STREAM_BYTES, flavour
from ..analyses.iograph import iograph
from ..analyses.retrans import retrans
from ..analyses.rtt import rtt
from ..analyses.throughput import throughput
from ..analyses.udp import udp
from ..analyses.verify import verify
from ..errors import PcapstatsError, UsageError
from ..reader import as_capture
from ..results import Result
from ..schema import Column
from ..streams import choose_stream

_C = Column
METRICS: tuple[Column, ...] = (
    _C("avg_bps", "float64", "frame bits of every packet / the capture span: Wireshark's I/O "
       "graph average line (iograph avg_capture_bps)", "bit/s", optional=True),
    _C("mean_transfer_bps", "float64", "the average over the active time: frame bits of the "
       "transfers / the sum of their durations, a transfer being a run of packets without an "
       "idle gap over 1 s (iograph mean_transfer_bps)", "bit/s", optional=True),
    _C("peak_bps", "float64", "the busiest interval's frame bits / its length, intervals of "
       "interval_s from the capture's first packet (iograph peak_bps)", "bit/s",
       optional=True),
    _C("goodput_bps", "float64", "payload delivered for the first time x 8 / the capture "
       "span: throughput's payload bytes (every stream, both directions) less the payload of "
       "retrans' re-sent segments (fairness' definition of goodput, over avg_bps' span)",
       "bit/s", optional=True),
    _C("resent", "int64", "segments re-sending sequence space in each TCP stream's data "
       "direction, added up (retrans resent; the sender kernels' total_retrans)", "segments",
       optional=True),
    _C("resent_share", "float64", "resent / the packets of those data directions",
       "fraction", optional=True),
    _C("rtt_ms", "float64", "the path's round trip of the main TCP stream (rtt path_rtt_ms: "
       "ACK RTT at a sender, timestamp echo at a receiver, else the handshake)", "ms",
       optional=True),
    _C("udp_loss_pct", "float64", "lost / sent x 100 of the main UDP flow, as iperf3's server "
       "counts them at this capture point (udp loss_pct)", "%", optional=True),
    _C("jitter_ms", "float64", "RFC 3550 interarrival jitter of the main UDP flow (udp "
       "jitter_ms)", "ms", optional=True),
    _C("jain_index", "float64", "Jain's fairness index of the goodput of the capture's flows "
       "of 10 kB or more, by stream (fairness jain_index; two flows or more)", optional=True),
    _C("flavour", "str", "congestion control of the main TCP stream's sender: reno, cubic, "
       "bbr or unknown (flavour label)"),
    _C("flavour_confidence", "float64", "the share of the evidence for that label, 0..1 "
       "(flavour confidence)", optional=True),
    _C("verdict", "str", "pass, fail or cannot tell: the worst verdict of the streams verify "
       "recognised (simpleperf, iperf3, ping); empty when it recognised none"),
    _C("signal_dbm", "float64", "median received signal strength over the frames whose "
       "radiotap header reports one (packet column radiotap_dbm_antsignal; monitor-mode Wi-Fi "
       "captures only)", "dBm", optional=True),
)
CONTEXT: tuple[Column, ...] = (
    _C("interval_s", "float64", "the I/O graph interval peak_bps is measured over", "s"),
    _C("tcp_stream", "int64", "the main TCP stream: the one with the most payload, whose "
       "rtt_ms and flavour are given", optional=True),
    _C("udp_stream", "int64", "the main UDP flow's udp.stream: the flow with the most "
       "datagrams, whose udp_loss_pct and jitter_ms are given", optional=True),
)
NAMES = tuple(c.name for c in METRICS)
TEXT = tuple(c.name for c in METRICS if c.dtype == "str")
# the analysis each metric comes from; a context column is kept when one of its metrics is
SOURCES = {"avg_bps": "iograph", "mean_transfer_bps": "iograph", "peak_bps": "iograph",
           "goodput_bps": "goodput", "resent": "retrans", "resent_share": "retrans",
           "rtt_ms": "rtt", "flavour": "flavour", "flavour_confidence": "flavour",
           "udp_loss_pct": "udp", "jitter_ms": "udp", "jain_index": "fairness",
           "verdict": "verify", "signal_dbm": "radio"}
NEEDS = {"interval_s": ("avg_bps", "mean_transfer_bps", "peak_bps"),
         "tcp_stream": ("rtt_ms", "flavour", "flavour_confidence"),
         "udp_stream": ("udp_loss_pct", "jitter_ms")}


@dataclass
class Measured:
    """One capture's metrics (NaN or "" where one does not apply, with ``why`` it does not),
    the analysis results a figure or report draws from (``results``, by analysis) and the
    figures a report drew of them in the worker (``figures``: PNG bytes, by name)."""
    capture: str
    values: dict[str, object]
    why: dict[str, str] = field(default_factory=dict)
    results: dict[str, Result] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)


def columns(metrics) -> tuple[Column, ...]:
    """The metric columns asked for, then the context columns they need, in table order."""
    return (*(c for c in METRICS if c.name in metrics),
            *(c for c in CONTEXT if any(m in metrics for m in NEEDS[c.name])))


def measure(capture, *, metrics=NAMES, interval: float = 1.0,
            keep: frozenset = frozenset()) -> Measured:
    """The metrics of one capture (a path or a Capture).  ``keep``: names of analyses whose
    results to keep in ``Measured.results`` (``iograph`` for the study's I/O graphs; the
    report keeps ``throughput`` and ``verify`` too)."""
    cap = as_capture(capture)
    out = Measured(cap.path, {c.name: ("" if c.dtype == "str" else math.nan)
                              for c in columns(metrics)})
    wanted = {SOURCES[m] for m in metrics}
    if "goodput" in wanted:                    # payload, less what was re-sent, over the span
        wanted |= {"iograph", "throughput", "retrans"}
    got = {}
    for name in ("iograph", "throughput", "retrans", "rtt", "flavour", "udp", "fairness",
                 "verify", "radio"):
        if name in wanted or name in keep:
            try:
                got[name] = _RUN[name](cap, interval)
            except PcapstatsError as e:
                out.why[name] = str(e)
    values = _values(got, out.why, interval)
    out.values.update({k: v for k, v in values.items() if k in out.values})
    out.results = {k: v for k, v in got.items() if k in keep and isinstance(v, Result)}
    return out


def _flavour(cap):
    """flavour of the main TCP stream, if flavour itself would judge it (it lists the streams
    of MIN_STREAM_BYTES or more)."""
    main = choose_stream(cap, None)
    if main.payload_bytes < MIN_STREAM_BYTES:
        raise UsageError(f"TCP stream {main.stream} carried {main.payload_bytes} payload bytes, "
                         f"under the {MIN_STREAM_BYTES} flavour needs to judge", path=cap.path)
    return flavour(cap, stream=main.stream)


def _signal(cap) -> float:
    """Median of the radiotap signal column over the frames that have it."""
    has = cap.present("radiotap_dbm_antsignal")
    if not has.any():
        raise UsageError("no radiotap signal strength in the capture (only monitor-mode Wi-Fi "
                         "captures have one)", path=cap.path)
    return float(np.median(cap.column("radiotap_dbm_antsignal")[has]))


_RUN = {
    "iograph": lambda cap, interval: iograph(cap, interval=interval),
    "throughput": lambda cap, interval: throughput(cap, interval=interval),
    "retrans": lambda cap, interval: retrans(cap),
    "rtt": lambda cap, interval: rtt(cap),
    "flavour": lambda cap, interval: _flavour(cap),
    "udp": lambda cap, interval: udp(cap),
    "fairness": lambda cap, interval: fairness(cap),
    "verify": lambda cap, interval: verify(cap),
    "radio": lambda cap, interval: _signal(cap),
}


def _values(got: dict, why: dict, interval: float) -> dict[str, object]:
    """Every metric the results allow (the module docstring's rules)."""
    v: dict[str, object] = {"interval_s": interval}
    io = got.get("iograph")
    if io is not None and not io.empty:
        s = io.table("summary")
        v.update(avg_bps=s["avg_capture_bps"][0], mean_transfer_bps=s["mean_transfer_bps"][0],
                 peak_bps=s["peak_bps"][0], interval_s=io.interval_s)
    r = got.get("retrans")
    if r is not None:
        v.update(_resent(r))
    if io is not None and not io.empty and r is not None and "throughput" in got:
        v["goodput_bps"] = _goodput(got["throughput"], r, io)
    if "rtt" in got:
        path = got["rtt"].table("path")
        v.update(rtt_ms=path["path_rtt_ms"][0], tcp_stream=got["rtt"].stream)
    if "flavour" in got:
        row = got["flavour"].table()
        v.update(flavour=row["label"][0], flavour_confidence=row["confidence"][0],
                 tcp_stream=row["stream"][0])
    if "udp" in got:
        flows = got["udp"].table()
        main = int(np.argmax(flows["datagrams"]))
        v.update(udp_loss_pct=flows["loss_pct"][main], jitter_ms=flows["jitter_ms"][main],
                 udp_stream=flows["stream"][main])
    if "fairness" in got:
        v["jain_index"] = got["fairness"].table("summary")["jain_index"][0]
    if "radio" in got:
        v["signal_dbm"] = got["radio"]
    if "verify" in got:
        result = got["verify"]
        if result.verdicts:
            v["verdict"] = result.verdict
        else:
            why["verify"] = "verify recognised no simpleperf, iperf3 or ping exchange"
    return v


def data_directions(counts: dict) -> np.ndarray:
    """Rows of retrans' counts table that are their stream's data direction (the direction
    that sent more payload; a_to_b on a tie)."""
    stream, payload = counts["stream"], counts["payload_bytes"]
    keep = np.zeros(len(stream), bool)
    for s in np.unique(stream):
        rows = np.flatnonzero(stream == s)
        keep[rows[np.argmax(payload[rows])]] = True   # rows come a_to_b first
    return keep


def _resent(r) -> dict[str, float]:
    counts = r.table("counts")
    if not len(counts["stream"]):
        return {}
    data = data_directions(counts)
    resent, packets = int(counts["resent"][data].sum()), int(counts["packets"][data].sum())
    return {"resent": float(resent), "resent_share": resent / packets if packets else math.nan}


def resent_payload_bytes(r) -> int:
    """Payload bytes of the segments retrans marks re-sent (its events table)."""
    events = r.table("events")
    flagged = np.array([e == "resent" or e.startswith("resent+") for e in events["events"]],
                       bool)
    return int(events["tcp_len"][flagged].sum())


def _goodput(t, r, io) -> float:
    streams = t.table()
    if not len(streams["stream"]):
        return math.nan                     # no TCP or UDP: no payload to deliver
    payload = int(streams["payload_bytes_a_to_b"].sum() + streams["payload_bytes_b_to_a"].sum())
    span = io.table("summary")["capture_span_s"][0]
    return (payload - resent_payload_bytes(r)) * 8 / span if span > 0 else math.nan
