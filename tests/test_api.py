"""The public API: ``__all__`` is exactly what pcapstats/__init__.py imports, every analysis is
exported with its result class, and every analysis takes a Capture, a path or a list of them
and returns its Result, which shows itself in a notebook."""
import ast
import importlib
import inspect

import numpy as np
import pytest

import pcapstats as ps
from pcapstats.analyses import PUBLIC, load_all
from pcapstats.results import RESULT_TYPES
from tests.helpers.paths import CAPTURES, DATA, ROOT

CAPTURE = str(CAPTURES / "sp-reno-loss1pct.pcap")
OWN_CAPTURE = {"ping": str(CAPTURES / "ping-sweep.pcap"),   # analyses of other traffic
               "udp": str(CAPTURES / "iperf3-udp-15mbit-via-10mbit.receiver.pcap"),
               "fairness": str(CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap"),
               "delay": str(CAPTURES / "ping-sweep-sender.pcap"),
               "wifi": str(DATA / "wpa2linkuppassphraseiswireshark.pcap")}


load_all()      # the analyses are imported on first use: register every result class now


def _imported_names() -> list[str]:
    """The names pcapstats/__init__.py binds by importing them (read from its source), and the
    ones it exports on first use: the analyses (pcapstats.analyses.PUBLIC) and the reading API
    (its ``_CORE``, each name checked to be its module's own)."""
    tree = ast.parse((ROOT / "pcapstats" / "__init__.py").read_text())
    eager = [alias.asname or alias.name for node in tree.body
             if isinstance(node, ast.ImportFrom) for alias in node.names]
    for name, module in ps._CORE.items():
        assert getattr(importlib.import_module(f"pcapstats.{module}"), name) is getattr(ps, name)
    return [n for n in eager if n.startswith("__") or not n.startswith("_")] + list(PUBLIC) + \
        list(ps._CORE)


def test_all_is_exactly_what_the_package_imports():
    assert sorted(ps.__all__) == sorted(_imported_names())
    assert len(set(ps.__all__)) == len(ps.__all__)
    for name in ps.__all__:
        assert getattr(ps, name) is not None


def test_dir_lists_only_names_that_can_be_got():
    """Tab completion offers only the API: every name dir() lists can be got, in a fresh
    interpreter and after the submodules a command imports (study, tools, pool) are loaded."""
    import subprocess
    import sys
    code = ("import pcapstats as ps\n"
            "def bad(): return [n for n in dir(ps) if not hasattr(ps, n)]\n"
            "first = bad()\n"
            "import pcapstats.study.compare, pcapstats.tools.simpleperf, pcapstats.pool\n"
            "print(first, bad(), sorted(set(dir(ps)) - set(ps.__all__)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    first, after, extra = run.stdout.strip().split("] [")
    assert first == "[" and after == "", run.stdout + run.stderr
    assert all(n.startswith("__") for n in eval("[" + extra)), extra
    assert {"wscale", "compare", "NothingToReport"} <= set(dir(ps))


def test_wscale_is_cwnd_drawn_as_window_scaling():
    """ps.wscale, as `pcapstats wscale`: cwnd's result and tables, its figure Wireshark's
    Window Scaling graph (the estimate on request), for a path, a Capture and a list."""
    by_path, by_capture = ps.wscale(CAPTURE), ps.wscale(ps.read(CAPTURE))
    window = ps.cwnd(CAPTURE)
    for result in (by_path, by_capture):
        assert type(result) is ps.Cwnd and result.table_names == window.table_names
        assert np.array_equal(result.table("flight")["bytes_in_flight"],
                              window.table("flight")["bytes_in_flight"])
        assert result.figure().axes[0].get_title().startswith("Window scaling")
    assert by_path.figure(graph="cwnd").axes[0].get_title().startswith("Congestion window")
    both = ps.wscale([CAPTURE, OWN_CAPTURE["fairness"]])
    assert all(p.figure().axes[0].get_title().startswith("Window scaling") for p in both.parts)


def test_columns_is_the_command_as_a_dataframe():
    """ps.columns: `pcapstats columns` as a table, the declared columns one a row."""
    window = ps.columns("wscale")
    assert list(window["column"]) == [c.name for s in ps.Cwnd.specs for c in s.columns]
    assert set(window["table"]) == {s.name for s in ps.Cwnd.specs}
    avg = ps.columns("avg")
    assert list(avg["metric"]) == ["avg_capture_bps"] and avg["unit"][0] == "bit/s"
    with pytest.raises(ps.UsageError, match="no analysis or metric named"):
        ps.columns("nonsense")


def test_every_analysis_is_exported_with_its_result_class():
    assert RESULT_TYPES, "no analysis registered its result class"
    for name, result_type in RESULT_TYPES.items():
        assert name in ps.__all__, f"analysis {name} is not exported"
        assert result_type.__name__ in ps.__all__, f"{result_type.__name__} is not exported"
        assert result_type.specs, f"{name} declares no tables"
        options = inspect.signature(getattr(ps, name)).parameters
        assert all(p.kind is p.KEYWORD_ONLY for p in list(options.values())[1:]), \
            f"{name}: options after the capture must be keyword-only"


@pytest.mark.parametrize("name", sorted(RESULT_TYPES))
def test_each_analysis_takes_a_path_a_capture_or_a_list(name):
    analysis, result_type = getattr(ps, name), RESULT_TYPES[name]
    capture = OWN_CAPTURE.get(name, CAPTURE)
    by_path = analysis(capture)
    by_capture = analysis(ps.read(capture))
    assert type(by_path) is type(by_capture) is result_type
    for table in by_path.table_names:
        a, b = by_path.table(table), by_capture.table(table)
        assert list(a) == list(b) == by_path.spec(table).names
        for column in a:
            assert np.array_equal(a[column], b[column], equal_nan=a[column].dtype.kind == "f")
    both = analysis([capture, capture])
    assert both.captures == [capture, capture] and len(both.parts) == 2
    assert both.rows() == 2 * by_path.rows()
    assert list(both.table()) == ["capture", *by_path.spec().names]


@pytest.mark.parametrize("name", sorted(RESULT_TYPES))
def test_each_result_shows_its_table_and_figure_in_a_notebook(name):
    result = getattr(ps, name)(OWN_CAPTURE.get(name, CAPTURE))
    bundle = result._repr_mimebundle_()
    assert "<table" in bundle["text/html"]
    assert ("image/png" in bundle) == result.draws
    if result.draws:
        assert bundle["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
        assert 'src="data:image/png;base64,' in bundle["text/html"]
    assert len(result.to_pandas()) == result.rows()


def test_import_loads_no_numpy():
    """`import pcapstats` is the API's names, not its machinery: the lab's tools (python3 -m
    pcapstats.tools.X imports the package first) and `pcapstats --help` never load numpy."""
    import subprocess
    import sys
    code = ("import sys, pcapstats, pcapstats.tools.simpleperf; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip() == "[]", run.stdout + run.stderr


def test_import_loads_no_analysis_and_a_command_only_its_own():
    """Start-up: `import pcapstats` and `pcapstats throughput` load no other analysis."""
    import subprocess
    import sys
    code = ("import sys, pcapstats; from pcapstats.cli import main; "
            "before = sorted(m for m in sys.modules if m.startswith('pcapstats.analyses.')); "
            "main(['throughput', sys.argv[1], '--format', 'csv']); "
            "after = sorted(m for m in sys.modules if m.startswith('pcapstats.analyses.')); "
            "print(before, after, file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code, CAPTURE], capture_output=True, text=True)
    before, after = run.stderr.strip().splitlines()[-1].split("] [")
    assert before == "[" and after == "'pcapstats.analyses.throughput']", run.stderr


def test_a_path_that_is_not_a_capture_or_path_is_one_clear_error():
    with pytest.raises(ps.UsageError, match="takes a Capture or a capture file's path"):
        ps.throughput(42)


def test_error_family():
    for cls in (ps.CaptureOpenError, ps.CaptureFormatError, ps.CorruptCaptureError,
                ps.EngineError, ps.UsageError, ps.NothingToReport):
        assert issubclass(cls, ps.PcapstatsError)
    assert issubclass(ps.CorruptCaptureError, ps.CaptureFormatError)
    e = ps.CorruptCaptureError("bad block", path="x.pcapng", offset=128, packet=3, hint="fix it")
    assert str(e) == "bad block (x.pcapng, file offset 128, packet 3). Fix it"
    assert (e.offset, e.packet) == (128, 3)
