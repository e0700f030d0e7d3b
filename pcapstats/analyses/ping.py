"""ICMP echo (ping) sessions of a capture: what ping's summary lines say, from the packets.

A **session** is one pinging process: echo requests from one address to another with one ICMP
identifier (ICMPv4 type 8 -> 0, ICMPv6 128 -> 129).  With several payload sizes in a session
(a size sweep) each size gets its own row.  Definitions, as iputils ping prints them:

- ``transmitted``: requests seen, one per sequence number (16-bit numbers unwrapped in time
  order, so a session past 65535 requests still counts each);
- ``received``: requests answered at least once; ``duplicates``: further replies to an answered
  request (ping's "+N duplicates");
- ``loss_pct``: (transmitted - received) / transmitted x 100;
- RTT of a reply: its capture time minus that of the *first* request with its sequence number
  (the latest one before it, when numbers wrap); an echo larger than the MTU travels in IP
  fragments: its size is the whole message's and its reply counts from its last fragment; ``rtt_min/avg/max_ms`` over the replies,
  duplicates included (ping counts them in its statistics too); ``rtt_mdev_ms`` =
  sqrt(mean(rtt^2) - mean(rtt)^2), ping's "mdev" (a population standard deviation).

A capture times packets where it was taken, so what the request -> reply gap means depends on
the **side**, decided per session from the IP TTL (hop limit) -- a packet captured where it
was sent still has its sender's initial TTL (64, 128 or 255), one that crossed a router does
not -- and, where no router sits between the hosts, from the timestamp iputils ping writes at
the start of each request's data (``send``: the requester's clock when it sent):

- ``requester``: the gap is the round trip (ping's own RTT, within the few microseconds
  between the capture's clock and ping's);
- ``responder``: the gap is only the responder's turnaround (microseconds); the RTT columns
  are left empty and ``turnaround_ms`` holds it;
- ``path``: captured between them: the gap is the round trip from the capture point onwards;
- ``unknown``: the gap is shown as RTT, with a note.

Tables: ``sessions`` (one row per session and size), ``echoes`` (one row per request: its
sequence number, time, size, RTT of its first reply, replies).
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..errors import UsageError
from ..render import Shown
from ..results import Result
from ..ingest.source import open_source
from ..schema import ICMP, ICMP_ECHO, IP, TCP, UDP, Column, TableSpec
from ..streams import id_ranges, whole_datagrams
from .verify.checks import payload

REQUEST, REPLY = {4: 8, 6: 128}, {4: 0, 6: 129}
INITIAL_TTLS = (32, 64, 128, 255)
SEND_TIME_SAMPLES = 1000
SIDES = ("requester", "responder", "path", "unknown")
_C = Column
_SESSION = (
    _C("session", "int64", "session number, in order of first request"),
    _C("requester", "str", "address sending the echo requests"),
    _C("responder", "str", "address answering them"),
    _C("ident", "int64", "ICMP identifier", wireshark="icmp.ident|icmpv6.echo.identifier"),
)
SESSIONS = TableSpec("sessions", "one row per echo session (requester, responder, identifier) "
                     "and payload size", (
    *_SESSION,
    _C("payload_bytes", "int64", "ICMP data bytes of the requests (ping -s)", "bytes"),
    _C("side", "str", "where the capture was taken, for this session", values=SIDES),
    _C("transmitted", "int64", "requests seen (one per sequence number)", "packets"),
    _C("received", "int64", "requests answered", "packets"),
    _C("duplicates", "int64", "replies beyond the first to a request", "packets"),
    _C("loss_pct", "float64", "(transmitted - received) / transmitted x 100", "%"),
    _C("rtt_min_ms", "float64", "smallest request -> reply time (empty at the responder)", "ms",
       optional=True),
    _C("rtt_avg_ms", "float64", "mean request -> reply time, duplicates included as ping does",
       "ms", optional=True),
    _C("rtt_max_ms", "float64", "largest request -> reply time", "ms", optional=True),
    _C("rtt_mdev_ms", "float64", "ping's mdev: sqrt(mean(rtt^2) - mean(rtt)^2)", "ms",
       optional=True),
    _C("turnaround_ms", "float64", "at the responder: mean request -> reply time there (the "
       "responder's own delay, not the path's)", "ms", optional=True),
    _C("first_s", "float64", "first request, seconds since the capture's first packet", "s"),
    _C("duration_s", "float64", "first to last request", "s"),
))
ECHOES = TableSpec("echoes", "one row per echo request", (
    *_SESSION,
    _C("icmp_seq", "int64", "sequence number, unwrapped past 65535",
       wireshark="icmp.seq|icmpv6.echo.sequence_number"),
    _C("frame_number", "int64", "the request's packet number"),
    _C("time_s", "float64", "the request, seconds since the capture's first packet", "s"),
    _C("payload_bytes", "int64", "ICMP data bytes", "bytes"),
    _C("replies", "int64", "replies to it (more than 1: duplicates)", "packets"),
    _C("reply_frame", "int64", "the first reply's packet number", optional=True),
    _C("rtt_ms", "float64", "request -> first reply (empty when unanswered)", "ms",
       wireshark="icmp.resptime", optional=True),
))


class Ping(Result):
    """ICMP echo sessions (``sessions``) and every request (``echoes``)."""
    analysis = "ping"
    specs = (SESSIONS, ECHOES)
    series = "echoes"
    draws = True
    overlays = True
    view = {"sessions": (Shown("requester → responder", join="{requester} → {responder}",
                               wrap=True),
                         Shown("id", "ident", minor=True), Shown("size", "payload_bytes"),
                         Shown("side", "side", minor=True), Shown("sent", "transmitted"),
                         Shown("recv", "received"), Shown("dup", "duplicates", minor=True),
                         Shown("loss", "loss_pct"), Shown("min", "rtt_min_ms"),
                         Shown("avg", "rtt_avg_ms"), Shown("max", "rtt_max_ms"),
                         Shown("mdev", "rtt_mdev_ms"),
                         Shown("turnaround", "turnaround_ms", minor=True))}
    legend = {"sessions": "min/avg/max/mdev: request -> reply times as ping prints them "
                          "(duplicates included).  --all: identifiers, sides, times."}

    def _figure(self, **options):
        from ..plots.ping import ping_figure  # lazy: matplotlib only when a figure is drawn
        return ping_figure(self, **options)


@analysis()
def ping(capture: Capture, *, requester: str | None = None) -> Ping:
    """Echo sessions of a capture (only those sent by ``requester``, an address, if given)."""
    echo = np.flatnonzero(capture.layer(ICMP_ECHO))
    version = capture.column("ip_version")[echo]
    kind = capture.column("icmp_type")[echo]
    is_request = ((version == 4) & (kind == REQUEST[4])) | ((version == 6) & (kind == REQUEST[6]))
    is_reply = ((version == 4) & (kind == REPLY[4])) | ((version == 6) & (kind == REPLY[6]))
    requests, replies = echo[is_request], echo[is_reply]
    if requester is not None:
        codes = np.flatnonzero(capture.addresses == requester)
        requests = requests[np.isin(capture.column("ip_src")[requests], codes)]
    if not len(requests):
        raise UsageError(f"no ICMP echo requests{'' if requester is None else ' from ' + requester}"
                         f" in {capture.path} ({_what_it_has(capture)})",
                         hint="ping sessions are echo requests and their replies; "
                              "`pcapstats throughput` lists the streams it has")
    return _sessions(capture, requests, replies)


def _what_it_has(cap: Capture) -> str:
    counts = {name: int(cap.layer(layer).sum()) for name, layer in
              (("TCP", TCP), ("UDP", UDP), ("ICMP", ICMP))}
    has = [f"{n} {name}" for name, n in counts.items() if n]
    return f"{len(cap)} packets: " + (", ".join(has) if has else "none TCP, UDP or ICMP")


def _sessions(cap: Capture, requests: np.ndarray, replies: np.ndarray) -> Ping:
    keys, session, rep_session = _session_keys(cap, requests, replies)
    answered = rep_session >= 0
    replies, rep_session = replies[answered], rep_session[answered]

    t_ns = cap.column("frame_time_ns").astype(np.int64)
    seq16 = cap.column("icmp_seq").astype(np.int64)
    req_seq = _unwrap(seq16[requests], session)
    # each reply answers the latest request of its session with the same 16-bit number
    echo = _first_requests(session, req_seq, requests)
    e_rows, e_session, e_seq = requests[echo], session[echo], req_seq[echo]
    match = _match(e_session, seq16[e_rows], t_ns[e_rows], rep_session, seq16[replies],
                   t_ns[replies])
    size, end_ns = _whole_messages(cap, np.r_[requests, replies])
    rtt_ns = np.where(match >= 0, end_ns[replies] - t_ns[e_rows[np.maximum(match, 0)]], 0)
    replies, rtt_ns, match = replies[match >= 0], rtt_ns[match >= 0], match[match >= 0]
    n_replies = np.bincount(match, minlength=len(e_rows))
    first_reply = np.full(len(e_rows), -1, np.int64)
    first_rtt = np.full(len(e_rows), np.nan)
    by_time = np.argsort(t_ns[replies], kind="stable")[::-1]   # the earliest written last
    first_reply[match[by_time]] = cap.column("frame_number")[replies][by_time]
    first_rtt[match[by_time]] = rtt_ns[by_time] / 1e6

    t0 = int(t_ns[0])
    addresses = cap.addresses
    echoes = {
        "session": e_session, "requester": addresses[keys[e_session, 0]],
        "responder": addresses[keys[e_session, 1]], "ident": keys[e_session, 2],
        "icmp_seq": e_seq, "frame_number": cap.column("frame_number")[e_rows].astype(np.int64),
        "time_s": (t_ns[e_rows] - t0) / 1e9, "payload_bytes": size[e_rows],
        "replies": n_replies, "reply_frame": np.where(first_reply >= 0, first_reply, np.nan),
        "rtt_ms": first_rtt}
    sides, evidence = _sides(cap, len(keys), e_session, e_rows, replies, match, rtt_ns)
    summary = _summary(echoes, keys, rtt_ns / 1e6, e_session[match], size[e_rows][match], sides,
                       addresses)
    said: dict[tuple, list[int]] = {}   # one note for the sessions that share one
    for k in np.flatnonzero(np.asarray(sides, object) != "requester").tolist():
        pair = f"{addresses[keys[k, 0]]} → {addresses[keys[k, 1]]}"
        said.setdefault((pair, sides[k], evidence[k]), []).append(k)
    notes = [f"session{'s' if len(ks) > 1 else ''} {id_ranges(ks)} ({pair}): {_SIDE_SAYS[side]}"
             f" ({why})" for (pair, side, why), ks in said.items()]
    return Ping({"sessions": summary, "echoes": echoes}, capture=cap.path, notes=notes)


def _session_keys(cap: Capture, requests: np.ndarray, replies: np.ndarray):
    """(keys, session of each request, session of each reply or -1): a session is a
    (requester, responder, identifier) with a request, numbered by its first request; a reply
    belongs to the session whose key it answers."""
    src, dst = cap.column("ip_src").astype(np.int64), cap.column("ip_dst").astype(np.int64)
    ident = cap.column("icmp_ident").astype(np.int64)
    a = max(len(cap.addresses), 1)           # one int64 a key: (requester, responder, ident)
    code = (np.r_[src[requests], dst[replies]] * a + np.r_[dst[requests], src[replies]]) \
        * 65536 + np.r_[ident[requests], ident[replies]]
    unique_code, which = np.unique(code, return_inverse=True)
    which = which.ravel()
    unique = np.stack([unique_code // 65536 // a, unique_code // 65536 % a,
                       unique_code % 65536], axis=1)
    n = len(requests)
    first = np.full(len(unique), n, np.int64)
    np.minimum.at(first, which[:n], np.arange(n))          # requests are in capture order
    sessions = np.flatnonzero(first < n)
    sessions = sessions[np.argsort(first[sessions], kind="stable")]
    rank = np.full(len(unique), -1, np.int64)
    rank[sessions] = np.arange(len(sessions))
    return unique[sessions], rank[which[:n]], rank[which[n:]]


_SIDE_SAYS = {
    "responder": "captured at the responder: request -> reply is its turnaround, not the "
                 "round trip (turnaround_ms); capture at the pinging host for RTTs",
    "path": "captured between the hosts: RTTs are from the capture point to the responder "
            "and back, less than ping's",
    "unknown": "the capture side is unknown: if it was taken at the responder, the RTTs are "
               "its turnaround",
}


def _whole_messages(cap: Capture, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ICMP data bytes of each packet's whole message, and when its last fragment was
    captured (ping -s above the MTU sends an echo in IP fragments; ping times the reply when
    its last fragment arrives).  Arrays over every row of the capture; rows other than
    ``rows`` keep their own size and time."""
    size = cap.column("payload_len").astype(np.int64).copy()
    end = cap.column("frame_time_ns").astype(np.int64).copy()
    frag = rows[cap.column("ip_fragment")[rows].astype(bool) & cap.layer(IP)[rows]]
    if len(frag):
        carried, end[frag] = whole_datagrams(cap, frag)
        size[frag] = carried - 8                                   # less the ICMP header
    return size, end


def _unwrap(seq16: np.ndarray, session: np.ndarray) -> np.ndarray:
    """16-bit sequence numbers -> counting numbers, per session in capture order (a step down
    of more than half the range is a wrap)."""
    order = np.argsort(session, kind="stable")            # each session's requests, in order
    s, q = session[order], seq16[order]
    same = np.r_[False, s[1:] == s[:-1]]
    step = np.r_[0, np.diff(q)]
    wraps = np.cumsum(np.where(same, (step < -32768).astype(np.int64)
                               - (step > 32768).astype(np.int64), 0))
    start = np.maximum.accumulate(np.where(same, 0, np.arange(len(s))))
    out = np.empty_like(seq16)
    out[order] = q + 65536 * (wraps - wraps[start])
    return out


def _first_requests(session: np.ndarray, seq: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Indices of the first request of each (session, sequence number), in capture order."""
    key = session * (1 << 40) + seq
    _, first = np.unique(key, return_index=True)
    return np.sort(first)


def _match(e_session, e_seq16, e_t, r_session, r_seq16, r_t) -> np.ndarray:
    """For each reply, the index of the latest request of its session and 16-bit number sent
    at or before it; -1 when none (a reply to a request the capture missed).  One sort: the
    requests and replies are ranked by time (a request before a reply at the same instant),
    and each reply finds the last request at or below (its key, its rank)."""
    n = len(e_t)
    _, key = np.unique(np.r_[e_session * 65536 + e_seq16, r_session * 65536 + r_seq16],
                       return_inverse=True)
    key = key.ravel().astype(np.int64)
    t = np.r_[e_t, r_t]
    rank = np.empty(len(t), np.int64)
    rank[np.lexsort((np.r_[np.zeros(n), np.ones(len(r_t))], t))] = np.arange(len(t))
    span = len(t) + 1
    code = key * span + rank
    order = np.argsort(code[:n], kind="stable")
    sorted_code = code[:n][order]
    pos = np.searchsorted(sorted_code, code[n:], side="right") - 1
    found = (pos >= 0) & (sorted_code[np.maximum(pos, 0)] // span == key[n:])
    return np.where(found, order[np.maximum(pos, 0)], -1)


def _sides(cap, n_sessions, e_session, e_rows, replies, match, rtt_ns
           ) -> tuple[list[str], list[str]]:
    """Each session's capture side and the evidence, from TTLs (and ping's send timestamps
    where no router changed them)."""
    ttl = cap.column("ip_ttl").astype(np.int64)
    req_ttl = _mode_per_group(e_session, ttl[e_rows], n_sessions)
    rep_ttl = _mode_per_group(e_session[match], ttl[replies], n_sessions)
    initial = np.asarray(INITIAL_TTLS)
    req_initial, rep_initial = np.isin(req_ttl, initial), np.isin(rep_ttl, initial)
    sides, evidence = [], []
    by_session = rows_by_group(e_session, n_sessions)
    reply_rtts = rows_by_group(e_session[match], n_sessions)
    file_bytes: list = []                 # the capture's bytes, opened once if any session asks
    for k in range(n_sessions):
        said = f"request TTL {req_ttl[k]}" + ("" if rep_ttl[k] < 0 else
                                             f", reply TTL {rep_ttl[k]}")
        if rep_ttl[k] < 0:
            side = "requester" if req_initial[k] else "path"
        elif req_initial[k] != rep_initial[k]:
            side = "requester" if req_initial[k] else "responder"
        elif not req_initial[k]:
            side = "path"
        else:
            side, more = _side_from_send_times(cap, file_bytes, e_rows[by_session[k]],
                                               rtt_ns[reply_rtts[k]])
            said += f" (no router between the hosts); {more}"
        sides.append(side)
        evidence.append(said)
    return sides, evidence


def _mode_per_group(group: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """The most common value of each group (the smallest on a tie), -1 for an empty group."""
    out = np.full(n_groups, -1, np.int64)
    if not len(group):
        return out
    span = int(values.max()) + 1
    pairs, counts = np.unique(group * span + values, return_counts=True)
    g, v = pairs // span, pairs % span
    best = np.lexsort((v, -counts, g))
    first = best[np.r_[True, g[best][1:] != g[best][:-1]]]
    out[g[first]] = v[first]
    return out


def rows_by_group(group: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """For each group 0..n_groups-1, the indices of its members (one sort, no mask per group)."""
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    return [order[bounds[k]:bounds[k + 1]] for k in range(n_groups)]


def _side_from_send_times(cap, file_bytes: list, requests, rtt_ns) -> tuple[str, str]:
    """iputils ping writes its send time (struct timeval, 16 bytes, little-endian on the
    hosts people use) at the start of each request's data.  Where the capture was taken at the
    requester, a request is captured microseconds after that time and its reply a round trip
    later; at the responder the request arrives a one-way delay after it and the reply leaves
    microseconds later (when the hosts' clocks agree, as in a lab).  The medians of up to
    SEND_TIME_SAMPLES requests, evenly spread, decide: a flood of a million says no more."""
    if not len(rtt_ns):
        return "unknown", "no reply to compare"
    requests = requests[::max(1, len(requests) // SEND_TIME_SAMPLES)]
    try:
        if not file_bytes:
            file_bytes.append(open_source(cap.path).buf)
        heads = payload(cap, file_bytes[0], requests, 16)
    except Exception:     # a file gone or unreadable since it was read: just say unknown
        heads = None
    if heads is None:
        return "unknown", "requests carry no send time"
    seconds, usec = np.frombuffer(b"".join(heads), "<u8").reshape(-1, 2).T
    usec_ok = bool((usec < 10**6).all() and (seconds < 2**33).all())   # ns fit in int64
    sent = seconds.astype(np.int64) * 10**9 + usec.astype(np.int64) * 1000 if usec_ok else 0
    t = cap.column("frame_time_ns").astype(np.int64)
    lag = float(np.median(t[requests] - sent))       # send -> capture of the request
    gap = float(np.median(rtt_ns))                    # capture of the request -> its reply
    if not usec_ok or not 0 <= lag < 60e9:
        return "unknown", "requests carry no send time ping's way"
    said = (f"requests captured {lag / 1e6:.3f} ms after ping sent them, replies "
            f"{gap / 1e6:.3f} ms after the requests")
    return ("requester" if lag < gap else "responder"), said


def _summary(echoes: dict, keys, rtt_ms, rtt_session, rtt_size, sides, addresses) -> dict:
    """One row per (session, payload size)."""
    group = echoes["session"] * (1 << 32) + echoes["payload_bytes"]
    groups, which = np.unique(group, return_inverse=True)
    which = which.ravel()
    rtt_which = np.searchsorted(groups, rtt_session * (1 << 32) + rtt_size)
    echoes_of = rows_by_group(which, len(groups))
    rtts_of = rows_by_group(rtt_which, len(groups))
    rows: dict[str, list] = {c.name: [] for c in SESSIONS.columns}
    for i, g in enumerate(groups.tolist()):
        k, size = g >> 32, g & 0xFFFFFFFF
        mine = echoes_of[i]
        tx = len(mine)
        replies = echoes["replies"][mine]
        rx = int((replies > 0).sum())
        dup = int(np.maximum(replies - 1, 0).sum())
        at_responder = sides[k] == "responder"
        stats = _ping_stats(rtt_ms[rtts_of[i]])
        times = echoes["time_s"][mine]
        rows["session"].append(k)
        rows["requester"].append(addresses[keys[k, 0]])
        rows["responder"].append(addresses[keys[k, 1]])
        rows["ident"].append(int(keys[k, 2]))
        rows["payload_bytes"].append(size)
        rows["side"].append(sides[k])
        rows["transmitted"].append(tx)
        rows["received"].append(rx)
        rows["duplicates"].append(dup)
        rows["loss_pct"].append(100.0 * (tx - rx) / tx)
        for name, value in zip(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"), stats):
            rows[name].append(np.nan if at_responder else value)
        rows["turnaround_ms"].append(stats[1] if at_responder else np.nan)
        rows["first_s"].append(float(times.min()))
        rows["duration_s"].append(float(times.max() - times.min()))
    return {c.name: np.asarray(rows[c.name], dtype=object if c.dtype == "str" else None)
            for c in SESSIONS.columns}


def _ping_stats(rtt_ms: np.ndarray) -> tuple[float, float, float, float]:
    """min, avg, max, mdev as ping computes them (mdev: population standard deviation)."""
    if not len(rtt_ms):
        return (np.nan,) * 4
    mean = float(rtt_ms.mean())
    mdev = float(np.sqrt(max(float((rtt_ms ** 2).mean()) - mean * mean, 0.0)))
    return float(rtt_ms.min()), mean, float(rtt_ms.max()), mdev
