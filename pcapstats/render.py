"""Tables as text: for people (human units, fitted to the terminal) and for scripts (CSV, JSON).

Formatting only: no number is computed here.  A table is a mapping of column name to a numpy
array; rendering needs no pandas, so the command line starts fast.

- ``table`` (:func:`human`): aligned text for people. Each column is shown in the unit its
  values read best in, chosen per column from its largest value (bit/s as kbit/s, Mbit/s or
  Gbit/s; bytes as B, kB, MB or GB, 1000-based as Wireshark counts; ns as ms; fractions as %),
  the unit written under the heading; empty cells where a value does not exist; long text
  wrapped so the table fits the width asked for (the terminal's). A :class:`Shown` picks and
  names the columns people read first, and can join several into one (a stream's endpoints).
- ``csv`` (:func:`delimited`): one header line with the column names, then one line per row;
  numbers in full, in the columns' own units (Python's shortest round-trip form); whole numbers
  that are stored as floats so that they can be missing are written without ``.0``; empty
  field where a value does not exist.
- ``json``: an array of row objects whose keys are exactly the column names, one row a line;
  ``null`` where a value does not exist.

CSV and JSON are stable: scripts may rely on them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import textwrap
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .streams import endpoint

FORMATS = ("table", "csv", "json")
DEFAULT_WIDTH = 100          # when standard output is not a terminal
MIN_WRAP = 16                # text columns are not wrapped narrower than this
WRAP_COMFORT = 30            # ... nor narrower than this while a minor column can go instead
GAP = 2                      # spaces between columns


@dataclass(frozen=True)
class Shown:
    """A column of a human table: ``heading`` over the values of ``column``, or over ``join``,
    a format string of several columns (``"{proto} {stream}"``); ``endpoints``: the stream's
    two ends from the vocabulary's address_a/port_a/address_b/port_b (``10.0.0.1:5000 →
    [fd00::2]:80``).  ``wrap``: free text, wrapped to fit the width; ``name_only``: a path,
    shown by its file name; ``minor``: left out first when the table is too wide."""
    heading: str
    column: str | None = None
    join: str | None = None
    endpoints: bool = False
    wrap: bool = False
    name_only: bool = False
    minor: bool = False


def length(table: dict) -> int:
    """Rows of a table (0 for a table without columns)."""
    return len(next(iter(table.values()))) if table else 0


def render(table: dict, fmt: str, integers: frozenset = frozenset(), units: dict | None = None,
           shown: Sequence[Shown] | None = None, width: int | None = None) -> str:
    """The table as text in ``fmt``.  ``integers``: columns of whole numbers stored as floats
    (so that they can be missing); ``units``: column -> unit, for the human table; ``shown``:
    its columns (all, under their own names, without); ``width``: its width (the terminal's)."""
    if fmt == "csv":
        return delimited(table, integers)
    if fmt == "json":
        names = list(table)
        rows = _rows(table, integers)
        lines = (json.dumps(dict(zip(names, row)), allow_nan=False) for row in rows)
        return "[" + ",\n ".join(lines) + "]\n"
    return human(table, units or {}, shown, width or terminal_width(), integers)


def delimited(table: dict, integers: frozenset = frozenset()) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(table))
    writer.writerows([["" if v is None else v for v in row] for row in _rows(table, integers)])
    return buf.getvalue()


def path_shown(path: str | os.PathLike) -> str:
    """A capture's path as a heading shows it: relative to the working directory when the file
    is under it (what the user typed, usually), else as given -- so a heading fits the width."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:          # another drive (Windows)
        return text
    return relative if not relative.startswith(os.pardir) and len(relative) < len(text) else text


def terminal_width() -> int:
    """The terminal's width, or DEFAULT_WIDTH when output goes to a pipe or a file."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def human(table: dict, units: dict, shown: Sequence[Shown] | None, width: int,
          integers: frozenset = frozenset()) -> str:
    shown = list(shown) if shown else [Shown(name, name, wrap=_long_text(table[name]))
                                       for name in table]
    n = length(table)
    columns = []
    for s in shown:
        if s.endpoints:
            cells = [f"{endpoint(table['address_a'][i], table['port_a'][i])} → "
                     f"{endpoint(table['address_b'][i], table['port_b'][i])}" for i in range(n)]
            column = _Column(s.heading, "", cells, numeric=False, whole=True)
        elif s.join is not None:
            cells = [s.join.format(**{k: _plain(table[k][i]) for k in table}) for i in range(n)]
            column = _Column(s.heading, "", cells, numeric=False, whole=True)
        elif s.column in table:
            column = _format(s.heading, table[s.column], units.get(s.column),
                             s.column in integers)
        else:
            continue
        if n and column.numeric and not any(column.cells):
            continue                      # nothing to show: not even a heading
        if s.name_only:
            column.cells = [c.rsplit("/", 1)[-1] for c in column.cells]
        column.wrap, column.minor = s.wrap, s.minor
        columns.append(column)
    return _layout(columns, width)


# -- one column -----------------------------------------------------------------------------------

@dataclass
class _Column:
    heading: str
    unit: str
    cells: list[str]
    numeric: bool
    wrap: bool = False
    minor: bool = False
    whole: bool = False   # an identity (endpoints): wrapped only when nothing else can give


COUNTS = ("packets", "segments")   # units a heading already says: not written under it
_PREFIXED = {"bit/s": ("bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"),
             "bytes": ("B", "kB", "MB", "GB", "TB"),
             "bytes/s": ("B/s", "kB/s", "MB/s", "GB/s", "TB/s")}


def _format(heading: str, values: np.ndarray, unit: str | None, integer: bool) -> _Column:
    values = np.asarray(values)
    if values.dtype.kind in "OUS" or values.dtype.kind == "b":
        return _Column(heading, "", [_text(v) for v in values], numeric=False)
    v = values.astype(np.float64)
    present = ~np.isnan(v)
    largest = float(np.abs(v[present]).max()) if present.any() else 0.0
    scale, shown_unit = 1.0, "" if unit in COUNTS else unit or ""
    if unit in _PREFIXED:    # sizes keep four digits before a prefix (1400 B), rates three
        digits = 10_000 if unit == "bytes" else 1000
        step = 0 if largest < digits else min(int(math.log10(largest * 1000 / digits) // 3), 4)
        if unit == "bytes":  # no size below one unit (0.018 kB) while six digits would do
            nonzero = np.abs(v[present & (v != 0)])
            while step and len(nonzero) and nonzero.min() < 1000.0 ** step \
                    and largest < 1e6 * 1000.0 ** (step - 1):
                step -= 1
        scale, shown_unit = 1000.0 ** step, _PREFIXED[unit][step]
    elif unit == "ns":
        scale, shown_unit = 1e6, "ms"
    elif unit == "fraction":
        scale, shown_unit = 0.01, "%"
    elif unit == "ms/byte":              # a delay model's slope: microseconds a byte
        scale, shown_unit = 1e-3, "µs/B"
    if shown_unit == "%":
        present_cells = [f"{x:.2f}".rstrip("0").rstrip(".") for x in v[present] / scale]
        cells = iter(present_cells)
        return _Column(heading, "%", [next(cells) if p else "" for p in present], numeric=True)
    elif unit == "s" and 0 < largest < 1:
        scale, shown_unit = 1e-3, "ms"
    if scale == 1.0 and (values.dtype.kind in "iu" or integer):
        cells = ["" if not p else str(int(round(x))) for x, p in zip(v, present)]
    else:
        scaled = v / scale
        if not unit:      # ratios, shares, factors: significant digits
            cells = ["" if not p else _ratio(x) for x, p in zip(scaled, present)]
        elif shown_unit == "s":  # times: to the millisecond
            cells = ["" if not p else f"{x:.3f}" for x, p in zip(scaled, present)]
        else:             # measures: about three significant digits, never e-notation
            cells = ["" if not p else f"{x:.{_decimals(x)}f}" for x, p in zip(scaled, present)]
    return _Column(heading, shown_unit, cells, numeric=True)


def _ratio(x: float) -> str:
    """Three significant digits; near 1 (an r² or a fairness index of 0.9996), enough to show
    how far from 1."""
    if 0.99 <= abs(x) < 1:
        return f"{x:.{min(int(-math.log10(1 - abs(x))) + 2, 8)}f}"
    return f"{x:.3g}"


def _decimals(x: float) -> int:
    """Decimals for about three significant digits: 0.123, 1.23, 12.34, 123.4, 1234; none for
    an exact zero (0 B of window, not 0.000 B)."""
    x = abs(x)
    return 0 if x == 0 else 3 if x < 1 else 2 if x < 100 else 1 if x < 1000 else 0


def _layout(columns: list[_Column], width: int) -> str:
    """Columns side by side, headings (and units) on top.  While the table is too wide: free
    text wrapped to a comfortable width, minor columns left out, endpoints split over two
    lines, text wrapped narrower, then columns at the right left out (and said so)."""
    if not columns:
        return ""
    widths = [max([len(c.heading), len(c.unit)] + [len(x) for x in c.cells]) for c in columns]
    left_out: list[str] = []

    def over() -> int:
        return sum(widths) + GAP * (len(widths) - 1) - width

    def squeeze(floor: int, whole: bool) -> None:  # wrap text, the widest first, to floor
        for i in sorted((i for i, c in enumerate(columns) if c.wrap and c.whole == whole),
                        key=lambda i: -widths[i]):
            cut = min(over(), widths[i] - max(floor, len(columns[i].heading)))
            if cut > 0:
                widths[i] -= cut

    def drop(minor_only: bool) -> None:    # leave columns out, from the right
        while over() > 0 and len(columns) > 1:
            i = max((i for i, c in enumerate(columns) if c.minor or not minor_only), default=None)
            if i is None:
                return
            column = columns.pop(i)
            widths.pop(i)
            if not column.minor:               # a minor column goes without a word
                left_out.insert(0, column.heading)
    squeeze(WRAP_COMFORT, whole=False)   # free text first, to a comfortable width
    drop(minor_only=True)
    squeeze(MIN_WRAP, whole=True)        # then endpoints onto two lines, then text narrower
    squeeze(MIN_WRAP, whole=False)
    drop(minor_only=False)
    lines = [_line([c.heading for c in columns], widths, columns)]
    if any(c.unit for c in columns):
        lines.append(_line([c.unit for c in columns], widths, columns))
    for r in range(len(columns[0].cells)):
        parts = [textwrap.wrap(c.cells[r], widths[i]) or [""] if c.wrap else [c.cells[r]]
                 for i, c in enumerate(columns)]
        for k in range(max(len(p) for p in parts)):
            lines.append(_line([p[k] if k < len(p) else "" for p in parts], widths, columns))
    if left_out:
        lines += textwrap.wrap(f"(too narrow for {', '.join(left_out)}: widen the terminal, or "
                               "--format csv)", width)
    return "\n".join(lines) + "\n"


def _line(cells: list[str], widths: list[int], columns: list[_Column]) -> str:
    return (" " * GAP).join(cell.rjust(w) if c.numeric else cell.ljust(w)
                            for cell, w, c in zip(cells, widths, columns)).rstrip()


# -- values ---------------------------------------------------------------------------------------

def _rows(table: dict, integers: frozenset) -> list[list]:
    names = list(table)
    return [[_value(table[name][i], name in integers) for name in names]
            for i in range(length(table))]


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


def _long_text(values: np.ndarray) -> bool:
    """Free text worth wrapping (a reason, a why), not an identifier."""
    return values.dtype.kind == "O" and any(len(str(v)) > 30 and " " in str(v)
                                            for v in values[:200])


def _plain(v) -> str:
    value = _value(v)
    return "" if value is None else str(value)


def _text(v) -> str:
    value = _value(v)
    return "" if value is None else "yes" if value is True else "no" if value is False else str(value)
