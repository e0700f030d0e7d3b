"""Per-stream throughput: Wireshark's Statistics > Conversations (TCP, UDP) plus payload and peak rates.

Definitions (each number can be checked in Wireshark):

- A conversation is one ``tcp_stream`` or ``udp_stream``.  Side **A** is the source of the
  stream's first packet, as in tshark 4.0's ``-z conv,tcp`` / ``conv,udp`` (newer Wireshark
  versions order the sides by port instead).  ``*_a_to_b`` counts packets sent by A.
- ``bytes`` are frame bytes on the wire (``frame_len``); ``payload_bytes`` are transport payload
  bytes by the headers (``tcp_len``; UDP length - 8).
- ``rel_start_s`` is the first packet's time relative to the first packet of the capture;
  ``duration_s`` is last packet minus first packet of the stream, both directions.
- ``bps_*`` = bytes x 8 / duration_s, the average over the stream's lifetime (Wireshark's
  "Bits/s A -> B"); empty when the duration is 0.
- ``peak_*bps_*``: the largest bytes x 8 / interval over intervals of ``interval`` seconds aligned
  to the capture's first packet (the buckets of Wireshark's I/O graph).
"""

from __future__ import annotations

import numpy as np

from .. import schema
from ..capture import Capture
from ..errors import UsageError
from ..streams import first_occurrences as _first_occurrences

THROUGHPUT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("stream", "tcp_stream or udp_stream index, as Wireshark numbers it"),
    ("proto", "tcp or udp"),
    ("address_a", "address of side A (the source of the stream's first packet)"),
    ("port_a", "port of side A"),
    ("address_b", "address of side B"),
    ("port_b", "port of side B"),
    ("packets", "frames, both directions"),
    ("bytes", "frame bytes on the wire, both directions"),
    ("packets_a_to_b", "frames sent by A"),
    ("bytes_a_to_b", "frame bytes sent by A"),
    ("packets_b_to_a", "frames sent by B"),
    ("bytes_b_to_a", "frame bytes sent by B"),
    ("rel_start_s", "first frame of the stream, seconds after the capture's first frame"),
    ("duration_s", "last frame minus first frame of the stream, seconds"),
    ("bps_a_to_b", "bytes_a_to_b x 8 / duration_s (on-wire bits/s)"),
    ("bps_b_to_a", "bytes_b_to_a x 8 / duration_s"),
    ("payload_bytes_a_to_b", "transport payload bytes sent by A (tcp_len, udp length - 8)"),
    ("payload_bytes_b_to_a", "transport payload bytes sent by B"),
    ("payload_bps_a_to_b", "payload_bytes_a_to_b x 8 / duration_s (goodput incl. retransmissions)"),
    ("payload_bps_b_to_a", "payload_bytes_b_to_a x 8 / duration_s"),
    ("peak_bps_a_to_b", "largest on-wire bits/s sent by A in one interval"),
    ("peak_bps_b_to_a", "largest on-wire bits/s sent by B in one interval"),
    ("peak_payload_bps_a_to_b", "largest payload bits/s sent by A in one interval"),
    ("peak_payload_bps_b_to_a", "largest payload bits/s sent by B in one interval"),
)


_PROTOS = {"tcp": (schema.TCP, "tcp_stream", "tcp_srcport", "tcp_dstport"),
           "udp": (schema.UDP, "udp_stream", "udp_srcport", "udp_dstport")}


def throughput(cap: Capture, *, interval: float = 1.0, stream: int | None = None,
               proto: str | None = None):
    """One row per TCP/UDP stream (TCP first, each by stream index), as a pandas DataFrame with
    the columns of THROUGHPUT_COLUMNS."""
    import pandas as pd
    return pd.DataFrame(throughput_columns(cap, interval=interval, stream=stream, proto=proto))


def throughput_columns(cap: Capture, *, interval: float = 1.0, stream: int | None = None,
                       proto: str | None = None) -> dict[str, np.ndarray]:
    """The same table as numpy columns (the CLI renders these without loading pandas)."""
    if not interval > 0:
        raise UsageError(f"interval must be positive, got {interval}")
    protos = _protos(proto)
    interval_ns = max(1, round(interval * 1e9))
    parts = [_one_proto(cap, p, interval_ns) for p in protos]
    table = {name: np.concatenate([part[name] for part in parts]) for name, _ in THROUGHPUT_COLUMNS}
    if stream is not None:
        keep = table["stream"] == stream
        if not keep.any():
            raise UsageError(f"no {'/'.join(protos).upper()} stream {stream} in this capture",
                             path=cap.path, hint=_streams_hint(cap, protos))
        table = {name: values[keep] for name, values in table.items()}
    return table


def _protos(proto):
    if proto is None:
        return ["tcp", "udp"]
    if proto not in _PROTOS:
        raise UsageError(f"unknown protocol {proto!r}", hint="use tcp or udp")
    return [proto]


def _streams_hint(cap, protos) -> str:
    parts = []
    for p in protos:
        s = cap.column(_PROTOS[p][1])[cap.present(_PROTOS[p][1]) & ~cap.column("l4_quoted")]
        parts.append(f"{p.upper()} streams 0-{s.max()}" if len(s) else f"no {p.upper()} streams")
    return "it has " + ", ".join(parts)


_TEXT_COLUMNS = ("proto", "address_a", "address_b")


def _empty() -> dict[str, np.ndarray]:
    return {name: np.zeros(0, object if name in _TEXT_COLUMNS else
                           np.float64 if name.endswith("_s") or "bps" in name else np.int64)
            for name, _ in THROUGHPUT_COLUMNS}


def _one_proto(cap: Capture, proto: str, interval_ns: int) -> dict[str, np.ndarray]:
    layer, stream_col, sport_col, dport_col = _PROTOS[proto]
    mask = cap.layer(layer) & ~cap.column("l4_quoted")  # as Wireshark's conversation tables
    n_rows = int(np.count_nonzero(mask))
    if n_rows == 0:
        return _empty()
    sel = slice(None) if n_rows == len(mask) else np.flatnonzero(mask)  # all-TCP captures: no copy
    ids = cap.column(stream_col)[sel]
    src, dst = cap.column("ip_src")[sel], cap.column("ip_dst")[sel]
    sport, dport = cap.column(sport_col)[sel], cap.column(dport_col)[sel]
    t = cap.column("frame_time_ns")[sel]

    # stream ids follow first appearance, with gaps where a stream was only ever quoted in ICMP
    # errors; s numbers the streams present 0..n-1.  Side A is the source of a stream's first packet.
    first = _first_occurrences(ids)
    stream_ids = ids[first]
    n_streams = len(first)
    dense = np.zeros(int(stream_ids[-1]) + 1, np.int64)
    dense[stream_ids] = np.arange(n_streams)
    s = dense[ids] if n_streams != len(dense) else ids
    a_addr, a_port = src[first], sport[first]
    # key: stream x direction (0 = A to B, 1 = B to A); one bincount per quantity
    key = s * 2 + ((src != a_addr[s]) | (sport != a_port[s]))

    def per_direction(weights=None) -> np.ndarray:
        sums = np.bincount(key, weights=weights, minlength=2 * n_streams)
        return sums.reshape(n_streams, 2).round().astype(np.int64)

    packets = per_direction()
    frame_bytes = per_direction(cap.column("frame_len")[sel])
    payload_bytes = per_direction(cap.column("payload_len")[sel])
    t0 = cap.first_time_ns
    t_min = np.full(n_streams, np.iinfo(np.int64).max, np.int64)
    t_max = np.full(n_streams, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(t_min, s, t)
    np.maximum.at(t_max, s, t)
    duration = (t_max - t_min) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(duration > 0, 8.0 / duration, np.nan)[:, None]
    bins = (t - t0) // interval_ns
    to_bps = 8e9 / interval_ns
    peak, peak_payload = (p * to_bps for p in _peaks_per_direction(
        key, bins, (cap.column("frame_len")[sel], cap.column("payload_len")[sel]), n_streams))

    columns = {
        "stream": stream_ids.astype(np.int64),
        "proto": np.full(n_streams, proto, dtype=object),
        "address_a": cap.addresses[a_addr].astype(object),
        "port_a": a_port.astype(np.int64),
        "address_b": cap.addresses[dst[first]].astype(object),
        "port_b": dport[first].astype(np.int64),
        "packets": packets.sum(axis=1),
        "bytes": frame_bytes.sum(axis=1),
        "packets_a_to_b": packets[:, 0], "bytes_a_to_b": frame_bytes[:, 0],
        "packets_b_to_a": packets[:, 1], "bytes_b_to_a": frame_bytes[:, 1],
        "rel_start_s": (t_min - t0) / 1e9,
        "duration_s": duration,
    }
    bps, payload_bps = frame_bytes * rate, payload_bytes * rate
    columns.update({
        "bps_a_to_b": bps[:, 0], "bps_b_to_a": bps[:, 1],
        "payload_bytes_a_to_b": payload_bytes[:, 0], "payload_bytes_b_to_a": payload_bytes[:, 1],
        "payload_bps_a_to_b": payload_bps[:, 0], "payload_bps_b_to_a": payload_bps[:, 1],
        "peak_bps_a_to_b": peak[:, 0], "peak_bps_b_to_a": peak[:, 1],
        "peak_payload_bps_a_to_b": peak_payload[:, 0], "peak_payload_bps_b_to_a": peak_payload[:, 1],
    })
    return {name: columns[name] for name, _ in THROUGHPUT_COLUMNS}


_DENSE_LIMIT = 1 << 24  # (stream, direction, interval) cells counted in one dense array


def _peaks_per_direction(key, bins, weights_list, n_streams) -> list[np.ndarray]:
    """For each weights array, the largest per-interval sum of each (stream, direction):
    shape (n_streams, 2)."""
    b0 = int(bins.min())
    n_bins = int(bins.max()) - b0 + 1
    cell = key * n_bins + (bins - b0)
    if 2 * n_streams * n_bins <= _DENSE_LIMIT:
        return [np.bincount(cell, weights=w, minlength=2 * n_streams * n_bins)
                .reshape(2 * n_streams, n_bins).max(axis=1).reshape(n_streams, 2)
                for w in weights_list]
    import pandas as pd  # sparse: only the occupied cells
    out = []
    for w in weights_list:
        sums = pd.Series(w).groupby(cell, sort=False).sum()
        best = pd.Series(sums.to_numpy()).groupby(sums.index.to_numpy() // n_bins, sort=False).max()
        peak = np.zeros(n_streams * 2)
        peak[best.index.to_numpy()] = best.to_numpy()
        out.append(peak.reshape(n_streams, 2))
    return out
