"""Captures of one file name in two directories (t1/run.pcap, t2/run.pcap, two different runs)
are told apart wherever they are named: the comparison's rows, the figures' titles and legends,
the report, the export's partitions, the files a command writes a figure each.  The names are
the shortest path suffix that tells each from the others (pcapstats.naming)."""
from __future__ import annotations

import pytest

import pcapstats as ps
from pcapstats.cli import main
from pcapstats.naming import capture_names, file_safe
from tests.helpers.paths import CAPTURES

RUNS = {"t1": "sp-reno-loss1pct", "t2": "sp-reno-loss10pct"}     # different runs, one name


@pytest.mark.parametrize("paths, extensions, names", [
    (["t1/run.pcap", "t2/run.pcap", "x/other.pcap"], True,
     ["t1/run.pcap", "t2/run.pcap", "other.pcap"]),
    (["t1/run.pcap", "t2/run.pcap", "x/other.pcap"], False, ["t1/run", "t2/run", "other"]),
    (["run.pcap", "t1/run.pcap"], True, ["run.pcap", "t1/run.pcap"]),
    (["/a/x/run.pcap", "/b/x/run.pcap", "/c/y/run.pcap"], False, ["a/x/run", "b/x/run", "y/run"]),
    (["/x/run.pcap", "a/x/run.pcap"], True, ["/x/run.pcap", "a/x/run.pcap"]),
    (["d/run.pcap", "d/run.pcapng", "d/run.pcap.gz"], False,
     ["run.pcap", "run.pcapng", "run.pcap.gz"]),
    (["a.pcap", "./a.pcap", "a.pcap"], True, ["a.pcap"] * 3),         # one capture, one name
])
def test_shortest_suffix_that_tells_them_apart(paths, extensions, names):
    assert capture_names(paths, extensions=extensions) == names


def test_file_safe_names_stay_distinct():
    assert file_safe(["t1/run", "t2/run", "t1-run"]) == ["t1-run", "t2-run", "t1-run-2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """t1/run.pcap and t2/run.pcap, each with its lab sidecar."""
    root = tmp_path_factory.mktemp("same")
    for d, name in RUNS.items():
        (root / d).mkdir()
        for ext in (".pcap", ".json"):
            (root / d / f"run{ext}").write_bytes((CAPTURES / f"{name}{ext}").read_bytes())
    return [str(root / d / "run.pcap") for d in RUNS]


def test_compare_rows_and_figure(runs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["compare", *runs]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:4]]
    assert rows == ["t1/run", "t2/run"]
    study = ps.compare(runs, by="loss")
    assert study.row_names() == ["t1/run", "t2/run"]
    assert "t1/run.pcap, t2/run.pcap" in study.figure()._suptitle.get_text()
    panels = [ax.get_title() for ax in ps.compare(runs).figure(kind="iographs").axes]
    assert panels == ["t1/run.pcap", "t2/run.pcap"]
    grouped = study.figure(kind="iographs")           # a panel a loss, the runs in legends
    legends = [t.get_text() for ax in grouped.axes if ax.get_legend()
               for t in ax.get_legend().get_texts()]
    assert "t1/run" in legends and "t2/run" in legends, legends


@pytest.mark.slow
def test_a_figure_each_capture(runs, tmp_path, capsys):
    """cwnd draws a figure a capture: two files, each title naming its own run."""
    out = tmp_path / "cw.png"
    assert main(["cwnd", *runs, "-o", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.glob("cw.*.png")) == [
        "cw.t1-run.stream0.png", "cw.t2-run.stream0.png"]
    both = ps.cwnd(runs)
    titles = [part.figure().axes[0].get_title() for part in both.parts]
    assert "t1/run.pcap" in titles[0] and "t2/run.pcap" in titles[1], titles


def test_overlaid_figures_name_each_line(runs):
    fig = ps.iograph(runs).figure()      # the legend under the figure, or beside a panel
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    texts = [t.get_text() for legend in legends for t in legend.get_texts()]
    assert any(t.startswith("t1/run.pcap") for t in texts), texts
    assert any(t.startswith("t2/run.pcap") for t in texts), texts


@pytest.mark.slow
def test_report_names_each_run(runs, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", *runs, "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count(">t1/run<") >= 1 and text.count(">t2/run<") >= 1
    assert "<h3>" + runs[0] + "</h3>" in text and "<h3>" + runs[1] + "</h3>" in text
