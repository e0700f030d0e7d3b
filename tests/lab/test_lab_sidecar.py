"""The lab's files without a lab: sidecar names and validation, matrix specs, the CLI's refusals.

Nothing here needs root: the sidecars are written by hand (their answers known by
construction), the matrix runs with a stand-in for one run, and the CLI's errors come before
any lab is built.
"""

from __future__ import annotations

import json

import pytest

from pcapstats.cli import main
from pcapstats import sidecar
from pcapstats.lab import matrix
from pcapstats.lab.run import Scenario
from pcapstats.lab.sidecar import write_sidecar
from pcapstats.sidecar import SidecarError, load_sidecar
from tests.helpers.paths import CAPTURES


def _doc(**over) -> dict:
    doc = {"schema": sidecar.SCHEMA, "status": "complete", "error": None, "scenario": {},
           "captures": [], "flows": []}
    doc.update(over)
    return doc


# -- names --------------------------------------------------------------------------------------

@pytest.mark.parametrize("output, side, fmt, capture, json_name", [
    ("runs/x.pcap", None, "pcap", "runs/x.pcap", "runs/x.json"),
    ("runs/x.pcapng", None, "pcapng", "runs/x.pcapng", "runs/x.json"),
    ("runs/x.pcap", "sender", "pcap", "runs/x.sender.pcap", "runs/x.json"),
    ("runs/x.pcap", "receiver", "pcapng", "runs/x.receiver.pcapng", "runs/x.json"),
    ("runs/a.b", None, "pcap", "runs/a.b.pcap", "runs/a.b.json"),
])
def test_capture_and_sidecar_names(output, side, fmt, capture, json_name):
    assert str(sidecar.capture_path(output, side, fmt)) == capture
    assert str(sidecar.sidecar_path(output)) == json_name


def test_sidecar_for_finds_the_run_of_a_two_sided_capture(tmp_path):
    (tmp_path / "x.json").write_text("{}")
    assert sidecar.sidecar_for(tmp_path / "x.sender.pcap") == tmp_path / "x.json"
    assert sidecar.sidecar_for(tmp_path / "x.receiver.pcapng") == tmp_path / "x.json"
    assert sidecar.sidecar_for(tmp_path / "x.pcap") == tmp_path / "x.json"


# -- validation ---------------------------------------------------------------------------------

def test_a_sidecar_round_trips(tmp_path):
    path = tmp_path / "x.json"
    write_sidecar(path, _doc(flows=[{"sport": 1}]))
    assert load_sidecar(path)["flows"] == [{"sport": 1}]
    assert list(tmp_path.iterdir()) == [path]  # the partial file was renamed, not left


@pytest.mark.parametrize("content, words", [
    (json.dumps(_doc(schema="pcapstats-lab/2")), "pcapstats-lab/2 is not the pcapstats-lab/1"),
    (json.dumps(_doc(schema="something/else")), "unknown sidecar schema"),
    (json.dumps({"status": "complete"}), "no \"schema\" field"),
    (json.dumps([1, 2]), "no \"schema\" field"),
    ("{not json", "not JSON"),
    (json.dumps(_doc(status="half")), "unknown run status"),
    (json.dumps({"schema": sidecar.SCHEMA}), "sidecar lacks status"),
])
def test_a_wrong_sidecar_is_one_clear_line(tmp_path, content, words):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(SidecarError) as info:
        load_sidecar(path)
    text = str(info.value)
    assert words in text and str(path) in text and "\n" not in text


def test_a_missing_sidecar_says_where_it_was_looked_for(tmp_path):
    with pytest.raises(SidecarError, match="no sidecar here"):
        load_sidecar(tmp_path / "nope.json")


def test_complete_means_every_capture_is_there_at_its_size(tmp_path):
    path = tmp_path / "x.json"
    (tmp_path / "x.pcap").write_bytes(b"1234")
    write_sidecar(path, _doc(captures=[{"file": "x.pcap", "size_bytes": 4}]))
    assert sidecar.is_complete(path)
    (tmp_path / "x.pcap").write_bytes(b"12")  # cut short
    assert not sidecar.is_complete(path)
    (tmp_path / "x.pcap").unlink()
    assert not sidecar.is_complete(path)
    write_sidecar(path, _doc(status="interrupted"))
    assert not sidecar.is_complete(path)


def test_every_documented_field_is_unique():
    names = [name for name, _ in sidecar.FIELDS]
    assert len(names) == len(set(names))
    assert "| `schema` |" in sidecar.describe_markdown()


# -- matrix specs -------------------------------------------------------------------------------

SPEC = """
trials = 2
[base]
tool = "ping"
ping_count = 2
delay = "5ms"
[axes]
loss = ["0%", "10%"]
cc = ["reno", "cubic", "bbr"]
"""


def test_a_spec_makes_the_cartesian_product_named_by_its_axes(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    cells = matrix.load_spec(spec)
    assert len(cells) == 2 * 3 * 2
    assert cells[0].name == "loss-0pct_cc-reno_trial-1"
    assert cells[-1].name == "loss-10pct_cc-bbr_trial-2"
    assert cells[-1].scenario.loss == "10%" and cells[-1].scenario.trial == 2
    assert all(c.scenario.delay == "5ms" for c in cells)


def test_groups_lay_their_base_over_the_top_one_and_name_by_template(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text("""
[base]
snaplen = 128
[[group]]
name = "sp-{cc}"
base = {tool = "simpleperf", duration_s = 2, pairs = 2}
axes = {cc = ["reno", ["reno", "cubic"]]}
[[group]]
base = {tool = "iperf3-udp", udp_rate = "5mbit", snaplen = 200}
axes = {rate = ["10mbit"]}
""")
    cells = matrix.load_spec(spec)
    assert [c.name for c in cells] == ["sp-reno", "sp-reno+cubic", "rate-10mbit"]
    assert cells[2].scenario.snaplen == 200 and cells[0].scenario.snaplen == 128


@pytest.mark.parametrize("text, words", [
    ("[base]\ntool = 'nmap'\n", "unknown tool"),
    ("[base]\nbogus = 1\n", "unknown scenario field bogus"),
    ("[axes]\nloss = '10%'\n", "axes.loss: expected a non-empty list"),
    ("[base]\npairs = 3\nparallel = [2, 1]\n", "base.parallel (-P): 2 counts for 3 pairs"),
    ("[base]\nparallel = 'two'\n", "base.parallel: expected a whole number"),
    ("[base]\nrate = 'fast'\n", "base.rate: bad rate 'fast'"),
    ("[base]\ntool = 'iperf3'\n\nduration_s = 'ten'\n", "spec.toml, line 4)"),
    ("trials = 'two'\n[axes]\nloss = ['1%']\n", "'trials' (line 1) must be a whole number"),
    ("name = 'same'\n[axes]\nloss = ['1%', '2%']\n", "same files"),
    ("[base\n", "not valid TOML"),
    ("[axes]\nloss = ['300%']\n", "bad loss"),
    ("[base]\nduration_s = inf\n", "duration_s inf: a duration is a number of seconds"),
    ("[basis]\n", "unknown spec key basis"),
])
def test_a_bad_spec_is_refused_before_anything_runs(tmp_path, text, words):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    with pytest.raises(Exception) as info:
        matrix.load_spec(spec)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_matrix_skips_complete_cells_and_redoes_the_rest(tmp_path, monkeypatch):
    """A stand-in run writes what a real one would; the matrix decides which cells to run."""
    spec = tmp_path / "spec.toml"
    spec.write_text("[base]\ntool = 'ping'\n[axes]\nloss = ['0%', '1%', '2%']\n")
    ran = []

    def fake_run(scenario, output, progress=None, command=None):
        ran.append(output.name)
        if scenario.loss == "2%":
            raise sidecar.SidecarError("this cell fails")
        output.write_bytes(b"pcap")
        doc = _doc(captures=[{"file": output.name, "size_bytes": 4}], measured={})
        write_sidecar(sidecar.sidecar_path(output), doc)
        return doc

    monkeypatch.setattr(matrix, "run", fake_run)
    out = tmp_path / "runs"
    first = matrix.run_matrix(spec, out)
    assert [r.status for r in first] == ["done", "done", "failed"]
    assert ran == ["loss-0pct.pcap", "loss-1pct.pcap", "loss-2pct.pcap"]
    # a half-written cell (its capture cut short) and the failed one are redone; the rest not
    (out / "loss-1pct.pcap").write_bytes(b"pc")
    ran.clear()
    second = matrix.run_matrix(spec, out)
    assert [r.status for r in second] == ["skipped", "done", "failed"]
    assert ran == ["loss-1pct.pcap", "loss-2pct.pcap"]
    table = matrix.summary_table(second)
    assert list(table["status"]) == ["skipped", "done", "failed"]


# -- the CLI refuses before building anything ---------------------------------------------------

def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("pcapstats: error: ")
    return err[0]


def test_not_root_is_one_line_saying_what_to_do(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    code = main(["lab", "run", "-t", "1", "-o", str(tmp_path / "x.pcap")])
    assert code == 2
    assert "needs root" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_tool_is_one_line_naming_the_package(monkeypatch, capsys, tmp_path):
    import shutil
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda t, *a, **k: None if t == "iperf3" else real(t))
    monkeypatch.setattr("os.geteuid", lambda: 0)
    code = main(["lab", "run", "--tool", "iperf3", "-t", "1", "-o", str(tmp_path / "x.pcap")])
    assert code == 2
    assert "apt-get install iperf3" in _one_error_line(capsys)


@pytest.mark.parametrize("args, words", [
    (["--loss", "200%"], "bad loss"),
    (["--rate", "30"], "bad rate"),
    (["--cc", "vegas"], "congestion control vegas is not available"),
    (["-P", "9"], "parallel (-P) must be 1..5"),
    (["--tool", "iperf3-udp"], "needs a rate"),
    (["--cc", "reno,cubic"], "2 congestion controls for 1 pairs"),
    (["-n", "10XB"], "bad transfer size"),
    (["--capture", "middle"], "--capture"),
    (["--rate", "10mbit", "--one-way"], "one way is serialisation's"),
    (["--tool", "ping", "--ping-sizes", "65535"], "ping size 65535: out of range, 0 to 65,507"),
    (["--tool", "ping", "--rate", "10mbit", "--queue", "20kb", "--ping-sizes", "18,65507"],
     "cannot hold a ping of 65507 bytes"),
])
def test_bad_scenarios_are_one_line(capsys, tmp_path, args, words):
    code = main(["lab", "run", *args, "-o", str(tmp_path / "x.pcap")])
    assert code == 2
    assert words in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_fields_lists_every_documented_field(capsys):
    assert main(["lab", "fields"]) == 0
    out = capsys.readouterr().out
    for name, _ in sidecar.FIELDS:
        assert name in out


def test_scenario_defaults_validate():
    Scenario().validate()


@pytest.mark.parametrize("bound", [{"bytes": "1MB"}, {"duration_s": 2.5}])
def test_run_command_gives_back_the_same_scenario(monkeypatch, tmp_path, bound):
    """The command line make_captures.py prints for a scenario runs exactly that scenario
    (a size bound leaves -t out: -n decides)."""
    from pcapstats.cli.lab import run_command
    seen = []
    from importlib import import_module

    def fake_run(scenario, out, **kwargs):
        seen.append(scenario)
        raise KeyboardInterrupt  # stop there: nothing to build

    # the module (pcapstats.lab.run, the attribute, is the function it exports)
    monkeypatch.setattr(import_module("pcapstats.lab.run"), "run", fake_run)
    wanted = Scenario(tool="iperf3-udp", loss="1%", delay="10ms", jitter="1ms", rate="10mbit",
                      queue="100p", serialize=True, one_way=True, cc=["reno", "bbr"], **bound,
                      parallel=2, pairs=2,
                      udp_rate="5mbit", ping_count=3,
                      ping_interval_s=0.05, ping_sizes=[56, 1000], ping_during=True,
                      sndbuf=100000, rcvbuf=200000, window_scaling=False, capture="both",
                      snaplen=128, format="pcapng", tcp_info_interval_s=0.02, seed=7)
    argv = run_command(wanted, tmp_path / "x.pcapng")
    assert argv[:3] == ["pcapstats", "lab", "run"] and ("-t" in argv) == ("bytes" not in bound)
    assert main(argv[1:]) == 130
    assert seen == [wanted]


def test_captures_readme_carries_the_field_table():
    readme = CAPTURES / "README.md"
    assert sidecar.describe_markdown() in readme.read_text()


def test_per_pair_parallel_and_trials_written_under_axes_load(tmp_path):
    """issue 28: `parallel = [2,1,1]` is one count a pair; `trials = 2` after [axes] (as the
    spec's example once put it) is the trials, not an axis."""
    spec = tmp_path / "spec.toml"
    spec.write_text("[base]\ntool = 'iperf3'\npairs = 3\nparallel = [2, 1, 1]\n"
                    "[axes]\ncc = ['reno']\ntrials = 2\n")
    cells = matrix.load_spec(spec)
    assert [c.params for c in cells] == [{"cc": "reno", "trial": 1}, {"cc": "reno", "trial": 2}]
    assert [cells[0].scenario.parallel_of_pair(k) for k in range(3)] == [2, 1, 1]
