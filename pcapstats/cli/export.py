"""`pcapstats export`: captures as Parquet datasets partitioned by capture, for DuckDB, pandas,
polars or Spark.  Layout, memory and what each table is: pcapstats.export."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import (CAPTURE_FILES, DASK, EXIT_ERROR, EXIT_NOTHING, JOBS, NOTHING, SCHEDULER,
                  Kernel, app, say, workers)
from .output import progress_bar

EXPORT_DIR = typer.Option(..., "--output", "-o", metavar="DIR", show_default=False,
                          help="Directory of the datasets: DIR/TABLE/capture=FILE/part-0.parquet.")
TABLES = typer.Option(None, "--tables", "-t", metavar="NAME,...", show_default=False,
                      help="Tables to write (default packets,streams,tcp_analysis): packets, "
                           "streams, an analysis (its main table) or ANALYSIS.TABLE.")


@app.command()
def export(
    files: List[Path] = CAPTURE_FILES,
    output: Path = EXPORT_DIR,
    tables: Optional[str] = TABLES,
    jobs: Optional[int] = JOBS,
    scheduler: Optional[str] = SCHEDULER,
    dask: bool = DASK,
    kernel: Kernel = typer.Option(Kernel.auto, "--kernel", hidden=True),
):
    """Write captures as Parquet datasets partitioned by capture (needs pyarrow).

    One directory a table, one file a capture: DIR/packets/capture=run1.pcap/part-0.parquet
    (Hive partitioning: DuckDB's read_parquet(..., hive_partitioning=true) and pyarrow's
    datasets read the capture's name back as a column; same-named files in two
    directories are told apart by their directories: capture=t1%2Frun.pcap, read back as
    t1/run.pcap).  packets is the packet table,
    written one row group a 4 MiB window of the capture as it is read, so its memory stays
    bounded; streams is throughput's per-stream table; any analysis' table by name
    (tcp_analysis, iograph, cwnd.samples, ...: `pcapstats columns ANALYSIS`), for which the
    capture is read whole.  Each file's schema metadata carries every column's meaning and
    unit.  A capture exported again has its partitions replaced.  A capture that cannot be
    read is one error line and the others go on.

    \b
    Examples:
      pcapstats export captures/*.pcap -o out/
      pcapstats export runs/*.pcap -o out/ --tables packets,streams,retrans -j 4
      duckdb -c "SELECT capture, count(*) FROM read_parquet('out/packets/*/*.parquet',
                 hive_partitioning=true) GROUP BY capture"
    """
    from .. import export as exporting  # lazy: pyarrow and the analyses, for this command only
    asked = exporting.tables_asked(tables)
    exporting.require_pyarrow()                     # one clear line when it is missing
    totals = {t: [0, 0, 0] for t in asked}                 # captures, rows, row groups
    failed = 0
    with progress_bar(files) as moved:
        for outcome in exporting.export(files, output, tables=asked, kernel=kernel.value,
                                        progress=moved, **workers(jobs, scheduler, dask)):
            for text in outcome.warnings:
                say("warning", text)
            if outcome.error is not None:
                say("error", str(outcome.error))
                failed += 1
                continue
            written = outcome.result
            for text in written.nothing:
                say(NOTHING, f"{written.capture}: {text}")
            for text in written.errors:
                say("error", f"{written.capture}: {text}")
            failed += bool(written.errors)
            for table, rows in written.rows.items():
                totals[table][0] += 1
                totals[table][1] += rows
                totals[table][2] += written.row_groups[table]
    for table, (captures, rows, groups) in totals.items():
        if captures:
            print(f"{exporting.partition(output, table, 'x').parent.parent}: {captures} "
                  f"capture{'s' * (captures != 1)}, {rows} rows, {groups} row "
                  f"group{'s' * (groups != 1)}")
    if failed:
        raise typer.Exit(EXIT_ERROR)
    if not any(captures for captures, _, _ in totals.values()):
        raise typer.Exit(EXIT_NOTHING)     # every table asked had nothing in every capture
