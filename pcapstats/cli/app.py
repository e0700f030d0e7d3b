"""The `pcapstats` app: the one-line error policy and what every command shares.

The commands themselves live one group a module beside this one (``throughput.py``, ...);
``pcapstats.cli`` imports them so that they register on :data:`app`.  How the analysis
commands read captures and write results: ``output.py``.

The exit status, the same for every command (the README's "Exit status"): 0 when it answered
(a "cannot tell" verdict included, unless ``--strict``); 1 when a capture holds nothing it
looks for, said in ONE line, ``pcapstats: nothing to report: ...``, with what it looked for and
what the capture holds (errors.NothingToReport); 2 for bad input or usage, ONE line,
``pcapstats: error: ...``; 3 for a bug of ours; 130 when interrupted.  Warnings are one line
each, ``pcapstats: warning: ...``.  A traceback is never shown unless PCAPSTATS_DEBUG=1.

An analysis' notes (:func:`say_notes`) are one line each, ``pcapstats: note: ...``, and said
once a run: the same note of several streams or captures is one line that says how many.
Their long form (the evidence, the why) is behind ``--explain`` (:data:`EXPLAIN`), an option
of every command that reads captures.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import textwrap
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .._version import __version__
from ..errors import Note, NothingToReport, PcapstatsError, UsageError, shown
from ..naming import text as name_text
from . import checks, commands, values

EXIT_NOTHING, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED = 1, 2, 3, 130
NOTHING = "nothing to report"          # the kind of the one line of exit status 1

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Wireshark's numbers for captures of network transfers, from one command.")


# What every analysis command takes (one definition, so every help says the same).
CAPTURE_FILES = typer.Argument(..., metavar="CAPTURE", show_default=False,
                               help="Capture files: pcap, pcapng, or either gzipped.")
ALL_COLUMNS = typer.Option(False, "--all", help="Every column in the table, not only the ones "
                                                "read first.")
TABLE_FILE = typer.Option(None, "--output", "-o", metavar="FILE", show_default=False,
                          help="Write the table to this .csv or .json file.")
FIGURE_FILE = typer.Option(None, "--output", "-o", metavar="FILE", show_default=False,
                           help="Write here: .png/.svg figure, .csv/.json table.")
# Where the captures run (pcapstats.pool): every command that takes several files.
JOBS = typer.Option(None, "--jobs", "-j", metavar="N",
                    help="Worker processes (default: the cores).")
SCHEDULER = typer.Option(None, "--scheduler", metavar="ADDRESS", show_default=False,
                         help="Run the captures on this Dask cluster (tcp://HOST:8786); its "
                              "workers need pcapstats and the files at the same paths.")
DASK = typer.Option(False, "--dask", help="Run the captures on a local Dask cluster of -j "
                                          "worker processes (needs pcapstats[dask]).")


_explain = [False]       # --explain was given in this run of main()


def _explaining(value: bool) -> bool:
    _explain[0] = bool(value)
    return value


# Every command that reads captures: what say_notes says of each note.
EXPLAIN = typer.Option(False, "--explain", callback=_explaining,
                       help="Say each note's long form too: the evidence and the why.")


def workers(jobs: Optional[int], scheduler: Optional[str], dask: bool) -> dict:
    """-j, --scheduler and --dask as pcapstats.pool.outcomes' ``jobs`` and ``scheduler``."""
    from ..pool import LOCAL  # lazy: the pool's reading machinery loads numpy; --help does not
    if dask and scheduler:
        raise UsageError("--dask starts a local cluster, --scheduler names one: give one of them")
    return {"jobs": jobs, "scheduler": LOCAL if dask else scheduler}


def _print_version(asked: bool) -> None:
    if asked:
        print(f"pcapstats {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_print_version,
                                          is_eager=True, help="Print the version and exit.")):
    """Wireshark's numbers for captures of network transfers, from one command."""


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
NOTE_WIDTH = 100         # a note's line at most (the captures' paths allowing)


def say(kind: str, text: str) -> None:
    """One line on stderr: ``pcapstats: <kind>: <text>`` (kind: error, warning, note,
    NOTHING)."""
    _said.add(kind)
    print(f"pcapstats: {kind}: {shown(text)}", file=sys.stderr)   # one line, whatever it names


def say_notes(notes) -> None:
    """Notes, each ``(capture or None, note)``, on stderr: a note's text once, with what it
    is about (``stream 0``; the same about of several captures: ``stream 0 of 12 captures``;
    else how many captures), and when it has a long form, ``(--explain: why)``, or with
    ``--explain`` the long form of each under it, indented."""
    said: dict[str, list[tuple[str | None, Note]]] = {}
    for where, note in notes:
        note = Note.of(note)
        said.setdefault(note.text, []).append((where, note))
    for text, places in said.items():
        detailed = [(where, n) for where, n in places if n.detail]
        tail = " (--explain: why)" if detailed and not _explain[0] else ""
        room = NOTE_WIDTH - len("pcapstats: note: ")
        line = _note_line(places, text, tail, short_paths=False)
        if len(line) > room:
            line = _note_line(places, text, tail, short_paths=True)
        if len(line) > room:
            line = _note_line(places, text, tail, short_paths=True, counted=True)
        say("note", line)
        if _explain[0]:
            for where, n in detailed:
                head = ", ".join(x for x in (where, n.about) if x)
                print("\n".join(textwrap.wrap(f"{head}: {n.detail}" if head else n.detail,
                                              NOTE_WIDTH, initial_indent="    ",
                                              subsequent_indent="      ")), file=sys.stderr)


def _note_line(places, text: str, tail: str, *, short_paths: bool,
               counted: bool = False) -> str:
    """A note's line after ``pcapstats: note:``: ``WHERE: text tail`` (the captures by their
    file names when ``short_paths``; what it is about only counted when ``counted``)."""
    wheres = list(dict.fromkeys(w if not short_paths else os.path.basename(w)
                                for w, _ in places if w))
    abouts = list(dict.fromkeys(n.about for _, n in places if n.about))
    if len(wheres) > 1:
        subject = f"{abouts[0]} of {len(wheres)} captures" if len(abouts) == 1 else \
            f"{len(wheres)} captures"
    elif counted and len(abouts) > 1:
        kinds = {re.sub(r" \d+$", "", a) for a in abouts}   # "stream 0", "stream 3": 2 streams
        counted_as = f"{len(abouts)} {kinds.pop()}s" if len(kinds) == 1 and all(
            re.fullmatch(r"[a-z]+ \d+", a) for a in abouts) else f"{len(abouts)} of them"
        subject = ": ".join([*wheres, counted_as])
    else:
        subject = ": ".join(x for x in (*wheres, ", ".join(abouts)) if x)
    return f"{subject + ': ' if subject else ''}{text}{tail}"


def stderr_console():
    from rich.console import Console
    return Console(stderr=True)


def write_text(text: str, output: Optional[Path]) -> None:
    """Text to standard output, or to the file ``output`` (one error line when it cannot); a
    byte of a capture's name that is not UTF-8 written ``\\xNN`` (naming.text)."""
    text = name_text(text)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise PcapstatsError(f"cannot write output: {e.strerror}", path=str(output),
                             hint="check the directory exists and is writable") from None


def _click_command(command: str | None = None):
    """The click group typer builds from ``app``: with ``command``'s module alone imported
    when one is named, else with every command (cli/commands.py); the modules' commands
    register as they are imported.  Each parameter coerces its values without pydantic
    (cli/values.py)."""
    commands.load(command)
    return _built(len(app.registered_commands), len(app.registered_groups))


@functools.cache
def _built(_commands: int, _groups: int):
    """The group of what has registered on ``app`` (commands only ever register, so their
    numbers say what): built once, not per call -- typer inspects each command's signature,
    which a notebook or test calling :func:`main` many times would pay each time."""
    group = typer.main.get_command(app)
    group.commands = commands.ordered(group.commands)
    values.install(group)
    checks.attach(group)      # every option's check: the one validator of its kind
    return group


def main(argv: Optional[list] = None) -> int:
    """Console entry point: runs the app and turns every failure into one line and an exit code."""
    try:
        _said.clear()
        _explain[0] = False
        args = sys.argv[1:] if argv is None else list(argv)
        code = _click_command(commands.asked(args))(args=args, standalone_mode=False,
                                                    prog_name="pcapstats")
        if code == EXIT_INTERRUPTED and "error" not in _said:
            say("error", "interrupted")  # typer turns Ctrl-C in a command into a silent 130
        return code if isinstance(code, int) else 0
    except NothingToReport as e:
        say(NOTHING, str(e))
        return EXIT_NOTHING
    except PcapstatsError as e:
        say("error", str(e))
        return EXIT_ERROR
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        say("error", "interrupted")
        return EXIT_INTERRUPTED
    except typer.TyperException as e:  # usage errors: unknown option, bad value, missing file name
        text = e.format_message() if hasattr(e, "format_message") else str(e)
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None and ctx.command_path else "pcapstats"
        say("error", f"{text} (see `{where} --help`)")
        return EXIT_ERROR
    except KeyboardInterrupt:
        say("error", "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug of ours: still one line, the traceback only on request
        if os.environ.get("PCAPSTATS_DEBUG"):
            raise
        say("error", f"internal error: {type(e).__name__}: {e}. Please report it with the "
                      "capture; PCAPSTATS_DEBUG=1 shows the traceback")
        return EXIT_INTERNAL

