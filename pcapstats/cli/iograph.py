"""`pcapstats iograph`: bits/s (bytes/s, packets/s) per interval, its averages and peak, as a
table, CSV, JSON or a PNG/SVG plot.  Definitions: pcapstats.analyses.iograph."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UsageError
from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, NOTHING,
                  SCHEDULER, Fmt, Proto, app, say, workers)
from .output import FROM, TO, emit, finish, output_kind, run, zoom


class Unit(str, Enum):
    bits = "bits"
    bytes = "bytes"
    packets = "packets"


class By(str, Enum):
    stream = "stream"
    direction = "direction"
    stream_direction = "stream+direction"


class Layout(str, Enum):
    overlay = "overlay"
    side = "side"


@app.command()
def iograph(
    files: List[Path] = CAPTURE_FILES,
    interval: float = typer.Option(1.0, "--interval", "-i",
                                   help="Interval in seconds (whole microseconds, as tshark)."),
    unit: Unit = typer.Option(Unit.bits, "--unit", "-u", help="bits, bytes or packets (per second)."),
    by: Optional[By] = typer.Option(None, "--by", help="One line per stream, direction or both."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this stream index."),
    proto: Optional[Proto] = typer.Option(None, "--proto", "-p", help="Only tcp or udp packets."),
    host: Optional[str] = typer.Option(None, "--host", help="Only packets from or to this IP address."),
    port: Optional[int] = typer.Option(None, "--port", help="Only TCP/UDP packets from or to this port."),
    gap: float = typer.Option(1.0, "--gap", help="Idle seconds that end a transfer."),
    output: Optional[Path] = FIGURE_FILE,
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json (standard output)."),
    series: bool = typer.Option(False, "--series", help="Rows per interval instead of the summary."),
    transfers: bool = typer.Option(False, "--transfers", help="Rows per transfer instead of the summary."),
    all_columns: bool = ALL_COLUMNS,
    layout: Layout = typer.Option(Layout.overlay, "--layout",
                                  help="Several captures: overlay on one time axis, or side by side."),
    from_s: Optional[float] = FROM, to_s: Optional[float] = TO,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Wireshark's I/O graph: rate per interval, average, peak.

    Prints one summary row per group (averages over the capture span and over the active span,
    peak interval, transfers and their mean rate), or the rows per interval (--series) or per
    transfer (--transfers).  With -o FILE.png/.svg the graph is drawn and the table still
    printed; -o FILE.csv/.json writes the table there.  Several files: a first column
    `capture`, each file timed from its own first packet.  Buckets equal
    `tshark -q -z io,stat,INTERVAL`; every column: `pcapstats columns iograph`.

    \b
    Examples:
      pcapstats iograph run.pcap -o io.png
      pcapstats iograph run.pcap --by stream --interval 0.1 -o io.png
      pcapstats iograph loss1.pcap loss10.pcap loss30.pcap --layout side -o sweep.png
      pcapstats iograph run.pcap -i 0.01 --from 1.5 --to 2 -o zoom.png
    """
    from ..analyses.iograph import (  # lazy: start-up
        IOGraph, check_options, iograph as iograph_of)
    if series and transfers:
        raise UsageError("--series and --transfers each choose the rows: give one of them")
    output_kind(output, IOGraph)
    window = zoom(output, from_s, to_s)
    options = dict(interval=interval, unit=unit.value, by=by.value if by else None, stream=stream,
                   proto=proto.value if proto else None, host=host, port=port, gap=gap)
    check_options(**options)             # a bad option is one error line before any reading
    result, failed = run(iograph_of, files, **options, **workers(jobs, scheduler, dask))
    if result is not None:
        for part in result.parts:
            if part.empty and len(files) > 1 and not result.empty:
                say(NOTHING, f"no packet matched {_what(options)} in {part.captures[0]}")
        if result.empty:
            where = (f" in {result.captures[0]}" if len(result.captures) == 1
                     else f" in any of the {len(result.captures)} captures")
            said = _what(options)
            say(NOTHING, f"no packets to graph{where}" if said == "the capture" else
                f"nothing matched {said}{where}: no packets to graph. Check the filter "
                "against `pcapstats throughput`")
        else:
            emit(result, fmt=fmt.value, output=output,
                 table="series" if series else "transfers" if transfers else "summary",
                 figure={"layout": layout.value, **window}, all_columns=all_columns)
    finish(result, failed)


def _what(options: dict) -> str:
    asked = [f"{k} {v}" for k, v in options.items() if k in ("stream", "proto", "host", "port")
             and v is not None]
    return "the filter (" + ", ".join(asked) + ")" if asked else "the capture"
