"""pcapstats udp against answers known in advance and against iperf3's server.

- hand-built iperf3 (32- and 64-bit counters) and iperf2 datagrams with loss, reordering and a
  duplicate, checked against a plain loop that does what iperf3's receiver does (iperf_udp.c);
- a flow without iperf headers: jitter from its arrival spacing, against the same loop;
- the shipped iperf3 UDP captures (exactly) and fresh lab runs through a shaped link (up to
  the few datagrams iperf3's server leaves unread when the test ends) against the iperf3
  server's own report, at the receiver;
- matched captures (``receiver=``, ``--pair``): hand-built sender and receiver captures whose
  drops, reordering, duplicates, delays and clock offset are known by construction (the
  jitter against the same plain loop); the shipped iperf3 pairs, where matching and iperf's
  counters are two independent counts of the same loss, and iperf3's server a third; a lab
  run of a flow without counters under random loss, against the router's drop counter.
"""
import json
import struct
import warnings
from collections import deque
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import craft as c
from tests.helpers.partial import answer, assert_answers_as_on_the_whole_file, partial_captures
from tests.helpers.paths import CAPTURES, DATA

import pcapstats as ps
from pcapstats.analyses.udp import NEEDS, rows_needed
from pcapstats.cli import main
from pcapstats.errors import NothingToReport
from pcapstats.streams import own_transport

T0 = 1_700_000_000 * 10**9
SND, RCV = "192.0.2.1", "198.51.100.2"
SND6, RCV6 = "2001:db8::1", "2001:db8:0:1::2"
# capture time vs iperf3's own arrival clock: the server stamps a datagram when it reads it
# from the socket, after the queue and its own scheduling; measured on this machine's lab runs
JITTER_BOUND_MS = 0.6
# the server stops reading when the client's TEST_END reaches it, and may leave the last few
# datagrams that arrived just before it unread in its socket buffer: the capture counts them.
# Seen: 2 at 6 Mbit/s; 4 and 5 at 15 Mbit/s through 10 when CI's machine was busy (a datagram
# arrives every 1.2 ms at 10 Mbit/s).  10 ms of datagrams at the bottleneck's rate.
TAIL_SLACK = 8


def iperf3_receiver(counts, transit_s):
    """What iperf3's server counts (iperf_udp_recv, 3.12), a datagram at a time."""
    packet_count = lost = ooo = 0
    jitter, prev = 0.0, None
    for pcount, transit in zip(counts, transit_s):
        if pcount >= packet_count + 1:
            if pcount > packet_count + 1:
                lost += pcount - 1 - packet_count
            packet_count = pcount
        else:
            ooo += 1
            if lost > 0:
                lost -= 1
        if prev is not None:
            jitter += (abs(transit - prev) - jitter) / 16
        prev = transit
    return packet_count, lost, ooo, jitter


def _datagrams(tmp_path, counts, send_ns, arrive_ns, layout="iperf3", ttl=62):
    records = []
    for count, sent, arrived in zip(counts, send_ns, arrive_ns):
        sec, ns = divmod(sent, 10**9)
        if layout == "iperf3":
            head = struct.pack(">IIIxxxx", sec, ns // 1000, count)
        elif layout == "iperf3-64":
            head = struct.pack(">IIQ", sec, ns // 1000, count)
        else:
            head = struct.pack(">iIIxxxx", count, sec, ns // 1000)
        frame = c.ipv4(c.udp(5001, 5201, head + b"\x00" * 84), SND, RCV, ttl=ttl)
        records.append(c.Record(c.raw(frame), arrived))
    records.sort(key=lambda r: r.ts_ns)
    path = tmp_path / f"{layout}.pcap"
    path.write_bytes(c.pcap(records, c.LT_RAW, nano=True).data)
    return path


@pytest.mark.parametrize("layout", ["iperf3", "iperf3-64", "iperf2"])
def test_loss_order_and_jitter_of_built_datagrams(tmp_path, layout):
    rng = np.random.default_rng(7)
    first = 0 if layout == "iperf2" else 1
    counts = list(range(first, first + 200))
    sent = [T0 + k * 1_000_000 for k in range(len(counts))]          # 1 ms apart
    transit = (5_000_000 + rng.integers(0, 800_000, len(counts))).tolist()
    for gone in (10, 11, 50, 120):                                    # lost on the way
        counts[gone] = None
    counts[30], counts[31] = counts[31], counts[30]                   # swapped in flight
    keep = [k for k, x in enumerate(counts) if x is not None]
    arrivals = [sent[k] + transit[k] for k in keep]
    order = [keep[i] for i in np.argsort(arrivals, kind="stable")]
    order.append(order[60])                                            # one duplicate, late
    arrive = sorted(sent[k] + transit[k] for k in order[:-1])
    arrive.append(arrive[-1] + 1_000_000)
    got_counts = [counts[k] for k in order]
    got_sent = [sent[x - first] for x in got_counts]
    path = _datagrams(tmp_path, got_counts, got_sent, arrive, layout)
    flow = ps.udp(path).to_pandas().iloc[0]
    transit_s = [(a - s) / 1e9 for a, s in zip(arrive, got_sent)]
    top, lost, ooo, jitter = iperf3_receiver([x + (1 - first) for x in got_counts], transit_s)
    assert flow.method == layout
    assert (flow.datagrams, flow.lost, flow.out_of_order, flow.duplicates) == \
        (len(got_counts), lost, ooo, 1)
    assert flow.sent == top
    assert flow.capture_jitter_ms == pytest.approx(jitter * 1e3, rel=1e-9)
    assert flow.side == "further on"


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["iperf3", "iperf3-64", "iperf2"])
@pytest.mark.parametrize("loss", [0.67, 0.95, 0.999])
def test_counters_are_read_at_any_loss(tmp_path, layout, loss):
    """An overloaded link (iperf3 -u at three times the bottleneck: 67 % lost) or worse: the
    flow is still read by its counters, and loss is what iperf3's server counts -- the
    method never depends on how many datagrams arrived."""
    rng = np.random.default_rng(11)
    first = 0 if layout == "iperf2" else 1
    n = 20_000
    kept = np.sort(rng.choice(n, size=max(int(n * (1 - loss)), 3), replace=False))
    counts = (kept + first).tolist()
    sent = [T0 + int(k) * 100_000 for k in kept]            # 10k datagrams/s sent
    arrive = [s + 3_000_000 + int(j) * 300_000 for j, s in enumerate(sent)]   # queued
    path = _datagrams(tmp_path, counts, sent, arrive, layout)
    flow = ps.udp(path).to_pandas().iloc[0]
    transit = [(a - s) / 1e9 for a, s in zip(arrive, sent)]
    top, lost, ooo, jitter = iperf3_receiver([x + (1 - first) for x in counts], transit)
    assert flow.method == layout
    assert (flow.sent, flow.lost, flow.out_of_order) == (top, lost, ooo)
    assert flow.datagram_loss == pytest.approx(lost / top)
    assert flow.capture_jitter_ms == pytest.approx(jitter * 1e3, rel=1e-9)


def test_a_flow_without_iperf_headers_gets_jitter_from_its_spacing(tmp_path):
    rng = np.random.default_rng(3)
    arrive = np.cumsum(2_000_000 + rng.integers(-300_000, 300_000, 300)) + T0
    records = [c.Record(c.raw(c.ipv4(c.udp(4000, 4001, bytes(rng.integers(0, 255, 100,
                                                                          dtype=np.uint8))),
                                     SND, RCV, ttl=64)), int(t)) for t in arrive]
    path = tmp_path / "plain.pcap"
    path.write_bytes(c.pcap(records, c.LT_RAW, nano=True).data)
    flow = ps.udp(path).to_pandas().iloc[0]
    gaps = np.diff(arrive)
    deviation = np.r_[0, np.cumsum(gaps - np.median(gaps))] / 1e9
    _, _, _, jitter = iperf3_receiver(range(1, len(arrive) + 1), deviation)
    assert flow.method == "arrival spacing" and flow.side == "sender"
    assert flow.isna()["lost"]
    assert flow.capture_jitter_ms == pytest.approx(jitter * 1e3, rel=1e-9)


def test_a_capture_without_udp_is_one_clear_error():
    with pytest.raises(NothingToReport, match="no UDP datagrams"):
        ps.udp(CAPTURES / "tcp_2streams.pcap")


def _server_report(doc):
    return doc["reports"][0]["raw"]["server"]["end"]["streams"][0]["udp"]


@pytest.mark.parametrize("name", ["iperf3-udp-15mbit-via-10mbit.receiver",
                                  "iperf3-udp-5mbit-via-10mbit.receiver",
                                  "iperf3-udp-loss1pct", "iperf3-udp-loss10pct",
                                  "iperf3-udp-loss30pct"])
def test_shipped_receiver_captures_equal_the_iperf3_server(name):
    doc = json.loads((CAPTURES / f"{name.removesuffix('.receiver')}.json").read_text())
    server = _server_report(doc)
    flow = ps.udp(CAPTURES / f"{name}.pcap").to_pandas().query("method == 'iperf3'")
    assert len(flow) == 1
    flow = flow.iloc[0]
    assert (flow.sent, flow.lost, flow.out_of_order) == \
        (server["packets"], server["lost_packets"], server["out_of_order"])
    assert abs(flow.capture_jitter_ms - server["jitter_ms"]) <= JITTER_BOUND_MS


@pytest.fixture(scope="module")
def udp_runs():
    """iperf3 UDP at 6 and 15 Mbit/s through a 10 Mbit/s link, captured at both ends: the
    second loses a third at the bottleneck's queue.  (No random loss: iperf3 3.12 gives up
    when its 4-byte UDP connect message is lost.)"""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-udp-") as tmp:
        docs = []
        for rate in ("6mbit", "15mbit"):
            out = Path(tmp) / f"udp-{rate}.pcap"
            run(Scenario(tool="iperf3-udp", udp_rate=rate, rate="10mbit", delay="5ms",
                         duration_s=3, capture="both", snaplen=128), out)
            docs.append((load_sidecar(out.with_suffix(".json")), Path(tmp)))
        yield docs


@pytest.mark.netns
def test_lab_runs_equal_the_iperf3_server(udp_runs):
    for doc, directory in udp_runs:
        server = _server_report(doc)
        files = {cap["side"]: directory / cap["file"] for cap in doc["captures"]}
        flow = ps.udp(files["receiver"]).to_pandas().query("method == 'iperf3'").iloc[0]
        assert 0 <= flow.sent - server["packets"] <= TAIL_SLACK, (flow.sent, server)
        assert abs(flow.lost - server["lost_packets"]) <= TAIL_SLACK, (flow.lost, server)
        assert flow.out_of_order == server["out_of_order"]
        if doc["scenario"]["udp_rate"] == "15mbit":       # a third over the bottleneck
            assert flow.datagram_loss > 0.2, flow
        else:                                             # under it: the queue keeps up
            assert flow.datagram_loss < 0.01, flow
        assert abs(flow.capture_jitter_ms - server["jitter_ms"]) <= JITTER_BOUND_MS, \
            (flow.capture_jitter_ms, server["jitter_ms"])
        at_sender = _row(ps.udp(files["sender"]))
        assert at_sender.side == "sender" and at_sender.method == "iperf3 report"
        assert (at_sender.sent, at_sender.lost) == (server["packets"], server["lost_packets"])
        assert at_sender.datagrams - 1 >= flow.sent            # every count left the sender


@pytest.fixture(scope="module")
def loads():
    """iperf3 -u at 5, 9, 12, 30 and 60 Mbit/s through a 10 Mbit/s link (the seeds' test of
    rates below and above the bottleneck), whole packets captured at both ends: up to 83 %
    lost at the router's queue."""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-udp-loads-") as tmp:
        runs = []
        for rate in ("5mbit", "9mbit", "12mbit", "30mbit", "60mbit"):
            out = Path(tmp) / f"udp-{rate}.pcap"
            run(Scenario(tool="iperf3-udp", udp_rate=rate, rate="10mbit", duration_s=2,
                         capture="both"), out)
            doc = load_sidecar(out.with_suffix(".json"))
            runs.append((rate, doc, {c["side"]: Path(tmp) / c["file"] for c in doc["captures"]}))
        yield runs


def _main_flow(path):
    flows = ps.udp(path).to_pandas()
    return flows.loc[flows["datagrams"].idxmax()]


@pytest.mark.netns
def test_every_load_gives_iperf3s_loss_at_both_ends_and_passes_verify(loads, tmp_path):
    """At the receiver the counters give iperf3's server's numbers (up to the datagrams it
    left unread at TEST_END); at the sender the loss is iperf3's own report -- from the
    sidecar, and, without it, from the results iperf3 exchanged on its control connection in
    the capture -- never a 0 % that only means "not lost yet".  verify passes every run, also
    those whose last datagrams were lost."""
    overloaded = 0
    for rate, doc, files in loads:
        server = _server_report(doc)
        at_receiver = _main_flow(files["receiver"])
        assert at_receiver.method == "iperf3", (rate, at_receiver)
        assert 0 <= at_receiver.sent - server["packets"] <= TAIL_SLACK, (rate, at_receiver)
        assert abs(at_receiver.lost - server["lost_packets"]) <= TAIL_SLACK, (rate, server)
        assert abs(at_receiver.capture_jitter_ms - server["jitter_ms"]) <= JITTER_BOUND_MS
        assert at_receiver.app_jitter_ms == pytest.approx(server["jitter_ms"])
        overloaded += server["lost_packets"] > server["packets"] / 2
        at_sender = _main_flow(files["sender"])
        assert at_sender.method == "iperf3 report" and at_sender.side == "sender"
        assert (at_sender.sent, at_sender.lost) == (server["packets"], server["lost_packets"])
        alone = tmp_path / f"{rate}.pcap"                # no sidecar beside it
        alone.write_bytes(files["sender"].read_bytes())
        exchanged = _main_flow(alone)
        assert exchanged.method == "iperf3 report", (rate, exchanged)
        assert (exchanged.sent, exchanged.lost) == (server["packets"], server["lost_packets"])
        assert exchanged.app_jitter_ms == pytest.approx(server["jitter_ms"], rel=1e-6)
        for side, path in files.items():
            checked = ps.verify(path)
            assert checked.verdict == "pass", (rate, side, checked.to_pandas("checks"))
    assert overloaded >= 2                            # 30 and 60 Mbit/s lose most


# -- matched captures ------------------------------------------------------------------------

def _capture(path, packets):
    """A raw-IP nanosecond pcap of ``packets`` -- (Built, time ns) or (Built, time ns, bytes
    kept) -- in time order (ties in the order given)."""
    records = sorted((c.Record(c.raw(p[0]), p[1], p[2] if len(p) > 2 else None)
                      for p in packets), key=lambda r: r.ts_ns)
    path.write_bytes(c.pcap(records, c.LT_RAW, nano=True).data)
    return path


def _v4(payload, ttl, ident, sport=4000, dport=5000, src=SND, dst=RCV):
    return c.ipv4(c.udp(sport, dport, payload), src, dst, ttl=ttl, ident=ident)


def _row(result, direction="a_to_b"):
    rows = result.to_pandas().query("direction == @direction")
    assert len(rows) == 1, rows
    return rows.iloc[0]


@pytest.mark.parametrize("offset_ns", [0, 3_700_123_457, -250_000_001])
def test_matched_captures_count_drops_a_swap_a_duplicate_and_the_jitter(tmp_path, offset_ns):
    """Known drops, 30 overtaken by 31, 60 and 150 twice, per-datagram delays, and the
    receiver's clock off by ``offset_ns``: the expected out-of-order count and RFC 3550 jitter
    come from the plain loop (iperf3_receiver), over the arrivals as built."""
    rng = np.random.default_rng(11)
    n, dropped = 200, {10, 11, 50, 120}
    payloads = [bytes(rng.integers(0, 256, 120, dtype=np.uint8)) for _ in range(n)]
    sent = [T0 + k * 1_000_000 + int(rng.integers(0, 100_000)) for k in range(n)]
    arrive = {k: sent[k] + 5_000_000 + int(rng.integers(0, 700_000)) + offset_ns
              for k in range(n) if k not in dropped}
    arrive[30] = (arrive[31] + arrive[32]) // 2                 # overtaken by 31
    events = sorted(arrive.items(), key=lambda e: e[1])
    events.append((60, (arrive[100] + arrive[101]) // 2))       # a second copy of 60, late
    events.append((150, arrive[150] + 1))                       # and of 150, at once
    events.sort(key=lambda e: e[1])
    sender = _capture(tmp_path / "s.pcap", [(_v4(payloads[k], 64, k), sent[k]) for k in range(n)])
    receiver = _capture(tmp_path / "r.pcap", [(_v4(payloads[k], 63, k), t) for k, t in events])
    _, _, ooo, jitter_ns = iperf3_receiver([k + 1 for k, _ in events],
                                           [t - sent[k] for k, t in events])
    result = ps.udp(sender, receiver=receiver)
    flow = _row(result)
    assert flow.method == "matched captures"
    assert (flow.sent, flow.lost, flow.duplicates, flow.out_of_order) == (n, 4, 2, ooo)
    assert ooo == 3                             # 30 after 31, and the copies of 60 and 150
    assert flow.datagram_loss == pytest.approx(4 / n)
    assert flow.capture_jitter_ms == pytest.approx(jitter_ns / 1e6, rel=1e-9)
    assert (flow.datagrams, flow.side) == (len(events), "further on")   # what arrived
    assert result.notes == []
    alone = _row(ps.udp(receiver))
    assert alone.method == "arrival spacing" and alone.isna()["lost"]


@pytest.mark.parametrize("version", [4, 6])
def test_identical_payloads_are_told_apart_by_ip_id_else_first_in_first_out(tmp_path, version):
    """Every second datagram is zero-filled, and some of each kind are lost.  IPv4's
    identification tells the zero-filled ones apart (each pairs with itself: in order, one
    transit time, no jitter).  IPv6 has none: they have one key and pair first-in-first-out,
    so after a lost one each later zero-filled arrival stands for the one sent before it, which
    a distinct one overtook (the expected count from a plain queue a payload)."""
    rng = np.random.default_rng(5)
    n, dropped = 40, {3, 17, 18, 30}
    payloads = [bytes(100) if k % 2 else bytes(rng.integers(0, 256, 100, dtype=np.uint8))
                for k in range(n)]

    def datagram(k, ttl):
        if version == 4:
            return _v4(payloads[k], ttl, 1000 + k)
        return c.ipv6(c.udp(4000, 5000, payloads[k]), SND6, RCV6, hlim=ttl)
    sender = _capture(tmp_path / "s.pcap",
                      [(datagram(k, 64), T0 + k * 1_000_000) for k in range(n)])
    receiver = _capture(tmp_path / "r.pcap", [(datagram(k, 63), T0 + k * 1_000_000 + 2_000_000)
                                              for k in range(n) if k not in dropped])
    queues: dict[bytes, deque] = {}
    for k in range(n):
        queues.setdefault(payloads[k] if version == 6 else k, deque()).append(k)
    arrived = [queues[payloads[k] if version == 6 else k].popleft()
               for k in range(n) if k not in dropped]
    _, _, ooo, jitter_ns = iperf3_receiver(
        [k + 1 for k in arrived], [(T0 + k * 1_000_000 + 2_000_000) - (T0 + j * 1_000_000)
                                   for k, j in zip([k for k in range(n) if k not in dropped],
                                                   arrived)])
    flow = _row(ps.udp(sender, receiver=receiver))
    assert flow.method == "matched captures"
    assert (flow.sent, flow.lost, flow.duplicates) == (n, len(dropped), 0)
    assert flow.out_of_order == ooo and flow.capture_jitter_ms == pytest.approx(jitter_ns / 1e6)
    assert (ooo == 0 and jitter_ns == 0) == (version == 4)


def test_a_receiver_capture_cut_short_is_matched_on_the_bytes_both_kept(tmp_path):
    """IP id 0 on every datagram (as Linux sends unconnected datagrams with DF): only the
    payload tells them apart, and the receiver kept 24 bytes of it, the sender 40."""
    rng = np.random.default_rng(9)
    n, dropped = 100, {5, 6, 77}
    payloads = [bytes(rng.integers(0, 256, 300, dtype=np.uint8)) for _ in range(n)]
    sender = _capture(tmp_path / "s.pcap", [(_v4(payloads[k], 64, 0), T0 + k * 1_000_000,
                                             28 + 40) for k in range(n)])
    receiver = _capture(tmp_path / "r.pcap", [(_v4(payloads[k], 63, 0), T0 + k * 1_000_000
                                               + 3_000_000, 28 + 24)
                                              for k in range(n) if k not in dropped])
    assert ps.read(receiver).column("payload_cap_len").max() == 24
    flow = _row(ps.udp(sender, receiver=receiver))
    assert flow.method == "matched captures"
    assert (flow.sent, flow.lost, flow.duplicates, flow.out_of_order) == (n, 3, 0, 0)
    assert flow.capture_jitter_ms == 0


def test_ip_fragmented_datagrams_are_matched_by_their_first_fragment(tmp_path):
    """Every third datagram is 3000 bytes, sent in two IPv4 fragments (only the first carries
    the UDP header); datagrams 4 (fragmented) and 10 (whole) are lost."""
    rng = np.random.default_rng(8)
    n, dropped = 30, {4, 10}
    payloads = [bytes(rng.integers(0, 256, 3000 if k % 3 == 1 else 200, dtype=np.uint8))
                for k in range(n)]

    def frames(k, ttl):
        udp = c.udp(4000, 5000, payloads[k])
        if len(payloads[k]) < 1000:
            return [_v4(payloads[k], ttl, k)]
        return [c.ipv4(udp, SND, RCV, ttl=ttl, ident=k, frag=(0, True, 1480)),
                c.ipv4(udp, SND, RCV, ttl=ttl, ident=k, frag=(185, False, 3008 - 1480))]
    sender = _capture(tmp_path / "s.pcap", [(f, T0 + k * 1_000_000 + j) for k in range(n)
                                            for j, f in enumerate(frames(k, 64))])
    receiver = _capture(tmp_path / "r.pcap", [(f, T0 + k * 1_000_000 + 2_000_000 + j)
                                              for k in range(n) if k not in dropped
                                              for j, f in enumerate(frames(k, 63))])
    flow = _row(ps.udp(sender, receiver=receiver))
    assert flow.method == "matched captures"
    assert (flow.sent, flow.lost, flow.duplicates, flow.out_of_order) == (n, 2, 0, 0)
    assert flow.capture_jitter_ms == 0


def test_what_the_receiver_capture_could_not_see_is_left_out_not_lost(tmp_path):
    """The receiver capture starts after datagram 19 arrived and stops before 190 arrives, and
    holds 3 datagrams of the flow the sender capture has not: 200 sent, 30 of them left out,
    3 lost; the 3 others are neither lost nor duplicates."""
    rng = np.random.default_rng(4)
    n, dropped = 200, {50, 51, 150}
    payloads = [bytes(rng.integers(0, 256, 80, dtype=np.uint8)) for _ in range(n + 3)]
    sent = [T0 + k * 1_000_000 for k in range(n)]
    delay = [5_000_000 + int(rng.integers(0, 800_000)) for _ in range(n)]
    sender = _capture(tmp_path / "s.pcap", [(_v4(payloads[k], 64, k), sent[k]) for k in range(n)])
    arrivals = [(_v4(payloads[k], 63, k), sent[k] + delay[k]) for k in range(20, 190)
                if k not in dropped]
    arrivals += [(_v4(payloads[n + j], 63, 9000 + j), sent[100 + j] + 5_500_000)
                 for j in range(3)]
    receiver = _capture(tmp_path / "r.pcap", arrivals)
    result = ps.udp(sender, receiver=receiver)
    flow = _row(result)
    assert (flow.sent, flow.lost, flow.duplicates, flow.out_of_order) == (170, 3, 0, 0)
    assert flow.datagrams == 170 - 3 + 3
    notes = " ".join(result.notes)
    assert "30 datagram(s) sent unseen: not counted" in notes
    assert "3 received datagram(s) not sent: not counted" in notes


def test_each_direction_is_matched_from_where_it_was_sent(tmp_path):
    """An echo: requests S -> R, replies R -> S, captured at S and at R (TTL 64 where sent, 63
    after one router).  Request 20 and replies 7, 8, 40 are lost.  Given (S, R) the requests
    are matched and the replies left with a note; given (R, S), the other way round."""
    rng = np.random.default_rng(2)
    n = 60
    payloads = [bytes(rng.integers(0, 256, 64, dtype=np.uint8)) for _ in range(n)]
    at_s, at_r = [], []
    for k in range(n):
        t = T0 + k * 2_000_000
        at_s.append((_v4(payloads[k], 64, k, 4000, 7), t))
        if k == 20:
            continue
        at_r.append((_v4(payloads[k], 63, k, 4000, 7), t + 1_000_000))
        at_r.append((_v4(payloads[k], 64, 500 + k, 7, 4000, RCV, SND), t + 1_200_000))
        if k not in (7, 8, 40):
            at_s.append((_v4(payloads[k], 63, 500 + k, 7, 4000, RCV, SND), t + 1_300_000))
    s, r = _capture(tmp_path / "s.pcap", at_s), _capture(tmp_path / "r.pcap", at_r)
    forward = ps.udp(s, receiver=r)
    requests, replies = _row(forward, "a_to_b"), _row(forward, "b_to_a")
    assert (requests.method, requests.sent, requests.lost) == ("matched captures", n, 1)
    assert replies.method != "matched captures" and replies.isna()["lost"]
    assert any("b_to_a" in note and "other way round" in note for note in forward.notes)
    backward = ps.udp(r, receiver=s)
    replies = _row(backward, "b_to_a")
    assert (replies.method, replies.sent, replies.lost) == ("matched captures", n - 1, 3)
    assert _row(backward, "a_to_b").isna()["lost"]


def test_a_flow_not_in_the_receiver_capture_is_not_found_not_lost(tmp_path):
    """Behind a NAT the receiver sees another source address and port: not followed."""
    payloads = [bytes([k]) * 50 for k in range(20)]
    sender = _capture(tmp_path / "s.pcap", [(_v4(payloads[k], 64, k), T0 + k * 1_000_000)
                                            for k in range(20)])
    receiver = _capture(tmp_path / "r.pcap", [(_v4(payloads[k], 63, k, 61000, 5000,
                                                    "203.0.113.7", RCV), T0 + k * 1_000_000)
                                              for k in range(20)])
    result = ps.udp(sender, receiver=receiver)
    flow = _row(result)
    assert (flow.method, flow.datagrams) == ("none", 0) and flow.isna()["lost"]
    notes = " ".join(f"{n} {n.detail}" for n in result.notes)
    assert "not in the receiver capture: loss unknown" in notes and "NAT" in notes
    assert "1 UDP flow direction(s) only in the receiver capture" in notes


@pytest.mark.parametrize("name", ["iperf3-udp-15mbit-via-10mbit", "iperf3-udp-5mbit-via-10mbit"])
def test_shipped_pairs_matched_agree_with_iperf_counters_and_the_server(name):
    """Matching the sender capture's datagrams against the receiver's, and iperf's counters at
    the receiver, are two independent counts of the same loss; iperf3's server is a third.
    They differ by what iperf3's rule cannot see, exactly: datagrams lost after the last one
    that arrived (the sender capture's highest count minus the server's 'packets').  Matching
    counts every datagram, with no TEST_END cut; none arrived after TEST_END here."""
    doc = json.loads((CAPTURES / f"{name}.json").read_text())
    server = _server_report(doc)
    sender, receiver = CAPTURES / f"{name}.sender.pcap", CAPTURES / f"{name}.receiver.pcap"
    counted = ps.udp(receiver).to_pandas().query("method == 'iperf3'").iloc[0]
    at_sender = _row(ps.udp(sender))
    matched = _row(ps.udp(sender, receiver=receiver, counters=False))
    assert matched.method == "matched captures"
    assert counted.after_end == 0
    unseen_tail = at_sender.datagrams - 1 - server["packets"]      # all sent, but the connect
    assert 0 <= unseen_tail <= TAIL_SLACK
    assert matched.lost == counted.lost + unseen_tail == server["lost_packets"] + unseen_tail
    assert matched.sent == at_sender.datagrams          # the connect datagram too
    assert (matched.out_of_order, matched.duplicates) == (server["out_of_order"], 0)
    assert abs(matched.capture_jitter_ms - server["jitter_ms"]) <= JITTER_BOUND_MS
    # with the counters read, the pair keeps iperf3's own numbers, as at the receiver alone
    paired = _row(ps.udp(sender, receiver=receiver))
    for column in ("method", "sent", "lost", "out_of_order", "capture_jitter_ms", "datagrams"):
        assert paired[column] == counted[column], column


@pytest.fixture(scope="module")
def udp_file_run():
    """A plain UDP file transfer (no iperf counters) through 5 % random loss, captured at
    both ends: about 5 s."""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-udp-pair-") as tmp:
        out = Path(tmp) / "udp-file.pcap"
        run(Scenario(tool="udp-file", loss="5%", rate="10mbit", bytes="2MB", capture="both"),
            out)
        doc = load_sidecar(out.with_suffix(".json"))
        files = {cap["side"]: Path(tmp) / cap["file"] for cap in doc["captures"]}
        yield doc, ps.udp(files["sender"], receiver=files["receiver"])


@pytest.mark.netns
def test_lab_matched_loss_equals_the_router_drop_counter(udp_file_run):
    """The router's loss rule counts what it dropped on the way to the receiver: the flow's
    datagrams, and also the RTT pings the run sends before its captures start.  No reply is
    dropped (the other direction has no loss rule), so a ping without a reply lost its
    request; the rate limit's own drops (tbf, after the rule) are lost datagrams too."""
    doc, result = udp_file_run
    counters = doc["impairment"]["counters"]
    data = counters["loss"]["data"]
    assert counters["loss"]["ack"]["dropped_packets"] == 0
    pings, replies = doc["rtt"]["count"], len(doc["rtt"]["samples_ms"])
    queue_drops = sum(q["dropped_packets"] for q in counters["qdiscs"].values())
    flow = _row(result)
    assert flow.method == "matched captures"
    assert flow.sent == data["offered_packets"] - pings      # all the rule saw besides pings
    assert flow.lost == data["dropped_packets"] - (pings - replies) + queue_drops
    assert flow.lost > 0 and flow.duplicates == 0
    assert flow.datagrams == flow.sent - flow.lost
    summary = doc["reports"][0]["summary"]                   # the programs' own counts
    assert flow.sent >= summary["datagrams_sent"] and \
        flow.datagrams >= summary["datagrams_received"]


# -- the command ----------------------------------------------------------------------------

PAIR = [str(CAPTURES / "iperf3-udp-15mbit-via-10mbit.sender.pcap"),
        str(CAPTURES / "iperf3-udp-15mbit-via-10mbit.receiver.pcap")]


@pytest.mark.parametrize("extra", [[], ["--no-counters"], ["--all"]])
def test_pair_command_fits_80_columns(extra, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["udp", "--pair", *PAIR, *extra]) == 0
    out = capsys.readouterr().out
    assert ("matched captures" in out) == (extra == ["--no-counters"])
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide or extra == ["--all"], wide


@pytest.mark.parametrize("argv, needle", [
    (["--pair", PAIR[0]], "requires 2 arguments"),
    (["--pair", *PAIR, PAIR[0]], "--pair takes its two captures itself"),
    ([], "no capture given"),
    (["--pair", PAIR[0], str(CAPTURES / "tcp_2streams.pcap")], "nothing to match"),
])
def test_bad_pair_usage_is_one_line(argv, needle, capsys):
    code = main(["udp", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(err) == 1 and err[0].startswith("pcapstats: error:") and needle in err[0], err


def test_a_sender_without_udp_has_nothing_to_report(capsys):
    """--pair with a TCP-only capture as the sender: no UDP flow to match (exit 1, one line
    saying what the capture holds)."""
    code = main(["udp", "--pair", str(CAPTURES / "tcp_2streams.pcap"), PAIR[1]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, (code, err)
    assert len(err) == 1 and err[0].startswith("pcapstats: nothing to report: no UDP "
                                                "datagrams") and "1414 TCP" in err[0], err


def test_jitter_of_a_long_flow_equals_the_plain_loop():
    """RFC 3550's J += (|D| - J) / 16 over 50,000 transits, looped in Python, against the
    vectorised sum that leaves out differences older than their weight can show."""
    from pcapstats.analyses.udp import rfc3550_jitter
    rng = np.random.default_rng(3)
    transit = np.cumsum(rng.normal(0, 200_000, 50_000)).astype(np.int64) + 10**9
    jitter = 0.0
    for a, b in zip(transit[:-1], transit[1:]):
        jitter += (abs(float(b) - float(a)) - jitter) / 16
    assert rfc3550_jitter(transit) == pytest.approx(jitter, rel=1e-12)


# -- what udp reads --------------------------------------------------------------------------

SHIPPED_UDP = [CAPTURES / f"{n}.pcap" for n in (
    "iperf3-udp-15mbit-via-10mbit.receiver", "iperf3-udp-15mbit-via-10mbit.sender",
    "iperf3-udp-5mbit-via-10mbit.receiver", "iperf3-udp-loss1pct", "iperf3-udp-loss30pct")] + [
    CAPTURES / "udp_ping.pcapng", DATA / "dns_isp_hijack.pcapng",
    DATA / "fuzz" / "timestamp-past-2262.pcapng"]
PAIRS = [(CAPTURES / f"{n}.sender.pcap", CAPTURES / f"{n}.receiver.pcap")
         for n in ("iperf3-udp-15mbit-via-10mbit", "iperf3-udp-5mbit-via-10mbit")]


def _read(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ps.read(path)


@pytest.mark.parametrize("path", SHIPPED_UDP, ids=lambda p: p.name)
def test_the_rows_and_columns_it_names_give_the_whole_tables_answers(path):
    """A Capture of rows_needed's rows (with READS' columns alone, reading any other column
    or layer raises) gives exactly the whole table's flows, with and without iperf's
    counters, a stream at a time too."""
    stream = int(_read(path).column("udp_stream")[own_transport(_read(path), "udp")][0])
    for options in ({}, {"counters": False}, {"stream": stream}):
        assert_answers_as_on_the_whole_file(ps.udp, NEEDS, path, **options)


def _assert_pairs_answer_as_whole(sender, receiver, **options):
    """Both captures of only what udp needs, each way (rows_needed is the same for both)."""
    want = answer(ps.udp, _read(sender), receiver=_read(receiver), **options)
    for (how, up), (_, down) in zip(partial_captures(sender, NEEDS),
                                    partial_captures(receiver, NEEDS)):
        assert answer(ps.udp, up, receiver=down, **options) == want, how


@pytest.mark.parametrize("sender, receiver", PAIRS + [p[::-1] for p in PAIRS],
                         ids=lambda p: p.name)
def test_matched_captures_of_only_those_rows_give_the_whole_tables_answers(sender, receiver):
    for counters in (True, False):
        _assert_pairs_answer_as_whole(sender, receiver, counters=counters)


def test_times_count_from_the_captures_first_packet_not_the_first_row_read(tmp_path):
    """The first packet is a TCP segment udp does not read, and the clock steps back after it
    (so the earliest packet, which a receiver capture's span needs, is another): first_s still
    counts from the first packet, and only the rows named are kept."""
    packets = [(c.ipv4(c.tcp(40000, 5201, flags=0x002), SND, RCV), T0 + 5_000_000),
               (c.ipv4(c.icmp(4, 8, ident=1, seq=1), SND, RCV), T0)]
    packets += [(_v4(bytes(20), 64, k), T0 + 7_000_000 + k * 1_000_000) for k in range(12)]
    path = tmp_path / "step-back.pcap"       # in this order: _capture would sort by time
    path.write_bytes(c.pcap([c.Record(c.raw(p), t) for p, t in packets], c.LT_RAW,
                            nano=True).data)
    assert rows_needed(_read(path)).tolist() == [False] + [True] * 13  # the earliest, datagrams
    assert ps.udp(_read(path)).to_pandas().iloc[0].first_s == pytest.approx(0.002)  # from row 0
    assert_answers_as_on_the_whole_file(ps.udp, NEEDS, path)


def test_a_receiver_capture_of_only_those_rows_keeps_its_span(tmp_path):
    """The receiver capture starts with a ping 2 ms after datagram 0 was sent, and has
    datagrams 20 on (5 ms on the way): 0 and 1 could not have arrived while it ran, 2 to 19
    were lost.  Its first packet, no datagram, must be read for that."""
    payloads = [bytes([k]) * 40 for k in range(100)]
    sender = _capture(tmp_path / "s.pcap", [(_v4(payloads[k], 64, k), T0 + k * 1_000_000)
                                            for k in range(100)])
    receiver = _capture(tmp_path / "r.pcap", [(c.ipv4(c.icmp(4, 8, ident=1, seq=1), SND, RCV),
                                               T0 + 7_000_000)] + [
        (_v4(payloads[k], 63, k), T0 + k * 1_000_000 + 5_000_000) for k in range(20, 100)])
    flow = _row(ps.udp(sender, receiver=_read(receiver)))
    assert (flow.sent, flow.lost) == (98, 18)
    _assert_pairs_answer_as_whole(sender, receiver)


def test_the_rows_needed_are_udp_and_one_byte_tcp_segments():
    cap = _read(CAPTURES / "iperf3-udp-loss1pct.pcap")
    need = rows_needed(cap)
    udp_rows = own_transport(cap, "udp")
    one_byte = own_transport(cap, "tcp") & (cap.column("tcp_len") == 1)
    assert need[udp_rows | one_byte].all()
    assert (need & ~(udp_rows | one_byte)).sum() <= 2        # the earliest and latest packets
    assert one_byte.sum() < 10 and own_transport(cap, "tcp").sum() > 10


def test_iperf3s_counts_equal_the_plain_loop_on_any_order():
    """Loss, order and duplicates of shuffled, dropped and repeated counts (from 0 or 1)
    against iperf3's receiver loop and a set, without the sort or the walk of every
    datagram they are counted with."""
    from pcapstats.analyses.udp import _iperf3_counts
    rng = np.random.default_rng(12)
    for trial in range(500):
        n = int(rng.integers(1, 300))
        counts = np.arange(int(rng.integers(0, 2)), n)
        counts = counts[rng.random(len(counts)) > 0.1]
        if not len(counts):
            continue
        swaps = rng.integers(0, len(counts), (int(rng.integers(0, 8)), 2))
        for i, j in swaps:
            counts[i], counts[j] = counts[j], counts[i]
        counts = np.insert(counts, rng.integers(0, len(counts), 3), rng.choice(counts, 3))
        top, lost, ooo, _ = iperf3_receiver(counts.tolist(), [0] * len(counts))
        seen, duplicates = set(), 0
        for x in counts.tolist():
            duplicates += x in seen
            seen.add(x)
        assert _iperf3_counts(counts) == (top, lost, ooo, duplicates), counts


def test_matching_pairs_equal_keys_first_in_first_out_as_a_plain_loop():
    """match() against a queue a key: the k-th arrival of a key is its k-th sending, later
    ones are duplicates of its last, arrivals of keys never sent are unmatched."""
    from pcapstats.analyses.udp_match import match
    rng = np.random.default_rng(13)
    for trial in range(300):
        up = rng.integers(0, int(rng.integers(1, 40)), int(rng.integers(1, 60))).astype(np.uint64)
        down = rng.integers(0, 45, int(rng.integers(1, 60))).astype(np.uint64)
        up_ns = np.arange(len(up), dtype=np.int64) * 1000
        down_ns = np.arange(len(down), dtype=np.int64) * 1000 + 500
        got = match(up, up_ns, down, down_ns, (0, 10**12))
        sendings: dict[int, list[int]] = {}
        for i, k in enumerate(up.tolist()):
            sendings.setdefault(k, []).append(i)
        arrived: dict[int, int] = {}
        pairs, transits, duplicates, unmatched = [], [], 0, 0
        for j, k in enumerate(down.tolist()):
            if k not in sendings:
                unmatched += 1
                continue
            rank = arrived.get(k, 0)
            arrived[k] = rank + 1
            duplicates += rank >= len(sendings[k])
            pairs.append(sendings[k][min(rank, len(sendings[k]) - 1)])
            if rank < len(sendings[k]):
                transits.append(int(down_ns[j] - up_ns[pairs[-1]]))
        assert got.sent_index.tolist() == pairs
        assert (got.duplicates, got.unmatched) == (duplicates, unmatched)
        # sent: those that could have arrived within the downstream span, by the fastest
        # and slowest transit seen
        could = [i for i in range(len(up)) if not transits or (
            up_ns[i] + max(transits) >= 0 and up_ns[i] + min(transits) <= 10**12)]
        assert (got.sent, got.lost) == (len(could), len(set(could) - set(pairs)))
