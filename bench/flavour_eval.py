"""How well `pcapstats flavour` tells reno, cubic and bbr apart, on a labelled lab matrix.

Two matrices (``--matrix``), each a `pcapstats lab matrix` spec this script writes into its
cache directory and runs there (resumable: complete cells are skipped):

**issue16** (the default): flavour from any capture point and any path.  A fractional design,
not a full factorial: every stratum (capture side x base RTT x loss x flows sharing x
duration) is covered once in trial 1, then the same cells again as trials 2 and 3 (the
matrix runs groups in order, so a partial run already covers the whole grid).  Its groups
(``--plan`` prints them with their run counts and the lab time they need):

- ``single``: one flow, cc {reno, cubic, bbr} x base RTT {0 (no delay line: the RTT is the
  bottleneck's queue), 1, 10, 50, 100 ms} x loss {0.1, 1, 3, 10 %}, 50 Mbit/s, 15 s,
  captured at the sender and the receiver;
- ``rate``: 10, 200 (the most the delay line carries here) and 1000 Mbit/s (no delay line:
  base RTT 0 only);
- ``short`` (5 s) and ``long`` (120 s) flows;
- ``mix2`` / ``mix4``: 2 and 4 flows of mixed cc sharing one bottleneck (captured on the
  router's bridges before and after it: the sender and receiver sides of every flow);
- ``nots`` / ``nosack``: TCP timestamps off, SACK off in senders and receivers;
- ``applim``: an application-limited sender (iperf3 -b 10 Mbit/s over 50 Mbit/s): its truth is
  its cc, but ``unknown`` is the right answer, so it is counted apart ("application-limited:
  unknown share") and left out of the overall unknown share and the strata;
- ``router``: captured at the sender, the router (its interface toward the sender:
  mid-path, before the impairment) and the receiver at once (``capture = "all"``).

Cell names say the stratum: ``single-cubic-rtt10ms-loss1pct-50mbit-1flow-15s-t1``.

**issue7**: the first matrix: cc {reno, cubic, bbr} x loss {0.1, 1, 3, 10 %} x RTT {10, 50, 100
ms} x rate {10, 50 Mbit/s} x 3 trials, simpleperf for 12 s, captured at the sender and the
receiver, plus pairs of flows of different cc sharing one bottleneck.

The label of every flow is the cc recorded in the run's sidecar.  Thresholds in
pcapstats.analyses.flavour were chosen on trial 1 (see its docstring), and two rules later on
trials 2-3, which had been held out until then; the report prints the trials before
``--held-out-from`` (default 4: "tune") and those from it on ("held out") separately, the
held-out numbers are the ones that count.  A trial past 3 is run with ``--run --trials 4``.

    sudo python3 bench/flavour_eval.py --run            # run the matrix (~3.5 h), then evaluate
    sudo python3 bench/flavour_eval.py --run --trials 3 --split held-out   # one trial (~70 min)
    python3 bench/flavour_eval.py --plan                # the groups, runs and lab time
    python3 bench/flavour_eval.py                       # evaluate what is in the cache so far
    python3 bench/flavour_eval.py --dir DIR --split all # another cache, every trial together
    python3 bench/flavour_eval.py --matrix issue7       # the first matrix, in its own cache

Prints, per split: the overall numbers (correct among labelled, unknown share, wrong labels
with confidence > 0.8) and the targets checked against them, the application-limited flows
apart, the confusion matrix, a table per stratum (side, base RTT, loss, flows, duration: flows,
unknown share, correct among labelled), by group and by rate (with the throughput the
sidecars say was reached), confidence calibration and every wrong label with its confidence.
Results: bench/README.md, "Congestion control from a capture (flavour)".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
CACHES = {"issue16": DATA / "flavour16", "issue7": DATA / "flavour"}
CCS = ["reno", "cubic", "bbr"]
RUN_OVERHEAD_S = 4.5  # a run's topology, RTT check, tcpdump start/stop, stream ids, teardown

# Targets (issue 16), checked on each split.
TARGET_CORRECT = 0.97          # correct among labelled, at least
TARGET_UNKNOWN = 0.10          # unknown share overall, at most
TARGET_STRATUM_UNKNOWN = 0.15  # ... in any stratum with loss >= 0.5 % and flows >= 15 s
TARGET_WRONG_CONFIDENCE = 0.8  # no wrong label above this confidence

# The first trial of each matrix's held-out split.  Issue 16's rules were chosen looking at
# trial 1 (a71ab7d), then two more looking at trials 2-3 (beb73fc): trial 4 on was classified
# only after that.  Issue 7's matrix: trial 1, trials 2-3 held out.
HELD_OUT_FROM = {"issue16": 4, "issue7": 2}


# -- the issue 7 matrix (kept as it was) ------------------------------------------------------

DURATION_S_7 = 12
LOSSES_7 = ["0.1%", "1%", "3%", "10%"]
RTTS_MS_7 = [10, 50, 100]
RATES_7 = ["10mbit", "50mbit"]
MIXED_7 = [["reno", "cubic"], ["cubic", "bbr"], ["reno", "bbr"]]
NAME_7 = "fl-{cc}-loss{loss}-delay{delay}-{rate}-t{trial}"


def spec_issue7() -> str:
    """The issue 7 matrix as a `pcapstats lab matrix` spec: trial 1 everywhere first, then the
    mixed pairs, then trials 2 and 3 (the matrix runs groups in order)."""
    delays = [f"{rtt / 2:g}ms" for rtt in RTTS_MS_7]
    grid = (f'delay = {json.dumps(delays)}, rate = {json.dumps(RATES_7)}, '
            f'loss = {json.dumps(LOSSES_7)}, cc = {json.dumps(CCS)}')
    return f"""# written by bench/flavour_eval.py; the labelled matrix of issue 7
[base]
tool = "simpleperf"
duration_s = {DURATION_S_7}
snaplen = 128
capture = "both"

[[group]]
name = "{NAME_7}"
axes = {{ trial = [1], {grid} }}

[[group]]
name = "mix-{{cc}}-loss{{loss}}-t{{trial}}"
base = {{ pairs = 2, rate = "20mbit", delay = "25ms" }}
axes = {{ trial = [1, 2], cc = {json.dumps(MIXED_7)}, loss = ["1%", "3%"] }}

[[group]]
name = "{NAME_7}"
axes = {{ trial = [2, 3], {grid} }}
"""


# -- the issue 16 matrix ----------------------------------------------------------------------

CORE_S = 15            # the flows of every group but short/long: ">= 15 s" strata
RATE = "50mbit"        # one rate for everything but the rate group (and 4 flows: 100mbit)
RTTS_MS = [0, 1, 10, 50, 100]
LOSSES = ["0.1%", "1%", "3%", "10%"]
MIX2 = [["reno", "cubic"], ["cubic", "bbr"], ["reno", "bbr"]]
MIX4 = [["reno", "cubic", "bbr", "reno"], ["cubic", "bbr", "reno", "cubic"],
        ["bbr", "reno", "cubic", "bbr"]]   # each cc 4 times over the three
# Rates: the delay line (a Python NFQUEUE program) carries about 270-280 Mbit/s of one cubic
# flow here, so 200mbit is the most with a delay; 1000mbit runs without one (base RTT 0),
# where a flow reaches 0.67-0.95 Gbit/s (simpleperf reno is CPU-bound at ~0.67).
RATE_CELLS = [("10mbit", 10, "0.1%"), ("200mbit", 10, "0.1%"), ("200mbit", 1, "1%"),
              ("1000mbit", 0, "0.1%"), ("1000mbit", 0, "1%")]
APP_RATE = "10mbit"


@dataclass
class Group:
    """One [[group]] of the spec for one RTT: a block of cells sharing a name pattern."""
    block: str
    rtt_ms: float
    axes: dict
    base: dict = field(default_factory=dict)

    def runs(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def duration_s(self) -> float:
        return float(self.base.get("duration_s", CORE_S))

    def toml(self, trial: int) -> str:
        base = dict(self.base)
        if self.rtt_ms:
            base["delay"] = f"{self.rtt_ms / 2:g}ms"
        name = (f"{self.block}-{{cc}}-rtt{self.rtt_ms:g}ms-loss{{loss}}-{{rate}}-{{pairs}}flow-"
                f"{{duration_s}}s-t{{trial}}")
        axes = {"trial": [trial], **self.axes}
        return (f'[[group]]\nname = "{name}"\nbase = {_inline(base)}\naxes = {_inline(axes)}\n')


def _inline(values: dict) -> str:
    """A TOML inline table (JSON's strings, numbers, arrays and true/false are TOML's too)."""
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + " }"


def groups_issue16() -> list[Group]:
    """Trial 1's groups, in the order they run (see the module docstring)."""
    out = [Group("single", rtt, {"cc": CCS, "loss": LOSSES}) for rtt in RTTS_MS]
    for rate, rtt, loss in RATE_CELLS:
        out.append(Group("rate", rtt, {"cc": CCS, "loss": [loss]}, {"rate": rate}))
    out += [Group("short", rtt, {"cc": CCS, "loss": ["1%", "3%"]}, {"duration_s": 5})
            for rtt in (1, 10, 50, 100)]
    out += [Group("long", 10, {"cc": CCS, "loss": ["1%"]}, {"duration_s": 120}),
            Group("long", 50, {"cc": CCS, "loss": ["0.1%"]}, {"duration_s": 120})]
    for rtt in (10, 50):
        out.append(Group("mix2", rtt, {"cc": MIX2, "loss": ["1%", "3%"]}, {"pairs": 2}))
    for rtt in (10, 50):
        out.append(Group("mix4", rtt, {"cc": MIX4, "loss": ["1%", "3%"]},
                         {"pairs": 4, "rate": "100mbit"}))
    for rtt in (10, 50):
        out.append(Group("nots", rtt, {"cc": CCS, "loss": ["1%", "3%"]}, {"timestamps": False}))
    for rtt in (10, 50):
        out.append(Group("nosack", rtt, {"cc": CCS, "loss": ["1%", "3%"]}, {"sack": False}))
    for rtt in (10, 50):
        out.append(Group("applim", rtt, {"cc": CCS, "loss": ["1%"]},
                         {"tool": "iperf3", "app_rate": APP_RATE}))
    for rtt in (0, 10, 50):
        out.append(Group("router", rtt, {"cc": CCS, "loss": ["1%", "3%"]}, {"capture": "all"}))
    return out


def spec_issue16(trials=(1, 2, 3)) -> str:
    head = f"""# written by bench/flavour_eval.py: the labelled matrix of issue 16 (see its --plan)
[base]
tool = "simpleperf"
duration_s = {CORE_S}
rate = "{RATE}"
snaplen = 128
capture = "both"
"""
    groups = groups_issue16()
    return head + "".join("\n" + g.toml(trial) for trial in trials for g in groups)


def plan_issue16() -> str:
    """The groups of trial 1 with their runs and lab time (trials 2 and 3 repeat them)."""
    rows: dict[str, list[float]] = {}
    for g in groups_issue16():
        runs, seconds = rows.setdefault(g.block, [0, 0.0])[:2]
        rows[g.block] = [runs + g.runs(), seconds + g.runs() * (g.duration_s() + RUN_OVERHEAD_S)]
    lines = ["| group | runs a trial | lab minutes a trial |", "|---|---:|---:|"]
    for block, (runs, seconds) in rows.items():
        lines.append(f"| {block} | {runs:.0f} | {seconds / 60:.1f} |")
    runs = sum(r for r, _ in rows.values())
    minutes = sum(s for _, s in rows.values()) / 60
    lines.append(f"| **trial 1** | **{runs:.0f}** | **{minutes:.0f}** |")
    lines.append(f"| trials 1-3 | {3 * runs:.0f} | {3 * minutes:.0f} |")
    return "\n".join(lines) + (f"\n\n(a run costs its duration + ~{RUN_OVERHEAD_S:g} s: "
                                "topology, RTT check, tcpdump, stream ids, teardown)\n")


SPECS = {"issue16": spec_issue16, "issue7": spec_issue7}


def run(directory: Path, matrix: str, trials=None) -> int:
    """Run (or resume: the lab skips complete runs) the matrix, or only some trials of
    issue 16's (a held-out trial alone fits a working session; trial 1 is the tuning one)."""
    directory.mkdir(parents=True, exist_ok=True)
    spec = directory / "flavour.toml"
    spec.write_text(SPECS[matrix](trials) if trials else SPECS[matrix]())
    return subprocess.run(["pcapstats", "lab", "matrix", str(spec), "-o", str(directory)],
                          check=False).returncode


# -- classifying ------------------------------------------------------------------------------

def _rtt_ms(scenario: dict) -> float:
    from pcapstats.units import parse_time
    return 2e3 * parse_time(scenario["delay"]) if scenario.get("delay") else 0.0


def _loss_pct(scenario: dict) -> float:
    from pcapstats.units import parse_loss
    return 100 * parse_loss(str(scenario["loss"])) if scenario.get("loss") else 0.0


def classify_cell(sidecar_file: Path) -> list[dict]:
    """One row per (capture, TCP flow) of a complete run: the flavour row + the truth + the
    stratum (the capture's side, base RTT, loss, flows sharing, duration) and the run's
    variant (group, rate, timestamps, SACK, application rate)."""
    import pcapstats as ps
    from pcapstats.analyses.flavour import flavour_stream
    from pcapstats.sidecar import load_sidecar
    doc = load_sidecar(sidecar_file)
    if doc["status"] != "complete":
        return []
    rows = []
    scenario = doc["scenario"]
    measured = doc.get("measured") or {}
    for capture in doc["captures"]:
        cap = ps.read(sidecar_file.parent / capture["file"])
        for flow in doc["flows"]:
            stream = (flow.get("streams") or {}).get(capture["file"])
            if stream is None or flow.get("proto") != "tcp":
                continue
            row = flavour_stream(cap, stream).row
            row.update(label=row.pop("flavour"), confidence=row.pop("flavour_confidence"),
                truth=flow["cc"], file=capture["file"], cell=sidecar_file.stem,
                group=sidecar_file.stem.split("-")[0], true_side=capture["side"],
                trial=int(scenario.get("trial", 1)),
                pairs=int(scenario.get("pairs", 1)) * int(scenario.get("parallel", 1)),
                loss=scenario.get("loss"), loss_pct=_loss_pct(scenario),
                delay=scenario.get("delay"),
                base_rtt_ms=_rtt_ms(scenario), rate=scenario.get("rate"),
                flow_s=float(scenario.get("duration_s") or 0),
                timestamps=bool(scenario.get("timestamps", True)),
                sack=bool(scenario.get("sack", True)), app_rate=scenario.get("app_rate"),
                app_limited=bool(scenario.get("app_rate")),
                achieved_bps=measured.get("throughput_bps"),
                rtt_measured_ms=measured.get("rtt_ms"))
            rows.append(row)
    return rows


def classify_all(directory: Path, jobs: int):
    import pandas as pd
    from concurrent.futures import ProcessPoolExecutor
    cells = sorted(p for p in directory.glob("*.json"))
    with ProcessPoolExecutor(jobs) as pool:
        rows = [r for batch in pool.map(classify_cell, cells) for r in batch]
    return pd.DataFrame(rows)


# -- the report -------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return "-" if x != x else f"{x:.1%}"


def _shares(g) -> tuple[int, float, float, int]:
    """flows, unknown share, correct among labelled, wrong with confidence > 0.8."""
    lab = g[g.label != "unknown"]
    right = lab.label == lab.truth
    wrong_sure = int(((~right) & (lab.confidence > TARGET_WRONG_CONFIDENCE)).sum())
    return (len(g), float((g.label == "unknown").mean()) if len(g) else float("nan"),
            float(right.mean()) if len(lab) else float("nan"), wrong_sure)


def strata(df):
    """(side, base RTT, loss, flows, duration) -> flows, unknown, correct among labelled; in
    order (side sender, router, receiver; then numbers)."""
    side_order = {"sender": 0, "router": 1, "receiver": 2}
    keys = ["true_side", "base_rtt_ms", "loss_pct", "pairs", "flow_s"]
    out = []
    for key, g in df.groupby(keys):
        n, unknown, correct, wrong = _shares(g)
        out.append((key, n, unknown, correct, wrong))
    out.sort(key=lambda r: (side_order.get(r[0][0], 9), *r[0][1:]))
    return out


def _counts_toward_target(key) -> bool:
    _, _, loss_pct, _, duration_s = key
    return loss_pct >= 0.5 and duration_s >= 15


def _table(df, key: str, title: str, extra=None) -> list[str]:
    head = f"| {title} | flows | unknown | correct among labelled |"
    sep = "|---|---:|---:|---:|"
    if extra:
        head, sep = head + f" {extra[0]} |", sep + "---:|"
    out = [head, sep]
    for name, g in df.groupby(key, sort=True):
        n, unknown, correct, _ = _shares(g)
        line = f"| {name} | {n} | {_pct(unknown)} | {_pct(correct)} |"
        if extra:
            line += f" {extra[1](g)} |"
        out.append(line)
    return out + [""]


def _achieved(g) -> str:
    runs = g.drop_duplicates("cell")
    values = runs.achieved_bps.dropna()
    if values.empty:
        return "-"
    return (f"{values.median() / 1e6:.0f} ({values.min() / 1e6:.0f}-{values.max() / 1e6:.0f})"
            f" over {len(values)} runs")


def report(df, title: str) -> str:
    """Overall numbers and targets, application-limited flows apart, the confusion matrix, a
    table per stratum, by group and rate, calibration, wrong labels."""
    import pandas as pd
    if df.empty:
        return f"## {title}\n\nno flows\n"
    out = [f"## {title}", ""]
    applim = df[df.app_limited] if "app_limited" in df else df.iloc[:0]
    main = df[~df.app_limited] if "app_limited" in df else df
    labelled = df[df.label != "unknown"]  # every labelled flow is scored against its cc
    right = labelled.label == labelled.truth
    wrong_sure = labelled[(~right) & (labelled.confidence > TARGET_WRONG_CONFIDENCE)]
    correct = float(right.mean()) if len(labelled) else float("nan")
    unknown = float((main.label == "unknown").mean()) if len(main) else float("nan")
    out.append(f"flows {len(main)} (and {len(applim)} application-limited), labelled "
               f"{len(labelled)} (application-limited ones included, scored against their "
               f"cc), correct among labelled {_pct(correct)} ({int(right.sum())}/"
               f"{len(labelled)}), unknown {_pct(unknown)}, wrong with confidence > "
               f"{TARGET_WRONG_CONFIDENCE}: {len(wrong_sure)}")
    if len(applim):
        n, a_unknown, a_correct, a_wrong = _shares(applim)
        out.append(f"application-limited: {n} flows, unknown share {_pct(a_unknown)} (unknown "
                   f"is the right answer), correct among those labelled {_pct(a_correct)}, "
                   f"wrong with confidence > {TARGET_WRONG_CONFIDENCE}: {a_wrong}")
    out.append("")
    rows = strata(main)
    bad = [(k, u) for k, _, u, _, _ in rows
           if _counts_toward_target(k) and u > TARGET_STRATUM_UNKNOWN]
    checks = [
        (f"correct among labelled >= {TARGET_CORRECT:.0%}", correct >= TARGET_CORRECT,
         _pct(correct)),
        (f"no wrong label with confidence > {TARGET_WRONG_CONFIDENCE}", len(wrong_sure) == 0,
         str(len(wrong_sure))),
        (f"unknown <= {TARGET_UNKNOWN:.0%} overall", unknown <= TARGET_UNKNOWN, _pct(unknown)),
        (f"unknown <= {TARGET_STRATUM_UNKNOWN:.0%} in every stratum with loss >= 0.5 % and "
         "flows >= 15 s", not bad,
         "all within" if not bad else f"{len(bad)} strata over: " + "; ".join(
             f"{_stratum_text(k)} {_pct(u)}" for k, u in bad)),
    ]
    out += ["| target | met | value |", "|---|---|---|"]
    out += [f"| {what} | {'yes' if ok else 'NO'} | {value} |" for what, ok, value in checks]
    out.append("")
    cm = pd.crosstab(df.truth, df.label).reindex(index=CCS, columns=CCS + ["unknown"],
                                                  fill_value=0)
    out.append("| truth \\ label | reno | cubic | bbr | unknown |")
    out.append("|---|---:|---:|---:|---:|")
    for cc, r in cm.iterrows():
        out.append(f"| {cc} | " + " | ".join(str(int(v)) for v in r) + " |")
    out.append("")
    out.append("Strata (application-limited flows apart; * : loss >= 0.5 % and flows >= 15 s, "
               f"where unknown must stay <= {TARGET_STRATUM_UNKNOWN:.0%}):")
    out.append("")
    out.append("| side | base RTT | loss | flows sharing | duration | flows | unknown | "
               "correct among labelled |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, n, u, c, _ in rows:
        side, rtt, loss, pairs, duration = key
        star = "*" if _counts_toward_target(key) else ""
        flag = " (!)" if star and u > TARGET_STRATUM_UNKNOWN else ""
        out.append(f"| {side}{star} | {rtt:g} ms | {loss:g} % | {pairs} | {duration:g} s | {n} | "
                   f"{_pct(u)}{flag} | {_pct(c)} |")
    out.append("")
    out += _table(df, "group", "group")
    out += _table(main, "rate", "rate asked", ("reached, Mbit/s: median (range)", _achieved))
    out += _table(main.assign(side=main.true_side + " side, detected " + main.side), "side",
                  "capture side")
    edges = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001]
    out.append("| confidence | flows | correct |")
    out.append("|---|---:|---:|")
    for a, b in zip(edges, edges[1:]):
        inbin = labelled[(labelled.confidence >= a) & (labelled.confidence < b)]
        if len(inbin):
            out.append(f"| {a:.1f}-{min(b, 1):.1f} | {len(inbin)} | "
                       f"{(inbin.label == inbin.truth).mean():.1%} |")
    out.append("")
    wrong = labelled[~right]
    if len(wrong):
        out.append("wrong labels:")
        for _, r in wrong.iterrows():
            out.append(f"- {r.file} stream {r.stream}: {r.truth} labelled {r.label} "
                       f"({r.confidence:.2f}): {r.reason}")
    unknown_rows = main[main.label == "unknown"]
    if len(unknown_rows):
        out.append("")
        out.append("unknown, by reason: " + ", ".join(
            f"{k} {v}" for k, v in
            unknown_rows.reason.str.split(":").str[0].value_counts().items()))
    return "\n".join(out) + "\n"


def _trials(trials) -> str:
    return ", ".join(str(int(t)) for t in trials) or "none"


def _stratum_text(key) -> str:
    side, rtt, loss, pairs, duration = key
    return f"{side} RTT {rtt:g} ms loss {loss:g} % {pairs} flow(s) {duration:g} s"


def _normalise(df):
    """Rows of the issue 7 matrix (or of an older cache) lack the new columns: fill them."""
    import numpy as np
    defaults = {"app_limited": False, "timestamps": True, "sack": True, "app_rate": None,
                "group": "fl", "achieved_bps": np.nan}
    for k, v in defaults.items():
        if k not in df:
            df[k] = v
    return df


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrix", choices=list(SPECS), default="issue16",
                    help="which matrix to run (default issue16; issue7: the first one)")
    ap.add_argument("--run", action="store_true", help="run (or resume) the matrix first")
    ap.add_argument("--plan", action="store_true",
                    help="print the issue16 matrix's groups, runs and lab time, and stop")
    ap.add_argument("--spec", action="store_true", help="print the matrix's spec and stop")
    ap.add_argument("--dir", type=Path, default=None,
                    help="cache directory (default: " + ", ".join(
                        f"{k} {v}" for k, v in CACHES.items()) + ")")
    ap.add_argument("--split", choices=["held-out", "tune", "all"], default=None,
                    help="report one split only (default: tune and held-out)")
    ap.add_argument("--trials", default=None,
                    help="with --run and the issue16 matrix: only these trials, e.g. 2 or 2,3")
    ap.add_argument("--held-out-from", type=int, default=None, metavar="TRIAL",
                    help="trials from this one on are the held-out split (default: issue16 "
                         f"{HELD_OUT_FROM['issue16']}, the rules last changed looking at the "
                         f"trials before it; issue7 {HELD_OUT_FROM['issue7']})")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.plan:
        print(plan_issue16())
        return 0
    if args.spec:
        print(SPECS[args.matrix](), end="")
        return 0
    directory = args.dir or CACHES[args.matrix]
    if args.run:
        trials = tuple(int(t) for t in args.trials.split(",")) if args.trials else None
        if trials and args.matrix != "issue16":
            ap.error("--trials is for the issue16 matrix")
        code = run(directory, args.matrix, trials)
        print(f"pcapstats lab matrix exited with {code}; evaluating what is complete",
              file=sys.stderr, flush=True)
    df = classify_all(directory, args.jobs)
    if df.empty:
        print(f"no complete runs in {directory}; run with --run (as root)", file=sys.stderr)
        return 1
    df = _normalise(df)
    df.to_csv(directory / "flavour_rows.csv", index=False)
    tune = df.trial < (args.held_out_from or HELD_OUT_FROM[args.matrix])
    tuned, held = sorted(df.trial[tune].unique()), sorted(df.trial[~tune].unique())
    splits = {"tune": (df[tune], f"tuning split (trials {_trials(tuned)})"),
              "held-out": (df[~tune], f"held-out split (trials {_trials(held)})"),
              "all": (df, "all trials")}
    for key in ([args.split] if args.split else ["tune", "held-out"]):
        part, title = splits[key]
        print(report(part, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
