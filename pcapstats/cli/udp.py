"""`pcapstats udp`: UDP flows as iperf's server reports them."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..analyses.udp import Udp, udp as udp_of
from .app import ALL_COLUMNS, CAPTURE_FILES, TABLE_FILE, Fmt, app
from .output import emit, finish, output_kind, run


@app.command()
def udp(
    files: List[Path] = CAPTURE_FILES,
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this UDP stream.",
                                         show_default=False),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    all_columns: bool = ALL_COLUMNS,
    output: Optional[Path] = TABLE_FILE,
):
    """UDP loss, order and jitter per flow, as iperf's server counts them.

    One row per UDP stream and direction: datagrams, bytes, rate, and -- from the counters and
    send times iperf (iperf3, 32- or 64-bit counters, or iperf2) writes in each datagram --
    sent, lost, out of order, duplicates and RFC 3550 jitter, counted as iperf3's server
    counts them.  Other flows get jitter from their arrival spacing (for constant-rate
    senders) and no loss.  Numbers are what the capture point saw: capture at the receiver for
    the server's view.  Every column: `pcapstats columns udp`.

    \b
    Examples:
      pcapstats udp receiver.pcap
      pcapstats udp runs/*.pcap -f csv -o udp.csv
    """
    output_kind(output, Udp)
    result, failed = run(udp_of, files, stream=stream)
    if result is not None:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns)
    finish(result, failed)
