"""tcp.stream / udp.stream numbering on hand-built sequences, checked against tshark packet by
packet: port reuse, retransmitted SYNs, SYNs from the other side, mid-stream starts."""
import shutil
import struct
import subprocess

import pandas as pd
import pytest
from scapy.all import IP, TCP, UDP, Ether, raw

import pcapstats as ps

C, S = ("10.0.0.1", 40000), ("10.0.0.2", 80)


def seg(src, dst, flags, seq, ack=0, payload=b""):
    return raw(Ether() / IP(src=src[0], dst=dst[0]) /
               TCP(sport=src[1], dport=dst[1], flags=flags, seq=seq, ack=ack) / payload)


def handshake(isn_c, isn_s):
    return [seg(C, S, "S", isn_c), seg(S, C, "SA", isn_s, isn_c + 1),
            seg(C, S, "A", isn_c + 1, isn_s + 1), seg(C, S, "PA", isn_c + 1, isn_s + 1, b"x" * 10)]


def close(isn_c, isn_s):
    return [seg(C, S, "FA", isn_c + 11, isn_s + 1), seg(S, C, "FA", isn_s + 1, isn_c + 12),
            seg(C, S, "A", isn_c + 12, isn_s + 2)]


# name -> (frames, the stream of each frame by the rule in pcapstats/streams/numbering.py)
CASES = {
    "port reuse after close, new ISN": (
        handshake(100, 900) + close(100, 900) + handshake(5000, 7000),
        [0] * 7 + [1] * 4),
    "same ISN after close stays": (
        handshake(100, 900) + close(100, 900) + [seg(C, S, "S", 100)],
        [0] * 8),
    "retransmitted SYN stays": (
        [seg(C, S, "S", 100), seg(C, S, "S", 100)] + handshake(100, 900)[1:],
        [0] * 5),
    "new SYN on an open connection": (
        handshake(100, 900) + [seg(C, S, "S", 3000), seg(S, C, "SA", 4000, 3001)],
        [0] * 4 + [1] * 2),
    "SYN from the server side with another ISN": (
        handshake(100, 900) + [seg(S, C, "S", 12345)],
        [0] * 4 + [1]),
    "SYN-ACK never splits": (
        handshake(100, 900) + [seg(S, C, "SA", 55555, 101)],
        [0] * 5),
    "mid-stream start, then a SYN": (
        [seg(C, S, "A", 500, 900), seg(S, C, "A", 900, 510), seg(C, S, "S", 500)],
        [0, 0, 1]),
    "a SYN against the base an ACK already set for that side splits": (
        [seg(C, S, "A", 500, 900), seg(S, C, "S", 77)],
        [0, 1]),
    "a SYN from a side with no base yet does not split (simultaneous open)": (
        [seg(C, S, "S", 500), seg(S, C, "S", 77)],
        [0, 0]),
    "interleaved conversations keep first-appearance order": (
        [seg(C, S, "S", 1), seg(("10.0.0.3", 1), S, "S", 1), seg(C, S, "S", 2),
         seg(("10.0.0.3", 1), S, "S", 1)],
        [0, 1, 2, 1]),
}


def write(path, frames):
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for i, frame in enumerate(frames):
        out.append(struct.pack("<IIII", 1_700_000_000 + i, 0, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))


def tshark_streams(path, field):
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", field],
                         capture_output=True, text=True, check=True).stdout
    return [int(v) if v else None for v in out.splitlines()]


@pytest.mark.parametrize("kernel", ["c", "numpy"])
@pytest.mark.parametrize("name", CASES)
def test_tcp_stream_numbering(name, kernel, tmp_path):
    frames, expected = CASES[name]
    path = tmp_path / "s.pcap"
    write(path, frames)
    if shutil.which("tshark"):
        assert tshark_streams(path, "tcp.stream") == expected, "the construction disagrees with tshark"
    try:
        cap = ps.read(path, kernel=kernel)
    except ps.UsageError as e:
        pytest.skip(str(e))
    assert cap.packets["tcp_stream"].tolist() == expected


def test_udp_streams_follow_first_appearance(tmp_path):
    frames = [raw(Ether() / IP(src=a, dst=b) / UDP(sport=p, dport=q)) for a, b, p, q in [
        ("10.0.0.1", "10.0.0.2", 1000, 53), ("10.0.0.3", "10.0.0.2", 1000, 53),
        ("10.0.0.2", "10.0.0.1", 53, 1000), ("10.0.0.1", "10.0.0.2", 1001, 53)]]
    path = tmp_path / "u.pcap"
    write(path, frames)
    expected = [0, 1, 0, 2]
    if shutil.which("tshark"):
        assert tshark_streams(path, "udp.stream") == expected
    assert ps.read(path).packets["udp_stream"].tolist() == expected


def test_bogus_headers_number_streams_as_tshark(tmp_path):
    """A TCP header length under 20 or past the packet still gets a tcp.stream in tshark 4.0; a
    UDP length under 8 gets no udp.stream.  Either way the later streams keep tshark's numbers."""
    ip = IP(src="10.0.0.1", dst="10.0.0.2")
    frames = [raw(Ether() / ip / TCP(sport=1000, dport=80, flags="S", dataofs=4)),
              raw(Ether() / ip / TCP(sport=1001, dport=80, flags="S", dataofs=15)),
              raw(Ether() / ip / UDP(sport=53, dport=53, len=3)),
              raw(Ether() / ip / TCP(sport=1002, dport=80, flags="S")),
              raw(Ether() / ip / UDP(sport=54, dport=53))]
    path = tmp_path / "bogus.pcap"
    write(path, frames)
    tcp, udp = [0, 1, None, 2, None], [None, None, None, None, 0]
    if shutil.which("tshark"):
        assert tshark_streams(path, "tcp.stream") == tcp
        assert tshark_streams(path, "udp.stream") == udp
    for kernel in ("c", "numpy"):
        packets = ps.read(path, kernel=kernel).packets
        assert [None if v is pd.NA else v for v in packets["tcp_stream"]] == tcp, kernel
        assert [None if v is pd.NA else v for v in packets["udp_stream"]] == udp, kernel


@pytest.mark.slow
def test_numbering_is_the_same_window_by_window(tmp_path):
    """Port reuse, retransmitted SYNs and interleaved conversations spread over many 64 KiB
    windows: the windowed read numbers every packet as the one-window read and tshark do."""
    from pcapstats.ingest import read_fast
    frames = []
    for i in range(120):
        isn = 1000 + 7919 * i                               # a new ISN each time: port reuse
        other = (f"10.0.1.{i % 7 + 1}", 2000 + i % 5)      # conversations that come back
        frames += [seg(C, S, "S", isn), seg(C, S, "S", isn)]             # retransmitted SYN
        frames += handshake(isn, 50 * i)[1:] + [seg(other, S, "S", i)]
        frames += [seg(C, S, "PA", isn + 1, 50 * i + 1, b"y" * 400) for _ in range(3)]
        frames += close(isn, 50 * i)
    path = tmp_path / "reuse.pcap"
    write(path, frames)
    whole = ps.read(path).packets["tcp_stream"].tolist()
    for kernel in ("c", "numpy"):
        windowed = read_fast(path, kernel=kernel, window_bytes=1 << 16).packets["tcp_stream"].tolist()
        assert windowed == whole, kernel
    assert max(whole) > 120
    if shutil.which("tshark"):
        assert tshark_streams(path, "tcp.stream") == whole
