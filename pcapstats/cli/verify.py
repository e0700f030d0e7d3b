"""`pcapstats verify`: was the app protocol followed?  A verdict per stream, with evidence.

Exit status: 0 when every recognised stream passes, or passes except for checks the capture
cannot decide ("cannot tell": a warning line each, since a capture cut by the snaplen is not
evidence that anything went wrong; ``--strict`` makes them exit 1); 1 when any check fails or
nothing in the captures could be verified; 2 when a capture could not be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import typer

from .app import EXIT_ERROR, Captures, Fmt, _say, _write, app, stack, with_capture_column

EXIT_FAIL = 1


@app.command()
def verify(
    files: List[Path] = typer.Argument(..., help="Capture files (pcap, pcapng, .gz).", show_default=False),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Lab sidecar JSON (default: the one beside each capture, if any)."),
    stream: Optional[int] = typer.Option(None, "--stream", "-s", help="Only this TCP/UDP stream."),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table (verdicts + evidence), csv or json (one row per check)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file, not stdout."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a check cannot be decided."),
):
    """Check simpleperf, iperf3 and ping traffic against each tool's protocol.

    Verdicts: pass, fail (expected vs found, with frames) or cannot tell (the capture lacks
    the bytes: snaplen, missed packets, start or end not captured).  Rules and tolerances:
    `python3 -c "import pcapstats.analyses.verify as v; help(v)"`.
    """
    from ..analyses.verify import CANNOT_TELL, FAIL, verify as run_verify
    from ..lab.sidecar import sidecar_for
    from ..render import render

    def work(path, progress):
        side = sidecar
        if side is None:
            found = sidecar_for(path)
            side = found if found.exists() else None
        return run_verify(path, side, stream=stream)

    captures = Captures(files, work)
    results = list(captures)
    text = _table(results) if fmt.value == "table" else _rows(results, fmt.value, render)
    if results:
        _write(text, output)
    verdicts = [v.verdict for _, r in results for v in r.streams]
    for path, r in results:
        for note in r.notes:
            _say("warning", f"{path}: {note}")
        for v in r.streams:
            if v.verdict == CANNOT_TELL:
                _say("warning", f"{path}: {v.proto} stream {v.stream} ({v.app}): cannot tell: "
                                f"{v.why()}")
        if not r.streams:
            _say("warning", f"{path}: nothing recognised to verify (no simpleperf, iperf3 or "
                            "ping traffic)")
    if captures.failed:
        raise typer.Exit(EXIT_ERROR)
    if FAIL in verdicts or not verdicts or (strict and CANNOT_TELL in verdicts):
        raise typer.Exit(EXIT_FAIL)


def _table(results) -> str:
    """Per capture: the verdict table, then each stream's checks and evidence, indented."""
    from ..render import render
    out = []
    for path, r in results:
        out.append(f"{path}: {r.verdict.upper()}")
        if not r.streams:
            out.append("  (nothing recognised)\n")
            continue
        out.append(render(r.table(), "table").rstrip("\n"))
        for v in r.streams:
            out.append(f"  {v.proto} stream {v.stream} ({v.app}, {v.client} -> {v.server}): "
                       f"{v.verdict}")
            for c in v.checks:
                where = f"  [frames {' '.join(map(str, c.frames))}]" if c.frames else ""
                out.append(f"    {c.verdict:<11}  {c.name}: expected {c.expected}; found "
                           f"{c.found}{where}")
            for e in v.evidence:
                out.append(f"    evidence     {e}")
        out.append("")
    return "\n".join(out) + "\n"


def _rows(results, fmt: str, render) -> str:
    tables = []
    for path, r in results:
        t = r.checks()
        verdict = {v.stream: v.verdict for v in r.streams}
        t["stream_verdict"] = np.array([verdict[s] for s in t["stream"]], object)
        tables.append(with_capture_column(t, path))
    return render(stack(tables), fmt) if tables else ""
