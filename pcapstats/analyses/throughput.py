"""Per-stream throughput: Wireshark's Statistics > Conversations (TCP, UDP) plus payload and peak rates.

Definitions (each number can be checked in Wireshark):

- A conversation is one ``tcp_stream`` or ``udp_stream``.  Side **A** is the source of the
  stream's first packet, as in tshark 4.0's ``-z conv,tcp`` / ``conv,udp`` (newer Wireshark
  versions order the sides by port instead).  ``*_a_to_b`` counts packets sent by A.  The
  counts are the streams layer's summary (pcapstats.streams.stream_summary); this module adds
  the rates.
- ``bytes`` are frame bytes on the wire (``frame_len``); ``payload_bytes`` are transport payload
  bytes by the headers (``tcp_len``; UDP length - 8).
- ``rel_start_s`` is the first packet's time relative to the first packet of the capture;
  ``duration_s`` is last packet minus first packet of the stream, both directions.
- ``bps_*`` = bytes x 8 / duration_s, the average over the stream's lifetime (Wireshark's
  "Bits/s A -> B"); empty when the duration is 0.
- ``peak_*bps_*``: the largest bytes x 8 / interval over intervals of ``interval`` seconds aligned
  to the capture's first packet (the buckets of Wireshark's I/O graph).

Given a path, ``throughput`` reads the file in one streaming pass whose memory does not grow
with the capture (4 MiB windows); given a Capture, it sums the table in memory.  Both feed the
same accumulator, so every number has one definition.  If time goes backwards across windows,
the file is read whole instead.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue
from ..batch import analysis
from ..capture import Capture
from ..errors import Note, UsageError
from ..ingest import WINDOW_BYTES, read_fast, stream_windows
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from ..streams import (PROTOS, STREAM_SUMMARY_COLUMNS, StreamTotals, TimeWentBack, empty_summary,
                       id_ranges, stack_summaries, stream_summary)
from ..units import interval_ns  # the peak is the busiest I/O-graph interval

_COUNTS = {c.name: c for c in STREAM_SUMMARY_COLUMNS}
_SIDES = ("a_to_b", "b_to_a")


def _avg(side: str) -> Column:
    return catalogue.column("avg_stream_bps", side, doc=f"bytes_{side} x 8 / duration_s "
                            "(empty when the duration is 0)")


STREAMS = TableSpec("streams", "one row per TCP/UDP stream (TCP first, each by stream index)", (
    *(_COUNTS[n] for n in ("stream", "proto", "address_a", "port_a", "address_b", "port_b",
                           "packets", "bytes", "packets_a_to_b", "bytes_a_to_b",
                           "packets_b_to_a", "bytes_b_to_a", "rel_start_s", "duration_s")),
    _avg("a_to_b"), _avg("b_to_a"),
    _COUNTS["payload_bytes_a_to_b"], _COUNTS["payload_bytes_b_to_a"],
    *(catalogue.column("payload_bps", d) for d in _SIDES),
    *(catalogue.column("peak_bps", d, doc=f"of the packets {who} sent", optional=False)
      for d, who in zip(_SIDES, "AB")),
    *(catalogue.column("peak_payload_bps", d, doc=f"of the packets {who} sent", optional=False)
      for d, who in zip(_SIDES, "AB")),
))
_L4 = {"tcp": 6, "udp": 17}   # the kernel's l4 codes
NOTE_MIN_PACKETS = 10         # a stream this long is a transfer worth a note about its peak


class Throughput(Result):
    """Per-stream throughput (table ``streams``), as Statistics > Conversations, plus payload
    and peak rates.  ``interval_s``: the peak's interval; ``packets``: packets read."""
    analysis = "throughput"
    specs = (STREAMS,)
    view = {"streams": (Shown("stream", join="{proto} {stream}"),
                        Shown("A → B", endpoints=True, wrap=True),
                        Shown("packets", "packets", minor=True), Shown("bytes", "bytes"),
                        Shown("duration", "duration_s"), shown("avg_stream_bps_a_to_b"),
                        shown("peak_bps_a_to_b"), shown("avg_stream_bps_b_to_a", minor=True),
                        shown("peak_bps_b_to_a", minor=True))}
    legend = {"streams": "stream avg: frame bits over the stream's duration (Wireshark's "
                         "Bits/s), at this capture point, headers included; peak: the busiest "
                         "interval.  --all: payload rates and every count."}
    draws = overlays = True          # a bar a stream and direction, of every capture

    def __init__(self, table, *, capture, interval_s: float, packets: int):
        super().__init__({"streams": table}, capture=capture, notes=_short_streams(table,
                                                                                   interval_s))
        self.interval_s, self.packets = interval_s, packets

    def _figure(self, ax=None, **options):
        from ..plots.throughput import throughput_figure  # lazy: matplotlib only for a figure
        return throughput_figure(self, ax=ax, **options)


@analysis(reads=False)
def throughput(capture, *, interval: float = 1.0, stream: int | None = None,
               proto: str | None = None, kernel: str = "auto",
               window_bytes: int = WINDOW_BYTES) -> Throughput:
    """One row per TCP/UDP stream, with the definitions of the module docstring.

    capture: a Capture, or a path (read in one streaming pass of ``window_bytes`` windows, with
    the ``kernel`` given); stream / proto: only that stream index / protocol; interval: the
    peak rates' interval in seconds."""
    bin_ns = interval_ns(interval)
    protos = _protos(proto)
    if isinstance(capture, Capture):
        counts, packets, path = stream_summary(capture, proto=proto, interval_ns=bin_ns), \
            len(capture), capture.path
    else:
        counts, packets = _streamed_summary(capture, protos, bin_ns, kernel, window_bytes)
        path = str(capture)
    table = _rates(_only(counts, stream, protos, path), bin_ns)
    return Throughput(table, capture=path, interval_s=bin_ns / 1e9, packets=packets)


# a transfer shorter than two intervals filled none: its busiest one reads below its average
PEAK_BELOW = "peak below average: too short"


def _short_streams(table: dict, interval_s: float) -> list[str]:
    """A note for the transfers (10 packets or more) whose peak reads below their average
    because they lasted less than two intervals, so none filled one (the busiest interval is
    the I/O graph's, aligned to the capture's start)."""
    low = (table["duration_s"] < 2 * interval_s) & (table["packets"] >= NOTE_MIN_PACKETS)
    with np.errstate(invalid="ignore"):
        low &= ((table["peak_bps_a_to_b"] < table["avg_stream_bps_a_to_b"])
                | (table["peak_bps_b_to_a"] < table["avg_stream_bps_b_to_a"]))
    return [Note(PEAK_BELOW, about=f"{table['proto'][i]} stream {table['stream'][i]}",
                 detail=f"it lasted {table['duration_s'][i]:.3g} s, so no {interval_s:g} s "
                        "interval was busy all through; a shorter --interval shows its rate")
            for i in np.flatnonzero(low)]


def _streamed_summary(path, protos, bin_ns, kernel, window_bytes) -> tuple[dict, int]:
    """The stream summary of a file in one pass over its windows (memory bounded by the window)."""
    totals: dict[str, StreamTotals] = {}

    def on_window(w):
        if not totals:
            t0 = int(w["frame_time_ns"][0])
            totals.update({p: StreamTotals(p, bin_ns, t0) for p in protos})
        own = w["l4_quoted"] == 0
        for p, acc in totals.items():
            rows = np.flatnonzero((w["l4"] == _L4[p]) & own)
            if len(rows):
                acc.add(w["stream"][rows], w["ip_src"][rows], w["ip_dst"][rows], w["srcport"][rows],
                        w["dstport"][rows], w["frame_time_ns"][rows], w["frame_len"][rows],
                        w["payload_len"][rows], close=True)
    try:
        n, addresses = stream_windows(path, on_window, kernel=kernel, window_bytes=window_bytes)
    except TimeWentBack:
        cap = read_fast(path, kernel=kernel)
        return stack_summaries([stream_summary(cap, proto=p, interval_ns=bin_ns)
                                for p in protos]), len(cap)
    return stack_summaries([totals[p].columns(addresses) if p in totals else empty_summary()
                            for p in protos]), n


def _protos(proto) -> tuple[str, ...]:
    if proto is None:
        return PROTOS
    if proto not in PROTOS:
        raise UsageError(f"unknown protocol {proto!r}", hint="use tcp or udp")
    return (proto,)


def _only(counts: dict, stream, protos, path) -> dict:
    """The summary cut to ``stream`` when one is asked for (one clear error when it is not there)."""
    if stream is None:
        return counts
    keep = counts["stream"] == stream
    if not keep.any():
        have = {p: counts["stream"][counts["proto"] == p] for p in protos}
        hint = "it has " + ", ".join(f"{p.upper()} streams {id_ranges(v)}" if len(v) else
                                     f"no {p.upper()} streams" for p, v in have.items())
        raise UsageError(f"no {'/'.join(protos).upper()} stream {stream} in this capture",
                         path=path, hint=hint)
    return {name: values[keep] for name, values in counts.items()}


def _rates(counts: dict, bin_ns: int) -> dict:
    """The throughput table from the stream summary: averages over each stream's duration and
    the busiest interval's bytes as bits/s."""
    duration = counts["duration_s"]
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(duration > 0, 8.0 / duration, np.nan)
    to_bps = 8e9 / bin_ns
    out = dict(counts)
    for side in ("a_to_b", "b_to_a"):
        out[f"avg_stream_bps_{side}"] = counts[f"bytes_{side}"] * rate
        out[f"payload_bps_{side}"] = counts[f"payload_bytes_{side}"] * rate
        out[f"peak_bps_{side}"] = counts[f"peak_bytes_{side}"] * to_bps
        out[f"peak_payload_bps_{side}"] = counts[f"peak_payload_bytes_{side}"] * to_bps
    return {name: out[name] for name in STREAMS.names}
