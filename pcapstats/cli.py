"""The `pcapstats` command: thin typer functions over the library, and the one-line error policy.

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
from typing import List, Optional

import numpy as np
import typer

from . import schema
from .errors import PcapstatsError, PcapstatsWarning

EXIT_NOTHING, EXIT_ERROR, EXIT_INTERNAL = 1, 2, 3

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


def _say(kind: str, text: str) -> None:
    print(f"pcapstats: {kind}: {text}", file=sys.stderr)


@app.command()
def throughput(
    files: List[Path] = typer.Argument(..., help="Capture files (pcap, pcapng, .gz).", show_default=False),
    interval: float = typer.Option(1.0, "--interval", "-i", help="Interval for peak rates, seconds."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this stream index."),
    proto: Optional[Proto] = typer.Option(None, "--proto", "-p", help="Only tcp or udp streams."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file, not stdout."),
    engine: Engine = typer.Option(Engine.fast, "--engine", help="fast, or tshark (reference)."),
    kernel: Kernel = typer.Option(Kernel.auto, "--kernel", hidden=True),
):
    """Per-stream table like Statistics > Conversations, with payload and peak bits/s.

    Columns (same names in table, csv and json): see `pcapstats columns --throughput`.
    With several files a first column `capture` names the file of each row.
    """
    from .analyses.throughput import throughput_file
    from .render import render

    def work(path, progress):  # one streaming pass a file: memory does not grow with the capture
        return throughput_file(path, interval=interval, stream=stream,
                               proto=proto.value if proto else None, engine=engine.value,
                               kernel=kernel.value, progress=progress)

    tables, failed, empty = [], 0, []
    for path, cap_warnings, result in _each_capture(files, work):
        for w in cap_warnings:
            _say("warning", w)
        if isinstance(result, PcapstatsError):
            _say("error", str(result))
            failed += 1
            continue
        table, packets = result
        rows = len(table["stream"])
        if rows == 0:
            empty.append(f"{path} ({packets} packets)")
        if len(files) > 1:
            table = {"capture": np.full(rows, str(path), dtype=object), **table}
        tables.append(table)
    if tables:
        joined = {name: np.concatenate([t[name] for t in tables]) for name in tables[0]}
        _write(render(joined, fmt.value), output)
    for e in empty:
        _say("warning", f"no {proto.value.upper() if proto else 'TCP or UDP'} streams in {e}")
    if failed:
        raise typer.Exit(EXIT_ERROR)
    if tables and all(len(t["stream"]) == 0 for t in tables):
        raise typer.Exit(EXIT_NOTHING)


@app.command()
def columns(
    which: str = typer.Argument("packets", help="packets (the packet table) or throughput."),
):
    """Describe every column: name, type, layer, Wireshark field, meaning."""
    if which == "throughput":
        from .analyses.throughput import THROUGHPUT_COLUMNS
        width = max(len(n) for n, _ in THROUGHPUT_COLUMNS)
        print("\n".join(f"{n:<{width}}  {d}" for n, d in THROUGHPUT_COLUMNS))
    elif which == "packets":
        print(schema.describe())
    else:
        raise PcapstatsError(f"unknown table {which!r}", hint="use packets or throughput")


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
            moved = None
            if progress:
                progress.update(task, description=f"reading {path.name}")

                def moved(bytes_done, bytes_total, base=done, size=size):
                    progress.update(task, completed=base + size * bytes_done / max(bytes_total, 1))
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
        code = app(args=argv, standalone_mode=False, prog_name="pcapstats")
        return code if isinstance(code, int) else 0
    except PcapstatsError as e:
        _say("error", str(e))
        return EXIT_ERROR
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        _say("error", "interrupted")
        return 130
    except typer.TyperException as e:  # usage errors: unknown option, bad value, missing file name
        text = e.format_message() if hasattr(e, "format_message") else str(e)
        _say("error", f"{text} (see `pcapstats --help`)")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say("error", "interrupted")
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug of ours: still one line, the traceback only on request
        if os.environ.get("PCAPSTATS_DEBUG"):
            raise
        _say("error", f"internal error: {type(e).__name__}: {e}. Please report it with the "
                      "capture; PCAPSTATS_DEBUG=1 shows the traceback")
        return EXIT_INTERNAL

