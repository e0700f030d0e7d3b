"""A capture's ICMP echoes as ping and delay read them: kept (``Echoes``, a keeper of
``ingest.read_kept``: requests and replies apart, in the few columns they use), numbered into
sessions and matched, each reply to its request (``match_replies``: by identifier, 16-bit number and
the capture's order, never by time), an echo over the MTU made whole from its IP fragments.
What the numbers mean is ``ping``'s docstring.
"""

from __future__ import annotations

import numpy as np

from ..capture import Capture, Needs
from ..grouping import group_order, unique_by_runs
from ..ingest import Kept, read_kept
from ..ingest.contract import room_for, table_array
from ..schema import ICMP, ICMP_ECHO, IP, TCP, UDP
from ..streams import whole_datagrams

REQUEST, REPLY = {4: 8, 6: 128}, {4: 0, 6: 129}
MATCH_CHUNK = 1 << 16      # replies matched at a time (the arrays of a few steps of them)
# What ping reads of the packet table (its columns and layers, with those of the helpers it
# calls): a reader can load only these, for only the rows ``rows_needed`` keeps.
READS = (ICMP_ECHO, IP, "ip_version", "ip_src", "ip_dst", "ip_ttl", "ip_id", "ip_len",
         "ip_hdr_len", "ip_fragment", "ip_frag_offset", "icmp_type", "icmp_ident", "icmp_seq",
         "frame_number", "frame_time_ns", "frame_len", "payload_len", "payload_offset",
         "payload_cap_len")


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
            room_for(store, n, k)
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
            unique, which = unique_by_runs(code)
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


def session_keys(key_table: np.ndarray, request_key: np.ndarray, reply_key: np.ndarray):
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



def whole_messages(fragments: Capture, req: dict, rep: dict, r_t: np.ndarray
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


def first_requests(seq16: np.ndarray, session: np.ndarray, n_sessions: int
                    ) -> tuple[np.ndarray | slice, ...]:
    """The first request of each (session, sequence number), in capture order: which of the
    requests it is (an index, or a slice of all), its session, sequence number (unwrapped) and
    16-bit number (as given).  Where each session's numbers only rise, as ping sends them,
    every request is the first with its number: no sort, no copy."""
    # each session's requests, in order (as they come when one session follows another)
    order = slice(None) if (session[1:] >= session[:-1]).all() else \
        group_order(session, n_sessions)
    seq = _unwrap(seq16, session, order)
    s, q = session[order], seq[order]
    first = slice(None)
    if not ((s[1:] != s[:-1]) | (q[1:] > q[:-1])).all():
        _, first = np.unique(session * (1 << 40) + seq, return_index=True)
        first.sort()
    return first, session[first], seq[first], seq16[first]


def match_replies(e_session, e_seq16, e_t, r_session, r_seq16, r_t, e_seq=None) -> np.ndarray:
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
    """match_replies where the requests come in time order, session after session, each session's
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
    """match_replies for any capture: the requests are ranked by time (a stable sort, a single pass
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
