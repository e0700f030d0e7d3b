"""One TCP stream's rows, which direction carries the data, and where the capture was taken.

Shared by the per-stream TCP analyses (cwnd, rtt, seqgraph): they all need one stream's
sequence analysis, its data direction, and (cwnd) whether the capture saw the data *sender's*
view or the *receiver's*.  Which stream: pcapstats.streams.choose_stream.

- :func:`stream_rows`: tcp_analysis of one stream plus the header fields the analyses need;
- :func:`data_direction`: the direction (0 a_to_b / 1 b_to_a) that sent more payload bytes.
- :func:`capture_side`: "sender" or "receiver" (of the data), from the handshake's timing.
  A capture point near a host sees that host's packets leave at once and the peer's answers a
  full round trip later: near the client, SYN -> SYN/ACK takes about the whole initial RTT
  and SYN/ACK -> ACK almost nothing; near the server the other way round.  Without a
  handshake: Wireshark's ack_rtt of the data (data -> its ACK) against the timestamp RTT of
  the data packets (receiver's ACK -> the data echoing it): near the sender the first is the
  round trip and the second tiny.  "unknown" when neither is available or the split is even
  (a capture in the middle of the path).
"""

from __future__ import annotations

import numpy as np

from ..capture import Capture
from .tcp_analysis import packet_analysis

NEAR_FRACTION = 0.75   # the near side's share of the round trip needed to call the side


def data_direction(df) -> int:
    """0 or 1: the direction of the stream's rows (tcp_analysis) that sent more payload."""
    lens = df["tcp_len"].to_numpy(np.int64)
    d = df["direction"].to_numpy()
    return 0 if lens[d == 0].sum() >= lens[d == 1].sum() else 1


def stream_rows(cap: Capture, stream: int):
    """tcp_analysis of one stream (packet_analysis' raw columns: direction 0/1, optional
    numbers NaN where absent) plus the header fields the stream analyses need: ``tcp_flags``,
    ``tsval``/``tsecr`` (float, NaN without the timestamp option)."""
    import pandas as pd  # lazy: pandas is loaded only by the analyses that use it (start-up)
    df = pd.DataFrame(packet_analysis(cap, stream))
    rows = np.searchsorted(cap.column("frame_number"), df["frame_number"].to_numpy())
    df["tcp_flags"] = cap.column("tcp_flags")[rows]
    has_ts = cap.present("tcp_option_tsval")[rows]
    for name in ("tsval", "tsecr"):
        df[name] = np.where(has_ts, cap.column(f"tcp_option_{name}")[rows], np.nan)
    return df


def capture_side(df, data_dir: int) -> tuple[str, str]:
    """("sender" | "receiver" | "unknown", the evidence in words) for one stream's rows
    (from :func:`stream_rows`)."""
    side = _side_from_handshake(df, data_dir, df["tcp_flags"].to_numpy())
    if side is not None:
        return side
    return _side_from_rtts(df, data_dir)


def _side_from_handshake(df, data_dir, flags):
    t = df["frame_time_ns"].to_numpy()
    d = df["direction"].to_numpy()
    syn = (flags & 0x12) == 0x02
    synack = (flags & 0x12) == 0x12
    ack = (flags & 0x17) == 0x10
    if not (syn.any() and synack.any()):
        return None
    # the SYN that was answered: the last one before the first SYN/ACK from the other side
    first_synack = np.flatnonzero(synack)[0]
    before = np.flatnonzero(syn[:first_synack])
    if len(before) == 0:
        return None
    i_syn = before[-1]
    client = d[i_syn]
    sa = np.flatnonzero(synack & (np.arange(len(t)) > i_syn) & (d != client))
    if len(sa) == 0:
        return None
    a = np.flatnonzero(ack & (np.arange(len(t)) > sa[0]) & (d == client))
    if len(a) == 0:
        return None
    first, second = t[sa[0]] - t[i_syn], t[a[0]] - t[sa[0]]
    total = first + second
    if total <= 0:
        return None
    near_client = first / total
    text = (f"handshake: SYN -> SYN/ACK {first / 1e6:.3f} ms, SYN/ACK -> ACK "
            f"{second / 1e6:.3f} ms")
    if near_client >= NEAR_FRACTION:
        near = client
    elif near_client <= 1 - NEAR_FRACTION:
        near = 1 - client
    else:
        return "unknown", text + " (a capture in the middle of the path)"
    who = "the client" if near == client else "the server"
    side = "sender" if near == data_dir else "receiver"
    return side, f"{text}: captured near {who}, the data {side}"


def _side_from_rtts(df, data_dir):
    d = df["direction"].to_numpy()
    ack_rtt = df["ack_rtt_ns"].to_numpy(np.float64, na_value=np.nan)[d != data_dir]
    ts_rtt = df["ts_rtt_ns"].to_numpy(np.float64, na_value=np.nan)[d == data_dir]
    ack_rtt, ts_rtt = ack_rtt[~np.isnan(ack_rtt)], ts_rtt[~np.isnan(ts_rtt)]
    if len(ack_rtt) == 0 or len(ts_rtt) == 0:
        return "unknown", "no handshake captured, and no timestamps to tell the side"
    a, b = float(np.median(ack_rtt)), float(np.median(ts_rtt))
    text = (f"no handshake; median data -> ACK {a / 1e6:.3f} ms, ACK -> data echoing it "
            f"{b / 1e6:.3f} ms")
    if a >= NEAR_FRACTION * (a + b):
        return "sender", text + ": captured near the data sender"
    if b >= NEAR_FRACTION * (a + b):
        return "receiver", text + ": captured near the data receiver"
    return "unknown", text + " (a capture in the middle of the path)"
