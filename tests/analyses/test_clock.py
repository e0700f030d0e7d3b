"""The capture's clock as data: a clock step is reported once, and no analysis allocates or
computes in proportion to the span it makes (issue: a flipped timestamp byte took iograph to
580 MB and flavour past 120 s and 6.7 GB)."""
import warnings

import numpy as np
import pytest
from tests.helpers.mutate import shift_seconds
from tests.helpers.paths import CAPTURES

import pcapstats as ps
from pcapstats.analyses.flavour import gain_cycling, app_silence_share
from pcapstats.cli import main
from pcapstats.clock import ClockCheck, without_long_gaps
from pcapstats.errors import ClockWarning

DAY = 86400
ORIGINAL = CAPTURES / "sp-reno-loss1pct.pcap"


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """The shipped capture with packet 101 moved 66 days ahead (one flipped byte does this)."""
    path = tmp_path_factory.mktemp("clock") / "step66.pcap"
    path.write_bytes(shift_seconds(ORIGINAL.read_bytes(), 101, 66 * DAY))
    return path


def _message(times_ns, windows=1) -> str | None:
    check = ClockCheck()
    for part in np.array_split(np.asarray(times_ns, np.int64), windows):
        check.feed(part)
    return check.message()


def test_ordinary_clocks_say_nothing():
    t0 = 1_700_000_000 * 10**9
    steady = t0 + np.cumsum(np.full(1000, 1_000_000))
    jittered = steady.copy()
    jittered[::7] -= 900_000                         # reordering under 1 ms: not a step
    assert _message(steady) is None and _message(jittered) is None


def test_steps_gaps_and_absurd_times_are_said_once_with_their_packets():
    t0 = 1_700_000_000 * 10**9
    t = t0 + np.arange(10, dtype=np.int64) * 10**9
    t[4:] += 66 * DAY * 10**9                        # packet 5 comes 66 days after packet 4
    t[7:] -= int(3.1e9)                              # packet 8 is 2.1 s before packet 7
    said = _message(t)
    assert "1 forward gap of 66 days at packet 5" in said
    assert "clock steps back 2.1 s at packet 8" in said
    assert said.index("packet 5") < said.index("packet 8")      # in the order they happen
    assert _message(t, windows=4) == said                      # the same read window by window
    zero = t.copy()
    zero[2] = 0
    assert "outside 1990-2100 (packet 3: year 1970)" in _message(zero)


def test_the_reader_and_the_streaming_pass_warn_once(stepped):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cap = ps.read(stepped)
        ps.throughput(str(stepped))
    clock = [str(w.message) for w in caught if issubclass(w.category, ClockWarning)]
    assert len(clock) == 2 and clock[0] == clock[1], clock      # one from each reading
    assert "1 forward gap of 66 days at packet 101" in clock[0]
    assert "clock steps back 66 days at packet 102" in clock[0]
    assert any("66 days" in w for w in cap.warnings)


def test_iograph_lists_the_intervals_with_packets_not_66_days_of_empty_ones(stepped):
    cap = ps.read(stepped)
    result = ps.iograph(cap, interval=1.0)
    series = result.to_pandas("series")
    assert len(series) <= 2 * len(cap)
    assert any("empty intervals of 1 s not listed" in n for n in result.notes)
    # every packet is in its own interval, as the dense rule counts them
    t = cap.column("frame_time_ns").astype(np.int64)
    want = np.unique((t - t[0] + 500) // 10**9, return_counts=True)
    got = series[series["packets"] > 0]
    assert got["interval"].tolist() == want[0].tolist()
    assert got["packets"].tolist() == want[1].tolist()
    # the empty run shows as one zero row right after the last interval before it
    empty = series[series["packets"] == 0]
    assert empty["interval"].tolist() == [4]
    assert series["interval"].iloc[-1] >= 66 * DAY


def test_flavour_and_every_command_finish_with_the_originals_verdict(stepped, capsys):
    assert ps.flavour(stepped).to_pandas()["flavour"].tolist() == \
        ps.flavour(ORIGINAL).to_pandas()["flavour"].tolist()
    for command in ("throughput", "iograph", "retrans", "rtt", "cwnd", "seqgraph", "wscale",
                    "flavour", "verify"):
        assert main([command, str(stepped)]) in (0, 1), command
    assert "forward gap of 66 days" in capsys.readouterr().err


def test_idle_share_counts_neither_a_clock_step_nor_a_step_back():
    t = np.r_[np.arange(0, 3, 0.01), 3 + 66 * DAY, np.arange(3.01, 4, 0.01)]
    share = app_silence_share(t, np.zeros(len(t), bool), t - 0.0005, 0.02)
    assert share == 0.0
    idle = np.r_[np.arange(0, 1, 0.01), np.arange(2, 3, 0.01)]     # idle from 0.99 to 2
    assert app_silence_share(idle, np.zeros(len(idle), bool), idle[:1], 0.02) == \
        pytest.approx(1.01 / 2.99, rel=1e-6)


def test_long_gaps_are_shortened_so_time_bins_follow_the_packets():
    t = np.array([0, 10, 20, 66 * DAY * 10**9, 66 * DAY * 10**9 + 10, 5], np.int64)
    assert without_long_gaps(t, 100).tolist() == [0, 10, 20, 120, 130, 130]
    span = 66 * DAY * 10**9
    t = np.r_[np.arange(0, 3 * 10**9, 10**7), span + np.arange(0, 3 * 10**9, 10**7)]
    strength, amplitude = gain_cycling(t, np.full(len(t), 1448), 20_000_000)
    assert np.isfinite(strength) or np.isnan(strength)          # returns: no 285M bins
