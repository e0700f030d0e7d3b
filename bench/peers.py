"""pcapstats' per-stream jobs against tcptrace and tshark doing the same job, one run (issue 29).

    python bench/peers.py [--capture FILE] [--repeat 5] [--only JOB,...] [--no-tshark]
                          [--before COMMIT] [--markdown]
    python bench/peers.py memory [--factor 4] [--repeat 1] [--before COMMIT] [--markdown]

**speed** (the default): every job below as a whole process on bench/data/big.pcap (made by
``python bench/ingest.py --capture-only``, root), each pcapstats command and each peer run
``--repeat`` times round robin (every row once, then again: drift in the machine's state
touches all alike), each run after touching --warm-memory-gb of memory, page cache warm; the
median wall time and the max peak RSS (GNU time's) of each, and each pcapstats job against
the fastest peer doing the same job:

- per-connection table: ``throughput``; ``tcptrace -n``, ``tshark -q -z conv,tcp``;
- re-sent segments per direction: ``retrans``; ``tcptrace -n -l``, ``tshark -q -z io,stat,0``
  of the ``tcp.analysis.*`` flags;
- RTT per direction: ``rtt``; ``tcptrace -n -l -r``, ``tshark -q -z io,stat,0`` MIN/AVG/MAX of
  ``tcp.analysis.ack_rtt``;
- I/O graph: ``iograph --series``; ``tshark -q -z io,stat,1``;
- time-sequence graph: ``seqgraph``; ``tcptrace -n -S`` (xplot files, in a scratch directory);
- the other per-stream analyses, ``cwnd``, ``wscale``, ``flavour``, ``verify``, ``fairness``:
  no peer, against ``throughput``'s time.

A row ``start-up`` runs ``pcapstats throughput`` on the capture's first 20 packets (cut once
with ``editcap -r``): the command's fixed cost (interpreter, numpy, typer, pcapstats' imports),
which every pcapstats row pays and which alone is most of tcptrace's whole run.  CPU seconds
(user + system) are shown beside the wall time: on a shared machine they move less.

The issue's targets, judged on this run: throughput, retrans and rtt at least 1.5x faster than
tcptrace's matching run; iograph --series within 1.5x throughput's time; every other
per-stream analysis within 2x throughput's.  ``--before COMMIT`` runs the pcapstats rows from
a worktree of COMMIT too (scale.py's), interleaved, as a column of its own.

**memory**: peak RSS of each pcapstats command on a capture about 1 GB (big.pcap ``--factor``
times over, each copy's client ports moved so its connections are streams of their own:
scale.py's ``larger(..., distinct=True)``), against the issue's targets: throughput, iograph,
retrans, rtt, fairness, udp and ping under 100 MB; cwnd, seqgraph and flavour within 1.5x the
largest stream's share of the file (its packets over the file's, times the file's size).
udp and ping on a capture of TCP alone say so and exit 2 (shown as n/a).

Numbers are printed, never asserted: a target not reached reads MISSED.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ingest  # noqa: E402  (warm_memory, machine)
import scale  # noqa: E402  (Row, measure, larger, before, Code, footer, ...)
from _measure import GNU_TIME, OtherWork, Refused, load_average, need_tools  # noqa: E402
from studies import render  # noqa: E402

BIG = HERE / "data" / "big.pcap"
FLAGS = ("retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
         "lost_segment", "duplicate_ack")


def _io_stat(*fields: str) -> list[str]:
    return ["tshark", "-n", "-q", "-r", "{f}", "-z", "io,stat,0," + ",".join(fields)]


@dataclass(frozen=True)
class Job:
    """One job: the pcapstats command that does it, the peers that do the same, and the
    target: ``(peer, 1.5)`` at least 1.5x faster than the fastest peer, ``(throughput, 2)``
    within 2x pcapstats throughput's time."""

    name: str
    args: tuple
    peers: dict = field(default_factory=dict)
    target: tuple = ("throughput", 2.0)


JOBS = (
    Job("throughput", ("throughput",), {
        "tcptrace -n": ["tcptrace", "-n", "{f}"],
        "tshark -z conv,tcp": ["tshark", "-n", "-q", "-r", "{f}", "-z", "conv,tcp"]},
        ("peer", 1.5)),
    Job("retrans", ("retrans",), {
        "tcptrace -n -l": ["tcptrace", "-n", "-l", "{f}"],
        "tshark io,stat tcp.analysis flags": _io_stat(
            *(f"COUNT(tcp.analysis.{f})tcp.analysis.{f}" for f in FLAGS))},
        ("peer", 1.5)),
    Job("rtt", ("rtt",), {
        "tcptrace -n -l -r": ["tcptrace", "-n", "-l", "-r", "{f}"],
        "tshark io,stat ack_rtt min/avg/max": _io_stat(
            *(f"{s}(tcp.analysis.ack_rtt)tcp.analysis.ack_rtt" for s in ("MIN", "AVG", "MAX")))},
        ("peer", 1.5)),
    Job("iograph --series", ("iograph", "--series"), {
        "tshark -z io,stat,1": ["tshark", "-n", "-q", "-r", "{f}", "-z", "io,stat,1"]},
        ("throughput", 1.5)),
    Job("seqgraph", ("seqgraph",), {"tcptrace -n -S": ["tcptrace", "-n", "-S", "{f}"]}),
    Job("cwnd", ("cwnd",)), Job("wscale", ("wscale",)), Job("limits", ("limits",)),
    Job("flavour", ("flavour",)),
    Job("verify", ("verify",)), Job("fairness", ("fairness",)),
)
SMALL = ("throughput", "iograph", "retrans", "rtt", "fairness", "udp", "ping")
PER_SAMPLE = ("cwnd", "seqgraph", "flavour", "limits")
SMALL_MB = 100
SHARE_TARGET = 1.5


def say(msg: str) -> None:
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def pcapstats_rows(codes, jobs, capture: Path) -> list[scale.Row]:
    rows = [scale.Row(("pcapstats", job.name, code.name),
                      code.command(*job.args, str(capture), "--format", "csv"),
                      env=code.env(), cwd=scale.OUTSIDE, ok_codes=(0, 1))
            for job in jobs for code in codes]
    tiny = first_packets(capture, 20)
    return rows + [scale.Row(("pcapstats", "start-up", code.name),
                             code.command("throughput", str(tiny), "--format", "csv"),
                             env=code.env(), cwd=scale.OUTSIDE) for code in codes]


def first_packets(capture: Path, n: int) -> Path:
    """The capture's first ``n`` packets (editcap -r), cut once beside the scale captures."""
    out = scale.SCALE / f"{capture.stem}-first{n}{capture.suffix}"
    if not out.exists() or out.stat().st_mtime < capture.stat().st_mtime:
        scale.SCALE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["editcap", "-r", str(capture), str(out), f"1-{n}"], check=True,
                       capture_output=True)
    return out


def peer_rows(jobs, capture: Path, scratch: Path, tshark: bool) -> list[scale.Row]:
    rows = []
    for job in jobs:
        for name, cmd in job.peers.items():
            if name.startswith("tshark") and not tshark:
                continue
            rows.append(scale.Row(("peer", job.name, name),
                                  [str(capture) if c == "{f}" else c for c in cmd],
                                  cwd=scratch))
    return rows


def speed(a: argparse.Namespace) -> int:
    capture = a.capture.resolve()
    if not capture.exists():
        raise Refused(f"{capture} is missing: make it with `python bench/ingest.py "
                      "--capture-only` (root, about a minute)")
    need_tools(["tcptrace"] + (["tshark"] if a.tshark else []), "`peers.py`")
    capture, linked = scale.without_foreign_sidecar(capture)
    jobs = [j for j in JOBS if not a.only or j.name.split()[0] in a.only]
    if a.only and "throughput" not in a.only:
        jobs.insert(0, JOBS[0])                   # every target but three is throughput's
    codes = ([scale.before(a.before)] if a.before else []) + [scale.Code("main", scale.REPO)]
    with tempfile.TemporaryDirectory(prefix="peers-") as scratch:
        rows = pcapstats_rows(codes, jobs, capture) + peer_rows(jobs, capture, Path(scratch),
                                                                a.tshark)
        started, load_at_start = time.strftime("%Y-%m-%d %H:%M %Z"), load_average()
        other = OtherWork()
        facts = scale.capinfos(capture)
        print(f"peers speed, started {started}, load average at start {load_at_start}",
              f"capture {capture.name}: {facts['packets']:,} packets, "
              f"{capture.stat().st_size / 1e6:.0f} MB" + (f" ({linked})" if linked else ""),
              *(f"code {c.name}: {scale.code_version(c.env())}" for c in codes),
              tool_versions(), sep="\n", flush=True)
        scale.warm_page_cache([capture])
        scale.measure(rows, a.repeat, a.warm_memory_gb)
    print()
    print("\n".join(speed_report(rows, jobs, codes, a)))
    print()
    print("\n".join(scale.footer(other, load_at_start, a)))
    return 0


def tool_versions() -> str:
    out = []
    for cmd, word in ((["tcptrace", "-v"], "version"), (["tshark", "--version"], "TShark")):
        try:
            done = subprocess.run(cmd, capture_output=True, text=True)
        except OSError:
            continue
        text = done.stdout + done.stderr
        out.append(next((ln.strip() for ln in text.splitlines() if word in ln), "?"))
    return "peers: " + "; ".join(out)


def speed_report(rows, jobs, codes, a) -> list[str]:
    by = {r.key: r for r in rows}
    names = [c.name for c in codes]
    each = lambda what: [f"{what} {n}" if len(names) > 1 else what for n in names]  # noqa
    head = (["job", *each("pcapstats s"), *each("cpu s"), *each("MB"), "fastest peer",
             "peer s", "cpu s", "peer MB", "peer / pcapstats", "cpu ratio", "target", "met?"])
    lines, said = [], []
    base = by[("pcapstats", "throughput", "main")]
    for job in jobs:
        ours = [by[("pcapstats", job.name, n)] for n in names]
        main = ours[-1]
        said += [f"  pcapstats {job.name} ({r.key[2]}): exit {r.failed.returncode}: "
                 f"{r.failed.error_line()}" for r in ours if r.failed]
        peers = [by[k] for k in by if k[:2] == ("peer", job.name)]
        said += [f"  {r.key[2]}: exit {r.failed.returncode}: {r.failed.error_line()}"
                 for r in peers if r.failed]
        good = [r for r in peers if r.good]
        best = min(good, key=lambda r: r.median("wall_s")) if good else None
        mine = main.median("wall_s") if main.good else float("nan")
        row = [job.name, *_cells(ours)]
        if best:
            theirs = best.median("wall_s")
            cpu = main.median("cpu_s") if main.good else float("nan")
            row += [best.key[2], f"{theirs:.2f}", f"{best.median('cpu_s'):.2f}",
                    f"{best.peak_mb():.0f}", f"{theirs / mine:.2f}x",
                    f"{best.median('cpu_s') / cpu:.2f}x"]
        else:
            row += ["-"] * 6
        kind, factor = job.target
        if kind == "peer":
            goal = f"peer / pcapstats >= {factor:g}x"
            ok = best is not None and best.median("wall_s") / mine >= factor
        else:
            ratio = mine / base.median("wall_s") if base.good else float("nan")
            goal = f"<= {factor:g}x throughput ({ratio:.2f}x)"
            ok = ratio <= factor
        lines.append(row + [goal, "met" if ok else "MISSED"])
    floor = [by[("pcapstats", "start-up", n)] for n in names]
    lines.append(["start-up (20 packets)", *_cells(floor), *["-"] * 8])
    return [render(head, lines, a.markdown), *said,
            "pcapstats s / cpu s / MB: the median wall time and CPU seconds (user + system) of "
            "the whole process and its max peak RSS (GNU time's); peer / pcapstats: how many "
            "times longer the fastest peer took, by the wall clock; cpu ratio: by CPU seconds"]


def _cells(rows) -> list[str]:
    """Each code's median wall s, then each one's median CPU s, then each one's peak RSS."""
    def cell(r, what):
        if not r.good:
            return "FAILED"
        return f"{r.median(what):.2f}" if what != "mb" else f"{r.peak_mb():.0f}"
    return [cell(r, what) for what in ("wall_s", "cpu_s", "mb") for r in rows]


def stream_shares(capture: Path) -> float:
    """The largest TCP stream's share of the file: its packets over the file's (pcapstats
    throughput's packets, checked against tshark's conv,tcp; capinfos' count).  Packets, not
    frame bytes: the bench's captures are cut at 128 bytes, so every packet takes about the
    same room in the file whatever its length on the wire."""
    out = subprocess.run([sys.executable, "-m", "pcapstats", "throughput", str(capture),
                          "--proto", "tcp", "--format", "csv"], capture_output=True, text=True,
                         check=True, cwd=scale.OUTSIDE).stdout
    table = list(csv.DictReader(io.StringIO(out)))
    return max(int(r["packets"]) for r in table) / scale.capinfos(capture)["packets"]


def memory(a: argparse.Namespace) -> int:
    source = a.capture.resolve()
    if not source.exists():
        raise Refused(f"{source} is missing: make it with `python bench/ingest.py "
                      "--capture-only` (root, about a minute)")
    need_tools(["editcap", "mergecap", "capinfos"], "`peers.py memory`")
    capture = scale.larger(source, a.factor, distinct=True)
    if capture is None:
        return 1
    capture, linked = scale.without_foreign_sidecar(capture)
    codes = ([scale.before(a.before)] if a.before else []) + [scale.Code("main", scale.REPO)]
    commands = [(n,) for n in SMALL] + [(n,) for n in PER_SAMPLE]
    commands[1] = ("iograph", "--series")
    rows = [scale.Row(("pcapstats", args[0], code.name),
                      code.command(*args, str(capture), "--format", "csv"), env=code.env(),
                      cwd=scale.OUTSIDE, ok_codes=(0, 1)) for args in commands for code in codes]
    started, load_at_start = time.strftime("%Y-%m-%d %H:%M %Z"), load_average()
    other = OtherWork()
    size_mb = capture.stat().st_size / 1e6
    share = stream_shares(capture)
    print(f"peers memory, started {started}, load average at start {load_at_start}",
          f"capture {capture.name}: {scale.capinfos(capture)['packets']:,} packets, "
          f"{size_mb:.0f} MB; the largest stream {share:.1%} of it ({share * size_mb:.0f} MB)"
          + (f" ({linked})" if linked else ""),
          *(f"code {c.name}: {scale.code_version(c.env())}" for c in codes), sep="\n",
          flush=True)
    scale.warm_page_cache([capture])
    scale.measure(rows, a.repeat, a.warm_memory_gb)
    by = {r.key: r for r in rows}
    names = [c.name for c in codes]
    each = lambda what: [f"{what} {n}" if len(names) > 1 else what for n in names]  # noqa
    lines = []
    for args in commands:
        group = [by[("pcapstats", args[0], n)] for n in names]
        main = group[-1]
        if not main.good:
            kind = "n/a" if main.failed and main.failed.returncode == 2 else "FAILED"
            lines.append([" ".join(args), *["-"] * (3 * len(names)),
                          main.failed.error_line()[:60], kind])
            continue
        mb = main.peak_mb()
        if args[0] in SMALL:
            goal, ok = f"< {SMALL_MB} MB", mb < SMALL_MB
        else:
            limit = SHARE_TARGET * share * size_mb
            goal, ok = f"<= {SHARE_TARGET:g}x the largest stream ({limit:.0f} MB)", mb <= limit
        cell = lambda r, f: f(r) if r.good else "-"  # noqa
        lines.append([" ".join(args),
                      *(cell(r, lambda r: f"{r.median('cpu_s'):.2f}") for r in group),
                      *(cell(r, lambda r: f"{r.peak_mb():.0f}") for r in group),
                      *(cell(r, lambda r: f"{r.peak_mb('RssAnon'):.0f} / "
                                          f"{r.peak_mb('RssFile'):.0f}") for r in group),
                      goal, "met" if ok else "MISSED"])
    print()
    print(render(["command", *each("cpu s"), *each("peak RSS MB"), *each("anon / file MB"),
                  "target", "met?"], lines, a.markdown))
    print()
    print("\n".join(scale.footer(other, load_at_start, a)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", nargs="?", default="speed", choices=("speed", "memory"))
    ap.add_argument("--capture", type=Path, default=BIG, help="default bench/data/big.pcap")
    ap.add_argument("--repeat", type=scale.positive, default=5,
                    help="runs per row, round robin; the median shown (default 5)")
    ap.add_argument("--only", type=lambda s: s.split(","), default=[],
                    help="only these jobs (throughput, retrans, rtt, iograph, seqgraph, ...)")
    ap.add_argument("--no-tshark", dest="tshark", action="store_false",
                    help="leave tshark's rows out (each takes 15-45 s a run)")
    ap.add_argument("--before", metavar="COMMIT",
                    help="also run the pcapstats rows from a worktree of COMMIT, interleaved")
    ap.add_argument("--factor", type=scale.positive, default=4,
                    help="memory: big.pcap this many times over (default 4: about 1 GB)")
    ap.add_argument("--warm-memory-gb", type=float, default=1.5,
                    help="touch and free this much memory before each run (0: don't)")
    ap.add_argument("--markdown", action="store_true", help="the tables as Markdown")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    need_tools([GNU_TIME, "capinfos"], "`peers.py`")
    if not shutil.which("tcptrace") and a.part == "speed":
        raise Refused("`peers.py` needs tcptrace, which is not installed "
                      "(apt-get install tcptrace)")
    try:
        return {"speed": speed, "memory": memory}[a.part](a)
    except KeyboardInterrupt:
        print("peers: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
