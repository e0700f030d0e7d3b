"""Tables as text: for people (human units and headings, fitted to the terminal) and for scripts
(CSV, JSON).

Formatting only: no number is computed here.  A table is a mapping of column name to a numpy
array; rendering needs no pandas, so the command line starts fast.

- ``table`` (:func:`human`): aligned text for people, one output read as a person copying its
  numbers into a report would:

  * **Units**: all the columns of one unit family in one output (every row, and every
    capture's block: ``sections``) share one unit, chosen from their range: bit/s as bit/s, kbit/s, Mbit/s or Gbit/s and bytes/s likewise, the prefix of
    the largest value; bytes as B, kB, MB or GB (1000-based as Wireshark counts; four digits
    before a prefix, 1400 B); fractions as %; ns as ms.  Times keep their declared unit (s
    with three decimals).  Each column has one number of decimals over all its rows and
    blocks, as many as its largest value reads best with (0.123, 1.23, 12.34, 123.4, 1234)
    and enough to give its smallest non-zero one two significant digits (at most
    :data:`MAX_DECIMALS`): a column's digits follow its own range, not its neighbours'; whole numbers have none; a ratio without unit
    (Jain's index, r²) enough to tell a value near 1 from 1 (at most
    :data:`MAX_RATIO_DECIMALS`).  Never e-notation; the unit is written under the heading.
  * **Headings**: a :class:`Shown`'s, else the column's declared ``Column.heading``, else
    :func:`heading` of its name (the unit suffix dropped, ``_a_to_b`` as ``A→B``), so a table
    without a view (``--series``, ``--events``) reads like the summary.  A heading may have
    two lines (``"stream avg\nA→B"``); a long one is split so over narrow numbers.
  * **Width**: a table too wide for the terminal first wraps free text, leaves out the
    view's minor columns (said in one line), puts endpoints on two lines, then is printed in
    column blocks, its key columns (capture, stream, direction ...: :attr:`Shown.key`)
    repeated in each, as pandas does.  No column that was asked for is left out.

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
import dataclasses
import io
import json
import math
import os
import shutil
import string
import textwrap
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .addresses import endpoint
from .errors import shown as printable

FORMATS = ("table", "csv", "json")
DEFAULT_WIDTH = 100          # when standard output is not a terminal
MIN_WRAP = 16                # text columns are not wrapped narrower than this
WRAP_COMFORT = 30            # ... nor narrower than this while a minor column can go instead
GAP = 2                      # spaces between columns
MAX_DECIMALS = 3             # a measure's decimals at most
MAX_PERCENT_DECIMALS = 2     # a share's: 0.04 % is small enough to read as such
MAX_RATIO_DECIMALS = 4       # a ratio's (Jain 0.9918 beside 0.8740)
# columns that say which row a row is: repeated in every column block of a wide table
KEYS = ("capture", "proto", "stream", "direction", "series", "session", "flow", "by",
        "source", "frame_number", "start_frame", "interval", "transfer")


@dataclass(frozen=True)
class Shown:
    """A column of a human table: ``heading`` (None: the column's own, see :func:`heading`)
    over the values of ``column``, or over ``join``, a format string of several columns
    (``"{proto} {stream}"``); ``endpoints``: the stream's two ends from the vocabulary's
    address_a/port_a/address_b/port_b (``10.0.0.1:5000 → [fd00::2]:80``).  ``wrap``: free
    text, wrapped to fit the width; ``name_only``: a path, shown by its file name; ``minor``:
    left out first when the table is too wide; ``key``: says which row a row is, repeated in
    every column block (None: when the column, or every column of the join, is one of
    :data:`KEYS`); ``indent``: a column of levels, each cell indented two spaces a level (a
    tree)."""
    heading: str | None = None
    column: str | None = None
    join: str | None = None
    endpoints: bool = False
    wrap: bool = False
    name_only: bool = False
    minor: bool = False
    key: bool | None = None
    indent: str | None = None

    @property
    def is_key(self) -> bool:
        if self.key is not None:
            return self.key
        if self.join is not None:
            return all(name in KEYS for _, name, _, _ in string.Formatter().parse(self.join)
                       if name)
        return self.column in KEYS


def length(table: dict) -> int:
    """Rows of a table (0 for a table without columns)."""
    return len(next(iter(table.values()))) if table else 0


def render(table: dict, fmt: str, integers: frozenset = frozenset(), units: dict | None = None,
           shown: Sequence[Shown] | None = None, width: int | None = None, *,
           headings: Mapping[str, str] | None = None,
           sections: Sequence[tuple[str, np.ndarray]] | None = None,
           more: str = "--all shows them") -> str:
    """The table as text in ``fmt``.  ``integers``: columns of whole numbers stored as floats
    (so that they can be missing); ``units``: column -> unit, for the human table;
    ``shown``: its columns (all, under their headings, without); ``width``: its width (the
    terminal's); ``headings``: column -> its declared heading; ``sections``: (title, rows)
    printed one after the other, in the same units and widths (a capture each); ``more``:
    how to see the columns a view leaves out when narrow."""
    if fmt == "csv":
        return delimited(table, integers)
    if fmt == "json":
        names = list(table)
        rows = _rows(table, integers)
        lines = (json.dumps(dict(zip(names, row)), allow_nan=False) for row in rows)
        return "[" + ",\n ".join(lines) + "]\n"
    return human(table, units or {}, shown, width or terminal_width(), headings=headings,
                 sections=sections, more=more)


def delimited(table: dict, integers: frozenset = frozenset()) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(table))
    writer.writerows([["" if v is None else v for v in row] for row in _rows(table, integers)])
    return buf.getvalue()


def path_shown(path: str | os.PathLike) -> str:
    """A capture's path as a heading shows it: relative to the working directory when the file
    is under it (what the user typed, usually), else as given -- so a heading fits the width;
    one printable line whatever bytes the name has (errors.shown)."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:          # another drive (Windows)
        return printable(text)
    return printable(relative if not relative.startswith(os.pardir)
                     and len(relative) < len(text) else text)


def terminal_width() -> int:
    """The terminal's width, or DEFAULT_WIDTH when output goes to a pipe or a file."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def human(table: dict, units: dict, shown: Sequence[Shown] | None, width: int, *,
          headings: Mapping[str, str] | None = None,
          sections: Sequence[tuple[str, np.ndarray]] | None = None,
          complete: bool | None = None, more: str = "--all shows them") -> str:
    """The human table (module docstring).  ``complete`` (default: without ``shown``): every
    column asked for, none left out (one without a value is shown empty); else ``shown`` is a
    view, whose minor columns, and columns with no value at all, may be left out."""
    complete = not shown if complete is None else complete
    columns = formatted(table, units, shown, headings=headings, complete=complete)
    left_out = [] if complete else _left_out(columns, width)
    if left_out:         # the units and decimals of what is shown, not of what is left out
        columns = formatted(table, units, [c.shown for c in columns if c not in left_out],
                            headings=headings, complete=False)
    text = _layout(columns, width, sections)
    if left_out:
        names = ", ".join(dict.fromkeys(c.heading.replace("\n", " ") for c in left_out))
        said = f"(left out to fit {width} columns: {names}; {more})"
        if len(said) > width:
            n = len(left_out)
            said = textwrap.fill(f"({n} minor column{'s' if n > 1 else ''} left out to fit "
                                 f"{width} columns; {more})", width)
        text += said + "\n"
    return text


def every_column(table: dict, view: Sequence[Shown] | None = None) -> list[Shown]:
    """Every column of the table in its order (``--all``), each under the heading ``view``
    gives it where the view shows that column itself, none of them minor."""
    own = {s.column: s for s in view or () if s.column and s.join is None and not s.endpoints}
    return [dataclasses.replace(own[name], minor=False) if name in own else
            Shown(None, name, wrap=_long_text(table[name])) for name in table]


# -- headings -------------------------------------------------------------------------------------

UNIT_SUFFIXES = ("_per_s", "_bytes", "_bps", "_pct", "_ms", "_ns", "_s")
ARROWS = {"_a_to_b": " A→B", "_b_to_a": " B→A"}


def heading(name: str, *, keep_unit: bool = False) -> str:
    """The heading of a column that neither a view nor the column names: its name with the
    unit suffix dropped (the unit is written under it), ``_a_to_b`` / ``_b_to_a`` as
    ``A→B`` / ``B→A``, underscores as spaces: ``peak_payload_bps_a_to_b`` -> ``peak payload
    A→B``.  ``keep_unit``: for two columns that differ only by their unit."""
    arrow = ""
    for suffix, text in ARROWS.items():
        if name.endswith(suffix):
            name, arrow = name[:-len(suffix)], text
    if not keep_unit:
        for suffix in UNIT_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[:-len(suffix)]
                break
    return name.replace("_", " ") + arrow


def headings_of(shown: Sequence[Shown], declared: Mapping[str, str]) -> list[str]:
    """Each shown column's heading (module docstring): a derived one that another column of
    the table also has keeps its unit word (``payload bytes A→B``, ``payload bps A→B``)."""
    out = [s.heading or declared.get(s.column or "") or heading(s.column or "") for s in shown]
    derived = [not s.heading and not declared.get(s.column or "") for s in shown]
    return [heading(s.column or "", keep_unit=True) if d and out.count(h) > 1 else h
            for s, h, d in zip(shown, out, derived)]


# -- one column -----------------------------------------------------------------------------------

@dataclass
class Formatted:
    """A column as text: its heading (lines split by ``\\n``), the unit under it, a cell a
    row; ``numeric`` columns are right-aligned."""
    heading: str
    unit: str
    cells: list[str]
    numeric: bool
    wrap: bool = False
    minor: bool = False
    whole: bool = False   # an identity (endpoints): wrapped only when nothing else can give
    key: bool = False
    shown: Shown | None = None


COUNTS = ("packets", "segments")   # units a heading already says: not written under it
_PREFIXED = {"bit/s": ("bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"),
             "bytes": ("B", "kB", "MB", "GB", "TB"),
             "bytes/s": ("B/s", "kB/s", "MB/s", "GB/s", "TB/s")}
# a declared unit -> (the unit family it is shown in, the factor to that unit)
_FAMILY = {"fraction": ("%", 100.0), "%": ("%", 1.0), "ns": ("ms", 1e-6),
           "ms/byte": ("µs/B", 1e3)}    # a delay model's slope: microseconds a byte


@dataclass
class _Scale:
    """How a unit family is shown: in ``unit``, its values divided by ``divisor``, with
    ``decimals`` (None: whole numbers as integers)."""
    unit: str
    divisor: float
    decimals: int | None


def formatted(table: dict, units: Mapping[str, str], shown: Sequence[Shown] | None, *,
              headings: Mapping[str, str] | None = None,
              complete: bool | None = None) -> list[Formatted]:
    """The shown columns as text (every column without ``shown``), each unit family in one
    unit and one number of decimals over all of them (module docstring).  ``complete``: keep
    a column that has no value (default: when every column is shown)."""
    complete = not shown if complete is None else complete
    shown = shown or every_column(table)
    shown = [s for s in shown if s.endpoints or s.join is not None or s.column in table]
    titles = headings_of(shown, headings or {})
    measured = {s.column: _base(table[s.column], units.get(s.column)) for s in shown
                if s.column is not None and s.join is None and not s.endpoints
                and _is_number(table[s.column])}
    scales = _scales(measured)
    n = length(table)
    out = []
    for s, title in zip(shown, titles):
        if s.endpoints:
            cells = [f"{endpoint(table['address_a'][i], table['port_a'][i])} → "
                     f"{endpoint(table['address_b'][i], table['port_b'][i])}" for i in range(n)]
            column = Formatted(title, "", cells, numeric=False, whole=True)
        elif s.join is not None:
            cells = [s.join.format(**{k: _plain(table[k][i]) for k in table}) for i in range(n)]
            column = Formatted(title, "", cells, numeric=False, whole=True)
        elif s.column in measured:
            family, values = measured[s.column]
            scale = scales[family if family is not None else ("", s.column)]
            if scale.decimals is not None and isinstance(family, str) and family != "s":
                scale = _Scale(scale.unit, scale.divisor, _decimals(
                    np.abs(values[np.isfinite(values)]) / scale.divisor,
                    MAX_PERCENT_DECIMALS if scale.unit == "%" else MAX_DECIMALS))
            column = Formatted(title, scale.unit, _cells(values, scale), numeric=True)
            if n and not complete and not any(column.cells):
                continue                  # nothing to show: not even a heading
        else:
            column = Formatted(title, "", [_text(v) for v in table[s.column]], numeric=False)
        if s.indent is not None:
            column.cells = ["  " * int(level) + cell
                            for level, cell in zip(table[s.indent], column.cells)]
        if s.name_only:
            column.cells = [c.rsplit("/", 1)[-1] for c in column.cells]
        column.wrap, column.minor, column.key, column.shown = s.wrap, s.minor, s.is_key, s
        out.append(column)
    return out


def _is_number(values) -> bool:
    kind = np.asarray(values).dtype.kind
    return kind in "iuf"


def _base(values, unit: str | None) -> tuple[str | None, np.ndarray]:
    """(the column's unit family, its values in that family's unit, as floats)."""
    v = np.asarray(values).astype(np.float64)
    if unit in _FAMILY:
        family, factor = _FAMILY[unit]
        return family, v * factor
    return unit, v


def _scales(measured: dict) -> dict:
    """A :class:`_Scale` for each unit family among ``measured`` (column -> (family, values)),
    and for each column without a unit (key ("", column)): its own."""
    families: dict = {}
    for name, (family, values) in measured.items():
        families.setdefault(family if family is not None else ("", name), []).append(values)
    scales = {}
    for family, arrays in families.items():
        v = np.abs(np.concatenate(arrays))
        v = v[np.isfinite(v)]
        largest = float(v.max()) if len(v) else 0.0
        shown_unit, divisor = family if isinstance(family, str) else "", 1.0
        if family in COUNTS:
            shown_unit = ""
        if family in _PREFIXED:
            step = 0
            if family == "bytes" and largest >= 10_000:   # sizes keep four digits: 1400 B
                step = min(int(math.log10(largest / 10) // 3), 4)
            elif family != "bytes" and largest >= 1000:
                step = min(int(math.log10(largest) // 3), 4)
            shown_unit, divisor = _PREFIXED[family][step], 1000.0 ** step
            if step == 0:                                  # no fraction of a byte or a bit
                scales[family] = _Scale(shown_unit, 1.0, None)
                continue
        if family == "s":
            scales[family] = _Scale("s", 1.0, 3)          # times to the millisecond
            continue
        ratio = not isinstance(family, str)
        scales[family] = _Scale(shown_unit, divisor, _decimals(
            v / divisor, MAX_RATIO_DECIMALS if ratio else MAX_DECIMALS, near_one=ratio))
    return scales


def _decimals(v: np.ndarray, cap: int, near_one: bool = False) -> int | None:
    """Decimals for one column's values (present, not negative): None when all are whole
    numbers; else as many as the largest reads best with (0.123, 1.23, 12.34, 123.4, 1234)
    and at least two significant digits for the smallest non-zero one (0.357 beside 9.93:
    0.36, 9.93); ``near_one``: a ratio just under 1 (0.9918) shows how far from 1 it is.  At
    most ``cap``."""
    if not len(v) or np.all(v == np.round(v)):
        return None
    largest = float(v.max())
    nonzero = v[v > 0]
    reads = 3 if largest < 1 else 2 if largest < 100 else 1 if largest < 1000 else 0
    decimals = max(reads, 1 - math.floor(math.log10(nonzero.min())), 0)
    close = v[(v >= 0.99) & (v < 1)]
    if near_one and len(close):
        decimals = max(decimals, 1 - math.floor(math.log10(1 - close.max())))
    return min(decimals, cap)


def _cells(values: np.ndarray, scale: _Scale) -> list[str]:
    v = values / scale.divisor
    if scale.decimals is None:
        return ["" if x != x else str(int(x)) if abs(x) != math.inf else str(x)
                for x in np.rint(v).tolist()]
    d, negative_zero = scale.decimals, f"-{0:.{scale.decimals}f}"
    out = ["" if x != x else f"{x:.{d}f}" for x in v.tolist()]
    return [text[1:] if text == negative_zero else text for text in out]    # no -0.00


# -- the table ------------------------------------------------------------------------------------

def _left_out(columns: list[Formatted], width: int) -> list[Formatted]:
    """The minor columns a view leaves out, from the right, while the table is too wide with
    long headings on two lines and free text wrapped to a comfortable width."""
    widths = [max([_heading_width(c, _two_lines(c.heading, _cells_width(c))), len(c.unit)]
                  + ([min(_cells_width(c), WRAP_COMFORT)] if c.wrap and not c.whole
                     else [_cells_width(c)])) for c in columns]
    kept = list(range(len(columns)))
    while sum(widths[i] for i in kept) + GAP * (len(kept) - 1) > width:
        minor = [i for i in kept if columns[i].minor]
        if not minor:
            break
        kept.remove(minor[-1])
    return [c for i, c in enumerate(columns) if i not in kept]


def _layout(columns: list[Formatted], width: int,
            sections: Sequence[tuple[str, np.ndarray]] | None) -> str:
    """Columns side by side, headings (and units) on top.  While the table is too wide: long
    headings split onto two lines, free text wrapped to a comfortable width, endpoints split
    over two lines; then column blocks, the key columns repeated in each."""
    if not columns:
        return ""
    widths = [_natural(c) for c in columns]

    def over() -> int:
        return sum(widths) + GAP * (len(widths) - 1) - width

    def squeeze(floor: int, whole: bool) -> None:  # wrap text, the widest first, to floor
        for i in sorted((i for i, c in enumerate(columns) if c.wrap and c.whole == whole),
                        key=lambda i: -widths[i]):
            cut = min(over(), widths[i] - max(floor, _heading_width(columns[i])))
            if cut > 0:
                widths[i] -= cut
    if over() > 0:
        for i, c in enumerate(columns):
            c.heading = _two_lines(c.heading, _cells_width(c))
            widths[i] = _natural(c)
        squeeze(WRAP_COMFORT, whole=False)      # free text first, to a comfortable width
    if over() > 0:
        squeeze(MIN_WRAP, whole=True)           # endpoints onto two lines
    narrow = sum(max(MIN_WRAP, _heading_width(c)) if c.wrap and not c.whole else w
                 for c, w in zip(columns, widths)) + GAP * (len(widths) - 1)
    if over() > 0 and narrow <= width:
        squeeze(MIN_WRAP, whole=False)          # text narrower, when that spares a block
    blocks = _blocks(columns, widths, width)
    rows = [(None, np.arange(len(columns[0].cells)))] if sections is None else sections
    parts = []
    for title, at in rows:
        lines = [f"{printable(title)}:"] if title is not None else []
        for b, block in enumerate(blocks):
            lines += ([""] if b else []) + _block(columns, widths, block, at)
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _natural(c: Formatted) -> int:
    return max(_heading_width(c), len(c.unit), _cells_width(c))


def _cells_width(c: Formatted) -> int:
    return max(len(c.unit), max(map(len, c.cells), default=0))


def _heading_width(c: Formatted, heading: str | None = None) -> int:
    return max(len(line) for line in (heading or c.heading).split("\n"))


def _two_lines(heading: str, under: int) -> str:
    """A one-line heading wider than what is under it, on two lines split at the space that
    makes it narrowest (``peak payload\\nA→B``); else as it is."""
    if "\n" in heading or len(heading) <= under:
        return heading
    spaces = [i for i, ch in enumerate(heading) if ch == " "]
    if not spaces:
        return heading
    at = min(spaces, key=lambda i: max(i, len(heading) - i - 1))
    return heading[:at] + "\n" + heading[at + 1:]


def _blocks(columns: list[Formatted], widths: list[int], width: int) -> list[list[int]]:
    """The columns in blocks that fit ``width``, each led by the key columns (in table order);
    a column too wide for a block of its own is wrapped to fit one."""
    keys = [i for i, c in enumerate(columns) if c.key]
    rest = [i for i, c in enumerate(columns) if not c.key]
    if sum(widths) + GAP * (len(widths) - 1) <= width or not rest or not keys and len(rest) == 1:
        return [list(range(len(columns)))]
    room = width - sum(widths[i] + GAP for i in keys)
    for i in sorted((i for i in keys if columns[i].wrap), key=lambda i: -widths[i]):
        if room >= width // 2:
            break                                # keys wrapped narrower to leave room
        cut = min(width // 2 - room, widths[i] - max(MIN_WRAP, _heading_width(columns[i])))
        if cut > 0:
            widths[i] -= cut
            room += cut
    if room < MIN_WRAP:                          # the keys alone fill the line: not repeated
        keys, rest, room = [], list(range(len(columns))), width
    blocks, current, used = [], [], 0
    for i in rest:
        need = widths[i] + (GAP if current else 0)
        if current and used + need > room:
            blocks.append(current)
            current, used, need = [], 0, widths[i]
        if widths[i] > room:                     # too wide even alone: wrapped to fit
            columns[i].wrap = True
            widths[i] = need = max(room, _heading_width(columns[i]), len(columns[i].unit))
        current.append(i)
        used += need
    blocks.append(current)
    natural = [_natural(c) for c in columns]
    for block in blocks:                         # wrapped text takes what its block has left
        spare = room - sum(widths[i] for i in block) - GAP * (len(block) - 1)
        for i in (i for i in block if columns[i].wrap):
            grow = min(spare, natural[i] - widths[i])
            if grow > 0:
                widths[i] += grow
                spare -= grow
    return [sorted(keys + block) for block in blocks]


def _block(columns: list[Formatted], widths: list[int], block: list[int],
           rows: np.ndarray) -> list[str]:
    """One column block's lines for some rows: headings (a two-line heading's last line beside
    the others), units, cells."""
    cols, w = [columns[i] for i in block], [widths[i] for i in block]
    heads = [c.heading.split("\n") for c in cols]
    depth = max(len(h) for h in heads)
    lines = [_line([h[k - depth + len(h)] if k >= depth - len(h) else "" for h in heads], w, cols)
             for k in range(depth)]
    if any(c.unit for c in cols):
        lines.append(_line([c.unit for c in cols], w, cols))
    for r in rows:
        parts = [textwrap.wrap(c.cells[r], wi) or [""] if c.wrap else [c.cells[r]]
                 for c, wi in zip(cols, w)]
        for k in range(max(len(p) for p in parts)):
            lines.append(_line([p[k] if k < len(p) else "" for p in parts], w, cols))
    return lines


def _line(cells: list[str], widths: list[int], columns: list[Formatted]) -> str:
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
    """A cell for people: one printable line (a capture's name with a newline in it, too)."""
    value = _value(v)
    return "" if value is None else "yes" if value is True else "no" if value is False else \
        printable(value)
