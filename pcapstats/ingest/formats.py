"""File formats: recognise pcap / pcapng, read their headers, walk their records.

Turns a byte array into ``Walked``: per packet where its bytes are, its lengths, its exact time
in nanoseconds and its interface's link type.  The per-record loops are the kernel's; this
module owns what the bytes mean at file level and how a bad record is reported.
"""

from __future__ import annotations

import struct
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import CaptureFormatError, CorruptCaptureError, PcapstatsError, TruncatedCaptureWarning
from . import kernel as K

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


@dataclass
class Walked:
    format: str                 # "pcap" | "pcapng"
    records: K.Records          # ts replaced by int64 ns
    linktype: np.ndarray        # uint16 per packet
    interface_id: np.ndarray    # uint32 per packet: id within its section (frame.interface_id)
    interfaces: list[dict]      # one per interface: linktype, snaplen, tsresol, tsoffset
    warnings: list[str]


def walk(buf: np.ndarray, path: str, kernel) -> Walked:
    head = bytes(buf[:4])
    if head == PCAPNG_MAGIC:
        return _walk_pcapng(buf, path, kernel)
    if head in PCAP_MAGICS:
        return _walk_pcap(buf, path, kernel, *PCAP_MAGICS[head])
    for magic, what in OTHER_FORMATS.items():
        if head.startswith(magic):
            raise CaptureFormatError(f"not a pcap or pcapng file: it is {what}", path=path, offset=0)
    shown = " ".join(f"{b:02x}" for b in head)
    raise CaptureFormatError(f"not a capture file: it starts with bytes {shown}, which is no pcap, "
                             "pcapng or gzip magic", path=path, offset=0,
                             hint="pcapstats reads .pcap, .pcapng and their .gz")


def _walk_pcap(buf, path, kernel, swapped: bool, nsec: bool) -> Walked:
    if len(buf) < PCAP_HEADER:
        raise CaptureFormatError(f"file ends inside the pcap file header ({len(buf)} of "
                                 f"{PCAP_HEADER} bytes)", path=path, offset=0,
                                 hint="the capture was cut before its first packet")
    bo = ">" if swapped else "<"
    _, major, minor, _, _, snaplen, linktype_field = struct.unpack(bo + "IHHiIII", bytes(buf[:PCAP_HEADER]))
    linktype = linktype_field & 0x0FFFFFFF  # the upper bits carry FCS information
    max_caplen = min(max(MAX_STANDARD_PACKET, snaplen), K.ABSURD_RECORD)
    records, status = kernel.walk_pcap(buf, PCAP_HEADER, swapped, nsec, max_caplen)
    msgs = _check_status(status, buf, path, "pcap", bo, len(records.data_off))
    n = len(records.data_off)
    iface = {"interface_id": 0, "linktype": linktype, "snaplen": snaplen,
             "tsresol": 9 if nsec else 6, "tsoffset": 0}
    return Walked("pcap", records, np.full(n, linktype, np.uint16), np.zeros(n, np.uint32),
                  [iface], msgs)


def _walk_pcapng(buf, path, kernel) -> Walked:
    records, ifs, status = kernel.walk_pcapng(buf)
    bo = ">" if status.swapped else "<"
    msgs = _check_status(status, buf, path, "pcapng", bo, len(records.data_off))
    iface_idx = records.iface
    ts_ns = _pcapng_ns(records.ts, iface_idx, ifs)
    records.ts = ts_ns
    interfaces = [{"interface_id": int(ifs.local_id[i]), "linktype": int(ifs.linktype[i]),
                   "snaplen": int(ifs.snaplen[i]), "tsresol": int(ifs.tsresol[i]),
                   "tsoffset": int(ifs.tsoffset[i])} for i in range(len(ifs.linktype))]
    linktype = ifs.linktype.astype(np.uint16)[iface_idx] if len(iface_idx) else np.zeros(0, np.uint16)
    local = ifs.local_id[iface_idx] if len(iface_idx) else np.zeros(0, np.uint32)
    return Walked("pcapng", records, linktype, local, interfaces, msgs)


def _pcapng_ns(ts: np.ndarray, iface_idx: np.ndarray, ifs: K.Interfaces) -> np.ndarray:
    """Raw interface time units -> int64 ns since the epoch, exactly, per interface resolution."""
    out = np.zeros(len(ts), np.int64)
    for i, (resol, offset) in enumerate(zip(ifs.tsresol, ifs.tsoffset)):
        sel = slice(None) if len(ifs.tsresol) == 1 else (iface_idx == i)
        t = ts[sel].astype(np.uint64)
        if resol & 0x80:  # 2^-k seconds per unit
            k = int(resol & 0x7F)
            whole, frac = t >> np.uint64(k), t & np.uint64((1 << k) - 1) if k < 64 else t
            if k > 32:   # keep frac * 1e9 inside 64 bits: drop bits below a nanosecond first
                frac, k_frac = frac >> np.uint64(k - 32), 32
            else:
                k_frac = k
            ns = whole * np.uint64(10**9) + ((frac * np.uint64(10**9)) >> np.uint64(k_frac))
        else:             # 10^-k seconds per unit
            k = int(resol)
            ns = t * np.uint64(10 ** (9 - k)) if k <= 9 else t // np.uint64(10 ** min(k - 9, 19))
        out[sel] = ns.astype(np.int64) + np.int64(offset) * 10**9
    return out


_BLOCK_NAMES = {0x0A0D0D0A: "section header", 1: "interface description", 2: "packet (obsolete)",
                3: "simple packet", 6: "enhanced packet"}


def _check_status(status: K.Status, buf, path: str, fmt: str, bo: str, n_read: int) -> list[str]:
    """Raise for a record that cannot be right; warn (and return the text) for a cut file."""
    code, off, pkt = status.code, status.offset, status.packet
    if code == K.ST_OK:
        return []
    if code == K.ST_TRUNCATED:
        left = len(buf) - off
        w = TruncatedCaptureWarning(
            f"capture ends inside a record: read {n_read} whole packets, ignored the last {left} "
            f"bytes", path=path, offset=off, packet=pkt,
            hint="the file was cut (capture killed, or still being written)")
        warnings.warn(w, stacklevel=4)
        return [str(w)]

    def u32(at: int) -> int:
        return struct.unpack(bo + "I", bytes(buf[at:at + 4]))[0] if at + 4 <= len(buf) else -1

    damaged = "the file is damaged here; the packets before this offset can be kept with " \
              f"`editcap -r FILE OUT 1-{max(pkt - 1, 1)}`"
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
