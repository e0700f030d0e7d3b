"""The compiled TCP sequence analyser, ``_tcpseq.c``, through ctypes (contract: tcpseq.py)."""

from __future__ import annotations

import ctypes
import importlib.util

import numpy as np

from .tcpseq import INPUTS, OUTPUTS


def analyse(lib, inputs: dict[str, np.ndarray], out: dict[str, np.ndarray], n_streams: int) -> None:
    """Fill ``out`` (OUTPUTS) from ``inputs`` (INPUTS) with the library :func:`load` gave."""
    args = _Args(len(inputs["stream"]), n_streams, *(inputs[name].ctypes.data for name, _ in INPUTS),
                 *(out[name].ctypes.data for name, _ in OUTPUTS))
    if lib.ps_tcpseq(ctypes.byref(args)) != 0:
        raise MemoryError("out of memory in the TCP sequence analysis")


class _Args(ctypes.Structure):
    _fields_ = ([("n", ctypes.c_int64), ("n_streams", ctypes.c_int64)]
                + [(name, ctypes.c_void_p) for name, _ in INPUTS]
                + [(name, ctypes.c_void_p) for name, _ in OUTPUTS])


_lib: list = []


def load():
    """The compiled library (loaded once), or None when this install has none."""
    if not _lib:
        spec = importlib.util.find_spec("pcapstats.analyses._tcpseq")
        lib = None
        if spec is not None and spec.origin is not None:
            try:
                lib = ctypes.CDLL(spec.origin)
                lib.ps_tcpseq.restype = ctypes.c_int64
                lib.ps_tcpseq.argtypes = [ctypes.c_void_p]
            except (OSError, AttributeError):
                lib = None
        _lib.append(lib)
    return _lib[0]


def c_analyser_available() -> bool:
    return load() is not None
