"""One quantity, one name, one value: the metric catalogue held against every command.

Two kinds of check:

- the declarations: every table column named after a catalogue metric carries the metric's
  unit and heading (so it was declared with ``catalogue.column``), every table the catalogue
  says computes a metric has it, and no heading means two things; the identity columns
  (stream, direction, time, frame, endpoints, capture side) are declared once, in schema, and
  every float column has a unit (or says it has none);
- the values: on every shipped capture, each metric that several commands show has the same
  value in each of them for the same capture, stream, direction and window (interval 1 s),
  every command run as a user runs it (a path).  Where one command's row is a part of
  another's (a direction of a stream, the data direction of a transfer), the part is said.
"""
from __future__ import annotations

import ast
import contextlib
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.paths import CAPTURES

import pcapstats as ps
from pcapstats import catalogue, schema
from pcapstats.analyses import iograph as iograph_module
from pcapstats.analyses import load_all
from pcapstats.errors import PcapstatsError
from pcapstats.results import RESULT_TYPES

SHIPPED = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
TCP_SHIPPED = [p for p in SHIPPED if p.name.startswith(("sp-", "tcp_", "iperf3-4flows"))]


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _tables():
    """(analysis.table, spec) of every analysis and the study's comparison."""
    load_all()
    for name, kind in sorted(RESULT_TYPES.items()):
        for spec in kind.specs:
            yield f"{name}.{spec.name}", spec


def _metric_of(column: str):
    try:
        return catalogue.metric(column)
    except PcapstatsError:
        return None


# -- the declarations ---------------------------------------------------------------------------

def test_every_column_named_after_a_metric_is_that_metric():
    wrong = []
    for where, spec in _tables():
        for c in spec.columns:
            m = _metric_of(c.name)
            if m is None or c.dtype == "bool":    # a bool is the packet's flag a count counts
                continue
            dtype = m.dtype if where != "compare.groups" else c.dtype    # a mean of counts
            unit = c.unit or None       # no unit: UNITLESS on a float (a mean of counts), None
            if (unit, c.heading, c.dtype) != (m.unit or None, catalogue.heading(c.name), dtype) \
                    or not c.doc.startswith(m.doc):
                wrong.append(f"{where}.{c.name}: unit {c.unit!r}, heading {c.heading!r}")
    assert not wrong, "declare these with catalogue.column: " + "; ".join(wrong)


def test_every_table_the_catalogue_names_has_the_metric():
    tables = dict(_tables())
    tables["compare"] = tables["compare.captures"]
    missing = []
    for m in catalogue.METRICS:
        for where in m.computed_by:
            names = {re.sub(r"_(a_to_b|b_to_a)$", "", n) for n in tables[where].names}
            if m.name not in names:
                missing.append(f"{m.name} in {where}")
    assert not missing, missing


def test_no_heading_means_two_things():
    """A heading names one metric: no two metrics share one, and no other column of a table
    that shows metrics is headed as a metric it is not."""
    headings = [m.heading for m in catalogue.METRICS]
    assert len(set(headings)) == len(headings)
    clash = []
    for where, spec in _tables():
        for c in spec.columns:
            if c.heading and _metric_of(c.name) is None and c.heading in headings:
                clash.append(f"{where}.{c.name} is headed {c.heading!r}")
    assert not clash, clash


def _every_table():
    """_tables, and the tables iograph gives for each grouping and unit (its key columns)."""
    yield from _tables()
    iograph = RESULT_TYPES["iograph"]
    for by in iograph_module.GROUPINGS:
        for unit in iograph_module.UNITS:
            for spec in iograph.specs_for(by=by, unit=unit):
                yield f"iograph.{spec.name} (by {by}, {unit})", spec


IDENTITY = {c.name: c for c in schema.IDENTITY_COLUMNS}


def test_identity_columns_are_the_shared_ones():
    """A table's ``stream``, ``direction``, ``frame_number``, ``time_s``, endpoint and capture
    side columns are schema's (Column.but may add what the column is in that table, never
    change its type, unit or words)."""
    wrong = []
    for where, spec in _every_table():
        for c in spec.columns:
            shared = IDENTITY.get(c.name)
            if shared and (c.dtype, c.unit, c.values) != (shared.dtype, shared.unit,
                                                          shared.values):
                wrong.append(f"{where}.{c.name}: {c.dtype} {c.unit!r} {c.values}")
    assert not wrong, "use schema's identity columns: " + "; ".join(wrong)


def _declarations(tree: ast.AST):
    """(line, name) of each call that declares a column by a literal name: Column("x", ...),
    schema.Column(name="x", ...), or by a name Column is given (_C = Column)."""
    def is_column(f) -> bool:
        return isinstance(f, ast.Name) and f.id == "Column" or \
            isinstance(f, ast.Attribute) and f.attr == "Column"
    makers = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
              and is_column(node.value) for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (
                is_column(node.func) or isinstance(node.func, ast.Name)
                and node.func.id in makers):
            continue
        name = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "name"), None)
        dtype = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "dtype"), None)
        if isinstance(name, ast.Constant) and isinstance(dtype, ast.Constant) \
                and isinstance(name.value, str) and isinstance(dtype.value, str):
            yield node.lineno, name.value


def test_identity_columns_are_declared_once():
    """No module but schema declares a column of an identity column's name: a table reuses
    schema's (as zeek's conn_id is reused by every log)."""
    package = Path(ps.__file__).parent
    again = [f"{path.relative_to(package)}:{line} {name}"
             for path in sorted(package.rglob("*.py")) if path.name != "schema.py"
             for line, name in _declarations(ast.parse(path.read_text()))
             if name in IDENTITY]
    assert not again, "declared again (use schema's, with .but for a table's note): " + \
        "; ".join(again)


def test_every_float_column_has_a_unit():
    """A number with a unit says it; one without says so on purpose (schema.UNITLESS)."""
    missing = [f"{where}.{c.name}" for where, spec in _every_table() for c in spec.columns
               if c.dtype.startswith("float") and c.unit is None]
    assert not missing, "give these a unit, or schema.UNITLESS: " + "; ".join(missing)


def test_every_metric_is_found_by_its_name_heading_and_aliases():
    for m in catalogue.METRICS:
        for said in (m.name, m.heading, *m.aliases):
            assert catalogue.lookup(said) == m.name, said
    with pytest.raises(ps.UsageError, match="ambiguous metric 'rtt_m'"):
        catalogue.lookup("rtt_m")
    with pytest.raises(ps.UsageError, match="unknown metric 'speed'"):
        catalogue.lookup("speed")


# -- the values ---------------------------------------------------------------------------------

def _rows(table: dict, **key) -> list[int]:
    keep = np.ones(len(next(iter(table.values()))), bool)
    for k, v in key.items():
        keep &= table[k] == v
    return list(np.flatnonzero(keep))


def _one(table: dict, column: str, **key):
    rows = _rows(table, **key)
    assert len(rows) == 1, (column, key, rows)
    return table[column][rows[0]]


def _same(a, b) -> bool:
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_rates_and_counts_of_a_stream_are_one_number(path):
    """throughput's per-direction numbers are iograph's for the same stream and direction
    (bytes, packets, peak_bps at 1 s); iograph of every packet gives compare's rates."""
    with _quiet():
        streams = ps.throughput(path).table()
        by_dir = ps.iograph(path, by="stream+direction").table("summary")
        whole = ps.iograph(path).table("summary")
        row = ps.compare(path, metrics="avg_capture_bps,avg_transfer_bps,peak_bps").table()
    for i in range(len(streams["stream"])):
        proto, stream = streams["proto"][i], streams["stream"][i]
        for d in ("a_to_b", "b_to_a"):
            if not streams[f"packets_{d}"][i]:
                continue
            key = dict(proto=proto, stream=stream, direction=d)
            assert streams[f"bytes_{d}"][i] == _one(by_dir, "bytes", **key)
            assert streams[f"packets_{d}"][i] == _one(by_dir, "packets", **key)
            assert streams[f"peak_bps_{d}"][i] == _one(by_dir, "peak_bps", **key), (stream, d)
    for m in ("avg_capture_bps", "avg_transfer_bps", "peak_bps"):
        assert _same(row[m][0], whole[m][0]), m


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_hierarchy_s_root_is_the_io_graph_of_every_packet(path):
    """hierarchy's frame row (every packet) has iograph's packets, bytes and capture avg; its
    tcp and udp rows are throughput's streams added up (no shipped capture has a TCP/UDP
    header only inside an ICMP error, nor a fragmented TCP or UDP datagram)."""
    with _quiet():
        protocols = ps.hierarchy(path).table()
        whole = ps.iograph(path).table("summary")
        streams = ps.throughput(path).table()
    for m in ("packets", "bytes", "avg_capture_bps"):
        assert _same(_one(protocols, m, path="frame"), whole[m][0]), m
    for proto in ("tcp", "udp"):
        rows = [i for i, p in enumerate(protocols["path"]) if p.endswith(f"/{proto}")]
        mine = streams["proto"] == proto
        assert protocols["packets"][rows].sum() == streams["packets"][mine].sum(), proto
        assert protocols["bytes"][rows].sum() == streams["bytes"][mine].sum(), proto


@pytest.mark.parametrize("path", TCP_SHIPPED, ids=lambda p: p.name)
def test_resent_is_one_count_in_retrans_cwnd_seqgraph_and_compare(path):
    """A stream's re-sent segments (its data direction): retrans = cwnd = compare (a
    single-transfer capture); seqgraph's resent_data is the same less the re-sent SYN and FIN
    (counted here from tcp_analysis' packets, payload 0)."""
    with _quiet():
        counts = ps.retrans(path).table("counts")
        cw = ps.cwnd(path, stream="all")
        seq = ps.seqgraph(path, stream="all").table()
        packets = ps.tcp_analysis(path).table()
        compared = ps.compare(path, metrics="resent").table()
    total = 0
    for part in cw.parts:
        summary = part.table("summary")
        s, data = part.stream, summary["data_direction"][0]
        resent = _one(counts, "resent", stream=s, direction=data)
        assert summary["resent"][0] == resent, s
        total += resent
        rows = _rows(packets, stream=s)
        control = sum(1 for r in rows if packets["resent"][r] and packets["tcp_len"][r] == 0
                      and packets["direction"][r] == data)
        assert _one(seq, "resent_data", stream=s) == resent - control, s
    if len(cw.parts) == 1:
        assert compared["resent"][0] == total


@pytest.mark.parametrize("path", TCP_SHIPPED, ids=lambda p: p.name)
def test_rtt_and_flavour_are_one_number_in_every_command(path):
    """The path RTT's base (min) and median are rtt's summary row of the path series, and
    compare's; flavour's verdict and sRTT are compare's and cwnd's."""
    with _quiet():
        r = ps.rtt(path)
        compared = ps.compare(path, metrics="rtt_min_ms,rtt_median_ms,flavour,"
                                            "flavour_confidence").table()
        cw = ps.cwnd(path, stream=r.stream).table("summary")
        try:
            f = ps.flavour(path, stream=r.stream).table()
        except PcapstatsError:
            f = None
    p, summary = r.table("path"), r.table("summary")
    if p["estimate"][0] != "handshake":
        series, direction = p["estimate"][0].split()
        for m in ("rtt_min_ms", "rtt_median_ms", "rtt_p95_ms"):
            assert p[m][0] == _one(summary, m, series=series, direction=direction), m
    assert _same(compared["rtt_min_ms"][0], p["rtt_min_ms"][0])
    assert _same(compared["rtt_median_ms"][0], p["rtt_median_ms"][0])
    if f is not None and len(f["stream"]):
        assert compared["flavour"][0] == f["flavour"][0]
        assert _same(compared["flavour_confidence"][0], f["flavour_confidence"][0])
        assert f["srtt_ms"][0] == cw["srtt_ms"][0]


@pytest.mark.parametrize("path", [p for p in SHIPPED if "udp" in p.name],
                         ids=lambda p: p.name)
def test_udp_loss_and_jitter_are_one_number(path):
    with _quiet():
        flows = ps.udp(path).table()
        compared = ps.compare(path, metrics="datagram_loss,capture_jitter_ms").table()
    main = int(np.argmax(flows["datagrams"]))
    assert _same(compared["datagram_loss"][0], flows["datagram_loss"][main])
    assert _same(compared["capture_jitter_ms"][0], flows["capture_jitter_ms"][main])


@pytest.mark.parametrize("path", [CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap",
                                  CAPTURES / "iperf3-4flows.pcap"], ids=lambda p: p.name)
def test_jain_and_goodput_are_one_number(path):
    """fairness' index and convergence time are compare's; its flows' goodput adds up to its
    total, and the run's convergence time is its slowest flow's."""
    with _quiet():
        fair = ps.fairness(path)
        compared = ps.compare(path, metrics="jain_index,convergence_s").table()
    summary, flows = fair.table("summary"), fair.table("flows")
    assert compared["jain_index"][0] == summary["jain_index"][0]
    both = [compared["convergence_s"][0], summary["convergence_s"][0],
            flows["convergence_s"].max()]
    assert all(math.isnan(v) for v in both) or len(set(both)) == 1, both
    assert math.isclose(flows["goodput_bps"].sum(), summary["total_goodput_bps"][0],
                        rel_tol=1e-12)


@pytest.mark.slow
def test_the_report_shows_compares_numbers(tmp_path):
    """The report's comparison table is compare's, cell for cell as printed."""
    from pcapstats.cli import main
    files = [str(CAPTURES / n) for n in ("sp-reno-loss1pct.pcap", "sp-reno-loss10pct.pcap")]
    html = tmp_path / "study.html"
    with _quiet():
        assert main(["report", *files, "-o", str(html)]) == 0
        table = ps.compare(files).to_text("captures", width=200)
    text = html.read_text()
    cells = [cell for line in table.splitlines()[2:4] for cell in line.split()[1:]]
    numbers = [c for c in cells if any(ch.isdigit() for ch in c)]
    assert numbers and all(n in text for n in numbers), [n for n in numbers if n not in text]

