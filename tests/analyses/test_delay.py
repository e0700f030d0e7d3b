"""pcapstats delay: the model D = a*S + b from hand-built sweeps whose a and b are known, from
a ping-pong exchange over TCP and UDP, and the statistics against numpy's own."""
import numpy as np
import pytest
from tests.helpers import craft as c
from tests.helpers.partial import assert_answers_as_on_the_whole_file
from tests.helpers.paths import CAPTURES, DATA

import pcapstats as ps
from pcapstats.analyses import delay as delay_module
from pcapstats.capture import Needs
from pcapstats.stats import ols, t_quantile
from pcapstats.errors import NothingToReport
from pcapstats.errors import UsageError
from pcapstats.units import parse_rate

T0 = 1_700_000_000 * 10**9
ME, PEER, OTHER = "192.0.2.1", "198.51.100.2", "203.0.113.9"
RATE_BPS = 10e6                 # the bottleneck the built sweep "crosses" twice
B_MS = 20.0
SIZES = (56, 200, 500, 1000, 1400)


def _latency_ms(size: int) -> float:
    return 2 * size * 8 / RATE_BPS * 1e3 + B_MS


def _write(tmp_path, records, name):
    path = tmp_path / name
    records = sorted(records, key=lambda r: r[0])
    path.write_bytes(c.pcap([c.Record(c.raw(f), t) for t, f in records], c.LT_RAW,
                            nano=True).data)
    return path


def test_icmp_sweep_gives_the_slope_and_intercept_it_was_built_with(tmp_path):
    rng = np.random.default_rng(1)
    records, t = [], T0
    for ident, size in enumerate(SIZES):
        for seq in range(20):
            noise = rng.uniform(0, 0.05)                 # a little queueing, never negative
            if seq == 7:
                noise += 30                                # one outlier: trimmed away
            rtt_ns = int((_latency_ms(size) + noise) * 1e6)
            body = b"s" * size
            records.append((t, c.ipv4(c.icmp(4, 8, ident=ident, seq=seq, body=body), ME, PEER)))
            records.append((t + rtt_ns, c.ipv4(c.icmp(4, 0, ident=ident, seq=seq, body=body),
                                               PEER, ME, ttl=62)))
            t += 100_000_000
    result = ps.delay(_write(tmp_path, records, "sweep.pcap"))
    model = result.to_pandas("model").iloc[0]
    assert model.sizes == len(SIZES) and model.points == 100 and model.crossings == 2
    assert model.bandwidth_bps == pytest.approx(RATE_BPS, rel=0.01)
    assert model.b_ms == pytest.approx(B_MS + 0.025, abs=0.03)
    assert model.a_low_ms_per_byte <= model.a_ms_per_byte <= model.a_high_ms_per_byte
    assert model.r2 > 0.999
    sizes = result.to_pandas("sizes")
    assert sizes["n"].tolist() == [20] * len(SIZES)
    # the outlier lifts the mean
    assert (sizes["latency_mean_ms"] - sizes["latency_trimmed_ms"]).min() > 1.0


HEADERS = 40     # a built TCP segment's IP and TCP headers: on the wire with its payload


def _wire_ns(payload: int, rate_bps: float = RATE_BPS) -> int:
    """A built TCP segment's time on a link of ``rate_bps`` (a link serialises whole packets)."""
    return round((payload + HEADERS) * 8 / rate_bps * 1e9)


def _pingpong_tcp(sizes, rtt_ms, mss=1448, spacing_ns=100_000, answer_bps=None):
    """A TCP client sending each size (in MSS segments, ``spacing_ns`` apart) and the server
    echoing it, its answer's first segment ``rtt_ms(size)`` after the request's last and the
    rest arriving at ``answer_bps`` (``spacing_ns`` apart without one)."""
    cli, srv = (ME, 40000), (PEER, 7)
    seq = {0: 1000, 1: 5000}
    out, t = [], T0
    for size in sizes:
        for who, (a, b) in ((0, (cli, srv)), (1, (srv, cli))):
            left = size
            while left:
                n = min(mss, left)
                seg = c.tcp(a[1], b[1], seq=seq[who], ack=seq[1 - who], flags=c.ACK | c.PSH,
                            payload=b"e" * n)
                out.append((t, c.ipv4(seg, a[0], b[0])))
                seq[who] += n
                left -= n
                t += spacing_ns if who == 0 or answer_bps is None else \
                    _wire_ns(min(mss, left), answer_bps)
            if who == 0:
                t += int(rtt_ms(size) * 1e6)
        t += 5_000_000
    return out


def _shaped(size: int, request_bps: float | None, answer_bps: float | None,
            mss: int = 1448) -> float:
    """ms from a request's last segment to its answer's first on a store-and-forward path:
    the request's bytes through its bottleneck (none: unshaped), then the answer's first
    segment through the return one, then the base delay."""
    ms = B_MS
    if request_bps:
        ms += sum(_wire_ns(min(mss, size - k), request_bps) for k in range(0, size, mss)) / 1e6
    if answer_bps:
        ms += _wire_ns(min(size, mss), answer_bps) / 1e6
    return ms


def test_tcp_ping_pong_exchange(tmp_path):
    """Both directions through a RATE_BPS bottleneck: the answers arrive at RATE_BPS, so the
    request direction's share of the slope is the other half: crossings 2."""
    sizes = [s for s in (100, 1000, 4000, 16000) for _ in range(5)]
    records = _pingpong_tcp(sizes, lambda s: _shaped(s, RATE_BPS, RATE_BPS),
                            spacing_ns=10_000, answer_bps=RATE_BPS)
    model = ps.delay(_write(tmp_path, records, "pingpong.pcap")).to_pandas("model").iloc[0]
    assert model.source.startswith("tcp stream 0 192.0.2.1:40000")
    assert model.sizes == 4 and model.points == 20
    assert model.r2 > 0.99 and model.b_ms == pytest.approx(B_MS, abs=0.5)
    assert model.return_bps == pytest.approx(RATE_BPS, rel=1e-3)   # the answers' own spacing
    assert model.crossings == pytest.approx(2, abs=0.05)   # read whole, then answered
    assert model.bandwidth_bps == pytest.approx(RATE_BPS, rel=0.03)
    assert model.bandwidth_low_bps <= model.bandwidth_bps <= model.bandwidth_high_bps


@pytest.mark.parametrize("shaped", ["request", "answer"])
def test_a_path_shaped_one_way_is_measured_not_assumed(tmp_path, shaped):
    """Only one direction through the bottleneck (a link shaped one way, or tc on this host's
    egress): the answers' arrival says which, and the bandwidth is the rate, not twice it."""
    sizes = [s for s in (100, 1000, 4000, 16000, 32000) for _ in range(5)]
    request, answer = (RATE_BPS, None) if shaped == "request" else (None, RATE_BPS)
    records = _pingpong_tcp(sizes, lambda s: _shaped(s, request, answer), spacing_ns=10_000,
                            answer_bps=answer or 10e9)
    model = ps.delay(_write(tmp_path, records, "oneway.pcap")).to_pandas("model").iloc[0]
    assert model.crossings == 1
    assert model.bandwidth_bps == pytest.approx(RATE_BPS, rel=0.03)
    if shaped == "request":
        assert model.request_bps == pytest.approx(RATE_BPS, rel=0.03)
        assert model.return_bps > 100 * RATE_BPS
    else:
        assert np.isnan(model.request_bps)
        assert model.return_bps == pytest.approx(RATE_BPS, rel=1e-3)


def test_an_icmp_sweep_in_fragments_gives_each_directions_rate(tmp_path):
    """ping -s up to 16000 through a link shaped only toward the responder: the replies' IP
    fragments arrive back to back, so the slope is the requests' alone."""
    records, t = [], T0
    for ident, size in enumerate((1000, 4000, 8000, 16000)):
        for seq in range(5):
            body = b"s" * size
            request = c.icmp(4, 8, ident=ident, seq=seq, body=body)
            reply = c.icmp(4, 0, ident=ident, seq=seq, body=body)
            for j, piece in enumerate(_fragments(size + 8)):
                records.append((t + j * 1000, c.ipv4(request, ME, PEER, ident=ident * 10 + seq,
                                                      frag=piece)))
            back = t + int((B_MS + size * 8 / RATE_BPS * 1e3) * 1e6)
            for j, piece in enumerate(_fragments(size + 8)):
                records.append((back + j * 1200, c.ipv4(reply, PEER, ME, ttl=62,
                                                         ident=500 + ident * 10 + seq,
                                                         frag=piece)))
            t += 100_000_000
    model = ps.delay(_write(tmp_path, records, "frag.pcap")).to_pandas("model").iloc[0]
    assert model.return_bps > 100 * RATE_BPS and model.crossings == 1
    assert model.bandwidth_bps == pytest.approx(RATE_BPS, rel=0.03)


def test_a_negative_intercept_is_said(tmp_path):
    """Latency that grows faster for the larger sizes than a line through zero allows (a rate
    applied after the capture point on this host): b's whole interval below zero is said."""
    records, t = [], T0
    for ident, size in enumerate((4000, 8000, 16000, 32000)):
        for seq in range(10):
            rtt_ns = int((2 * size * 8 / RATE_BPS * 1e3 - 2.0 + 0.01 * seq) * 1e6)
            body = b"s" * size
            records.append((t, c.ipv4(c.icmp(4, 8, ident=ident, seq=seq, body=body), ME, PEER)))
            records.append((t + rtt_ns, c.ipv4(c.icmp(4, 0, ident=ident, seq=seq, body=body),
                                               PEER, ME, ttl=62)))
            t += 100_000_000
    result = ps.delay(_write(tmp_path, records, "negative.pcap"))
    assert result.to_pandas("model").iloc[0].b_high_ms < 0
    assert any("intercept b below zero" in n for n in result.notes), result.notes


def _echo_as_data_arrives(sizes, mss=1448, one_way_ns=10_000_000, window=10):
    """A TCP client writing each message in MSS segments at RATE_BPS, PSH on its last one, and
    a server that echoes each segment as it arrives (captured at the client).  The client
    has at most ``window`` segments unanswered: a longer message stalls mid-way until echoes
    come back -- a pause that is not the end of a message.  Returns the records and each
    message's (size, latency) as built."""
    cli, srv = (ME, 40001), (PEER, 7)
    seq = {0: 1000, 1: 5000}
    out, built, t = [], [], T0
    for size in sizes:
        lengths = [min(mss, size - k) for k in range(0, size, mss)]
        start, echoes = t, []
        for i, n in enumerate(lengths):
            if i >= window:                             # the window is full: wait for an echo
                t = max(t, echoes[i - window])
            flags = c.ACK | (c.PSH if i == len(lengths) - 1 else 0)
            out.append((t, c.ipv4(c.tcp(cli[1], srv[1], seq=seq[0], ack=seq[1], flags=flags,
                                        payload=b"e" * n), *(cli[0], srv[0]))))
            seq[0] += n
            echoes.append(t + 2 * one_way_ns + _wire_ns(n))
            t += _wire_ns(n)
        for n, at in zip(lengths, echoes):
            out.append((at, c.ipv4(c.tcp(srv[1], cli[1], seq=seq[1], ack=seq[0],
                                         flags=c.ACK | c.PSH, payload=b"e" * n),
                                   srv[0], cli[0], ttl=62)))
            seq[1] += n
        built.append((size, echoes[-1] - start))
        t = echoes[-1] + 5_000_000
    return out, built


def test_an_echo_server_answering_as_data_arrives(tmp_path):
    """Messages found whole although the echo overlaps them and the client stalls mid-way;
    each byte crosses the bottleneck once in D, so the bandwidth is 8 / a."""
    sizes = [s for s in (2896, 5792, 8688, 11584, 14480) for _ in range(3)] + [20272] * 3
    records, built = _echo_as_data_arrives(sizes)
    result = ps.delay(_write(tmp_path, records, "echo.pcap"))
    samples = result.to_pandas("samples")
    assert samples["size_bytes"].tolist() == sizes                 # no message split or merged
    assert samples["latency_ms"].tolist() == pytest.approx([d / 1e6 for _, d in built],
                                                           abs=1e-6)
    # the echo's first packet comes back after one segment's trip, whatever the size
    assert samples["first_answer_ms"].max() - samples["first_answer_ms"].min() < 0.01
    model = result.to_pandas("model").iloc[0]
    assert model.crossings == 1
    assert any("echoes as data arrives" in n.detail for n in result.notes)
    # without the stalled size, D = S / R + 2 x one way exactly: bandwidth R
    unstalled = ps.delay(_write(tmp_path, _echo_as_data_arrives(sizes[:-3])[0], "e2.pcap"))
    fit = unstalled.to_pandas("model").iloc[0]
    assert fit.bandwidth_bps == pytest.approx(RATE_BPS, rel=1e-3)
    assert fit.b_ms == pytest.approx(20.0, abs=0.01)


def test_a_client_pacing_itself_near_the_slope_is_said(tmp_path):
    """Requests sent at 1.2 ms a segment (9.7 Mbit/s, a paced sender) and answered after the
    same: the slope implies about what the client sent at, and a note says so; sent in a
    burst (0.1 ms a segment) there is no note."""
    sizes = [s for s in (1448, 4344, 8688, 14480) for _ in range(3)]
    paced = _pingpong_tcp(sizes, lambda s: B_MS, spacing_ns=1_200_000)
    result = ps.delay(_write(tmp_path, paced, "paced.pcap"))
    assert any("the slope may be the sender's pacing" in n for n in result.notes), result.notes
    burst = _pingpong_tcp(sizes, lambda s: _shaped(s, RATE_BPS, RATE_BPS), spacing_ns=10_000,
                          answer_bps=RATE_BPS)
    assert not any("pacing" in n for n in ps.delay(_write(tmp_path, burst, "b.pcap")).notes)
    # what to try follows the cc the lab sidecar says the client used, never assumed
    import json
    for cc, hint in (("cubic", "its sender is cubic"), ("bbr", "try cubic")):
        doc = json.loads((CAPTURES / "pingpong-sweep.json").read_text())
        doc["flows"] = [{"pair": 0, "proto": "tcp", "cc": cc, "streams": {"paced.pcap": 0}}]
        (tmp_path / "paced.json").write_text(json.dumps(doc))
        notes = [n for n in ps.delay(tmp_path / "paced.pcap").notes if "pacing" in n]
        assert len(notes) == 1 and hint in notes[0].detail, notes
        assert cc == "bbr" or "try cubic" not in notes[0].detail


def test_bulk_transfer_is_not_a_ping_pong(tmp_path):
    with pytest.raises(NothingToReport, match="no latency samples"):
        ps.delay(CAPTURES / "sp-reno-loss1pct.pcap")


def test_responder_side_sweep_is_refused_with_the_reason():
    with pytest.raises(NothingToReport, match="captured at the responder"):
        ps.delay(CAPTURES / "ping-sweep.pcap")


def test_least_squares_and_t_quantiles_against_independent_values():
    rng = np.random.default_rng(5)
    x = np.array([56, 200, 500, 1000, 1400], float)
    y = 0.0016 * x + 20 + rng.normal(0, 0.02, len(x))
    fit = ols(x, y)
    a, b = np.polyfit(x, y, 1)
    assert fit["a_ms_per_byte"] == pytest.approx(a) and fit["b_ms"] == pytest.approx(b)
    r = np.corrcoef(x, y)[0, 1]
    assert fit["r2"] == pytest.approx(r * r)
    # Student's t 97.5 % quantiles from printed tables
    for df, t in ((1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042)):
        assert t_quantile(0.975, df) == pytest.approx(t, rel=2e-3)


def test_udp_ping_pong_exchange(tmp_path):
    records, t = [], T0
    for size in [s for s in (64, 512, 1024, 1400) for _ in range(6)]:
        records.append((t, c.ipv4(c.udp(50000, 9000, b"q" * size), ME, PEER)))
        t += int(_latency_ms(size) * 1e6)
        records.append((t, c.ipv4(c.udp(9000, 50000, b"q" * size), PEER, ME, ttl=62)))
        t += 3_000_000
    model = ps.delay(_write(tmp_path, records, "udp.pcap")).to_pandas("model").iloc[0]
    assert model.source.startswith("udp stream 0")
    assert model.bandwidth_bps == pytest.approx(RATE_BPS, rel=1e-6)
    assert model.b_ms == pytest.approx(B_MS, abs=1e-6)


DELAY_NEEDS = Needs(delay_module.READS, delay_module.rows_needed)


def _fragments(n: int, mtu_payload: int = 1480) -> list[tuple[int, bool, int]]:
    """craft.ipv4's ``frag`` of each IPv4 fragment of a datagram of ``n`` transport bytes (one,
    unfragmented, when they fit)."""
    return [(at // 8, at + mtu_payload < n, min(mtu_payload, n - at))
            for at in range(0, n, mtu_payload)]


def _exchanges_and_pings(tmp_path):
    """Both sources and what delay's rows must carry: a TCP ping-pong that opens with a SYN (no
    payload: not among the rows, yet it names side A) and re-sends one segment, a UDP one
    whose larger datagrams travel in IP fragments, an ICMP sweep, and traffic delay leaves
    alone."""
    cli, srv = (ME, 40000), (PEER, 7)
    records = [(T0 - 10**6, c.ipv4(c.tcp(cli[1], srv[1], seq=999, flags=c.SYN), cli[0], srv[0]))]
    pingpong = _pingpong_tcp([s for s in (100, 1000, 4000) for _ in range(4)],
                             lambda s: 2 * s * 8 / RATE_BPS * 1e3 + B_MS)
    records += pingpong + [(pingpong[5][0] + 50_000, pingpong[5][1])]      # a re-sent segment
    t = T0 + 10**9
    for k, size in enumerate([s for s in (64, 1400, 3000) for _ in range(4)]):
        for i, (a, b, sport, dport) in enumerate(((ME, PEER, 50000, 9000),
                                                  (PEER, ME, 9000, 50000))):
            datagram = c.udp(sport, dport, b"q" * size)
            records += [(t + j * 20_000, c.ipv4(datagram, a, b, ident=2 * k + i, frag=piece))
                        for j, piece in enumerate(_fragments(size + 8))]
            t += int(_latency_ms(size) * 1e6)
        t += 3_000_000
    for seq, size in enumerate(SIZES):
        body = b"s" * size
        records.append((t, c.ipv4(c.icmp(4, 8, ident=1, seq=seq, body=body), ME, PEER)))
        records.append((t + int(_latency_ms(size) * 1e6),
                        c.ipv4(c.icmp(4, 0, ident=1, seq=seq, body=body), PEER, ME, ttl=62)))
        records.append((t + 10**6, c.ipv4(c.udp(53, 5353, b"d" * 40), OTHER, ME)))
        t += 100_000_000
    return _write(tmp_path, records, "both.pcap")


@pytest.mark.parametrize("name", ["pingpong-sweep.pcap", "ping-sweep-sender.pcap",
                                  "udp_ping.pcapng", "of13_ericsson.pcapng",
                                  "sp-reno-loss1pct.pcap", "ping-sweep.pcap",
                                  "fuzz/delay-session-without-samples.pcap", "built"])
def test_only_the_rows_and_columns_it_needs_give_the_whole_files_answer(name, tmp_path):
    """Given only rows_needed's rows and READS' columns (as a path read for delay is), every
    table is the whole table's bit for bit, and an error says the same."""
    path = _exchanges_and_pings(tmp_path) if name == "built" else \
        (CAPTURES if (CAPTURES / name).exists() else DATA) / name
    for source in ("auto", "icmp", "exchanges"):
        assert_answers_as_on_the_whole_file(ps.delay, DELAY_NEEDS, path, source=source)


SWEEP_SIZES = {"ping": [18, 2000, 8000, 16000, 32000, 65507],
               "pingpong": [18, 2000, 8000, 16000, 32000, 65535]}
# (tool, rate, shaped one way only)
SWEEPS = [("ping", "10mbit", False), ("ping", "20mbit", False), ("pingpong", "10mbit", False),
          ("pingpong", "20mbit", False), ("ping", "10mbit", True), ("ping", "40mbit", True),
          ("pingpong", "10mbit", True), ("pingpong", "40mbit", True)]
# The lab's own error, measured over these sweeps.  Its delay line releases a train a little
# early or late (its timer's lateness, tens of microseconds, over a train of 10-100 ms): a
# rate timed from the answers' own arrival is off by up to LAB_ERROR (measured: 0.00-0.14 %).
# A rate read from the slope (one way shaped: nothing else measures the requests' rate) also
# holds the time each byte takes besides the link: the delay line's work a packet on the
# unshaped way back (a few microseconds each) and the ends' copying and reassembly --
# measured here at 1-8 ns a byte (1-4 % of a byte's 200 ns at 40 Mbit/s), bounded by
# EXTRA_S_PER_BYTE.  The slope is never faster than the link.
LAB_ERROR = 0.01
EXTRA_S_PER_BYTE = 12e-9


@pytest.fixture(scope="module")
def sweeps():
    """Sweeps from 18 bytes to 64 kB captured at the requesting host through a serialising
    link (2 x 5 ms): ping (sizes past the MTU in IP fragments) and the pingpong tool over TCP
    (cubic: BBR would pace the answers), shaped both ways at 10 and 20 Mbit/s and toward the
    receiver alone at 10 and 40 Mbit/s (the answers come back unshaped)."""
    import tempfile
    from pathlib import Path
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-delay-") as tmp:
        out = []
        for tool, rate, one_way in SWEEPS:
            path = Path(tmp) / f"{tool}-{rate}{'-one-way' if one_way else ''}.pcap"
            scenario = Scenario(tool=tool, rate=rate, delay="5ms", serialize=True,
                                one_way=one_way, ping_count=8, ping_interval_s=0.01,
                                ping_sizes=SWEEP_SIZES[tool], capture="sender", snaplen=128,
                                cc="cubic" if tool != "ping" else None)
            if tool == "ping":     # a ping goes every interval: after the largest has crossed
                scenario.ping_interval_s = round(1.5 * 67045 * 8 / parse_rate(rate), 2)
                assert not any("between pings" in n for n in scenario.queue_notes())
            run(scenario, path)
            out.append((load_sidecar(path.with_suffix(".json")), path))
        yield out


@pytest.mark.netns
def test_lab_sweeps_give_the_link_rate_each_way_and_the_base_delay(sweeps):
    for doc, path in sweeps:
        model = ps.delay(path).to_pandas("model").iloc[0]
        rate = doc["impairment"]["asked"]["rate_bps"]
        one_way = doc["scenario"]["one_way"]
        print(f"{path.name}: bandwidth {model.bandwidth_bps / 1e6:.3f} "
              f"[{model.bandwidth_low_bps / 1e6:.3f}, {model.bandwidth_high_bps / 1e6:.3f}] "
              f"return {model.return_bps / 1e6:.3f} crossings {model.crossings:.3f}")
        # every message fit the queue: none was lost
        assert doc["reports"][0]["summary"]["received"] == [8] * 6, doc["reports"][0]
        if one_way:   # the answers come back unshaped: the requests' rate is the slope's all
            assert model.return_bps > 20 * rate and model.crossings == 1.0, (path.name, model)
        else:         # both ways alike: the answers' own arrival runs at the rate, and the
            # slope holds two crossings (the ends' own time a byte adds a little)
            assert model.return_bps == pytest.approx(rate, rel=0.10), (path.name, model)
            assert model.crossings == pytest.approx(2, abs=0.3), (path.name, model)
        assert model.bandwidth_bps == pytest.approx(rate, rel=0.10), (path.name, model, rate)
        # the asked rate inside the interval, give or take the lab's own error: in seconds a
        # byte, the interval's ends, less what else a byte took where the slope says it
        fastest, slowest = 8 / model.bandwidth_high_bps, 8 / model.bandwidth_low_bps
        extra = EXTRA_S_PER_BYTE if one_way else 0.0
        print(f"    {(8 / model.bandwidth_bps - 8 / rate) * 1e9:.2f} ns a byte over the link's")
        assert (1 - LAB_ERROR) * (fastest - extra) <= 8 / rate <= (1 + LAB_ERROR) * slowest, \
            (path.name, model)
        # b against ping's own median RTT of 56 bytes before the run, less that size's
        # serialisation by the fitted slope (the lab's own passes included in both); that
        # ping's median is of 10 echoes on a busy machine: a few tenths of a millisecond
        base = doc["rtt"]["median_ms"] - model.a_ms_per_byte * 56
        assert abs(model.b_ms - base) <= 0.6, (path.name, model.b_ms, base, doc["rtt"])
        assert doc["impairment"]["mechanisms"]["serialisation"] in ("netem",
                                                                    "nfqueue-delayline")
        # the lab's own account agrees: the rate it achieved toward the receiver, from the
        # dispersion of the packets that queued, is in spec
        (achieved,) = [c for c in doc["achieved"]["checks"]
                       if c["quantity"] == "rate" and c["direction"] == "toward the receiver"]
        assert achieved["in_spec"] is True, (path.name, achieved)
        assert doc["achieved"]["in_spec"] is True, (path.name, doc["achieved"])


@pytest.mark.netns
def test_ping_pong_latency_per_size_equals_the_tools_own(sweeps):
    """The capture's per-size mean against pingpong's own average: the tool's clock runs from
    before its write to after its read, the capture's from the first packet out to the last
    in, so the tool's is later by the system calls around them -- never earlier, and by less
    than 0.5 ms (measured here: 0.03-0.08 ms)."""
    for doc, path in sweeps:
        if doc["scenario"]["tool"] == "ping":
            continue
        summary = doc["reports"][0]["summary"]
        sizes = ps.delay(path).to_pandas("sizes")
        assert sizes["size_bytes"].tolist() == summary["sizes_bytes"]
        assert sizes["n"].tolist() == summary["received"]
        for mine, tools in zip(sizes["latency_mean_ms"], summary["avg_ms"]):
            assert -0.01 <= tools - mine <= 0.5, (path.name, mine, tools)
