"""Labels: what each capture of a study was (cc reno, loss 10%, trial 3, distance far).

A study compares captures by their labels, so every capture gets them from up to three
sources, later ones winning:

1. its **lab sidecar** (pcapstats.sidecar): the scenario's ``cc``, ``loss``, ``delay``,
   ``rate``, ``pairs``, ``trial`` and ``tool``, as the run was asked (``"10%"``, ``"20ms"``;
   several pairs' ccs joined by ``+``);
2. a **study file** (``--study FILE``): CSV with a ``file`` column and one column a label, or
   TOML with ``[[capture]]`` tables (``file = "close-*.pcap"``, ``distance = "close"``) or one
   table a file (``["close-1.pcap"]``).  ``file`` is a glob matched against the capture's file
   name, or, when it holds a ``/``, against its path taken from the study file's directory;
3. **patterns** on the path as given (``--label 'loss(?P<loss_pct>\\d+)pct'``): each named group
   that matches is a label.

Labels are given as text; in a table a label that reads as numbers is typed
(:func:`label_columns`, its text read by pcapstats.units, the one parser of what people type):
the sidecar's ``loss`` is a fraction column ``loss`` (0.1), ``delay`` seconds ``delay_s``,
``rate`` bit/s ``rate_bps``, each with the text as given beside it (``loss_label``: "10%"); any
other label whose values all read as one kind of quantity the same way (``NAME``, ``NAME_s``,
``NAME_bps`` and ``NAME_label``), one whose values are all bare numbers a number column of its
own name (``trial``: 3), the others text.  So a label goes on a numeric axis and sorts as a
number in pandas, and the human table still shows "10%".

They sort by their number where they have one, units understood (``0``, ``1``, ``10``, ``30``,
not the file names' ``0, 10, 1, 30``; ``500us`` before ``20ms``), else by a leading number
(``2m`` before ``10m``), then words in the order the study file or a pattern's alternation
gives them (``close``, ``medium``, ``far`` stay in that order), other words alphabetically,
then empty values.
"""

from __future__ import annotations

import csv
import fnmatch
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import Note, PcapstatsWarning, UsageError
from ..paths import read_side_file
from ..sidecar import SidecarError, load_sidecar, sidecar_for
from ..units import parse_loss, parse_rate, parse_time, quantity

SIDECAR_LABELS = ("cc", "loss", "delay", "rate", "pairs", "trial", "tool")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LEADING = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+))")
# a quantity's unit -> the suffix of its column's name (the vocabulary's units in names)
SUFFIX = {"fraction": "", "s": "_s", "bit/s": "_bps"}
# the sidecar's quantities: always typed, each read by its own parser (and its unit)
SIDECAR_QUANTITIES = {"loss": (parse_loss, "fraction", "10% or 0.1"),
                      "delay": (parse_time, "s", "20ms"),
                      "rate": (parse_rate, "bit/s", "30mbit")}


@dataclass(frozen=True)
class StudyRow:
    """One line of a study file: a glob for the captures it labels, and the labels."""
    pattern: str
    labels: tuple[tuple[str, str], ...]
    base: str                           # the study file's directory

    def matches(self, capture: str) -> bool:
        if "/" in self.pattern:
            return fnmatch.fnmatch(os.path.abspath(capture),
                                   os.path.abspath(os.path.join(self.base, self.pattern)))
        return fnmatch.fnmatch(os.path.basename(capture), self.pattern)


@dataclass
class Labelling:
    """How a study's captures get their labels (the module docstring's three sources)."""
    rows: tuple[StudyRow, ...] = ()
    patterns: tuple[re.Pattern, ...] = ()
    sidecar: bool = True
    _sidecars: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, study=None, patterns=(), sidecar: bool = True) -> "Labelling":
        """From a study file's path (or None) and pattern texts; one UsageError line for a
        file or pattern that cannot be used."""
        if isinstance(patterns, str):
            patterns = [patterns]
        return cls(read_study(study) if study is not None else (),
                   tuple(_pattern(p) for p in patterns), sidecar)

    def labels(self, capture) -> dict[str, str]:
        """The labels of one capture (a path, or anything with a ``path``)."""
        path = str(getattr(capture, "path", capture))
        out = self._from_sidecar(path) if self.sidecar else {}
        for row in self.rows:
            if row.matches(path):
                out.update(row.labels)
        for pattern in self.patterns:
            m = pattern.search(path)
            if m:
                out.update({k: v for k, v in m.groupdict().items() if v is not None})
        return out

    def unmatched(self, captures) -> list[str]:
        """The study file's patterns that label none of the captures."""
        paths = [str(getattr(c, "path", c)) for c in captures]
        return [r.pattern for r in self.rows if not any(r.matches(p) for p in paths)]

    def word_order(self) -> list[str]:
        """Label values in the order the study file gives them (words sort in this order)."""
        return [v for row in self.rows for _, v in row.labels]

    def _from_sidecar(self, path: str) -> dict[str, str]:
        where = sidecar_for(path)
        if where not in self._sidecars:       # x.sender.pcap and x.receiver.pcap share one
            self._sidecars[where] = _sidecar_labels(where)
        return dict(self._sidecars[where])


def sidecar_labels(capture) -> dict[str, str]:
    """The labels the lab sidecar beside a capture gives it (none without a sidecar)."""
    return _sidecar_labels(sidecar_for(str(getattr(capture, "path", capture))))


def _sidecar_labels(where: Path) -> dict[str, str]:
    if not os.path.exists(where):        # False for a name too long, never an OSError
        return {}
    try:
        doc = load_sidecar(where)
    except SidecarError as e:
        warnings.warn(PcapstatsWarning(f"{e}; its labels are left out"), stacklevel=2)
        return {}
    scenario = doc.get("scenario") or {}
    out = {}
    for name in SIDECAR_LABELS:
        value = scenario.get(name)
        if name == "cc" and not value:          # the host's default: the flows say which
            value = _flows_cc(doc)
        if isinstance(value, (list, tuple)):
            value = "+".join(str(v) for v in value)
        if value is not None and value != "":
            out[name] = str(value)
    return out


def _flows_cc(doc: dict) -> list[str]:
    """The congestion controls the run's TCP flows used (read back from their sockets), each
    once, in flow order: the cc label of a run that left it to the host's default."""
    return list(dict.fromkeys(f["cc"] for f in doc.get("flows") or []
                              if f.get("proto") == "tcp" and f.get("cc")))


def read_study(path) -> tuple[StudyRow, ...]:
    """A study file (CSV or TOML, by its extension) as rows."""
    path = Path(path)
    if path.suffix.lower() not in (".toml", ".csv"):
        raise UsageError("a study file is .csv or .toml", path=str(path),
                         hint="CSV: a header line with file and one column a label")
    text = read_side_file(path, "study file")          # a regular file, a few MB at most
    toml = path.suffix.lower() == ".toml"
    entries = _toml_entries(text, path) if toml else _csv_entries(text, path)
    base = str(path.parent)
    rows = []
    for n, entry in entries:
        file = entry.pop("file", None)
        if not file:
            raise UsageError(f"study file entry {n} has no file", path=str(path),
                             hint="each entry names its capture(s): file = \"x.pcap\" "
                                  "(a glob such as trial-*.pcap is fine)")
        labels = []
        for name, value in entry.items():
            check_name(name, f"study file {path.name}")
            if value is not None and str(value) != "":
                labels.append((name, _text(value)))
        rows.append(StudyRow(str(file), tuple(labels), base))
    return tuple(rows)


def _csv_entries(text: str, path: Path) -> list[tuple[int, dict]]:
    reader = csv.DictReader(text.splitlines(), skipinitialspace=True)
    if not reader.fieldnames or "file" not in [f.strip() for f in reader.fieldnames]:
        raise UsageError("the study file's first line must name its columns, file first",
                         path=str(path), hint="file,distance,trial")
    out = []
    for n, row in enumerate(reader, start=2):
        if None in row:
            raise UsageError(f"line {n} has more fields than the header", path=str(path))
        out.append((n, {k.strip(): (v or "").strip() for k, v in row.items()}))
    return out


def _toml_entries(text: str, path: Path) -> list[tuple[int, dict]]:
    import tomllib
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"not TOML: {e}", path=str(path)) from None
    entries = doc.pop("capture", [])
    if not isinstance(entries, list):
        raise UsageError("capture must be an array of tables: [[capture]]", path=str(path))
    out = [(n, dict(e)) for n, e in enumerate(entries, start=1) if isinstance(e, dict)]
    for file, labels in doc.items():        # ["x.pcap"] tables
        if not isinstance(labels, dict):
            raise UsageError(f"{file} = ... at the top: labels go in a table, "
                             f"[\"{file}\"] or [[capture]]", path=str(path))
        out.append((len(out) + 1, {"file": file, **labels}))
    return out


def _text(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _pattern(text: str) -> re.Pattern:
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise UsageError(f"bad --label pattern {text!r}: {e}",
                         hint="a Python regular expression with named groups, e.g. "
                              "'loss(?P<loss_pct>\\d+)pct'") from None
    if not pattern.groupindex:
        raise UsageError(f"--label pattern {text!r} names no label",
                         hint="name each label with a group: 'loss(?P<loss_pct>\\d+)pct', "
                              "'(?P<distance>close|medium|far)'")
    for name in pattern.groupindex:
        check_name(name, "--label")
    return pattern


def check_name(name: str, where: str) -> None:
    if not NAME.match(name):
        raise UsageError(f"{where}: {name!r} cannot be a label name",
                         hint="letters, digits and _, not starting with a digit")


def parse_names(value, what: str) -> list[str]:
    """``"cc,loss"`` or ``["cc", "loss"]`` -> ["cc", "loss"] (None -> [])."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(v).strip() for v in items if str(v).strip()]
    if len(set(names)) != len(names):
        raise UsageError(f"{what} names a label twice: {','.join(names)}")
    return names


def sort_key(value: str, words: dict[str, int]):
    """A label value's place: numbers (units understood: pcapstats.units.quantity; else a
    leading number, ``2m`` before ``10m``) first, then words by ``words`` (their place in the
    study file or a pattern), then other words alphabetically, then empty values."""
    if value == "":
        return (2, 0.0, "")
    read = quantity(value)
    if read is None:
        m = _LEADING.match(value)
        read = (float(m.group(1)), "") if m else None
    if read is not None and math.isfinite(read[0]):
        return (0, read[0], value)
    return (1, float(words.get(value, len(words))), value)


@dataclass(frozen=True)
class LabelColumns:
    """How one label is put in a table (the module docstring): ``value``, the name of its
    number column (None for a text label), in ``unit``, read by ``parse``; ``text``, the name
    of its text column (the label's own name for a text label; ``NAME_label`` beside a
    number read with a unit; None for bare numbers, whose number says it all)."""
    label: str
    value: str | None
    unit: str | None
    text: str | None
    parse: Callable[[str], float] | None = None
    whole: bool = False                 # bare numbers, every capture with a whole one: int64

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.value, self.text) if n is not None)

    @property
    def shown(self) -> str:
        """The column a human table shows for the label: its text as given."""
        return self.text or self.value

    def columns(self, texts) -> dict[str, np.ndarray]:
        """The label's columns for these values (one text a row, "" where none)."""
        out = {}
        if self.value is not None:
            numbers = [self.number(t) for t in texts]
            out[self.value] = (np.array(numbers, np.int64) if self.whole
                               else np.array(numbers, np.float64))
        if self.text is not None:
            out[self.text] = np.array(list(texts), object)
        return out

    def number(self, text: str) -> float:
        """One value as a number (NaN where it is empty or does not read)."""
        if text == "":
            return math.nan
        try:
            return float(self.parse(text))
        except (UsageError, ValueError):
            return math.nan

    def unread(self, texts) -> list[str]:
        """The values that do not read as this label's numbers (each once)."""
        if self.value is None:
            return []
        return list(dict.fromkeys(t for t in texts if t != "" and self.number(t) != self.number(t)))


def label_columns(name: str, texts) -> LabelColumns:
    """How the label ``name`` whose values over a study's captures are ``texts`` is typed (the
    module docstring)."""
    if name in SIDECAR_QUANTITIES:
        parse, unit, _ = SIDECAR_QUANTITIES[name]
        return LabelColumns(name, name + SUFFIX[unit], unit, f"{name}_label", parse)
    given = [t for t in texts if t != ""]
    read = [quantity(t) for t in given]
    kinds = {r[1] for r in read if r is not None}
    if not given or None in read or len(kinds) != 1:
        return LabelColumns(name, None, None, name)
    unit = kinds.pop()
    if unit == "":
        whole = len(given) == len(list(texts)) and all(r[0].is_integer() for r in read)
        return LabelColumns(name, name, None, None, lambda t: quantity(t)[0], whole)
    return LabelColumns(name, name + SUFFIX[unit], unit, f"{name}_label",
                        lambda t: quantity(t)[0])


def unread_note(columns: LabelColumns, texts) -> Note | None:
    """The note said when some of a typed label's values do not read as its numbers."""
    unread = columns.unread(texts)
    if not unread:
        return None
    example = SIDECAR_QUANTITIES.get(columns.label, (None, None, "a number"))[2]
    shown = ", ".join(repr(t) for t in unread[:3]) + (" ..." if len(unread) > 3 else "")
    return Note(f"{shown} {'does' if len(unread) == 1 else 'do'} not read as one value",
                about=f"label {columns.label}",
                detail=f"a value like {example} reads; {columns.value} is empty there, "
                       f"{columns.text} keeps the text")


def word_places(words) -> dict[str, int]:
    """Each word's first place in ``words`` (the study file's and the patterns' order)."""
    places: dict[str, int] = {}
    for w in words:
        places.setdefault(w, len(places))
    return places


def name_key(path: str) -> tuple:
    """A file name's place with its numbers read as numbers: loss1pct, loss10pct, loss30pct."""
    parts = re.split(r"(\d+)", os.path.basename(str(path)))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts), str(path)
