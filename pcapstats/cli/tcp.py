"""`pcapstats retrans | cwnd | rtt | seqgraph | wscale`: one TCP stream's trouble, windows,
round trips and sequence numbers, as tables (table/csv/json) or PNG/SVG figures.

Definitions: pcapstats.analyses.retrans, .cwnd, .rtt, .seqgraph (all built on
.tcp_analysis, Wireshark 4.0's sequence analysis).  Without --stream the per-stream commands
take the TCP stream with the most payload bytes and say which on stderr.  ``-o FILE.png|.svg``
draws the figure (the table is still printed), ``-o FILE.csv|.json`` writes the table there.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from .app import (EXIT_ERROR, EXIT_NOTHING, Captures, Fmt, _say, _write, app, output_kind, stack,
                  with_capture_column)

FILE = typer.Argument(..., help="Capture file (pcap, pcapng, .gz).", show_default=False)
STREAM = typer.Option(None, "--stream", "-s",
                      help="TCP stream index (default: the one with the most payload bytes).")
OUTPUT = typer.Option(None, "--output", "-o",
                      help="Write here: .png/.svg figure, .csv/.json table.")
FORMAT = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json (standard output).")


class Style(str, Enum):
    stevens = "stevens"
    tcptrace = "tcptrace"


def _columns(df) -> dict:
    return {name: df[name].to_numpy() for name in df.columns}


def _emit(table: dict, fmt: Fmt, output: Optional[Path], figure=None) -> None:
    """The table to stdout (or -o .csv/.json); the figure to -o .png/.svg."""
    from ..render import render
    kind = output_kind(output)
    if kind == "plot":
        from ..plots import save
        save(figure(), output)
        _write(render(table, fmt.value), None)
    elif kind is not None:
        _write(render(table, kind), output)
    else:
        _write(render(table, fmt.value), None)


def _read(path: Path):
    from ..reader import read
    return read(path)


def _chosen(cap, stream: Optional[int]) -> int:
    from ..analyses.tcp_flow import choose_stream
    choice = choose_stream(cap, stream)
    if choice.chosen and choice.streams_with_data > 1:
        _say("note", f"TCP stream {choice.stream} ({choice.payload_bytes} payload bytes, the "
                     f"most of {choice.streams_with_data} streams with data); use --stream to "
                     "pick another")
    return choice.stream


@app.command()
def retrans(
    files: List[Path] = typer.Argument(..., help="Capture files (pcap, pcapng, .gz).", show_default=False),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP stream."),
    events: bool = typer.Option(False, "--events", help="One row per flagged packet instead of the counts."),
    fmt: Fmt = FORMAT,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this .csv/.json file."),
):
    """Retransmissions, fast/spurious retransmissions, out-of-order, lost and ACKed-unseen
    segments, duplicate ACKs, zero windows and full windows: counts per stream and direction
    (tshark's tcp.analysis flags), or with --events the flagged packets with frame numbers."""
    from ..analyses.retrans import retrans_counts, retrans_events
    if output is not None and output_kind(output) == "plot":
        from ..errors import UsageError
        raise UsageError("retrans writes tables, not figures", path=str(output),
                         hint="use a .csv or .json file name")

    def work(path, _progress):
        cap = _read(path)
        return (retrans_events if events else retrans_counts)(cap, stream=stream)

    tables = []
    captures = Captures(files, work)
    for path, result in captures:
        tables.append(with_capture_column(result, path) if len(files) > 1 else result)
    if tables:
        _emit(stack(tables), fmt, output)
    if captures.failed:
        raise typer.Exit(EXIT_ERROR)
    if tables and all(len(next(iter(t.values()))) == 0 for t in tables) and not events:
        raise typer.Exit(EXIT_NOTHING)


@app.command()
def cwnd(
    file: Path = FILE, stream: Optional[int] = STREAM, output: Optional[Path] = OUTPUT,
    fmt: Fmt = FORMAT,
    losses: bool = typer.Option(False, "--losses", help="Print the loss events instead of the samples."),
    window_scaling: bool = typer.Option(False, "--window-scaling",
                                        help="Draw Wireshark's Window Scaling graph instead."),
    side: str = typer.Option("auto", "--side", help="auto, sender or receiver (where the capture was taken)."),
):
    """Congestion window estimate over time (bytes in flight when cwnd-limited), with the
    receiver's window, loss episodes and the intervals where the flow was receiver-window-,
    application-limited or recovering.  Columns: see pcapstats.analyses.cwnd (CWND_COLUMNS,
    LOSS_COLUMNS)."""
    from ..analyses.cwnd import cwnd_analysis
    cap = _read(file)
    result = cwnd_analysis(cap, _chosen(cap, stream), side=side)
    _say("note", f"stream {result.stream}: {result.side}-side capture ({result.side_evidence})")
    if window_scaling:
        from ..plots.tcp import wscale_figure
        _emit(_columns(result.flight), fmt, output, lambda: wscale_figure(result))
        return
    from ..plots.tcp import cwnd_figure
    if len(result.samples) == 0 and not losses:
        _say("error", f"no cwnd samples in stream {result.stream} (no data segment could be timed "
                      "against the ACK it was sent after)")
        raise typer.Exit(EXIT_NOTHING)
    table = result.losses if losses else result.samples
    _emit(_columns(table), fmt, output, lambda: cwnd_figure(result))


@app.command()
def wscale(file: Path = FILE, stream: Optional[int] = STREAM, output: Optional[Path] = OUTPUT,
           fmt: Fmt = FORMAT):
    """Wireshark's Window Scaling graph: bytes in flight per data segment and the receiver's
    calculated window (same as `cwnd --window-scaling`)."""
    from ..analyses.cwnd import cwnd_analysis
    from ..plots.tcp import wscale_figure
    cap = _read(file)
    result = cwnd_analysis(cap, _chosen(cap, stream))
    _emit(_columns(result.flight), fmt, output, lambda: wscale_figure(result))


@app.command()
def rtt(file: Path = FILE, stream: Optional[int] = STREAM, output: Optional[Path] = OUTPUT,
        fmt: Fmt = FORMAT,
        series: bool = typer.Option(False, "--series", help="Print the samples instead of the summary.")):
    """Round-trip times: Wireshark's ACK RTT, the Karn-filtered one and the timestamp RTT;
    summary (samples, min, median, p90, max per series and direction) or the samples."""
    from ..analyses.rtt import rtt as rtt_samples, rtt_summary
    from ..plots.tcp import rtt_figure
    cap = _read(file)
    samples = rtt_samples(cap, _chosen(cap, stream))
    if len(samples) == 0:
        _say("error", "no RTT samples in this stream (no data was acknowledged)")
        raise typer.Exit(EXIT_NOTHING)
    table = _columns(samples) if series else rtt_summary(samples)
    _emit(table, fmt, output, lambda: rtt_figure(samples))


@app.command()
def seqgraph(file: Path = FILE, stream: Optional[int] = STREAM, output: Optional[Path] = OUTPUT,
             fmt: Fmt = FORMAT,
             style: Style = typer.Option(Style.stevens, "--style", help="stevens or tcptrace.")):
    """Sequence numbers of the data against time (Wireshark's Stevens or tcptrace graph);
    the table lists the data segments."""
    from ..analyses.seqgraph import seqgraph as seqgraph_data
    from ..plots.tcp import seqgraph_figure
    cap = _read(file)
    graph = seqgraph_data(cap, _chosen(cap, stream))
    _emit(_columns(graph.segments), fmt, output, lambda: seqgraph_figure(graph, style=style.value))
