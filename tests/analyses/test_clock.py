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


def test_breaks_cut_the_timeline_into_pieces_joined_end_to_end():
    """Packet 4 steps 5 s back, packet 7 jumps a day ahead: three pieces; joined, each break
    takes no time (what passed there is unknown), every other gap is kept."""
    t0 = 1_700_000_000 * 10**9
    gaps = np.array([0, 10, 10, -5 * 10**9, 10, 10, DAY * 10**9, 10, -5], np.int64)
    t = t0 + np.cumsum(gaps)                         # (the last: reordering, no break)
    for windows in (1, 3):
        check = ClockCheck()
        for part, frames in zip(np.array_split(t, windows),
                                np.array_split(np.arange(1, len(t) + 1), windows)):
            check.feed(part)
        pieces = check.pieces()
        assert len(pieces) == 3 and pieces.at.tolist() == [4, 7]
        frames = np.arange(1, len(t) + 1)
        assert pieces.of(frames).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
        joined = pieces.monotonic(t, frames) - t0
        assert joined.tolist() == [0, 10, 20, 20, 30, 40, 40, 50, 45]
        assert check.span_ns() == joined[-1] == 45
        assert pieces.apart([1, 4], [3, 9]).tolist() == [False, True]
    ordinary, first = ClockCheck(), t[:3]
    ordinary.feed(first)
    assert len(ordinary.pieces()) == 1
    assert ordinary.pieces().monotonic(first, [1, 2, 3]) is first    # no copy


def test_a_timeline_joined_across_times_int64_cannot_hold_is_held_not_wrapped():
    top = np.iinfo(np.int64).max
    t = np.array([10**18, top, 0, top, 5], np.int64)      # the reader holds times at its ends
    check = ClockCheck()
    check.feed(t)
    joined = check.pieces().monotonic(t, np.arange(1, 6))
    assert joined.tolist() == [10**18] * 5
    assert check.span_ns() == 0


def test_a_capture_joined_across_its_breaks(stepped):
    """Capture.joined: the times joined, everything else shared, its clock whole again; a
    capture whose clock never broke is itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = ps.read(stepped)
    joined = cap.joined()
    t, j = cap.column("frame_time_ns"), joined.column("frame_time_ns")
    assert len(cap.clock.pieces()) == 3 and len(joined.clock.pieces()) == 1
    kept = (np.diff(t) > -10**6) & (np.diff(t) < 3600 * 10**9)          # every gap but breaks
    assert (np.diff(j)[kept] == np.diff(t)[kept]).all()
    assert j[100] == j[99] and j[101] == j[100]
    assert joined.column("frame_time_relative")[-1] == pytest.approx(
        (t[-1] - t[0] - (t[100] - t[99]) - (t[101] - t[100])) / 1e9)
    assert ps.throughput(joined).to_pandas()["packets"].tolist() == \
        ps.throughput(ORIGINAL).to_pandas()["packets"].tolist()
    original = ps.read(ORIGINAL)
    assert original.joined() is original


def test_fragments_are_found_by_identification_and_order_not_time(tmp_path):
    """An echo over the MTU whose last fragment comes after the clock jumped a day ahead,
    then another datagram with the same identification 40 s later (the identification
    reused): each later fragment joins the last first fragment before it with its key, within
    30 s on the joined timeline, so the jump parts none and the second datagram takes none of
    the first's."""
    from tests.helpers import craft as c
    me, peer = "192.0.2.1", "198.51.100.2"
    t0 = 1_700_000_000 * 10**9
    records = []
    for k, at in enumerate((t0, t0 + 40 * 10**9)):
        whole = c.icmp(4, 8, ident=9, seq=k, body=b"f" * 2992)
        for i, piece in enumerate([(0, True, 1480), (185, True, 1480), (370, False, 40)]):
            later = len(records) >= 2                       # the clock jumped at packet 3
            records.append(c.Record(c.raw(c.ipv4(whole, me, peer, ident=77, frag=piece)),
                                    at + i * 10_000 + (DAY * 10**9 if later else 0)))
    path = tmp_path / "fragments.pcap"
    path.write_bytes(c.pcap(records, c.LT_RAW, nano=True).data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ps.ping(path)
    echoes = result.to_pandas("echoes")
    assert echoes["payload_bytes"].tolist() == [2992, 2992]     # not 2952: its last is in it
    assert result.to_pandas("sessions")["payload_bytes"].tolist() == [2992]
    assert any("1 forward gap of 24 h at packet 3" in str(w.message) for w in caught)
