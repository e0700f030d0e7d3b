"""``ps.read`` and the one input policy of every analysis: a Capture, or a path to read."""

from __future__ import annotations

import os

from .capture import Capture, Needs
from .errors import UsageError
from .ingest import read_fast, read_needed


def read(path: str | os.PathLike, *, engine: str = "fast", kernel: str = "auto",
         progress=None) -> Capture:
    """Read a capture (pcap, pcapng, or either gzipped) into a packet table.

    engine: ``"fast"`` (the built-in reader) or ``"tshark"`` (tshark's dissection, slower, for
    cross-checks and link types the fast reader does not decode).
    kernel: for the fast engine, ``"auto"`` (compiled when built, else numpy), ``"c"`` or ``"numpy"``.
    progress: optional ``f(fraction_done)``, called as the fast engine moves through the file.
    """
    if engine == "fast":
        report = (lambda done, total: progress(done / max(total, 1))) if progress else None
        return read_fast(path, kernel=kernel, progress=report)
    if engine == "tshark":
        from .engines.tshark import read_tshark  # lazy: it loads pandas, 0.25 s of start-up
        return read_tshark(path)
    raise UsageError(f"unknown engine {engine!r}", hint="use fast or tshark")


def as_capture(source, needs: Needs | None = None) -> Capture:
    """A Capture as given, or the capture a path names, read with the fast engine (only the
    rows and columns ``needs`` names, when given); anything else is one clear UsageError."""
    if isinstance(source, Capture):
        return source
    if isinstance(source, (str, os.PathLike)):
        return read_needed(source, needs) if needs is not None else read(source)
    raise UsageError(f"an analysis takes a Capture or a capture file's path, not a "
                     f"{type(source).__name__}", hint="ps.read(path) gives a Capture")
