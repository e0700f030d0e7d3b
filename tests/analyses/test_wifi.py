"""pcapstats wifi: throughput beside signal, data rate and 802.11 retries, per group of frames
and per interval, against independent answers.

- the public 802.11 captures: every group's and every interval's numbers equal those computed
  here from tshark's own per-frame fields (frame.time_relative, frame.len,
  radiotap.dbm_antsignal, radiotap.datarate, wlan.fc.type, wlan.fc.ds, wlan.fc.retry), and the
  frames and bytes per interval of a data group equal tshark's io,stat with that display filter;
- a hand-built walk away from an access point (frames laid down byte by byte, so every number
  is known by construction): the station's signal, data rate and retries second by second,
  beside its throughput; the access point's beacons, 802.11 ACKs and downlink frames in their
  own rows;
- compare over three such captures (close, medium, far): signal, rate and retries of each
  beside its goodput, equal to wifi's main row.
"""
from __future__ import annotations

import math
import re
import statistics
import warnings

import pandas as pd
import pytest

from tests.helpers import craft as c
from tests.helpers.partial import assert_answers_as_on_the_whole_file
from tests.helpers.paths import CAPTURES, DATA
from tests.helpers.tshark_ref import epoch_ns, tshark, tshark_fields

import pcapstats as ps
from pcapstats.analyses.wifi import READS, rows_needed
from pcapstats.capture import Needs

pytestmark = pytest.mark.filterwarnings("ignore::pcapstats.PcapstatsWarning")

PUBLIC = ["ieee802.11_exthdr.pcap", "ieee802.11_htc.pcap", "ieee802.11_meshid.pcap",
          "ieee802.11_rx-stbc.pcap", "wpa-Induction.pcap",
          "wpa2linkuppassphraseiswireshark.pcap", "Network_Join_Nokia_Mobile.pcap"]
GROUP_OF_DS = {0: "data, no AP", 1: "data to AP", 2: "data from AP", 3: "data, AP to AP"}
FIELDS = ("frame.time_relative", "frame.len", "radiotap.dbm_antsignal", "radiotap.datarate",
          "wlan.fc.type", "wlan.fc.ds", "wlan.fc.retry")


def _tshark_frames(path) -> list[dict]:
    """tshark's fields of every frame (first occurrences), as numbers."""
    df = tshark_fields(path, FIELDS)
    out = []
    for row in df.itertuples(index=False):
        rel, length, signal, rate, kind, ds, retry = (None if pd.isna(v) else v for v in row)
        out.append({"rel_ns": epoch_ns(rel), "len": int(length),
                    "signal": None if signal is None else int(signal),
                    "rate": None if rate is None else float(rate) * 1e6,
                    # the flags are dissected for protocol version 0 only (schema: wlan layer)
                    "control": retry is not None,
                    "type": None if retry is None else int(kind, 0),
                    "ds": None if retry is None else int(ds, 0),
                    "retry": retry is not None and retry in ("1", "True")})
    return out


def _summarise(frames: list[dict]) -> dict:
    """The numbers of one group (or one interval of it), by the definitions of the module
    docstring, from tshark's frames."""
    signals = [f["signal"] for f in frames if f["signal"] is not None]
    rates = [f["rate"] for f in frames if f["rate"] is not None]
    controlled = [f for f in frames if f["control"]]
    return {"packets": len(frames), "bytes": sum(f["len"] for f in frames),
            "signal_dbm": statistics.median(signals) if signals else math.nan,
            "datarate_bps": statistics.median(rates) if rates else math.nan,
            "retry_share": (sum(f["retry"] for f in controlled) / len(controlled)
                            if controlled else math.nan)}


def _groups(frames: list[dict]) -> dict[str, list[dict]]:
    out = {"all": frames}
    for ds, name in GROUP_OF_DS.items():
        mine = [f for f in frames if f["type"] == 2 and f["ds"] == ds]
        if mine:
            out[name] = mine
    return out


def _same(a, b) -> bool:
    return (math.isnan(a) and math.isnan(b)) if isinstance(a, float) and math.isnan(a) \
        else a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_captures_equal_tsharks_fields_per_group_and_interval(name):
    path = DATA / name
    frames = _tshark_frames(path)
    result = ps.wifi(path, interval=1.0)
    table = result.to_pandas("frames")
    span_s = max(f["rel_ns"] for f in frames) / 1e9
    groups = _groups(frames)
    assert table["frames"].tolist() == list(groups)
    for row, (group, mine) in zip(table.itertuples(), groups.items()):
        want = _summarise(mine)
        for column, value in want.items():
            assert _same(getattr(row, column), value), (name, group, column)
        if span_s > 0:
            assert row.avg_capture_bps == pytest.approx(want["bytes"] * 8 / span_s)
    intervals = result.to_pandas("intervals")
    for group, mine in groups.items():
        rows = intervals[intervals["frames"] == group].set_index("interval")
        by_interval: dict[int, list[dict]] = {}
        for f in mine:     # tshark io,stat's interval: the time rounded to the us, floored
            by_interval.setdefault((f["rel_ns"] + 500) // 1000 // 1_000_000, []).append(f)
        assert set(by_interval) <= set(rows.index)
        assert (rows.loc[~rows.index.isin(list(by_interval)), "packets"] == 0).all()
        for k, fs in by_interval.items():
            want = _summarise(fs)
            for column, value in want.items():
                assert _same(rows.loc[k, column], value), (name, group, k, column)


def test_data_groups_per_interval_equal_tsharks_io_stat():
    """Frames and bytes per interval of the two data directions, against tshark's io,stat with
    their display filters (wpa2linkup..., 0.5 s)."""
    path = DATA / "wpa2linkuppassphraseiswireshark.pcap"
    text = tshark("-r", str(path), "-q", "-z", "io,stat,0.5,,wlan.fc.type==2 && wlan.fc.ds==1,"
                  "wlan.fc.type==2 && wlan.fc.ds==2")
    got = ps.wifi(path, interval=0.5).to_pandas("intervals")
    rows = [[int(v) for v in line.strip().strip("|").split("|")[1:]]
            for line in text.splitlines() if "<>" in line]
    for column, group in ((2, "data to AP"), (4, "data from AP")):
        want = {k: (r[column], r[column + 1]) for k, r in enumerate(rows) if r[column]}
        mine = got[(got["frames"] == group) & (got["packets"] > 0)]
        assert {int(k): (int(p), int(b)) for k, p, b in
                zip(mine["interval"], mine["packets"], mine["bytes"])} == want, group


# -- a walk away from the access point, built frame by frame -----------------------------------

STATION, SERVER = "192.0.2.10", "198.51.100.1"
PAYLOAD = 1400
BEACONS_PER_S, AP_SIGNAL = 10, -38


def _walk(phases) -> tuple[bytes, list[dict]]:
    """A monitor-mode capture of a station sending UDP datagrams to its access point, phase
    after phase (seconds, frames a second, the station's signal, its MCS index, frames a second
    sent again with the Retry flag).  Every station frame is acknowledged by the AP (an 802.11
    ACK at 24 Mbit/s); every 4th is answered by a small downlink data frame; beacons at
    BEACONS_PER_S.  Returns the pcap and the station's expected numbers, second by second."""
    records, expected, second = [], [], 0
    up = c.wlan(c.ipv4(c.udp(5000, 5001, b"u" * PAYLOAD), STATION, SERVER), qos=0)
    again = c.wlan(c.ipv4(c.udp(5000, 5001, b"u" * PAYLOAD), STATION, SERVER), qos=0,
                   retry=True)
    down = c.wlan(c.ipv4(c.udp(5001, 5000, b"d" * 40), SERVER, STATION), qos=0, tods=False,
                  fromds=True)
    ap = [c.rt_flags(), c.rt_rate(48), c.rt_signal(AP_SIGNAL)]
    ack = c.radiotap(c.wlan_frame("ack"), ap)
    beacon = c.radiotap(c.wlan_frame("beacon"), [c.rt_flags(), c.rt_rate(2),
                                                 c.rt_signal(AP_SIGNAL)])
    downlink = c.radiotap(down, [c.rt_flags(), c.rt_signal(AP_SIGNAL), c.rt_mcs(7)])
    for seconds, per_s, signal, mcs, retried in phases:
        radio = [c.rt_flags(), c.rt_signal(signal), c.rt_mcs(mcs)]
        first, repeat = c.radiotap(up, radio), c.radiotap(again, radio)
        for _ in range(seconds):
            base = c.BASE_NS + second * 10**9
            for j in range(BEACONS_PER_S):
                records.append(c.Record(beacon, base + 50_000 + j * 10**9 // BEACONS_PER_S))
            for j in range(per_s):
                t = base + 1000 + j * 10**9 // per_s
                records.append(c.Record(first, t))
                records.append(c.Record(ack, t + 100_000))
                if j < retried:
                    records.append(c.Record(repeat, t + 300_000))
                    records.append(c.Record(ack, t + 400_000))
                if j % 4 == 0:
                    records.append(c.Record(downlink, t + 600_000))
            frames = per_s + retried
            expected.append({"second": second, "packets": frames,
                             "bytes": per_s * len(first.data) + retried * len(repeat.data),
                             "signal_dbm": signal,
                             "datarate_bps": c.ht_rate_mbps(mcs, False, False) * 1e6,
                             "retry_share": retried / frames})
            second += 1
    records.sort(key=lambda r: r.ts_ns)
    return c.pcap(records, c.LT_RADIOTAP, nano=True).data, expected


WALK = [(3, 200, -42, 7, 0), (3, 150, -63, 4, 15), (3, 60, -76, 1, 30)]


def test_a_walk_away_shows_signal_rate_and_retries_beside_throughput(tmp_path):
    """Second by second, the station's frames (data to AP) have its signal, its MCS rate and
    its retries, and a throughput of their frame bits; the AP's frames are the other rows."""
    data, expected = _walk(WALK)
    path = tmp_path / "walk.pcap"
    path.write_bytes(data)
    result = ps.wifi(path)
    frames = result.to_pandas("frames").set_index("frames")
    assert list(frames.index) == ["all", "data to AP", "data from AP"]
    assert frames["main"].tolist() == [False, True, False]      # the station's: the most bytes
    up = result.to_pandas("intervals")
    up = up[up["frames"] == "data to AP"].reset_index(drop=True)
    assert len(up) == len(expected)
    for got, want in zip(up.itertuples(), expected):
        assert got.interval == want["second"]
        assert got.packets == want["packets"] and got.bytes == want["bytes"]
        assert got.bps == want["bytes"] * 8
        assert got.signal_dbm == want["signal_dbm"]
        assert got.datarate_bps == pytest.approx(want["datarate_bps"])
        assert got.retry_share == pytest.approx(want["retry_share"])
    # the AP's own frames: its signal, the 802.11 ACKs' 24 Mbit/s among them; no retries
    assert frames.loc["data from AP", "signal_dbm"] == AP_SIGNAL
    assert frames.loc["data from AP", "retry_share"] == 0
    assert frames.loc["data to AP", "retried"] == sum(3 * p[4] for p in WALK)
    # distance behaves like loss: as the signal falls, the rate falls and the retries rise
    per_phase = up.groupby(up.index // 3)
    assert per_phase["signal_dbm"].mean().is_monotonic_decreasing
    assert per_phase["datarate_bps"].mean().is_monotonic_decreasing
    assert per_phase["retry_share"].mean().is_monotonic_increasing
    assert per_phase["bps"].mean().is_monotonic_decreasing


def test_compare_puts_signal_rate_and_retries_beside_goodput(tmp_path):
    """Three captures of a distance study: compare's signal, data rate and retries of each
    are wifi's main row (the station's frames), beside its goodput (UDP payload over the
    capture span)."""
    paths = []
    for name, phase in zip(("close", "medium", "far"), WALK):
        data, _ = _walk([phase])
        paths.append(tmp_path / f"{name}.pcap")
        paths[-1].write_bytes(data)
    result = ps.compare(paths, labels=[r"(?P<distance>close|medium|far)"], by="distance")
    table = result.to_pandas("captures").set_index("distance")
    for path, (name, (_, per_s, signal, mcs, retried)) in zip(paths, zip(
            ("close", "medium", "far"), WALK)):
        row = table.loc[name]
        main = ps.wifi(path).to_pandas("frames").query("main").iloc[0]
        assert row.wifi_frames == main.frames == "data to AP"
        assert (row.signal_dbm, row.datarate_bps, row.retry_share) == (
            main.signal_dbm, main.datarate_bps, main.retry_share)
        assert row.signal_dbm == signal
        assert row.retry_share == pytest.approx(retried / (per_s + retried))
        assert row.goodput_bps > 0
    shown = [s.column for s in result.view["captures"]]
    assert {"signal_dbm", "datarate_bps", "retry_share", "goodput_bps"} <= set(shown)
    assert table["retry_share"].is_monotonic_increasing
    assert table["goodput_bps"].is_monotonic_decreasing


def test_a_wired_capture_is_one_clear_error():
    with pytest.raises(ps.NothingToReport, match="no 802.11 frames"):
        ps.wifi(CAPTURES / "tcp_2streams.pcap")


@pytest.mark.parametrize("name", ["wpa2linkuppassphraseiswireshark.pcap",
                                  "ieee802.11_exthdr.pcap", "ieee802.11_rx-stbc.pcap"])
def test_the_rows_and_columns_it_names_give_the_whole_files_answers(name):
    for interval in (1.0, 0.01):
        assert_answers_as_on_the_whole_file(ps.wifi, Needs(READS, rows_needed), DATA / name,
                                            interval=interval)


def test_the_figure_stacks_the_four_on_one_time_axis(tmp_path):
    data, expected = _walk(WALK)
    path = tmp_path / "walk.pcap"
    path.write_bytes(data)
    fig = ps.wifi(path).figure()
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["Throughput (Mbit/s)", "Signal (dBm)", "Data rate (Mbit/s)",
                      "Retries (%)"], labels
    assert len({ax.get_xlim() for ax in fig.axes}) == 1
    warnings.simplefilter("ignore")
    assert re.search("walk.pcap", fig.texts[0].get_text() if fig.texts else
                     fig._suptitle.get_text())
