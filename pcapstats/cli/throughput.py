"""`pcapstats throughput` and `pcapstats columns`: the per-stream table and what every column means."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, NOTHING,
                  SCHEDULER, Engine, Fmt, Kernel, Proto, app, say, workers)
from .output import emit, finish, output_kind, run


@app.command()
def throughput(
    files: List[Path] = CAPTURE_FILES,
    interval: float = typer.Option(1.0, "--interval", "-i", help="Interval for peak rates, seconds."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this stream index."),
    proto: Optional[Proto] = typer.Option(None, "--proto", "-p", help="Only tcp or udp streams."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    output: Optional[Path] = FIGURE_FILE,
    all_columns: bool = ALL_COLUMNS,
    engine: Engine = typer.Option(Engine.fast, "--engine", help="fast, or tshark (reference)."),
    kernel: Kernel = typer.Option(Kernel.auto, "--kernel", hidden=True),
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Per-stream bytes, packets, average and peak rates.

    Like Wireshark's Statistics > Conversations, with payload bytes, average bits/s over the
    stream's span and the peak interval's bits/s.

    The table shows the columns read first, in Mbit/s, kB and ms; --all shows every column,
    csv and json always hold every one, in bits/s, bytes and seconds (what they mean:
    `pcapstats columns throughput`).  With several files the rows are grouped by capture.
    -o FILE.png/.svg draws each stream's average and peak rate as bars.

    \b
    Examples:
      pcapstats throughput run.pcap
      pcapstats throughput run.pcap -o streams.png
      pcapstats throughput captures/*.pcap --proto tcp -f csv -o streams.csv
    """
    from ..analyses.throughput import Throughput  # lazy: start-up
    output_kind(output, Throughput)
    result, failed = run(_throughput, files, engine=engine.value, kernel=kernel.value,
                         interval=interval, stream=stream, proto=proto.value if proto else None,
                         **workers(jobs, scheduler, dask))
    if result is not None:
        if not result.empty:
            emit(result, fmt=fmt.value, output=output, all_columns=all_columns)
        for part in result.parts:
            if part.empty:
                say(NOTHING, f"no {proto.value.upper() if proto else 'TCP or UDP'} streams "
                             f"in {part.captures[0]} ({part.packets} packets)")
    finish(result, failed)


def _throughput(path, *, engine: str, kernel: str, **options):
    """One capture's throughput (a module's function: worker processes pickle it).  The fast
    engine streams the file, so memory stays bounded."""
    from ..analyses.throughput import throughput  # lazy: start-up
    if engine == Engine.tshark.value:
        from ..reader import read  # lazy: numpy, which --help does not load
        return throughput(read(path, engine="tshark"), **options)
    return throughput(path, kernel=kernel, **options)


@app.command()
def columns(
    which: Optional[str] = typer.Argument(None, help="packets (the packet table) or an analysis "
                                          "(throughput, iograph, cwnd, ...); all without one."),
):
    """What every column means: type, unit, Wireshark field."""
    from ..analyses import load_all  # lazy: every analysis, for this command only (start-up)
    from ..results import describe  # lazy: numpy, which --help does not load
    load_all()
    print(describe(which), end="")
