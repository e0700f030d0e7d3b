"""Captures as Parquet datasets, one directory a table, partitioned by capture (``pcapstats export``).

    DIR/packets/capture=run1.pcap/part-0.parquet       the packet table (pcapstats columns packets)
    DIR/streams/capture=run1.pcap/part-0.parquet       throughput's per-stream table
    DIR/tcp_analysis/capture=run1.pcap/part-0.parquet  tcp_analysis' per-packet verdicts
    DIR/cwnd.samples/capture=run1.pcap/part-0.parquet  any other analysis' table, ANALYSIS.TABLE

The layout is Hive partitioning: ``capture`` is the capture's name, read back from the
directory name (DuckDB: ``read_parquet('DIR/packets/*/*.parquet', hive_partitioning=true)``,
pyarrow: ``pyarrow.dataset.dataset('DIR/packets', partitioning='hive')``); the files themselves
hold the table's own columns.  The name is the file name, or, for captures of one file name in
several directories, the shortest path suffix that tells them apart (pcapstats.naming:
``capture=t1%2Frun.pcap``, ``capture=t2%2Frun.pcap``: URI-escaped as Hive escapes a ``/``, which
DuckDB, pyarrow and pandas read back as ``t1/run.pcap``).
Every file's schema metadata says what each column means and its unit (``<column>.doc``,
``<column>.unit``, and on each field ``doc`` / ``unit``: :func:`pcapstats.results.parquet_metadata`),
and which table it is (``pcapstats.table``).  Exporting a capture again replaces its partition
of each table written; a file appears only once whole (written beside, then renamed).

Memory: the packet table is streamed (:func:`pcapstats.ingest.packet_windows`): one row group a
window of the reader (4 MiB of capture), written as it is decoded, so its memory does not grow
with the capture.  ``streams`` streams too (as ``pcapstats throughput`` does) when it is the
only other table.  Every other analysis needs the whole packet table -- TCP sequence analysis
follows each stream from its first packet to its last, and the per-stream analyses look at a
stream whole -- so asking for one reads the capture once into memory (as ``pcapstats.read``
does) and every such table is computed from that one read, then written whole (pyarrow's
default row groups).  Analyses run with their defaults, the
per-stream ones (cwnd, rtt, seqgraph) over every TCP stream with data; one that does not apply
to a capture (ping without echoes) is that capture's error for that table, and the capture's
other tables are still written.
"""

from __future__ import annotations

import os
import warnings
from urllib.parse import quote
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from . import analyses, schema
from .batch import Outcome
from .capture import Capture
from .errors import (CaptureFormatError, CaptureOpenError, NothingToReport, PcapstatsError,
                     UsageError, shown)
from .ingest import WINDOW_BYTES, packet_windows
from .naming import capture_names, fitting
from .reader import read
from .results import RESULT_TYPES, arrow_type, require_pyarrow, with_parquet_metadata
from .pool import outcomes

PACKETS, STREAMS = "packets", "streams"
DEFAULT_TABLES = (PACKETS, STREAMS, "tcp_analysis")
PART = "part-0.parquet"
_STREAM_ALL = frozenset({"cwnd", "rtt", "seqgraph"})  # per-stream analyses: every stream
_NOT_PER_CAPTURE = frozenset({"compare"})              # over many captures: not a table a capture


@dataclass
class Written:
    """One capture's export: rows written by table (in the order asked), the tables that
    could not be made (``errors``) and those the capture has nothing for (``nothing``: ping
    without echoes), each a sentence."""
    capture: str
    rows: dict[str, int] = field(default_factory=dict)
    row_groups: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    nothing: list[str] = field(default_factory=list)


def table_names() -> list[str]:
    """Every table ``--tables`` takes: packets, streams, then each analysis' main table by the
    analysis' name and its other tables as ANALYSIS.TABLE."""
    analyses.load_all()
    names = [PACKETS, STREAMS]
    for kind in sorted(RESULT_TYPES):
        if kind in _NOT_PER_CAPTURE:
            continue
        specs = RESULT_TYPES[kind].specs
        names += [_canonical(kind, s.name) for s in specs if _canonical(kind, s.name) not in names]
    return names


def tables_asked(text: str | Sequence[str] | None) -> list[str]:
    """``--tables`` (comma-separated, or a list) as dataset names, in the order given, each once
    (``throughput`` is ``streams``, ``cwnd.summary`` is ``cwnd``); one clear error for a name
    that is none."""
    if text is None:
        return list(DEFAULT_TABLES)
    words = [w.strip() for w in (text.split(",") if isinstance(text, str) else text)]
    words = [w for w in words if w]
    if not words:
        raise UsageError("--tables names no table", hint="e.g. --tables packets,streams")
    known = table_names()
    out = []
    for word in words:
        name = _resolve(word)
        if name not in known:
            raise UsageError(f"no table named {word!r} to export",
                             hint="use " + ", ".join(known))
        if name not in out:
            out.append(name)
    return out


def prepare(directory) -> Path:
    """The output directory, made if need be, checked writable (one clear error when not)."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".pcapstats-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise PcapstatsError(f"cannot write the export: {e.strerror or e}", path=str(path),
                             hint="give -o a directory you can write to") from None
    return path


PARTITION_BYTES = 240    # capture=NAME, URI-escaped, within a file system's 255 bytes


def partition(directory, table: str, capture, name: str | None = None) -> Path:
    """Where a capture's part of a table goes: DIR/TABLE/capture=NAME/part-0.parquet, NAME
    its name among the export's captures (``names``; by default its file name), URI-escaped."""
    name = shown(Path(str(capture)).name) if name is None else name
    quoted = quote(fitting(name, PARTITION_BYTES, lambda s: len(quote(s, safe=""))), safe="")
    return Path(directory) / table / f"capture={quoted}" / PART


def names(files: Sequence) -> dict[str, str]:
    """Each capture's partition name: its file name, or the shortest path suffix that tells
    it from another of the same file name (pcapstats.naming)."""
    paths = [str(f) for f in files]
    return dict(zip(paths, capture_names(paths)))


def export_capture(path, *, directory, tables: Sequence[str] = DEFAULT_TABLES,
                   kernel: str = "auto", window_bytes: int = WINDOW_BYTES,
                   names: dict | None = None) -> Written:
    """Write one capture's tables under ``directory`` (the module docstring's layout), its
    partitions named as ``names`` (:func:`names`) says, by default by its file name.  A
    capture that cannot be read raises its error; an analysis that does not apply is kept in
    ``Written.nothing`` (``Written.errors`` when it fails) and the other tables are still
    written."""
    require_pyarrow()
    written = Written(str(path))
    whole: list[Capture] = []   # the one full read, for the analyses that need every packet
    needs_whole = any(t not in (PACKETS, STREAMS) for t in tables)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for table in tables:
            target = partition(directory, table, path, (names or {}).get(str(path)))
            if table == PACKETS:
                written.rows[table], written.row_groups[table] = _write_packets(
                    path, target, kernel, window_bytes)
                continue
            if not whole and needs_whole:
                whole.append(read(path, kernel=kernel))
            try:
                tab = _analysis_table(table, whole[0] if whole else path, kernel)
            except (CaptureOpenError, CaptureFormatError):
                raise                        # the capture cannot be read: it fails
            except NothingToReport as e:     # the analysis does not apply: no table
                written.nothing.append(f"{table}: {e}")
                continue
            except PcapstatsError as e:      # the analysis failed on it: this table fails
                written.errors.append(f"{table}: {e}")
                continue
            _write_atomically(target, lambda out: _pq().write_table(tab, out))
            written.rows[table], written.row_groups[table] = tab.num_rows, 1
    for message in {str(w.message): w.message for w in caught}.values():  # each once: two reads
        warnings.warn(message, stacklevel=2)
    return written


def export(files: Sequence, directory, *, tables: Sequence[str] = DEFAULT_TABLES,
           jobs: int | None = 1, kernel: str = "auto", scheduler: str | None = None,
           progress=None) -> Iterator[Outcome]:
    """Every capture through :func:`export_capture` in ``jobs`` processes (or on the Dask
    cluster at ``scheduler``: :func:`pcapstats.pool.outcomes`); one Outcome a capture in the
    order given (``result``: its :class:`Written`), a failing capture failing alone."""
    files = list(files)
    directory = prepare(directory)
    return outcomes(export_capture, files, jobs=jobs, scheduler=scheduler, progress=progress,
                    directory=str(directory), tables=list(tables), kernel=kernel,
                    names=names(files))


# -- the packet table --------------------------------------------------------------------------

def packet_schema():
    """The packet table's Arrow schema: each column in its own type (addresses and
    ``direction`` as text), nullable where its layer may be missing, with its meaning and unit."""
    pa = require_pyarrow()
    fields = [pa.field(c.name, arrow_type(pa, c.dtype), nullable=c.layer != schema.FRAME)
              for c in schema.COLUMNS]
    empty = pa.schema(fields).empty_table()
    return with_parquet_metadata(empty, schema.PACKET_TABLE, PACKETS).schema


def packet_batch(cap: Capture, arrow_schema=None):
    """A Capture's packet table (a window's, or a whole file's) as a pyarrow Table of
    :func:`packet_schema`: ``<NA>`` where a packet lacks the column's layer, as in
    ``cap.packets``."""
    pa = require_pyarrow()
    arrow_schema = arrow_schema or packet_schema()
    columns = []
    for c in schema.COLUMNS:
        raw = cap.column(c.name)
        mask = None if c.layer == schema.FRAME else ~cap.layer(c.layer)
        if c.dtype == "category":
            words = np.asarray(c.values, object) if c.values else cap.addresses
            codes = raw if mask is None else np.where(mask, 0, raw)
            values = words[codes] if len(words) else np.full(len(raw), None, object)
            columns.append(pa.array(values, type=pa.string(), mask=mask))
        else:
            columns.append(pa.array(np.ascontiguousarray(raw, dtype=c.dtype), mask=mask,
                                    type=arrow_type(pa, c.dtype)))
    return pa.Table.from_arrays(columns, schema=arrow_schema)


def _write_packets(path, target: Path, kernel: str, window_bytes: int) -> tuple[int, int]:
    """The packet table, one row group a window, as it is read: (rows, row groups)."""
    arrow_schema = packet_schema()
    counts = [0, 0]

    def write(out):
        with _pq().ParquetWriter(out, arrow_schema) as writer:
            def on_window(cap):
                batch = packet_batch(cap, arrow_schema)
                writer.write_table(batch, row_group_size=max(batch.num_rows, 1))
                counts[0] += batch.num_rows
                counts[1] += 1
            packet_windows(path, on_window, kernel=kernel, window_bytes=window_bytes)
            if counts[1] == 0:          # no packets: the file still says what the columns are
                writer.write_table(arrow_schema.empty_table())
    _write_atomically(target, write)
    return counts[0], counts[1]


# -- analysis tables ---------------------------------------------------------------------------

def _analysis_table(table: str, capture, kernel: str):
    """An analysis' table of one capture (a path or a Capture) as a pyarrow Table."""
    kind, _, name = table.partition(".")
    if table == STREAMS:
        kind, name = "throughput", STREAMS
    function = analyses.public(kind)
    options = {"stream": "all"} if kind in _STREAM_ALL else {}
    if kind == "throughput" and not isinstance(capture, Capture):
        options["kernel"] = kernel                    # streams the file: bounded memory
    result = function(capture, **options)
    return result.to_arrow(name or None)


def _resolve(word: str) -> str:
    if word in (PACKETS, STREAMS):
        return word
    kind, _, name = word.partition(".")
    analyses.load_all()
    if kind in RESULT_TYPES and kind not in _NOT_PER_CAPTURE:
        specs = RESULT_TYPES[kind].specs
        if not name:
            return _canonical(kind, specs[0].name)
        if name in [s.name for s in specs]:
            return _canonical(kind, name)
    return word


def _canonical(kind: str, name: str) -> str:
    """A table's dataset name: the analysis for its main table (throughput's is ``streams``),
    else ANALYSIS.TABLE."""
    main = RESULT_TYPES[kind].specs[0].name
    if kind == "throughput" and name == main:
        return STREAMS
    return kind if name == main else f"{kind}.{name}"


# -- files -------------------------------------------------------------------------------------

def _write_atomically(target: Path, write) -> None:
    """``write(path)`` to a file beside ``target``, renamed onto it once whole (no half file
    is ever left where a query would read it)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PcapstatsError(f"cannot write the export: {e.strerror or e}",
                             path=str(target.parent)) from None
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        write(str(partial))
        os.replace(partial, target)
    except OSError as e:
        raise PcapstatsError(f"cannot write the export: {e.strerror or e}",
                             path=str(target)) from None
    finally:
        if partial.exists():
            partial.unlink()


def _pq():
    require_pyarrow()
    import pyarrow.parquet as pq  # lazy: an optional dependency
    return pq


__all__ = ["DEFAULT_TABLES", "Written", "export", "export_capture", "names", "packet_batch",
           "packet_schema", "partition", "prepare", "table_names", "tables_asked"]
