"""Shared plotting helpers: every pcapstats figure is made and saved through these.

- :func:`figure` makes a matplotlib ``Figure`` (Agg canvas, no pyplot: nothing accumulates in
  pyplot's global list of open figures, so tests and notebooks can make thousands) with one or
  more axes, a title and axis labels that name their units; it shows itself as an image in a
  notebook (``_repr_png_``), with no ``%matplotlib`` line;
- :func:`rate_axis` formats an axis of bits/s (or bytes/s, packets/s) for people: one prefix
  for the whole axis, picked from the largest value (kbit/s, Mbit/s, Gbit/s), written in the
  axis label, the data left in base units;
- :func:`human_rate` writes one rate the same way ("3.20 Mbit/s") for legends and notes;
- :func:`legend` adds a legend when something is labelled;
- :func:`save` writes ``.png`` or ``.svg`` by the file's extension; anything else, or a path
  that cannot be written, raises one PcapstatsError line.

A figure's module (``plots/iograph.py``, ...) draws on these and returns the ``Figure``; in a
notebook the returned figure displays itself.

    fig, ax = plots.figure("Throughput", "Time (s)", "Throughput")
    ax.plot(t, bps, label="stream 0")
    plots.rate_axis(ax, bps.max(), "bit/s", "Throughput")
    plots.legend(ax)
    plots.save(fig, "out.png")
"""

from __future__ import annotations

import functools
import io
import os
from pathlib import Path

from ..errors import PcapstatsError

EXTENSIONS = (".png", ".svg")
_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
DPI = 120


def figure(title: str, xlabel: str, ylabel: str, *, ncols: int = 1, sharey: bool = True,
           size: tuple[float, float] | None = None):
    """(Figure, Axes) — or (Figure, [Axes, ...]) when ncols > 1 — with the labels set.

    Labels should carry their units, e.g. "Time since the first packet (s)".
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = _figure_class()(figsize=size or ((8.0, 4.5) if ncols == 1 else (min(5.0 * ncols, 16.0), 4.5)),
                 dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, sharey=sharey, squeeze=False)[0]
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    if ncols == 1:
        axes[0].set_title(title)
        return fig, axes[0]
    fig.suptitle(title)
    return fig, list(axes)


@functools.cache
def _figure_class():
    """matplotlib's Figure, showing itself as a PNG in a notebook (made on first use: matplotlib
    is imported only when a figure is drawn)."""
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        def _repr_png_(self) -> bytes:
            buf = io.BytesIO()
            self.savefig(buf, format="png")
            return buf.getvalue()
    return NotebookFigure


def rate_prefix(largest: float) -> tuple[float, str]:
    """(divisor, SI prefix) for values up to ``largest``: 2.5e6 -> (1e6, "M")."""
    for scale, prefix in _PREFIXES:
        if abs(largest) >= scale:
            return scale, prefix
    return 1.0, ""


def human_rate(value: float, unit: str = "bit/s") -> str:
    """3_200_000 -> '3.20 Mbit/s'; three significant digits."""
    if value != value:  # NaN
        return "n/a"
    scale, prefix = rate_prefix(value)
    return f"{value / scale:.3g} {prefix}{unit}"


def rate_axis(ax, largest: float, unit: str = "bit/s", quantity: str = "Rate",
              axis: str = "y") -> str:
    """Label ``axis`` as "<quantity> (<prefix><unit>)" and show its ticks divided by the prefix;
    returns the label.  The plotted data stay in base units (bits/s), so lines, limits and
    annotations drawn later need no scaling."""
    from matplotlib.ticker import FuncFormatter
    scale, prefix = rate_prefix(largest)
    label = f"{quantity} ({prefix}{unit})"
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / scale:g}"))
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(label)
    return label


def legend(ax, extra=(), **kwargs) -> None:
    """A legend for the labelled artists of ``ax`` plus ``extra`` labelled proxy artists (e.g.
    ``Line2D([], [], linestyle="--", label="average")`` explaining a line style); none when
    nothing is labelled."""
    handles, labels = ax.get_legend_handles_labels()
    handles += list(extra)
    labels += [h.get_label() for h in extra]
    if handles:
        ax.legend(handles, labels, **{"fontsize": "small", "loc": "best", **kwargs})


def save(fig, path: str | os.PathLike) -> Path:
    """Write the figure to ``path``; the extension (.png or .svg) picks the format."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in EXTENSIONS:
        raise PcapstatsError(f"cannot write a plot as {suffix or 'a file without extension'!r}",
                             path=str(path), hint="use a .png or .svg file name")
    try:
        fig.savefig(path, format=suffix[1:])
    except OSError as e:
        raise PcapstatsError(f"cannot write plot: {e.strerror or e}", path=str(path),
                             hint="check the directory exists and is writable") from None
    return path
