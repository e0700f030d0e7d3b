"""The sender's congestion window, estimated from a capture, and its loss events.

Built on :mod:`pcapstats.analyses.tcp_analysis` (Wireshark's bytes_in_flight, flags, relative
numbers, calculated windows, RTTs) and :mod:`.tcp_flow` (data direction, capture side).  The
result's tables: ``samples`` (the estimate), ``losses`` (loss episodes), ``flight``
(Wireshark's bytes in flight per data segment), ``rwnd`` (the receiver's window per ACK) and
``limited`` (the intervals where the estimate is not the cwnd); its figures: the cwnd graph
and Wireshark's Window Scaling graph (``figure(graph="wscale")``).

**Sender-side capture** (the capture point sees the data leave before any loss): one sample
per ACK that advances the cumulative ACK.  ``flight_bytes`` is Wireshark's bytes_in_flight
after the last data segment sent before that ACK arrived, i.e. the flight the ACK finds.  A
Linux sender transmits while its packets in flight are below cwnd (tcp_write_xmit /
tcp_cwnd_test), and without pacing it does so at once when an ACK opens room (within tens of
microseconds on the wire).  So when the window, not the application, limits it, the flight an
ACK finds is the cwnd: it was filled to the brim after the previous ACK, and nothing moves
until the next one.  Each sample gets a ``state``, checked in this order:

- ``recovery``: inside a loss-recovery episode (below); Linux then sends by PRR and its flight
  leaves out segments it marked lost, while Wireshark's still counts them: not the cwnd;
- ``rwnd``: receiver-window-limited: the highest byte sent is within one MSS of the edge the
  receiver last advertised (its ACK + calculated window);
- ``cwnd``: cwnd-limited: of the advancing ACKs in the last smoothed RTT (this one included),
  at least ACK_CLOCKED_FRACTION were answered by new data within PROMPT_NS;
- ``app``: otherwise: the sender had room and did not use it at once: application-limited,
  or paced (BBR paces at its estimate of the bottleneck rate and keeps cwnd at about twice the
  flight), or sender idle.  The flight is then a lower bound of the cwnd.

``cwnd_bytes`` is ``flight_bytes`` where the state is ``cwnd`` and empty elsewhere.

**Receiver-side capture** (data seen after the bottleneck): one sample per group of new data
segments that echo the same TSval of the receiver (RFC 7323 timestamps): they were sent in
answer to ACKs of the receiver carrying that TSval, so the sender's flight when it sent them
was (highest byte of the group) - (highest ACK the receiver had sent with that TSval or an
earlier one).  Without timestamps, one sample per new data segment: highest byte received -
the ACK the receiver sent one initial RTT earlier (coarse: queueing delay is not followed).
States: ``recovery`` (from a hole or a re-sent segment until the receiver's ACK passes the
highest byte received when it began), ``rwnd`` (the group reaches the window the referenced
ACK advertised, within one MSS), ``app`` (nothing arrived in the half RTT before: the sender
was idle), ``cwnd`` otherwise.  ``sender_time_s`` puts each sample at the sender's clock: the
referenced ACK's time + half the minimum RTT.

**Loss events**: a recovery episode starts at the first re-sent segment (tshark's
retransmission or out-of-order; on the receiver side also a hole, "previous segment not
captured") outside an episode; its recovery point is the highest byte sent (received) by then,
and it ends at the first ACK at or beyond that point (RFC 6582's "recover").  The window
before is the last sample's flight before the episode began; after, the first sample's flight
after it ended; ratio = after / before (Reno halves, Cubic keeps 0.7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import catalogue
from ..batch import analysis, each_stream
from ..capture import Capture
from ..clock import GAP_NS, shifted
from ..errors import Note, NothingToReport, UsageError
from ..plots.tcp import cwnd_figure, wscale_figure
from ..render import Shown
from ..results import Result, shown
from ..schema import (CAPTURE_POINT_COLUMN, FRAME_NUMBER_COLUMN, STREAM_COLUMN, TIME_COLUMN,
                      UNITLESS, Column, TableSpec)
from ..streams import DIRECTIONS, choose_stream, stream_names
from .tcpseq import STREAM_NEEDS
from .tcp_flow import (SIDE_DOC, capture_side, data_direction, first_value, measured,
                       near_end, segment_size, stream_rows)

PROMPT_NS = 200_000           # an ACK answered by new data within this is "answered at once"
ACK_CLOCKED_FRACTION = 0.75   # share of ACKs answered at once, over one RTT, to call it cwnd-limited
MIN_REPAIRS = 5               # holes repaired needed to take the RTT from them (repair_rtts)
STATES = ("cwnd", "rwnd", "app", "recovery")
# what held the sender back, interval by interval (the ``limited`` table; pcapstats limits):
# a sample's state until the next sample, "app" read as the sender's own limit, a zero window
# and a silence with nothing outstanding told apart
LIMITS = ("cwnd", "recovery", "rwnd", "zero_window", "sender", "idle")
IDLE_RTTS, IDLE_MIN_S = 4, 0.2   # a silence with nothing outstanding this long is idle
GRAPHS = ("cwnd", "wscale")
_ACK, _SYN = 0x010, 0x002
_RESENT = ("retransmission", "out_of_order", "keep_alive", "zero_window_probe")

_C = Column
_STREAM, _FRAME, _TIME = STREAM_COLUMN, FRAME_NUMBER_COLUMN, TIME_COLUMN
SUMMARY = TableSpec("summary", "one row per stream: what its window did", (
    _STREAM,
    CAPTURE_POINT_COLUMN.but(doc=f"{SIDE_DOC}; middle and unknown are analysed as the sender"),
    _C("data_direction", "str", "the direction carrying the data", values=DIRECTIONS),
    _C("mss_bytes", "int64", "the sender's MSS: the SYNs' MSS option less the options the data "
       "carries, else the common segment size (not the largest: offload)", "bytes"),
    catalogue.column("srtt_ms", optional=False),
    _C("samples", "int64", "window samples"),
    *(catalogue.column(f"{limit}_share", optional=False) for limit in LIMITS),
    _C("cwnd_max_bytes", "float64", "largest cwnd estimate", "bytes", optional=True),
    _C("cwnd_median_bytes", "float64", "median cwnd estimate", "bytes", optional=True),
    _C("flight_max_bytes", "float64", "largest Wireshark bytes in flight", "bytes",
       optional=True),
    catalogue.column("rwnd_max_bytes"),
    _C("loss_episodes", "int64", "loss-recovery episodes"),
    catalogue.column("resent", doc="in the data direction (as pcapstats retrans counts them)",
                     optional=False),
    _C("ratio_median", "float64", "median window after / before an episode (Reno 0.5, Cubic "
       "0.7)", UNITLESS, optional=True),
))
SAMPLES = TableSpec("samples", "one row per window sample (see the module docstring)", (
    _STREAM,
    _FRAME.but(note="sender side: the ACK; receiver side: the last data segment of the group"),
    _TIME,
    _C("sender_time_s", "float64", "the same moment at the sender (receiver side: estimated), "
       "seconds", "s"),
    _C("flight_bytes", "float64", "bytes in flight at that moment (see the module docstring)",
       "bytes"),
    _C("cwnd_bytes", "float64", "the cwnd estimate: flight_bytes where state is cwnd, else "
       "empty", "bytes", optional=True),
    _C("rwnd_bytes", "float64", "the receiver's last advertised window, after window scaling, "
       "bytes", "bytes", optional=True),
    _C("state", "str", "cwnd | rwnd (receiver-window-limited) | app (application-limited, "
       "paced or idle) | recovery (loss recovery)", values=STATES),
))
LOSSES = TableSpec("losses", "one row per loss-recovery episode", (
    _STREAM,
    _C("start_frame", "int64", "the episode's first re-sent segment (or hole)"),
    _C("start_s", "float64", "its time, seconds since the capture's first packet", "s"),
    _C("end_s", "float64", "the ACK that ended the episode; empty if it never ended", "s",
       optional=True),
    _C("recover_seq", "int64", "relative sequence number the ACK had to reach"),
    catalogue.column("resent", doc="during the episode", optional=False),
    _C("cwnd_before_bytes", "float64", "flight of the last sample before the episode", "bytes",
       optional=True),
    _C("cwnd_after_bytes", "float64", "flight of the first sample after it", "bytes",
       optional=True),
    _C("ratio", "float64", "cwnd_after_bytes / cwnd_before_bytes", UNITLESS, optional=True),
))
FLIGHT = TableSpec("flight", "one row per data segment: Wireshark's bytes in flight", (
    _STREAM, _FRAME, _TIME,
    _C("bytes_in_flight", "float64", "tcp.analysis.bytes_in_flight after the segment", "bytes",
       wireshark="tcp.analysis.bytes_in_flight", optional=True),
    _C("resent", "bool", "the segment re-sends data (tshark's retransmission or out-of-order, "
       "a keep-alive or zero-window probe)"),
))
RWND = TableSpec("rwnd", "one row per ACK of the receiver: its advertised window", (
    _STREAM, _FRAME, _TIME,
    _C("rwnd_bytes", "float64", "the window it advertised, after window scaling", "bytes"),
    _C("edge_seq", "float64", "relative sequence number of the window's right edge (ACK + "
       "window)", UNITLESS),
))
LIMITED = TableSpec("limited", "one row per run of time under one limit, from the first "
                    "window sample to the last", (
    _STREAM,
    _C("start_s", "float64", "the run's start, seconds since the capture's first packet", "s"),
    _C("end_s", "float64", "its end: the next run's start (the last sample, at the end)", "s"),
    catalogue.column("limit", doc="here during the run", values=LIMITS),
))


@dataclass
class CwndEstimate:
    """The estimate of one stream as the analysis computes it (tables as dicts of numpy
    columns, without the stream column); :class:`Cwnd` is what it returns, flavour reads
    this."""
    stream: int
    data_direction: int       # 0 (a_to_b) or 1
    side: str                 # sender, receiver, middle or unknown (schema.CAPTURE_POINTS);
    #                           middle and unknown are analysed as the sender
    side_evidence: str
    mss_bytes: int
    rtt_s: float              # the smoothed RTT used for the one-RTT windows
    rtt_from: str             # which RTT that is (_smoothed_rtt): "default" if none was measured
    samples: dict             # SAMPLES' columns
    losses: dict              # LOSSES' columns
    flight: dict              # FLIGHT's columns
    rwnd: dict                # RWND's columns
    resent_segments: int      # the data direction's re-sent segments (tcp_analysis' resent)
    flight_rows: np.ndarray   # each flight row's row in the capture (its other columns there)
    analysed_as: str = "sender"   # sender or receiver: the end the samples were made from


class Cwnd(Result):
    """One TCP stream's cwnd estimate (tables in the module docstring).  ``stream``, ``side``
    (sender | receiver | unknown), ``side_evidence``, ``data_direction`` (a_to_b | b_to_a),
    ``mss_bytes``, ``rtt_s``: what the estimate rests on."""
    analysis = "cwnd"
    specs = (SUMMARY, SAMPLES, LOSSES, FLIGHT, RWND, LIMITED)
    series = "samples"
    draws = True
    graph = "cwnd"           # what .figure() draws by default: ps.wscale's results say wscale
    view = {"summary": (Shown("stream", "stream"), Shown("side", "side"),
                        Shown("samples", "samples"), Shown("cwnd max", "cwnd_max_bytes"),
                        Shown("cwnd median", "cwnd_median_bytes"),
                        Shown("flight max", "flight_max_bytes"),
                        Shown("rwnd max", "rwnd_max_bytes", minor=True),
                        Shown("loss episodes", "loss_episodes"), shown("resent"),
                        Shown("after/before", "ratio_median"),
                        shown("cwnd_share", minor=True))}

    def __init__(self, est: CwndEstimate, *, capture: str, name: str = ""):
        tables = {"samples": est.samples, "losses": est.losses, "flight": est.flight,
                  "rwnd": est.rwnd}
        tables = {name: {"stream": np.full(len(next(iter(t.values()))), est.stream, np.int64),
                         **t} for name, t in tables.items()}
        flight = tables["flight"]                   # its frame numbers as the table had them
        flight["frame_number"] = np.asarray(flight["frame_number"], np.int64)
        tables["limited"], tables["summary"] = derived_tables(est)
        super().__init__(tables, capture=capture, notes=[side_note(est)])
        self.stream, self.side, self.side_evidence = est.stream, est.side, est.side_evidence
        self.data_direction = DIRECTIONS[est.data_direction]
        self.mss_bytes, self.rtt_s = est.mss_bytes, est.rtt_s
        self.name = name            # the stream's endpoints, and what the lab ran on it

    def _figure(self, ax=None, *, graph: str | None = None, **options):
        """``graph``: cwnd or wscale (by default the result's own: ps.wscale's say wscale);
        ``from_s`` / ``to_s``: the zoom, ``title``."""
        graph = graph or self.graph
        if graph not in GRAPHS:
            raise UsageError(f"unknown graph {graph!r}", hint="use cwnd or wscale")
        return (cwnd_figure if graph == "cwnd" else wscale_figure)(self, ax=ax, **options)


@analysis(needs=STREAM_NEEDS, one_stream=True)
def cwnd(capture: Capture, *, stream: int | str | None = None, side: str = "auto") -> Cwnd:
    """The cwnd estimate of one TCP stream (by default the one with the most payload; "all":
    every stream with data).  ``side`` forces "sender" or "receiver" when the handshake
    cannot tell."""
    return each_stream(capture, stream,
                       lambda s: Cwnd(estimate(capture, s, side=side), capture=capture.path,
                                      name=stream_names(capture).get(("tcp", s), "")))


@analysis(needs=STREAM_NEEDS, one_stream=True)
def wscale(capture: Capture, *, stream: int | str | None = None, side: str = "auto") -> Cwnd:
    """Wireshark's Window Scaling graph of one TCP stream (``pcapstats wscale``): cwnd's result,
    whose ``.figure()`` draws the bytes in flight and the receiver's window (the ``flight``
    and ``rwnd`` tables); ``.figure(graph="cwnd")`` the estimate."""
    result = cwnd(capture, stream=stream, side=side)
    for part in {id(p): p for p in (result, *result.parts)}.values():
        part.graph = "wscale"
    return result


def estimate(cap: Capture, stream: int | None = None, *, side: str = "auto",
             flow: dict | None = None, found: tuple[str, str] | None = None) -> CwndEstimate:
    """Samples, loss events, per-segment flight and the receiver's window of one stream
    (``flow``: its stream_rows when the caller has them already, emptied here: read them
    before; ``found``: capture_side's answer on them, when the caller has it too)."""
    if side not in ("auto", "sender", "receiver"):
        raise UsageError(f"unknown capture side {side!r}", hint="use auto, sender or receiver")
    stream = choose_stream(cap, stream).stream
    flow = stream_rows(cap, stream) if flow is None else flow
    data_dir = data_direction(flow)
    found, evidence = capture_side(flow, data_dir) if found is None else found
    if side != "auto":
        found, evidence = side, f"given: {side}"
    receiver = found == "receiver" or (found == "middle"    # analysed as the end it is near
                                       and near_end(flow, data_dir) == "receiver")
    t0 = cap.first_time_ns
    v = _Views(flow, data_dir, t0, receiver)
    if v.data.size == 0:
        raise NothingToReport(f"TCP stream {stream} of {cap.path} carries no data (its "
                              f"{len(flow['direction'])} packets have no payload)",
                              hint="pick a stream with payload (see `pcapstats throughput`)")
    resent = int(np.asarray(flow["resent"], bool)[flow["direction"] == data_dir].sum())
    flight_rows = flow["row"][v.data]
    # the views hold all the tables read from here on: the stream's other columns (its RTTs,
    # flags and header fields, ~50 bytes a packet) are let go before the tables are made
    flow.clear()
    if receiver:
        samples = _receiver_samples(v)
    else:
        samples = _sender_samples(v)
    v.tsval = v.tsecr = v.has_ts = None         # read by the receiver's samples alone
    episodes = _episodes(v, receiver=receiver)
    _mark_recovery(samples, episodes, v)
    samples["cwnd_bytes"] = np.where(samples["state"] == "cwnd", samples["flight_bytes"], np.nan)
    table = {name: samples[name] for name in SAMPLES.names[1:]}
    losses = _loss_table(episodes, samples, v)
    v.let_go()                  # what the samples and episodes read: not held beside the tables
    return CwndEstimate(stream, data_dir, found, evidence, v.mss, v.rtt_ns / 1e9, v.rtt_from,
                        table, losses, _flight_table(v), _rwnd_table(v), resent, flight_rows,
                        "receiver" if receiver else "sender")


def derived_tables(est: CwndEstimate) -> tuple[dict, dict]:
    """(the ``limited`` table, the ``summary`` row) of one stream's estimate: what its Cwnd
    result shows beside the estimate's own tables (limits reads them without the result,
    whose tables add a stream column to every row)."""
    tables = {"samples": est.samples, "losses": est.losses, "flight": est.flight,
              "rwnd": est.rwnd}
    tables["limited"] = limit_runs(est.stream, est.samples, est.rwnd, est.rtt_s, est.mss_bytes)
    return tables["limited"], _summary(est, tables)


def side_note(est: CwndEstimate) -> Note:
    """The note of where the stream was captured, and how that was told."""
    return Note(f"{est.side}-side capture", about=f"stream {est.stream}",
                detail=est.side_evidence)


def tcp_info_errors(samples, t0_ns: int, info_t_ns, info_cwnd_bytes, *, rtt_s: float,
                    side: str = "sender") -> np.ndarray:
    """Relative errors |estimate - kernel| / kernel of the cwnd samples against a sender's
    TCP_INFO series (``t_ns`` realtime ns on the capture's clock, ``snd_cwnd x snd_mss``),
    over the kernel samples the estimate covers: the cwnd in force at kernel time t is what
    the *next* sample's flight shows (the sender fills its window after an ACK, the next ACK
    finds it), taken only if that sample is within one RTT and in state cwnd."""
    t = np.asarray(samples["sender_time_s"], np.float64) * 1e9 + t0_ns
    est = np.asarray(samples["cwnd_bytes"], np.float64)
    info_t = np.asarray(info_t_ns, np.int64)
    truth = np.asarray(info_cwnd_bytes, np.float64)
    i = np.searchsorted(t, info_t, side="right")
    ok = i < len(t)
    i, info_t, truth = i[ok], info_t[ok], truth[ok]
    near = (t[i] - info_t) <= rtt_s * 1e9
    e = est[i[near]]
    keep = ~np.isnan(e) & (truth[near] > 0)
    return np.abs(e[keep] - truth[near][keep]) / truth[near][keep]


def _summary(est: CwndEstimate, tables: dict) -> dict[str, np.ndarray]:
    """The summary row of one stream, from its tables."""
    s, losses = tables["samples"], tables["losses"]
    state = s["state"]
    shares = time_shares(tables["limited"])
    cwnd = s["cwnd_bytes"][~np.isnan(s["cwnd_bytes"])]
    ratio = losses["ratio"][~np.isnan(losses["ratio"])]
    largest = (lambda v: float(np.nanmax(v)) if np.any(~np.isnan(v)) else np.nan)  # noqa: E731
    row = {"stream": est.stream, "side": est.side, "data_direction": DIRECTIONS[est.data_direction],
           "mss_bytes": est.mss_bytes, "srtt_ms": est.rtt_s * 1e3, "samples": len(state),
           **{f"{limit}_share": shares[limit] for limit in LIMITS},
           "cwnd_max_bytes": float(cwnd.max()) if len(cwnd) else np.nan,
           "cwnd_median_bytes": float(np.median(cwnd)) if len(cwnd) else np.nan,
           "flight_max_bytes": largest(np.asarray(tables["flight"]["bytes_in_flight"], float)),
           "rwnd_max_bytes": largest(np.asarray(tables["rwnd"]["rwnd_bytes"], float)),
           "loss_episodes": len(losses["start_s"]),
           "resent": est.resent_segments,
           "ratio_median": float(np.median(ratio)) if len(ratio) else np.nan}
    return {c.name: np.array([row[c.name]], dtype=object if c.dtype == "str" else c.dtype)
            for c in SUMMARY.columns}


def limit_runs(stream: int, samples: dict, rwnd: dict, srtt_s: float,
               mss: int) -> dict[str, np.ndarray]:
    """What held the sender back from the first window sample to the last, as runs of one
    limit (the ``limited`` table): each sample's state until the next sample ("app": the
    sender's own limit, ``sender``), but a silence of IDLE_RTTS smoothed RTTs (IDLE_MIN_S at
    least) with under one MSS outstanding is ``idle``, and the time the receiver's window
    stood at zero (from the ACK that closed it to the next that opened it) ``zero_window``."""
    t, state = samples["time_s"], samples["state"]
    empty = {"stream": np.zeros(0, np.int64), "start_s": np.zeros(0), "end_s": np.zeros(0),
             "limit": np.zeros(0, object)}
    if len(t) < 2:
        return empty
    limit = np.where(state == "app", "sender", state).astype(object)[:-1]
    start, end = t[:-1], t[1:]
    quiet = (end - start >= max(IDLE_RTTS * srtt_s, IDLE_MIN_S)) & (limit == "sender")
    limit[quiet & (samples["flight_bytes"][:-1] < mss)] = "idle"
    closed = _zero_window(rwnd, t[0], t[-1])
    if len(closed):                                 # cut the runs at the closed windows
        start, end, limit = _overlaid(start, end, limit, closed)
    change = np.flatnonzero(np.r_[True, limit[1:] != limit[:-1]])
    ends = np.r_[change[1:], len(limit)]
    return {"stream": np.full(len(change), stream, np.int64), "start_s": start[change],
            "end_s": end[ends - 1], "limit": limit[change]}


def _zero_window(rwnd: dict, first_s: float, last_s: float) -> np.ndarray:
    """(start, end) rows of the times the receiver advertised a zero window, within the
    samples' span."""
    t, w = rwnd["time_s"], rwnd["rwnd_bytes"]
    if not len(t) or not (w == 0).any():
        return np.zeros((0, 2))
    change = np.flatnonzero(np.r_[True, (w == 0)[1:] != (w == 0)[:-1]])
    out = []
    for a, b in zip(change, np.r_[change[1:], len(t)]):
        if w[a] == 0:
            start, end = t[a], t[b] if b < len(t) else last_s
            if end > first_s and start < last_s:
                out.append((max(start, first_s), min(end, last_s)))
    return np.array(out).reshape(-1, 2)


def _overlaid(start, end, limit, closed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The intervals (start, end, limit) with the ``closed`` spans cut out of them and put in
    as zero_window (both in time order, neither overlapping itself)."""
    cuts = np.unique(np.r_[start, end, closed.ravel()])
    cuts = cuts[(cuts >= start[0]) & (cuts <= end[-1])]
    a, b = cuts[:-1], cuts[1:]
    at = np.searchsorted(start, a, side="right") - 1
    pieces = limit[np.clip(at, 0, len(limit) - 1)].copy()
    mid = (a + b) / 2
    inside = np.zeros(len(a), bool)
    for lo, hi in closed:
        inside |= (mid >= lo) & (mid < hi)
    pieces[inside] = "zero_window"
    keep = b > a
    return a[keep], b[keep], pieces[keep]


def time_shares(runs: dict) -> dict[str, float]:
    """Each limit's share of the runs' time (NaN each when they span none)."""
    length = runs["end_s"] - runs["start_s"]
    total = float(length.sum())
    return {limit: float(length[runs["limit"] == limit].sum()) / total if total > 0
            else np.nan for limit in LIMITS}


# -- views of the stream ------------------------------------------------------------------------

class _Views:
    """The stream's rows split into data segments (D) and the other direction (A)."""

    def __init__(self, flow, data_dir, t0, receiver: bool):
        self.t0 = t0
        self.t = np.asarray(flow["frame_time_ns"], np.int64)
        self.frame = _Wide(flow["frame_number"])
        d = flow["direction"]
        flags = flow["tcp_flags"]
        self.ack = _Wide(flow["tcp_ack"])
        self.win = _Wide(flow["tcp_window_size"])
        # Wireshark's bytes in flight as the analyser gives it, and where it has one: made
        # float (NaN where none) at the rows read alone (in_flight)
        self.bif, self.has_bif = flow["bytes_in_flight"], flow["has_bytes_in_flight"]
        self.tsval, self.tsecr, self.has_ts = flow["tsval"], flow["tsecr"], flow["has_ts"]
        # what is read from the other columns first, before the index arrays are made
        self.mss = segment_size(flow, data_dir)[0]
        self.rtt_ns, self.rtt_from = _smoothed_rtt(flow, data_dir, receiver)
        self.min_rtt_ns = _min_rtt(flow, data_dir, self.rtt_ns)
        for name in _RTT_COLUMNS:        # read: let go (estimate empties the rest after)
            for key in (name, f"has_{name}", f"{name}_runs"):
                flow.pop(key, None)
        resent = np.zeros(len(flow["frame_number"]), bool)
        for name in _RESENT:
            resent |= np.asarray(flow[name], bool)
        self.resent = resent
        self.hole = np.asarray(flow["lost_segment"], bool)
        self.data = _rows((d == data_dir) & (flow["tcp_len"] > 0))
        self.new_data = self.data[~resent[self.data]]
        self.acks = np.flatnonzero((d != data_dir) & ((flags & _ACK) != 0) & ((flags & _SYN) == 0))
        self.rev = np.flatnonzero(d != data_dir)
        # the highest byte of the data direction sent so far, as of every row (4 bytes a row,
        # where the data direction's rows and their float running maximum searched took 12); the
        # receiver's cumulative ACK and window as of each of its packets with the ACK flag (the
        # SYN/ACK included: its window, unscaled as SYNs are, counts too), read at the rows
        # asked (told): the samples are a fraction of a stream's rows
        sent_nxt = np.where((d == data_dir) & flow["has_tcp_nxtseq"], flow["tcp_nxtseq"], 0)
        self._sent_max = np.maximum.accumulate(sent_nxt, out=sent_nxt)   # uint32, in place
        self._told = np.flatnonzero((d != data_dir) & ((flags & _ACK) != 0))
        self._told_ack = np.r_[np.nan, np.fmax.accumulate(self.ack[self._told].astype(np.float64))]
        self._told_win = np.r_[np.nan, self.win[self._told].astype(np.float64)]

    def let_go(self) -> None:
        """Drop what only the samples and the episodes read (a long stream's running highest
        byte, its new-data rows...: ~25 bytes a packet); the flight and rwnd tables read the
        rest."""
        self._sent_max = self._told = self._told_ack = self._told_win = None
        self.new_data = self.hole = self.rev = None

    def in_flight(self, rows):
        """Wireshark's bytes in flight at ``rows``: float64, NaN where it has none."""
        return np.where(self.has_bif[rows], self.bif[rows], np.nan)

    def seconds(self, rows):
        return (self.t[rows] - self.t0) / 1e9

    def max_nxt(self, rows):
        """The highest byte of the data direction sent up to each of ``rows`` (0 before any),
        float64 (kept as uint32: 4 bytes a row)."""
        value = self._sent_max[rows]
        return value.astype(np.float64) if isinstance(value, np.ndarray) else np.float64(value)

    def told(self, rows):
        """(the receiver's cumulative ACK, its window) as of each of ``rows``: its last packet
        with the ACK flag at or before it; NaN before its first."""
        k = np.searchsorted(self._told, rows, side="right")
        return self._told_ack[k], self._told_win[k]


def _rows(mask: np.ndarray) -> np.ndarray:
    """The rows where ``mask`` holds, as int32 when a stream has fewer than 2^31 rows: the
    index arrays spanning a stream's data cost half of flatnonzero's int64 (taken from an
    int32 count, never made as int64 first)."""
    if len(mask) < 1 << 31:
        return np.arange(len(mask), dtype=np.int32)[mask]
    return np.flatnonzero(mask)


class _Wide:
    """A stream's unsigned column read as int64 where it is indexed: the whole column's int64
    copy (8 bytes a packet, held as long as the views) is never made."""
    __slots__ = ("values",)

    def __init__(self, values: np.ndarray):
        self.values = values

    def __getitem__(self, rows):
        return np.asarray(self.values[rows], np.int64)


# the stream's RTT columns, read by _smoothed_rtt and _min_rtt alone (32 bytes a packet)
_RTT_COLUMNS = ("ack_rtt_ns", "ack_rtt_karn_ns", "ts_rtt_ns", "initial_rtt_ns")
RTT_SOURCES = {   # where the smoothed RTT comes from, in order, by the side analysed
    "sender": ("ack_rtt_karn_ns", "initial_rtt_ns"),
    "receiver": ("ts_rtt_ns", "repair", "initial_rtt_ns"),
}
DEFAULT_RTT_NS = 100_000_000


def _smoothed_rtt(flow, data_dir, receiver: bool) -> tuple[int, str]:
    """(ns, where from): at the sender the median Karn RTT of the data's ACKs; at the receiver
    the median timestamp RTT of the data (the receiver's ACK to the data echoing it), else of
    the repairs of holes (:func:`repair_rtts`, without timestamps: under load, where the
    handshake's RTT has no queue in it); else tshark's initial RTT; else DEFAULT_RTT_NS
    ("default": nothing measured one)."""
    d = flow["direction"]
    for name in RTT_SOURCES["receiver" if receiver else "sender"]:
        if name == "repair":
            v = repair_rtts(flow, data_dir)
            if len(v) < MIN_REPAIRS:
                continue
        else:
            mask = {"ack_rtt_karn_ns": d != data_dir, "ts_rtt_ns": d == data_dir}.get(name)
            v = measured(flow, name, mask)
        v = v[~np.isnan(v) & (v > 0) & (v < GAP_NS)]   # an "RTT" of an hour is a clock step
        if len(v):
            return int(np.median(v)), name.removesuffix("_ns")
    return DEFAULT_RTT_NS, "default"


def repair_rtts(flow, data_dir) -> np.ndarray:
    """Round trips seen at the receiver, ns: for each hole in the data (a segment arriving
    past one never seen), from the first ACK naming the hole's start (the duplicate ACK that
    tells the sender) to the arrival of the segment that fills it.  The sender re-sends on
    that news, so the span is one round trip under load (plus a few segments' wait for the
    duplicate-ACK threshold)."""
    d = flow["direction"]
    lens = np.asarray(flow["tcp_len"], np.int64)
    t = np.asarray(flow["frame_time_ns"], np.int64)
    data = (d == data_dir) & (lens > 0)
    holes = np.flatnonzero(data & np.asarray(flow["lost_segment"], bool))
    if not len(holes):
        return np.zeros(0)
    nxt = np.where(data & flow["has_tcp_nxtseq"], flow["tcp_nxtseq"], 0.0)
    start = np.maximum.accumulate(nxt)[holes - 1]          # the first byte missing
    ack_rows = np.flatnonzero(d != data_dir)
    seq, ack = np.asarray(flow["tcp_seq"], np.float64), np.asarray(flow["tcp_ack"], np.float64)
    j = np.searchsorted(ack_rows, holes, side="right")
    told = j < len(ack_rows)
    told[told] = ack[ack_rows[j[told]]] == start[told]
    fills = np.flatnonzero(data & (np.asarray(flow["retransmission"], bool)
                                   | np.asarray(flow["out_of_order"], bool)))
    by_seq = fills[np.lexsort((fills, seq[fills]))]       # by seq, then by row
    keys = seq[by_seq]
    k = np.searchsorted(keys, start, side="left")
    # the first filling row after the hole among those starting at its first missing byte
    k = k + np.array([np.searchsorted(by_seq[a:b], h, side="right") for a, b, h in
                      zip(k, np.searchsorted(keys, start, side="right"), holes)], np.int64)
    found = told & (k < len(by_seq))
    found[found] = keys[np.minimum(k[found], len(keys) - 1)] == start[found]
    fill_t = t[by_seq[np.minimum(k, len(by_seq) - 1)]] if len(by_seq) else np.zeros(len(k))
    told_t = t[ack_rows[np.minimum(j, len(ack_rows) - 1)]] if len(ack_rows) else np.zeros(len(j))
    out = (fill_t - told_t)[found]
    return out[out > 0].astype(np.float64)


def _min_rtt(flow, data_dir, fallback) -> int:
    irtt = first_value(flow, "initial_rtt_ns", below=GAP_NS)
    return fallback if irtt is None else int(irtt)


# -- the sender side -----------------------------------------------------------------------------

def _sender_samples(v: _Views) -> dict:
    acks = v.acks
    # advancing ACKs only: a duplicate ACK opens no room in the cumulative window
    prev = np.r_[-1.0, np.fmax.accumulate(v.ack[acks].astype(np.float64))[:-1]]
    acks = acks[v.ack[acks] > prev]
    # the last data segment with a bytes_in_flight value before each ACK
    with_bif = v.data[v.has_bif[v.data]]
    k = np.searchsorted(with_bif, acks) - 1
    acks, k = acks[k >= 0], k[k >= 0]
    last = with_bif[k]
    flight = v.in_flight(last)
    # answered at once: the next new data segment follows within PROMPT_NS
    j = np.searchsorted(v.new_data, acks)
    prompt = np.zeros(len(acks), bool)          # no new data at all: nothing answered an ACK
    if len(v.new_data):
        nxt = v.new_data[np.minimum(j, len(v.new_data) - 1)]
        prompt = (j < len(v.new_data)) & (v.t[nxt] - v.t[acks] <= PROMPT_NS)
    clocked = _share_in_window(v.t[acks], prompt, v.rtt_ns) >= ACK_CLOCKED_FRACTION
    ack_at, window_at = v.told(last)
    edge = ack_at + window_at
    rwnd_limited = v.max_nxt(last) >= edge - v.mss
    state = np.where(rwnd_limited, "rwnd", np.where(clocked, "cwnd", "app")).astype(object)
    return {"frame_number": v.frame[acks], "time_s": v.seconds(acks),
            "sender_time_s": v.seconds(acks), "flight_bytes": flight,
            "rwnd_bytes": v.told(acks)[1], "state": state, "_at": acks}


def _share_in_window(t, flag, window_ns) -> np.ndarray:
    """For each i: the share of flag[j] True among samples j with t[i] - window < t[j] <= t[i]."""
    if len(t) == 0:
        return np.zeros(0)
    c = np.r_[0, np.cumsum(flag)]
    first = np.searchsorted(t, shifted(t, -window_ns), side="right")
    last = np.arange(len(t)) + 1
    return (c[last] - c[first]) / (last - first)


# -- the receiver side ---------------------------------------------------------------------------

def _receiver_samples(v: _Views) -> dict:
    new = v.new_data
    rev = v.acks
    with_ts = new[v.has_ts[new]]
    rev_ts = rev[v.has_ts[rev]]
    if len(with_ts) and len(rev_ts):
        base = v.tsval[rev_ts[0]]
        sent_val = np.maximum.accumulate(_unwrap(v.tsval[rev_ts], base))
        echo = _unwrap(v.tsecr[with_ts], base)
        # segments echoing a TSval the receiver had sent (sent_val ascends: at or past its first)
        ok = echo >= sent_val[0]
        if not ok.all():                        # (a copy of each only when some are not)
            with_ts, echo = with_ts[ok], echo[ok]
        del ok
        # one sample per group of segments echoing the same value: its last segment, and the
        # last receiver ACK carrying the echoed TSval (or an earlier one)
        last_of_group = np.r_[echo[1:] != echo[:-1], len(echo) > 0][:len(echo)]
        rows = with_ts[last_of_group]
        ref = rev_ts[np.searchsorted(sent_val, echo[last_of_group], side="right") - 1]
        del with_ts, echo, last_of_group        # a data segment's each: let go before data_t
    else:   # no timestamps: the ACK sent one initial RTT before each arrival
        ref_i = np.searchsorted(v.t[rev], shifted(v.t[new], -v.min_rtt_ns), side="right") - 1
        ok = ref_i >= 0
        rows, ref = new[ok], rev[ref_i[ok]]
    ref_ack, ref_window = v.told(ref)
    sent = v.max_nxt(rows)
    flight = sent - ref_ack
    edge = ref_ack + ref_window
    rwnd_limited = sent >= edge - v.mss
    # idle sender: no data arrived in the half RTT before this sample's first segment
    data_t = v.t[v.data]
    prev_data = np.searchsorted(data_t, shifted(v.t[rows], -(v.rtt_ns // 2)), side="right")
    this_data = np.searchsorted(data_t, v.t[rows], side="left")
    idle = this_data - prev_data <= 0
    state = np.where(rwnd_limited, "rwnd", np.where(idle, "app", "cwnd")).astype(object)
    return {"frame_number": v.frame[rows], "time_s": v.seconds(rows),
            "sender_time_s": v.seconds(ref) + v.min_rtt_ns / 2e9,
            "flight_bytes": flight, "rwnd_bytes": ref_window, "state": state,
            "_at": ref}


def _unwrap(values, base) -> np.ndarray:
    """TSvals as int64 relative to the first one (they wrap at 2^32)."""
    d = values.astype(np.int64)
    d -= int(base)
    d &= (1 << 32) - 1                  # mod 2^32, in place
    d[d >= 1 << 31] -= 1 << 32
    return d


# -- loss episodes ---------------------------------------------------------------------------

def _episodes(v: _Views, *, receiver: bool) -> list[dict]:
    """Recovery episodes (see the module docstring), in time order."""
    trigger = v.data[v.resent[v.data] | (v.hole[v.data] if receiver else False)]
    acks = v.acks
    ack_vals = np.fmax.accumulate(v.ack[acks].astype(np.float64)) if len(acks) else np.zeros(0)
    resent_before = np.r_[0, np.cumsum(v.resent[trigger])]   # trigger rows ascend: a slice
    out, i = [], 0
    while i < len(trigger):
        start = trigger[i]
        recover = v.max_nxt(start - 1) if start > 0 else v.max_nxt(start)
        if receiver and v.hole[start]:
            recover = v.max_nxt(start)
        # first ACK after the start reaching the recovery point
        after = np.searchsorted(acks, start)
        reach = np.searchsorted(ack_vals[after:], recover, side="left") + after
        end = acks[reach] if reach < len(acks) else None
        j = len(trigger) if end is None else int(np.searchsorted(trigger, end, side="right"))
        out.append({"start": start, "end": end, "recover": recover,
                    "resent": int(resent_before[j] - resent_before[i])})
        i = j
    return out


def _mark_recovery(samples: dict, episodes: list[dict], v: _Views) -> None:
    """Samples whose sender-side moment (``_at``: the ACK the sender had last received) falls
    inside an episode are in recovery."""
    rows = samples["_at"]
    state = samples["state"]
    order = np.argsort(rows, kind="stable")     # one sort, two searches an episode
    by_row = rows[order]
    for e in episodes:
        end = e["end"] if e["end"] is not None else np.iinfo(np.int64).max
        state[order[np.searchsorted(by_row, e["start"], side="right"):
                    np.searchsorted(by_row, end, side="right")]] = "recovery"


def _loss_table(episodes, samples, v: _Views) -> dict[str, np.ndarray]:
    rows, flight = samples["_at"], samples["flight_bytes"]
    out = {name: [] for name in LOSSES.names[1:]}
    for e in episodes:
        before = np.searchsorted(rows, e["start"]) - 1
        fb = float(flight[before]) if before >= 0 else np.nan
        fa = np.nan
        if e["end"] is not None:
            after = np.searchsorted(rows, e["end"], side="right")
            fa = float(flight[after]) if after < len(rows) else np.nan
        out["start_frame"].append(int(v.frame[e["start"]]))
        out["start_s"].append(float(v.seconds(e["start"])))
        out["end_s"].append(float(v.seconds(e["end"])) if e["end"] is not None else np.nan)
        out["recover_seq"].append(int(e["recover"]))
        out["resent"].append(e["resent"])
        out["cwnd_before_bytes"].append(fb)
        out["cwnd_after_bytes"].append(fa)
        out["ratio"].append(fa / fb if fb > 0 else np.nan)
    return {k: np.array(vals, dtype=np.int64 if k in ("start_frame", "recover_seq",
                                                      "resent") else np.float64)
            for k, vals in out.items()}


def _flight_table(v: _Views) -> dict[str, np.ndarray]:
    """FLIGHT's columns, but its frame numbers as the table's uint32 (int64 in the Cwnd
    result: the estimate is held through flavour's evidence, 4 bytes a segment less)."""
    rows = v.data
    return {"frame_number": v.frame.values[rows], "time_s": v.seconds(rows),
            "bytes_in_flight": v.in_flight(rows), "resent": v.resent[rows]}


def _rwnd_table(v: _Views) -> dict[str, np.ndarray]:
    rows = v.acks
    return {"frame_number": v.frame[rows], "time_s": v.seconds(rows),
            "rwnd_bytes": v.win[rows].astype(np.float64),
            "edge_seq": (v.ack[rows] + v.win[rows]).astype(np.float64)}
