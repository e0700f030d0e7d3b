"""The ping figure: each echo session's round-trip times against time, requests that got no
reply marked on the time axis (a ping result's ``echoes`` table; nothing computed here).  An
answered echo whose RTT is unknown (across a step of the capture's clock) is a gap in its
line, not a loss."""

from __future__ import annotations

import numpy as np

from .. import plots
from .tcp import TIME_LABEL


def ping_figure(result, *, ax=None, title: str | None = None):
    from matplotlib.lines import Line2D
    given = ax
    echoes = result.table("echoes")
    sessions = result.table("sessions")
    captures = echoes.get("capture", np.full(len(echoes["session"]), result.captures[0], object))
    at_responder = set(zip(sessions.get("capture", np.full(len(sessions["session"]),
                                                             result.captures[0], object)),
                           sessions["session"], sessions["side"] == "receiver"))
    responder_only = all(side for _, _, side in at_responder)
    what = "Responder turnaround" if responder_only else "Ping round-trip time"
    fig, ax = plots.figure(title or f"{what}: {plots.captures_title(result.names)}",
                           TIME_LABEL, "Turnaround (ms)" if responder_only else "RTT (ms)",
                           subtitle="ICMP echo request -> first reply, as captured", ax=given)
    groups = list(dict.fromkeys(zip(captures.tolist(), echoes["session"].tolist())))
    several = len(set(c for c, _ in groups)) > 1
    lost_any = False
    for k, (capture, session) in enumerate(groups):
        mine = (captures == capture) & (echoes["session"] == session)
        t, rtt = echoes["time_s"][mine], echoes["rtt_ms"][mine]
        sizes = np.unique(echoes["payload_bytes"][mine])
        label = (f"{echoes['requester'][mine][0]} → {echoes['responder'][mine][0]} "
                 f"id {echoes['ident'][mine][0]}, "
                 + (f"{sizes[0]} B" if len(sizes) == 1 else f"{sizes.min()}-{sizes.max()} B"))
        if several:
            label = f"{dict(zip(result.captures, result.names))[capture]}: {label}"
        colour = plots.colour(k, len(groups))
        ax.plot(t, rtt, ".-", ms=4, lw=0.8, color=colour, label=label)
        lost = echoes["replies"][mine] == 0     # (an RTT across a clock step: unknown, not lost)
        if lost.any():
            lost_any = True
            ax.plot(t[lost], np.zeros(lost.sum()), "x", ms=6, color=colour, clip_on=False)
    ax.set_ylim(bottom=0)
    extra = [Line2D([], [], linestyle="none", marker="x", color="0.4", label="no reply")] \
        if lost_any else []
    plots.legend(ax, extra)
    if not responder_only and any(side for _, _, side in at_responder):
        plots.note(ax, "some sessions were captured at the responder: their points are its "
                       "turnaround, not the round trip")
    return plots.drawn(fig, given)
