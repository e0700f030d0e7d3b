"""The metric catalogue: every quantity a study reports, defined once.

A study copies numbers from several commands into one report, so a number must mean the same
wherever it is shown.  Each :class:`Metric` here is one quantity: its ``name`` (the column name
in every table, CSV, JSON and Parquet file that carries it, and what ``compare -m`` and
``pcapstats columns`` take), its ``heading`` (what a human table prints over it), its
definition in one sentence, its unit, and ``computed_by``: the analysis tables that compute it,
the first being where it is defined.  Two definitions get two names (``avg_stream_bps``: one
direction over the stream's own duration, as Wireshark's Conversations; ``avg_capture_bps``:
over the capture span, as Wireshark's I/O graph), and every table that carries a name carries
that definition, for the rows it has (a stream, a direction, a capture) and the window it says
(``interval_s`` for a peak; the capture span, or fairness' common window, for goodput).
``tests/test_consistency.py`` runs every command on every shipped capture and holds each name
to one value.

A direction of a stream is the same metric with ``_a_to_b`` / ``_b_to_a`` after its name
(``avg_stream_bps_a_to_b``), its heading with ``A→B`` / ``B→A``.

Units are the vocabulary's (pcapstats.results): ``bit/s``, ``bytes``, ``ms``, ``s``,
``fraction`` (a share 0..1, shown as %), ``segments``, ``packets``; ``schema.UNITLESS`` for a
ratio or a score; None for a count that is not of packets, or text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .errors import UsageError
from .schema import UNITLESS, Column

DIRECTIONS = {"a_to_b": "A→B", "b_to_a": "B→A"}


@dataclass(frozen=True)
class Metric:
    """One quantity (see the module docstring)."""
    name: str
    heading: str
    doc: str
    unit: str | None
    computed_by: tuple[str, ...]      # "analysis.table" where it is a column; the first defines
    dtype: str = "float64"
    aliases: tuple[str, ...] = ()     # other words people type for it (old names, headings)

    def column(self, direction: str | None = None, *, doc: str | None = None,
               optional: bool | None = None, values: tuple[str, ...] = ()) -> Column:
        """The metric as a table's column (for one ``direction`` of a stream, or the row's
        whole group); ``doc`` adds what the row is in that table to the definition."""
        name, heading = self.name, self.heading
        if direction is not None:
            name, heading = f"{name}_{direction}", f"{heading} {DIRECTIONS[direction]}"
        text = self.doc if doc is None else f"{self.doc}; {doc}"
        if optional is None:
            optional = self.dtype != "str"
        return Column(name, self.dtype, text, self.unit, optional=optional, values=values,
                      heading=heading)


_M = Metric
METRICS: tuple[Metric, ...] = (
    # -- rates: frames on the wire, at this capture point, headers included --------------------
    _M("avg_stream_bps", "stream avg", "frame bits sent / the stream's duration (its first to "
       "last packet, both directions): Wireshark's Conversations Bits/s A→B, frames at this "
       "capture point, headers included", "bit/s", ("throughput.streams",),
       aliases=("bps",)),
    _M("avg_capture_bps", "capture avg", "frame bits of the row's packets / the capture span "
       "(the capture's first to last packet): Wireshark's I/O graph average line, frames at "
       "this capture point, headers included", "bit/s",
       ("iograph.summary", "compare", "hierarchy.protocols"), aliases=("avg", "avg_bps")),
    _M("avg_active_bps", "active avg", "frame bits of the row's packets / their own span, "
       "first to last packet (idle before and after left out)", "bit/s", ("iograph.summary",)),
    _M("avg_transfer_bps", "transfer avg", "frame bits of the row's transfers (runs of packets "
       "without an idle gap over gap_s) / the sum of their durations: the rate while "
       "transferring", "bit/s", ("iograph.summary", "iograph.transfers", "compare"),
       aliases=("mean_transfer_bps", "active", "transferring")),
    _M("transfers", "transfers", "runs of the row's packets with no idle gap longer than gap_s "
       "(1 s in compare) that last longer than an instant (a lone ARP is not one): a file sent "
       "ten times five seconds apart is ten", None,
       ("iograph.summary", "compare"), dtype="int64", aliases=("runs",)),
    _M("peak_bps", "peak", "the busiest interval's frame bits / its length, over intervals of "
       "interval_s from the capture's first packet (the I/O graph's buckets)", "bit/s",
       ("iograph.summary", "throughput.streams", "compare")),
    _M("payload_bps", "payload", "transport payload bits (tcp.len, UDP length - 8; re-sent "
       "segments included) / the duration of the stream (udp: of the flow)", "bit/s",
       ("throughput.streams", "udp.flows")),
    _M("peak_payload_bps", "peak payload", "the busiest interval's payload bits / its length "
       "(intervals as peak_bps)", "bit/s", ("throughput.streams",)),
    _M("goodput_bps", "goodput", "payload delivered for the first time (TCP segments that "
       "re-send sequence space left out; UDP payload as captured) x 8 / the span the table "
       "says: the capture span in compare, the flows' common window in fairness' flows, an "
       "interval in its shares", "bit/s",
       ("compare", "fairness.flows", "fairness.shares", "limits.streams", "limits.models")),
    _M("total_goodput_bps", "total goodput", "the flows' goodput_bps added up, over the same "
       "window", "bit/s", ("fairness.summary",), aliases=("total_bps",)),
    _M("utilisation", "link use", "goodput_bps / the bottleneck rate the lab sidecar asked "
       "(scenario rate): the share of the link the transfer used", "fraction", ("compare",),
       aliases=("utilization",)),
    # -- re-sent segments --------------------------------------------------------------------
    _M("resent", "re-sent", "segments that re-send sequence space already sent, SYN and FIN "
       "included: what the sender's kernel counts as total_retrans", "segments",
       ("retrans.counts", "cwnd.summary", "compare"), dtype="int64",
       aliases=("retransmissions", "resent_segments")),
    _M("resent_data", "re-sent data", "data segments (payload > 0) that re-send sequence space: "
       "resent without the SYN and FIN", "segments", ("seqgraph.summary",), dtype="int64"),
    _M("resent_share", "re-sent share", "resent / the packets of the data direction",
       "fraction", ("compare",)),
    _M("resent_data_share", "loss rate", "resent_data / the data segments of the data "
       "direction: the share of data segments sent again, the p of the TCP models",
       "fraction", ("limits.models",), aliases=("p", "segment loss")),
    # -- round trips ---------------------------------------------------------------------------
    _M("rtt_min_ms", "RTT min", "the smallest round-trip sample: the base RTT, with the least "
       "queueing", "ms", ("rtt.path", "rtt.summary", "ping.sessions", "compare",
                          "limits.models"), aliases=("base", "base_rtt", "rtt")),
    _M("rtt_median_ms", "RTT median", "the median round-trip sample: the RTT under load "
       "(queueing included); rtt_median_ms - rtt_min_ms is the queueing delay", "ms",
       ("rtt.path", "rtt.summary", "compare", "limits.models"),
       aliases=("rtt_ms", "path_rtt_ms")),
    _M("rtt_avg_ms", "RTT avg", "the mean round-trip sample (ping: duplicates included, as "
       "ping counts)", "ms", ("rtt.summary", "ping.sessions"), aliases=("mean_ms",)),
    _M("rtt_p95_ms", "RTT p95", "the 95th percentile of the round-trip samples (linear)", "ms",
       ("rtt.path", "rtt.summary")),
    _M("rtt_max_ms", "RTT max", "the largest round-trip sample", "ms",
       ("rtt.summary", "ping.sessions")),
    _M("rtt_mdev_ms", "RTT mdev", "ping's mdev: sqrt(mean(rtt^2) - mean(rtt)^2)", "ms",
       ("ping.sessions",)),
    _M("srtt_ms", "sRTT", "the smoothed RTT (RFC 6298 over the path's samples) the window "
       "analyses time their one-RTT windows with", "ms", ("cwnd.summary", "flavour.streams")),
    # -- what held a TCP sender back (pcapstats limits; cwnd's summary) ------------------------
    _M("cwnd_share", "cwnd-limited", "share of the stream's time the congestion window held the "
       "sender: ACK-clocked, new data leaving at once as each ACK opened room", "fraction",
       ("limits.streams", "cwnd.summary")),
    _M("recovery_share", "in recovery", "share of the time in loss recovery (from the first "
       "re-sent segment to the ACK of everything sent by then)", "fraction",
       ("limits.streams", "cwnd.summary")),
    _M("rwnd_share", "rwnd-limited", "share of the time the receiver's window held the sender: "
       "the highest byte sent within one MSS of the edge it advertised", "fraction",
       ("limits.streams", "cwnd.summary")),
    _M("zero_window_share", "zero window", "share of the time the receiver advertised a window "
       "of zero", "fraction", ("limits.streams", "cwnd.summary")),
    _M("sender_share", "sender-limited", "share of the time the sender held itself back: both "
       "windows had room and it did not fill them at once (its application or send buffer, "
       "or pacing)", "fraction", ("limits.streams", "cwnd.summary")),
    _M("idle_share", "idle", "share of the time in silences of 4 smoothed RTTs (0.2 s at "
       "least) with under one MSS outstanding", "fraction", ("limits.streams", "cwnd.summary")),
    _M("limit", "limit", "what held the sender back: cwnd, recovery, rwnd, zero_window, "
       "sender or idle; of a stream, the one with the largest share of its time", None,
       ("limits.streams", "limits.limited", "cwnd.limited", "compare"), dtype="str",
       aliases=("limited by", "bottleneck")),
    # -- what theory says a TCP sender could get (tcp_models; limits' models table) ------------
    _M("mathis_bps", "Mathis", "the Mathis bound: MSS x 8 / RTT x sqrt(3/2) / sqrt(p), p the "
       "share of segments re-sent, RTT the path's median: what a Reno sender keeps at that "
       "loss", "bit/s", ("limits.models", "compare")),
    _M("padhye_bps", "Padhye", "Padhye's model with timeouts (PFTK 1998): Mathis' terms plus "
       "the timeouts' cost at RTO T0, two segments an ACK, capped at the window bound",
       "bit/s", ("limits.models", "compare")),
    _M("rwnd_max_bytes", "rwnd max", "the largest window the receiver advertised, after window "
       "scaling", "bytes", ("limits.models", "cwnd.summary")),
    _M("window_bound_bps", "window bound", "rwnd_max_bytes x 8 / the path's median RTT: the "
       "most the receiver's window lets through", "bit/s", ("limits.models",)),
    _M("bdp_bytes", "BDP", "the bandwidth-delay product: the bottleneck rate the run asked x "
       "the base RTT / 8, the bytes that must be in flight to fill the path (over 65535 B, "
       "only window scaling lets the receiver offer it)", "bytes", ("limits.models",)),
    _M("queue_delay_ms", "queueing", "rtt_median_ms - rtt_min_ms: the time the data spent "
       "queued at the bottleneck, typically", "ms", ("limits.models",),
       aliases=("queueing delay", "buffer time")),
    _M("full_queue_ms", "full queue", "the bottleneck queue's limit x 8 / its rate (both as "
       "the run asked): the most queueing can add", "ms", ("limits.models",)),
    # -- loss and jitter -----------------------------------------------------------------------
    _M("datagram_loss", "UDP loss", "lost / sent datagrams: iperf's counters (as iperf3's "
       "server counts them at this capture point), or a sender and a receiver capture matched",
       "fraction", ("udp.flows", "compare"), aliases=("udp_loss", "udp_loss_pct", "loss_pct")),
    _M("echo_loss", "loss", "(transmitted - received) / transmitted echo requests: ping's packet "
       "loss", "fraction", ("ping.sessions",)),
    _M("capture_jitter_ms", "capture jitter", "RFC 3550 interarrival jitter of the datagrams "
       "as they passed this capture point (capture time - the sender's stamp); the receiving "
       "application's own figure adds its host's scheduling and is app_jitter_ms", "ms",
       ("udp.flows", "compare"), aliases=("jitter_ms", "jitter")),
    _M("app_jitter_ms", "app jitter", "the RFC 3550 jitter the receiving application reported "
       "itself (iperf3's server), read from the lab sidecar or the results iperf3 exchanged on "
       "its control connection; empty when neither is at hand", "ms", ("udp.flows", "compare"),
       aliases=("iperf3 jitter",)),
    # -- fairness, congestion control, verdicts, radio -------------------------------------------
    _M("jain_index", "Jain", "Jain's fairness index of the flows' goodput: (sum x)^2 / (n sum "
       "x^2), 1 when equal, 1/n when one flow has all", UNITLESS,
       ("fairness.summary", "fairness.series", "compare"), aliases=("jain", "fairness")),
    _M("convergence_s", "converged after", "seconds from the moment every flow was sending "
       "(the last one's start) to the start of the first of 3 intervals in a row in which the "
       "flow's share of the flows' goodput was within 10 % of its fair share (1 / the flows "
       "sending), each flow's intervals counted from its own start; a run's is its slowest "
       "flow's; empty when it did not converge", "s",
       ("fairness.summary", "fairness.flows", "compare"),
       aliases=("convergence", "converged")),
    _M("flavour", "flavour", "the congestion control the sender's behaviour shows: reno, cubic, "
       "bbr, or unknown", None, ("flavour.streams", "compare"), dtype="str",
       aliases=("label", "cc_guess")),
    _M("flavour_confidence", "confidence", "the share of the evidence for that flavour, 0..1; "
       "empty when it is unknown", UNITLESS, ("flavour.streams", "compare"),
       aliases=("confidence", "conf")),
    _M("verdict", "verdict", "pass, fail or cannot tell: was the app protocol (simpleperf, "
       "iperf3, ping) followed; a capture's is the worst of its streams'", None,
       ("verify.streams", "compare"), dtype="str", aliases=("verify",)),
    _M("signal_dbm", "signal", "median received signal strength (radiotap's dBm antenna "
       "signal, the first antenna's) over the row's 802.11 frames whose radiotap header "
       "reports one (monitor-mode Wi-Fi)", "dBm", ("wifi.frames", "wifi.intervals", "compare")),
    _M("datarate_bps", "data rate", "median PHY data rate the row's 802.11 frames were sent "
       "at (radiotap's Rate field, or the rate of its 802.11n MCS index, as Wireshark's "
       "radiotap.datarate) over those whose radiotap header reports one: the rate the sender's "
       "rate control chose for the link", "bit/s",
       ("wifi.frames", "wifi.intervals", "compare"), aliases=("rate", "mcs", "phy rate")),
    _M("retry_share", "retries", "802.11 frames with the Retry flag / the row's frames with a "
       "frame control: the share the senders sent again (802.11 re-sends a frame that was not "
       "acknowledged, so a weak link shows here as loss does, before TCP sees any)",
       "fraction", ("wifi.frames", "wifi.intervals", "compare"),
       aliases=("retry", "retries", "wlan retries")),
    # -- the delay model D = a x S + b -----------------------------------------------------------
    _M("a_ms_per_byte", "a", "the delay model's slope: ms of delay a byte of message (its "
       "inverse x crossings is the bandwidth)", "ms/byte", ("delay.model",)),
    _M("b_ms", "b", "the delay model's intercept: the delay of a message of 0 bytes (the path's "
       "propagation and processing)", "ms", ("delay.model",)),
    _M("bandwidth_bps", "bandwidth", "crossings x 8 / a: the bottleneck rate the slope implies",
       "bit/s", ("delay.model",)),
)

_BY_NAME = {m.name: m for m in METRICS}


def metric(name: str) -> Metric:
    """The metric of this exact name (a direction suffix allowed)."""
    base = re.sub(r"_(a_to_b|b_to_a)$", "", name)
    try:
        return _BY_NAME[base]
    except KeyError:
        raise UsageError(f"no metric named {name!r}",
                         hint="`pcapstats columns metrics` lists them") from None


def column(name: str, direction: str | None = None, **options) -> Column:
    """The column of a metric (:meth:`Metric.column`)."""
    return metric(name).column(direction, **options)


def heading(name: str) -> str | None:
    """The heading of a metric's column (``peak_bps_a_to_b`` -> ``peak A→B``); None for a
    column that is no metric."""
    base, _, direction = re.match(r"^(.*?)(_(a_to_b|b_to_a))?$", name).group(1, 2, 3)
    m = _BY_NAME.get(base)
    if m is None:
        return None
    return m.heading if direction is None else f"{m.heading} {DIRECTIONS[direction]}"


def _key(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.strip().lower())


def lookup(text: str, among=None, *, what: str = "metric") -> str:
    """The name a person meant by ``text``, among the names ``among`` (default: every metric):
    the name itself, its heading, an alias, or the unique name or heading it begins
    (``avg`` -> ``avg_capture_bps``, ``re-sent share`` -> ``resent_share``).  One UsageError
    line naming the choices when it means none or several."""
    names = list(among) if among is not None else [m.name for m in METRICS]
    key = _key(text)
    exact = [n for n in names if _key(n) == key]
    if exact:
        return exact[0]
    said = {n: [_key(heading(n) or n), *(_key(a) for a in _aliases(n))] for n in names}
    for words in (lambda n: said[n][:1], lambda n: said[n][1:]):   # heading, then aliases
        hits = [n for n in names if key in words(n)]
        if len(hits) == 1:
            return hits[0]
    starts = [n for n in names if _key(n).startswith(key) or said[n][0].startswith(key)]
    if len(starts) == 1:
        return starts[0]
    choices = starts or names
    raise UsageError(f"{'ambiguous' if starts else 'unknown'} {what} {text!r}",
                     hint=("it could be " if starts else "one of: ") +
                     ", ".join(f"{n} ({heading(n)})" if heading(n) and heading(n) != n else n
                               for n in choices))


def _aliases(name: str) -> tuple[str, ...]:
    m = _BY_NAME.get(re.sub(r"_(a_to_b|b_to_a)$", "", name))
    return m.aliases if m is not None else ()


def describe() -> list[tuple[str, str, str, str]]:
    """(name, heading, unit, definition and where it is computed) a metric, for `pcapstats
    columns metrics`."""
    return [(m.name, m.heading, m.unit or "-",
             f"{m.doc}. Computed by {m.computed_by[0]}"
             + (f"; also shown by {', '.join(m.computed_by[1:])}" if m.computed_by[1:] else ""))
            for m in METRICS]


def with_heading(col: Column, heading: str) -> Column:
    """A column under another heading (a table-specific word for a non-metric column)."""
    return replace(col, heading=heading)
