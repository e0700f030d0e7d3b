"""The delay-model figure: latency samples against message size, each size's trimmed mean, and
the fitted line D = a*S + b with what its slope implies (a delay result's tables)."""

from __future__ import annotations

import numpy as np

from .. import plots


def delay_figure(result, *, ax=None, title: str | None = None):
    samples, sizes, model = result.table("samples"), result.table("sizes"), result.table("model")
    given = ax
    fig, ax = plots.figure(title or f"Delay model D = a·S + b: "
                           f"{plots.captures_title(result.names)}",
                           "Message size S (bytes)", "Latency D (ms)",
                           subtitle="each size's 10 % trimmed mean fitted by least squares",
                           ax=given)
    sources = list(dict.fromkeys(sizes["source"].tolist()))
    for k, source in enumerate(sources):
        colour = plots.colour(k, len(sources))
        mine = samples["source"] == source
        ax.plot(samples["size_bytes"][mine], samples["latency_ms"][mine], ".", ms=3,
                color=colour, alpha=0.25)
        per = sizes["source"] == source
        ax.plot(sizes["size_bytes"][per], sizes["latency_trimmed_ms"][per], "o", color=colour,
                label=f"{source}: trimmed mean per size")
        fit = np.flatnonzero(model["source"] == source)
        if len(fit):
            i = fit[0]
            a, b = model["a_ms_per_byte"][i], model["b_ms"][i]
            s = np.array([0, sizes["size_bytes"][per].max()], float)
            bw = model["bandwidth_bps"][i]
            said = f", {plots.human_rate(bw)} implied" if bw == bw else ""
            ax.plot(s, a * s + b, "-", color=colour, lw=1.2,
                    label=f"fit: D = {a * 1e3:.3g} µs/B · S + {b:.3g} ms "
                          f"(r² {model['r2'][i]:.4f}{said})")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    plots.legend(ax)
    return plots.drawn(fig, given)
