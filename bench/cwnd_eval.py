"""cwnd estimated from captures vs the sender kernel's own TCP_INFO snd_cwnd x snd_mss.

Runs a lab matrix (pcapstats.lab.run: sender - router - receiver in network namespaces; random
loss and delay on the router's forwarding path, a rate limit on its egress; simpleperf
sampling TCP_INFO every 10 ms), each run captured on the sender's eth0 and on the receiver's,
then for every capture compares pcapstats.analyses.cwnd's estimate with the kernel over the
kernel samples the estimate calls cwnd-limited (tcp_info_errors: the next sample within one
RTT, in state cwnd).  Prints one line per capture and the median / 90th percentile relative
error per group (side x cc, side x loss), with coverage = kernel samples compared / all.

    python3 bench/cwnd_eval.py                 # the full matrix (~18 runs, about 4 minutes)
    python3 bench/cwnd_eval.py --quick         # 1 % loss, RTT 20 ms, cubic and reno
    python3 bench/cwnd_eval.py --keep DIR      # keep the captures and sidecars in DIR
    python3 bench/cwnd_eval.py --from DIR      # analyse captures already in DIR, run nothing

Needs root (network namespaces).  Results: bench/README.md, "cwnd vs TCP_INFO".
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

FULL = dict(loss=["0.1%", "1%", "10%"], rtt_ms=[10, 100], cc=["reno", "cubic", "bbr"])
QUICK = dict(loss=["1%"], rtt_ms=[20], cc=["reno", "cubic"])
RATE = "20mbit"


def run_matrix(grid: dict, directory: Path, duration_s: float) -> list[Path]:
    from pcapstats.lab import Scenario, run
    sidecars = []
    for loss, rtt_ms, cc in itertools.product(grid["loss"], grid["rtt_ms"], grid["cc"]):
        name = f"cwnd-{cc}-loss{loss.rstrip('%')}pct-rtt{rtt_ms}ms"
        out = directory / f"{name}.pcap"
        if out.with_suffix(".json").exists():
            sidecars.append(out.with_suffix(".json"))
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        # longer runs at long RTTs, so that every run holds several loss episodes
        seconds = duration_s * (2 if rtt_ms >= 50 else 1)
        run(Scenario(tool="simpleperf", loss=loss, delay=f"{rtt_ms / 2:g}ms", rate=RATE, cc=cc,
                     duration_s=seconds, capture="both", snaplen=128), out)
        sidecars.append(out.with_suffix(".json"))
    return sidecars


def evaluate(sidecar: Path) -> list[dict]:
    """One row per (capture, simpleperf flow): the errors against the flow's TCP_INFO."""
    import pcapstats as ps
    from pcapstats.analyses.cwnd import tcp_info_errors
    doc = json.loads(sidecar.read_text())
    rows = []
    asked = doc["impairment"]["asked"]
    for capture in doc["captures"]:
        path = sidecar.parent / capture["file"]
        cap = ps.read(path)
        t0 = int(cap.column("frame_time_ns")[0])
        for flow in doc["flows"]:
            info, stream = flow.get("tcp_info"), (flow.get("streams") or {}).get(capture["file"])
            if not info or stream is None:
                continue
            result = ps.cwnd(cap, stream=stream)
            truth = np.asarray(info["snd_cwnd"], float) * np.asarray(info["snd_mss"], float)
            errors = tcp_info_errors(result.table("samples"), t0, info["t_ns"], truth,
                                     rtt_s=result.rtt_s)
            rows.append({
                "capture": path.name, "side": capture["side"], "detected": result.side,
                "cc": flow["cc"], "loss": f"{asked['loss'] * 100:g}%",
                "rtt_ms": round(2000 * asked["delay_s"]), "errors": errors,
                "kernel_samples": len(truth),
                "ratios": result.table("losses")["ratio"],
            })
    return rows


def _stats(errors: np.ndarray) -> tuple[str, str]:
    if len(errors) == 0:
        return "n/a", "n/a"
    return f"{np.median(errors) * 100:.1f}", f"{np.percentile(errors, 90) * 100:.1f}"


def report(rows: list[dict]) -> str:
    lines = ["| capture | side (detected) | compared / kernel samples | median % | p90 % | "
             "median after/before ratio of loss events |", "|---|---|---|---|---|---|"]
    for r in rows:
        med, p90 = _stats(r["errors"])
        ratios = r["ratios"][~np.isnan(r["ratios"])]
        ratio = f"{np.median(ratios):.2f} ({len(ratios)})" if len(ratios) else "n/a"
        lines.append(f"| {r['capture']} | {r['side']} ({r['detected']}) | "
                     f"{len(r['errors'])} / {r['kernel_samples']} | {med} | {p90} | {ratio} |")
    lines += ["", "| group | captures | compared / kernel samples | median % | p90 % |",
              "|---|---|---|---|---|"]
    for keys in (("side", "cc"), ("side", "loss"), ("side", "rtt_ms"), ("side",)):
        groups: dict[tuple, list[dict]] = {}
        for r in rows:
            groups.setdefault(tuple(r[k] for k in keys), []).append(r)
        for key, members in sorted(groups.items(), key=lambda kv: str(kv[0])):
            errors = np.concatenate([m["errors"] for m in members])
            med, p90 = _stats(errors)
            name = ", ".join(f"{k}={v}" for k, v in zip(keys, key))
            lines.append(f"| {name} | {len(members)} | {len(errors)} / "
                         f"{sum(m['kernel_samples'] for m in members)} | {med} | {p90} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small matrix")
    ap.add_argument("--keep", type=Path, help="keep captures and sidecars here")
    ap.add_argument("--from", dest="source", type=Path, help="analyse the sidecars in this directory")
    ap.add_argument("--duration", type=float, default=4.0, help="seconds a run (x2 at RTT >= 50 ms)")
    args = ap.parse_args(argv)
    if args.source:
        sidecars = sorted(args.source.glob("cwnd-*.json"))
        print(report([r for s in sidecars for r in evaluate(s)]))
        return 0
    grid = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="pcapstats-cwnd-") as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        sidecars = run_matrix(grid, directory, args.duration)
        print(report([r for s in sidecars for r in evaluate(s)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
