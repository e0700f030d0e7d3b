"""Captures bench/fuzz.py found failing, each kept small in tests/data/fuzz/ (its README says
what each holds): every command finishes on each with a result or the project's own one-line
error, and the behaviour each must have is stated beside it."""
import warnings

import numpy as np
import pytest
from tests.helpers.paths import DATA
from tests.helpers.tshark_ref import tshark_fields

import pcapstats as ps
from pcapstats.cli import main

FUZZ = DATA / "fuzz"
COMMANDS = ("throughput", "iograph", "retrans", "rtt", "cwnd", "seqgraph", "wscale", "flavour",
            "verify", "ping", "udp", "fairness", "delay", "wifi", "compare")
# file -> commands that must give a result (exit 0) on it, beyond "no internal error"
MUST_ANSWER = {
    "cwnd-acks-without-new-data.pcap": ("cwnd", "wscale"),
    "fairness-timestamp-2106.pcap": ("fairness", "throughput"),
    "delay-session-without-samples.pcap": ("delay", "ping"),
    "timestamp-past-2262.pcapng": ("throughput", "iograph", "retrans", "rtt", "cwnd",
                                   "seqgraph", "compare"),
    "iograph-span-of-all-int64.pcapng": ("iograph", "throughput", "compare"),
    "flavour-without-window-samples.pcapng": ("flavour", "compare", "throughput"),
    "cwnd-rtt-past-int64.pcapng": ("wscale", "throughput"),
}


@pytest.mark.parametrize("name", sorted(p.name for p in FUZZ.iterdir()
                                        if p.suffix in (".pcap", ".pcapng")))
def test_every_command_finishes_cleanly(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    for command in COMMANDS:
        code = main([command, str(FUZZ / name)])
        err = capsys.readouterr().err
        assert code in (0, 1, 2) and "internal error" not in err, (command, err)
        if command in MUST_ANSWER.get(name, ()):
            assert code == 0, (command, err)


def test_cwnd_with_rtts_past_int64_answers_as_the_sender_and_says_so_as_the_receiver(capsys):
    """The capture's one data segment has a TTL of 53, its ACKs 64: taken at the receiver,
    where one segment and no timestamps give no window sample (a clean "no samples").  Its
    RTTs of 292 years overflowed the sender's one-RTT windows: that path must answer."""
    path = str(FUZZ / "cwnd-rtt-past-int64.pcapng")
    assert main(["cwnd", "--side", "sender", path]) == 0
    assert main(["cwnd", path]) == 1
    err = capsys.readouterr().err
    assert "receiver-side capture" in err and "no cwnd samples" in err, err


def test_a_time_past_2262_is_held_there_and_the_totals_stay_exact():
    """A pcapng timestamp past what int64 nanoseconds hold had wrapped to 1688, and the
    streaming totals' (stream, interval) cells, packed in 64 bits, overflowed (IndexError in
    every TCP command).  The time is held at the last nanosecond, the clock warning says so,
    and throughput's per-stream packets and bytes equal tshark's."""
    path = FUZZ / "timestamp-past-2262.pcapng"
    with pytest.warns(ps.ClockWarning, match=r"year 2262 or after, held where int64"):
        t = ps.read(path).column("frame_time_ns")
    assert t[10] == np.iinfo(np.int64).max and t[11] < 2**62
    ref = tshark_fields(path, ("tcp.stream", "frame.len")).dropna().astype(int)
    want = ref.groupby("tcp.stream")["frame.len"].agg(["count", "sum"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ps.throughput(path).to_pandas()
    tcp = got[got["proto"] == "tcp"].set_index("stream")
    assert list(tcp.index) == list(want.index)
    assert (tcp["packets"] == want["count"]).all() and (tcp["bytes"] == want["sum"]).all()


@pytest.mark.parametrize("interval", [1.0, 0.000001])
def test_a_span_of_the_whole_int64_range_is_binned_without_overflow(interval):
    """Times at 1970 and at the 2262 the reader holds: rel time + 500 ns overflowed int64, and
    the intervals' count overflowed its sum (ValueError).  Every packet is still counted."""
    path = FUZZ / "iograph-span-of-all-int64.pcapng"
    ref = tshark_fields(path, ("frame.len",)).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = ps.iograph(path, interval=interval)
    summary = result.table("summary")
    assert summary["packets"][0] == len(ref) and summary["bytes"][0] == ref["frame.len"].sum()
    assert result.table("series")["packets"].sum() == len(ref)
    assert any("empty intervals" in n for n in result.notes)


def test_every_regression_capture_is_listed_with_its_behaviour():
    assert set(MUST_ANSWER) <= {p.name for p in FUZZ.iterdir()}
    readme = (DATA / "README.md").read_text()
    assert all(p.name in readme for p in FUZZ.iterdir())


@pytest.mark.slow
def test_a_short_fuzz_slice_finds_nothing(tmp_path):
    """bench/fuzz.py, a fixed seed and 40 inputs (the campaign runs 100,000: bench/README.md):
    mutated captures through every command give results or the project's own errors."""
    import subprocess
    import sys
    from tests.helpers.paths import ROOT
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "fuzz.py"), "--count", "40",
                          "--seed", "20261125", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "40 inputs (seed 20261125)" in run.stdout, \
        run.stdout[-3000:] + run.stderr[-2000:]
