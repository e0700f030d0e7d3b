"""`pcapstats report`: a study as one self-contained HTML file (pcapstats.study.report)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UsageError
from .app import CAPTURE_FILES, DASK, EXPLAIN, JOBS, SCHEDULER, app, say, workers
from .compare import BY, INTERVAL, LABELS, METRICS, STUDY, plan_study, run_study
from .output import finish

REPORT_FILE = typer.Option(..., "--output", "-o", metavar="FILE.html", show_default=False,
                           help="Write the report here (.html).")


@app.command()
def report(
    files: List[Path] = CAPTURE_FILES,
    output: Path = REPORT_FILE,
    by: Optional[str] = BY,
    metrics: Optional[str] = METRICS,
    label: Optional[List[str]] = LABELS,
    study: Optional[Path] = STUDY,
    interval: float = INTERVAL,
    title: Optional[str] = typer.Option(None, "--title", help="The report's title."),
    jobs: Optional[int] = JOBS,
    scheduler: Optional[str] = SCHEDULER,
    dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """A study as one HTML file: tables, figures, each capture, every definition.

    The comparison of `pcapstats compare` (groups with --by, and every capture), its
    figures (each metric against the first --by label with 95 % confidence bars; the I/O
    graphs), then a section a capture: its streams, protocol hierarchy, I/O graph, the
    cwnd estimate of its main TCP stream, verify's verdicts with their evidence; and the
    definition of every column shown.  Figures are embedded and the style is inline: the
    one file is all there is to send or open, offline.

    \b
    Examples:
      pcapstats report captures/sp-*.pcap --by cc,loss -o study.html
      pcapstats report wifi/*.pcap --study study.toml --by distance -o wifi.html
    """
    from ..study.report import PRELOAD, capture_report, write  # lazy: matplotlib and every analysis
    if output.suffix.lower() not in (".html", ".htm"):
        raise UsageError("a report is an HTML file", path=str(output),
                         hint="name it with .html, e.g. -o study.html")
    if not output.parent.is_dir():          # say so before reading every capture
        raise UsageError("cannot write the report: no such directory", path=str(output))
    plan = plan_study(files, by=by, metrics=metrics, label=label, study=study,
                      interval=interval)
    failures: list[str] = []
    result, failed = run_study(plan, **workers(jobs, scheduler, dask), function=capture_report,
                               preload=PRELOAD, failures=failures, names=plan.names())
    if result is not None:
        write(result, output, failures=failures, title=title)
        say("note", f"wrote {output} ({len(result.captures)} captures)")
    nothing = result is not None and not result.has_values()
    finish(result, failed, nothing=nothing, empty=nothing and result.nothing_said())
