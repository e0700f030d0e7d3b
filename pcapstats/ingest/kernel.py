"""Which kernel reads: the compiled one when this install has it, else the numpy one."""

from __future__ import annotations

from ..errors import UsageError
from .kernel_c import CKernel, load_c

_kernels: dict[str, object] = {}


def get_kernel(which: str = "auto"):
    """The C kernel when it was compiled, else the numpy one; ``which`` forces one ("c"/"numpy")."""
    if which not in ("auto", "c", "numpy"):
        raise UsageError(f"unknown kernel {which!r}", hint="use auto, c or numpy")
    if which in ("auto", "c") and "c" not in _kernels:
        lib = load_c()
        if lib is not None:
            _kernels["c"] = CKernel(lib)
    if which == "c" and "c" not in _kernels:
        raise UsageError("the compiled kernel is not available in this install",
                         hint="reinstall with a C compiler present (pip install -e .), or use kernel='numpy'")
    if which == "numpy" or (which == "auto" and "c" not in _kernels):
        if "numpy" not in _kernels:
            from .kernel_numpy import NumpyKernel  # lazy: it loads pandas (start-up)
            _kernels["numpy"] = NumpyKernel()
        return _kernels["numpy"]
    return _kernels["c"]


def c_kernel_available() -> bool:
    return load_c() is not None
