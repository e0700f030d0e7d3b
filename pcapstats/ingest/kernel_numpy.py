"""The ingest kernel in numpy and plain Python: the fallback when ``_kernel.c`` was not compiled.

``NumpyKernel`` has the methods of ``kernel.CKernel`` and returns bit-identical results for
every input, valid or not; ``tests/test_kernel_equivalence.py`` holds the two to that.  Every
rule below mirrors a line of ``_kernel.c`` -- read the two side by side.

- The record walks are sequential (a record's length says where the next one starts), so they
  are Python loops over ``struct`` unpacks of the mapped file, bounds-checked as in C.
- ``decode`` is vectorised: each layer is one helper working on the rows (packets) that reached
  it, reading fixed-width byte rows out of the file with one fancy index (``_Bytes``).  The
  variable-length parts (VLAN tags, IPv6 extension headers, TCP options) loop over the depth,
  each step vectorised over the packets still walking; all those loops are bounded.
"""

from __future__ import annotations

import struct
from array import array

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .kernel import (ABSURD_RECORD, DS_MALFORMED, DS_UNKNOWN_LINKTYPE, IPF_DF, IPF_FRAGMENT,
                     IPF_MF, L4_ICMP, L4_TCP, L4_UDP, MAX_INTERFACES, OPT_MSS, OPT_SACK_PERM,
                     OPT_TS, OPT_WS, ST_ABSURD_LENGTH, ST_BAD_BLOCK, ST_BAD_SECTION, ST_OK,
                     ST_TOO_MANY_INTERFACES, ST_TRAILER_MISMATCH, ST_TRUNCATED,
                     ST_UNKNOWN_INTERFACE, Interfaces, Records, Status, new_outputs)

# pcapng block types
_SHB, _IDB, _OPB, _SPB, _EPB = 0x0A0D0D0A, 1, 2, 3, 6
_ETH_IPV4, _ETH_IPV6 = 0x0800, 0x86DD
_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)
# IPv6 next-header values walked as "next header, length in 8-byte units - 1" extensions.
_EXT_GENERIC = (0, 43, 60, 135, 139, 140)
_EXT_AH, _EXT_FRAGMENT, _NO_NEXT = 51, 44, 59
# Next-header values after which no transport header is decoded (cut walk or no next header).
_NOT_TRANSPORT = _EXT_GENERIC + (_EXT_AH, _EXT_FRAGMENT, _NO_NEXT)

_CHUNK = 1 << 17            # packets decoded per pass: bounds the temporaries' memory
_VLAN_BUDGET = 1 << 20      # tag slots examined per VLAN step (rows x tags)


class NumpyKernel:
    name = "numpy"

    # -- classic pcap --------------------------------------------------------------------------

    def walk_pcap(self, buf, pos, swapped, nsec, max_caplen):
        """Record offsets by a Python loop; the header fields are then gathered in numpy."""
        end = len(buf)
        pos = int(pos)
        max_caplen = int(max_caplen) & 0xFFFFFFFF
        status = Status(ST_OK, pos, 1)
        caplen_at = struct.Struct(">I" if swapped else "<I").unpack_from
        view = memoryview(np.ascontiguousarray(buf)).cast("B")
        heads = array("q")
        add = heads.append
        # ST_CAPACITY cannot happen here: records are at least 16 bytes and the list grows.
        while pos < end:
            if end - pos < 16:
                status = Status(ST_TRUNCATED, pos, len(heads) + 1)
                break
            cl = caplen_at(view, pos + 8)[0]
            if cl > max_caplen:
                status = Status(ST_ABSURD_LENGTH, pos, len(heads) + 1)
                break
            if cl > end - pos - 16:
                status = Status(ST_TRUNCATED, pos, len(heads) + 1)
                break
            add(pos)
            pos += 16 + cl
        head = np.frombuffer(heads, np.int64) if len(heads) else np.zeros(0, np.int64)
        rows = _Bytes(buf).rows(head, 16).view(">u4" if swapped else "<u4")
        ts = rows[:, 0].astype(np.int64) * 1_000_000_000 + rows[:, 1].astype(np.int64) * (
            1 if nsec else 1000)
        rec = Records(head + 16, rows[:, 2].astype(np.uint32), rows[:, 3].astype(np.uint32), ts,
                      np.zeros(len(head), np.uint32))
        return rec, status

    # -- pcapng --------------------------------------------------------------------------------

    def walk_pcapng(self, buf):
        """Blocks by a Python loop: sections set the byte order, interfaces are numbered per
        section, packet blocks (EPB/OPB/SPB) become records, other blocks are stepped over."""
        end = len(buf)
        view = memoryview(np.ascontiguousarray(buf)).cast("B")
        u32le = struct.Struct("<I").unpack_from
        fmt = _PcapngStructs(False)
        if_cols = ([], [], [], [], [])   # linktype, snaplen, tsresol, tsoffset, local_id
        if_snaplen = if_cols[1]
        offs, caps, origs, tss, ifaces = (array("q"), array("I"), array("I"), array("Q"),
                                          array("I"))
        pos = n_if = first_if = 0
        sw = False
        code = ST_OK
        stop = 0
        while pos < end:
            if end - pos < 12:
                code, stop = ST_TRUNCATED, pos
                break
            if u32le(view, pos)[0] == _SHB:
                if end - pos < 28:
                    code, stop = ST_TRUNCATED, pos
                    break
                magic = u32le(view, pos + 8)[0]
                if magic == 0x1A2B3C4D:
                    sw = False
                elif magic == 0x4D3C2B1A:
                    sw = True
                else:
                    code, stop = ST_BAD_SECTION, pos
                    break
                fmt = _PcapngStructs(sw)
                first_if = n_if
            btype, blen = fmt.head(view, pos)
            if blen < 12 or blen & 3:
                code, stop = ST_BAD_BLOCK, pos
                break
            if blen > ABSURD_RECORD:
                code, stop = ST_ABSURD_LENGTH, pos
                break
            if blen > end - pos:
                code, stop = ST_TRUNCATED, pos
                break
            if fmt.u32(view, pos + blen - 4)[0] != blen:
                code, stop = ST_TRAILER_MISMATCH, pos
                break
            body_end = blen - 4
            if btype == _EPB or btype == _OPB:
                if blen < 32:
                    code, stop = ST_BAD_BLOCK, pos
                    break
                _, _, ifid, ts_hi, ts_lo, cl, ol = fmt.packet(view, pos)
                if btype == _OPB:   # a 16-bit interface id, then the drop count
                    ifid = (ifid >> 16) if sw else (ifid & 0xFFFF)
                if cl > body_end - 28:
                    code, stop = ST_ABSURD_LENGTH, pos
                    break
                data, ts = 28, (ts_hi << 32) | ts_lo
            elif btype == _SPB:
                if blen < 16:
                    code, stop = ST_BAD_BLOCK, pos
                    break
                ifid, ts, data = 0, 0, 12
                ol = cl = fmt.u32(view, pos + 8)[0]
                if first_if < n_if and if_snaplen[first_if] and cl > if_snaplen[first_if]:
                    cl = if_snaplen[first_if]
                cl = min(cl, body_end - data)
            elif btype == _IDB:
                if blen < 20:
                    code, stop = ST_BAD_BLOCK, pos
                    break
                if n_if >= MAX_INTERFACES:
                    code, stop = ST_TOO_MANY_INTERFACES, pos
                    break
                for col, value in zip(if_cols, _interface(view, pos, body_end, fmt, sw)):
                    col.append(value)
                if_cols[4].append(n_if - first_if)
                n_if += 1
                pos += blen
                continue
            elif btype == _SHB:
                if blen < 28:
                    code, stop = ST_BAD_BLOCK, pos
                    break
                pos += blen
                continue
            else:                # NRB, ISB, DSB, custom, unknown: stepped over
                pos += blen
                continue
            if ifid >= n_if - first_if:
                code, stop = ST_UNKNOWN_INTERFACE, pos
                break
            offs.append(pos + data)
            caps.append(cl)
            origs.append(ol)
            tss.append(ts)
            ifaces.append(first_if + ifid)
            pos += blen
        rec = Records(_np(offs, np.int64), _np(caps, np.uint32), _np(origs, np.uint32),
                      _np(tss, np.uint64), _np(ifaces, np.uint32))
        ifs = Interfaces(*(np.array(col, dtype) for col, dtype in zip(
            if_cols, (np.int32, np.uint32, np.uint8, np.int64, np.uint32))))
        return rec, ifs, Status(code, stop, 1 if code == ST_OK else len(offs) + 1, sw)

    # -- field decoding ------------------------------------------------------------------------

    def decode(self, buf, data_off, caplen, origlen, linktype):
        """All packets' header fields, a chunk of packets at a time (see ``_decode_chunk``)."""
        off = np.ascontiguousarray(data_off, np.int64)
        cl = np.ascontiguousarray(caplen, np.uint32)
        ol = np.ascontiguousarray(origlen, np.uint32)
        lt = np.ascontiguousarray(linktype, np.uint16)
        n = len(off)
        out = new_outputs(n)
        src = _Bytes(buf)
        for s in range(0, n, _CHUNK):
            e = min(s + _CHUNK, n)
            _decode_chunk(src, off[s:e], cl[s:e], ol[s:e], lt[s:e],
                          {k: v[s:e] for k, v in out.items()})
        return out


class _PcapngStructs:
    """The unpackers of one section's byte order."""

    def __init__(self, swapped: bool):
        bo = ">" if swapped else "<"
        self.u32 = struct.Struct(bo + "I").unpack_from
        self.u16x2 = struct.Struct(bo + "HH").unpack_from
        self.head = struct.Struct(bo + "II").unpack_from
        self.packet = struct.Struct(bo + "7I").unpack_from


def _interface(view, pos, body_end, fmt: _PcapngStructs, sw: bool):
    """An IDB's link type, snaplen, if_tsresol byte and if_tsoffset (its options walked as in C:
    stop at opt_endofopt or at an option running past the block body)."""
    linktype = fmt.u16x2(view, pos + 8)[0]
    snaplen = fmt.u32(view, pos + 12)[0]
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
    if tsoffset >= 1 << 63:
        tsoffset -= 1 << 64
    return linktype, snaplen, tsresol, tsoffset


def _np(a: array, dtype) -> np.ndarray:
    return np.frombuffer(a, dtype).copy() if len(a) else np.zeros(0, dtype)


class _Bytes:
    """Fixed-width byte rows of the file at arbitrary offsets, never read out of bounds.

    A sliding-window view turns "``width`` bytes at each offset" into one fancy index; rows that
    would run past the end of the buffer (only near its end) are read byte by byte with clipped
    indices.  Callers use only the bytes their length checks allow, like the C code.
    """

    def __init__(self, buf):
        self.buf = np.asarray(buf, np.uint8).reshape(-1)
        self._windows: dict[int, np.ndarray] = {}

    def rows(self, at: np.ndarray, width: int) -> np.ndarray:
        """uint8 array (len(at), width): the bytes at at[i] .. at[i] + width - 1."""
        size = len(self.buf)
        if len(at) == 0 or size == 0:
            return np.zeros((len(at), width), np.uint8)
        if width <= size:
            win = self._windows.get(width)
            if win is None:
                win = self._windows[width] = sliding_window_view(self.buf, width)
            last = size - width
            if at.min() >= 0 and at.max() <= last:
                return win[at]
            inside = (at >= 0) & (at <= last)
        else:
            inside = np.zeros(len(at), bool)
        out = np.empty((len(at), width), np.uint8)
        if inside.any():
            out[inside] = self._windows[width][at[inside]]
        edge = ~inside
        idx = at[edge, None] + np.arange(width)
        out[edge] = self.buf[np.clip(idx, 0, size - 1)]
        return out


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

def _decode_chunk(src: _Bytes, off, cl32, ol32, lt, out):
    """decode_one() of _kernel.c for every packet of a chunk, layer by layer."""
    cl = cl32.astype(np.int64)
    ol = np.maximum(ol32, cl32).astype(np.int64)
    l3, et = _link_layer(src, off, cl, lt, out)
    out["status"][l3 == -2] = DS_UNKNOWN_LINKTYPE
    out["status"][l3 == -1] = DS_MALFORMED
    ok = l3 >= 0
    parts = []
    for ethertype, layer in ((_ETH_IPV4, _ipv4), (_ETH_IPV6, _ipv6)):
        r = np.flatnonzero(ok & (et == ethertype))
        if len(r):
            parts.append(layer(src, r, off[r] + l3[r], cl[r] - l3[r], ol[r] - l3[r], out))
    if parts:
        _transport(src, *(np.concatenate(p) for p in zip(*parts)), out)


def _link_layer(src: _Bytes, off, cl, lt, out):
    """L3 offset (-1: link header cut, -2: unknown link type) and ethertype of each packet."""
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
            if kind == 108:
                fam = b[:, 0] << 24 | b[:, 1] << 16 | b[:, 2] << 8 | b[:, 3]
            else:                            # little-endian, byte-swapped if its low half is 0
                le = b[:, 3] << 24 | b[:, 2] << 16 | b[:, 1] << 8 | b[:, 0]
                fam = np.where((le & 0xFFFF) == 0, b[:, 0] << 24 | b[:, 1] << 16 | b[:, 2] << 8
                               | b[:, 3], le)
            l3[r] = 4
            et[r] = np.where(fam == 2, _ETH_IPV4,
                             np.where(np.isin(fam, (10, 24, 28, 30)), _ETH_IPV6, 0))
    tagged = np.flatnonzero((l3 > 0) & np.isin(et, _VLAN_TPIDS))
    if len(tagged):
        _skip_vlans(src, tagged, off, cl, l3, et, out)
    return l3, et


def _skip_vlans(src: _Bytes, r, off, cl, l3, et, out):
    """Walk the 4-byte VLAN tags at l3[r] while the ethertype says another tag follows.

    Tags are examined in blocks (1, 2, 4, ... per packet, at most _VLAN_BUDGET slots a step), so
    a frame made of nothing but tags still takes few steps.  The outermost tag's id and the
    number of whole tags (capped at 255) are recorded; a tag cut short makes the link header cut.
    """
    at = off[r] + l3[r]                      # file offset of the next tag
    end = off[r] + cl[r]
    count = np.zeros(len(r), np.int64)
    first = src.rows(at, 2)
    whole = at + 4 <= end
    out["vlan_id"][r[whole]] = _be16(first[whole], 0) & 0x0FFF
    width = 1
    while len(r):
        tag_at = at[:, None] + 4 * np.arange(width)
        readable = tag_at + 4 <= end[:, None]
        inner = _be16(src.rows(tag_at.ravel() + 2, 2), 0).reshape(tag_at.shape)
        stops = ~readable | ~np.isin(inner, _VLAN_TPIDS)
        done = stops.any(axis=1)
        k = stops.argmax(axis=1)[done]
        d = r[done]
        rows = np.flatnonzero(done)
        cut = ~readable[rows, k]
        tags = count[done] + k + ~cut
        out["vlan_count"][d] = np.minimum(tags, 255)
        l3[d] = np.where(cut, -1, tag_at[rows, k] + 4 - off[d])
        et[d] = inner[rows, k]
        going = ~done
        r, at, end = r[going], at[going] + 4 * width, end[going]
        count = count[going] + width
        width = int(max(1, min(2 * width, _VLAN_BUDGET // max(len(r), 1))))


def _ipv4(src: _Bytes, r, ip, ipcap, rest, out):
    """IPv4 header fields; returns the transport candidates (see ``_transport``)."""
    bad = ipcap < 20
    good = ~bad
    h = src.rows(ip[good], 20)
    hdr = (h[:, 0] & 0x0F).astype(np.int64) * 4
    bad[good] = ((h[:, 0] >> 4) != 4) | (hdr < 20)
    out["status"][r[bad]] = DS_MALFORMED
    keep = ~bad[good]
    r, ip, ipcap, rest, h, hdr = r[~bad], ip[~bad], ipcap[~bad], rest[~bad], h[keep], hdr[keep]
    total = _be16(h, 2)
    total = np.where(total == 0, rest, total)    # TSO: length left 0, use the frame's
    frag = _be16(h, 6)
    out["ip_version"][r] = 4
    out["ip_src"][r, :4] = h[:, 12:16]
    out["ip_dst"][r, :4] = h[:, 16:20]
    out["ip_hdr_len"][r] = hdr
    out["ip_len"][r] = total
    out["ip_proto"][r] = h[:, 9]
    out["ip_ttl"][r] = h[:, 8]
    out["ip_id"][r] = _be16(h, 4)
    out["ip_frag_offset"][r] = frag & 0x1FFF
    out["ip_flags"][r] = (np.where(frag & 0x4000, IPF_DF, 0) | np.where(frag & 0x2000, IPF_MF, 0)
                          | np.where(frag & 0x3FFF, IPF_FRAGMENT, 0))
    go = (total >= hdr) & ((frag & 0x1FFF) == 0)   # non-first fragments carry no transport header
    ver = np.full(int(go.sum()), 4, np.int64)
    return r[go], ip[go], ipcap[go], rest[go], hdr[go], total[go], h[go, 9].astype(np.int64), ver


def _ipv6(src: _Bytes, r, ip, ipcap, rest, out):
    """IPv6 header fields and the extension-header walk; returns transport candidates."""
    bad = ipcap < 40
    good = ~bad
    h = src.rows(ip[good], 40)
    bad[good] = (h[:, 0] >> 4) != 6
    out["status"][r[bad]] = DS_MALFORMED
    keep = ~bad[good]
    r, ip, ipcap, rest, h = r[~bad], ip[~bad], ipcap[~bad], rest[~bad], h[keep]
    total = _be16(h, 4) + 40
    total = np.where((total == 40) & (rest > 40), rest, total)   # jumbogram / TSO
    out["ip_version"][r] = 6
    out["ip_src"][r] = h[:, 8:24]
    out["ip_dst"][r] = h[:, 24:40]
    out["ip_len"][r] = total
    out["ip_ttl"][r] = h[:, 7]
    proto = h[:, 6].astype(np.int64)
    hdr = np.full(len(r), 40, np.int64)
    _ipv6_extensions(src, r, ip, ipcap, proto, hdr, out)
    out["ip_hdr_len"][r] = np.minimum(hdr, 0xFFFF)
    out["ip_proto"][r] = proto
    go = ~np.isin(proto, _NOT_TRANSPORT) & (out["ip_frag_offset"][r] == 0) & (hdr <= total)
    ver = np.full(int(go.sum()), 6, np.int64)
    return r[go], ip[go], ipcap[go], rest[go], hdr[go], total[go], proto[go], ver


def _ipv6_extensions(src: _Bytes, r, ip, ipcap, proto, hdr, out):
    """Walk up to 32 extension headers, updating proto and hdr in place; a fragment header
    sets the fragment fields.  A header cut by the capture ends the walk where it is."""
    walking = np.flatnonzero(np.isin(proto, _NOT_TRANSPORT[:-1]))
    for _ in range(32):
        p = proto[walking]
        fragment = p == _EXT_FRAGMENT
        whole = hdr[walking] + np.where(fragment, 8, 2) <= ipcap[walking]
        walking, p, fragment = walking[whole], p[whole], fragment[whole]
        if not len(walking):
            break
        h = src.rows(ip[walking] + hdr[walking], 8)
        f = walking[fragment]
        if len(f):
            hf = h[fragment]
            fr = _be16(hf, 2)
            rows = r[f]
            out["ip_frag_offset"][rows] = fr >> 3
            out["ip_id"][rows] = _be32(hf, 4)
            out["ip_flags"][rows] |= (np.where(fr & 1, IPF_MF, 0)
                                      | np.where((fr & 1) | (fr >> 3), IPF_FRAGMENT, 0)
                                      ).astype(np.uint8)
        length = h[:, 1].astype(np.int64)
        hdr[walking] += np.where(fragment, 8, np.where(p == _EXT_AH, 4 * (length + 2),
                                                       8 * (length + 1)))
        proto[walking] = h[:, 0]
        walking = walking[np.isin(proto[walking], _NOT_TRANSPORT[:-1])]


def _transport(src: _Bytes, r, ip, ipcap, rest, hdr, total, proto, ver, out):
    """TCP, UDP or ICMP header after the IP header, with the payload's offset and lengths.

    The reported length is the IP length trimmed to the frame (never extended), minus the IP
    header; the captured length is what the file holds from the transport header on."""
    rep = np.minimum(total, rest) - hdr
    ok = rep >= 0
    r, at, rep, proto, ver = r[ok], (ip + hdr)[ok], rep[ok], proto[ok], ver[ok]
    cap = np.maximum(ipcap[ok] - hdr[ok], 0)
    parts = [_tcp(src, np.flatnonzero(proto == 6), r, at, cap, rep, out),
             _udp(src, np.flatnonzero(proto == 17), r, at, cap, rep, out),
             _icmp(src, np.flatnonzero(((proto == 1) & (ver == 4)) | ((proto == 58) & (ver == 6))),
                   r, at, cap, rep, ver, out)]
    k, hl, plen = (np.concatenate(x) for x in zip(*parts))
    rows = r[k]
    out["payload_off"][rows] = at[k] + hl
    out["payload_len"][rows] = plen
    out["payload_cap_len"][rows] = np.clip(cap[k] - hl, 0, plen)


def _tcp(src: _Bytes, k, r, at, cap, rep, out):
    """TCP header; returns (index into the candidates, header length, payload length)."""
    k = k[(cap[k] >= 20) & (rep[k] >= 20)]
    h = src.rows(at[k], 20)
    hl = (h[:, 12] >> 4).astype(np.int64) * 4
    valid = (hl >= 20) & (hl <= rep[k])   # Wireshark stops before the stream is assigned
    k, h, hl = k[valid], h[valid], hl[valid]
    rows = r[k]
    out["l4"][rows] = L4_TCP
    out["srcport"][rows] = _be16(h, 0)
    out["dstport"][rows] = _be16(h, 2)
    out["tcp_seq"][rows] = _be32(h, 4)
    out["tcp_ack"][rows] = _be32(h, 8)
    out["tcp_hdr_len"][rows] = hl
    out["tcp_flags"][rows] = _be16(h, 12) & 0x0FFF
    out["tcp_win"][rows] = _be16(h, 14)
    opt_len = np.minimum(hl, cap[k]) - 20
    has = opt_len > 0
    if has.any():
        _tcp_options(src.rows(at[k[has]] + 20, 40), opt_len[has], rows[has], out)
    return k, hl, rep[k] - hl


def _tcp_options(b, end, rows, out):
    """Walk the option bytes b[i, :end[i]] of each header: one step per option, at most 40.

    EOL ends the list, NOP is one byte, a length under 2 or past the end ends it; known kinds
    with their exact lengths are recorded (the last one of a kind wins), SACK blocks are
    collected across SACK options up to 4."""
    sack_count = np.zeros(len(b), np.int64)
    live = np.arange(len(b))
    o = np.zeros(len(b), np.int64)
    for _ in range(40):
        if not len(live):
            break
        e = end[live]
        kind = b[live, o]
        nop = kind == 1
        ranged = (kind > 1) & (o + 2 <= e)
        olen = np.where(ranged, b[live, np.minimum(o + 1, 39)], 0).astype(np.int64)
        valid = ranged & (olen >= 2) & (o + olen <= e)
        v = o + 2
        for sel, apply in ((valid & (kind == 2) & (olen == 4), _opt_mss),
                           (valid & (kind == 3) & (olen == 3), _opt_ws),
                           (valid & (kind == 4) & (olen == 2), _opt_sack_perm),
                           (valid & (kind == 8) & (olen == 10), _opt_ts)):
            if sel.any():
                apply(b[live[sel]], v[sel], rows[live[sel]], out)
        sack = valid & (kind == 5) & (olen >= 10) & ((olen - 2) % 8 == 0)
        if sack.any():
            _opt_sack(b[live[sack]], v[sack], (olen[sack] - 2) // 8, live[sack], sack_count,
                      rows, out)
        o = np.where(nop, o + 1, o + olen)
        more = (nop | valid) & (o < e)
        live, o = live[more], o[more]


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


def _opt_sack(b, v, blocks, which, sack_count, rows, out):
    """Append this option's blocks to each header's SACK list while it holds fewer than 4."""
    for j in range(4):
        take = (j < blocks) & (sack_count[which] < 4)
        if not take.any():
            break
        w = which[take]
        slot = sack_count[w]
        edge = v[take] + 8 * j
        out["tcp_sack"][rows[w], 2 * slot] = _be32(b[take], edge)
        out["tcp_sack"][rows[w], 2 * slot + 1] = _be32(b[take], edge + 4)
        sack_count[w] += 1
    out["tcp_sack_count"][rows[which]] = sack_count[which]


def _udp(src: _Bytes, k, r, at, cap, rep, out):
    """UDP header; the payload length is the UDP length's, trimmed to the reported bytes."""
    k = k[(cap[k] >= 8) & (rep[k] >= 8)]
    h = src.rows(at[k], 8)
    rows = r[k]
    length = _be16(h, 4)
    out["l4"][rows] = L4_UDP
    out["srcport"][rows] = _be16(h, 0)
    out["dstport"][rows] = _be16(h, 2)
    out["udp_length"][rows] = length
    plen = np.minimum(np.where(length >= 8, length - 8, 0), rep[k] - 8)
    return k, np.full(len(k), 8, np.int64), plen


def _icmp(src: _Bytes, k, r, at, cap, rep, ver, out):
    """ICMP/ICMPv6 type and code; identifier and sequence for echo-like messages."""
    k = k[(cap[k] >= 4) & (rep[k] >= 4)]
    h = src.rows(at[k], 8)
    rows = r[k]
    t = h[:, 0]
    out["l4"][rows] = L4_ICMP
    out["icmp_type"][rows] = t
    out["icmp_code"][rows] = h[:, 1]
    echo = np.where(ver[k] == 4, (t == 0) | (t == 8) | ((t >= 13) & (t <= 18)),
                    (t == 128) | (t == 129))
    echo &= (cap[k] >= 8) & (rep[k] >= 8)
    out["icmp_echo"][rows[echo]] = 1
    out["icmp_ident"][rows[echo]] = _be16(h[echo], 4)
    out["icmp_seq"][rows[echo]] = _be16(h[echo], 6)
    hl = np.minimum(rep[k], 8)
    return k, hl, rep[k] - hl
