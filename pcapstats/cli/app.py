"""The `pcapstats` app: the one-line error policy and what every command shares.

The commands themselves live one group a module beside this one (``throughput.py``, ...);
``pcapstats.cli`` imports them so that they register on :data:`app`.

Every failure the user can cause ends as ONE line on stderr, ``pcapstats: error: ...``, and
exit status 2 (1 when the command ran but found nothing to report); warnings are one line each,
``pcapstats: warning: ...``.  A traceback is never shown unless PCAPSTATS_DEBUG=1.
"""

from __future__ import annotations

import os
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from ..errors import PcapstatsError, PcapstatsWarning, UsageError

EXIT_NOTHING, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED = 1, 2, 3, 130

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Wireshark's numbers for captures of network transfers, from one command.")


class Fmt(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


class Proto(str, Enum):
    tcp = "tcp"
    udp = "udp"


class Engine(str, Enum):
    fast = "fast"
    tshark = "tshark"


class Kernel(str, Enum):
    auto = "auto"
    c = "c"
    numpy = "numpy"


_said: set[str] = set()  # kinds of line said during this run of main()


def _say(kind: str, text: str) -> None:
    _said.add(kind)
    print(f"pcapstats: {kind}: {text}", file=sys.stderr)


class Captures:
    """The captures of one command: ``work(path, progress)`` run on each file in turn (a
    progress bar when it is worth it), each warning and error said in one line as it comes.

    Iterating gives (path, result) for the files that were read; ``failed`` counts the others,
    so a command can write what it has and still exit 2.
    """

    def __init__(self, files, work):
        self.files, self.work, self.failed = files, work, 0

    def __iter__(self):
        for path, texts, result in _each_capture(self.files, self.work):
            for text in texts:
                _say("warning", text)
            if isinstance(result, PcapstatsError):
                _say("error", str(result))
                self.failed += 1
                continue
            yield path, result


def stack(tables: list) -> dict:
    """Tables with the same columns, one after the other."""
    import numpy as np
    return {name: np.concatenate([t[name] for t in tables]) for name in tables[0]}


def with_capture_column(table: dict, path) -> dict:
    """The table with a first column ``capture`` naming its file (for several files at once)."""
    import numpy as np
    rows = len(next(iter(table.values()))) if table else 0
    return {"capture": np.full(rows, str(path), dtype=object), **table}


def _each_capture(files, work):
    """Run ``work(path, progress)`` on each file, with a progress bar when it is worth it;
    yield (path, warning texts, result or PcapstatsError)."""
    total = sum(_size(f) for f in files)
    show = sys.stderr.isatty() and (len(files) > 1 or total > 200e6)
    progress = None
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
        progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                            transient=True, console=_stderr_console())
        task = progress.add_task("reading", total=max(total, 1))
        progress.start()
    try:
        done = 0
        for path in files:
            size = _size(path)
            moved = _advance(progress, task, path, done, size) if progress else None
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PcapstatsWarning)
                try:
                    result = work(path, moved)
                except PcapstatsError as e:
                    result = e
            texts = [str(w.message) for w in caught if issubclass(w.category, PcapstatsWarning)]
            done += size
            if progress:
                progress.update(task, completed=done)
            yield path, texts, result
    finally:
        if progress:
            progress.stop()


def _advance(progress, task, path: Path, done: int, size: int):
    """A reader callback that moves the bar across this file's share of the total."""
    progress.update(task, description=f"reading {path.name}")

    def moved(bytes_done, bytes_total):
        progress.update(task, completed=done + size * bytes_done / max(bytes_total, 1))
    return moved


_TABLE_EXTENSIONS = {".csv": "csv", ".json": "json"}




def output_kind(output: Optional[Path]) -> Optional[str]:
    """"plot", "csv", "json" by the -o file's extension; None without -o."""
    if output is None:
        return None
    from ..plots import EXTENSIONS
    suffix = output.suffix.lower()
    if suffix in EXTENSIONS:
        return "plot"
    if suffix in _TABLE_EXTENSIONS:
        return _TABLE_EXTENSIONS[suffix]
    raise UsageError(f"cannot write {suffix or 'a file without extension'!r} output",
                     path=str(output), hint="use .png or .svg for a plot, .csv or .json for the table")


def _stderr_console():
    from rich.console import Console
    return Console(stderr=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _write(text: str, output: Optional[Path]) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as e:
        raise PcapstatsError(f"cannot write output: {e.strerror}", path=str(output),
                             hint="check the directory exists and is writable") from None


def main(argv: Optional[list] = None) -> int:
    """Console entry point: runs the app and turns every failure into one line and an exit code."""
    try:
        _said.clear()
        code = app(args=argv, standalone_mode=False, prog_name="pcapstats")
        if code == EXIT_INTERRUPTED and "error" not in _said:
            _say("error", "interrupted")  # typer turns Ctrl-C in a command into a silent 130
        return code if isinstance(code, int) else 0
    except PcapstatsError as e:
        _say("error", str(e))
        return EXIT_ERROR
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        _say("error", "interrupted")
        return EXIT_INTERRUPTED
    except typer.TyperException as e:  # usage errors: unknown option, bad value, missing file name
        text = e.format_message() if hasattr(e, "format_message") else str(e)
        _say("error", f"{text} (see `pcapstats --help`)")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say("error", "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug of ours: still one line, the traceback only on request
        if os.environ.get("PCAPSTATS_DEBUG"):
            raise
        _say("error", f"internal error: {type(e).__name__}: {e}. Please report it with the "
                      "capture; PCAPSTATS_DEBUG=1 shows the traceback")
        return EXIT_INTERNAL

