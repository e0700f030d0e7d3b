"""The data of Wireshark's Stevens and tcptrace graphs for one TCP stream's data direction.

- ``segments``: one row per data segment: frame, time, relative seq and next seq (tshark's
  tcp.seq / tcp.nxtseq), and ``resent`` (tshark's retransmission or out-of-order flag);
- ``acks``: one row per packet of the other direction with the ACK flag: the relative ACK
  number and the right edge of its advertised window (ACK + calculated window);
- ``sacks``: one row per SACK block in those packets: its edges relative to the data
  direction's base sequence number (the first three blocks, as Wireshark keeps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..capture import Capture
from .tcp_flow import choose_stream, data_direction, stream_rows

SEGMENT_COLUMNS = (
    ("frame_number", "packet number"), ("time_s", "seconds since the capture's first packet"),
    ("tcp_seq", "relative sequence number"), ("tcp_nxtseq", "relative next sequence number"),
    ("resent", "tshark flags it a retransmission or out-of-order"),
)


@dataclass
class SeqGraph:
    stream: int
    data_direction: int
    segments: "object"   # DataFrame, SEGMENT_COLUMNS
    acks: "object"       # DataFrame: frame_number, time_s, tcp_ack, window_edge
    sacks: "object"      # DataFrame: frame_number, time_s, left, right


def seqgraph(cap: Capture, stream: int | None = None) -> SeqGraph:
    import pandas as pd
    stream = choose_stream(cap, stream).stream
    df = stream_rows(cap, stream)
    data_dir = data_direction(df)
    t0 = int(cap.column("frame_time_ns")[0])
    d = df["direction"].to_numpy()
    seconds = (df["frame_time_ns"].to_numpy() - t0) / 1e9
    frames = df["frame_number"].to_numpy()
    data = np.flatnonzero((d == data_dir) & (df["tcp_len"].to_numpy() > 0))
    resent = (df["retransmission"].to_numpy(bool) | df["out_of_order"].to_numpy(bool))
    segments = pd.DataFrame({
        "frame_number": frames[data], "time_s": seconds[data],
        "tcp_seq": df["tcp_seq"].to_numpy(np.int64)[data],
        "tcp_nxtseq": df["tcp_nxtseq"].to_numpy(np.float64, na_value=np.nan)[data],
        "resent": resent[data]})
    acks = np.flatnonzero((d != data_dir) & ((df["tcp_flags"].to_numpy() & 0x10) != 0))
    ack = df["tcp_ack"].to_numpy(np.int64)[acks]
    ack_table = pd.DataFrame({
        "frame_number": frames[acks], "time_s": seconds[acks], "tcp_ack": ack,
        "window_edge": ack + df["tcp_window_size"].to_numpy(np.int64)[acks]})
    return SeqGraph(stream, data_dir, segments, ack_table, _sacks(cap, df, data_dir, acks,
                                                                   seconds))


def _sacks(cap, df, data_dir, acks, seconds):
    """SACK blocks of the ACKs, relative to the data direction's base sequence number."""
    import pandas as pd
    frames = df["frame_number"].to_numpy()
    d = df["direction"].to_numpy()
    data_rows = np.flatnonzero(d == data_dir)
    out = {"frame_number": [], "time_s": [], "left": [], "right": []}
    if len(data_rows) and len(acks):
        all_frames = cap.column("frame_number")
        first = np.searchsorted(all_frames, frames[data_rows[0]])
        base = (int(cap.column("tcp_seq_raw")[first]) - int(df["tcp_seq"].iloc[data_rows[0]])) \
            % (1 << 32)
        rows = np.searchsorted(all_frames, frames[acks])
        for k in (1, 2, 3):
            has = cap.present(f"tcp_sack_le{k}_raw")[rows]
            le = (cap.column(f"tcp_sack_le{k}_raw")[rows].astype(np.int64) - base) % (1 << 32)
            re = (cap.column(f"tcp_sack_re{k}_raw")[rows].astype(np.int64) - base) % (1 << 32)
            out["frame_number"].append(frames[acks][has])
            out["time_s"].append(seconds[acks][has])
            out["left"].append(le[has])
            out["right"].append(re[has])
        out = {k: np.concatenate(v) for k, v in out.items()}
        order = np.argsort(out["frame_number"], kind="stable")
        out = {k: v[order] for k, v in out.items()}
    return pd.DataFrame(out)
