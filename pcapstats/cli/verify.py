"""`pcapstats verify`: was the app protocol followed?  A verdict per stream, with evidence.

Exit status (the policy of every command, pcapstats.cli.app): 0 when every recognised stream
passes, or passes except for checks the capture cannot decide ("cannot tell": a warning line
each, since a capture cut by the snaplen is not evidence that anything went wrong;
``--strict`` makes them exit 1); 1 when nothing in the captures could be verified (one line
says what was looked for) or, as test(1) answers no, when a check fails; 2 when a capture
could not be read or the options are bad.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UsageError
from ..units import parse_simpleperf_size
from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, JOBS, NOTHING, SCHEDULER,
                  TABLE_FILE, Fmt, app, say, workers)
from .output import emit, output_kind, run

EXIT_FAIL = 1


class App(str, Enum):
    simpleperf = "simpleperf"
    iperf3 = "iperf3"
    ping = "ping"


@app.command()
def verify(
    files: List[Path] = CAPTURE_FILES,
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", metavar="FILE", help="Lab sidecar JSON (default: the one beside each capture, if any)."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP/UDP stream."),
    app_name: Optional[App] = typer.Option(None, "--app", help="Check TCP streams that look like no protocol as this one (with --port: the streams of that server port)."),
    port: Optional[int] = typer.Option(None, "--port", metavar="N", help="Streams to server port N are --app's protocol (default simpleperf), whatever they look like."),
    time_s: Optional[float] = typer.Option(None, "--time", "-t", metavar="S", help="simpleperf -t: the client sent for S seconds."),
    num: Optional[str] = typer.Option(None, "--num", "-n", metavar="SIZE", help="simpleperf -n: bytes a connection, e.g. 10MB, 1KB, 500B."),
    parallel: Optional[int] = typer.Option(None, "--parallel", "-P", metavar="N", help="simpleperf -P: connections between the pair."),
    size: Optional[int] = typer.Option(None, "--size", metavar="BYTES", help="simpleperf message size (default 1000)."),
    client_output: Optional[Path] = typer.Option(None, "--client-output", metavar="FILE", help="The simpleperf client's printed report: its Transfer and Bandwidth are checked against the wire."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table (verdicts + evidence), csv or json (one row per check)."),
    output: Optional[Path] = TABLE_FILE,
    all_columns: bool = ALL_COLUMNS,
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a check cannot be decided."),
    jobs: Optional[int] = JOBS, scheduler: Optional[str] = SCHEDULER, dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Was the app protocol followed?  simpleperf, iperf3, ping.

    Checks each stream's traffic against its tool's protocol.  simpleperf is recognised by
    the shape of its exchange (messages, BYE, ACK: BYE, close), whoever wrote it; a stream
    that looks like no protocol is checked when --port / --app say what it is.

    Verdicts: pass, fail (expected vs found, with frames) or cannot tell (the capture lacks
    the bytes: snaplen, missed packets, start or end not captured).  The table gives a
    verdict a stream with the evidence of what failed; csv and json give one row a check
    with what was expected, what was found and the frames (`pcapstats columns verify`).
    A lab sidecar beside the capture adds what was asked (-t, -n, -P) to the checks; without
    one, say it with --time, --num, --parallel (and --size for messages other than 1000 B).
    --client-output checks the Transfer and Bandwidth the client printed against the wire.

    \b
    Examples:
      pcapstats verify run.pcap
      pcapstats verify run.pcap -t 10 --client-output client.txt
      pcapstats verify run.pcap --port 9000 --size 1024 -n 10MB
      pcapstats verify run.pcap --app iperf3
      pcapstats verify captures/*.pcap -f csv -o checks.csv
    """
    from ..analyses.verify import (  # lazy: start-up
        CANNOT_TELL, FAIL, Expected, Verification, parse_client_output, verify as verify_of)
    output_kind(output, Verification)
    if time_s is not None and num is not None:
        raise UsageError("use --time (seconds) or --num (bytes), not both",
                         hint="a simpleperf client runs for -t seconds or sends -n bytes")
    asked = None
    if any(x is not None for x in (time_s, num, parallel, size)):
        asked = Expected(time_s=time_s, parallel=parallel, message_bytes=size,
                         num_bytes=parse_simpleperf_size(num) if num is not None else None)
    printed = parse_client_output(client_output) if client_output is not None else None
    result, failed = run(verify_of, files, sidecar=sidecar or "auto", stream=stream,
                         expected=asked, app=app_name.value if app_name else None, port=port,
                         client_output=printed, **workers(jobs, scheduler, dask))
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
                say(NOTHING, f"{path}: nothing recognised to verify (no simpleperf, iperf3 "
                             "or ping traffic; --port N / --app say what a stream is)")
    if failed:
        raise typer.Exit(failed.exit_code())
    verdicts = [v.verdict for part in result.parts for v in part.verdicts]
    if FAIL in verdicts or not verdicts or (strict and CANNOT_TELL in verdicts):
        raise typer.Exit(EXIT_FAIL)
