"""The ping rules (see the package docstring): every echo request answered once, sequence
numbers without a gap."""

from __future__ import annotations

import numpy as np

from ... import schema
from ...streams import id_ranges
from .checks import CANNOT_TELL, FAIL, PASS, Context, StreamVerdict

PING_LATE_S = 1.0


def check(ctx: Context) -> None:
    """The ping rules on every (source, destination, identifier) group of echo requests."""
    cap = ctx.cap
    echo = np.flatnonzero(cap.layer(schema.ICMP_ECHO) & cap.layer(schema.IP))
    if not len(echo):
        return
    typ = cap.column("icmp_type")[echo]
    ver = cap.column("ip_version")[echo]
    request = ((ver == 4) & (typ == 8)) | ((ver == 6) & (typ == 128))
    reply = ((ver == 4) & (typ == 0)) | ((ver == 6) & (typ == 129))
    src, dst = cap.column("ip_src")[echo], cap.column("ip_dst")[echo]
    ident, seq = cap.column("icmp_ident")[echo], cap.column("icmp_seq")[echo]
    frame = cap.column("frame_number")[echo]
    t = ctx.joined(cap.column("frame_time_ns")[echo], cap.column("frame_number")[echo])
    # the capture's end on the joined timeline (its latest time, when the clock never broke)
    clock = cap.clock
    last_t = cap.latest_time_ns if len(ctx.pieces) == 1 else clock.first_ns + clock.span_ns()
    req_rows = np.flatnonzero(request)
    groups = sorted({(int(src[i]), int(dst[i]), int(ident[i])) for i in req_rows},
                    key=lambda g: min(frame[req_rows][(src[req_rows] == g[0]) & (
                        dst[req_rows] == g[1]) & (ident[req_rows] == g[2])]))
    for n, (a, b, ident_) in enumerate(groups):
        rq = req_rows[(src[req_rows] == a) & (dst[req_rows] == b) & (ident[req_rows] == ident_)]
        rp = np.flatnonzero(reply & (src == b) & (dst == a) & (ident == ident_))
        v = StreamVerdict(n, "icmp", "ping", cap.addresses[a], cap.addresses[b])
        v.evidence.append(f"identifier {ident_}, {len(rq)} request(s) and {len(rp)} "
                          f"reply(ies), sequence numbers {id_ranges(seq[rq].tolist())}")
        seqs = seq[rq].astype(np.int64)
        uniq, counts = np.unique(seqs, return_counts=True)
        if (counts > 1).any():
            k = int(uniq[counts > 1][0])
            v.add("requests", FAIL, "each sequence number requested once",
                  f"seq {k} requested {int(counts[uniq == k][0])} times",
                  tuple(int(x) for x in frame[rq][seqs == k]))
        else:
            span = int(uniq.max() - uniq.min() + 1) if len(uniq) else 0
            gaps = span - len(uniq)
            v.add("requests", PASS if gaps == 0 else CANNOT_TELL,
                  "consecutive sequence numbers", f"{len(uniq)} requests"
                  + (f", {gaps} sequence number(s) not captured" if gaps else ""))
        rseq = seq[rp].astype(np.int64)
        unanswered, late = [], []
        for i in rq:         # a reply comes after its request in the capture's order
            hits = rp[(rseq == int(seq[i])) & (frame[rp] > frame[i])]
            if len(hits):
                continue
            answered_later = bool((frame[rp] > frame[i]).any())
            near_end = last_t - int(t[i]) < PING_LATE_S * 1e9
            (late if near_end and not answered_later else unanswered).append(i)
        if unanswered:
            v.add("replies", FAIL, "a reply to every request",
                  f"{len(unanswered)} unanswered: seq "
                  f"{id_ranges([int(seq[i]) for i in unanswered])}",
                  tuple(int(frame[i]) for i in unanswered[:10]))
        elif late:
            v.add("replies", CANNOT_TELL, "a reply to every request",
                  f"{len(late)} request(s) in the capture's last second without a reply",
                  tuple(int(frame[i]) for i in late))
        else:
            v.add("replies", PASS, "a reply to every request", f"{len(rq)} answered")
        ru, rc = np.unique(rseq, return_counts=True)
        dups = ru[rc > 1]
        if len(dups):
            k = int(dups[0])
            v.add("duplicates", FAIL, "one reply per request",
                  f"{len(dups)} duplicated: seq {k} answered {int(rc[ru == k][0])} times",
                  tuple(int(x) for x in frame[rp][rseq == k]))
        else:
            stray = np.setdiff1d(ru, uniq)
            v.add("duplicates", PASS if not len(stray) else CANNOT_TELL,
                  "one reply per request", "none" if not len(stray) else
                  f"replies to requests not captured: seq {id_ranges(stray.tolist())}")
        ctx.out.append(v)
