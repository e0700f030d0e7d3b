"""retrans' and rtt's numbers against tcptrace's (``tcptrace -n -l -r``), an independent
implementation of per-connection TCP analysis, on every shipped and public capture.

Where the definitions match, the numbers are equal; where they differ, the tests say how:

- **Packets** per stream and direction: tcptrace's ``total packets`` (its connections of one
  4-tuple added up: it starts a new one where ports are used again; tcp.stream continues).
- **Re-sent segments**: pcapstats' ``resent`` is every segment starting below the highest
  sequence number its direction had sent.  tcptrace sorts those in two: ``rexmt data pkts``
  (their bytes were seen before) and ``outoforder pkts`` (below the highest sequence number,
  never seen before: the first copy was lost before the capture point, as on a receiver-side
  capture, or overtaken).  So resent = rexmt + outoforder, on every direction.
- **RTT** (Karn's rule, data segment to the ACK that first covers it): rtt's
  ``ack_rtt_karn_ms`` of the ACKs (samples, rtt_min_ms, rtt_avg_ms, rtt_max_ms) against
  tcptrace's ``RTT samples / min / avg / max`` of the data they acknowledge (to its printed
  0.1 ms), on every direction whose data had no segment sent twice.  Where one was, the two
  apply Karn's rule to different things: pcapstats (as Wireshark) to the segments the ACK
  takes off the list of unacknowledged ones, tcptrace to the acknowledged bytes -- a
  retransmission that repacks several segments into one makes tcptrace's ACK of the first of
  them ambiguous (no sample) but not pcapstats' (ssh.pcap); and a re-send that fills a hole
  whose first copy the capture never saw counts as re-sent in pcapstats (no sample) but as
  sent once in tcptrace (a sample: iperf3-4flows.pcap).
"""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

import pcapstats as ps
from tests.helpers.paths import CAPTURES, DATA, PUBLIC
from tests.helpers.tcptrace_ref import tcptrace_directions

pytestmark = pytest.mark.skipif(shutil.which("tcptrace") is None,
                                reason="tcptrace is not installed (apt-get install tcptrace)")

CASES = sorted(CAPTURES.glob("*.pcap")) + [DATA / name for name in PUBLIC]
TENTH_MS = 0.05 + 1e-9            # tcptrace prints milliseconds to one decimal


def _directions(path):
    """(tcptrace's directions, and pcapstats' stream -> (A's 4-tuple key, flipped)): each
    stream's tcptrace 4-tuple, which names the sides as pcapstats does or the other way."""
    ref = tcptrace_directions(path)
    table = ps.throughput(path, proto="tcp").table()
    streams = {}
    for s, a, pa, b, pb in zip(table["stream"], table["address_a"], table["port_a"],
                               table["address_b"], table["port_b"]):
        if (a, int(pa), b, int(pb), "a2b") in ref:
            streams[int(s)] = ((a, int(pa), b, int(pb)), False)
        elif (b, int(pb), a, int(pa), "a2b") in ref:
            streams[int(s)] = ((b, int(pb), a, int(pa)), True)
    return ref, streams


def _side(direction: str, flipped: bool) -> str:
    """tcptrace's name (a2b / b2a) of a pcapstats direction."""
    return ("a2b" if direction == "a_to_b" else "b2a") if not flipped else \
        ("b2a" if direction == "a_to_b" else "a2b")


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_packets_and_resent_equal_tcptraces_rexmt_plus_out_of_order(path):
    if not tcptrace_directions(path):
        pytest.skip("tcptrace traces no TCP connection here")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, streams = _directions(path)
        counts = ps.retrans(path).table("counts")
    matched = set()
    for s, d, packets, resent in zip(counts["stream"], counts["direction"], counts["packets"],
                                     counts["resent"]):
        key, flipped = streams[int(s)]
        theirs = ref[(*key, _side(d, flipped))]
        matched.add((*key, _side(d, flipped)))
        assert packets == theirs.packets, (s, d)
        assert resent == theirs.rexmt + theirs.out_of_order, (s, d)
    assert {k for k, v in ref.items() if v.packets} <= matched    # every direction compared


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_rtt_equals_tcptraces_where_no_segment_was_sent_twice(path):
    if not tcptrace_directions(path):
        pytest.skip("tcptrace traces no TCP connection here")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, streams = _directions(path)
        counts = ps.retrans(path).table("counts")
        try:
            summary = ps.rtt(path, stream="all").table("summary")
        except ps.PcapstatsError:
            pytest.skip("no TCP stream with data")
    resent = {(int(s), d): int(n) for s, d, n in zip(counts["stream"], counts["direction"],
                                                     counts["resent"])}
    compared = 0
    for s in np.unique(summary["stream"]).tolist():
        key, flipped = streams[s]
        for ack_dir, data_dir in (("b_to_a", "a_to_b"), ("a_to_b", "b_to_a")):
            if resent.get((s, data_dir), 0):
                continue                     # the definitions differ (module docstring)
            theirs = ref[(*key, _side(data_dir, flipped))]
            row = np.flatnonzero((summary["stream"] == s) & (summary["direction"] == ack_dir)
                                 & (summary["series"] == "ack_rtt_karn_ms"))
            samples = int(summary["samples"][row[0]]) if len(row) else 0
            assert samples == theirs.rtt_samples, (s, ack_dir)
            if samples:
                avg = sum(n * v for n, v in theirs.rtt_avgs) / theirs.rtt_samples
                for ours, want in (("rtt_min_ms", theirs.rtt_min_ms), ("rtt_avg_ms", avg),
                                   ("rtt_max_ms", theirs.rtt_max_ms)):
                    assert abs(summary[ours][row[0]] - want) <= TENTH_MS, (s, ack_dir, ours)
            compared += 1
    if not compared:
        pytest.skip("every direction with data had a segment sent twice")
