"""``resent`` counts what the sender's kernel counts as re-sent segments (TCP_INFO
``total_retrans``), on captures taken at the sender: the shipped lab runs at 0/1/10/30 % loss
under reno, cubic and bbr, and new lab runs made here.  tshark's own flags are checked against
tshark in tests/cli/test_tcp_commands.py; here also that they undercount, so a loss study that
used ``retransmission`` alone would be wrong, and that ``resent`` does not.

The kernel's last TCP_INFO sample is taken just before the sender closes its socket, so a FIN
re-sent after it is on the wire but not in that sample: the comparison counts re-sent segments
up to the sample's time.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

import pcapstats as ps
from tests.helpers.paths import CAPTURES

SHIPPED = [f"sp-{cc}-loss{loss}pct" for cc in ("reno", "cubic", "bbr") for loss in (0, 1, 10, 30)]


def resent_until_last_sample(capture: Path, doc: dict) -> tuple[int, int, int]:
    """(re-sent segments of the flow's data direction up to the kernel's last TCP_INFO sample,
    the kernel's total_retrans there, tshark's retransmission flags over the same span)."""
    file = capture.name
    flow = next(f for f in doc["flows"] if f.get("tcp_info") and f["streams"].get(file) is not None)
    info = flow["tcp_info"]
    result = ps.retrans(capture, stream=flow["streams"][file])
    events = result.table("events")
    counts = result.table("counts")
    data = counts["direction"][np.argmax(counts["payload_bytes"])]
    upto = (events["direction"] == data) & (
        events["time_s"] * 1e9 + ps.read(capture).first_time_ns <= info["t_ns"][-1])
    flags = [set(e.split("+")) for e in events["events"][upto]]
    return (sum("resent" in f for f in flags), int(info["total_retrans"][-1]),
            sum("retransmission" in f for f in flags))


@pytest.mark.parametrize("name", SHIPPED)
def test_resent_is_the_senders_total_retrans_on_shipped_runs(name):
    doc = json.loads((CAPTURES / f"{name}.json").read_text())
    assert doc["captures"][0]["side"] == "sender"
    resent, kernel, _ = resent_until_last_sample(CAPTURES / f"{name}.pcap", doc)
    assert resent == kernel, (name, resent, kernel)


def test_tsharks_retransmission_flag_alone_undercounts():
    """Not vacuous: on these runs Wireshark's rules call many re-sends out_of_order."""
    short = []
    for name in SHIPPED:
        doc = json.loads((CAPTURES / f"{name}.json").read_text())
        resent, kernel, flagged = resent_until_last_sample(CAPTURES / f"{name}.pcap", doc)
        short.append(flagged < kernel)
    assert sum(short) >= len(SHIPPED) - 2


@pytest.fixture(scope="module")
def lab_runs():
    """simpleperf through 3 % and 15 % loss (reno, then cubic), captured at the sender."""
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-resent-") as tmp:
        runs = []
        for loss, cc in (("3%", "reno"), ("15%", "cubic")):
            out = Path(tmp) / f"{cc}.pcap"
            run(Scenario(tool="simpleperf", loss=loss, delay="5ms", rate="20mbit", cc=cc,
                         duration_s=3, capture="sender", snaplen=128), out)
            runs.append((out, load_sidecar(out.with_suffix(".json"))))
        yield runs


@pytest.mark.netns
def test_resent_is_the_senders_total_retrans_on_new_lab_runs(lab_runs):
    for capture, doc in lab_runs:
        resent, kernel, _ = resent_until_last_sample(capture, doc)
        assert kernel > 0, "the run lost nothing: the comparison would be vacuous"
        assert resent == kernel, (capture.name, resent, kernel)
