"""A grid of lab runs from a TOML spec: one capture + sidecar per cell, resumable.

A spec has a ``[base]`` scenario and ``[axes]``, lists whose cartesian product makes the cells;
``trials = N`` (top level) adds the axis ``trial = 1..N``.  Several differently shaped grids go
in ``[[group]]`` tables, each with its own ``base`` (laid over the top-level one), ``axes``
(none: one cell), optional ``name`` template and ``about`` (a description, ``{fields}`` of the
scenario filled in; captures/make_captures.py puts it in captures/README.md)::

    trials = 2                  # optional; before the first table (TOML puts a key after
                                # [axes] inside it: trials = N there is taken the same)
    [base]                      # pcapstats.lab.Scenario fields, written as on the command line
    tool = "simpleperf"
    rate = "20mbit"
    delay = "10ms"
    duration_s = 3
    parallel = [2, 1, 1]        # per-pair values are lists (cc, parallel), one a pair
    pairs = 3
    snaplen = 128

    [axes]
    cc = ["reno", "cubic"]
    loss = ["0%", "1%", "10%"]

A topology file's cells: ``topology = "FILE"`` in ``[base]`` (a path relative to the spec),
and axes over its values, ``"link.A-B.FIELD"`` (a link by its ends), ``"pair.K.FIELD"`` (K from
1) and ``"run.FIELD"``; each cell runs the file with those values set
(:mod:`pcapstats.lab.network_run`); nothing else goes in ``[base]`` then::

    [base]
    topology = "../topologies/seed000.toml"

    [axes]
    "link.r2-r3.rate" = ["10mbit", "30mbit"]
    "pair.1.cc" = ["reno", "cubic"]

A cell's file name is its ``name`` template (``"sp-{cc}-loss{loss}"``, fields of the cell's
scenario) or else its axis values in axis order, ``cc-reno_loss-10pct_trial-1``; ``%`` becomes
``pct``, a list (per-pair cc) is joined with ``+``, anything but letters, digits, ``.+-`` with
``-``.  Each cell writes ``DIR/<name>.pcap`` (or ``.sender/.receiver.pcap`` for capture "both",
``.sender/.router/.receiver.pcap`` for "all") and ``DIR/<name>.json`` (see
:mod:`pcapstats.lab.sidecar`).

Resuming: a cell whose sidecar is complete (status complete, every capture present at its
recorded size) is skipped; any other cell (never run, failed, interrupted, killed half-way) is
run again from scratch.  One failing cell does not stop the others; Ctrl-C stops the matrix
(the running cell is saved as ``interrupted`` and will be redone).

Out of spec: a cell whose achieved values are outside the tolerance (its sidecar's
``achieved``, :mod:`pcapstats.lab.accuracy`) is run once more; if the second attempt is out of
spec too (or cannot be judged), the cell's status is ``out of spec`` with what was, and its
sidecar's ``achieved.retried_after`` holds what the first attempt missed.  A complete cell found out of
spec when resuming is reported so, not run again.
"""

from __future__ import annotations

import itertools
import math
import string
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pcapstats.errors import PcapstatsError, UsageError
from pcapstats import sidecar
from pcapstats.lab import network, specfile
from pcapstats.lab.network import Network
from pcapstats.lab.network_run import run_network
from pcapstats.paths import line_of
from pcapstats.lab.run import Scenario, run
from pcapstats.lab.sidecar import write_sidecar


@dataclass
class Cell:
    name: str
    scenario: Scenario | None  # None: a topology file's cell
    params: dict  # the axis values that make this cell
    about: str = ""  # the group's description, its {fields} filled in
    network: Network | None = None  # a topology file's cell: the file with its axis values

    @property
    def format(self) -> str:
        return self.network.format if self.network else self.scenario.format


@dataclass
class CellResult:
    name: str
    status: str  # done | skipped | failed | interrupted | out of spec
    seconds: float
    measured: dict | None
    error: str | None = None


def load_spec(path: str | Path) -> list[Cell]:
    """The cells of a spec file, every scenario validated before anything runs."""
    path = Path(path)
    spec, text = specfile.read(path, "spec file")
    axes_trials = (spec.get("axes") or {}).get("trials") if isinstance(spec.get("axes"),
                                                                        dict) else None
    if axes_trials is not None and not isinstance(axes_trials, list):  # written after [axes]
        spec["trials"] = spec["axes"].pop("trials")
    _check_shape(spec, text, path)
    unknown = set(spec) - {"base", "axes", "trials", "group", "name"}
    if unknown:
        raise UsageError(f"unknown spec key {', '.join(sorted(unknown))}", path=str(path),
                         hint="a spec has base, axes, trials, name and [[group]] tables")
    groups = spec.get("group") or [{}]
    cells: list[Cell] = []
    for g in groups:
        _check_shape(g, text, path, group=True)
        base = {**spec.get("base", {}), **g.get("base", {})}
        axes = {**spec.get("axes", {}), **g.get("axes", {})}
        trials = g.get("trials", spec.get("trials"))
        if trials is not None:                          # a whole number: _check_shape
            axes["trial"] = list(range(1, trials + 1))
        template = g.get("name", spec.get("name"))
        unknown = set(g) - {"base", "axes", "trials", "name", "about"}
        if unknown:
            raise UsageError(f"unknown group key {', '.join(sorted(unknown))}", path=str(path),
                             hint="a group has base, axes, trials, name and about")
        cells += _cells(base, axes, template, path, g.get("about", ""), text)
        if len(cells) > MAX_CELLS:
            raise UsageError(f"the spec makes more than {MAX_CELLS} cells", path=str(path),
                             hint="a matrix is run cell by cell: split it into smaller specs")
    names = [c.name for c in cells]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"two cells would write the same files: {', '.join(twice)}",
                         path=str(path), hint="add the differing field to the name template")
    return cells


MAX_CELLS = 10_000      # runs of seconds each: more is no matrix anyone waits for
MAX_TRIALS = 1000


def _check_shape(spec: dict, text: str, path: Path, group: bool = False) -> None:
    """base and axes are tables, trials a whole number of 1 to MAX_TRIALS, name and about
    text: one line naming the field and its line otherwise."""
    def bad(field, what):
        raise UsageError(f"{'group ' if group else ''}field {field!r} (line "
                         f"{line_of(text, field)}) {what}", path=str(path))
    for field in ("base", "axes"):
        if field in spec and not isinstance(spec[field], dict):
            bad(field, f"must be a table, [{field}]")
    if "group" in spec and not group and not (
            isinstance(spec["group"], list) and all(isinstance(g, dict) for g in spec["group"])):
        bad("group", "must be tables, [[group]]")
    trials = spec.get("trials")
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int)
                               or not 1 <= trials <= MAX_TRIALS):
        bad("trials", f"must be a whole number from 1 to {MAX_TRIALS}, not {trials!r}")
    for field in ("name", "about"):
        if field in spec and not isinstance(spec[field], str):
            bad(field, "must be text")


def _cells(base: dict, axes: dict, template: str | None, path: Path, about: str,
           text: str) -> list[Cell]:
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise specfile.bad_field(path, text, f"axes.{key}", "a non-empty list of values",
                                     values)
    size = math.prod(len(v) for v in axes.values())
    if size > MAX_CELLS:
        raise UsageError(f"the axes make {size:,} cells, more than {MAX_CELLS:,}",
                         path=str(path), hint="a matrix is run cell by cell: split it")
    if "topology" in base:
        return _network_cells(base, axes, template, path, about, text)
    out = []
    for combo in itertools.product(*axes.values()):
        params = dict(zip(axes, combo))
        try:
            scenario = Scenario.from_dict({**base, **params})
            scenario.validate()
            name = cell_name(scenario, params, template)
            said = _formatted(about, scenario.to_dict(), "about") if about else ""
        except PcapstatsError as e:
            field = getattr(e, "field", None)
            if not field:                               # the name or about template
                raise UsageError(f"cell {params}: {getattr(e, 'what', e)}", path=str(path),
                                 hint=getattr(e, "hint", None)) from None
            where = "axes" if field in params else "base"
            what = e.what if e.what.startswith(field) else f"{field}: {e.what}"
            line = specfile.line_of(text, field)
            raise UsageError(f"{where}.{what}" + (f" ({e.hint})" if e.hint else "")
                             + (f"; in the cell {params}" if params else ""),
                             path=f"{path}, line {line}" if line else str(path)) from None
        except (TypeError, ValueError, AttributeError) as e:   # a field of the wrong type
            raise UsageError(f"cell {params}: a field of the wrong type ({e})", path=str(path),
                             hint="write values as on the command line: rate = \"20mbit\", "
                                  "duration_s = 3, cc = \"reno\"") from None
        out.append(Cell(name, scenario, params, said))
    return out


def _network_cells(base: dict, axes: dict, template: str | None, path: Path, about: str,
                   text: str) -> list[Cell]:
    """A topology file's cells: the file with each combination of the axes' values set."""
    if set(base) != {"topology"} or not isinstance(base["topology"], str):
        raise specfile.bad_field(path, text, "base.topology", "the topology file's path (text), "
                                 "alone in [base]: the file sets everything else")
    file = (path.parent / base["topology"]).resolve()
    out = []
    for combo in itertools.product(*axes.values()):
        params = dict(zip(axes, combo))
        try:
            net = network.load(file, overrides=params)
        except PcapstatsError as e:
            raise UsageError(f"{e}; in the cell {params}", path=str(path)) from None
        fields = {"network": net.name, **{k.replace(".", "_").replace("-", "_"): _text(v)
                                          for k, v in params.items()}}
        try:
            said = _formatted(about, fields, "about") if about else ""
            raw = _formatted(template, fields, "name") if template else None
        except UsageError as e:
            raise UsageError(e.what, path=str(path), hint=e.hint) from None
        if not raw:
            raw = "_".join(f"{k}-{_text(v)}" for k, v in params.items()) or net.name
        out.append(Cell(re.sub(r"[^A-Za-z0-9.+_-]", "-", raw), None, params, said,
                        network=net))
    return out


def cell_name(scenario: Scenario, params: dict, template: str | None = None) -> str:
    if template:
        raw = _formatted(template, {k: _text(v) for k, v in scenario.to_dict().items()}, "name")
    else:
        raw = "_".join(f"{k}-{_text(v)}" for k, v in params.items()) or "run"
    name = re.sub(r"[^A-Za-z0-9.+_-]", "-", raw)
    if len(name) > MAX_NAME:
        raise UsageError(f"cell name {name[:40]}... is {len(name)} characters, more than the "
                         f"{MAX_NAME} its files' names can hold",
                         hint="give the group a shorter name template (name = \"...\")")
    return name


MAX_NAME = 200           # a cell's name, with .receiver.pcapng after it, within 255 bytes


def _formatted(template: str, fields: dict, what: str) -> str:
    """A name or about template with the scenario's {fields} filled in (plain {field}s only:
    no format spec, so no template can ask for a width of a billion); one line when it names
    a field there is not or is no template."""
    hint = f"use {{field}} of the scenario: {', '.join(sorted(fields))}"
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        raise UsageError(f"{what} template {template!r}: {e}", hint=hint) from None
    for _, field, spec, conversion in parts:
        if field is not None and (spec or conversion or field not in fields):
            raise UsageError(f"{what} template {template!r}: {{{field}"
                             f"{'!' + conversion if conversion else ''}"
                             f"{':' + spec if spec else ''}}} is no field of the scenario",
                             hint=hint)
    return template.format(**fields)


def _text(value) -> str:
    if isinstance(value, list):
        return "+".join(_text(v) for v in value)
    return str(value).replace("%", "pct").replace(" ", "")


def run_matrix(spec: str | Path, out_dir: str | Path, *,
               on_cell: Callable[[int, int, Cell, str], None] | None = None,
               on_stage: Callable[[str], None] | None = None,
               command: list[str] | None = None) -> list[CellResult]:
    """Run every cell of the spec not complete yet in out_dir; one result a cell, in order.

    ``on_cell(k, total, cell, state)`` is called with state "start", "retry" (the first
    attempt was out of spec), "skipped", "done", "out of spec", "failed";
    ``on_stage(text)`` with each run's progress.  KeyboardInterrupt propagates after the
    running cell has been saved as interrupted.
    """
    cells = load_spec(spec)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    notify = on_cell or (lambda *a: None)
    for k, cell in enumerate(cells):
        output = out_dir / f"{cell.name}.{cell.format}"
        if sidecar.is_complete(sidecar.sidecar_path(output)):
            doc = sidecar.load_sidecar(sidecar.sidecar_path(output))
            missed = _out_of_spec(doc)
            notify(k, len(cells), cell, "skipped")
            results.append(CellResult(cell.name, "out of spec" if missed else "skipped", 0.0,
                                      doc.get("measured"), missed and
                                      f"{missed} (as run before; skipped)"))
            continue
        notify(k, len(cells), cell, "start")
        t0 = time.monotonic()
        try:
            doc = _run_cell(cell, output, on_stage, command)
            first = (doc.get("achieved") or {}).get("out_of_spec")
            if first:                                   # once more: the host may have hiccuped
                notify(k, len(cells), cell, "retry")
                doc = _run_cell(cell, output, on_stage, command)
                if doc.get("achieved"):
                    doc["achieved"]["retried_after"] = first
                    write_sidecar(sidecar.sidecar_path(output), doc)
        except KeyboardInterrupt:
            results.append(CellResult(cell.name, "interrupted", time.monotonic() - t0, None,
                                      "interrupted"))
            raise
        except PcapstatsError as e:
            notify(k, len(cells), cell, "failed")
            results.append(CellResult(cell.name, "failed", time.monotonic() - t0, None, str(e)))
            continue
        missed = _out_of_spec(doc)
        if first and not missed and (doc.get("achieved") or {}).get("in_spec") is not True:
            missed = ("out of spec: " + "; ".join(first) + " (the first attempt; the second "
                      "could not be judged)")
        notify(k, len(cells), cell, "out of spec" if missed else "done")
        results.append(CellResult(cell.name, "out of spec" if missed else "done",
                                  time.monotonic() - t0, doc["measured"], missed))
    return results


def _run_cell(cell: Cell, output: Path, on_stage, command) -> dict:
    if cell.network is not None:
        return run_network(cell.network, output, progress=on_stage, command=command)
    return run(cell.scenario, output, progress=on_stage, command=command)


def _out_of_spec(doc: dict) -> str | None:
    """What a run's achieved values missed, one line (None when in spec or not judged)."""
    missed = (doc.get("achieved") or {}).get("out_of_spec")
    return "out of spec: " + "; ".join(missed) if missed else None


SUMMARY_COLUMNS = ("cell", "status", "seconds", "rtt_asked_ms", "rtt_ms", "rate_asked_bps",
                   "throughput_bps", "loss_asked", "loss_measured", "retransmitted_segments",
                   "error")


def summary_table(results: list[CellResult]) -> dict:
    """The matrix's results as a table of columns (pcapstats.render formats it)."""
    import numpy as np
    table: dict = {c: [] for c in SUMMARY_COLUMNS}
    for r in results:
        m = r.measured or {}
        table["cell"].append(r.name)
        table["status"].append(r.status)
        table["seconds"].append(round(r.seconds, 1))
        for c in SUMMARY_COLUMNS[3:-1]:
            v = m.get(c)
            table[c].append(np.nan if v is None else float(v))
        table["error"].append(r.error or "")
    return {k: np.asarray(v, dtype=object if k in ("cell", "status", "error") else float)
            for k, v in table.items()}
