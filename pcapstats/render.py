"""Write result tables as a human table, CSV or JSON. Formatting only: no numbers are computed here.

Formats (stable; scripts may rely on them):

- ``table``: aligned text for people; floats rounded for reading (seconds to 6 decimals,
  rates to whole bits/s), empty cells where a value does not exist.
- ``csv``: one header line with the column names, then one line per row; full precision;
  empty field where a value does not exist.
- ``json``: an array of row objects whose keys are exactly the column names; ``null`` where a
  value does not exist.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd

FORMATS = ("table", "csv", "json")


def render(df: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        buf = io.StringIO()
        df.to_csv(buf, index=False, lineterminator="\n")
        return buf.getvalue()
    if fmt == "json":  # one row object per line: easy to read, easy to diff
        cols = list(df.columns)
        rows = (json.dumps({c: _json_value(v) for c, v in zip(cols, values)}, allow_nan=False)
                for values in df.itertuples(index=False, name=None))
        return "[" + ",\n ".join(rows) + "]\n"
    return _table(df)


def _json_value(v):
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _table(df: pd.DataFrame) -> str:
    cells = [[str(c) for c in df.columns]]
    for values in df.itertuples(index=False, name=None):
        cells.append([_cell(c, v) for c, v in zip(df.columns, values)])
    widths = [max(len(row[i]) for row in cells) for i in range(len(df.columns))]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    lines = []
    for row in cells:
        lines.append("  ".join(v.rjust(w) if num else v.ljust(w)
                               for v, w, num in zip(row, widths, numeric)).rstrip())
    return "\n".join(lines) + "\n"


def _cell(column: str, v) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (float, np.floating)):
        if column.endswith("_s"):
            return f"{v:.6f}"
        return f"{v:.0f}"
    return str(v)
