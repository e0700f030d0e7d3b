"""The ingest kernel in numpy and plain Python: the fallback when ``_kernel.c`` was not compiled.

``NumpyKernel`` has the methods of ``kernel_c.CKernel`` (see contract.py for the contract) and gives
bit-identical results for every input, valid or not; ``tests/ingest/test_kernel_equivalence.py`` holds
the two to that.  Every rule below mirrors a line of ``_kernel.c``: read them side by side.

- The record walks are sequential (a record's length says where the next one starts): Python
  loops over ``struct`` unpacks of the mapped file, bounds-checked as in C, header fields
  gathered afterwards in numpy.
- ``decode`` is vectorised: each layer is one helper working on the packets that reached it,
  reading fixed-width byte rows out of the file with one fancy index (``_Bytes``).  The parts of
  variable length (VLAN tags, IPv6 extension headers, TCP options) loop over the depth, each step
  vectorised over the packets still walking; all those loops are bounded.
- The hashing steps number keys in order of first appearance across windows, as the C hash
  tables do; ``pandas.factorize`` keeps that order.
"""

from __future__ import annotations

import struct
from array import array

import numpy as np
import pandas as pd

from .contract import (ABSURD_RECORD, DS_END_IP, DS_END_L4, DS_END_LINK, DS_END_LLC, DS_END_TAG,
                     DS_END_WLAN, DS_MALFORMED, DS_UNKNOWN_LINKTYPE, IPF_DF, IPF_FRAGMENT,
                     IPF_MF, L4_ICMP, L4_TCP, L4_UDP, OPT_MSS, OPT_SACK_PERM, OPT_TS, OPT_WS,
                     RT_FREQ, RT_MCS_RATE, RT_RATE, RT_SIGNAL, RT_WLAN, ST_ABSURD_LENGTH,
                     ST_BAD_BLOCK, ST_BAD_SECTION, ST_CAPACITY, ST_OK, ST_TOO_MANY_INTERFACES,
                     ST_TRAILER_MISMATCH, ST_TRUNCATED, ST_UNKNOWN_INTERFACE, WLAN_AMSDU,
                     WLAN_CTRL, WLAN_EXTENSION, WLAN_MGMT, WLAN_NO_PSDU, WLAN_NULL,
                     WLAN_OTHER_VERSION, WLAN_PROTECTED, Interfaces, Records, SackTable, Status)

# pcapng block types
_SHB, _IDB, _OPB, _SPB, _EPB = 0x0A0D0D0A, 1, 2, 3, 6
_ETH_IPV4, _ETH_IPV6 = 0x0800, 0x86DD
_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)
# IPv6 next-header values walked as "next header, length in 8-byte units - 1" extensions.
_EXT_GENERIC = (0, 43, 60, 135, 139, 140)
_EXT_AH, _EXT_FRAGMENT, _NO_NEXT = 51, 44, 59
_EXTENSIONS = _EXT_GENERIC + (_EXT_AH, _EXT_FRAGMENT)
# Next-header values after which no transport header is decoded (cut walk or no next header).
_NOT_TRANSPORT = _EXTENSIONS + (_NO_NEXT,)

_CHUNK = 1 << 17            # packets decoded per pass: bounds the temporaries' memory
_VLAN_BUDGET = 1 << 20      # tag slots examined per VLAN step (rows x tags)
_WORD_BUDGET = 1 << 20      # radiotap presence words examined per step (rows x words)
# radiotap (see radiotap() in _kernel.c): namespace bits, and the radiotap namespace's fields'
# alignment and size by presence bit (alignment 0: a bit Wireshark 4.0 does not know)
_RT_NS_RADIOTAP, _RT_NS_VENDOR, _RT_EXT = 29, 30, 31
_RT_ALIGN = (8, 1, 1, 2, 2, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 4, 1, 4, 2, 8, 2, 2, 0, 1, 2, 0)
_RT_SIZE = (8, 1, 1, 4, 2, 1, 1, 2, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 8, 3, 8, 12, 12, 12, 12, 0, 1,
            4, 0)
_RT_USED = {1: 1, 2: 1, 3: 2, 5: 1, 19: 3, 26: 1}   # fields radiotap_field() reads: their bytes


class NumpyKernel:
    name = "numpy"

    # -- classic pcap --------------------------------------------------------------------------

    def walk_pcap(self, buf, pos, end, swapped, nsec, max_caplen, rec: Records):
        """Record offsets by a Python loop; the header fields are then gathered in numpy."""
        pos, end, cap = int(pos), int(end), len(rec.data_off)
        max_caplen = int(max_caplen) & 0xFFFFFFFF
        code, stop = ST_OK, pos
        caplen_at = struct.Struct(">I" if swapped else "<I").unpack_from
        view = _view(buf)
        heads = array("q")
        add = heads.append
        n = 0
        while pos < end:
            if end - pos < 16:
                code, stop = ST_TRUNCATED, pos
                break
            cl = caplen_at(view, pos + 8)[0]
            if cl > max_caplen:
                code, stop = ST_ABSURD_LENGTH, pos
                break
            if cl > end - pos - 16:
                code, stop = ST_TRUNCATED, pos
                break
            if n >= cap:
                code, stop = ST_CAPACITY, pos
                break
            add(pos)
            n += 1
            pos += 16 + cl
        if n:
            head = np.frombuffer(heads, np.int64)
            words = _Bytes(buf).rows(head, 16).view(">u4" if swapped else "<u4")
            rec.data_off[:n] = head + 16
            rec.caplen[:n] = words[:, 2]
            rec.origlen[:n] = words[:, 3]
            rec.ts[:n] = (words[:, 0].astype(np.int64) * 1_000_000_000
                          + words[:, 1].astype(np.int64) * (1 if nsec else 1000))
        return n, Status(code, stop, 1 if code == ST_OK else n + 1)

    # -- pcapng --------------------------------------------------------------------------------

    def walk_pcapng(self, buf, end, state, rec: Records, ifs: Interfaces):
        """Blocks by a Python loop from ``state`` (next offset, byte-swapped, section's first
        interface, interfaces so far), which it updates: sections set the byte order, IDBs are
        added to ``ifs``, packet blocks (EPB/OPB/SPB) become records, other blocks are skipped."""
        end, cap, if_cap = int(end), len(rec.data_off), len(ifs.linktype)
        pos, sw, first_if, n_if = (int(x) for x in state[:4])
        sw = bool(sw)
        view = _view(buf)
        fmt = _PcapngStructs(sw)
        cols = (array("q"), array("I"), array("I"), array("Q"), array("I"))
        add_off, add_cap, add_orig, add_ts, add_iface = (c.append for c in cols)
        n, code, stop = 0, ST_OK, pos
        while pos < end:
            left = end - pos
            if left < 12:
                code = ST_TRUNCATED
                break
            # type, length and (for a packet block) its fixed fields in one unpack
            btype, blen, ifid, ts_hi, ts_lo, cl, ol = (fmt.packet(view, pos) if left >= 28
                                                       else fmt.head(view, pos) + (0,) * 5)
            if btype == _SHB:   # a byte palindrome: recognised in either byte order
                if left < 28:
                    code = ST_TRUNCATED
                    break
                magic = fmt.u32le(view, pos + 8)[0]
                if magic not in (0x1A2B3C4D, 0x4D3C2B1A):
                    code = ST_BAD_SECTION
                    break
                sw, first_if = magic == 0x4D3C2B1A, n_if
                fmt = _PcapngStructs(sw)
                btype, blen, ifid, ts_hi, ts_lo, cl, ol = fmt.packet(view, pos)
            if blen < 12 or blen & 3:
                code = ST_BAD_BLOCK
            elif blen > ABSURD_RECORD:
                code = ST_ABSURD_LENGTH
            elif blen > left:
                code = ST_TRUNCATED
            elif fmt.u32(view, pos + blen - 4)[0] != blen:
                code = ST_TRAILER_MISMATCH
            if code != ST_OK:
                break
            body_end = blen - 4
            if btype == _EPB or btype == _OPB:
                if blen < 32:
                    code = ST_BAD_BLOCK
                    break
                if btype == _OPB:   # a 16-bit interface id, then the drop count
                    ifid = (ifid >> 16) if sw else (ifid & 0xFFFF)
                if cl > body_end - 28:
                    code = ST_ABSURD_LENGTH
                    break
                data, ts = 28, (ts_hi << 32) | ts_lo
            elif btype == _SPB:
                if blen < 16:
                    code = ST_BAD_BLOCK
                    break
                ifid, ts, data = 0, 0, 12
                ol = cl = fmt.u32(view, pos + 8)[0]
                snaplen = int(ifs.snaplen[first_if]) if first_if < n_if else 0
                if snaplen and cl > snaplen:
                    cl = snaplen
                cl = min(cl, body_end - data)
            else:
                if btype == _IDB:
                    if blen < 20:
                        code = ST_BAD_BLOCK
                        break
                    if n_if >= if_cap:
                        code = ST_TOO_MANY_INTERFACES
                        break
                    _interface(view, pos, body_end, fmt, sw, ifs, n_if, n_if - first_if)
                    n_if += 1
                elif btype == _SHB and blen < 28:
                    code = ST_BAD_BLOCK
                    break
                pos += blen      # IDB, SHB, and every other block (NRB, ISB, DSB, custom, ...)
                continue
            if ifid >= n_if - first_if:
                code = ST_UNKNOWN_INTERFACE
                break
            if n >= cap:
                code = ST_CAPACITY
                break
            add_off(pos + data)
            add_cap(cl)
            add_orig(ol)
            add_ts(ts)
            add_iface(first_if + ifid)
            n += 1
            pos += blen
        if code != ST_OK:
            stop = pos
        if n:
            for a, c, dtype in zip((rec.data_off, rec.caplen, rec.origlen, rec.ts, rec.iface),
                                   cols, (np.int64, np.uint32, np.uint32, np.uint64, np.uint32)):
                a[:n].view(dtype)[:] = np.frombuffer(c, dtype)   # ts: raw interface units
        state[:4] = (pos, sw, first_if, n_if)
        return n, Status(code, stop, 1 if code == ST_OK else n + 1, sw)

    # -- field decoding ------------------------------------------------------------------------

    def decode(self, buf, data_off, caplen, origlen, linktype, out, sack: SackTable):
        """The header fields of every packet into ``out`` (zeroed arrays, as kernel.new_outputs
        makes, plus the zeroed n x 16 ``ip_src``/``ip_dst``/``q_src``/``q_dst`` scratch), SACK
        blocks into ``sack``; a chunk of packets at a time."""
        off = np.ascontiguousarray(data_off, np.int64)
        cl = np.ascontiguousarray(caplen, np.uint32)
        ol = np.ascontiguousarray(origlen, np.uint32)
        lt = np.ascontiguousarray(linktype, np.uint16)
        src = _Bytes(buf)
        for s in range(0, len(off), _CHUNK):
            e = min(s + _CHUNK, len(off))
            _decode_chunk(src, off[s:e], cl[s:e], ol[s:e], lt[s:e],
                          {k: v[s:e] for k, v in out.items()}, sack)

    # -- hashing -------------------------------------------------------------------------------

    def new_interner(self):
        return _Interner()

    def new_conversations(self):
        return _Conversations()


class _PcapngStructs:
    """The unpackers of one section's byte order."""

    def __init__(self, swapped: bool):
        bo = ">" if swapped else "<"
        self.u32 = struct.Struct(bo + "I").unpack_from
        self.u32le = struct.Struct("<I").unpack_from
        self.u16x2 = struct.Struct(bo + "HH").unpack_from
        self.head = struct.Struct(bo + "II").unpack_from
        self.packet = struct.Struct(bo + "7I").unpack_from


def _interface(view, pos, body_end, fmt: _PcapngStructs, sw: bool, ifs: Interfaces, i, local):
    """Interface ``i`` from the IDB at ``pos``: link type, snaplen, and the if_tsresol and
    if_tsoffset options (walked as in C: stop at opt_endofopt or at an option past the body)."""
    tsresol, tsoffset = 6, 0
    o = 16
    while o + 4 <= body_end:
        code, olen = fmt.u16x2(view, pos + o)
        if code == 0 or o + 4 + olen > body_end:
            break
        if code == 9 and olen >= 1:
            tsresol = view[pos + o + 4]
        if code == 14 and olen >= 8:
            tsoffset = fmt.u32(view, pos + o + 4)[0] | fmt.u32(view, pos + o + 8)[0] << 32
        o += 4 + ((olen + 3) & ~3)
    if sw:   # a 64-bit value in a big-endian section: its first word is the high one
        tsoffset = (tsoffset >> 32) | ((tsoffset & 0xFFFFFFFF) << 32)
    ifs.linktype[i] = fmt.u16x2(view, pos + 8)[0]
    ifs.snaplen[i] = fmt.u32(view, pos + 12)[0]
    ifs.tsresol[i] = tsresol
    ifs.tsoffset[i] = tsoffset - (1 << 64) if tsoffset >= 1 << 63 else tsoffset
    ifs.local_id[i] = local


def _view(buf) -> memoryview:
    return memoryview(np.ascontiguousarray(buf)).cast("B")


class _Bytes:
    """Fixed-width byte rows of the file at arbitrary offsets, never read out of bounds.

    A view of the buffer as overlapping ``width``-byte items (one starting at every offset)
    turns "``width`` bytes at each offset" into one fancy index; rows that would run past the
    end of the buffer (only near its end) are read byte by byte with clipped indices.  Callers
    use only the bytes their length checks allow, like the C code.
    """

    def __init__(self, buf):
        self.buf = np.ascontiguousarray(buf, np.uint8).reshape(-1)
        self._windows: dict[int, np.ndarray] = {}

    def _window(self, width: int) -> np.ndarray:
        win = self._windows.get(width)
        if win is None:
            win = self._windows[width] = np.ndarray(
                (len(self.buf) - width + 1,), np.dtype((np.void, width)), self.buf, strides=(1,))
        return win

    def rows(self, at: np.ndarray, width: int) -> np.ndarray:
        """uint8 array (len(at), width): the bytes at at[i] .. at[i] + width - 1."""
        size = len(self.buf)
        if len(at) == 0 or size == 0:
            return np.zeros((len(at), width), np.uint8)
        if width <= size:
            last = size - width
            if at.min() >= 0 and at.max() <= last:
                return self._window(width)[at].view(np.uint8).reshape(-1, width)
            inside = (at >= 0) & (at <= last)
        else:
            inside = np.zeros(len(at), bool)
        out = np.empty((len(at), width), np.uint8)
        if inside.any():
            out[inside] = self._window(width)[at[inside]].view(np.uint8).reshape(-1, width)
        edge = ~inside
        idx = at[edge, None] + np.arange(width)
        out[edge] = self.buf[np.clip(idx, 0, size - 1)]
        return out


def _at(rows: np.ndarray):
    """Sorted distinct rows as a slice when they are contiguous (a chunk of one kind of packet,
    the common case): writing through a slice is much faster than through a fancy index."""
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def _be16(b: np.ndarray, col) -> np.ndarray:
    """Big-endian 16-bit value at column ``col`` of byte rows (``col`` a number or an array)."""
    if np.isscalar(col):
        hi, lo = b[:, col], b[:, col + 1]
    else:
        r = np.arange(len(b))
        hi, lo = b[r, col], b[r, col + 1]
    return (hi.astype(np.int64) << 8) | lo


def _be32(b: np.ndarray, col) -> np.ndarray:
    return (_be16(b, col) << 16) | _be16(b, col + 2)


# -- decode: one helper per layer ----------------------------------------------------------------

def _decode_chunk(src: _Bytes, off, cl32, ol32, lt, out, sack: SackTable):
    """decode_one() of _kernel.c for every packet of a chunk, layer by layer."""
    cl = cl32.astype(np.int64)
    ol = np.maximum(ol32, cl32).astype(np.int64)
    out["tcp_sack_row"][:] = -1
    l3, et = _link_layer(src, off, cl, ol, lt, out)     # cl, ol lose an 802.11 FCS
    out["status"][l3 == -2] = DS_UNKNOWN_LINKTYPE
    out["status"][(l3 == -1) & (out["status"] == 0)] = DS_END_LINK   # else: END_WLAN, _LLC, _TAG
    ok = l3 >= 0
    w = np.flatnonzero(ok)
    out["ethertype"][w] = et[w]
    out["l3_offset"][w] = np.minimum(l3[w], 0xFFFF)
    parts = []
    for ethertype, version in ((_ETH_IPV4, 4), (_ETH_IPV6, 6)):
        r = np.flatnonzero(ok & (et == ethertype))
        if len(r):
            parts.append(_ip_layer(src, version, r, off[r] + l3[r], cl[r] - l3[r], ol[r] - l3[r],
                                   out))
    parts = [p for p in parts if len(p[0])]
    if parts:   # in packet order: SACK table rows are given in it
        _transport(src, *_in_order(parts), off, out, sack)


def _in_order(parts: list[tuple]) -> tuple:
    """Per-packet arrays from several disjoint sets of rows (each sorted, first array the
    rows), merged in row order."""
    if len(parts) == 1:
        return parts[0]
    merged = [np.concatenate(x) for x in zip(*parts)]
    order = np.argsort(merged[0], kind="stable")
    return tuple(a[order] for a in merged)


def _kept(keep, *arrays) -> tuple:
    """The arrays at the rows where ``keep`` is true (themselves when it is true everywhere)."""
    return arrays if keep.all() else tuple(a[keep] for a in arrays)


def _link_layer(src: _Bytes, off, cl, ol, lt, out):
    """L3 offset (-1: link header cut, -2: unknown link type) and ethertype of each packet; the
    captured and reported lengths ``cl`` and ``ol`` lose the FCS radiotap says a frame ends in."""
    n = len(off)
    l3 = np.full(n, -2, np.int64)
    et = np.zeros(n, np.int64)
    present = np.flatnonzero(np.bincount(lt, minlength=1))
    for kind in present:
        r = np.arange(n) if len(present) == 1 else np.flatnonzero(lt == kind)
        c = cl[r]
        if kind in (1, 113, 276):            # Ethernet, Linux cooked v1, v2
            hdr, et_at = {1: (14, 12), 113: (16, 14), 276: (20, 0)}[kind]
            cut = c < hdr
            l3[r[cut]] = -1
            r = r[~cut]
            l3[r] = hdr
            et[r] = _be16(src.rows(off[r] + et_at, 2), 0)
        elif kind in (101, 12, 14):          # raw IP: the version nibble says which
            cut = c < 1
            l3[r[cut]] = -1
            r = r[~cut]
            version = src.rows(off[r], 1)[:, 0] >> 4
            l3[r] = 0
            et[r] = np.where(version == 6, _ETH_IPV6, np.where(version == 4, _ETH_IPV4, 0))
        elif kind in (228, 229):
            l3[r] = 0
            et[r] = _ETH_IPV4 if kind == 228 else _ETH_IPV6
        elif kind in (0, 108):               # BSD null (capturing host's order) / OpenBSD loop
            cut = c < 4
            l3[r[cut]] = -1
            r = r[~cut]
            b = src.rows(off[r], 4).astype(np.int64)
            big = b[:, 0] << 24 | b[:, 1] << 16 | b[:, 2] << 8 | b[:, 3]
            if kind == 108:
                fam = big
            else:                            # little-endian, byte-swapped if its low half is 0
                little = b[:, 3] << 24 | b[:, 2] << 16 | b[:, 1] << 8 | b[:, 0]
                fam = np.where((little & 0xFFFF) == 0, big, little)
            l3[r] = 4
            et[r] = np.where(fam == 2, _ETH_IPV4,
                             np.where(np.isin(fam, (10, 24, 28, 30)), _ETH_IPV6, 0))
        elif kind == 105:                    # IEEE 802.11, no FCS (Wireshark's default)
            w = _at(r)
            l3[w], et[w] = _wlan(src, r, off, cl, np.zeros(len(r), np.int64),
                                 np.zeros(len(r), bool), out)
        elif kind == 127:                    # radiotap, then IEEE 802.11
            at, fcs, datapad, no_psdu = _radiotap(src, r, off, cl, out)
            out["wlan_kind"][r[no_psdu]] = WLAN_NO_PSDU
            go = (at >= 0) & ~no_psdu
            f = _at(r[go & fcs])             # the last 4 bytes are the FCS
            ol[f] -= 4
            cl[f] = np.minimum(cl[f], ol[f])
            l3_r, et_r = at, np.zeros(len(r), np.int64)
            g = np.flatnonzero(go)
            l3_r[g], et_r[g] = _wlan(src, r[g], off, cl, at[g], datapad[g], out)
            w = _at(r)
            l3[w], et[w] = l3_r, et_r
    tagged = np.flatnonzero((l3 > 0) & np.isin(et, _VLAN_TPIDS))
    if len(tagged):
        _skip_vlans(src, tagged, off, cl, l3, et, out)
    return l3, et


def _skip_vlans(src: _Bytes, r, off, cl, l3, et, out):
    """Walk the 4-byte VLAN tags at l3[r] while the ethertype says another tag follows.

    Tags are examined in blocks (1, 2, 4, ... per packet, at most _VLAN_BUDGET slots a step), so
    a frame made of nothing but tags still takes few steps.  The outermost tag's id (when the
    count was 0) and the count of whole tags (capped at 255) are recorded, as C increments them;
    a tag cut short makes the link header cut.
    """
    at = off[r] + l3[r]                      # file offset of the next tag
    end = off[r] + cl[r]
    prev = et[r].copy()                      # the type in front of the next tag: its TPID
    count0 = out["vlan_count"][r].astype(np.int64)
    whole = (at + 4 <= end) & (count0 == 0)
    out["vlan_id"][r[whole]] = _be16(src.rows(at[whole], 2), 0) & 0x0FFF
    count = np.zeros(len(r), np.int64)
    width = 1
    while len(r):
        tag_at = at[:, None] + 4 * np.arange(width)
        readable = tag_at + 4 <= end[:, None]
        inner = _be16(src.rows(tag_at.ravel() + 2, 2), 0).reshape(tag_at.shape)
        stops = ~readable | ~np.isin(inner, _VLAN_TPIDS)
        done = stops.any(axis=1)
        # 802.1ad S-tags among the whole tags of this block, by index (the first 8 tags)
        last = np.where(done, stops.argmax(axis=1), width - 1)
        tpid = np.concatenate([prev[:, None], inner[:, :-1]], axis=1)
        index = (count0 + count)[:, None] + np.arange(width)
        ad = readable & (np.arange(width) <= last[:, None]) & (tpid == 0x88A8) & (index < 8)
        if ad.any():
            out["vlan_ad"][r] |= np.where(ad, 1 << np.minimum(index, 7), 0).sum(axis=1) \
                .astype(np.uint8)
        k = stops.argmax(axis=1)[done]
        d = r[done]
        rows = np.flatnonzero(done)
        cut = ~readable[rows, k]
        tags = count[done] + k + ~cut
        out["vlan_count"][d] = np.minimum(count0[done] + tags, np.maximum(count0[done], 255))
        out["status"][d[cut]] = DS_END_TAG
        out["l3_offset"][d[cut]] = np.minimum(tag_at[rows, k][cut] - off[d[cut]], 0xFFFF)
        out["ethertype"][d[cut]] = tpid[rows, k][cut]
        l3[d] = np.where(cut, -1, tag_at[rows, k] + 4 - off[d])
        et[d] = inner[rows, k]
        going = ~done
        prev = inner[going, width - 1]
        r, at, end = r[going], at[going] + 4 * width, end[going]
        count, count0 = count[going] + width, count0[going]
        width = int(max(1, min(2 * width, _VLAN_BUDGET // max(len(r), 1))))


def _wlan(src: _Bytes, r, off, cl, at, datapad, out):
    """wlan() of _kernel.c: the 802.11 frames of rows ``r`` starting at ``at`` (from the packet's
    first byte; ``datapad``: header padded to 4 bytes).  Returns the L3 offsets (-1: header or
    LLC/SNAP header cut) and ethertypes (0 where no IP follows; ``wlan_kind`` says why)."""
    n = len(r)
    l3, et = at.copy(), np.zeros(n, np.int64)
    if not n:
        return l3, et
    start = off[r] + at
    room = cl[r] - at                        # captured bytes from the frame's first byte
    h = src.rows(start, 2)
    fc0, fc1 = h[:, 0].astype(np.int64), h[:, 1].astype(np.int64)
    kind_of = np.select(
        [(fc0 & 3) != 0, ((fc0 >> 2) & 3) == 0, ((fc0 >> 2) & 3) == 1, ((fc0 >> 2) & 3) == 3,
         (fc0 & 0x40) != 0, (fc1 & 0x40) != 0],   # subtype bit 2: no data (Null, CF-Ack, ...)
        [WLAN_OTHER_VERSION, WLAN_MGMT, WLAN_CTRL, WLAN_EXTENSION, WLAN_NULL, WLAN_PROTECTED], 0)
    cut = room < 2
    kind_of[cut] = 0
    read = np.flatnonzero(~cut & ((fc0 & 3) == 0))     # the frame control, protocol version 0
    out["wlan_fc"][r[read]] = fc0[read] << 8 | fc1[read]
    out["rt_present"][r[read]] |= RT_WLAN
    addr4 = np.where((fc1 & 3) == 3, 6, 0)
    qos = (fc0 & 0x80) != 0
    hdr = 24 + addr4 + np.where(qos, 2, 0) + np.where(qos & ((fc1 & 0x80) != 0), 4, 0)
    hdr = np.where(datapad, (hdr + 3) & ~3, hdr)
    data = ~cut & (kind_of == 0)
    cut |= data & (room < hdr)
    data &= ~cut
    out["status"][r[cut]] = DS_END_WLAN
    out["l3_offset"][r] = np.minimum(at, 0xFFFF)   # where the header is; moved on if read
    header_cut = cut.copy()
    amsdu = data & qos & ((src.rows(start + 24 + addr4, 1)[:, 0] & 0x80) != 0)
    kind_of[amsdu] = WLAN_AMSDU
    data &= ~amsdu
    k = np.flatnonzero(kind_of)
    out["wlan_kind"][r[k]] = kind_of[k]
    llc = hdr                                 # LLC/SNAP, from the frame's first byte
    cut |= data & (room - llc < 3)
    data &= ~cut
    b = src.rows(start + llc, 8).astype(np.int64)
    snap = data & (b[:, 0] == 0xAA) & (b[:, 1] == 0xAA) & (b[:, 2] == 0x03)
    cut |= snap & (room - llc < 8)
    snap &= ~cut
    # RFC 1042 (OUI 0) and 802.1H bridge tunnel (00-00-F8) encapsulate an ethertype
    typed = snap & (b[:, 3] == 0) & (b[:, 4] == 0) & ((b[:, 5] == 0) | (b[:, 5] == 0xF8))
    l3 = np.where(data, at + llc, l3)
    l3 = np.where(typed, at + llc + 8, l3)
    et = np.where(typed, b[:, 6] << 8 | b[:, 7], 0)
    l3[cut] = -1
    out["status"][r[cut & ~header_cut]] = DS_END_LLC
    out["l3_offset"][r[cut & ~header_cut]] = np.minimum(at + llc, 0xFFFF)[cut & ~header_cut]
    return l3, et


def _radiotap(src: _Bytes, r, off, cl, out):
    """radiotap() of _kernel.c for rows ``r``: (802.11 frame offset, or -1 where the header is
    malformed; FCS at the end; header padding; 0-length PSDU), and the rt_* outputs.

    The fields' offsets follow from the presence words alone (and the header length, which
    bounds them), except after a vendor namespace, whose data length is in the header: headers
    are grouped by their words and length, each group's layout is walked once
    (``_radiotap_layout``, a line-by-line copy of the C walk), then its fields are read for all
    of the group's packets at once.  Headers with a vendor namespace are walked one by one."""
    n = len(r)
    at = np.full(n, -1, np.int64)
    fcs, datapad, no_psdu = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    h = src.rows(off[r], 8)
    length = h[:, 2].astype(np.int64) | h[:, 3].astype(np.int64) << 8
    ok = (cl[r] >= 8) & (length >= 8) & (length <= cl[r])
    at[ok] = length[ok]
    walk = np.flatnonzero(ok & (h[:, 0] == 0))      # another version: no fields
    words = _presence_words(src, off[r[walk]], length[walk])
    walk, words = walk[words > 0], words[words > 0]  # none: no fields
    flags = (fcs, datapad, no_psdu)
    for count in np.unique(words):
        g = walk[words == count]
        w = src.rows(off[r[g]] + 4, 4 * int(count))
        vendor = (w.view("<u4") & (1 << _RT_NS_VENDOR)).any(axis=1)
        for i in np.flatnonzero(vendor):             # the layout depends on the vendor's data
            row = g[i:i + 1]
            header = bytes(src.rows(off[r[row]], int(length[row[0]]))[0])
            _radiotap_fields(src, r[row], off, _radiotap_layout(header), out, flags, row)
        g, w = g[~vendor], w[~vendor]
        if not len(g):
            continue
        keys = np.concatenate([h[g, 2:4], w], axis=1)
        keys = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).ravel()
        uniq, which = np.unique(keys, return_inverse=True)
        order = np.argsort(which.ravel(), kind="stable")
        bounds = np.searchsorted(which.ravel()[order], np.arange(len(uniq) + 1))
        for key, lo, hi in zip(uniq, bounds[:-1], bounds[1:]):
            rows = g[np.sort(order[lo:hi])]
            layout = _radiotap_layout(b"\0\0" + bytes(key))
            _radiotap_fields(src, r[rows], off, layout, out, flags, rows)
    return at, fcs, datapad, no_psdu


def _presence_words(src: _Bytes, at, length):
    """Number of presence words of the radiotap headers at file offsets ``at`` (their first word
    at +4, each with bit 31 set followed by another), 0 where the header has no fields: a word
    with bit 31 set and no room for the next before ``length``, or one with both namespace bits.

    Words are examined in blocks (1, 2, 4, ... per header, at most _WORD_BUDGET a step), so a
    bitmap that goes on to the end of a 64 KB header still takes few steps."""
    count = np.zeros(len(at), np.int64)
    live = np.arange(len(at))
    first, width = 0, 1
    while len(live):
        pos = 4 + 4 * (first + np.arange(width))             # offsets of the words examined
        w = src.rows((at[live, None] + pos).ravel(), 4).view("<u4").reshape(len(live), width)
        readable = pos + 4 <= length[live, None]
        both = ((w >> _RT_NS_RADIOTAP) & 3) == 3
        last = (w >> _RT_EXT) == 0
        stop = ~readable | both | last
        done = stop.any(axis=1)
        k = stop.argmax(axis=1)[done]
        rows = np.flatnonzero(done)
        good = readable[rows, k] & ~both[rows, k]
        count[live[done]] = np.where(good, first + k + 1, 0)
        live = live[~done]
        first += width
        width = int(max(1, min(2 * width, _WORD_BUDGET // max(len(live), 1))))
    return count


def _radiotap_layout(h: bytes) -> list[tuple[int, int]]:
    """The walk of radiotap() in _kernel.c over one header ``h`` (its presence words, whose
    chain was checked, then the fields; only vendor namespace headers are read past the words):
    the radiotap-namespace fields radiotap_field() reads, as (bit, offset) in the order found."""
    length = h[2] | h[3] << 8
    hits = []
    next_word, vendor_end, index, radiotap_ns, reset = 8, 0, 0, True, False
    word = int.from_bytes(h[4:8], "little")
    arg = 4
    while True:                                   # past the presence words
        arg += 4
        if not (int.from_bytes(h[arg - 4:arg], "little") >> _RT_EXT):
            break
    while word:
        bit = (word & -word).bit_length() - 1
        index += bit
        word >>= bit
        b = index % 32
        if b in (_RT_NS_RADIOTAP, _RT_EXT):
            align, size = 1, 0
        elif b == _RT_NS_VENDOR:
            align, size = 2, 6
        elif not radiotap_ns:                     # a vendor namespace's field: skip its data
            arg = vendor_end
            word >>= 1
            index += 1
            continue
        elif index >= 29:                         # a bit the radiotap namespace does not have
            break
        else:
            align, size = _RT_ALIGN[index], _RT_SIZE[index]
            if not align:                         # a radiotap bit Wireshark 4.0 does not know
                break
        arg = (arg + align - 1) & ~(align - 1)
        if b == _RT_NS_VENDOR:
            if arg + 6 > length:
                break
            vendor_end = arg + 6 + (h[arg + 4] | h[arg + 5] << 8)
            size += vendor_end - arg - 6
        field_at = arg
        arg += size
        if arg > length:                          # the field runs past the header
            break
        if b == _RT_NS_VENDOR:
            reset, radiotap_ns = True, False
        elif b == _RT_NS_RADIOTAP:
            reset, radiotap_ns = True, True
        elif b == _RT_EXT:                        # the next presence word
            word = int.from_bytes(h[next_word:next_word + 4], "little")
            next_word += 4
            index = 0 if reset else index + 1
            reset = False
            continue
        elif radiotap_ns and index in _RT_USED:
            hits.append((index, field_at))
        word >>= 1
        index += 1
    return hits


def _radiotap_fields(src: _Bytes, rows, off, layout, out, flags, local):
    """radiotap_field() of _kernel.c for packets ``rows`` sharing one ``layout``; ``flags`` are
    the (FCS, padding, 0-length PSDU) arrays of _radiotap, indexed by ``local``."""
    fcs, datapad, no_psdu = flags
    present = out["rt_present"][rows].astype(np.int64)
    for bit, at in layout:
        v = src.rows(off[rows] + at, _RT_USED[bit]).astype(np.int64)
        if bit == 1:                              # Flags: the last says FCS, any says padding
            fcs[local] = (v[:, 0] & 0x10) != 0
            datapad[local] |= (v[:, 0] & 0x20) != 0
        elif bit == 2:                            # Rate
            new = (present & RT_RATE) == 0
            out["rt_rate"][rows[new]] = v[new, 0]
            present |= RT_RATE
        elif bit == 3:                            # Channel
            new = (present & RT_FREQ) == 0
            out["rt_freq"][rows[new]] = v[new, 0] | v[new, 1] << 8
            present |= RT_FREQ
        elif bit == 5:                            # dBm antenna signal
            new = (present & RT_SIGNAL) == 0
            out["rt_signal"][rows[new]] = v[new, 0].astype(np.uint8).view(np.int8)
            present |= RT_SIGNAL
        elif bit == 19:                           # MCS: a rate when all of it is known
            new = ((present & RT_RATE) == 0) & ((v[:, 0] & 7) == 7) & (v[:, 2] <= 76)
            code = (RT_MCS_RATE + 4 * v[:, 2] + np.where((v[:, 1] & 3) == 1, 2, 0)
                    + np.where(v[:, 1] & 4, 1, 0))
            out["rt_rate"][rows[new]] = code[new]
            present[new] |= RT_RATE
        else:                                     # 0-length PSDU: no 802.11 frame follows
            no_psdu[local] = True
    out["rt_present"][rows] = present


class _IP:
    """IPv4 or IPv6 headers as parsed (parse_ip() of _kernel.c), before anything is written."""

    def __init__(self, src: _Bytes, version: int, ip, cap, rest):
        n = len(ip)
        self.hdr, self.ident = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.flags, self.frag = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.ended = np.zeros(n, bool)   # IPv6: the extension headers or payload length end it
        if version == 4:
            h = src.rows(ip, 20)
            self.hdr = (h[:, 0] & 0x0F).astype(np.int64) * 4
            malformed = (cap >= 1) & ((h[:, 0] >> 4) != 4)
            self.cut = ~malformed & (cap < 20)
            self.bad = self.cut | malformed | (self.hdr < 20)
            self.total = _be16(h, 2)
            self.total = np.where(self.total == 0, rest, self.total)  # TSO: 0, use the frame's
            self.src, self.dst = h[:, 12:16], h[:, 16:20]
            self.proto, self.ttl, self.ident = h[:, 9].astype(np.int64), h[:, 8], _be16(h, 4)
            fr = _be16(h, 6)
            self.frag = fr & 0x1FFF
            self.flags = (np.where(fr & 0x4000, IPF_DF, 0) | np.where(fr & 0x2000, IPF_MF, 0)
                          | np.where(fr & 0x3FFF, IPF_FRAGMENT, 0))
            # a non-first fragment carries no transport header
            self.transport = (self.total >= self.hdr) & (self.frag == 0)
        else:
            h = src.rows(ip, 40)
            malformed = (cap >= 1) & ((h[:, 0] >> 4) != 6)
            self.cut = ~malformed & (cap < 40)
            self.bad = self.cut | malformed
            self.total = _be16(h, 4) + 40
            # payload length 0: a jumbogram (length in the hop-by-hop option: the frame's) when a
            # hop-by-hop header follows, else malformed for Wireshark (no transport decoded)
            zero_len = self.total == 40
            malformed_len = zero_len & (h[:, 6] != 0)
            self.total = np.where(zero_len & ~malformed_len & (rest > 40), rest, self.total)
            self.src, self.dst = h[:, 8:24], h[:, 24:40]
            self.proto, self.ttl = h[:, 6].astype(np.int64), h[:, 7]
            self.hdr = np.full(n, 40, np.int64)
            self._extensions(src, ip, cap, np.flatnonzero(~self.bad))
            self.transport = ~np.isin(self.proto, _NOT_TRANSPORT) & (self.frag == 0) & ~malformed_len
            self.ended = (np.isin(self.proto, _EXTENSIONS)
                          | (malformed_len & (self.proto != _NO_NEXT)))

    def _extensions(self, src: _Bytes, ip, cap, walking):
        """Walk up to 32 extension headers from the rows ``walking``: proto and hdr advance, a
        fragment header sets the fragment fields; a header cut by the capture ends the walk."""
        proto, hdr = self.proto, self.hdr
        walking = walking[np.isin(proto[walking], _EXTENSIONS)]
        for _ in range(32):
            p = proto[walking]
            fragment = p == _EXT_FRAGMENT
            walking, p, fragment = _kept(hdr[walking] + np.where(fragment, 8, 2) <= cap[walking],
                                         walking, p, fragment)
            if not len(walking):
                break
            h = src.rows(ip[walking] + hdr[walking], 8)
            f = walking[fragment]
            if len(f):
                fr = _be16(h[fragment], 2)
                self.frag[f] = fr >> 3
                self.ident[f] = _be32(h[fragment], 4)
                self.flags[f] |= (np.where(fr & 1, IPF_MF, 0)
                                  | np.where((fr & 1) | (fr >> 3), IPF_FRAGMENT, 0))
            length = h[:, 1].astype(np.int64)
            hdr[walking] += np.where(fragment, 8, np.where(p == _EXT_AH, 4 * (length + 2),
                                                           8 * (length + 1)))
            proto[walking] = h[:, 0]
            walking = walking[np.isin(proto[walking], _EXTENSIONS)]

    def candidates(self, keep, r, ip, cap, rest, version):
        """Rows followed by a transport header: (rows, its offset, captured bytes, reported
        bytes -- the IP length trimmed to the frame, never extended --, protocol, IP version)."""
        rep = np.minimum(self.total, rest) - self.hdr
        go = keep & self.transport & (self.hdr <= self.total) & (rep >= 0)
        return _kept(go, r, ip + self.hdr, np.maximum(cap - self.hdr, 0), rep, self.proto,
                     np.full(len(r), version, np.int64))


def _ip_layer(src: _Bytes, version, r, ip, ipcap, rest, out):
    """The IP header fields of rows ``r``; returns the transport candidates."""
    h = _IP(src, version, ip, ipcap, rest)
    good = ~h.bad
    sel = slice(None)
    if h.bad.any():
        out["status"][r[h.bad]] = DS_MALFORMED
        out["status"][r[h.cut]] = DS_END_IP
        sel = good
    # ended before its transport header: the extension headers or the IP length (decode_one)
    rep = np.minimum(h.total, rest) - h.hdr
    ended = good & ((~h.transport & h.ended) | (h.transport & ((h.hdr > h.total) | (rep < 0))))
    out["status"][r[ended]] = DS_END_L4
    w = _at(r[sel])
    out["ip_version"][w] = version
    width = 4 if version == 4 else 16
    out["ip_src"][w, :width] = h.src[sel]
    out["ip_dst"][w, :width] = h.dst[sel]
    for name, values in (("ip_hdr_len", np.minimum(h.hdr, 0xFFFF)), ("ip_len", h.total),
                         ("ip_proto", h.proto), ("ip_ttl", h.ttl), ("ip_id", h.ident),
                         ("ip_flags", h.flags), ("ip_frag_offset", h.frag)):
        out[name][w] = values[sel]
    return h.candidates(good, r, ip, ipcap, rest, version)


def _transport(src: _Bytes, r, at, cap, rep, proto, ver, off, out, sack):
    """TCP, UDP or ICMP after the IP header (rows ``r`` in packet order), and where its payload
    starts and how long it is.  The TCP or UDP header quoted in an ICMP error is decoded too,
    into the same fields, marked by ``l4_quoted`` instead of ``l4`` and without a payload."""
    icmp = np.flatnonzero(((proto == 1) & (ver == 4)) | ((proto == 58) & (ver == 6)))
    icmp_payload, quoted = _icmp(src, r[icmp], at[icmp], cap[icmp], rep[icmp], ver[icmp], out)
    payload = [icmp_payload]
    for number, layer in ((6, _tcp), (17, _udp)):
        k = np.flatnonzero(proto == number)
        parts = [(r[k], at[k], cap[k], rep[k], np.zeros(len(k), bool))]
        q = np.flatnonzero(quoted[4] == number)
        parts.append(tuple(a[q] for a in quoted[:4]) + (np.ones(len(q), bool),))
        parts = [p for p in parts if len(p[0])]
        if parts:
            payload.append(layer(src, *_in_order(parts), out, sack))
    payload = [p for p in payload if len(p[0])]
    if payload:
        rows, at, hl, plen = _in_order(payload)
        w = _at(rows)
        out["payload_rel"][w] = np.minimum(at - off[rows] + hl, 0xFFFF)
        out["payload_len"][w] = plen


def _set_l4(out, rows, quoted, value):
    """l4 for the packet's own transport header, l4_quoted for one quoted in an ICMP error."""
    if quoted.any():
        out["l4"][rows[~quoted]] = value
        out["l4_quoted"][rows[quoted]] = value
    else:
        out["l4"][_at(rows)] = value


def _tcp(src: _Bytes, rows, at, cap, rep, quoted, out, sack):
    """TCP headers (rows in packet order); returns (rows, offset, header length, payload
    length) of the packets' own, not quoted, headers."""
    whole = (cap >= 20) & (rep >= 20)
    out["status"][rows[~whole & ~quoted]] = DS_END_L4
    rows, at, cap, rep, quoted = _kept(whole, rows, at, cap, rep, quoted)
    h = src.rows(at, 20)
    hl = (h[:, 12] >> 4).astype(np.int64) * 4
    # a header length under 20 or past the reported bytes is bogus, but Wireshark still numbers
    # the stream: fixed fields kept, options not read, payload by the reported bytes (_kernel.c)
    bogus = (hl < 20) | (hl > rep)
    _set_l4(out, rows, quoted, L4_TCP)
    w = _at(rows)
    out["srcport"][w] = _be16(h, 0)
    out["dstport"][w] = _be16(h, 2)
    out["tcp_seq"][w] = _be32(h, 4)
    out["tcp_ack"][w] = _be32(h, 8)
    out["tcp_hdr_len"][w] = hl
    out["tcp_flags"][w] = _be16(h, 12) & 0x0FFF
    out["tcp_win"][w] = _be16(h, 14)
    plen = np.where(hl > rep, 0, rep - hl)
    out["tcp_len"][w] = plen
    opt_len = np.where(bogus, 0, np.minimum(hl, cap) - 20)   # option bytes in header and file
    has = np.flatnonzero(opt_len > 0)
    if len(has):
        end = opt_len[has]
        _tcp_options(src.rows(at[has] + 20, int(end.max())), end, rows[has], out, sack)
    return _kept(~quoted, rows, at, np.minimum(hl, rep), plen)


def _tcp_options(b, end, rows, out, sack: SackTable):
    """Walk the option bytes b[i, :end[i]] of each header (rows in packet order), one option a
    step, at most 40 steps.

    EOL ends the list, NOP is one byte, a length under 2 or past the end ends it; known kinds
    with their exact lengths are recorded (the last one of a kind wins).  SACK options are
    collected and stored after the walk (``_store_sacks``)."""
    width = b.shape[1]
    live = np.arange(len(b))
    if width >= 12:   # NOP NOP TS and nothing else (Linux data segments): the walk's result at once
        ts_only = (end == 12) & (b[:, 0] == 1) & (b[:, 1] == 1) & (b[:, 2] == 8) & (b[:, 3] == 10)
        if ts_only.any():
            _opt_ts(b[ts_only], 4, rows[ts_only], out)
            live = live[~ts_only]
    flat = b.ravel()
    o = np.zeros(len(live), np.int64)
    sacks = []                               # (header index, value column, blocks) per step
    for _ in range(40):
        if not len(live):
            break
        e = end[live]
        base = live * width
        kind = flat[base + o]
        nop = kind == 1
        ranged = (kind > 1) & (o + 2 <= e)
        olen = np.where(ranged, flat[base + np.minimum(o + 1, width - 1)], 0).astype(np.int64)
        valid = ranged & (olen >= 2) & (o + olen <= e)
        v = o + 2
        for sel, apply in ((valid & (kind == 2) & (olen == 4), _opt_mss),
                           (valid & (kind == 3) & (olen == 3), _opt_ws),
                           (valid & (kind == 4) & (olen == 2), _opt_sack_perm),
                           (valid & (kind == 8) & (olen == 10), _opt_ts)):
            if sel.any():
                apply(b[live[sel]], v[sel], rows[live[sel]], out)
        sack_opt = valid & (kind == 5) & (olen >= 10) & ((olen - 2) % 8 == 0)
        if sack_opt.any():
            sacks.append((live[sack_opt], v[sack_opt], (olen[sack_opt] - 2) // 8))
        o = np.where(nop, o + 1, o + olen)
        more = (nop | valid) & (o < e)
        live, o = live[more], o[more]
    if sacks:
        _store_sacks(b, rows, *(np.concatenate(x) for x in zip(*sacks)), out, sack)


def _opt_mss(b, v, rows, out):
    out["tcp_opts"][rows] |= OPT_MSS
    out["tcp_mss"][rows] = _be16(b, v)


def _opt_ws(b, v, rows, out):
    out["tcp_opts"][rows] |= OPT_WS
    out["tcp_ws"][rows] = b[np.arange(len(b)), v]


def _opt_sack_perm(b, v, rows, out):
    out["tcp_opts"][rows] |= OPT_SACK_PERM


def _opt_ts(b, v, rows, out):
    out["tcp_opts"][rows] |= OPT_TS
    out["tcp_tsval"][rows] = _be32(b, v)
    out["tcp_tsecr"][rows] = _be32(b, v + 4)


def _store_sacks(b, rows, hdr, v, blocks, out, sack: SackTable):
    """SACK options (header index, value column, blocks), in option order per header, into the
    compact table: each header with one gets the next free row, in packet order, while rows are
    left (without one its SACK options are skipped); its blocks fill the row's 4 slots in order."""
    order = np.argsort(hdr, kind="stable")            # grouped by header, option order kept
    hdr, v, blocks = hdr[order], v[order], blocks[order]
    heads = np.unique(hdr)                            # ascending index = packet order
    used = int(sack.used[0])
    granted = heads[: max(len(sack.rows) - used, 0)]
    table_row = np.full(len(b), -1, np.int64)
    table_row[granted] = used + np.arange(len(granted))
    sack.used[0] = used + len(granted)
    out["tcp_sack_row"][rows[granted]] = table_row[granted]
    keep = table_row[hdr] >= 0
    hdr, v, blocks = hdr[keep], v[keep], blocks[keep]
    # the header's count before each option: what it had, plus earlier options' blocks, up to 4
    c0 = out["tcp_sack_count"][rows[hdr]].astype(np.int64)
    earlier = np.cumsum(blocks) - blocks
    group = np.flatnonzero(np.r_[True, hdr[1:] != hdr[:-1]]) if len(hdr) else hdr
    earlier -= np.repeat(earlier[group], np.diff(np.r_[group, len(hdr)]))
    before = np.where(c0 >= 4, c0, np.minimum(c0 + earlier, 4))
    add = np.clip(4 - before, 0, blocks)
    for j in range(4):
        w = j < add
        at, slot, col = table_row[hdr[w]], before[w] + j, v[w] + 8 * j
        sack.rows[at, 2 * slot] = _be32(b[hdr[w]], col)
        sack.rows[at, 2 * slot + 1] = _be32(b[hdr[w]], col + 4)
    added = np.zeros(len(b), np.int64)
    np.add.at(added, hdr, add)
    out["tcp_sack_count"][rows[granted]] += added[granted].astype(np.uint8)


def _udp(src: _Bytes, rows, at, cap, rep, quoted, out, sack):
    """UDP headers (called like ``_tcp``; ``sack`` unused); the payload length is the UDP
    length's, trimmed to the reported bytes except in a first fragment (its header speaks for
    the whole datagram, as _kernel.c has it)."""
    whole = (cap >= 8) & (rep >= 8)
    out["status"][rows[~whole & ~quoted]] = DS_END_L4
    rows, at, rep, quoted = _kept(whole, rows, at, rep, quoted)
    h = src.rows(at, 8)
    length = _be16(h, 4)
    # a UDP length under 8 is bogus: Wireshark numbers no stream, so no UDP layer (_kernel.c)
    rows, at, rep, quoted, h, length = _kept(length >= 8, rows, at, rep, quoted, h, length)
    _set_l4(out, rows, quoted, L4_UDP)
    w = _at(rows)
    out["srcport"][w] = _be16(h, 0)
    out["dstport"][w] = _be16(h, 2)
    out["udp_length"][w] = length
    plen = np.where(length >= 8, length - 8, 0)
    trim = (plen > rep - 8) & ((out["ip_flags"][rows] & IPF_MF) == 0)
    plen = np.where(trim, rep - 8, plen)
    return _kept(~quoted, rows, at, np.full(len(rows), 8, np.int64), plen)


def _icmp(src: _Bytes, rows, at, cap, rep, ver, out):
    """ICMP/ICMPv6: type and code, identifier and sequence of echo-like messages; returns the
    payload parts, and the TCP/UDP candidates of the packets quoted by errors (destination
    unreachable, source quench, redirect, time exceeded, parameter problem; ICMPv6 1-4)."""
    whole = (cap >= 4) & (rep >= 4)
    out["status"][rows[~whole]] = DS_END_L4
    rows, at, cap, rep, ver = _kept(whole, rows, at, cap, rep, ver)
    h = src.rows(at, 8)
    t = h[:, 0]
    w = _at(rows)
    out["l4"][w] = L4_ICMP
    out["icmp_type"][w] = t
    out["icmp_code"][w] = h[:, 1]
    v4 = ver == 4
    echo = np.where(v4, (t == 0) | (t == 8) | ((t >= 13) & (t <= 18)), (t == 128) | (t == 129))
    echo &= (cap >= 8) & (rep >= 8)
    out["icmp_echo"][rows[echo]] = 1
    out["icmp_ident"][rows[echo]] = _be16(h[echo], 4)
    out["icmp_seq"][rows[echo]] = _be16(h[echo], 6)
    hl = np.minimum(rep, 8)
    error = np.where(v4, np.isin(t, (3, 4, 5, 11, 12)), (t >= 1) & (t <= 4))
    error &= (cap > 8) & (rep > 8)
    quoted = []
    for version in (4, 6):
        e = np.flatnonzero(error & (ver == version))
        if len(e):
            quoted.append(_quoted(src, version, rows[e], at[e] + 8, cap[e] - 8, rep[e] - 8, out))
    quoted = _in_order([q for q in quoted if len(q[0])] or [(np.zeros(0, np.int64),) * 6])
    return (rows, at, hl, rep - hl), quoted


def _quoted(src: _Bytes, version, rows, ip, cap, rep, out):
    """The IP header an ICMP error quotes (same version as the error's): its addresses into
    q_src/q_dst and its TCP/UDP candidates, when a transport header follows it (Wireshark gives
    that header a stream, so the conversation hash must see it)."""
    h = _IP(src, version, ip, cap, rep)
    keep = ~h.bad & np.isin(h.proto, (6, 17))
    r, ip, cap, rep, proto, ver = h.candidates(keep, rows, ip, cap, rep, version)
    # the addresses are written even when the transport header then turns out too short
    has = keep & h.transport & (h.hdr <= h.total)
    width = 4 if version == 4 else 16
    out["q_src"][rows[has], :width] = h.src[has]
    out["q_dst"][rows[has], :width] = h.dst[has]
    return r, ip, cap, rep, proto, ver


# -- hashing: numbered in order of first appearance, across windows --------------------------------

class _FirstSeen:
    """Numbers integer keys 0, 1, 2 ... in order of first appearance, across calls."""

    def __init__(self):
        self.known = np.zeros(0, np.int64)

    def __len__(self):
        return len(self.known)

    def number(self, keys: np.ndarray) -> np.ndarray:
        codes, uniques = pd.factorize(np.concatenate([self.known, keys.astype(np.int64)]))
        before, self.known = len(self.known), np.asarray(uniques)
        return codes[before:]


def _new_at(codes: np.ndarray, before: int) -> np.ndarray:
    """True where a code >= ``before`` appears for the first time (new codes first appear in
    increasing order, so exactly there the running maximum rises)."""
    if not len(codes):
        return np.zeros(0, bool)
    c = np.where(codes >= before, codes, before - 1)
    run = np.maximum.accumulate(c)
    return run > np.r_[before - 1, run[:-1]]


class _Interner:
    """Address codes: every distinct (16 address bytes, IPv6 or not) in order of first
    appearance, scanning packets in order and each packet's source before its destination."""

    def __init__(self):
        self._lo, self._hi, self._keys = _FirstSeen(), _FirstSeen(), _FirstSeen()
        self._addr = np.zeros((0, 16), np.uint8)
        self._v6 = np.zeros(0, np.uint8)

    def intern(self, version, src16, dst16):
        n = len(version)
        ip = np.flatnonzero(version)
        both = np.empty((2 * len(ip), 16), np.uint8)
        both[0::2], both[1::2] = src16[ip], dst16[ip]
        v6 = np.repeat(version[ip] == 6, 2)
        halves = both.view("<u8")                      # two 64-bit halves, as exact keys
        key = (self._lo.number(halves[:, 0]) << 32 | self._hi.number(halves[:, 1]) << 1) | v6
        before = len(self._keys)
        codes = self._keys.number(key).astype(np.int32)
        new = _new_at(codes, before)
        self._addr = np.concatenate([self._addr, both[new]])
        self._v6 = np.concatenate([self._v6, v6[new].astype(np.uint8)])
        src_code, dst_code = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
        src_code[ip], dst_code[ip] = codes[0::2], codes[1::2]
        return src_code, dst_code

    def addresses(self):
        return self._addr.copy(), self._v6.copy()


class _Conversations:
    """TCP and UDP conversation ids: the unordered pair of (address code, port) endpoints,
    numbered per protocol in order of first appearance; ``reverse`` when the source is the
    larger endpoint (code x 65536 + port), ``first`` on a conversation's first packet."""

    def __init__(self):
        self._endpoints = _FirstSeen()
        self._pairs = {6: _FirstSeen(), 17: _FirstSeen()}

    def assign(self, l4, src_code, dst_code, srcport, dstport):
        n = len(l4)
        conv = np.full(n, -1, np.int32)
        reverse, first = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        for proto, pairs in self._pairs.items():
            idx = np.flatnonzero(l4 == proto)
            if not len(idx):
                continue
            es = src_code[idx].astype(np.int64) * 65536 + srcport[idx]
            ed = dst_code[idx].astype(np.int64) * 65536 + dstport[idx]
            rev = es > ed
            ends = self._endpoints.number(np.concatenate([np.where(rev, ed, es),
                                                          np.where(rev, es, ed)]))
            before = len(pairs)
            ids = pairs.number(ends[:len(idx)] << 32 | ends[len(idx):])
            conv[idx], reverse[idx] = ids, rev
            first[idx[_new_at(ids, before)]] = 1
        return conv, reverse, first
