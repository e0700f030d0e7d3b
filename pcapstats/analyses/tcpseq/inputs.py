"""What the TCP analyses read: the columns and rows of a per-stream TCP analysis
(``STREAM_NEEDS``), and the analyser's input arrays made from a table (``analysis_inputs``).
"""

from __future__ import annotations

import numpy as np

from ...capture import Capture, Needs
from ...schema import STREAM, TCP, UDP
from ...streams import own_transport
from .contract import INPUTS

# the columns and layers the per-stream TCP analyses read (the analyser's inputs, the stream
# summary and choice, tcp_flow's sides and segment sizes); their rows are the TCP packets
STREAM_READS = (
    "tcp_stream", "frame_number", "frame_time_ns", "frame_len", "direction", "ip_src", "ip_dst",
    "ip_ttl", "ip_fragment", "l4_quoted", "payload_len", "tcp_srcport", "tcp_dstport",
    "tcp_flags", "tcp_hdr_len", "tcp_len", "tcp_seq_raw", "tcp_ack_raw", "tcp_window_size_value",
    "tcp_option_mss", "tcp_option_tsval", "tcp_option_tsecr", "tcp_option_wscale_shift",
    "tcp_sack_count", *(f"tcp_sack_{side}{k}_raw" for k in (1, 2, 3) for side in ("le", "re")),
    "udp_stream", "udp_srcport", "udp_dstport", TCP, UDP, STREAM)


def tcp_rows(cap: Capture) -> np.ndarray:
    """The rows the per-stream TCP analyses read: every packet with a TCP header."""
    return cap.layer(TCP)


STREAM_NEEDS = Needs(STREAM_READS, tcp_rows)


def table_index(cap: Capture, rows: np.ndarray, at: np.ndarray | None = None):
    """Where ``rows[at]`` (all of ``rows`` when ``at`` is None) lie in the table, to index its
    arrays with.  ``rows`` ascend; when they are all of the table's rows (a table read for one
    analysis, a batch of one stream) that is ``at`` itself, or every row as a slice: the
    arrays are read in place, not gathered into copies (on a 900k-packet stream, 8 bytes a
    packet a column)."""
    if len(rows) == len(cap):
        return slice(None) if at is None else at
    return rows if at is None else rows[at]


def analysed_rows(cap: Capture, stream: int | None = None) -> np.ndarray:
    """The rows of the TCP packets the analyser takes (with their own TCP header of 20 bytes
    or more), of ``stream`` alone when given."""
    analysed = own_transport(cap, "tcp") & (cap.column("tcp_hdr_len") >= 20)
    if stream is not None:
        analysed &= cap.column("tcp_stream") == stream
    return np.flatnonzero(analysed)


def analysis_inputs(cap: Capture, stream: int | None = None, *, timestamps: bool = False
                    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(rows of the TCP packets analysed, the analyser's input arrays).  ``dir`` is the packet
    table's direction (0: sent by side A).  With ``stream``, that stream's rows alone: the
    analyser keeps no state across streams, so one stream's numbers are the same analysed
    alone, in the time and memory of its own packets.  ``timestamps``: with the TCP
    timestamps option's inputs, for ts_rtt."""
    rows = analysed_rows(cap, stream)
    index = table_index(cap, rows)   # a table of TCP rows alone (read for Needs): no copies
    col = lambda name: cap.column(name)[index]  # noqa: E731
    stream = np.asarray(col("tcp_stream"), np.int64)     # a batch's own column: not copied
    wscale = np.where(cap.present("tcp_option_wscale_shift")[index],
                      col("tcp_option_wscale_shift").astype(np.int16), np.int16(-1))
    # SACK edges: zeros (pages never touched) but on the few packets that carry blocks
    sack = {side: np.zeros((len(rows), 3), np.uint32) for side in ("le", "re")}
    with_sack = rows[cap.column("tcp_sack_count")[rows] > 0]
    at = np.searchsorted(rows, with_sack)
    for side in ("le", "re"):
        for k in (1, 2, 3):
            name = f"tcp_sack_{side}{k}_raw"
            sack[side][at, k - 1] = np.where(cap.present(name)[with_sack],
                                             cap.column(name)[with_sack], 0)
    inputs = {
        "stream": stream, "dir": col("direction"),
        "analysed": (~col("ip_fragment").astype(bool)).astype(np.uint8),
        "flags": col("tcp_flags"), "seq": col("tcp_seq_raw"), "ack": col("tcp_ack_raw"),
        "win": col("tcp_window_size_value"), "seglen": col("tcp_len"),
        "t": col("frame_time_ns"), "frame": col("frame_number"), "wscale": wscale,
        "sack_count": col("tcp_sack_count"), "sack_le": sack["le"], "sack_re": sack["re"],
    }
    if timestamps:
        inputs.update(tsval=col("tcp_option_tsval"), tsecr=col("tcp_option_tsecr"),
                      has_ts=cap.present("tcp_option_tsval")[index])
    return rows, {name: np.ascontiguousarray(inputs[name], dtype) for name, dtype in INPUTS
                  if name in inputs}

