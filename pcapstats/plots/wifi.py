"""The 802.11 figure: per interval, stacked on one time axis, the throughput of each group of
frames, the signal they were received at, the data rate they were sent at and the share sent
again (a wifi result's intervals table; nothing computed here).  Read down a column: where
the signal drops, the rate falls and the retries rise, and the throughput with them."""

from __future__ import annotations

import numpy as np

from .. import plots
from .tcp import TIME_LABEL

# (column, axis label, how a value is shown on the axis)
PANELS = (("bps", None, None), ("signal_dbm", "Signal (dBm)", None),
          ("datarate_bps", None, None), ("retry_share", "Retries (%)", "percent"))


def wifi_figure(result, *, ax=None, title: str | None = None, from_s: float | None = None,
                to_s: float | None = None):
    window = plots.time_window(from_s, to_s)
    intervals, frames = result.table("intervals"), result.table("frames")
    step = result.interval_ns / 1e9
    given = ax
    fig, axes = plots.figure(
        title or f"802.11: {plots.captures_title(result.names)}", TIME_LABEL, "",
        panels=len(PANELS), sharey=False, columns=1, sharex=True, size=(9.0, 9.0),
        subtitle=f"per interval of {step:g} s: throughput beside signal, data rate and "
                 "retries", ax=given)
    groups = list(frames["frames"])
    last = 0.0
    for k, group in enumerate(groups):
        mine = intervals["frames"] == group
        t = intervals["start_s"][mine]
        if not len(t):
            continue
        last = max(last, float(t[-1]) + step)
        style = {"color": "0.55" if group == "all" else plots.colour(k - 1, len(groups) - 1),
                 "lw": 1.0 if group == "all" else 1.5,
                 "label": f"{group}{' (compare reads this row)' if frames['main'][k] else ''}"}
        for panel, (column, _, _) in zip(axes, PANELS):
            values = intervals[column][mine].astype(float)
            panel.step(np.r_[t, t[-1] + step], np.r_[values, values[-1]], where="post",
                       **style)
            style.pop("label", None)
    largest = float(np.nanmax(intervals["bps"])) if len(intervals["bps"]) else 0.0
    plots.rate_axis(axes[0], largest or 1.0, "bit/s", "Throughput")
    rates = intervals["datarate_bps"]
    plots.rate_axis(axes[2], float(np.nanmax(rates)) if np.isfinite(rates).any() else 1e6,
                    "bit/s", "Data rate")
    for panel, (_, label, kind) in zip(axes, PANELS):
        if label:
            panel.set_ylabel(label)
        if kind == "percent":
            from matplotlib.ticker import PercentFormatter
            panel.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            panel.set_ylim(-0.02, 1.02)
    axes[0].set_ylim(bottom=0)
    axes[2].set_ylim(bottom=0)
    if not np.isfinite(intervals["signal_dbm"]).any():
        plots.note(axes[1], "no frame reports a signal (no radiotap header with one)")
    plots.zoom(axes[0], window, 0.0, last, "the 802.11 frames")
    plots.legend(axes[0])
    return plots.drawn(fig, given)
