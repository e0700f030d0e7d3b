"""A topology run's measuring pings in its captures (issue 28, item 2): every link pinged
router to router and every pair's path, recorded in the run's measure captures, so
``pcapstats ping`` gives the seeds' link-vs-path table from the packets.

One run of a two-router chain (r1-r2 5 ms, r2-r3 10 ms each way; h1 on r1, h2 on r3) captured
at each link's first end (h1, h2 and r1, r2 toward the next router): every measuring ping is
captured where it was sent, so its RTTs are ping's own.  Checked against ping's own report
(the sidecar's), and each path against the sum of its links; the traffic's captures hold none
of them.  About 15 s.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

import pcapstats as ps
from pcapstats.lab import network
from pcapstats.lab.network_run import run_network
from tests.helpers.tshark_ref import tshark_fields

pytestmark = pytest.mark.netns

CHAIN = """\
routers = ["r1", "r2", "r3"]
[hosts]
h1 = "r1"
h2 = "r3"
[[link]]
ends = ["r1", "r2"]
delay = "5ms"
[[link]]
ends = ["r2", "r3"]
delay = "10ms"
[run]
capture = ["h1", "h2", "r1:r2", "r2:r3"]
snaplen = 128
ping_count = 10
ping_interval_s = 0.05
[[pair]]
from = "h1"
to = "h2"
tool = "tcp-file"
bytes = "200KB"
repeat = 3
gap_s = 2.5                  # (a lone ICMPv6 packet at h1 can split a 1.2 s gap in two under 1 s)
ping_during = true
ping_count = 5
ping_interval_s = 0.05
"""


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    out = tmp_path_factory.mktemp("chain")
    (out / "chain.toml").write_text(CHAIN)
    doc = run_network(network.load(out / "chain.toml"), out / "chain.pcap")
    return doc, out


def _send_lags_s(capture) -> pd.Series:
    """frame number -> each echo request's capture time less the send time ping wrote at the
    start of its data (a struct timeval: seconds, then microseconds), by tshark."""
    got = tshark_fields(capture, ("frame.number", "frame.time_epoch", "icmp.type", "data.data"))
    got = got[got["icmp.type"] == "8"]
    out = {}
    for frame, t, data in zip(got["frame.number"], got["frame.time_epoch"], got["data.data"]):
        t, usec = float(t), int.from_bytes(bytes.fromhex(data[:16]), "little")
        sent = int(t) + usec / 1e6          # the seconds tshark took as icmp.data_time
        out[int(frame)] = t - (sent if sent <= t else sent - 1)
    return pd.Series(out)


def _sessions(path) -> list[dict]:
    return ps.ping(path).to_pandas("sessions").to_dict("records")


def _sent_at(doc: dict, node: str, toward: str) -> str:
    """The measure capture of the point where ``node`` sends toward ``toward``."""
    link = next(k for k in doc["links"] if set(k["ends"]) == {node, toward})
    interface = link["interfaces"][node]
    (entry,) = [c for c in doc["captures"] if c["phase"] == "measure"
                and c["host"] == node and c["interface"] == interface]
    return entry["file"]


def test_each_measuring_ping_is_in_the_capture_where_it_was_sent(chain):
    """One session a link and a path, at its requester, its counts ping's own.  Sent from a
    host (an unimpaired egress), its RTTs are ping's own too; sent from a router, its
    requests are seen after the router's own egress delay: each RTT plus that lag (the
    capture time less the send time ping wrote in the request, by tshark) is ping's own, and
    a note says what the RTTs leave out."""
    doc, out = chain
    measured = [(f"link {k['name']}", k["ping"], k["ends"][0], k["ends"][1])
                for k in doc["links"]]
    measured += [(f"path {p['from']}-{p['to']}", p["ping"], p["from"], p["nodes"][1])
                 for p in doc["paths"]]
    assert len(measured) == 4 + 1          # h1-r1, h2-r3, r1-r2, r2-r3; h1-h2
    for label, report, node, toward in measured:
        capture = out / _sent_at(doc, node, toward)
        result = ps.ping(capture)
        rows = [r for r in result.to_pandas("sessions").to_dict("records")
                if r["measures"] == label]
        assert len(rows) == 1, (label, rows)
        (row,) = rows
        said = report["reported"]
        assert row["ident"] == report["ident"] and row["side"] == "sender", row
        assert (row["transmitted"], row["received"]) == (said["transmitted"],
                                                         said["received"]) == (10, 10)
        echoes = result.to_pandas("echoes")
        rtt = echoes[echoes.session == row["session"]].set_index("frame_number").rtt_ms
        lag = _send_lags_s(capture).reindex(rtt.index)
        own = rtt + 1e3 * lag
        from_router = node in doc["topology"]["routers"]
        noted = [n for n in result.notes if n.about == label]
        assert len(noted) == from_router, (label, result.notes)
        # from a router the lag is its egress delay (5 or 10 ms); from a host, none
        asked = report["asked_ms"] / 2 if from_router else 0
        assert abs(1e3 * lag.median() - asked) <= 1.0, (label, lag)
        for stat, got in (("min", own.min()), ("avg", own.mean()), ("max", own.max())):
            assert abs(got - said[f"{stat}_ms"]) <= 0.05, (label, stat, got, said)
        if not from_router:
            for stat in ("min", "avg", "max"):
                assert abs(row[f"rtt_{stat}_ms"] - said[f"{stat}_ms"]) <= 0.05, (label, row)


def test_each_paths_rtt_is_the_sum_of_its_links_in_the_captures(chain):
    """From the captures alone: the path's RTT at its sender against its links' at theirs
    (a router's requests timed from the send time ping wrote in them, as ping times them)."""
    doc, out = chain
    rtt = {}
    for entry in doc["captures"]:
        if entry["phase"] != "measure":
            continue
        capture = out / entry["file"]
        result = ps.ping(capture)
        echoes = result.to_pandas("echoes")
        for row in result.to_pandas("sessions").to_dict("records"):
            if row["side"] == "sender" and row["measures"]:
                mine = echoes[echoes.session == row["session"]].set_index("frame_number")
                rtt[row["measures"]] = (mine.rtt_ms + 1e3 * _send_lags_s(capture)
                                        .reindex(mine.index)).mean()
    (path,) = doc["paths"]
    assert path["links"] == ["h1-r1", "r1-r2", "r2-r3", "h2-r3"]
    links = sum(rtt[f"link {name}"] for name in path["links"])
    assert abs(rtt["path h1-h2"] - links) <= 2.0, rtt
    assert abs(links - 2 * (5 + 10)) <= 2 * 1.0, rtt  # the asked delays: 1 ms a link


def test_the_traffic_captures_hold_none_of_them(chain):
    """The pair's three transfers and its pings under load are in the traffic captures, with
    no measuring ping beside them: compare counts three transfers there, as before."""
    doc, out = chain
    phases = sorted((c["phase"], c["point"], c["file"]) for c in doc["captures"])
    assert [(p, f) for p, _, f in phases] == [
        ("measure", "chain.measure-h1.pcap"), ("measure", "chain.measure-h2.pcap"),
        ("measure", "chain.measure-r1-r2.pcap"), ("measure", "chain.measure-r2-r3.pcap"),
        ("traffic", "chain.h1.pcap"), ("traffic", "chain.h2.pcap"),
        ("traffic", "chain.r1-r2.pcap"), ("traffic", "chain.r2-r3.pcap")]
    rows = _sessions(out / "chain.h1.pcap")
    under_load = [r for r in doc["reports"] if r["under_load"]]
    assert len(rows) == len(under_load) == 3, rows
    assert all(r["measures"] == "" and r["transmitted"] == 5 for r in rows), rows
    idents = {k["ping"]["ident"] for k in doc["links"]} | {doc["paths"][0]["ping"]["ident"]}
    assert not idents & {r["ident"] for r in rows}
    (row,) = _cli("compare", str(out / "chain.h1.pcap"), "-m", "transfers", "-f", "json")
    assert row["transfers"] == doc["pairs"][0]["achieved"]["transfers"] == 3, row


def test_pcapstats_ping_names_the_link_or_path(chain):
    doc, out = chain
    rows = _cli("ping", str(out / "chain.measure-r1-r2.pcap"), "-f", "json")
    named = {r["measures"]: r["side"] for r in rows}
    # r1 sent its own link's pings here; h1's path crossed on its way (timed from here on)
    assert named == {"link r1-r2": "sender", "path h1-h2": "middle"}, named


def _cli(*argv) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "pcapstats", *argv], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
