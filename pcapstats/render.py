"""Write result tables as a human table, CSV or JSON. Formatting only: no numbers are computed here.

A table is a mapping of column name to a numpy array (a DataFrame converts with
``{c: df[c].to_numpy() for c in df}``); rendering needs no pandas, so the CLI starts fast.

Formats (stable; scripts may rely on them):

- ``table``: aligned text for people; floats rounded for reading by their unit (``*_s`` to
  6 decimals, ``*_ms`` to 3, ``*_us`` to 1, ``*_bps`` / ``*_bytes`` / ``*_per_sec`` whole,
  anything else, such as a ratio, to 4 significant digits), empty cells where a value does
  not exist.
- ``csv``: one header line with the column names, then one line per row; numbers in full
  (Python's shortest round-trip form); empty field where a value does not exist.
- ``json``: an array of row objects whose keys are exactly the column names, one row a line;
  ``null`` where a value does not exist.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

FORMATS = ("table", "csv", "json")


def render(table: dict, fmt: str, integers: frozenset = frozenset()) -> str:
    """The table as text in ``fmt``; ``integers``: columns of whole numbers stored as floats
    (so that they can be empty), written without a fractional part."""
    names = list(table)
    rows = [[_value(table[name][i], name in integers) for name in names]
            for i in range(length(table))]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([["" if v is None else v for v in row] for row in rows])
        return buf.getvalue()
    if fmt == "json":
        lines = (json.dumps(dict(zip(names, row)), allow_nan=False) for row in rows)
        return "[" + ",\n ".join(lines) + "]\n"
    return _aligned(names, rows, [np.issubdtype(np.asarray(table[n]).dtype, np.number) for n in names])


def length(table: dict) -> int:
    """Rows of a table (0 for a table without columns)."""
    return len(next(iter(table.values()))) if table else 0


def _value(v, integer: bool = False):
    """numpy scalar -> plain Python value; NaN and missing -> None."""
    if v is None:
        return None
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(v) else int(v) if integer else float(v)
    return str(v)


def _aligned(names, rows, numeric) -> str:
    cells = [names] + [[_cell(name, v) for name, v in zip(names, row)] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(names))]
    lines = ["  ".join(v.rjust(w) if num else v.ljust(w)
                       for v, w, num in zip(row, widths, numeric)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


# Decimals in the human table by the unit a column's name ends in; other floats (ratios,
# factors, confidences) get 4 significant digits.
_DECIMALS = {"_s": 6, "_ms": 3, "_us": 1, "_bps": 0, "_bytes": 0, "_per_sec": 0}


def _cell(column: str, v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        for suffix, decimals in _DECIMALS.items():
            if column.endswith(suffix):
                return f"{v:.{decimals}f}"
        return f"{v:.4g}"
    return str(v)
