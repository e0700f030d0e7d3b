"""`pcapstats verify`: was the app protocol followed?  A verdict per stream, with evidence.

Exit status: 0 when every recognised stream passes, or passes except for checks the capture
cannot decide ("cannot tell": a warning line each, since a capture cut by the snaplen is not
evidence that anything went wrong; ``--strict`` makes them exit 1); 1 when any check fails or
nothing in the captures could be verified; 2 when a capture could not be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..analyses.verify import CANNOT_TELL, FAIL, Verification, verify as verify_of
from .app import ALL_COLUMNS, CAPTURE_FILES, TABLE_FILE, EXIT_ERROR, Fmt, say, app
from .output import emit, output_kind, run

EXIT_FAIL = 1


@app.command()
def verify(
    files: List[Path] = CAPTURE_FILES,
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", metavar="FILE", help="Lab sidecar JSON (default: the one beside each capture, if any)."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP/UDP stream."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table (verdicts + evidence), csv or json (one row per check)."),
    output: Optional[Path] = TABLE_FILE,
    all_columns: bool = ALL_COLUMNS,
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a check cannot be decided."),
):
    """Was the app protocol followed?  simpleperf, iperf3, ping.

    Checks each stream's traffic against its tool's protocol.

    Verdicts: pass, fail (expected vs found, with frames) or cannot tell (the capture lacks
    the bytes: snaplen, missed packets, start or end not captured).  The table gives a
    verdict a stream with the evidence of what failed; csv and json give one row a check
    with what was expected, what was found and the frames (`pcapstats columns verify`).
    A lab sidecar beside the capture adds what was asked (-t, -n, -P) to the checks.

    \b
    Examples:
      pcapstats verify run.pcap
      pcapstats verify captures/*.pcap -f csv -o checks.csv
    """
    output_kind(output, Verification)
    result, failed = run(verify_of, files, sidecar=sidecar or "auto", stream=stream)
    if result is not None:
        table = "streams" if fmt == Fmt.table and output is None else "checks"
        emit(result, fmt=fmt.value, output=output, table=table, all_columns=all_columns)
        for part in result.parts:
            path = part.captures[0]
            for v in part.verdicts:
                if v.verdict == CANNOT_TELL:
                    say("warning", f"{path}: {v.proto} stream {v.stream} ({v.app}): cannot "
                                    f"tell: {v.why()}")
            if not part.verdicts:
                say("warning", f"{path}: nothing recognised to verify (no simpleperf, iperf3 "
                                "or ping traffic)")
    if failed:
        raise typer.Exit(EXIT_ERROR)
    verdicts = [v.verdict for part in result.parts for v in part.verdicts]
    if FAIL in verdicts or not verdicts or (strict and CANNOT_TELL in verdicts):
        raise typer.Exit(EXIT_FAIL)
