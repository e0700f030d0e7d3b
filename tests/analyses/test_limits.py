"""pcapstats limits: what held each TCP sender back, against the sender kernel's own account.

- the runs and shares on hand-made window samples whose answer is known (a zero window cut
  out of a run, an idle silence, time weighting);
- lab runs that force each limit -- a small receive buffer, an application writing at a set
  rate, loss at 1 % and 10 %, a send buffer far under the bandwidth-delay product --
  captured at both ends, each held to the sender's TCP_INFO sampled every 10 ms in the
  sidecar: ``tcpi_rwnd_limited`` and ``tcpi_busy_time`` over the connection's life, and the
  share of samples the kernel's rate sampler marks application-limited
  (``delivery_rate_app_limited``: the sender had room in cwnd and nothing, or under an MSS,
  to send -- which is also how a blocking writer on a full send buffer shows: the kernel's
  ``tcpi_sndbuf_limited`` counts only a writer blocked with its write queue empty, and stays
  0 here).
"""
from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pcapstats as ps
from pcapstats.analyses.cwnd import limit_runs, time_shares

AGREE = 0.10              # shares within this of the kernel's
SNDBUF_AGREE = 0.25       # the send buffer's against the rate sampler: see its test


def _samples(t, state, flight):
    return {"time_s": np.asarray(t, float), "state": np.asarray(state, object),
            "flight_bytes": np.asarray(flight, float)}


def test_the_figures_estimates_are_the_ones_the_shares_came_from(tmp_path, monkeypatch):
    """limits keeps no stream's cwnd estimate (a long stream's is tens of MB): its figure
    makes each again from the capture, a whole Capture or, for a read spilled by stream
    group, the path.  Made again, each gives the runs and the rwnd_max the table reports."""
    from pcapstats.ingest.groups import BUDGET_ENV
    path = Path(__file__).resolve().parents[2] / "captures" / "tcp_2streams.pcap"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for source, budget in ((ps.read(path), None), (path, "1"), (path, None)):
            if budget:
                monkeypatch.setenv(BUDGET_ENV, budget)
            else:
                monkeypatch.delenv(BUDGET_ENV, raising=False)
            result = ps.limits(source)
            runs, models = result.table("limited"), result.table("models")
            assert sorted(result.cwnds) == models["stream"].tolist() == [0, 1]
            for s in result.cwnds:
                made = result.cwnds[s]
                mine = runs["stream"] == s
                for column, values in made.table("limited").items():
                    assert np.array_equal(values, runs[column][mine]), (source, s, column)
                at = models["stream"] == s
                assert made.table("summary")["rwnd_max_bytes"][0] == models["rwnd_max_bytes"][at]
    assert not list(tmp_path.iterdir())


def test_runs_weigh_time_cut_out_a_zero_window_and_find_an_idle_silence():
    """cwnd 0-1 s, app 1-3 s with a 1.5 s silence of nothing outstanding (idle), rwnd 3-4 s;
    the receiver's window at zero from 3.2 to 3.5 s."""
    samples = _samples([0.0, 0.5, 1.0, 1.2, 2.7, 3.0, 3.5, 4.0],
                       ["cwnd", "cwnd", "app", "app", "app", "rwnd", "rwnd", "rwnd"],
                       [10e3, 12e3, 3e3, 0.0, 2e3, 30e3, 30e3, 30e3])
    rwnd = {"time_s": np.array([0.0, 3.2, 3.5]), "rwnd_bytes": np.array([30e3, 0.0, 30e3])}
    runs = limit_runs(0, samples, rwnd, srtt_s=0.05, mss=1448)
    assert runs["limit"].tolist() == ["cwnd", "sender", "idle", "sender", "rwnd",
                                      "zero_window", "rwnd"]
    assert runs["start_s"].tolist() == [0.0, 1.0, 1.2, 2.7, 3.0, 3.2, 3.5]
    assert runs["end_s"].tolist() == [1.0, 1.2, 2.7, 3.0, 3.2, 3.5, 4.0]
    shares = time_shares(runs)
    assert shares == pytest.approx({"cwnd": 0.25, "recovery": 0.0, "rwnd": 0.175,
                                    "zero_window": 0.075, "sender": 0.125, "idle": 0.375})


def test_a_capture_without_tcp_data_is_one_clear_answer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ps.PcapstatsError):
            ps.limits(Path(__file__).parents[2] / "captures" / "ping-sweep.pcap")


# -- the lab: each limit forced, both ends captured, the kernel's account beside ------------

COMMON = dict(tool="simpleperf", rate="10mbit", delay="10ms", duration_s=3, capture="both",
              cc="cubic")
CONGESTION = ("cwnd", "recovery")     # the congestion window, growing or cut by loss
SCENARIOS = {   # name -> (what forces it, the limit at the sender, the limits at the receiver)
    "rwnd": (dict(rcvbuf=6000), "rwnd", ("rwnd",)),
    "app": (dict(app_rate="3mbit"), "sender", ("cwnd", "sender")),
    "loss1": (dict(loss="1%"), "cwnd", CONGESTION),
    "loss10": (dict(loss="10%"), "cwnd", CONGESTION),
    "sndbuf": (dict(sndbuf=8000, delay="50ms"), "sender", ("cwnd", "sender")),
}


@pytest.fixture(scope="module")
def runs():
    from tests.conftest import require_netns
    require_netns()
    from pcapstats.lab import Scenario, load_sidecar, run
    with tempfile.TemporaryDirectory(prefix="pcapstats-limits-") as tmp:
        out = {}
        for name, (extra, _, _) in SCENARIOS.items():
            path = Path(tmp) / f"{name}.pcap"
            run(Scenario(**{**COMMON, **extra}), path)
            doc = load_sidecar(path.with_suffix(".json"))
            out[name] = (doc, {c["side"]: Path(tmp) / c["file"] for c in doc["captures"]})
        yield out


def _kernel(doc) -> dict[str, float]:
    """The sender kernel's account over the connection's life (its TCP_INFO samples)."""
    ti = doc["flows"][0]["tcp_info"]
    life_us = (ti["t_mono_ns"][-1] - ti["t_mono_ns"][0]) / 1e3
    return {"rwnd": ti["rwnd_limited"][-1] / life_us, "busy": ti["busy_time"][-1] / life_us,
            "app": float(np.mean(ti["delivery_rate_app_limited"]))}


def _row(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = ps.limits(path)
    table = result.to_pandas()
    return table.loc[table["goodput_bps"].idxmax()]          # the transfer


@pytest.mark.netns
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "sndbuf"])
def test_sender_side_shares_agree_with_the_kernel(runs, name):
    doc, files = runs[name]
    kernel, row = _kernel(doc), _row(files["sender"])
    assert row.side == "sender" and row.limit == SCENARIOS[name][1], row
    assert abs(row.rwnd_share + row.zero_window_share - kernel["rwnd"]) <= AGREE, (row, kernel)
    assert abs(row.sender_share - kernel["app"]) <= AGREE, (row, kernel)
    assert abs(1 - row.idle_share - kernel["busy"]) <= AGREE, (row, kernel)


@pytest.mark.netns
def test_a_small_send_buffer(runs):
    """8 kB of send buffer (16 kB once the kernel doubles it) on a 10 Mbit/s x 120 ms path:
    the sender holds itself back, as the kernel's rate sampler says most of the time.  The
    wire tells it from ACKs left unanswered for a while; the sampler marks a rate sample
    app-limited for the whole sample when the write queue ran low once in it, while the wire
    sees the sender ACK-clocked at the top of each round (the buffer refilled at each ACK
    looks like a window reached), so the two agree to SNDBUF_AGREE (seen: 16-20 points), not
    AGREE."""
    doc, files = runs["sndbuf"]
    kernel, row = _kernel(doc), _row(files["sender"])
    assert kernel["app"] > 0.5
    assert row.limit == "sender", row
    assert abs(row.sender_share - kernel["app"]) <= SNDBUF_AGREE, (row, kernel)
    # the chronos themselves, as in every other run
    assert abs(row.rwnd_share + row.zero_window_share - kernel["rwnd"]) <= AGREE, (row, kernel)
    assert abs(1 - row.idle_share - kernel["busy"]) <= AGREE, (row, kernel)


@pytest.mark.netns
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_receiver_side_says_what_it_cannot_tell(runs, name):
    """At the receiver the window limits are seen (the rwnd run gets rwnd, the lossy ones the
    congestion window, in recovery longer than the sender sees it: a hole lasts there until
    the receiver's ACK passes it); a sender held by itself arrives as one held by its window:
    the row says so, and names one of the two."""
    _, files = runs[name]
    row = _row(files["receiver"])
    assert row.side == "receiver" and row.undistinguished, row
    assert row.limit in SCENARIOS[name][2], row


@pytest.mark.netns
def test_an_application_rate_is_the_goodput_it_gets(runs):
    """simpleperf --rate 3mbit: the goodput on the wire is 3 Mbit/s (its payload; the client's
    own report beside it), far under the 10 Mbit/s link."""
    doc, files = runs["app"]
    row = _row(files["sender"])
    assert row.goodput_bps == pytest.approx(3e6, rel=0.05)
    client = doc["reports"][0]["raw"]["client"]["connections"][0]
    assert client["bandwidth_bps"] == pytest.approx(3e6, rel=0.05)


# -- the models beside the measurement, from tshark's numbers -----------------------------------

def _tshark_inputs(path):
    """From tshark alone: the data direction's MSS (its longest segment), the share of its data
    segments re-sent (tcp.analysis.retransmission or out_of_order: at the sender every one is
    a re-send), and the ACK RTTs by Karn's rule -- of the ACKs none of whose newly acknowledged
    bytes (a FIN's included) was re-sent -- in time order."""
    from tests.helpers.tshark_ref import tshark_fields
    f = tshark_fields(path, ("tcp.srcport", "tcp.len", "tcp.seq", "tcp.nxtseq", "tcp.ack",
                             "tcp.analysis.retransmission", "tcp.analysis.out_of_order",
                             "tcp.analysis.ack_rtt"))
    f = f[f["tcp.len"].notna()]                      # TCP packets
    length = f["tcp.len"].astype(int)
    data_port = f.loc[length.idxmax(), "tcp.srcport"]
    data = (f["tcp.srcport"] == data_port) & (length > 0)
    resent = data & (f["tcp.analysis.retransmission"].notna()
                     | f["tcp.analysis.out_of_order"].notna())
    flagged = (f["tcp.srcport"] == data_port) & (f["tcp.analysis.retransmission"].notna()
                                                 | f["tcp.analysis.out_of_order"].notna())
    again = list(zip(f.loc[flagged, "tcp.seq"].astype(int),      # a re-sent FIN included
                     f.loc[flagged, "tcp.nxtseq"].astype(int)))
    rtt, acked = [], 0
    for _, r in f[f["tcp.srcport"] != data_port].iterrows():
        ack = int(r["tcp.ack"])
        if pd.notna(r["tcp.analysis.ack_rtt"]) and ack > acked:
            if not any(lo < ack and hi > acked for lo, hi in again):
                rtt.append(float(r["tcp.analysis.ack_rtt"]))
        acked = max(acked, ack)
    return int(length[data].max()), resent.sum() / data.sum(), np.array(rtt)


def _rfc6298_median(rtt_s):
    """The median timeout RFC 6298 gives over samples, at least 200 ms (written here again)."""
    srtt, var, out = rtt_s[0], rtt_s[0] / 2, []
    for x in rtt_s[1:]:
        var = 0.75 * var + 0.25 * abs(srtt - x)
        srtt = 0.875 * srtt + 0.125 * x
        out.append(max(0.2, srtt + 4 * var))
    return float(np.median(out))


@pytest.mark.parametrize("name", ["sp-reno-loss1pct", "sp-reno-loss10pct", "sp-cubic-loss1pct",
                                  "sp-bbr-loss10pct"])
def test_mathis_and_padhye_from_tsharks_numbers(name):
    path = Path(__file__).parents[2] / "captures" / f"{name}.pcap"
    mss, p, rtt_s = _tshark_inputs(path)
    rtt = float(np.median(rtt_s))
    mathis = 8 * mss / rtt * (3 / 2) ** 0.5 / p ** 0.5
    b, t0 = 2, _rfc6298_median(rtt_s)
    per_s = 1 / (rtt * (2 * b * p / 3) ** 0.5 + t0 * min(1, 3 * (3 * b * p / 8) ** 0.5) * p
                 * (1 + 32 * p * p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = ps.limits(path).to_pandas("models").iloc[0]
    window_cap = row.rwnd_max_bytes / mss / rtt
    assert row.mss_bytes == mss and row.resent_data_share == pytest.approx(p, rel=1e-9)
    assert row.rtt_median_ms == pytest.approx(rtt * 1e3, rel=1e-6)
    assert row.mathis_bps == pytest.approx(mathis, rel=1e-6)
    assert row.padhye_bps == pytest.approx(8 * mss * min(per_s, window_cap), rel=1e-6)


def test_queueing_against_a_full_queue():
    """Cubic at no loss fills the lab's 25 kB queue at 10 Mbit/s (20 ms when full): the RTT
    under load less the base RTT is most of that, never more."""
    path = Path(__file__).parents[2] / "captures" / "sp-cubic-loss0pct.pcap"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = ps.limits(path).to_pandas("models").iloc[0]
    assert row.full_queue_ms == pytest.approx(25000 * 8 / 10e6 * 1e3)
    assert 0.5 * row.full_queue_ms < row.queue_delay_ms <= row.full_queue_ms + 1.0
    assert row.bdp_bytes == pytest.approx(10e6 * row.rtt_min_ms / 1e3 / 8)
