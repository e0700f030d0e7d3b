"""UDP flows as iperf's server reports them: datagrams, rate, loss, order and jitter.

One row per UDP stream and direction that carried datagrams.  What the numbers mean depends on
what the datagrams carry (``method``):

- **iperf's counters** (``iperf3``, ``iperf3-64``, ``iperf2``: see
  :mod:`pcapstats.analyses.udp_headers`): each datagram's count and send time.  Loss and order
  follow iperf3's receiver exactly, in capture order: a count above the highest so far adds
  the gap to ``lost``; one at or below it is ``out_of_order`` and takes one back from ``lost``
  (a duplicate counts as out of order too, as in iperf3); ``sent`` is the highest count (the
  datagrams iperf3 says were sent, ``packets`` in its report), ``loss_pct`` = lost / sent.
  ``jitter_ms`` is RFC 3550's interarrival jitter (section 6.4.1, computed as in A.8) of the
  transit time, capture time minus the sender's stamp, over the datagrams in capture order:
  J += (|D| - J) / 16 -- iperf3's own figure, with the capture's clock for its arrival time.
  iperf3's server stops counting when the client's TEST_END reaches it; datagrams still in
  the path's queues then arrive later and are left out (``after_end`` counts them);
- **arrival spacing** (any other flow of 10 datagrams or more): no loss can be told from the
  datagrams alone (``lost`` empty); ``jitter_ms`` is the same filter over the deviations of
  each inter-arrival gap from the flow's median gap, which is RFC 3550's jitter for a flow sent
  at a constant rate;
- **matched captures** (any flow without iperf's counters, given a second capture of the same
  traffic taken further on: ``ps.udp(sender_capture, receiver=receiver_capture)``, ``pcapstats
  udp --pair SENDER RECEIVER``): the flow is looked for in the receiver capture by its
  addresses and ports as they are (NAT is not followed: behind a NAT they differ, and the
  flow is reported not found, with a note, its loss unknown).  Its datagrams are paired by a
  key: the IPv4 identification (none for IPv6), the UDP length and a hash of the payload
  bytes both captures kept (a snaplen may have cut them: as many as the most cut datagram of
  either capture kept).  Datagrams with equal keys (zero-filled IPv6 payloads) pair
  first-in-first-out in capture order, so which of them was lost, and their order and
  transit, is that guess.  Of an IP-fragmented datagram, the first fragment is matched (the
  others carry no UDP header).  ``sent`` = the datagrams of the sender capture; ``lost`` =
  those never seen in the receiver capture; ``duplicates`` = arrivals of a datagram already
  seen; ``out_of_order`` = iperf3's rule above, with each datagram's place in the sender
  capture as its count (duplicates included, as in iperf3); ``jitter_ms`` = the same RFC 3550
  filter over the transit times, receiver capture time minus sender capture time, in arrival
  order (duplicates included): a constant offset between the two capture clocks cancels, as
  only differences of transit times count.  Every datagram counts, with no TEST_END cut (a
  flow without iperf's counters has none): matching an iperf flow (``counters=False``) gives
  iperf3's ``lost`` plus the datagrams lost after the last one that arrived, which iperf3's
  server cannot know were sent, and ``sent`` includes iperf's 4-byte connect datagram.  Sent
  datagrams the receiver capture could not have seen (its first packet came after their
  latest possible arrival, or its last before their earliest, by the slowest and the fastest
  matched transit) are left out of ``sent`` and ``lost``; datagrams of the receiver capture
  that match none of the sender capture's (it started later, or they were changed on the way)
  are not counted at all.  Notes say how many of each;
- **none**: fewer datagrams than that, or nothing to match.

Everything is what the capture point saw: at the sender nothing is lost yet and the jitter is
the sender's own; at the receiver they are what iperf3's server reports.  ``side`` says which
(IP TTL: a datagram captured where it was sent still has its initial TTL).  ``bps`` is
payload bits over first to last datagram of the direction.

With a receiver capture, the rows are the sender capture's flows (its ``stream`` numbers and
directions) as the receiver capture saw them: ``datagrams``, ``bytes``, ``first_s`` (since the
receiver capture's first packet), ``bps`` and ``side`` are what arrived there (a flow not
found: 0 datagrams, ``side`` "not found").  A flow with iperf's counters keeps them: iperf3's
server's own numbers, at the receiver.  A flow direction sent from the receiver capture's side
(initial TTL there, a lower one in the sender capture: replies) is shown as the receiver
capture saw it, with a note: give the two captures the other way round for its loss.  The
receiver capture's flows that the sender capture has not are left out, with a note.
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..errors import UsageError
from ..ingest.source import open_source
from ..reader import as_capture
from ..render import Shown
from ..results import Result
from ..schema import Column, TableSpec
from ..streams import DIRECTIONS, endpoint, own_transport
from .ping import INITIAL_TTLS
from .udp_headers import HEAD_BYTES, LAYOUTS, read_headers
from .udp_match import common_cut, datagram_keys, match

MIN_SPACING_DATAGRAMS = 10
JITTER_MEMORY = 12_000   # (15/16)^12000 < 1e-336: older differences no longer count in J
MATCHED = "matched captures"
METHODS = ("iperf3", "iperf3-64", "iperf2", MATCHED, "arrival spacing", "none")
SIDES = ("sender", "further on", "not found")
_C = Column
FLOWS = TableSpec("flows", "one row per UDP stream and direction that carried datagrams (with "
                  "a receiver capture: per flow of the sender capture, as the receiver saw it)", (
    _C("stream", "int64", "udp.stream index, as Wireshark numbers it (with a receiver capture: "
       "in the sender capture)", wireshark="udp.stream"),
    _C("direction", "str", "a_to_b: sent by side A (the source of the stream's first packet)",
       values=DIRECTIONS),
    _C("src", "str", "sender address:port"),
    _C("dst", "str", "receiver address:port"),
    _C("side", "str", "where the capture was taken for this flow: sender (datagrams still "
       "with their initial TTL) or further on; not found: a flow the receiver capture has not",
       values=SIDES),
    _C("datagrams", "int64", "datagrams captured (with a receiver capture: there)", "packets"),
    _C("bytes", "int64", "UDP payload bytes captured", "bytes"),
    _C("first_s", "float64", "first datagram, seconds since the capture's first packet", "s"),
    _C("duration_s", "float64", "first to last datagram", "s"),
    _C("bps", "float64", "payload bits / duration (empty when it lasted 0 s)", "bit/s",
       optional=True),
    _C("method", "str", "what loss and jitter come from (see the module docstring)",
       values=METHODS),
    _C("sent", "int64", "datagrams sent: the highest iperf count (iperf3's 'packets'); matched "
       "captures: the sender capture's datagrams", "packets", optional=True),
    _C("lost", "int64", "missing at the capture point, by iperf3's rule; matched captures: sent "
       "datagrams never seen in the receiver capture", "packets", optional=True),
    _C("loss_pct", "float64", "lost / sent x 100", "%", optional=True),
    _C("out_of_order", "int64", "datagrams whose count (matched captures: place in the sender "
       "capture) is not above every earlier one's (duplicates included, as iperf3 counts)",
       "packets", optional=True),
    _C("duplicates", "int64", "datagrams whose count was seen before (matched captures: "
       "arrivals of a datagram already seen)", "packets", optional=True),
    _C("jitter_ms", "float64", "RFC 3550 interarrival jitter at the capture point (matched "
       "captures: of receiver time - sender capture time)", "ms", optional=True),
    _C("after_end", "int64", "iperf3 datagrams captured after the client's TEST_END passed "
       "this point: the server stops counting there, so they are left out of the columns "
       "before", "packets", optional=True),
))


class Udp(Result):
    """UDP flows (``flows``)."""
    analysis = "udp"
    specs = (FLOWS,)
    view = {"flows": (Shown("stream", "stream"), Shown("sender → receiver", join="{src} → {dst}",
                                                       wrap=True),
                      Shown("datagrams", "datagrams", minor=True), Shown("rate", "bps"),
                      Shown("sent", "sent", minor=True), Shown("lost", "lost"),
                      Shown("loss", "loss_pct"), Shown("reorder", "out_of_order", minor=True),
                      Shown("jitter", "jitter_ms"), Shown("from", "method"),
                      Shown("side", "side", minor=True))}
    legend = {"flows": "lost, loss, jitter: as iperf3's server counts them at this capture "
                       "point, or between two captures ('from' says what they come from).  "
                       "--all: every column."}


@analysis()
def udp(capture: Capture, *, stream: int | None = None, receiver=None,
        counters: bool = True) -> Udp:
    """The UDP flows of a capture (of one stream with ``stream``).

    ``receiver``: a capture of the same traffic taken further on (a Capture or a path): each
    flow of ``capture`` is then found there and its datagrams matched, for loss, order and
    jitter without iperf's counters ("matched captures" in the module docstring).
    ``counters=False``: iperf's counters are not read (flows are then matched, given a
    receiver capture, else get jitter from their arrival spacing)."""
    rows = _udp_rows(capture, stream)
    if receiver is not None:
        return _paired(capture, rows, as_capture(receiver), counters, every=stream is None)
    buf = _Bytes(capture)
    t0 = int(capture.column("frame_time_ns")[0])
    found = [_flow(capture, flow_rows, stream_id, direction, buf, t0, counters)
             for stream_id, direction, flow_rows in _flows(capture, rows)]
    table = _table(found)
    return Udp({"flows": table}, capture=capture.path, notes=_notes(table))


def _udp_rows(capture: Capture, stream: int | None) -> np.ndarray:
    rows = np.flatnonzero(own_transport(capture, "udp"))
    if stream is not None:
        rows = rows[capture.column("udp_stream")[rows] == stream]
        if not len(rows):
            raise UsageError(f"no UDP stream {stream} in {capture.path}",
                             hint="`pcapstats throughput --proto udp` lists the UDP streams")
    if not len(rows):
        raise UsageError(f"no UDP datagrams in {capture.path}",
                         hint="`pcapstats throughput` lists the streams it has")
    return rows


def _flows(capture: Capture, rows: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(stream, direction, rows in capture order) of each flow, by stream and direction."""
    key = capture.column("udp_stream")[rows].astype(np.int64) * 2 \
        + capture.column("direction")[rows]
    order = np.argsort(key, kind="stable")          # capture order within each flow
    keys, starts = np.unique(key[order], return_index=True)
    bounds = np.r_[starts, len(order)]
    return [(int(k) // 2, int(k) % 2, rows[order[bounds[i]:bounds[i + 1]]])
            for i, k in enumerate(keys)]


def _table(found: list[dict]) -> dict:
    return {c.name: np.asarray([row[c.name] for row in found],
                               dtype=object if c.dtype == "str" else float
                               if c.optional or c.dtype == "float64" else np.int64)
            for c in FLOWS.columns}


class _Bytes:
    """The capture file's bytes, opened on first use (a flow without iperf headers needs none)."""
    def __init__(self, cap: Capture):
        self.cap, self._buf = cap, None

    def heads(self, rows: np.ndarray) -> np.ndarray | None:
        """The first HEAD_BYTES payload bytes of each row, or None if any has fewer captured."""
        have = self.cap.column("payload_cap_len")[rows]
        off = self.cap.column("payload_offset")[rows]
        if (have < HEAD_BYTES).any() or (off < 0).any():
            return None
        return self.all()[off[:, None] + np.arange(HEAD_BYTES)]

    def byte(self, offset: int) -> int:
        return int(self.all()[offset])

    def all(self) -> np.ndarray:
        if self._buf is None:
            self._buf = open_source(self.cap.path).buf
        return self._buf


def _endpoints(cap: Capture, row: int) -> tuple[str, str]:
    """(src, dst) of a datagram as address:port."""
    addresses = cap.addresses
    return (endpoint(addresses[cap.column("ip_src")[row]], cap.column("udp_srcport")[row]),
            endpoint(addresses[cap.column("ip_dst")[row]], cap.column("udp_dstport")[row]))


def _side(cap: Capture, rows: np.ndarray) -> str:
    ttl = int(np.bincount(cap.column("ip_ttl")[rows].astype(np.int64)).argmax())
    return "sender" if ttl in INITIAL_TTLS else "further on"


def _flow(cap: Capture, rows: np.ndarray, stream: int, direction: int, buf: _Bytes, t0: int,
          counters: bool = True) -> dict:
    """One row: the flow of ``rows`` (capture order) as ``cap`` saw it."""
    t = cap.column("frame_time_ns")[rows].astype(np.int64)
    size = cap.column("payload_len")[rows].astype(np.int64)
    src, dst = _endpoints(cap, rows[0])
    span = (t[-1] - t[0]) / 1e9
    out = {"stream": stream, "direction": DIRECTIONS[direction], "src": src, "dst": dst,
           "side": _side(cap, rows), "datagrams": len(rows), "bytes": int(size.sum()),
           "first_s": (t[0] - t0) / 1e9, "duration_s": span,
           "bps": 8 * size.sum() / span if span > 0 else np.nan}
    data = size >= HEAD_BYTES            # iperf's connect message and reply are 4 bytes
    heads = buf.heads(rows[data]) if counters and data.sum() >= 2 else None
    headers = read_headers(heads, t[data]) if heads is not None else None
    if headers is not None:
        counted = np.ones(len(headers.count), bool)
        if headers.layout.startswith("iperf3"):
            end = _test_end_ns(cap, rows[0], buf, int(t[data][0]))
            counted = t[data] <= end if end is not None else counted
        t_data = t[data][counted]
        counts = headers.count[counted] + (1 if headers.layout == "iperf2" else 0)  # from 0
        sent, lost, ooo = _iperf3_loss(counts)
        out.update(method=headers.layout, sent=sent, lost=lost,
                   loss_pct=100.0 * lost / sent if sent > 0 else np.nan, out_of_order=ooo,
                   duplicates=_duplicates(counts),
                   jitter_ms=rfc3550_jitter(t_data - headers.sent_ns[counted]) / 1e6,
                   after_end=int((~counted).sum()))
        return out
    out.update(dict.fromkeys(("sent", "lost", "loss_pct", "out_of_order", "duplicates",
                              "after_end"), np.nan))
    if len(rows) >= MIN_SPACING_DATAGRAMS:
        gaps = np.diff(t)
        out.update(method="arrival spacing",
                   jitter_ms=rfc3550_jitter(np.r_[0, np.cumsum(gaps - np.median(gaps))]) / 1e6)
    else:
        out.update(method="none", jitter_ms=np.nan)
    return out


def _paired(sender: Capture, rows: np.ndarray, receiver: Capture, counters: bool,
            every: bool) -> Udp:
    """The sender capture's flows (``rows``; ``every``: all of its UDP) found and matched in
    the receiver capture."""
    received = np.flatnonzero(own_transport(receiver, "udp"))
    if not len(received):
        raise UsageError(f"no UDP datagrams in {receiver.path}: nothing to match the flows of "
                         f"{sender.path} against",
                         hint="give the sender's capture first, then the receiver's")
    at_receiver: dict[tuple[str, str], list[np.ndarray]] = {}
    for _, _, flow_rows in _flows(receiver, received):
        at_receiver.setdefault(_endpoints(receiver, flow_rows[0]), []).append(flow_rows)
    sender_bytes, receiver_bytes = _Bytes(sender), _Bytes(receiver)
    times = receiver.column("frame_time_ns")
    span = (int(times.min()), int(times.max()))
    found, notes, seen, missing, reverse = [], [], set(), [], []
    for stream, direction, up in _flows(sender, rows):
        src, dst = ends = _endpoints(sender, up[0])
        name = f"stream {stream} {DIRECTIONS[direction]} ({src} → {dst})"
        if ends not in at_receiver:
            found.append(_not_found(stream, direction, src, dst))
            missing.append(name)
            continue
        seen.add(ends)
        down = np.sort(np.concatenate(at_receiver[ends]))
        row = _flow(receiver, down, stream, direction, receiver_bytes, int(times[0]), counters)
        found.append(row)
        if row["method"] in LAYOUTS:
            continue                       # iperf3's own numbers, at the receiver
        if row["side"] == "sender" and _side(sender, up) == "further on":
            reverse.append(name)
            continue
        cut = common_cut((sender, up), (receiver, down))
        m = match(datagram_keys(sender, up, sender_bytes.all(), cut),
                  sender.column("frame_time_ns")[up].astype(np.int64),
                  datagram_keys(receiver, down, receiver_bytes.all(), cut),
                  times[down].astype(np.int64), span)
        if not m.arrivals:
            notes.append(f"{name}: none of its {len(down)} datagrams in the receiver capture "
                         f"is one of the {len(up)} in the sender capture (changed on the "
                         "way?): its loss is unknown")
            continue
        row.update(method=MATCHED, sent=m.sent, lost=m.lost,
                   loss_pct=100.0 * m.lost / m.sent if m.sent else np.nan,
                   out_of_order=m.out_of_order, duplicates=m.duplicates,
                   jitter_ms=rfc3550_jitter(m.transit_ns) / 1e6)
        if m.unmatched:
            notes.append(f"{name}: {m.unmatched} datagram(s) in the receiver capture match "
                         "none in the sender capture (it started later or stopped sooner, "
                         "or they were changed on the way): not counted")
        if m.outside:
            notes.append(f"{name}: {m.outside} datagram(s) of the sender capture were sent "
                         "when the receiver capture could not have seen them (before it "
                         "started or after it stopped): left out of sent and lost")
    if missing:
        notes.append(f"{_some(missing)} {'is' if len(missing) == 1 else 'are'} not in the "
                     "receiver capture: loss unknown (flows are found by their addresses and "
                     "ports as they are; behind a NAT they differ, and NAT is not followed)")
    if reverse:
        notes.append(f"{_some(reverse)} {'was' if len(reverse) == 1 else 'were'} sent from the "
                     "receiver capture's side (by the TTL): not matched this way round; give "
                     "the two captures the other way round for the loss")
    others = len(at_receiver.keys() - seen)
    if others and every:
        notes.append(f"the receiver capture has {others} UDP flow direction(s) the sender "
                     f"capture has not: not shown (`pcapstats udp {receiver.path}` shows them)")
    table = _table(found)
    return Udp({"flows": table}, capture=sender.path, notes=_notes(table) + notes)


def _some(names: list[str], shown: int = 3) -> str:
    """The first few names, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more flow directions" if more > 0 else "")


def _not_found(stream: int, direction: int, src: str, dst: str) -> dict:
    row = dict.fromkeys((c.name for c in FLOWS.columns), np.nan)
    row.update(stream=stream, direction=DIRECTIONS[direction], src=src, dst=dst,
               side="not found", datagrams=0, bytes=0, method="none")
    return row


TEST_END = 4          # iperf3's control message ending the test: one byte, client -> server


def _test_end_ns(cap: Capture, first_row: int, buf: _Bytes, after_ns: int) -> int | None:
    """When the client's TEST_END passed the capture point: the first one-byte segment
    carrying 4 on the iperf3 control connection (TCP from the flow's sender to its
    destination port) after the flow's first datagram; None if not captured."""
    tcp = np.flatnonzero(own_transport(cap, "tcp"))
    candidates = tcp[(cap.column("ip_src")[tcp] == cap.column("ip_src")[first_row])
                     & (cap.column("tcp_dstport")[tcp] == cap.column("udp_dstport")[first_row])
                     & (cap.column("tcp_len")[tcp] == 1)
                     & (cap.column("frame_time_ns")[tcp] > after_ns)]
    for row in candidates:
        off = int(cap.column("payload_offset")[row])
        if off >= 0 and cap.column("payload_cap_len")[row] >= 1 and buf.byte(off) == TEST_END:
            return int(cap.column("frame_time_ns")[row])
    return None


def _iperf3_loss(counts: np.ndarray) -> tuple[int, int, int]:
    """(highest count, lost, out of order) as iperf3's receiver counts them in arrival order:
    a forward jump adds its gap to lost; a count not above the highest so far is out of order
    and takes one back from lost while lost is above zero."""
    before = np.r_[0, np.maximum.accumulate(counts)[:-1]]
    forward = counts > before
    step = np.where(forward, counts - before - 1, -1)
    walk = np.cumsum(step)
    lost = int(walk[-1] - min(0, int(walk.min()))) if len(walk) else 0   # floored at 0
    return int(counts.max()), lost, int((~forward).sum())


def rfc3550_jitter(transit_ns: np.ndarray) -> float:
    """RFC 3550's interarrival jitter after the last packet, in ns: J += (|D| - J) / 16 over
    the transit-time differences D of consecutive packets, J starting at 0."""
    t = np.asarray(transit_ns)[-JITTER_MEMORY - 1:]   # weights older than this are below 1e-300
    d = np.abs(np.diff(t.astype(np.float64)))
    if not len(d):
        return float("nan")
    weights = (15 / 16) ** np.arange(len(d) - 1, -1, -1) / 16   # the last packet weighs most
    return float((d * weights).sum())


def _duplicates(counts: np.ndarray) -> int:
    """Datagrams whose count was seen before (one sort, not a hash of every count)."""
    return int(np.count_nonzero(np.diff(np.sort(counts)) == 0))


def _notes(table: dict) -> list[str]:
    notes = []
    senders = [int(s) for s, side, m in zip(table["stream"], table["side"], table["method"])
               if side == "sender" and m.startswith("iperf")]
    if senders:
        notes.append(f"UDP stream(s) {', '.join(map(str, sorted(set(senders))))} captured at "
                     "the sender: nothing is lost yet there, and the jitter is the sender's "
                     "own; capture at the receiver for what iperf3's server reports")
    return notes
