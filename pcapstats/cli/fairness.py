"""`pcapstats fairness`: Jain's fairness index of the data flows of captures."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UsageError
from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, SCHEDULER, Fmt,
                  app, workers)
from .output import emit, finish, output_kind, run


class By(str, Enum):
    stream = "stream"
    pair = "pair"
    cc = "cc"
    tool = "tool"


@app.command()
def fairness(
    files: List[Path] = CAPTURE_FILES,
    by: By = typer.Option(By.stream, "--by", help="A flow is a stream, a host pair (parallel "
                                                  "connections added up), or the streams the "
                                                  "lab's sidecar gives one cc or tool."),
    interval: float = typer.Option(1.0, "--interval", "-i", help="Interval of --series, s."),
    flows: bool = typer.Option(False, "--flows", help="One row per flow instead of the index."),
    series: bool = typer.Option(False, "--series", help="Each flow's share per interval, "
                                "counted from its own start, against its fair share."),
    jain_series: bool = typer.Option(False, "--jain-series", help="The index per interval of "
                                     "the window where every flow was sending."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = FIGURE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Jain's fairness index of the flows sharing a path.

    J = (sum x)^2 / (n sum x^2) over the flows' goodput (payload delivered for the first
    time), measured over the common window where every flow was sending: 1 when all get the
    same, 1/n when one takes everything.  Each flow's start, start order and the time the
    flows took to converge (3 intervals in a row within 10 % of the fair share) beside it.
    Flows of 10 kB or more; `pcapstats columns fairness` defines every column.

    \b
    Examples:
      pcapstats fairness shared.pcap
      pcapstats fairness shared.pcap --by pair --flows
      pcapstats fairness shared.pcap --series -o fairness.png
      pcapstats fairness staggered.pcap --series --interval 0.5
    """
    from ..analyses.fairness import Fairness, fairness as fairness_of  # lazy: start-up
    if flows + series + jain_series > 1:
        raise UsageError("--flows, --series and --jain-series each choose the rows: give one "
                         "of them")
    output_kind(output, Fairness)
    result, failed = run(fairness_of, files, by=by.value, interval=interval,
                         **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns,
             table="flows" if flows else "shares" if series else
             "series" if jain_series else "summary")
    finish(result, failed)
