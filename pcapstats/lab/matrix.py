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
    unknown = set(spec) - {"base", "axes", "trials", "group", "name"}
    if unknown:
        raise UsageError(f"unknown spec key {', '.join(sorted(unknown))}", path=str(path),
                         hint="a spec has base, axes, trials, name and [[group]] tables")
    groups = spec.get("group") or [{}]
    cells: list[Cell] = []
    for g in groups:
        base = {**spec.get("base", {}), **g.get("base", {})}
        axes = {**spec.get("axes", {}), **g.get("axes", {})}
        trials = g.get("trials", spec.get("trials"))
        if trials is not None:
            if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= 1000:
                raise specfile.bad_field(path, text, "trials", "a whole number of 1 to 1000",
                                         trials)
            axes["trial"] = list(range(1, trials + 1))
        template = g.get("name", spec.get("name"))
        unknown = set(g) - {"base", "axes", "trials", "name", "about"}
        if unknown:
            raise UsageError(f"unknown group key {', '.join(sorted(unknown))}", path=str(path),
                             hint="a group has base, axes, trials, name and about")
        cells += _cells(base, axes, template, path, g.get("about", ""), text)
    names = [c.name for c in cells]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"two cells would write the same files: {', '.join(twice)}",
                         path=str(path), hint="add the differing field to the name template")
    return cells


def _cells(base: dict, axes: dict, template: str | None, path: Path, about: str,
           text: str) -> list[Cell]:
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise specfile.bad_field(path, text, f"axes.{key}", "a non-empty list of values",
                                     values)
    if "topology" in base:
        return _network_cells(base, axes, template, path, about, text)
    out = []
    for combo in itertools.product(*axes.values()):
        params = dict(zip(axes, combo))
        try:
            scenario = Scenario.from_dict({**base, **params})
            scenario.validate()
        except PcapstatsError as e:
            field = getattr(e, "field", None)
            where = "axes" if field in params else "base"
            what = e.what if not field or e.what.startswith(field) else f"{field}: {e.what}"
            hint = f" ({e.hint})" if e.hint else ""
            raise specfile.bad_field(path, text, f"{where}.{field}" if field else "base",
                                     f"{what.split(': ', 1)[-1]}{hint}"
                                     + (f"; in the cell {params}" if params else ""),
                                     line=specfile.line_of(text, field) if field else None
                                     ) from None
        out.append(Cell(cell_name(scenario, params, template), scenario, params,
                        about.format(**scenario.to_dict()) if about else ""))
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
        if template:
            try:
                raw = template.format(**fields)
            except (KeyError, IndexError) as e:
                raise specfile.bad_field(path, text, "name", f"a template of {{fields}}: "
                                         f"{', '.join(fields)}; {e} is none") from None
        else:
            raw = "_".join(f"{k}-{_text(v)}" for k, v in params.items()) or net.name
        out.append(Cell(re.sub(r"[^A-Za-z0-9.+_-]", "-", raw), None, params,
                        about.format(**fields) if about else "", network=net))
    return out


def cell_name(scenario: Scenario, params: dict, template: str | None = None) -> str:
    if template:
        try:
            raw = template.format(**{k: _text(v) for k, v in scenario.to_dict().items()})
        except (KeyError, IndexError) as e:
            raise UsageError(f"name template {template!r} names an unknown field {e}") from None
    else:
        raw = "_".join(f"{k}-{_text(v)}" for k, v in params.items()) or "run"
    return re.sub(r"[^A-Za-z0-9.+_-]", "-", raw)


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
