"""`pcapstats flavour` (and cwnd's MSS) on paths built without pcapstats.lab (issue 16: the
congestion control from any capture point, on any path).

The captures come from :mod:`tests.helpers.independent_path`: sender - router - receiver in
namespaces made with ``ip`` / ``tc`` / ``iptables`` / ``tcpdump`` / ``iperf3`` as a user or a
course would, under conditions the project's lab does not make: offloads at the kernel's
defaults (TSO/GSO on: the sender's capture holds segments larger than the MSS), no
propagation delay (the RTT is tbf's queue, 20 Mbit/s), loss from ``iptables -m statistic``
(every 50th packet: deterministic; or 1 % at random), three capture points of one run
(``tcpdump -s 128`` on the sender's interface, the receiver's, and mid-path), ``iperf3 -C
CC``, one flow or two of different cc sharing the bottleneck.  Mid-path is the router's
ingress from the sender (before the loss and the bottleneck; its packets are of the sender's
kind: data that crossed no router, ACKs that crossed one); in the ``-2routers`` run (sender -
router - router2 - receiver) it is router2's ingress from router, after the loss and before
the bottleneck, where both directions have crossed a router.

The answers are known without pcapstats: the cc of each flow (iperf3 -C, and the cc iperf3's
-J report says the socket used) by its client port; the capture point; the MSS in the SYNs
and the option bytes the data segments carry (both read from the packet table); the loss
rule's own drop counter; tcpdump's own drop count.

Before issue 16 the analysis got 2 of 18 labels, 8 of 18 sides and none of the MSS right
here (the MSS was the largest segment, 2896-15928 bytes: no loss event had a window large
enough to judge, and the handshake of microseconds told no side).

The runs are made once per session, one after another (together they would disturb each
other's timing): ~9.5 s each, ~60 s for the file.  Set PCAPSTATS_INDEPENDENT_DIR to keep the
captures and each run's truth.json there.
"""

from __future__ import annotations

import math

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import pcapstats as ps
from tests.helpers import independent_path as ip

pytestmark = pytest.mark.netns

SECONDS, RATE = 8, "20mbit"
RUNS = {    # name -> make_path_captures options (besides seconds, rate)
    "cubic-nth2pct": dict(cc="cubic", loss=0.02, loss_mode="nth"),
    "reno-nth2pct": dict(cc="reno", loss=0.02, loss_mode="nth"),
    "bbr-nth2pct": dict(cc="bbr", loss=0.02, loss_mode="nth"),
    "cubic-random1pct": dict(cc="cubic", loss=0.01, loss_mode="random"),
    "reno+cubic-nth2pct": dict(cc=("reno", "cubic"), loss=0.02, loss_mode="nth"),
    "cubic-nth2pct-2routers": dict(cc="cubic", loss=0.02, loss_mode="nth", routers=2),
}
POINTS = ip.POINTS                                 # sender, receiver, middle
CASES = [(run, point) for run in RUNS for point in POINTS]
IDS = [f"{run}-{point}" for run, point in CASES]
SYN, ACK = 0x002, 0x010
TCP_BASE_HEADER = 20



# -- the runs -----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def runs():
    """name -> PathRun, or the PathError that run ended with (its tests fail with it)."""
    why = ip.unavailable()
    if why:
        pytest.skip(why)
    keep = os.environ.get("PCAPSTATS_INDEPENDENT_DIR")
    with (tempfile.TemporaryDirectory(prefix="pcapstats-independent-") if not keep
          else _kept(Path(keep))) as top:
        made = {}
        for name, options in RUNS.items():
            try:
                made[name] = ip.make_path_captures(Path(top) / name, seconds=SECONDS,
                                                   rate=RATE, **options)
            except ip.PathError as e:
                made[name] = e
        yield made


@contextlib.contextmanager
def _kept(path: Path):
    path.mkdir(parents=True, exist_ok=True)
    yield str(path)


@dataclass
class Point:
    """One capture point of one run, read once: the packets, flavour's rows, and per flow
    (client port) its stream there and what the packet table says about it."""
    run: ip.PathRun
    point: str
    cap: object
    rows: object                   # flavour's streams table (DataFrame)
    stream_of: dict[int, int]      # client port -> tcp.stream in this capture

    def flows(self):
        for flow in self.run.truth["flows"]:
            yield flow, self.stream_of.get(flow["client_port"])

    def row(self, stream: int):
        rows = self.rows[self.rows["stream"] == stream]
        return rows.iloc[0] if len(rows) else None


@pytest.fixture(scope="session")
def at(runs):
    """at(run, point) -> Point (each read and analysed once a session)."""
    cache: dict[tuple[str, str], Point] = {}

    def get(name: str, point: str) -> Point:
        made = runs[name]
        if isinstance(made, Exception):
            pytest.fail(f"run {name} failed: {made}")
        key = (name, point)
        if key not in cache:
            cap = ps.read(made.captures[point])
            rows = ps.flavour(cap).to_pandas()
            cache[key] = Point(made, point, cap, rows, _streams_by_client_port(cap, made))
        return cache[key]
    return get


def _streams_by_client_port(cap, run: ip.PathRun) -> dict[int, int]:
    tcp = cap.layer("tcp")
    src, dst = cap.column("tcp_srcport")[tcp], cap.column("tcp_dstport")[tcp]
    stream = cap.column("tcp_stream")[tcp]
    found = {}
    for flow in run.truth["flows"]:
        mine = ((src == flow["client_port"]) & (dst == flow["server_port"])) | \
               ((dst == flow["client_port"]) & (src == flow["server_port"]))
        ids = np.unique(stream[mine])
        assert len(ids) <= 1, f"client port {flow['client_port']} in streams {ids}"
        if len(ids):
            found[flow["client_port"]] = int(ids[0])
    return found


def _stream_packets(p: Point, stream: int) -> dict[str, np.ndarray]:
    """The stream's TCP rows: flags, tcp_len, hdr_len, the MSS option (-1 where absent), and
    whether each packet goes client -> server."""
    cap, tcp = p.cap, p.cap.layer("tcp")
    rows = tcp & (cap.column("tcp_stream") == stream)
    mss = np.where(cap.present("tcp_option_mss"), cap.column("tcp_option_mss").astype(np.int64),
                   -1)
    client = cap.column("tcp_srcport") == next(f["client_port"] for f, s in p.flows()
                                                if s == stream)
    return {"flags": cap.column("tcp_flags")[rows].astype(np.int64),
            "len": cap.column("tcp_len")[rows].astype(np.int64),
            "hdr": cap.column("tcp_hdr_len")[rows].astype(np.int64),
            "mss": mss[rows], "from_client": client[rows]}


def negotiated_mss(p: Point, stream: int) -> int:
    """min(the SYN's MSS option, the SYN/ACK's), from the packet table."""
    k = _stream_packets(p, stream)
    syn = (k["flags"] & (SYN | ACK)) == SYN
    synack = (k["flags"] & (SYN | ACK)) == SYN | ACK
    assert syn.any() and synack.any(), "handshake not captured"
    offered = k["mss"][syn | synack]
    assert (offered > 0).all(), f"a SYN without the MSS option: {offered}"
    return int(offered.min())


def data_option_bytes(p: Point, stream: int) -> int:
    """TCP option bytes on the data segments (client -> server, payload > 0): one value."""
    k = _stream_packets(p, stream)
    data = k["from_client"] & (k["len"] > 0)
    values = np.unique(k["hdr"][data] - TCP_BASE_HEADER)
    assert len(values) == 1, f"data segments carry {values} option bytes"
    return int(values[0])


def largest_data_segment(p: Point, stream: int) -> int:
    k = _stream_packets(p, stream)
    return int(k["len"][k["from_client"]].max())


def _show(row) -> str:
    keys = ("stream", "flavour", "flavour_confidence", "side", "side_evidence", "mss_bytes",
            "loss_events", "reason")
    return "{" + ", ".join(f"{k}={row[k]!r}" for k in keys) + "}"


# -- the conditions are what was asked ------------------------------------------------------------

@pytest.mark.parametrize("name", RUNS)
def test_iperf3_ran_the_cc_asked_and_the_loss_rule_dropped(at, name):
    truth = at(name, "sender").run.truth
    assert [f["cc_used"] for f in truth["flows"]] == [f["cc"] for f in truth["flows"]]
    got = [f["receiver_bps"] for f in truth["flows"]]     # the path carried the transfer
    assert sum(got) > 0.5 * 20e6 and min(got) > 0.2 * 20e6 / len(got), got
    sender = truth["offloads"]["sender:eth0"]
    assert sender["tcp-segmentation-offload"] == "on" == sender["generic-segmentation-offload"]
    dropped = truth["drops"]["loss_rule_packets"]
    if truth["path"]["loss_mode"] == "nth":
        # the middle capture sees every packet the rule saw (one router: it is on the rule's
        # ingress, before FORWARD) or every one it let through (two routers: the next hop)
        mid = at(name, "middle").cap
        v4 = mid.layer("ip") & (mid.column("ip_version") == 4)
        src = mid.addresses[mid.column("ip_src")[v4]]
        dst = mid.addresses[mid.column("ip_dst")[v4]]
        forwarded = int(((src == ip.SENDER_NET + ".1") & (dst == ip.RECEIVER_NET + ".1")).sum())
        if truth["captures"]["middle"]["after_loss"]:
            forwarded += dropped
        assert dropped == forwarded // truth["path"]["loss_every"], (dropped, forwarded)
    else:
        assert dropped > 0


@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_tcpdump_dropped_nothing(at, run, point):
    counts = at(run, point).run.truth["tcpdump"][point]
    assert counts["dropped_by_kernel"] == 0, counts
    assert counts["captured"] == len(at(run, point).cap), counts


@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_mss_in_the_syn_and_segments_larger_than_it(at, run, point):
    """Sender and mid-path captures hold GSO super-segments (> the MSS: the condition).  tbf
    segments only GSO packets larger than its burst (4 KB), and GRO is off on veth by default:
    the receiver's capture holds segments of at most the burst (two MSS here)."""
    p = at(run, point)
    truth = p.run.truth
    gro_off = truth["offloads"]["receiver:eth0"]["generic-receive-offload"] == "off"
    for flow, stream in p.flows():
        assert stream is not None, f"flow {flow['client_port']} not in the {point} capture"
        mss = negotiated_mss(p, stream)
        assert mss == 1460                                  # veth MTU 1500 - 40
        largest = largest_data_segment(p, stream)
        if point in ("sender", "middle"):
            assert largest > mss, f"no segment larger than the MSS {mss}: offloads off?"
        elif gro_off:
            assert largest <= truth["drops"]["tbf_burst_bytes"], largest


@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_iperf3_mss_is_the_syn_mss_minus_the_data_options(at, run, point):
    """iperf3's own MSS (TCP_MAXSEG) = the SYN's MSS - the timestamp option (12 bytes): an
    independent check of what the strict cwnd test expects."""
    p = at(run, point)
    for flow, stream in p.flows():
        options = data_option_bytes(p, stream)
        assert options == 12                                # TCP timestamps
        assert flow["iperf3"]["start"]["tcp_mss_default"] == negotiated_mss(p, stream) - options


# -- flavour: what it must say today ----------------------------------------------------------

@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_flavour_lists_the_data_streams_and_never_a_wrong_cc(at, run, point):
    p = at(run, point)
    wanted = {s for _, s in p.flows()}
    assert set(p.rows["stream"]) == wanted        # the iperf3 control connections carry < 64 KB
    for flow, stream in p.flows():
        row = p.row(stream)
        assert row["flavour"] in (flow["cc"], "unknown"), f"{flow['cc']}: {_show(row)}"
        if row["flavour"] == "unknown":
            assert math.isnan(row["flavour_confidence"]) and row["reason"]


# -- a verdict and the capture point at every point; cwnd's segment size ------------------------

@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_flavour_label_is_the_cc(at, run, point):
    """Reno and Cubic get their label at every point.  BBR on this path (no added delay) sends
    78-85 % of its segments right at an ACK, like an ACK-clocked sender, so its label rests
    on the loss events alone: bbr or unknown (never another cc: the test above)."""
    p = at(run, point)
    for flow, stream in p.flows():
        row = p.row(stream)
        wanted = {flow["cc"], "unknown"} if flow["cc"] == "bbr" else {flow["cc"]}
        assert row["flavour"] in wanted, f"{flow['cc']}: {_show(row)}"


def expected_side(p: Point) -> str:
    """The capture point, except one router's ingress: its packets are of the sender's kind
    (data that crossed no router, sent microseconds after the ACKs that released it)."""
    if p.point == "middle" and not p.run.truth["captures"]["middle"]["after_loss"]:
        return "sender"
    return p.point


@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_flavour_side_is_the_capture_point(at, run, point):
    p = at(run, point)
    for flow, stream in p.flows():
        row = p.row(stream)
        assert row["side"] == expected_side(p), _show(row)


@pytest.mark.parametrize("run, point", CASES, ids=IDS)
def test_cwnd_mss_is_the_negotiated_mss_minus_options(at, run, point):
    """Not the largest segment: with segmentation offload the sender's capture holds several
    MSS in one packet."""
    p = at(run, point)
    for flow, stream in p.flows():
        want = negotiated_mss(p, stream) - data_option_bytes(p, stream)
        got = int(ps.cwnd(p.cap, stream=stream).to_pandas("summary")["mss_bytes"].iloc[0])
        assert got == want, f"stream {stream}: cwnd mss_bytes {got}, SYN MSS - options {want}"
        assert int(p.row(stream)["mss_bytes"]) == want, _show(p.row(stream))
