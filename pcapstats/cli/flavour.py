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

from ..analyses.flavour import MIN_STREAM_BYTES, Flavour, flavour as flavour_of
from .app import Fmt, say, app
from .output import emit, finish, output_kind, run

@app.command()
def flavour(
    files: List[Path] = typer.Argument(..., help="Capture files (pcap, pcapng, .gz).",
                                       show_default=False),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP stream."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f",
                            help="table (key columns), csv or json (every column)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write here: .png/.svg figure, .csv/.json table."),
):
    """Sender's congestion control per TCP stream: reno, cubic, bbr or unknown, with a
    confidence, the reason, and the evidence (loss events and decrease factors, growth fits,
    pacing, gain cycling, ProbeRTT dips, slow-start exit).  Every column: `pcapstats columns
    flavour`."""
    output_kind(output, Flavour)
    result, failed = run(flavour_of, files, stream=stream)
    if result is not None:
        for part in result.parts:
            if part.empty:
                say("warning", f"no TCP stream carried {MIN_STREAM_BYTES} bytes or more in "
                                f"{part.captures[0]}: too little to judge (name one with "
                                "--stream to see why)")
        if not result.empty:
            emit(result, fmt=fmt.value, output=output, figure={"stream": stream})
    finish(result, failed)
