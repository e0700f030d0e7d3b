"""`pcapstats compare`: a study's captures side by side, or grouped by their labels with the
trials aggregated.  Definitions: pcapstats.study (labels, metrics, compare)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PcapstatsWarning, UsageError
from .app import (ALL_COLUMNS, CAPTURE_FILES, DASK, EXPLAIN, FIGURE_FILE, JOBS, SCHEDULER, Fmt,
                  app, say, say_notes, workers)
from .output import emit, finish, output_kind, progress_bar

BY = typer.Option(None, "--by", metavar="LABEL,...", help="Group the captures by these labels "
                  "(cc,loss): one row a group, trials aggregated (n, mean, sd, 95 % CI).")
METRICS = typer.Option(None, "--metrics", "-m", metavar="NAME,...", help="Only these metrics "
                       "(`pcapstats columns compare` lists them).")
LABELS = typer.Option(None, "--label", "-l", metavar="REGEX", help="Labels from the file path: "
                      "named groups, e.g. 'loss(?P<loss_pct>\\d+)pct' (repeatable).")
STUDY = typer.Option(None, "--study", metavar="FILE", help="Labels from a .csv or .toml file: "
                     "file, then label=value.")
INTERVAL = typer.Option(1.0, "--interval", "-i", help="I/O graph interval of the peak, s.")


@app.command()
def compare(
    files: List[Path] = CAPTURE_FILES,
    by: Optional[str] = BY,
    metrics: Optional[str] = METRICS,
    label: Optional[List[str]] = LABELS,
    study: Optional[Path] = STUDY,
    interval: float = INTERVAL,
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="table, csv or json."),
    output: Optional[Path] = FIGURE_FILE,
    iographs: bool = typer.Option(False, "--iographs", help="The figure (-o x.png): the I/O "
                                  "graphs, one panel a capture (a group with --by)."),
    models: bool = typer.Option(False, "--models", help="The figure (-o x.png): each capture's "
                                "goodput against its loss rate, with the Mathis and Padhye "
                                "models' curves."),
    captures: bool = typer.Option(False, "--captures", help="One row a capture even with --by."),
    trials_for: Optional[str] = typer.Option(
        None, "--trials-for", metavar="[METRIC=]WIDTH", help="How many trials a group needs "
        "for its 95 % interval to be this narrow, from its own spread: 10% (of the goodput's "
        "mean), 'rtt median=2ms', goodput=0.5mbit."),
    all_columns: bool = ALL_COLUMNS,
    jobs: Optional[int] = JOBS,
    scheduler: Optional[str] = SCHEDULER,
    dask: bool = DASK,
    explain: bool = EXPLAIN,
):
    """Captures side by side: throughput, goodput, re-sends, RTT, UDP loss, fairness, flavour.

    One row a capture with its labels (the lab sidecar's cc, loss, delay, rate, pairs,
    trial, tool; --study, --label), or with --by one row a group: n, and each metric's
    mean with the half-width of its 95 % confidence interval (Student's t).  Every number
    is the one its own command gives (avg and peak: `pcapstats iograph`; re-sent:
    `retrans`; RTT: `rtt`; UDP loss and jitter: `udp`; Jain: `fairness`; flavour,
    verify); one that does not apply is empty.  Labels sort by their number (0, 1, 10,
    30 %).  -o x.png draws each metric against the first --by label with its confidence
    bars (--iographs: the I/O graphs; --models: goodput against loss beside the Mathis and
    Padhye models); -o x.csv / x.json writes the table.

    \b
    Examples:
      pcapstats compare captures/sp-*.pcap --by cc,loss
      pcapstats compare runs/*.pcap --by loss -o loss.png
      pcapstats compare runs/*.pcap --by loss --trials-for 10%
      pcapstats compare wifi/*.pcap --by distance --label '(?P<distance>close|far)'
      pcapstats compare runs/*.pcap --study study.csv --by distance -f csv -o study.csv
    """
    from ..study.compare import Compare  # lazy: every analysis, for this command only
    kind = output_kind(output, Compare)
    if (iographs or models) and kind != "figure":
        raise UsageError(f"{'--iographs' if iographs else '--models'} chooses the figure: give "
                         "-o FILE.png or .svg")
    if iographs and models:
        raise UsageError("--iographs and --models are two figures: give one")
    if trials_for is not None and (kind == "figure" or captures):
        raise UsageError("--trials-for gives a table of the groups: leave out "
                         + ("--captures" if captures else "the figure (-o FILE.png)"))
    plan = plan_study(files, by=by, metrics=metrics, label=label, study=study,
                      interval=interval, trials_for=trials_for)
    result, failed = run_study(plan, **workers(jobs, scheduler, dask),
                               keep={"iograph"} if iographs else set())
    nothing = result is not None and not result.has_values()
    if result is not None and not nothing:
        emit(result, fmt=fmt.value, output=output, all_columns=all_columns,
             table="trials" if trials_for is not None else
             "groups" if by and not captures else "captures",
             figure={"kind": "iographs" if iographs else "models" if models else "metrics"})
    finish(result, failed, nothing=nothing, empty=nothing and result.nothing_said())


def plan_study(files, *, by, metrics, label, study, interval, trials_for=None):
    """The study's plan (its captures, labels and metrics), what reading its labels warned of
    said on stderr, one line each, before any capture is analysed."""
    from ..study.compare import Study  # lazy: see compare()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PcapstatsWarning)
        plan = Study.plan(files, by=by, metrics=metrics, labels=label or (), study=study,
                          interval=interval, trials_for=trials_for)
    for w in caught:
        say("warning", str(w.message))
    return plan


def run_study(plan, *, jobs: Optional[int], scheduler: Optional[str] = None, keep=frozenset(),
              function=None, preload=(), failures: list | None = None, **options):
    """(the comparison of every capture that was read, or None; how many failed), saying each
    capture's warnings and errors on stderr, one line each, as they come (and adding the
    errors to ``failures``).  ``function``: the worker (default: the metrics alone), given
    ``options`` too; ``jobs``, ``scheduler``: where the captures run (pcapstats.pool)."""
    from ..study.compare import Compare  # lazy: see compare()
    measured, failed = [], 0
    with progress_bar(plan.sources) as moved:
        for outcome in plan.outcomes(jobs=jobs, scheduler=scheduler, function=function,
                                     keep=frozenset(keep), preload=preload, progress=moved,
                                     **options):
            for text in outcome.warnings:
                say("warning", text)
            if outcome.error is not None:
                say("error", str(outcome.error))
                failed += 1
                if failures is not None:
                    failures.append(str(outcome.error))
            else:
                measured.append(outcome.result)
    if not measured:
        return None, failed
    result = Compare(plan, measured, several=True, notes=plan.notes())
    say_notes((None, note) for note in result.notes)
    return result, failed
