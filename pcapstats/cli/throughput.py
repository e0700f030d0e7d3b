"""`pcapstats throughput` and `pcapstats columns`: the per-stream table and what its columns mean."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .. import schema
from ..errors import PcapstatsError
from .app import (EXIT_ERROR, EXIT_NOTHING, Captures, Engine, Fmt, Kernel, Proto, _say, _write,
                  app, stack, with_capture_column)


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
    from ..analyses.throughput import throughput_file
    from ..render import render

    def work(path, progress):  # one streaming pass a file: memory does not grow with the capture
        return throughput_file(path, interval=interval, stream=stream,
                               proto=proto.value if proto else None, engine=engine.value,
                               kernel=kernel.value, progress=progress)

    tables, empty = [], []
    captures = Captures(files, work)
    for path, (table, packets) in captures:
        rows = len(table["stream"])
        if rows == 0:
            empty.append(f"{path} ({packets} packets)")
        tables.append(with_capture_column(table, path) if len(files) > 1 else table)
    if tables:
        _write(render(stack(tables), fmt.value), output)
    for e in empty:
        _say("warning", f"no {proto.value.upper() if proto else 'TCP or UDP'} streams in {e}")
    if captures.failed:
        raise typer.Exit(EXIT_ERROR)
    if tables and all(len(t["stream"]) == 0 for t in tables):
        raise typer.Exit(EXIT_NOTHING)


@app.command()
def columns(
    which: str = typer.Argument("packets", help="packets (the packet table) or throughput."),
):
    """Describe every column: name, type, layer, Wireshark field, meaning."""
    if which == "throughput":
        from ..analyses.throughput import THROUGHPUT_COLUMNS
        width = max(len(n) for n, _ in THROUGHPUT_COLUMNS)
        print("\n".join(f"{n:<{width}}  {d}" for n, d in THROUGHPUT_COLUMNS))
    elif which == "packets":
        print(schema.describe())
    else:
        raise PcapstatsError(f"unknown table {which!r}", hint="use packets or throughput")
