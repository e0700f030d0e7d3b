"""Study commands benchmark: `pcapstats ping`, `udp`, `fairness` and `delay`, measured.

    python bench/studies.py accuracy [--quick] [--keep DIR | --from DIR] [--markdown]
    python bench/studies.py speed [--quick] [--repeat 3] [--remake] [--data bench/data] [--markdown]
                                  [--only pings|udp|tcp ...] [--no-peers]

**accuracy** runs lab scenarios (root, network namespaces; ~3 minutes, --quick ~1) and sets
what each command finds in the capture beside what an independent source says: the link rate
and the RTT the lab set and ping measured (delay), pingpong's own per-size averages, the iperf3
server's own counters and jitter (udp), ping's own summary lines (ping), and Jain's index over
iperf3's own per-flow receiver rates (fairness). One row per run and quantity, with the
difference and whether it is within the stated target.

**speed** times each command as a whole process, as a user runs it (``pcapstats CMD FILE
--format csv > /dev/null``), median of --repeat runs, peak RSS by GNU time, beside ``pcapstats
throughput`` on the same file and tshark's nearest equivalent, on captures of over a million
packets made once with the lab and cached in --data (see bench/_studies_captures.py).
``--only pings`` times one capture's rows (throughput beside them stays: the ratio needs it),
``--no-peers`` leaves tshark out (its 5-15 s a run dominate a quick look at one command).

Both print and never assert: a number outside its target is shown as MISSED. See
bench/README.md, "Study commands".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ingest  # noqa: E402  (run_process, warm_memory, machine, pcapstats_cli; no side effects)
import _capture  # noqa: E402
import _studies_captures as caps  # noqa: E402
from _measure import GNU_TIME, Refused, need_tools  # noqa: E402

LAB_TOOLS = ("ip", "ethtool", "tc", "iptables", "tcpdump", "ping", "iperf3")


def say(msg: str) -> None:
    print(f"studies: {msg}", file=sys.stderr, flush=True)


def need_root(why: str) -> None:
    if os.geteuid() != 0:
        raise Refused(f"{why} needs root (network namespaces, tcpdump): run it as root, "
                      "e.g. with sudo")


# == Part 1: accuracy ==========================================================================

@dataclass
class Check:
    """One row of the accuracy table."""
    study: str
    run: str            # what was run (shown once per run)
    measure: str
    pcapstats: str
    reference: str
    difference: str
    target: str
    ok: bool | None     # None: no target (shown for information)


@dataclass
class LabRun:
    study: str
    name: str                        # file stem in the run directory
    label: str                       # what was run, for the table
    scenario: dict
    evaluate: Callable[["LabRun", dict, Path], list[Check]]


def _row(run: LabRun, measure, mine, ref, diff, target, ok) -> Check:
    return Check(run.study, run.label, measure, mine, ref, diff, target, ok)


# -- delay ----------------------------------------------------------------------------------

DELAY_SIZES = {("ping", 10): [56, 500, 1000, 1400, 4000, 8000],
               ("ping", 50): [56, 1000, 2000, 4000, 8000, 16000],
               ("pingpong", 10): [18, 1000, 4000, 8000, 14000],
               ("pingpong", 50): [18, 1000, 4000, 8000, 16000]}


def delay_runs(quick: bool) -> list[LabRun]:
    combos = [(t, r, d) for t in ("ping", "pingpong") for r in (10, 50) for d in (5, 20)]
    if quick:
        combos = [("ping", 10, 5), ("pingpong", 50, 20)]
    else:  # beyond the 8 asked for: the same exchanges over UDP, where no cc paces the sender,
        #    and one over bbr, which paces a lone message near its own small estimate
        combos += [("pingpong-udp", r, d) for r in (10, 50) for d in (5, 20)]
        combos += [("pingpong-bbr", 50, 20)]
    out = []
    for tool, mbit, delay in combos:
        cc = "bbr" if tool == "pingpong-bbr" else "cubic" if tool == "pingpong" else None
        tool = tool.removesuffix("-bbr")
        sizes = DELAY_SIZES[(tool.removesuffix("-udp"), mbit)]
        what = {"pingpong": f"pingpong TCP ({cc})"}.get(tool, tool)
        out.append(LabRun(
            "delay", f"delay-{tool}-{cc or 'na'}-{mbit}mbit-{delay}ms",
            f"{what} {mbit} Mbit/s RTT {2 * delay} ms, -s {','.join(map(str, sizes))} x15",
            dict(tool=tool, rate=f"{mbit}mbit", delay=f"{delay}ms", serialize=True, cc=cc,
                 ping_sizes=sizes, ping_count=15,
                 ping_interval_s=0.05 if tool == "ping" else 0.01, capture="sender"),
            eval_delay))
    return out


def eval_delay(run: LabRun, doc: dict, path: Path) -> list[Check]:
    import pcapstats as ps
    tool = doc["scenario"]["tool"]
    result = ps.delay(path)
    models = result.to_pandas("model")
    wanted = models[models["source"].str.startswith(
        {"ping": "icmp", "pingpong": "tcp", "pingpong-udp": "udp"}[tool])]
    model = (wanted if len(wanted) else models).iloc[0]
    rate = doc["impairment"]["asked"]["rate_bps"]
    rel = (model.bandwidth_bps - rate) / rate
    if doc["scenario"].get("cc") == "bbr":   # the slope is bbr's pacing: delay must say so
        said = any("pacing" in n for n in result.notes)
        return [_row(run, "bandwidth_bps (model)",
                     f"{model.bandwidth_bps / 1e6:.2f} Mbit/s (r2 {model.r2:.5f})",
                     f"{rate / 1e6:g} Mbit/s (the link rate set)", f"{rel * 100:+.1f} %",
                     "info: a paced sender", None),
                _row(run, "delay's note on the sender's pacing", "said" if said else "not said",
                     f"bbr paces near {sender_rate_bps(doc, path) / 1e6:.2f} Mbit/s",
                     "-", "said", said)]
    out = [_row(run, "bandwidth_bps (model)",
                f"{model.bandwidth_bps / 1e6:.2f} Mbit/s (r2 {model.r2:.5f})",
                f"{rate / 1e6:g} Mbit/s (the link rate set)",
                f"{rel * 100:+.1f} %", "|diff| <= 10 %", abs(rel) <= 0.10)]
    rtt = doc["rtt"]["median_ms"]
    base = rtt - model.a_ms_per_byte * 56
    diff = model.b_ms - base
    out.append(_row(run, "b_ms (model)", f"{model.b_ms:.3f} ms",
                    f"{base:.3f} ms (ping's median {rtt:g} ms before, - a x 56 B)",
                    f"{diff:+.3f} ms", "|diff| <= 0.5 ms", abs(diff) <= 0.5))
    if tool == "pingpong":
        out.append(_row(run, "sender's rate within a message",
                        f"{sender_rate_bps(doc, path) / 1e6:.2f} Mbit/s (the capture's "
                        "request segments)", "-", "-", "info: TCP may pace below the link",
                        None))
    if tool.startswith("pingpong"):
        summary = doc["reports"][0]["summary"]
        sizes = result.to_pandas("sizes")
        sizes = sizes[sizes["source"] == model.source]
        mine = dict(zip(sizes["size_bytes"], sizes["latency_mean_ms"]))
        counts = dict(zip(sizes["size_bytes"], sizes["n"]))
        diffs = [tools - mine[s] for s, tools in zip(summary["sizes_bytes"], summary["avg_ms"])
                 if s in mine]
        same_n = all(counts.get(s) == n for s, n in zip(summary["sizes_bytes"],
                                                         summary["received"]))
        if len(diffs) != len(summary["sizes_bytes"]):
            out.append(_row(run, "per-size mean vs pingpong avg_ms",
                            f"sizes {sorted(mine)}", f"sizes {summary['sizes_bytes']}",
                            "sizes differ", "tool - capture in [-0.01, +0.5] ms", False))
        else:
            worst = max(diffs, key=abs)
            out.append(_row(
                run, "per-size mean vs pingpong avg_ms",
                f"{len(diffs)} sizes, n {'= the tool' if same_n else '!= the tool'}'s",
                "pingpong's own avg_ms per size",
                f"max {abs(worst):.3f} ms (tool - capture {min(diffs):+.3f}..{max(diffs):+.3f})",
                "tool - capture in [-0.01, +0.5] ms",
                same_n and min(diffs) >= -0.01 and max(diffs) <= 0.5))
    return out


def sender_rate_bps(doc: dict, path: Path) -> float:
    """The median rate at which the client's TCP put each request's segments on the wire
    (segments after the first over the time from the first to the last): a paced sender
    (BBR, the default here) sends below the link rate, and then the slope measures that."""
    import numpy as np
    import pcapstats as ps
    arrays = ps.read(path).arrays
    port = doc["flows"][0]["dport"]
    data = (arrays["tcp_dstport"] == port) & (arrays["tcp_len"] > 0)
    t, size = arrays["frame_time_ns"][data], arrays["tcp_len"][data].astype(float)
    gap_ns = (doc["rtt"]["median_ms"] or 1) / 2 * 1e6     # messages are an RTT apart or more
    starts = np.flatnonzero(np.diff(t, prepend=t[0] - 2 * gap_ns) > gap_ns)
    rates = [8 * size[a + 1:b].sum() / ((t[b - 1] - t[a]) / 1e9)
             for a, b in zip(starts, [*starts[1:], len(t)]) if b - a >= 4 and t[b - 1] > t[a]]
    return float(np.median(rates)) if rates else float("nan")


# -- udp ------------------------------------------------------------------------------------

JITTER_BOUND_MS = 0.6   # tests/analyses/test_udp.py: capture time vs iperf3's read time


def udp_runs(quick: bool) -> list[LabRun]:
    combos = [("5mbit", None), ("10mbit", None), ("15mbit", None), ("5mbit", "2ms")]
    if quick:
        combos = [("15mbit", None)]
    out = []
    for rate, jitter in combos:
        name = f"udp-{rate}" + (f"-jitter{jitter}" if jitter else "")
        label = (f"iperf3 -u -b {rate} via 10 Mbit/s, delay 10 ms"
                 + (f" +- {jitter} jitter" if jitter else "") + ", 3 s, at the receiver")
        scenario = dict(tool="iperf3-udp", udp_rate=rate, rate="10mbit", delay="10ms",
                        duration_s=3, capture="receiver")
        if jitter:
            scenario["jitter"] = jitter
        out.append(LabRun("udp", name, label, scenario, eval_udp))
    return out


def eval_udp(run: LabRun, doc: dict, path: Path) -> list[Check]:
    import pcapstats as ps
    flows = ps.udp(path).to_pandas()
    flows = flows[flows["method"].isin(["iperf3", "iperf3-64"])]
    if len(flows) != 1:
        return [_row(run, "iperf3 flows", f"{len(flows)} flows with iperf3 counters", "1",
                     "-", "one flow", False)]
    flow = flows.iloc[0]
    server = doc["reports"][0]["raw"]["server"]["end"]["streams"][0]["udp"]
    src = "iperf3 server"
    out = []
    for measure, mine, theirs in (("sent", flow.sent, server["packets"]),
                                  ("lost", flow.lost, server["lost_packets"]),
                                  ("out_of_order", flow.out_of_order, server["out_of_order"])):
        note = f" ({flow.after_end} after TEST_END)" if measure == "sent" and flow.after_end \
            else ""
        out.append(_row(run, measure, f"{int(mine):,}{note}", f"{int(theirs):,} ({src})",
                        f"{int(mine) - int(theirs):+d}", "exact", int(mine) == int(theirs)))
    j, ref = float(flow.capture_jitter_ms), float(server["jitter_ms"])
    pct = f" ({(j - ref) / ref * 100:+.0f} %)" if ref else ""
    out.append(_row(run, "jitter_ms", f"{j:.3f} ms", f"{ref:.3f} ms ({src})",
                    f"{j - ref:+.3f} ms{pct}", f"|diff| <= {JITTER_BOUND_MS} ms",
                    abs(j - ref) <= JITTER_BOUND_MS))
    return out


# -- ping -----------------------------------------------------------------------------------

CLOCK_BOUND_US = 100   # tests/analyses/test_ping.py: ping's user-space clock vs the capture's


def ping_runs(quick: bool) -> list[LabRun]:
    out = [LabRun("ping", "ping-loss10",
                  "ping -c 50 -i 0.02 -s 56, loss 10 %, delay 10 ms, at the sender",
                  dict(tool="ping", loss="10%", delay="10ms", ping_count=50,
                       ping_interval_s=0.02, capture="sender"), eval_ping)]
    if not quick:
        sizes = [56, 500, 1400]
        out.append(LabRun("ping", "ping-sizes",
                          f"ping -c 50 -i 0.02 -s {'/'.join(map(str, sizes))}, no loss, "
                          "delay 10 ms, at the sender",
                          dict(tool="ping", delay="10ms", ping_count=50, ping_interval_s=0.02,
                               ping_sizes=sizes, capture="sender"), eval_ping))
    return out


def eval_ping(run: LabRun, doc: dict, path: Path) -> list[Check]:
    import pcapstats as ps
    sessions = ps.ping(path).to_pandas("sessions")
    out = []
    counters = (((doc.get("impairment") or {}).get("counters") or {}).get("loss") or {})
    if doc["scenario"].get("loss") and counters.get("data"):
        data = counters["data"]   # the lab's loss rule (requests; the RTT pings first)
        out.append(_row(run, "loss the router applied", "-",
                        f"dropped {data['dropped_packets']} of {data['offered_packets']} "
                        "requests (its rule's counters; the 10 RTT pings included)", "-",
                        "info", None))
    for own_run in doc["reports"][0]["raw"]["runs"]:
        size, own = own_run["size_bytes"], own_run["summary"]
        rows = sessions[(sessions["payload_bytes"] == size) & (sessions["side"] == "requester")]
        if len(rows) != 1:
            out.append(_row(run, f"-s {size}: session", f"{len(rows)} requester sessions",
                            "1 ping run", "-", "one session", False))
            continue
        row = rows.iloc[0]
        mine, theirs = (int(row.transmitted), int(row.received)), (own["transmitted"],
                                                                   own["received"])
        out.append(_row(run, f"-s {size}: transmitted / received", "%d / %d" % mine,
                        "%d / %d (ping's summary)" % theirs,
                        f"{mine[0] - theirs[0]:+d} / {mine[1] - theirs[1]:+d}", "exact",
                        mine == theirs))
        stats = ("min", "avg", "max", "mdev")
        if all(f"{s}_ms" in own for s in stats):
            diffs = {s: (row[f"rtt_{s}_ms"] - own[f"{s}_ms"]) * 1000 for s in stats}
            worst = max(diffs, key=lambda s: abs(diffs[s]))
            out.append(_row(
                run, f"-s {size}: rtt min/avg/max/mdev",
                "/".join(f"{row[f'rtt_{s}_ms']:.3f}" for s in stats) + " ms",
                "/".join(f"{own[f'{s}_ms']:.3f}" for s in stats) + " ms (ping's line)",
                f"max {abs(diffs[worst]):.0f} us ({worst}); "
                + " ".join(f"{diffs[s]:+.0f}" for s in stats),
                f"<= {CLOCK_BOUND_US} us", abs(diffs[worst]) <= CLOCK_BOUND_US))
    return out


# -- fairness -------------------------------------------------------------------------------

def jain(x: list[float]) -> float:
    """Jain's index, written out here (not pcapstats') for the reference side."""
    return sum(x) ** 2 / (len(x) * sum(v * v for v in x))


def fairness_runs(quick: bool) -> list[LabRun]:
    out = [LabRun("fairness", "fair-3pairs",
                  "3 iperf3 pairs reno/cubic/bbr, 30 Mbit/s, RTT 10 ms, 6 s, at the receiver",
                  dict(tool="iperf3", pairs=3, cc=["reno", "cubic", "bbr"], rate="30mbit",
                       delay="5ms", duration_s=6, snaplen=128, capture="receiver"),
                  eval_fairness)]
    if not quick:
        out.append(LabRun("fairness", "fair-parallel4",
                          "iperf3 -P 4, 20 Mbit/s, RTT 20 ms, 6 s, at the receiver",
                          dict(tool="iperf3", parallel=4, rate="20mbit", delay="10ms",
                               duration_s=6, snaplen=128, capture="receiver"),
                          eval_fairness))
    return out


def eval_fairness(run: LabRun, doc: dict, path: Path) -> list[Check]:
    import pcapstats as ps
    if doc["scenario"]["pairs"] > 1:
        reported = [r["summary"]["throughput_bps"] for r in doc["reports"]]
        where = "iperf3, each pair's receiver rate"
    else:
        streams = doc["reports"][0]["raw"]["server"]["end"]["streams"]
        reported = [s["receiver"]["bits_per_second"] for s in streams]
        where = "iperf3 server, per-stream receiver rates"
    result = ps.fairness(path)
    summary = result.to_pandas("summary").iloc[0]
    flows = result.to_pandas("flows")
    ref = jain(reported)
    diff = summary.jain_index - ref
    return [_row(run, "jain_index",
                 f"{summary.jain_index:.4f} ({int(summary.flows)} flows: "
                 + "/".join(f"{b / 1e6:.1f}" for b in sorted(flows["goodput_bps"], reverse=True))
                 + f" Mbit/s over {summary.window_s:.2f} s)",
                 f"{ref:.4f} ({where}: "
                 + "/".join(f"{b / 1e6:.1f}" for b in sorted(reported, reverse=True))
                 + " Mbit/s)",
                 f"{diff:+.4f}", "|diff| <= 0.01",
                 abs(diff) <= 0.01 and int(summary.flows) == len(reported))]


# -- running and printing -------------------------------------------------------------------

def lab_runs(quick: bool) -> list[LabRun]:
    return delay_runs(quick) + udp_runs(quick) + ping_runs(quick) + fairness_runs(quick)


def do_run(run: LabRun, directory: Path, reuse: bool) -> tuple[dict, Path]:
    """The run's sidecar and capture: made now (tried twice: a run fails now and then when
    tcpdump drops packets or iperf3's UDP connect message is lost), or read back (--from)."""
    from pcapstats.lab import Scenario, load_sidecar, run as lab_run  # lazy: root-only part
    path = directory / f"{run.name}.pcap"
    if reuse:
        return load_sidecar(path.with_suffix(".json")), path
    last = None
    for attempt in (1, 2):
        t0 = time.monotonic()
        say(f"{run.study}: {run.label} ..." + (" (2nd attempt)" if attempt > 1 else ""))
        try:
            doc = lab_run(Scenario(**run.scenario), path)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 -- shown in the table, the bench goes on
            last = e
            say(f"  failed: {str(e).splitlines()[0][:200]}")
            continue
        say(f"  done in {time.monotonic() - t0:.0f} s")
        return doc, path
    raise RuntimeError(f"lab run failed twice: {str(last).splitlines()[0][:200]}")


def evaluate(run: LabRun, directory: Path, reuse: bool) -> list[Check]:
    try:
        doc, path = do_run(run, directory, reuse)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001
        return [Check(run.study, run.label, "lab run", f"FAILED: {str(e)[:160]}", "-", "-",
                      "run completes", False)]
    try:
        return run.evaluate(run, doc, path)
    except Exception as e:  # noqa: BLE001 -- a command that fails on a lab capture is a result
        say(f"  pcapstats failed on {path.name}:\n{traceback.format_exc()}")
        return [Check(run.study, run.label, "pcapstats", f"FAILED: {type(e).__name__}: "
                      f"{str(e)[:160]}", "-", "-", "runs", False)]


def render(head: list[str], lines: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines)])


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "MISSED")


def accuracy_table(checks: list[Check], markdown: bool) -> str:
    head = ["study", "run", "measure", "pcapstats", "independent source", "difference",
            "target", "met?"]
    lines, last = [], None
    for c in checks:
        run = c.run if (c.study, c.run) != last else ""
        last = (c.study, c.run)
        lines.append([c.study if run else "", run, c.measure, c.pcapstats, c.reference,
                      c.difference, c.target, verdict(c.ok)])
    return render(head, lines, markdown)


def accuracy(a: argparse.Namespace) -> int:
    reuse = a.from_dir is not None
    if not reuse:
        need_root("`studies.py accuracy`")
        need_tools(LAB_TOOLS, "`studies.py accuracy`")
    runs = lab_runs(a.quick)
    t0 = time.monotonic()
    if reuse:
        directory, holder = Path(a.from_dir), None
        if not directory.is_dir():
            raise Refused(f"--from {directory}: no such directory")
    elif a.keep:
        directory, holder = Path(a.keep), None
        directory.mkdir(parents=True, exist_ok=True)
    else:
        holder = tempfile.TemporaryDirectory(prefix="pcapstats-studies-")
        directory = Path(holder.name)
    try:
        checks = [c for run in runs for c in evaluate(run, directory, reuse)]
    finally:
        if holder:
            holder.cleanup()
    took = time.monotonic() - t0
    import pcapstats
    print(f"pcapstats {pcapstats.__version__} accuracy, {len(runs)} lab runs"
          f"{' (--quick: a smoke run, fewer runs)' if a.quick else ''}, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {took:.0f} s, load average "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}; captures "
          + (f"in {directory}" if a.keep or reuse else "in a temporary directory (--keep DIR "
             "keeps them)"))
    print()
    print(accuracy_table(checks, a.markdown))
    print()
    judged = [c for c in checks if c.ok is not None]
    missed = [c for c in judged if not c.ok]
    print(f"{len(judged)} checks: {len(judged) - len(missed)} met, {len(missed)} MISSED")
    for c in missed:
        print(f"  MISSED: {c.study} / {c.run} / {c.measure}: {c.pcapstats} vs {c.reference} "
              f"({c.difference}; target {c.target})")
    return 0


# == Part 2: speed and memory ==================================================================

@dataclass
class Capture:
    kind: str           # pings, udp, tcp
    path: Path
    packets: int
    facts: dict
    how: str

    @property
    def size(self) -> int:
        return self.path.stat().st_size


QUICK_TCP = _capture.Recipe(min_packets=100_000, mbit_per_stream=400)


def _cached(pcap: Path, sidecar: Path, remake: bool) -> dict | None:
    """The JSON beside a cached capture, if it vouches for the file (its size)."""
    if remake or not (pcap.exists() and sidecar.exists()):
        return None
    facts = json.loads(sidecar.read_text())
    return facts if pcap.stat().st_size == facts.get("pcap_bytes") else None


def pcap_packets(path: Path) -> int:
    """Records in a classic pcap file, by walking the record headers (no pcapstats)."""
    with open(path, "rb") as f:
        head = f.read(24)
        endian = "<" if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        n = 0
        while rec := f.read(16):
            if len(rec) < 16:
                break
            f.seek(struct.unpack(endian + "IIII", rec)[2], 1)
            n += 1
    return n


def ensure_captures(data: Path, quick: bool, remake: bool, only=None) -> list[Capture]:
    """The captures (only those of the kinds in ``only``, if given), made if not cached."""
    data.mkdir(parents=True, exist_ok=True)
    stem = "quick" if quick else "studies"
    out = []
    wanted = lambda kind: not only or kind in only  # noqa: E731
    if wanted("pings"):
        out += _pings_capture(data, stem, quick, remake)
    if wanted("udp"):
        out += _udp_capture(data, stem, quick, remake)
    if wanted("tcp"):
        out += _tcp_capture(data, quick, remake)
    return out


def _pings_capture(data: Path, stem: str, quick: bool, remake: bool) -> list[Capture]:
    # pings: flood pings in two sizes (+ a short TCP prelude)
    pcap, side = data / f"{stem}-pings.pcap", data / f"{stem}-pings.json"
    facts = _cached(pcap, side, remake)
    if facts is None:
        need_root(f"making {pcap.name}")
        say(f"making {pcap} (a minute or so)")
        facts = caps.make_pings(pcap, caps.PINGS_QUICK if quick else caps.PINGS_FULL)
        side.write_text(json.dumps(facts, indent=2) + "\n")
    p = facts["ping"]
    pace = "-f" if p["interval_s"] is None else f"-i {p['interval_s']:.6f}"
    return [Capture("pings", pcap, facts["packets"], facts,
                    f"ping {pace} -c {p['count']:,} -s {'/'.join(map(str, p['sizes']))} "
                    f"between two netns + iperf3 -n {caps.TCP_PRELUDE} TCP")]


def _udp_capture(data: Path, stem: str, quick: bool, remake: bool) -> list[Capture]:
    # udp: iperf3 UDP, 200-byte datagrams
    pcap, side = data / f"{stem}-udp.pcap", data / f"{stem}-udp.json"
    facts = _cached(pcap, side, remake)
    if facts is None:
        need_root(f"making {pcap.name}")
        say(f"making {pcap} (under a minute)")
        facts = caps.make_udp(pcap, caps.UDP_QUICK if quick else caps.UDP_FULL)
        side.write_text(json.dumps(facts, indent=2) + "\n")
    i = facts["iperf3"]
    return [Capture("udp", pcap, facts["packets"], facts,
                    f"iperf3 -u -b {i['mbit']:g}M -l {i['length']} -t {i['seconds']} "
                    "between two netns, at the receiver")]


def _tcp_capture(data: Path, quick: bool, remake: bool) -> list[Capture]:
    # tcp: the ingest bench's big capture (its recipe and its cache), or a quick one of ours
    if quick:
        pcap, side = data / "quick-tcp.pcap", data / "quick-tcp.json"
        facts = _cached(pcap, side, remake)
        if facts is None:
            _make_tcp(pcap, side, QUICK_TCP)
            facts = json.loads(side.read_text())
    else:
        pcap, side = data / "big.pcap", data / "big.json"
        facts = _cached(pcap, side, False)   # ingest's: `bench/ingest.py --remake` remakes it
        if facts is None and pcap.exists():
            facts = {"packets": pcap_packets(pcap), "iperf3": {"streams": "?",
                                                               "mbit_per_stream": "?"}}
        elif facts is None:
            for stale in (data / "big.pcapng", data / "big-cut50k.pcap"):
                stale.unlink(missing_ok=True)   # ingest makes these from big.pcap
            _make_tcp(pcap, side, _capture.FULL)
            facts = json.loads(side.read_text())
    i = facts["iperf3"]
    return [Capture("tcp", pcap, facts["packets"], facts,
                    f"iperf3 TCP -P {i['streams']} -b {i['mbit_per_stream']}M between two "
                    "netns (bench/_capture.py" + (", the ingest bench's capture)"
                                                  if not quick else ")"))]


def _make_tcp(pcap: Path, side: Path, recipe: _capture.Recipe) -> None:
    need_root(f"making {pcap.name}")
    say(f"making {pcap} with bench/_capture.py (>= {recipe.min_packets:,} packets)")
    facts = _capture.make(pcap, recipe)
    facts["pcap_bytes"] = pcap.stat().st_size
    side.write_text(json.dumps(facts, indent=2) + "\n")   # ingest.py's format


@dataclass
class Job:
    capture: Capture
    name: str
    cmd: list[str]
    role: str                          # "reference", "study" or "peer"
    runs: list = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def speed_jobs(cap: Capture) -> list[Job]:
    cli, f = ingest.pcapstats_cli(), str(cap.path)
    csv = ["--format", "csv"]
    jobs = [Job(cap, "pcapstats throughput", [*cli, "throughput", f, *csv], "reference")]
    commands = {"pings": ["ping", "delay"], "udp": ["udp"], "tcp": ["fairness"]}[cap.kind]
    jobs += [Job(cap, f"pcapstats {c}", [*cli, c, f, *csv], "study") for c in commands]
    peer = {"pings": ["icmp,srt"], "udp": ["conv,udp"], "tcp": ["conv,tcp"]}[cap.kind]
    jobs += [Job(cap, f"tshark -q -z {z}", ["tshark", "-r", f, "-q", "-z", z], "peer")
             for z in peer]
    return jobs


def measure(jobs: list[Job], repeat: int, warm_gb: float) -> None:
    """Every job once, then again (round robin): drift in the machine's state touches all
    rows alike. A failed run is tried once more and counted."""
    for i in range(repeat):
        for job in jobs:
            for _attempt in range(2):
                print(f"studies: {job.name} [{job.capture.kind}] run {i + 1}/{repeat} ...",
                      end=" ", file=sys.stderr, flush=True)
                try:
                    ingest.warm_memory(warm_gb)
                    run = ingest.run_process(job.cmd, keep_stdout=False)
                except RuntimeError as e:
                    job.failures.append(ingest._gist(str(e)))
                    print(f"FAILED: {job.failures[-1]}", file=sys.stderr)
                    continue
                job.runs.append(run)
                print(f"{run.wall_s:.2f} s", file=sys.stderr)
                break


TARGET_RATIO = 1.5


def speed_table(jobs: list[Job], markdown: bool) -> tuple[str, list[str]]:
    head = ["capture", "command", "wall s", "best s", "cpu s", "x throughput", "peak RSS MB",
            "RSS / file", f"target (<= {TARGET_RATIO}x throughput)"]
    lines, verdicts = [], []
    refs = {j.capture.kind: j for j in jobs if j.role == "reference" and j.runs}
    for j in jobs:
        if not j.runs:
            lines.append([j.capture.kind, j.name, "FAILED", "-", "-", "-", "-", "-",
                          "MISSED" if j.role == "study" else "-"])
            if j.role == "study":
                verdicts.append(f"  [MISSED] {j.name} on {j.capture.kind}: every run failed "
                                f"({j.failures[-1]})")
            continue
        wall = statistics.median(r.wall_s for r in j.runs)
        ref = refs.get(j.capture.kind)
        ref_wall = statistics.median(r.wall_s for r in ref.runs) if ref else None
        ratio = wall / ref_wall if ref_wall else None
        rss = max(r.rss_mb for r in j.runs)
        if j.role == "study" and ratio is not None:
            ok = ratio <= TARGET_RATIO
            target = f"{'met' if ok else 'MISSED'}"
            verdicts.append(f"  [{'met' if ok else 'MISSED'}] {j.name} on {j.capture.kind}: "
                            f"{wall:.2f} s / {ref_wall:.2f} s = {ratio:.2f}x")
        else:
            target = {"reference": "reference", "peer": "peer"}.get(j.role, "-")
        lines.append([j.capture.kind, j.name, f"{wall:.2f}",
                      f"{min(r.wall_s for r in j.runs):.2f}",
                      f"{statistics.median(r.cpu_s for r in j.runs):.2f}",
                      f"{ratio:.2f}x" if ratio is not None else "-",
                      f"{rss:.0f}", f"{rss / (j.capture.size / 1e6):.2f}x", target])
    return render(head, lines, markdown), verdicts


def speed(a: argparse.Namespace) -> int:
    need_tools([GNU_TIME, "tshark"], "`studies.py speed`")
    if not any(Path(p).exists() for p in ingest.pcapstats_cli()[:1]) and \
            not shutil.which("pcapstats"):
        raise Refused("`studies.py speed` needs the pcapstats command (pip install -e .)")
    captures = ensure_captures(a.data, a.quick, a.remake, a.only)
    for c in captures:
        say(f"{c.kind}: {c.path} {c.packets:,} packets, {c.size / 1e6:.0f} MB")
    if a.capture_only:
        return 0
    jobs = [j for c in captures for j in speed_jobs(c) if not (a.no_peers and j.role == "peer")]
    for c in captures:   # page cache warm for everyone
        ingest.run_process(["cat", str(c.path)], keep_stdout=False)
    measure(jobs, a.repeat, a.warm_memory_gb)
    table, verdicts = speed_table(jobs, a.markdown)
    print()
    print("\n".join(ingest.machine()))
    print("captures (snaplen 128, nanosecond pcap, made with the lab; tcpdump's own count, "
          "0 dropped by kernel):")
    for c in captures:
        dropped = c.facts.get("dropped_by_kernel", "?")
        print(f"  {c.kind}: {c.path.name}, {c.packets:,} packets, {c.size / 1e6:.0f} MB, "
              f"{c.how}; {dropped} dropped by kernel; made {c.facts.get('made', '?')}")
    print(f"median (and best) of {a.repeat} whole-process runs (`CMD FILE --format csv > "
          f"/dev/null`; tshark `-r FILE -q -z ...`), round robin, warm page cache, each after "
          f"touching {a.warm_memory_gb:g} GB of memory (see bench/ingest.py warm_memory). "
          "x throughput: wall s / `pcapstats throughput`'s on the same file. Peak RSS: GNU "
          "time's; RSS / file: that over the file's size.")
    print()
    print(table)
    print()
    for j in jobs:
        if j.failures:
            print(f"{j.name} [{j.capture.kind}]: {len(j.failures)} failed run(s), "
                  f"{len(j.runs)} good; last error: {j.failures[-1]}")
    print(f"target (the issue): each command at most {TARGET_RATIO}x `pcapstats throughput` "
          "on the same capture" + (" -- --quick: ~100k-packet captures, a smoke run only; the "
                                   "target is for the >= 1M-packet ones" if a.quick else ""))
    print("\n".join(verdicts))
    return 0


# == the command line ==========================================================================

def _exit_on_signal(signum, _frame) -> None:
    """SIGTERM unwinds like Ctrl-C: the lab's ``with`` blocks remove the namespaces."""
    raise SystemExit(128 + signum)



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="part", required=True)
    acc = sub.add_parser("accuracy", help="lab runs: each command against the tools' own "
                                          "reports (root, ~3 min)")
    acc.add_argument("--quick", action="store_true", help="5 runs instead of 16 (~1 min)")
    where = acc.add_mutually_exclusive_group()
    where.add_argument("--keep", metavar="DIR", type=Path,
                       help="keep the captures and sidecars in DIR")
    where.add_argument("--from", dest="from_dir", metavar="DIR", type=Path,
                       help="evaluate the captures an earlier --keep DIR kept (no lab runs)")
    acc.add_argument("--markdown", action="store_true", help="the table as Markdown")
    sp = sub.add_parser("speed", help="time and peak RSS against pcapstats throughput and "
                                      "tshark on >= 1M-packet captures")
    sp.add_argument("--quick", action="store_true",
                    help="~100k-packet captures (bench/data/quick-*), a smoke run")
    sp.add_argument("--repeat", type=int, default=3, help="runs per row; the median is shown")
    sp.add_argument("--data", type=Path, default=HERE / "data",
                    help="where the captures are cached (default bench/data)")
    sp.add_argument("--remake", action="store_true",
                    help="make this script's captures again (not big.pcap: that is the ingest "
                         "bench's; `bench/ingest.py --remake` remakes it)")
    sp.add_argument("--capture-only", action="store_true", help="make the captures and stop")
    sp.add_argument("--warm-memory-gb", type=float, default=1.5,
                    help="touch and free this much memory before each run (0: don't)")
    sp.add_argument("--markdown", action="store_true", help="the table as Markdown")
    sp.add_argument("--only", action="append", choices=("pings", "udp", "tcp"),
                    help="only this capture's rows (repeat for several; default: all three)")
    sp.add_argument("--no-peers", action="store_true", help="leave tshark's rows out")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        return accuracy(a) if a.part == "accuracy" else speed(a)
    except KeyboardInterrupt:
        print("studies: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one line, not a traceback: what failed and where
        from pcapstats.errors import PcapstatsError
        if isinstance(e, PcapstatsError):
            print(f"studies: error: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
