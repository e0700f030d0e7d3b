"""How well `pcapstats flavour` tells reno, cubic and bbr apart, on a labelled lab matrix.

The matrix (issue 7): cc {reno, cubic, bbr} x loss {0.1, 1, 3, 10 %} x RTT {10, 50, 100 ms} x
rate {10, 50 Mbit/s} x 3 trials, simpleperf for DURATION_S seconds, each run captured on the
sender's eth0 and on the receiver's (``capture = "both"``); plus pairs of flows of different cc
sharing one bottleneck (captured on the router's bridges before/after it).  The label of every
flow is the cc recorded in the run's sidecar.  Runs go through ``pcapstats lab matrix`` into a
cache directory (resumable: complete cells are skipped), trial 1 of every cell first so that a
partial run already covers the whole grid.

Thresholds in pcapstats.analyses.flavour were chosen on trial 1 only (see its docstring); the
report prints trial 1 ("tune") and trials 2-3 ("held out") separately, the held-out numbers are
the ones that count.

    sudo python3 bench/flavour_eval.py --run            # run the matrix (~1 h), then evaluate
    python3 bench/flavour_eval.py                       # evaluate what is in the cache so far
    python3 bench/flavour_eval.py --dir DIR --split all # another cache, every trial together

Prints the confusion matrix, accuracy among labelled flows, the share of unknown, confidence
calibration (per confidence bin: count, accuracy) and every wrong label with its confidence.
Results: bench/README.md, "Congestion control from a capture (flavour)".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CACHE = Path(__file__).resolve().parent / "data" / "flavour"
DURATION_S = 12
CCS = ["reno", "cubic", "bbr"]
LOSSES = ["0.1%", "1%", "3%", "10%"]
RTTS_MS = [10, 50, 100]
RATES = ["10mbit", "50mbit"]
MIXED = [["reno", "cubic"], ["cubic", "bbr"], ["reno", "bbr"]]
NAME = "fl-{cc}-loss{loss}-delay{delay}-{rate}-t{trial}"


def spec_text() -> str:
    """The matrix as a `pcapstats lab matrix` spec: trial 1 everywhere first, then the mixed
    pairs, then trials 2 and 3 (the matrix runs groups in order)."""
    delays = [f"{rtt / 2:g}ms" for rtt in RTTS_MS]
    grid = (f'delay = {json.dumps(delays)}, rate = {json.dumps(RATES)}, '
            f'loss = {json.dumps(LOSSES)}, cc = {json.dumps(CCS)}')
    return f"""# written by bench/flavour_eval.py; the labelled matrix of issue 7
[base]
tool = "simpleperf"
duration_s = {DURATION_S}
snaplen = 128
capture = "both"

[[group]]
name = "{NAME}"
axes = {{ trial = [1], {grid} }}

[[group]]
name = "mix-{{cc}}-loss{{loss}}-t{{trial}}"
base = {{ pairs = 2, rate = "20mbit", delay = "25ms" }}
axes = {{ trial = [1, 2], cc = {json.dumps(MIXED)}, loss = ["1%", "3%"] }}

[[group]]
name = "{NAME}"
axes = {{ trial = [2, 3], {grid} }}
"""


def run(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    spec = directory / "flavour.toml"
    spec.write_text(spec_text())
    subprocess.run(["pcapstats", "lab", "matrix", str(spec), "-o", str(directory)], check=False)


def classify_cell(sidecar_file: Path) -> list[dict]:
    """One row per (capture, flow) of a complete run: the flavour row + the truth."""
    import pcapstats as ps
    from pcapstats.analyses.flavour import flavour_stream
    from pcapstats.lab.sidecar import load_sidecar
    doc = load_sidecar(sidecar_file)
    if doc["status"] != "complete":
        return []
    rows = []
    scenario = doc["scenario"]
    for capture in doc["captures"]:
        cap = ps.read(sidecar_file.parent / capture["file"])
        for flow in doc["flows"]:
            stream = (flow.get("streams") or {}).get(capture["file"])
            if stream is None or flow.get("proto") != "tcp":
                continue
            row = flavour_stream(cap, stream).row
            row.update(truth=flow["cc"], file=capture["file"], true_side=capture["side"],
                       trial=int(scenario.get("trial", 1)), pairs=int(scenario.get("pairs", 1)),
                       loss=scenario["loss"], delay=scenario["delay"], rate=scenario["rate"])
            rows.append(row)
    return rows


def classify_all(directory: Path, jobs: int):
    import pandas as pd
    from concurrent.futures import ProcessPoolExecutor
    cells = sorted(p for p in directory.glob("*.json"))
    with ProcessPoolExecutor(jobs) as pool:
        rows = [r for batch in pool.map(classify_cell, cells) for r in batch]
    return pd.DataFrame(rows)


def report(df, title: str) -> str:
    """Confusion matrix, accuracy among labelled, unknown share, calibration, wrong labels."""
    import numpy as np
    import pandas as pd
    if df.empty:
        return f"## {title}\n\nno flows\n"
    out = [f"## {title}", ""]
    labelled = df[df.label != "unknown"]
    right = labelled.label == labelled.truth
    out.append(f"flows {len(df)}, labelled {len(labelled)}, correct among labelled "
               f"{right.mean():.1%} ({int(right.sum())}/{len(labelled)}), unknown "
               f"{(df.label == 'unknown').mean():.1%}, wrong with confidence > 0.8: "
               f"{int(((~right) & (labelled.confidence > 0.8)).sum())}")
    out.append("")
    cm = pd.crosstab(df.truth, df.label).reindex(index=["reno", "cubic", "bbr"],
                                                  columns=["reno", "cubic", "bbr", "unknown"],
                                                  fill_value=0)
    out.append("| truth \\ label | reno | cubic | bbr | unknown |")
    out.append("|---|---:|---:|---:|---:|")
    for cc, r in cm.iterrows():
        out.append(f"| {cc} | " + " | ".join(str(int(v)) for v in r) + " |")
    out.append("")
    groups = df.assign(
        capture=df.true_side + "-side, " + np.where(df.pairs > 1, "2 flows sharing", "1 flow"),
        loss_rate="loss " + df.loss.astype(str))
    for key in ("capture", "loss_rate"):
        out.append(f"| {key.replace('_', ' ')} | flows | unknown | correct among labelled |")
        out.append("|---|---:|---:|---:|")
        for name, g in groups.groupby(key):
            lab = g[g.label != "unknown"]
            out.append(f"| {name} | {len(g)} | {(g.label == 'unknown').mean():.1%} | "
                       f"{(lab.label == lab.truth).mean():.1%} |")
        out.append("")
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
    unknown = df[df.label == "unknown"]
    if len(unknown):
        out.append("")
        out.append("unknown, by reason: " + ", ".join(
            f"{k} {v}" for k, v in unknown.reason.str.split(":").str[0].value_counts().items()))
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run (or resume) the matrix first")
    ap.add_argument("--dir", type=Path, default=CACHE, help=f"cache directory ({CACHE})")
    ap.add_argument("--split", choices=["held-out", "tune", "all"], default=None,
                    help="report one split only (default: tune and held-out)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.run:
        run(args.dir)
    df = classify_all(args.dir, args.jobs)
    if df.empty:
        print(f"no complete runs in {args.dir}; run with --run (as root)", file=sys.stderr)
        return 1
    df.to_csv(args.dir / "flavour_rows.csv", index=False)
    tune = df.trial == 1
    splits = {"tune": (df[tune], "tuning split (trial 1)"),
              "held-out": (df[~tune], "held-out split (trials 2-3)"),
              "all": (df, "all trials")}
    for key in ([args.split] if args.split else ["tune", "held-out"]):
        part, title = splits[key]
        print(report(part, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
