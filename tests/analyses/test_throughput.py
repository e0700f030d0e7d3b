"""Throughput definitions checked on packets whose answers are known by construction."""

import struct

import numpy as np
import pytest
from scapy.all import IP, TCP, Ether, raw

import pcapstats as ps
import pcapstats.streams.summary as S
from tests.helpers.paths import CAPTURES

SHIPPED = sorted(CAPTURES.glob("*.pcap*"))
T0 = 1_700_000_000_000_000_000  # ns


def write_pcap(path, packets) -> None:
    """Nanosecond pcap, Ethernet, written byte by byte: [(time_ns, frame bytes)]."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for t, frame in packets:
        out.append(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))


def _tcp(src, dst, sport, dport, payload, flags="A"):
    return raw(Ether() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, flags=flags) / payload)


@pytest.fixture
def known(tmp_path):
    """B sends first (so B is side A), then 3 x 100-byte payloads from the other side in the
    first second, 1 in the second; times in ns, exact."""
    pkts = [
        (T0, _tcp("10.0.0.2", "10.0.0.1", 80, 40000, b"")),
        (T0 + 100_000_000, _tcp("10.0.0.1", "10.0.0.2", 40000, 80, b"x" * 100)),
        (T0 + 200_000_000, _tcp("10.0.0.1", "10.0.0.2", 40000, 80, b"x" * 100)),
        (T0 + 900_000_000, _tcp("10.0.0.1", "10.0.0.2", 40000, 80, b"x" * 100)),
        (T0 + 1_500_000_000, _tcp("10.0.0.1", "10.0.0.2", 40000, 80, b"x" * 100)),
        (T0 + 2_000_000_000, _tcp("10.0.0.2", "10.0.0.1", 80, 40000, b"")),
    ]
    path = tmp_path / "known.pcap"
    write_pcap(path, pkts)
    return path, pkts


def test_known_answers(known):
    path, pkts = known
    row = ps.throughput(ps.read(path)).to_pandas().iloc[0]
    frame = len(pkts[1][1])                       # a 100-byte-payload frame
    assert (row.address_a, row.port_a, row.address_b, row.port_b) == ("10.0.0.2", 80, "10.0.0.1", 40000)
    assert (row.packets_a_to_b, row.packets_b_to_a) == (2, 4)
    assert row.bytes_b_to_a == 4 * frame and row.payload_bytes_b_to_a == 400
    assert row.duration_s == 2.0 and row.rel_start_s == 0.0
    assert row.payload_bps_b_to_a == 400 * 8 / 2.0
    assert row.peak_payload_bps_b_to_a == 300 * 8 / 1.0     # three payloads in [0 s, 1 s)
    assert row.peak_bps_b_to_a == 3 * frame * 8 / 1.0
    half = ps.throughput(ps.read(path), interval=0.5).to_pandas().iloc[0]
    assert half.peak_payload_bps_b_to_a == 200 * 8 / 0.5    # two payloads in [0 s, 0.5 s)


def test_stream_and_proto_filters(known):
    path, _ = known
    cap = ps.read(path)
    assert len(ps.throughput(cap, proto="udp")) == 0
    assert ps.throughput(cap, stream=0, proto="tcp").table()["stream"].tolist() == [0]
    with pytest.raises(ps.UsageError, match="no TCP stream 5"):
        ps.throughput(cap, stream=5, proto="tcp")
    for bad in (0, -1, float("inf"), float("nan"), 1e-9):
        with pytest.raises(ps.UsageError, match="interval"):
            ps.throughput(cap, interval=bad)
        with pytest.raises(ps.UsageError, match="interval"):
            ps.throughput(path, interval=bad)     # the streaming pass


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_sparse_peaks_equal_dense_peaks(path, monkeypatch):
    """Many streams x many intervals switch the peak search to a sparse group-by; same answer.
    (A fresh capture each time: the stream summary is cached on the capture.)"""
    dense = ps.throughput(ps.read(path), interval=0.01).table()
    monkeypatch.setattr(S, "_DENSE_LIMIT", 1)
    sparse = ps.throughput(ps.read(path), interval=0.01).table()
    for name in dense:
        if dense[name].dtype.kind == "f":
            np.testing.assert_array_equal(dense[name], sparse[name], err_msg=name)
        else:
            assert dense[name].tolist() == sparse[name].tolist(), name


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
@pytest.mark.parametrize("window", [1 << 16, 4 << 20])
def test_streaming_pass_equals_in_memory_table(path, window):
    """A path is read in one pass, windows forgotten as it goes: the in-memory table."""
    whole = ps.throughput(ps.read(path), interval=0.1).table()
    result = ps.throughput(path, interval=0.1, window_bytes=window)
    streamed = result.table()
    assert result.packets == len(ps.read(path))
    for name in whole:
        if whole[name].dtype.kind == "f":
            np.testing.assert_array_equal(whole[name], streamed[name], err_msg=name)
        else:
            assert whole[name].tolist() == streamed[name].tolist(), name


def test_streaming_pass_falls_back_when_time_goes_back(tmp_path, monkeypatch):
    """Packets whose time jumps back across windows cannot be closed interval by interval: the
    pass notices and reads the capture whole, so the answer is still exact."""
    frames = []
    for i in range(400):   # ~80 KB of packets, then the same again 10 s earlier
        frames.append((T0 + 10**10 + i * 10**7, _tcp("10.0.0.1", "10.0.0.2", 40000, 80, b"z" * 150)))
    for i in range(400):
        frames.append((T0 + i * 10**7, _tcp("10.0.0.1", "10.0.0.2", 40001, 80, b"z" * 150)))
    path = tmp_path / "back.pcap"
    write_pcap(path, frames)
    whole = ps.throughput(ps.read(path)).table()
    streamed = ps.throughput(path, window_bytes=1 << 16).table()
    monkeypatch.setattr(S, "_CHUNK_ROWS", 64)  # the in-memory table, fed in chunks, falls back too
    chunked = ps.throughput(ps.read(path)).table()
    assert whole["rel_start_s"].tolist() == streamed["rel_start_s"].tolist() == [0.0, -10.0]
    for name in ("packets", "bytes", "peak_bps_a_to_b", "peak_payload_bps_a_to_b"):
        assert whole[name].tolist() == streamed[name].tolist() == chunked[name].tolist(), name
    assert whole["peak_bps_a_to_b"][0] == 100 * len(frames[0][1]) * 8   # 100 packets a second


@pytest.mark.netns
@pytest.mark.parametrize("name", ["recv_nano.pcap", "recv_nano.pcapng", "router_s96_bpf.pcap"])
def test_streaming_pass_on_real_captures_in_small_windows(real_captures, name):
    """Mixed TCP/UDP/ICMP/IPv6 traffic in 64 KiB windows: rows reused from window to window
    must not leak a field of the previous window's packet."""
    path = real_captures[name]
    whole = ps.throughput(ps.read(path)).table()
    streamed = ps.throughput(path, window_bytes=1 << 16).table()
    for name_ in whole:
        if whole[name_].dtype.kind == "f":
            np.testing.assert_array_equal(whole[name_], streamed[name_], err_msg=name_)
        else:
            assert whole[name_].tolist() == streamed[name_].tolist(), name_
