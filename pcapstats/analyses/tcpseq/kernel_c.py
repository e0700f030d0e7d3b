"""The compiled TCP sequence analyser, ``_tcpseq.c``, through ctypes (contract: contract.py)."""

from __future__ import annotations

import ctypes
import importlib.util

import numpy as np

from .contract import COUNTS, INPUTS, OUTPUTS


class Analyser:
    """The compiled analyser's state (a C handle, freed with this object) between feeds."""

    def __init__(self, lib):
        self._lib = lib
        self._h = lib.ps_tcpseq_open()
        if not self._h:
            raise MemoryError("out of memory in the TCP sequence analysis")

    def feed(self, inputs: dict[str, np.ndarray], out: dict[str, np.ndarray],
             whole: bool = False) -> None:
        """Fill ``out`` (OUTPUTS) from ``inputs`` (INPUTS; the optional ones may be absent)."""
        def ptr(a):
            return 0 if a is None else a.ctypes.data
        args = _Args(len(inputs["stream"]), int(whole),
                     *(ptr(inputs.get(name)) for name, _ in INPUTS),
                     *(ptr(out.get(name)) for name, _ in OUTPUTS))
        if self._lib.ps_tcpseq_feed(self._h, ctypes.byref(args)) != 0:
            raise MemoryError("out of memory in the TCP sequence analysis")

    def counts(self) -> np.ndarray:
        """Rows of (stream, direction, *COUNTS) of every stream and direction fed so far."""
        rows = self._lib.ps_tcpseq_counts(self._h, 0, None)
        out = np.zeros((rows, 2 + len(COUNTS)), np.int64)
        if rows:
            self._lib.ps_tcpseq_counts(self._h, rows, out.ctypes.data)
        return out

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.ps_tcpseq_close(self._h)
            self._h = None


class _Args(ctypes.Structure):
    _fields_ = ([("n", ctypes.c_int64), ("whole", ctypes.c_int64)]
                + [(name, ctypes.c_void_p) for name, _ in INPUTS]
                + [(name, ctypes.c_void_p) for name, _ in OUTPUTS])


_lib: list = []


def load():
    """The compiled library (loaded once), or None when this install has none."""
    if not _lib:
        spec = importlib.util.find_spec("pcapstats.analyses.tcpseq._tcpseq")
        lib = None
        if spec is not None and spec.origin is not None:
            try:
                lib = ctypes.CDLL(spec.origin)
                p, i64 = ctypes.c_void_p, ctypes.c_int64
                lib.ps_tcpseq_open.restype, lib.ps_tcpseq_open.argtypes = p, []
                lib.ps_tcpseq_close.restype, lib.ps_tcpseq_close.argtypes = None, [p]
                lib.ps_tcpseq_feed.restype, lib.ps_tcpseq_feed.argtypes = i64, [p, p]
                lib.ps_tcpseq_counts.restype = i64
                lib.ps_tcpseq_counts.argtypes = [p, i64, p]
            except (OSError, AttributeError):
                lib = None
        _lib.append(lib)
    return _lib[0]


def c_analyser_available() -> bool:
    return load() is not None
