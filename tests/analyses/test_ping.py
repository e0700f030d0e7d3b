"""pcapstats ping against answers known in advance and against ping itself.

- hand-built echoes (ICMPv4 and ICMPv6) with known round trips, a lost request, a duplicate
  reply, a reply to a request the capture missed, and sequence numbers wrapping past 65535;
- every echo's request -> reply time against tshark's ``icmp.resptime`` on the shipped
  captures;
- lab runs at 20 % loss, captured at the pinging host and at the responder: counts equal to
  ping's own summary line exactly, min/avg/max/mdev within the bound that separates the
  capture's timestamps from ping's clock, and the responder-side capture read as turnaround.
"""
import math
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import craft as c
from tests.helpers.partial import assert_answers_as_on_the_whole_file
from tests.helpers.paths import CAPTURES, DATA
from tests.helpers.tshark_ref import tshark_fields

import pcapstats as ps
from pcapstats.analyses import echoes as echoes_module, ping as ping_module
from pcapstats.capture import Needs
from pcapstats.errors import NothingToReport

T0 = 1_700_000_000 * 10**9
ME, PEER = "192.0.2.1", "198.51.100.2"
ME6, PEER6 = "2001:db8::1", "2001:db8:0:1::2"
CLOCK_BOUND_MS = 0.1      # capture vs ping clock: measured 25-36 us (ping times in user space)


def _write(tmp_path, records, name="ping.pcap"):
    w = c.pcap([c.Record(c.raw(f), t) for t, f in sorted(records, key=lambda r: r[0])],
               c.LT_RAW, nano=True)
    path = tmp_path / name
    path.write_bytes(w.data)
    return path


def _echo(t_ns, seq, *, ident=7, size=56, reply=True, rtt_ns=None, v6=False, ttl=64,
          reply_ttl=63):
    """A request at t_ns and (unless reply is False) its reply rtt_ns later."""
    body = b"p" * size
    if v6:
        req = c.ipv6(c.icmp(6, 128, ident=ident, seq=seq, body=body), ME6, PEER6, hlim=ttl)
        rep = c.ipv6(c.icmp(6, 129, ident=ident, seq=seq, body=body), PEER6, ME6, hlim=reply_ttl)
    else:
        req = c.ipv4(c.icmp(4, 8, ident=ident, seq=seq, body=body), ME, PEER, ttl=ttl)
        rep = c.ipv4(c.icmp(4, 0, ident=ident, seq=seq, body=body), PEER, ME, ttl=reply_ttl)
    out = [(t_ns, req)]
    if reply:
        out.append((t_ns + rtt_ns, rep))
    return out


def test_counts_and_ping_statistics_of_a_built_session(tmp_path):
    rtts = [10.0, 12.5, None, 11.0, 30.0]          # ms; seq 2 gets no reply
    records = []
    for seq, rtt in enumerate(rtts):
        records += _echo(T0 + seq * 10**9, seq, reply=rtt is not None,
                         rtt_ns=None if rtt is None else int(rtt * 1e6))
    # a duplicate reply to seq 1, 4 ms after its first one (ping counts its RTT too)
    records.append((T0 + 10**9 + 16_500_000,
                    c.ipv4(c.icmp(4, 0, ident=7, seq=1, body=b"p" * 56), PEER, ME, ttl=63)))
    # a reply to a request the capture missed (seq 9): no session row counts it
    records.append((T0 + 9 * 10**9, c.ipv4(c.icmp(4, 0, ident=7, seq=9, body=b"p" * 56),
                                           PEER, ME, ttl=63)))
    result = ps.ping(_write(tmp_path, records))
    row = result.to_pandas("sessions").iloc[0]
    assert (row.transmitted, row.received, row.duplicates) == (5, 4, 1)
    assert row.echo_loss == pytest.approx(0.2)
    assert row.side == "sender"
    samples = np.array([10.0, 12.5, 16.5, 11.0, 30.0])   # ping's statistics include duplicates
    assert row.rtt_min_ms == pytest.approx(10.0)
    assert row.rtt_max_ms == pytest.approx(30.0)
    assert row.rtt_avg_ms == pytest.approx(samples.mean())
    assert row.rtt_mdev_ms == pytest.approx(samples.std())   # population sd, as ping's mdev
    echoes = result.to_pandas("echoes")
    assert echoes["replies"].tolist() == [1, 2, 0, 1, 1]
    assert echoes["rtt_ms"].isna().tolist() == [False, False, True, False, False]
    assert echoes["rtt_ms"][1] == pytest.approx(12.5)      # the first reply, not the duplicate


def test_icmpv6_sessions_sizes_and_sequence_wrap(tmp_path):
    records = []
    for k, seq in enumerate([65534, 65535, 0, 1]):             # wraps: four distinct requests
        records += _echo(T0 + k * 10**8, seq, v6=True, rtt_ns=2_000_000 + k * 1000)
    for k in range(3):                                         # a second session, two sizes
        records += _echo(T0 + 5 * 10**8 + k * 10**8, k, ident=8, size=56 if k < 2 else 1000,
                         rtt_ns=5_000_000)
    sessions = ps.ping(_write(tmp_path, records)).to_pandas("sessions")
    v6 = sessions[sessions.requester == ME6].iloc[0]
    assert (v6.transmitted, v6.received, v6.duplicates) == (4, 4, 0)
    assert v6.rtt_min_ms == pytest.approx(2.0) and v6.rtt_max_ms == pytest.approx(2.003)
    v4 = sessions[sessions.requester == ME].sort_values("payload_bytes")
    assert v4["payload_bytes"].tolist() == [56, 1000]
    assert v4["transmitted"].tolist() == [2, 1]


def test_side_from_ttl(tmp_path):
    records = _echo(T0, 1, ttl=63, reply_ttl=64, rtt_ns=30_000)   # at the responder
    records += _echo(T0 + 10**9, 1, ident=9, ttl=63, reply_ttl=62, rtt_ns=8_000_000)  # router
    sessions = ps.ping(_write(tmp_path, records)).to_pandas("sessions").set_index("ident")
    assert sessions.loc[7, "side"] == "receiver"
    assert math.isnan(sessions.loc[7, "rtt_avg_ms"])
    assert sessions.loc[7, "turnaround_ms"] == pytest.approx(0.03)
    assert sessions.loc[9, "side"] == "middle"


def _stamped(t_sent_ns, seq, capture_lag_ns, rtt_ns, ident):
    """An echo whose request carries ping's send time, captured ``capture_lag_ns`` after it
    and answered ``rtt_ns`` later, TTL 64 both ways (no router)."""
    sec, ns = divmod(t_sent_ns, 10**9)
    body = struct.pack("<qq", sec, ns // 1000) + b"x" * 40
    req = c.ipv4(c.icmp(4, 8, ident=ident, seq=seq, body=body), ME, PEER, ttl=64)
    rep = c.ipv4(c.icmp(4, 0, ident=ident, seq=seq, body=body), PEER, ME, ttl=64)
    t = t_sent_ns + capture_lag_ns
    return [(t, req), (t + rtt_ns, rep)]


def test_side_from_pings_send_time_when_no_router_is_between(tmp_path):
    """Same TTLs both ways (one link): the timestamp ping writes in each request decides."""
    records = []
    for k in range(3):
        records += _stamped(T0 + k * 10**9, k, 20_000, 400_000, ident=1)     # at the requester
        records += _stamped(T0 + k * 10**9 + 5 * 10**8, k, 200_000, 25_000, ident=2)  # responder
    sessions = ps.ping(_write(tmp_path, records)).to_pandas("sessions").set_index("ident")
    assert sessions.loc[1, "side"] == "sender"
    assert sessions.loc[2, "side"] == "receiver"


def test_a_capture_without_echoes_says_what_it_has():
    with pytest.raises(NothingToReport, match=r"no ICMP echo requests .*1414 TCP"):
        ps.ping(CAPTURES / "tcp_2streams.pcap")


@pytest.mark.parametrize("name", ["ping-sweep.pcap", "udp_ping.pcapng"])
def test_each_echo_equals_tsharks_icmp_resptime(name):
    path = CAPTURES / name
    ref = tshark_fields(path, ("frame.number", "icmp.resptime"))
    ref = ref[ref["icmp.resptime"].notna()]          # tshark times each reply (ms)
    echoes = ps.ping(path).to_pandas("echoes")
    mine = dict(zip(echoes["reply_frame"].astype(int), echoes["rtt_ms"]))
    assert len(ref) == len(mine) > 0
    for _, row in ref.iterrows():
        assert mine[int(row["frame.number"])] == pytest.approx(float(row["icmp.resptime"]),
                                                               abs=1e-6)


PING_NEEDS = Needs(ping_module.READS, ping_module.rows_needed)


def test_matching_requests_in_order_equals_the_sorting_match():
    """The usual capture (requests in time order, session after session, numbers rising, with
    gaps, jumps past 65536 and replies to missed or unsent numbers) is matched without a sort:
    the same request for every reply as the general match, a few replies a chunk."""
    rng = np.random.default_rng(7)
    for trial in range(400):
        session, seq, t = [], [], [0]
        for s in range(int(rng.integers(1, 4))):
            k = int(rng.integers(1, 40))
            steps = rng.choice([1, 1, 1, 2, 7, 30000, 65536, 70000], size=k)
            seq += list(int(rng.integers(0, 70000)) + np.cumsum(steps) - steps[0])
            session += [s] * k
            t += list(t[-1] + np.cumsum(rng.integers(0, 3, size=k)))
        session, seq, t = np.array(session), np.array(seq), np.array(t[1:])
        pick = rng.integers(0, len(t), size=int(rng.integers(1, 60)))
        r_seq16 = ((seq[pick] + rng.choice([0, 0, 0, 1, -1, 5], size=len(pick))) % 65536)
        r_t = t[pick] + rng.integers(-2, 5, size=len(pick))
        with mock_chunk(5):
            fast = echoes_module.match_replies(session, seq % 65536, t, session[pick],
                                        r_seq16.astype(np.uint16), r_t, seq)
        assert np.array_equal(fast, echoes_module._match_sorting(session, seq % 65536, t,
                                                                 session[pick], r_seq16, r_t))


def mock_chunk(n):
    from unittest import mock
    return mock.patch.object(echoes_module, "MATCH_CHUNK", n)


def _fragmented_echo(t_ns, seq, ident, lose_last=False):
    """An echo of 3000 ICMP bytes each way, in three IP fragments (the request's last one
    lost, if asked)."""
    out = []
    for kind, a, b, ttl, at in ((8, ME, PEER, 64, t_ns), (0, PEER, ME, 61, t_ns + 10**6)):
        whole = c.icmp(4, kind, ident=ident, seq=seq, body=b"f" * 2992)
        pieces = [(0, True, 1480), (185, True, 1480), (370, False, 40)]
        if kind == 8 and lose_last:
            pieces = pieces[:-1]
        out += [(at + i * 10_000, c.ipv4(whole, a, b, ttl=ttl, ident=2 * seq + (kind == 0),
                                         frag=piece)) for i, piece in enumerate(pieces)]
    return out


def _odd_pings(tmp_path):
    """A capture whose first packet is no echo, with what ping's rows must carry: interleaved
    sessions (one past a sequence wrap, with a duplicate reply; one with a lost reply), echoes
    over the MTU in IP fragments (one request's last fragment lost), a session whose side the
    send times decide, and traffic ping leaves alone."""
    records = [(T0 - 10**9, c.ipv4(c.udp(53, 5353, b"q" * 30), PEER, ME))]
    for k, seq in enumerate([65533, 65534, 65535, 0, 1, 2]):
        t = T0 + k * 10**8
        records += _echo(t, seq, ident=1, rtt_ns=2_000_000 + k * 1000)
        records += _echo(t + 10**7, k, ident=2, reply=k != 3, rtt_ns=5_000_000)
        records += _stamped(t + 3 * 10**7, k, 200_000, 25_000, ident=3)
        records += _fragmented_echo(t + 4 * 10**7, k, ident=4, lose_last=k == 2)
        records.append((t + 6 * 10**7, c.ipv4(c.tcp(40000, 80, seq=k, payload=b"t" * 10),
                                              ME, PEER)))
    records.append((T0 + 10**8 + 4_000_000, c.ipv4(c.icmp(4, 0, ident=1, seq=65534,
                                                          body=b"p" * 56), PEER, ME, ttl=63)))
    return _write(tmp_path, records, "odd.pcap")


@pytest.mark.parametrize("name", ["ping-sweep-sender.pcap", "ping-sweep.pcap", "udp_ping.pcapng",
                                  "chain-3hops.pcap", "tcp_2streams.pcap",
                                  "fuzz/delay-session-without-samples.pcap", "built"])
def test_only_the_rows_and_columns_it_needs_give_the_whole_files_answer(name, tmp_path):
    """Given only rows_needed's rows and READS' columns (as a path read for ping is), every
    table is the whole table's bit for bit, and an error says what the whole file has."""
    path = _odd_pings(tmp_path) if name == "built" else \
        (CAPTURES if (CAPTURES / name).exists() else DATA) / name
    assert_answers_as_on_the_whole_file(ps.ping, PING_NEEDS, path)
    assert_answers_as_on_the_whole_file(ps.ping, PING_NEEDS, path, requester=ME)


@pytest.fixture(scope="module")
def lossy_pings():
    """Two ping runs (56 and 1000 bytes, 60 echoes each) through 20 % loss and 2 x 5 ms of
    delay, captured at the pinging host and at the responder."""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-ping-") as tmp:
        out = Path(tmp) / "ping.pcap"
        run(Scenario(tool="ping", loss="20%", delay="5ms", ping_count=60,
                     ping_interval_s=0.02, ping_sizes=[56, 1000], capture="both"), out)
        yield load_sidecar(out.with_suffix(".json")), Path(tmp)


def _capture(doc, directory, side):
    return directory / next(c["file"] for c in doc["captures"] if c["side"] == side)


@pytest.mark.netns
def test_counts_equal_pings_own_summary(lossy_pings):
    doc, directory = lossy_pings
    sessions = ps.ping(_capture(doc, directory, "sender")).to_pandas("sessions")
    runs = doc["reports"][0]["raw"]["runs"]
    assert len(sessions) == len(runs)
    for run_ in runs:
        row = sessions[sessions.payload_bytes == run_["size_bytes"]].iloc[0]
        own = run_["summary"]
        assert row.side == "sender"
        assert (row.transmitted, row.received) == (own["transmitted"], own["received"])
        assert 0 < row.received < row.transmitted            # the loss rule did drop some
        for stat in ("min", "avg", "max", "mdev"):
            assert abs(row[f"rtt_{stat}_ms"] - own[f"{stat}_ms"]) <= CLOCK_BOUND_MS, \
                (stat, row[f"rtt_{stat}_ms"], own[f"{stat}_ms"])
        # each reply ping printed has its echo, the same sequence number answered
        echoes = ps.ping(_capture(doc, directory, "sender")).to_pandas("echoes")
        mine = echoes[(echoes.payload_bytes == run_["size_bytes"]) & echoes.replies.gt(0)]
        assert sorted(mine["icmp_seq"] % 65536) == sorted(r["seq"] for r in run_["replies"])


@pytest.mark.netns
def test_responder_side_capture_is_turnaround_not_rtt(lossy_pings):
    doc, directory = lossy_pings
    sessions = ps.ping(_capture(doc, directory, "receiver")).to_pandas("sessions")
    runs = doc["reports"][0]["raw"]["runs"]
    for run_ in runs:
        row = sessions[sessions.payload_bytes == run_["size_bytes"]].iloc[0]
        assert row.side == "receiver"
        assert math.isnan(row.rtt_avg_ms)
        assert row.turnaround_ms < 1.0 < run_["summary"]["min_ms"]
        # the requests that reached the responder: ping's received ones, and maybe some whose
        # reply was lost on the way back
        assert row.received >= run_["summary"]["received"]
