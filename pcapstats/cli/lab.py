"""`pcapstats lab`: make captures in network namespaces (run, matrix), check the host, clean up.

A thin layer over :mod:`pcapstats.lab`: every option of ``lab run`` is a field of
:class:`pcapstats.lab.Scenario`; the sidecar's fields are printed by ``lab fields``.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PcapstatsError, UsageError
from ..sidecar import FIELDS, SCHEMA, SidecarError, load_sidecar, sidecar_path
from . import impairment
from .app import EXIT_ERROR, Fmt, say, stderr_console, write_text, app

lab_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Make real captures between network-namespace hosts.\n\n"
                      "Loss, delay and rate on a router; simpleperf, iperf3 or ping; a "
                      "sidecar JSON beside each capture.")
app.add_typer(lab_app, name="lab")


class Tool(str, Enum):
    simpleperf = "simpleperf"
    iperf3 = "iperf3"
    iperf3_udp = "iperf3-udp"
    ping = "ping"
    pingpong = "pingpong"
    pingpong_udp = "pingpong-udp"
    tcp_file = "tcp-file"
    udp_file = "udp-file"


class Side(str, Enum):
    sender = "sender"
    receiver = "receiver"
    both = "both"
    router = "router"
    all = "all"


class CaptureFormat(str, Enum):
    pcap = "pcap"
    pcapng = "pcapng"


def _list(text: Optional[str]) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()] if text else []


@lab_app.command("run")
def run_cmd(
    ctx: typer.Context,
    output: Path = typer.Option(..., "--output", "-o", help="Capture file to write, e.g. "
                                "runs/reno10.pcap; the sidecar goes to runs/reno10.json.",
                                show_default=False),
    tool: Tool = typer.Option(Tool.simpleperf, "--tool", metavar="<tool>",
                              help="Traffic to run: simpleperf, iperf3, iperf3-udp, ping, "
                              "pingpong, pingpong-udp, tcp-file or udp-file."),
    loss: Optional[str] = impairment.loss("on the bottleneck"),
    delay: Optional[str] = impairment.delay("in each direction (RTT about twice it)"),
    jitter: Optional[str] = impairment.jitter("in each direction"),
    rate: Optional[str] = impairment.rate("on the bottleneck"),
    queue: Optional[str] = impairment.queue("on the bottleneck"),
    hops: int = typer.Option(1, "--hops", help="Routers on the path (a chain, one pair). "
                             "--loss, --delay, --jitter, --rate and --queue then take one "
                             "value for all or a comma list, one per router (0 for none), "
                             "each on its link toward the receiver."),
    serialize: bool = typer.Option(False, "--serialize", help="Each packet also waits its "
                                   "size at --rate, both ways, as on a real link (netem's "
                                   "rate): latency grows with size, for the delay model."),
    one_way: bool = typer.Option(False, "--one-way", help="A link shaped one way: --serialize "
                                 "(and --rate, as always) toward the receiver alone; the way "
                                 "back carries the delay only, at the line rate."),
    cc: Optional[str] = typer.Option(None, "--cc", help="Congestion control (reno, cubic, "
                                     "bbr); a comma list gives one per pair."),
    duration: float = typer.Option(10.0, "--time", "-t", help="Seconds to send."),
    nbytes: Optional[str] = typer.Option(None, "--bytes", "-n", help="Bytes to send instead "
                                         "of a duration, e.g. 10MB."),
    parallel: str = typer.Option("1", "--parallel", "-P", help="Parallel connections per "
                                 "pair; a comma list gives one per pair (2,1,1)."),
    pairs: int = typer.Option(1, "--pairs", help="Sender/receiver pairs sharing the "
                              "bottleneck."),
    start_offset: float = typer.Option(0.0, "--start-offset", help="Seconds between the "
                                       "pairs' starts: pair K starts (K - 1) x this after the "
                                       "first (start order; under -t)."),
    udp_rate: Optional[str] = typer.Option(None, "--udp-rate", "-b", help="UDP send rate "
                                           "(iperf3-udp, udp-file), e.g. 20mbit."),
    ping_count: int = typer.Option(10, "--ping-count", help="Pings (tool ping) or messages "
                                   "(pingpong) per size."),
    ping_interval: float = typer.Option(0.2, "--ping-interval", help="Seconds between pings "
                                        "or pingpong messages."),
    ping_sizes: Optional[str] = typer.Option(None, "--ping-sizes", help="Payload sizes, comma "
                                             "list, e.g. 56,500,1000,1400 (default 56; "
                                             "pingpong: 18 at least)."),
    ping_during: bool = typer.Option(False, "--ping-during", help="Also ping while the "
                                     "transfer runs (RTT under load)."),
    sndbuf: Optional[int] = typer.Option(None, "--sndbuf", help="Sender socket buffer, bytes "
                                         "(iperf3: -w)."),
    rcvbuf: Optional[int] = typer.Option(None, "--rcvbuf", help="Receiver socket buffer, bytes."),
    window_scaling: bool = typer.Option(True, "--window-scaling/--no-window-scaling",
                                        help="net.ipv4.tcp_window_scaling in senders and "
                                        "receivers."),
    timestamps: bool = typer.Option(True, "--timestamps/--no-timestamps",
                                    help="net.ipv4.tcp_timestamps in senders and receivers."),
    sack: bool = typer.Option(True, "--sack/--no-sack",
                              help="net.ipv4.tcp_sack in senders and receivers."),
    app_rate: Optional[str] = typer.Option(None, "--app-rate", help="An application-limited "
                                           "TCP sender: iperf3 (its -b) or simpleperf (its "
                                           "--rate) writes at this rate, e.g. 5mbit."),
    capture: Side = typer.Option(Side.sender, "--capture", metavar="<side>",
                                 help="Where tcpdump listens: sender, receiver, router (its "
                                 "interface toward the sender: mid-path), both (sender and "
                                 "receiver) or all (the three: NAME.sender/.router/"
                                 ".receiver.pcap)."),
    snaplen: int = typer.Option(262144, "--snaplen", help="Bytes kept a packet (128: headers)."),
    fmt: CaptureFormat = typer.Option(CaptureFormat.pcap, "--format", help="pcap or pcapng."),
    tcp_info_interval: float = typer.Option(0.01, "--tcp-info-interval",
                                            help="Seconds between TCP_INFO samples."),
    trials: int = typer.Option(1, "--trials", help="Repeat the run; files get -trialK."),
    seed: int = typer.Option(0, "--seed", help="Seed of generated file contents."),
    topology: Optional[Path] = typer.Option(None, "--topology", help="A topology file "
                                            "(TOML: routers, hosts, links with per-direction "
                                            "impairments, pairs with their own tools; see "
                                            "topologies/seed000.toml): every setting comes "
                                            "from it; -o and --trials go with it.",
                                            show_default=False),
):
    """Run one scenario and capture it.

    Topology, impairment, RTT check, tcpdump, traffic, sidecar.

    \b
    Examples:
      pcapstats lab run --loss 10% --delay 20ms --rate 30mbit --cc reno -t 10 \\
          -o runs/reno10.pcap
      pcapstats lab run --tool ping --delay 10ms --rate 10mbit --serialize \\
          --ping-sizes 56,500,1000,1400 -o runs/sweep.pcap
      pcapstats lab run --tool pingpong --delay 5ms --rate 10mbit --serialize \\
          --one-way --ping-sizes 18,16000,65535 -o runs/oneway.pcap
      pcapstats lab run --tool ping --hops 3 --delay 2ms,5ms,10ms \\
          -o runs/chain.pcap
      pcapstats lab run --topology topologies/seed000.toml -o runs/seed000.pcap
    """
    if topology is not None:
        return _run_topology(ctx, topology, output, trials)
    from ..lab.run import Scenario, run  # lazy: the lab costs 0.04 s of every command's start-up
    cc_list = _list(cc)
    counts = [_int(p, "--parallel") for p in _list(parallel)] or [1]
    sizes = [_int(s, "--ping-sizes") for s in _list(ping_sizes)] or [56]
    if trials < 1:
        raise UsageError(f"--trials must be 1 or more, not {trials}")
    for trial in range(1, trials + 1):
        scenario = Scenario(
            tool=tool.value, loss=loss, delay=delay, jitter=jitter, rate=rate, queue=queue,
            serialize=serialize, one_way=one_way, hops=hops,
            cc=cc_list if len(cc_list) > 1 else (cc_list[0] if cc_list else None),
            duration_s=duration, bytes=nbytes, pairs=pairs,
            parallel=counts if len(counts) > 1 else counts[0],
            start_offset_s=start_offset,
            udp_rate=udp_rate, ping_count=ping_count, ping_interval_s=ping_interval,
            ping_sizes=sizes, ping_during=ping_during, sndbuf=sndbuf, rcvbuf=rcvbuf,
            window_scaling=window_scaling, timestamps=timestamps, sack=sack,
            app_rate=app_rate, capture=capture.value, snaplen=snaplen, format=fmt.value,
            tcp_info_interval_s=tcp_info_interval, trial=trial, seed=seed)
        out = output if trials == 1 else _with_trial(output, trial)
        if trial == 1:
            scenario.validate()
            for line in scenario.queue_notes():
                say("note", line)
        try:
            with _stages() as stage:
                doc = run(scenario, out, progress=stage, command=["pcapstats", *sys.argv[1:]])
        except KeyboardInterrupt as e:
            _interrupted(e, sidecar_path(out))
        _report(doc, sidecar_path(out))


def _run_topology(ctx: typer.Context, topology: Path, output: Path, trials: int) -> None:
    """`lab run --topology FILE`: the file's run, each trial's files NAME-trialK."""
    from ..lab import network  # lazy: the lab costs 0.04 s of every command's start-up
    from ..lab.network_run import run_network  # lazy: the lab costs start-up time
    given = [p.opts[0] for p in ctx.command.params if p.name not in ("output", "trials",
             "topology") and getattr(ctx.get_parameter_source(p.name), "name", None)
             == "COMMANDLINE"]   # typer's own click: its enum is not click's
    if given:
        raise UsageError(f"{', '.join(given)} cannot go with --topology: the file sets the "
                         "run", path=str(topology), hint="set it in the file ([run], "
                         "[[link]], [[pair]])")
    if trials < 1:
        raise UsageError(f"--trials must be 1 or more, not {trials}")
    net = network.load(topology)
    for trial in range(1, trials + 1):
        out = output if trials == 1 else _with_trial(output, trial)
        try:
            with _stages() as stage:
                doc = run_network(net, out, progress=stage,
                                  command=["pcapstats", *sys.argv[1:]])
        except KeyboardInterrupt as e:
            _interrupted(e, sidecar_path(out))
        _report(doc, sidecar_path(out))


def _interrupted(e: KeyboardInterrupt, path: Path):
    """One line saying what an interruption left, then exit 128 + signal (typer would exit
    130 silently)."""
    why = f" ({e.args[0]})" if e.args else ""
    try:
        status = load_sidecar(path)["status"]
    except SidecarError:
        status = None
    kept = {"interrupted": f"; what was captured is kept, see {path} (status interrupted)",
            # the signal came while the finished run was being saved: it waited for that
            "complete": f" after the run had ended; it is saved whole, see {path} "
                        "(status complete)"}.get(status, "")
    say("error", f"interrupted{why}{kept}")
    raise typer.Exit(128 + getattr(e, "signum", 2))


# Scenario field -> `lab run` option (the inverse of run_cmd's mapping; tested to round-trip).
_OPTION = {"tool": "--tool", "loss": "--loss", "delay": "--delay", "jitter": "--jitter",
           "rate": "--rate", "queue": "--queue", "serialize": "--serialize",
           "one_way": "--one-way", "hops": "--hops", "cc": "--cc",
           "duration_s": "-t",
           "bytes": "-n", "parallel": "-P", "pairs": "--pairs",
           "start_offset_s": "--start-offset", "udp_rate": "-b",
           "ping_count": "--ping-count", "ping_interval_s": "--ping-interval",
           "ping_sizes": "--ping-sizes", "ping_during": "--ping-during", "sndbuf": "--sndbuf",
           "rcvbuf": "--rcvbuf", "window_scaling": "--no-window-scaling",
           "timestamps": "--no-timestamps", "sack": "--no-sack", "app_rate": "--app-rate",
           "capture": "--capture", "snaplen": "--snaplen", "format": "--format",
           "tcp_info_interval_s": "--tcp-info-interval", "seed": "--seed"}


def run_command(scenario, output) -> list[str]:
    """The `pcapstats lab run` command line that runs this scenario (defaults left out)."""
    from ..lab.run import Scenario  # lazy: the lab costs 0.04 s of every command's start-up
    default = Scenario()
    argv = ["pcapstats", "lab", "run"]
    for f in dataclasses.fields(Scenario):
        value = getattr(scenario, f.name)
        if f.name not in _OPTION or value == getattr(default, f.name):
            continue
        if f.name == "duration_s" and scenario.bytes:  # -n bounds the transfer, not -t
            continue
        option = _OPTION[f.name]
        if isinstance(value, bool):
            argv.append(option)  # the flag says the non-default value
        elif isinstance(value, list):
            argv += [option, ",".join(map(str, value))]
        else:
            argv += [option, f"{value:g}" if isinstance(value, float) else str(value)]
    return argv + ["-o", str(output)]


def _int(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{option}: {text!r} is not a whole number") from None


def _with_trial(output: Path, trial: int) -> Path:
    return output.with_name(f"{output.stem}-trial{trial}{output.suffix}")


class _stages:
    """A one-line status on a terminal's stderr showing the run's current stage."""

    def __enter__(self):
        self.status = None
        if sys.stderr.isatty():
            self.status = stderr_console().status("starting")
            self.status.start()
        return self.update

    def update(self, text: str) -> None:
        if self.status:
            self.status.update(text)

    def __exit__(self, *exc):
        if self.status:
            self.status.stop()


def achieved_lines(achieved: dict | None) -> list[str]:
    from ..lab.accuracy import lines  # lazy: the lab costs 0.04 s of every command's start-up
    return lines(achieved)


def _report(doc: dict, path: Path) -> None:
    """What a run made, and what it asked beside what happened, in a few lines on stdout.

    Each line says what its number is: the shaper's rate is a ceiling, not a throughput to
    reach; the loss rule's drops are not the only loss (the bottleneck's queue drops too, and
    iperf3 counts both for UDP).  Then achieved against asked (the loss rule's share among
    them), each marked in or out of spec."""
    m = doc["measured"]
    files = ", ".join(c["file"] + f" ({c['packets_captured']} packets)" for c in doc["captures"])
    lines = [f"wrote {files} and {path.name} in {path.parent}/"]

    def line(label: str, text: str) -> None:
        lines.append(f"  {label:<11} {text}")

    if m["rtt_ms"] is not None or m["rtt_asked_ms"] is not None:
        asked = "" if m["rtt_asked_ms"] is None else f" (asked {m['rtt_asked_ms']:.2f} ms)"
        line("rtt", f"{m['rtt_ms']:.2f} ms median ping before the run{asked}"
             if m["rtt_ms"] is not None else f"not measured{asked}")
    if m["throughput_bps"] is not None:
        from ..lab.accuracy import quantity_text  # lazy: the lab costs every command start-up
        ceiling = ("" if m["rate_asked_bps"] is None else
                   f"; shaped to {quantity_text(m['rate_asked_bps'], 'bit/s')}")
        line("throughput", f"{m['throughput_bps'] / 1e6:.2f} Mbit/s as the tools measured "
                           f"it{ceiling}")
    for report in doc.get("reports") or []:
        lost = report["summary"].get("lost_percent") if report.get("mode") == "udp" else None
        if lost is not None:
            line("udp loss", f"{lost:.2f} % of datagrams (iperf3's count: loss rule and queue "
                             "drops together)")
    if m.get("retransmitted_segments") is not None:
        line("re-sent", f"{m['retransmitted_segments']} segments (sender's TCP_INFO)")
    for pair in doc.get("pairs") or []:          # a topology file's run: each pair's own
        got = pair.get("achieved") or {}
        words = [f"{pair['from']}→{pair['to']} {pair['tool']}"]
        if got.get("goodput_bps") is not None:
            words.append(f"{got['goodput_bps'] / 1e6:.2f} Mbit/s"
                         + (f" a transfer ({got['transfers']})" if pair["repeat"] > 1 else ""))
        if got.get("lost_packets") is not None:
            words.append(f"{got['lost_packets']} datagrams lost")
        if got.get("rtt_under_load_ms") is not None:
            words.append(f"rtt under load {got['rtt_under_load_ms']:.1f} ms")
        line(pair["label"], ", ".join(words))
    lines += achieved_lines(doc.get("achieved"))
    print("\n".join(lines))
    out = (doc.get("achieved") or {}).get("out_of_spec")
    if out:
        say("warning", f"out of spec: {'; '.join(out)}")


def _matrix_view() -> dict:
    """How `lab matrix` shows its summary (pcapstats.render's options): units, the integer
    column, the columns read first."""
    from ..render import Shown  # lazy: numpy, which --help and the other lab commands skip
    return dict(
        units={"seconds": "s", "rtt_asked_ms": "ms", "rtt_ms": "ms", "rate_asked_bps": "bit/s",
               "throughput_bps": "bit/s", "loss_asked": "fraction", "loss_measured": "fraction"},
        integers=frozenset({"retransmitted_segments"}),
        shown=(Shown("cell", "cell", key=True), Shown("status", "status"),
               Shown("took", "seconds"),
               Shown("rtt asked", "rtt_asked_ms", minor=True), Shown("rtt", "rtt_ms"),
               Shown("rate asked", "rate_asked_bps", minor=True),
               Shown("throughput", "throughput_bps"),
               Shown("loss asked", "loss_asked", minor=True), Shown("loss", "loss_measured"),
               Shown("resent", "retransmitted_segments"), Shown("error", "error", wrap=True)))


@lab_app.command()
def matrix(
    spec: Path = typer.Argument(..., help="TOML spec: [base], [axes], trials, [[group]].",
                                show_default=False),
    output: Path = typer.Option(..., "--output", "-o", help="Directory for the runs.",
                                show_default=False),
    fmt: Fmt = typer.Option(Fmt.table, "--format", "-f", help="Summary as table, csv or json."),
):
    """Run a grid of scenarios; skips cells already complete."""
    from ..lab.matrix import load_spec, run_matrix, summary_table  # lazy: the lab costs 0.04 s of every command's start-up
    from ..render import render  # lazy: numpy, which --help and the other lab commands skip
    cells = load_spec(spec)  # every cell validated before the first one runs
    for cell in cells:
        for line in (cell.scenario.queue_notes() if cell.scenario else []):
            say("note", f"cell {cell.name}: {line}")
    progress, task = None, None
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        progress = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), console=stderr_console(), transient=True)
        task = progress.add_task("matrix", total=len(cells))
        progress.start()

    def on_cell(k, total, cell, state):
        if progress:
            if state in ("start", "retry"):
                progress.update(task, description=cell.name + (" (again: out of spec)"
                                                               if state == "retry" else ""))
            else:
                progress.advance(task)
        elif state != "start":
            print(f"[{k + 1}/{total}] {cell.name}: {state}", file=sys.stderr)

    def on_stage(text):
        if progress:
            progress.update(task, description=text)

    try:
        results = run_matrix(spec, output, on_cell=on_cell, on_stage=on_stage,
                             command=["pcapstats", *sys.argv[1:]])
    except KeyboardInterrupt as e:
        if progress:
            progress.stop()
        say("error", "interrupted; run the same command again to do the cells not complete")
        raise typer.Exit(130) from e
    finally:
        if progress:
            progress.stop()
    write_text(render(summary_table(results), fmt.value, more="-f csv has them",
                      **_matrix_view()), None)
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        say("error", f"cell {r.name}: {r.error}")
    for r in results:
        if r.status == "out of spec":
            say("warning", f"cell {r.name}: {r.error}")
    if failed:
        raise typer.Exit(EXIT_ERROR)


@lab_app.command()
def cleanup(
    directories: List[Path] = typer.Argument(None, help="Output folders of killed runs: show "
                                             "the unfinished captures (.NAME.pcap.partial) "
                                             "they left there.", show_default=False,
                                             metavar="DIR"),
    remove_partials: bool = typer.Option(False, "--remove-partials", help="Delete the "
                                         "unfinished files found in DIR."),
    keep_partials: bool = typer.Option(False, "--keep-partials", help="Finish each "
                                       "unfinished capture found in DIR instead: cut after its "
                                       "last whole packet, renamed NAME.pcap, with a sidecar "
                                       "NAME.json saying the run was killed."),
):
    """Remove what killed runs left behind.

    Their namespaces (and the processes in them) and scratch directories; nothing else. Only
    those of runs whose process has ended are touched (psl-<pid>-...).

    A killed run also leaves its unfinished capture, .NAME.pcap.partial, in its output folder.
    Give the folder (DIR) to see each one: its size and the whole packets it holds (the last
    packet may be cut short). Nothing is done to it unless asked: --remove-partials deletes
    it; --keep-partials keeps its whole packets as NAME.pcap with a sidecar NAME.json whose
    status is failed, its error starting "killed" (packets_captured: the packets kept; what
    the run's tcpdump showed: host, interface, snaplen; no scenario). A file still being
    written (by a run still going, or pcapstats capture) is left alone.
    """
    from ..lab import cleanup as lab_cleanup  # lazy: the lab costs 0.04 s of every command's start-up
    if remove_partials and keep_partials:
        raise UsageError("--remove-partials and --keep-partials exclude each other",
                         hint="delete the unfinished files, or keep them")
    if (remove_partials or keep_partials) and not directories:
        raise UsageError("--remove-partials and --keep-partials need the output folder (DIR)",
                         hint="e.g. pcapstats lab cleanup runs/ --remove-partials")
    for d in directories or []:
        if not d.is_dir():
            raise UsageError("not a directory", path=str(d),
                             hint="give the output folder of the run (where -o wrote)")
    partials = lab_cleanup.find_partials(directories or [])  # before the killed runs' tcpdumps go
    removed = lab_cleanup.cleanup_leftovers()
    for name in removed:
        print(f"removed scratch directory {name}" if name.startswith("/") else
              f"removed network namespace {name} (and every process in it)")
    busy = [p for p in partials if p.writers]
    for p in busy:
        print(f"left {p.path}: still being written (pid {', '.join(map(str, p.writers))})")
    found = [lab_cleanup.inspect_partial(p) for p in partials if not p.writers]
    for p in found:
        print(f"found {p.path}: {_partial_text(p)}")
    if remove_partials:
        for p in found:
            p.path.unlink()
            print(f"removed {p.path}")
    elif keep_partials:
        for p, done in lab_cleanup.keep_partials(found):
            print(f"{p.path}: {done}")
    elif found:
        print("left them; --remove-partials deletes them, --keep-partials keeps each capture's "
              "whole packets as NAME.pcap with a sidecar")
    if not removed and not partials:
        print("nothing left over by a lab run")
    if not directories:
        print("a killed run's unfinished capture (.NAME.pcap.partial) may remain in its output "
              "folder: pcapstats lab cleanup DIR shows it")


def _partial_text(p) -> str:
    """What an unfinished file is, in one line."""
    if p.final is None:
        return f"an unfinished file ({p.size_bytes} bytes), not a capture"
    who = (f"tcpdump of killed run {p.run_pid} on {p.host}:{p.option('-i')}, "
           if p.run_pid else "")
    if p.packets is None:
        return f"an unfinished capture ({who}{p.size_bytes} bytes), unreadable: {p.problem}"
    cut = p.size_bytes - p.whole_bytes
    rest = f" and {cut} bytes of a packet cut short" if cut else ""
    return (f"the unfinished capture {p.final.name} ({who}{p.size_bytes} bytes): "
            f"{p.packets} whole packets{rest}")


@lab_app.command()
def check():
    """What this host can do: tools, impairments, congestion controls."""
    from ..lab.run import check_host  # lazy: the lab costs 0.04 s of every command's start-up
    report = check_host()
    width = max(len(k) for k, _, _ in report)
    for name, ok, detail in report:
        print(f"{name:<{width}}  {'ok ' if ok else 'NO '} {detail}")
    missing = [name for name, ok, _ in report if not ok and name in _ESSENTIAL]
    if missing:
        raise PcapstatsError(f"the lab cannot run here: missing {', '.join(missing)}",
                             hint="see the lines marked NO above")


_ESSENTIAL = ("root", "ip", "ethtool", "tc", "iptables", "tcpdump", "ping")


@lab_app.command()
def fields():
    """Every field of the sidecar JSON a run writes beside its capture."""
    print(f"schema {SCHEMA}; the sidecar of -o DIR/NAME.pcap is DIR/NAME.json\n")
    for name, meaning in FIELDS:
        print(name)
        print(textwrap.fill(meaning, 96, initial_indent="    ", subsequent_indent="    "))
