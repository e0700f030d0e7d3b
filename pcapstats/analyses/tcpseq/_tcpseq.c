/* TCP sequence analysis with Wireshark 4.0's definitions (tcp_analyze_sequence_number and its
 * callers in epan/dissectors/packet-tcp.c), one pass over the TCP packets in frame order.
 *
 * Written from the definitions, not from Wireshark's code.  contract.py is the contract (every
 * input and output array), ../tcp_analysis.py says what the outputs mean, and kernel_python.py
 * is the same algorithm in plain Python (the fallback, and the reference
 * tests/analyses/test_tcp_analysis.py holds this file to).
 *
 * State: per stream two flows (direction 0 and 1), each with its list of unacknowledged
 * segments in the order they were sent.  Wireshark scans that whole list at every packet; here
 * a list whose segments follow one another without overlap ("ordered") is handled from its
 * ends, which gives the same answers (see ack_segments), and the full scan runs only while a
 * list holds retransmitted or reordered segments.
 *
 * The state lives in a handle (ps_tcpseq_open) between calls, so a file is analysed window by
 * window as its reader walks it, with the answers of one pass over the whole table: memory
 * follows the streams, not the packets.  Given a whole table at once (`whole`), a stream's
 * state is freed after its last packet, so memory follows the streams open at once.  Beside
 * Wireshark's numbers each packet gets pcapstats' `resent` and `ts_rtt` (../tcp_analysis.py), and
 * each stream and direction its counts (ps_tcpseq_counts: what retrans tabulates).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TH_FIN 0x001
#define TH_SYN 0x002
#define TH_RST 0x004
#define TH_PUSH 0x008
#define TH_ACK 0x010

/* Output flag bits (contract.py FLAG_BITS) */
#define F_RETRANSMISSION 0x0001
#define F_FAST_RETRANSMISSION 0x0002
#define F_SPURIOUS_RETRANSMISSION 0x0004
#define F_OUT_OF_ORDER 0x0008
#define F_LOST_SEGMENT 0x0010
#define F_ACK_LOST_SEGMENT 0x0020
#define F_DUPLICATE_ACK 0x0040
#define F_ZERO_WINDOW 0x0080
#define F_ZERO_WINDOW_PROBE 0x0100
#define F_ZERO_WINDOW_PROBE_ACK 0x0200
#define F_WINDOW_FULL 0x0400
#define F_KEEP_ALIVE 0x0800
#define F_KEEP_ALIVE_ACK 0x1000
#define F_WINDOW_UPDATE 0x2000
#define F_REUSED_PORTS 0x4000
#define F_ANALYSED 0x8000   /* Wireshark made its per-packet record ("ta") */

#define MAX_UNACKED 10000   /* TCP_MAX_UNACKED_SEGMENTS */

#define GT_SEQ(x, y) ((int32_t)((y) - (x)) < 0)
#define LT_SEQ(x, y) ((int32_t)((x) - (y)) < 0)
#define LE_SEQ(x, y) ((int32_t)((x) - (y)) <= 0)

typedef struct {
    uint32_t seq, nextseq, frame;
    uint8_t resent;     /* started below the highest sequence number sent before it */
    int64_t t;
} seg_t;

/* A hash table of 32-bit keys (TSvals) with an int64 each (when vals is not NULL): open
 * addressing, keys stored plus one so that 0 marks a free place. */
typedef struct {
    uint64_t *keys;
    int64_t *vals;
    int64_t cap, len;
} tsmap_t;

typedef struct {
    /* the flow's part of Wireshark's tcp_flow_t */
    uint8_t base_set, valid_bif, push_set_last, is_first_ack;
    int16_t win_scale;          /* -1 unknown, -2 no scaling, else the shift */
    uint32_t base_seq, window, push_bytes_sent, lastsegmentflags;
    /* ... and of its tcp_analyze_seq_flow_info_t */
    uint32_t lastack, lastnondupack, dupacknum, nextseq, maxseqtobeacked, nextseqframe;
    int64_t lastacktime, nextseqtime;
    uint32_t sack_bytes;        /* sum of the SACK blocks Wireshark keeps (the first three) */
    uint8_t num_sack;
    /* ours */
    uint8_t ordered;            /* segments follow one another without overlap */
    uint8_t max_end_set;
    uint32_t max_end;           /* highest nextseq sent so far (zero-window probes too) */
    seg_t *segs;                /* unacked segments, oldest first, at [head, head + len) */
    int32_t head, len, cap;
    /* pcapstats' resent: the direction's segments laid on one unwrapped number line */
    uint8_t rs_started;
    uint32_t rs_prev;           /* the last segment's relative seq */
    int64_t rs_pos, rs_max;     /* its place on the line, the highest end so far */
    /* ts_rtt: when each TSval was first sent, and the TSecr values this side echoed (the last
     * of each, which most packets repeat, looked up without hashing) */
    tsmap_t ts_sent, ts_echoed;
    uint32_t last_tsval, last_tsecr;
    uint8_t tsval_seen, tsecr_seen;
} flow_t;

typedef struct {
    flow_t f[2];
    int64_t ts_mru_syn, ts_first_rtt;
} stream_t;

/* Per stream and direction, what retrans counts (its COUNTS table, in that order): packets,
 * payload bytes, re-sent segments, then tshark's flags (retransmission: any of bits 0-2;
 * then one a flag bit, 0x0002 to 0x4000). */
#define N_COUNTS 18
typedef struct {
    uint64_t c[2][N_COUNTS];
} counts_t;

typedef struct {
    int64_t n;
    int64_t whole;              /* the whole input: free each stream after its last packet */
    /* inputs, one row per TCP packet in frame order */
    const int64_t *stream;
    const uint8_t *dir;
    const uint8_t *analysed;    /* segment length known: not an IP fragment */
    const uint16_t *flags;
    const uint32_t *seq, *ack;
    const uint16_t *win;
    const uint32_t *seglen;
    const int64_t *t;
    const uint32_t *frame;
    const int16_t *wscale;      /* window-scale option shift, -1 without the option */
    const uint8_t *sack_count;
    const uint32_t *sack_le, *sack_re;   /* n x 3: the first three SACK blocks, raw */
    const uint32_t *tsval, *tsecr;       /* NULL: no ts_rtt asked for */
    const uint8_t *has_ts;               /* the packet carries the timestamps option */
    /* outputs: any may be NULL, not asked for (OUT writes only those given) */
    uint32_t *rel_seq, *rel_ack, *nxtseq, *window_size;
    int32_t *scalefactor;       /* 0 where Wireshark prints none (SYN) */
    uint32_t *aflags, *dupack_num, *dupack_frame, *acks_frame, *bytes_in_flight, *push_bytes;
    int64_t *ack_rtt, *rto, *initial_rtt;
    uint32_t *rto_frame;
    uint8_t *karn;              /* the acked segments held no retransmitted one */
    uint8_t *resent;            /* carries sequence space its direction had sent before */
    int64_t *ts_rtt;            /* ns from the peer's first TSval to its first echo here */
    uint8_t *ts_ok;             /* ts_rtt has a value */
} tcpseq_args;

/* Write output `name` of packet i when the caller asked for it (its array is not NULL): an
 * analysis that reads a few outputs does not pay 4-8 bytes a packet for each of the others. */
#define OUT(name, i, value) do { if (a->name) a->name[i] = (value); } while (0)

/* The analyser's state between calls: every stream's, by stream id, so that a file can be
 * analysed a window at a time with the answers of one pass over the whole. */
typedef struct {
    int32_t *slot;              /* by stream id: its state's index, -1 none yet */
    int64_t n_slot;
    stream_t *states;
    int32_t *free_slots;
    int32_t n_states, cap_states, n_free;
    counts_t *counts;           /* by stream id */
} tcpseq_t;

/* Does segment s keep a list ordered, after a last segment ending at last_next?  Ordered: as
 * offsets from the first segment's seq, every segment starts at or after the previous one's end,
 * ends after it starts, and all lie within 2^31 (where serial comparisons are plain ones). */
static int follows(uint32_t first_seq, uint32_t last_next, const seg_t *s)
{
    uint32_t start = s->seq - first_seq, end = s->nextseq - first_seq;
    return start >= last_next - first_seq && end > start && end < 0x80000000u;
}

static int push_segment(flow_t *f, seg_t s)
{
    if (f->head + f->len == f->cap) {
        if (f->head > f->cap / 2) {  /* room at the front: move down */
            memmove(f->segs, f->segs + f->head, (size_t)f->len * sizeof(seg_t));
            f->head = 0;
        } else {
            int32_t cap = f->cap ? f->cap * 2 : 16;
            seg_t *p = realloc(f->segs, (size_t)cap * sizeof(seg_t));
            if (!p)
                return -1;
            f->segs = p;
            f->cap = cap;
        }
    }
    if (f->len == 0)
        f->ordered = follows(s.seq, s.seq, &s);
    else if (f->ordered)
        f->ordered = follows(f->segs[f->head].seq, f->segs[f->head + f->len - 1].nextseq, &s);
    f->segs[f->head + f->len] = s;
    f->len++;
    return 0;
}

/* In an ordered list, does `ack` delete a prefix (and cut at most the next segment)?  Yes when it
 * lies less than 2^31 after the first segment's start: then every serial comparison with it
 * is a plain comparison of offsets. */
static int ack_is_prefix(const flow_t *f, uint32_t ack)
{
    return ack - f->segs[f->head].seq < 0x80000000u;
}

/* Remove the segments `ack` covers from flow r (Wireshark: delete when nextseq <= ack, cut the
 * front of a segment ack falls inside); the oldest exact match gives acks_frame/ack_rtt. */
static void ack_segments(flow_t *r, uint32_t ack, int64_t now, uint32_t *acked_frame,
                         int64_t *rtt, int *matched, int *resent)
{
    if (r->len == 0)
        return;
    if (r->ordered && ack_is_prefix(r, ack)) {
        int32_t k = 0;
        for (; k < r->len; k++) {
            seg_t *s = &r->segs[r->head + k];
            if (!LE_SEQ(s->nextseq, ack))
                break;
            if (s->nextseq == ack && !*matched) {
                *matched = 1;
                *acked_frame = s->frame;
                *rtt = now - s->t;
            }
            *resent |= s->resent;
        }
        r->head += k;
        r->len -= k;
        if (r->len) {
            seg_t *s = &r->segs[r->head];
            if (GT_SEQ(ack, s->seq) && LT_SEQ(ack, s->nextseq))
                s->seq = ack;
        } else {
            r->head = 0;
        }
        return;
    }
    int32_t out = r->head;
    int ordered = 1;
    for (int32_t i = r->head; i < r->head + r->len; i++) {
        seg_t s = r->segs[i];
        if (LE_SEQ(s.nextseq, ack)) {
            if (s.nextseq == ack && !*matched) {
                *matched = 1;
                *acked_frame = s.frame;
                *rtt = now - s.t;
            }
            *resent |= s.resent;
            continue;
        }
        if (GT_SEQ(ack, s.seq))
            s.seq = ack;
        if (out == r->head)
            ordered = follows(s.seq, s.seq, &s);
        else if (ordered)
            ordered = follows(r->segs[r->head].seq, r->segs[out - 1].nextseq, &s);
        r->segs[out++] = s;
    }
    r->len = out - r->head;
    r->ordered = (uint8_t)ordered;
    if (r->len == 0)
        r->head = 0;
}

/* Wireshark's bytes in flight before SACK: the span of the unacked segments, relative to base. */
static uint32_t flight_span(const flow_t *f)
{
    uint32_t base = f->base_seq;
    const seg_t *a = &f->segs[f->head], *b = &f->segs[f->head + f->len - 1];
    if (f->ordered) {
        uint32_t lo = a->seq - base, hi = b->nextseq - base;
        if (lo <= hi && hi - lo == b->nextseq - a->seq)  /* no wrap of relative numbers inside */
            return hi - lo;
    }
    uint32_t first = b->seq - base, last = b->nextseq - base;
    for (int32_t i = f->head; i < f->head + f->len; i++) {
        uint32_t s = f->segs[i].seq - base, e = f->segs[i].nextseq - base;
        if (e > last)
            last = e;
        if (s < first)
            first = s;
    }
    return last - first;
}

/* -- ts_rtt's tables ---------------------------------------------------------------------- */

static uint64_t ts_hash(uint64_t k)
{
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 29);
}

/* Where key k is in m, or the free place it would go to. */
static int64_t ts_place(const tsmap_t *m, uint32_t k)
{
    uint64_t want = (uint64_t)k + 1, mask = (uint64_t)m->cap - 1;
    uint64_t i = ts_hash(want) & mask;
    while (m->keys[i] && m->keys[i] != want)
        i = (i + 1) & mask;
    return (int64_t)i;
}

static int ts_grow(tsmap_t *m)
{
    tsmap_t g = {0, 0, m->cap ? m->cap * 2 : 64, m->len};
    g.keys = calloc((size_t)g.cap, sizeof(uint64_t));
    if (m->vals || !m->cap)
        g.vals = malloc((size_t)g.cap * sizeof(int64_t));
    if (!g.keys || !g.vals) {
        free(g.keys);
        free(g.vals);
        return -1;
    }
    for (int64_t i = 0; i < m->cap; i++) {
        if (m->keys[i]) {
            int64_t at = ts_place(&g, (uint32_t)(m->keys[i] - 1));
            g.keys[at] = m->keys[i];
            g.vals[at] = m->vals ? m->vals[i] : 0;
        }
    }
    free(m->keys);
    free(m->vals);
    *m = g;
    return 0;
}

/* Add k with value v unless it is there; 1 if it was added, 0 if it was there, -1 no memory. */
static int ts_add(tsmap_t *m, uint32_t k, int64_t v)
{
    if (2 * (m->len + 1) > m->cap && ts_grow(m))
        return -1;
    int64_t at = ts_place(m, k);
    if (m->keys[at])
        return 0;
    m->keys[at] = (uint64_t)k + 1;
    m->vals[at] = v;
    m->len++;
    return 1;
}

static int ts_get(const tsmap_t *m, uint32_t k, int64_t *v)
{
    if (!m->cap)
        return 0;
    int64_t at = ts_place(m, k);
    if (!m->keys[at])
        return 0;
    *v = m->vals[at];
    return 1;
}

static void init_stream(stream_t *st)
{
    memset(st, 0, sizeof *st);
    for (int d = 0; d < 2; d++) {
        st->f[d].win_scale = -1;
        st->f[d].window = 0xFFFFFFFFu;
        st->f[d].valid_bif = 1;
        st->f[d].ordered = 1;
    }
}

static void free_stream(stream_t *st)
{
    for (int d = 0; d < 2; d++) {
        free(st->f[d].segs);
        free(st->f[d].ts_sent.keys);
        free(st->f[d].ts_sent.vals);
        free(st->f[d].ts_echoed.keys);
        free(st->f[d].ts_echoed.vals);
    }
}

/* One packet: Wireshark's tcp_analyze_sequence_number (fwd = this packet's flow). */
static int analyse(stream_t *st, flow_t *fw, flow_t *rv, int64_t i, const tcpseq_args *a,
                   uint32_t *fl)
{
    uint32_t seq = a->seq[i], ack = a->ack[i], seglen = a->seglen[i], frame = a->frame[i];
    uint32_t window = a->win[i];
    uint16_t flags = a->flags[i];
    int64_t now = a->t[i];

    if (flags & TH_ACK)
        rv->valid_bif = 1;

    int zwp = 0;
    if (seglen == 1 && seq == fw->nextseq && rv->window == 0) {
        *fl |= F_ZERO_WINDOW_PROBE | F_ANALYSED;
        zwp = 1;
    }
    if (!zwp) {
        if (window == 0 && (flags & (TH_RST | TH_FIN | TH_SYN)) == 0)
            *fl |= F_ZERO_WINDOW | F_ANALYSED;
        if (fw->nextseq && GT_SEQ(seq, fw->nextseq) && (flags & TH_RST) == 0) {
            *fl |= F_LOST_SEGMENT | F_ANALYSED;
            fw->valid_bif = 0;
        }
        if (seglen <= 1 && seq == fw->nextseq - 1 && (flags & (TH_SYN | TH_FIN | TH_RST)) == 0)
            *fl |= F_KEEP_ALIVE | F_ANALYSED;
        int plain = (flags & (TH_SYN | TH_FIN | TH_RST)) == 0;
        int same = seglen == 0 && seq == fw->nextseq && ack == fw->lastack && plain;
        if (same && window && window != fw->window)
            *fl |= F_WINDOW_UPDATE | F_ANALYSED;
        if (seglen > 0 && rv->win_scale != -1 && plain) {
            int shift = rv->is_first_ack ? 0 : (rv->win_scale == -2 ? 0 : rv->win_scale);
            if (seq + seglen == rv->lastack + (rv->window << shift))
                *fl |= F_WINDOW_FULL | F_ANALYSED;
        }
        int done = 0;
        if (same && window && window == fw->window && (rv->lastsegmentflags & F_KEEP_ALIVE)) {
            *fl |= F_KEEP_ALIVE_ACK | F_ANALYSED;
            done = 1;
        }
        if (!done && same && window == 0 && window == fw->window
            && (rv->lastsegmentflags & F_ZERO_WINDOW_PROBE)) {
            *fl |= F_ZERO_WINDOW_PROBE_ACK | F_ANALYSED;
            done = 1;
        }
        if (!done && same && window && window == fw->window) {
            fw->dupacknum = fw->dupacknum == 0xFFFFFFFFu ? 1 : fw->dupacknum + 1;
            *fl |= F_DUPLICATE_ACK | F_ANALYSED;
            OUT(dupack_num, i, fw->dupacknum);
            OUT(dupack_frame, i, fw->lastnondupack);
        }
    }
    /* finished_fwd */
    if (ack != fw->lastack) {
        fw->lastnondupack = frame;
        fw->dupacknum = 0;
    }
    if (rv->maxseqtobeacked && GT_SEQ(ack, rv->maxseqtobeacked) && (flags & TH_ACK)) {
        *fl |= F_ANALYSED;
        if (LT_SEQ(rv->maxseqtobeacked, rv->nextseq)) {
            rv->maxseqtobeacked = rv->nextseq;
            *fl |= F_ACK_LOST_SEGMENT;
        } else {
            if (rv->dupacknum == 0)
                *fl |= F_ACK_LOST_SEGMENT;
            rv->dupacknum = 0xFFFFFFFFu;
        }
    }
    if ((seglen > 0 || (flags & (TH_SYN | TH_FIN))) && !(*fl & F_KEEP_ALIVE)) {
        int not_advanced = fw->nextseq && LT_SEQ(seq, fw->nextseq);
        if (seglen > 1 && fw->nextseq - 1 == seq)
            not_advanced = 0;
        if (seglen > 0 && rv->lastack && LE_SEQ(seq + seglen, rv->lastack)) {
            *fl |= F_SPURIOUS_RETRANSMISSION | F_ANALYSED;
        } else if (not_advanced && rv->dupacknum >= 2
                   && rv->lastack == seq && (uint64_t)(now - rv->lastacktime) < 20000000u) {
            *fl |= F_FAST_RETRANSMISSION | F_ANALYSED;
        } else {
            uint64_t thres = st->ts_first_rtt ? (uint64_t)st->ts_first_rtt : 3000000u;
            uint32_t end = seq + seglen + ((flags & (TH_SYN | TH_FIN)) ? 1 : 0);
            if (not_advanced && (uint64_t)(now - fw->nextseqtime) < thres && fw->nextseq != end) {
                *fl |= F_OUT_OF_ORDER | F_ANALYSED;
            } else if (not_advanced) {
                *fl |= F_RETRANSMISSION | F_ANALYSED;
                if (fw->len) {
                    OUT(rto, i, now - fw->segs[fw->head].t);
                    OUT(rto_frame, i, fw->segs[fw->head].frame);
                } else {
                    OUT(rto, i, now - fw->nextseqtime);
                    OUT(rto_frame, i, fw->nextseqframe);
                }
            }
        }
    }
    /* finished_checking_retransmission_type */
    uint32_t nextseq = seq + seglen;
    if ((seglen || (flags & (TH_SYN | TH_FIN))) && fw->len < MAX_UNACKED) {
        if (flags & (TH_SYN | TH_FIN))
            nextseq += 1;
        seg_t s = {seq, nextseq, frame, 0, now};
        s.resent = fw->max_end_set && LT_SEQ(seq, fw->max_end);
        if (push_segment(fw, s))
            return -1;
    }
    if (seglen || (flags & (TH_SYN | TH_FIN))) {
        uint32_t end = seq + seglen + ((flags & (TH_SYN | TH_FIN)) ? 1 : 0);
        if (!fw->max_end_set || GT_SEQ(end, fw->max_end))
            fw->max_end = end;
        fw->max_end_set = 1;
    }
    if ((GT_SEQ(nextseq, fw->nextseq) || !fw->nextseq) && !zwp) {
        fw->nextseq = nextseq;
        fw->nextseqframe = frame;
        fw->nextseqtime = now;
    }
    if ((seq == fw->maxseqtobeacked || !fw->maxseqtobeacked) && !zwp)
        fw->maxseqtobeacked = fw->nextseq;
    fw->window = window;
    fw->lastack = ack;
    fw->lastacktime = now;
    fw->lastsegmentflags = *fl & F_ANALYSED ? (*fl & ~F_ANALYSED) : 0;

    /* remove what this ACK acknowledges from the other flow's list */
    uint32_t acked_frame = 0;
    int64_t rtt = 0;
    int matched = 0, resent = 0;
    ack_segments(rv, ack, now, &acked_frame, &rtt, &matched, &resent);
    if (matched) {
        *fl |= F_ANALYSED;
        OUT(acks_frame, i, acked_frame);
        OUT(ack_rtt, i, rtt);
        OUT(karn, i, !resent);
    }

    /* bytes in flight (payload-based, Wireshark's default), less the peer's SACKed bytes */
    if (seglen != 0 && fw->len && fw->valid_bif) {
        uint32_t in_flight = flight_span(fw);
        if (rv->num_sack)
            in_flight -= rv->sack_bytes;
        if (in_flight > 0 && in_flight < 2000000000u) {
            *fl |= F_ANALYSED;
            OUT(bytes_in_flight, i, in_flight - ((flags & (TH_SYN | TH_FIN)) ? 1 : 0));
        }
        if (flags & TH_PUSH) {
            fw->push_bytes_sent = fw->push_set_last ? seglen : fw->push_bytes_sent + seglen;
            fw->push_set_last = 1;
        } else if (fw->push_set_last) {
            fw->push_bytes_sent = seglen;
            fw->push_set_last = 0;
        } else {
            fw->push_bytes_sent += seglen;
        }
        *fl |= F_ANALYSED;
        OUT(push_bytes, i, fw->push_bytes_sent);
    }
    return 0;
}

/* pcapstats' resent for one analysed segment of flow fw at relative seq `rel` ending `len`
 * later (SYN/FIN count 1): its start below the highest end its direction had sent, on a line
 * where each step from the last segment is the signed 32-bit difference (resent.py's
 * resent_segments, one segment at a time). */
static uint8_t resent_on_line(flow_t *fw, uint32_t rel, uint32_t len)
{
    uint8_t resent = 0;
    if (fw->rs_started) {
        fw->rs_pos += (int32_t)(rel - fw->rs_prev);
        resent = fw->rs_pos < fw->rs_max;
    } else {
        fw->rs_started = 1;
        fw->rs_pos = 0;
        fw->rs_max = INT64_MIN;     /* nothing sent before the first */
    }
    fw->rs_prev = rel;
    if (fw->rs_pos + (int64_t)len > fw->rs_max)
        fw->rs_max = fw->rs_pos + (int64_t)len;
    return resent;
}

/* ts_rtt of packet i (fw its flow, rv the peer's): on its first echo of a TSecr value, the
 * time since the peer first sent that TSval (none if the peer had not); and its own TSval's
 * first sending remembered.  Returns -1 when out of memory. */
static int timestamp_rtt(flow_t *fw, flow_t *rv, int64_t i, const tcpseq_args *a)
{
    int64_t now = a->t[i];
    uint32_t tsecr = a->tsecr[i];
    if ((a->flags[i] & TH_ACK) && tsecr != 0 && !(fw->tsecr_seen && tsecr == fw->last_tsecr)) {
        int first = ts_add(&fw->ts_echoed, tsecr, 0);
        if (first < 0)
            return -1;
        int64_t sent;
        if (first && ts_get(&rv->ts_sent, tsecr, &sent)) {
            OUT(ts_rtt, i, now - sent);
            OUT(ts_ok, i, 1);
        }
        fw->last_tsecr = tsecr;
        fw->tsecr_seen = 1;
    }
    if (fw->tsval_seen && a->tsval[i] == fw->last_tsval)
        return 0;
    fw->last_tsval = a->tsval[i];
    fw->tsval_seen = 1;
    return ts_add(&fw->ts_sent, a->tsval[i], now) < 0 ? -1 : 0;
}

static void count(counts_t *c, int d, uint32_t fl, uint32_t seglen, uint8_t resent)
{
    uint64_t *k = c->c[d];
    k[0]++;
    k[1] += seglen;
    k[2] += resent;
    k[3] += (fl & 0x0007) != 0;
    for (int b = 1; b < 15; b++)
        k[3 + b] += (fl >> b) & 1;
}

void *ps_tcpseq_open(void)
{
    return calloc(1, sizeof(tcpseq_t));
}

void ps_tcpseq_close(void *handle)
{
    tcpseq_t *h = handle;
    if (!h)
        return;
    for (int64_t s = 0; s < h->n_slot; s++)
        if (h->slot[s] >= 0)
            free_stream(&h->states[h->slot[s]]);
    free(h->slot);
    free(h->states);
    free(h->free_slots);
    free(h->counts);
    free(h);
}

/* Room for stream ids below `n`. */
static int grow_slots(tcpseq_t *h, int64_t n)
{
    if (n <= h->n_slot)
        return 0;
    int64_t cap = h->n_slot ? h->n_slot : 64;
    while (cap < n)
        cap *= 2;
    int32_t *slot = realloc(h->slot, (size_t)cap * sizeof(int32_t));
    if (slot)
        h->slot = slot;
    counts_t *counts = realloc(h->counts, (size_t)cap * sizeof(counts_t));
    if (counts)
        h->counts = counts;
    if (!slot || !counts)
        return -1;
    for (int64_t s = h->n_slot; s < cap; s++)
        slot[s] = -1;
    memset(counts + h->n_slot, 0, (size_t)(cap - h->n_slot) * sizeof(counts_t));
    h->n_slot = cap;
    return 0;
}

/* The state of stream sid, made when it is new. */
static stream_t *state_of(tcpseq_t *h, int64_t sid)
{
    if (h->slot[sid] < 0) {  /* a new stream: a free state, or a new one */
        if (h->n_free) {
            h->slot[sid] = h->free_slots[--h->n_free];
        } else {
            if (h->n_states == h->cap_states) {
                int32_t cap = h->cap_states ? h->cap_states * 2 : 64;
                stream_t *p = realloc(h->states, (size_t)cap * sizeof(stream_t));
                int32_t *q = realloc(h->free_slots, (size_t)cap * sizeof(int32_t));
                if (p)
                    h->states = p;
                if (q)
                    h->free_slots = q;
                if (!p || !q)
                    return NULL;
                h->cap_states = cap;
            }
            h->slot[sid] = h->n_states++;
        }
        init_stream(&h->states[h->slot[sid]]);
    }
    return &h->states[h->slot[sid]];
}

/* Analyse the next a->n TCP packets (frame order), each stream's state carried from the
 * calls before; with a->whole, a stream's state is freed after its last packet here. */
int64_t ps_tcpseq_feed(void *handle, const tcpseq_args *a)
{
    tcpseq_t *h = handle;
    int64_t n = a->n, top = 0;
    int64_t *last = NULL;
    for (int64_t i = 0; i < n; i++)
        if (a->stream[i] >= top)
            top = a->stream[i] + 1;
    if (grow_slots(h, top))
        return -1;
    if (a->whole) {
        last = malloc((size_t)(top ? top : 1) * sizeof(int64_t));
        if (!last)
            return -1;
        for (int64_t i = 0; i < n; i++)
            last[a->stream[i]] = i;
    }
    int64_t rc = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t sid = a->stream[i];
        stream_t *st = state_of(h, sid);
        if (!st) {
            rc = -1;
            break;
        }
        int d = a->dir[i];
        flow_t *fw = &st->f[d], *rv = &st->f[1 - d];
        uint16_t flags = a->flags[i];
        uint32_t seq = a->seq[i], ack = a->ack[i];
        uint32_t fl = 0;
        uint8_t resent = 0;

        if ((flags & (TH_SYN | TH_ACK)) == TH_SYN && fw->base_set && seq == fw->base_seq) {
            fw->nextseq = fw->maxseqtobeacked;  /* a retransmitted SYN (another seq splits the stream) */
            fl |= F_ANALYSED;
        }
        if ((flags & (TH_SYN | TH_ACK)) == (TH_SYN | TH_ACK) && fw->base_set && seq != fw->base_seq) {
            fw->base_seq = seq;
            fl |= F_REUSED_PORTS | F_ANALYSED;
        }
        fw->num_sack = 0;
        fw->sack_bytes = 0;

        uint32_t window_size = a->win[i];
        if (a->analysed[i]) {
            if (!fw->base_set) {
                fw->base_seq = (flags & TH_SYN) ? seq : seq - 1;
                fw->base_set = 1;
            }
            if (!rv->base_set && (flags & TH_ACK)) {
                rv->base_seq = ack - 1;
                rv->base_set = 1;
            }
            if (analyse(st, fw, rv, i, a, &fl)) {
                rc = -1;
                break;
            }
            seq -= fw->base_seq;
            if (flags & TH_ACK)
                ack -= rv->base_seq;
            if (!(flags & TH_SYN) && fw->win_scale >= 0)
                window_size <<= fw->win_scale;
            uint32_t synfin = (flags & (TH_SYN | TH_FIN)) ? 1 : 0;
            OUT(nxtseq, i, seq + a->seglen[i] + synfin);
            if (a->seglen[i] || synfin)
                resent = resent_on_line(fw, seq, a->seglen[i] + synfin);
        }
        OUT(rel_seq, i, seq);
        OUT(rel_ack, i, ack);
        OUT(window_size, i, window_size);
        OUT(resent, i, resent);
        if (!(flags & TH_SYN))
            OUT(scalefactor, i, fw->win_scale >= 0 ? (1 << fw->win_scale) : fw->win_scale);

        if (flags & TH_SYN) {
            if (!(flags & TH_ACK))
                st->ts_mru_syn = a->t[i];
            fw->is_first_ack = 1;
        }
        if ((flags & (TH_SYN | TH_ACK)) == TH_ACK) {
            if (st->ts_mru_syn && !st->ts_first_rtt)
                st->ts_first_rtt = a->t[i] - st->ts_mru_syn;
            fw->is_first_ack = 0;
        }
        /* this packet's options count from the next packet on */
        if (a->wscale[i] >= 0)
            fw->win_scale = a->wscale[i] > 14 ? 14 : a->wscale[i];
        int k = a->sack_count[i] < 3 ? a->sack_count[i] : 3;
        for (int j = 0; j < k; j++)
            fw->sack_bytes += a->sack_re[i * 3 + j] - a->sack_le[i * 3 + j];
        fw->num_sack = (uint8_t)k;
        if ((fl & F_ANALYSED) && st->ts_first_rtt)
            OUT(initial_rtt, i, st->ts_first_rtt);
        if (flags & TH_SYN) {  /* window scaling is used only when both SYNs offer it */
            if (fw->win_scale == -1) {
                fw->win_scale = -2;
                rv->win_scale = -2;
            } else if ((flags & TH_ACK) && rv->win_scale == -2) {
                fw->win_scale = -2;
            }
        }
        OUT(aflags, i, fl);
        if (a->tsval && a->has_ts[i] && timestamp_rtt(fw, rv, i, a)) {
            rc = -1;
            break;
        }
        count(&h->counts[sid], d, fl, a->seglen[i], resent);

        if (last && last[sid] == i) {
            free_stream(st);
            h->free_slots[h->n_free++] = h->slot[sid];
            h->slot[sid] = -1;
        }
    }
    free(last);
    return rc;
}

/* The counts of every stream and direction with packets so far, a row each in stream and
 * direction order: stream, direction, then the N_COUNTS counts.  Returns the rows, or (when
 * `out` holds fewer than that, `room` rows) their number without writing them. */
int64_t ps_tcpseq_counts(void *handle, int64_t room, int64_t *out)
{
    tcpseq_t *h = handle;
    int64_t rows = 0;
    for (int64_t s = 0; s < h->n_slot; s++)
        for (int d = 0; d < 2; d++)
            rows += h->counts[s].c[d][0] != 0;
    if (rows > room)
        return rows;
    for (int64_t s = 0; s < h->n_slot; s++) {
        for (int d = 0; d < 2; d++) {
            if (!h->counts[s].c[d][0])
                continue;
            *out++ = s;
            *out++ = d;
            for (int k = 0; k < N_COUNTS; k++)
                *out++ = (int64_t)h->counts[s].c[d][k];
        }
    }
    return rows;
}
