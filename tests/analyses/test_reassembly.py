"""TCP reassembly: hand-built segments whose stream is known by construction (overlaps,
retransmissions, reordering, holes, snaplen cuts, sequence wrap), and real captures checked
against tshark's ``-z follow,tcp,raw``."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.helpers.conversation import Conversation
import pcapstats
from pcapstats.analyses.reassembly import HOLE_CUT, HOLE_LOST, reassemble
from tests.helpers.paths import DATA

def _stream_bytes(r, stream, direction) -> bytes:
    return b"".join(bytes(c) for _, c in r.chunks(stream, direction))


def test_overlaps_and_retransmissions_take_each_byte_once(tmp_path):
    conv = Conversation().handshake()
    conv.send(0, b"ABCDEFGHIJ", at=0)
    conv.send(0, b"KLMNOPQRST", at=10)
    conv.send(0, b"FGHIJKLMNO", at=5)       # overlaps both: covered already
    conv.send(0, b"UVWXYZ", at=20)
    conv.send(0, b"STUVWX", at=18)          # retransmission straddling a boundary
    conv.send(0, b"0123", at=30)            # after a hole of 4 bytes (26-29)
    conv.send(0, b"YZab", at=24)            # fills 26-27, leaves 28-29 missing
    conv.fin(0)
    conv.send(1, b"ok").fin(1)
    path = conv.write(tmp_path / "overlaps.pcap")
    with reassemble(pcapstats.read(path)) as r:
        assert _stream_bytes(r, 0, 0) == b"ABCDEFGHIJKLMNOPQRSTUVWXYZab" + b"0123"
        holes = r.hole_list(0, 0)
        assert holes["start"].tolist() == [28] and holes["length"].tolist() == [2]
        assert holes["reason"].tolist() == [HOLE_LOST]
        flow = r.flow(0, 0)
        assert flow["end_offset"] == 34 and flow["start_seen"]
        assert flow["captured_bytes"] == 32 and flow["lost_bytes"] == 2
        assert flow["wire_bytes"] == 10 + 10 + 10 + 6 + 6 + 4 + 4
        # the piece map says which frame each byte came from: the lowest-starting copy
        # (frames: 4 ABCDEFGHIJ@0, 5 KLMNOPQRST@10, 6 FGHIJKLMNO@5, 7 UVWXYZ@20, 8 STUVWX@18,
        # 9 0123@30, 10 YZab@24)
        pieces = r.piece_map(0, 0)
        assert pieces["start"].tolist() == [0, 10, 15, 20, 24, 26, 30]
        assert pieces["frame"].tolist() == [4, 6, 5, 8, 7, 10, 9]
        assert r.read(0, 0, 8, 6) == b"IJKLMN"
        with pytest.raises(pcapstats.UsageError, match="28-30 are not captured"):
            r.read(0, 0, 25, 6)
        assert _stream_bytes(r, 0, 1) == b"ok"


def test_snaplen_cut_payload_is_a_cut_hole_and_a_later_full_copy_fills_it(tmp_path):
    conv = Conversation().handshake()
    conv.send(0, b"a" * 100)                 # cut: 14 + 20 + 20 = 54 bytes of headers
    conv.send(0, b"b" * 100)                 # cut, never re-sent whole
    conv.send(0, b"a" * 100, at=0)           # the same bytes again (still cut)
    conv.fin(0)
    path = conv.write(tmp_path / "cut.pcap", snaplen=54 + 30)
    with reassemble(pcapstats.read(path)) as r:
        flow = r.flow(0, 0)
        assert flow["captured_bytes"] == 60 and flow["cut_bytes"] == 140
        holes = r.hole_list(0, 0)
        assert holes["start"].tolist() == [30, 130]
        assert holes["length"].tolist() == [70, 70]
        assert set(holes["reason"].tolist()) == {HOLE_CUT}
        assert r.read(0, 0, 100, 30) == b"b" * 30


def test_sequence_numbers_wrap_past_2_to_the_32(tmp_path):
    conv = Conversation(isn=(2**32 - 6, 7)).handshake()
    conv.send(0, b"0123456789").send(0, b"abcdef").fin(0)
    path = conv.write(tmp_path / "wrap.pcap")
    with reassemble(pcapstats.read(path)) as r:
        assert _stream_bytes(r, 0, 0) == b"0123456789abcdef"
        assert r.flow(0, 0)["end_offset"] == 16


def test_no_syn_means_offsets_start_at_the_first_segment_seen(tmp_path):
    conv = Conversation()
    conv.send(0, b"middle of a stream")
    path = conv.write(tmp_path / "nosyn.pcap")
    with reassemble(pcapstats.read(path)) as r:
        flow = r.flow(0, 0)
        assert not flow["start_seen"] and flow["end_offset"] == -1
        assert _stream_bytes(r, 0, 0) == b"middle of a stream"


def test_scan_finds_the_lowest_offset_that_differs(tmp_path, monkeypatch):
    import pcapstats.analyses.reassembly as mod
    monkeypatch.setattr(mod, "SCAN_WINDOW_BYTES", 1000)   # several windows
    conv = Conversation().handshake()
    for k in range(20):
        conv.send(0, b"0" * 500)
    conv.send(0, b"0" * 499 + b"X", at=3000)               # a retransmission differing: ignored
    conv.send(0, b"Y", at=7777 - 1)                        # covered already: the first copy wins
    path = conv.write(tmp_path / "scan.pcap")
    with reassemble(pcapstats.read(path)) as r:
        assert r.scan_for_other_than(0, 0, 0, 10000, ord("0")) == (0, -1)
    conv.send(0, b"0" * 10 + b"Q" + b"0" * 5, at=10000).send(0, b"00R")
    path = conv.write(tmp_path / "scan2.pcap")
    with reassemble(pcapstats.read(path)) as r:
        assert r.scan_for_other_than(0, 0, 0, r.flow(0, 0)["seen_end"], ord("0")) == (2, 10010)


# -- against tshark ---------------------------------------------------------------------------

def tshark_follow(path, stream: int) -> dict[int, bytes]:
    """``tshark -z follow,tcp,raw,N``: node 0 (the first packet's source) unindented."""
    out = subprocess.run(["tshark", "-r", str(path), "-q", "-z", f"follow,tcp,raw,{stream}"],
                         capture_output=True, text=True, check=True).stdout
    body = out.split("=" * 67)[1].strip("\n").splitlines()
    data = {0: b"", 1: b""}
    for line in body:
        if line.startswith(("Follow:", "Filter:", "Node ")) or not line.strip():
            continue
        data[1 if line.startswith("\t") else 0] += bytes.fromhex(line.strip())
    return data


def assert_matches_tshark(path) -> int:
    """Every stream of a capture without holes equals tshark's follow; returns bytes compared."""
    cap = pcapstats.read(path)
    compared = 0
    with reassemble(cap) as r:
        assert r.holes["key"].size == 0, "this comparison needs a capture without holes"
        for stream in np.unique(r.flows["stream"]).tolist():
            want = tshark_follow(path, stream)
            for direction in (0, 1):
                got = _stream_bytes(r, stream, direction) if r.flow(stream, direction) else b""
                assert got == want[direction], (stream, direction, len(got), len(want[direction]))
                compared += len(got)
    return compared


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tcp_retransmissions.pcapng", "tcp_zerowindowrecovery.pcapng",
                                  "sessionhijacking.pcapng", "ssh.pcap"])
def test_shipped_captures_equal_tshark_follow(name):
    assert assert_matches_tshark(craft_data(name)) > 0


def craft_data(name):
    return DATA / name


@pytest.mark.netns
def test_lossy_lab_capture_equals_tshark_follow(tmp_path):
    """simpleperf through 10 % loss, captured at the receiver (retransmissions fill what the
    router dropped) and at the sender (every copy): both give tshark's streams."""
    from pcapstats.lab import Scenario, run
    out = tmp_path / "lossy.pcap"
    run(Scenario(tool="simpleperf", loss="10%", rate="20mbit", delay="2ms", duration_s=1,
                 capture="both"), out)
    for side in ("sender", "receiver"):
        path = tmp_path / f"lossy.{side}.pcap"
        cap = pcapstats.read(path)
        assert assert_matches_tshark(path) > 100_000
        if side == "sender":   # the receiver never sees the copies the router dropped
            with reassemble(cap) as r:
                (flow,) = [r.flow(s, 0) for s in np.unique(r.flows["stream"]).tolist()]
                assert flow["wire_bytes"] > flow["captured_bytes"], "no retransmission"
