"""``ps.read``: one entry point over the two engines (the fast reader and tshark)."""

from __future__ import annotations

import os

from .capture import Capture
from .errors import UsageError


def read(path: str | os.PathLike, *, engine: str = "fast", kernel: str = "auto",
         progress=None) -> Capture:
    """Read a capture (pcap, pcapng, or either gzipped) into a packet table.

    engine: ``"fast"`` (the built-in reader) or ``"tshark"`` (tshark's dissection, slower, for
    cross-checks and link types the fast reader does not decode).
    kernel: for the fast engine, ``"auto"`` (compiled when built, else numpy), ``"c"`` or ``"numpy"``.
    progress: optional ``f(fraction_done)``, called as the fast engine moves through the file.
    """
    if engine == "fast":
        from .ingest import read_fast
        report = (lambda done, total: progress(done / max(total, 1))) if progress else None
        return read_fast(path, kernel=kernel, progress=report)
    if engine == "tshark":
        from .engines.tshark import read_tshark
        return read_tshark(path)
    raise UsageError(f"unknown engine {engine!r}", hint="use fast or tshark")
