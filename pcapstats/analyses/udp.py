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
- **none**: fewer datagrams than that.

Everything is what the capture point saw: at the sender nothing is lost yet and the jitter is
the sender's own; at the receiver they are what iperf3's server reports.  ``side`` says which
(IP TTL: a datagram captured where it was sent still has its initial TTL).  ``bps`` is
payload bits over first to last datagram of the direction.
"""

from __future__ import annotations

import numpy as np

from ..batch import analysis
from ..capture import Capture
from ..errors import UsageError
from ..ingest.source import open_source
from ..render import Shown
from ..results import Result
from ..schema import Column, TableSpec
from ..streams import DIRECTIONS, endpoint, own_transport
from .ping import INITIAL_TTLS
from .udp_headers import HEAD_BYTES, read_headers

MIN_SPACING_DATAGRAMS = 10
METHODS = ("iperf3", "iperf3-64", "iperf2", "arrival spacing", "none")
_C = Column
FLOWS = TableSpec("flows", "one row per UDP stream and direction that carried datagrams", (
    _C("stream", "int64", "udp.stream index, as Wireshark numbers it", wireshark="udp.stream"),
    _C("direction", "str", "a_to_b: sent by side A (the source of the stream's first packet)",
       values=DIRECTIONS),
    _C("src", "str", "sender address:port"),
    _C("dst", "str", "receiver address:port"),
    _C("side", "str", "where the capture was taken for this flow: sender (datagrams still "
       "with their initial TTL) or further on", values=("sender", "further on")),
    _C("datagrams", "int64", "datagrams captured", "packets"),
    _C("bytes", "int64", "UDP payload bytes captured", "bytes"),
    _C("first_s", "float64", "first datagram, seconds since the capture's first packet", "s"),
    _C("duration_s", "float64", "first to last datagram", "s"),
    _C("bps", "float64", "payload bits / duration (empty when it lasted 0 s)", "bit/s",
       optional=True),
    _C("method", "str", "what loss and jitter come from (see the module docstring)",
       values=METHODS),
    _C("sent", "int64", "datagrams sent: the highest iperf count (iperf3's 'packets')",
       "packets", optional=True),
    _C("lost", "int64", "missing at the capture point, by iperf3's rule", "packets",
       optional=True),
    _C("loss_pct", "float64", "lost / sent x 100", "%", optional=True),
    _C("out_of_order", "int64", "datagrams whose count is not above every earlier one "
       "(duplicates included, as iperf3 counts)", "packets", optional=True),
    _C("duplicates", "int64", "datagrams whose count was seen before", "packets",
       optional=True),
    _C("jitter_ms", "float64", "RFC 3550 interarrival jitter at the capture point", "ms",
       optional=True),
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
    legend = {"flows": "lost, loss, jitter: as iperf3's server counts them, at this capture "
                       "point ('from' says what they come from).  --all: every column."}


@analysis()
def udp(capture: Capture, *, stream: int | None = None) -> Udp:
    """The UDP flows of a capture (of one stream with ``stream``)."""
    rows = np.flatnonzero(own_transport(capture, "udp"))
    streams = capture.column("udp_stream")[rows]
    if stream is not None:
        rows = rows[streams == stream]
        if not len(rows):
            raise UsageError(f"no UDP stream {stream} in {capture.path}",
                             hint="`pcapstats throughput --proto udp` lists the UDP streams")
    if not len(rows):
        raise UsageError(f"no UDP datagrams in {capture.path}",
                         hint="`pcapstats throughput` lists the streams it has")
    direction = capture.column("direction")[rows]
    key = capture.column("udp_stream")[rows].astype(np.int64) * 2 + direction
    order = np.argsort(key, kind="stable")          # capture order within each flow
    keys, starts = np.unique(key[order], return_index=True)
    bounds = np.r_[starts, len(order)]
    buf = _Bytes(capture)
    out: dict[str, list] = {c.name: [] for c in FLOWS.columns}
    t0 = int(capture.column("frame_time_ns")[0])
    for k, flow_key in enumerate(keys):
        _flow(capture, rows[order[bounds[k]:bounds[k + 1]]], int(flow_key), buf, t0, out)
    table = {c.name: np.asarray(out[c.name], dtype=object if c.dtype == "str" else float
                                if c.optional or c.dtype == "float64" else np.int64)
             for c in FLOWS.columns}
    return Udp({"flows": table}, capture=capture.path, notes=_notes(table))


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
        return self._open()[off[:, None] + np.arange(HEAD_BYTES)]

    def byte(self, offset: int) -> int:
        return int(self._open()[offset])

    def _open(self) -> np.ndarray:
        if self._buf is None:
            self._buf = open_source(self.cap.path).buf
        return self._buf


def _flow(cap: Capture, rows: np.ndarray, flow_key: int, buf: _Bytes, t0: int, out: dict):
    stream, direction = flow_key // 2, flow_key % 2
    t = cap.column("frame_time_ns")[rows].astype(np.int64)
    size = cap.column("payload_len")[rows].astype(np.int64)
    addresses = cap.addresses
    src = f"{addresses[cap.column('ip_src')[rows[0]]]}"
    dst = f"{addresses[cap.column('ip_dst')[rows[0]]]}"
    out["stream"].append(stream)
    out["direction"].append(DIRECTIONS[direction])
    out["src"].append(endpoint(src, cap.column("udp_srcport")[rows[0]]))
    out["dst"].append(endpoint(dst, cap.column("udp_dstport")[rows[0]]))
    ttl = int(np.bincount(cap.column("ip_ttl")[rows].astype(np.int64)).argmax())
    out["side"].append("sender" if ttl in INITIAL_TTLS else "further on")
    out["datagrams"].append(len(rows))
    out["bytes"].append(int(size.sum()))
    span = (t[-1] - t[0]) / 1e9
    out["first_s"].append((t[0] - t0) / 1e9)
    out["duration_s"].append(span)
    out["bps"].append(8 * size.sum() / span if span > 0 else np.nan)
    data = size >= HEAD_BYTES            # iperf's connect message and reply are 4 bytes
    heads = buf.heads(rows[data]) if data.sum() >= 2 else None
    headers = read_headers(heads, t[data]) if heads is not None else None
    if headers is not None:
        counted = np.ones(len(headers.count), bool)
        if headers.layout.startswith("iperf3"):
            end = _test_end_ns(cap, rows[0], buf, int(t[data][0]))
            counted = t[data] <= end if end is not None else counted
        out["after_end"].append(int((~counted).sum()))
        t_data = t[data][counted]
        counts = headers.count[counted] + (1 if headers.layout == "iperf2" else 0)  # from 0
        sent, lost, ooo = _iperf3_loss(counts)
        out["method"].append(headers.layout)
        out["sent"].append(sent)
        out["lost"].append(lost)
        out["loss_pct"].append(100.0 * lost / sent if sent > 0 else np.nan)
        out["out_of_order"].append(ooo)
        out["duplicates"].append(len(counts) - len(np.unique(counts)))
        out["jitter_ms"].append(rfc3550_jitter(t_data - headers.sent_ns[counted]) / 1e6)
        return
    for name in ("sent", "lost", "loss_pct", "out_of_order", "duplicates", "after_end"):
        out[name].append(np.nan)
    if len(rows) >= MIN_SPACING_DATAGRAMS:
        gaps = np.diff(t)
        out["method"].append("arrival spacing")
        out["jitter_ms"].append(rfc3550_jitter(np.r_[0, np.cumsum(gaps - np.median(gaps))])
                                / 1e6)
    else:
        out["method"].append("none")
        out["jitter_ms"].append(np.nan)


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
    d = np.abs(np.diff(transit_ns.astype(np.float64)))
    if not len(d):
        return float("nan")
    weights = (15 / 16) ** np.arange(len(d) - 1, -1, -1) / 16   # the last packet weighs most
    return float((d * weights).sum())


def _notes(table: dict) -> list[str]:
    notes = []
    senders = [int(s) for s, side, m in zip(table["stream"], table["side"], table["method"])
               if side == "sender" and m.startswith("iperf")]
    if senders:
        notes.append(f"UDP stream(s) {', '.join(map(str, sorted(set(senders))))} captured at "
                     "the sender: nothing is lost yet there, and the jitter is the sender's "
                     "own; capture at the receiver for what iperf3's server reports")
    return notes
