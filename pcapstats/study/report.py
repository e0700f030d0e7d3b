"""A study as ONE self-contained HTML file: tables, figures, each capture, every definition.

The file needs nothing else to be read (figures are PNG data URIs, the style sheet is inline,
no script, no network): it can be mailed, archived or opened offline.  It holds

- the comparison (:mod:`pcapstats.study.compare`): the groups (with ``by``) and the captures,
  in the units people read (as the terminal shows them), and the notes;
- the study's figures: each metric against the first ``by`` label with 95 % confidence bars,
  and the I/O graphs side by side;
- one section a capture: its labels, why a metric is empty, its streams (``pcapstats
  throughput``), its protocol hierarchy (``pcapstats hierarchy``), its I/O graph, the cwnd
  estimate of its main TCP stream, and verify's verdicts with every check and its evidence;
- the definition of every column shown, from the tables' own Column docs.

Each capture's analyses and figures are made in the worker that reads it
(:func:`capture_report`), so ``jobs`` processes share the drawing too.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import re
import string
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import render
from ..plots import captures_title
from .._version import __version__
from ..analyses.cwnd import cwnd
from ..analyses.hierarchy import CARRIED, PAYLOAD, ROWS, hierarchy
from ..errors import PcapstatsError, UsageError, shown
from ..naming import text as name_text
from ..reader import as_capture
from ..render import Shown
from ..results import Result
from .compare import Compare, compared, names_of
from .metrics import Measured, measure

KEEP = frozenset({"iograph", "throughput", "verify"})
PRELOAD = ("pandas", "matplotlib.figure", "matplotlib.backends.backend_agg")  # every worker


def capture_report(capture, *, metrics, interval: float, keep=KEEP,
                   names: dict | None = None) -> Measured:
    """One capture's metrics, the results its section shows (its protocol hierarchy among
    them), and its figures (PNG bytes): ``iograph`` and ``cwnd`` (its main TCP stream; none
    without TCP data), titled with the capture's name among the study's (``names``: path ->
    name, Study.names)."""
    cap = as_capture(capture)
    name = [(names or {}).get(cap.path) or cap.path]
    m = measure(cap, metrics=metrics, interval=interval, keep=frozenset(keep) | KEEP)
    try:
        m.results["hierarchy"] = hierarchy(cap)
    except PcapstatsError as e:
        m.why["hierarchy"] = str(e)
    io_graph = m.results.get("iograph")
    if io_graph is not None and not io_graph.empty:
        io_graph.names = name
        m.figures["iograph"] = png(io_graph.figure())
    try:
        window = cwnd(cap)
        window.names = name
        m.figures["cwnd"] = png(window.figure())
    except PcapstatsError as e:
        m.why["cwnd"] = str(e)
    return m


def png(fig) -> bytes:
    """The figure as PNG bytes; zlib's fastest level (the file grows by about a seventh, the
    encoding of some sixty figures takes a second less)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})
    return buf.getvalue()


def report(captures, output, /, *, by=None, metrics=None, labels=(), study=None,
           interval: float = 1.0, title: str | None = None, jobs: int = 1,
           scheduler: str | None = None) -> Compare:
    """``pcapstats report`` in a notebook: the study of ``captures`` (as :func:`pcapstats.
    compare` takes them) written to ``output`` as one self-contained HTML file; returns the
    comparison (shown in the notebook as compare's)."""
    sources = list(captures) if isinstance(captures, (list, tuple)) else [captures]
    result, failures = compared(sources, by=by, metrics=metrics, labels=labels, study=study,
                                interval=interval, jobs=jobs, scheduler=scheduler,
                                function=capture_report, preload=PRELOAD,
                                names=names_of(sources))
    write(result, output, failures=failures, title=title)
    return result


def write(result: Compare, output, *, failures: Sequence[str] = (),
          title: str | None = None) -> Path:
    """The report of a comparison made with :func:`capture_report` as its worker; one
    PcapstatsError line when it cannot be written."""
    output = Path(output)
    text = name_text(document(result, failures=failures, title=title))   # UTF-8 throughout
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise PcapstatsError(f"cannot write the report: {e.strerror}", path=str(output),
                             hint="check the directory exists and is writable") from None
    return output


def document(result: Compare, *, failures: Sequence[str] = (), title: str | None = None) -> str:
    """The whole HTML page."""
    title = title or f"Study: {captures_title(result.names)}"
    defined: dict[str, list] = {}
    body = [_header(result, title, failures),
            _comparison(result, failures, defined),
            _figures(result),
            _captures(result, defined),
            _definitions(defined)]
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


# -- sections ----------------------------------------------------------------------------------

def _header(result: Compare, title: str, failures) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    what = [f"{len(result.captures)} captures"]
    if failures:
        what.append(f"{len(failures)} could not be read")
    if result.by:
        what.append("grouped by " + ", ".join(result.by))
    what.append(f"peak over {result.interval_s:g} s intervals")
    toc = ['<a href="#comparison">Comparison</a>', '<a href="#figures">Figures</a>',
           '<a href="#captures">Captures</a>', '<a href="#definitions">Definitions</a>']
    return (f"<header><h1>{_e(title)}</h1><p class=\"meta\">{_e('; '.join(what))}. Made by "
            f"pcapstats {_e(__version__)} on {when}.</p><nav>{' · '.join(toc)}</nav></header>")


def _comparison(result: Compare, failures, defined) -> str:
    out = ['<section id="comparison"><h2>Comparison</h2>']
    if result.by:
        out.append(f"<h3>Groups (by {_e(', '.join(result.by))})</h3>")
        out.append(_table(result, "groups", defined))
    out.append("<h3>Captures</h3>")
    out.append(_table(result, "captures", defined, links=True))
    notes = list(result.notes) + [f"could not be read: {f}" for f in failures]
    if notes:
        out.append("<ul class=\"notes\">" + "".join(f"<li>{_e(n)}</li>" for n in notes)
                   + "</ul>")
    legend = result.legend.get("groups" if result.by else "captures")
    if legend:
        out.append(f"<p class=\"legend\">{_code(legend)}</p>")
    return "\n".join(out) + "</section>"


def _figures(result: Compare) -> str:
    out = ['<section id="figures"><h2>Figures</h2>']
    for kind, caption in (
            ("metrics", "Each metric against " + (result.by[0] if result.by else "the capture")
             + (": group means with their 95 % confidence intervals (Student's t), each "
                "capture a faint dot." if result.by else ", one point a capture.")),
            ("iographs", "I/O graphs of every packet, with each capture's average over its "
                         "span (dashed) and its peak interval (triangle)."),
            ("models", "Each capture's goodput against its loss rate, beside what the Mathis "
                       "and Padhye models give at the captures' median MSS and RTT.")):
        try:
            data = png(result.figure(kind=kind))
        except UsageError as e:
            out.append(f"<p class=\"na\">{_e(caption)} Not drawn: {_e(str(e))}</p>")
            continue
        out.append(_figure(data, caption))
    return "\n".join(out) + "</section>"


def _captures(result: Compare, defined) -> str:
    out = ['<section id="captures"><h2>Captures</h2>']
    texts = {n: result.label_text(n) for n in result.labels}
    for i, m in enumerate(result.measured):
        labels = ", ".join(f"{n} {texts[n][i]}" for n in result.labels if texts[n][i])
        out.append(f'<section class="capture" id="{_anchor(i)}"><h3>{_e(shown(m.capture))}</h3>')
        if labels:
            out.append(f"<p class=\"labels\">{_e(labels)}</p>")
        if m.why:
            out.append("<details><summary>Empty metrics, and why</summary><ul>"
                       + "".join(f"<li><b>{_e(k)}</b>: {_e(v)}</li>" for k, v in m.why.items())
                       + "</ul></details>")
        streams = m.results.get("throughput")
        if streams is not None and not streams.empty:
            out.append("<h4>Streams</h4>" + _table(streams, "streams", defined))
        protocols = m.results.get("hierarchy")
        if protocols is not None and not protocols.empty:
            carried = CARRIED in set(protocols.table("protocols")["protocol"].tolist())
            legend = f"{ROWS}; {PAYLOAD}" if carried else ROWS    # what payload is, if shown
            out.append("<h4>Protocols</h4>" + _table(protocols, "protocols", defined)
                       + f"<p class=\"legend\">{_e(legend)}.</p>")
        figures = [_figure(m.figures[k], caption) for k, caption in (
            ("iograph", "I/O graph of every packet: the dashed average line is this "
                        "capture's avg in the comparison."),
            ("cwnd", "Congestion window estimate of the main TCP stream (the one with the "
                     "most payload).")) if k in m.figures]
        if figures:
            out.append("<div class=\"figrow\">" + "".join(figures) + "</div>")
        verdicts = m.results.get("verify")
        if verdicts is not None:
            out.append(_verify(verdicts, defined))
        out.append("</section>")
    return "\n".join(out) + "</section>"


def _verify(result: Result, defined) -> str:
    if not result.verdicts:
        return "<h4>Verify</h4><p class=\"na\">Nothing recognised to verify (simpleperf, " \
               "iperf3, ping).</p>"
    if result.verdict == "cannot tell":      # e.g. headers only: a note, not a headline
        why = "; ".join(dict.fromkeys(str(w) for w in result.table("streams")["why"] if w))
        out = [f"<p class=\"na\">Verify: cannot tell{': ' + _e(why) if why else ''}.</p>",
               "<details><summary>Verify's streams and checks</summary>",
               _table(result, "streams", defined)]
    else:
        out = [f"<h4>Verify: <span class=\"{_verdict_class(result.verdict)}\">"
               f"{_e(result.verdict)}</span></h4>", _table(result, "streams", defined)]
    checks = result.table("checks")
    shown = (Shown("check", "check"), Shown("verdict", "verdict"),
             Shown("expected", "expected"), Shown("found", "found"),
             Shown("frames", "frames"))
    for v in result.verdicts:
        rows = np.flatnonzero((checks["stream"] == v.stream) & (checks["app"] == v.app))
        part = {k: values[rows] for k, values in checks.items()}
        out.append(f"<details><summary>{_e(v.proto)} stream {v.stream} ({_e(v.app)}, "
                   f"{_e(v.client)} → {_e(v.server)}): <span class=\""
                   f"{_verdict_class(v.verdict)}\">{_e(v.verdict)}</span></summary>")
        out.append(_html_table(part, result.spec("checks"), shown, defined, "verify.checks"))
        if v.evidence:
            out.append("<ul class=\"evidence\">" + "".join(f"<li>{_e(e)}</li>"
                                                           for e in v.evidence) + "</ul>")
        out.append("</details>")
    if result.verdict == "cannot tell":
        out.append("</details>")
    return "\n".join(out)


def _definitions(defined: dict[str, list]) -> str:
    out = ['<section id="definitions"><h2>Definitions</h2>',
           "<p>Every column shown above, as its table declares it (<code>pcapstats columns "
           "ANALYSIS</code> prints the same).</p>"]
    for where, entries in defined.items():
        out.append(f"<h3>{_e(where)}</h3><dl>")
        for heading, column in entries:
            unit = f" <span class=\"unit\">[{_e(column.unit)}]</span>" if column.unit else ""
            shown = f" — shown as “{_e(heading)}”" if heading != column.name else ""
            out.append(f"<dt><code>{_e(column.name)}</code>{unit}{shown}</dt>"
                       f"<dd>{_e(column.doc)}</dd>")
        out.append("</dl>")
    return "\n".join(out) + "</section>"


# -- tables ------------------------------------------------------------------------------------

def _table(result: Result, name: str, defined, *, links: bool = False) -> str:
    spec = result.spec(name)
    shown = result.view.get(name) or render.every_column(result.table(name))
    table = dict(result.table(name))
    if isinstance(result, Compare):        # a label not set reads "(none)", not a blank
        for label in result.labels:
            text = result.label_columns[label].shown
            if text in table and table[text].dtype == object:
                table[text] = np.array([v or "(none)" for v in table[text]], object)
    if links and "capture" in table:               # rows in the order of result.captures
        table["capture"] = np.array(result.row_names(), object)
    return _html_table(table, spec, shown, defined, f"{result.analysis}.{name}",
                       links=links, headings=result.headings(name))


def _html_table(table: dict, spec, shown, defined, where: str, *, links: bool = False,
                headings: dict | None = None) -> str:
    """A table in the units the terminal shows (render's own formatting: one unit and one
    number of decimals a unit family over the whole table, so the numbers read as in
    `pcapstats`), its columns remembered for the definitions."""
    n = render.length(table)
    heads, cols = [], []
    for c in render.formatted(table, {c.name: c.unit for c in spec.columns if c.unit}, shown,
                              headings=headings or {c.name: c.heading for c in spec.columns
                                                    if c.heading}):
        heading = c.heading.replace("\n", " ")
        long = any(len(x) > 40 and " " in x for x in c.cells)        # free text, not a name
        kind = "num" if c.numeric else "tree" if c.shown.indent else "long" if long else "text"
        heads.append((heading, c.unit, kind))
        cols.append(c.cells)
        for column in _columns_of(c.shown, spec):
            entries = defined.setdefault(where, [])
            if all(column.name != d.name for _, d in entries):
                entries.append((heading, column))
    out = ["<div class=\"scroll\"><table><thead><tr>"]
    for heading, unit, kind in heads:
        out.append(f"<th class=\"{kind}\">{_e(heading)}"
                   + (f"<br><span class=\"unit\">{_e(unit)}</span>" if unit else "") + "</th>")
    out.append("</tr></thead><tbody>")
    for r in range(n):
        out.append("<tr>")
        for k, ((heading, _, kind), cells) in enumerate(zip(heads, cols)):
            cell = _e(cells[r])
            if links and k == 0:
                cell = f"<a href=\"#{_anchor(r)}\">{cell}</a>"
            elif heading in ("verdict", "verify") and cells[r]:
                cell = f"<span class=\"{_verdict_class(cells[r])}\">{cell}</span>"
            out.append(f"<td class=\"{kind}\">{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _columns_of(s: Shown, spec) -> list:
    """The spec's columns a shown column is made of."""
    if s.endpoints:
        names = ["address_a", "port_a", "address_b", "port_b"]
    elif s.join is not None:
        names = [f for _, f, _, _ in string.Formatter().parse(s.join) if f]
    else:
        names = [s.column]
    return [spec.column(n) for n in names if n in spec.names]


def _figure(data: bytes, caption: str) -> str:
    return (f"<figure><img alt=\"{_e(caption)}\" src=\"data:image/png;base64,"
            f"{base64.b64encode(data).decode()}\"><figcaption>{_e(caption)}</figcaption>"
            f"</figure>")


def _anchor(row: int) -> str:
    return f"capture-{row + 1}"


def _verdict_class(verdict: str) -> str:
    return {"pass": "pass", "fail": "fail"}.get(verdict.split(" ")[0], "unsure")


def _code(text: str) -> str:
    """Escaped, with `command` as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(text))


def _e(text) -> str:
    """Text as HTML; a capture's name in it as :func:`pcapstats.naming.text` writes it (a
    byte that is not UTF-8 as ``\\xNN``), wherever a sentence quotes it."""
    return html.escape(name_text(str(text)), quote=True)


CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2125;
margin:0 auto;max-width:1280px;padding:0 24px 48px;background:#fff}
header{border-bottom:2px solid #dde2e6;margin-bottom:8px}
h1{font-size:26px;margin:22px 0 4px}h2{font-size:21px;margin:34px 0 8px;
border-bottom:1px solid #dde2e6;padding-bottom:4px}h3{font-size:17px;margin:22px 0 6px}
h4{font-size:15px;margin:16px 0 4px}
.meta{color:#59636e;margin:0 0 6px}nav{margin:6px 0 12px}nav a{color:#0b5cad}
.scroll{overflow-x:auto;margin:6px 0 10px}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:3px 6px;border-bottom:1px solid #e6e9ec;vertical-align:top}
th{background:#f3f5f7;font-weight:600;border-bottom:2px solid #cfd6dc}
tbody tr:nth-child(even){background:#fafbfc}
.num{text-align:right;white-space:nowrap}.text{text-align:left;white-space:nowrap}
.tree{text-align:left;white-space:pre}
.long{text-align:left;min-width:18em;max-width:40em}
.unit{font-weight:400;color:#59636e;font-size:12px}
td a{color:#0b5cad;text-decoration:none}td a:hover{text-decoration:underline}
.pass{color:#17692e;font-weight:600}.fail{color:#b3261e;font-weight:600}
.unsure{color:#59636e}
figure{margin:12px 0 18px}.figrow{display:flex;flex-wrap:wrap;gap:0 16px}
.figrow figure{flex:1 1 520px;min-width:0;margin:8px 0}
figure img{max-width:100%;height:auto;border:1px solid #e6e9ec}
figcaption{color:#59636e;font-size:13px;margin-top:4px}
section.capture{border-top:1px solid #e6e9ec;margin-top:26px}
.labels{color:#3b4450;margin:2px 0 6px}.na{color:#59636e;font-style:italic}
.notes,.legend{color:#3b4450;font-size:14px}details{margin:6px 0}
summary{cursor:pointer}.evidence{font-size:13px;color:#3b4450}
dt{margin-top:8px}dd{margin:2px 0 0 22px;color:#3b4450}
code{font-size:13px;background:#f3f5f7;padding:0 3px;border-radius:3px}
"""
