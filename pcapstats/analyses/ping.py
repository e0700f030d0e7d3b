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
from ..capture import Capture, Needs
from ..errors import UsageError
from ..render import Shown
from ..results import Result
from ..ingest.source import open_source
from ..schema import ICMP, ICMP_ECHO, IP, TCP, UDP, Column, TableSpec
from ..streams import id_ranges, whole_datagrams

REQUEST, REPLY = {4: 8, 6: 128}, {4: 0, 6: 129}
INITIAL_TTLS = (32, 64, 128, 255)
SEND_TIME_SAMPLES = 1000
SEND_TIME_CHUNK = 256
SIDES = ("requester", "responder", "path", "unknown")
# What ping reads of the packet table (its columns and layers, with those of the helpers it
# calls): a reader can load only these, for only the rows ``rows_needed`` keeps.
READS = (ICMP_ECHO, IP, "ip_version", "ip_src", "ip_dst", "ip_ttl", "ip_id", "ip_len",
         "ip_hdr_len", "ip_fragment", "ip_frag_offset", "icmp_type", "icmp_ident", "icmp_seq",
         "frame_number", "frame_time_ns", "payload_len", "payload_offset", "payload_cap_len")
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


def rows_needed(cap: Capture) -> np.ndarray:
    """The rows ping reads: ICMP echoes, and the IP fragments after a first one (an echo
    larger than the MTU ends in those, and they carry no ICMP header to tell).  Each row is
    decided by its own columns, so a reader can apply this window by window."""
    later_fragment = (cap.layer(IP) & cap.column("ip_fragment").astype(bool)
                      & (cap.column("ip_frag_offset") > 0))
    return cap.layer(ICMP_ECHO) | later_fragment


@analysis(needs=Needs(READS, rows_needed))
def ping(capture: Capture, *, requester: str | None = None) -> Ping:
    """Echo sessions of a capture (only those sent by ``requester``, an address, if given)."""
    tables, notes = echo_sessions(capture, requester)
    return Ping(tables, capture=capture.path, notes=notes)


def _echo_rows(cap: Capture, requester: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the echo requests (only ``requester``'s, if given) and of the echo replies;
    a UsageError saying what the capture has when there is no request."""
    echo = np.flatnonzero(cap.layer(ICMP_ECHO))
    version = cap.column("ip_version")[echo]
    kind = cap.column("icmp_type")[echo]
    is_request = ((version == 4) & (kind == REQUEST[4])) | ((version == 6) & (kind == REQUEST[6]))
    is_reply = ((version == 4) & (kind == REPLY[4])) | ((version == 6) & (kind == REPLY[6]))
    requests, replies = echo[is_request], echo[is_reply]
    if requester is not None:
        codes = np.flatnonzero(cap.addresses == requester)
        requests = requests[np.isin(cap.column("ip_src")[requests], codes)]
    if not len(requests):
        raise UsageError(f"no ICMP echo requests{'' if requester is None else ' from ' + requester}"
                         f" in {cap.path} ({_what_it_has(cap)})",
                         hint="ping sessions are echo requests and their replies; "
                              "`pcapstats throughput` lists the streams it has")
    return requests, replies


def _what_it_has(cap: Capture) -> str:
    """What the whole file holds (the capture may hold only the rows ping reads)."""
    counts = {name: cap.layer_count(layer) for name, layer in
              (("TCP", TCP), ("UDP", UDP), ("ICMP", ICMP))}
    has = [f"{n} {name}" for name, n in counts.items() if n]
    return f"{cap.packets_in_file} packets: " + (", ".join(has) if has else "none TCP, UDP or ICMP")


def echo_sessions(cap: Capture, requester: str | None = None) -> tuple[dict, list[str]]:
    """Ping's tables and notes (delay reads them: a Result holds itself in ``parts``, so its
    arrays would wait for the garbage collector)."""
    requests, replies = _echo_rows(cap, requester)
    keys, session, rep_session = _session_keys(cap, requests, replies)
    answered = rep_session >= 0
    replies, rep_session = replies[answered], rep_session[answered]

    e_rows, e_session, e_seq, e_seq16 = _first_requests(cap, requests, session, len(keys))
    del requests, session                 # (arrays this long are let go once done with)
    t_ns = cap.column("frame_time_ns")
    e_t = t_ns[e_rows].astype(np.int64, copy=False)
    # each reply answers the latest request of its session with the same 16-bit number
    match = _match(e_session, e_seq16, e_t, rep_session,
                   cap.column("icmp_seq")[replies].astype(np.int64),
                   t_ns[replies].astype(np.int64, copy=False))
    del e_seq16, rep_session
    replies, match = replies[match >= 0], match[match >= 0]
    size, end_ns = _whole_messages(cap, e_rows, replies)
    rtt_ns = end_ns - e_t[match]
    del end_ns
    reply_frame = np.full(len(e_rows), np.nan)
    first_rtt = np.full(len(e_rows), np.nan)
    by_time = np.argsort(t_ns[replies], kind="stable")[::-1]   # the earliest written last
    reply_frame[match[by_time]] = cap.column("frame_number")[replies][by_time]
    first_rtt[match[by_time]] = rtt_ns[by_time] / 1e6
    del by_time

    addresses = cap.addresses
    echoes = {
        "session": e_session, "requester": addresses[keys[:, 0]][e_session],
        "responder": addresses[keys[:, 1]][e_session], "ident": keys[e_session, 2],
        "icmp_seq": e_seq, "frame_number": cap.column("frame_number")[e_rows].astype(np.int64),
        "time_s": (e_t - cap.first_time_ns) / 1e9, "payload_bytes": size,
        "replies": np.bincount(match, minlength=len(e_rows)), "reply_frame": reply_frame,
        "rtt_ms": first_rtt}
    del e_t
    sides, evidence = _sides(cap, len(keys), e_session, e_rows, replies, match, rtt_ns)
    del e_rows, replies
    summary = _summary(echoes, keys, rtt_ns, match, sides, addresses)
    said: dict[tuple, list[int]] = {}   # one note for the sessions that share one
    for k in np.flatnonzero(np.asarray(sides, object) != "requester").tolist():
        pair = f"{addresses[keys[k, 0]]} → {addresses[keys[k, 1]]}"
        said.setdefault((pair, sides[k], evidence[k]), []).append(k)
    notes = [f"session{'s' if len(ks) > 1 else ''} {id_ranges(ks)} ({pair}): {_SIDE_SAYS[side]}"
             f" ({why})" for (pair, side, why), ks in said.items()]
    return {"sessions": summary, "echoes": echoes}, notes


def _session_keys(cap: Capture, requests: np.ndarray, replies: np.ndarray):
    """(keys, session of each request, session of each reply or -1): a session is a
    (requester, responder, identifier) with a request, numbered by its first request; a reply
    belongs to the session whose key it answers."""
    src, dst, ident = cap.column("ip_src"), cap.column("ip_dst"), cap.column("icmp_ident")
    a = max(len(cap.addresses), 1)           # one int64 a key: (requester, responder, ident)
    code = np.r_[src[requests], dst[replies]].astype(np.int64)
    code *= a
    code += np.r_[dst[requests], src[replies]]
    code *= 65536
    code += np.r_[ident[requests], ident[replies]]
    unique_code, which = _unique_by_runs(code)
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


def _whole_messages(cap: Capture, requests: np.ndarray, replies: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """ICMP data bytes of each request's whole message, and when each reply's last fragment
    was captured (ping -s above the MTU sends an echo in IP fragments; ping times the reply
    when its last fragment arrives)."""
    size = cap.column("payload_len")[requests].astype(np.int64)
    end = cap.column("frame_time_ns")[replies].astype(np.int64, copy=False)
    fragment, ip = cap.column("ip_fragment"), cap.layer(IP)
    frag_req = fragment[requests].astype(bool) & ip[requests]
    frag_rep = fragment[replies].astype(bool) & ip[replies]
    if frag_req.any() or frag_rep.any():
        carried, last = whole_datagrams(cap, np.r_[requests[frag_req], replies[frag_rep]])
        n = int(frag_req.sum())
        size[frag_req] = carried[:n] - 8                            # less the ICMP header
        end[frag_rep] = last[n:]
    return size, end


def _unwrap(seq16: np.ndarray, session: np.ndarray, order: np.ndarray) -> np.ndarray:
    """16-bit sequence numbers -> counting numbers, per session in capture order (a step down
    of more than half the range is a wrap); ``order`` lists each session's requests in turn."""
    s, q = session[order], seq16[order]
    first = np.r_[True, s[1:] != s[:-1]]                  # a session's first request
    step = np.diff(q)
    wraps = np.zeros(len(q), np.int64)
    wraps[1:] = step < -32768
    wraps[1:] -= step > 32768
    wraps[first] = 0
    np.cumsum(wraps, out=wraps)
    starts = np.flatnonzero(first)                          # less those before the session
    wraps -= np.repeat(wraps[starts], np.diff(np.r_[starts, len(q)]))
    wraps *= 65536
    wraps += q
    out = np.empty_like(seq16)
    out[order] = wraps
    return out


def _first_requests(cap: Capture, requests: np.ndarray, session: np.ndarray, n_sessions: int
                    ) -> tuple[np.ndarray, ...]:
    """The first request of each (session, sequence number), in capture order: its row,
    session, sequence number (unwrapped) and 16-bit number.  Where each session's numbers only
    rise, as ping sends them, every request is the first with its number: no sort, no copy."""
    seq16 = cap.column("icmp_seq")[requests].astype(np.int64)
    # each session's requests, in order (as they come when one session follows another)
    order = slice(None) if (session[1:] >= session[:-1]).all() else \
        _group_order(session, n_sessions)
    seq = _unwrap(seq16, session, order)
    s, q = session[order], seq[order]
    first = slice(None)
    if not ((s[1:] != s[:-1]) | (q[1:] > q[:-1])).all():
        _, first = np.unique(session * (1 << 40) + seq, return_index=True)
        first.sort()
    return requests[first], session[first], seq[first], seq16[first]


def _match(e_session, e_seq16, e_t, r_session, r_seq16, r_t) -> np.ndarray:
    """For each reply, the index of the latest request of its session and 16-bit number sent
    at or before it (of those sent at one instant, the last in capture order); -1 when none (a
    reply to a request the capture missed).  The requests are ranked by time (a stable sort,
    a single pass when the clock never stepped back), each reply knows the last rank sent at
    or before it, and finds the last request at or below (its key, that rank) among the
    requests' (key, rank) codes, sorted as plain numbers."""
    n = len(e_t)
    by_time = np.argsort(e_t, kind="stable")
    rank = np.empty(n, np.int64)
    rank[by_time] = np.arange(n)
    before = np.searchsorted(e_t[by_time], r_t, side="right") - 1    # each reply's last rank
    span = n + 1
    key, r_key = e_session * 65536 + e_seq16, r_session * 65536 + r_seq16
    if (max(int(k.max()) for k in (key, r_key) if len(k)) + 1) * span >= 2**63:
        both = np.unique(np.r_[key, r_key], return_inverse=True)[1].ravel()  # number the keys
        key, r_key = both[:n].astype(np.int64), both[n:].astype(np.int64)
    key *= span
    key += rank
    sorted_code = np.sort(key)          # no two alike: a code's rank says which request it is
    r_key *= span
    pos = np.searchsorted(sorted_code, r_key + before, side="right") - 1
    at = np.maximum(pos, 0)
    found = (pos >= 0) & (sorted_code[at] >= r_key)
    return np.where(found, by_time[sorted_code[at] % span], -1)


def _sides(cap, n_sessions, e_session, e_rows, replies, match, rtt_ns
           ) -> tuple[list[str], list[str]]:
    """Each session's capture side and the evidence, from TTLs (and ping's send timestamps
    where no router changed them)."""
    ttl = cap.column("ip_ttl")
    req_ttl = _mode_per_group(e_session, ttl[e_rows].astype(np.int64), n_sessions)
    rep_ttl = _mode_per_group(e_session[match], ttl[replies].astype(np.int64), n_sessions)
    initial = np.asarray(INITIAL_TTLS)
    req_initial, rep_initial = np.isin(req_ttl, initial), np.isin(rep_ttl, initial)
    sides, evidence, no_router = [], [], []
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
            side = None                           # the send times decide, below
            no_router.append(k)
        sides.append(side)
        evidence.append(said)
    if no_router:
        by_session = rows_by_group(e_session, n_sessions)
        reply_rtts = rows_by_group(e_session[match], n_sessions)
        decided = _sides_from_send_times(cap, [e_rows[by_session[k]] for k in no_router],
                                         [rtt_ns[reply_rtts[k]] for k in no_router])
        for k, (side, more) in zip(no_router, decided):
            sides[k] = side
            evidence[k] += f" (no router between the hosts); {more}"
    return sides, evidence


def _mode_per_group(group: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """The most common value of each group (the smallest on a tie), -1 for an empty group."""
    out = np.full(n_groups, -1, np.int64)
    if not len(group):
        return out
    span = int(values.max()) + 1
    pairs, counts = _unique_by_runs(group * span + values, counts=True)
    g, v = pairs // span, pairs % span
    best = np.lexsort((v, -counts, g))
    first = best[np.r_[True, g[best][1:] != g[best][:-1]]]
    out[g[first]] = v[first]
    return out


def rows_by_group(group: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """For each group 0..n_groups-1, the indices of its members (one sort, no mask per group)."""
    order = _group_order(group, n_groups)
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    return [order[bounds[k]:bounds[k + 1]] for k in range(n_groups)]


def _group_order(group: np.ndarray, n_groups: int) -> np.ndarray:
    """The indices that sort group numbers 0..n_groups-1 stably: none to sort when they come
    in order (one session after another), and numpy sorts 8- and 16-bit numbers by radix, in
    linear time, so a few groups among a million members cost little."""
    if (group[1:] >= group[:-1]).all():
        return np.arange(len(group))
    narrow = np.uint8 if n_groups <= 1 << 8 else np.uint16 if n_groups <= 1 << 16 else None
    return np.argsort(group if narrow is None else group.astype(narrow), kind="stable")


def _unique_by_runs(values: np.ndarray, counts: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` (``return_counts`` with ``counts``), sorting
    only the first value of each run of equal neighbours: echo traffic comes in long runs
    (one session, one TTL), so a million values are a few runs to sort."""
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(values) else \
        np.zeros(0, np.int64)
    lengths = np.diff(np.r_[starts, len(values)])
    unique, which = np.unique(values[starts], return_inverse=True)
    which = which.ravel()
    if counts:
        return unique, np.bincount(which, lengths, len(unique)).astype(np.int64)
    return unique, np.repeat(which, lengths)


def _sides_from_send_times(cap, requests: list, rtt_ns: list) -> list[tuple[str, str]]:
    """iputils ping writes its send time (struct timeval, 16 bytes, little-endian on the
    hosts people use) at the start of each request's data.  Where the capture was taken at the
    requester, a request is captured microseconds after that time and its reply a round trip
    later; at the responder the request arrives a one-way delay after it and the reply leaves
    microseconds later (when the hosts' clocks agree, as in a lab).  For each session (its
    requests, its replies' gaps), the medians of up to SEND_TIME_SAMPLES requests, evenly
    spread, decide: a flood of a million says no more."""
    samples = [r[::max(1, len(r) // SEND_TIME_SAMPLES)] if len(gaps) else r[:0]
               for r, gaps in zip(requests, rtt_ns)]
    heads = _send_time_heads(cap, samples)
    return [_side_from_send_times(cap, r, h, gaps) for r, h, gaps in zip(samples, heads, rtt_ns)]


def _send_time_heads(cap, samples: list) -> list:
    """The first 16 data bytes of each session's sampled requests, a row each (None where one
    has fewer captured, or the file is gone or cut since it was read: the side is then
    unknown)."""
    if not any(len(s) for s in samples):
        return [None] * len(samples)
    try:
        src = open_source(cap.path)
    except Exception:
        return [None] * len(samples)
    rows = np.concatenate(samples)
    off = cap.column("payload_offset")[rows]
    whole = (off >= 0) & (cap.column("payload_cap_len")[rows] >= 16)
    bounds = np.cumsum([0] + [len(s) for s in samples]).tolist()
    with src:
        return [_gathered(src, off[a:b], 16) if a < b and whole[a:b].all() else None
                for a, b in zip(bounds[:-1], bounds[1:])]


def _gathered(src, offsets: np.ndarray, n: int) -> np.ndarray | None:
    """``n`` bytes at each file offset, SEND_TIME_CHUNK offsets at a time with the file's
    pages let go between (touching a mapped page maps the 64 kB around it: a thousand samples
    would hold 60 MB of the file); None when the file is shorter than it was."""
    out = np.empty((len(offsets), n), np.uint8)
    try:
        for k, records in src.records_at(offsets, n, SEND_TIME_CHUNK):
            out[k:k + len(records)] = records.view(np.uint8).reshape(-1, n)
    except IndexError:    # a file cut since it was read: just say unknown
        return None
    return out


def _side_from_send_times(cap, requests, heads, rtt_ns) -> tuple[str, str]:
    """One session's side from its sampled requests' send times (see above)."""
    if not len(rtt_ns):
        return "unknown", "no reply to compare"
    if heads is None:
        return "unknown", "requests carry no send time"
    seconds, usec = heads.view("<u8").T
    usec_ok = bool((usec < 10**6).all() and (seconds < 2**33).all())   # ns fit in int64
    sent = seconds.astype(np.int64) * 10**9 + usec.astype(np.int64) * 1000 if usec_ok else 0
    t = cap.column("frame_time_ns")[requests].astype(np.int64)
    lag = float(np.median(t - sent))                 # send -> capture of the request
    gap = float(np.median(rtt_ns))                    # capture of the request -> its reply
    if not usec_ok or not 0 <= lag < 60e9:
        return "unknown", "requests carry no send time ping's way"
    said = (f"requests captured {lag / 1e6:.3f} ms after ping sent them, replies "
            f"{gap / 1e6:.3f} ms after the requests")
    return ("requester" if lag < gap else "responder"), said


def _summary(echoes: dict, keys, rtt_ns, match, sides, addresses) -> dict:
    """One row per (session, payload size); ``rtt_ns``: each reply's, ``match``: its echo."""
    session, size = echoes["session"], echoes["payload_bytes"]
    groups, which = _unique_by_runs(session * (1 << 32) + size)
    rtt_which = np.searchsorted(groups, session[match] * (1 << 32) + size[match])
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
        stats = _ping_stats(rtt_ns[rtts_of[i]] / 1e6)
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
