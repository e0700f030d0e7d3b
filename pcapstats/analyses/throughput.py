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
import pandas as pd

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
               proto: str | None = None) -> pd.DataFrame:
    """One row per TCP/UDP stream (TCP first, each by stream index); columns THROUGHPUT_COLUMNS."""
    if not interval > 0:
        raise UsageError(f"interval must be positive, got {interval}")
    protos = _protos(proto)
    interval_ns = max(1, round(interval * 1e9))
    frames = [_one_proto(cap, p, interval_ns) for p in protos]
    table = pd.concat(frames, ignore_index=True) if frames else _empty()
    if stream is not None:
        table = table[table["stream"] == stream].reset_index(drop=True)
        if table.empty:
            raise UsageError(f"no {'/'.join(protos).upper()} stream {stream} in this capture",
                             path=cap.path, hint=_streams_hint(cap, protos))
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
        s = cap.column(_PROTOS[p][1])[cap.present(_PROTOS[p][1])]
        parts.append(f"{p.upper()} streams 0-{s.max()}" if len(s) else f"no {p.upper()} streams")
    return "it has " + ", ".join(parts)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype="object" if name in ("proto", "address_a", "address_b")
                                         else "float64" if name.endswith("_s") or "bps" in name
                                         else "int64") for name, _ in THROUGHPUT_COLUMNS})


def _one_proto(cap: Capture, proto: str, interval_ns: int) -> pd.DataFrame:
    layer, stream_col, sport_col, dport_col = _PROTOS[proto]
    idx = np.flatnonzero(cap.layers[layer])
    if len(idx) == 0:
        return _empty()
    s = cap.column(stream_col)[idx]
    src, dst = cap.column("ip_src")[idx], cap.column("ip_dst")[idx]
    sport = cap.column(sport_col)[idx].astype(np.int64)
    dport = cap.column(dport_col)[idx].astype(np.int64)
    frame_bytes = cap.column("frame_len")[idx].astype(np.int64)
    payload = cap.column("payload_len")[idx].astype(np.int64)
    t = cap.column("frame_time_ns")[idx]
    n_streams = int(s.max()) + 1

    # side A of each stream is the source of its first packet (stream ids follow first appearance)
    first = _first_occurrences(s)
    a_addr, a_port = src[first], sport[first]
    ab = (src == a_addr[s]) & (sport == a_port[s])

    def per_stream(weights, mask):
        return np.bincount(s[mask], weights=None if weights is None else weights[mask],
                           minlength=n_streams).astype(np.int64)

    ba = ~ab
    t0 = cap.first_time_ns
    t_min = np.full(n_streams, np.iinfo(np.int64).max, np.int64)
    t_max = np.full(n_streams, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(t_min, s, t)
    np.maximum.at(t_max, s, t)
    duration = (t_max - t_min) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(duration > 0, 8.0 / duration, np.nan)

    bins = (t - t0) // interval_ns
    table = pd.DataFrame({
        "stream": np.arange(n_streams, dtype=np.int64),
        "proto": proto,
        "address_a": cap.addresses[a_addr].astype(object),
        "port_a": a_port,
        "address_b": cap.addresses[dst[first]].astype(object),
        "port_b": dport[first],
        "packets": per_stream(None, slice(None)),
        "bytes": per_stream(frame_bytes, slice(None)),
        "packets_a_to_b": per_stream(None, ab),
        "bytes_a_to_b": per_stream(frame_bytes, ab),
        "packets_b_to_a": per_stream(None, ba),
        "bytes_b_to_a": per_stream(frame_bytes, ba),
        "rel_start_s": (t_min - t0) / 1e9,
        "duration_s": duration,
    })
    table["bps_a_to_b"] = table["bytes_a_to_b"] * rate
    table["bps_b_to_a"] = table["bytes_b_to_a"] * rate
    table["payload_bytes_a_to_b"] = per_stream(payload, ab)
    table["payload_bytes_b_to_a"] = per_stream(payload, ba)
    table["payload_bps_a_to_b"] = table["payload_bytes_a_to_b"] * rate
    table["payload_bps_b_to_a"] = table["payload_bytes_b_to_a"] * rate
    for name, weights in (("peak_bps", frame_bytes), ("peak_payload_bps", payload)):
        peak = _peak_per_direction(s, ab, bins, weights, n_streams) * (8e9 / interval_ns)
        table[f"{name}_a_to_b"], table[f"{name}_b_to_a"] = peak[:, 0], peak[:, 1]
    return table[[name for name, _ in THROUGHPUT_COLUMNS]]


def _peak_per_direction(s, ab, bins, weights, n_streams) -> np.ndarray:
    """Largest per-interval byte sum of each (stream, direction): shape (n_streams, 2)."""
    key_dir = s * 2 + (~ab).astype(np.int64)
    b0 = bins.min()
    key = key_dir * (int(bins.max() - b0) + 1) + (bins - b0)
    sums = pd.Series(weights).groupby(key, sort=False).sum()
    per_dir = pd.Series(sums.to_numpy()).groupby(sums.index.to_numpy() // (int(bins.max() - b0) + 1),
                                                 sort=False).max()
    out = np.zeros(n_streams * 2)
    out[per_dir.index.to_numpy()] = per_dir.to_numpy()
    return out.reshape(n_streams, 2)
