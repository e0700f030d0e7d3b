"""File formats: recognise pcap / pcapng, read their headers, walk their records.

A walker knows the file header and walks the records window by window (resumable), giving per
packet where its bytes are, its lengths, its exact time in nanoseconds and its interface's link
type.  The per-record loops are the kernel's; this module owns what the bytes mean at file level
and how a bad record is reported.
"""

from __future__ import annotations

import struct
import warnings
import numpy as np

from ..errors import CaptureFormatError, CorruptCaptureError, PcapstatsError, TruncatedCaptureWarning
from . import contract as K

PCAP_MAGICS = {  # first four bytes as written -> (byte-swapped, nanosecond)
    b"\xd4\xc3\xb2\xa1": (False, False), b"\xa1\xb2\xc3\xd4": (True, False),
    b"\x4d\x3c\xb2\xa1": (False, True), b"\xa1\xb2\x3c\x4d": (True, True),
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
# Formats people sometimes feed us, to say what the file is instead of "not a capture".
OTHER_FORMATS = {
    b"\xa1\xb2\xcd\x34": "a Kuznetzov/modified pcap (convert it with `editcap -F pcap`)",
    b"\x34\xcd\xb2\xa1": "a Kuznetzov/modified pcap (convert it with `editcap -F pcap`)",
    b"snoo": "a Solaris snoop file (convert it with `editcap -F pcap`)",
    b"GMBU": "a Microsoft Network Monitor file (convert it with `editcap -F pcap`)",
    b"PK\x03\x04": "a zip archive (unzip it first)",
    b"BZh": "a bzip2 file (decompress it first)",
    b"\xfd7zX": "an xz file (decompress it first)",
    b"\x28\xb5\x2f\xfd": "a zstd file (decompress it first)",
}
PCAP_HEADER = 24
MAX_STANDARD_PACKET = 262144  # Wireshark's WTAP_MAX_PACKET_SIZE_STANDARD


def walker_for(buf: np.ndarray, path: str):
    """The walker of the file's format, positioned at its first record."""
    head = bytes(buf[:4])
    if head == PCAPNG_MAGIC:
        return PcapngWalker(buf, path)
    if head in PCAP_MAGICS:
        return PcapWalker(buf, path, *PCAP_MAGICS[head])
    for magic, what in OTHER_FORMATS.items():
        if head.startswith(magic):
            raise CaptureFormatError(f"not a pcap or pcapng file: it is {what}", path=path, offset=0)
    shown = " ".join(f"{b:02x}" for b in head)
    raise CaptureFormatError(f"not a capture file: it starts with bytes {shown}, which is no pcap, "
                             "pcapng or gzip magic", path=path, offset=0,
                             hint="give a pcap or pcapng file (or one gzipped); if it is "
                                  "another capture format, `editcap -F pcapng IN OUT` converts it")


class PcapWalker:
    """Classic pcap: one link type, timestamps already in ns after the walk."""
    format = "pcap"

    def __init__(self, buf, path: str, swapped: bool, nsec: bool):
        if len(buf) < PCAP_HEADER:
            raise CaptureFormatError(f"file ends inside the pcap file header ({len(buf)} of "
                                     f"{PCAP_HEADER} bytes)", path=path, offset=0,
                                     hint="the capture was cut before its first packet")
        self.buf, self.path, self.swapped, self.nsec = buf, path, swapped, nsec
        self.byte_order = ">" if swapped else "<"
        _, _, _, _, _, snaplen, linktype_field = struct.unpack(self.byte_order + "IHHiIII",
                                                               bytes(buf[:PCAP_HEADER]))
        if linktype_field & 0x03FF0000:  # bits 16-25 are reserved; 26-31 carry FCS information
            raise CaptureFormatError(f"pcap header: link-type field 0x{linktype_field:08x} has "
                                     "reserved bits set", path=path, offset=20,
                                     hint="the file header is damaged, or this is not a pcap file")
        self.linktype = linktype_field & 0xFFFF
        self.max_caplen = min(max(MAX_STANDARD_PACKET, snaplen), K.ABSURD_RECORD)
        self.pos = PCAP_HEADER
        self.interfaces = [{"interface_id": 0, "linktype": self.linktype, "snaplen": snaplen,
                            "tsresol": 9 if nsec else 6, "tsoffset": 0}]

    def walk(self, kern, end: int, rec: K.Records):
        """Records from self.pos up to the last one ending before ``end``; moves self.pos on."""
        n, status = kern.walk_pcap(self.buf, self.pos, end, self.swapped, self.nsec,
                                   self.max_caplen, rec)
        self.pos = status.offset if status.code != K.ST_OK else end
        return n, status

    def finish(self, rec: K.Records):
        """Per-packet link type and interface id of the records just walked."""
        n = len(rec.data_off)
        return np.full(n, self.linktype, np.uint16), np.zeros(n, np.uint32)


class PcapngWalker:
    """pcapng: sections and interfaces carried across windows in ``state``."""
    format = "pcapng"

    def __init__(self, buf, path: str):
        self.buf, self.path = buf, path
        self.state = np.zeros(4, np.int64)   # next offset, swapped, section's first iface, ifaces
        self.ifs = K.Interfaces.empty()
        self.byte_order = "<"

    @property
    def pos(self) -> int:
        return int(self.state[0])

    def walk(self, kern, end: int, rec: K.Records):
        n, status = kern.walk_pcapng(self.buf, end, self.state, rec, self.ifs)
        self.byte_order = ">" if status.swapped else "<"
        return n, status

    def finish(self, rec: K.Records):
        """Convert the window's raw timestamps to ns in place; link types and interface ids."""
        k = int(self.state[3])
        iface = rec.iface
        rec.ts[:] = _pcapng_ns(rec.ts.view(np.uint64), iface, self.ifs, k)
        return self.ifs.linktype[iface].astype(np.uint16), self.ifs.local_id[iface]

    @property
    def interfaces(self) -> list[dict]:
        ifs = self.ifs.first(int(self.state[3]))
        return [{"interface_id": int(ifs.local_id[i]), "linktype": int(ifs.linktype[i]),
                 "snaplen": int(ifs.snaplen[i]), "tsresol": int(ifs.tsresol[i]),
                 "tsoffset": int(ifs.tsoffset[i])} for i in range(len(ifs.linktype))]


def _pcapng_ns(ts: np.ndarray, iface_idx: np.ndarray, ifs: K.Interfaces, n_if: int) -> np.ndarray:
    """Raw interface time units -> int64 ns since the epoch, exactly, per interface resolution."""
    out = np.zeros(len(ts), np.int64)
    used = np.unique(iface_idx) if n_if > 1 else range(min(n_if, 1))
    for i in used:
        resol, offset = int(ifs.tsresol[i]), int(ifs.tsoffset[i])
        sel = slice(None) if n_if <= 1 else (iface_idx == i)
        t = ts[sel].astype(np.uint64)
        if resol & 0x80:  # 2^-k seconds per unit
            k = resol & 0x7F
            if k >= 64:
                whole, frac, k_frac = np.zeros_like(t), t >> np.uint64(32), 32
            else:
                whole, frac = t >> np.uint64(k), t & np.uint64((1 << k) - 1)
                k_frac = k
                if k > 32:   # keep frac * 1e9 inside 64 bits: drop bits below a nanosecond first
                    frac, k_frac = frac >> np.uint64(k - 32), 32
            ns = whole * np.uint64(10**9) + ((frac * np.uint64(10**9)) >> np.uint64(k_frac))
        else:             # 10^-k seconds per unit
            ns = t * np.uint64(10 ** (9 - resol)) if resol <= 9 else t // np.uint64(10 ** min(resol - 9, 19))
        # A time int64 nanoseconds cannot hold (past 2262, or before 1970 by the offset) would
        # wrap to any value; it is held at 1970 or at 2262 instead, where the reader's clock
        # check names it as a time outside 1990-2100, and any two times still subtract exactly.
        approx = _approx_seconds(t, resol) + offset
        if abs(offset) < 9 * 10**9:     # exact: int64 arithmetic wraps back into range
            ns = ns.astype(np.int64) + np.int64(offset) * 10**9
        else:                           # an offset of over 285 years: to the microsecond
            ns = np.round(np.clip(approx, 0, _LAST_NS / 1e9) * 1e6).astype(np.int64) * 1000
        ns[approx >= _LAST_NS / 1e9] = _LAST_NS
        ns[approx < 0] = 0
        out[sel] = ns
    return out


_LAST_NS = np.iinfo(np.int64).max   # 2262-04-11: the last time int64 nanoseconds hold


def _approx_seconds(t: np.ndarray, resol: int) -> np.ndarray:
    """Float seconds of raw pcapng time units (to tell times int64 ns cannot hold)."""
    k = resol & 0x7F
    unit = 2.0 ** -k if resol & 0x80 else 10.0 ** -k
    return t.astype(np.float64) * unit


_BLOCK_NAMES = {0x0A0D0D0A: "section header", 1: "interface description", 2: "packet (obsolete)",
                3: "simple packet", 6: "enhanced packet"}


def check_status(status: K.Status, walker, n_before: int) -> None:
    """Raise for a record that cannot be right; warn for a file cut mid-record.

    ``n_before``: packets read in earlier windows (status packet numbers count from the window).
    """
    buf, path, fmt, bo = walker.buf, walker.path, walker.format, walker.byte_order
    code, off, pkt = status.code, status.offset, status.packet + n_before
    n_read = pkt - 1
    if code == K.ST_OK:
        return
    if code == K.ST_TRUNCATED:
        left = len(buf) - off
        w = TruncatedCaptureWarning(
            f"capture ends inside a record: read {n_read} whole packets, ignored the last {left} "
            f"bytes", path=path, offset=off, packet=pkt,
            hint="the file was cut (capture killed, or still being written)")
        warnings.warn(w, stacklevel=4)
        return

    def u32(at: int) -> int:
        return struct.unpack(bo + "I", bytes(buf[at:at + 4]))[0] if at + 4 <= len(buf) else -1

    damaged = ("the file is damaged here; the packets before this offset can be kept with "
               f"`editcap -r FILE OUT 1-{pkt - 1}`") if pkt > 1 else \
        "the file is damaged before its first packet"
    if fmt == "pcap" and code == K.ST_ABSURD_LENGTH:
        raise CorruptCaptureError(f"record claims {u32(off + 8)} captured bytes, more than any "
                                  "packet of this capture can have", path=path, offset=off,
                                  packet=pkt, hint=damaged)
    btype, blen = u32(off), u32(off + 4)
    name = _BLOCK_NAMES.get(btype, f"type 0x{btype:08x}")
    if code == K.ST_ABSURD_LENGTH:
        raise CorruptCaptureError(f"pcapng {name} block claims an impossible length "
                                  f"({blen} bytes, or a packet larger than its block)", path=path,
                                  offset=off, packet=pkt, hint=damaged)
    if code == K.ST_TRAILER_MISMATCH:
        raise CorruptCaptureError(f"pcapng {name} block: trailing length {u32(off + blen - 4)} "
                                  f"disagrees with the header's {blen}", path=path, offset=off,
                                  packet=pkt, hint=damaged)
    if code == K.ST_BAD_BLOCK:
        raise CorruptCaptureError(f"pcapng {name} block has an invalid length {blen} (must be a "
                                  "multiple of 4 and large enough for its type)", path=path,
                                  offset=off, packet=pkt, hint=damaged)
    if code == K.ST_UNKNOWN_INTERFACE:
        raise CorruptCaptureError(f"pcapng {name} block refers to an interface its section does "
                                  "not describe", path=path, offset=off, packet=pkt, hint=damaged)
    if code == K.ST_TOO_MANY_INTERFACES:
        raise CorruptCaptureError(f"more than {K.MAX_INTERFACES} pcapng interfaces", path=path,
                                  offset=off, packet=pkt, hint=damaged)
    if code == K.ST_BAD_SECTION:
        raise CorruptCaptureError("pcapng section header block with a bad byte-order magic",
                                  path=path, offset=off, packet=pkt, hint=damaged)
    raise PcapstatsError(f"internal error: record walk stopped with status {code}", path=path,
                         offset=off, packet=pkt, hint="please report this with the file")
