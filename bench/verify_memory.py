"""Memory and time of ``pcapstats verify`` on big simpleperf transfers, against ``ps.read`` and
tshark's ``follow,tcp``.

    python bench/verify_memory.py [--sizes 30,100,300] [--loss-size 300] [--repeat 3]
                                  [--follow-packets 5000] [--data bench/data/verify]

Issue 6 asks that reassembly not hold a whole transfer.  This makes (once, as root; cached in
--data with the lab's sidecar beside each) real simpleperf captures with their full payload,
``pcapstats lab run --tool simpleperf -n <size>MB --rate 1gbit`` (and one with ``--loss 1%``),
then runs each command as its own process, --repeat times, and prints the median wall time and
the peak memory:

- **peak RSS**: GNU time's maximum resident set size (as bench/ingest.py);
- **anon / file**: the peaks of ``RssAnon`` and ``RssFile`` in /proc/PID/status, sampled every
  5 ms: memory the process allocated vs pages of mapped files (the capture pcapstats maps).
  File pages are the page cache, shared and reclaimable; they are what an ``mmap`` reader
  shows in ``top`` for every byte it has touched.

Then, per packet, how the peaks grow from the smallest to the largest loss-free capture, for
verify and for ps.read alone: what verify holds beyond the packet table.

tshark's ``-z follow,tcp,raw,0`` (the whole stream reassembled, Wireshark's Follow TCP Stream)
takes time that grows with the square of the packets here (3k packets 2.7 s, 6k 7.6 s, 25k
272 s), so it runs on the first --follow-packets packets of the largest capture, and so do
verify and ps.read in that row group.  Speed and memory are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ingest import pcapstats_cli, warm_memory  # noqa: E402
from _measure import timed  # noqa: E402

RATE = "1gbit"
WARM_GB = 1.0
SAMPLE_S = 0.005
READ = [sys.executable, "-c", "import sys, pcapstats as ps; ps.read(sys.argv[1])"]


def _say(msg: str) -> None:
    print(f"[verify-bench] {msg}", file=sys.stderr, flush=True)


# -- the captures -------------------------------------------------------------------------------

def ensure_capture(data: Path, megabytes: int, loss: str | None) -> Path:
    """A simpleperf -n <megabytes>MB capture in ``data``, made by ``pcapstats lab run`` unless
    one is there whose sidecar says it completed and whose size is the one the sidecar wrote."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"sp-{megabytes}MB{'-loss' + loss.rstrip('%') if loss else ''}.pcap"
    if _complete(path):
        return path
    cmd = [*pcapstats_cli(), "lab", "run", "--tool", "simpleperf", "-n", f"{megabytes}MB",
           "--rate", RATE, "-o", str(path)] + (["--loss", loss] if loss else [])
    _say("making " + " ".join(cmd[len(pcapstats_cli()):]))
    subprocess.run(cmd, check=True)
    if not _complete(path):
        raise SystemExit(f"bench: {path} was not made completely; see its sidecar")
    return path


def _complete(path: Path) -> bool:
    side = path.with_suffix(".json")
    if not path.exists() or not side.exists():
        return False
    doc = json.loads(side.read_text())
    sizes = [c.get("size_bytes") for c in doc.get("captures", []) if c.get("file") == path.name]
    return doc.get("status") == "complete" and sizes == [path.stat().st_size]


def packet_count(path: Path) -> int:
    doc = json.loads(path.with_suffix(".json").read_text())
    return next(c["packets_captured"] for c in doc["captures"] if c["file"] == path.name)


def cut(path: Path, packets: int) -> Path:
    """The first ``packets`` packets of a capture (editcap), cached beside it."""
    out = path.with_name(f"{path.stem}-first{packets}.pcap")
    if not out.exists():
        subprocess.run(["editcap", "-r", str(path), str(out), f"1-{packets}"], check=True)
    return out


# -- one measured process -----------------------------------------------------------------------

@dataclass
class Run:
    wall_s: float
    rss_mb: float      # GNU time's maximum resident set size
    anon_mb: float     # peak RssAnon seen by the sampler (largest process of the tree)
    file_mb: float     # peak RssFile


def run(cmd: list[str], expect_codes: tuple[int, ...] = (0,)) -> Run:
    """Run ``cmd`` under GNU time with stdout to /dev/null, sampling its memory split."""
    warm_memory(WARM_GB)
    r = timed(cmd, keep_stdout=False, sample=("RssAnon", "RssFile"), every=SAMPLE_S)
    if r.returncode not in expect_codes:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-1000:]}")
    return Run(r.wall_s, r.rss_kb / 1024, r.max_kb["RssAnon"] / 1024, r.max_kb["RssFile"] / 1024)


@dataclass
class Row:
    name: str
    capture: Path
    packets: int
    runs: list[Run] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


def measure(name: str, capture: Path, packets: int, cmd: list[str], repeat: int,
            expect_codes=(0,)) -> Row:
    row = Row(name, capture, packets)
    for k in range(repeat):
        row.runs.append(run(cmd, expect_codes))
        r = row.runs[-1]
        _say(f"{name} {capture.name} run {k + 1}: {r.wall_s:.2f} s, RSS {r.rss_mb:.0f} MB "
             f"(anon {r.anon_mb:.0f}, file {r.file_mb:.0f})")
    return row


# -- the report ---------------------------------------------------------------------------------

def table(rows: list[Row], markdown: bool) -> str:
    head = ["capture", "MB", "packets", "command", "wall s", "peak RSS MB", "anon MB",
            "file MB", "wall / read", "RSS / read"]
    base = {r.capture: r for r in rows if r.name == "ps.read"}
    lines = []
    for r in rows:
        b = base.get(r.capture)
        lines.append([r.capture.name, f"{r.capture.stat().st_size / 1e6:.0f}", f"{r.packets:,}",
                      r.name, f"{r.median('wall_s'):.2f}", f"{r.median('rss_mb'):.0f}",
                      f"{r.median('anon_mb'):.0f}", f"{r.median('file_mb'):.0f}",
                      f"{r.median('wall_s') / b.median('wall_s'):.1f}x" if b else "",
                      f"{r.median('rss_mb') / b.median('rss_mb'):.1f}x" if b else ""])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(out + ["| " + " | ".join(x) + " |" for x in lines])
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*head)] + [fmt.format(*x) for x in lines])


def growth(rows: list[Row], small: Path, large: Path) -> list[str]:
    """Bytes per packet that each peak grows by from the small to the large capture."""
    out = []
    for name in ("pcapstats verify", "ps.read"):
        a = next(r for r in rows if r.name == name and r.capture == small)
        b = next(r for r in rows if r.name == name and r.capture == large)
        dp = b.packets - a.packets
        per = {attr: (b.median(attr) - a.median(attr)) * 2**20 / dp
               for attr in ("rss_mb", "anon_mb", "file_mb")}
        out.append(f"{name}: {small.name} -> {large.name} (+{dp:,} packets, "
                   f"+{(large.stat().st_size - small.stat().st_size) / 1e6:.0f} MB of file): "
                   f"peak RSS +{per['rss_mb']:.0f} B/packet, anon +{per['anon_mb']:.0f} "
                   f"B/packet, file +{per['file_mb']:.0f} B/packet")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=HERE / "data" / "verify")
    ap.add_argument("--sizes", default="30,100,300", help="simpleperf -n sizes in MB")
    ap.add_argument("--loss-size", type=int, default=300,
                    help="MB of one more run with 1%% loss (0: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--follow-packets", type=int, default=5000,
                    help="packets of the largest capture that tshark follow reads (0: skip)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    captures = [ensure_capture(args.data, n, None) for n in sizes]
    if args.loss_size:
        captures.append(ensure_capture(args.data, args.loss_size, "1%"))
    verify = [*pcapstats_cli(), "verify"]
    rows: list[Row] = []
    for path in captures:
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page cache
        n = packet_count(path)
        rows.append(measure("ps.read", path, n, READ + [str(path)], args.repeat))
        rows.append(measure("pcapstats verify", path, n, verify + [str(path)], args.repeat))
    if args.follow_packets:
        first = cut(captures[len(sizes) - 1], args.follow_packets)
        # a cut ends mid-transfer: verify says "fail" (no BYE, no FIN): exit 1 is expected
        rows.append(measure("ps.read", first, args.follow_packets, READ + [str(first)],
                            args.repeat))
        rows.append(measure("pcapstats verify", first, args.follow_packets,
                            verify + [str(first)], args.repeat, expect_codes=(0, 1)))
        rows.append(measure("tshark follow,tcp,raw", first, args.follow_packets,
                            ["tshark", "-n", "-r", str(first), "-q", "-z", "follow,tcp,raw,0"],
                            args.repeat))
    start = measure("start-up", captures[0], 0, [*pcapstats_cli(), "--help"], args.repeat)
    print(table(rows, args.markdown))
    print(f"\nstart-up alone (pcapstats --help): "
          f"{start.median('wall_s'):.2f} s, RSS {start.median('rss_mb'):.0f} MB "
          f"(anon {start.median('anon_mb'):.0f})")
    if len(sizes) > 1:
        print("\n".join(growth(rows, captures[0], captures[len(sizes) - 1])))
    print(f"\nmedian of {args.repeat} runs; {RATE} bottleneck; load at end "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
