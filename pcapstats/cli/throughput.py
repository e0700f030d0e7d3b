"""`pcapstats throughput` and `pcapstats columns`: the per-stream table and what every column means."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..analyses.throughput import Throughput, throughput as throughput_of
from ..reader import read
from ..results import describe
from .app import Engine, Fmt, Kernel, Proto, say, app
from .output import emit, finish, output_kind, run


@app.command()
def throughput(
    files: List[Path] = typer.Argument(..., help="Capture files (pcap, pcapng, .gz).", show_default=False),
    interval: float = typer.Option(1.0, "--interval", "-i", help="Interval for peak rates, seconds."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this stream index."),
    proto: Optional[Proto] = typer.Option(None, "--proto", "-p", help="Only tcp or udp streams."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the table to this .csv or .json file."),
    engine: Engine = typer.Option(Engine.fast, "--engine", help="fast, or tshark (reference)."),
    kernel: Kernel = typer.Option(Kernel.auto, "--kernel", hidden=True),
):
    """Per-stream table like Statistics > Conversations, with payload and peak bits/s.

    Columns (same names in table, csv and json): see `pcapstats columns throughput`.
    With several files a first column `capture` names the file of each row.
    """
    output_kind(output, Throughput)

    def analyse(path, **options):   # the fast engine streams the file: memory stays bounded
        if engine == Engine.tshark:
            return throughput_of(read(path, engine="tshark"), **options)
        return throughput_of(path, kernel=kernel.value, **options)

    result, failed = run(analyse, files, interval=interval, stream=stream,
                         proto=proto.value if proto else None)
    if result is not None:
        emit(result, fmt=fmt.value, output=output)
        for part in result.parts:
            if part.empty:
                say("warning", f"no {proto.value.upper() if proto else 'TCP or UDP'} streams "
                                f"in {part.captures[0]} ({part.packets} packets)")
    finish(result, failed)


@app.command()
def columns(
    which: Optional[str] = typer.Argument(None, help="packets (the packet table) or an analysis "
                                          "(throughput, iograph, cwnd, ...); all without one."),
):
    """Describe every column: name, type, unit, meaning, Wireshark field."""
    print(describe(which), end="")
