"""How captures are named where several are shown together: the shortest path suffix that
tells each from the others.

Two runs of one experiment in two directories (``t1/run.pcap``, ``t2/run.pcap``) must not both
be called ``run`` in a comparison's rows, a figure's title or legend, an export's partitions or
the files a command writes a figure each: :func:`capture_names` gives ``t1/run`` and
``t2/run``, and a capture whose file name is its own alone keeps just that name.  A path given
twice (or two spellings of one path, ``./a.pcap`` and ``a.pcap``) is one capture, one name.
"""

from __future__ import annotations

import os
from pathlib import PurePath

EXTENSIONS = (".gz", ".pcapng", ".pcap")      # left out of a name without extensions, in turn


def capture_names(paths, *, extensions: bool = True) -> list[str]:
    """Each path's shortest suffix of directories and file name that no other path shares,
    in the order given (``extensions=False``: the file name without ``.pcap``, ``.pcapng``,
    ``.gz``, unless that is all that tells two captures apart: ``run.pcap`` and
    ``run.pcapng``)."""
    paths = [str(p) for p in paths]
    unique = list(dict.fromkeys(paths))
    parts = {p: _parts(p) for p in unique}
    if not extensions:
        short = {p: (*parts[p][:-1], stem(parts[p][-1])) for p in unique}
        count: dict[tuple, set] = {}
        for p in unique:
            count.setdefault(short[p], set()).add(parts[p])
        parts = {p: short[p] if len(count[short[p]]) == 1 else parts[p] for p in unique}
    names = {}
    for p, mine in parts.items():
        others = [q for q in parts.values() if q != mine]
        k = 1
        while k < len(mine) and any(q[-k:] == mine[-k:] for q in others):
            k += 1
        names[p] = os.path.join(*mine[-k:])
    return [names[p] for p in paths]


def stem(name: str) -> str:
    """A file name without its capture extensions: ``run.pcap.gz`` -> ``run``."""
    for ext in EXTENSIONS:
        if name.endswith(ext) and len(name) > len(ext):
            name = name[:-len(ext)]
    return name


def file_safe(names) -> list[str]:
    """Names as parts of one file name each (``t1/run`` -> ``t1-run``), still distinct."""
    out: list[str] = []
    for name in names:
        safe = name.replace(os.sep, "-").lstrip("-") or "capture"
        candidate, n = safe, 2
        while candidate in out:
            candidate, n = f"{safe}-{n}", n + 1
        out.append(candidate)
    return out


def _parts(path: str) -> tuple[str, ...]:
    return PurePath(os.path.normpath(path)).parts
