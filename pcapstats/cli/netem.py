"""`pcapstats netem IFACE`: loss / delay / rate on an interface's egress as a standing setting
(for people who run their own tools), ``--show`` and ``--clear``.

A thin layer over :mod:`pcapstats.lab.impair.host`, whose state record lets a later process
find and remove exactly what pcapstats added (the delay line, in the fallback, is a process
of its own that outlives this command).
"""

from __future__ import annotations

import time
from typing import Optional

import typer

from ..errors import UsageError
from . import impairment
from .app import app, say

EGRESS = "on the interface's egress"


@app.command("netem")
def netem_cmd(
    interface: str = typer.Argument(..., metavar="IFACE", show_default=False,
                                    help="Interface whose egress to impair."),
    loss: Optional[str] = impairment.loss(EGRESS),
    delay: Optional[str] = impairment.delay(EGRESS),
    jitter: Optional[str] = impairment.jitter(EGRESS),
    rate: Optional[str] = impairment.rate(EGRESS),
    queue: Optional[str] = impairment.queue(EGRESS),
    show: bool = typer.Option(False, "--show", help="Say what is set on IFACE: pcapstats' "
                              "setting and anything else (marked not pcapstats')."),
    clear: bool = typer.Option(False, "--clear", help="Remove what pcapstats set on IFACE, "
                               "and nothing else."),
):
    """Set loss, delay and rate on an interface until --clear.

    netem where the kernel has it, else tbf and an NFQUEUE delay line (loss and delay)
    that keeps running in the background.  Setting again replaces pcapstats' previous
    setting.  Refuses an interface with a qdisc pcapstats did not set.  Needs root.

    \b
    Examples:
      pcapstats netem eth0 --loss 10% --delay 20ms
      pcapstats netem eth0 --show
      pcapstats netem eth0 --clear
    """
    from ..lab.impair import host  # lazy: the lab costs 0.04 s of every command's start-up
    from ..lab.impair import Impairment  # lazy: the same
    wanted = impairment.given(loss=loss, delay=delay, jitter=jitter, rate=rate, queue=queue)
    if (show or clear) and wanted or (show and clear):
        raise UsageError("give settings (--loss, --delay, --rate...), --show or --clear: one "
                         "of them")
    if not (show or clear or wanted):
        raise UsageError(f"nothing to do on {interface}",
                         hint="give --loss, --delay, --rate, or --show / --clear")
    host.require_root("pcapstats netem")
    host.require("tc")
    if show:
        _show(host, interface)
        return
    if clear:
        lines = host.clear(interface)
        if lines is None:
            print(f"{interface}: nothing set by pcapstats")
        for line in lines or []:
            print(f"{interface}: {line}")
        return
    imp = Impairment.from_text(**wanted)
    host.check_impairment(imp)
    if not (imp.loss or imp.delayed or imp.rate_bps):
        raise UsageError("nothing to set: every value given is zero",
                         hint=f"pcapstats netem {interface} --clear removes a setting")
    applied = host.InterfaceImpairment.install(interface, imp, owner="netem",
                                                      daemon=True)
    for line in applied.replaced:
        print(f"{interface}: replaced pcapstats' {line}")
    print(f"{interface}: {_mechanisms(applied.record)}")
    for limit in applied.limits.values():
        say("note", f"on this host's own traffic, {limit}")
    print(f"{interface}: undo with `pcapstats netem {interface} --clear`")


def _mechanisms(record) -> str:
    from ..lab.live import describe_mechanisms  # lazy: the lab costs 0.04 s of start-up
    return describe_mechanisms(record)


def _show(host, iface: str) -> None:
    s = host.show(iface)
    print(f"{iface} (ifindex {s.ifindex})")
    r = s.record
    if r is None:
        print("  pcapstats: nothing set")
    else:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_ns / 1e9))
        state = "running" if r.owner_alive else "ended"
        who = (f"pcapstats netem (set {when} by pid {r.pid})" if r.owner == "netem" else
               f"pcapstats capture (pid {r.pid}, {state}, since {when})")
        if r.owner == "capture" and not r.owner_alive:
            who += f": left behind; `pcapstats netem {iface} --clear` removes it"
        print(f"  {who}: {r.describe()}")
        print(f"    {_mechanisms(r)}")
        c = s.counters
        loss = host.loss_counted(c.get("loss"))
        if loss and r.asked.get("loss"):
            print(f"    loss: dropped {loss[0]} of {loss[1]} {loss[2]} so far: "
                  f"{loss[0] / loss[1] * 100:.2f} %")
        for q in (c[k] for k in ("netem", "qdisc") if c.get(k)):
            print(f"    {q['kind']} {q['handle']} sent {q['sent_packets']} packets, dropped "
                  f"{q['dropped_packets']}, {q['backlog_packets']} queued now")
        if c.get("delay_line"):
            d = c["delay_line"]
            held = (d.get("kernel") or {}).get("held")
            print(f"    delay line: {'running' if d.get('alive') else 'NOT running'}, "
                  f"{(d.get('program') or {}).get('packets_received', 0)} packets delayed"
                  + (f", {held} held now" if held is not None else ""))
        for item in s.missing:
            print(f"    missing (removed by someone else?): {item}")
        for p in s.problems:
            print(f"    problem: {p}")
    for q in s.foreign_qdiscs:
        print(f"  not pcapstats': {q}")
    for rule in s.foreign_rules:
        print(f"  not pcapstats': {rule}")
    for q in s.default_qdiscs:
        print(f"  kernel default: {q}")
