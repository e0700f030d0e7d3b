"""The TCP sequence analyser in plain Python, beside ``_tcpseq.c``: the same answers for
installs without a compiler (tests/analyses hold both to tshark).  One pass per packet over the
per-stream, per-direction state Wireshark keeps (epan/dissectors/packet-tcp.c), kept between
feeds (contract: contract.py)."""

from __future__ import annotations

import numpy as np

from .contract import ANALYSED, COUNTS, FLAG_BITS, OUTPUTS

_M = 0xFFFFFFFF
_FIN, _SYN, _RST, _PSH, _ACK = 0x001, 0x002, 0x004, 0x008, 0x010


def _gt(x, y):   # GT_SEQ: x after y in sequence space
    return ((y - x) & _M) >= 0x80000000


def _lt(x, y):
    return ((x - y) & _M) >= 0x80000000


def _le(x, y):
    d = (x - y) & _M
    return d == 0 or d >= 0x80000000


class _Flow:
    """One direction of a stream: Wireshark's tcp_flow_t and tcp_analyze_seq_flow_info_t."""

    def __init__(self):
        self.base_set, self.base_seq = False, 0
        self.win_scale, self.window = -1, _M
        self.valid_bif, self.push_bytes_sent, self.push_set_last = True, 0, False
        self.is_first_ack, self.lastsegmentflags = False, 0
        self.lastack = self.lastnondupack = self.dupacknum = 0
        self.nextseq = self.maxseqtobeacked = self.nextseqframe = 0
        self.lastacktime = self.nextseqtime = 0
        self.num_sack, self.sack_bytes = 0, 0
        self.max_end = None
        self.segments = []   # [seq, nextseq, frame, time, resent], oldest first
        self.line = None     # resent: (last relative seq, its place on the line, highest end)
        self.ts_sent, self.ts_echoed = {}, set()   # ts_rtt: TSval -> first time; TSecr seen


class _Stream:
    def __init__(self):
        self.flows = (_Flow(), _Flow())
        self.ts_mru_syn = self.ts_first_rtt = 0


class Analyser:
    """Every stream's state, by stream id, between feeds; the counts of every packet fed."""

    def __init__(self):
        self.streams: dict[int, _Stream] = {}
        self.tallies: dict[tuple[int, int], list[int]] = {}

    def feed(self, inp, out, whole: bool = False) -> None:
        """The analysis in plain Python: Wireshark's definitions step by step (slow; the
        reference the compiled analyser is held to)."""
        streams = self.streams
        cols = {k: v.tolist() for k, v in inp.items() if k not in ("sack_le", "sack_re")}
        sack_le, sack_re = inp["sack_le"].tolist(), inp["sack_re"].tolist()
        timestamps = "tsval" in cols
        o = {k: [0] * len(inp["stream"]) for k, _ in OUTPUTS}
        last = {s: i for i, s in enumerate(cols["stream"])} if whole else {}
        for i in range(len(cols["stream"])):
            sid = cols["stream"][i]
            st = streams.setdefault(sid, _Stream())
            d = cols["dir"][i]
            fw, rv = st.flows[d], st.flows[1 - d]
            flags, seq, ack = cols["flags"][i], cols["seq"][i], cols["ack"][i]
            fl = 0
            if flags & (_SYN | _ACK) == _SYN and fw.base_set and seq == fw.base_seq:
                fw.nextseq = fw.maxseqtobeacked
                fl |= ANALYSED
            if flags & (_SYN | _ACK) == _SYN | _ACK and fw.base_set and seq != fw.base_seq:
                fw.base_seq = seq
                fl |= FLAG_BITS["reused_ports"] | ANALYSED
            fw.num_sack = fw.sack_bytes = 0
            window_size = cols["win"][i]
            resent = 0
            if cols["analysed"][i]:
                if not fw.base_set:
                    fw.base_seq, fw.base_set = (seq if flags & _SYN else (seq - 1) & _M), True
                if not rv.base_set and flags & _ACK:
                    rv.base_seq, rv.base_set = (ack - 1) & _M, True
                fl = _analyse_one(st, fw, rv, i, cols, o, fl)
                seq = (seq - fw.base_seq) & _M
                if flags & _ACK:
                    ack = (ack - rv.base_seq) & _M
                if not flags & _SYN and fw.win_scale >= 0:
                    window_size <<= fw.win_scale
                length = cols["seglen"][i] + (1 if flags & (_SYN | _FIN) else 0)
                o["nxtseq"][i] = (seq + length) & _M
                if length:
                    resent = _resent_on_line(fw, seq, length)
            o["rel_seq"][i], o["rel_ack"][i], o["window_size"][i] = seq, ack, window_size
            o["resent"][i] = resent
            if not flags & _SYN:
                o["scalefactor"][i] = 1 << fw.win_scale if fw.win_scale >= 0 else fw.win_scale
            t = cols["t"][i]
            if flags & _SYN:
                if not flags & _ACK:
                    st.ts_mru_syn = t
                fw.is_first_ack = True
            if flags & (_SYN | _ACK) == _ACK:
                if st.ts_mru_syn and not st.ts_first_rtt:
                    st.ts_first_rtt = t - st.ts_mru_syn
                fw.is_first_ack = False
            if cols["wscale"][i] >= 0:
                fw.win_scale = min(cols["wscale"][i], 14)
            k = min(cols["sack_count"][i], 3)
            fw.sack_bytes = sum(sack_re[i][j] - sack_le[i][j] for j in range(k)) & _M
            fw.num_sack = k
            if fl & ANALYSED and st.ts_first_rtt:
                o["initial_rtt"][i] = st.ts_first_rtt
            if flags & _SYN:
                if fw.win_scale == -1:
                    fw.win_scale = rv.win_scale = -2
                elif flags & _ACK and rv.win_scale == -2:
                    fw.win_scale = -2
            o["aflags"][i] = fl
            if timestamps and cols["has_ts"][i]:
                _timestamp_rtt(fw, rv, i, cols, o)
            self._count(sid, d, fl, cols["seglen"][i], resent)
            if last.get(sid) == i:
                del streams[sid]
        for k, v in out.items():
            v[:] = o[k]

    def _count(self, sid: int, d: int, fl: int, seglen: int, resent: int) -> None:
        c = self.tallies.setdefault((sid, d), [0] * len(COUNTS))
        c[0] += 1
        c[1] += seglen
        c[2] += resent
        c[3] += bool(fl & 0x0007)
        for b in range(1, 15):
            c[3 + b] += (fl >> b) & 1

    def counts(self) -> np.ndarray:
        """Rows of (stream, direction, *COUNTS) of every stream and direction fed so far."""
        rows = [(sid, d, *c) for (sid, d), c in sorted(self.tallies.items())]
        return np.array(rows, np.int64).reshape(len(rows), 2 + len(COUNTS))


def _resent_on_line(fw, rel, length) -> int:
    """pcapstats' resent for one analysed segment (see _tcpseq.c's resent_on_line)."""
    if fw.line is None:
        pos, top, resent = 0, None, 0
    else:
        prev, pos, top = fw.line
        step = (rel - prev) & _M
        pos += step - (1 << 32) if step >= 1 << 31 else step
        resent = int(pos < top)
    end = pos + length
    fw.line = (rel, pos, end if top is None or end > top else top)
    return resent


def _timestamp_rtt(fw, rv, i, cols, o) -> None:
    """ts_rtt of packet i (see _tcpseq.c's timestamp_rtt)."""
    now, tsecr = cols["t"][i], cols["tsecr"][i]
    if cols["flags"][i] & _ACK and tsecr != 0 and tsecr not in fw.ts_echoed:
        fw.ts_echoed.add(tsecr)
        if tsecr in rv.ts_sent:
            o["ts_rtt"][i], o["ts_ok"][i] = now - rv.ts_sent[tsecr], 1
    fw.ts_sent.setdefault(cols["tsval"][i], now)


def _analyse_one(st, fw, rv, i, cols, o, fl):
    """Wireshark's tcp_analyze_sequence_number for packet i; returns its flag word."""
    B = FLAG_BITS
    seq, ack, seglen, frame = cols["seq"][i], cols["ack"][i], cols["seglen"][i], cols["frame"][i]
    window, flags, now = cols["win"][i], cols["flags"][i], cols["t"][i]
    if flags & _ACK:
        rv.valid_bif = True
    zwp = seglen == 1 and seq == fw.nextseq and rv.window == 0
    plain = not flags & (_SYN | _FIN | _RST)
    if zwp:
        fl |= B["zero_window_probe"] | ANALYSED
    else:
        if window == 0 and plain:
            fl |= B["zero_window"] | ANALYSED
        if fw.nextseq and _gt(seq, fw.nextseq) and not flags & _RST:
            fl |= B["lost_segment"] | ANALYSED
            fw.valid_bif = False
        if seglen <= 1 and seq == (fw.nextseq - 1) & _M and plain:
            fl |= B["keep_alive"] | ANALYSED
        same = seglen == 0 and seq == fw.nextseq and ack == fw.lastack and plain
        if same and window and window != fw.window:
            fl |= B["window_update"] | ANALYSED
        if seglen > 0 and rv.win_scale != -1 and plain:
            shift = 0 if rv.is_first_ack or rv.win_scale == -2 else rv.win_scale
            if (seq + seglen) & _M == (rv.lastack + ((rv.window << shift) & _M)) & _M:
                fl |= B["window_full"] | ANALYSED
        if same and window and window == fw.window and rv.lastsegmentflags & B["keep_alive"]:
            fl |= B["keep_alive_ack"] | ANALYSED
        elif (same and window == 0 and window == fw.window
              and rv.lastsegmentflags & B["zero_window_probe"]):
            fl |= B["zero_window_probe_ack"] | ANALYSED
        elif same and window and window == fw.window:
            fw.dupacknum = 1 if fw.dupacknum == _M else fw.dupacknum + 1
            fl |= B["duplicate_ack"] | ANALYSED
            o["dupack_num"][i], o["dupack_frame"][i] = fw.dupacknum, fw.lastnondupack
    if ack != fw.lastack:
        fw.lastnondupack, fw.dupacknum = frame, 0
    if rv.maxseqtobeacked and _gt(ack, rv.maxseqtobeacked) and flags & _ACK:
        fl |= ANALYSED
        if _lt(rv.maxseqtobeacked, rv.nextseq):
            rv.maxseqtobeacked = rv.nextseq
            fl |= B["ack_lost_segment"]
        else:
            if rv.dupacknum == 0:
                fl |= B["ack_lost_segment"]
            rv.dupacknum = _M
    synfin = 1 if flags & (_SYN | _FIN) else 0
    if (seglen > 0 or synfin) and not fl & B["keep_alive"]:
        not_advanced = bool(fw.nextseq) and _lt(seq, fw.nextseq)
        if seglen > 1 and (fw.nextseq - 1) & _M == seq:
            not_advanced = False
        thres = st.ts_first_rtt & 0xFFFFFFFFFFFFFFFF if st.ts_first_rtt else 3_000_000
        if seglen > 0 and rv.lastack and _le((seq + seglen) & _M, rv.lastack):
            fl |= B["spurious_retransmission"] | ANALYSED
        elif (not_advanced and rv.dupacknum >= 2 and rv.lastack == seq
              and (now - rv.lastacktime) & 0xFFFFFFFFFFFFFFFF < 20_000_000):
            fl |= B["fast_retransmission"] | ANALYSED
        elif (not_advanced and (now - fw.nextseqtime) & 0xFFFFFFFFFFFFFFFF < thres
              and fw.nextseq != (seq + seglen + synfin) & _M):
            fl |= B["out_of_order"] | ANALYSED
        elif not_advanced:
            fl |= B["generic_retransmission"] | ANALYSED
            oldest = fw.segments[0] if fw.segments else None
            o["rto"][i] = now - (oldest[3] if oldest else fw.nextseqtime)
            o["rto_frame"][i] = oldest[2] if oldest else fw.nextseqframe
    nextseq = (seq + seglen) & _M
    if (seglen or synfin) and len(fw.segments) < 10000:
        nextseq = (nextseq + synfin) & _M
        resent = fw.max_end is not None and _lt(seq, fw.max_end)
        fw.segments.append([seq, nextseq, frame, now, resent])
    if seglen or synfin:
        end = (seq + seglen + synfin) & _M
        if fw.max_end is None or _gt(end, fw.max_end):
            fw.max_end = end
    if (_gt(nextseq, fw.nextseq) or not fw.nextseq) and not zwp:
        fw.nextseq, fw.nextseqframe, fw.nextseqtime = nextseq, frame, now
    if (seq == fw.maxseqtobeacked or not fw.maxseqtobeacked) and not zwp:
        fw.maxseqtobeacked = fw.nextseq
    fw.window, fw.lastack, fw.lastacktime = window, ack, now
    fw.lastsegmentflags = fl & ~ANALYSED if fl & ANALYSED else 0

    kept, matched, resent = [], None, False
    for s in rv.segments:   # what this ACK acknowledges of the peer's segments
        if _le(s[1], ack):
            if s[1] == ack and matched is None:
                matched = s
            resent |= s[4]
            continue
        if _gt(ack, s[0]):
            s[0] = ack
        kept.append(s)
    rv.segments = kept
    if matched is not None:
        fl |= ANALYSED
        o["acks_frame"][i], o["ack_rtt"][i], o["karn"][i] = matched[2], now - matched[3], int(not resent)

    if seglen and fw.segments and fw.valid_bif:
        base = fw.base_seq
        first = min((s[0] - base) & _M for s in fw.segments)
        last = max((s[1] - base) & _M for s in fw.segments)
        in_flight = (last - first) & _M
        if rv.num_sack:
            in_flight = (in_flight - rv.sack_bytes) & _M
        if 0 < in_flight < 2_000_000_000:
            fl |= ANALYSED
            o["bytes_in_flight"][i] = in_flight - synfin
        if flags & _PSH:
            fw.push_bytes_sent = seglen if fw.push_set_last else fw.push_bytes_sent + seglen
            fw.push_set_last = True
        elif fw.push_set_last:
            fw.push_bytes_sent, fw.push_set_last = seglen, False
        else:
            fw.push_bytes_sent += seglen
        fw.push_bytes_sent &= _M
        fl |= ANALYSED
        o["push_bytes"][i] = fw.push_bytes_sent
    return fl
