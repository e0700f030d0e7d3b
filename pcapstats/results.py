"""One shape for every analysis' answer: a :class:`Result` of named tables with declared columns.

Every analysis (``ps.throughput``, ``ps.iograph``, ``ps.cwnd``, ...) returns a subclass of
:class:`Result`.  A result holds one or more *tables*, each a dict of numpy arrays, one per
column, in the order its :class:`TableSpec` declares; the first spec is the *main* table (what a
command prints by default).  So one output path serves every command (text, CSV, JSON, a figure
by ``-o``'s extension), ``pcapstats columns`` lists every table of every analysis from the
specs, and a study can put any metric beside any other.

    r = ps.cwnd("capture.pcap")
    r.table()                 # the main table: {"stream": array([...]), ...}
    r.to_pandas("losses")     # any table as a DataFrame
    r.figure()                # a matplotlib Figure (it shows itself in a notebook)
    r                         # in a notebook: the main table and the figure
    r.notes                   # what the analysis wants said (which stream it picked, ...)

Several captures: ``ps.cwnd([a, b])`` or :func:`pcapstats.concat` of results gives one result
whose tables start with a ``capture`` column; ``.parts`` keeps the per-capture results.

**Vocabulary** -- the same concept has the same column name in every table (the identity
columns among them declared once, in pcapstats.schema: ``schema.IDENTITY_COLUMNS``):

=====================  =======================================================================
``capture``            the capture file of the row (tables of several captures)
``proto``              ``tcp``, ``udp`` or ``icmp``
``stream``             tcp.stream / udp.stream index, exactly as Wireshark numbers it
``direction``          ``a_to_b`` or ``b_to_a``: side A is the source of the stream's first
                       packet (pcapstats.streams); ``*_a_to_b`` columns count what A sent
``address_a/port_a``   side A's endpoint (``_b`` side B's)
``frame_number``       1-based packet number in the file (Wireshark's frame.number)
``time_s``             seconds since the capture's first packet (frame.time_relative)
``side``               where the capture was taken: ``sender``, ``receiver``, ``middle``,
                       ``further on`` or ``unknown`` (schema.CAPTURE_POINTS)
``packets``            frames; ``bytes`` frame bytes on the wire; ``payload_bytes`` transport
                       payload bytes (tcp.len, UDP length - 8)
flag names             Wireshark's own, singular: ``retransmission``, ``out_of_order``,
                       ``duplicate_ack`` ... (a count column counts packets with that flag)
units in names         ``*_s``, ``*_ms``, ``*_ns`` times; ``*_bytes`` sizes; ``*_bps`` bits
                       per second; ``*_per_s`` other rates (``packets_per_s``, ``bytes_per_s``)
=====================  =======================================================================

A number that can be missing is ``NaN`` in the numpy table and ``<NA>`` (nullable integers)
in pandas; text columns are object arrays of str.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from typing import ClassVar, Iterable, Mapping, Sequence

import numpy as np

from . import catalogue, render
from .errors import Note, UsageError
from .naming import capture_names, text as name_text
from .schema import PACKET_TABLE, Column, TableSpec

HTML_ROWS = 50          # rows a notebook shows of a table


RESULT_TYPES: dict[str, type["Result"]] = {}   # analysis name -> its result class
SAME_TABLES = {"wscale": "cwnd"}    # an analysis whose result is another's (ps.wscale: Cwnd)


class Result:
    """Base of every analysis' answer (see the module docstring).

    A subclass sets ``analysis`` (its name: the ``ps`` function, the command, the key of
    ``pcapstats columns``) and ``specs`` (its tables, the main one first), and may draw a
    figure by overriding :meth:`_figure`.  ``notes`` are sentences the analysis wants said
    (the CLI prints them on stderr); ``clock_touched``: what the breaks of the capture's clock
    did to its numbers (:func:`pcapstats.clock.touched`; empty when it has none, or the
    analysis does not say), which the capture's clock warning then says."""

    analysis: ClassVar[str] = ""
    specs: ClassVar[tuple[TableSpec, ...]] = ()
    view: ClassVar[dict[str, tuple[render.Shown, ...]]] = {}  # table -> what people read first
    legend: ClassVar[dict[str, str]] = {}   # table -> a sentence printed under its human table
    series: ClassVar[str | None] = None      # the table of one row a sample, if there is one
    draws: ClassVar[bool] = False     # has a figure
    overlays: ClassVar[bool] = False  # its figure can show several captures at once
    clock_touched: str = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.analysis:
            RESULT_TYPES[cls.analysis] = cls

    def __init__(self, tables: Mapping[str, Mapping[str, np.ndarray]], *, capture: str,
                 notes: Iterable[str] = (), specs: Sequence[TableSpec] | None = None):
        self.table_specs = tuple(specs or self.specs)
        self._tables = {spec.name: _checked(spec, tables.get(spec.name), self.analysis)
                        for spec in self.table_specs}
        self.captures = [str(capture)]
        self.notes = [n for n in notes if n]
        self._parts: list[Result] | None = None     # one result: itself (see parts)

    @property
    def parts(self) -> list[Result]:
        """The results this one stacks (a capture's, a stream's), in order; itself when it is
        one.  Kept as None then, not as [self]: a result referring to itself is a cycle, so a
        result made and dropped inside an analysis (limits' and flavour's per-stream cwnd,
        its per-segment tables tens of MB on a long stream) would stay in memory until the
        garbage collector ran, not go when its last reference does."""
        parts = getattr(self, "_parts", None)
        return [self] if parts is None else parts

    @parts.setter
    def parts(self, parts) -> None:
        parts = list(parts)
        self._parts = None if len(parts) == 1 and parts[0] is self else parts

    @property
    def names(self) -> list[str]:
        """``captures`` as figures, legends and file names show them: each one's shortest
        path suffix that no other shares (pcapstats.naming: ``t1/run.pcap``, ``t2/run.pcap``);
        a part of several captures' result keeps its name among them."""
        return getattr(self, "_names", None) or capture_names(self.captures)

    @names.setter
    def names(self, names: Sequence[str]) -> None:
        """How ``captures`` are named among others this result is shown beside."""
        self._names = list(names)

    @classmethod
    def specs_for(cls, **options) -> tuple[TableSpec, ...]:
        """The tables the analysis gives when run with ``options`` (most: always ``specs``;
        one whose columns follow its options says so here), before any capture is read."""
        return cls.specs

    # -- tables ------------------------------------------------------------------------------
    @property
    def table_names(self) -> list[str]:
        return [s.name for s in self.table_specs]

    def spec(self, name: str | None = None) -> TableSpec:
        name = name or self.table_specs[0].name
        for s in self.table_specs:
            if s.name == name:
                return s
        raise UsageError(f"{self.analysis} has no table {name!r}",
                         hint=f"its tables: {', '.join(self.table_names)}")

    def table(self, name: str | None = None) -> dict[str, np.ndarray]:
        """A table as numpy columns (the main table without a name)."""
        return self._tables[self.spec(name).name]

    def rows(self, name: str | None = None) -> int:
        return render.length(self.table(name))

    @property
    def empty(self) -> bool:
        """The main table has no rows."""
        return self.rows() == 0

    def to_pandas(self, name: str | None = None):
        """A table as a pandas DataFrame: optional numbers as nullable integers (<NA>), text
        columns with few values as categories."""
        import pandas as pd  # lazy: the CLI renders numpy tables without loading pandas
        spec, table = self.spec(name), self.table(name)
        return pd.DataFrame({c.name: _pandas_column(c, table[c.name]) for c in spec.columns})

    def to_arrow(self, name: str | None = None):
        """A table as a pyarrow Table whose schema carries each column's unit and meaning
        (:func:`with_parquet_metadata`; needs pyarrow).  Each column has its declared type
        whatever the rows hold (so the files of many captures, some with no rows, make one
        dataset): text as strings, an optional number or a NaN as null."""
        pa = require_pyarrow()
        spec, table = self.spec(name), self.table(name)
        fields = [pa.field(c.name, arrow_type(pa, c.dtype)) for c in spec.columns]
        tab = pa.Table.from_arrays([_arrow_column(pa, c, table[c.name]) for c in spec.columns],
                                   schema=pa.schema(fields))
        return with_parquet_metadata(tab, spec, f"{self.analysis}.{spec.name}")

    def to_parquet(self, path, name: str | None = None) -> None:
        """Write a table as a Parquet file whose schema metadata carries each column's unit and
        meaning (needs pyarrow)."""
        require_pyarrow()
        import pyarrow.parquet as pq  # lazy: an optional dependency
        pq.write_table(self.to_arrow(name), str(path))

    # -- text -------------------------------------------------------------------------------
    def to_text(self, name: str | None = None, fmt: str = "table", *, all_columns: bool = False,
                width: int | None = None) -> str:
        """A table as text: ``table`` for people (the columns of ``view`` unless
        ``all_columns``, in human units, fitted to ``width``: the terminal's by default),
        ``csv`` or ``json`` (every column, in the columns' own units)."""
        spec, table = self.spec(name), self.table(name)
        integers = frozenset(c.name for c in spec.columns if c.dtype.startswith(("int", "uint")))
        if fmt != "table":
            return render.render(table, fmt, integers)
        view = self.view.get(spec.name)
        complete = all_columns or not view
        shown = render.every_column(table, view) if complete else view
        width = width or render.terminal_width()
        sections = None
        if "capture" in table and len(self.captures) > 1 and len(table["capture"]):
            # a block a capture, titled, all in the same units and widths
            captures = table["capture"]
            edges = np.flatnonzero(np.r_[True, captures[1:] != captures[:-1], True])
            sections = [(captures[a], np.arange(a, b)) for a, b in zip(edges[:-1], edges[1:])]
            shown = [s for s in shown if s.column != "capture"]
        units = {c.name: c.unit for c in spec.columns if c.unit}
        text = render.human(table, units, shown, width, headings=self.headings(spec.name),
                            sections=sections, complete=complete)
        legend = self.legend.get(spec.name)
        if legend and not complete:
            text += textwrap.fill(legend, width) + "\n"
        return text

    def headings(self, name: str | None = None) -> dict[str, str]:
        """Column -> its heading where one is declared, for a table's human text: the
        column's own ``heading``, else the one a view of another of this result's tables gives
        the same column (so ``--series`` and ``--losses`` head a column as the summary does);
        a table's own view may still head it otherwise."""
        spec = self.spec(name)
        out = {c.name: c.heading for c in spec.columns if c.heading}
        for view in self.view.values():
            for s in view:
                if s.heading and s.column in spec.names and s.join is None and not s.endpoints:
                    out.setdefault(s.column, s.heading)
        return out

    def __len__(self) -> int:
        return self.rows()

    def __repr__(self) -> str:
        where = self.captures[0] if len(self.captures) == 1 else f"{len(self.captures)} captures"
        sizes = ", ".join(f"{n}: {self.rows(n)} rows" for n in self.table_names)
        return f"<{type(self).__name__} of {where}: {sizes}>"

    # -- figures -----------------------------------------------------------------------------
    def figure(self, ax=None, *, stream: int | None = None, capture: str | None = None,
               **options):
        """The analysis' figure as a matplotlib Figure (it displays itself in a notebook); given
        ``ax`` (a matplotlib Axes, or a list of them for a figure of several panels), drawn into
        it instead, and ``ax`` returned, as pandas' ``plot(ax=...)`` does (its legend goes beside
        the Axes: make the figure with ``layout="constrained"``, or save it with
        ``bbox_inches="tight"``, to keep it whole).  A result of several
        streams or captures that one figure cannot show draws the part ``stream`` /
        ``capture`` pick.  The time figures (iograph, cwnd, rtt, seqgraph) take ``from_s`` /
        ``to_s``: a zoom, in seconds since the capture's first packet."""
        if not self.draws:
            raise UsageError(f"{self.analysis} draws no figure",
                             hint="write its tables with .csv or .json instead")
        if len(self.parts) == 1 or self.overlays:
            if stream is not None:
                if not hasattr(self, "stream"):
                    options["stream"] = stream      # an analysis that draws one of its streams
                elif self.stream != stream:
                    raise UsageError(f"this {self.analysis} result is of stream {self.stream}, "
                                     f"not {stream}")
            return self._figure(ax, **options)
        picked = [p for p in self.parts
                  if (stream is None or getattr(p, "stream", None) == stream)
                  and (capture is None or p.captures[0] == str(capture))]
        if len(picked) != 1:
            which = ", ".join(f"{p.captures[0]} stream {getattr(p, 'stream', '?')}"
                              for p in self.parts[:6])
            raise UsageError(f"one {self.analysis} figure shows one stream of one capture; "
                             f"this result has {len(self.parts)}",
                             hint=f"pick one with stream= / capture= ({which})")
        return picked[0]._figure(ax, **options)

    def _figure(self, ax=None, **options):
        raise NotImplementedError

    # -- notebooks ---------------------------------------------------------------------------
    def _repr_mimebundle_(self, include=None, exclude=None):
        """In a notebook: the title, the notes, the main table and the figure (as an image
        embedded in the HTML, so no ``%matplotlib`` line is needed)."""
        parts = [f"<p><b>{html.escape(self.analysis)}</b> of "
                 f"{html.escape(', '.join(self.captures[:3]))}"
                 f"{' ...' if len(self.captures) > 3 else ''}</p>"]
        parts += [f"<p><i>{html.escape(n)}</i></p>" for n in self.notes[:10]]
        parts.append(self._html_table())
        others = [n for n in self.table_names[1:]]
        if others:
            parts.append("<p>other tables: " + ", ".join(
                f"<code>.to_pandas({n!r})</code> ({self.rows(n)} rows)" for n in others) + "</p>")
        bundle = {"text/plain": repr(self)}
        png = self._png()
        if png is not None:
            parts.append(f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}"/>')
            bundle["image/png"] = png
        bundle["text/html"] = "\n".join(parts)
        return bundle

    def _html_table(self) -> str:
        df = self.to_pandas()
        more = len(df) - HTML_ROWS
        text = df.head(HTML_ROWS).to_html(index=False, na_rep="")
        return text + (f"<p>... {more} more rows</p>" if more > 0 else "")

    def _png(self) -> bytes | None:
        if not self.draws or self.empty or (len(self.parts) > 1 and not self.overlays):
            return None
        buf = io.BytesIO()
        self.figure().savefig(buf, format="png")
        return buf.getvalue()


def shown(column: str, **options) -> render.Shown:
    """A human table's column under its metric's heading (pcapstats.catalogue), so a metric is
    headed the same in every command; a column that is no metric under its own name."""
    return render.Shown(catalogue.heading(column) or column, column, **options)


def stack(results: Sequence[Result]) -> Result:
    """Results of one analysis on several streams of one capture as one: tables one after the
    other (their ``stream`` column tells them apart), ``.parts`` the streams' results."""
    results = list(results)
    if len(results) == 1:
        return results[0]
    first = results[0]
    combined = object.__new__(type(first))
    combined.__dict__.update(first.__dict__)
    combined._tables = {spec.name: {c.name: np.concatenate([r.table(spec.name)[c.name]
                                                            for r in results])
                                    for c in spec.columns} for spec in first.table_specs}
    combined.notes = list(dict.fromkeys(n for r in results for n in r.notes))
    combined.parts = [p for r in results for p in r.parts]
    return combined


def concat(results: Sequence[Result]) -> Result:
    """Results of one analysis on several captures as one: every table gets a first column
    ``capture``; ``.parts`` keeps the results one by one, ``.notes`` names their capture."""
    results = list(results)
    if not results:
        raise UsageError("no results to put together")
    kinds = {type(r) for r in results}
    if len(kinds) > 1:
        raise UsageError("results of different analyses cannot be put together",
                         hint=", ".join(sorted(k.analysis for k in kinds)))
    first = results[0]
    parts = [p for r in results for p in r.parts]
    combined = object.__new__(type(first))
    combined.__dict__.update(first.__dict__)        # the analysis' own settings (interval, ...)
    combined.table_specs = tuple(s.with_capture() for s in first.table_specs)
    combined._tables = {}
    for spec in first.table_specs:
        columns = {"capture": np.concatenate([np.full(p.rows(spec.name),
                                                      name_text(p.captures[0]), object)
                                              for p in parts])}
        for c in spec.columns:
            columns[c.name] = np.concatenate([p.table(spec.name)[c.name] for p in parts])
        combined._tables[spec.name] = columns
    combined.captures = [p.captures[0] for p in parts]
    combined.__dict__.pop("_names", None)
    for part, name in zip(parts, capture_names(combined.captures)):
        part._names = [name]                   # its figure's title names it as the others
    combined.notes = [Note.of(n).under(p.captures[0]) for p in parts for n in p.notes]
    combined.parts = parts
    return combined


def joined(parts: Sequence[Result], order: Mapping[str, tuple[str, ...]]) -> Result:
    """The results of one analysis on batches of one capture's streams (``batch``'s
    ``by_stream`` reading, pcapstats.ingest.groups) as the one result the whole capture gives:
    each table's rows put together, then sorted stably by ``order[table]``'s columns (the
    order the analysis gives them in); notes in turn, each once."""
    parts = list(parts)
    first = parts[0]
    out = object.__new__(type(first))
    out.__dict__.update(first.__dict__)
    out._tables = {}
    for spec in first.table_specs:
        columns = {c.name: np.concatenate([p.table(spec.name)[c.name] for p in parts])
                   for c in spec.columns}
        at = np.arange(render.length(columns))
        for key in reversed(order.get(spec.name, ())):
            at = at[np.argsort(columns[key][at], kind="stable")]
        out._tables[spec.name] = {name: values[at] for name, values in columns.items()}
    out.notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    out.parts = [out]
    return out


def describe(analysis: str | None = None) -> str:
    """The tables of an analysis (``"packets"``: the packet table; None: the packet table and
    every analysis), column by column: name, type, unit, meaning, Wireshark field (for
    ``pcapstats columns``); ``"metrics"``: the metric catalogue; a metric's name, heading or
    alias: that metric and every table that carries it."""
    tables, metrics = _described(analysis)
    if metrics:
        return _describe_metrics(metrics)
    out = []
    for name, spec in tables:
        out.append(textwrap.fill(f"{name} / {spec.name}: {spec.doc}", render.terminal_width(),
                                 subsequent_indent="    "))
        out.append(_describe_columns(spec.columns))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def described(analysis: str | None = None):
    """:func:`describe` as a pandas DataFrame (``ps.columns``): a row a column (analysis,
    table, column, dtype, unit, meaning, wireshark), or a row a metric (metric, heading, unit,
    definition) for ``"metrics"`` or a metric's name."""
    import pandas as pd  # lazy: the CLI does not load pandas
    tables, metrics = _described(analysis)
    if metrics:
        return pd.DataFrame([row for row in catalogue.describe() if row[0] in metrics],
                            columns=["metric", "heading", "unit", "definition"])
    return pd.DataFrame([(name, spec.name, c.name, c.dtype, c.unit, c.doc, c.wireshark)
                         for name, spec in tables for c in spec.columns],
                        columns=["analysis", "table", "column", "dtype", "unit", "meaning",
                                 "wireshark"])


def _described(analysis: str | None) -> tuple[list, list[str]]:
    """(analysis name, TableSpec) of the tables ``analysis`` names, or the metrics it names."""
    analysis = SAME_TABLES.get(analysis, analysis)
    if analysis == "metrics":
        return [], [m.name for m in catalogue.METRICS]
    if analysis == "packets":
        return [("packets", PACKET_TABLE)], []
    if analysis is None:
        return [("packets", PACKET_TABLE)] + [(k, s) for k in sorted(RESULT_TYPES)
                                              for s in RESULT_TYPES[k].specs], []
    if analysis in RESULT_TYPES:
        return [(analysis, s) for s in RESULT_TYPES[analysis].specs], []
    try:
        return [], [catalogue.lookup(analysis)]
    except UsageError:
        raise UsageError(f"no analysis or metric named {analysis!r}",
                         hint="use one of " + ", ".join(["packets", "metrics",
                                                         *sorted(RESULT_TYPES)])
                         + ", or a metric (`pcapstats columns metrics` lists them)"
                         ) from None


def _describe_metrics(names) -> str:
    """Each metric: its name, heading and unit, then its definition and where it is computed,
    wrapped to the terminal."""
    width = render.terminal_width()
    out = []
    for name, heading, unit, text in catalogue.describe():
        if name in names:
            out.append(f"{name}  ({heading}, {unit})")
            out += textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(out) + "\n"


def _describe_columns(columns: Sequence[Column]) -> str:
    """One entry per column: name, type, unit, meaning [Wireshark field] (layer), the meaning
    wrapped under itself to the terminal's width."""
    width = max(len(c.name) for c in columns)
    indent = 2 + width + 2 + 8 + 2 + 8 + 2
    text_width = max(render.terminal_width() - indent, 30)
    lines = []
    for c in columns:
        extra = (f" [{c.wireshark}]" if c.wireshark else "") + \
            (f" (layer {c.layer})" if c.layer else "") + \
            (f"; one of: {', '.join(c.values)}" if c.values and c.dtype == "str" else "")
        meaning = textwrap.wrap(c.doc + extra, text_width) or [""]
        lines.append(f"  {c.name:<{width}}  {c.dtype:<8}  {c.unit or '-':<8}  {meaning[0]}")
        lines += [" " * indent + more for more in meaning[1:]]
    return "\n".join(lines)


def arrow_type(pa, dtype: str):
    """The Arrow type of a column's declared dtype (text and address codes as strings)."""
    if dtype in ("str", "category"):
        return pa.string()
    return pa.from_numpy_dtype(np.dtype(dtype))


def _arrow_column(pa, column: Column, values: np.ndarray):
    """One column as an Arrow array of its declared type; NaN (a missing number) as null."""
    values = np.asarray(values)
    if column.dtype in ("str", "category"):
        try:
            return pa.array(values, type=pa.string(), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):   # not all text: said as text
            return pa.array([None if v is None or (isinstance(v, float) and v != v) else str(v)
                             for v in values.tolist()], type=pa.string())
    mask = np.isnan(values) if values.dtype.kind == "f" else None
    if mask is not None and not mask.any():
        mask = None
    if mask is not None and column.dtype != "float64":
        values = np.where(mask, 0, values)
    return pa.array(values.astype(column.dtype, copy=False), mask=mask,
                    type=arrow_type(pa, column.dtype))


def require_pyarrow():
    """pyarrow, or one clear error saying how to get it."""
    try:
        import pyarrow  # lazy: an optional dependency (the `parquet` extra)
    except ImportError:
        raise UsageError("writing Parquet needs pyarrow",
                         hint="pip install pyarrow (or pcapstats[parquet])") from None
    return pyarrow


def parquet_metadata(spec: TableSpec, table: str) -> dict[str, str]:
    """What a Parquet file of a table says about itself in its schema metadata:
    ``<column>.doc`` (the column's meaning), ``<column>.unit`` (where it has one) and
    ``pcapstats.table`` (``analysis.table``, or ``packets`` for the packet table)."""
    meta = {f"{c.name}.doc": c.doc for c in spec.columns}
    meta.update({f"{c.name}.unit": c.unit for c in spec.columns if c.unit})
    meta["pcapstats.table"] = table
    return meta


def with_parquet_metadata(tab, spec: TableSpec, table: str):
    """A pyarrow Table with :func:`parquet_metadata` added to its schema's, and each field's
    own ``doc`` and ``unit`` on the field (what ``pyarrow.parquet.read_schema`` shows)."""
    pa = require_pyarrow()
    fields = []
    for f in tab.schema:
        c = spec.column(f.name) if f.name in spec.names else None
        extra = {} if c is None else {"doc": c.doc, **({"unit": c.unit} if c.unit else {})}
        fields.append(f.with_metadata({**(f.metadata or {}),
                                       **{k.encode(): v.encode() for k, v in extra.items()}}))
    meta = {**(tab.schema.metadata or {}),
            **{k.encode(): v.encode() for k, v in parquet_metadata(spec, table).items()}}
    return pa.Table.from_arrays(tab.columns, schema=pa.schema(fields, metadata=meta))


def _checked(spec: TableSpec, table, analysis: str) -> dict[str, np.ndarray]:
    """The table with exactly the spec's columns in its order, as numpy arrays of one length
    (a mismatch is a bug in the analysis, said plainly)."""
    if table is None:
        raise AssertionError(f"{analysis}: table {spec.name!r} missing")
    missing = [n for n in spec.names if n not in table]
    extra = [n for n in table if n not in spec.names]
    if missing or extra:
        raise AssertionError(f"{analysis}.{spec.name}: columns missing {missing}, "
                             f"undeclared {extra}")
    out = {c.name: np.asarray(table[c.name]) for c in spec.columns}
    lengths = {len(v) for v in out.values()}
    if len(lengths) > 1:
        raise AssertionError(f"{analysis}.{spec.name}: columns of different lengths {lengths}")
    return out


def pandas_meta(spec: TableSpec):
    """An empty DataFrame of the table's columns in the dtypes :meth:`Result.to_pandas` gives a
    table with rows (text: the dtype pandas gives an array of str), for a frame declared
    before it is computed (pcapstats.dask)."""
    import pandas as pd  # lazy: see Result.to_pandas
    text = pd.Series(np.array([""], dtype=object)).dtype
    columns = {}
    for c in spec.columns:
        if c.dtype == "str" and not c.values:
            columns[c.name] = pd.Series([], dtype=text)
            continue
        empty = np.zeros(0, np.float64 if c.optional and c.dtype.startswith(("int", "uint"))
                         else object if c.dtype == "str" else c.dtype)
        columns[c.name] = _pandas_column(c, empty)
    return pd.DataFrame(columns)


def _pandas_column(column: Column, values: np.ndarray):
    import pandas as pd  # lazy: see Result.to_pandas
    if column.optional and values.dtype.kind == "f" and column.dtype.startswith(("int", "uint")):
        missing = np.isnan(values)
        return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing)
    if column.values:
        return pd.Categorical(values, categories=list(column.values))
    return values
