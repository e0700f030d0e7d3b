"""`pcapstats capture`: a live capture from a real interface of this host, optionally around a
command, under loss / delay / rate on the interface's egress for the capture's duration.

A thin layer over :mod:`pcapstats.lab.live`.  Its lines go to stderr as ``pcapstats: note:``
(stdout belongs to the command); its exit status is the command's, or 0 without one; 2 for
what cannot be done (one line); 128 + N when signal N interrupted it.
"""

from __future__ import annotations

import sys
import textwrap
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from ..sidecar import CAPTURE_FIELDS, SCHEMA, SidecarError, load_sidecar, sidecar_path
from . import impairment
from .app import app, say

EGRESS = "on the interface's egress"


class CaptureFormat(str, Enum):
    pcap = "pcap"
    pcapng = "pcapng"


def _print_fields(asked: bool) -> None:
    if asked:
        print(f"schema {SCHEMA}, kind capture; the sidecar of -o DIR/NAME.pcap is "
              "DIR/NAME.json\n(status, error, command, started_ns / finished_ns and captures[] "
              "as in `pcapstats lab fields`)\n")
        for name, meaning in CAPTURE_FIELDS:
            print(name)
            print(textwrap.fill(meaning, 96, initial_indent="    ", subsequent_indent="    "))
        raise typer.Exit(0)


@app.command("capture", context_settings={"allow_interspersed_args": False})
def capture_cmd(
    interface: str = typer.Option(..., "--interface", "-i", show_default=False,
                                  help="Interface to capture on (and to impair)."),
    output: Path = typer.Option(..., "--output", "-o", show_default=False,
                                help="Capture file, e.g. run.pcap; the sidecar goes to run.json. "
                                "Written as .run.pcap.partial, renamed when complete."),
    duration: Optional[float] = typer.Option(None, "--duration", show_default=False,
                                             help="Seconds to capture (without a command; "
                                             "default: until Ctrl-C)."),
    bpf: Optional[str] = typer.Option(None, "--filter", show_default=False,
                                      help="Capture filter (BPF), e.g. 'tcp port 5201'."),
    snaplen: int = typer.Option(262144, "--snaplen", help="Bytes kept a packet (128: headers)."),
    loss: Optional[str] = impairment.loss(EGRESS),
    delay: Optional[str] = impairment.delay(EGRESS),
    jitter: Optional[str] = impairment.jitter(EGRESS),
    rate: Optional[str] = impairment.rate(EGRESS),
    queue: Optional[str] = impairment.queue(EGRESS),
    fmt: Optional[CaptureFormat] = typer.Option(None, "--format", show_default=False,
                                                help="pcap or pcapng (default: from the "
                                                "file name, else pcap)."),
    fields: bool = typer.Option(False, "--fields", callback=_print_fields, is_eager=True,
                                expose_value=False, help="Print the sidecar's fields and exit."),
    command: Optional[List[str]] = typer.Argument(None, metavar="-- COMMAND ARGS",
                                                  show_default=False,
                                                  help="Run this during the capture; its "
                                                  "exit status is pcapstats'."),
):
    """Capture a real interface with tcpdump, optionally around a command.

    Loss, delay and rate go on the interface's egress for the capture's duration (netem where
    the kernel has it, else tbf and an NFQUEUE delay line that drops and delays) and are removed
    on every exit path.  Needs root.

    \b
    Examples:
      pcapstats capture -i eth0 --loss 10% -o run.pcap -- iperf3 -c 10.0.0.2 -t 5
      pcapstats capture -i eth0 --duration 30 --filter 'tcp port 80' -o web.pcap
    """
    from ..lab.impair import Impairment  # lazy: the lab costs 0.04 s of every command's start-up
    from ..lab.live import LiveCapture, capture, summary  # lazy: the same
    wanted = impairment.given(loss=loss, delay=delay, jitter=jitter, rate=rate, queue=queue)
    imp = Impairment.from_text(**wanted) if wanted else None
    req = LiveCapture(interface=interface, output=output, duration_s=duration, bpf=bpf,
                      snaplen=snaplen, format=fmt.value if fmt else None, impairment=imp,
                      command=list(command) if command else None)
    try:
        doc = capture(req, argv=["pcapstats", *sys.argv[1:]], say=say)
    except KeyboardInterrupt as e:
        _interrupted(e, sidecar_path(req.paths()[0]))
    for line in summary(doc):
        say("note", line)
    missed = (doc.get("achieved") or {}).get("out_of_spec")
    if missed:
        say("warning", f"out of spec: {'; '.join(missed)}")
    raise typer.Exit((doc["run"]["exit_status"] or 0) if req.command else 0)


def _interrupted(e: KeyboardInterrupt, path: Path):
    """One line saying what an interruption left, then exit 128 + signal."""
    why = f" ({e.args[0] if e.args else 'signal SIGINT'})"
    try:
        saved = load_sidecar(path)["status"] == "interrupted"
    except SidecarError:
        saved = False
    kept = (f"; what was captured is kept, see {path} (status interrupted)" if saved else
            "; nothing was captured")
    say("error", f"interrupted{why}{kept}; the interface is as it was")
    raise typer.Exit(128 + getattr(e, "signum", 2))
