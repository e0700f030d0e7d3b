"""The three per-packet loops of the reader, behind one interface with two implementations.

``CKernel`` calls the compiled ``_kernel`` extension through ctypes; ``NumpyKernel``
(kernel_numpy.py) does the same in numpy and plain Python, for installs without a compiler.
Both take the file as a read-only uint8 array (an mmap) and return numpy arrays:

- ``walk_pcap(buf, pos, swapped, nsec, max_caplen) -> (Records, Status)``
- ``walk_pcapng(buf) -> (Records, Interfaces, Status)``
- ``decode(buf, data_off, caplen, origlen, linktype) -> dict[name, array]`` with the arrays of
  ``DECODE_OUTPUTS``; an array is meaningful only where its layer is present (see capture.py).
- ``intern_addresses(version, src16, dst16)`` and ``conversations(l4, src, dst, sport, dport)``:
  the hashing steps, numbered as interning.py documents.

The walks stop at the first bad record and say why in ``Status``; formats.py turns that into
an exception or a warning.  Nothing here raises on bad input.
"""

from __future__ import annotations

import ctypes
import importlib.util
from dataclasses import dataclass

import numpy as np

# Walk status codes (the enum at the top of _kernel.c).
ST_OK, ST_TRUNCATED, ST_ABSURD_LENGTH, ST_TRAILER_MISMATCH, ST_BAD_BLOCK = 0, 1, 2, 3, 4
ST_UNKNOWN_INTERFACE, ST_TOO_MANY_INTERFACES, ST_BAD_SECTION, ST_CAPACITY = 5, 6, 7, 8
# Per-packet decode status.
DS_OK, DS_UNKNOWN_LINKTYPE, DS_MALFORMED = 0, 1, 2
# Values of the ``l4`` array.
L4_NONE, L4_ICMP, L4_TCP, L4_UDP = 0, 1, 6, 17
# Bits of ``tcp_opts`` and ``ip_flags``.
OPT_MSS, OPT_WS, OPT_SACK_PERM, OPT_TS = 1, 2, 4, 8
IPF_DF, IPF_MF, IPF_FRAGMENT = 1, 2, 4

MAX_INTERFACES = 65536
ABSURD_RECORD = 64 * 1024 * 1024

# (name, dtype, values per packet) in the order of decode_args in _kernel.c.
DECODE_OUTPUTS: tuple[tuple[str, str, int], ...] = (
    ("status", "uint8", 1),
    ("vlan_id", "uint16", 1),
    ("vlan_count", "uint8", 1),
    ("ip_version", "uint8", 1),
    ("ip_src", "uint8", 16),       # IPv4 in the first 4 bytes, the rest 0
    ("ip_dst", "uint8", 16),
    ("ip_hdr_len", "uint16", 1),
    ("ip_len", "uint32", 1),
    ("ip_proto", "uint8", 1),
    ("ip_ttl", "uint8", 1),
    ("ip_id", "uint32", 1),
    ("ip_flags", "uint8", 1),
    ("ip_frag_offset", "uint16", 1),
    ("l4", "uint8", 1),
    ("srcport", "uint16", 1),
    ("dstport", "uint16", 1),
    ("tcp_seq", "uint32", 1),
    ("tcp_ack", "uint32", 1),
    ("tcp_hdr_len", "uint8", 1),
    ("tcp_flags", "uint16", 1),
    ("tcp_win", "uint16", 1),
    ("tcp_opts", "uint8", 1),
    ("tcp_mss", "uint16", 1),
    ("tcp_ws", "uint8", 1),
    ("tcp_tsval", "uint32", 1),
    ("tcp_tsecr", "uint32", 1),
    ("tcp_sack_count", "uint8", 1),
    ("tcp_sack", "uint32", 8),     # up to 4 (left, right) pairs
    ("udp_length", "uint16", 1),
    ("icmp_type", "uint8", 1),
    ("icmp_code", "uint8", 1),
    ("icmp_echo", "uint8", 1),
    ("icmp_ident", "uint16", 1),
    ("icmp_seq", "uint16", 1),
    ("payload_off", "int64", 1),   # -1 where no transport header was decoded
    ("payload_len", "uint32", 1),
    ("payload_cap_len", "uint32", 1),
)


def new_outputs(n: int) -> dict[str, np.ndarray]:
    """Zeroed output arrays for n packets (np.zeros pages in lazily, so unused columns are free)."""
    out = {}
    for name, dtype, width in DECODE_OUTPUTS:
        shape = (n,) if width == 1 else (n, width)
        out[name] = np.zeros(shape, dtype=dtype)
    out["payload_off"].fill(-1)
    return out


@dataclass
class Records:
    """Where each packet's bytes are, and its raw lengths and time."""
    data_off: np.ndarray   # int64, offset of the packet's first byte
    caplen: np.ndarray     # uint32
    origlen: np.ndarray    # uint32
    ts: np.ndarray         # pcap: int64 ns; pcapng: uint64 in interface units
    iface: np.ndarray      # uint32, index into Interfaces (pcap: all 0)


@dataclass
class Interfaces:
    """pcapng interface descriptions, numbered across sections in file order."""
    linktype: np.ndarray   # int32
    snaplen: np.ndarray    # uint32
    tsresol: np.ndarray    # uint8, the raw if_tsresol byte (default 6)
    tsoffset: np.ndarray   # int64 seconds
    local_id: np.ndarray   # uint32, id within its section (what frame.interface_id shows)


@dataclass
class Status:
    code: int
    offset: int            # file offset of the record the walk stopped at
    packet: int            # its packet number (1-based)
    swapped: bool = False  # pcapng: the byte order of the section the walk stopped in


def _upper_bound(nbytes: int, min_record: int) -> int:
    return max(1, nbytes // min_record + 1)


class CKernel:
    name = "c"

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        p, i64, i32, u32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint32
        lib.ps_walk_pcap.restype = i64
        lib.ps_walk_pcap.argtypes = [p, i64, i64, i32, i32, u32, i64, p, p, p, p, p]
        lib.ps_walk_pcapng.restype = i64
        lib.ps_walk_pcapng.argtypes = [p, i64, i64, p, p, p, p, p, i64, p, p, p, p, p, p, p]
        lib.ps_decode.restype = None
        lib.ps_decode.argtypes = [p]
        lib.ps_intern_addresses.restype = i64
        lib.ps_intern_addresses.argtypes = [i64, p, p, p, p, p, p, p]
        lib.ps_conversations.restype = i64
        lib.ps_conversations.argtypes = [i64, p, p, p, p, p, p, p, p, p, p, p, p]

    def walk_pcap(self, buf, pos, swapped, nsec, max_caplen):
        cap = _upper_bound(len(buf) - pos, 16)
        rec = Records(np.empty(cap, np.int64), np.empty(cap, np.uint32), np.empty(cap, np.uint32),
                      np.empty(cap, np.int64), None)
        st = np.zeros(4, np.int64)
        n = self._lib.ps_walk_pcap(_ptr(buf), len(buf), pos, int(swapped), int(nsec), max_caplen, cap,
                                   _ptr(rec.data_off), _ptr(rec.caplen), _ptr(rec.origlen),
                                   _ptr(rec.ts), _ptr(st))
        rec = Records(rec.data_off[:n], rec.caplen[:n], rec.origlen[:n], rec.ts[:n],
                      np.zeros(n, np.uint32))
        return rec, Status(int(st[0]), int(st[1]), int(st[2]), bool(st[3]))

    def walk_pcapng(self, buf):
        cap = _upper_bound(len(buf), 16)
        rec = Records(np.empty(cap, np.int64), np.empty(cap, np.uint32), np.empty(cap, np.uint32),
                      np.empty(cap, np.uint64), np.empty(cap, np.uint32))
        ifs = Interfaces(np.empty(MAX_INTERFACES, np.int32), np.empty(MAX_INTERFACES, np.uint32),
                         np.empty(MAX_INTERFACES, np.uint8), np.empty(MAX_INTERFACES, np.int64),
                         np.empty(MAX_INTERFACES, np.uint32))
        n_if = np.zeros(1, np.int64)
        st = np.zeros(4, np.int64)
        n = self._lib.ps_walk_pcapng(
            _ptr(buf), len(buf), cap, _ptr(rec.data_off), _ptr(rec.caplen), _ptr(rec.origlen),
            _ptr(rec.ts), _ptr(rec.iface), MAX_INTERFACES, _ptr(ifs.linktype), _ptr(ifs.snaplen),
            _ptr(ifs.tsresol), _ptr(ifs.tsoffset), _ptr(ifs.local_id), _ptr(n_if), _ptr(st))
        k = int(n_if[0])
        rec = Records(rec.data_off[:n], rec.caplen[:n], rec.origlen[:n], rec.ts[:n], rec.iface[:n])
        ifs = Interfaces(*(a[:k].copy() for a in (ifs.linktype, ifs.snaplen, ifs.tsresol,
                                                   ifs.tsoffset, ifs.local_id)))
        return rec, ifs, Status(int(st[0]), int(st[1]), int(st[2]), bool(st[3]))

    def decode(self, buf, data_off, caplen, origlen, linktype):
        n = len(data_off)
        out = new_outputs(n)
        inputs = [np.ascontiguousarray(data_off, np.int64), np.ascontiguousarray(caplen, np.uint32),
                  np.ascontiguousarray(origlen, np.uint32), np.ascontiguousarray(linktype, np.uint16)]
        fields = [_ptr(buf), n] + [_ptr(a) for a in inputs] + [_ptr(out[name]) for name, _, _ in
                                                              DECODE_OUTPUTS]
        args = _DecodeArgs(*fields)
        self._lib.ps_decode(ctypes.byref(args))
        return out


    def intern_addresses(self, version, src16, dst16):
        """Codes for source and destination addresses, and the table of distinct addresses."""
        n = len(version)
        src_code, dst_code = np.empty(n, np.int32), np.empty(n, np.int32)
        addr = np.empty((max(2 * n, 1), 16), np.uint8)   # worst case; untouched pages cost nothing
        v6 = np.empty(max(2 * n, 1), np.uint8)
        k = self._lib.ps_intern_addresses(n, _ptr(version), _ptr(src16), _ptr(dst16), _ptr(src_code),
                                          _ptr(dst_code), _ptr(addr), _ptr(v6))
        if k < 0:
            raise MemoryError("out of memory while hashing addresses")
        return src_code, dst_code, addr[:k].copy(), v6[:k].copy()

    def conversations(self, l4, src_code, dst_code, srcport, dstport):
        """Per-protocol conversation ids of TCP/UDP packets (-1 otherwise), the direction bit, and
        whether the packet is its conversation's first."""
        n = len(l4)
        conv, reverse, first = np.empty(n, np.int64), np.empty(n, np.uint8), np.empty(n, np.uint8)
        keys = [np.empty(max(n, 1), dt) for dt in (np.int64, np.int64, np.uint8, np.int64)]
        k = self._lib.ps_conversations(n, _ptr(l4), _ptr(src_code), _ptr(dst_code), _ptr(srcport),
                                       _ptr(dstport), _ptr(conv), _ptr(reverse), _ptr(first),
                                       *(_ptr(a) for a in keys))
        if k < 0:
            raise MemoryError("out of memory while hashing conversations")
        return conv, reverse, first


class _DecodeArgs(ctypes.Structure):
    _fields_ = ([("buf", ctypes.c_void_p), ("n", ctypes.c_int64)]
                + [(name, ctypes.c_void_p) for name in ("data_off", "caplen", "origlen", "linktype")]
                + [(name, ctypes.c_void_p) for name, _, _ in DECODE_OUTPUTS])


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


_kernels: dict[str, object] = {}


def get_kernel(which: str = "auto"):
    """The C kernel when it was compiled, else the numpy one; ``which`` forces one ("c"/"numpy")."""
    from ..errors import UsageError

    if which not in ("auto", "c", "numpy"):
        raise UsageError(f"unknown kernel {which!r}", hint="use auto, c or numpy")
    if which in ("auto", "c") and "c" not in _kernels:
        lib = _load_c()
        if lib is not None:
            _kernels["c"] = CKernel(lib)
    if which == "c" and "c" not in _kernels:
        raise UsageError("the compiled kernel is not available in this install",
                         hint="reinstall with a C compiler present (pip install -e .), or use kernel='numpy'")
    if which == "numpy" or (which == "auto" and "c" not in _kernels):
        if "numpy" not in _kernels:
            from .kernel_numpy import NumpyKernel
            _kernels["numpy"] = NumpyKernel()
        return _kernels["numpy"]
    return _kernels["c"]


def c_kernel_available() -> bool:
    return _load_c() is not None


def _load_c():
    spec = importlib.util.find_spec("pcapstats.ingest._kernel")
    if spec is None or spec.origin is None:
        return None
    try:
        return ctypes.CDLL(spec.origin)
    except OSError:
        return None
