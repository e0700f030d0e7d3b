"""`pcapstats flavour`: which congestion control each TCP stream's sender ran, with evidence.

Definitions and rules: pcapstats.analyses.flavour.  Without --stream every TCP stream that
carried 64 KiB or more gets a row.  ``-o FILE.png|.svg`` draws one stream's window with the
fitted Reno and Cubic growth curves (the stream of --stream, else the one with the most
payload); the table is still printed.  ``-o FILE.csv|.json`` writes the table there.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, NOTHING,
                  SCHEDULER, Fmt, app, say, workers)
from .output import emit, file_labels, finish, output_kind, run, stream_choice

@app.command()
def flavour(
    files: List[Path] = CAPTURE_FILES,
    stream: Optional[str] = typer.Option(None, "--stream", "-s", metavar="N|all",
                                         show_default=False,
                                         help="Only this TCP stream; 'all': a figure a stream."),
    all_columns: bool = ALL_COLUMNS,
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f",
                            help="table (key columns), csv or json (every column)."),
    output: Optional[Path] = FIGURE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """The sender's congestion control: reno, cubic or bbr?

    The guess per TCP stream is reno, cubic, bbr or unknown, with a confidence, the reason, and the evidence (loss events and decrease factors, growth fits,
    pacing, gain cycling, ProbeRTT dips, slow-start exit).  Every column: `pcapstats columns
    flavour`.  With -o FILE.png the stream with the most data segments is drawn
    (--stream N or all for others).

    \b
    Examples:
      pcapstats flavour run.pcap
      pcapstats flavour run.pcap --stream all -o flavour.png
    """
    from ..analyses.flavour import (  # lazy: start-up
        MIN_STREAM_BYTES, Flavour, flavour as flavour_of)
    kind = output_kind(output, Flavour)
    chosen = stream_choice(stream)
    result, failed = run(flavour_of, files, stream=None if chosen == "all" else chosen,
                         **workers(jobs, scheduler, dask))
    if result is not None:
        for part in result.parts:
            if part.empty:
                say(NOTHING, f"no TCP stream carried {MIN_STREAM_BYTES} bytes or more in "
                             f"{part.captures[0]}: too little to judge (name one with "
                             "--stream to see why)")
        if not result.empty:
            if kind == "figure" and (chosen == "all" or len(result.parts) > 1):
                _figures(result, output)
                emit(result, fmt=fmt.value, output=None, all_columns=all_columns)
            else:
                if kind == "figure" and chosen is None and len(result.parts[0].details) > 1:
                    say("note", "the figure shows the stream with the most data segments; "
                                "--stream N for another, --stream all for each")
                emit(result, fmt=fmt.value, output=output, all_columns=all_columns)
    finish(result, failed)


def _figures(result, output: Path) -> None:
    """One figure a judged stream of every capture: x.png -> x.CAPTURE.streamN.png."""
    from ..plots import save  # lazy: matplotlib only when a figure is asked for
    written, labels = [], file_labels(result.captures)
    for part in result.parts:
        prefix = f"{labels[part.captures[0]]}." if len(result.parts) > 1 else ""
        for stream in part.details:
            path = output.with_name(f"{output.stem}.{prefix}stream{stream}{output.suffix}")
            save(part.figure(stream=stream), path)
            written.append(str(path))
    say("note", f"wrote {len(written)} figures: {', '.join(written)}")
