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

from ..errors import UsageError
from .app import EXIT_ERROR, EXIT_NOTHING, Captures, Fmt, _say, _write, app, output_kind

# the columns of the table format (the csv/json formats carry every column)
TABLE_COLUMNS = ("stream", "label", "confidence", "side", "loss_events",
                 "decrease_factor_median", "reno_slope_mss_per_rtt", "ack_clocked_share",
                 "reason")


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
    pacing, gain cycling, ProbeRTT dips, slow-start exit).  Columns: pcapstats.analyses.flavour
    FLAVOUR_COLUMNS."""
    from ..analyses.flavour import MIN_STREAM_BYTES, flavour as flavour_table, flavour_stream
    from ..render import render
    kind = output_kind(output)   # one error line for an extension that is neither
    if kind == "plot" and len(files) > 1:
        raise UsageError("one figure needs one capture", hint="give one file with -o")

    def work(path, progress):
        from ..reader import read
        cap = read(path)
        table = flavour_table(cap, stream)
        figure_of = None
        if kind == "plot":
            from ..analyses.tcp_flow import choose_stream
            figure_of = flavour_stream(cap, choose_stream(cap, stream).stream)
        return table, figure_of

    tables, empty = [], 0
    captures = Captures(files, work)
    for path, (df, figure_of) in captures:
        if df.empty:
            _say("warning", f"no TCP stream carried {MIN_STREAM_BYTES} bytes or more in {path}: "
                            "too little to judge (name one with --stream to see why)")
            empty += 1
        if len(files) > 1:
            df.insert(0, "capture", str(path))
        tables.append(df)
        if figure_of is not None and not df.empty:
            from ..plots import save
            from ..plots.flavour import flavour_figure
            save(flavour_figure(figure_of), output)
            _say("note", f"wrote {output}")
    tables = [t for t in tables if not t.empty]
    if tables:
        import pandas as pd
        df = pd.concat(tables, ignore_index=True)
        form = kind if kind in ("csv", "json") else fmt.value
        names = list(df.columns) if form != "table" else \
            (["capture"] if len(files) > 1 else []) + list(TABLE_COLUMNS)
        _write(render({n: df[n].to_numpy() for n in names}, form),
               output if kind in ("csv", "json") else None)
    if captures.failed:
        raise typer.Exit(EXIT_ERROR)
    if empty == len(files):
        raise typer.Exit(EXIT_NOTHING)
