"""Labels of a study's captures: from the sidecar, a study file, patterns on the path; and the
order they sort in (numbers as numbers, units understood, words as the study says)."""
import json
import shutil

import numpy as np
import pytest
from tests.helpers.paths import CAPTURES

from pcapstats.errors import UsageError
from pcapstats.study.labels import Labelling, name_key, sort_key, word_places


def test_sidecar_gives_the_scenario():
    labels = Labelling.of().labels(CAPTURES / "sp-reno-loss10pct.pcap")
    assert labels == {"cc": "reno", "loss": "10%", "delay": "10ms", "rate": "10mbit",
                      "pairs": "1", "trial": "1", "tool": "simpleperf"}
    several = Labelling.of().labels(CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap")
    assert several["cc"] == "reno+cubic+bbr" and "loss" not in several   # no loss was set
    both = Labelling.of().labels(CAPTURES / "iperf3-udp-5mbit-via-10mbit.receiver.pcap")
    assert both["tool"] == "iperf3-udp"                 # x.receiver.pcap shares x.json


def test_no_sidecar_no_labels_and_a_broken_one_is_a_warning(tmp_path):
    plain = tmp_path / "a.pcap"
    shutil.copy(CAPTURES / "sp-reno-loss1pct.pcap", plain)
    assert Labelling.of().labels(plain) == {}
    (tmp_path / "a.json").write_text("{not json")
    with pytest.warns(UserWarning, match="not JSON"):
        assert Labelling.of().labels(plain) == {}


def test_patterns_name_labels_from_the_path():
    lab = Labelling.of(patterns=[r"loss(?P<loss>\d+)pct", r"sp-(?P<cc>[a-z]+)-"])
    got = lab.labels("runs/sp-cubic-loss30pct.pcap")
    assert got["loss"] == "30" and got["cc"] == "cubic"
    assert Labelling.of(patterns=[r"(?P<where>close|far)"]).labels("x/medium-1.pcap") == {}


@pytest.mark.parametrize("pattern, message", [("loss(\\d+", "bad --label pattern"),
                                              ("loss\\d+", "names no label"),
                                              ("(?P<1x>a)", "bad --label pattern")])
def test_bad_patterns_are_one_clear_error(pattern, message):
    with pytest.raises(UsageError, match=message):
        Labelling.of(patterns=[pattern])


def test_csv_study_file_with_globs_beats_the_sidecar(tmp_path):
    study = tmp_path / "study.csv"
    study.write_text("file,distance,loss\nsp-reno-*.pcap,far,\nsp-reno-loss1pct.pcap,close,"
                     "one percent\n")
    lab = Labelling.of(study=study)
    one = lab.labels(CAPTURES / "sp-reno-loss1pct.pcap")
    assert one["distance"] == "close" and one["loss"] == "one percent" and one["cc"] == "reno"
    assert lab.labels(CAPTURES / "sp-reno-loss30pct.pcap")["distance"] == "far"
    assert lab.labels(CAPTURES / "sp-reno-loss30pct.pcap")["loss"] == "30%"   # empty: kept
    assert lab.unmatched([CAPTURES / "sp-cubic-loss1pct.pcap"]) == ["sp-reno-*.pcap",
                                                                    "sp-reno-loss1pct.pcap"]
    assert lab.word_order()[:2] == ["far", "close"]


def test_toml_study_file_both_forms_and_paths_from_its_directory(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text(f'[[capture]]\nfile = "{CAPTURES}/sp-bbr-*.pcap"\ndistance = "medium"\n'
                     f'trial = 2\n\n["udp_ping.pcapng"]\ndistance = "close"\n')
    lab = Labelling.of(study=study)
    assert lab.labels(CAPTURES / "sp-bbr-loss1pct.pcap")["distance"] == "medium"
    assert lab.labels(CAPTURES / "sp-bbr-loss1pct.pcap")["trial"] == "2"
    assert lab.labels(CAPTURES / "udp_ping.pcapng")["distance"] == "close"


@pytest.mark.parametrize("name, text, message", [
    ("s.csv", "distance,trial\nfar,1\n", "first line must name its columns"),
    ("s.csv", "file,distance\nx.pcap,far,extra\n", "more fields than the header"),
    ("s.csv", "file,dist ance\nx.pcap,far\n", "cannot be a label name"),
    ("s.toml", "[[capture]]\ndistance = 'far'\n", "has no file"),
    ("s.toml", "[[capture]\n", "not TOML"),
    ("s.txt", "file,a\n", "a study file is .csv or .toml")])
def test_bad_study_files_are_one_clear_error(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=message):
        Labelling.of(study=tmp_path / name)


def test_missing_study_file(tmp_path):
    with pytest.raises(UsageError, match="no such study file"):
        Labelling.of(study=tmp_path / "none.csv")


def _sorted(values, words=()):
    places = word_places(words)
    return sorted(values, key=lambda v: sort_key(v, places))


def test_numbers_sort_as_numbers_with_their_units():
    assert _sorted(["0", "10", "1", "30"]) == ["0", "1", "10", "30"]
    assert _sorted(["10%", "1%", "30%", "0%", ""]) == ["0%", "1%", "10%", "30%", ""]
    assert _sorted(["20ms", "500us", "1s", "2.5ms"]) == ["500us", "2.5ms", "20ms", "1s"]
    assert _sorted(["100mbit", "20mbit", "1gbit"]) == ["20mbit", "100mbit", "1gbit"]


def test_words_sort_as_the_study_gives_them_else_alphabetically():
    assert _sorted(["far", "close", "medium"], ["close", "medium", "far"]) == \
        ["close", "medium", "far"]
    assert _sorted(["reno", "bbr", "cubic", "2", ""]) == ["2", "bbr", "cubic", "reno", ""]


def test_file_names_sort_with_their_numbers_as_numbers():
    names = ["sp-loss10pct.pcap", "sp-loss1pct.pcap", "sp-loss0pct.pcap", "sp-loss30pct.pcap"]
    assert sorted(names, key=name_key) == ["sp-loss0pct.pcap", "sp-loss1pct.pcap",
                                           "sp-loss10pct.pcap", "sp-loss30pct.pcap"]


def test_sidecar_without_scenario_gives_only_what_its_flows_say(tmp_path):
    cap = tmp_path / "live.pcap"
    shutil.copy(CAPTURES / "sp-reno-loss1pct.pcap", cap)
    doc = json.loads((CAPTURES / "sp-reno-loss1pct.json").read_text())
    doc["scenario"] = None
    (tmp_path / "live.json").write_text(json.dumps(doc))
    assert Labelling.of().labels(cap) == {"cc": "reno"}     # the socket's own
    doc["flows"] = []                                        # `pcapstats capture`'s sidecar
    (tmp_path / "live.json").write_text(json.dumps(doc))
    assert Labelling.of().labels(cap) == {}


def test_a_run_on_the_hosts_default_cc_is_labelled_by_what_its_flows_used(tmp_path):
    """scenario.cc is null when the lab left the cc to the host; the flows read theirs back
    from the socket, so the label is theirs (bbr here), each cc once in flow order."""
    doc = json.loads((CAPTURES / "sp-2pairs-reno+cubic.json").read_text())
    doc["scenario"]["cc"] = None
    for flow, cc in zip(doc["flows"], ("bbr", "bbr")):
        flow["cc"] = cc
    (tmp_path / "run.json").write_text(json.dumps(doc))
    (tmp_path / "run.pcap").write_bytes(b"")
    assert Labelling.of().labels(tmp_path / "run.pcap")["cc"] == "bbr"
    doc["flows"][1]["cc"] = "cubic"
    (tmp_path / "run.json").write_text(json.dumps(doc))
    assert Labelling.of().labels(tmp_path / "run.pcap")["cc"] == "bbr+cubic"


# -- typed labels: numbers a notebook can plot and sort, the text kept beside -----------------

@pytest.mark.parametrize("text, read", [
    ("10%", (0.1, "fraction")), ("0%", (0.0, "fraction")), ("20ms", (0.02, "s")),
    ("500us", (0.0005, "s")), ("1.5s", (1.5, "s")), ("30mbit", (30e6, "bit/s")),
    ("1mbps", (8e6, "bit/s")),                # tc's mbps: megaBYTES per second
    ("3", (3.0, "")), ("-60", (-60.0, "")), ("far", None), ("2ms,5ms,10ms", None),
    ("10m", None), ("", None)])
def test_units_read_a_label_as_people_write_it(text, read):
    from pcapstats.units import quantity
    got = quantity(text)
    assert got == read if read is None else (got[1] == read[1]
                                             and got[0] == pytest.approx(read[0]))


def test_sidecar_quantities_are_typed_with_their_text_beside():
    from pcapstats.study.labels import label_columns
    loss = label_columns("loss", ["10%", "0.3", "", "ten"])
    assert (loss.value, loss.unit, loss.text) == ("loss", "fraction", "loss_label")
    cols = loss.columns(["10%", "0.3", "", "ten"])
    assert np.array_equal(cols["loss"], [0.1, 0.3, np.nan, np.nan], equal_nan=True)
    assert list(cols["loss_label"]) == ["10%", "0.3", "", "ten"] and loss.unread(
        ["10%", "ten", "ten"]) == ["ten"]
    delay = label_columns("delay", ["10ms", "2ms,5ms,10ms"])
    assert (delay.value, delay.unit) == ("delay_s", "s")
    assert np.array_equal(delay.columns(["10ms", "2ms,5ms,10ms"])["delay_s"], [0.01, np.nan],
                          equal_nan=True)
    rate = label_columns("rate", ["30mbit"])
    assert (rate.value, rate.unit, rate.columns(["30mbit"])["rate_bps"][0]) == \
        ("rate_bps", "bit/s", 30e6)


def test_other_labels_are_typed_when_every_value_reads_alike():
    from pcapstats.study.labels import label_columns
    trial = label_columns("trial", ["1", "2", "10"])
    assert (trial.value, trial.text, trial.whole) == ("trial", None, True)
    assert trial.columns(["1", "2", "10"])["trial"].dtype == np.int64
    some = label_columns("trial", ["1", ""])                  # one capture without: NaN
    assert not some.whole and np.isnan(some.columns(["1", ""])["trial"][1])
    bw = label_columns("bw", ["10mbit", "500kbit"])
    assert (bw.value, bw.unit, bw.text) == ("bw_bps", "bit/s", "bw_label")
    assert label_columns("d", ["20ms", "far"]).value is None          # mixed: text
    assert label_columns("d", ["10%", "20ms"]).value is None          # two units: text
    assert label_columns("distance", ["close", "far"]).text == "distance"
