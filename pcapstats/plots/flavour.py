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


def flavour_figure(result, *, title: str | None = None):
    """``result``: one stream's StreamFlavour.  Returns the matplotlib Figure."""
    from matplotlib.lines import Line2D
    row, cw = result.row, result.cwnd
    verdict = row["label"] + (f" (confidence {row['confidence']:.2f})"
                              if row["label"] != "unknown" else "")
    fig, ax = plots.figure(title or f"Congestion control of TCP stream {row['stream']} "
                           f"({row['side']}-side capture): {verdict}", TIME_LABEL, "Window")
    flight, s = cw.table("flight"), cw.table("samples")
    ax.plot(flight["time_s"], flight["bytes_in_flight"], ".", ms=2, color="tab:blue",
            alpha=0.35, label="bytes in flight (Wireshark)")
    ax.plot(s["sender_time_s"], s["cwnd_bytes"], "-", lw=1.0, color="tab:green",
            label="cwnd estimate (cwnd-limited samples)")
    for k, (t0, t1, fit) in enumerate(result.epochs):
        t = np.linspace(0.0, t1 - t0, 50)
        ax.plot(t0 + t, fit.reno_w0_bytes + fit.reno_slope_bytes_per_s * t, "-", lw=1.4,
                color="tab:orange", label="Reno fit: W0 + a t" if k == 0 else None)
        ax.plot(t0 + t, fit.w_max_bytes + fit.cubic_c * (t - fit.cubic_k_s) ** 3, "--", lw=1.4,
                color="tab:purple",
                label="Cubic fit: W_max + C (t - K)^3" if k == 0 else None)
    starts = result.event_starts_s
    for t in starts:
        ax.axvline(t, color="tab:red", lw=0.6, ls=":")
    largest = np.nanmax(np.r_[flight["bytes_in_flight"].astype(float), 1.0])
    ax.set_ylim(0, largest * 1.25)
    plots.rate_axis(ax, largest, "B", "Window")
    extra = [Line2D([], [], color="tab:red", lw=0.6, ls=":",
                    label=f"congestion event ({len(starts)})")] if len(starts) else []
    plots.legend(ax, extra=extra, loc="upper right")
    return fig
