"""How captures are named where several are shown together: the shortest path suffix that
tells each from the others.

Two runs of one experiment in two directories (``t1/run.pcap``, ``t2/run.pcap``) must not both
be called ``run`` in a comparison's rows, a figure's title or legend, an export's partitions or
the files a command writes a figure each: :func:`capture_names` gives ``t1/run`` and
``t2/run``, and a capture whose file name is its own alone keeps just that name.  Names are
data: a name is shown as one printable line (``errors.shown``: a byte that is not UTF-8 as
``\\xNN``, a newline or a right-to-left mark escaped), and written into files as
:func:`text`.  A path given
twice (or two spellings of one path, ``./a.pcap`` and ``a.pcap``) is one capture, one name.
"""

from __future__ import annotations

import os
from pathlib import PurePath

from .errors import shown

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
        names[p] = shown(os.path.join(*mine[-k:]))
    return [names[p] for p in paths]


def text(path) -> str:
    """A path as text every output can hold (a CSV or JSON file, a Parquet column, an HTML
    page): the name as the file system gives it, but each byte that is not UTF-8 written
    ``\\xNN`` (a name's other characters, any script, emoji, a newline, kept)."""
    path = os.fspath(path)
    if isinstance(path, str) and path.isascii():
        return path
    raw = path if isinstance(path, bytes) else path.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "backslashreplace")


def stem(name: str) -> str:
    """A file name without its capture extensions: ``run.pcap.gz`` -> ``run``."""
    for ext in EXTENSIONS:
        if name.endswith(ext) and len(name) > len(ext):
            name = name[:-len(ext)]
    return name


FILE_PART_BYTES = 120     # a capture's part of a file name written beside -o's (x.NAME.png)


def fitting(name: str, most: int, size=lambda s: len(s.encode("utf-8", "backslashreplace"))
            ) -> str:
    """``name`` whole when ``size(name)`` is at most ``most`` bytes, else its start and ``~``
    and 8 hex digits of its whole text's hash: still one name a capture, within a file
    system's 255 bytes whatever the capture was called."""
    if size(name) <= most:
        return name
    import hashlib
    tag = "~" + hashlib.sha1(name.encode("utf-8", "backslashreplace")).hexdigest()[:8]
    keep = name
    while keep and size(keep) + size(tag) > most:
        keep = keep[:max(len(keep) * 3 // 4, len(keep) - 64) if size(keep) > 2 * most
                    else len(keep) - 1]
    return keep + tag


def file_safe(names) -> list[str]:
    """Names as parts of one file name each (``t1/run`` -> ``t1-run``), still distinct, each
    at most FILE_PART_BYTES bytes."""
    out: list[str] = []
    for name in names:
        safe = fitting(name.replace(os.sep, "-").lstrip("-") or "capture", FILE_PART_BYTES)
        candidate, n = safe, 2
        while candidate in out:
            candidate, n = f"{safe}-{n}", n + 1
        out.append(candidate)
    return out


def _parts(path: str) -> tuple[str, ...]:
    return PurePath(os.path.normpath(path)).parts or (path or ".",)    # "" and "." too
