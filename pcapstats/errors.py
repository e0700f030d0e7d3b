"""One family of exceptions and warnings, each able to say what went wrong, where, and what to do.

    PcapstatsError                 anything pcapstats refuses to do
    ├── CaptureOpenError           the path is missing, a directory, or unreadable
    ├── CaptureFormatError         the bytes are not a capture we can read (empty, unknown magic)
    │   └── CorruptCaptureError    a record or block that cannot be right (absurd length,
    │                              pcapng trailer disagreeing with its header, ...): has an offset
    ├── EngineError                the tshark engine is missing or failed
    ├── UsageError                 a request that cannot be met (no such stream, bad interval)
    ├── NothingToReport            the capture was read but holds nothing the analysis looks
    │                              for (no TCP for retrans, no echoes for ping): the message
    │                              says what was looked for and what the capture holds
    └── InternalError              a bug of ours met on one capture, kept as that capture's error
                                   so the others still run (the CLI's exit status is then 3)

    PcapstatsWarning               the answer is given, but with a caveat worth a line
    ├── TruncatedCaptureWarning    the file ends mid-record: read up to the last whole record
    ├── SkippedPacketsWarning      packets of a link type we cannot decode were counted, skipped
    └── ClockWarning               the capture's clock steps back, jumps ahead or is absurd

    Note                           not an exception: what an analysis wants said beside its
                                   answer (a result's ``notes``), short, with its long form

The CLI prints ``str(error)`` as its one line and exits non-zero (1 for NothingToReport, 2 for
the others, 3 for InternalError); ``str`` joins the parts as ``what (where). hint``.
"""

from __future__ import annotations

import os


def shown(name) -> str:
    """A path or name as one printable line: each byte that is not UTF-8 as ``\\xNN``, each
    control or invisible character (a newline, a right-to-left mark) as its escape; letters of
    any script and emoji as they are.  So an error, a note or a table cell naming a file is
    one line, in the order it was typed, whatever bytes the file system allowed."""
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    name = str(name)
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else
                   f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else
                   c.encode("unicode_escape").decode("ascii") for c in name)


def _where(path: str | None, offset: int | None, packet: int | None) -> str:
    parts = []
    if path is not None:
        parts.append(shown(path))
    if offset is not None:
        parts.append(f"file offset {offset}")
    if packet is not None:
        parts.append(f"packet {packet}")
    return ", ".join(parts)


class _Located:
    """Mixin: keeps the message parts (what, where, hint) apart so callers and tests can read them,
    and joins them as ``what (where). Hint`` for ``str()``."""

    def __init__(self, what: str, *, path=None, offset=None, packet=None, hint=None):
        self.what, self.path, self.offset, self.packet, self.hint = what, path, offset, packet, hint
        where = _where(path, offset, packet)
        text = what + (f" ({where})" if where else "")
        if hint:
            text += f". {hint[:1].upper()}{hint[1:]}"
        super().__init__(text)


class PcapstatsError(_Located, Exception):
    pass


class CaptureOpenError(PcapstatsError):
    pass


class CaptureFormatError(PcapstatsError):
    pass


class CorruptCaptureError(CaptureFormatError):
    pass


class EngineError(PcapstatsError):
    pass


class UsageError(PcapstatsError):
    pass


class NothingToReport(PcapstatsError):
    pass


class InternalError(PcapstatsError):
    pass


class PcapstatsWarning(_Located, UserWarning):
    pass


class TruncatedCaptureWarning(PcapstatsWarning):
    pass


class SkippedPacketsWarning(PcapstatsWarning):
    pass


class ClockWarning(PcapstatsWarning):
    pass


class Note(str):
    """A sentence an analysis wants said beside its answer (``Result.notes``), still a ``str``:
    its short form, one line (``stream 0: sender-side capture``).  ``about``: what it is about
    (``stream 0``; a capture's path is put before it when results are put together), ``text``:
    what is said of it, so the command line says the same text of several streams or
    captures once; ``detail``: the long form (the evidence, the why), which ``--explain``
    prints and ``pcapstats columns`` gives where it defines a column."""
    about: str = ""
    text: str = ""
    detail: str = ""

    def __new__(cls, text: str, *, about: str = "", detail: str = ""):
        self = super().__new__(cls, f"{about}: {text}" if about else text)
        self.about, self.text, self.detail = about, text, detail
        return self

    @classmethod
    def of(cls, note: str) -> "Note":
        """A note as a Note (a plain string is all text, without detail)."""
        return note if isinstance(note, Note) else cls(str(note))

    def under(self, where: str) -> "Note":
        """The same note, about something of ``where`` (a capture)."""
        return Note(self.text, about=f"{where}: {self.about}" if self.about else where,
                    detail=self.detail)
