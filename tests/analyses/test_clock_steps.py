"""A step of the capture's clock changes no count (issue 33).

The captures of ``tests/data/clock`` are shipped captures whose clock was stepped mid-capture,
5 s and an hour back and forward, made by ``tests/data/clock/make.py`` (every record from one
packet on moved by the step, ``tests.helpers.mutate.step_from``; the name says where and by how
much).  Each test undoes the step to get the unstepped capture back and holds the stepped
one's answers against it and against tshark on the stepped file:

- every count (ping's sent, received, duplicates; udp's datagrams, sent, lost, out of order;
  retrans' re-sent segments; verify's checks) equals the unstepped capture's, and tshark's;
- a step back, or forward by an hour or more (a *break*, ``pcapstats.clock``), leaves no
  duration negative or a step's size: durations and rates are measured over the pieces either
  side, an RTT across it is left out, and the capture's one clock warning names them;
- a forward step under an hour is no break (it cannot be told from idle time): counts are
  untouched, and a duration across it includes it, as it would an idle gap.
"""
import gzip
import importlib.util
import re
import subprocess
import warnings

import numpy as np
import pytest
from tests.helpers.mutate import step_from
from tests.helpers.partial import assert_answers_as_on_the_whole_file
from tests.helpers.paths import CAPTURES, DATA
from tests.helpers.tshark_ref import tshark, tshark_fields

import pcapstats as ps
from pcapstats.analyses import fairness as fairness_module
from pcapstats.analyses import ping as ping_module
from pcapstats.analyses import udp as udp_module
from pcapstats.analyses.verify import Expected
from pcapstats.capture import Needs
from pcapstats.errors import ClockWarning
from pcapstats.study.metrics import measure

STEPPED = sorted((DATA / "clock").glob("*.pcap.gz"))
NAME = re.compile(r"(?P<name>.+)\.step(?P<sign>[-+])(?P<n>\d+)(?P<unit>[sh])-at(?P<packet>\d+)"
                  r"\.pcap\.gz")
HOUR = 3600


def _step(path) -> tuple[str, int, int]:
    """(the shipped capture's name, the packet the step is at, the step in seconds)."""
    m = NAME.fullmatch(path.name)
    seconds = int(m["n"]) * (HOUR if m["unit"] == "h" else 1) * (-1 if m["sign"] == "-" else 1)
    return m["name"], int(m["packet"]), seconds


def _of(kind: str) -> list:
    return [pytest.param(p, id=p.name.split(".step")[1][:-8]) for p in STEPPED
            if p.name.startswith(kind)]


@pytest.fixture(scope="module")
def unstepped(tmp_path_factory):
    """The unstepped capture of a stepped one (its step undone), made once each."""
    folder, made = tmp_path_factory.mktemp("unstepped"), {}

    def get(path):
        if path not in made:
            name, packet, seconds = _step(path)
            out = folder / f"{name}.pcap"
            out.write_bytes(step_from(gzip.decompress(path.read_bytes()), packet, -seconds))
            made[path] = out
        return made[path]
    return get


def _run(analysis, path, **options):
    """(result, the ClockWarnings said while it read and analysed ``path``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = analysis(path, **options)
    return result, [str(w.message) for w in caught if issubclass(w.category, ClockWarning)]


def _gap_at_the_step(original, path) -> float:
    """Seconds between the packet before the step and the packet it is at, in the unstepped
    capture: what a duration across the step loses (unknown, counted as none)."""
    packet = _step(path)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ps.read(original).column("frame_time_ns")
    return (int(t[packet - 1]) - int(t[packet - 2])) / 1e9


def _breaks(path) -> bool:
    """A step back, or forward by an hour or more: what the clock module calls a break."""
    return _step(path)[2] < 0 or _step(path)[2] >= HOUR


def test_the_stepped_captures_are_the_ones_make_py_lists():
    spec = importlib.util.spec_from_file_location("make", DATA / "clock" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    assert sorted(p.name for p in STEPPED) == sorted(
        f"{name}.step{step}-at{packet}.pcap.gz" for name, (packet, steps) in make.MADE.items()
        for step in steps)
    for path in STEPPED:
        name, packet, seconds = _step(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = ps.read(path).column("frame_time_ns")
        step = int(t[packet - 1]) - int(t[packet - 2])
        assert seconds * 10**9 < step < seconds * 10**9 + 10**9, path.name   # the step is there


# -- ping -----------------------------------------------------------------------------------

def _tshark_echoes(path) -> dict[int, tuple[int, int]]:
    """ICMP identifier -> (requests, requests answered), as tshark (two passes, IP fragments
    reassembled) sees them."""
    out = subprocess.run(["tshark", "-n", "-2", "-r", str(path), "-Y", "icmp.type == 8", "-T",
                          "fields", "-e", "icmp.ident", "-e", "icmp.resp_in"],
                         capture_output=True, text=True, check=True).stdout
    seen: dict[int, list[int]] = {}
    for line in out.splitlines():
        ident, answered = (line.split("\t") + [""])[:2]
        counts = seen.setdefault(int(ident), [0, 0])
        counts[0] += 1
        counts[1] += bool(answered)
    return {k: tuple(v) for k, v in seen.items()}


COUNTS = ["ident", "payload_bytes", "transmitted", "received", "duplicates", "echo_loss"]


@pytest.mark.parametrize("path", _of("ping"))
def test_ping_counts_equal_the_unstepped_captures_and_tsharks(path, unstepped):
    result, said = _run(ps.ping, path)
    before = ps.ping(unstepped(path))
    got, want = result.to_pandas("sessions"), before.to_pandas("sessions")
    assert got[COUNTS].equals(want[COUNTS])           # one row each: the fragmented one too
    ref = _tshark_echoes(path)
    assert {int(r.ident): (int(r.transmitted), int(r.received)) for r in got.itertuples()} == ref
    assert sum(v[0] for v in ref.values()) == 60 == sum(v[1] for v in ref.values())
    echoes, was = result.to_pandas("echoes"), before.to_pandas("echoes")
    across = echoes["rtt_ms"].isna() & was["rtt_ms"].notna()
    same = ~across
    step_ms = _step(path)[2] * 1000
    if _breaks(path):
        assert across.sum() == 1                      # the 4000-byte echo the step falls in
        assert np.allclose(echoes["rtt_ms"][same], was["rtt_ms"][same], rtol=0, atol=1e-9)
        spans = got["duration_s"] != want["duration_s"]   # the 4000-byte row, less the gap
        assert got["payload_bytes"][spans].tolist() == [4000]
        assert got["duration_s"][spans].iloc[0] == pytest.approx(
            want["duration_s"][spans].iloc[0] - _gap_at_the_step(unstepped(path), path),
            abs=1e-9)
        assert len(said) == 1 and said[0].startswith(
            f"{'clock steps back' if step_ms < 0 else '1 forward gap of'}")
        assert "ping: counts untouched; unknowable across it, left out: 1 RTT; over the " \
               "pieces either side: 1 session duration" in said[0], said
    else:                                              # no break: the clock's 5 s are in it
        assert not said and not across.any()
        moved = (echoes["rtt_ms"] - was["rtt_ms"]).abs() > 1
        assert moved.sum() == 1
        assert echoes["rtt_ms"][moved].iloc[0] == pytest.approx(
            was["rtt_ms"][moved].iloc[0] + step_ms, abs=1e-6)
    assert (got["duration_s"] >= 0).all()
    # tshark times the same request -> reply gaps (its icmp.resptime; of the echoes in one
    # packet: of a fragmented one, it times its first fragments), the step's included
    ref = tshark_fields(path, ("frame.number", "icmp.resptime")).dropna()
    whole = echoes[(echoes["payload_bytes"] <= 1472) & echoes["rtt_ms"].notna()]
    mine = dict(zip(whole["reply_frame"].astype(int), whole["rtt_ms"]))
    for frame, resptime in zip(ref["frame.number"].astype(int),
                               ref["icmp.resptime"].astype(float)):
        if frame in mine:
            assert mine[frame] == pytest.approx(resptime, abs=1e-6)


# -- udp ------------------------------------------------------------------------------------

UDP_COUNTS = ["stream", "direction", "datagrams", "bytes", "method", "sent", "lost",
              "out_of_order", "duplicates", "after_end"]


@pytest.mark.parametrize("path", _of("iperf3-udp"))
def test_udp_counts_equal_the_unstepped_captures_and_tsharks(path, unstepped):
    result, said = _run(ps.udp, path)
    got, want = result.to_pandas(), ps.udp(unstepped(path)).to_pandas()
    assert got[UDP_COUNTS].equals(want[UDP_COUNTS])
    main = got.iloc[int(got["datagrams"].argmax())]
    assert main["method"] == "iperf3" and main["lost"] == 1354 and main["sent"] == 3882
    ref = tshark_fields(path, ("udp.stream", "ip.src")).dropna()
    per_flow = ref.groupby(["udp.stream", "ip.src"]).size().sort_values().tolist()
    assert sorted(got["datagrams"].tolist()) == per_flow
    assert (got["duration_s"] >= 0).all()
    if _breaks(path):        # over the pieces: less the time at the break, unknown
        spans = got["duration_s"] != want["duration_s"]
        assert got["datagrams"][spans].tolist() == [main["datagrams"]]
        assert main["duration_s"] == pytest.approx(
            want["duration_s"].max() - _gap_at_the_step(unstepped(path), path), abs=1e-9)
        assert main["payload_bps"] == pytest.approx(want["payload_bps"].max(), rel=1e-3)
        assert main["capture_jitter_ms"] == pytest.approx(
            want.iloc[int(want["datagrams"].argmax())]["capture_jitter_ms"], rel=0.01)
        assert len(said) == 1 and "udp: counts untouched; over the pieces either side: the " \
                                   "duration, rate and jitter of 1 flow" in said[0], said
    else:
        assert not said
        assert main["duration_s"] == pytest.approx(want["duration_s"].max() + 5, abs=1e-3)


def test_udp_jitter_leaves_out_the_difference_across_a_step_near_the_end(unstepped, tmp_path):
    """A step 10 datagrams before the last: the one transit difference across it (5 s) would
    weigh (15/16)^10 / 16 in iperf3's filter, 160 ms; left out, the jitter is the unstepped
    one within the weight the few differences near the step carry."""
    base = unstepped(next(p for p in STEPPED if p.name.startswith("iperf3-udp")))
    data = base.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flows = ps.udp(base).to_pandas()
        n = len(ps.read(base))
    stepped = tmp_path / "late-step.pcap"
    stepped.write_bytes(step_from(data, n - 30, -5))    # past TEST_END: still the flow's end
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ps.udp(stepped).to_pandas()
    main = int(flows["datagrams"].argmax())
    assert got["lost"][main] == flows["lost"][main]
    assert got["capture_jitter_ms"][main] == pytest.approx(flows["capture_jitter_ms"][main],
                                                            rel=0.1)


# -- retrans and verify on a TCP transfer stepped mid-transfer ------------------------------

FLAGS = ("retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
         "lost_segment", "duplicate_ack")


@pytest.mark.parametrize("path", _of("sp-reno"))
def test_retrans_resent_equals_the_unstepped_and_its_flags_tsharks(path, unstepped):
    result, said = _run(ps.retrans, path)
    got = result.to_pandas("counts")
    want = ps.retrans(unstepped(path)).to_pandas("counts")
    assert got["resent"].tolist() == want["resent"].tolist()
    assert int(got["resent"].sum()) == 55          # the sender kernel's total_retrans
    for flag in FLAGS:                             # Wireshark's rules read the stepped times
        count = len(tshark("-r", str(path), "-Y", f"tcp.analysis.{flag}").splitlines())
        assert int(got[flag].sum()) == count, flag
    assert len(said) == 1 and "retrans: re-sent counts (sequence numbers) untouched; read on " \
                              "the clock's times as tshark reads them: Wireshark's flags" \
                              in said[0]


@pytest.mark.parametrize("path", _of("sp-reno"))
def test_verify_checks_and_durations_equal_the_unstepped(path, unstepped):
    asked = Expected(time_s=3)
    result, said = _run(ps.verify, path, sidecar=None, expected=asked)
    before = ps.verify(unstepped(path), sidecar=None, expected=asked)
    checks, was = result.to_pandas("checks"), before.to_pandas("checks")
    assert checks["verdict"].tolist() == was["verdict"].tolist()
    assert result.verdict == before.verdict
    duration = checks[checks["check"] == "duration"]
    assert duration["verdict"].tolist() == ["pass"]
    found = float(re.search(r"([\d.]+) s", duration["found"].iloc[0])[1])
    assert found == pytest.approx(float(re.search(
        r"([\d.]+) s", was[was["check"] == "duration"]["found"].iloc[0])[1]), abs=2e-3)
    assert len(said) == 1 and "verify: counts untouched; over the pieces either side: 1 " \
                              "simpleperf duration (first data to BYE)" in said[0], said


# -- a study ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [p for p in STEPPED if _breaks(p)], ids=lambda p: p.name)
def test_compare_gives_the_unstepped_captures_numbers(path, unstepped):
    """Every metric of a study: counts exactly, every rate, RTT and jitter within what the
    unknown time at the break (one packet gap, counted as none) moves it, the verdicts equal."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = measure(path)
    said = [str(w.message) for w in caught if issubclass(w.category, ClockWarning)]
    want = measure(unstepped(path))
    assert len(said) == 1 and "compare: counts untouched" in said[0]
    for name, value in want.values.items():
        mine = got.values[name]
        if isinstance(value, str):
            assert mine == value, name
        elif np.isnan(value):
            assert np.isnan(mine), name
        else:
            assert mine == pytest.approx(value, rel=2e-3), name


def test_fairness_over_a_step_back_equals_the_unstepped(tmp_path):
    """Two simpleperf pairs, the clock stepped back 5 s and forward a day mid-transfer: the
    common window neither emptied nor stretched, the goodput bytes the same."""
    original = CAPTURES / "sp-2pairs-reno+cubic.pcap"
    want = ps.fairness(original)
    for seconds in (-5, 86400):
        path = tmp_path / f"pairs{seconds}.pcap"
        path.write_bytes(step_from(original.read_bytes(), 3000, seconds))
        got, said = _run(ps.fairness, path)
        assert got.table("flows")["goodput_bytes"].tolist() == \
            want.table("flows")["goodput_bytes"].tolist()
        assert got.table("summary")["window_s"][0] == pytest.approx(
            want.table("summary")["window_s"][0], abs=2e-3)
        assert got.table("summary")["jain_index"][0] == pytest.approx(
            want.table("summary")["jain_index"][0], abs=1e-3)
        assert "fairness: counts untouched; over the pieces either side: the window, " \
               "goodput, shares and convergence of 2 flows" in said[0]


@pytest.mark.parametrize("seconds", (-5, HOUR), ids=("back-5s", "forward-1h"))
def test_fairness_shares_and_convergence_over_a_step_equal_the_unstepped(seconds, tmp_path):
    """Each flow's shares per interval from its own start, its start and order, and the time
    the flows took to converge, on two simpleperf pairs whose clock steps at packet 1000
    (0.37 s in, before either flow converged: 0.39 s and 0.70 s after the common window's
    start at 0.1 s intervals): the same as unstepped, the path read in windows and a Capture
    alike, as the joined timeline loses only the 11 us between the two packets at the step."""
    original = CAPTURES / "sp-2pairs-reno+cubic.pcap"
    want = ps.fairness(original, interval=0.1)
    assert want.table("summary")["convergence_s"][0] == pytest.approx(0.7)
    path = tmp_path / f"pairs{seconds}.pcap"
    path.write_bytes(step_from(original.read_bytes(), 1000, seconds))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClockWarning)
        stepped = ps.read(path)
    for given in (path, stepped):
        got, _ = _run(ps.fairness, given, interval=0.1)
        for table, names in (("summary", ("convergence_s", "window_start_s", "window_s")),
                             ("flows", ("order", "start_s", "convergence_s", "share"))):
            for name in names:
                assert got.table(table)[name] == pytest.approx(
                    want.table(table)[name], abs=1e-4, nan_ok=True), (table, name)
        shares, unstepped_shares = got.to_pandas("shares"), want.to_pandas("shares")
        assert len(shares) == len(unstepped_shares) == 63
        for name in ("order", "within", "sharing"):    # (flow: no sidecar beside the copy)
            assert shares[name].tolist() == unstepped_shares[name].tolist(), name
        for name in ("time_s", "since_start_s", "goodput_bps", "share", "fair_share"):
            assert shares[name].to_numpy() == pytest.approx(
                unstepped_shares[name].to_numpy(), rel=1e-3, nan_ok=True), name


@pytest.mark.parametrize("path", [p for p in STEPPED if _breaks(p)], ids=lambda p: p.name)
def test_only_the_rows_it_needs_give_the_whole_files_answer_across_a_step(path, tmp_path):
    """ping, udp and fairness given only their rows and columns (the whole table's, or the
    path read in small windows, each window knowing the clock up to its end) answer on a
    stepped capture as on the whole table, what the step touched included."""
    plain = tmp_path / path.name[:-3]
    plain.write_bytes(gzip.decompress(path.read_bytes()))  # (small windows: an unzipped file)
    if path.name.startswith("ping"):
        assert_answers_as_on_the_whole_file(
            ps.ping, Needs(ping_module.READS, ping_module.rows_needed), plain)
    elif path.name.startswith("iperf3-udp"):
        assert_answers_as_on_the_whole_file(ps.udp, udp_module.NEEDS, plain)


def test_fairness_needs_only_its_rows_across_a_step(tmp_path):
    path = tmp_path / "pairs-5s.pcap"
    path.write_bytes(step_from((CAPTURES / "sp-2pairs-reno+cubic.pcap").read_bytes(), 3000, -5))
    assert_answers_as_on_the_whole_file(
        ps.fairness, Needs(fairness_module.READS, fairness_module.rows_needed), path)


def test_matched_captures_count_the_same_with_both_clocks_stepped(tmp_path):
    """The iperf3 flow matched datagram by datagram between its sender and receiver captures,
    each clock stepped back 5 s at a different place: the same sent, lost and out of order as
    unstepped (the keys and the captures' order decide), the same jitter within what the two
    unknown times at the breaks move it."""
    name = "iperf3-udp-15mbit-via-10mbit"
    sender, receiver = (CAPTURES / f"{name}.sender.pcap", CAPTURES / f"{name}.receiver.pcap")
    want = ps.udp(sender, receiver=receiver, counters=False).to_pandas()
    stepped = []
    for path, packet in ((sender, 1500), (receiver, 2000)):
        stepped.append(tmp_path / path.name)
        stepped[-1].write_bytes(step_from(path.read_bytes(), packet, -5))
    got, said = _run(ps.udp, stepped[0], receiver=stepped[1], counters=False)
    got = got.to_pandas()
    assert got[UDP_COUNTS].equals(want[UDP_COUNTS])
    main = int(want["datagrams"].argmax())
    assert want["method"][main] == "matched captures" and want["lost"][main] > 1000
    assert got["capture_jitter_ms"][main] == pytest.approx(want["capture_jitter_ms"][main],
                                                            rel=0.01)
    assert len(said) == 2 and all("udp: counts untouched" in s for s in said)
