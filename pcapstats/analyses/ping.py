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
sequence number, time, size, RTT of its first reply, replies).
"""

from __future__ import annotations

import numpy as np

from .. import catalogue, clock
from ..batch import analysis
from ..capture import Capture, Needs, holdings
from ..errors import Note, NothingToReport
from ..ingest import Kept, read_kept
from ..ingest.contract import table_array
from ..render import Shown
from ..results import Result, shown
from ..ingest.source import open_source
from ..schema import (CAPTURE_POINT_COLUMN, FRAME_NUMBER_COLUMN, ICMP, ICMP_ECHO, IP, TCP,
                      TIME_COLUMN, UDP, Column, TableSpec, sent_here)
from ..sidecar import measuring_pings
from ..streams import id_ranges, whole_datagrams

REQUEST, REPLY = {4: 8, 6: 128}, {4: 0, 6: 129}
SEND_TIME_SAMPLES = 1000
MATCH_CHUNK = 1 << 16      # replies matched at a time (the arrays of a few steps of them)
# What ping reads of the packet table (its columns and layers, with those of the helpers it
# calls): a reader can load only these, for only the rows ``rows_needed`` keeps.
READS = (ICMP_ECHO, IP, "ip_version", "ip_src", "ip_dst", "ip_ttl", "ip_id", "ip_len",
         "ip_hdr_len", "ip_fragment", "ip_frag_offset", "icmp_type", "icmp_ident", "icmp_seq",
         "frame_number", "frame_time_ns", "frame_len", "payload_len", "payload_offset",
         "payload_cap_len")
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


def rows_needed(cap: Capture) -> np.ndarray:
    """The rows ping reads: ICMP echoes, and the IP fragments after a first one (an echo
    larger than the MTU ends in those, and they carry no ICMP header to tell).  Each row is
    decided by its own columns, so a reader can apply this window by window."""
    return cap.layer(ICMP_ECHO) | later_fragments(cap)


def later_fragments(cap: Capture) -> np.ndarray:
    """The IP fragments after a datagram's first (the only one with a transport header)."""
    fragment = cap.column("ip_fragment").astype(bool)
    if not fragment.any():                                # (the usual window)
        return fragment
    return cap.layer(IP) & fragment & (cap.column("ip_frag_offset") > 0)


def _fragment_rows(cap: Capture) -> np.ndarray:
    """The first fragments that are echoes and every later fragment."""
    fragment = cap.column("ip_fragment").astype(bool)
    if not fragment.any():                                # (the usual window)
        return fragment
    fragment &= cap.layer(IP)
    return fragment & (cap.layer(ICMP_ECHO) | (cap.column("ip_frag_offset") > 0))


# The fragments an echo over the MTU travels in (usually none): its first (an echo row) and
# those after it, with what streams.whole_datagrams reads of them.
FRAGMENTS = Needs((IP, "ip_src", "ip_dst", "ip_id", "ip_len", "ip_hdr_len", "ip_fragment",
                   "ip_frag_offset", "frame_time_ns", "frame_number", "frame_len"),
                  _fragment_rows)
# what ping keeps of each request and each reply: its name -> the packet-table column
_REQUEST = {"seq": "icmp_seq", "t": "frame_time_ns", "frame": "frame_number",
            "size": "payload_len", "ttl": "ip_ttl"}
_REPLY = {name: column for name, column in _REQUEST.items() if name != "size"}


class Echoes:
    """A capture's ICMP echoes as ping reads them: the requests and the replies apart, each in
    capture order, in the few columns ping uses of each (``key``: the number of its
    (requester, responder, identifier) in ``key_table``, a reply's its request's; ``fragment``:
    a first IP fragment; a request's ``data``: the file offset of its ICMP data where 16
    bytes of it were captured, else -1), and ``fragments``, the IP fragments of echoes over
    the MTU (a partial Capture, usually empty).  A keeper of ``ingest.read_kept``, filled a
    window at a time (memory follows the echoes, in about 40 % of the bytes of their
    packet-table rows), or at once from a Capture (``of``).  ``taken()`` hands the columns
    over: ping lets each go once used."""

    def __init__(self):
        self.seen, self.path, self.first_time_ns, self.packets = False, None, None, 0
        self.clock = None                  # the file's clock (its breaks), from the reader
        self.clock_touched = ""            # what its breaks did to ping's numbers
        self.addresses = np.zeros(0, object)
        self.counts: dict[str, int] = {}
        self.fragments = Kept(FRAGMENTS)
        self.requests: dict[str, np.ndarray] = {}
        self.replies: dict[str, np.ndarray] = {}
        self.key_table = np.zeros((0, 3), np.int64)
        self._keys: dict[tuple[int, int, int], int] = {}
        self._n = [0, 0]

    @classmethod
    def of(cls, cap: Capture) -> Echoes:
        echoes = cls()
        echoes.add(cap)
        return echoes.done(cap.packets_in_file)

    @classmethod
    def read(cls, capture) -> Echoes:
        """The echoes of a Capture, or of a path (read in one streaming pass)."""
        return cls.of(capture) if isinstance(capture, Capture) else read_kept(capture, [cls()])[0]

    def add(self, window: Capture) -> None:
        if not self.seen:
            self.seen, self.path, self.first_time_ns = True, window.path, window.first_time_ns
            capacity = max(window.file_size // 16 + 1, 1 << 16)
            for store, names in ((self.requests, _REQUEST), (self.replies, _REPLY)):
                store.update({name: table_array(capacity, window.column(column).dtype)
                              for name, column in names.items()})
                store["key"] = table_array(capacity, np.uint32)
                store["fragment"] = table_array(capacity, bool)
            self.requests["data"] = table_array(capacity, np.int64)
        self.addresses, self.clock = window.addresses, window.clock
        self.fragments.add(window)                  # (it counts the file's layers, too)
        echo = np.flatnonzero(window.layer(ICMP_ECHO))
        if not len(echo):
            return
        fragment = window.column("ip_fragment")
        fragment = fragment.astype(bool) & window.layer(IP) if fragment.any() else None
        kind = window.column("ip_version")[echo].astype(np.uint16)   # version << 8 | type
        kind <<= 8
        kind |= window.column("icmp_type")[echo]
        src, dst, ident = window.column("ip_src"), window.column("ip_dst"), \
            window.column("icmp_ident")
        frame = window.column("frame_number")
        first_frame = int(frame[0]) if int(frame[-1]) - int(frame[0]) == len(frame) - 1 \
            else None                                   # (a window's frames: one run)
        for i, (store, names, types) in enumerate(((self.requests, _REQUEST, REQUEST),
                                                   (self.replies, _REPLY, REPLY))):
            rows = echo[(kind == (4 << 8 | types[4])) | (kind == (6 << 8 | types[6]))]
            n, k = self._n[i], len(rows)
            if not k:
                continue
            if n + k > len(store["t"]):                 # a gzipped file: more than its size
                for name, old in store.items():
                    store[name] = table_array(2 * (n + k), old.dtype)
                    store[name][:n] = old[:n]
            for name, column in names.items():
                if name == "frame" and first_frame is not None:
                    np.add(rows, first_frame, out=store[name][n:n + k], casting="unsafe")
                else:
                    np.take(window.column(column), rows, out=store[name][n:n + k])
            requester, responder = (src, dst) if store is self.requests else (dst, src)
            store["key"][n:n + k] = self._key_ids(requester[rows], responder[rows], ident[rows])
            if fragment is not None:                    # (else left False, untouched)
                store["fragment"][n:n + k] = fragment[rows]
            if store is self.requests:
                at = window.column_at("payload_offset", rows)
                whole = (at >= 0) & (window.column_at("payload_cap_len", rows) >= 16)
                store["data"][n:n + k] = np.where(whole, at, -1)
            self._n[i] = n + k

    def _key_ids(self, requester, responder, ident) -> np.ndarray | np.uint32:
        """Each row's key number: its (requester, responder, identifier) numbered as first seen
        over the windows (a window holds few: they come in long runs; sessions are numbered
        by their first request, whatever the keys' numbers)."""
        if ((requester == requester[0]).all() and (responder == responder[0]).all()
                and (ident == ident[0]).all()):        # (one session's window, the usual)
            key = int(requester[0]), int(responder[0]), int(ident[0])
            return np.uint32(self._keys.setdefault(key, len(self._keys)))
        span = int(max(requester.max(), responder.max())) + 1
        if span < 1 << 23 and min(requester.min(), responder.min()) >= 0:
            code = requester.astype(np.int64)      # (fits: span ** 2 * 65536 < 2 ** 63)
            code *= span
            code += responder
            code *= 65536
            code += ident
            unique, which = _unique_by_runs(code)
            triples = zip((unique // 65536 // span).tolist(),
                          (unique // 65536 % span).tolist(), (unique % 65536).tolist())
        else:
            unique, which = np.unique(np.stack([requester, responder, ident], axis=1)
                                      .astype(np.int64), axis=0, return_inverse=True)
            which = which.ravel()
            triples = map(tuple, unique.tolist())
        keys = self._keys
        ids = np.array([keys.setdefault(key, len(keys)) for key in triples], np.uint32)
        return ids[which]

    def done(self, packets: int) -> Echoes:
        self.packets = packets
        self.key_table = np.array(list(self._keys), np.int64).reshape(-1, 3)
        self.fragments = self.fragments.done(packets)
        counted = self.fragments.whole.layer_counts
        self.counts = {layer: counted.get(layer, 0) for layer in (TCP, UDP, ICMP)}
        for store, n in zip((self.requests, self.replies), self._n):
            for name in store:
                store[name] = store[name][:n]
        return self

    def taken(self) -> tuple[dict, dict]:
        """(requests, replies), no longer held here."""
        out = self.requests, self.replies
        self.requests, self.replies = {}, {}
        return out


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
    keys, session, rep_session = _session_keys(echoes.key_table, req.pop("key"),
                                               rep.pop("key"))
    answered = rep_session >= 0
    if not answered.all():
        rep = {name: column[answered] for name, column in rep.items()}
        rep_session = rep_session[answered]
    del answered

    first, e_session, e_seq, e_seq16 = _first_requests(req.pop("seq"), session, len(keys))
    del session
    if not isinstance(first, slice):
        req = {name: column[first] for name, column in req.items()}
    e_t = req.pop("t").astype(np.int64, copy=False)
    r_t = rep.pop("t").astype(np.int64, copy=False)
    # each reply answers the latest request of its session with the same 16-bit number
    # captured before it: the capture's order, which a clock step leaves as it was
    match = _match(e_session, e_seq16, req["frame"], rep_session, rep.pop("seq"), rep["frame"],
                   e_seq)
    del e_seq16, rep_session
    found = match >= 0
    if not found.all():
        rep = {name: column[found] for name, column in rep.items()}
        r_t, match = r_t[found], match[found]
    del found
    size, end_ns, end_frame = _whole_messages(echoes.fragments, req, rep, r_t)
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


def per_group(values: np.ndarray, group: np.ndarray, slices) -> np.ndarray:
    """``values[group]``: each group's value on each of its members, filled a group's range at
    a time where they come group by group (``slices``: group_slices')."""
    if slices is None:
        return values[group]
    out = np.empty(len(group), values.dtype)
    for k, rows in enumerate(slices):
        out[rows] = values[k]
    return out


def _session_keys(key_table: np.ndarray, request_key: np.ndarray, reply_key: np.ndarray):
    """(keys, session of each request, session of each reply or -1): a session is a
    (requester, responder, identifier) with a request, numbered by its first request; a reply
    belongs to the session whose key it answers.  ``request_key``, ``reply_key``: each one's
    row of ``key_table`` (Echoes)."""
    n = len(request_key)
    starts = np.flatnonzero(np.r_[True, request_key[1:] != request_key[:-1]])
    first = np.full(len(key_table), n, np.int64)
    np.minimum.at(first, request_key[starts], starts)    # requests are in capture order
    sessions = np.flatnonzero(first < n)
    sessions = sessions[np.argsort(first[sessions], kind="stable")]
    rank = np.full(len(key_table), -1, np.int64)
    rank[sessions] = np.arange(len(sessions))
    return key_table[sessions], rank[request_key], rank[reply_key]


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


def _whole_messages(fragments: Capture, req: dict, rep: dict, r_t: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ICMP data bytes of each request's whole message, and when each reply's last fragment
    was captured and its frame number (``r_t`` and the reply's own where none is in
    fragments: ping -s above the MTU sends an echo in IP fragments; ping times the reply when
    its last fragment arrives).  ``fragments``: the capture's (Echoes.fragments); ``r_t``: the
    replies' times."""
    size = req.pop("size").astype(np.int64)
    end, end_frame = r_t, rep["frame"]
    frag_req, frag_rep = req.pop("fragment"), rep.pop("fragment")
    if frag_req.any() or frag_rep.any():
        end, end_frame = r_t.copy(), end_frame.copy()
        frames = np.r_[req["frame"][frag_req], rep["frame"][frag_rep]]
        carried, last_t, last = whole_datagrams(
            fragments, np.searchsorted(fragments.column("frame_number"), frames))
        n = int(frag_req.sum())
        size[frag_req] = carried[:n] - 8                            # less the ICMP header
        end[frag_rep] = last_t[n:]
        end_frame[frag_rep] = fragments.column("frame_number")[last[n:]]
    return size, end, end_frame


def _unwrap(seq16: np.ndarray, session: np.ndarray, order) -> np.ndarray:
    """16-bit sequence numbers -> counting numbers, per session in capture order (a step down
    of more than half the range is a wrap); ``order`` lists each session's requests in turn
    (a slice of all when they come so)."""
    s, q = session[order], seq16[order]
    first = np.r_[True, s[1:] != s[:-1]]                  # a session's first request
    step = np.diff(q.astype(np.int32))
    wraps = np.zeros(len(q), np.int64)
    wraps[1:] = step < -32768
    wraps[1:] -= step > 32768
    del step
    wraps[first] = 0
    np.cumsum(wraps, out=wraps)
    starts = np.flatnonzero(first)                          # less those before the session
    if len(starts) <= 64:
        for a, b in zip(starts.tolist(), starts[1:].tolist() + [len(q)]):
            wraps[a:b] -= wraps[a]
    else:
        wraps -= np.repeat(wraps[starts], np.diff(np.r_[starts, len(q)]))
    wraps *= 65536
    wraps += q
    if isinstance(order, slice):
        return wraps
    out = np.empty(len(seq16), np.int64)
    out[order] = wraps
    return out


def _first_requests(seq16: np.ndarray, session: np.ndarray, n_sessions: int
                    ) -> tuple[np.ndarray | slice, ...]:
    """The first request of each (session, sequence number), in capture order: which of the
    requests it is (an index, or a slice of all), its session, sequence number (unwrapped) and
    16-bit number (as given).  Where each session's numbers only rise, as ping sends them,
    every request is the first with its number: no sort, no copy."""
    # each session's requests, in order (as they come when one session follows another)
    order = slice(None) if (session[1:] >= session[:-1]).all() else \
        _group_order(session, n_sessions)
    seq = _unwrap(seq16, session, order)
    s, q = session[order], seq[order]
    first = slice(None)
    if not ((s[1:] != s[:-1]) | (q[1:] > q[:-1])).all():
        _, first = np.unique(session * (1 << 40) + seq, return_index=True)
        first.sort()
    return first, session[first], seq[first], seq16[first]


def _match(e_session, e_seq16, e_t, r_session, r_seq16, r_t, e_seq=None) -> np.ndarray:
    """For each reply, the index of the latest request of its session and 16-bit number sent
    at or before it (of those sent at one instant, the last in capture order); -1 when none (a
    reply to a request the capture missed).  ``e_seq``: the requests' unwrapped numbers, for
    the usual capture (below); ``r_seq16``: the replies' numbers, any integer type."""
    if (e_seq is not None and len(e_t) > 1 and len(r_t) and (e_t[1:] >= e_t[:-1]).all()
            and (e_session[1:] >= e_session[:-1]).all()):
        rising = e_seq[1:] > e_seq[:-1]
        rising |= e_session[1:] != e_session[:-1]
        if rising.all():
            del rising
            return _match_in_order(e_session, e_seq, e_t, r_session, r_seq16, r_t,
                                   lambda rows: _match_sorting(e_session, e_seq16, e_t,
                                                               r_session[rows],
                                                               r_seq16[rows], r_t[rows]))
    return _match_sorting(e_session, e_seq16, e_t, r_session, r_seq16, r_t)


def _match_in_order(e_session, e_seq, e_t, r_session, r_seq16, r_t, otherwise) -> np.ndarray:
    """_match where the requests come in time order, session after session, each session's
    numbers rising (as ping sends them, captured anywhere): the latest request of a reply's
    session sent at or before it (by index) has number S; the answer is the one numbered the
    largest c <= S with the reply's 16 bits, found at its place where the session's numbers
    leave no gap before S, else (``otherwise(rows)``) by _match_sorting."""
    bounds = np.searchsorted(e_session, np.arange(int(e_session[-1]) + 2))
    session_last, session_first = bounds[1:] - 1, bounds[:-1]
    out = np.empty(len(r_t), np.int64)
    rest = []
    for a in range(0, len(r_t), MATCH_CHUNK):        # a chunk at a time: little to hold
        b = a + MATCH_CHUNK
        s, t = r_session[a:b], r_t[a:b]
        i, j = np.searchsorted(e_t, [t.min(), t.max()], side="right").tolist()
        last = np.searchsorted(e_t[i:j], t, side="right")        # requests sent at or before
        last += i - 1
        np.minimum(last, session_last[s], out=last)             # its session's latest
        lo = session_first[s]
        some = last >= lo
        np.maximum(last, 0, out=last)
        top = e_seq[last]
        back = top - r_seq16[a:b]
        back &= 0xFFFF                                           # top - c (two's complement)
        at = np.subtract(last, back, out=last)
        np.maximum(at, lo, out=at)
        np.subtract(top, back, out=top)                          # c
        ok = e_seq[at] == top
        ok &= some
        at[~some] = -1
        out[a:b] = at
        rest.append(a + np.flatnonzero(some & ~ok))
    rest = np.concatenate(rest)
    if len(rest):
        out[rest] = otherwise(rest)
    return out


def _match_sorting(e_session, e_seq16, e_t, r_session, r_seq16, r_t) -> np.ndarray:
    """_match for any capture: the requests are ranked by time (a stable sort, a single pass
    when the clock never stepped back), each reply knows the last rank sent at or before it,
    and finds the last request at or below (its key, that rank) among the requests' (key,
    rank) codes, sorted as plain numbers."""
    n = len(e_t)
    by_time = np.argsort(e_t, kind="stable")
    rank = np.empty(n, np.int64)
    rank[by_time] = np.arange(n)
    before = np.searchsorted(e_t[by_time], r_t, side="right") - 1    # each reply's last rank
    span = n + 1
    key = e_session * 65536 + e_seq16
    r_key = r_session * 65536 + r_seq16.astype(np.int64)
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


def _sides(path, n_sessions, e_session, r_session, by_session, rep_by_session, req_ttl,
           rep_ttl, rtt_ns, data, e_t) -> tuple[list[str], list[str]]:
    """Each session's capture side and the evidence, from TTLs (and ping's send timestamps
    where no router changed them).  ``r_session``: each reply's session; ``by_session``,
    ``rep_by_session``: each session's requests and replies (_groups)."""
    req_ttl = _mode_per_group(e_session, req_ttl, n_sessions, by_session)
    rep_ttl = _mode_per_group(r_session, rep_ttl, n_sessions, rep_by_session)
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
            path, data, e_t, [_indices(by_session[k]) for k in no_router],
            [_known(rtt_ns[reply_rtts[k]]) for k in no_router])
        for k, (side, more) in zip(no_router, decided):
            sides[k] = side
            evidence[k] += f" (no router between the hosts); {more}"
    return sides, evidence


def _mode_per_group(group: np.ndarray, values: np.ndarray, n_groups: int, slices=None
                    ) -> np.ndarray:
    """The most common value of each group (the smallest on a tie), -1 for an empty group;
    ``values``: small non-negative integers (TTLs); ``slices``: group_slices', if any."""
    out = np.full(n_groups, -1, np.int64)
    if not len(group):
        return out
    if slices is not None:               # a count of each value, a group at a time
        for k, rows in enumerate(slices):
            if rows.stop > rows.start:
                out[k] = np.bincount(values[rows]).argmax()     # the first of the largest
        return out
    values = values.astype(np.int64)
    span = int(values.max()) + 1
    pairs, counts = _unique_by_runs(group * span + values, counts=True)
    g, v = pairs // span, pairs % span
    best = np.lexsort((v, -counts, g))
    first = best[np.r_[True, g[best][1:] != g[best][:-1]]]
    out[g[first]] = v[first]
    return out


def group_slices(group: np.ndarray, n_groups: int) -> list[slice] | None:
    """For each group 0..n_groups-1, the slice of its members where they come group by
    group (group numbers never fall), else None (rows_by_group lists them)."""
    if not (group[1:] >= group[:-1]).all():
        return None
    bounds = np.searchsorted(group, np.arange(n_groups + 1)).tolist()
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def _indices(rows) -> np.ndarray:
    """A group's members as indices (from a slice of _groups, or rows_by_group's)."""
    return np.arange(rows.start, rows.stop) if isinstance(rows, slice) else rows


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
    groups, which = _unique_by_runs(session * (1 << 32) + size)
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
