"""`pcapstats retrans | cwnd | rtt | seqgraph | wscale`: TCP streams' trouble, windows,
round trips and sequence numbers: a summary by default, the samples on request (--series) or
in a file (-o FILE.csv|.json), the figure with -o FILE.png|.svg (--from/--to: its zoom).

Without --stream the per-stream commands take the TCP stream with the most payload bytes and
say which on stderr; ``--stream all`` takes every stream with data (a figure a stream).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, JOBS, SCHEDULER, TABLE_FILE, Fmt, app,
                  workers)
from .output import FROM, TO, emit, finish, output_kind, run, stream_choice, zoom

STREAM = typer.Option(None, "--stream", "-s", metavar="N|all",
                      help="TCP stream index, or 'all' (default: the one with the most "
                           "payload bytes).", show_default=False)
OUTPUT = typer.Option(None, "--output", "-o", metavar="FILE", show_default=False,
                      help="Write the figure (.png, .svg) or the samples (.csv, .json) here.")
FORMAT = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json (standard output).")
SERIES = typer.Option(False, "--series", help="Print the samples (one row each) instead of the "
                                              "summary.")


class Style(str, Enum):
    stevens = "stevens"
    tcptrace = "tcptrace"


class Side(str, Enum):
    auto = "auto"
    sender = "sender"
    receiver = "receiver"


@app.command()
def retrans(
    files: List[Path] = CAPTURE_FILES,
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP stream.",
                                         show_default=False),
    events: bool = typer.Option(False, "--events", help="One row per re-sent or flagged packet "
                                                        "instead of the counts."),
    fmt: Fmt = FORMAT, all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = TABLE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Re-sent segments and Wireshark's tcp.analysis flags.

    Re-sent segments (what the sender's kernel counts) beside Wireshark's tcp.analysis flags
    (retransmission, fast, spurious, out-of-order, lost, duplicate ACK, zero window ...), per
    stream and direction; --events lists the packets with their frame numbers.

    \b
    Example: pcapstats retrans run.pcap --events -o events.csv
    """
    from ..analyses.retrans import Retrans, retrans as retrans_of  # lazy: start-up
    output_kind(output, Retrans)
    result, failed = run(retrans_of, files, stream=stream, **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="events" if events else "counts",
             all_columns=all_columns)
    finish(result, failed)


@app.command()
def cwnd(
    files: List[Path] = CAPTURE_FILES, stream: Optional[str] = STREAM, output: Optional[Path] = OUTPUT,
    fmt: Fmt = FORMAT, series: bool = SERIES, all_columns: bool = ALL_COLUMNS,
    losses: bool = typer.Option(False, "--losses", help="Print the loss episodes instead of the "
                                                        "summary."),
    window_scaling: bool = typer.Option(False, "--window-scaling",
                                        help="Draw Wireshark's Window Scaling graph instead."),
    side: Side = typer.Option(Side.auto, "--side",
                              help="Where the capture was taken (auto: from the "
                                   "handshake, which packets trigger which, and TTLs)."),
    from_s: Optional[float] = FROM, to_s: Optional[float] = TO,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Congestion window over time: its peak, loss episodes, limits.

    The estimate is bytes in flight when cwnd-limited, with the
    receiver's window, loss episodes and the intervals where the flow was receiver-window-,
    application-limited or recovering.  Prints a summary a stream.

    \b
    Example: pcapstats cwnd run.pcap --stream 3 -o cwnd.png --from 1 --to 1.5
    """
    from ..analyses.cwnd import Cwnd, cwnd as cwnd_of  # lazy: start-up
    output_kind(output, Cwnd)
    window = zoom(output, from_s, to_s)
    result, failed = run(cwnd_of, files, stream=stream_choice(stream), side=side.value,
                         **workers(jobs, scheduler, dask))
    if window_scaling:
        _window_scaling(result, failed, fmt, output, series, all_columns, window)
        return
    table = "losses" if losses else "samples" if series else None
    nothing = result is not None and not result.rows("samples")
    if result is not None and (not nothing or losses):
        emit(result, fmt=fmt.value, output=output, table=table, figure=window,
             all_columns=all_columns)
    streams = "" if result is None else ", ".join(str(p.stream) for p in result.parts)
    finish(result, failed, nothing=nothing and not losses,
           empty=f"no cwnd samples in stream {streams} (no data segment could be timed "
                 "against the ACK it was sent after)")


@app.command()
def limits(
    files: List[Path] = CAPTURE_FILES,
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP stream "
                                         "(default: every one with data).", show_default=False),
    output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT, all_columns: bool = ALL_COLUMNS,
    intervals: bool = typer.Option(False, "--intervals", help="Print the runs of time under "
                                                              "each limit instead."),
    side: Side = typer.Option(Side.auto, "--side",
                              help="Where the capture was taken (auto: from the "
                                   "handshake, which packets trigger which, and TTLs)."),
    from_s: Optional[float] = FROM, to_s: Optional[float] = TO,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """What held each TCP sender back: its window, the receiver's, loss, itself, or idle.

    Per stream, shares of its time limited by the congestion window, in loss recovery, by
    the receiver's window, by a zero window, by the sender itself (its application, send
    buffer or pacing) or idle, with its goodput and the largest limit; at the receiver a
    self-limited sender cannot be told from a window-limited one (said).  --intervals lists
    the runs over time; -o x.png draws each stream's window with them coloured in.

    \b
    Example: pcapstats limits run.pcap -o limits.png
    """
    from ..analyses.limits import Limits, limits as limits_of  # lazy: start-up
    output_kind(output, Limits)
    window = zoom(output, from_s, to_s)
    result, failed = run(limits_of, files, stream=stream, side=side.value,
                         **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="limited" if intervals else None,
             figure=window, all_columns=all_columns)
    finish(result, failed)


@app.command()
def wscale(files: List[Path] = CAPTURE_FILES, stream: Optional[str] = STREAM,
           output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT, series: bool = SERIES,
           all_columns: bool = ALL_COLUMNS, from_s: Optional[float] = FROM,
           to_s: Optional[float] = TO, jobs: Optional[int] = JOBS,
           scheduler: Optional[str] = SCHEDULER, dask: bool = DASK, explain: bool = EXPLAIN):
    """Wireshark's Window Scaling graph: bytes in flight and rwnd.

    Bytes in flight per data segment and the receiver's
    calculated window (the same as `cwnd --window-scaling`).

    \b
    Example: pcapstats wscale run.pcap -o wscale.png
    """
    from ..analyses.cwnd import Cwnd, cwnd as cwnd_of  # lazy: start-up
    output_kind(output, Cwnd)
    window = zoom(output, from_s, to_s)
    result, failed = run(cwnd_of, files, stream=stream_choice(stream),
                         **workers(jobs, scheduler, dask))
    _window_scaling(result, failed, fmt, output, series, all_columns, window)


def _window_scaling(result, failed, fmt: Fmt, output: Optional[Path], series: bool,
                    all_columns: bool, window: dict) -> None:
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="flight" if series else None,
             figure={"graph": "wscale", **window}, all_columns=all_columns)
    finish(result, failed)


@app.command()
def rtt(files: List[Path] = CAPTURE_FILES, stream: Optional[str] = STREAM,
        output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT, series: bool = SERIES,
        all_columns: bool = ALL_COLUMNS, from_s: Optional[float] = FROM,
        to_s: Optional[float] = TO, jobs: Optional[int] = JOBS,
        scheduler: Optional[str] = SCHEDULER, dask: bool = DASK, explain: bool = EXPLAIN):
    """Round-trip times per stream and direction, and the path RTT.

    Wireshark's ACK RTT, the Karn-filtered one and the timestamp RTT, per
    direction (samples, min, mean, median, p95, max), and which of them is the path's round
    trip on this capture's side.  The figure draws that one, its base (min) and under-load
    (median) lines, and the other series only where they span the whole round trip.

    \b
    Example: pcapstats rtt run.pcap -o rtt.png
    """
    from ..analyses.rtt import Rtt, rtt as rtt_of  # lazy: start-up
    output_kind(output, Rtt)
    window = zoom(output, from_s, to_s)
    result, failed = run(rtt_of, files, stream=stream_choice(stream), **workers(jobs, scheduler, dask))
    if result is not None and not result.empty:
        emit(result, fmt=fmt.value, output=output, table="samples" if series else None,
             figure=window, all_columns=all_columns)
    finish(result, failed, empty="no RTT samples in this stream (no data was acknowledged)")


@app.command()
def seqgraph(files: List[Path] = CAPTURE_FILES, stream: Optional[str] = STREAM,
             output: Optional[Path] = OUTPUT, fmt: Fmt = FORMAT, series: bool = SERIES,
             all_columns: bool = ALL_COLUMNS,
             style: Style = typer.Option(Style.stevens, "--style", help="stevens or tcptrace."),
             from_s: Optional[float] = FROM, to_s: Optional[float] = TO,
             jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER,
             dask: bool = DASK, explain: bool = EXPLAIN):
    """Sequence numbers against time (Stevens or tcptrace graph).

    Wireshark's Stevens or tcptrace graph of the data segments; the
    summary says how much was sent and re-sent, --series lists the data segments.

    \b
    Example: pcapstats seqgraph run.pcap --style tcptrace -o seq.png
    """
    from ..analyses.seqgraph import SeqGraph, seqgraph as seqgraph_of  # lazy: start-up
    output_kind(output, SeqGraph)
    window = zoom(output, from_s, to_s)
    result, failed = run(seqgraph_of, files, stream=stream_choice(stream),
                         **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, table="segments" if series else None,
             figure={"style": style.value, **window}, all_columns=all_columns)
    finish(result, failed)
