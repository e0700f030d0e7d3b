"""One way in and one way out for every analysis command.

In: :func:`run` puts the command's capture files through the analysis with
:func:`pcapstats.pool.outcomes` -- in this process for one file, else over ``-j`` worker
processes or a Dask cluster (``--scheduler``, ``--dask``), the answers in the order given, so
the output is the same wherever they ran -- with one progress bar on a terminal when it is
worth it, says each capture's warnings and errors in one line as they come (a failing capture
fails alone), and returns one result (several captures: a first column ``capture``).

Out: :func:`emit` writes a result by ``-o``'s extension -- ``.png``/``.svg`` its figure,
``.csv``/``.json`` a table -- or prints a table on standard output in ``--format`` (a figure
still prints the table).  :func:`output_kind` refuses an extension that does not fit the
analysis in one line before any capture is read (``retrans -o x.png``: retrans draws no
figure).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import typer

from ..errors import InternalError, NothingToReport, UsageError
from ..naming import capture_names, file_safe
from .app import (EXIT_ERROR, EXIT_INTERNAL, EXIT_NOTHING, NOTHING, say, say_notes,
                  stderr_console, write_text)

if TYPE_CHECKING:
    from ..results import Result

FIGURE_EXTENSIONS = (".png", ".svg")
TABLE_EXTENSIONS = {".csv": "csv", ".json": "json"}
PROGRESS_BYTES = 200e6        # one file this large gets a progress bar too


def stream_choice(text: Optional[str]) -> int | str | None:
    """--stream: a stream index, or "all" (every TCP stream with data)."""
    if text is None or text == "all":
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"--stream takes a stream index or 'all', not {text!r}",
                         hint="`pcapstats throughput FILE` lists the streams")
    return value


def output_kind(output: Optional[Path], result_type: type[Result]) -> Optional[str]:
    """"figure", "csv" or "json" by the -o file's extension; None without -o."""
    if output is None:
        return None
    suffix = output.suffix.lower()
    if suffix in TABLE_EXTENSIONS:
        return TABLE_EXTENSIONS[suffix]
    if suffix in FIGURE_EXTENSIONS:
        if not result_type.draws:
            raise UsageError(f"{result_type.analysis} draws no figure", path=str(output),
                             hint="use a .csv or .json file name for its table")
        return "figure"
    hint = ("use .png or .svg for a figure, .csv or .json for a table" if result_type.draws
            else f"use .csv or .json ({result_type.analysis} writes tables, no figure)")
    raise UsageError(f"cannot write {suffix or 'a file without extension'!r} output",
                     path=str(output), hint=hint)


class Failed(int):
    """How many captures failed, and whether a bug of ours was among them (``internal``):
    :func:`finish` exits 3 then, as :func:`pcapstats.cli.app.main` does for any bug.
    ``nothing``: how many captures had nothing to report (errors.NothingToReport: not a
    failure, said in one line each)."""
    internal: bool = False
    nothing: int = 0

    def exit_code(self) -> int:
        return EXIT_INTERNAL if self.internal else EXIT_ERROR


def run(function: Callable[..., Result], files: Sequence[Path], *, jobs: Optional[int] = 1,
        scheduler: Optional[str] = None, **options) -> tuple[Optional[Result], Failed]:
    """(one result of every capture that was read, or None; how many failed).  ``jobs`` and
    ``scheduler``: where the captures run (:func:`pcapstats.pool.outcomes`; ``function`` must
    then be picklable: a module's function, not a closure).  Warnings, errors and the
    analysis' notes are said on stderr, one line each."""
    from ..pool import outcomes  # lazy: numpy and the readers, which --help does not load
    from ..results import concat  # lazy: as above
    results, failed, internal, nothing = [], 0, False, 0
    with progress_bar(files) as moved:
        for outcome in outcomes(function, files, jobs=jobs, scheduler=scheduler,
                                progress=moved, **options):
            for text in outcome.warnings:
                say("warning", text)
            if isinstance(outcome.error, NothingToReport):
                say(NOTHING, str(outcome.error))
                nothing += 1
            elif outcome.error is not None:
                say("error", str(outcome.error))
                failed += 1
                internal |= isinstance(outcome.error, InternalError)
            else:
                results.append(outcome.result)
    failed = Failed(failed)
    failed.internal, failed.nothing = internal, nothing
    if not results:
        return None, failed
    say_notes((result.captures[0] if len(files) > 1 else None, note)
              for result in results for note in result.notes)
    return (results[0] if len(results) == 1 and len(files) == 1 else concat(results)), failed


def emit(result: Result, *, fmt: str, output: Optional[Path], table: str | None = None,
         figure: dict | None = None, all_columns: bool = False) -> None:
    """Write ``result`` where -o says (see the module docstring): ``table`` names the table
    (default: the main one on standard output, the series (one row a sample) in a .csv/.json
    file), ``figure`` the figure's options, ``all_columns`` every column in a human table."""
    kind = output_kind(output, type(result))
    if kind == "figure":
        save_figures(result, output, figure or {})
        write_text(result.to_text(table, fmt, all_columns=all_columns), None)
    elif kind is not None:
        write_text(result.to_text(table or result.series, kind), output)
    else:
        write_text(result.to_text(table, fmt, all_columns=all_columns), None)


def save_figures(result: Result, output: Path, options: dict) -> None:
    """The figure to ``output``; a result of several parts that one figure cannot show (streams,
    captures) gives one file a part, named after it (``x.png`` -> ``x.cap.stream0.png``), and
    says which files it wrote."""
    from ..plots import save  # lazy: matplotlib only when a figure is asked for
    parts = result.parts if len(result.parts) > 1 and not result.overlays else [result]
    if len(parts) == 1:
        save(parts[0].figure(**options), output)
        return
    written, labels = [], file_labels(result.captures)
    for part in parts:
        label = labels[part.captures[0]] if len(labels) > 1 else ""
        stream = getattr(part, "stream", None)
        label += f".stream{stream}" if stream is not None else ""
        path = output.with_name(f"{output.stem}.{label.lstrip('.')}{output.suffix}")
        save(part.figure(**options), path)
        written.append(str(path))
    say("note", f"wrote {len(written)} figures: {', '.join(written)}")


def file_labels(captures) -> dict[str, str]:
    """Each capture's part of the names of the files written a capture each (``x.png`` ->
    ``x.t1-run.png``, ``x.t2-run.png``): its name among the others, file-safe, distinct."""
    paths = list(dict.fromkeys(str(c) for c in captures))
    return dict(zip(paths, file_safe(capture_names(paths, extensions=False))))


def finish(result: Optional[Result], failed: int, *, empty: str | None = None,
           nothing: bool | None = None) -> None:
    """The exit status (pcapstats.cli.app's policy): 2 when a capture could not be read (3 when
    a bug of ours stopped one: :class:`Failed`); 1 when no capture had anything to report (each
    said so in :func:`run`) or there is nothing to show (``nothing``; by default: the result's
    main table has no rows), saying ``empty`` (what was looked for, what the capture holds);
    else 0."""
    if nothing is None:
        nothing = result is not None and result.empty
    if result is not None and nothing and empty:
        say(NOTHING, empty)
    if failed:
        raise typer.Exit(failed.exit_code() if isinstance(failed, Failed) else EXIT_ERROR)
    if result is None:
        raise typer.Exit(EXIT_NOTHING if getattr(failed, "nothing", 0) else EXIT_ERROR)
    if nothing:
        raise typer.Exit(EXIT_NOTHING)


class progress_bar:
    """A context giving a ``moved(fraction)`` callback that drives a bar on stderr, or None
    when stderr is not a terminal or the work is small."""

    def __init__(self, files: Sequence[Path]):
        total = sum(_size(f) for f in files)
        self.show = sys.stderr.isatty() and (len(files) > 1 or total > PROGRESS_BYTES)
        self.progress = None

    def __enter__(self):
        if not self.show:
            return None
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
        self.progress = Progress(TextColumn("reading"), BarColumn(), TimeRemainingColumn(),
                                 transient=True, console=stderr_console())
        task = self.progress.add_task("reading", total=1.0)
        self.progress.start()
        return lambda fraction: self.progress.update(task, completed=fraction)

    def __exit__(self, *exc):
        if self.progress:
            self.progress.stop()


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except (OSError, TypeError):
        return 0


# The zoom of the time figures (iograph, cwnd, wscale, rtt, seqgraph), as Wireshark's zoom.
FROM = typer.Option(None, "--from", metavar="SECONDS", show_default=False,
                    help="Zoom the figure: from this many seconds after the capture's first "
                         "packet.")
TO = typer.Option(None, "--to", metavar="SECONDS", show_default=False,
                  help="Zoom the figure: to this many seconds after the capture's first "
                       "packet.")


def zoom(output: Optional[Path], from_s: Optional[float], to_s: Optional[float]) -> dict:
    """--from / --to as the figure's ``from_s`` / ``to_s``, checked before any capture is read
    (one error line for a backwards or negative window, or a zoom without a figure to zoom)."""
    if from_s is None and to_s is None:
        return {}
    if output is None or output.suffix.lower() not in FIGURE_EXTENSIONS:
        raise UsageError("--from and --to zoom the figure, and no figure was asked for",
                         hint="add -o FILE.png (or .svg)")
    from ..plots import time_window  # lazy: numpy, which --help does not load
    time_window(from_s, to_s)
    return {"from_s": from_s, "to_s": to_s}
