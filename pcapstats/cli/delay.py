"""`pcapstats delay`: the delay model D = a*S + b from echo sweeps and ping-pong exchanges."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UsageError
from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, SCHEDULER, Fmt,
                  app, workers)
from .output import emit, finish, output_kind, run


class Source(str, Enum):
    auto = "auto"
    icmp = "icmp"
    exchanges = "exchanges"


@app.command()
def delay(
    files: List[Path] = CAPTURE_FILES,
    source: Source = typer.Option(Source.auto, "--source", help="icmp (ping sweeps), exchanges "
                                                                "(ping-pong over TCP/UDP) or "
                                                                "auto: both."),
    sizes: bool = typer.Option(False, "--sizes", help="One row per message size instead of "
                                                      "the fit."),
    samples: bool = typer.Option(False, "--samples", help="One row per latency sample."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = FIGURE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """The delay model D = a*S + b: latency against message size.

    Latency per message size from ping sweeps (ping -s S, captured at the pinging host) and
    from ping-pong exchanges (a client sends S bytes and waits for the S-byte answer), the
    least-squares fit over each size's 10 % trimmed mean with 95 % confidence intervals and
    r², and the bandwidth the slope implies (2 x 8 / a: request and echo each cross one
    bottleneck).  `pcapstats columns delay` defines every column.

    \b
    Examples:
      pcapstats delay sweep.pcap
      pcapstats delay sweep.pcap --sizes
      pcapstats delay sweep.pcap -o delay.png
    """
    from ..analyses.delay import Delay, delay as delay_of  # lazy: start-up
    if sizes and samples:
        raise UsageError("--sizes and --samples each choose the rows: give one of them")
    output_kind(output, Delay)
    result, failed = run(delay_of, files, source=source.value,
                         **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns,
             table="sizes" if sizes else "samples" if samples else "model")
    finish(result, failed)
