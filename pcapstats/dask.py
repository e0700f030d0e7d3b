"""Captures as Dask DataFrames: the packet table, or any analysis' table, of many captures,
one partition a capture, computed wherever Dask runs (worker processes here, or a cluster).

    import pcapstats.dask as psd               # needs pcapstats[dask]: dask[dataframe]
    pk = psd.packets(files)                    # every capture's packet table, `capture` first
    pk[pk.tcp_stream.notna()].groupby(["capture", "tcp_stream"]).frame_len.sum().compute()
    psd.table("throughput", files)             # throughput's per-stream table of every capture
    psd.table(ps.cwnd, files, "samples", stream="all")

The columns and their dtypes are declared before anything is read (Dask's ``meta``): the
packet table's from :data:`pcapstats.schema.COLUMNS` as :attr:`Capture.packets` makes them, an
analysis' from its :class:`~pcapstats.schema.TableSpec` for those options
(:meth:`Result.specs_for`) as :meth:`Result.to_pandas` makes them; ``capture`` (the path as
given) comes first, as :func:`pcapstats.concat` puts it.  The address columns are categories
whose values differ between captures: Dask knows them only once computed
(``.cat.as_known()``).  Options are the analysis' own keyword options.

Each partition reads its capture whole on a Dask worker (``pcapstats.read``, and the
analysis), so a worker needs pcapstats installed and the file at the same path.  Without a
``distributed.Client`` Dask computes in this process's threads; with one
(``Client("tcp://host:8786")``, or ``Client(LocalCluster())``) on its workers.  The commands'
``--scheduler`` / ``--dask`` run captures there through pcapstats.pool instead.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np

from . import analyses, schema
from .errors import UsageError
from .reader import read
from .results import RESULT_TYPES, pandas_meta
from .schema import TableSpec

try:
    import dask.dataframe as dd
    import pandas as pd
    from dask.dataframe.utils import UNKNOWN_CATEGORIES
except ImportError as e:          # one clear line, not a dask traceback
    raise ImportError(f"pcapstats.dask needs dask[dataframe] ({e.name} is not installed): "
                      "pip install 'pcapstats[dask]'") from None

__all__ = ["packets", "table", "packet_meta", "table_meta"]

_NOT_PER_CAPTURE = frozenset({"compare"})     # over many captures at once: not a table a capture


def packets(files: Sequence, *, kernel: str = "auto") -> "dd.DataFrame":
    """The packet table of every capture (``pcapstats columns packets``) as one Dask DataFrame,
    a partition a capture in the order given, with a first column ``capture``."""
    return dd.from_map(_packets, _paths(files), meta=packet_meta(), kernel=kernel,
                       label="pcapstats-packets", enforce_metadata=True)


def table(analysis: str | Callable, files: Sequence, name: str | None = None,
          **options) -> "dd.DataFrame":
    """Table ``name`` (default: the main one) of ``analysis`` (its name, or the ``ps``
    function) run with ``options`` on every capture, as one Dask DataFrame: a partition a
    capture in the order given, a first column ``capture``.  The same rows, columns and
    dtypes as ``ps.<analysis>(files, **options).to_pandas(name)``."""
    kind = getattr(analysis, "analysis", analysis)
    analyses.load_all()
    if not isinstance(kind, str) or kind not in RESULT_TYPES or kind in _NOT_PER_CAPTURE:
        per_capture = sorted(k for k in RESULT_TYPES if k not in _NOT_PER_CAPTURE)
        raise UsageError(f"no analysis {kind!r} gives a table a capture",
                         hint="use one of " + ", ".join(per_capture) +
                              (" (compare runs on Dask with ps.compare(files, scheduler=...))"
                               if kind == "compare" else ""))
    spec = _spec(RESULT_TYPES[kind].specs_for(**options), name, kind)
    return dd.from_map(_table, _paths(files), meta=table_meta(spec), kind=kind,
                       name=spec.name, options=options, label=f"pcapstats-{kind}",
                       enforce_metadata=True)


def packet_meta() -> "pd.DataFrame":
    """The packet table with no rows, ``capture`` first, in the dtypes Capture.packets gives
    (address categories unknown: they differ between captures)."""
    columns = {"capture": pd.Series([], dtype=_TEXT)}
    for col in schema.COLUMNS:
        dtype = schema.numpy_dtype(col)
        if col.dtype == "category":
            words = list(col.values) if col.values else [UNKNOWN_CATEGORIES]
            value = pd.Categorical([], categories=pd.Index(words, dtype=object))
        elif col.layer == schema.FRAME:
            value = np.zeros(0, dtype)
        elif col.dtype == "bool":
            value = pd.array([], dtype="boolean")
        elif col.dtype == "float64":
            value = np.zeros(0, np.float64)
        else:
            value = pd.arrays.IntegerArray(np.zeros(0, dtype), np.zeros(0, bool))
        columns[col.name] = value
    return pd.DataFrame(columns)


def table_meta(spec: TableSpec) -> "pd.DataFrame":
    """An analysis table with no rows, ``capture`` first (results.pandas_meta)."""
    return pandas_meta(spec.with_capture())


# -- what a worker runs: one capture ----------------------------------------------------------

_TEXT = pd.Series(np.array([""], dtype=object)).dtype   # what pandas makes of an array of str


def _packets(path: str, kernel: str) -> "pd.DataFrame":
    frame = read(path, kernel=kernel).packets
    frame.insert(0, "capture", pd.Series([path] * len(frame), dtype=_TEXT, index=frame.index))
    return frame


def _table(path: str, kind: str, name: str, options: dict) -> "pd.DataFrame":
    result = analyses.public(kind)(path, **options)
    frame = result.to_pandas(name)
    frame.insert(0, "capture", pd.Series([path] * len(frame), dtype=_TEXT, index=frame.index))
    meta = table_meta(_spec(result.table_specs, name, kind))
    text = [c for c in frame.columns if meta[c].dtype == _TEXT and frame[c].dtype != _TEXT]
    return frame.astype({c: _TEXT for c in text}) if text else frame   # no rows: object


def _spec(specs: Sequence[TableSpec], name: str | None, kind: str) -> TableSpec:
    for spec in specs:
        if name is None or spec.name == name:
            return spec
    raise UsageError(f"{kind} has no table {name!r}",
                     hint=f"its tables: {', '.join(s.name for s in specs)}")


def _paths(files) -> list[str]:
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    if not files:
        raise UsageError("no capture given")
    bad = [f for f in files if not isinstance(f, (str, os.PathLike))]
    if bad:
        raise UsageError(f"pcapstats.dask takes capture paths, not {type(bad[0]).__name__}",
                         hint="Dask workers read the files themselves")
    return [os.fspath(f) for f in files]
