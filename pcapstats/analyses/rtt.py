"""Round-trip times of one TCP stream: three series and their summary.

The samples come from :mod:`pcapstats.analyses.tcp_analysis` (definitions there):

- ``ack_rtt_ms``: Wireshark's ``tcp.analysis.ack_rtt`` (its RTT graph): data segment -> the ACK
  that first covers its end, timed from the segment's *first* transmission (no Karn rule, so
  after a retransmission it includes the retransmission timeout);
- ``ack_rtt_karn_ms``: the same with Karn's rule (no sample when the ACK covers a re-sent
  segment);
- ``ts_rtt_ms``: TSval -> first echo of it in TSecr (RFC 7323), which includes the receiver's
  delayed-ACK wait but never a retransmission timeout.

Each sample belongs to the packet that closes the round trip (the ACK, or for ts_rtt any
packet echoing a TSval); ``direction`` is that packet's direction.  On a capture taken at the
data sender, the ACKs coming back (direction != the data direction) carry the path's RTT;
on the receiver's side they show only the receiver-to-capture leg (almost zero) and the data
packets' ts_rtt_ms carries the round trip instead.
"""

from __future__ import annotations

import numpy as np

from ..capture import Capture
from .tcp_flow import choose_stream, data_direction, stream_rows

RTT_SERIES = ("ack_rtt_ms", "ack_rtt_karn_ms", "ts_rtt_ms")
RTT_COLUMNS = (
    ("frame_number", "the packet that closes the round trip"),
    ("time_s", "its time, seconds since the capture's first packet"),
    ("direction", "its direction (0: the source of the stream's first packet)"),
    ("is_data_ack", "True when it travels against the data direction (an ACK of the data)"),
    ("ack_rtt_ms", "Wireshark's tcp.analysis.ack_rtt, ms"),
    ("ack_rtt_karn_ms", "ack_rtt with Karn's rule, ms"),
    ("ts_rtt_ms", "timestamp-echo RTT, ms"),
)
RTT_SUMMARY_COLUMNS = (
    ("series", "ack_rtt_ms, ack_rtt_karn_ms or ts_rtt_ms"),
    ("direction", "direction of the packets closing the round trip"),
    ("samples", "number of samples"),
    ("min_ms", "smallest"), ("median_ms", "median"), ("p90_ms", "90th percentile (linear)"),
    ("max_ms", "largest"),
)


def rtt(cap: Capture, stream: int | None = None):
    """One stream's RTT samples as a DataFrame (columns: RTT_COLUMNS), one row per packet with
    at least one sample; ``df.attrs``: stream, data_direction."""
    import pandas as pd
    stream = choose_stream(cap, stream).stream
    df = stream_rows(cap, stream)
    data_dir = data_direction(df)
    ns = {name: df[name.replace("_ms", "_ns")].to_numpy(np.float64, na_value=np.nan)
          for name in RTT_SERIES}
    keep = np.zeros(len(df), bool)
    for v in ns.values():
        keep |= ~np.isnan(v)
    t0 = cap.column("frame_time_ns")[0]
    d = df["direction"].to_numpy()[keep]
    out = pd.DataFrame({
        "frame_number": df["frame_number"].to_numpy()[keep],
        "time_s": (df["frame_time_ns"].to_numpy()[keep] - t0) / 1e9,
        "direction": d, "is_data_ack": d != data_dir,
        **{name: v[keep] / 1e6 for name, v in ns.items()},
    })
    out.attrs.update(stream=stream, data_direction=data_dir)
    return out


def rtt_summary(series) -> dict[str, np.ndarray]:
    """Per series and direction with samples: count, min, median, p90, max (RTT_SUMMARY_COLUMNS)."""
    rows = []
    for name in RTT_SERIES:
        for direction in (0, 1):
            v = series[name].to_numpy(np.float64)[series["direction"].to_numpy() == direction]
            v = v[~np.isnan(v)]
            if len(v):
                rows.append((name, direction, len(v), v.min(), np.median(v),
                             np.percentile(v, 90), v.max()))
    cols = [c for c, _ in RTT_SUMMARY_COLUMNS]
    return {c: np.array([r[k] for r in rows], dtype=object if c == "series" else None)
            for k, c in enumerate(cols)} if rows else {c: np.array([]) for c in cols}
