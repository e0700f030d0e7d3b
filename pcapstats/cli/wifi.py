"""`pcapstats wifi`: throughput beside signal, data rate and 802.11 retries, per interval."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, SCHEDULER, Fmt,
                  app, workers)
from .output import FROM, TO, emit, finish, output_kind, run, zoom


@app.command()
def wifi(
    files: List[Path] = CAPTURE_FILES,
    interval: float = typer.Option(1.0, "--interval", "-i", help="Interval of --series and "
                                                                 "the figure, s."),
    series: bool = typer.Option(False, "--series", help="One row per interval and group of "
                                                        "frames instead of the whole capture."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = FIGURE_FILE,
    from_s: Optional[float] = FROM, to_s: Optional[float] = TO,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """802.11 cause and effect in a monitor-mode capture: throughput beside signal, data
    rate and retries.

    For every 802.11 frame, and for the data frames by the way they went (to the access
    point, from it): frame bits over the capture span and per interval, as Wireshark's I/O
    graph counts them; the median radiotap signal (dBm) and data rate; and the share of
    frames with the Retry flag, 802.11's own re-sends.  Farther away the signal falls, the
    rate with it, and the retries rise: distance shows as loss.  Across captures, `pcapstats
    compare` puts them beside goodput.  `pcapstats columns wifi` defines every column.

    \b
    Examples:
      pcapstats wifi monitor.pcap
      pcapstats wifi monitor.pcap --series -i 0.5
      pcapstats wifi monitor.pcap -o wifi.png --from 10 --to 40
      pcapstats compare close.pcap medium.pcap far.pcap -m goodput,signal,rate,retries
    """
    from ..analyses.wifi import Wifi, wifi as wifi_of  # lazy: start-up
    output_kind(output, Wifi)
    figure = zoom(output, from_s, to_s)
    result, failed = run(wifi_of, files, interval=interval, **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns,
             table="intervals" if series else "frames", figure=figure)
    finish(result, failed)
