"""The per-packet loops of the reader, behind one interface with two implementations.

``CKernel`` calls the compiled ``_kernel`` extension through ctypes; ``NumpyKernel``
(kernel_numpy.py) does the same in numpy and plain Python, for installs without a compiler.
The reader (ingest/__init__.py) drives them window by window over a read-only uint8 array (the
mmap), so that only one window of the file is resident at a time; each call writes into arrays
the reader preallocated (views starting at the window's first packet):

- ``walk_pcap(buf, pos, end, swapped, nsec, max_caplen, rec) -> (n, Status)``: records from
  ``pos``, stopping with ST_TRUNCATED at the first one that does not end before ``end``;
- ``walk_pcapng(buf, end, state, rec, ifs) -> (n, Status)``: the same for blocks; ``state``
  carries section and interface bookkeeping across windows (see _kernel.c);
- ``decode(buf, data_off, caplen, origlen, linktype, out, sack) -> None``: the fields of
  ``DECODE_OUTPUTS`` into ``out`` (plus zeroed 16-byte ``ip_src``/``ip_dst``/``q_src``/``q_dst``
  scratch of the window: the addresses, and those quoted in ICMP errors), SACK
  blocks appended to the compact ``sack`` table;
- ``new_interner()`` / ``new_conversations()``: hashing state across windows, numbered in order
  of first appearance (the comments above ps_intern_addresses in _kernel.c define it).

Walks stop at the first bad record and say why in ``Status``; formats.py turns that into an
exception or a warning.  Nothing here raises on bad input.
"""

from __future__ import annotations

import ctypes
import importlib.util
import mmap
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

# (name, dtype) in the order of decode_args in _kernel.c, after the window scratch.
DECODE_OUTPUTS: tuple[tuple[str, str], ...] = (
    ("status", "uint8"), ("vlan_id", "uint16"), ("vlan_count", "uint8"), ("ip_version", "uint8"),
    ("ip_hdr_len", "uint16"), ("ip_len", "uint32"), ("ip_proto", "uint8"), ("ip_ttl", "uint8"),
    ("ip_id", "uint32"), ("ip_flags", "uint8"), ("ip_frag_offset", "uint16"), ("l4", "uint8"),
    ("l4_quoted", "uint8"),        # 6/17: an ICMP error quotes a TCP/UDP header (fields filled)
    ("srcport", "uint16"), ("dstport", "uint16"), ("tcp_seq", "uint32"), ("tcp_ack", "uint32"),
    ("tcp_hdr_len", "uint8"), ("tcp_flags", "uint16"), ("tcp_win", "uint16"), ("tcp_opts", "uint8"),
    ("tcp_mss", "uint16"), ("tcp_ws", "uint8"), ("tcp_tsval", "uint32"), ("tcp_tsecr", "uint32"),
    ("tcp_len", "uint32"),
    ("tcp_sack_count", "uint8"),
    ("tcp_sack_row", "int32"),     # row of the packet's SACK blocks in the compact table, or -1
    ("udp_length", "uint16"), ("icmp_type", "uint8"), ("icmp_code", "uint8"),
    ("icmp_echo", "uint8"), ("icmp_ident", "uint16"), ("icmp_seq", "uint16"),
    ("payload_rel", "uint16"),     # payload offset from the packet's first byte (where l4 != 0)
    ("payload_len", "uint32"),
)


def table_array(shape, dtype) -> np.ndarray:
    """A zeroed array for the packet table, on its own anonymous map: rows never written cost
    no memory, so the table can be sized for the most packets the file could hold.

    Not np.zeros: numpy asks for transparent huge pages on large arrays, and where the kernel
    compacts memory to find them on first write (THP defrag "madvise", Debian's default) a
    7.1M-packet read spent 1.1-1.7 s in the kernel instead of 0.3 s, and 3 of 9 reads of
    1.77M packets took 0.46-0.60 s instead of 0.19 s.  Plain pages cost the same every time.
    """
    dtype = np.dtype(dtype)
    shape = tuple(np.atleast_1d(shape))
    count = int(np.prod(shape))
    buf = mmap.mmap(-1, max(count * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE)  # zero-filled
    return np.frombuffer(buf, dtype, count).reshape(shape)


def new_outputs(n: int) -> dict[str, np.ndarray]:
    """Zeroed output arrays for up to n packets."""
    return {name: table_array(n, dtype) for name, dtype in DECODE_OUTPUTS}


class SackTable:
    """SACK blocks of the packets that have them, 4 (left, right) pairs a row, filled in order."""

    def __init__(self, capacity: int):
        self.rows = table_array((max(capacity, 1), 8), np.uint32)
        self.used = np.zeros(1, np.int64)

    def trimmed(self) -> np.ndarray:
        return self.rows[: int(self.used[0])].copy()


@dataclass
class Records:
    """Where each packet's bytes are, and its raw lengths and time."""
    data_off: np.ndarray   # int64, offset of the packet's first byte
    caplen: np.ndarray     # uint32
    origlen: np.ndarray    # uint32
    ts: np.ndarray         # int64 ns (pcapng walks leave raw interface units, converted per window)
    iface: np.ndarray      # uint32, index into Interfaces (pcap: all 0)

    @classmethod
    def empty(cls, n: int) -> "Records":
        return cls(*(table_array(n, t) for t in (np.int64, np.uint32, np.uint32, np.int64,
                                                  np.uint32)))

    def at(self, start: int, stop: int | None = None) -> "Records":
        """Views of the rows start:stop (what a window's walk writes into)."""
        sl = slice(start, stop)
        return Records(self.data_off[sl], self.caplen[sl], self.origlen[sl], self.ts[sl], self.iface[sl])


@dataclass
class Interfaces:
    """pcapng interface descriptions, numbered across sections in file order."""
    linktype: np.ndarray   # int32
    snaplen: np.ndarray    # uint32
    tsresol: np.ndarray    # uint8, the raw if_tsresol byte (default 6)
    tsoffset: np.ndarray   # int64 seconds
    local_id: np.ndarray   # uint32, id within its section (what frame.interface_id shows)

    @classmethod
    def empty(cls, n: int = 0) -> "Interfaces":
        n = n or MAX_INTERFACES
        return cls(np.zeros(n, np.int32), np.zeros(n, np.uint32), np.zeros(n, np.uint8),
                   np.zeros(n, np.int64), np.zeros(n, np.uint32))

    def first(self, k: int) -> "Interfaces":
        return Interfaces(*(a[:k].copy() for a in (self.linktype, self.snaplen, self.tsresol,
                                                     self.tsoffset, self.local_id)))


@dataclass
class Status:
    code: int
    offset: int            # file offset of the record the walk stopped at
    packet: int            # its packet number (1-based)
    swapped: bool = False  # pcapng: the byte order of the section the walk stopped in


def _status(st: np.ndarray) -> Status:
    return Status(int(st[0]), int(st[1]), int(st[2]), bool(st[3]))


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
        for name in ("ps_interner_new", "ps_convs_new"):
            getattr(lib, name).restype = p
            getattr(lib, name).argtypes = []
        for name in ("ps_interner_free", "ps_convs_free"):
            getattr(lib, name).restype = None
            getattr(lib, name).argtypes = [p]
        lib.ps_interner_get.restype = i64
        lib.ps_interner_get.argtypes = [p, p, p]
        lib.ps_intern_addresses.restype = i64
        lib.ps_intern_addresses.argtypes = [p, i64, p, p, p, p, p]
        lib.ps_conversations.restype = i64
        lib.ps_conversations.argtypes = [p, i64, p, p, p, p, p, p, p, p]

    def walk_pcap(self, buf, pos, end, swapped, nsec, max_caplen, rec: Records):
        st = np.zeros(4, np.int64)
        n = self._lib.ps_walk_pcap(_ptr(buf), end, pos, int(swapped), int(nsec), max_caplen,
                                   len(rec.data_off), _ptr(rec.data_off), _ptr(rec.caplen),
                                   _ptr(rec.origlen), _ptr(rec.ts), _ptr(st))
        return n, _status(st)

    def walk_pcapng(self, buf, end, state, rec: Records, ifs: Interfaces):
        st = np.zeros(4, np.int64)
        n = self._lib.ps_walk_pcapng(
            _ptr(buf), end, len(rec.data_off), _ptr(rec.data_off), _ptr(rec.caplen),
            _ptr(rec.origlen), _ptr(rec.ts), _ptr(rec.iface), len(ifs.linktype),
            _ptr(ifs.linktype), _ptr(ifs.snaplen), _ptr(ifs.tsresol), _ptr(ifs.tsoffset),
            _ptr(ifs.local_id), _ptr(state), _ptr(st))
        return n, _status(st)

    def decode(self, buf, data_off, caplen, origlen, linktype, out, sack: SackTable):
        n = len(data_off)
        inputs = [np.ascontiguousarray(data_off, np.int64), np.ascontiguousarray(caplen, np.uint32),
                  np.ascontiguousarray(origlen, np.uint32), np.ascontiguousarray(linktype, np.uint16)]
        scratch = [_ptr(out[k]) for k in ("ip_src", "ip_dst", "q_src", "q_dst")]
        fields = ([_ptr(buf), n] + [_ptr(a) for a in inputs] + scratch
                  + [_ptr(out[name]) for name, _ in DECODE_OUTPUTS]
                  + [_ptr(sack.rows), len(sack.rows), _ptr(sack.used)])
        self._lib.ps_decode(ctypes.byref(_DecodeArgs(*fields)))

    def new_interner(self):
        return _CInterner(self._lib)

    def new_conversations(self):
        return _CConversations(self._lib)


class _Handle:
    """Owns a C-side table; freed with the object."""

    def __init__(self, lib, new, free):
        self._lib, self._free = lib, free
        self._h = new()
        if not self._h:
            raise MemoryError("out of memory creating a hash table")

    def __del__(self):
        if getattr(self, "_h", None):
            self._free(self._h)
            self._h = None


class _CInterner(_Handle):
    def __init__(self, lib):
        super().__init__(lib, lib.ps_interner_new, lib.ps_interner_free)
        self._k = 0

    def intern(self, version, src16, dst16):
        n = len(version)
        src_code, dst_code = np.empty(n, np.int32), np.empty(n, np.int32)
        k = self._lib.ps_intern_addresses(self._h, n, _ptr(version), _ptr(src16), _ptr(dst16),
                                          _ptr(src_code), _ptr(dst_code))
        if k < 0:
            raise MemoryError("out of memory while hashing addresses")
        self._k = k
        return src_code, dst_code

    def addresses(self):
        addr, v6 = np.empty((max(self._k, 1), 16), np.uint8), np.empty(max(self._k, 1), np.uint8)
        k = self._lib.ps_interner_get(self._h, _ptr(addr), _ptr(v6))
        return addr[:k], v6[:k]


class _CConversations(_Handle):
    def __init__(self, lib):
        super().__init__(lib, lib.ps_convs_new, lib.ps_convs_free)

    def assign(self, l4, src_code, dst_code, srcport, dstport):
        n = len(l4)
        conv, reverse, first = np.empty(n, np.int32), np.empty(n, np.uint8), np.empty(n, np.uint8)
        k = self._lib.ps_conversations(self._h, n, _ptr(l4), _ptr(src_code), _ptr(dst_code),
                                       _ptr(srcport), _ptr(dstport), _ptr(conv), _ptr(reverse),
                                       _ptr(first))
        if k < 0:
            raise MemoryError("out of memory while hashing conversations")
        return conv, reverse, first


class _DecodeArgs(ctypes.Structure):
    _fields_ = ([("buf", ctypes.c_void_p), ("n", ctypes.c_int64)]
                + [(name, ctypes.c_void_p) for name in ("data_off", "caplen", "origlen", "linktype",
                                                         "ip_src", "ip_dst", "q_src", "q_dst")]
                + [(name, ctypes.c_void_p) for name, _ in DECODE_OUTPUTS]
                + [("sack_table", ctypes.c_void_p), ("sack_cap", ctypes.c_int64),
                   ("sack_used", ctypes.c_void_p)])


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
