"""The simpleperf rules (see the package docstring): a TCP connection whose client sends
1000-byte messages of ``0`` and ``BYE``, answered by exactly ``ACK: BYE``, then closed."""

from __future__ import annotations

import numpy as np

from ...streams import id_ranges
from ...tools.wire import (SIMPLEPERF_ACK, SIMPLEPERF_BYE, SIMPLEPERF_MESSAGE,
                         SIMPLEPERF_MESSAGE_BYTES)
from .checks import CANNOT_TELL, FAIL, PASS, Context, StreamVerdict, text

SIMPLEPERF_FILL = SIMPLEPERF_MESSAGE[0]  # every message byte
DURATION_EARLY_S, DURATION_EARLY_FRACTION = 0.1, 0.05
DURATION_LATE_S, DURATION_LATE_FRACTION = 1.0, 0.25


def looks_like(head: bytes | None) -> bool:
    """A client's first bytes as simpleperf sends them: ``0`` messages, or ``BYE``."""
    return bool(head) and head[:1] in (b"0", b"B") and (
        head.strip(b"0") in (b"", b"B", b"BY", b"BYE") or head.startswith(b"0"))


def check(ctx: Context, s: int) -> StreamVerdict:
    """The simpleperf rules (the package docstring) on TCP stream s."""
    r = ctx.r
    c = ctx.client_dir(s)
    client, server = ctx.endpoints(s, c)
    v = StreamVerdict(s, "tcp", "simpleperf", client, server)
    fc, fs = r.flow(s, c), r.flow(s, 1 - c)
    empty = {"start_seen": False, "syn_frame": 0, "fin_frame": 0, "rst_frame": 0,
             "end_offset": -1, "seen_end": 0, "captured_bytes": 0, "cut_bytes": 0,
             "lost_bytes": 0, "data_segments": 0, "wire_bytes": 0}
    fc, fs = fc or empty, fs or empty
    if not fc["start_seen"]:
        v.add("start", CANNOT_TELL, "the client's SYN", "not captured: counts start "
              "where the capture did")
    else:
        v.add("start", PASS, "the client's SYN", f"frame {fc['syn_frame']}",
              (fc["syn_frame"],))
    end_known = fc["end_offset"] >= 0
    end = fc["end_offset"] if end_known else fc["seen_end"]
    data_end = max(end - len(SIMPLEPERF_BYE), 0)
    # bye
    bye_frame = r.first_frame_carrying(s, c, end - 1) if end else 0
    tail = ctx.tail(s, c, end, len(SIMPLEPERF_BYE))
    if end < len(SIMPLEPERF_BYE):
        v.add("bye", FAIL, "'BYE' at the end", f"{end} bytes in all", offset=0)
    elif tail is None:
        v.add("bye", CANNOT_TELL, "'BYE' at the end", f"the last bytes ({end - 3}-{end}) "
              "are not in the capture", (bye_frame,), end - 3)
    elif tail != SIMPLEPERF_BYE:
        v.add("bye", FAIL, "'BYE' at the end", f"{text(tail)} at offset {end - 3} "
              f"(frame {bye_frame}){'' if end_known else ', and no FIN'}",
              (bye_frame,), end - 3)
    else:
        v.add("bye", PASS, "'BYE' at the end", f"'BYE' at offset {end - 3}, frame "
              f"{bye_frame}", (bye_frame,), end - 3)
    # messages: every byte before the BYE is '0'
    ctx.content(v, s, c, 0, data_end, SIMPLEPERF_FILL, "messages",
                  "every message byte '0' (b'0' * 1000 a message)")
    # message bytes: whole messages, or -n
    _message_bytes(ctx, v, fc, data_end, end_known)
    # ack
    ack_frame = _ack(ctx, v, s, c, fs, bye_frame)
    # close
    _close(v, fc, fs, ack_frame)
    # duration
    _duration(ctx, v, s, c, bye_frame if end_known else 0, fc["start_seen"])
    _segment_evidence(ctx, v, s, c, data_end)
    return v


def _message_bytes(ctx, v, fc, n, end_known) -> None:
    exp, size = ctx.exp, SIMPLEPERF_MESSAGE_BYTES
    whole, rest = divmod(n, size)
    found = f"{n} bytes = {whole} x {size}" + (f" + {rest}" if rest else "")
    if not fc["start_seen"] or not end_known:
        v.add("message_bytes", CANNOT_TELL, "whole 1000-byte messages (or -n bytes)",
              found + f"; the connection's {'start' if not fc['start_seen'] else 'FIN'} "
              "was not captured")
    elif exp.num_bytes is not None:
        v.add("message_bytes", PASS if n == exp.num_bytes else FAIL,
              f"-n {exp.num_bytes} bytes", found)
    elif rest == 0:
        v.add("message_bytes", PASS, "whole 1000-byte messages", found)
    elif exp.time_s is not None:
        v.add("message_bytes", FAIL, f"whole 1000-byte messages (a -t {exp.time_s:g} run)",
              found + f": the last message is {rest} bytes", offset=whole * size)
    else:
        v.add("message_bytes", CANNOT_TELL, "whole 1000-byte messages (a -t run) or -n "
              "bytes", found + f": right only for a -n {n}B run; the sidecar would tell",
              offset=whole * size)


def _ack(ctx, v, s, c, fs, bye_frame) -> int:
    """The ack and order checks; returns the frame of the server's first byte (0: none)."""
    r = ctx.r
    end = fs["end_offset"] if fs["end_offset"] >= 0 else fs["seen_end"]
    ack_frame = r.first_frame_carrying(s, 1 - c, 0) if end else 0
    expected = "the server sends exactly 'ACK: BYE'"
    if end == 0:
        v.add("ack", FAIL, expected, "the server sent nothing" + (
            "" if fs["end_offset"] >= 0 else " (no FIN captured either)"))
        return
    got = ctx.head(s, 1 - c, end) if end <= 256 else None
    if got is None and end <= 256:
        v.add("ack", CANNOT_TELL, expected, f"{end} bytes, not all captured", (ack_frame,), 0)
    elif got != SIMPLEPERF_ACK:
        shown = text(got) if got is not None else f"{ctx.excerpt(s, 1 - c, 0)}..."
        v.add("ack", FAIL, expected, f"{shown} ({end} bytes, frame {ack_frame})",
              (ack_frame,), 0)
    else:
        v.add("ack", PASS, expected, f"'ACK: BYE', frame {ack_frame}", (ack_frame,), 0)
    if ack_frame and bye_frame:
        ok = ack_frame > bye_frame
        v.add("order", PASS if ok else FAIL, "ACK: BYE after BYE",
              f"BYE frame {bye_frame}, ACK: BYE frame {ack_frame}", (bye_frame, ack_frame))
    ctx._ack_frame = ack_frame


def _close(v, fc, fs, ack) -> None:
    rst = [f for f in (fc["rst_frame"], fs["rst_frame"]) if f]
    fins = (fc["fin_frame"], fs["fin_frame"])
    expected = "FIN from both sides after ACK: BYE, no RST"
    if rst and (not all(fins) or min(rst) < max(fins)):
        v.add("close", FAIL, expected, f"RST at frame {min(rst)}"
              f"{'' if all(fins) else ' before both FINs'}", tuple(sorted(rst)))
    elif not all(fins):
        missing = " and ".join(w for w, f in zip(("client", "server"), fins) if not f)
        v.add("close", CANNOT_TELL, expected, f"no FIN from the {missing} in the capture")
    elif ack and min(fins) < ack:
        v.add("close", FAIL, expected, f"FIN at frame {min(fins)} before the ACK: BYE "
              f"(frame {ack})", (min(fins), ack))
    else:
        v.add("close", PASS, expected, f"client FIN frame {fins[0]}, server FIN frame "
              f"{fins[1]}" + (f"; RST at frame {min(rst)} after both" if rst else ""),
              fins)


def _duration(ctx, v, s, c, bye_frame, start_seen) -> None:
    """bye_frame: the first frame carrying the stream's last byte (0: end unknown)."""
    segs = ctx.r.segments_of(s, c)
    if not len(segs):
        return
    first = int(segs.frame.min())
    t = ctx.exp.time_s
    span = ctx.t(bye_frame) - ctx.t(first) if bye_frame else None
    if span is not None:
        v.evidence.append(f"first data frame {first}, BYE frame {bye_frame}: {span:.3f} s")
    if t is None or ctx.exp.num_bytes is not None:
        return
    lo = t - max(DURATION_EARLY_S, DURATION_EARLY_FRACTION * t)
    hi = t + max(DURATION_LATE_S, DURATION_LATE_FRACTION * t)
    expected = f"-t {t:g} s: first data to BYE in {lo:.2f}-{hi:.2f} s"
    if span is None or not start_seen:
        v.add("duration", CANNOT_TELL, expected, "the connection's "
              f"{'start (SYN)' if not start_seen else 'end (FIN)'} was not captured")
    else:
        v.add("duration", PASS if lo <= span <= hi else FAIL, expected,
              f"{span:.3f} s (frames {first}-{bye_frame})", (first, bye_frame))


def _segment_evidence(ctx, v, s, c, data_end) -> None:
    segs = ctx.r.segments_of(s, c)
    if not len(segs):
        return
    sizes, counts = np.unique(segs.length, return_counts=True)
    top = np.argsort(-counts, kind="stable")[:5]
    mss = ctx.mss(s, c)
    hist = ", ".join(f"{int(sizes[i])} B x {int(counts[i])}" for i in top)
    v.evidence.append(f"client segment sizes: {hist} ({len(segs)} segments"
                      + (f", MSS {mss}" if mss else "") + ")")
    if mss:
        full = int((segs.length == mss).sum())
        v.evidence.append(f"{full} MSS-sized segments; {int((segs.length > 1000).sum())} "
                          "are longer than a 1000-byte message (writes coalesced)")
    f = ctx.r.flow(s, c)
    resent = f["wire_bytes"] - f["captured_bytes"] - f["cut_bytes"]
    if resent:
        v.evidence.append(f"{resent} bytes sent again (retransmissions and overlaps), "
                          "each byte counted once")
    # write boundaries: a segment shorter than the MSS that ends inside a message
    if mss:
        ends = segs.start + segs.length
        odd = (segs.length < mss) & (ends % SIMPLEPERF_MESSAGE_BYTES != 0) & (ends < data_end)
        if odd.any():
            k = int(np.flatnonzero(odd)[0])
            v.evidence.append(f"{int(odd.sum())} short segment(s) end inside a 1000-byte "
                              f"message, first frame {int(segs.frame[k])} at offset "
                              f"{int(ends[k])} (a write boundary there, or the window cut it)")
    order = np.argsort(segs.frame)
    v.evidence.append(f"first data frame {int(segs.frame[order[0]])}, last data frame "
                      f"{int(segs.frame[order[-1]])}")


def check_parallel(ctx: Context, verdicts: list[StreamVerdict]) -> None:
    """As many connections between each pair as the sidecar's ``parallel`` (-P)."""
    want = ctx.exp.parallel
    if not want or not verdicts:
        return
    pairs: dict = {}
    for v in verdicts:
        pairs.setdefault((v.client.rsplit(":", 1)[0], v.server), []).append(v)
    for (client, server), group in pairs.items():
        ok = len(group) == want
        for v in group:
            v.add("parallel", PASS if ok else FAIL, f"-P {want} connections {client} -> "
                  f"{server}", f"{len(group)}: streams {id_ranges([g.stream for g in group])}")
