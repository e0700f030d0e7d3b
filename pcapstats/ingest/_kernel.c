/*
 * pcapstats ingest kernel: the three per-packet loops of the reader, in C because they are
 * sequential (a record's length says where the next one starts) or branchy (link, VLAN, IPv6
 * extension headers) and run once per packet.  Everything else -- file headers, error
 * messages, timestamps, addresses, streams -- stays in Python/numpy.
 *
 * pcapstats/ingest/kernel_numpy.py implements the same three functions in numpy as the
 * fallback when this file could not be compiled; tests run both on the same captures.
 *
 * Safety: every read is bounds-checked against the buffer length (or the record's captured
 * length); the input is untrusted and fuzzed.  The functions only write into the caller's
 * arrays, whose capacity is passed in.
 *
 * It is loaded with ctypes; the Python module init below only makes it importable so that
 * the loader can find the shared object.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- status codes (mirrored in contract.py) ---- */
enum {
    ST_OK = 0,
    ST_TRUNCATED = 1,         /* the file ends inside a record: stop, keep what was read */
    ST_ABSURD_LENGTH = 2,     /* a record/block length no real capture has */
    ST_TRAILER_MISMATCH = 3,  /* pcapng block trailer != header length */
    ST_BAD_BLOCK = 4,         /* pcapng block length < 12 or not a multiple of 4, or too short for its type */
    ST_UNKNOWN_INTERFACE = 5, /* packet block names an interface not described in its section */
    ST_TOO_MANY_INTERFACES = 6,
    ST_BAD_SECTION = 7,       /* section header block with a bad byte-order magic */
    ST_CAPACITY = 8,          /* more records than the caller made room for (a bug, not the file's) */
};

#define ABSURD_RECORD (64u * 1024u * 1024u)

static inline uint16_t rd16(const uint8_t *p, int sw) {
    uint16_t v = (uint16_t)(p[0] | (p[1] << 8));
    return sw ? (uint16_t)((v >> 8) | (v << 8)) : v;
}
static inline uint32_t rd32(const uint8_t *p, int sw) {
    uint32_t v = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    return sw ? __builtin_bswap32(v) : v;
}
static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* status[0] = code, status[1] = file offset of the offending record, status[2] = its packet number;
 * the pcapng walk also sets status[3] = 1 when the section it stopped in is byte-swapped */
static void set_status(int64_t *status, int64_t code, int64_t off, int64_t n) {
    status[0] = code; status[1] = off; status[2] = n + 1;
}

/* ---- classic pcap: 16-byte record headers back to back after the 24-byte file header ---- */
/* Records lie one after another, so asking for the bytes a little ahead of the walk (and of
 * the decoder, which knows the next packets' offsets) overlaps the memory latency of the next
 * records with this one's work: on big.pcap the walk went from 71 to 44 ms and the decoding
 * from 62 to 38 ms (streaming pass; 512-8192 bytes and 4-32 packets tried).  A prefetch
 * never faults, also past the end of the map. */
#define WALK_PREFETCH_BYTES 4096
#define PREFETCH_AHEAD 16

int64_t ps_walk_pcap(const uint8_t *buf, int64_t len, int64_t pos, int32_t swapped, int32_t nsec,
                     uint32_t max_caplen, int64_t cap, int64_t *data_off, uint32_t *caplen,
                     uint32_t *origlen, int64_t *ts_ns, int64_t *status)
{
    int64_t n = 0;
    const int64_t frac = nsec ? 1 : 1000;
    set_status(status, ST_OK, pos, 0);
    while (pos < len) {
        if (len - pos < 16) { set_status(status, ST_TRUNCATED, pos, n); return n; }
        const uint8_t *h = buf + pos;
        __builtin_prefetch(h + WALK_PREFETCH_BYTES);
        uint32_t cl = rd32(h + 8, swapped);
        if (cl > max_caplen) { set_status(status, ST_ABSURD_LENGTH, pos, n); return n; }
        if ((int64_t)cl > len - pos - 16) { set_status(status, ST_TRUNCATED, pos, n); return n; }
        if (n >= cap) { set_status(status, ST_CAPACITY, pos, n); return n; }
        data_off[n] = pos + 16;
        caplen[n] = cl;
        origlen[n] = rd32(h + 12, swapped);
        ts_ns[n] = (int64_t)rd32(h, swapped) * 1000000000LL + (int64_t)rd32(h + 4, swapped) * frac;
        n++;
        pos += 16 + (int64_t)cl;
    }
    return n;
}

/* ---- pcapng: blocks; sections set byte order; interfaces numbered per section ---- */
#define BT_SHB 0x0A0D0D0Au
#define BT_IDB 1u
#define BT_OPB 2u
#define BT_SPB 3u
#define BT_EPB 6u

/*
 * Interface table (filled here, capacity if_cap): link type, snaplen, the raw if_tsresol byte
 * (default 6), if_tsoffset seconds, and the interface's id within its section.
 * Packets get the table index of their interface (iface) and the raw 64-bit timestamp in
 * interface units (ts_raw); formats.py converts units to nanoseconds per interface.
 */
int64_t ps_walk_pcapng(const uint8_t *buf, int64_t len, int64_t cap, int64_t *data_off,
                       uint32_t *caplen, uint32_t *origlen, uint64_t *ts_raw, uint32_t *iface,
                       int64_t if_cap, int32_t *if_linktype, uint32_t *if_snaplen,
                       uint8_t *if_tsresol, int64_t *if_tsoffset, uint32_t *if_local_id,
                       int64_t *state, int64_t *status)
{
    /* state carries the walk across windows: [0] next block offset, [1] section byte-swapped,
     * [2] table index of the section's first interface, [3] interfaces so far.  The walk stops
     * with ST_TRUNCATED at the first block that does not end before len (the window's end). */
    int64_t n = 0, pos = state[0], n_if = state[3], section_first_if = state[2];
    int sw = (int)state[1];
    set_status(status, ST_OK, pos, 0);
    while (pos < len) {
        if (len - pos < 12) { set_status(status, ST_TRUNCATED, pos, n); break; }
        const uint8_t *b = buf + pos;
        __builtin_prefetch(b + WALK_PREFETCH_BYTES);
        uint32_t type_le = rd32(b, 0);
        if (type_le == BT_SHB) {
            if (len - pos < 28) { set_status(status, ST_TRUNCATED, pos, n); break; }
            uint32_t magic = rd32(b + 8, 0);
            if (magic == 0x1A2B3C4Du) sw = 0;
            else if (magic == 0x4D3C2B1Au) sw = 1;
            else { set_status(status, ST_BAD_SECTION, pos, n); break; }
            section_first_if = n_if;
        }
        uint32_t type = rd32(b, sw);
        uint32_t blen = rd32(b + 4, sw);
        if (blen < 12 || (blen & 3u)) { set_status(status, ST_BAD_BLOCK, pos, n); break; }
        if (blen > ABSURD_RECORD) { set_status(status, ST_ABSURD_LENGTH, pos, n); break; }
        if ((int64_t)blen > len - pos) { set_status(status, ST_TRUNCATED, pos, n); break; }
        if (rd32(b + blen - 4, sw) != blen) { set_status(status, ST_TRAILER_MISMATCH, pos, n); break; }
        const int64_t body_end = (int64_t)blen - 4;  /* relative to b: first byte of the trailer */

        if (type == BT_SHB) {
            if (blen < 28) { set_status(status, ST_BAD_BLOCK, pos, n); break; }
        } else if (type == BT_IDB) {
            if (blen < 20) { set_status(status, ST_BAD_BLOCK, pos, n); break; }
            if (n_if >= if_cap) { set_status(status, ST_TOO_MANY_INTERFACES, pos, n); break; }
            if_linktype[n_if] = rd16(b + 8, sw);
            if_snaplen[n_if] = rd32(b + 12, sw);
            if_tsresol[n_if] = 6;
            if_tsoffset[n_if] = 0;
            if_local_id[n_if] = (uint32_t)(n_if - section_first_if);
            int64_t o = 16;
            while (o + 4 <= body_end) {             /* options: code, length, value padded to 4 */
                uint16_t code = rd16(b + o, sw), olen = rd16(b + o + 2, sw);
                if (code == 0) break;
                if (o + 4 + olen > body_end) break;  /* malformed option list: keep what we have */
                if (code == 9 && olen >= 1) if_tsresol[n_if] = b[o + 4];
                if (code == 14 && olen >= 8)
                    if_tsoffset[n_if] = (int64_t)((uint64_t)rd32(b + o + 4, sw) |
                                                  ((uint64_t)rd32(b + o + 8, sw) << 32));
                o += 4 + ((olen + 3) & ~3);
            }
            if (sw) {  /* 64-bit option values are in section byte order: fix the word order */
                uint64_t v = (uint64_t)if_tsoffset[n_if];
                if_tsoffset[n_if] = (int64_t)((v >> 32) | (v << 32));
            }
            n_if++;
        } else if (type == BT_EPB || type == BT_OPB || type == BT_SPB) {
            uint32_t id, cl, ol;
            uint64_t ts = 0;
            int64_t data;
            if (type == BT_SPB) {
                if (blen < 16) { set_status(status, ST_BAD_BLOCK, pos, n); break; }
                id = 0;
                ol = rd32(b + 8, sw);
                data = 12;
                int64_t room = body_end - data;
                cl = ol;
                if (section_first_if < n_if && if_snaplen[section_first_if] &&
                    cl > if_snaplen[section_first_if]) cl = if_snaplen[section_first_if];
                if ((int64_t)cl > room) cl = (uint32_t)room;
            } else {
                if (blen < 32) { set_status(status, ST_BAD_BLOCK, pos, n); break; }
                id = (type == BT_EPB) ? rd32(b + 8, sw) : rd16(b + 8, sw);
                ts = ((uint64_t)rd32(b + 12, sw) << 32) | rd32(b + 16, sw);
                cl = rd32(b + 20, sw);
                ol = rd32(b + 24, sw);
                data = 28;
                if ((int64_t)cl > body_end - data) { set_status(status, ST_ABSURD_LENGTH, pos, n); break; }
            }
            if ((int64_t)id >= n_if - section_first_if) {
                set_status(status, ST_UNKNOWN_INTERFACE, pos, n); break;
            }
            if (n >= cap) { set_status(status, ST_CAPACITY, pos, n); break; }
            data_off[n] = pos + data;
            caplen[n] = cl;
            origlen[n] = ol;
            ts_raw[n] = ts;
            iface[n] = (uint32_t)(section_first_if + id);
            n++;
        }
        /* any other block type (NRB, ISB, DSB, custom, ...) is skipped */
        pos += blen;
    }
    state[0] = pos; state[1] = sw; state[2] = section_first_if; state[3] = n_if;
    status[3] = sw;
    return n;
}

/* ---- field decoding: link layer -> IPv4/IPv6 (+ extension headers) -> TCP/UDP/ICMP ---- */

/* Per-packet decode status (mirrored in contract.py): how far the decode got.  DS_MALFORMED:
 * the network header is there but is not what its type says (IPv4: version nibble not 4 or a
 * header length under 20; IPv6: version nibble not 6).  DS_END_*: the packet ended inside that
 * header, or where it should have begun -- its captured bytes ran out, or for what follows the
 * IP header, the IP length: END_LINK the link type's own header (Ethernet, SLL, SLL2, null,
 * raw IP's first byte, radiotap), END_WLAN the 802.11 header, END_LLC its LLC/SNAP header,
 * END_TAG a VLAN tag (vlan_count: the whole ones), END_IP the IP header, END_L4 what follows
 * a decoded IP header: the IPv6 extension headers or the TCP, UDP or ICMP header. */
enum { DS_OK = 0, DS_UNKNOWN_LINKTYPE = 1, DS_MALFORMED = 2, DS_END_LINK = 3, DS_END_WLAN = 4,
       DS_END_LLC = 5, DS_END_TAG = 6, DS_END_IP = 7, DS_END_L4 = 8 };
/* l4 kinds */
enum { L4_NONE = 0, L4_ICMP = 1, L4_TCP = 6, L4_UDP = 17 };
/* tcp_opts bits */
enum { OPT_MSS = 1, OPT_WS = 2, OPT_SACK_PERM = 4, OPT_TS = 8 };
/* ip_flags bits */
enum { IPF_DF = 1, IPF_MF = 2, IPF_FRAGMENT = 4 };

typedef struct {
    /* in */
    const uint8_t *buf;
    int64_t n;
    const int64_t *data_off;
    const uint32_t *caplen;
    const uint32_t *origlen;
    const uint16_t *linktype;
    /* window scratch: n x 16 bytes each (IPv4 in the first 4, the rest left 0): the packet's
     * addresses, and those of the header quoted in an ICMP error */
    uint8_t *ip_src;
    uint8_t *ip_dst;
    uint8_t *q_src;
    uint8_t *q_dst;
    /* out, each n long */
    uint8_t *status;
    uint16_t *vlan_id;
    uint8_t *vlan_count;
    uint8_t *ip_version;
    uint16_t *ip_hdr_len;
    uint32_t *ip_len;
    uint8_t *ip_proto;
    uint8_t *ip_ttl;
    uint32_t *ip_id;
    uint8_t *ip_flags;
    uint16_t *ip_frag_offset;
    uint8_t *l4;
    uint8_t *l4_quoted;        /* 6 or 17 when an ICMP error quotes a TCP/UDP header */
    uint16_t *srcport;
    uint16_t *dstport;
    uint32_t *tcp_seq;
    uint32_t *tcp_ack;
    uint8_t *tcp_hdr_len;
    uint16_t *tcp_flags;
    uint16_t *tcp_win;
    uint8_t *tcp_opts;
    uint16_t *tcp_mss;
    uint8_t *tcp_ws;
    uint32_t *tcp_tsval;
    uint32_t *tcp_tsecr;
    uint32_t *tcp_len;
    uint8_t *tcp_sack_count;
    int32_t *tcp_sack_row;     /* row of this packet's blocks in the compact table, -1 if none */
    uint16_t *udp_length;
    uint8_t *icmp_type;
    uint8_t *icmp_code;
    uint8_t *icmp_echo;
    uint16_t *icmp_ident;
    uint16_t *icmp_seq;
    uint16_t *payload_rel;     /* payload offset from the packet's first byte (valid where l4) */
    uint32_t *payload_len;
    uint8_t *wlan_kind;        /* an 802.11 frame that carries no IP packet: which kind (WLAN_*) */
    uint8_t *rt_present;       /* radio fields found: RT_SIGNAL | RT_RATE | RT_FREQ | RT_WLAN */
    int8_t *rt_signal;         /* dBm antenna signal */
    uint16_t *rt_rate;         /* Rate field (500 kbit/s), or RT_MCS_RATE + an 802.11n MCS code */
    uint16_t *rt_freq;         /* channel frequency, MHz */
    uint16_t *wlan_fc;         /* 802.11 frame control, its first byte high (as wlan.fc) */
    uint16_t *ethertype;       /* the type the link layer handed on (after VLAN tags; see below) */
    uint8_t *vlan_ad;          /* bit k: VLAN tag k, outermost first, was an 802.1ad S-tag */
    uint16_t *l3_offset;       /* start of the network header, or of the link header it ended in */
    /* the compact SACK table, shared by all windows: rows of 4 (left, right) pairs */
    uint32_t *sack_table;
    int64_t sack_cap;
    int64_t *sack_used;        /* in/out: rows filled so far */
} decode_args;

static inline void set_l3_offset(decode_args *a, int64_t i, int64_t at) {
    a->l3_offset[i] = (uint16_t)(at > 0xFFFF ? 0xFFFF : at);
}

#define ETH_IPV4 0x0800
#define ETH_IPV6 0x86DD

static int is_vlan_ethertype(uint16_t t) { return t == 0x8100 || t == 0x88A8 || t == 0x9100; }

/* Walk VLAN tags starting at p[off] whose ethertype is *et; returns the L3 offset or -1 (a tag
 * cut: DS_END_TAG). */
static int64_t skip_vlans(const uint8_t *p, int64_t cl, int64_t off, uint16_t *et,
                          decode_args *a, int64_t i)
{
    while (is_vlan_ethertype(*et)) {
        if (off + 4 > cl) {          /* cut: where it starts, and the TPID that announced it */
            a->status[i] = DS_END_TAG; set_l3_offset(a, i, off); a->ethertype[i] = *et;
            return -1;
        }
        if (a->vlan_count[i] == 0) a->vlan_id[i] = be16(p + off) & 0x0FFF;
        if (*et == 0x88A8 && a->vlan_count[i] < 8)    /* an 802.1ad S-tag, by its index */
            a->vlan_ad[i] |= (uint8_t)(1u << a->vlan_count[i]);
        if (a->vlan_count[i] < 255) a->vlan_count[i]++;
        *et = be16(p + off + 2);
        off += 4;
    }
    return off;
}

/* ---- IEEE 802.11 (link types 105 and 127) ----
 *
 * Radiotap (127) is read as Wireshark 4.0 reads it (its radiotap iterator and dissector): the
 * presence words, each with bit 31 set followed by another; then the fields in bit order, each
 * aligned to its natural boundary counted from the start of the header; bit 29 starts another
 * radiotap namespace at the next word, bit 30 a vendor namespace (6-byte header with the length
 * of its data, which is skipped).  A field it does not know in the radiotap namespace (bits 25,
 * 28, any bit >= 32 without a new namespace) or one that runs past the header length ends the
 * fields; a word with both bits 29 and 30 means no fields at all; either way the 802.11 frame
 * still starts at the header length.  A header length under 8 or past the captured bytes is
 * malformed (no 802.11 frame); another version has no fields.  The first signal, rate and
 * channel fields found are kept; the last Flags field says whether the frame ends in an FCS,
 * any says whether the 802.11 header is padded to 4 bytes; a 0-length-PSDU field says there is
 * no frame at all.
 */

/* 802.11 frames that carry no IP packet (wlan_kind; 0: none, or an 802.11 data frame read on) */
enum { WLAN_MGMT = 1, WLAN_CTRL = 2, WLAN_EXTENSION = 3, WLAN_NULL = 4, WLAN_PROTECTED = 5,
       WLAN_AMSDU = 6, WLAN_OTHER_VERSION = 7, WLAN_NO_PSDU = 8 };
/* rt_present bits (RT_WLAN: an 802.11 frame control of protocol version 0 was read, in
 * wlan_fc); rt_rate codes from RT_MCS_RATE on are 802.11n MCS fields:
 * RT_MCS_RATE + 4 * index + 2 * (40 MHz) + (short guard interval) */
enum { RT_SIGNAL = 1, RT_RATE = 2, RT_FREQ = 4, RT_WLAN = 8 };
#define RT_MCS_RATE 256
#define RT_NS_RADIOTAP 29
#define RT_NS_VENDOR 30
#define RT_EXT 31

/* Alignment and size of the radiotap namespace's fields by presence bit, as Wireshark 4.0 has
 * them (XChannel, bit 18, by its override); alignment 0: a bit it does not know */
static const uint8_t RT_ALIGN[29] = {8, 1, 1, 2, 2, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 4, 1,
                                     4, 2, 8, 2, 2, 0, 1, 2, 0};
static const uint8_t RT_SIZE[29] = {8, 1, 1, 4, 2, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 8, 3,
                                    8, 12, 12, 12, 12, 0, 1, 4, 0};

typedef struct { int fcs, datapad, no_psdu; } rt_flags;

/* One field of a radiotap namespace (bit, at p[0..]) */
static inline __attribute__((always_inline)) void radiotap_field(int bit, const uint8_t *v, rt_flags *f, decode_args *a,
                                  int64_t i)
{
    uint8_t *have = &a->rt_present[i];
    switch (bit) {
    case 1:                                     /* Flags: FCS at the end, header padding */
        f->fcs = (v[0] & 0x10) != 0;
        if (v[0] & 0x20) f->datapad = 1;
        break;
    case 2:                                     /* Rate, in 500 kbit/s */
        if (!(*have & RT_RATE)) { a->rt_rate[i] = v[0]; *have |= RT_RATE; }
        break;
    case 3:                                     /* Channel: frequency, flags */
        if (!(*have & RT_FREQ)) { a->rt_freq[i] = rd16(v, 0); *have |= RT_FREQ; }
        break;
    case 5:                                     /* dBm antenna signal */
        if (!(*have & RT_SIGNAL)) { a->rt_signal[i] = (int8_t)v[0]; *have |= RT_SIGNAL; }
        break;
    case 19:                                    /* MCS: known, flags, index */
        /* a rate when the bandwidth, index and guard interval are known and the index is one of
         * the 77 of 802.11n (Wireshark's radiotap.datarate) */
        if ((v[0] & 0x07) == 0x07 && v[2] <= 76 && !(*have & RT_RATE)) {
            a->rt_rate[i] = (uint16_t)(RT_MCS_RATE + 4 * v[2] + ((v[1] & 0x03) == 1 ? 2 : 0) +
                                       ((v[1] & 0x04) ? 1 : 0));
            *have |= RT_RATE;
        }
        break;
    case 26:                                    /* 0-length PSDU: no 802.11 frame follows */
        f->no_psdu = 1;
        break;
    }
}

/* What a walk found, kept for the next packets: the layout follows from the header length and
 * presence words alone (unless a vendor namespace, whose data length is in the header, comes
 * first) and a capture's headers mostly repeat.  Kept are the offsets of the fields that can
 * change the outputs: every Flags field; the first Channel and signal fields; MCS fields up to
 * and with the first Rate field (an MCS field sets the rate only when complete); whether there
 * is a 0-length-PSDU field.  radiotap_plan() applies them as the walk would. */
#define RT_LAYOUT_WORDS 8
#define RT_LAYOUT_FIELDS 4
typedef struct {
    int64_t len;                               /* header length; 0: nothing kept */
    int words, flags, rates, rate_final, no_psdu;
    int32_t freq, signal;                      /* offsets, -1: none */
    uint32_t word[RT_LAYOUT_WORDS];
    uint16_t flags_at[RT_LAYOUT_FIELDS], rate_at[RT_LAYOUT_FIELDS];
    uint8_t rate_mcs[RT_LAYOUT_FIELDS];
} rt_layout;

static int rt_used(uint32_t index) {
    return index == 1 || index == 2 || index == 3 || index == 5 || index == 19 || index == 26;
}

/* Notes field `bit` at offset `at` in layout l; returns 0 when l has no room for it. */
static int rt_keep(rt_layout *l, uint32_t bit, int64_t at)
{
    switch (bit) {
    case 1:
        if (l->flags == RT_LAYOUT_FIELDS) return 0;
        l->flags_at[l->flags++] = (uint16_t)at;
        break;
    case 2: case 19:
        if (l->rate_final) break;
        if (l->rates == RT_LAYOUT_FIELDS) return 0;
        l->rate_mcs[l->rates] = bit == 19;
        l->rate_at[l->rates++] = (uint16_t)at;
        l->rate_final = bit == 2;
        break;
    case 3: if (l->freq < 0) l->freq = (int32_t)at; break;
    case 5: if (l->signal < 0) l->signal = (int32_t)at; break;
    case 26: l->no_psdu = 1; break;
    }
    return 1;
}

static inline __attribute__((always_inline)) void radiotap_plan(const rt_layout *l,
    const uint8_t *p, rt_flags *f, decode_args *a, int64_t i)
{
    int j;
    for (j = 0; j < l->flags; j++) radiotap_field(1, p + l->flags_at[j], f, a, i);
    for (j = 0; j < l->rates && !(a->rt_present[i] & RT_RATE); j++)
        radiotap_field(l->rate_mcs[j] ? 19 : 2, p + l->rate_at[j], f, a, i);
    if (l->freq >= 0) radiotap_field(3, p + l->freq, f, a, i);
    if (l->signal >= 0) radiotap_field(5, p + l->signal, f, a, i);
    if (l->no_psdu) f->no_psdu = 1;
}

/* The radiotap header at p: returns its length (where the 802.11 frame starts), or -1 when it
 * is malformed (no frame); fills the rt_* outputs and *f.  *last is the layout of an earlier
 * header, used when this one has the same length and presence words, replaced otherwise. */
static int64_t radiotap(const uint8_t *p, int64_t cl, rt_flags *f, rt_layout *last,
                        decode_args *a, int64_t i)
{
    if (cl < 8) return -1;
    const int64_t len = rd16(p + 2, 0);
    if (len < 8 || len > cl) return -1;
    if (p[0] != 0) return len;                   /* another version: no fields */
    if (last->len == len) {                      /* the same words: the same walk */
        int j = 0;
        while (j < last->words && last->word[j] == rd32(p + 4 + 4 * j, 0)) j++;
        if (j == last->words) {
            radiotap_plan(last, p, f, a, i);
            return len;
        }
    }
    /* the presence words, all inside the header, none with both namespace bits */
    int64_t arg = 4;
    uint32_t word, any = 0;
    do {
        word = rd32(p + arg, 0);
        if ((word & (1u << RT_NS_RADIOTAP)) && (word & (1u << RT_NS_VENDOR))) return len;
        any |= word;
        arg += 4;
        if ((word & (1u << RT_EXT)) && arg + 4 > len) return len;
    } while (word & (1u << RT_EXT));
    const int words = (int)(arg / 4 - 1);
    int keep = !(any & (1u << RT_NS_VENDOR)) && words <= RT_LAYOUT_WORDS;
    rt_layout now;
    memset(&now, 0, sizeof(now));
    now.freq = now.signal = -1;
    /* the fields, set bits only; index counts bits across words of one namespace */
    int64_t next_word = 8, vendor_end = 0;
    uint32_t index = 0;
    int radiotap_ns = 1, reset = 0;             /* in the radiotap namespace, or a vendor's */
    word = rd32(p + 4, 0);
    for (;;) {
        if (!word) break;                       /* no more bits: bit 31 is clear */
        int bit = __builtin_ctz(word);
        index += (uint32_t)bit;
        word >>= bit;                           /* bit 0 of word is now set: field `index` */
        int b = (int)(index % 32);
        int64_t align, size;
        if (b == RT_NS_RADIOTAP || b == RT_EXT) { align = 1; size = 0; }
        else if (b == RT_NS_VENDOR) { align = 2; size = 6; }
        else if (!radiotap_ns) {                 /* a vendor namespace's field: skip its data */
            arg = vendor_end;
            word >>= 1; index++;
            continue;
        } else if (index >= 29) break;           /* a bit the radiotap namespace does not have */
        else {
            align = RT_ALIGN[index]; size = RT_SIZE[index];
            if (!align) break;                   /* a radiotap bit Wireshark 4.0 does not know */
        }
        arg = (arg + align - 1) & ~(align - 1);
        if (b == RT_NS_VENDOR) {
            if (arg + 6 > len) break;
            vendor_end = arg + 6 + rd16(p + arg + 4, 0);
            size += vendor_end - arg - 6;
        }
        const int64_t at = arg;
        arg += size;
        if (arg > len) break;                    /* the field runs past the header */
        if (b == RT_NS_VENDOR) { reset = 1; radiotap_ns = 0; }
        else if (b == RT_NS_RADIOTAP) { reset = 1; radiotap_ns = 1; }
        else if (b == RT_EXT) {                  /* the next presence word */
            word = rd32(p + next_word, 0);
            next_word += 4;
            index = reset ? 0 : index + 1;
            reset = 0;
            continue;
        } else if (radiotap_ns && rt_used(index)) {
            radiotap_field((int)index, p + at, f, a, i);
            if (keep) keep = rt_keep(&now, index, at);
        }
        word >>= 1; index++;
    }
    if (keep) {
        int j;
        now.len = len;
        now.words = words;
        for (j = 0; j < words; j++) now.word[j] = rd32(p + 4 + 4 * j, 0);
        *last = now;
    }
    return len;
}

/* The 802.11 frame at p[at..cl): returns the L3 offset and sets *et (0 when no IP follows: see
 * wlan_kind), or -1 when the header (DS_END_WLAN) or the LLC/SNAP header (DS_END_LLC) is cut. */
static inline __attribute__((always_inline)) int64_t wlan(const uint8_t *p, int64_t cl, int64_t at, int datapad, uint16_t *et,
                           decode_args *a, int64_t i)
{
    *et = 0;
    a->status[i] = DS_END_WLAN;                  /* until the header is read */
    set_l3_offset(a, i, at);
    if (cl - at < 2) return -1;
    const uint8_t fc0 = p[at], fc1 = p[at + 1];
    const int type = (fc0 >> 2) & 3, subtype = fc0 >> 4;
    if (fc0 & 3) { a->status[i] = DS_OK; a->wlan_kind[i] = WLAN_OTHER_VERSION; return at; }
    a->wlan_fc[i] = (uint16_t)(fc0 << 8 | fc1);   /* type, retry, to/from DS ... */
    a->rt_present[i] |= RT_WLAN;
    if (type != 2) {
        a->status[i] = DS_OK;
        a->wlan_kind[i] = type == 0 ? WLAN_MGMT : type == 1 ? WLAN_CTRL : WLAN_EXTENSION;
        return at;
    }
    a->status[i] = DS_OK;
    if (subtype & 4) { a->wlan_kind[i] = WLAN_NULL; return at; }    /* no data: Null, CF-Ack, ... */
    if (fc1 & 0x40) { a->wlan_kind[i] = WLAN_PROTECTED; return at; }  /* encrypted payload */
    /* 24 bytes; a fourth address when both ToDS and FromDS; QoS control; HT control in a QoS
     * frame with the Order bit; padded to 4 bytes when radiotap says so */
    const int64_t addr4 = (fc1 & 3) == 3 ? 6 : 0, qos = (subtype & 8) ? 2 : 0;
    int64_t hdr = 24 + addr4 + qos + (qos && (fc1 & 0x80) ? 4 : 0);
    if (datapad) hdr = (hdr + 3) & ~(int64_t)3;
    if (cl - at < hdr) { a->status[i] = DS_END_WLAN; return -1; }
    if (qos && (p[at + 24 + addr4] & 0x80)) { a->wlan_kind[i] = WLAN_AMSDU; return at; }
    const int64_t llc = at + hdr;
    if (cl - llc < 3) { a->status[i] = DS_END_LLC; set_l3_offset(a, i, llc); return -1; }
    if (p[llc] != 0xAA || p[llc + 1] != 0xAA || p[llc + 2] != 0x03) return llc;  /* not SNAP */
    if (cl - llc < 8) { a->status[i] = DS_END_LLC; set_l3_offset(a, i, llc); return -1; }
    /* RFC 1042 (OUI 0) and 802.1H bridge tunnel (00-00-F8) encapsulate an ethertype */
    if (p[llc + 3] != 0 || p[llc + 4] != 0 || (p[llc + 5] != 0 && p[llc + 5] != 0xF8)) return llc;
    *et = be16(p + llc + 6);
    return skip_vlans(p, cl, llc + 8, et, a, i);
}

/* Returns the L3 offset and sets *et to the type the link layer hands on (0x0800/0x86DD for IP;
 * Ethernet's, SLL's and an 802.11 SNAP header's type field after the VLAN tags, which can be
 * an 802.3 length; raw IP's and null's IPv4/IPv6 by version or address family, else 0), or -1
 * when a link header is cut (status DS_END_*), -2 for an unknown link type.  *cl / *ol
 * (captured, reported bytes) lose a trailing FCS. */
static int64_t link_layer(const uint8_t *p, int64_t *cl_io, int64_t *ol_io, uint16_t lt,
                          uint16_t *et, rt_layout *layout, decode_args *a, int64_t i)
{
    uint32_t fam;
    const int64_t cl = *cl_io;
    switch (lt) {
    case 1:    /* Ethernet, with 802.1Q / 802.1ad / QinQ tags */
        if (cl < 14) return -1;
        *et = be16(p + 12);
        return skip_vlans(p, cl, 14, et, a, i);
    case 113:  /* Linux cooked v1: protocol at 14 */
        if (cl < 16) return -1;
        *et = be16(p + 14);
        return skip_vlans(p, cl, 16, et, a, i);
    case 276:  /* Linux cooked v2: protocol at 0, 20-byte header */
        if (cl < 20) return -1;
        *et = be16(p);
        return skip_vlans(p, cl, 20, et, a, i);
    case 101: case 12: case 14:  /* raw IP: the version nibble says which */
        if (cl < 1) return -1;
        *et = ((p[0] >> 4) == 6) ? ETH_IPV6 : ((p[0] >> 4) == 4 ? ETH_IPV4 : 0);
        return 0;
    case 228: *et = ETH_IPV4; return 0;
    case 229: *et = ETH_IPV6; return 0;
    case 0: case 108:  /* BSD null (host byte order of the capturing machine) / OpenBSD loop (big-endian) */
        if (cl < 4) return -1;
        if (lt == 108) fam = be32(p);
        else {
            fam = rd32(p, 0);
            if ((fam & 0xFFFFu) == 0) fam = __builtin_bswap32(fam);
        }
        *et = (fam == 2) ? ETH_IPV4 : ((fam == 10 || fam == 24 || fam == 28 || fam == 30) ? ETH_IPV6 : 0);
        return 4;
    case 105:  /* IEEE 802.11, no FCS (Wireshark's default) */
        return wlan(p, cl, 0, 0, et, a, i);
    case 127: {  /* radiotap, then IEEE 802.11 */
        rt_flags f = {0, 0, 0};
        const int64_t at = radiotap(p, cl, &f, layout, a, i);
        *et = 0;
        if (at < 0) return -1;
        if (f.no_psdu) { a->wlan_kind[i] = WLAN_NO_PSDU; return at; }
        if (f.fcs) {                             /* the last 4 bytes are the FCS */
            *ol_io -= 4;
            if (*cl_io > *ol_io) *cl_io = *ol_io;
        }
        return wlan(p, *cl_io, at, f.datapad, et, a, i);
    }
    default:
        return -2;
    }
}

static void tcp_options(const uint8_t *p, int64_t end, decode_args *a, int64_t i)
{
    int64_t o = 0;
    while (o < end) {
        uint8_t kind = p[o];
        if (kind == 0) break;
        if (kind == 1) { o++; continue; }
        if (o + 2 > end) break;
        uint8_t olen = p[o + 1];
        if (olen < 2 || o + olen > end) break;
        const uint8_t *v = p + o + 2;
        if (kind == 2 && olen == 4) { a->tcp_opts[i] |= OPT_MSS; a->tcp_mss[i] = be16(v); }
        else if (kind == 3 && olen == 3) { a->tcp_opts[i] |= OPT_WS; a->tcp_ws[i] = v[0]; }
        else if (kind == 4 && olen == 2) { a->tcp_opts[i] |= OPT_SACK_PERM; }
        else if (kind == 8 && olen == 10) {
            a->tcp_opts[i] |= OPT_TS; a->tcp_tsval[i] = be32(v); a->tcp_tsecr[i] = be32(v + 4);
        } else if (kind == 5 && olen >= 10 && (olen - 2) % 8 == 0) {
            int k, blocks = (olen - 2) / 8;
            if (a->tcp_sack_row[i] < 0) {
                if (*a->sack_used >= a->sack_cap) { o += olen; continue; }
                a->tcp_sack_row[i] = (int32_t)(*a->sack_used)++;
            }
            uint32_t *row = a->sack_table + 8 * (int64_t)a->tcp_sack_row[i];
            for (k = 0; k < blocks && a->tcp_sack_count[i] < 4; k++) {
                int s = a->tcp_sack_count[i]++;
                row[2 * s] = be32(v + 8 * k);
                row[2 * s + 1] = be32(v + 8 * k + 4);
            }
        }
        o += olen;
    }
}

/* An IPv4 or IPv6 header as parsed, before anything is written out. */
typedef struct {
    int version;
    int64_t hdr, total;       /* header bytes (IPv6: with extension headers), total length */
    uint8_t proto, ttl, flags;
    uint16_t frag_offset;
    uint32_t id;
    const uint8_t *src, *dst;
    int transport;            /* a transport header follows (first fragment, walk complete) */
    int ended;                /* IPv6: the extension headers or the payload length end it */
} iphdr;

static int ext_header(uint8_t proto) {
    return proto == 0 || proto == 43 || proto == 60 || proto == 135 || proto == 139 ||
           proto == 140 || proto == 51 || proto == 44;
}

/* Parse the IP header at ip (cap bytes captured, rest bytes reported); -1 when the bytes end
 * inside it, -2 when it is malformed (another version, an IPv4 header length under 20). */
static int parse_ip(const uint8_t *ip, int64_t cap, int64_t rest, int version, iphdr *h)
{
    memset(h, 0, sizeof(*h));
    h->version = version;
    if (cap >= 1 && (ip[0] >> 4) != version) return -2;
    if (version == 4) {
        if (cap < 20) return -1;
        h->hdr = (ip[0] & 0x0F) * 4;
        if (h->hdr < 20) return -2;
        h->total = be16(ip + 2);
        if (h->total == 0) h->total = rest;        /* TSO: length left 0, use the frame's */
        h->src = ip + 12; h->dst = ip + 16;
        h->proto = ip[9]; h->ttl = ip[8]; h->id = be16(ip + 4);
        uint16_t fr = be16(ip + 6);
        h->frag_offset = fr & 0x1FFF;
        h->flags = (uint8_t)(((fr & 0x4000) ? IPF_DF : 0) | ((fr & 0x2000) ? IPF_MF : 0) |
                             ((fr & 0x3FFF) ? IPF_FRAGMENT : 0));
        h->transport = h->total >= h->hdr && !h->frag_offset;  /* non-first fragment: no header */
        return 0;
    }
    if (cap < 40) return -1;
    h->total = be16(ip + 4) + 40;
    /* payload length 0: a jumbogram (its length is in the hop-by-hop option: use the frame's) when
     * a hop-by-hop header follows; otherwise Wireshark calls it malformed and decodes no further */
    int malformed_len = h->total == 40 && ip[6] != 0;
    if (h->total == 40 && !malformed_len && rest > 40) h->total = rest;
    h->src = ip + 8; h->dst = ip + 24;
    h->ttl = ip[7];
    uint8_t proto = ip[6];
    int64_t hdr = 40;
    int guard;
    for (guard = 0; guard < 32 && ext_header(proto); guard++) {  /* walk the extension headers */
        if (proto == 44) {                         /* fragment header */
            if (hdr + 8 > cap) break;
            uint16_t fr = be16(ip + hdr + 2);
            h->frag_offset = fr >> 3;
            h->id = be32(ip + hdr + 4);
            if (fr & 1) h->flags |= IPF_MF;
            if ((fr & 1) || (fr >> 3)) h->flags |= IPF_FRAGMENT;
            proto = ip[hdr];
            hdr += 8;
        } else {
            if (hdr + 2 > cap) break;
            uint8_t nx = ip[hdr];
            hdr += (proto == 51) ? 4 * ((int64_t)ip[hdr + 1] + 2)   /* AH: 4-byte units, minus 2 */
                                 : 8 * ((int64_t)ip[hdr + 1] + 1);
            proto = nx;
        }
    }
    h->hdr = hdr;
    h->proto = proto;
    h->transport = !ext_header(proto) && proto != 59 && !h->frag_offset && !malformed_len;
    h->ended = ext_header(proto) || (malformed_len && proto != 59);   /* 59: nothing follows */
    return 0;
}

static int transport(const uint8_t *p, int64_t cap, int64_t rep, uint8_t proto, int ipver,
                     int64_t rel, decode_args *a, int64_t i, int quoted);

/* The IP header quoted in an ICMP error and the start of its transport header: Wireshark gives
 * that TCP/UDP header a stream, so the conversation hash must see it (kernel.py, streams/numbering.py). */
static void quoted_packet(const uint8_t *p, int64_t cap, int64_t rep, int outer_version,
                          decode_args *a, int64_t i)
{
    iphdr h;
    if (cap < 1 || parse_ip(p, cap, rep, outer_version == 6 ? 6 : 4, &h) || !h.transport) return;
    if (h.hdr > h.total || (h.proto != 6 && h.proto != 17)) return;
    memcpy(a->q_src + 16 * i, h.src, h.version == 4 ? 4 : 16);
    memcpy(a->q_dst + 16 * i, h.dst, h.version == 4 ? 4 : 16);
    int64_t qrep = (h.total < rep ? h.total : rep) - h.hdr;
    transport(p + h.hdr, cap - h.hdr > 0 ? cap - h.hdr : 0, qrep, h.proto, h.version, 0, a, i, 1);
}

/* Transport header at p (cap bytes captured, rep bytes reported by the IP length).  A quoted
 * header (inside an ICMP error) fills the TCP/UDP fields and l4_quoted, not l4 or the payload.
 * Returns -1 when the bytes end inside a TCP, UDP or ICMP header, else 0. */
static int transport(const uint8_t *p, int64_t cap, int64_t rep, uint8_t proto, int ipver,
                     int64_t rel, decode_args *a, int64_t i, int quoted)
{
    int64_t hl = 0, plen = 0;
    if (proto == 6) {
        if (cap < 20 || rep < 20) return -1;
        hl = (p[12] >> 4) * 4;
        /* a header length under 20 or past the reported bytes is bogus, but Wireshark 4.0 still
         * numbers the stream: keep the fixed fields, skip the options */
        int bogus = hl < 20 || hl > rep;
        if (quoted) a->l4_quoted[i] = L4_TCP; else a->l4[i] = L4_TCP;
        a->srcport[i] = be16(p); a->dstport[i] = be16(p + 2);
        a->tcp_seq[i] = be32(p + 4); a->tcp_ack[i] = be32(p + 8);
        a->tcp_hdr_len[i] = (uint8_t)hl;
        a->tcp_flags[i] = be16(p + 12) & 0x0FFF;
        a->tcp_win[i] = be16(p + 14);
        if (!bogus) tcp_options(p + 20, (hl < cap ? hl : cap) - 20, a, i);
        plen = hl > rep ? 0 : rep - hl;
        if (hl > rep) hl = rep;
        a->tcp_len[i] = (uint32_t)plen;
    } else if (proto == 17) {
        if (cap < 8 || rep < 8) return -1;
        if (be16(p + 4) < 8) return 0;  /* bogus UDP length: Wireshark numbers no stream */
        if (quoted) a->l4_quoted[i] = L4_UDP; else a->l4[i] = L4_UDP;
        a->srcport[i] = be16(p); a->dstport[i] = be16(p + 2);
        a->udp_length[i] = be16(p + 4);
        hl = 8;
        plen = a->udp_length[i] >= 8 ? a->udp_length[i] - 8 : 0;
        /* a first fragment carries the datagram's header: its payload is the whole datagram's */
        if (plen > rep - 8 && !(a->ip_flags[i] & IPF_MF)) plen = rep - 8;
    } else if (!quoted && ((proto == 1 && ipver == 4) || (proto == 58 && ipver == 6))) {
        if (cap < 4 || rep < 4) return -1;
        uint8_t t = p[0];
        a->l4[i] = L4_ICMP;
        a->icmp_type[i] = t; a->icmp_code[i] = p[1];
        int echo = (ipver == 4) ? (t == 0 || t == 8 || (t >= 13 && t <= 18)) : (t == 128 || t == 129);
        if (echo && cap >= 8 && rep >= 8) {
            a->icmp_echo[i] = 1; a->icmp_ident[i] = be16(p + 4); a->icmp_seq[i] = be16(p + 6);
        }
        hl = rep < 8 ? rep : 8;
        plen = rep - hl;
        int error = (ipver == 4) ? (t == 3 || t == 4 || t == 5 || t == 11 || t == 12)
                                 : (t >= 1 && t <= 4);
        if (error && cap > 8 && rep > 8) quoted_packet(p + 8, cap - 8, rep - 8, ipver, a, i);
    } else {
        return 0;
    }
    if (quoted) return 0;
    a->payload_rel[i] = (uint16_t)(rel + hl > 0xFFFF ? 0xFFFF : rel + hl);
    a->payload_len[i] = (uint32_t)plen;
    return 0;
}

static void decode_one(decode_args *a, int64_t i, rt_layout *layout)
{
    const uint8_t *p = a->buf + a->data_off[i];
    int64_t cl = a->caplen[i], ol = a->origlen[i] > a->caplen[i] ? a->origlen[i] : a->caplen[i];
    uint16_t et = 0;
    a->tcp_sack_row[i] = -1;
    int64_t l3 = link_layer(p, &cl, &ol, a->linktype[i], &et, layout, a, i);
    if (l3 == -2) { a->status[i] = DS_UNKNOWN_LINKTYPE; return; }
    if (l3 < 0) { if (a->status[i] == DS_OK) a->status[i] = DS_END_LINK; return; }
    a->ethertype[i] = et;
    set_l3_offset(a, i, l3);
    if (et != ETH_IPV4 && et != ETH_IPV6) return;  /* ARP, LLDP, ...: a frame without IP */

    const uint8_t *ip = p + l3;
    const int64_t ipcap = cl - l3;
    const int64_t frame_rest = ol - l3;  /* reported bytes from the IP header on */
    iphdr h;
    int parsed = parse_ip(ip, ipcap, frame_rest, et == ETH_IPV4 ? 4 : 6, &h);
    if (parsed) { a->status[i] = parsed == -1 ? DS_END_IP : DS_MALFORMED; return; }
    a->ip_version[i] = (uint8_t)h.version;
    memcpy(a->ip_src + 16 * i, h.src, h.version == 4 ? 4 : 16);
    memcpy(a->ip_dst + 16 * i, h.dst, h.version == 4 ? 4 : 16);
    a->ip_hdr_len[i] = (uint16_t)(h.hdr > 0xFFFF ? 0xFFFF : h.hdr);
    a->ip_len[i] = (uint32_t)h.total;
    a->ip_proto[i] = h.proto;
    a->ip_ttl[i] = h.ttl;
    a->ip_id[i] = h.id;
    a->ip_flags[i] = h.flags;
    a->ip_frag_offset[i] = h.frag_offset;
    if (!h.transport || h.hdr > h.total) {
        if (h.ended || h.transport) a->status[i] = DS_END_L4;   /* ended before its transport */
        return;
    }
    /* Wireshark trims the reported length to the IP length, never extends it */
    int64_t rep = (h.total < frame_rest ? h.total : frame_rest) - h.hdr;
    int64_t l4cap = ipcap - h.hdr;
    if (rep < 0) { a->status[i] = DS_END_L4; return; }
    if (transport(ip + h.hdr, l4cap < 0 ? 0 : l4cap, rep, h.proto, h.version, l3 + h.hdr, a, i, 0))
        a->status[i] = DS_END_L4;
}

void ps_decode(decode_args *a)
{
    int64_t i;
    rt_layout layout;              /* the last radiotap layout walked */
    memset(&layout, 0, sizeof(layout));
    for (i = 0; i < a->n; i++) {
        if (i + PREFETCH_AHEAD < a->n) {
            const uint8_t *ahead = a->buf + a->data_off[i + PREFETCH_AHEAD];
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + 64);
        }
        decode_one(a, i, &layout);
    }
}

/* ---- hashing: distinct addresses, and conversations (unordered endpoint pairs) ----
 *
 * Both number keys in order of first appearance, so the ids equal what pandas.factorize gives
 * on the same sequence (kernel_numpy.py does that for the numpy kernel).  Open addressing with
 * linear probing in a table that doubles at half load; consecutive packets of one flow skip the
 * lookup.  Return -1 when memory runs out.
 */
#include <stdlib.h>

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}

/* A table of int32 ids whose keys live elsewhere; hashes kept to rehash without the keys. */
typedef struct { int32_t *ids; uint64_t *hashes; uint64_t mask; int64_t used; } idtable;

static int idt_init(idtable *t) {
    t->mask = 1023; t->used = 0;
    t->ids = malloc(sizeof(int32_t) * 1024);
    t->hashes = malloc(sizeof(uint64_t) * 1024);
    if (!t->ids || !t->hashes) return -1;
    memset(t->ids, 0xFF, sizeof(int32_t) * 1024);
    return 0;
}
static void idt_free(idtable *t) { free(t->ids); free(t->hashes); t->ids = NULL; t->hashes = NULL; }
static int idt_grow(idtable *t) {
    uint64_t old_mask = t->mask, j, size = (old_mask + 1) * 2;
    int32_t *old_ids = t->ids; uint64_t *old_h = t->hashes;
    int32_t *ids = malloc(sizeof(int32_t) * size);
    uint64_t *hashes = malloc(sizeof(uint64_t) * size);
    if (!ids || !hashes) { free(ids); free(hashes); return -1; }
    memset(ids, 0xFF, sizeof(int32_t) * size);
    for (j = 0; j <= old_mask; j++) {
        if (old_ids[j] < 0) continue;
        uint64_t h = old_h[j] & (size - 1);
        while (ids[h] >= 0) h = (h + 1) & (size - 1);
        ids[h] = old_ids[j]; hashes[h] = old_h[j];
    }
    free(old_ids); free(old_h);
    t->ids = ids; t->hashes = hashes; t->mask = size - 1;
    return 0;
}
/* grow a malloc'd array of (count) items of size sz to hold at least need items */
static int reserve(void **p, int64_t *cap, int64_t need, size_t sz) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * sz);
    if (!q) return -1;
    *p = q; *cap = c;
    return 0;
}

/* ---- address interner: state kept across windows ---- */
typedef struct { idtable t; uint8_t *addr; uint8_t *v6; int64_t k, cap, cap_v6; } interner;

void *ps_interner_new(void) {
    interner *h = calloc(1, sizeof(interner));
    if (!h) return NULL;
    if (idt_init(&h->t)) { idt_free(&h->t); free(h); return NULL; }
    return h;
}
void ps_interner_free(void *hp) {
    interner *h = hp;
    if (!h) return;
    idt_free(&h->t); free(h->addr); free(h->v6); free(h);
}
/* copy the distinct addresses (k x 16) and their v6 flags out; returns k */
int64_t ps_interner_get(void *hp, uint8_t *addr_out, uint8_t *v6_out) {
    interner *h = hp;
    if (h->k) { memcpy(addr_out, h->addr, 16 * (size_t)h->k); memcpy(v6_out, h->v6, (size_t)h->k); }
    return h->k;
}

/*
 * Packets with ip_version != 0 get codes for src and dst (src first), -1 otherwise; codes follow
 * first appearance across every call on the same interner.  Returns the number of distinct
 * addresses so far, or -1 when memory runs out.
 */
int64_t ps_intern_addresses(void *hp, int64_t n, const uint8_t *version, const uint8_t *src16,
                            const uint8_t *dst16, int32_t *src_code, int32_t *dst_code)
{
    interner *h = hp;
    int64_t i;
    for (i = 0; i < n; i++) {
        if (!version[i]) { src_code[i] = dst_code[i] = -1; continue; }
        int side;
        for (side = 0; side < 2; side++) {
            const uint8_t *a = (side ? dst16 : src16) + 16 * i;
            uint8_t v6 = version[i] == 6;
            int32_t code = -1;
            if (i > 0 && version[i - 1] == version[i]) {  /* most packets repeat a recent address */
                if (memcmp(src16 + 16 * (i - 1), a, 16) == 0) code = src_code[i - 1];
                else if (memcmp(dst16 + 16 * (i - 1), a, 16) == 0) code = dst_code[i - 1];
            }
            if (code < 0) {
                uint64_t lo, hi;
                memcpy(&lo, a, 8); memcpy(&hi, a + 8, 8);
                uint64_t hash = mix64(lo ^ mix64(hi + v6)), s = hash & h->t.mask;
                for (;;) {
                    code = h->t.ids[s];
                    if (code < 0) {
                        if (reserve((void **)&h->addr, &h->cap, h->k + 1, 16) ||
                            reserve((void **)&h->v6, &h->cap_v6, h->k + 1, 1)) return -1;
                        code = (int32_t)h->k++;
                        h->t.ids[s] = code; h->t.hashes[s] = hash;
                        memcpy(h->addr + 16 * (int64_t)code, a, 16);
                        h->v6[code] = v6;
                        if (++h->t.used * 2 > (int64_t)h->t.mask && idt_grow(&h->t)) return -1;
                        break;
                    }
                    if (h->v6[code] == v6 && memcmp(h->addr + 16 * (int64_t)code, a, 16) == 0) break;
                    s = (s + 1) & h->t.mask;
                }
            }
            if (side) dst_code[i] = code; else src_code[i] = code;
        }
    }
    return h->k;
}

/* ---- conversations: state kept across windows ---- */
typedef struct {
    idtable t;
    int64_t *lo, *hi, *id;   /* per table entry: endpoints and the per-protocol conversation id */
    uint8_t *proto;
    int64_t k, cap_lo, cap_hi, cap_id, cap_proto, next_tcp, next_udp;
} convs;

void *ps_convs_new(void) {
    convs *h = calloc(1, sizeof(convs));
    if (!h) return NULL;
    if (idt_init(&h->t)) { idt_free(&h->t); free(h); return NULL; }
    return h;
}
void ps_convs_free(void *hp) {
    convs *h = hp;
    if (!h) return;
    idt_free(&h->t); free(h->lo); free(h->hi); free(h->id); free(h->proto); free(h);
}

/*
 * TCP (l4 == 6) and UDP (l4 == 17) packets get the id of their unordered (address code, port)
 * endpoint pair, numbered per protocol in order of first appearance across calls; -1 otherwise.
 * reverse[i] = 1 when the source is the larger endpoint (endpoint = code x 65536 + port);
 * first[i] = 1 on a conversation's first packet.  Returns the conversations so far, -1 on OOM.
 */
int64_t ps_conversations(void *hp, int64_t n, const uint8_t *l4, const int32_t *src_code,
                         const int32_t *dst_code, const uint16_t *srcport, const uint16_t *dstport,
                         int32_t *conv, uint8_t *reverse, uint8_t *first)
{
    convs *h = hp;
    int64_t i, last_lo = -1, last_hi = -1;
    int32_t last_conv = -1;
    uint8_t last_p = 0;
    for (i = 0; i < n; i++) {
        uint8_t p = l4[i];
        first[i] = 0;
        if (p != 6 && p != 17) { conv[i] = -1; reverse[i] = 0; continue; }
        int64_t es = (int64_t)src_code[i] * 65536 + srcport[i];
        int64_t ed = (int64_t)dst_code[i] * 65536 + dstport[i];
        uint8_t rev = es > ed;
        int64_t lo = rev ? ed : es, hi = rev ? es : ed;
        reverse[i] = rev;
        if (lo == last_lo && hi == last_hi && p == last_p) { conv[i] = last_conv; continue; }
        uint64_t hash = mix64((uint64_t)lo * 0x9E3779B97F4A7C15ULL ^ mix64((uint64_t)hi + p));
        uint64_t s = hash & h->t.mask;
        int32_t e;
        for (;;) {
            e = h->t.ids[s];
            if (e < 0) {
                int64_t need = h->k + 1;
                if (reserve((void **)&h->lo, &h->cap_lo, need, 8) || reserve((void **)&h->hi, &h->cap_hi, need, 8) ||
                    reserve((void **)&h->id, &h->cap_id, need, 8) || reserve((void **)&h->proto, &h->cap_proto, need, 1))
                    return -1;
                e = (int32_t)h->k++;
                h->t.ids[s] = e; h->t.hashes[s] = hash;
                h->lo[e] = lo; h->hi[e] = hi; h->proto[e] = p;
                h->id[e] = (p == 6) ? h->next_tcp++ : h->next_udp++;
                first[i] = 1;
                if (++h->t.used * 2 > (int64_t)h->t.mask && idt_grow(&h->t)) return -1;
                break;
            }
            if (h->lo[e] == lo && h->hi[e] == hi && h->proto[e] == p) break;
            s = (s + 1) & h->t.mask;
        }
        conv[i] = last_conv = (int32_t)h->id[e];
        last_lo = lo; last_hi = hi; last_p = p;
    }
    return h->k;
}

/* ---- module stub, so setuptools builds it and importlib finds it ---- */
static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "_kernel",
    "Compiled ingest loops for pcapstats, called through ctypes (see kernel_c.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) { return PyModule_Create(&kernel_module); }
