"""Make the real captures shipped in captures/ (run as root; about 2 minutes).

    sudo python3 captures/make_captures.py [--out captures] [--redo]

Runs the `pcapstats lab matrix` spec captures/captures.toml into --out (cells already complete
are kept unless --redo), then rewrites the table of files in captures/README.md from the
sidecars: what each file is, its size, the `pcapstats lab run` command that makes it alone,
and asked vs measured, and its table of sidecar fields from pcapstats.sidecar.FIELDS.  Fails if
the set grows beyond 20 MB.  ``--readme-only`` rewrites both tables from the sidecars already
there, without running the lab (after a change to the field descriptions, say).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pcapstats.cli.lab import run_command
from pcapstats.lab import load_sidecar
from pcapstats.lab.matrix import load_spec, run_matrix
from pcapstats.sidecar import describe_markdown, sidecar_path

HERE = Path(__file__).resolve().parent
LIMIT_BYTES = 20_000_000
BEGIN, END = "<!-- files: made by make_captures.py -->", "<!-- end of files -->"
FIELDS_HEAD = "| field | meaning |"


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _measured(doc: dict) -> str:
    m, parts = doc["measured"], []
    if m.get("rtt_ms") is not None:
        parts.append(f"RTT {m['rtt_ms']:.1f} ms (asked {m['rtt_asked_ms']:.0f})")
    if m.get("throughput_bps") is not None:
        parts.append(f"{m['throughput_bps'] / 1e6:.2f} Mbit/s")
    if m.get("loss_asked"):
        parts.append(f"loss {100 * m['loss_measured']:.1f} % (asked {100 * m['loss_asked']:g})")
    if m.get("retransmitted_segments") is not None:
        parts.append(f"{m['retransmitted_segments']} retransmitted")
    for r in doc["reports"]:
        summary = r["summary"]
        if r["mode"] == "udp":
            parts.append(f"UDP lost {summary['lost_percent']:.1f} %, jitter "
                         f"{summary['jitter_ms']:.2f} ms (iperf3)")
        if r["mode"] == "icmp":
            medians = ", ".join(f"{s} B: {ms} ms" for s, ms in
                                zip(summary["sizes_bytes"], summary["median_ms"]))
            parts.append(f"ping median {medians}")
        if r["tool"] == "pingpong":
            means = ", ".join(f"{s} B: {ms:.1f} ms" for s, ms in
                              zip(summary["sizes_bytes"], summary["avg_ms"]))
            parts.append(f"pingpong average {means}")
    return ", ".join(parts)


def table(spec: Path, out: Path) -> tuple[str, int]:
    """The README's table of files, and the set's total size in bytes."""
    rows = ["| files | what | size | measured | made alone by |", "|---|---|---|---|---|"]
    total = 0
    for cell in load_spec(spec):
        output = out / f"{cell.name}.{cell.scenario.format}"
        doc = load_sidecar(sidecar_path(output))
        files = [c["file"] for c in doc["captures"]] + [sidecar_path(output).name]
        size = sum((out / f).stat().st_size for f in files)
        total += size
        command = " ".join(run_command(cell.scenario, Path("captures") / output.name))
        rows.append(f"| {'<br>'.join(f'`{f}`' for f in files)} | {cell.about} | {_mb(size)} | "
                    f"{_measured(doc)} | `{command}` |")
    rows.append(f"| **total** | | **{_mb(total)}** | | |")
    return "\n".join(rows), total


def rewrite_readme(readme: Path, text: str) -> None:
    """The table of files between its markers, and the field table (the README's last part,
    from its heading row on) as pcapstats.sidecar describes the fields."""
    old = readme.read_text()
    start, end = old.index(BEGIN) + len(BEGIN), old.index(END)
    new = old[:start] + "\n" + text + "\n" + old[end:]
    fields = new.index(FIELDS_HEAD)
    readme.write_text(new[:fields] + describe_markdown() + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory (default captures/)")
    parser.add_argument("--spec", type=Path, default=HERE / "captures.toml")
    parser.add_argument("--redo", action="store_true", help="remake cells already complete")
    parser.add_argument("--readme-only", action="store_true",
                        help="rewrite the README's tables from the sidecars; run nothing")
    args = parser.parse_args(argv)
    if args.readme_only:
        rewrite_readme(HERE / "README.md", table(args.spec, HERE)[0])
        return 0
    if args.redo:
        for cell in load_spec(args.spec):
            sidecar_path(args.out / f"{cell.name}.{cell.scenario.format}").unlink(missing_ok=True)

    def on_cell(k, total, cell, state):
        print(f"[{k + 1}/{total}] {cell.name}: {state}", file=sys.stderr, flush=True)

    results = run_matrix(args.spec, args.out, on_cell=on_cell,
                         command=["python3", "captures/make_captures.py"])
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        print(f"{r.name}: {r.error}", file=sys.stderr)
    if failed:
        return 2
    text, total = table(args.spec, args.out)
    if args.out.resolve() == HERE:
        rewrite_readme(HERE / "README.md", text)
    print(f"{len(results)} runs, {_mb(total)} in {args.out}")
    if total > LIMIT_BYTES:
        print(f"the set is {_mb(total)}, above the {_mb(LIMIT_BYTES)} limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
