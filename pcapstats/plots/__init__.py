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
import textwrap
from pathlib import Path

from ..errors import PcapstatsError

EXTENSIONS = (".png", ".svg")
PANEL_COLUMNS = 3        # panels side by side before a new row
_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
DPI = 120


def figure(title: str, xlabel: str, ylabel: str, *, panels: int = 1, sharey: bool = True,
           size: tuple[float, float] | None = None, subtitle: str | None = None):
    """(Figure, Axes) -- or (Figure, [Axes, ...]) for several panels, laid out in a grid of up
    to PANEL_COLUMNS columns -- with the labels set and the title on top (``subtitle``, smaller,
    under it: the capture or stream the figure shows).  Labels should carry their units, e.g.
    "Time since the first packet (s)"."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    cols = min(panels, PANEL_COLUMNS)
    rows = -(-panels // cols)
    if size is None:
        size = (8.0, 4.8) if panels == 1 else (min(4.6 * cols, 14.0), 3.0 * rows + 1.2)
    fig = _figure_class()(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(rows, cols, sharey=sharey, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[panels:]:
        ax.remove()
    axes = axes[:panels]
    for k, ax in enumerate(axes):
        ax.grid(True, alpha=0.3)
        if k // cols == rows - 1 or k + cols >= panels:   # the bottom panel of each column
            ax.set_xlabel(xlabel)
        if k % cols == 0:
            ax.set_ylabel(ylabel)
    width = int(size[0] * 11)          # characters of a title line at this width, about
    text = "\n".join(textwrap.wrap(title, width))
    if subtitle:
        text += "\n" + "\n".join(textwrap.wrap(subtitle, int(width * 1.2)))
    if panels == 1:
        axes[0].set_title(text, fontsize="medium")
        return fig, axes[0]
    fig.suptitle(text, fontsize="medium")
    return fig, axes


def captures_title(names) -> str:
    """One capture by its name; a few by theirs; many by what their names share (``names``:
    a result's ``names``, which tell same-named files in two directories apart)."""
    names = list(dict.fromkeys(names))
    if len(names) <= 3:
        return ", ".join(names)
    prefix = os.path.commonprefix(names)
    suffix = os.path.commonprefix([n[::-1] for n in names])[::-1]
    shared = f"{prefix}*{suffix}" if prefix or suffix else "several files"
    return f"{len(names)} captures ({shared})"


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


def colour(k: int, of: int) -> str:
    """The k-th of ``of`` line colours: matplotlib's ten, or twenty when there are more lines."""
    if of <= 10:
        return f"C{k % 10}"
    from matplotlib import colormaps
    return colormaps["tab20"](k % 20)


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


def legend(ax, extra=(), *, below: bool = False, **kwargs) -> None:
    """A legend for the labelled artists of ``ax`` plus ``extra`` labelled proxy artists (e.g.
    ``Line2D([], [], linestyle="--", label="average")`` explaining a line style); none when
    nothing is labelled.  ``below``: under the plot (the figure grows to hold it), for legends
    too long to sit on the data."""
    handles, labels = ax.get_legend_handles_labels()
    handles += list(extra)
    labels += [h.get_label() for h in extra]
    if not handles:
        return
    if below:
        fig = ax.figure
        longest = max(len(label) for label in labels)
        cols = max(1, min(len(labels), int(fig.get_figwidth() * 13) // (longest + 6)))
        rows = -(-len(labels) // cols)
        fig.set_figheight(fig.get_figheight() + 0.22 * rows)   # room for it, not the plot's
        fig.legend(handles, labels, loc="outside lower center", ncols=cols, fontsize="small",
                   **kwargs)
    else:
        ax.legend(handles, labels, **{"fontsize": "small", "loc": "best", **kwargs})


def note(ax, text: str) -> None:
    """A sentence under the figure, for what the reader must know to read it right (it never
    covers the data)."""
    fig = ax.figure
    fig.supxlabel("\n".join(textwrap.wrap("Note: " + text, int(fig.get_figwidth() * 13))),
                  fontsize="small", style="italic", color="0.25")


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
