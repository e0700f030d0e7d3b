"""UDP flows as iperf's server reports them: datagrams, rate, loss, order and jitter.

One row per UDP stream and direction that carried datagrams.  What the numbers mean depends on
what the datagrams carry (``method``):

- **iperf's counters** (``iperf3``, ``iperf3-64``, ``iperf2``: see
  :mod:`pcapstats.analyses.udp_headers`): each datagram's count and send time.  Loss and order
  follow iperf3's receiver exactly, in capture order: a count above the highest so far adds
  the gap to ``lost``; one at or below it is ``out_of_order`` and takes one back from ``lost``
  (a duplicate counts as out of order too, as in iperf3); ``sent`` is the highest count (the
  datagrams iperf3 says were sent, ``packets`` in its report), ``datagram_loss`` = lost / sent.
  ``capture_jitter_ms`` is RFC 3550's interarrival jitter (section 6.4.1, computed as in A.8) of the
  transit time, capture time minus the sender's stamp, over the datagrams in capture order:
  J += (|D| - J) / 16 -- iperf3's own figure, with the capture's clock for its arrival time.
  iperf3's server stops counting when the client's TEST_END reaches it; datagrams still in
  the path's queues then arrive later and are left out (``after_end`` counts them);
- **arrival spacing** (any other flow of 10 datagrams or more): no loss can be told from the
  datagrams alone (``lost`` empty); ``capture_jitter_ms`` is the same filter over the deviations of
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
  capture as its count (duplicates included, as in iperf3); ``capture_jitter_ms`` = the same RFC 3550
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

A step of the capture's clock changes no count: they come from iperf's counters, the
datagrams' keys and the capture's order (TEST_END is the first one captured after the flow's
first datagram, and the datagrams counted are those captured before it).  Across a break of
the clock (:mod:`pcapstats.clock`: a step back, a forward jump of an hour or more) the
duration, and so the rate, is measured over the pieces between breaks, and the capture jitter
leaves out the one difference across each break (unknowable); the capture's clock warning
says which flows' numbers a break touched.

With a receiver capture, the rows are the sender capture's flows (its ``stream`` numbers and
directions) as the receiver capture saw them: ``datagrams``, ``bytes``, ``first_s`` (since the
receiver capture's first packet), ``bps`` and ``side`` are what arrived there (a flow not
found: 0 datagrams, ``side`` "unknown").  A flow with iperf's counters keeps them: iperf3's
server's own numbers, at the receiver.  A flow direction sent from the receiver capture's side
(initial TTL there, a lower one in the sender capture: replies) is shown as the receiver
capture saw it, with a note: give the two captures the other way round for its loss.  The
receiver capture's flows that the sender capture has not are left out, with a note.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import Capture, Needs
from ..clock import touched
from ..errors import Note, NothingToReport, UsageError
from ..ingest.source import Source, open_source
from ..reader import as_capture
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from ..sidecar import iperf3_udp_reports, placements
from ..addresses import endpoint
from ..streams import DIRECTIONS, id_ranges, own_transport
from .udp_headers import HEAD_BYTES, LAYOUTS, Headers, read_headers
from .udp_match import common_cut, datagram_keys, match

MIN_SPACING_DATAGRAMS = 10
_HEADS_PER_READ = 1 << 16   # datagrams whose header bytes are gathered at once
_WALK_PART = 1 << 16        # datagrams of iperf3's lost counter walked at once
JITTER_MEMORY = 12_000   # (15/16)^12000 < 1e-336: older differences no longer count in J
MATCHED = "matched captures"
REPORT = "iperf3 report"      # loss taken from iperf3's own report (a capture at the sender)
METHODS = ("iperf3", "iperf3-64", "iperf2", MATCHED, REPORT, "arrival spacing", "none")
_C = Column
FLOWS = TableSpec("flows", "one row per UDP stream and direction that carried datagrams (with "
                  "a receiver capture: per flow of the sender capture, as the receiver saw it)", (
    schema.STREAM_COLUMN.but(note="with a receiver capture: in the sender capture"),
    schema.DIRECTION_COLUMN,
    _C("src", "str", "sender address:port"),
    _C("dst", "str", "receiver address:port"),
    schema.CAPTURE_POINT_COLUMN.but(doc="where the capture was taken for this flow: sender "
                                    "(datagrams still with their initial TTL) or further on; "
                                    "unknown: a flow the receiver capture has not"),
    _C("datagrams", "int64", "datagrams captured (with a receiver capture: there)", "packets"),
    _C("bytes", "int64", "UDP payload bytes captured", "bytes"),
    _C("first_s", "float64", "first datagram, seconds since the capture's first packet", "s"),
    _C("duration_s", "float64", "first to last datagram (across a clock break: over the "
       "pieces either side)", "s"),
    catalogue.column("payload_bps", doc="of the flow's datagrams (empty when it lasted 0 s)"),
    _C("method", "str", "what loss and jitter come from (see the module docstring)",
       values=METHODS),
    _C("sent", "int64", "datagrams sent: the highest iperf count (iperf3's 'packets'); matched "
       "captures: the sender capture's datagrams", "packets", optional=True),
    _C("lost", "int64", "missing at the capture point, by iperf3's rule; matched captures: sent "
       "datagrams never seen in the receiver capture", "packets", optional=True),
    catalogue.column("datagram_loss"),
    _C("out_of_order", "int64", "datagrams whose count (matched captures: place in the sender "
       "capture) is not above every earlier one's (duplicates included, as iperf3 counts)",
       "packets", optional=True),
    _C("duplicates", "int64", "datagrams whose count was seen before (matched captures: "
       "arrivals of a datagram already seen)", "packets", optional=True),
    catalogue.column("capture_jitter_ms", doc="matched captures: of receiver time - sender "
                     "capture time"),
    catalogue.column("app_jitter_ms"),
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
                      Shown("datagrams", "datagrams", minor=True), shown("payload_bps"),
                      Shown("sent", "sent", minor=True), Shown("lost", "lost"),
                      shown("datagram_loss"), Shown("from", "method"),
                      Shown("reorder", "out_of_order", minor=True), shown("capture_jitter_ms"),
                      shown("app_jitter_ms", minor=True), Shown("side", "side", minor=True))}
    legend = {"flows": "lost, loss: as iperf3's server counts them at this capture point, "
                       "between two captures, or (captured where sent) from iperf3's own "
                       "report ('from' says which); capture jitter: at this capture point; "
                       "app jitter: what the receiving iperf3 reported.  --all: every column."}


# What udp reads of a capture (a reader may hand it a Capture of only these columns and of
# the rows rows_needed picks): the layers own_transport reads, and the columns.
READS = (
    schema.UDP, schema.TCP, "l4_quoted",                   # own_transport
    "udp_stream", "direction",                             # the flows
    "frame_time_ns", "frame_number",                       # times, across clock breaks too
    "payload_len", "payload_offset", "payload_cap_len",
    "ip_src", "ip_dst", "udp_srcport", "udp_dstport",      # src and dst
    "ip_ttl",                                              # side
    "tcp_dstport", "tcp_len",                              # where iperf3's TEST_END may be
    "ip_version", "ip_id", "udp_length",                   # matched captures' keys
)


def rows_needed(cap: Capture) -> np.ndarray:
    """The rows udp reads (a mask), for a reader that keeps no others: every UDP datagram with
    its own header, the one-byte TCP segments among which iperf3's TEST_END is looked for,
    and the capture's earliest and latest packets (a receiver capture's span: which sent
    datagrams it could have seen; given a window at a time, the earliest and latest of each
    window include the file's).  The same for a sender and a receiver capture."""
    needed = own_transport(cap, "udp") | _one_byte_segments(cap)
    times = cap.column("frame_time_ns")
    if len(times):
        needed[[int(times.argmin()), int(times.argmax())]] = True
    return needed


NEEDS = Needs(READS, rows_needed)   # a path is read for udp alone (a receiver's too)


@analysis(needs=NEEDS)
def udp(capture: Capture, *, stream: int | None = None, receiver=None,
        counters: bool = True) -> Udp:
    """The UDP flows of a capture (of one stream with ``stream``).

    ``receiver``: a capture of the same traffic taken further on (a Capture or a path): each
    flow of ``capture`` is then found there and its datagrams matched, for loss, order and
    jitter without iperf's counters ("matched captures" in the module docstring).
    ``counters=False``: iperf's counters are not read (flows are then matched, given a
    receiver capture, else get jitter from their arrival spacing)."""
    with _Capture(capture) as cap:
        if receiver is not None:
            with _Capture(as_capture(receiver, NEEDS)) as at_receiver:
                return _paired(cap, _udp_rows(cap, stream), at_receiver, counters,
                               every=stream is None)
        found = [_flow(cap, flow_rows, stream_id, direction, counters)
                 for stream_id, direction, flow_rows in _flows(cap, _udp_rows(cap, stream))]
        said = _touched(cap)
    table = _table(found)
    notes = _with_reports(table, capture)
    result = Udp({"flows": table}, capture=capture.path,
                 notes=[*notes, *_notes(table), *_placed_losses(capture.path)])
    result.clock_touched = said
    return result


def _touched(*caps: _Capture) -> str:
    """What the clock breaks of these captures did to udp's numbers (clock.touched), "" when
    none has one."""
    if all(len(cap.pieces) == 1 for cap in caps):
        return ""
    n = sum(cap.spanning for cap in caps)
    return touched("udp", joined=[f"the duration, rate and jitter of {n} flow"
                                  f"{'s' if n > 1 else ''}"] if n else [])


def _udp_rows(capture: _Capture, stream: int | None) -> np.ndarray:
    rows = np.flatnonzero(own_transport(capture, "udp"))
    if stream is not None:
        rows = rows[capture.column("udp_stream")[rows] == stream]
        if not len(rows):
            raise UsageError(f"no UDP stream {stream} in {capture.path}",
                             hint="`pcapstats throughput --proto udp` lists the UDP streams")
    if not len(rows):
        raise NothingToReport(f"no UDP datagrams in {capture.path} ({capture.cap.holds()})",
                              hint="`pcapstats throughput` lists the streams it has")
    return rows


def _flows(capture: _Capture, rows: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(stream, direction, rows in capture order) of each flow, by stream and direction: one
    stable sort by (stream, direction), skipped when the rows already come in that order."""
    key = capture.column("udp_stream")[rows].astype(np.int64, copy=False)   # indexed: a copy
    key *= 2
    key += capture.column("direction")[rows]
    if (key[1:] < key[:-1]).any():
        by_flow = np.argsort(key, kind="stable")
        key = key[by_flow]
        rows = rows[by_flow]
        del by_flow
    bounds = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1, len(key)].tolist()
    return [(int(key[a]) // 2, int(key[a]) % 2, rows[a:b])
            for a, b in zip(bounds[:-1], bounds[1:])]


def _table(found: list[dict]) -> dict:
    return {c.name: np.asarray([row[c.name] for row in found],
                               dtype=object if c.dtype == "str" else float
                               if c.optional or c.dtype == "float64" else np.int64)
            for c in FLOWS.columns}


def _one_byte_segments(cap: Capture | _Capture) -> np.ndarray:
    """Mask of the TCP segments that could be iperf3's TEST_END: an own header and one
    payload byte, in the file."""
    return (own_transport(cap, "tcp") & (cap.column("tcp_len") == 1)
            & (cap.column("payload_cap_len") >= 1) & (cap.column("payload_offset") >= 0))


class _Capture:
    """A capture as one call reads it: each column read from the Capture once and kept (the
    reader derives some columns, payload_offset for one, anew at each read: a read a flow
    would cost every flow the whole capture), and on first use the file's bytes (a flow
    without iperf headers reads none) and the one-byte TCP segments."""

    def __init__(self, cap: Capture):
        self.cap, self.path, self.addresses = cap, cap.path, cap.addresses
        self._columns: dict[str, np.ndarray] = {}
        self._source: Source | None = None
        self._segments: np.ndarray | None = None
        self.pieces = cap.clock.pieces()
        self.spanning = 0                   # flows with datagrams in several of the pieces

    @property
    def first_time_ns(self) -> int | None:
        return self.cap.first_time_ns

    def column(self, name: str) -> np.ndarray:
        if name not in self._columns:
            self._columns[name] = self.cap.column(name)
        return self._columns[name]

    def layer(self, layer: str) -> np.ndarray:
        return self.cap.layer(layer)

    def source(self) -> Source:
        if self._source is None:
            self._source = open_source(self.cap.path)
        return self._source

    def heads(self, rows: np.ndarray) -> np.ndarray | None:
        """The first HEAD_BYTES payload bytes of each row, or None if any has fewer captured
        (read a part at a time, each part's file pages dropped once read)."""
        off = self.column("payload_offset")[rows]
        if (self.column("payload_cap_len")[rows] < HEAD_BYTES).any() or (off < 0).any():
            return None
        heads = np.empty((len(rows), HEAD_BYTES), np.uint8)
        for i, records in self.source().records_at(off, HEAD_BYTES, _HEADS_PER_READ):
            heads[i:i + len(records)] = records.view(np.uint8).reshape(-1, HEAD_BYTES)
        return heads

    def joined(self, rows: np.ndarray) -> np.ndarray:
        """The times of ``rows`` on the timeline joined across the clock's breaks
        (``clock.Pieces.monotonic``): the captured times themselves when it has none."""
        t = self.column("frame_time_ns")[rows]
        if len(self.pieces) == 1:
            return t
        return self.pieces.monotonic(t, self.column("frame_number")[rows])

    def across(self, rows: np.ndarray) -> np.ndarray | None:
        """Whether each datagram of ``rows`` after the first is in another piece than the one
        before it (a break between them), or None when the clock has no break."""
        if len(self.pieces) == 1:
            return None
        piece = self.pieces.of(self.column("frame_number")[rows])
        return piece[1:] != piece[:-1]

    def span(self) -> tuple[int, int]:
        """The capture's first and last packet times (its earliest and latest, without a
        clock break; else on the joined timeline)."""
        if len(self.pieces) == 1:
            t = self.column("frame_time_ns")
            return int(t.min()), int(t.max())
        check = self.cap.clock
        return check.first_ns, check.first_ns + check.span_ns()

    def one_byte_segments(self) -> np.ndarray:
        """Rows (increasing) of the TCP segments TEST_END may be."""
        if self._segments is None:
            self._segments = np.flatnonzero(_one_byte_segments(self))
        return self._segments

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._source is not None:
            self._source.close()


def _endpoints(cap: _Capture, row: int) -> tuple[str, str]:
    """(src, dst) of a datagram as address:port."""
    addresses = cap.addresses
    return (endpoint(addresses[cap.column("ip_src")[row]], cap.column("udp_srcport")[row]),
            endpoint(addresses[cap.column("ip_dst")[row]], cap.column("udp_dstport")[row]))


def _side(cap: _Capture, rows: np.ndarray) -> str:
    ttl = cap.column("ip_ttl")[rows]
    common = int(ttl[0]) if (ttl == ttl[0]).all() else int(np.bincount(ttl).argmax())
    return "sender" if schema.sent_here(common) else "further on"


def _flow(cap: _Capture, rows: np.ndarray, stream: int, direction: int,
          counters: bool = True) -> dict:
    """One row: the flow of ``rows`` (capture order) as ``cap`` saw it."""
    first_s = (int(cap.column("frame_time_ns")[rows[0]]) - cap.first_time_ns) / 1e9
    t = cap.joined(rows)                # the captured times, unless the clock broke
    across = cap.across(rows)
    if across is not None and across.any():
        cap.spanning += 1
    size = cap.column("payload_len")[rows]
    total = size.sum(dtype=np.int64)
    src, dst = _endpoints(cap, rows[0])
    span = (int(t.max()) - int(t.min())) / 1e9 if across is not None else (t[-1] - t[0]) / 1e9
    out = {"stream": stream, "direction": DIRECTIONS[direction], "src": src, "dst": dst,
           "side": _side(cap, rows), "datagrams": len(rows), "bytes": int(total),
           "first_s": first_s, "duration_s": span,
           "payload_bps": 8 * total / span if span > 0 else np.nan, "app_jitter_ms": np.nan}
    data = size >= HEAD_BYTES            # iperf's connect message and reply are 4 bytes
    del size
    if counters and np.count_nonzero(data) >= 2:
        data_at = _as_slice(data)
        data_rows, t_data = rows[data_at], t[data_at]
        heads = cap.heads(data_rows)
        headers = read_headers(heads) if heads is not None else None
        del heads                        # the bytes, once read into counts and send times
        if headers is not None:
            out.update(_counted(cap, data_rows, t_data, headers,
                                None if across is None else cap.across(data_rows)))
            return out
    out.update(dict.fromkeys(("sent", "lost", "datagram_loss", "out_of_order", "duplicates",
                              "after_end"), np.nan))
    if len(rows) >= MIN_SPACING_DATAGRAMS:
        out.update(method="arrival spacing",
                   capture_jitter_ms=_spacing_jitter(t, across) / 1e6)
    else:
        out.update(method="none", capture_jitter_ms=np.nan)
    return out


def _as_slice(mask: np.ndarray) -> slice | np.ndarray:
    """``mask`` as a slice when its rows are one run (an iperf flow's 4-byte connect message
    comes first): indexed by it, a flow's arrays are views, not copies."""
    first = int(mask.argmax())
    end = first + int(np.count_nonzero(mask))
    return slice(first, end) if mask[first:end].all() else mask


def _counted(cap: _Capture, rows: np.ndarray, t: np.ndarray, headers: Headers,
             across: np.ndarray | None = None) -> dict:
    """The iperf columns of a flow whose datagrams (``rows``, captured at ``t``; ``across``:
    each one after the first past a clock break from the one before, or None) carry iperf's
    headers: what iperf3's server counts, up to the client's TEST_END."""
    counted, after_end = slice(None), 0
    end = _test_end_row(cap, rows[0]) if headers.layout.startswith("iperf3") else None
    if end is not None:
        late = rows > end                  # captured after it: the capture's order, not time
        after_end = int(np.count_nonzero(late))
        if after_end:
            counted = ~late
    counts = headers.count[counted]
    if headers.layout == "iperf2":
        counts = counts + 1                                  # from 0
    sent, lost, ooo, duplicates = _iperf3_counts(counts)
    # the jitter filter forgets all but the last JITTER_MEMORY differences: only their
    # transit times are needed
    last = (np.flatnonzero(counted)[-JITTER_MEMORY - 1:] if after_end
            else np.arange(max(0, len(t) - JITTER_MEMORY - 1), len(t)))
    broken = None if across is None else np.r_[False, across][last][1:]
    return dict(method=headers.layout, sent=sent, lost=lost,
                datagram_loss=lost / sent if sent > 0 else np.nan, out_of_order=ooo,
                duplicates=duplicates,
                capture_jitter_ms=rfc3550_jitter(t[last] - headers.sent_ns[last], broken) / 1e6,
                after_end=after_end)


def _spacing_jitter(t: np.ndarray, across: np.ndarray | None = None) -> float:
    """RFC 3550's jitter, in ns, of the arrivals' deviation from the median spacing (summed
    from the first arrival, whose deviation is 0): only the deviations the filter still
    remembers are handed to it.  ``across``: the gaps across a clock break, left out."""
    gaps = np.diff(t)
    if across is not None and across.any():
        gaps = gaps[~across]
    if not len(gaps):
        return float("nan")
    deviation = gaps - np.median(gaps)
    np.cumsum(deviation, out=deviation)
    return rfc3550_jitter(deviation[-JITTER_MEMORY - 1:] if len(deviation) > JITTER_MEMORY
                          else np.r_[0, deviation])


def _paired(sender: _Capture, rows: np.ndarray, receiver: _Capture, counters: bool,
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
    span = receiver.span()
    found, notes, seen, missing, reverse = [], [], set(), [], []
    for stream, direction, up in _flows(sender, rows):
        src, dst = ends = _endpoints(sender, up[0])
        name = f"stream {stream} {DIRECTIONS[direction]} ({src} → {dst})"
        if ends not in at_receiver:
            found.append(_not_found(stream, direction, src, dst))
            missing.append(name)
            continue
        seen.add(ends)
        parts = at_receiver[ends]      # each in capture order
        down = parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts))
        row = _flow(receiver, down, stream, direction, counters)
        found.append(row)
        if row["method"] in LAYOUTS:
            continue                       # iperf3's own numbers, at the receiver
        if row["side"] == "sender" and _side(sender, up) == "further on":
            reverse.append(name)
            continue
        cut = common_cut((sender, up), (receiver, down))
        m = match(datagram_keys(sender, up, sender.source(), cut), sender.joined(up),
                  datagram_keys(receiver, down, receiver.source(), cut),
                  receiver.joined(down), span)
        if not m.arrivals:
            notes.append(Note("loss unknown: no datagram matched", about=name,
                              detail=f"none of its {len(down)} datagrams in the receiver "
                                     f"capture is one of the {len(up)} in the sender capture "
                                     "(changed on the way?)"))
            continue
        row.update(method=MATCHED, sent=m.sent, lost=m.lost,
                   datagram_loss=m.lost / m.sent if m.sent else np.nan,
                   out_of_order=m.out_of_order, duplicates=m.duplicates,
                   capture_jitter_ms=rfc3550_jitter(m.transit_ns) / 1e6)
        if m.unmatched:
            notes.append(Note(f"{m.unmatched} received datagram(s) not sent: not counted",
                              about=name, detail="they match none in the sender capture (it "
                                                 "started later or stopped sooner, or they "
                                                 "were changed on the way)"))
        if m.outside:
            notes.append(Note(f"{m.outside} datagram(s) sent unseen: not counted",
                              about=name, detail="the sender capture has them sent when the "
                                                 "receiver capture could not have seen them "
                                                 "(before it started or after it stopped): "
                                                 "left out of sent and lost"))
    if missing:
        notes.append(Note("not in the receiver capture: loss unknown", about=_some(missing),
                          detail="flows are found by their addresses and ports as they are; "
                                 "behind a NAT they differ, and NAT is not followed"))
    if reverse:
        notes.append(Note("sent from the receiver's side: give the captures the other way "
                          "round", about=_some(reverse),
                          detail="by the TTL, sent from the receiver capture's side: not "
                                 "matched this way round"))
    others = len(at_receiver.keys() - seen)
    if others and every:
        notes.append(Note(f"{others} UDP flow direction(s) only in the receiver capture: not "
                          "shown", detail=f"`pcapstats udp {receiver.path}` shows them"))
    table = _table(found)
    result = Udp({"flows": table}, capture=sender.path, notes=_notes(table) + notes)
    result.clock_touched = _touched(sender, receiver)
    return result


def _some(names: list[str], shown: int = 3) -> str:
    """The first few names, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more flow directions" if more > 0 else "")


def _not_found(stream: int, direction: int, src: str, dst: str) -> dict:
    row = dict.fromkeys((c.name for c in FLOWS.columns), np.nan)
    row.update(stream=stream, direction=DIRECTIONS[direction], src=src, dst=dst,
               side="unknown", datagrams=0, bytes=0, method="none")
    return row


TEST_END = 4          # iperf3's control message ending the test: one byte, client -> server


def _test_end_row(cap: _Capture, first_row: int) -> int | None:
    """Where the client's TEST_END passed the capture point: the row of the first one-byte
    segment carrying 4 on the iperf3 control connection (TCP from the flow's sender to its
    destination port) captured after the flow's first datagram (the capture's order, which a
    clock step leaves as it was); None if not captured."""
    rows = cap.one_byte_segments()
    rows = rows[(cap.column("ip_src")[rows] == cap.column("ip_src")[first_row])
                & (cap.column("tcp_dstport")[rows] == cap.column("udp_dstport")[first_row])
                & (rows > first_row)]
    ends = rows[cap.source().buf[cap.column("payload_offset")[rows]] == TEST_END]
    return int(ends[0]) if len(ends) else None


def _iperf3_counts(counts: np.ndarray) -> tuple[int, int, int, int]:
    """(highest count, lost, out of order, duplicates) as iperf3's receiver counts them in
    arrival order: a forward jump (a count above the highest so far) adds its gap to lost;
    any other count is out of order and takes one back from lost while lost is above zero.

    One pass, and a sort of the out-of-order counts only: lost is a walk floored at 0 whose
    forward gaps telescope, so after datagram i it stands at (highest count so far) - (i + 1)
    (less a first count at or below 0, which is no jump from 0).  A forward count is new; a
    later one repeats an earlier count if that count was forward (it is then in the running
    highest) or repeats an earlier late one."""
    top = np.maximum.accumulate(counts)             # the highest count so far
    forward = np.empty(len(counts), bool)
    forward[0] = counts[0] > 0
    np.greater(counts[1:], top[:-1], out=forward[1:])
    late = np.sort(counts[~forward])                 # few: the out-of-order counts
    late = np.concatenate([late[:1], late[1:][late[1:] != late[:-1]]])      # each once
    at = np.minimum(np.searchsorted(top, late), len(top) - 1)
    was_forward = (top[at] == late) & ((at > 0) | forward[0])
    out_of_order = len(counts) - int(np.count_nonzero(forward))
    duplicates = out_of_order - int(np.count_nonzero(~was_forward))
    first, low = min(int(counts[0]), 0), None
    for a in range(0, len(top), _WALK_PART):         # the walk a part at a time
        walk = top[a:a + _WALK_PART] - np.arange(a + 1, min(a + _WALK_PART, len(top)) + 1)
        walk -= first
        low = int(walk.min()) if low is None else min(low, int(walk.min()))
    lost = int(walk[-1] - min(0, low))               # floored at 0
    return int(top[-1]), lost, out_of_order, duplicates


def rfc3550_jitter(transit_ns: np.ndarray, broken: np.ndarray | None = None) -> float:
    """RFC 3550's interarrival jitter after the last packet, in ns: J += (|D| - J) / 16 over
    the transit-time differences D of consecutive packets, J starting at 0.  ``broken``: for
    each difference, whether a clock break lies between its packets: those are unknowable and
    left out (J unchanged there)."""
    t = np.asarray(transit_ns)[-JITTER_MEMORY - 1:]   # weights older than this are below 1e-300
    d = np.abs(np.diff(t.astype(np.float64)))
    if broken is not None:
        d = d[~np.asarray(broken, bool)[-len(d):]] if len(d) else d
    if not len(d):
        return float("nan")
    weights = (15 / 16) ** np.arange(len(d) - 1, -1, -1) / 16   # the last packet weighs most
    return float((d * weights).sum())


def _notes(table: dict) -> list[str]:
    notes = []
    senders = [int(s) for s, side, m in zip(table["stream"], table["side"], table["method"])
               if side == "sender" and m in LAYOUTS]
    if senders:
        streams = sorted(set(senders))
        notes.append(Note("captured where sent: loss not known here",
                          about=f"UDP stream{'s' if len(streams) > 1 else ''} "
                                f"{id_ranges(streams)}",
                          detail="the loss happens further on, so it is not known here, and "
                                 "the capture jitter is the sender's own pacing; capture at "
                                 "the receiver, keep the lab sidecar beside the capture, or "
                                 "capture whole packets (iperf3 then sends its server's "
                                 "report on the control connection)"))
    return notes


def _placed_losses(path) -> list[Note]:
    """What the capture's sidecar says of the loss it was run with, where the capture point
    puts it out of sight: after it (the capture holds every datagram the loss will drop), or
    on this host's own egress before it (its drops are missing here, as a path's would be)."""
    out = []
    for p in placements(path) if path else []:
        if p.what != "loss":
            continue
        if p.after_capture:
            out.append(Note(f"{p.amount} loss after this capture point",
                            about=f"UDP {p.packets}", detail=f"{p.text()} acts on the "
                            "datagrams after this capture point saw them: none of its drops "
                            "is missing here; the loss is the receiver's count (iperf3's "
                            "report) or a capture further on (udp --pair)"))
        elif p.own_egress:
            out.append(Note(f"{p.amount} loss on this host's egress, before the capture",
                            about=f"UDP {p.packets}", detail=f"{p.text()} dropped datagrams "
                            "before this capture point saw them (tcpdump's tap is after "
                            "netfilter and the qdisc): they are missing here as a path's "
                            "losses would be, and nothing of the path beyond is seen"))
    return out


def _with_reports(table: dict, capture) -> list[str]:
    """Each iperf flow's report from the receiving iperf3 (the lab sidecar's server output, or
    the results the test exchanged on its control connection, as verify reads them), put in
    the table in place: ``app_jitter_ms`` beside the capture's, and for a flow captured where
    it was sent -- whose loss happens further on -- its sent, lost and loss (method
    REPORT).  Without one, such a flow's loss is left empty, never 0."""
    iperf = np.isin(table["method"], LAYOUTS)
    sender = iperf & (table["side"] == "sender")
    for name in ("lost", "datagram_loss", "out_of_order", "duplicates", "after_end"):
        table[name][sender] = np.nan                    # not known where the datagrams left
    if not iperf.any():
        return []
    reports, source = _iperf3_reports(capture, table, bool(sender.any()))
    for i in np.flatnonzero(iperf):
        report = reports.get((int(table["stream"][i]), table["direction"][i]))
        if report is None:
            continue
        if report.get("jitter_ms") is not None:
            table["app_jitter_ms"][i] = float(report["jitter_ms"])
        if sender[i] and report.get("packets") and report.get("lost_packets") is not None:
            sent, lost = int(report["packets"]), int(report["lost_packets"])
            table["method"][i] = REPORT
            table["sent"][i], table["lost"][i], table["datagram_loss"][i] = \
                sent, lost, lost / sent
            if report.get("out_of_order") is not None:
                table["out_of_order"][i] = int(report["out_of_order"])
    used = sorted({int(s) for s, m in zip(table["stream"], table["method"]) if m == REPORT})
    about = f"UDP stream{'s' if len(used) > 1 else ''} {id_ranges(used)}"
    return [Note("loss from iperf3's own report", about=about,
                 detail=f"sent, lost and loss are iperf3's server's own, from {source}, as "
                        "this capture was taken where the datagrams were sent")] if used else []


def _iperf3_reports(capture, table: dict, at_sender: bool) -> tuple[dict, str]:
    """(stream, direction) -> the receiving iperf3's report of that flow, and where it came
    from: the lab sidecar beside the capture, else -- only when a flow captured at its sender
    needs one -- the results exchanged on the control connection (verify reads them; a second
    read of the capture, for its TCP streams)."""
    iperf = np.isin(table["method"], LAYOUTS)       # a stream's data direction
    direction = {int(s): d for s, d in zip(table["stream"][iperf], table["direction"][iperf])}
    reports = {(s, direction[s]): r for s, r in iperf3_udp_reports(capture.path).items()
               if s in direction}
    if reports:
        return reports, "the lab sidecar"
    if not at_sender:
        return {}, ""
    from .verify import verify    # lazy: verify reads the capture again, for this case only
    try:
        checked = verify(capture.whole_or_path)
    except UsageError:
        return {}, ""
    for v in checked.verdicts:
        r = v.facts.get("iperf3_server")
        if v.proto == "udp" and r is not None and v.stream in direction:
            reports[(v.stream, direction[v.stream])] = r
    return reports, "the results iperf3 exchanged on its control connection"
