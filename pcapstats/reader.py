"""``ps.read``: one entry point over the two engines (the fast reader and tshark)."""

from __future__ import annotations

import os

from .capture import Capture
from .errors import UsageError


def read(path: str | os.PathLike, *, engine: str = "fast", kernel: str = "auto") -> Capture:
    """Read a capture (pcap, pcapng, or either gzipped) into a packet table.

    engine: ``"fast"`` (the built-in reader) or ``"tshark"`` (tshark's dissection, slower, for
    cross-checks and link types the fast reader does not decode).
    kernel: for the fast engine, ``"auto"`` (compiled when built, else numpy), ``"c"`` or ``"numpy"``.
    """
    if engine == "fast":
        from .ingest import read_fast
        return read_fast(path, kernel=kernel)
    if engine == "tshark":
        from .engines.tshark import read_tshark
        return read_tshark(path)
    raise UsageError(f"unknown engine {engine!r}", hint="use fast or tshark")
