"""`pcapstats hierarchy`: Wireshark's Protocol Hierarchy of captures."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, SCHEDULER, Fmt,
                  app, workers)
from .output import emit, finish, output_kind, run


@app.command()
def hierarchy(
    files: List[Path] = CAPTURE_FILES,
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = FIGURE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Packets and bytes per protocol, as a tree: Wireshark's Protocol Hierarchy.

    A row a protocol at its place in the tree (frame, then eth, ip, tcp ...): the packets it
    appears in, their frame bytes, both as shares of the capture, and the bytes' bits/s over
    the capture span, as Statistics > Protocol Hierarchy and `tshark -q -z io,phs` count
    them, to the transport layer (IP fragments as tshark reassembles them).  Above it,
    `payload` counts the packets with TCP or UDP payload, which tshark names by application
    protocol (http, tls, data ...) and pcapstats does not.  --all adds each row's path and
    whether pcapstats read into it; `pcapstats columns hierarchy` defines every column.
    -o FILE.png/.svg draws the packets' and bytes' shares as bars, indented as the tree.

    \b
    Examples:
      pcapstats hierarchy run.pcap
      pcapstats hierarchy run.pcap -o protocols.png
      pcapstats hierarchy captures/*.pcap -f csv -o protocols.csv
    """
    from ..analyses.hierarchy import Hierarchy, hierarchy as hierarchy_of  # lazy: start-up
    output_kind(output, Hierarchy)
    result, failed = run(hierarchy_of, files, **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns)
    finish(result, failed)
