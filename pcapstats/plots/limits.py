"""What held each TCP sender back, over time: one panel a stream (at most MAX_PANELS), each the
stream's cwnd plot (:func:`pcapstats.plots.tcp.cwnd_figure`: flight, the cwnd estimate, the
receiver's window) with the time under each limit but the cwnd shaded in its colour, and the
panel titled with the stream's limit and its shares.  Drawn from the result's tables."""

from __future__ import annotations

from .. import plots
from ..errors import UsageError
from .tcp import RECEIVER_CWND_NOTE, cwnd_figure, cwnd_key

MAX_PANELS = 6
NAMES = {"cwnd": "cwnd", "recovery": "recovery", "rwnd": "rwnd", "zero_window": "zero window",
         "sender": "sender", "idle": "idle"}


def limits_figure(result, *, ax=None, stream: int | None = None, from_s=None, to_s=None,
                  title: str | None = None):
    table = result.table("streams")
    streams = [int(s) for s in table["stream"]]
    if stream is not None:
        if stream not in streams:
            raise UsageError(f"no TCP stream {stream} in this limits result",
                             hint=f"its streams: {', '.join(map(str, streams))}")
        streams = [stream]
    shown = streams[:MAX_PANELS]
    fig, axes = plots.figure(title or "What held each sender back: "
                             + plots.captures_title(result.names),
                             "Time since the capture's first packet (s)", "Window",
                             panels=len(shown), sharey=False, ax=ax, columns=1,
                             size=(9.0, 3.6 * len(shown) + 1.5) if len(shown) > 1 else None)
    axes = axes if isinstance(axes, list) else [axes]
    cwnds = {s: result.cwnds[s] for s in shown}     # each made once (limits.Estimates)
    for s, panel in zip(shown, axes):
        at = list(table["stream"]).index(s)
        row = {name: values[at] for name, values in table.items()}
        cwnd_figure(cwnds[s], ax=panel, from_s=from_s, to_s=to_s, title=" ", key=False)
        shares = ", ".join(f"{NAMES[k]} {row[k + '_share']:.0%}" for k in NAMES
                           if row[k + "_share"] >= 0.005)
        text = (f"TCP stream {s} ({row['side']}-side): limited by {NAMES[row['limit']]}; "
                f"{shares}")
        if len(shown) == 1:         # one panel: its title names the capture too
            text = f"{title or 'What held the sender back'}: " \
                   f"{plots.captures_title(result.names)}\n{text}"
        inches = panel.get_position().width * panel.figure.get_figwidth()
        panel.set_title(plots.wrapped(text, int(inches * 12)),
                        fontsize="small" if len(shown) > 1 else "medium")
    plots.key(axes[-1], cwnd_key(axes, set(result.table("limited")["limit"])))
    notes = [RECEIVER_CWND_NOTE] if "receiver" in {cwnds[s].side for s in shown} else []
    if len(streams) > len(shown):
        notes.append(f"{len(streams) - len(shown)} more stream(s) not drawn: give stream= "
                     "(--stream) to draw one.")
    if notes:
        plots.note(axes[-1], " ".join(notes))
    return plots.drawn(fig, ax)
