"""Ingest benchmark: pcapstats against its peers on one big real capture, in one run.

    python bench/ingest.py [--quick] [--repeat 3] [--data bench/data] [--only NAMES] [--markdown]

Makes (once, cached in --data) a real TCP capture of >= 1.5M packets at snaplen 128 with the
tests' netns recipe, its pcapng copy and a 50k-packet cut, then times every contestant as a
separate whole process, median of --repeat runs, with the file in the page cache (a ``cat``
runs first and is the floor). Peak RSS is GNU time's: the largest resident size of the
process or of any child it waited for. scapy and pyshark read the cut; their full-capture
times are extrapolated from their packets/s and marked "~". Speed is printed, never asserted.
See bench/README.md for what each row means and the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _capture  # noqa: E402
from _measure import Run, timed  # noqa: E402

PEERS = [sys.executable, str(HERE / "_peers.py")]
TSHARK_FIELDS = ["frame.number", "frame.time_epoch", "ip.src", "ip.dst", "tcp.srcport",
                 "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.len", "tcp.stream"]
CUT_PACKETS = 50_000
LOAD_AT_START = " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- the capture --------------------------------------------------------------------------------

@dataclass
class Files:
    pcap: Path
    pcapng: Path
    cut: Path
    packets: int
    facts: dict

    def get(self, kind: str) -> Path:
        return {"pcap": self.pcap, "pcapng": self.pcapng, "cut": self.cut}[kind]


def ensure_capture(data: Path, quick: bool, remake: bool) -> Files:
    """Reuse the capture cached in ``data`` when its sidecar vouches for it, else make it."""
    data.mkdir(parents=True, exist_ok=True)
    stem = "quick" if quick else "big"
    pcap, pcapng = data / f"{stem}.pcap", data / f"{stem}.pcapng"
    cut, sidecar = data / f"{stem}-cut{CUT_PACKETS // 1000}k.pcap", data / f"{stem}.json"
    facts = json.loads(sidecar.read_text()) if sidecar.exists() and not remake else None
    if not facts or not pcap.exists() or pcap.stat().st_size != facts.get("pcap_bytes"):
        recipe = _capture.QUICK if quick else _capture.FULL
        print(f"bench: making {pcap} (>= {recipe.min_packets:,} packets; needs root, "
              "takes a while)", file=sys.stderr)
        for stale in (pcapng, cut, sidecar):
            stale.unlink(missing_ok=True)
        facts = _capture.make(pcap, recipe)
        facts["pcap_bytes"] = pcap.stat().st_size
        sidecar.write_text(json.dumps(facts, indent=2) + "\n")
    if not pcapng.exists():
        _editcap(["-F", "pcapng", str(pcap)], pcapng)
    if not cut.exists():
        _editcap(["-r", str(pcap)], cut, f"1-{CUT_PACKETS}")
    return Files(pcap, pcapng, cut, facts["packets"], facts)


def _editcap(args: list[str], out: Path, *rest: str) -> None:
    """editcap into a temporary name, renamed when done, so a cut-short file is never reused."""
    part = out.with_name(out.name + ".part")
    print(f"bench: editcap {' '.join(args)} -> {out.name}", file=sys.stderr)
    subprocess.run(["editcap", *args, str(part), *rest], check=True)
    part.rename(out)


# -- timing one whole process ---------------------------------------------------------------------

def run_process(cmd: list[str], keep_stdout: bool = True) -> Run:
    """Run ``cmd`` once under GNU time (``_measure.timed``); a non-zero exit is a RuntimeError
    with the end of its stderr."""
    run = timed(cmd, keep_stdout=keep_stdout)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}:\n{run.stderr[-2000:]}")
    return run


# -- the contestants ------------------------------------------------------------------------------

@dataclass
class Job:
    """One row of the table: a command over one file kind, and how to read its packet count."""

    name: str
    kind: str                      # "pcap", "pcapng" or "cut"
    cmd: list[str]                 # "{f}" stands for the file
    count: str = "json"            # how it says how many packets it read: "json" (worker's
    #                                JSON line), "lines" (one a packet), "conv" (tshark's
    #                                conversation table), "csv" (our CLI's table), "none"
    group: str = "peer"            # "floor", "startup" (reads nothing), "pcapstats" or "peer"
    runs: list[Run] = field(default_factory=list)
    info: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def command(self, path: Path) -> list[str]:
        return [str(path) if a == "{f}" else a for a in self.cmd]


def pcapstats_cli() -> list[str]:
    """The console script beside this interpreter: a pyenv shim on PATH adds ~0.1 s of bash."""
    exe = Path(sysconfig.get_path("scripts")) / "pcapstats"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pcapstats"]


def jobs(have_numpy_kernel: bool) -> list[Job]:
    cli = pcapstats_cli()
    out = [Job("python -c 'import pcapstats'", "pcap", [sys.executable, "-c", "import pcapstats"],
               "none", "startup")]
    for kind in ("pcap", "pcapng"):
        out += [
            Job("cat > /dev/null", kind, ["cat", "{f}"], "none", "floor"),
            Job("pcapstats read", kind, [*PEERS, "pcapstats-read", "{f}"], group="pcapstats"),
            Job("pcapstats read+throughput", kind, [*PEERS, "pcapstats-throughput", "{f}"],
                group="pcapstats"),
            Job("pcapstats throughput(path) (4 MiB windows)", kind,
                [*PEERS, "pcapstats-stream", "{f}"], group="pcapstats"),
            Job("pcapstats throughput (CLI)", kind,
                [*cli, "throughput", "{f}", "--format", "csv"], "csv", "pcapstats"),
        ]
        if have_numpy_kernel:
            out.append(Job("pcapstats read+throughput kernel=numpy", kind,
                           [*PEERS, "pcapstats-throughput", "{f}", "--kernel", "numpy"],
                           group="pcapstats"))
        out.append(Job("tshark -q -z conv,tcp", kind,
                       ["tshark", "-q", "-z", "conv,tcp", "-r", "{f}"], "conv"))
    out += [
        Job("tshark -T fields (10 fields)", "pcap",
            ["tshark", "-r", "{f}", "-T", "fields", *(x for f in TSHARK_FIELDS for x in ("-e", f))],
            "lines"),
        Job("dpkt loop (Eth/IP/TCP, per 4-tuple)", "pcap", [*PEERS, "dpkt", "{f}"]),
        Job("scapy PcapReader", "cut", [*PEERS, "scapy", "{f}"]),
        Job("pyshark FileCapture", "cut", [*PEERS, "pyshark", "{f}"]),
    ]
    return out


def probe_pcapstats(path: Path) -> tuple[bool, bool, str | None]:
    """(imports, has a numpy kernel, why not) -- decides which rows run."""
    code = f"import pcapstats as ps; ps.read({str(path)!r}, kernel='numpy')"
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=600)
    except subprocess.TimeoutExpired:
        return True, False, "kernel='numpy' took over 10 min on the cut"
    if r.returncode == 0:
        return True, True, None
    r2 = subprocess.run([sys.executable, "-c", f"import pcapstats as ps; ps.read({str(path)!r})"],
                        capture_output=True, text=True)
    if r2.returncode != 0:
        return False, False, (r2.stderr.strip().splitlines() or ["?"])[-1]
    return True, False, (r.stderr.strip().splitlines() or ["?"])[-1]


def conv_frames(text: str) -> int:
    """Total frames over all rows of ``tshark -z conv,tcp`` (Frames is exact; Bytes is rounded)."""
    unit = r"\s+(\d+)\s+[\d.]+ \w+"
    rows = re.findall(rf"<->\s+\S+{unit}{unit}{unit}", text)
    return sum(int(total) for _, _, total in rows)


def csv_packets(text: str) -> int:
    """Packets over all streams of ``pcapstats throughput --format csv`` (the capture is TCP)."""
    import csv
    import io
    return sum(int(row["packets"]) for row in csv.DictReader(io.StringIO(text)))


def warm_memory(gb: float) -> float:
    """Touch ``gb`` of memory in a child process and free it; returns the seconds it took.

    This VM's memory is backed lazily by the host, and the guest hands freed pages back to
    it (virtio_balloon free page reporting) within seconds: the first touch of such a page
    costs ~2-10 us (2 GB: 0.4 s just after a touch, 5-8 s after 20-60 s idle; 4 GB cold:
    11 s). Whichever row happened to allocate first, or after a pause, would pay it, so each
    run is preceded by this, and the rows compare the programs, not the VM's state.
    """
    if gb <= 0:
        return 0.0
    code = ("import numpy as np, time; t = time.perf_counter(); "
            f"np.ones({int(gb * 1e9)}, np.uint8); print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)


# -- running and reporting -------------------------------------------------------------------------

def measure(job: Job, files: Files, repeat: int, warm_gb: float) -> None:
    """Run ``job`` ``repeat`` times. A run that fails is tried once more (pyshark's tshark
    child exits 255 now and then); failures are counted and shown, and never stop the bench."""
    path = files.get(job.kind)
    for i in range(repeat):
        for _attempt in range(2):
            print(f"bench: {job.name} [{job.kind}] run {i + 1}/{repeat} ...", end=" ",
                  file=sys.stderr, flush=True)
            try:
                warm_memory(warm_gb)
                run = run_process(job.command(path), keep_stdout=job.group != "floor")
            except RuntimeError as e:
                job.failures.append(_gist(str(e)))
                print(f"FAILED: {job.failures[-1]}", file=sys.stderr)
                continue
            job.runs.append(run)
            if job.count == "json":
                job.info.append(json.loads(run.stdout.strip().splitlines()[-1]))
            elif job.count == "lines":
                job.info.append({"packets": run.stdout.count("\n")})
            elif job.count == "conv":
                job.info.append({"packets": conv_frames(run.stdout)})
            elif job.count == "csv":
                job.info.append({"packets": csv_packets(run.stdout)})
            print(f"{run.wall_s:.2f} s", file=sys.stderr)
            run.stdout = ""  # field exports are big; keep only the numbers
            break


def _gist(error: str) -> str:
    """The line of a failure that says what went wrong (the last one naming an error)."""
    lines = [ln.strip() for ln in error.strip().splitlines() if ln.strip()]
    named = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (named or lines or ["?"])[-1][:200]


@dataclass
class Row:
    job: Job
    packets: int | None      # packets the tool itself reported reading
    wall_s: float            # median, extrapolated to the whole capture for the cut
    best_s: float            # the fastest run, likewise
    work_s: float | None     # median in-process seconds of work (after imports)
    cpu_s: float
    rss_mb: float            # max over runs
    extrapolated: bool


def summarise(job: Job, files: Files) -> Row:
    """Median (and best) over the runs; a cut's runs are scaled to the whole capture by the
    packets/s of their work loop, start-up counted once."""
    walls = [r.wall_s for r in job.runs]
    cpus = [r.cpu_s for r in job.runs]
    works = [i["work_s"] for i in job.info if "work_s" in i]
    packets = job.info[0]["packets"] if job.info else None
    extrapolated = job.kind == "cut"
    if extrapolated:
        scale = files.packets / packets
        walls = [w - k + k * scale for w, k in zip(walls, works)]
        cpus = [c - k + k * scale for c, k in zip(cpus, works)]
        works = [k * scale for k in works]
    return Row(job, packets, statistics.median(walls), min(walls),
               statistics.median(works) if works else None, statistics.median(cpus),
               max(r.rss_mb for r in job.runs), extrapolated)


def _packets_cell(r: Row, files: Files) -> str:
    """Packets the tool read; '!' marks a count that is not the capture's (a skipped packet)."""
    if r.packets is None:
        return "-"
    expected = CUT_PACKETS if r.extrapolated else files.packets
    return f"{r.packets:,}" + ("" if r.packets == expected else " (!)")


def table(rows: list[Row], files: Files, markdown: bool) -> str:
    """The result table. ratio: a peer's wall time / pcapstats CLI's on the same file;
    a pcapstats row's wall time / cat's (how far above reading the bytes it is)."""
    by = {(r.job.name, r.job.kind): r for r in rows}
    head = ["tool", "file", "packets", "wall s", "best s", "work s", "packets/s", "cpu s",
            "peak RSS MB", "ratio"]
    lines = []
    for r in rows:
        kind = r.job.kind if r.job.kind != "cut" else "pcap*"
        ref_name = "pcapstats throughput (CLI)" if r.job.group == "peer" else "cat > /dev/null"
        ref = by.get((ref_name, r.job.kind if r.job.kind != "cut" else "pcap"))
        if r.job.group in ("floor", "startup"):
            ratio = r.job.group
        elif ref:
            ratio = (f"{r.wall_s / ref.wall_s:.1f}x cat" if r.job.group == "pcapstats"
                     else f"{r.wall_s / ref.wall_s:.1f}x")
        else:
            ratio = "-"
        tilde = "~" if r.extrapolated else ""
        lines.append([
            r.job.name, kind,
            _packets_cell(r, files),
            f"{tilde}{r.wall_s:.2f}",
            f"{tilde}{r.best_s:.2f}",
            f"{tilde}{r.work_s:.3f}" if r.work_s is not None else "-",
            "-" if r.job.group == "startup" else f"{tilde}{files.packets / r.wall_s:,.0f}",
            f"{tilde}{r.cpu_s:.2f}",
            f"{r.rss_mb:.0f}" + (" (cut)" if r.extrapolated else ""),
            ratio])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines)])


def targets(rows: list[Row], files: Files) -> list[str]:
    """Issue 3's targets, each against the measured number (pcap file)."""
    by = {(r.job.name, r.job.kind): r for r in rows}
    size_mb = files.pcap.stat().st_size / 1e6
    rt, cli = by.get(("pcapstats read+throughput", "pcap")), by.get(
        ("pcapstats throughput (CLI)", "pcap"))
    conv = by.get(("tshark -q -z conv,tcp", "pcap"))
    out = []

    def check(text: str, ok: bool) -> None:
        out.append(f"  [{'met' if ok else 'MISSED'}] {text}")

    if rt and rt.work_s is not None:
        check(f"ps.read + ps.throughput under 0.4 s of work: {rt.work_s:.3f} s", rt.work_s < 0.4)
        if conv:
            check(f"that work >= 40x faster than tshark -q -z conv,tcp: "
                  f"{conv.wall_s / rt.work_s:.0f}x", conv.wall_s / rt.work_s >= 40)
        check(f"peak RSS under 1.5x the file ({1.5 * size_mb:.0f} MB): {rt.rss_mb:.0f} MB "
              f"= {rt.rss_mb / size_mb:.2f}x", rt.rss_mb < 1.5 * size_mb)
    if cli and conv:
        check(f"pcapstats throughput CLI >= 20x faster than tshark -q -z conv,tcp: "
              f"{conv.wall_s:.2f} / {cli.wall_s:.2f} s = {conv.wall_s / cli.wall_s:.1f}x",
              conv.wall_s / cli.wall_s >= 20)
    for name in ("pcapstats throughput(path) (4 MiB windows)", "pcapstats throughput (CLI)"):
        if row := by.get((name, "pcap")):
            check(f"reading in windows ({name}) under 300 MB: {row.rss_mb:.0f} MB",
                  row.rss_mb < 300)
    return out


def machine() -> list[str]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), platform.processor())
    mem = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    versions = {}
    for name, cmd in [("tshark", ["tshark", "--version"]), ("tcpdump", ["tcpdump", "--version"]),
                      ("iperf3", ["iperf3", "--version"])]:
        try:
            versions[name] = subprocess.run(cmd, capture_output=True, text=True).stdout \
                .splitlines()[0]
        except (OSError, IndexError):
            versions[name] = "missing"
    py = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m\n"
         "for p in ('pcapstats','numpy','pandas','dpkt','scapy','pyshark'):\n"
         "    try: print(p, m.version(p))\n"
         "    except Exception: print(p, '?')"], capture_output=True, text=True).stdout.split()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return [f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}; load average now {load} "
            f"(at start {LOAD_AT_START}; other work on the machine skews the times)",
            f"machine: {os.cpu_count()} CPUs ({cpu}), {mem / 2**20:.0f} GiB RAM, "
            f"Linux {platform.release()}",
            f"python {platform.python_version()}; " + ", ".join(
                f"{a} {b}" for a, b in zip(py[::2], py[1::2])),
            "; ".join(f"{v}" for v in versions.values())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=HERE / "data",
                    help="where the capture is cached (default bench/data)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the median is shown")
    ap.add_argument("--quick", action="store_true",
                    help="a ~200k-packet capture, for a smoke run")
    ap.add_argument("--remake", action="store_true", help="make the capture again")
    ap.add_argument("--only", default="",
                    help="comma-separated substrings: run only rows whose tool name has one")
    ap.add_argument("--warm-memory-gb", type=float, default=1.5,
                    help="touch and free this much memory before each run (see warm_memory); "
                         "0: don't")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--capture-only", action="store_true", help="make the capture and stop")
    a = ap.parse_args()

    files = ensure_capture(a.data, a.quick, a.remake)
    size = files.pcap.stat().st_size
    print(f"bench: {files.pcap} {files.packets:,} packets, {size / 1e6:.0f} MB; "
          f"{files.pcapng.name} {files.pcapng.stat().st_size / 1e6:.0f} MB", file=sys.stderr)
    if a.capture_only:
        return
    ok, numpy_kernel, why = probe_pcapstats(files.cut)
    if not ok:
        print(f"bench: pcapstats cannot read the capture ({why}); its rows are skipped",
              file=sys.stderr)
    elif why:
        print(f"bench: no kernel='numpy' row ({why})", file=sys.stderr)
    todo = [j for j in jobs(numpy_kernel) if ok or j.group not in ("pcapstats",
                                                                           "startup")]
    if a.only:
        todo = [j for j in todo if j.group in ("floor", "startup") or
                any(s in j.name for s in a.only.split(","))]
    for f in (files.pcap, files.pcapng, files.cut):  # page cache warm for everyone
        run_process(["cat", str(f)], keep_stdout=False)
    for job in todo:
        measure(job, files, a.repeat, a.warm_memory_gb)
    rows = [summarise(j, files) for j in todo if j.runs]

    print()
    print("\n".join(machine()))
    print(f"capture: {files.pcap.name} {files.packets:,} packets, {size / 1e6:.0f} MB "
          f"(pcapng {files.pcapng.stat().st_size / 1e6:.0f} MB), snaplen "
          f"{files.facts.get('snaplen')}, made {files.facts.get('made')} by iperf3 "
          f"-P {files.facts['iperf3']['streams']} between two netns, "
          f"{files.facts['dropped_by_kernel']} dropped by kernel")
    print(f"median (and best) of {a.repeat} whole-process runs, warm page cache, each run "
          f"after touching {a.warm_memory_gb:g} GB of memory (see warm_memory). work s = "
          "in-process seconds after start-up and imports. ~ = extrapolated from a "
          f"{CUT_PACKETS:,}-packet cut (pcap*) by packets/s; RSS (cut) is on the cut.")
    print("ratio: peer wall s / pcapstats throughput CLI wall s on the same file; "
          "pcapstats rows: wall s / cat's.")
    print()
    print(table(rows, files, a.markdown))
    print()
    wrong = [r for r in rows if r.packets is not None and
             r.packets != (CUT_PACKETS if r.extrapolated else files.packets)]
    for r in wrong:
        print(f"(!) {r.job.name} [{r.job.kind}] read {r.packets:,} packets, not "
              f"{CUT_PACKETS if r.extrapolated else files.packets:,}")
    for j in todo:
        if j.failures:
            print(f"{j.name} [{j.kind}]: {len(j.failures)} failed run(s), "
                  f"{len(j.runs)} good; last error: {j.failures[-1]}")
    print("targets (issue 3, pcap file)" + (": they are for the >= 1.5M-packet capture; "
                                             "--quick only smoke-tests" if a.quick else ":"))
    print("\n".join(targets(rows, files)))


if __name__ == "__main__":
    main()
