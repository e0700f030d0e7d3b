"""ICMP echo (ping) sessions of a capture: what ping's summary lines say, from the packets.

A **session** is one pinging process: echo requests from one address to another with one ICMP
identifier (ICMPv4 type 8 -> 0, ICMPv6 128 -> 129).  With several payload sizes in a session
(a size sweep) each size gets its own row.  Definitions, as iputils ping prints them:

- ``transmitted``: requests seen, one per sequence number (16-bit numbers unwrapped in time
  order, so a session past 65535 requests still counts each);
- ``received``: requests answered at least once; ``duplicates``: further replies to an answered
  request (ping's "+N duplicates");
- ``echo_loss``: (transmitted - received) / transmitted, a fraction (ping prints it x 100);
- a reply answers the *first* request of its session with its sequence number (the latest
  one captured before it, when numbers wrap): matched by identifier, number and the
  capture's order, never by time, so a step of the capture's clock changes no count;
- RTT of a reply: its capture time minus that of its request; an echo larger than the MTU
  travels in IP fragments: its size is the whole message's (its fragments found by their IP
  identification, ``streams.whole_datagrams``) and its reply counts from its last fragment;
  ``rtt_min/avg/max_ms`` over the replies, duplicates included (ping counts them in its
  statistics too); ``rtt_mdev_ms`` = sqrt(mean(rtt^2) - mean(rtt)^2), ping's "mdev" (a
  population standard deviation).  An RTT across a break of the capture's clock (a step back,
  a forward jump of an hour or more: :mod:`pcapstats.clock`) cannot be known: it is left out
  (empty in ``echoes``), its echo still received; ``duration_s`` is measured over the pieces
  between breaks, and the capture's clock warning says how many of each.

A capture times packets where it was taken, so what the request -> reply gap means depends on
the **side**, decided per session from the IP TTL (hop limit) -- a packet captured where it
was sent still has its sender's initial TTL (64, 128 or 255), one that crossed a router does
not -- and, where no router sits between the hosts, from the timestamp iputils ping writes at
the start of each request's data (``send``: the requester's clock when it sent):

- ``sender`` (of the requests: at the requester): the gap is the round trip (ping's own RTT,
  within the few microseconds between the capture's clock and ping's);
- ``receiver`` (at the responder): the gap is only the responder's turnaround
  (microseconds); the RTT columns are left empty and ``turnaround_ms`` holds it;
- ``middle``: captured between them: the gap is the round trip from the capture point on;
- ``unknown``: the gap is shown as RTT, with a note.

Tables: ``sessions`` (one row per session and size), ``echoes`` (one row per request: its
sequence number, time, size, RTT of its first reply, replies).  The echoes are kept and
matched in :mod:`pcapstats.analyses.echoes` (delay reads them too); here: the tables, their
statistics and each session's capture side.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue, clock
from ..batch import analysis
from ..capture import holdings
from ..errors import Note, NothingToReport
from ..grouping import (group_indices, group_slices, mode_per_group, per_group, rows_by_group,
                        unique_by_runs)
from ..render import Shown
from ..results import Result, shown
from ..ingest.source import open_source
from ..schema import (CAPTURE_POINT_COLUMN, FRAME_NUMBER_COLUMN, TIME_COLUMN, Column, TableSpec,
                      sent_here)
from ..sidecar import measuring_pings
from ..streams import id_ranges
from .echoes import Echoes, first_requests, match_replies, session_keys, whole_messages
from .echoes import READS, rows_needed  # noqa: F401  (ping's own: what it reads of the table)

SEND_TIME_SAMPLES = 1000
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
    CAPTURE_POINT_COLUMN.but(doc="where the capture was taken, for this session: sender (at "
                             "the requester), receiver (at the responder), middle or unknown"),
    _C("transmitted", "int64", "requests seen (one per sequence number)", "packets"),
    _C("received", "int64", "requests answered", "packets"),
    _C("duplicates", "int64", "replies beyond the first to a request", "packets"),
    catalogue.column("echo_loss", optional=False),
    *(catalogue.column(name, doc="of the request -> reply times (empty at the responder)")
      for name in ("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms")),
    _C("turnaround_ms", "float64", "at the responder: mean request -> reply time there (the "
       "responder's own delay, not the path's)", "ms", optional=True),
    _C("first_s", "float64", "first request, seconds since the capture's first packet", "s"),
    _C("duration_s", "float64", "first to last request (across a clock break: over the pieces "
       "either side)", "s"),
    _C("measures", "str", "what a lab topology run measured with the session, as its sidecar "
       "says (by addresses and identifier): link A-B (router to router) or path A-B (a "
       "pair's sender to its receiver); empty otherwise"),
))
ECHOES = TableSpec("echoes", "one row per echo request", (
    *_SESSION,
    _C("icmp_seq", "int64", "sequence number, unwrapped past 65535",
       wireshark="icmp.seq|icmpv6.echo.sequence_number"),
    FRAME_NUMBER_COLUMN.but(note="the request's"),
    TIME_COLUMN.but(note="the request's"),
    _C("payload_bytes", "int64", "ICMP data bytes", "bytes"),
    _C("replies", "int64", "replies to it (more than 1: duplicates)", "packets"),
    _C("reply_frame", "int64", "the first reply's packet number", optional=True),
    _C("rtt_ms", "float64", "request -> first reply (empty when unanswered, or across a clock "
       "break: unknowable)", "ms",
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
                         *(shown(name) for name in ("echo_loss", "rtt_min_ms", "rtt_avg_ms",
                                                     "rtt_max_ms", "rtt_mdev_ms")),
                         Shown("turnaround", "turnaround_ms", minor=True))}
    legend = {"sessions": "RTT min/avg/max/mdev: request -> reply times as ping prints them "
                          "(duplicates included).  --all: identifiers, sides, times."}

    def _figure(self, ax=None, **options):
        from ..plots.ping import ping_figure  # lazy: matplotlib only when a figure is drawn
        return ping_figure(self, ax=ax, **options)

@analysis(reads=False)
def ping(capture, *, requester: str | None = None) -> Ping:
    """Echo sessions of a capture (only those sent by ``requester``, an address, if given).
    A path is read in one streaming pass keeping only the echoes (``Echoes``)."""
    echoes = Echoes.read(capture)
    said = measuring_pings(echoes.path) if echoes.path else {}
    tables, notes = echo_sessions(echoes, requester, measures=said)
    notes += _unseen_notes(tables["sessions"], said)
    result = Ping(tables, capture=echoes.path, notes=notes)
    result.clock_touched = echoes.clock_touched
    if any(tables["sessions"]["measures"]):        # a topology run's link and path pings
        (first, *rest) = Ping.view["sessions"]
        result.view = {"sessions": (first, Shown("measures", "measures"), *rest)}
    return result


def _unseen_notes(sessions: dict, said: dict) -> list[Note]:
    """A lab run's ping sent by the capturing router through its own impaired egress: its
    requests are seen after that delay, so the RTTs here leave it out (ping's own has it)."""
    notes = []
    for k, label in enumerate(sessions["measures"]):
        key = (sessions["requester"][k], sessions["responder"][k], int(sessions["ident"][k]))
        if label and said[key].unseen:
            unseen = " and ".join(p.text() for p in said[key].unseen)
            acts = "act" if len(said[key].unseen) > 1 else "acts"
            notes.append(Note("the RTTs leave out its own egress", about=label, detail=(
                f"{unseen} {acts} on what {said[key].sender} sends before this capture point "
                "sees it (tcpdump's tap is after the qdisc and netfilter): its requests are "
                "timed here from after them; ping's own RTT has them (the sidecar's "
                f"links[].ping: avg {_ms(said[key].reported_avg_ms)})")))
    return notes


def _ms(value: float | None) -> str:
    return "not reported" if value is None else f"{value:.3f} ms"


def _what_it_has(echoes: Echoes) -> str:
    """What the whole file holds (ping keeps only its echoes)."""
    return holdings(echoes.packets, echoes.counts)


ECHO_COLUMNS = ECHOES.names


def echo_sessions(echoes: Echoes, requester: str | None = None,
                  columns: tuple[str, ...] = ECHO_COLUMNS, measures: dict | None = None
                  ) -> tuple[dict, list[str]]:
    """Ping's tables and notes from a capture's echoes, whose columns it lets go as it is done
    with them (the echoes table, as long as the capture has echoes, is built last, each column
    in the room its inputs leave); of the echoes table only ``columns`` (delay reads four, and
    calls this rather than ``ping``: a Result holds itself in ``parts``, so its arrays would
    wait for the garbage collector); ``measures``: (requester, responder, identifier) -> what
    a lab run measured with that session (``sidecar.measuring_pings``), whose side here the
    sidecar knows (which node sent it, which node the capture is at)."""
    req, rep = echoes.taken()
    if requester is not None:
        mine = np.isin(echoes.key_table[:, 0], np.flatnonzero(echoes.addresses == requester))
        mine = mine[req["key"]]
        req = {name: column[mine] for name, column in req.items()}
    if not len(req["t"]):
        sent_by = "" if requester is None else f" from {requester}"
        raise NothingToReport(f"no ICMP echo requests{sent_by} in {echoes.path} "
                              f"({_what_it_has(echoes)})",
                              hint="ping sessions are echo requests and their replies; "
                                   "`pcapstats throughput` lists the streams it has")
    keys, session, rep_session = session_keys(echoes.key_table, req.pop("key"),
                                               rep.pop("key"))
    answered = rep_session >= 0
    if not answered.all():
        rep = {name: column[answered] for name, column in rep.items()}
        rep_session = rep_session[answered]
    del answered

    first, e_session, e_seq, e_seq16 = first_requests(req.pop("seq"), session, len(keys))
    del session
    if not isinstance(first, slice):
        req = {name: column[first] for name, column in req.items()}
    e_t = req.pop("t").astype(np.int64, copy=False)
    r_t = rep.pop("t").astype(np.int64, copy=False)
    # each reply answers the latest request of its session with the same 16-bit number
    # captured before it: the capture's order, which a clock step leaves as it was
    match = match_replies(e_session, e_seq16, req["frame"], rep_session, rep.pop("seq"),
                          rep["frame"], e_seq)
    del e_seq16, rep_session
    found = match >= 0
    if not found.all():
        rep = {name: column[found] for name, column in rep.items()}
        r_t, match = r_t[found], match[found]
    del found
    size, end_ns, end_frame = whole_messages(echoes.fragments, req, rep, r_t)
    rtt_ns = e_t[match]
    np.subtract(end_ns, rtt_ns, out=rtt_ns)
    del end_ns
    pieces = echoes.clock.pieces() if echoes.clock is not None else clock.Pieces([], [])
    across = pieces.apart(req["frame"][match], end_frame) if len(pieces) > 1 else None
    del end_frame
    if across is not None and across.any():       # unknowable: left out, the echo received
        rtt_ns = rtt_ns.astype(np.float64)
        rtt_ns[across] = np.nan
    n, n_sessions = len(e_t), len(keys)
    # each session's requests and replies (one range each where they come session by session)
    by_session = group_slices(e_session, n_sessions)
    r_session = e_session[match]
    rep_by_session = group_slices(r_session, n_sessions)
    sides, evidence = _sides(echoes.path, n_sessions, e_session, r_session, by_session,
                             rep_by_session, req.pop("ttl"), rep.pop("ttl"), rtt_ns,
                             req.pop("data"), e_t)
    for k in range(n_sessions) if measures else ():
        lab = measures.get((echoes.addresses[keys[k, 0]], echoes.addresses[keys[k, 1]],
                            int(keys[k, 2])))
        if lab is not None and lab.side is not None:
            sides[k], evidence[k] = lab.side, f"the lab sidecar: {lab.side_evidence}"
    del r_session, rep_by_session
    replies = np.bincount(match, minlength=n)
    summary = _summary(e_session, size, replies, e_t, echoes.first_time_ns, match, rtt_ns,
                       keys, sides, echoes.addresses,
                       pieces.monotonic(e_t, req["frame"]) if len(pieces) > 1 else e_t,
                       measures or {})
    if len(pieces) > 1:
        echoes.clock_touched = _touched(across, pieces.of(req["frame"]), e_session, size)

    out: dict[str, np.ndarray] = {}              # the echoes table, each input let go once used
    if "reply_frame" in columns or "rtt_ms" in columns:
        # the first reply of each echo (the replies come in the capture's order): the first
        # captured written last
        last_first = slice(None, None, -1)
        at = match[last_first]
        if "reply_frame" in columns:
            out["reply_frame"] = np.full(n, np.nan)
            out["reply_frame"][at] = rep["frame"][last_first]
        if "rtt_ms" in columns:                 # (in the room of rtt_ns, done with)
            out["rtt_ms"] = np.full(n, np.nan)
            out["rtt_ms"][at] = np.divide(rtt_ns, 1e6, out=rtt_ns.view(np.float64))[last_first]
        del at
    del rep, r_t, rtt_ns, match
    if "time_s" in columns:             # in the requests' times' own room (they are ours)
        e_t -= echoes.first_time_ns
        out["time_s"] = np.divide(e_t, 1e9, out=e_t.view(np.float64))
    del e_t
    if "frame_number" in columns:
        out["frame_number"] = req.pop("frame").astype(np.int64)
    del req
    out["session"], out["payload_bytes"], out["icmp_seq"], out["replies"] = \
        e_session, size, e_seq, replies
    del size, e_seq, replies
    addresses = echoes.addresses
    for name, column in (("requester", 0), ("responder", 1), ("ident", 2)):
        if name in columns:
            out[name] = per_group(keys[:, column] if column == 2 else
                                  addresses[keys[:, column]], e_session, by_session)
    said: dict[tuple, list[int]] = {}   # one note for the sessions that share one
    for k in np.flatnonzero(np.asarray(sides, object) != "sender").tolist():
        pair = f"{addresses[keys[k, 0]]} → {addresses[keys[k, 1]]}"
        said.setdefault((pair, sides[k], evidence[k]), []).append(k)
    labels = summary["measures"]        # a lab run's measuring session: named as it says
    named = {int(k): label for k, label in zip(summary["session"], labels) if label}
    notes = [Note(_SIDE_SAYS[side][0], about=named.get(ks[0]) if len(ks) == 1 and ks[0] in named
                  else f"session{'s' if len(ks) > 1 else ''} {id_ranges(ks)}",
                  detail=f"{pair}: {_SIDE_SAYS[side][1]} ({why})")
             for (pair, side, why), ks in said.items()]
    return {"sessions": summary, "echoes": {c: out[c] for c in columns}}, notes

_SIDE_SAYS = {    # side: (a note's short form, its long form)
    "receiver": ("captured at the responder: no RTTs",
                 "captured at the responder: request -> reply is its turnaround, not the "
                 "round trip (turnaround_ms); capture at the pinging host for RTTs"),
    "middle": ("captured between the hosts: RTTs short",
               "captured between the hosts: RTTs are from the capture point to the responder "
               "and back, less than ping's"),
    "unknown": ("capture side unknown",
                "the capture side is unknown: if it was taken at the responder, the RTTs are "
                "its turnaround"),
}

def _sides(path, n_sessions, e_session, r_session, by_session, rep_by_session, req_ttl,
           rep_ttl, rtt_ns, data, e_t) -> tuple[list[str], list[str]]:
    """Each session's capture side and the evidence, from TTLs (and ping's send timestamps
    where no router changed them).  ``r_session``: each reply's session; ``by_session``,
    ``rep_by_session``: each session's requests and replies (_groups)."""
    req_ttl = mode_per_group(e_session, req_ttl, n_sessions, by_session)
    rep_ttl = mode_per_group(r_session, rep_ttl, n_sessions, rep_by_session)
    req_initial, rep_initial = sent_here(req_ttl), sent_here(rep_ttl)
    sides, evidence, no_router = [], [], []
    for k in range(n_sessions):
        said = f"request TTL {req_ttl[k]}" + ("" if rep_ttl[k] < 0 else
                                             f", reply TTL {rep_ttl[k]}")
        if rep_ttl[k] < 0:
            side = "sender" if req_initial[k] else "middle"
        elif req_initial[k] != rep_initial[k]:
            side = "sender" if req_initial[k] else "receiver"
        elif not req_initial[k]:
            side = "middle"
        else:
            side = None                           # the send times decide, below
            no_router.append(k)
        sides.append(side)
        evidence.append(said)
    if no_router:
        by_session = by_session or rows_by_group(e_session, n_sessions)
        reply_rtts = rep_by_session or rows_by_group(r_session, n_sessions)
        decided = _sides_from_send_times(
            path, data, e_t, [group_indices(by_session[k]) for k in no_router],
            [_known(rtt_ns[reply_rtts[k]]) for k in no_router])
        for k, (side, more) in zip(no_router, decided):
            sides[k] = side
            evidence[k] += f" (no router between the hosts); {more}"
    return sides, evidence

def _sides_from_send_times(path, data, e_t, requests: list, rtt_ns: list
                           ) -> list[tuple[str, str]]:
    """iputils ping writes its send time (struct timeval, 16 bytes, little-endian on the
    hosts people use) at the start of each request's data.  Where the capture was taken at the
    requester, a request is captured microseconds after that time and its reply a round trip
    later; at the responder the request arrives a one-way delay after it and the reply leaves
    microseconds later (when the hosts' clocks agree, as in a lab).  For each session (its
    requests, its replies' gaps), the medians of up to SEND_TIME_SAMPLES requests, evenly
    spread, decide: a flood of a million says no more.  ``data``: each request's ICMP data
    offset in the file (-1: fewer than 16 bytes captured), ``e_t``: its time."""
    samples = [r[::max(1, len(r) // SEND_TIME_SAMPLES)] if len(gaps) else r[:0]
               for r, gaps in zip(requests, rtt_ns)]
    heads = _send_time_heads(path, data, samples)
    return [_side_from_send_times(e_t[r], h, gaps) for r, h, gaps in zip(samples, heads, rtt_ns)]


def _send_time_heads(path, data, samples: list) -> list:
    """The first 16 data bytes of each session's sampled requests, a row each (None where one
    has fewer captured, or the file is gone or cut since it was read: the side is then
    unknown)."""
    if not any(len(s) for s in samples):
        return [None] * len(samples)
    try:
        src = open_source(path)
    except Exception:
        return [None] * len(samples)
    off = data[np.concatenate(samples)]
    whole = off >= 0
    bounds = np.cumsum([0] + [len(s) for s in samples]).tolist()
    with src:
        return [_gathered(src, off[a:b], 16) if a < b and whole[a:b].all() else None
                for a, b in zip(bounds[:-1], bounds[1:])]


def _gathered(src, offsets: np.ndarray, n: int) -> np.ndarray | None:
    """``n`` bytes at each file offset, read with pread (mapping the pages around a thousand
    samples would hold 60 MB of the file, and cost ten times as long); None when the file is
    shorter than it was."""
    try:
        return src.read_at(offsets, n)
    except (IndexError, OSError):    # a file cut or gone since it was read: just say unknown
        return None


def _side_from_send_times(t, heads, rtt_ns) -> tuple[str, str]:
    """One session's side from its sampled requests' times and send times (see above)."""
    if not len(rtt_ns):
        return "unknown", "no reply to compare"
    if heads is None:
        return "unknown", "requests carry no send time"
    seconds, usec = heads.view("<u8").T
    usec_ok = bool((usec < 10**6).all() and (seconds < 2**33).all())   # ns fit in int64
    sent = seconds.astype(np.int64) * 10**9 + usec.astype(np.int64) * 1000 if usec_ok else 0
    t = t.astype(np.int64)
    lag = float(np.median(t - sent))                 # send -> capture of the request
    gap = float(np.median(rtt_ns))                    # capture of the request -> its reply
    if not usec_ok or not 0 <= lag < 60e9:
        return "unknown", "requests carry no send time ping's way"
    said = (f"requests captured {lag / 1e6:.3f} ms after ping sent them, replies "
            f"{gap / 1e6:.3f} ms after the requests")
    return ("sender" if lag < gap else "receiver"), said


def _summary(session, size, replies, e_t, t0, match, rtt_ns, keys, sides, addresses,
             e_joined, measures: dict) -> dict:
    """One row per (session, payload size), from each echo's session, size, replies and time
    (``t0``: the capture's first; ``e_joined``: the times on the timeline joined across clock
    breaks, for durations), and each reply's ``rtt_ns`` (NaN: unknowable) and echo
    (``match``)."""
    groups, echoes_of, rtts_of = _size_groups(session, size, match)
    rows: dict[str, list] = {c.name: [] for c in SESSIONS.columns}
    for i, g in enumerate(groups.tolist()):
        k, size = g >> 32, g & 0xFFFFFFFF
        mine = echoes_of[i]
        mine_replies = replies[mine]
        tx = len(mine_replies)
        rx = int((mine_replies > 0).sum())
        dup = int(np.maximum(mine_replies - 1, 0).sum())
        at_responder = sides[k] == "receiver"
        stats = _ping_stats(rtt_ns[rtts_of[i]] / 1e6)
        joined = e_joined[mine]   # across a clock break, the pieces' spans added up
        first = int(joined.argmin())
        first_s = (int(e_t[mine][first]) - t0) / 1e9
        duration_s = (int(joined.max()) - int(joined[first])) / 1e9
        rows["session"].append(k)
        rows["requester"].append(addresses[keys[k, 0]])
        rows["responder"].append(addresses[keys[k, 1]])
        rows["ident"].append(int(keys[k, 2]))
        rows["payload_bytes"].append(size)
        rows["side"].append(sides[k])
        rows["transmitted"].append(tx)
        rows["received"].append(rx)
        rows["duplicates"].append(dup)
        rows["echo_loss"].append((tx - rx) / tx)
        for name, value in zip(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"), stats):
            rows[name].append(np.nan if at_responder else value)
        rows["turnaround_ms"].append(stats[1] if at_responder else np.nan)
        rows["first_s"].append(first_s)
        rows["duration_s"].append(duration_s)
        lab = measures.get((rows["requester"][-1], rows["responder"][-1], int(keys[k, 2])))
        rows["measures"].append(lab.label if lab is not None else "")
    return {c.name: np.asarray(rows[c.name], dtype=object if c.dtype == "str" else None)
            for c in SESSIONS.columns}


def _size_groups(session, size, match) -> tuple[np.ndarray, list, list]:
    """The (session, size) groups as session << 32 | size, sorted, with each one's echoes and
    replies (``match``: each reply's echo): ranges where each group's echoes come in one run
    and the replies in the order of their echoes (no array as long as the echoes), else
    indices."""
    change = np.flatnonzero((session[1:] != session[:-1]) | (size[1:] != size[:-1]))
    starts = np.r_[0, change + 1]
    codes = session[starts] * (1 << 32) + size[starts]
    groups = np.unique(codes)
    if len(groups) == len(starts) and (match[1:] >= match[:-1]).all():
        ends = np.r_[starts[1:], len(session)]
        first_reply = np.searchsorted(match, starts).tolist()
        last_reply = np.searchsorted(match, ends).tolist()
        runs = np.argsort(codes).tolist()
        return (groups, [slice(int(starts[r]), int(ends[r])) for r in runs],
                [slice(first_reply[r], last_reply[r]) for r in runs])
    groups, which = unique_by_runs(session * (1 << 32) + size)
    echoes_of = group_slices(which, len(groups)) or rows_by_group(which, len(groups))
    rtt_which = which[match]
    return groups, echoes_of, group_slices(rtt_which, len(groups)) or rows_by_group(
        rtt_which, len(groups))


def _ping_stats(rtt_ms: np.ndarray) -> tuple[float, float, float, float]:
    """min, avg, max, mdev as ping computes them (mdev: population standard deviation), of the
    RTTs known (NaN: across a clock break)."""
    rtt_ms = _known(rtt_ms)
    if not len(rtt_ms):
        return (np.nan,) * 4
    mean = float(rtt_ms.mean())
    mdev = float(np.sqrt(max(float((rtt_ms ** 2).mean()) - mean * mean, 0.0)))
    return float(rtt_ms.min()), mean, float(rtt_ms.max()), mdev


def _known(values: np.ndarray) -> np.ndarray:
    """The values that are known: all of integer ones, the others but NaN (an RTT across a
    clock break)."""
    if values.dtype.kind != "f":
        return values
    return values[~np.isnan(values)]


def _touched(across: np.ndarray | None, piece: np.ndarray, session: np.ndarray,
             size: np.ndarray) -> str:
    """What the capture's clock breaks did to ping's numbers (clock.touched): the RTTs across
    one (``across``: each reply's) left out, the durations of the rows (session and size)
    whose requests lie in several pieces (``piece``: each request's) measured over them."""
    rtts = 0 if across is None else int(np.count_nonzero(across))
    _, row = np.unique(session.astype(np.int64) * (1 << 32) + size, return_inverse=True)
    row = row.ravel()
    low = np.full(int(row.max()) + 1, np.iinfo(np.int64).max)
    high = np.full(len(low), -1)
    np.minimum.at(low, row, piece)
    np.maximum.at(high, row, piece)
    spans = int(np.count_nonzero(high > low))
    return clock.touched("ping", left_out=[f"{rtts} RTT{'s' if rtts > 1 else ''}"] if rtts
                         else [], joined=[f"{spans} session duration{'s' if spans > 1 else ''}"]
                         if spans else [])
