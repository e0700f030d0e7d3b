"""One capture's numbers for a study, each taken from the analysis that defines it.

A study puts captures side by side, so each capture is reduced to one value a metric.  No
number is computed here from packets: each is read from an analysis' table (the one its single
command prints), under the name and definition of pcapstats.catalogue; where an analysis gives
several rows, the rule that picks one is below.

- ``goodput_bps``: payload delivered for the first time, as fairness defines goodput (TCP
  segments that re-send sequence space left out, UDP payload as captured), over the capture
  span: throughput's payload bytes of every stream, both directions, less the payload of
  retrans' re-sent segments, x 8 / iograph's ``capture_span_s``;
- ``utilisation``: goodput_bps / the bottleneck rate the lab sidecar asked (none without one);
- ``avg_capture_bps``, ``avg_transfer_bps``, ``peak_bps``: the I/O graph of every packet
  (``pcapstats iograph FILE --interval I``): frames at this capture point, headers included,
  over the capture span, over the transfers' time (idle gaps over 1 s left out), and the
  busiest interval of ``interval`` seconds (iograph's ``avg_active_bps`` is not used: over
  every packet its first and last packets are the capture's, so it equals the capture avg);
- ``resent``, ``resent_share``: retrans' ``resent`` in the data direction (the direction that
  sent more payload: what the sender's kernel counts as total_retrans) of each TCP *transfer*,
  added up, and its share of those directions' packets;
- ``rtt_min_ms``, ``rtt_median_ms``: rtt's path estimate of the main TCP transfer (``tcp_stream``:
  the one with the most payload, as rtt, cwnd and flavour pick by default): the base RTT and
  the RTT under load, side by side so queueing shows;
- ``flavour``, ``flavour_confidence``: flavour's verdict on the main TCP transfer, when it
  carried enough to judge (flavour's own MIN_STREAM_BYTES);
- ``limit``, ``mathis_bps``, ``padhye_bps``: what held the main TCP transfer's sender back
  longest, and what the Mathis and Padhye models give it (limits' rows of it);
- ``datagram_loss``, ``capture_jitter_ms``, ``app_jitter_ms``: udp's numbers for the main UDP
  flow (``udp_stream``: the stream and direction with the most datagrams);
- ``jain_index``, ``convergence_s``: fairness' index over the capture's flows (by stream), and
  the time they took to converge within 10 % of the fair share;
- ``verdict``: verify's verdict for the capture (the worst of its streams');
- ``signal_dbm``, ``datarate_bps``, ``retry_share``: of a monitor-mode Wi-Fi capture, wifi's
  ``main`` row: the 802.11 data frames that went the way that carried the most bytes (to the
  access point, or from it: the transfer's sender), or every frame when the capture has no
  data frames (``wifi_frames`` says which); so a distance study puts goodput beside the
  signal, the data rate the sender chose and the share it had to send again.

A capture whose clock broke (:mod:`pcapstats.clock`: a step back, a forward jump of an hour or
more) is measured on its timeline joined across the breaks (``Capture.joined``), so no rate,
duration, RTT or verdict is a step's, and the capture's clock warning says so; the counts are
the same either way.

A TCP *transfer* is a stream that carried at least MIN_TRANSFER_SHARE of the capture's payload:
so the TCP metrics of a UDP test (iperf3 -u) never come from its TCP control connection, whose
re-sends and RTT say nothing of the test.  A metric whose analysis refuses the capture (no TCP,
one flow only, nothing to verify) is empty -- NaN or "" -- and ``Measured.why`` keeps the
analysis' one-line reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import catalogue
from ..analyses.cwnd import LIMITS
from ..analyses.fairness import fairness
from ..analyses.flavour import MIN_STREAM_BYTES, flavour
from ..analyses.iograph import iograph
from ..analyses.limits import limits
from ..analyses.retrans import retrans
from ..analyses.rtt import rtt
from ..analyses.throughput import throughput
from ..analyses.udp import udp
from ..analyses.verify import verify
from ..analyses.wifi import wifi
from ..clock import restating, touched
from ..errors import PcapstatsError, UsageError
from ..reader import as_capture
from ..results import Result
from ..schema import Column
from ..sidecar import asked_rate_bps
from ..streams import choose_stream

MIN_TRANSFER_SHARE = 0.01     # a TCP stream with less of the payload is no transfer

_C = Column
_metric = catalogue.column
METRICS: tuple[Column, ...] = (
    _metric("goodput_bps", doc="here over the capture span: throughput's payload bytes (every "
            "stream, both directions) less the payload of retrans' re-sent segments"),
    _metric("utilisation", doc="the run's asked rate (a chain: its slowest link)"),
    _metric("avg_capture_bps", doc="here of every packet (iograph)"),
    _metric("avg_transfer_bps", doc="here of every packet, transfers split at idle gaps over "
            "1 s (iograph)"),
    _metric("peak_bps", doc="here of every packet (iograph)"),
    _metric("transfers", doc="here of every packet (iograph)"),
    _metric("resent", doc="here in each TCP transfer's data direction, added up (retrans)"),
    _metric("resent_share", doc="the data directions of the TCP transfers"),
    _metric("rtt_min_ms", doc="here of the main TCP transfer's path estimate (rtt's path table)"),
    _metric("rtt_median_ms", doc="here of the main TCP transfer's path estimate (rtt's path "
            "table)"),
    _metric("datagram_loss", doc="here of the main UDP flow (udp)"),
    _metric("capture_jitter_ms", doc="here of the main UDP flow (udp)"),
    _metric("app_jitter_ms", doc="here of the main UDP flow (udp)"),
    _metric("jain_index", doc="here over the capture's flows of 10 kB or more, by stream "
            "(fairness; two flows or more)"),
    _metric("convergence_s", doc="here of the capture's flows of 10 kB or more, by stream "
            "(fairness; two flows or more)"),
    _metric("limit", doc="here of the main TCP transfer (limits)", values=LIMITS),
    _metric("mathis_bps", doc="here of the main TCP transfer (limits' models)"),
    _metric("padhye_bps", doc="here of the main TCP transfer (limits' models)"),
    _metric("flavour", doc="here of the main TCP transfer (flavour)"),
    _metric("flavour_confidence"),
    _metric("verdict", doc="here the worst of the streams verify recognised; empty when it "
            "recognised none"),
    _metric("signal_dbm", doc="here of wifi's main row (wifi_frames)"),
    _metric("datarate_bps", doc="here of wifi's main row (wifi_frames)"),
    _metric("retry_share", doc="here of wifi's main row (wifi_frames)"),
)
CONTEXT: tuple[Column, ...] = (
    _C("interval_s", "float64", "the I/O graph interval peak_bps is measured over", "s"),
    _C("tcp_stream", "int64", "the main TCP transfer: the stream with the most payload, whose "
       "rtt_min_ms, rtt_median_ms and flavour are given", optional=True),
    _C("mss_bytes", "int64", "the main TCP transfer's MSS (limits' models), for the models' "
       "curves", "bytes", optional=True),
    _C("udp_stream", "int64", "the main UDP flow's udp.stream: the flow with the most "
       "datagrams, whose datagram_loss and capture_jitter_ms are given", optional=True),
    _C("wifi_frames", "str", "the 802.11 frames signal_dbm, datarate_bps and retry_share are "
       "of (wifi's main row): the data frames to AP or from AP that carried the most bytes, "
       "or all frames"),
)
NAMES = tuple(c.name for c in METRICS)
TEXT = tuple(c.name for c in METRICS if c.dtype == "str")
# the analysis each metric comes from; a context column is kept when one of its metrics is
SOURCES = {"goodput_bps": "goodput", "utilisation": "goodput", "avg_capture_bps": "iograph",
           "avg_transfer_bps": "iograph", "peak_bps": "iograph", "transfers": "iograph",
           "resent": "retrans",
           "resent_share": "retrans", "rtt_min_ms": "rtt", "rtt_median_ms": "rtt",
           "flavour": "flavour", "flavour_confidence": "flavour", "limit": "limits",
           "mathis_bps": "limits", "padhye_bps": "limits", "datagram_loss": "udp",
           "capture_jitter_ms": "udp", "app_jitter_ms": "udp", "jain_index": "fairness",
           "convergence_s": "fairness", "verdict": "verify", "signal_dbm": "wifi",
           "datarate_bps": "wifi", "retry_share": "wifi"}
NEEDS = {"interval_s": ("avg_capture_bps", "avg_transfer_bps", "peak_bps", "transfers"),
         "tcp_stream": ("rtt_min_ms", "rtt_median_ms", "flavour", "flavour_confidence",
                        "limit", "mathis_bps", "padhye_bps"),
         "mss_bytes": ("mathis_bps", "padhye_bps"),
         "udp_stream": ("datagram_loss", "capture_jitter_ms", "app_jitter_ms"),
         "wifi_frames": ("signal_dbm", "datarate_bps", "retry_share")}


@dataclass
class Measured:
    """One capture's metrics (NaN or "" where one does not apply, with ``why`` it does not),
    the analysis results a figure or report draws from (``results``, by analysis) and the
    figures a report drew of them in the worker (``figures``: PNG bytes, by name)."""
    capture: str
    values: dict[str, object]
    why: dict[str, str] = field(default_factory=dict)
    holds: str = ""                      # what the capture holds (Capture.holds)
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
    with restating() as clock:        # its clock warning says what the breaks touched
        cap = as_capture(capture)
        broke = len(cap.clock.pieces()) > 1
        measured = _measure(cap.joined(), metrics, interval, keep)
        if broke:
            clock.says = touched("compare", joined=[
                "every number read from time (rates, RTTs, jitter, Jain's index, "
                "convergence, flavour, limits: its timeline joined across them)"])
    return measured


def _measure(cap, metrics, interval: float, keep: frozenset) -> Measured:
    """measure() of a Capture (its times joined across clock breaks already)."""
    out = Measured(cap.path, {c.name: ("" if c.dtype == "str" else math.nan)
                              for c in columns(metrics)}, holds=cap.holds())
    wanted = {SOURCES[m] for m in metrics}
    if "goodput" in wanted:                    # payload, less what was re-sent, over the span
        wanted |= {"iograph", "throughput", "retrans"}
    if wanted & {"retrans", "rtt", "flavour", "limits"}:   # which TCP streams are transfers
        wanted.add("throughput")
    got: dict[str, object] = {}

    def run(name: str, function) -> None:
        if name in wanted or name in keep:
            try:
                got[name] = function()
            except PcapstatsError as e:
                out.why[name] = str(e)
    run("iograph", lambda: iograph(cap, interval=interval))
    run("throughput", lambda: throughput(cap, interval=interval))
    transfers = tcp_transfers(got["throughput"]) if "throughput" in got else []
    main = transfers[0] if transfers else None
    if main is None and "throughput" in got:
        for name in ("retrans", "rtt", "flavour", "limits"):
            out.why.setdefault(name, NO_TRANSFER)
    run("retrans", lambda: retrans(cap))
    if main is not None:
        run("rtt", lambda: rtt(cap, stream=main))
        run("flavour", lambda: _flavour(cap, main))
        run("limits", lambda: limits(cap, stream=main))
    run("udp", lambda: udp(cap))
    run("fairness", lambda: fairness(cap))
    run("verify", lambda: verify(cap))
    run("wifi", lambda: wifi(cap, interval=interval))
    values = _values(got, out.why, interval, transfers)
    if "utilisation" in out.values:
        values["utilisation"] = _utilisation(values.get("goodput_bps", math.nan),
                                             asked_rate_bps(cap.path), out.why)
    out.values.update({k: v for k, v in values.items() if k in out.values})
    out.results = {k: v for k, v in got.items() if k in keep and isinstance(v, Result)}
    return out


NO_TRANSFER = (f"no TCP transfer: no TCP stream carried {MIN_TRANSFER_SHARE:.0%} of the "
               "capture's payload (a UDP test's control connection is not one)")


def tcp_transfers(t) -> list[int]:
    """The TCP streams that carried at least MIN_TRANSFER_SHARE of the capture's payload (both
    directions, every stream), the one with the most payload first (throughput's table)."""
    streams = t.table()
    payload = streams["payload_bytes_a_to_b"] + streams["payload_bytes_b_to_a"]
    total = int(payload.sum())
    tcp = np.flatnonzero((streams["proto"] == "tcp") & (payload > 0)
                         & (payload >= MIN_TRANSFER_SHARE * total))
    order = tcp[np.lexsort((streams["stream"][tcp], -payload[tcp]))]
    return [int(s) for s in streams["stream"][order]]


def _flavour(cap, stream: int):
    """flavour of the main TCP transfer, if flavour itself would judge it (it lists the
    streams of MIN_STREAM_BYTES or more)."""
    main = choose_stream(cap, stream)
    if main.payload_bytes < MIN_STREAM_BYTES:
        raise UsageError(f"TCP stream {main.stream} carried {main.payload_bytes} payload bytes, "
                         f"under the {MIN_STREAM_BYTES} flavour needs to judge", path=cap.path)
    return flavour(cap, stream=main.stream)


def _values(got: dict, why: dict, interval: float, transfers: list[int]) -> dict[str, object]:
    """Every metric the results allow (the module docstring's rules)."""
    v: dict[str, object] = {"interval_s": interval}
    io = got.get("iograph")
    if io is not None and not io.empty:
        s = io.table("summary")
        v.update(avg_capture_bps=s["avg_capture_bps"][0],
                 avg_transfer_bps=s["avg_transfer_bps"][0], peak_bps=s["peak_bps"][0],
                 transfers=s["transfers"][0],
                 interval_s=io.interval_s)
    r = got.get("retrans")
    if r is not None and transfers:
        v.update(_resent(r, transfers))
    # a capture without TCP (retrans refuses it) re-sent nothing: its goodput is its UDP payload
    no_tcp = "throughput" in got and not (got["throughput"].table()["proto"] == "tcp").any()
    if io is not None and not io.empty and (r is not None or no_tcp) and "throughput" in got:
        v["goodput_bps"] = _goodput(got["throughput"], r, io)
    if "rtt" in got:
        path = got["rtt"].table("path")
        v.update(rtt_min_ms=path["rtt_min_ms"][0], rtt_median_ms=path["rtt_median_ms"][0],
                 tcp_stream=got["rtt"].stream)
    if "flavour" in got:
        row = got["flavour"].table()
        v.update(flavour=row["flavour"][0], flavour_confidence=row["flavour_confidence"][0],
                 tcp_stream=row["stream"][0])
    if "limits" in got:
        models = got["limits"].table("models")
        v.update(limit=got["limits"].table()["limit"][0], mathis_bps=models["mathis_bps"][0],
                 padhye_bps=models["padhye_bps"][0], mss_bytes=models["mss_bytes"][0])
    if "udp" in got:
        flows = got["udp"].table()
        main = int(np.argmax(flows["datagrams"]))
        v.update(datagram_loss=flows["datagram_loss"][main],
                 capture_jitter_ms=flows["capture_jitter_ms"][main],
                 app_jitter_ms=flows["app_jitter_ms"][main], udp_stream=flows["stream"][main])
    if "fairness" in got:
        summary = got["fairness"].table("summary")
        v.update(jain_index=summary["jain_index"][0], convergence_s=summary["convergence_s"][0])
    if "wifi" in got:
        frames = got["wifi"].table("frames")
        main = int(np.flatnonzero(frames["main"])[0])
        v.update(signal_dbm=frames["signal_dbm"][main], datarate_bps=frames["datarate_bps"][main],
                 retry_share=frames["retry_share"][main], wifi_frames=frames["frames"][main])
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


def _resent(r, transfers: list[int]) -> dict[str, float]:
    counts = r.table("counts")
    if not len(counts["stream"]):
        return {}
    data = data_directions(counts) & np.isin(counts["stream"], transfers)
    resent, packets = int(counts["resent"][data].sum()), int(counts["packets"][data].sum())
    return {"resent": float(resent), "resent_share": resent / packets if packets else math.nan}


def resent_payload_bytes(r) -> int:
    """Payload bytes of the segments retrans marks re-sent (its events table)."""
    events = r.table("events")
    flagged = np.array([e == "resent" or e.startswith("resent+") for e in events["events"]],
                       bool)
    return int(events["tcp_len"][flagged].sum())


def _utilisation(goodput_bps: float, rate_bps: float | None, why: dict) -> float:
    if rate_bps is None:
        why["utilisation"] = ("no bottleneck rate to compare with: no lab sidecar beside the "
                              "capture asked one")
        return math.nan
    return goodput_bps / rate_bps


def _goodput(t, r, io) -> float:
    streams = t.table()
    if not len(streams["stream"]):
        return math.nan                     # no TCP or UDP: no payload to deliver
    payload = int(streams["payload_bytes_a_to_b"].sum() + streams["payload_bytes_b_to_a"].sum())
    span = io.table("summary")["capture_span_s"][0]
    resent = resent_payload_bytes(r) if r is not None else 0
    return (payload - resent) * 8 / span if span > 0 else math.nan
