"""Many captures of one study side by side: a row a capture, or a row a group of trials.

    r = ps.compare(files, by="cc,loss")      # labels from the sidecars, a study file, patterns
    r.to_pandas()                            # one row a capture: its labels, then its metrics
    r.to_pandas("groups")                    # one row a cc and loss: n, mean, sd, 95 % CI
    r.figure()                               # each metric against the first label, with CIs
    r.figure(kind="iographs")                # each capture's (each group's) I/O graph

Labels: :mod:`pcapstats.study.labels`.  Metrics, each from the analysis that defines it:
:mod:`pcapstats.study.metrics`.  Groups (``by``): the captures whose ``by`` labels are equal;
each numeric metric's mean, sample standard deviation and the half-width of the mean's 95 %
confidence interval (Student's t, n - 1 degrees of freedom: :func:`pcapstats.stats.
mean_interval`) over the group's captures where it applies; a text metric (flavour, verdict)
as its values counted.  Rows of both tables are in label order: by the ``by`` labels as
:func:`~pcapstats.study.labels.sort_key` orders them, then by file name with its numbers read
as numbers (loss1pct before loss10pct).
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from .. import catalogue, render, units
from ..batch import Outcome
from ..errors import Note, PcapstatsWarning, UsageError
from ..naming import capture_names, text as name_text
from ..render import Shown
from ..results import Result
from ..schema import CAPTURE_COLUMN, UNITLESS, Column, TableSpec
from ..stats import MOST_TRIALS, mean_interval, t_quantile, trials_for
from ..units import interval_ns
from . import metrics as M
from .labels import (SIDECAR_LABELS, LabelColumns, Labelling, label_columns, name_key,
                     parse_names, sort_key, unread_note, word_places)
from ..pool import outcomes

_C = Column
LABEL_DOC = ("the labels: cc, loss, delay, rate, pairs, trial, tool from the lab sidecar, and "
             "the names a study file or --label pattern gives; a label that reads as numbers "
             "typed (loss: a fraction, delay_s: seconds, rate_bps: bit/s, trial: a number), its "
             "text as given beside it (loss_label: 10%)")
MINOR = {"avg_transfer_bps", "transfers", "resent", "flavour_confidence", "jain_index", "verdict",
         "rtt_min_ms", "app_jitter_ms", "mathis_bps", "padhye_bps"}
WIDE = 120               # a terminal this wide shows capture names unwrapped
GROUP_HIDDEN = {"avg_transfer_bps", "transfers", "resent", "flavour_confidence", "mathis_bps",
                "padhye_bps"}   # a group's table: --all
HEADLINE = "goodput_bps"      # what a study reads first: its ± is never left out
RADIO = {"signal_dbm", "datarate_bps", "retry_share"}    # shown only for 802.11 captures


def _group_columns(metric: Column) -> tuple[Column, ...]:
    """A metric's columns in the groups table: its mean, sd and CI (text: its values)."""
    m, unit = metric.name, UNITLESS if metric.unit is None else metric.unit   # a mean of counts
    if metric.dtype == "str":
        return (_C(m, "str", f"{metric.doc}; here the captures' values, each with how many "
                   "had it (one value alone when all agree)", heading=metric.heading),)
    return (_C(m, "float64", f"{metric.doc}; here the mean over the group's captures where "
               "it applies", unit, optional=True, heading=metric.heading),
            _C(f"n_{m}", "int64", f"the group's captures where {m} has a value: the n of its "
               "mean, sd and interval"),
            _C(f"sd_{m}", "float64", f"sample standard deviation of {m} (n - 1); empty for "
               "one value", unit, optional=True),
            _C(f"ci95_{m}", "float64", f"half-width of the 95 % confidence interval of {m}'s "
               "mean: t(0.975, n - 1) x sd / sqrt(n); empty for one value", unit,
               optional=True))


_LABEL = _C("<label>", "str", LABEL_DOC)
_N = _C("n", "int64", "captures in the group")
CAPTURES = TableSpec("captures", "one row per capture: its labels, then its metrics",
                     (CAPTURE_COLUMN, _LABEL, *M.METRICS, *M.CONTEXT))
GROUPS = TableSpec("groups", "one row per group of captures with the same --by labels "
                   "(trials aggregated)",
                   (_C("<label>", "str", "the --by labels"), _N,
                    *(c for m in M.METRICS for c in _group_columns(m))))


def _trials_columns(metric: Column, unit_of: str | None) -> tuple[Column, ...]:
    """The trials table's columns for ``metric`` (mean, sd, interval now, as in groups; the
    interval wanted, the trials it needs)."""
    m, unit_of = metric.name, UNITLESS if unit_of is None else unit_of   # a mean of counts
    return (_N,
            _C(f"n_{m}", "int64", f"the group's captures where {m} has a value"),
            _C(m, "float64", f"the mean of {m} over the group's captures", unit_of,
               optional=True, heading=metric.heading),
            _C(f"sd_{m}", "float64", f"sample standard deviation of {m} (n - 1): the spread "
               "the trials needed are estimated from", unit_of, optional=True),
            _C(f"ci95_{m}", "float64", f"half-width of the 95 % confidence interval of {m}'s "
               "mean now", unit_of, optional=True),
            _C(f"wanted_ci95_{m}", "float64", f"the half-width wanted (--trials-for: a share "
               "of the group's mean, or a value)", unit_of, optional=True),
            _C("trials_needed", "float64", "the fewest trials whose interval is that narrow if "
               "they spread as these did: smallest n with t(0.975, n - 1) x sd / sqrt(n) <= "
               "the wanted half-width; empty with fewer than 2 values or past "
               f"{MOST_TRIALS} trials", UNITLESS, optional=True),
            _C("more_trials", "float64", "trials_needed - n: how many more to run (0: enough "
               "already)", UNITLESS, optional=True))


TRIALS = TableSpec("trials", "one row per group: the trials a wanted 95 % interval of one "
                   "metric needs, estimated from the group's own spread (--trials-for)",
                   (_C("<label>", "str", "the --by labels"),
                    *_trials_columns(_C("<metric>", "float64", "the metric --trials-for "
                                        "names (goodput_bps by default), in its unit"),
                                     None)))


class Compare(Result):
    """A study's captures side by side (``captures``) and aggregated by the ``by`` labels
    (``groups``).  ``by``, ``labels`` (every label name), ``metrics``, ``interval_s``: what
    was asked; ``measured``: each capture's :class:`~pcapstats.study.metrics.Measured`
    (with its I/O graph, for ``figure(kind="iographs")``)."""
    analysis = "compare"
    specs = (CAPTURES, GROUPS, TRIALS)
    draws = overlays = True

    def __init__(self, study: "Study", measured: Sequence[M.Measured], *, several: bool,
                 notes: Sequence[str] = ()):
        self.by, self.metrics, self.interval_s = study.by, study.metrics, study.interval_s
        self.measured = list(measured)
        present = [study.labels[m.capture] for m in self.measured]
        self.labels = list(study.label_names)      # every capture's, so parts agree
        self.label_columns: dict[str, LabelColumns] = dict(study.label_columns)
        order = word_places(study.word_order)
        rows = sorted(range(len(self.measured)), key=lambda i: (
            *(sort_key(present[i].get(n, ""), order) for n in self.by),
            name_key(self.measured[i].capture), i))
        self.measured = [self.measured[i] for i in rows]
        self.texts = {n: [present[i].get(n, "") for i in rows] for n in self.labels}
        columns = M.columns(self.metrics)
        captures_spec = TableSpec(CAPTURES.name, CAPTURES.doc, (
            *((CAPTURE_COLUMN,) if several else ()),
            *(c for n in self.labels for c in _label_specs(self.label_columns[n])), *columns))
        groups_spec = TableSpec(GROUPS.name, GROUPS.doc, (
            *(c for n in self.by for c in _label_specs(self.label_columns[n], group=True)), _N,
            *(c for m in columns if m.name in M.NAMES for c in _group_columns(m))))
        table = {"capture": np.array([name_text(m.capture) for m in self.measured], object)}
        if not several:
            del table["capture"]
        for n in self.labels:
            table.update(self.label_columns[n].columns(self.texts[n]))
        table.update({c.name: np.array([m.values[c.name] for m in self.measured],
                                       object if c.dtype == "str" else np.float64)
                      for c in columns})
        groups, self.group_texts, group_notes = _groups(table, self.texts, self.by,
                                                        self.label_columns, columns, order)
        self.trials_for = study.trials_for
        wanted = next(c for c in M.METRICS if c.name == study.trials_for.metric)
        trials_spec = TableSpec(TRIALS.name, TRIALS.doc, (
            *(c for n in self.by for c in _label_specs(self.label_columns[n], group=True)),
            *_trials_columns(wanted, wanted.unit)))
        trials = _trials(groups, self.by, study.trials_for, trials_spec)
        super().__init__({"captures": table, "groups": groups, "trials": trials},
                         capture=study.name(several),
                         specs=(captures_spec, groups_spec, trials_spec),
                         notes=[*notes, *group_notes])
        self.captures = [m.capture for m in self.measured]
        self.parts = [self] if not several else [
            Compare(study, [m], several=False) for m in self.measured]
        varying = [n for n in self.labels if n in self.by or len(set(self.texts[n])) > 1]
        # the radio columns only where a capture is 802.11: most studies are wired
        shown = [c for c in columns if c.name not in RADIO or
                 (c.name in table and (table[c.name] == table[c.name]).any())]
        said = {n: c.shown for n, c in self.label_columns.items()}
        self.view = {"captures": _view(shown, varying, self.by, several, said, ci=False),
                     "groups": _view(shown, self.by, self.by, False, said, ci=True),
                     "trials": _trials_view(wanted, self.by, said)}
        self.legend = {"captures": _legend(self, "captures"), "groups": _legend(self, "groups"),
                       "trials": _trials_legend(study.trials_for)}

    def model_curves(self, points: int = 60) -> dict[str, np.ndarray]:
        """Mathis' and Padhye's goodput over loss rates spanning the captures' (a log grid of
        ``points``), for the median MSS and RTT under load of the captures' main TCP
        transfers and Linux's smallest timeout: the curves their goodput is drawn against
        (tcp_models).  Empty without two captures that lost something."""
        from ..analyses import tcp_models  # lazy: a figure's, not every comparison's
        t = self.table("captures")
        have = [c for c in ("resent_share", "rtt_median_ms", "mss_bytes") if c in t]
        if len(have) < 3:
            return {"loss": np.zeros(0), "mathis_bps": np.zeros(0), "padhye_bps": np.zeros(0)}
        lossy = (t["resent_share"] > 0) & ~np.isnan(t["rtt_median_ms"])
        if lossy.sum() < 2:
            return {"loss": np.zeros(0), "mathis_bps": np.zeros(0), "padhye_bps": np.zeros(0)}
        p = np.geomspace(t["resent_share"][lossy].min() / 2,
                         min(t["resent_share"][lossy].max() * 1.5, 0.9), points)
        mss = float(np.median(t["mss_bytes"][lossy]))
        rtt_s = float(np.median(t["rtt_median_ms"][lossy])) / 1e3
        return {"loss": p,
                "mathis_bps": np.array([tcp_models.mathis_bps(mss, rtt_s, x) for x in p]),
                "padhye_bps": np.array([tcp_models.padhye_bps(mss, rtt_s, x,
                                                              tcp_models.MIN_RTO_S)
                                        for x in p]),
                "mss_bytes": np.full(points, mss), "rtt_ms": np.full(points, rtt_s * 1e3)}

    def label_text(self, name: str, table: str = "captures") -> list[str]:
        """A label's values as written ("10%", "" where a capture has none), a row each of
        ``table`` (captures, or the groups of a ``by`` label): what tables and figures show."""
        return list((self.texts if table == "captures" else self.group_texts)[name])

    def row_names(self) -> list[str]:
        """The captures as the table's rows, the figures' ticks and legends name them: the
        shortest path suffix that tells each apart, without its extension (``t1/run``,
        ``t2/run``; titles name them as ``names``, with theirs)."""
        return capture_names(self.captures, extensions=False)

    def has_values(self) -> bool:
        """Whether any metric asked for has a value in any capture (when none has, there is
        nothing to report: compare and report exit 1)."""
        table = self.table("captures")
        return any(bool((table[c] != "").any()) if table[c].dtype == object
                   else bool((table[c] == table[c]).any())
                   for c in self.metrics if c in table)

    def nothing_said(self) -> str:
        """The one line said when no metric has a value: what was looked for, what the
        captures hold."""
        first = self.measured[0]
        where = (f"{first.capture} ({first.holds})" if len(self.measured) == 1 else
                 f"any of the {len(self.measured)} captures ({first.capture}: {first.holds})")
        return f"no metric of the comparison has a value in {where}"

    def iographs(self) -> list:
        """Each capture's I/O graph result (of every packet), in row order; None where it
        was not kept."""
        return [m.results.get("iograph") for m in self.measured]

    def groups_of_captures(self) -> list[tuple[str, list[int]]]:
        """(the group's labels as text, its rows in the captures table), groups in order."""
        if not self.by:
            return [("", list(range(self.rows())))]
        keys = [tuple(self.texts[b][i] for b in self.by) for i in range(self.rows())]
        out: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            out.setdefault(k, []).append(i)
        return [(", ".join(f"{b} {v or '(none)'}" for b, v in zip(self.by, k)), rows)
                for k, rows in out.items()]

    def to_text(self, name: str | None = None, fmt: str = "table", *,
                all_columns: bool = False, width: int | None = None) -> str:
        """As every result, but the captures stay one table (a study reads across them), each
        capture by its name; the capture and the ``by`` labels are repeated in every column
        block of a wide table, and a metric named in ``metrics`` is never left out."""
        spec, table = self.spec(name), self.table(name)
        if fmt != "table":
            return super().to_text(name, fmt, all_columns=all_columns, width=width)
        width = width or render.terminal_width()
        view = self.view.get(spec.name, ())
        shown = render.every_column(table, view) if all_columns else view
        asked = set(self.metrics) if len(self.metrics) < len(M.NAMES) else set()
        keys = {"capture", *(self.label_columns[b].shown for b in self.by)}
        shown = [dataclasses.replace(
            s, key=s.column in keys, minor=s.minor and s.column not in asked,
            wrap=s.wrap and not (s.column == "capture" and width >= WIDE))  # room: names whole
            for s in shown]
        if "capture" in table:
            table = {**table, "capture": np.array(self.row_names(), object)}
        text = render.human(table, {c.name: c.unit for c in spec.columns if c.unit}, shown,
                            width, headings=self.headings(spec.name), complete=all_columns)
        legend = self.legend.get(spec.name)
        if legend and not all_columns:
            text += "\n".join(textwrap.wrap(legend, width)) + "\n"
        return text

    def _html_table(self) -> str:
        """In a notebook the groups, when there are some to read."""
        df = self.to_pandas("groups" if self.by else "captures")
        return df.to_html(index=False, na_rep="")

    def _png(self) -> bytes | None:
        """A notebook's image: none when no metric asked for is a number to draw."""
        try:
            return super()._png()
        except UsageError:
            return None

    def _figure(self, ax=None, *, kind: str = "metrics", metrics=None,
                title: str | None = None):
        from ..plots.compare import (compare_figure, iographs_figure,  # lazy: matplotlib
                                     models_figure)
        if kind == "iographs":
            return iographs_figure(self, ax=ax, title=title)
        if kind == "models":
            return models_figure(self, ax=ax, title=title)
        if kind != "metrics":
            raise UsageError(f"unknown figure kind {kind!r}",
                             hint="metrics, iographs or models")
        wanted = [catalogue.lookup(m, self.metrics) for m in parse_names(metrics, "metrics")]
        return compare_figure(self, metrics=wanted or None, ax=ax, title=title)


def _label_doc(name: str) -> str:
    if name in SIDECAR_LABELS:
        return (f"label {name}: the lab sidecar's scenario {name} (a study file or --label "
                "pattern may set it instead)")
    return f"label {name}: from the study file or a --label pattern"


_UNIT_WORDS = {"fraction": "a fraction, 0.1 for 10 %", "s": "seconds", "bit/s": "bits per second"}


def _label_specs(label: LabelColumns, *, group: bool = False) -> tuple[Column, ...]:
    """A label's columns (labels.LabelColumns): its number, typed, and its text as given."""
    n = label.label
    doc = f"the {n} label of the group's captures" if group else _label_doc(n)
    out = []
    if label.value is not None:
        read = f"read as {_UNIT_WORDS[label.unit]}" if label.unit else "as a number"
        out.append(_C(label.value, "int64" if label.whole else "float64",
                      f"{doc}, {read}; empty where it does not read as one", label.unit,
                      optional=not label.whole, heading=n))
    if label.text is not None:
        out.append(_C(label.text, "str", f"{doc}, as written" if label.value else doc,
                      heading=n))
    return tuple(out)


def _view(columns, labels, by, several: bool, said: dict, *, ci: bool) -> tuple[Shown, ...]:
    """The human table: the capture, its labels (``said``: the column that shows each, its
    text as written), the metrics read first (a group's with the half-width of their CI
    beside them; `--all`, CSV and JSON have every column)."""
    shown = [Shown("capture", "capture", wrap=True)] if several else []
    shown += [Shown(n, said[n]) for n in labels if n in by]
    if ci:
        shown.append(Shown("n", "n"))
    for c in columns:
        if c.name not in M.NAMES or (ci and c.name in GROUP_HIDDEN):
            continue
        shown.append(Shown(c.heading or c.name, c.name, minor=c.name in MINOR))
        if ci and c.dtype != "str" and c.name not in MINOR:
            shown.append(Shown("±", f"ci95_{c.name}", minor=c.name != HEADLINE))
    # the other labels that tell captures apart last: the first left out when narrow
    shown += [Shown(n, said[n], minor=True) for n in labels if n not in by]
    return tuple(shown)


def _legend(result: Compare, name: str) -> str:
    """The sentence under a human table: what its headings mean, for the metrics shown."""
    peak = f"the busiest {result.interval_s:g} s interval"
    said = {"goodput_bps": "goodput: payload delivered the first time, over the capture span",
            "utilisation": "link use: goodput / the bottleneck rate the run asked",
            "avg_capture_bps": f"capture avg, peak ({peak}): frames at this capture point, "
                               "headers included (Wireshark's I/O graph)",
            "resent_share": "re-sent share: of the data packets",
            "rtt_median_ms": "RTT min, median: the main TCP transfer's base RTT and RTT under "
                             "load (their difference is queueing)",
            "limit": "limit: what held the main TCP transfer's sender back longest",
            "datagram_loss": "UDP loss, jitter: the main UDP flow (capture jitter: at this "
                             "capture point; app jitter: what the receiving iperf3 reported)",
            "signal_dbm": "signal, data rate, retries: the 802.11 data frames that went the "
                          "busier way (pcapstats wifi)"}
    table = result.table("captures")
    parts = [text for m, text in said.items() if m in table and (table[m] == table[m]).any()]
    if name == "groups":
        parts.append("each a mean of the group's captures; ±: half the 95 % confidence "
                     "interval of the mean (Student's t)")
    return "".join(f"{'; '.join(parts)}.  " if parts else "") + \
        "`pcapstats columns compare` defines each number."


def _groups(table: dict, texts: dict, by: list[str], labels: dict, columns,
            order) -> tuple[dict, dict, list[str]]:
    """The groups table (see the module docstring), each group's ``by`` labels as written
    (``texts``: the captures'), and notes on metrics that apply to only some of a group's
    captures."""
    n = render.length(table)
    keys = [tuple(texts[b][i] for b in by) for i in range(n)]
    groups: dict[tuple, list[int]] = {}
    for i in sorted(range(n), key=lambda i: tuple(sort_key(v, order) for v in keys[i])):
        groups.setdefault(keys[i], []).append(i)
    written = {b: [key[j] for key in groups] for j, b in enumerate(by)}
    out: dict[str, list] = {"n": []}
    notes = []
    for key, rows in groups.items():
        partial: dict[int, list[str]] = {}        # captures it applies to -> metrics
        out["n"].append(len(rows))
        where = ", ".join(f"{b} {v or '(none)'}" for b, v in zip(by, key)) or "all captures"
        for c in columns:
            if c.name not in M.NAMES:
                continue
            values = table[c.name][rows]
            if c.dtype == "str":
                out.setdefault(c.name, []).append(_counted(values))
                continue
            s = mean_interval(values)
            out.setdefault(c.name, []).append(s.mean)
            out.setdefault(f"n_{c.name}", []).append(s.n)
            out.setdefault(f"sd_{c.name}", []).append(s.sd)
            out.setdefault(f"ci95_{c.name}", []).append(s.ci95)
            if by and 0 < s.n < len(rows):
                partial.setdefault(s.n, []).append(c.name)
        if partial:
            notes.append(Note("metrics missing in some captures", about=where,
                              detail="; ".join(f"{', '.join(names)}: {k} of its {len(rows)}"
                                               for k, names in partial.items())
                              + " (the mean and its interval are over those)"))
    label_columns = {k: v for b in by for k, v in labels[b].columns(written[b]).items()}
    if by:
        notes += _few_trials(out["n"], [", ".join(f"{b} {v or '(none)'}" for b, v in zip(by, k))
                                        for k in groups])
    return {**label_columns, **{k: np.array(v, object if k in M.TEXT else np.int64
                                            if k == "n" or k.startswith("n_") else np.float64)
                                for k, v in out.items()}}, written, notes


FEW_TRIALS = 3     # up to this many, a mean's 95 % interval is wider than 2 sd: the trials' spread


def _few_trials(ns: list[int], wheres: list[str]) -> list[Note]:
    """A note on the groups of one capture (no interval) and on those of 2 to FEW_TRIALS,
    whose interval is wider than the spread of the trials themselves (t is 12.7 at n = 2)."""
    notes = []
    alone = [w for n, w in zip(ns, wheres) if n == 1]
    if alone:
        notes.append(Note(f"{_groups_of(len(alone), len(ns))}: one capture, no sd and no ±",
                          detail="; ".join(alone)))
    few = sorted({n for n in ns if 2 <= n <= FEW_TRIALS})
    if few:
        widths = ", ".join(f"n = {n}: t(0.975, {n - 1}) = {t_quantile(0.975, n - 1):.3g}, "
                           f"± = {t_quantile(0.975, n - 1) / np.sqrt(n):.2g} sd" for n in few)
        where = "; ".join(w for n, w in zip(ns, wheres) if 2 <= n <= FEW_TRIALS)
        count = sum(1 for n in ns if 2 <= n <= FEW_TRIALS)
        notes.append(Note(f"{_groups_of(count, len(ns))}: {FEW_TRIALS} trials or fewer, ± "
                          "wider than their spread",
                          detail=f"{widths} ({where}); --trials-for 10% estimates the trials "
                                 "a narrower interval needs"))
    return notes


def _groups_of(k: int, total: int) -> str:
    """"3 of 12 groups" / "the group" / "every group"."""
    if total == 1:
        return "the group"
    return "every group" if k == total else f"{k} of {total} groups"


@dataclass(frozen=True)
class TrialsWanted:
    """The interval a study wants of one metric (``--trials-for``): ``share`` of the group's
    mean (0.1: ± 10 %), or ``value`` in the metric's unit."""
    metric: str = HEADLINE
    share: float | None = 0.1
    value: float | None = None
    text: str = "10%"

    @classmethod
    def read(cls, text: str | None, metrics: Sequence[str]) -> "TrialsWanted":
        """``10%`` (of the goodput's mean), ``rtt median=2ms``, ``goodput=0.5mbit``,
        ``resent_share=0.01`` (a bare number is in the metric's own unit); one UsageError
        line otherwise."""
        if text is None:
            return cls()
        name, _, width = str(text).rpartition("=")
        numeric = [m for m in metrics if m in M.NAMES and m not in M.TEXT]
        metric = catalogue.lookup(name.strip(), M.NAMES) if name.strip() else HEADLINE
        if metric in M.TEXT:
            raise UsageError(f"--trials-for {text!r}: {metric} is text, it has no interval",
                             hint=f"name one of: {', '.join(numeric)}")
        if metric not in numeric:
            raise UsageError(f"--trials-for {text!r}: {metric} is not among the metrics "
                             "compared", hint=f"add it with -m, or name one of: "
                                              f"{', '.join(numeric)}")
        unit = next(c.unit for c in M.METRICS if c.name == metric)
        width = width.strip()
        if width.endswith("%"):
            share = units.quantity(width)
            if share is None or not share[0] > 0:
                raise UsageError(f"--trials-for {text!r}: {width!r} is not a share above 0",
                                 hint="write it like 10%")
            return cls(metric, share[0], None, text)
        read = units.quantity(width)
        scale = {("bit/s", "bit/s"): 1.0, ("s", "ms"): 1e3, ("s", "s"): 1.0}
        if read is not None and read[1] == "":
            value = read[0]
        elif read is not None and (read[1], unit) in scale:
            value = read[0] * scale[(read[1], unit)]
        else:
            example = {"bit/s": "0.5mbit", "ms": "2ms"}.get(unit, "0.01")
            raise UsageError(f"--trials-for {text!r}: {width!r} is not a width of {metric} "
                             f"({unit or 'a number'})",
                             hint=f"write a share of the mean (10%) or a value ({example})")
        if not value > 0:
            raise UsageError(f"--trials-for {text!r}: the width must be above 0")
        return cls(metric, None, value, text)

    def half_width(self, mean: float) -> float:
        return self.value if self.value is not None else self.share * abs(mean)


def _trials(groups: dict, by: list[str], wanted: TrialsWanted, spec: TableSpec) -> dict:
    """The trials table (TRIALS): each group's n, mean, sd and interval of the wanted metric
    (the groups table's), the half-width wanted and the trials it needs (stats.trials_for)."""
    m = wanted.metric
    if m not in groups:                # only text metrics compared: nothing to size
        rows = len(groups["n"])
        groups = {**groups, **{c: np.full(rows, np.nan) for c in (m, f"sd_{m}", f"ci95_{m}")},
                  f"n_{m}": np.zeros(rows, np.int64)}
    out = {c.name: groups[c.name] for c in spec.columns if c.name in groups}
    half = np.array([wanted.half_width(x) for x in groups[m]], np.float64)
    needed = np.array([trials_for(sd, w) for sd, w in zip(groups[f"sd_{m}"], half)])
    out.update({f"wanted_ci95_{m}": half, "trials_needed": needed,
                "more_trials": np.maximum(needed - groups[f"n_{m}"], 0)})
    return out


def _trials_view(metric: Column, by, said: dict) -> tuple[Shown, ...]:
    m = metric.name
    return (*(Shown(n, said[n]) for n in by), Shown("n", f"n_{m}"),
            Shown(metric.heading or m, m), Shown("sd", f"sd_{m}"), Shown("± now", f"ci95_{m}"),
            Shown("± wanted", f"wanted_ci95_{m}"), Shown("trials needed", "trials_needed"),
            Shown("more", "more_trials"))


def _trials_legend(wanted: TrialsWanted) -> str:
    what = (f"{wanted.share:.0%} of the group's mean" if wanted.value is None else
            "the width asked")
    return (f"{catalogue.metric(wanted.metric).heading}'s 95 % interval: ± now over the group's n captures, ± wanted "
            f"{what}; trials needed: the fewest whose interval is that narrow if they spread "
            "as these did (Student's t; an estimate, as sd itself is uncertain at small n).  "
            "`pcapstats columns compare` defines each number.")


def _counted(values) -> str:
    """"cubic" when all agree, else "cubic 9, reno 1" (most common first); "" for none."""
    counts = Counter(v for v in values if v)
    if len(counts) == 1 and sum(counts.values()) == len(values):
        return next(iter(counts))
    return ", ".join(f"{v} {k}" for v, k in counts.most_common())


@dataclass
class Study:
    """What a comparison was asked for, checked before any capture is read: the captures,
    their labels, the ``by`` labels, the metrics, the interval."""
    sources: list
    labelling: Labelling
    by: list[str]
    metrics: list[str]
    interval_s: float
    labels: dict[str, dict[str, str]] = field(default_factory=dict)   # capture -> labels
    label_names: list[str] = field(default_factory=list)
    word_order: list[str] = field(default_factory=list)
    label_columns: dict[str, LabelColumns] = field(default_factory=dict)   # typed over all
    trials_for: TrialsWanted = field(default_factory=TrialsWanted)

    @classmethod
    def plan(cls, sources, *, by=None, metrics=None, labels=(), study=None,
             interval: float = 1.0, trials_for: str | None = None) -> "Study":
        """One UsageError line for anything that cannot be done (no capture, an unknown
        metric or --by label, a bad pattern or study file)."""
        sources = list(sources)
        if not sources:
            raise UsageError("compare needs one capture or more")
        chosen = [catalogue.lookup(m, M.NAMES)
                  for m in parse_names(metrics, "--metrics")] or list(M.NAMES)
        wanted = TrialsWanted.read(trials_for, chosen) if trials_for or HEADLINE in chosen \
            else TrialsWanted(metric=next((m for m in chosen if m not in M.TEXT), HEADLINE))
        interval_s = interval_ns(interval) / 1e9         # the iograph's own check and rounding
        labelling = Labelling.of(study, labels)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PcapstatsWarning)
            named = {_name(s): labelling.labels(s) for s in sources}
        for w in dict.fromkeys(str(w.message) for w in caught):
            warnings.warn(PcapstatsWarning(w), stacklevel=2)
        names = list(dict.fromkeys(n for p in named.values() for n in p))
        own = [n for n in names if n not in SIDECAR_LABELS]
        names = own + [n for n in SIDECAR_LABELS if n in names]
        typed = {n: label_columns(n, [named[_name(s)].get(n, "") for s in sources])
                 for n in names}
        taken = {"capture", "n", *M.NAMES, *(c.name for c in M.CONTEXT),
                 *(f"{p}_{m}" for p in ("n", "sd", "ci95", "wanted_ci95") for m in M.NAMES),
                 "trials_needed", "more_trials"}
        for n in names:
            clash = [c for c in typed[n].names if c in taken]
            if clash:
                raise UsageError(f"label {n!r} has the name of a column of the comparison "
                                 f"({clash[0]})",
                                 hint="rename it in the study file or --label pattern")
            taken.update(typed[n].names)
        column_of = {c: n for n in names for c in typed[n].names}   # --by delay_s: delay
        by_names = [column_of.get(b, b) for b in parse_names(by, "--by")]
        missing = [b for b in by_names if b not in names]
        if missing:
            raise UsageError(f"no capture has a label {missing[0]!r}",
                             hint=f"their labels: {', '.join(names)}" if names else
                             "they have none: give --label PATTERN or --study FILE (or keep "
                             "the lab's sidecar beside each capture)")
        if len(set(by_names)) != len(by_names):
            raise UsageError(f"--by names a label twice: {','.join(by_names)}")
        words = [*labelling.word_order(), *_alternatives(labelling)]
        return cls(sources, labelling, by_names, chosen, interval_s, named, names, words,
                   typed, wanted)

    def notes(self) -> list[str]:
        """Study-file rows that label none of the captures, and label values that do not
        read as their label's numbers."""
        texts = {n: [self.labels[_name(s)].get(n, "") for s in self.sources]
                 for n in self.label_names}
        unread = [unread_note(self.label_columns[n], texts[n]) for n in self.label_names]
        return [f"the study file's {p!r} matches none of the captures"
                for p in self.labelling.unmatched(self.sources)] + [u for u in unread if u]

    def outcomes(self, *, jobs: int = 1, function=None, preload=(),
                 **options) -> Iterator[Outcome]:
        """Each capture's Outcome (result: its Measured) in the order given."""
        return outcomes(function or M.measure, self.sources, jobs=jobs, metrics=self.metrics,
                        interval=self.interval_s, preload=preload, **options)

    def names(self) -> dict[str, str]:
        """Each capture's path -> its name in the study's figure titles (Result.names)."""
        return names_of(self.sources)

    def name(self, several: bool) -> str:
        return _name(self.sources[0]) if not several else f"{len(self.sources)} captures"


def _name(source) -> str:
    return str(getattr(source, "path", source))


def names_of(sources) -> dict[str, str]:
    """Each capture's path -> its name among the others, as figure titles show it."""
    paths = [_name(s) for s in sources]
    return dict(zip(paths, capture_names(paths)))


def _alternatives(labelling: Labelling) -> list[str]:
    """The words of patterns' alternations, in order (``(?P<d>close|medium|far)``)."""
    words = []
    for p in labelling.patterns:
        for m in re.finditer(r"\(\?P<\w+>([\w|-]+)\)", p.pattern):
            words += m.group(1).split("|")
    return words


def compare(captures, /, *, by=None, metrics=None, labels=(), study=None,
            interval: float = 1.0, jobs: int = 1, iographs: bool = True,
            scheduler: str | None = None, trials_for: str | None = None) -> Compare:
    """Captures side by side (a list: one row each, a first column ``capture``), and grouped
    by the ``by`` labels (``"cc,loss"`` or a list).  ``metrics``: some of
    pcapstats.study.metrics.NAMES (default all); ``labels``: --label patterns; ``study``: a
    study file; ``interval``: the I/O graph's, for peak_bps; ``jobs``: worker processes;
    ``scheduler``: a Dask scheduler's address to run them there instead (``"local"``: a
    cluster of ``jobs`` worker processes started for the call; pcapstats.pool);
    ``iographs``: keep each capture's I/O graph for ``figure(kind="iographs")``;
    ``trials_for``: the interval the ``trials`` table sizes the study for (``"10%"`` of the
    goodput's mean, the default; ``"rtt median=2ms"``: TrialsWanted.read).  A capture that
    cannot be read is left out with a warning (a single one raises)."""
    return compared(captures, by=by, metrics=metrics, labels=labels, study=study,
                    interval=interval, jobs=jobs, scheduler=scheduler, trials_for=trials_for,
                    keep=frozenset({"iograph"} if iographs else ()))[0]


def compared(captures, /, *, by=None, metrics=None, labels=(), study=None,
             interval: float = 1.0, jobs: int = 1, scheduler: str | None = None,
             trials_for: str | None = None, **worker_options) -> tuple[Compare, list[str]]:
    """:func:`compare`'s work, each capture measured by ``Study.outcomes`` with
    ``worker_options`` (the report's worker and its options): the comparison, and the
    captures left out, each a sentence (warned of; a single capture's error raises)."""
    several = isinstance(captures, (list, tuple))
    plan = Study.plan(captures if several else [captures], by=by, metrics=metrics,
                      labels=labels, study=study, interval=interval, trials_for=trials_for)
    measured, failures, first_error = [], [], None
    for outcome in plan.outcomes(jobs=jobs, scheduler=scheduler, **worker_options):
        for text in outcome.warnings:
            warnings.warn(PcapstatsWarning(text), stacklevel=3)
        if outcome.error is not None:
            if not several:
                raise outcome.error
            first_error = first_error or outcome.error
            failures.append(str(outcome.error))
            warnings.warn(PcapstatsWarning(f"{outcome.source} left out: {outcome.error}"),
                          stacklevel=3)
        else:
            measured.append(outcome.result)
    if not measured:
        raise first_error
    return Compare(plan, measured, several=several, notes=plan.notes()), failures

