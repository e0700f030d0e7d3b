"""The delay model D = a*S + b: latency against message size, fitted from a capture.

Latency samples come from two kinds of traffic, each a **source** of its own rows:

- **ICMP echo sweeps** (ping -s S for several S): each answered echo of a session captured at
  the requester is one sample, S its ICMP data bytes, D its request -> reply time (see
  :mod:`pcapstats.analyses.ping`).  Sessions captured at the responder hold only its
  turnaround and are left out, with a note (there is no round trip in them to model);
- **request/response exchanges** (a ping-pong program over TCP or UDP: the client sends S
  bytes and waits for the S-byte answer before sending again).  The client is the side that
  sends payload first.  A request starts at a client packet sent when the server has sent
  back as many bytes as the client had sent (the client waited for the whole answer) and,
  over TCP, the client's previous segment carried PSH (the end of an application write: a
  sender stalled by its congestion window mid-message has not pushed); TCP segments that
  re-send sequence space are left out.  A sample is a request whose answer is exactly as
  long: S its bytes, D from its first packet to the answer's last (a UDP datagram in IP
  fragments: its last fragment).  Exchanges whose answers
  are not as long as the requests (a bulk transfer, a request/response protocol of other
  shape) are not ping-pong: left out.

Per size (table ``sizes``): n, mean, median, min and the 10 % trimmed mean (the lowest and
highest 10 % of samples dropped, at least none) -- the outlier rule: the fit uses the trimmed
means, so a few samples delayed by a retransmission or a scheduler do not tilt it.

The fit (table ``model``): ordinary least squares of the trimmed means on S, with 95 %
confidence intervals of a and b (Student's t with sizes - 2 degrees of freedom; none with two
sizes) and r^2.  ``bandwidth_bps`` = crossings x 8 / a.  ``crossings`` is how many times each
byte of S crosses the bottleneck one after the other within D: 2 where the answer starts after
the whole request has arrived (ping, a server that reads the whole message first: a =
2 / the bottleneck's bytes per second), 1 where the server answers as data arrives (an echo
server: the answer's bytes follow the request's through the path, and D grows by S once).
Such a pipelined echo still crosses twice for messages of one segment, so its line mixes
both: a note says so.  With h store-and-forward links at one rate the slope is h times as
steep, and the figure is the rate divided by h.  ``b`` is the size-independent part:
propagation, processing, the headers' serialisation.
"""

from __future__ import annotations

import re

import numpy as np

from .. import catalogue
from ..batch import analysis
from ..capture import Capture, Needs, holdings
from ..errors import Note, NothingToReport, UsageError
from ..ingest import Kept, read_kept
from ..render import Shown
from ..results import Result
from ..schema import IP, TCP, TIME_COLUMN, UDP, UNITLESS, Column, TableSpec
from ..sidecar import placements, stream_flows
from ..stats import median_rate, ols, train_rate
from ..addresses import endpoint
from ..streams import id_ranges, own_transport, whole_datagrams
from ..grouping import group_slices, per_group, rows_by_group
from .echoes import READS as PING_READS, Echoes, later_fragments, rows_needed as ping_rows
from .ping import echo_sessions

TRIM = 0.10
FEWEST_PACKETS = 4        # a ping-pong stream's packets with payload: two exchanges at least
# What the exchanges read of the packet table (with what streams.own_transport,
# streams.whole_datagrams and the capture's derived ``direction`` read); delay reads ping's
# echoes (echoes.Echoes) besides.
EXCHANGE_READS = (
    TCP, UDP, IP, "l4_quoted", "tcp_stream", "udp_stream", "direction", "tcp_flags",
    "tcp_seq_raw", "tcp_srcport", "tcp_dstport", "udp_srcport", "udp_dstport", "payload_len",
    "frame_time_ns", "frame_number", "frame_len", "ip_src", "ip_dst", "ip_id", "ip_len",
    "ip_hdr_len", "ip_fragment", "ip_frag_offset")
READS = tuple(dict.fromkeys(PING_READS + EXCHANGE_READS))
_C = Column
_SOURCE = _C("source", "str", "where the samples come from: 'icmp A → B' or 'tcp|udp stream N'")
SAMPLES = TableSpec("samples", "one row per latency sample", (
    _SOURCE,
    _C("size_bytes", "int64", "message size S: ICMP data, or the request's payload", "bytes"),
    TIME_COLUMN.but(note="the request's"),
    _C("latency_ms", "float64", "request -> answer", "ms"),
    _C("first_answer_ms", "float64", "request -> the answer's first packet", "ms"),
    _C("request_ms", "float64", "the request's first packet -> its last (how long the client "
       "took to send it, as captured)", "ms"),
))
SIZES = TableSpec("sizes", "one row per source and message size", (
    _SOURCE,
    _C("size_bytes", "int64", "message size S", "bytes"),
    _C("n", "int64", "samples"),
    _C("latency_mean_ms", "float64", "mean latency", "ms", heading="mean"),
    _C("latency_median_ms", "float64", "median latency", "ms", heading="median"),
    _C("latency_min_ms", "float64", "smallest latency", "ms", heading="min"),
    _C("latency_trimmed_ms", "float64", "mean latency without the lowest and highest 10 % (what "
       "the fit uses)",
       "ms"),
))
MODEL = TableSpec("model", "one row per source: the fit D = a*S + b", (
    _SOURCE,
    _C("sizes", "int64", "message sizes fitted"),
    _C("points", "int64", "samples behind them"),
    catalogue.column("a_ms_per_byte", optional=False),
    _C("a_low_ms_per_byte", "float64", "95 % confidence interval of a, low end", "ms/byte",
       optional=True, heading="a low"),
    _C("a_high_ms_per_byte", "float64", "95 % confidence interval of a, high end", "ms/byte",
       heading="a high",
       optional=True),
    catalogue.column("b_ms", optional=False),
    _C("b_low_ms", "float64", "95 % confidence interval of b, low end", "ms", optional=True,
       heading="b low"),
    _C("b_high_ms", "float64", "95 % confidence interval of b, high end", "ms", optional=True,
       heading="b high"),
    _C("r2", "float64", "coefficient of determination of the fit", UNITLESS, optional=True),
    _C("return_bps", "float64", "the answers' own arrival rate at the capture point: payload "
       "bits of their packets after the second over the time they took to arrive (median "
       "over the answers in five packets or more; empty when none is): the return path's "
       "bottleneck, or the line rate where it is not shaped", "bit/s", optional=True,
       heading="return rate"),
    _C("request_bps", "float64", "the request direction's bottleneck: 8 / (a - 8 / "
       "return_bps), what the slope leaves once the answers' own time is taken out; with "
       "no return_bps, 2 x 8 / a (a path shaped alike both ways); empty when the requests "
       "cross no bottleneck (all of the slope is the answers')", "bit/s", optional=True,
       heading="request rate"),
    _C("crossings", "float64", "how many times a message's bytes cross the bottleneck rate "
       "within D: 2 when both directions are shaped alike (assumed when the answers come in "
       "one packet), 1 when only one is or the server answers as data arrives; in between "
       "when the two rates differ (a x bandwidth_bps / 8)", UNITLESS),
    catalogue.column("bandwidth_bps", doc="here the slower of request_bps and return_bps "
                     "(the measured return_bps where they agree within 25 %; 2 x 8 / a with "
                     "no return_bps), on the wire: the slope's payload bytes carried with "
                     "their packets' headers"),
    _C("bandwidth_low_bps", "float64", "low end of bandwidth_bps' 95 % interval: where it is "
       "the measured return_bps, the order statistic n/2 - 0.98 sqrt(n) of the answers' "
       "rates (of 6 answers or more); else bandwidth_bps x a / the high end of a's interval",
       "bit/s", optional=True, heading="bandwidth low"),
    _C("bandwidth_high_bps", "float64", "high end of that interval (n/2 + 0.98 sqrt(n); "
       "bandwidth_bps x a / the low end of a's interval)", "bit/s", optional=True,
       heading="bandwidth high"),
))


class Delay(Result):
    """The fit per source (``model``), per-size latencies (``sizes``), the samples."""
    analysis = "delay"
    specs = (MODEL, SIZES, SAMPLES)
    series = "samples"
    draws = True
    view = {"model": (Shown("source", "source", wrap=True), Shown("sizes", "sizes"),
                      Shown("samples", "points", minor=True),
                      Shown("a", "a_ms_per_byte"), Shown("a low", "a_low_ms_per_byte", minor=True),
                      Shown("a high", "a_high_ms_per_byte", minor=True), Shown("b", "b_ms"),
                      Shown("b low", "b_low_ms", minor=True),
                      Shown("b high", "b_high_ms", minor=True),
                      Shown("r²", "r2"), Shown("×", "crossings", minor=True),
                      Shown("return rate", "return_bps", minor=True),
                      Shown("bandwidth", "bandwidth_bps")),
            "sizes": (Shown("source", "source", wrap=True), Shown("size", "size_bytes"),
                      Shown("n", "n"), Shown("mean", "latency_mean_ms"),
                      Shown("median", "latency_median_ms"), Shown("min", "latency_min_ms"),
                      Shown("trimmed", "latency_trimmed_ms"))}
    legend = {"model": "D = a*S + b fitted to each size's trimmed mean; bandwidth: the slower "
                       "direction's rate on the wire, from the slope and the answers' own "
                       "arrival rate (return rate, when they come in several packets): a "
                       "path shaped both ways holds 2 crossings of it (x), one shaped one "
                       "way 1.  --sizes: per size; --all: each direction's rate."}

    def _figure(self, ax=None, **options):
        from ..plots.delay import delay_figure  # lazy: matplotlib only when a figure is drawn
        return delay_figure(self, ax=ax, **options)


def rows_needed(cap: Capture) -> np.ndarray:
    """The rows delay reads: ping's (echoes, and the IP fragments after a first one, which
    also end a UDP message in fragments) and the TCP/UDP packets with payload under their own
    header (the exchanges' messages).  Decided row by row, as ping's."""
    return ping_rows(cap) | _messages(cap)


def _messages(cap: Capture) -> np.ndarray:
    """The TCP/UDP packets with payload under their own header (streams.own_transport's of
    either protocol)."""
    rows = cap.layer(TCP) | cap.layer(UDP)
    rows &= ~cap.column("l4_quoted")
    rows &= cap.column("payload_len") > 0
    return rows


# the exchanges' rows (their messages and the IP fragments that end one), read apart from the
# echoes when delay is given a path
EXCHANGES = Needs(EXCHANGE_READS, lambda cap: _messages(cap) | later_fragments(cap))


@analysis(reads=False)
def delay(capture, *, source: str = "auto") -> Delay:
    """The delay model of a capture's echo sweeps and ping-pong exchanges (``source``:
    "icmp", "exchanges" or "auto": whichever the capture has).  A path is read in one
    streaming pass keeping the echoes (echoes.Echoes) and the exchanges' rows (EXCHANGES)."""
    if source not in ("auto", "icmp", "exchanges"):
        raise UsageError(f"unknown source {source!r}", hint="use icmp, exchanges or auto")
    echoes, exchanges = _read(capture, icmp=source != "exchanges",
                              exchanges=source != "icmp")
    parts: list[dict] = []
    notes: list[str] = []
    returns: dict[str, tuple] = {}          # source -> its answers' arrival (train_rate)
    if echoes is not None:
        parts.append(_icmp_samples(echoes, notes, required=source == "icmp", returns=returns))
    if exchanges is not None:
        parts += _exchange_samples(exchanges, returns)
    path, t0 = ((echoes.path, echoes.first_time_ns) if echoes is not None
                else (exchanges.path, exchanges.first_time_ns))
    holds = (holdings(echoes.packets, echoes.counts) if echoes is not None
             else exchanges.holds())
    del echoes, exchanges
    parts = [p for p in parts if p is not None and len(p["size"])]
    if not parts:
        raise NothingToReport(f"no latency samples in {path} ({holds}): no answered ICMP "
                              "echoes captured at the pinging host and no ping-pong exchange"
                              + (f" ({notes[0]}: {notes[0].detail})" if notes else ""),
                              hint="capture at the host that sends the requests, with "
                                   "several message sizes")
    names: dict[str, int] = {}                 # source name -> code, in order of appearance
    codes = _joined(parts, "code", lambda p, code: np.array(
        [names.setdefault(n, len(names)) for n in p["names"]], np.int64)[code])
    slices = group_slices(codes, len(names))   # each source's rows: a range where in order
    by_source = slices or rows_by_group(codes, len(names))
    # each column in the room of the samples' own arrays (every one of them new, and ours)
    time_s = _joined(parts, "t_ns").astype(np.int64, copy=False)
    time_s -= t0
    latency, first = _joined(parts, "latency_ns"), _joined(parts, "first_ns")
    first_ms = first / 1e6 if first is latency else np.divide(first, 1e6, out=first)
    request = _joined(parts, "request_ns")
    table = {
        "source": per_group(np.array(list(names), object), codes, slices),
        "size_bytes": _joined(parts, "size").astype(np.int64, copy=False),
        "time_s": np.divide(time_s, 1e9, out=time_s.view(np.float64)),
        "latency_ms": np.divide(latency, 1e6, out=latency),
        "first_answer_ms": first_ms,
        "request_ms": np.divide(request, 1e6, out=request)}
    del codes, parts, time_s, latency, first, first_ms, request
    sizes = _sizes(table, list(names), by_source)
    hidden = [p for p in placements(path) if p.unseen_by_round_trips and p.what in UNSEEN]
    if hidden:
        notes.append(Note("a and b leave out what this host's egress added",
                          about="every source", detail=_hidden_text(hidden) + ": the "
                          "latencies here are timed from after them, so b lacks the delay "
                          "and a the rate; capture on the path instead (a lab router, "
                          "another host)"))
    model = _models(sizes, _overlapping_sources(table, list(names), by_source), returns, notes,
                    hidden)
    notes += _paced_sources(table, model, list(names), by_source, stream_flows(path))
    return Delay({"model": model, "sizes": sizes, "samples": table}, capture=path, notes=notes)


def _read(capture, icmp: bool, exchanges: bool) -> tuple[Echoes | None, Capture | None]:
    """The echoes (if ``icmp``) and the capture the exchanges are read from (if
    ``exchanges``): a Capture's own, or a path's, read in one pass for both."""
    if isinstance(capture, Capture):
        return (Echoes.of(capture) if icmp else None), (capture if exchanges else None)
    keepers = ([Echoes()] if icmp else []) + ([Kept(EXCHANGES)] if exchanges else [])
    kept = read_kept(capture, keepers)
    return (kept.pop(0) if icmp else None), (kept.pop(0) if exchanges else None)


def _joined(parts: list[dict], name: str, each=None) -> np.ndarray:
    """The sources' column ``name`` as one (each source's let go once copied; one source's as
    it is), ``each(part, column)`` of each if given."""
    columns = [p.pop(name) if each is None else each(p, p.pop(name)) for p in parts]
    return columns[0] if len(columns) == 1 else np.concatenate(columns)


def _samples(source, size, t_ns, latency_ns, first_ns=None, request_ns=None,
             code=None) -> dict:
    """A source's samples as columns (the answer's first packet = its last, and a request
    sent at once, unless given).  ``source``: its name, or with ``code`` the list of names
    that each sample's code indexes."""
    latency_ns = np.asarray(latency_ns, np.float64)
    return {"names": [source] if code is None else list(source),
            "code": np.zeros(len(size), np.int64) if code is None else np.asarray(code),
            "size": np.asarray(size, np.int64),
            "t_ns": np.asarray(t_ns, np.int64), "latency_ns": latency_ns,
            "first_ns": latency_ns if first_ns is None else np.asarray(first_ns, np.float64),
            "request_ns": np.zeros(len(size)) if request_ns is None
            else np.asarray(request_ns, np.float64)}


def _icmp_samples(echoes: Echoes, notes: list[str], required: bool,
                  returns: dict[str, tuple]) -> dict | None:
    rates = _fragment_rates(echoes.fragments)
    try:
        tables, _ = echo_sessions(echoes, columns=("session", "time_s", "payload_bytes",
                                                   "rtt_ms"))
    except NothingToReport:
        if required:
            raise
        return None
    e, sessions = tables["echoes"], tables["sessions"]
    at_responder = np.unique(sessions["session"][sessions["side"] == "receiver"])
    if len(at_responder):
        notes.append(Note("captured at the responder: left out",
                          about=f"ICMP session(s) {id_ranges(at_responder.tolist())}",
                          detail="request -> reply there is its turnaround (microseconds), "
                                 "not the delay to model"))
    keep = ~np.isnan(e["rtt_ms"])
    if len(at_responder):
        keep &= ~np.isin(e["session"], at_responder)
    every = bool(keep.all())         # (then the echoes' own columns, which are ours to change)
    pick = (lambda column: column) if every else (lambda column: column[keep])  # noqa: E731
    t_ns = pick(e.pop("time_s"))
    t_ns *= 1e9
    t_ns = np.round(t_ns, out=t_ns).astype(np.int64)
    t_ns += echoes.first_time_ns
    latency_ns = pick(e.pop("rtt_ms"))
    latency_ns *= 1e6
    name_of = np.zeros(int(sessions["session"].max()) + 1, np.int64)  # session -> its name
    named = [f"icmp {a} → {b}" for a, b in zip(sessions["requester"], sessions["responder"])]
    names = list(dict.fromkeys(named))
    for a, b, name in zip(sessions["requester"], sessions["responder"], named):
        if (b, a) in rates:                 # the replies come from the responder
            returns[name] = rates[(b, a)]
    code = {name: k for k, name in enumerate(names)}
    name_of[sessions["session"]] = [code[n] for n in named]
    return _samples(names, pick(e["payload_bytes"]), t_ns, latency_ns,
                    code=name_of[pick(e["session"])])


def _exchange_samples(cap: Capture, returns: dict[str, tuple]) -> list[dict]:
    """Ping-pong samples of every TCP/UDP stream whose messages alternate with answers of
    their own size (and each source's answers' arrival rate in ``returns``)."""
    out = []
    fragmented = _fragment_rates(cap)       # UDP answers over the MTU come in IP fragments
    for proto in ("tcp", "udp"):
        rows = np.flatnonzero(own_transport(cap, proto) & (cap.column("payload_len") > 0))
        if not len(rows):
            continue
        packets = _exchange_packets(cap, proto, rows)
        streams = cap.column(f"{proto}_stream")[rows]
        order = np.argsort(streams, kind="stable")
        ids, starts = np.unique(streams[order], return_index=True)
        for k, stream in enumerate(ids.tolist()):
            mine = order[starts[k]:(starts[k + 1] if k + 1 < len(ids) else len(rows))]
            if len(mine) < FEWEST_PACKETS:
                continue
            found = _pingpong(cap, proto, int(stream),
                              {name: column[mine] for name, column in packets.items()})
            if found is not None:
                out.append(found)
                name, arrival = found["names"][0], found.pop("arrival")
                ends = (found.pop("server"), found.pop("client"))
                arrival = fragmented.get(ends, arrival) if proto == "udp" else arrival
                if arrival[0] == arrival[0]:
                    returns[name] = arrival
    return out


def _exchange_packets(cap: Capture, proto: str, rows: np.ndarray) -> dict[str, np.ndarray]:
    """What the exchanges read of ``rows`` (one protocol's packets with payload), each column
    read once for all its streams."""
    packets = {
        "size": cap.column("payload_len")[rows].astype(np.int64),
        "wire": cap.column("frame_len")[rows].astype(np.int64),
        "t": cap.column("frame_time_ns")[rows].astype(np.int64, copy=False),
        # a datagram in fragments is there at its last
        "t_whole": whole_datagrams(cap, rows)[1],
        "direction": cap.column("direction")[rows],
        "src": cap.column("ip_src")[rows], "dst": cap.column("ip_dst")[rows],
        "srcport": cap.column(f"{proto}_srcport")[rows],
        "dstport": cap.column(f"{proto}_dstport")[rows]}
    if proto == "tcp":
        packets["flags"] = cap.column("tcp_flags")[rows]
        packets["seq_raw"] = cap.column("tcp_seq_raw")[rows].astype(np.int64)
    return packets


def _pingpong(cap: Capture, proto: str, stream: int, p: dict[str, np.ndarray]) -> dict | None:
    """The samples of one stream's requests answered by as many bytes (module docstring);
    ``p``: its packets with payload (``_exchange_packets``), in capture order."""
    if proto == "tcp":   # a re-sent segment is not new payload: it must not start a message
        keep = _first_sends(p["seq_raw"], p["size"], p["direction"])
        p = {name: column[keep] for name, column in p.items()}
    if len(p["size"]) < FEWEST_PACKETS:
        return None
    size, t, t_whole = p["size"], p["t"], p["t_whole"]
    client = p["direction"] == p["direction"][0]
    sent = np.cumsum(np.where(client, size, 0))          # each side's bytes so far, inclusive
    answered_bytes = np.cumsum(np.where(client, 0, size))
    sent_before, answered_before = sent - np.where(client, size, 0), \
        answered_bytes - np.where(client, 0, size)
    pushed = np.ones(len(size), bool)                     # the client's last write had ended
    if proto == "tcp":
        psh = (p["flags"] & 0x008) != 0
        last_client = np.maximum.accumulate(np.where(client, np.arange(len(size)), -1))
        previous = np.r_[-1, last_client[:-1]]
        pushed = np.where(previous >= 0, psh[np.maximum(previous, 0)], True)
    starts = np.flatnonzero(client & (answered_before >= sent_before) & pushed)
    if len(starts) < 2:
        return None
    ends = np.r_[starts[1:], len(size)]                   # each request's packets and answer's
    request = sent[ends - 1] - sent_before[starts]
    answer = answered_bytes[ends - 1] - answered_before[starts]
    index = np.arange(len(size))
    last_answer = np.maximum.reduceat(np.where(client, -1, index), starts)
    first_answer = np.minimum.reduceat(np.where(client, len(size), index), starts)
    last_request = np.maximum.reduceat(np.where(client, index, -1), starts)
    ok = np.flatnonzero((request == answer) & (request > 0))
    if len(ok) < max(2, len(starts) // 2):                # not ping-pong: answers differ
        return None
    src, dst = cap.addresses[p["src"][0]], cap.addresses[p["dst"][0]]
    name = (f"{proto} stream {stream} {endpoint(src, p['srcport'][0])} → "
            f"{endpoint(dst, p['dstport'][0])}")
    answers = [np.flatnonzero(~client[a:b + 1]) + a
               for a, b in zip(first_answer[ok].tolist(), last_answer[ok].tolist())]
    arrivals = [train_rate(t[k], size[k], p["wire"][k]) for k in answers]
    return {**_samples(name, request[ok], t[starts[ok]],
                       t_whole[last_answer[ok]] - t[starts[ok]],
                       t[first_answer[ok]] - t[starts[ok]], t[last_request[ok]] - t[starts[ok]]),
            "arrival": median_rate(arrivals), "server": dst, "client": src}


def _fragment_rates(cap: Capture) -> dict[tuple[str, str], tuple]:
    """(source address, destination address) -> the median arrival rate (stats.train_rate) of
    the IPv4 datagrams between them that came in IP fragments (a ping -s over the MTU, a
    UDP answer of a ping-pong): fragments of one datagram share the addresses and the IP
    identification, the first (offset 0) beginning it."""
    rows = np.flatnonzero(cap.layer(IP) & cap.column("ip_fragment").astype(bool))
    if not len(rows):
        return {}
    key = ((cap.column("ip_src")[rows].astype(np.int64) << 40)
           | (cap.column("ip_dst")[rows].astype(np.int64) << 16)
           | cap.column("ip_id")[rows].astype(np.int64))
    t = cap.column("frame_time_ns")[rows].astype(np.int64)
    order = np.lexsort((t, key))                 # by datagram key, each in time order
    rows, key, t = rows[order], key[order], t[order]
    payload = (cap.column("ip_len")[rows].astype(np.int64)
               - cap.column("ip_hdr_len")[rows].astype(np.int64))
    wire = cap.column("frame_len")[rows].astype(np.int64)
    # a datagram begins where its key does, or where its key is used again (a first fragment)
    first = cap.column("ip_frag_offset")[rows] == 0
    bounds = np.r_[0, np.flatnonzero((np.diff(key) != 0) | first[1:]) + 1, len(key)].tolist()
    by_pair: dict[tuple[str, str], list[tuple]] = {}
    for a, b in zip(bounds[:-1], bounds[1:]):
        ends = (str(cap.addresses[cap.column("ip_src")[rows[a]]]),
                str(cap.addresses[cap.column("ip_dst")[rows[a]]]))
        by_pair.setdefault(ends, []).append(train_rate(t[a:b], payload[a:b], wire[a:b]))
    return {ends: arrival for ends, arrivals in by_pair.items()
            if (arrival := median_rate(arrivals))[0] == arrival[0]}


def _first_sends(raw: np.ndarray, size: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Mask of the TCP segments whose payload reaches past everything their direction sent
    before (``raw``: sequence numbers as on the wire)."""
    keep = np.ones(len(raw), bool)
    for side in (0, 1):
        mine = np.flatnonzero(d == side)
        if len(mine) > 1:
            step = np.diff(raw[mine])          # unwrap the 32-bit numbers, in capture order
            wraps = np.r_[0, np.cumsum((step < -2**31).astype(np.int64)
                                       - (step > 2**31).astype(np.int64))]
            end = raw[mine] + wraps * 2**32 + size[mine]
            reach = np.maximum.accumulate(end)
            keep[mine[1:]] = end[1:] > reach[:-1]
    return keep


def _sizes(samples: dict, names: list[str], by_source: list) -> dict:
    """One row per (source, size), sorted: n, mean, median, min, trimmed mean (``by_source``:
    each source's rows, a slice or indices)."""
    rows: dict[str, list] = {col.name: [] for col in SIZES.columns}
    for k in sorted(range(len(names)), key=lambda k: names[k]):
        z, x = samples["size_bytes"][by_source[k]], samples["latency_ms"][by_source[k]]
        if not len(z):          # a source named (an ICMP session) with no sample kept
            continue
        # by size (a sweep's sizes come in runs: a merge), then each size's latencies sorted;
        # they come from integer nanoseconds (no -0.0), so equal ones are the same bits
        if not (z[1:] >= z[:-1]).all():
            order = np.argsort(z, kind="stable")
            z, x = z[order], x[order]
        starts = np.flatnonzero(np.r_[True, z[1:] != z[:-1]])
        for a, b in zip(starts.tolist(), np.r_[starts[1:], len(z)].tolist()):
            lat = np.sort(x[a:b])                          # sorted: the trim is a slice
            cut, half = int(TRIM * len(lat)), len(lat) // 2
            rows["source"].append(names[k])
            rows["size_bytes"].append(int(z[a]))
            rows["n"].append(len(lat))
            rows["latency_mean_ms"].append(float(lat.mean()))
            # np.median: the mean of the middle one or two of the sorted values (no NaN here)
            rows["latency_median_ms"].append(float(lat[half - 1 + len(lat) % 2:half + 1].mean()))
            rows["latency_min_ms"].append(float(lat[0]))
            rows["latency_trimmed_ms"].append(float(lat[cut:len(lat) - cut].mean()))
    return {col.name: np.asarray(rows[col.name], dtype=object if col.dtype == "str" else None)
            for col in SIZES.columns}


def _overlapping_sources(samples: dict, names: list[str], by_source: list) -> set[str]:
    """Sources whose server answers as data arrives.  Where it reads the whole message first,
    the answer's first packet comes S / rate later for a larger S, as the last one does (half
    the slope of D); where it echoes as data arrives, the first packet comes back after one
    segment's trip whatever S.  So: over the samples answered in several packets, the slope
    of the first packet's time against S is under a quarter of D's."""
    out = set()
    for source, mine in zip(names, by_source):
        latency, first = samples["latency_ms"][mine], samples["first_answer_ms"][mine]
        several = np.flatnonzero(first < latency)
        x = samples["size_bytes"][mine][several].astype(np.float64)
        if len(np.unique(x)) < 2:
            continue
        full = ols(x, latency[several])["a_ms_per_byte"]
        first = ols(x, first[several])["a_ms_per_byte"]
        if full > 0 and first < 0.25 * full:
            out.add(source)
    return out


PACED_FACTOR = 2.0     # a client sending within messages under this x the implied rate: note


def _paced_sources(samples: dict, model: dict, names: list[str],
                   by_source: list[np.ndarray], flows: dict) -> list[str]:
    """Notes for sources whose client sent its requests not much faster than the bandwidth the
    slope implies: a sender pacing itself (BBR with one message in flight paces near its own
    small rate estimate) or held by its window makes the slope its own, not the path's.  The
    sending rate is the request bytes after each first packet over the time to the last."""
    out = []
    code = {name: k for k, name in enumerate(names)}
    for i, source in enumerate(model["source"].tolist()):
        rows = by_source[code[source]]
        request = samples["request_ms"][rows]
        sent = request > 0
        seconds = request[sent].sum() / 1e3
        if not sent.any() or not seconds > 0 or not model["bandwidth_bps"][i] > 0:
            continue
        rate = 8 * samples["size_bytes"][rows][sent].sum() / seconds
        if rate < PACED_FACTOR * model["bandwidth_bps"][i]:
            out.append(Note("the slope may be the sender's pacing", about=source,
                            detail=f"the client sent its requests at about {rate / 1e6:.3g} "
                                   "Mbit/s within each message, near the "
                                   f"{model['bandwidth_bps'][i] / 1e6:.3g} Mbit/s the slope "
                                   "implies: the slope may be the sender's pacing or window, "
                                   "not the path" + _sender_hint(source, flows)))
    return out


def _sender_hint(source: str, flows: dict) -> str:
    """What to try, by the congestion control the lab sidecar says the client's socket used
    (none said where the capture has no sidecar)."""
    m = re.match(r"^(tcp|udp) stream (\d+) ", source)
    cc = (flows.get((m.group(1), int(m.group(2)))) or {}).get("cc") if m else None
    if cc == "bbr":
        return " (its sender is BBR, which paces near its own rate estimate: try cubic)"
    if cc:
        return (f" (its sender is {cc}: a window too small for the path's bandwidth-delay "
                "product holds each message back; raise it, or send fewer bytes a message)")
    return " (BBR paces near its own rate estimate; a small window holds messages back)"


UNSEEN = ("delay", "jitter", "rate", "serialisation")   # what bends a latency left out


def _hidden_text(hidden: list) -> str:
    """What the hidden placements are and why they are hidden, one clause ("20 ms delay and
    20 Mbit/s rate on this host's eth0, egress, act on the requests before ...")."""
    what = " and ".join(f"{p.amount} {p.what}" for p in hidden)
    return (f"{what} on {hidden[0].at} act on the requests before this capture point sees "
            "them (the capture's sidecar says so; tcpdump's tap is after the qdisc and "
            "netfilter)")


def _models(sizes: dict, overlapping: set[str], returns: dict[str, tuple],
            notes: list[str], hidden: list = ()) -> dict:
    rows: dict[str, list] = {c.name: [] for c in MODEL.columns}
    source_of = sizes["source"].tolist()                  # each source's sizes are together
    starts = [k for k in range(len(source_of)) if k == 0 or source_of[k] != source_of[k - 1]]
    for a, b in zip(starts, starts[1:] + [len(source_of)]):
        source, mine = source_of[a], slice(a, b)
        s = sizes["size_bytes"][mine].astype(np.float64)
        y = sizes["latency_trimmed_ms"][mine].astype(np.float64)
        if len(s) < 2:
            notes.append(Note("one size: no slope", about=source,
                              detail="a slope needs two message sizes or more"))
            continue
        fit = ols(s, y)
        rows["source"].append(source)
        rows["sizes"].append(len(s))
        rows["points"].append(int(sizes["n"][mine].sum()))
        for name, key in (("a_ms_per_byte", "a_ms_per_byte"), ("a_low_ms_per_byte", "a_low"),
                          ("a_high_ms_per_byte", "a_high"), ("b_ms", "b_ms"),
                          ("b_low_ms", "b_low"), ("b_high_ms", "b_high"), ("r2", "r2")):
            rows[name].append(fit[key])
        a = fit["a_ms_per_byte"]
        return_bps, factor, return_low, return_high = returns.get(source, (np.nan,) * 4)
        factor = factor if factor == factor else 1.0   # wire bytes a payload byte, large S
        rates = _directions(a / 1e3 / factor, return_bps, source in overlapping)
        bandwidth = rates["bandwidth_bps"]
        rows["return_bps"].append(rates["return_bps"])
        rows["request_bps"].append(rates["request_bps"])
        rows["crossings"].append(rates["crossings"])
        rows["bandwidth_bps"].append(bandwidth)
        if bandwidth == return_bps and return_low == return_low:   # measured: its own
            rows["bandwidth_low_bps"].append(return_low)
            rows["bandwidth_high_bps"].append(return_high)
        else:                                         # from the slope: a's relative interval
            for name, slope in (("bandwidth_low_bps", fit["a_high"]),
                                ("bandwidth_high_bps", fit["a_low"])):
                rows[name].append(bandwidth * a / slope if slope > 0 else np.nan)
        if fit["b_high"] < 0:
            why = (f"here {_hidden_text(hidden)}" if hidden else
                   "a delay or rate applied on this host's own egress (before the capture "
                   "point sees the requests), or a sender pacing its larger messages, bends "
                   "it")
            notes.append(Note("intercept b below zero: not this path's", about=source,
                              detail=f"b's 95 % interval is {fit['b_low']:.3g} to "
                                     f"{fit['b_high']:.3g} ms: latency cannot be negative for "
                                     f"an empty message, so the line is not this path's -- "
                                     f"{why}; capture where the impairment cannot hide, or "
                                     "read b as unknown"))
        if source in overlapping:
            notes.append(Note("answers overlap requests: bandwidth = 8 / a", about=source,
                              detail="the answers begin before their requests end (a server "
                                     "that echoes as data arrives): a byte crosses the "
                                     "bottleneck once in D, so bandwidth = 8 / a; messages of "
                                     "one segment still cross twice, so the line mixes both "
                                     "(fit the larger sizes alone to avoid it)"))
        if not a > 0:
            notes.append(Note("flat latency: no bandwidth", about=source,
                              detail=f"latency does not grow with size (slope {a:.3g} "
                                     "ms/byte): a path without serialisation delay, or sizes "
                                     "too close together"))
    return {c.name: np.asarray(rows[c.name], dtype=object if c.dtype == "str" else
                               float if c.dtype == "float64" else np.int64)
            for c in MODEL.columns}


UNSHAPED_SHARE = 0.05    # a direction taking under this share of the slope is not shaped
ALIKE = 0.25             # request and return rates this close: one bottleneck rate both ways


def _directions(a_s: float, return_bps: float, overlapping: bool) -> dict:
    """The request and return rates, the bottleneck and the crossings the slope ``a_s``
    (seconds a byte on the wire) holds.  D grows by 8 / request rate + 8 / return rate a
    byte (a store-and-forward path, request then answer), the return rate measured from the
    answers' own arrival.  The bottleneck is the slower direction; where the two agree within
    ALIKE it is the measured return rate (the request's, what the slope leaves over, also
    holds the ends' own time a byte: copying, reassembly).  Without a measured return the
    two are taken alike (crossings 2); an answer that overlaps its request (an echo as data
    arrives) crosses once."""
    out = {"return_bps": return_bps, "request_bps": np.nan, "crossings": 2.0,
           "bandwidth_bps": np.nan}
    if not a_s > 0:
        return out
    if overlapping:
        out.update(crossings=1.0, bandwidth_bps=8 / a_s)
        return out
    if not return_bps == return_bps:                     # not measured: alike both ways
        out.update(request_bps=2 * 8 / a_s, bandwidth_bps=2 * 8 / a_s)
        return out
    answer = 8 / return_bps                              # seconds a byte on the way back
    if answer >= (1 - UNSHAPED_SHARE) * a_s:             # only the answers are shaped
        out.update(crossings=1.0, bandwidth_bps=return_bps)
        return out
    out["request_bps"] = request = 8 / (a_s - answer)
    if answer <= UNSHAPED_SHARE * a_s:                   # only the requests are
        out.update(crossings=1.0, bandwidth_bps=request)
        return out
    alike = abs(request / return_bps - 1) <= ALIKE
    out["bandwidth_bps"] = return_bps if alike else min(request, return_bps)
    out["crossings"] = a_s * out["bandwidth_bps"] / 8
    return out
