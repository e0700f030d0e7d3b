"""`pcapstats retrans | cwnd | rtt | seqgraph | wscale`: TCP streams' trouble, windows,
round trips and sequence numbers, as tables (table/csv/json) or PNG/SVG figures.

Every column: `pcapstats columns retrans` (cwnd, rtt, seqgraph).  Without --stream the
per-stream commands take the TCP stream with the most payload bytes and say which on stderr.
``-o FILE.png|.svg`` draws the figure (the table is still printed), ``-o FILE.csv|.json``
writes the table there.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..analyses.cwnd import Cwnd, cwnd as cwnd_of
from ..analyses.retrans import Retrans, retrans as retrans_of
from ..analyses.rtt import Rtt, rtt as rtt_of
from ..analyses.seqgraph import SeqGraph, seqgraph as seqgraph_of
from .app import Fmt, app
from .output import emit, finish, output_kind, run

FILES = typer.Argument(..., help="Capture files (pcap, pcapng, .gz).", show_default=False)
STREAM = typer.Option(None, "--stream", "-s",
                      help="TCP stream index (default: the one with the most payload bytes).")
OUTPUT = typer.Option(None, "--output", "-o",
                      help="Write here: .png/.svg figure, .csv/.json table.")
FORMAT = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json (standard output).")


class Style(str, Enum):
    stevens = "stevens"
    tcptrace = "tcptrace"


class Side(str, Enum):
    auto = "auto"
    sender = "sender"
    receiver = "receiver"


@app.command()
def retrans(
    files: List[Path] = FILES,
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP stream."),
    events: bool = typer.Option(False, "--events", help="One row per flagged packet instead of the counts."),
    fmt: Fmt = FORMAT,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this .csv/.json file."),
):
    """Retransmissions, fast/spurious retransmissions, out-of-order, lost and ACKed-unseen
    segments, duplicate ACKs, zero windows and full windows: counts per stream and direction
    (tshark's tcp.analysis flags), or with --events the flagged packets with frame numbers."""
    output_kind(output, Retrans)
    result, failed = run(retrans_of, files, stream=stream)
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="events" if events else "counts")
    finish(result, failed)


@app.command()
def cwnd(
    files: List[Path] = FILES, stream: Optional[int] = STREAM, output: Optional[Path] = OUTPUT,
    fmt: Fmt = FORMAT,
    losses: bool = typer.Option(False, "--losses", help="Print the loss events instead of the samples."),
    window_scaling: bool = typer.Option(False, "--window-scaling",
                                        help="Draw Wireshark's Window Scaling graph instead."),
    side: Side = typer.Option(Side.auto, "--side", help="auto, sender or receiver (where the capture was taken)."),
):
    """Congestion window estimate over time (bytes in flight when cwnd-limited), with the
    receiver's window, loss episodes and the intervals where the flow was receiver-window-,
    application-limited or recovering."""
    output_kind(output, Cwnd)
    result, failed = run(cwnd_of, files, stream=stream, side=side.value)
    if window_scaling:
        _window_scaling(result, failed, fmt, output)
        return
    if result is not None and not result.empty or losses:
        emit(result, fmt=fmt.value, output=output, table="losses" if losses else "samples")
    stream = result.parts[0].stream if result is not None else None
    finish(result, failed, empty=f"no cwnd samples in stream {stream} (no data segment could be "
                                 "timed against the ACK it was sent after)")


@app.command()
def wscale(files: List[Path] = FILES, stream: Optional[int] = STREAM,
           output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT):
    """Wireshark's Window Scaling graph: bytes in flight per data segment and the receiver's
    calculated window (same as `cwnd --window-scaling`)."""
    output_kind(output, Cwnd)
    result, failed = run(cwnd_of, files, stream=stream)
    _window_scaling(result, failed, fmt, output)


def _window_scaling(result, failed, fmt: Fmt, output: Optional[Path]) -> None:
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="flight", figure={"graph": "wscale"})
    finish(result, failed)


@app.command()
def rtt(files: List[Path] = FILES, stream: Optional[int] = STREAM,
        output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT,
        series: bool = typer.Option(False, "--series", help="Print the samples instead of the summary.")):
    """Round-trip times: Wireshark's ACK RTT, the Karn-filtered one and the timestamp RTT;
    summary (samples, min, median, p90, max per series and direction) or the samples."""
    output_kind(output, Rtt)
    result, failed = run(rtt_of, files, stream=stream)
    if result is not None and not result.empty:
        emit(result, fmt=fmt.value, output=output, table="samples" if series else "summary")
    finish(result, failed, empty="no RTT samples in this stream (no data was acknowledged)")


@app.command()
def seqgraph(files: List[Path] = FILES, stream: Optional[int] = STREAM,
             output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT,
             style: Style = typer.Option(Style.stevens, "--style", help="stevens or tcptrace.")):
    """Sequence numbers of the data against time (Wireshark's Stevens or tcptrace graph);
    the table lists the data segments."""
    output_kind(output, SeqGraph)
    result, failed = run(seqgraph_of, files, stream=stream)
    if result is not None:
        emit(result, fmt=fmt.value, output=output, figure={"style": style.value})
    finish(result, failed)
