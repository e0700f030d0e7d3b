"""`pcapstats ping`: ping's summary lines from the ICMP echoes in captures."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, SCHEDULER, Fmt,
                  app, workers)
from .output import emit, finish, output_kind, run


@app.command()
def ping(
    files: List[Path] = CAPTURE_FILES,
    requester: Optional[str] = typer.Option(None, "--from", metavar="ADDRESS",
                                            help="Only the sessions this address pinged from."),
    echoes: bool = typer.Option(False, "--echoes", help="One row per echo request instead of "
                                                        "the summary."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = FIGURE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Ping's summary from the capture: sent, received, loss, RTT min/avg/max/mdev.

    One row per echo session (requester, responder, ICMP identifier; ICMPv4 and ICMPv6) and
    payload size, with ping's own definitions.  Where the capture was taken matters: at the
    pinging host the request -> reply gap is the round trip; at the responder it is only the
    responder's turnaround, shown as such (`turnaround`), never as the RTT.  Every column:
    `pcapstats columns ping`.

    \b
    Examples:
      pcapstats ping run.pcap
      pcapstats ping run.pcap --echoes -f csv -o echoes.csv
      pcapstats ping sweep.pcap -o rtt.png
    """
    from ..analyses.ping import Ping, ping as ping_of  # lazy: start-up
    output_kind(output, Ping)
    result, failed = run(ping_of, files, requester=requester,
                         **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="echoes" if echoes else "sessions",
             all_columns=all_columns)
    finish(result, failed)
