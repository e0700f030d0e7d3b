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
3. **patterns** on the path as given (``--label 'loss(?P<loss>\\d+)pct'``): each named group
   that matches is a label.

Labels are text.  They sort by their number where they have one, units understood (``0``,
``1``, ``10``, ``30``, not the file names' ``0, 10, 1, 30``; ``500us`` before ``20ms``), then
words in the order the study file or a pattern's alternation gives them (``close``,
``medium``, ``far`` stay in that order), other words alphabetically, then empty values.
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

from ..errors import PcapstatsWarning, UsageError
from ..sidecar import SidecarError, load_sidecar, sidecar_for

SIDECAR_LABELS = ("cc", "loss", "delay", "rate", "pairs", "trial", "tool")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*([a-zµ%/]*)\s*$", re.I)
_SCALE = {"": 1, "%": 1, "s": 1, "sec": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
          "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bps": 1, "kbps": 1e3,
          "mbps": 1e6, "gbps": 1e9, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "m": 1,
          "km": 1e3, "cm": 1e-2}


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
    if not where.exists():
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
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the study file: {getattr(e, 'strerror', None) or e}",
                         path=str(path)) from None
    if path.suffix.lower() == ".toml":
        entries = _toml_entries(text, path)
    elif path.suffix.lower() == ".csv":
        entries = _csv_entries(text, path)
    else:
        raise UsageError("a study file is .csv or .toml", path=str(path),
                         hint="CSV: a header line with file and one column a label")
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
                              "'loss(?P<loss>\\d+)pct'") from None
    if not pattern.groupindex:
        raise UsageError(f"--label pattern {text!r} names no label",
                         hint="name each label with a group: 'loss(?P<loss>\\d+)pct', "
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
    """A label value's place: numbers (units understood) first, then words by ``words``
    (their place in the study file or a pattern), then other words alphabetically, then
    empty values."""
    if value == "":
        return (2, 0.0, "")
    m = _NUMBER.match(value)
    if m:
        number = float(m.group(1)) * _SCALE.get(m.group(2).lower(), 1.0)
        if math.isfinite(number):
            return (0, number, value)
    return (1, float(words.get(value, len(words))), value)


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
