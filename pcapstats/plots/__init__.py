"""Shared plotting helpers: every pcapstats figure is made and saved through these.

- :func:`figure` makes a matplotlib ``Figure`` (Agg canvas, no pyplot: nothing accumulates in
  pyplot's global list of open figures, so tests and notebooks can make thousands) with one or
  more axes, a title and axis labels that name their units; it shows itself as an image in a
  notebook (``_repr_png_``), with no ``%matplotlib`` line.  Given ``ax`` (what a figure's
  ``.figure(ax=...)`` was given), it draws into those Axes of the caller's figure instead, as
  pandas' ``plot(ax=...)`` does: the title goes on each Axes, legends beside it;
- :func:`rate_axis` formats an axis of bits/s (or bytes/s, packets/s) for people: one prefix
  for the whole axis, picked from the largest value (kbit/s, Mbit/s, Gbit/s), written in the
  axis label, the data left in base units;
- :func:`human_rate` writes one rate the same way ("3.20 Mbit/s") for legends and notes;
- :func:`legend` adds a legend when something is labelled, always outside the data (under the
  figure, or beside the Axes it was given);
- :func:`time_window` / :func:`zoom`: the ``from_s`` / ``to_s`` zoom of the time figures
  (Wireshark's zoom: the x axis cut to the window, the y axis fitted to what is in it), one
  clear error for a window that is empty or backwards;
- :func:`save` writes ``.png`` or ``.svg`` by the file's extension; anything else, or a path
  that cannot be written, raises one PcapstatsError line.

A figure's module (``plots/iograph.py``, ...) draws on these and returns the ``Figure`` it made
(or, given ``ax``, that ``ax``); in a notebook the returned figure displays itself.

    fig, ax = plots.figure("Throughput", "Time (s)", "Throughput")
    ax.plot(t, bps, label="stream 0")
    plots.rate_axis(ax, bps.max(), "bit/s", "Throughput")
    plots.legend(ax)
    plots.save(fig, "out.png")
"""

from __future__ import annotations

import functools
import io
import math
import os
import re
import textwrap
from pathlib import Path

from ..errors import PcapstatsError, UsageError
from ..naming import fitting

EXTENSIONS = (".png", ".svg")
BESIDE_SHARE = 0.6       # of the caller's Axes' width left to the data beside a legend
BESIDE_LABEL = 30        # characters a line of a legend's label beside an Axes
PANEL_COLUMNS = 3        # panels side by side before a new row
_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
DPI = 120


def figure(title: str, xlabel: str, ylabel: str, *, panels: int = 1, sharey: bool = True,
           size: tuple[float, float] | None = None, subtitle: str | None = None, ax=None,
           over_figure: bool = False, columns: int = PANEL_COLUMNS, sharex: bool = False):
    """(Figure, Axes) -- or (Figure, [Axes, ...]) for several panels, laid out in a grid of up
    to PANEL_COLUMNS columns -- with the labels set and the title on top (``subtitle`` under
    it: the capture or stream the figure shows).  Labels should carry their units, e.g.
    "Time since the first packet (s)".  ``ax``: the caller's Axes to draw into (one, or a
    sequence of ``panels``), whose figure is returned.  ``over_figure``: one panel's title
    centred over the figure, not the Axes (long tick labels beside it); ``columns``: at most
    this many panels side by side (1: one a row, for panels that share the time axis;
    ``sharex``: on one x axis)."""
    if ax is not None:
        return _into(ax, title, xlabel, ylabel, panels, subtitle)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    cols = min(panels, columns)
    rows = -(-panels // cols)
    if size is None:
        size = (8.0, 4.8) if panels == 1 else (min(4.6 * cols, 14.0), 3.0 * rows + 1.2)
    fig = _figure_class()(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(rows, cols, sharey=sharey, sharex=sharex, squeeze=False)
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
    text = _title_text(title, subtitle, int(size[0] * 11))   # characters a line, about
    if panels == 1 and not over_figure:
        axes[0].set_title(text, fontsize="medium")
        return fig, axes[0]
    fig.suptitle(text, fontsize="medium")
    return fig, axes if panels > 1 else axes[0]


def _title_text(title: str, subtitle: str | None, width: int) -> str:
    text = "\n".join(_wrap(title, width))
    if subtitle:
        text += "\n" + "\n".join(_wrap(subtitle, width))
    return text


def wrapped(text: str, width: int) -> str:
    """``text`` (its lines kept) wrapped to ``width`` characters, a file name never broken at
    its hyphens: a title that fits its Axes."""
    return "\n".join(w for line in text.split("\n") for w in _wrap(line, width) or [""])


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` characters, a file name never broken at its hyphens."""
    return textwrap.wrap(text, width, break_on_hyphens=False)


def _into(ax, title, xlabel, ylabel, panels: int, subtitle):
    """figure() on the caller's Axes: each gets the labels and the title (a panel's own name
    is put over it by :func:`panel_title`)."""
    from matplotlib.axes import Axes
    axes = list(getattr(ax, "flat", ax)) if not isinstance(ax, Axes) else [ax]
    if not all(isinstance(a, Axes) for a in axes):
        raise UsageError(f"ax= takes a matplotlib Axes, not {type(ax).__name__}",
                         hint="fig, ax = matplotlib.pyplot.subplots(); result.figure(ax=ax)")
    if len(axes) != panels:
        raise UsageError(f"this figure has {panels} panel{'s' if panels > 1 else ''}; ax= gave "
                         f"{len(axes)} Axes",
                         hint=f"pass ax= a list of {panels} Axes, or leave ax out")
    for a in axes:
        a.grid(True, alpha=0.3)
        a.set_xlabel(xlabel)
        a.set_ylabel(ylabel)
        width = int(a.get_position().width * a.figure.get_figwidth() * 14 * BESIDE_SHARE)
        a.set_title(_title_text(title, subtitle, max(width, 30)), fontsize="small")
    return axes[0].figure, axes[0] if panels == 1 else axes


def own(fig) -> bool:
    """The figure is one pcapstats made (not the caller's, drawn into through ``ax``)."""
    return isinstance(fig, _figure_class())


def drawn(fig, ax):
    """What a figure function returns: the Figure it made, or the caller's ``ax`` it drew
    into (as pandas' ``plot(ax=...)`` returns it); its text drawable (:func:`drawable_text`)."""
    drawable_text(fig)
    return fig if ax is None else ax


def drawable_text(fig) -> None:
    """Every text of the figure, and the labels of its axes of words (a comparison's groups,
    capture names), made drawable: a capture's name is data, any bytes a file system allows,
    so a byte that is not UTF-8 is written ``\\xNN``, a character no font here has (a CJK
    name with DejaVu alone, an emoji, a right-to-left mark) as its ``\\uXXXX`` escape, and a
    ``$`` is a dollar, never the start of math.  Silent: no glyph warning, no error."""
    from matplotlib.text import Text
    for t in fig.findobj(Text):
        said = t.get_text()
        if not said:
            continue
        fixed = _drawable(said, _font_path(t.get_fontproperties()))
        if fixed != said:
            t.set_text(fixed)
        if "$" in fixed:
            t.set_parse_math(False)
    drawable = _formatter_class()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                             (axis.get_minor_formatter, axis.set_minor_formatter)):
                if not isinstance(get(), drawable):
                    put(drawable(get()))


def _font_path(prop) -> str:
    from matplotlib.font_manager import findfont
    return findfont(prop)


@functools.lru_cache(maxsize=65536)
def _has_glyph(font_path: str, codepoint: int) -> bool:
    from matplotlib.font_manager import get_font
    return get_font(font_path).get_char_index(codepoint) != 0


LONGEST_WORD = 60        # characters of a name drawn whole: a longer one is cut (with a hash)


def _drawable(text: str, font_path: str) -> str:
    if text.isascii() and "\r" not in text and "\t" not in text:
        return _words_fit(text)
    out = []
    for c in text:
        n = ord(c)
        if c == "\n" or (n < 128 and c.isprintable()):
            out.append(c)
        elif 0xDC80 <= n <= 0xDCFF:                   # a byte that was not UTF-8
            out.append(f"\\x{n - 0xDC00:02x}")
        elif not c.isprintable() or not _has_glyph(font_path, n):
            out.append(c.encode("unicode_escape").decode("ascii"))
        else:
            out.append(c)
    return _words_fit("".join(out))


def _words_fit(text: str) -> str:
    """A word too long to wrap (a file name of 255 bytes) cut to LONGEST_WORD characters,
    ``~`` and a hash of it, so it cannot push the plot off its figure."""
    if len(text) <= LONGEST_WORD:
        return text
    return re.sub(rf"\S{{{LONGEST_WORD + 1},}}", lambda m: fitting(m.group(), LONGEST_WORD, len),
                  text)


@functools.cache
def _formatter_class():
    """A tick formatter whose labels are drawable (:func:`drawable_text`): around the axis'
    own, which still decides every label (numbers, words, a group's name)."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.font_manager import FontProperties
    from matplotlib.ticker import FixedFormatter, Formatter, FuncFormatter
    words = (StrCategoryFormatter, FixedFormatter, FuncFormatter)  # labels from data

    class Drawable(Formatter):
        def __init__(self, inner):
            self.inner = inner

        def set_axis(self, axis):
            super().set_axis(axis)
            self.inner.set_axis(axis)

        def set_locs(self, locs):
            self.locs = locs
            self.inner.set_locs(locs)

        def __call__(self, x, pos=None):
            return self._fixed(self.inner(x, pos))

        def format_ticks(self, values):
            return [self._fixed(s) for s in self.inner.format_ticks(values)]

        def format_data(self, value):
            return self._fixed(self.inner.format_data(value))

        def format_data_short(self, value):
            return self._fixed(self.inner.format_data_short(value))

        def get_offset(self):
            return self._fixed(self.inner.get_offset())

        def _fixed(self, text) -> str:
            text = _drawable(str(text), _font_path(FontProperties()))
            if "$" in text and isinstance(self.inner, words):   # a name's $, not math
                text = text.replace("\\$", "$").replace("$", "\\$")
            return text
    return Drawable
def panel_title(ax, text: str) -> None:
    """One panel's own name (its capture, group or metric): the panel's title in a figure of
    ours; over the figure's title on the caller's Axes, which have no title of their own."""
    if own(ax.figure):
        ax.set_title(text, fontsize="small")
    else:
        ax.set_title(f"{text}\n{ax.get_title()}", fontsize="small")


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


def legend(ax, extra=(), *, beside: bool = False, **kwargs) -> None:
    """A legend for the labelled artists of ``ax`` plus ``extra`` labelled proxy artists (e.g.
    ``Line2D([], [], linestyle="--", label="average")`` explaining a line style); none when
    nothing is labelled.  Never on the data: under the figure (which grows to hold it), or
    beside the Axes (``beside``: a panel's own legend; always on the caller's Axes)."""
    handles, labels = ax.get_legend_handles_labels()
    key(ax, list(zip(handles, labels)) + [(h, h.get_label()) for h in extra], beside=beside,
        **kwargs)


def key(ax, entries, *, beside: bool = False, **kwargs) -> None:
    """A legend of exactly ``entries`` ((artist, label) pairs, or labelled proxy artists), placed
    as :func:`legend` places one: under the figure ``ax`` is in, or beside ``ax``."""
    entries = [e if isinstance(e, tuple) else (e, e.get_label()) for e in entries]
    if not entries:
        return
    handles, labels = [h for h, _ in entries], [label for _, label in entries]
    kwargs.pop("loc", None)
    fig = ax.figure
    if beside or not own(fig):
        labels = ["\n".join(_wrap(label, BESIDE_LABEL)) or label for label in labels]
        ax.legend(handles, labels, **{"fontsize": "small", **kwargs}, loc="upper left",
                  bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        return
    room = int(fig.get_figwidth() * 13)           # characters across the figure, about
    labels = ["\n".join(_wrap(label, room - 8)) or label for label in labels]
    longest = max(len(line) for label in labels for line in label.split("\n"))
    cols = max(1, min(len(labels), room // (longest + 6)))
    lines = [label.count("\n") + 1 for label in labels]
    rows = sum(max(lines[i:i + cols]) for i in range(0, len(lines), cols))
    fig.set_figheight(fig.get_figheight() + 0.2 * rows)   # room for it, not the plot's
    fig.legend(handles, labels, **{"fontsize": "small", **kwargs}, loc="outside lower center",
               ncols=cols)


def note(ax, text: str) -> None:
    """A sentence under the Axes' x label, for what the reader must know to read the figure
    right: it never covers the data, and a legend under the figure goes under it."""
    width = int(ax.get_position().width * ax.figure.get_figwidth() * 14
                * (1 if own(ax.figure) else BESIDE_SHARE))
    ax.annotate("\n".join(_wrap("Note: " + text, max(width, 30))), xy=(0.5, 0),
                xycoords=ax.xaxis.label, xytext=(0, -4), textcoords="offset points",
                ha="center", va="top", fontsize="small", style="italic", color="0.25",
                annotation_clip=False, gid="note")


def notes(fig) -> list[str]:
    """The notes :func:`note` put on a figure, as text."""
    return [a.get_text() for a in fig.findobj(lambda a: getattr(a, "get_gid", None)
                                              and a.get_gid() == "note")]


def time_window(from_s: float | None = None,
                to_s: float | None = None) -> tuple[float | None, float | None] | None:
    """A time figure's zoom, ``from_s`` to ``to_s`` seconds since the capture's first packet
    (either may be None: from the data's start, to its end), checked before anything is drawn;
    None without one."""
    if from_s is None and to_s is None:
        return None
    for option, value in (("--from", from_s), ("--to", to_s)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise UsageError(f"{option} {value!r} is no time in the capture",
                             hint="--from and --to (from_s=, to_s=) are seconds since the "
                                  "capture's first packet, 0 or more")
    if from_s is not None and to_s is not None and to_s <= from_s:
        raise UsageError(f"the zoom ends (--to {to_s:g}) before it starts (--from {from_s:g})",
                         hint="give --from a time before --to, in seconds since the "
                              "capture's first packet")
    return from_s, to_s


def zoom(ax, window, first_s: float, last_s: float, what: str) -> tuple[float, float] | None:
    """Cut ``ax``'s time axis to the zoom ``window`` (:func:`time_window`; None: no zoom) over
    data from ``first_s`` to ``last_s``; returns the (start, end) shown, or None.  A window
    that holds none of the data is one error naming where the data is (``what``)."""
    if window is None:
        return None
    start = first_s if window[0] is None else window[0]
    end = last_s if window[1] is None else window[1]
    hint = (f"{what}: from {first_s:.3f} to {last_s:.3f} s after the capture's first "
            "packet; zoom within that (--from/--to, from_s=/to_s=)")
    if end < first_s:
        raise UsageError(f"--to {end:g} s comes before the start of {what}", hint=hint)
    if start > last_s or end <= start:
        raise UsageError(f"--from {start:g} s is past the end of {what}", hint=hint)
    ax.set_xlim(start, end)
    return start, end


def in_view(times, span):
    """Which of ``times`` the zoom ``span`` (:func:`zoom`'s answer; None: all) shows."""
    import numpy as np
    times = np.asarray(times, float)
    if span is None:
        return np.ones(len(times), bool)
    return (times >= span[0]) & (times <= span[1])


def save(fig, path: str | os.PathLike) -> Path:
    """Write the figure to ``path``; the extension (.png or .svg) picks the format."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in EXTENSIONS:
        raise PcapstatsError(f"cannot write a plot as {suffix or 'a file without extension'!r}",
                             path=str(path), hint="use a .png or .svg file name")
    drawable_text(fig)
    try:
        fig.savefig(path, format=suffix[1:])
    except OSError as e:
        raise PcapstatsError(f"cannot write plot: {e.strerror or e}", path=str(path),
                             hint="check the directory exists and is writable") from None
    return path
