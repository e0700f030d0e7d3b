"""The simpleperf rules (see the package docstring): a TCP connection whose client sends
messages and ``BYE``, answered by exactly ``ACK: BYE``, then closed -- recognised by that shape
(:func:`shape`), whatever the fill, the port or the implementation's quirks."""

from __future__ import annotations

import numpy as np

from ...streams import id_ranges
from ...tools.wire import SIMPLEPERF_ACK, SIMPLEPERF_BYE, SIMPLEPERF_MESSAGE_BYTES
from .checks import CANNOT_TELL, FAIL, PASS, Context, StreamVerdict, text

DURATION_EARLY_S, DURATION_EARLY_FRACTION = 0.1, 0.05
DURATION_LATE_S, DURATION_LATE_FRACTION = 1.0, 0.25
# The most a client's kernel can hold unsent when it stops writing (Linux's tcp_wmem maximum,
# 4 MiB): on a lossy or slow path its BYE leaves the host only after that backlog has drained.
SEND_BUFFER_MAX_BYTES = 4 << 20
ANSWER_MAX_BYTES = 256      # a server sending more than this is not answering BYE (shape)
BYE_SEARCH_BYTES = 1 << 16  # how far before the server's answer a BYE followed by data is sought
BYE, ACK = SIMPLEPERF_BYE, SIMPLEPERF_ACK


def looks_like(head: bytes | None) -> bool:
    """A client's first bytes as pcapstats' own simpleperf sends them: ``0`` messages, or
    ``BYE``."""
    return bool(head) and head[:1] in (b"0", b"B") and (
        head.strip(b"0") in (b"", b"B", b"BY", b"BYE") or head.startswith(b"0"))


def shape(ctx: Context, s: int) -> bool:
    """TCP stream s has simpleperf's shape: the server's bytes begin with ``ACK: BYE``, or the
    client's bytes end with ``BYE`` (at its FIN, else where the capture's data ends) and the
    server sent at most ANSWER_MAX_BYTES.  Fill, port and message size play no part."""
    c = ctx.client_dir(s)
    fc, fs = ctx.r.flow(s, c), ctx.r.flow(s, 1 - c)
    if fs and fs["seen_end"] >= len(ACK) and ctx.head(s, 1 - c, len(ACK)) == ACK:
        return True
    if not fc or (fs and fs["seen_end"] > ANSWER_MAX_BYTES):
        return False
    end = fc["end_offset"] if fc["end_offset"] >= 0 else fc["seen_end"]
    return end >= len(BYE) and ctx.tail(s, c, end, len(BYE)) == BYE


_EMPTY = {"start_seen": False, "syn_frame": 0, "fin_frame": 0, "rst_frame": 0,
          "end_offset": -1, "seen_end": 0, "captured_bytes": 0, "cut_bytes": 0,
          "lost_bytes": 0, "data_segments": 0, "wire_bytes": 0}


def check(ctx: Context, s: int) -> StreamVerdict:
    """The simpleperf rules (the package docstring) on TCP stream s."""
    r = ctx.r
    c = ctx.client_dir(s)
    client, server = ctx.endpoints(s, c)
    v = StreamVerdict(s, "tcp", "simpleperf", client, server)
    fc, fs = r.flow(s, c) or _EMPTY, r.flow(s, 1 - c) or _EMPTY
    size = ctx.exp.message_bytes or SIMPLEPERF_MESSAGE_BYTES
    if not fc["start_seen"]:
        v.add("start", CANNOT_TELL, "the client's SYN", "not captured: counts start "
              "where the capture did")
    else:
        v.add("start", PASS, "the client's SYN", f"frame {fc['syn_frame']}",
              (fc["syn_frame"],))
    end_known = fc["end_offset"] >= 0
    end = fc["end_offset"] if end_known else fc["seen_end"]
    answered = fs["end_offset"] if fs["end_offset"] >= 0 else fs["seen_end"]
    answer_frame = r.first_frame_carrying(s, 1 - c, 0) if answered else 0
    data_end, bye_frame, bye = _bye(ctx, v, s, c, end, end_known, answer_frame)
    ends = end_known or bye == "found"   # the FIN, or the BYE (a connection ended by RST)
    _messages(ctx, v, s, c, data_end, size)
    _message_bytes(ctx, v, s, c, fc, data_end, ends, size)
    ack_frame = _ack(ctx, v, s, c, fs, bye_frame if bye != "none" else 0)
    _close(v, fc, fs, ack_frame)
    _duration(ctx, v, s, c, bye_frame if ends else 0, fc["start_seen"])
    first = _segment_evidence(ctx, v, s, c, data_end, size)
    v.facts.update(message_bytes=data_end if fc["start_seen"] and ends else None,
                   first_frame=first, bye_frame=bye_frame)
    return v


def _bye(ctx, v, s, c, end, end_known, answer_frame) -> tuple[int, int, str]:
    """The bye check: the client's bytes end with BYE.  Returns (where the message bytes end,
    the frame of the BYE's last byte -- or of the last byte when there is no BYE --, and
    "found", "unknown" (not captured) or "none")."""
    r = ctx.r
    expected = "'BYE' at the end"
    if end < len(BYE):
        frames = (r.first_frame_carrying(s, c, end - 1),) if end else ()
        v.add("bye", FAIL, expected, f"{end} bytes in all", frames, offset=0)
        return end, frames[0] if frames else 0, "none"
    last = r.first_frame_carrying(s, c, end - 1)
    tail = ctx.tail(s, c, end, len(BYE))
    if tail is None:
        v.add("bye", CANNOT_TELL, expected, f"the last bytes ({end - 3}-{end}) are not in the "
              "capture", (last,), end - 3)
        return end - 3, last, "unknown"
    if tail == BYE:
        v.add("bye", PASS, expected, f"'BYE' at offset {end - 3}, frame {last}", (last,),
              end - 3)
        return end - 3, last, "found"
    at = _answered_bye(ctx, s, c, end, answer_frame)
    if at is None:
        v.add("bye", FAIL, expected, f"{text(tail)} at offset {end - 3} (frame {last})"
              f"{'' if end_known else ', and no FIN'}", (last,), end - 3)
        return end, last, "none"
    bye_frame = r.first_frame_carrying(s, c, at + 2)
    after = at + len(BYE)
    after_frame = r.first_frame_carrying(s, c, after)
    v.add("bye", FAIL, expected, f"{end - after} byte(s) after the 'BYE' at offset {at} "
          f"(frame {bye_frame}): {ctx.excerpt(s, c, after)} at offset {after} (frame "
          f"{after_frame}){'' if end_known else ', and no FIN'}", (after_frame,), after)
    return at, bye_frame, "found"


def _answered_bye(ctx, s, c, end, answer_frame) -> int | None:
    """Where the BYE the server answered starts, when the client's bytes go on after it: the
    last ``BYE`` in the client's bytes that passed the capture point before the server's first
    answer (within BYE_SEARCH_BYTES of them); None when there is no answer or no such BYE."""
    if not answer_frame:
        return None
    segs = ctx.r.segments_of(s, c)
    before = segs.frame < answer_frame
    if not before.any():
        return None
    bound = min(int((segs.start[before] + segs.length[before]).max()), end)
    lo = max(0, bound - BYE_SEARCH_BYTES)
    if bound - lo < len(BYE) or ctx.r.holes_in(s, c, lo, bound)["start"].size:
        return None
    k = ctx.r.read(s, c, lo, bound - lo).rfind(BYE)
    return lo + k if k >= 0 else None


def _messages(ctx, v, s, c, data_end, size) -> None:
    """Every message byte is the fill of the first message (so a ``BYE`` among them is a
    second BYE); a first message that is not one repeated byte (random fill) leaves the
    content free: a ``BYE`` inside it is data."""
    if data_end == 0:
        v.add("messages", PASS, "message bytes before the BYE", "none")
        return
    first = b"".join(bytes(ch) for _, ch in ctx.r.chunks(s, c, 0, min(size, data_end)))
    if not first:
        v.add("messages", CANNOT_TELL, "every message byte the fill of the first message",
              "the first message is not in the capture", offset=0)
        return
    fill = first[0]
    if first.count(fill) == len(first):
        ctx.content(v, s, c, 0, data_end, fill, "messages",
                    f"every message byte {chr(fill)!r}, the first message's fill (a 'BYE' "
                    "among them is a second BYE)")
        return
    expected = "messages, then one BYE"
    before = ctx.tail(s, c, data_end, len(BYE))
    if before == BYE:
        at = data_end - len(BYE)
        frame = ctx.r.first_frame_carrying(s, c, at)
        v.add("messages", FAIL, expected, f"'BYEBYE' at offset {at} (frame {frame}): BYE "
              "twice", (frame,), at)
        return
    v.add("messages", PASS, expected, f"{data_end} bytes; the first message is not one "
          f"repeated byte ({ctx.excerpt(s, c, 0, 12)}...): a free fill, so a 'BYE' inside "
          "the messages is data")


def _written_size(ctx, s, c, n, size) -> tuple[int, int] | None:
    """The message size the client's segments show, when it is not ``size``: a length (the
    first segment's -- the first write often leaves alone -- or a common short one) that
    most of the short segments' ends are multiples of (a segment under the MSS ends where a
    write ended, unless a window cut it), far more of them than of ``size``, and that
    divides the message bytes ``n``; with the frame of the first such segment.  None when
    the segments show ``size`` or nothing clear."""
    segs, mss = ctx.r.segments_of(s, c), ctx.mss(s, c)
    if not mss or not len(segs):
        return None
    ends = segs.start + segs.length
    full = segs.length[segs.length >= mss - OPTIONS_MAX]       # MSS less the options carried
    if len(full):
        mss = int(np.bincount(full).argmax())
    short = (segs.length < mss) & (ends <= n) & (ends > 0)
    if not short.any():
        return None
    short_ends = ends[short]
    lengths, counts = np.unique(segs.length[short], return_counts=True)
    first = int(segs.length[np.argmin(segs.start)])
    candidates = dict.fromkeys([first, *lengths[np.argsort(-counts, kind="stable")[:5]].tolist()])
    expected = (short_ends % size == 0).mean()
    for m in candidates:
        if m == size or m <= 0 or n % m:
            continue
        on = short_ends % m == 0
        evidence = np.count_nonzero(on) >= WRITE_EVIDENCE or (m == first and first < mss)
        if on.mean() >= WRITE_SHARE and on.mean() > 3 * expected and evidence:
            at = np.flatnonzero(on)
            frames = segs.frame[short][at]
            return int(m), int(frames[np.argmin(segs.start[short][at])])
    return None


WRITE_SHARE = 0.5       # short segments ending on a candidate size's multiples, at least
OPTIONS_MAX = 40        # TCP option bytes a full segment may carry below the MSS option
WRITE_EVIDENCE = 2      # short segments (write ends) needed to name a message size, unless
                        # one is the first segment (the first write always leaves alone)


def _message_bytes(ctx, v, s, c, fc, n, end_known, size) -> None:
    exp = ctx.exp
    whole, rest = divmod(n, size)
    found = f"{n} bytes = {whole} x {size}" + (f" + {rest}" if rest else "")
    r = ctx.r
    written = _written_size(ctx, s, c, n, size) if rest and exp.num_bytes is None else None
    if not fc["start_seen"] or not end_known:
        missing = "start" if not fc["start_seen"] else "end (FIN or BYE)"
        v.add("message_bytes", CANNOT_TELL, f"whole {size}-byte messages (or -n bytes)",
              found + f"; the connection's {missing} was not captured")
    elif exp.num_bytes is not None:
        ok = n == exp.num_bytes
        frame = r.first_frame_carrying(s, c, n - 1) if n else 0
        v.add("message_bytes", PASS if ok else FAIL, f"-n {exp.num_bytes} bytes",
              found + ("" if ok or not frame else f", the last in frame {frame}"),
              () if ok or not frame else (frame,), None if ok else n)
    elif rest == 0:
        v.add("message_bytes", PASS, f"whole {size}-byte messages", found)
    elif written is not None:
        m, frame = written
        run = f" (a -t {exp.time_s:g} run)" if exp.time_s is not None else ""
        v.add("message_bytes", FAIL, f"whole {size}-byte messages{run}",
              f"{n} bytes = {n // m} x {m}: the client writes {m}-byte messages (its short "
              f"segments end every {m} bytes, the first in frame {frame})", (frame,), 0)
    elif exp.time_s is not None:
        frame = r.first_frame_carrying(s, c, whole * size)
        v.add("message_bytes", FAIL, f"whole {size}-byte messages (a -t {exp.time_s:g} run)",
              found + f": the last message is {rest} bytes"
              + (f", from frame {frame}" if frame else ""), (frame,) if frame else (),
              whole * size)
    else:
        v.add("message_bytes", CANNOT_TELL, f"whole {size}-byte messages (a -t run) or -n "
              "bytes", found + f": right only for a -n {n}B run; the sidecar (or -t / -n) "
              "would tell", offset=whole * size)


def _ack(ctx, v, s, c, fs, bye_frame) -> int:
    """The ack and order checks; returns the frame of the server's first byte (0: none)."""
    r = ctx.r
    end = fs["end_offset"] if fs["end_offset"] >= 0 else fs["seen_end"]
    ack_frame = r.first_frame_carrying(s, 1 - c, 0) if end else 0
    expected = "the server sends exactly 'ACK: BYE'"
    if end == 0:
        v.add("ack", FAIL, expected, "the server sent nothing"
              + (f" after the BYE (frame {bye_frame})" if bye_frame else "")
              + ("" if fs["end_offset"] >= 0 else " (no FIN captured either)"),
              (bye_frame,) if bye_frame else ())
        return 0
    got = ctx.head(s, 1 - c, end) if end <= ANSWER_MAX_BYTES else None
    if got is None and end <= ANSWER_MAX_BYTES:
        v.add("ack", CANNOT_TELL, expected, f"{end} bytes, not all captured", (ack_frame,), 0)
    elif got is not None and got.startswith(ACK) and len(got) > len(ACK):
        extra = r.first_frame_carrying(s, 1 - c, len(ACK))
        v.add("ack", FAIL, expected + " and nothing after it", f"'ACK: BYE' (frame {ack_frame})"
              f", then {text(got[len(ACK):])} at offset {len(ACK)} (frame {extra})",
              (extra,), len(ACK))
    elif got != ACK:
        shown = text(got) if got is not None else f"{ctx.excerpt(s, 1 - c, 0)}..."
        v.add("ack", FAIL, expected, f"{shown} ({end} bytes, frame {ack_frame})",
              (ack_frame,), 0)
    else:
        v.add("ack", PASS, expected, f"'ACK: BYE', frame {ack_frame}", (ack_frame,), 0)
    if ack_frame and bye_frame:
        ok = ack_frame > bye_frame
        v.add("order", PASS if ok else FAIL, "ACK: BYE after BYE",
              f"BYE frame {bye_frame}, ACK: BYE frame {ack_frame}", (bye_frame, ack_frame))
    return ack_frame


CLOSE_EXPECTED = "FIN from both sides (the server's after its ACK: BYE), no RST"


def _close(v, fc, fs, ack) -> None:
    """Both FINs and no RST.  The client may close before reading ACK: BYE (its FIN first):
    its kernel then answers the ACK: BYE, arriving at a closed socket, with an RST -- that
    RST, after the client's FIN and the ACK: BYE, is part of this quirk, not a reset."""
    cfin, sfin = fc["fin_frame"], fs["fin_frame"]
    crst, srst = fc["rst_frame"], fs["rst_frame"]
    answered_closed = bool(crst and cfin and ack and cfin < crst and ack <= crst)
    rst = [f for f in (0 if answered_closed else crst, srst) if f]
    fins = (cfin, sfin)
    if rst and (not all(fins) or min(rst) < max(fins)):
        v.add("close", FAIL, CLOSE_EXPECTED, f"RST at frame {min(rst)}"
              f"{'' if all(fins) else ' before both FINs'}", tuple(sorted(rst)))
    elif answered_closed:
        v.add("close", PASS, CLOSE_EXPECTED, f"client FIN frame {cfin}; its RST at frame "
              f"{crst} answers the server's bytes (frame {ack}) arriving after it closed "
              "without reading them; server FIN " + (f"frame {sfin}" if sfin else
                                                       "none: the RST came first"),
              (cfin, crst) + ((sfin,) if sfin else ()))
    elif not all(fins):
        missing = " and ".join(w for w, f in zip(("client", "server"), fins) if not f)
        v.add("close", CANNOT_TELL, CLOSE_EXPECTED, f"no FIN from the {missing} in the capture")
    elif ack and sfin < ack:
        v.add("close", FAIL, CLOSE_EXPECTED, f"the server's FIN at frame {sfin} before its "
              f"ACK: BYE (frame {ack})", (sfin, ack))
    else:
        v.add("close", PASS, CLOSE_EXPECTED, f"client FIN frame {cfin}, server FIN frame "
              f"{sfin}" + (f"; RST at frame {min(rst)} after both" if rst else ""), fins)


def _duration(ctx, v, s, c, bye_frame, start_seen) -> None:
    """bye_frame: the first frame carrying the BYE's last byte (0: end unknown)."""
    segs = ctx.r.segments_of(s, c)
    if not len(segs):
        return
    at = int(segs.frame.argmin())
    times = ctx.joined(segs.time_ns, segs.frame)     # across a clock break: over the pieces
    first, t_first = int(segs.frame[at]), int(times[at])
    t = ctx.exp.time_s
    span = (int(times[segs.frame == bye_frame][0]) / 1e9 - t_first / 1e9 if bye_frame
            else None)
    if span is not None and ctx.pieces.apart(first, bye_frame):
        ctx.spanning += 1
    if span is not None:
        v.evidence.append(f"first data frame {first}, BYE frame {bye_frame}: {span:.3f} s")
    if t is None or ctx.exp.num_bytes is not None:
        return
    lo = t - max(DURATION_EARLY_S, DURATION_EARLY_FRACTION * t)
    hi = t + max(DURATION_LATE_S, DURATION_LATE_FRACTION * t)
    expected = f"-t {t:g} s: first data to BYE in {lo:.2f}-{hi:.2f} s"
    if span is None or not start_seen:
        v.add("duration", CANNOT_TELL, expected, "the connection's "
              f"{'start (SYN)' if not start_seen else 'end (FIN or BYE)'} was not captured")
    elif span <= hi:
        v.add("duration", PASS if lo <= span else FAIL, expected,
              f"{span:.3f} s (frames {first}-{bye_frame})", (first, bye_frame))
    else:
        # Late on the wire need not be late in the program: the client writes BYE at -t seconds,
        # behind whatever its send buffer still holds.  Only a backlog no buffer holds is late.
        sent_by_hi = segs.start + segs.length
        sent_by_hi = int(sent_by_hi[times <= t_first + hi * 1e9].max(initial=0))
        backlog = int((segs.start + segs.length).max()) - sent_by_hi
        if backlog <= SEND_BUFFER_MAX_BYTES:
            v.add("duration", CANNOT_TELL, expected, f"{span:.3f} s on the wire (frames "
                  f"{first}-{bye_frame}), but {backlog} bytes up to the BYE were first sent after "
                  f"{hi:.2f} s: a send buffer holds that much (up to "
                  f"{SEND_BUFFER_MAX_BYTES >> 20} MiB), so the client may have written BYE on "
                  "time and the path drained it late", (first, bye_frame))
        else:
            v.add("duration", FAIL, expected, f"{span:.3f} s (frames {first}-{bye_frame}); "
                  f"{backlog} bytes were first sent after {hi:.2f} s, more than a send buffer "
                  "holds", (first, bye_frame))


def _segment_evidence(ctx, v, s, c, data_end, size) -> int:
    """Evidence about the client's segments; returns its first data frame (0: none)."""
    segs = ctx.r.segments_of(s, c)
    if not len(segs):
        return 0
    sizes, counts = np.unique(segs.length, return_counts=True)
    top = np.argsort(-counts, kind="stable")[:5]
    mss = ctx.mss(s, c)
    hist = ", ".join(f"{int(sizes[i])} B x {int(counts[i])}" for i in top)
    v.evidence.append(f"client segment sizes: {hist} ({len(segs)} segments"
                      + (f", MSS {mss}" if mss else "") + ")")
    if mss:
        full = int((segs.length == mss).sum())
        v.evidence.append(f"{full} MSS-sized segments; {int((segs.length > size).sum())} "
                          f"are longer than a {size}-byte message (writes coalesced)")
    f = ctx.r.flow(s, c)
    resent = f["wire_bytes"] - f["captured_bytes"] - f["cut_bytes"]
    if resent:
        v.evidence.append(f"{resent} bytes sent again (retransmissions and overlaps), "
                          "each byte counted once")
    # write boundaries: a segment shorter than the MSS that ends inside a message
    if mss:
        ends = segs.start + segs.length
        odd = (segs.length < mss) & (ends % size != 0) & (ends < data_end)
        if odd.any():
            k = int(np.flatnonzero(odd)[0])
            v.evidence.append(f"{int(odd.sum())} short segment(s) end inside a {size}-byte "
                              f"message, first frame {int(segs.frame[k])} at offset "
                              f"{int(ends[k])} (a write boundary there, or the window cut it)")
    order = np.argsort(segs.frame)
    v.evidence.append(f"first data frame {int(segs.frame[order[0]])}, last data frame "
                      f"{int(segs.frame[order[-1]])}")
    return int(segs.frame[order[0]])


def check_parallel(ctx: Context, verdicts: list[StreamVerdict]) -> None:
    """As many connections between each pair as asked (-P: the sidecar's ``parallel``)."""
    want = ctx.exp.parallel
    if not want or not verdicts:
        return
    pairs: dict = {}
    for v in verdicts:
        pairs.setdefault((v.client.rsplit(":", 1)[0], v.server), []).append(v)
    for (client, server), group in pairs.items():
        ok = len(group) == want
        syns = []
        for g in group:
            f = ctx.r.flow(g.stream, ctx.client_dir(g.stream))
            if f and f["syn_frame"]:
                syns.append(f["syn_frame"])
        for v in group:
            v.add("parallel", PASS if ok else FAIL, f"-P {want} connections {client} -> "
                  f"{server}", f"{len(group)}: streams {id_ranges([g.stream for g in group])}"
                  + (f", SYN frames {' '.join(map(str, sorted(syns)))}" if syns else ""),
                  tuple(sorted(syns)))
