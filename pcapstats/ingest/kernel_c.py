"""The compiled kernel: ``_kernel.c`` through ctypes, behind the interface of contract.py."""

from __future__ import annotations

import ctypes
import importlib.util

import numpy as np

from .contract import (DECODE_OUTPUTS, Interfaces, Records, SackTable, Status)


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


def load_c():
    """The compiled ``_kernel`` library, or None when this install has none."""
    spec = importlib.util.find_spec("pcapstats.ingest._kernel")
    if spec is None or spec.origin is None:
        return None
    try:
        return ctypes.CDLL(spec.origin)
    except OSError:
        return None
