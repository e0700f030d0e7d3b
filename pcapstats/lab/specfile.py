"""Reading the lab's TOML files (matrix specs, topology files) and saying what is wrong in one.

Every lab file is read through :func:`read`, and every value found wrong is said by
:func:`bad_field`: one line naming the file, the field (and its line) and what is expected.

    doc, text = read("nets/seed000.toml", "topology file")
    raise bad_field(path, text, "link[2].rate", "a rate such as 30mbit", "fast")
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pcapstats.errors import UsageError
from pcapstats.paths import read_side_file


def read(path: str | Path, what: str) -> tuple[dict, str]:
    """The file's TOML as a dict and its text; UsageError (naming the file) if it is missing,
    not a regular readable file, larger than a side file may be, or not TOML."""
    text = read_side_file(path, what)
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"not valid TOML: {e}", path=str(path)) from None


def line_of(text: str, field: str) -> int | None:
    """The first line (1-based) where the field's last name is set, None if it is not."""
    key = field.rsplit(".", 1)[-1].split("[", 1)[0]
    pattern = re.compile(rf'^[ \t]*"?{re.escape(key)}"?[ \t]*=', re.M)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def bad_field(path: str | Path, text: str, field: str, expected: str, value=None, *,
              line: int | None = None) -> UsageError:
    """The one-line error for a wrong value: ``FIELD: expected EXPECTED, not VALUE (FILE,
    line N)``; without a value, ``FIELD: EXPECTED``."""
    line = line if line is not None else line_of(text, field)
    where = f"{path}, line {line}" if line else str(path)
    said = f"{field}: expected {expected}, not {value!r}" if value is not None else \
        f"{field}: {expected}"
    return UsageError(said, path=where)
