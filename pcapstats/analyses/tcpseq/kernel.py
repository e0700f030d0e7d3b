"""The analyser's choice: the compiled one (kernel_c, over _tcpseq.c) when this install has
it, else the Python twin (kernel_python); and one run of it over a table's inputs.
"""

from __future__ import annotations

import numpy as np

from ...errors import UsageError
from . import kernel_c, kernel_python
from .contract import OUTPUTS, TIMESTAMP_OUTPUTS


def new_analyser(kernel: str = "auto"):
    """The analyser (contract.py's ``Analyser``), its state kept between feeds: the compiled one
    or the Python one."""
    if kernel not in ("auto", "c", "python"):
        raise UsageError(f"unknown kernel {kernel!r}", hint="use auto, c or python")
    lib = kernel_c.load() if kernel in ("auto", "c") else None
    if kernel == "c" and lib is None:
        raise UsageError("the compiled TCP analyser is not available in this install",
                         hint="reinstall with a C compiler present (pip install -e .), "
                              "or use kernel='python'")
    return kernel_python.Analyser() if lib is None else kernel_c.Analyser(lib)


def run_analyser(inputs: dict[str, np.ndarray], kernel: str = "auto", *, analyser=None,
                 whole: bool = True, outputs=None, given=None) -> dict[str, np.ndarray]:
    """The per-packet outputs (tcpseq.OUTPUTS; ts_rtt and ts_ok only with the timestamps
    inputs) of the packets ``inputs`` holds: all there are (``whole``) or the next of a file
    ``analyser`` goes on with.  ``outputs``: only these (the others are neither made nor
    written: on a long stream each costs 4-8 bytes a packet); ``given``: the outputs to
    write into these arrays (contiguous, of zeros), and only them."""
    n = len(inputs["stream"])
    if given is not None:
        out = dict(given)
    else:
        out = {name: np.zeros(n, dtype) for name, dtype in OUTPUTS
               if (name not in TIMESTAMP_OUTPUTS or "tsval" in inputs)
               and (outputs is None or name in outputs)}
    (analyser or new_analyser(kernel)).feed(inputs, out, whole)
    return out
