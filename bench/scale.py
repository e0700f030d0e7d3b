"""Scale benchmark (issue 17): workers, Dask, and each analysis' memory, as whole processes.

    python bench/scale.py workers [--captures 20] [--of-factor 1] [--repeat 3] [--markdown]
    python bench/scale.py dask    [--captures 20] [--of-factor 1] [--repeat 3] [--markdown]
    python bench/scale.py capped  [--factor 4] [--limit-mb 600] [--markdown]   # root
    python bench/scale.py memory  [--capture FILE] [--factor 4] [--before COMMIT] [--repeat 3]
                                  [--markdown]

**workers** times ``pcapstats compare|retrans|throughput FILES -j 1`` and ``-j 2`` on
--captures consecutive pieces of bench/data/big.pcap (cut once into 20 with ``editcap -c``,
~89k packets and 12 MB each, cached in bench/data/scale/), and prints the speed-up of two
workers over one against the issue's 1.8x.  ``--of-factor 4`` cuts the pieces from big.pcap
four times over instead (the capture ``memory`` makes: ~357k packets and 51 MB each, the
size of a 10-second transfer at 40 Mbit/s), where a capture's work outweighs the command's
start-up.

**dask** runs the same commands on the same pieces through the local pool (``-j 2``), through
``--dask`` (the command starts a LocalCluster of 2 worker processes) and through ``--scheduler``
(a LocalCluster of 2 workers this script starts once, warmed by one untimed run), prints the
overhead per capture, ``(dask - local) / captures``, and checks that every Dask run's CSV is
byte for byte the local one's.

**capped** runs ``pcapstats retrans`` and ``pcapstats flavour`` on a capture --factor times
larger (big.pcap over again, each copy's client ports moved so that its connections are streams
of their own: one 3.6M-packet stream would not fit, see bench/README.md) inside a memory cgroup (v1, this host's; made for the run and removed on every exit
path) whose limit, --limit-mb, is below the file's size and below its whole packet table, so
the whole-table read cannot fit: the per-stream analyses then read by stream group, spilled
to disk (pcapstats.ingest.groups). It checks them against tshark, run outside the cgroup:
retrans' packets per stream and direction against ``tshark -z conv,tcp``'s frames, its flag
totals against ``-z io,stat``'s counts of tcp.analysis.*, and flavour's label of every copy's
streams against its label of the original capture's. For contrast the same retrans with the
budget set past the table (``PCAPSTATS_TABLE_BUDGET``: the whole table kept) is run too.

**memory** runs each analysis command on bench/data/big.pcap (or --capture) and on a capture
--factor times larger (the file over again, each copy shifted in time past the last with
``editcap -t`` and joined with ``mergecap -a``; made once, cached in bench/data/scale/), and
prints peak RSS against the file's size (the issue's 1.5x). ``--before COMMIT`` runs the same
commands from a worktree of that commit too, interleaved with this checkout's.

How: each run is a whole process under GNU time (output to /dev/null, or kept where it is
compared), after touching --warm-memory-gb of memory (bench/ingest.py ``warm_memory``), round
robin, median of --repeat. Memory is measured two ways, because ``-j 2`` and Dask run workers:
GNU time's peak RSS is the largest of any one process of the command's tree (the kernel's
high-water mark, exact), and the tree's RSS is the largest sum over its processes, sampled
from /proc every 10 ms (a peak shorter than that can be missed; pages processes share, such
as a forked worker's copy-on-write pages, count once per process: an upper bound). Every part
prints the load average at its start and end and the cores other processes kept busy
meanwhile. Numbers are printed, never asserted: a target not reached reads MISSED.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import re
import shlex
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
import ingest  # noqa: E402  (pcapstats_cli, warm_memory, machine)
from _measure import (GNU_TIME, OtherWork, Refused, Run, load_average, need_tools,  # noqa: E402
                      timed)
from studies import render  # noqa: E402

REPO = HERE.parent
BIG = HERE / "data" / "big.pcap"
SCALE = HERE / "data" / "scale"
OUTSIDE = Path(tempfile.gettempdir())   # the cwd of memory runs: not the repo, which would
#                                         shadow PYTHONPATH's pcapstats with its own
PIECES = 20
WORKERS = 2
BATCH = ("compare", "retrans", "throughput")
ANALYSES = (("throughput",), ("iograph", "--series"), ("retrans",), ("rtt",), ("verify",),
            ("flavour",), ("limits",), ("cwnd",), ("seqgraph",), ("wscale",), ("ping",), ("udp",),
            ("fairness",), ("delay",), ("hierarchy",))
SPEEDUP_TARGET = 1.8
RSS_TARGET = 1.5          # peak RSS / file size on the 1.75M-packet capture
STATUS_KEYS = ("VmRSS", "RssAnon", "RssFile")
LOCAL = f"local -j {WORKERS}"   # the dask part's reference: the local pool
TREE_NOTE = ("peak RSS: GNU time's, the largest of any one process of the command's tree; tree "
             "RSS: the largest sum of VmRSS over its processes, sampled every 10 ms (pages "
             "they share counted in each: an upper bound)")


def say(msg: str) -> None:
    print(f"scale: {msg}", file=sys.stderr, flush=True)


# == the captures ================================================================================

def capinfos(path: Path) -> dict:
    """The facts of a capture the cutting and joining need: its format's short name (for
    ``-F``: keep nanosecond pcap as it is), packets, first and last time."""
    line = _tool(["capinfos", "-T", "-r", "-t", "-c", "-a", "-e", "-S", "-M", str(path)])
    kind, packets, first, last = line.rstrip("\n").split("\t")[1:]
    return {"format": kind, "packets": int(packets), "first": float(first), "last": float(last)}


def _tool(cmd: list[str], cwd: Path | None = None) -> str:
    """stdout of a tool that must succeed; its failure is one line (Refused), not a traceback."""
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        raise Refused(f"{' '.join(cmd)} exited {p.returncode}: "
                      f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return p.stdout


def need_space(folder: Path, size: int, what: str) -> bool:
    """Whether ``folder``'s disk has 3x ``size`` free (the file, and room to spare while it is
    made); if not, says so."""
    free = shutil.disk_usage(folder).free
    if free >= 3 * size:
        return True
    say(f"skipped {what}: {free / 1e9:.1f} GB free in {folder}, it needs {3 * size / 1e9:.1f} GB "
        "(3x its size)")
    return False


def _vouched(manifest: Path, source: Path) -> dict | None:
    """The manifest beside files made from ``source``, if it still vouches for them (the
    source's size, each file's size): a stale or cut-short file is made again, never measured."""
    if not manifest.exists():
        return None
    doc = json.loads(manifest.read_text())
    made = doc.get("bytes") or {}
    fresh = doc.get("source_bytes") == source.stat().st_size and made and all(
        (manifest.parent / name).is_file() and (manifest.parent / name).stat().st_size == size
        for name, size in made.items())
    return doc if fresh else None


def pieces(count: int, source: Path = BIG) -> list[Path]:
    """The first ``count`` of PIECES consecutive pieces of ``source`` (big.pcap / 20: ~89k
    packets, 12 MB each, a capture of a realistic size), cut once with ``editcap -c`` into a
    temporary folder renamed when complete, and cached in SCALE/<stem>-<PIECES>/."""
    if count > PIECES:
        raise Refused(f"--captures {count}: there are {PIECES} pieces of {source.name}")
    folder = SCALE / f"{source.stem}-{PIECES}"
    doc = _vouched(folder / "manifest.json", source)
    if doc is None:
        doc = _cut(source, folder)
    return [folder / name for name in sorted(doc["bytes"])[:count]]


def _cut(source: Path, folder: Path) -> dict:
    facts = capinfos(source)
    per = math.ceil(facts["packets"] / PIECES)
    SCALE.mkdir(parents=True, exist_ok=True)
    if not need_space(SCALE, source.stat().st_size, f"cutting {source.name}"):
        raise Refused(f"no room to cut {source.name} into {PIECES} pieces")
    part = folder.with_name(folder.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir()
    say(f"cutting {source} into {PIECES} pieces of {per:,} packets (editcap -c, once)")
    _tool(["editcap", "-F", facts["format"], "-c", str(per), str(source), str(part / "p.pcap")])
    for i, made in enumerate(sorted(part.glob("p_*.pcap"))):    # p_00000_<time>.pcap, ...
        made.rename(part / f"piece-{i:02d}.pcap")
    doc = {"source": str(source), "source_bytes": source.stat().st_size,
           "packets_per_piece": per, "format": facts["format"],
           "bytes": {f.name: f.stat().st_size for f in sorted(part.glob("piece-*.pcap"))}}
    (part / "manifest.json").write_text(json.dumps(doc, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    part.rename(folder)
    return doc


def larger(source: Path, factor: int, distinct: bool = False) -> Path | None:
    """``source`` ``factor`` times over in one capture, each copy shifted by ``editcap -t`` to
    start a second after the previous one ends (so the whole is in time order) and joined by
    ``mergecap -a``; made once and cached in SCALE. None (said) when the disk is short.
    ``distinct``: each copy's client ports moved (``distinct_ports``), so its connections are
    streams of their own rather than the first copy's streams continued."""
    out = SCALE / f"{source.stem}-x{factor}{'-distinct' if distinct else ''}.pcap"
    manifest = out.with_name(out.stem + ".manifest.json")   # not NAME.json: a lab sidecar's name
    if _vouched(manifest, source):
        return out
    SCALE.mkdir(parents=True, exist_ok=True)
    if not need_space(SCALE, factor * source.stat().st_size, f"the {factor}x capture {out.name}"):
        return None
    facts = capinfos(source)
    shift = math.ceil(facts["last"] - facts["first"]) + 1
    say(f"making {out} ({factor} copies of {source.name}, each {shift} s after the last; once)")
    with tempfile.TemporaryDirectory(dir=SCALE, prefix=".x") as tmp:
        copies = [str(source)]
        for k in range(1, factor):
            copies.append(str(Path(tmp) / f"copy{k}.pcap"))
            _tool(["editcap", "-F", facts["format"], "-t", str(k * shift), str(source),
                   copies[-1]])
            if distinct:
                distinct_ports(Path(copies[-1]), k)
        joined = Path(tmp) / out.name
        _tool(["mergecap", "-F", facts["format"], "-a", "-w", str(joined), *copies])
        joined.rename(out)
    manifest.write_text(json.dumps({
        "source": str(source), "source_bytes": source.stat().st_size, "factor": factor,
        "shift_s": shift, "packets": facts["packets"] * factor,
        "bytes": {out.name: out.stat().st_size}}, indent=2) + "\n")
    return out


def distinct_ports(capture: Path, k: int) -> None:
    """Move the higher port of every TCP/UDP packet (the client's ephemeral one) by k x 1000,
    in place, so a copy's connections are new streams (Ethernet without VLANs, as the bench's
    captures are; the checksums, which neither tshark nor pcapstats checks, are left)."""
    import numpy as np
    import pcapstats as ps
    cap = ps.read(capture)
    rows = np.flatnonzero((cap.layer("tcp") | cap.layer("udp")) & ~cap.column("l4_quoted"))
    if (cap.column("link_type")[rows] != 1).any() or cap.column("vlan_count")[rows].any():
        raise Refused(f"{capture}: distinct ports need Ethernet frames without VLAN tags")
    tcp = cap.layer("tcp")[rows]
    src = np.where(tcp, cap.column("tcp_srcport")[rows], cap.column("udp_srcport")[rows])
    dst = np.where(tcp, cap.column("tcp_dstport")[rows], cap.column("udp_dstport")[rows])
    at = (cap.column("frame_offset")[rows] + 14 + cap.column("ip_hdr_len")[rows]
          + np.where(src > dst, 0, 2)).astype(np.int64)
    moved = ((np.maximum(src, dst).astype(np.int64) + 1000 * k) % 65536).astype(">u2")
    data = np.memmap(capture, np.uint8, "r+")
    data[at] = moved.view(np.uint8)[0::2]
    data[at + 1] = moved.view(np.uint8)[1::2]
    data.flush()
    del data


# == running =====================================================================================

@dataclass
class Row:
    """One line of a table: one command, run the same way each time, and its runs."""

    key: tuple                   # what the part's table looks it up by
    cmd: list[str]
    env: dict | None = None
    cwd: Path | None = None
    keep_stdout: bool = False
    ok_codes: tuple = (0,)       # exit 1 is "ran, found nothing to report" for an analysis
    runs: list[Run] = field(default_factory=list)

    @property
    def good(self) -> list[Run]:
        return [r for r in self.runs if r.returncode in self.ok_codes]

    @property
    def failed(self) -> Run | None:
        """The run that failed, if one did (the row is then not run again)."""
        return next((r for r in self.runs if r.returncode not in self.ok_codes), None)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.good)

    def tree_mb(self) -> float:
        """The largest sum of RSS over the command's processes, over its runs (MB)."""
        return max(r.sum_kb.get("VmRSS", 0) for r in self.good) * 1024 / 1e6

    def peak_mb(self, key: str | None = None) -> float:
        """GNU time's peak RSS (``key`` None), or a sampled status field's, max over runs."""
        kb = max(r.rss_kb if key is None else r.max_kb.get(key, 0) for r in self.good)
        return kb * 1024 / 1e6


def measure(rows: list[Row], repeat: int, warm_gb: float) -> None:
    """Every row once, then again (round robin), each run after touching ``warm_gb`` of
    memory: drift in the machine's state touches all rows alike. A row that fails is not run
    again: its error is its result (a capture without such traffic, or a bug)."""
    for i in range(repeat):
        for row in rows:
            if row.failed:
                continue
            print(f"scale: {' '.join(map(str, row.key))} run {i + 1}/{repeat} ...", end=" ",
                  file=sys.stderr, flush=True)
            ingest.warm_memory(warm_gb)
            run = timed(row.cmd, keep_stdout=row.keep_stdout, sample=STATUS_KEYS,
                        cwd=row.cwd, env=row.env)
            row.runs.append(run)
            print(f"{run.wall_s:.2f} s" if run.returncode in row.ok_codes else
                  f"exit {run.returncode}: {run.error_line()}", file=sys.stderr)


def warm_page_cache(files: list[Path]) -> None:
    """Every capture read once, so no row pays the disk and all compare the programs."""
    for f in files:
        with open(f, "rb") as src:
            while src.read(1 << 22):
                pass


def code_version(env: dict | None = None) -> str:
    """Which pcapstats the commands import (PYTHONPATH may point elsewhere than this checkout)
    and its commit, marked when its tree has uncommitted changes: what the numbers are of."""
    where = subprocess.run([sys.executable, "-c", "import pcapstats; print(pcapstats.__file__)"],
                           capture_output=True, text=True, cwd=OUTSIDE, env=env
                           ).stdout.strip()
    root = Path(where).parent.parent
    git = ["git", "-C", str(root)]
    sha = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return f"pcapstats in {root}, commit {sha or '?'}" + (" with uncommitted changes"
                                                           if dirty else "")


def footer(other: OtherWork, load_at_start: str, a: argparse.Namespace) -> list[str]:
    """The machine, and how busy it was: numbers measured beside other work must say so."""
    busy = other.cores()
    lines = [*ingest.machine()[1:],      # its first line is the load: said here, with more
             f"ended {time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end "
             f"{load_average()} (at start {load_at_start}; the end figure counts this "
             f"benchmark's own runs); other processes kept {busy:.2f} of {os.cpu_count()} "
             "cores busy on average during the runs"]
    if busy > 0.25 or float(load_at_start.split()[0]) > 0.5:
        lines.append("NOTE: the machine was busy: these numbers were measured under load, "
                     "not as the commands' speed on an idle machine")
    lines.append(f"median of {a.repeat} whole-process runs, round robin, page cache warm, "
                 f"each after touching {a.warm_memory_gb:g} GB of memory")
    return lines


def piece_lines(files: list[Path]) -> str:
    doc = json.loads((files[0].parent / "manifest.json").read_text())
    size = sum(f.stat().st_size for f in files)
    return (f"{len(files)} captures: the first {len(files)} of {PIECES} consecutive pieces of "
            f"{Path(doc['source']).name} (editcap -c {doc['packets_per_piece']:,}), "
            f"{size / 1e6:.0f} MB in all, in {files[0].parent}")


# == part 1: workers =============================================================================

def pieces_for(a: argparse.Namespace) -> list[Path]:
    """The pieces ``--captures`` and ``--of-factor`` ask for."""
    if a.of_factor == 1:
        return pieces(a.captures)
    source = larger(BIG, a.of_factor)
    if source is None:
        raise Refused(f"no room to make big.pcap x{a.of_factor} to cut")
    return pieces(a.captures, source)


HALVES = f"{WORKERS} x -j 1"     # the machine's ceiling: independent processes, no pool


def workers(a: argparse.Namespace) -> int:
    files = pieces_for(a)
    cli = ingest.pcapstats_cli()
    shares = [files[k::WORKERS] for k in range(WORKERS)]     # (dealt for HALVES)
    rows = []
    for cmd in BATCH:
        rows += [Row((cmd, f"-j {j}"), [*cli, cmd, *map(str, files), "-j", str(j), "--format",
                                        "csv"]) for j in (1, WORKERS)]
        at_once = " & ".join(shlex.join([*cli, cmd, *map(str, share), "-j", "1", "--format",
                                         "csv"]) + " > /dev/null" for share in shares)
        rows.append(Row((cmd, HALVES), ["sh", "-c", f"{at_once}; wait"]))
    what = [piece_lines(files), f"code: {code_version()}"]
    return run_part("workers", what, files, rows, a, workers_report)


def workers_report(rows: list[Row], files: list[Path], a) -> list[str]:
    head = ["command", "jobs", "wall s", "runs", "cpu s", "speed-up", "peak RSS MB",
            "tree RSS MB", f"target (>= {SPEEDUP_TARGET}x)"]
    by = {r.key: r for r in rows}
    lines, verdicts = [], []
    for r in rows:
        cmd, jobs = r.key
        if not r.good:
            lines.append([cmd, jobs, "FAILED", *"-" * 6])
            continue
        one = by[(cmd, "-j 1")]
        speedup = one.median("wall_s") / r.median("wall_s") if one.good else None
        target = "-"
        if jobs == HALVES:
            target = "ceiling"
        elif jobs != "-j 1" and speedup is not None:
            target = "met" if speedup >= SPEEDUP_TARGET else "MISSED"
            verdicts.append(f"  [{target}] {cmd} on {len(files)} captures: -j {WORKERS} "
                            f"{speedup:.2f}x the speed of -j 1 (target {SPEEDUP_TARGET}x)")
        lines.append([cmd, jobs, f"{r.median('wall_s'):.2f}", runs_cell(r),
                      f"{r.median('cpu_s'):.2f}",
                      f"{speedup:.2f}x" if speedup is not None else "-",
                      f"{r.peak_mb():.0f}", f"{r.tree_mb():.0f}", target])
    return [render(head, lines, a.markdown), "", *failures(rows), TREE_NOTE,
            f"{HALVES}: the captures dealt to {WORKERS} independent `-j 1` processes run at "
            "once (each with its own start-up): what this machine gives two processes of this "
            "work, the pool's ceiling here", *verdicts]


def runs_cell(r: Row) -> str:
    return " / ".join(f"{run.wall_s:.2f}" for run in r.good)


def failures(rows: list[Row], label: str = "FAILED") -> list[str]:
    """A line for each row that failed: what it said (a failure is a result, shown)."""
    return [f"  {label}: {' '.join(map(str, r.key))}: exit {r.failed.returncode}: "
            f"{r.failed.error_line()}" for r in rows if r.failed]


# == part 2: Dask ================================================================================

@contextlib.contextmanager
def dask_cluster(workers: int):
    """(address, seconds to start, pid) of a LocalCluster of ``workers`` single-threaded processes
    -- as ``--dask`` starts it (``pcapstats.pool.connect``), but with its dashboard on a free
    port, not 8787, which ``--dask``'s own wants -- in a process of its own, alive until this
    closes its stdin: its start-up is paid once, before the runs."""
    code = ("import logging, sys; from distributed import LocalCluster\n"
            f"cluster = LocalCluster(n_workers={workers}, threads_per_worker=1, processes=True,"
            " dashboard_address=':0', silence_logs=logging.ERROR)\n"
            "print(cluster.scheduler_address, flush=True); sys.stdin.read(); cluster.close()")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = proc.stdout.readline().strip()
        if not address.startswith("tcp://"):
            proc.stdin.close()
            raise Refused("could not start a local Dask cluster: "
                          f"{(proc.stderr.read().strip().splitlines() or ['?'])[-1]}")
        yield address, time.perf_counter() - t0, proc.pid
    finally:
        if not proc.stdin.closed:
            proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def dask(a: argparse.Namespace) -> int:
    if importlib.util.find_spec("distributed") is None:
        raise Refused("the dask part needs dask.distributed, which is not installed "
                      "(pip install 'pcapstats[dask]')")
    files = pieces_for(a)
    cli = ingest.pcapstats_cli()
    say(f"starting a LocalCluster of {WORKERS} workers for --scheduler")
    with dask_cluster(WORKERS) as (address, started_s, pid):
        ways = {LOCAL: ["-j", str(WORKERS)],
                f"--dask -j {WORKERS}": ["--dask", "-j", str(WORKERS)],
                "--scheduler": ["--scheduler", address]}
        rows = [Row((cmd, way), [*cli, cmd, *map(str, files), *flags, "--format", "csv"],
                    keep_stdout=True) for cmd in BATCH for way, flags in ways.items()]
        for r in rows:      # the cluster's workers import pcapstats once, not in a timed run
            if r.key[1] == "--scheduler":
                timed(r.cmd, keep_stdout=False)
        what = [piece_lines(files), f"code: {code_version()}",
                f"the local pool against Dask; --scheduler: a LocalCluster of {WORKERS} "
                f"workers this script started in {started_s:.1f} s, warmed by one untimed run "
                "of each command"]
        return run_part("dask", what, files, rows, a, dask_report, ours=(pid,))


def dask_report(rows: list[Row], files: list[Path], a) -> list[str]:
    head = ["command", "path", "wall s", "runs", "x local", "overhead ms / capture", "cpu s",
            "tree RSS MB", "CSV vs local"]
    by = {r.key: r for r in rows}
    lines, notes = [], []
    for r in rows:
        cmd, way = r.key
        if not r.good:
            lines.append([cmd, way, "FAILED", *"-" * 6])
            continue
        local = by[(cmd, LOCAL)]
        base = local.median("wall_s") if local.good else None
        same = compare_outputs(local, r, "stdout") if r is not local and base else "-"
        if r is not local and base:
            notes.append(f"  stderr of {cmd} {way} against local: "
                         f"{compare_outputs(local, r, 'stderr')}")
        lines.append([cmd, way, f"{r.median('wall_s'):.2f}", runs_cell(r),
                      f"{r.median('wall_s') / base:.2f}x" if base else "-",
                      f"{(r.median('wall_s') - base) / len(files) * 1e3:+.0f}"
                      if base and r is not local else "-",
                      f"{r.median('cpu_s'):.2f}", f"{r.tree_mb():.0f}", same])
    return [render(head, lines, a.markdown), "", *failures(rows), TREE_NOTE,
            f"overhead / capture: (wall - {LOCAL}'s) / captures. cpu s and tree RSS count "
            "the command's own processes: --dask's include its cluster, --scheduler's not "
            "(that cluster runs in this script's child)",
            "target: the Dask path's results identical to the local path's (every run's CSV "
            f"compared byte for byte with {LOCAL}'s first run)", *notes]


def compare_outputs(local: Row, other: Row, stream: str) -> str:
    """'identical' when every good run of ``other`` printed exactly what ``local``'s first did
    on ``stream``; else the first difference."""
    want = getattr(local.good[0], stream)
    for run in other.good:
        got = getattr(run, stream)
        if got != want:
            return first_difference(want, got)
    return f"identical ({len(other.good)} runs)"


def first_difference(want: str, got: str) -> str:
    a, b = want.splitlines(), got.splitlines()
    for i, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"DIFFERS at line {i}: local {x[:100]!r}, dask {y[:100]!r}"
    return (f"DIFFERS at line {min(len(a), len(b)) + 1}: local has {len(a)} lines, "
            f"dask {len(b)}")


# == part 3: memory ==============================================================================

@dataclass(frozen=True)
class Code:
    """A pcapstats to run: this checkout, or a worktree of --before; both run the same way,
    ``python -m pcapstats`` with PYTHONPATH at its root from a cwd outside the repo, its
    bytecode compiled first as an install's is (pip compiles it; a checkout run with
    PYTHONDONTWRITEBYTECODE, as these sessions are, would compile ~50 modules from source on
    every run: ~20 ms of CPU that no installed pcapstats pays)."""

    name: str
    root: Path

    def __post_init__(self):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(self.root / "pcapstats")],
                       check=True, capture_output=True)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pcapstats", *args]

    def env(self) -> dict:
        return {**os.environ, "PYTHONPATH": str(self.root)}


def before(commit: str) -> Code:
    """A worktree of ``commit`` under the temporary directory, with its C extensions built
    in place (made once, kept for the next run): were one not built, pcapstats would fall
    back to numpy and the numbers would compare the fallbacks."""
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet",
                            f"{commit}^{{commit}}"], capture_output=True, text=True)
    if found.returncode != 0:
        raise Refused(f"--before {commit}: no such commit in {REPO}")
    sha = found.stdout.strip()
    root = OUTSIDE / f"pcapstats-before-{sha[:12]}"
    if not (root / ".git").exists():
        say(f"git worktree add {root} {sha[:12]}")
        _tool(["git", "-C", str(REPO), "worktree", "add", "--detach", str(root), sha])
    missing = _unbuilt(root)
    if missing:
        say(f"building {sha[:12]}'s C extensions in place")
        _tool([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=root)
        if _unbuilt(root):
            raise Refused(f"{root}: {', '.join(_unbuilt(root))} did not build "
                          "(setup.py build_ext --inplace there says why)")
    return Code("before", root)


def _unbuilt(root: Path) -> list[str]:
    """The extension modules ``root``'s setup.py declares with no built library beside them."""
    names = re.findall(r'Extension\(\s*"([\w.]+)"', (root / "setup.py").read_text())
    return [n for n in names if not list(root.glob(n.replace(".", "/") + "*.so"))]


def memory(a: argparse.Namespace) -> int:
    base = a.capture.resolve()
    if not base.exists():
        raise Refused(f"{base} is missing" + (": make it with `python bench/ingest.py "
                                               "--capture-only` (root, about a minute)"
                                               if base == BIG else ""))
    made = [base] + [c for c in [larger(base, a.factor) if a.factor > 1 else None] if c]
    captures, linked = zip(*(without_foreign_sidecar(c) for c in made))
    codes = ([before(a.before)] if a.before else []) + [Code("main", REPO)]
    rows = [Row((c.name, args[0], code.name), code.command(*args, str(c), "--format", "csv"),
                env=code.env(), cwd=OUTSIDE, ok_codes=(0, 1))
            for c in captures for args in ANALYSES for code in codes]
    what = ["captures: " + "; ".join(f"{c.name} {capinfos(c)['packets']:,} packets, "
                                     f"{c.stat().st_size / 1e6:.0f} MB" for c in captures),
            *(line for line in linked if line),
            *(f"code {c.name}: {code_version(c.env())}" for c in codes),
            f"each: `python -m pcapstats CMD FILE --format csv > /dev/null`, cwd {OUTSIDE}, "
            "PYTHONPATH its code's root" + (", the two codes interleaved" if a.before else "")]
    return run_part("memory", what, list(captures), rows, a,
                    lambda rows, files, a: memory_report(rows, files, codes, a))


CGROUP_V1 = Path("/sys/fs/cgroup/memory")
CAPPED_FLAGS = ("retransmission", "duplicate_ack", "lost_segment", "out_of_order",
                "window_update", "window_full")


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int):
    """A memory cgroup of this run's own, limited to ``limit_bytes`` (swap too, where the
    kernel accounts it); removed on every exit path once its processes have ended."""
    if not (CGROUP_V1 / "memory.limit_in_bytes").exists():
        raise Refused(f"no cgroup v1 memory controller at {CGROUP_V1} (capped needs root and it)")
    group = CGROUP_V1 / f"pcapstats-bench-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
        swap = group / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(limit_bytes))
        yield group
    finally:
        for _ in range(50):                         # its last process may still be exiting
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def capped_run(group: Path, cmd: list[str], env: dict | None = None) -> tuple[Run, dict]:
    """``cmd`` in ``group`` (it joins, then execs), under GNU time: the run and the group's
    facts (its peak usage, page cache included; how often it hit the limit; OOM kills)."""
    (group / "memory.max_usage_in_bytes").write_text("0")
    (group / "memory.failcnt").write_text("0")
    joined = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *cmd]
    run = timed(joined, keep_stdout=True, cwd=OUTSIDE, env=env)
    oom = (group / "memory.oom_control").read_text()
    kills = re.search(r"oom_kill (\d+)", oom)
    return run, {"peak_mb": int((group / "memory.max_usage_in_bytes").read_text()) / 1e6,
                 "failcnt": int((group / "memory.failcnt").read_text()),
                 "oom_kills": int(kills.group(1)) if kills else None}


def tshark_reference(capture: Path) -> tuple[dict, dict]:
    """(frames per (A address, A port, B address, B port) and direction from ``-z conv,tcp``,
    summed over conversations that reuse the ports;
    the tcp.analysis flag totals from ``-z io,stat,0``)."""
    conv = _tool(["tshark", "-n", "-r", str(capture), "-q", "-z", "conv,tcp"])
    frames = {}
    for line in conv.splitlines():
        m = re.match(r"\s*(\S+):(\d+)\s+<->\s+(\S+):(\d+)\s+(\d+)\s+\S+(?:\s+\S+)?\s+(\d+)", line)
        if m:
            a, pa, b, pb, b_to_a, a_to_b = m.groups()
            got = frames.setdefault((a, int(pa), b, int(pb)), [0, 0])   # ports reused: summed
            got[0] += int(a_to_b)
            got[1] += int(b_to_a)
    stats = ",".join(f"COUNT(tcp.analysis.{f})tcp.analysis.{f}" for f in CAPPED_FLAGS)
    io = _tool(["tshark", "-n", "-r", str(capture), "-q", "-z", f"io,stat,0,{stats}"])
    row = [line for line in io.splitlines() if re.match(r"\|\s*0\.0+\s*<>", line)][0]
    counts = [int(x) for x in re.findall(r"\|\s*(\d+)\s*(?=\|)", row.split("<>", 1)[1])]
    return frames, dict(zip(CAPPED_FLAGS, counts[-len(CAPPED_FLAGS):]))


def capped(a: argparse.Namespace) -> int:
    import csv
    import io
    base = a.capture.resolve()
    x = larger(base, a.factor, distinct=True)
    if x is None:
        return 1
    x, linked = without_foreign_sidecar(x)
    size = x.stat().st_size
    limit = a.limit_mb * 1_000_000
    print(f"scale capped, started {time.strftime('%Y-%m-%d %H:%M %Z')}, load {load_average()}")
    print(f"capture {x.name}: {capinfos(x)['packets']:,} packets, {size / 1e6:.0f} MB; memory "
          f"cgroup limit {a.limit_mb} MB ({limit / size:.2f}x the file)" + (f"; {linked}"
                                                                              if linked else ""))
    cli = [sys.executable, "-m", "pcapstats"]
    rows, outputs = [], {}
    with memory_cgroup(limit) as group:
        for name, args, env in (
                ("retrans", ["retrans", str(x), "--format", "csv"], None),
                ("flavour", ["flavour", str(x), "--format", "csv"], None),
                ("retrans, whole table kept", ["retrans", str(x), "--format", "csv"],
                 {**os.environ, "PCAPSTATS_TABLE_BUDGET": str(1 << 40)})):
            run, facts = capped_run(group, cli + args, env)
            outputs[name] = run
            rows.append([name, str(run.returncode), f"{run.wall_s:.1f}",
                         f"{run.rss_kb / 1e3:.0f}", f"{facts['peak_mb']:.0f}",
                         str(facts["failcnt"]), str(facts["oom_kills"])])
            say(f"{name}: exit {run.returncode}, {run.wall_s:.1f} s, peak RSS "
                f"{run.rss_kb / 1e3:.0f} MB")
    print(render(["command", "exit", "wall s", "peak RSS MB", "cgroup peak MB (page cache "
                  "too)", "times at the limit", "OOM kills"], rows, a.markdown))
    checks = []
    retrans = list(csv.DictReader(io.StringIO(outputs["retrans"].stdout)))
    if retrans:
        say("tshark -z conv,tcp and -z io,stat on the capture (outside the cgroup, a minute or two)")
        frames, flags = tshark_reference(x)
        names = {}
        for r in csv.DictReader(io.StringIO(_tool(cli + ["throughput", str(x), "--proto", "tcp",
                                                          "--format", "csv"]))):
            names[int(r["stream"])] = (r["address_a"], int(r["port_a"]), r["address_b"],
                                       int(r["port_b"]))
        ours = {}
        for r in retrans:
            key = names[int(r["stream"])]
            got = ours.setdefault(key, [0, 0])
            got[r["direction"] == "b_to_a"] += int(r["packets"])
        same = ours == frames
        checks.append(f"packets per stream and direction ({len(ours)} streams) equal tshark's "
                      f"conv,tcp frames: {'yes' if same else 'NO'}")
        for flag in CAPPED_FLAGS:
            total = sum(int(r[flag]) for r in retrans)
            checks.append(f"{flag}: {total} (tshark {flags[flag]}): "
                          f"{'equal' if total == flags[flag] else 'DIFFERENT'}")
    flavour = list(csv.DictReader(io.StringIO(outputs["flavour"].stdout)))
    if flavour:
        original = list(csv.DictReader(io.StringIO(_tool(
            cli + ["flavour", str(base), "--format", "csv"]))))
        want = [r["flavour"] for r in original]
        got = [r["flavour"] for r in flavour]
        checks.append(f"flavour labels of the {a.factor} copies {got} = the original's {want} "
                      f"each time: {'yes' if got == want * a.factor else 'NO'}")
    print("\n".join(["", *checks]))
    return 0


def without_foreign_sidecar(capture: Path) -> tuple[Path, str | None]:
    """``capture``, or a hard link to it in SCALE/links when a NAME.json that is not a lab
    sidecar sits beside it (bench/data/big.json is bench/ingest.py's record): verify refuses
    such a capture (exit 2), and the bench measures verify, not that; with what was done."""
    from pcapstats.sidecar import SidecarError, load_sidecar, sidecar_for  # lazy: bench-only
    side = sidecar_for(capture)
    try:
        if not side.exists() or load_sidecar(side):
            return capture, None
    except SidecarError:
        pass
    link = SCALE / "links" / capture.name
    link.parent.mkdir(parents=True, exist_ok=True)
    if not (link.exists() and link.samefile(capture)):
        link.unlink(missing_ok=True)
        os.link(capture, link)
    return link, (f"{capture.name} is run as {link} (a hard link): {side.name} beside it is "
                  "not a lab sidecar, and `pcapstats verify` refuses a capture beside one")


def memory_report(rows: list[Row], files: list[Path], codes: list[Code], a) -> list[str]:
    names = [c.name for c in codes]
    per = ["wall s", "peak RSS MB", "anon / file MB", "RSS / file"]
    head = ["capture", "command"] + [f"{m} {n}" if len(names) > 1 else m
                                     for m in per for n in names] + [f"target (<= {RSS_TARGET}x)"]
    by = {r.key: r for r in rows}
    lines, said, verdicts = [], [], []
    for f in files:
        size_mb = f.stat().st_size / 1e6
        for args in ANALYSES:
            group = [by[(f.name, args[0], n)] for n in names]
            said += refusals(group)
            cells = [_cell(r, m, size_mb) for m in per for r in group]
            main, target = group[-1], "-"
            if f == files[0] and main.good:
                ratio = main.peak_mb() / size_mb
                target = "met" if ratio <= RSS_TARGET else "MISSED"
                verdicts.append(f"  [{target}] {args[0]} on {f.name}: peak RSS "
                                f"{main.peak_mb():.0f} MB = {ratio:.2f}x the file "
                                f"({size_mb:.0f} MB)")
            lines.append([f.name, " ".join(args), *cells, target])
    return [render(head, lines, a.markdown), "", *said,
            "peak RSS: GNU time's, the max over the runs; anon / file: the peaks of RssAnon "
            "and RssFile (/proc/PID/status, sampled): memory the process allocated, and pages "
            "of files it mapped (the capture), which the page cache shares and can reclaim",
            f"target (the issue): peak RSS of every per-stream analysis within {RSS_TARGET}x "
            f"the file's size on {files[0].name}" +
            ("" if files[0].name == BIG.name else
             f" (the target is for {BIG.name}; this run is on another capture)"),
            *verdicts]


def refusals(group: list[Row]) -> list[str]:
    """One line for what the codes' runs of a command said when they did not run it: n/a (exit
    2: the capture has no such traffic) or FAILED (anything else), once if all said the same."""
    out = {}
    for r in group:
        if r.failed:
            kind = "n/a" if r.failed.returncode == 2 else "FAILED"
            out.setdefault(f"{kind}: exit {r.failed.returncode}: {r.failed.error_line()}",
                           []).append(r.key[2])
    capture, command = group[0].key[:2]
    return [f"  {capture} {command}" + ("" if len(who) == len(group) else
                                        f" ({', '.join(who)})") + f": {text}"
            for text, who in out.items()]


def _cell(r: Row, metric: str, size_mb: float) -> str:
    if not r.good:
        return "n/a" if r.failed and r.failed.returncode == 2 else "FAILED"
    return {"wall s": lambda: f"{r.median('wall_s'):.2f}",
            "peak RSS MB": lambda: f"{r.peak_mb():.0f}",
            "anon / file MB": lambda: f"{r.peak_mb('RssAnon'):.0f} / {r.peak_mb('RssFile'):.0f}",
            "RSS / file": lambda: f"{r.peak_mb() / size_mb:.2f}x"}[metric]()


# == every part ==================================================================================

def run_part(part: str, what: list[str], files: list[Path], rows: list[Row], a, report,
             ours=()) -> int:
    """Measure ``rows`` and print the part's table between its start and its end: the load
    and the other work on the machine (not counting ``ours``, processes of this bench)."""
    started, load_at_start = time.strftime("%Y-%m-%d %H:%M %Z"), load_average()
    other = OtherWork(ours)
    print(f"scale {part}, started {started}, load average at start {load_at_start}",
          *what, sep="\n", flush=True)
    warm_page_cache(files)
    measure(rows, a.repeat, a.warm_memory_gb)
    print()
    print("\n".join(report(rows, files, a)))
    print()
    print("\n".join(footer(other, load_at_start, a)))
    return 0


def check_environment(a: argparse.Namespace) -> None:
    """One line and exit 1 for what the part needs and does not have."""
    need_tools([GNU_TIME, "editcap", "mergecap", "capinfos"], f"`scale.py {a.part}`")
    if importlib.util.find_spec("pcapstats") is None:
        raise Refused("pcapstats is not installed (pip install -e . in the repo)")
    if a.part in ("workers", "dask") and not BIG.exists():
        raise Refused(f"{BIG} is missing: make it with `python bench/ingest.py --capture-only` "
                      "(root, about a minute)")


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="part", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repeat", type=positive, default=3, help="runs per row; the median shown")
    common.add_argument("--warm-memory-gb", type=float, default=1.5,
                        help="touch and free this much memory before each run (0: don't)")
    common.add_argument("--markdown", action="store_true", help="the table as Markdown")
    for part, text in (("workers", "-j 1 against -j 2 on --captures pieces of big.pcap"),
                       ("dask", "the local pool against --dask and --scheduler, and their "
                                "CSV compared")):
        p = sub.add_parser(part, parents=[common], help=text)
        p.add_argument("--captures", type=positive, default=PIECES,
                       help=f"how many of the {PIECES} pieces of big.pcap (default all)")
        p.add_argument("--of-factor", type=positive, default=1,
                       help="cut the pieces from big.pcap this many times over (default 1)")
    mem = sub.add_parser("memory", parents=[common],
                         help="peak RSS and time of each analysis command")
    mem.add_argument("--capture", type=Path, default=BIG,
                     help="the capture (default bench/data/big.pcap)")
    mem.add_argument("--factor", type=positive, default=4,
                     help="also a capture this many times larger (1: none)")
    mem.add_argument("--before", metavar="COMMIT",
                     help="also run each command from a worktree of COMMIT, interleaved")
    cap = sub.add_parser("capped", help="retrans and flavour on a capture larger than the "
                                        "memory they are allowed, against tshark")
    cap.add_argument("--capture", type=Path, default=BIG,
                     help="the capture made larger (default bench/data/big.pcap)")
    cap.add_argument("--factor", type=positive, default=4, help="how many times larger")
    cap.add_argument("--limit-mb", type=positive, default=600,
                     help="the cgroup's memory limit, MB (default 600)")
    cap.add_argument("--markdown", action="store_true", help="the table as Markdown")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        check_environment(a)
        return {"workers": workers, "dask": dask, "memory": memory, "capped": capped}[a.part](a)
    except KeyboardInterrupt:
        print("scale: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
