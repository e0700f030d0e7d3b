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
    cc: Optional[str] = typer.Option(None, "--cc", help="Congestion control (reno, cubic, "
                                     "bbr); a comma list gives one per pair."),
    duration: float = typer.Option(10.0, "--time", "-t", help="Seconds to send."),
    nbytes: Optional[str] = typer.Option(None, "--bytes", "-n", help="Bytes to send instead "
                                         "of a duration, e.g. 10MB."),
    parallel: int = typer.Option(1, "--parallel", "-P", help="Parallel connections per pair."),
    pairs: int = typer.Option(1, "--pairs", help="Sender/receiver pairs sharing the "
                              "bottleneck."),
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
):
    """Run one scenario and capture it.

    Topology, impairment, RTT check, tcpdump, traffic, sidecar.

    \b
    Examples:
      pcapstats lab run --loss 10% --delay 20ms --rate 30mbit --cc reno -t 10 \\
          -o runs/reno10.pcap
      pcapstats lab run --tool ping --delay 10ms --rate 10mbit --serialize \\
          --ping-sizes 56,500,1000,1400 -o runs/sweep.pcap
      pcapstats lab run --tool ping --hops 3 --delay 2ms,5ms,10ms \\
          -o runs/chain.pcap
    """
    from ..lab.run import Scenario, run  # lazy: the lab costs 0.04 s of every command's start-up
    cc_list = _list(cc)
    sizes = [_int(s, "--ping-sizes") for s in _list(ping_sizes)] or [56]
    if trials < 1:
        raise UsageError(f"--trials must be 1 or more, not {trials}")
    for trial in range(1, trials + 1):
        scenario = Scenario(
            tool=tool.value, loss=loss, delay=delay, jitter=jitter, rate=rate, queue=queue,
            serialize=serialize, hops=hops,
            cc=cc_list if len(cc_list) > 1 else (cc_list[0] if cc_list else None),
            duration_s=duration, bytes=nbytes, parallel=parallel, pairs=pairs,
            udp_rate=udp_rate, ping_count=ping_count, ping_interval_s=ping_interval,
            ping_sizes=sizes, ping_during=ping_during, sndbuf=sndbuf, rcvbuf=rcvbuf,
            window_scaling=window_scaling, timestamps=timestamps, sack=sack,
            app_rate=app_rate, capture=capture.value, snaplen=snaplen, format=fmt.value,
            tcp_info_interval_s=tcp_info_interval, trial=trial, seed=seed)
        out = output if trials == 1 else _with_trial(output, trial)
        try:
            with _stages() as stage:
                doc = run(scenario, out, progress=stage, command=["pcapstats", *sys.argv[1:]])
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
           "rate": "--rate", "queue": "--queue", "serialize": "--serialize", "hops": "--hops", "cc": "--cc",
           "duration_s": "-t",
           "bytes": "-n", "parallel": "-P", "pairs": "--pairs", "udp_rate": "-b",
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


def _report(doc: dict, path: Path) -> None:
    """What a run made, and what it asked beside what happened, in a few lines on stdout.

    Each line says what its number is: the shaper's rate is a ceiling, not a throughput to
    reach; the loss rule's drops are not the only loss (the bottleneck's queue drops too, and
    iperf3 counts both for UDP)."""
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
        ceiling = ("" if m["rate_asked_bps"] is None else
                   f"; the link was shaped to {m['rate_asked_bps'] / 1e6:.1f} Mbit/s")
        line("throughput", f"{m['throughput_bps'] / 1e6:.2f} Mbit/s as the tools measured "
                           f"it{ceiling}")
    if m["loss_asked"] or m["loss_measured"]:
        asked = "" if m["loss_asked"] is None else f"asked {m['loss_asked'] * 100:.2f} %, "
        got = ("not counted" if m["loss_measured"] is None
               else f"dropped {m['loss_measured'] * 100:.2f} % of the data packets")
        line("loss rule", asked + got)
    for report in doc.get("reports") or []:
        lost = report["summary"].get("lost_percent") if report.get("mode") == "udp" else None
        if lost is not None:
            line("udp loss", f"{lost:.2f} % of datagrams (iperf3's count: loss rule and queue "
                             "drops together)")
    if m.get("retransmitted_segments") is not None:
        line("re-sent", f"{m['retransmitted_segments']} segments (sender's TCP_INFO)")
    print("\n".join(lines))


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
    progress, task = None, None
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        progress = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), console=stderr_console(), transient=True)
        task = progress.add_task("matrix", total=len(cells))
        progress.start()

    def on_cell(k, total, cell, state):
        if progress:
            if state == "start":
                progress.update(task, description=cell.name)
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
