"""The flavour figure: the window estimate with the fitted Reno and Cubic growth curves.

Draws one stream of a flavour result (its ``details[stream]``, what
:func:`pcapstats.analyses.flavour.flavour_stream` returned) (no number is computed
here but the fitted curves' points): Wireshark's bytes in flight, the cwnd estimate, the start
of each congestion event, and on each growth epoch the Reno line W0 + a t and the Cubic curve
W_max + C (t - K)^3 that were fitted to it, with the verdict in the title.
"""

from __future__ import annotations

import numpy as np

from .. import plots

TIME_LABEL = "Time since the capture's first packet (s)"
MAX_EVENT_LINES = 40    # more congestion events than this are drawn as ticks on the time axis


def flavour_figure(result, *, ax=None, title: str | None = None):
    """``result``: one stream's StreamFlavour.  Returns the matplotlib Figure (given ``ax``,
    draws into it and returns it)."""
    from matplotlib.lines import Line2D
    row, cw = result.row, result.cwnd
    verdict = row["flavour"] + (f" (confidence {row['flavour_confidence']:.2f})"
                                if row["flavour"] != "unknown" else "")
    fig, axes = plots.figure(
        title or f"Congestion control: {verdict}; {plots.captures_title(cw.names)}",
        TIME_LABEL, "Window", subtitle=f"TCP stream {row['stream']}"
        + (f": {cw.name}" if cw.name else "") + f"; {row['side']}-side capture", ax=ax)
    given, ax = ax, axes
    flight, s = cw.table("flight"), cw.table("samples")
    receiver = row["side"] == "receiver"
    if not receiver:      # at the receiver Wireshark's bytes in flight is ~0: nothing to see
        ax.plot(flight["time_s"], flight["bytes_in_flight"], ".", ms=2, color="tab:blue",
                alpha=0.35, label="bytes in flight (Wireshark)")
    ax.plot(s["sender_time_s"], s["cwnd_bytes"], "-", lw=1.0, color="tab:green",
            label="cwnd estimate (cwnd-limited samples)")
    t_s, cwnd = s["sender_time_s"], s["cwnd_bytes"]
    for k, (t0, t1, fit) in enumerate(result.epochs):
        # over the span the fit was made on only, and not above the epoch's own data
        inside = (t_s >= t0) & (t_s <= t1) & ~np.isnan(cwnd)
        ceiling = 1.1 * max(fit.w_max_bytes, float(cwnd[inside].max()) if inside.any() else 0)
        t = np.linspace(0.0, t1 - t0, 50)
        for w, style, colour, label in (
                (fit.reno_w0_bytes + fit.reno_slope_bytes_per_s * t, "-", "tab:orange",
                 "Reno fit: W0 + a t"),
                (fit.w_max_bytes + fit.cubic_c * (t - fit.cubic_k_s) ** 3, "--", "tab:purple",
                 "Cubic fit: W_max + C (t - K)^3")):
            ax.plot(t0 + t, np.where((w >= 0) & (w <= ceiling), w, np.nan), style, lw=1.4,
                    color=colour, label=label if k == 0 else None)
    starts = result.event_starts_s
    many = len(starts) > MAX_EVENT_LINES     # a long flow's events as ticks, not a red wall
    for t in starts:
        ax.axvline(t, ymax=0.04 if many else 1.0, color="tab:red", lw=0.6,
                   ls="-" if many else ":")
    shown = np.r_[cwnd[~np.isnan(cwnd)], 1.0] if receiver else \
        np.r_[flight["bytes_in_flight"].astype(float), cwnd[~np.isnan(cwnd)], 1.0]
    largest = float(np.nanmax(shown))
    ax.set_ylim(0, largest * 1.1)
    plots.rate_axis(ax, largest, "B", "Window")
    extra = [Line2D([], [], color="tab:red", lw=0.6, ls="-" if many else ":",
                    label=f"congestion event ({len(starts)})")] if len(starts) else []
    plots.legend(ax, extra=extra)
    if receiver:
        plots.note(ax, "Captured at the receiver: the window is estimated from the receiver's "
                       "ACKs and the data they released (Wireshark's bytes in flight is near 0 "
                       "here and not drawn).")
    return plots.drawn(fig, given)
