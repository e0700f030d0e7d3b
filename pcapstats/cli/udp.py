"""`pcapstats udp`: UDP flows as iperf's server reports them, or from two captures matched."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import typer

from ..errors import UsageError
from .app import ALL_COLUMNS, DASK, EXPLAIN, JOBS, SCHEDULER, TABLE_FILE, Fmt, app, workers
from .output import emit, finish, output_kind, run

# CAPTURE_FILES, made optional: --pair takes the place of the files
FILES = typer.Argument(None, metavar="CAPTURE", show_default=False,
                       help="Capture files: pcap, pcapng, or either gzipped.")


@app.command()
def udp(
    files: Optional[List[Path]] = FILES,
    pair: Optional[Tuple[Path, Path]] = typer.Option(
        None, "--pair", metavar="SENDER RECEIVER", show_default=False,
        help="Two captures of the same traffic, the sender's then the receiver's: loss, order "
             "and jitter of flows without iperf's counters by matching their datagrams.  "
             "Instead of CAPTURE files, not with them."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this UDP stream "
                                         "(with --pair: as numbered in SENDER).",
                                         show_default=False),
    counters: bool = typer.Option(True, "--counters/--no-counters",
                                  help="Read iperf's counters (--no-counters: with --pair, "
                                       "iperf flows are matched too)."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = TABLE_FILE,
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """UDP loss, order and jitter per flow, as iperf's server counts them.

    One row per UDP stream and direction: datagrams, bytes, rate, and -- from the counters and
    send times iperf (iperf3, 32- or 64-bit counters, or iperf2) writes in each datagram --
    sent, lost, out of order, duplicates and RFC 3550 jitter, counted as iperf3's server
    counts them.  Other flows get jitter from their arrival spacing (for constant-rate
    senders) and no loss.  Numbers are what the capture point saw: capture at the receiver for
    the server's view.

    With --pair SENDER RECEIVER (two captures of the same traffic, taken where it was sent
    and further on), each flow of SENDER is found in RECEIVER by its addresses and ports and
    its datagrams are matched (IP id, length, payload hash): sent, lost, out of order,
    duplicates and the jitter of the transit time, for any UDP flow; the rows show what
    arrived at RECEIVER.  --pair replaces the CAPTURE files: both at once are refused, as it
    would not be clear which capture is matched against which.  Every column and what it
    means: `pcapstats columns udp`.

    \b
    Examples:
      pcapstats udp receiver.pcap
      pcapstats udp runs/*.pcap -f csv -o udp.csv
      pcapstats udp --pair run.sender.pcap run.receiver.pcap
    """
    from ..analyses.udp import Udp, udp as udp_of  # lazy: start-up
    output_kind(output, Udp)
    if pair is not None and files:
        raise UsageError(f"--pair takes its two captures itself: {len(files)} more capture "
                         "file(s) given with it",
                         hint="give either CAPTURE files or --pair SENDER RECEIVER")
    if pair is None and not files:
        raise UsageError("no capture given",
                         hint="give CAPTURE files, or --pair SENDER RECEIVER")
    if pair is not None:
        sender, receiver = pair
        result, failed = run(udp_of, [sender], receiver=receiver, stream=stream,
                             counters=counters, **workers(jobs, scheduler, dask))
    else:
        result, failed = run(udp_of, files, stream=stream, counters=counters,
                             **workers(jobs, scheduler, dask))
    if result is not None:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns)
    finish(result, failed)
