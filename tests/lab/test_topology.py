"""The seed-000 network from the shipped topology file, checked against its own truth (issue 28).

Each module fixture is one lab run, shared by the tests that read its captures and sidecar:

- ``udp``: every link and path pinged, then each of three paths' UDP at twice its bottleneck,
  one path at a time: a link's RTT is twice its delay plus its base, a path's the sum of its
  links', iperf3's loss the routers' drops, the delivered rate the slowest link's;
- ``mux``: the seeds' four multiplexing scenarios one after the other (two and three pairs on
  one path, h1-h4 with h7-h9 sharing r2-r3 alone, h1-h4 with h8-h9 sharing nothing), each
  pair pinging under load;
- ``jain``: h1-h4 with -P 2 beside two single pairs: Jain's index by stream and by pair from
  the capture equal to the one from iperf3's own reports;
- ``ten``: ten file transfers 2.5 s apart in one capture: ten transfers in ``iograph``.

The machine has 2 shared cores: the runs are short and sequential.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pcapstats.analyses.fairness import jain
from pcapstats.lab import network
from pcapstats.lab.network_run import run_network
from pcapstats.lab.specfile import read
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.netns

SEED = ROOT / "topologies" / "seed000.toml"
DELAY_MS = {"r1-r2": 10, "r2-r3": 20, "r3-r4": 10}
RATE = {"r1-r2": 40e6, "r2-r3": 30e6, "r3-r4": 20e6}


def _run(tmp_path_factory, name: str, pairs: list[dict], **run) -> tuple[dict, object]:
    """The shipped network with these pairs and [run] values, run once; (sidecar, out dir)."""
    doc, _ = read(SEED, "topology file")
    doc["pair"] = pairs
    doc["run"] = {**doc.get("run", {}), **run}
    net = network.checked(doc, SEED)
    out = tmp_path_factory.mktemp(name)
    return run_network(net, out / f"{name}.pcap"), out


@pytest.fixture(scope="module")
def udp(tmp_path_factory):
    pairs = [{"from": a, "to": b, "tool": "iperf3-udp", "udp_rate": rate, "duration_s": 3,
              "start_s": start}
             for (a, b, rate), start in zip((("h1", "h4", "60mbit"), ("h1", "h9", "40mbit"),
                                             ("h7", "h9", "40mbit")), (0, 4, 8))]
    return _run(tmp_path_factory, "udp", pairs, capture=["h4", "h9"], snaplen=128,
                ping_interval_s=0.05, ping_count=20)


@pytest.fixture(scope="module")
def mux(tmp_path_factory):
    windows = [[("h1", "h4"), ("h2", "h5")], [("h1", "h4"), ("h2", "h5"), ("h3", "h6")],
               [("h1", "h4"), ("h7", "h9")], [("h1", "h4"), ("h8", "h9")]]
    pairs = [{"from": a, "to": b, "tool": "iperf3", "cc": "cubic", "start_s": 7.0 * w,
              "duration_s": 6, "ping_during": True, "ping_interval_s": 0.2}
             for w, window in enumerate(windows) for a, b in window]
    doc, out = _run(tmp_path_factory, "mux", pairs, capture=["r2:r3"], snaplen=96,
                    measure=False)
    return doc, windows


@pytest.fixture(scope="module")
def jain_run(tmp_path_factory):
    pairs = [{"from": a, "to": b, "tool": "iperf3", "cc": "cubic", "parallel": p,
              "duration_s": 6} for a, b, p in (("h1", "h4", 2), ("h2", "h5", 1),
                                                ("h3", "h6", 1))]
    return _run(tmp_path_factory, "jain", pairs, capture=["r2:r3"], snaplen=96,
                measure=False)


@pytest.fixture(scope="module")
def ten(tmp_path_factory):
    # gaps of 2.5 s: a stray packet in one (an ARP probe, a router solicitation) still leaves a
    # half over the 1 s idle gap that splits transfers when compare counts every packet's
    pairs = [{"from": "h1", "to": "h9", "tool": "tcp-file", "bytes": "300KB", "repeat": 10,
              "gap_s": 2.5}]
    return _run(tmp_path_factory, "ten", pairs, capture=["h1"], snaplen=128, measure=False)


def _link(doc: dict, name: str) -> dict:
    return next(link for link in doc["links"] if link["name"] == name)


# -- every link and path -------------------------------------------------------------------------
def test_each_links_rtt_is_twice_its_delay_plus_its_base(udp):
    doc, _ = udp
    for name, delay_ms in DELAY_MS.items():
        ping = _link(doc, name)["ping"]
        assert ping["received"] == ping["count"], name
        assert ping["asked_ms"] == pytest.approx(2 * delay_ms)
        # the per-router cost: the link's RTT before anything was applied
        assert 0 < ping["base_ms"] < 1, name
        assert abs(ping["median_ms"] - (2 * delay_ms + ping["base_ms"])) <= 1.0, (name, ping)


def test_each_paths_rtt_is_the_sum_of_its_links(udp):
    doc, _ = udp
    for path in doc["paths"]:
        links = [_link(doc, n)["ping"]["median_ms"] for n in path["links"]]
        asked = 2 * sum(DELAY_MS.get(n, 0) for n in path["links"])
        assert path["asked"]["rtt_ms"] == pytest.approx(asked)
        assert abs(path["ping"]["median_ms"] - sum(links)) <= 2.0, path
    checks = [c for c in doc["achieved"]["checks"] if c["quantity"] == "rtt"]
    assert len(checks) == 3 + 3 and all(c["in_spec"] for c in checks), checks


def test_udp_at_twice_the_bottleneck_loses_what_iperf3_reports(udp):
    """iperf3's lost datagrams are the routers' drops (their queues' and nothing else): the
    three paths sent one at a time, so every drop of the run is one of theirs."""
    doc, _ = udp
    lost = sum(p["achieved"]["lost_packets"] for p in doc["pairs"])
    drops = 0
    for link in doc["links"]:
        for d in link["directions"]:
            counters = d["counters"] or {}
            drops += sum(q["dropped_packets"] for q in (counters.get("qdiscs") or {}).values())
            drops += sum((line.get("program") or {}).get("packets_overflowed") or 0
                         for line in (counters.get("delay") or {}).values())
    assert lost > 1000
    assert abs(lost - drops) <= 0.005 * lost + 10, (lost, drops)


def test_udp_at_twice_the_bottleneck_delivers_the_slowest_link(udp):
    doc, _ = udp
    for pair, path in zip(doc["pairs"], doc["paths"]):
        slowest = min(RATE[n] for n in path["links"] if n in RATE)
        assert path["asked"]["bottleneck_bps"] == slowest
        assert abs(pair["achieved"]["goodput_bps"] / slowest - 1) <= 0.10, pair
    checks = [c for c in doc["achieved"]["checks"] if c["quantity"] == "rate"]
    assert len(checks) == 3 and all(c["in_spec"] for c in checks), checks


def test_the_receivers_captures_hold_what_iperf3_received(udp):
    """A capture point per receiver ("h4", "h9"): each holds its iperf3 datagrams, as many as
    iperf3's server counted."""
    doc, out = udp
    files = {c["point"]: c["file"] for c in doc["captures"]}
    assert files == {"h4": "udp.h4.pcap", "h9": "udp.h9.pcap"}
    for pair in doc["pairs"]:
        report = next(r for r in doc["reports"] if r["pair"] == pair["pair"])
        (flow,) = [f for f in doc["flows"] if f["pair"] == pair["pair"]]
        capture = out / files[pair["to"]]
        stream = flow["streams"][capture.name]
        udp_table = _cli("udp", str(capture), "-f", "json")
        row = next(r for r in udp_table if r["stream"] == stream and r["direction"] == "a_to_b")
        # the gaps in the captured sequence numbers are iperf3's lost datagrams, and the
        # datagrams captured those its server counted, but for the few still crossing the
        # path when its server stopped counting (the capture sees them arrive)
        summary = report["summary"]
        late = 0.001 * summary["packets"] + 2
        assert abs(row["lost"] - summary["lost_packets"]) <= late, (row, summary)
        assert abs(row["datagrams"] - (summary["packets"] - summary["lost_packets"])) <= late


# -- the four multiplexing scenarios ------------------------------------------------------------
def _goodputs(doc: dict, start: int, count: int) -> list[float]:
    return [p["achieved"]["goodput_bps"] for p in doc["pairs"][start:start + count]]


def test_pairs_sharing_a_link_sum_to_its_rate(mux):
    doc, windows = mux
    # two and three pairs on h1-h4's path, h1-h4 with h7-h9: all share r2-r3 (30 Mbit/s)
    start = 0
    for window in windows[:3]:
        total = sum(_goodputs(doc, start, len(window)))
        assert abs(total / RATE["r2-r3"] - 1) <= 0.10, (window, total)
        start += len(window)


def test_pairs_sharing_nothing_each_get_their_own_slowest_link(mux):
    doc, windows = mux
    h1h4, h8h9 = _goodputs(doc, sum(map(len, windows[:3])), 2)
    assert abs(h1h4 / RATE["r2-r3"] - 1) <= 0.10, h1h4
    assert abs(h8h9 / RATE["r3-r4"] - 1) <= 0.10, h8h9


def test_every_pair_pings_under_load(mux):
    doc, windows = mux
    for pair, path in zip(doc["pairs"], doc["paths"]):
        got = pair["achieved"]["rtt_under_load_ms"]
        report = next(r for r in doc["reports"] if r["pair"] == pair["pair"]
                      and r["under_load"])
        assert report["sender"] == pair["from"] and report["receiver"] == pair["to"]
        # under load the queue adds to the path's RTT: more than its delays, each pair's own
        assert got > path["asked"]["rtt_ms"] + 1, pair


# -- Jain's index ---------------------------------------------------------------------------------
def test_jain_by_stream_and_by_pair_equal_iperf3s_own(jain_run):
    doc, out = jain_run
    capture = out / "jain.pcap"
    streams, pairs = [], []
    for report in sorted(doc["reports"], key=lambda r: r["pair"]):
        got = [s["receiver"]["bytes"] / s["receiver"]["seconds"]
               for s in report["raw"]["client"]["end"]["streams"]]
        streams += got
        pairs.append(sum(got))
    assert len(streams) == 4 and len(pairs) == 3
    for by, reported in (("stream", streams), ("pair", pairs)):
        (row,) = _cli("fairness", str(capture), "--by", by, "-f", "json")
        assert row["flows"] == len(reported)
        assert abs(row["jain_index"] - jain(reported)) <= 0.01, (by, row, jain(reported))


# -- repeated transfers -----------------------------------------------------------------------------
def test_ten_transfers_in_one_capture_are_ten_in_iograph_and_compare(ten):
    doc, out = ten
    assert doc["pairs"][0]["achieved"]["transfers"] == 10
    assert all(r["summary"]["checksum_ok"] for r in doc["reports"])
    ports = {f["sport"] for f in doc["flows"]}
    assert len(doc["flows"]) == 10 and len(ports) == 10
    rows = _cli("iograph", str(out / "ten.pcap"), "--proto", "tcp", "--transfers", "-f", "json")
    assert len(rows) == 10, rows
    (row,) = _cli("compare", str(out / "ten.pcap"), "-m", "transfers,goodput", "-f", "json")
    assert row["transfers"] == 10, row        # compare reads them as ten too


def _cli(*argv) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "pcapstats", *argv], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_field_of_a_topology_runs_sidecar_is_documented(udp):
    from pcapstats.sidecar import FIELDS
    names = set()
    for entry, _ in FIELDS:
        first, *rest = entry.split(" / ")
        names.add(first.split(":")[0])
        prefix = first[:first.rfind(".") + 1]
        names.update(prefix + r for r in rest)
    names |= {n[:-2] for n in names if n.endswith("[]")}
    doc, _ = udp
    missing = [k for k in doc if k not in names and not any(
        n.startswith(k + ".") or n.startswith(k + "[]") for n in names)]
    for key, sample in (("links[]", doc["links"][-1]), ("paths[]", doc["paths"][0]),
                        ("pairs[]", doc["pairs"][0]), ("captures[]", doc["captures"][0]),
                        ("flows[]", doc["flows"][0]), ("topology", doc["topology"])):
        documented = [n for n in names if n.startswith(key)]
        missing += [f"{key}.{k}" for k in sample if f"{key}.{k}" not in names
                    and not any(f"{key} " in n or n == key for n in documented)
                    and key not in ("paths[]", "pairs[]")]
    assert missing == []
