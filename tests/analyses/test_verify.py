"""verify: captures that follow simpleperf's, iperf3's and ping's protocols pass; captures from
deliberately wrong senders fail with the evidence that shows it (frame, offset, expected vs
found); captures that cannot show the content say "cannot tell".

Wrong senders are hand-built connections (test_reassembly.Conversation), so each deviation
and its frame are known by construction; the lab tests run the real tools through loss.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import craft
from pcapstats.analyses.verify import CANNOT_TELL, FAIL, PASS, Expected, verify
from pcapstats.cli import main
from tests.helpers.conversation import Conversation
from tests.helpers.paths import CAPTURES

MSG = b"0" * 1000
TIMED = Expected(tool="simpleperf", time_s=1.0)   # what a "-t 1" sidecar says


def simpleperf(messages, *, bye=b"BYE", answer=b"ACK: BYE", close=True):
    """A simpleperf-like exchange: the client's messages, BYE, the server's answer, FINs.
    Frames: 1-3 handshake, then one a message, then BYE, then the answer."""
    conv = Conversation().handshake()
    for m in messages:
        conv.send(0, m)
    if bye:
        conv.send(0, bye)
    if answer:
        conv.send(1, answer)
    if close:
        conv.fin(0).fin(1)
    return conv


def over_one_second(conv, path, **kw):
    """Write with the packets spread so that the first message to the first packet carrying
    BYE (or the last data) takes 1 s, what TIMED asks."""
    client_data = [i for i, p in enumerate(conv.packets)
                   if p.fields.get("tcp_srcport") == 40000 and p.fields.get("tcp_len")]
    bye = next((i for i in client_data if b"BYE" in conv.packets[i].data), client_data[-1])
    step = (10**9 // (bye - client_data[0])) // 1000 * 1000
    return conv.write(path, step_ns=step, **kw)


def checks(result, stream=0):
    (v,) = [v for v in result.verdicts if v.stream == stream and v.proto == "tcp"]
    return v, {c.name: c for c in v.checks}


def test_a_right_exchange_passes_and_shows_its_frames(tmp_path):
    path = over_one_second(simpleperf([MSG] * 5), tmp_path / "right.pcap")
    v, c = checks(verify(path, expected=TIMED))
    assert v.app == "simpleperf" and v.verdict == PASS, v.why()
    assert c["bye"].frames == (9,) and c["ack"].frames == (10,)
    assert c["order"].frames == (9, 10) and c["close"].frames == (11, 12)
    assert c["message_bytes"].found.startswith("5000 bytes = 5 x 1000")


def test_a_client_stopping_early_fails_the_duration(tmp_path):
    path = simpleperf([MSG] * 5).write(tmp_path / "short.pcap", step_ns=100_000_000)
    v, c = checks(verify(path, expected=TIMED))
    d = c["duration"]
    assert d.verdict == FAIL and d.frames == (4, 9)
    assert d.expected == "-t 1 s: first data to BYE in 0.90-2.00 s"
    assert d.found == "0.500 s (frames 4-9)"


def test_a_bye_late_behind_what_a_send_buffer_holds_cannot_tell(tmp_path):
    """Frames 4-9 half a second apart: BYE 2.5 s after the first data, over -t 1's 2.0 s; but
    only the last message and the BYE left after 2.0 s (frame 8 is 0.3 ms past it: the builder's
    timestamps are uneven) -- the client may have written BYE on time behind a slow path's
    backlog (what 30 % loss does to a real run), so not a fail."""
    path = simpleperf([MSG] * 5).write(tmp_path / "late.pcap", step_ns=500_000_000)
    v, c = checks(verify(path, expected=TIMED))
    d = c["duration"]
    assert d.verdict == CANNOT_TELL and d.frames == (4, 9), d.found
    assert d.found.startswith("2.500 s on the wire (frames 4-9), but 1003 bytes up to the BYE")


def test_a_client_sending_past_what_a_send_buffer_holds_fails(tmp_path):
    """100 segments of 60 kB 0.1 s apart: 80 of them (4.8 MB, over Linux's 4 MiB send buffer)
    first sent after -t 1's 2.0 s (frames 24-103, and the BYE), so the client itself went on
    writing.  The span has the builder's uneven 82 ms on top of 10 s."""
    path = simpleperf([b"0" * 60_000] * 100).write(tmp_path / "long.pcap", step_ns=100_000_000)
    v, c = checks(verify(path, expected=TIMED))
    d = c["duration"]
    assert d.verdict == FAIL, d.found
    assert d.found.startswith("10.082 s (frames 4-104); 4800003 bytes were first sent after 2.00 s")


@pytest.mark.parametrize("cc", ["reno", "cubic", "bbr"])
def test_shipped_30pct_loss_runs_are_not_called_late(cc):
    """The lab's simpleperf -t 3 at 30 % loss: its BYE reaches the wire seconds late, behind
    the retransmissions, and the sidecar's tcp_info says the client wrote no more than asked."""
    path = CAPTURES / f"sp-{cc}-loss30pct.pcap"
    v, c = checks(verify(path))
    assert c["duration"].verdict != FAIL, c["duration"].found


def test_999_byte_messages_fail_naming_the_size_the_segments_show(tmp_path):
    path = over_one_second(simpleperf([b"0" * 999] * 5), tmp_path / "999.pcap")
    v, c = checks(verify(path, expected=TIMED))
    assert v.verdict == FAIL
    # the fault is named as the wire shows it: 999-byte writes, not "a last message of 995"
    m = c["message_bytes"]
    assert m.verdict == FAIL and m.frames == (4,) and m.offset == 0
    assert m.found == ("4995 bytes = 5 x 999: the client writes 999-byte messages (its short "
                       "segments end every 999 bytes, the first in frame 4)")
    # and without knowing it was a -t run: every write ended on a 999 boundary, none on a
    # 1000 one, so no -n run of 1000-byte messages made it
    v, c = checks(verify(path))
    assert c["message_bytes"].verdict == FAIL and v.verdict == FAIL
    # the wire shows where writes ended: inside a message
    assert any("end inside a 1000-byte message, first frame 4 at offset 999" in e
               for e in v.evidence), v.evidence


def test_n_run_with_a_shorter_last_message_passes_only_with_its_size(tmp_path):
    path = over_one_second(simpleperf([MSG, MSG, b"0" * 500]), tmp_path / "n2500.pcap")
    assert verify(path, expected=Expected(tool="simpleperf", num_bytes=2500)).verdict == PASS
    v, c = checks(verify(path, expected=Expected(tool="simpleperf", num_bytes=3000)))
    assert c["message_bytes"].verdict == FAIL and c["message_bytes"].expected == "-n 3000 bytes"


def test_no_bye_fails_with_what_ends_the_stream(tmp_path):
    path = over_one_second(simpleperf([MSG] * 3, bye=None, answer=None), tmp_path / "nobye.pcap")
    v, c = checks(verify(path, expected=TIMED))
    assert v.verdict == FAIL
    assert c["bye"].verdict == FAIL and c["bye"].found.startswith("'000' at offset 2997")
    assert c["bye"].frames == (6,)
    assert c["ack"].verdict == FAIL and c["ack"].found == "the server sent nothing"


def test_bye_twice_fails_at_the_first_bye(tmp_path):
    path = over_one_second(simpleperf([MSG] * 3, bye=b"BYEBYE"), tmp_path / "byebye.pcap")
    v, c = checks(verify(path, expected=TIMED))
    assert c["bye"].verdict == PASS          # it does end with BYE ...
    m = c["messages"]                        # ... but a BYE came before it
    assert m.verdict == FAIL and m.offset == 3000 and m.frames == (7,)
    assert m.found.startswith("'BYEBYE' at offset 3000 (frame 7); 3 byte(s) other than '0'")


def test_a_server_answering_something_else_fails(tmp_path):
    path = over_one_second(simpleperf([MSG] * 2, answer=b"NAK: BYE"), tmp_path / "nak.pcap")
    v, c = checks(verify(path, expected=TIMED))
    assert c["ack"].verdict == FAIL and c["ack"].frames == (7,)
    assert c["ack"].expected == "the server sends exactly 'ACK: BYE'"
    assert c["ack"].found == "'NAK: BYE' (8 bytes, frame 7)"


def test_a_reset_midway_fails_with_the_rst_frame(tmp_path):
    conv = Conversation().handshake().send(0, MSG).send(0, MSG).send(0, flags=0x004 | 0x010)
    path = conv.write(tmp_path / "rst.pcap")
    v, c = checks(verify(path, expected=TIMED))
    assert v.verdict == FAIL
    assert c["close"].verdict == FAIL and c["close"].frames == (6,)
    assert c["close"].found == "RST at frame 6 before both FINs"
    assert c["ack"].verdict == FAIL


def test_wrong_byte_in_a_message_names_offset_frame_and_text(tmp_path):
    path = over_one_second(simpleperf([MSG, b"0" * 123 + b"x" + b"0" * 876, MSG]), tmp_path / "x.pcap")
    v, c = checks(verify(path, expected=TIMED))
    m = c["messages"]
    assert m.verdict == FAIL and m.offset == 1123 and m.frames == (5,)
    assert m.found.startswith("'x000")


def test_retransmitted_and_overlapping_copies_still_pass(tmp_path):
    conv = Conversation().handshake()
    for k in range(4):
        conv.send(0, MSG)
    conv.send(0, b"0" * 1500, at=500)        # a repacketised retransmission over two messages
    conv.send(0, b"BYE").send(0, b"0BY", at=3999)
    conv.send(1, b"ACK: BYE").fin(0).fin(1)
    v, c = checks(verify(over_one_second(conv, tmp_path / "retrans.pcap"), expected=TIMED))
    assert v.verdict == PASS, v.why()
    assert any("bytes sent again" in e for e in v.evidence)


def test_payload_cut_by_snaplen_cannot_tell_the_content_but_checks_the_rest(tmp_path):
    path = over_one_second(simpleperf([MSG] * 4), tmp_path / "cut.pcap", snaplen=54 + 100)
    v, c = checks(verify(path, expected=TIMED))
    assert v.verdict == CANNOT_TELL
    assert c["messages"].verdict == CANNOT_TELL and "3600 bytes cut by snaplen" in c["messages"].found
    # BYE and ACK: BYE are short enough to be whole; the counts come from sequence numbers
    for name in ("bye", "ack", "order", "close", "message_bytes"):
        assert c[name].verdict == PASS, (name, c[name])


def test_capture_starting_mid_connection_cannot_tell_the_counts(tmp_path):
    conv = simpleperf([MSG] * 3)
    conv.packets = conv.packets[4:]           # handshake and first message not captured
    v, c = checks(verify(conv.write(tmp_path / "late.pcap"), expected=TIMED))
    assert c["start"].verdict == CANNOT_TELL and c["message_bytes"].verdict == CANNOT_TELL
    assert v.verdict == CANNOT_TELL


# -- ping, crafted -----------------------------------------------------------------------------

def _ping_capture(path, replies):
    """Requests 1..5 from 10.0.0.1 to 10.0.0.2 (id 77); ``replies``: the seqs answered, in order."""
    frames = []
    for seq in range(1, 6):
        frames.append(craft.ether(craft.ipv4(craft.icmp(4, 8, ident=77, seq=seq, body=b"p" * 8),
                                             "10.0.0.1", "10.0.0.2")))
        for r in [r for r in replies if r == seq]:
            frames.append(craft.ether(craft.ipv4(craft.icmp(4, 0, ident=77, seq=r, body=b"p" * 8),
                                                 "10.0.0.2", "10.0.0.1")))
    frames.append(craft.ether(craft.arp()))   # a last packet 10 s later: no reply is "late"
    ts = craft.times(len(frames), unit_ns=1000, step=200_000_000)
    ts[-1] += 10 * 10**9
    path.write_bytes(craft.pcap([craft.Record(f, t) for f, t in zip(frames, ts)],
                                craft.LT_ETHERNET).data)
    return path


def _ping_checks(path):
    (v,) = verify(path).verdicts
    return v, {c.name: c for c in v.checks}


def test_ping_every_request_answered_passes(tmp_path):
    v, c = _ping_checks(_ping_capture(tmp_path / "ok.pcap", [1, 2, 3, 4, 5]))
    assert v.app == "ping" and v.verdict == PASS


def test_ping_missing_reply_fails_with_its_request_frame(tmp_path):
    v, c = _ping_checks(_ping_capture(tmp_path / "miss.pcap", [1, 2, 4, 5]))
    assert c["replies"].verdict == FAIL and c["replies"].found == "1 unanswered: seq 3"
    assert c["replies"].frames == (5,)


def test_ping_duplicate_reply_fails(tmp_path):
    v, c = _ping_checks(_ping_capture(tmp_path / "dup.pcap", [1, 2, 2, 3, 4, 5]))
    assert c["duplicates"].verdict == FAIL and c["duplicates"].frames == (4, 5)
    assert "seq 2 answered 2 times" in c["duplicates"].found


# -- the command -------------------------------------------------------------------------------

def test_cli_exit_codes_and_formats(tmp_path, capsys):
    good = over_one_second(simpleperf([MSG] * 2), tmp_path / "good.pcap")
    bad = over_one_second(simpleperf([MSG] * 2, answer=b"NO"), tmp_path / "bad.pcap")
    cut = over_one_second(simpleperf([MSG] * 2), tmp_path / "cut.pcap", snaplen=54 + 100)
    assert main(["verify", str(good)]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "pass         ack: expected the server sends exactly 'ACK: BYE'" in out
    assert main(["verify", str(good), str(bad)]) == 1
    assert "found 'NO' (2 bytes, frame 7)" in capsys.readouterr().out
    assert main(["verify", str(cut)]) == 0
    assert "cannot tell" in capsys.readouterr().err
    assert main(["verify", "--strict", str(cut)]) == 1
    capsys.readouterr()
    assert main(["verify", "--format", "json", str(bad)]) == 1
    rows = json.loads(capsys.readouterr().out)
    ack = [r for r in rows if r["check"] == "ack"][0]
    assert ack["verdict"] == "fail" and ack["frames"] == "7" and ack["stream_verdict"] == "fail"
    (tmp_path / "junk.pcap").write_bytes(b"not a capture at all")
    assert main(["verify", str(tmp_path / "junk.pcap")]) == 2
    assert "pcapstats: error:" in capsys.readouterr().err


# -- real tools in the lab ---------------------------------------------------------------------

@pytest.mark.netns
@pytest.mark.parametrize("scenario", [
    dict(tool="simpleperf", duration_s=1.5, loss="10%", rate="20mbit", delay="2ms"),
    dict(tool="simpleperf", bytes="1234567B", loss="10%", rate="20mbit", delay="2ms"),
    dict(tool="simpleperf", duration_s=1, parallel=2, loss="10%", rate="20mbit", delay="2ms"),
], ids=["t", "n", "P2"])
def test_lab_simpleperf_through_loss_passes(tmp_path, scenario):
    from pcapstats.lab import Scenario, load_sidecar, run
    out = tmp_path / "sp.pcap"
    run(Scenario(**scenario), out)
    result = verify(out, sidecar=tmp_path / "sp.json")
    doc = load_sidecar(tmp_path / "sp.json")
    assert all(f["protocol_ok"] for f in doc["flows"])     # the server's own verdict
    assert [v.app for v in result.verdicts] == ["simpleperf"] * scenario.get("parallel", 1)
    for v in result.verdicts:
        assert v.verdict == PASS, (v.stream, v.why())
        c = {x.name: x for x in v.checks}
        if "bytes" in scenario:
            assert c["message_bytes"].found.startswith("1234567 bytes")
        # the messages counted on the wire are what the client says it sent
        sent = {f["streams"]["sp.pcap"]: f["sent_bytes"] for f in doc["flows"]}
        assert c["message_bytes"].found.startswith(f"{sent[v.stream]} bytes")
        assert any("sent again" in e for e in v.evidence), "no retransmission at 10 % loss"


@pytest.mark.netns
def test_lab_ping_with_one_reply_dropped_fails_on_that_sequence_number(tmp_path):
    from pcapstats.lab import topologies
    path = tmp_path / "ping.pcap"
    with topologies.sender_router_receiver() as lab:
        # drop the echo reply with sequence number 3 on the router (ICMP id+seq at IHL + 4)
        rule = ["FORWARD", "-p", "icmp", "--icmp-type", "echo-reply", "-m", "u32", "--u32",
                "0>>22&0x3C@4&0xFFFF=3", "-j", "DROP"]
        lab.run("router", "iptables", "-A", *rule)
        cap = lab.capture("sender", lab.interface("sender", "router").name, path)
        try:
            done = lab.run("sender", "ping", "-c", 5, "-i", 0.2, "-W", 1,
                           lab.address("receiver", 4), check=False)
        finally:
            cap.stop(settle=1.2)
    assert "5 packets transmitted, 4 received" in done.stdout   # ping's own count
    (v,) = verify(path).verdicts
    c = {x.name: x for x in v.checks}
    assert v.app == "ping" and c["replies"].verdict == FAIL
    assert c["replies"].found == "1 unanswered: seq 3"
    assert c["duplicates"].verdict == PASS


@pytest.mark.netns
@pytest.mark.parametrize("udp", [False, True], ids=["tcp", "udp"])
def test_lab_iperf3_passes(tmp_path, udp):
    from pcapstats.lab import Scenario, load_sidecar, run
    out = tmp_path / "ip.pcap"
    scen = dict(tool="iperf3-udp", udp_rate="5mbit") if udp else dict(tool="iperf3",
                                                                       parallel=2)
    run(Scenario(duration_s=1, rate="20mbit", **scen), out)
    doc = load_sidecar(tmp_path / "ip.json")
    result = verify(out, sidecar=doc)
    apps = sorted(v.app for v in result.verdicts)
    assert apps == ["iperf3-control"] + ["iperf3-data"] * len(doc["flows"])
    for v in result.verdicts:
        assert v.verdict == PASS, (v.proto, v.stream, v.why())


def test_a_lab_tool_verify_has_no_checks_for_is_not_recognised(capsys):
    """The shipped pingpong run: its sidecar names the tool, which verify does not check, so
    the stream is 'not recognised' (exit 1, a note), not an internal error."""
    from tests.helpers.paths import CAPTURES
    assert main(["verify", str(CAPTURES / "pingpong-sweep.pcap")]) == 1
    captured = capsys.readouterr()
    assert "nothing recognised" in captured.out
    assert "TCP stream 0: no app recognised: not checked" in captured.err
    assert main(["verify", str(CAPTURES / "pingpong-sweep.pcap"), "--explain"]) == 1
    assert "not recognised as simpleperf or iperf3" in capsys.readouterr().err


def test_a_json_beside_the_capture_that_is_not_a_lab_sidecar_is_warned_about_not_fatal(
        tmp_path, capsys):
    """iperf3 -J output saved as NAME.json beside NAME.pcap: verify (like compare) says so in
    one warning and checks the capture alone, where it had refused the capture."""
    import shutil
    capture = tmp_path / "x.pcap"
    shutil.copy(CAPTURES / "sp-cubic-loss0pct.pcap", capture)
    (tmp_path / "x.json").write_text(json.dumps({"start": {}, "end": {}}))
    assert main(["verify", str(capture)]) == 0
    err = capsys.readouterr().err
    assert "not a pcapstats lab sidecar" in err and "error" not in err
    alone = verify(str(CAPTURES / "sp-cubic-loss0pct.pcap"), sidecar=None).to_pandas()
    with pytest.warns(Warning, match="not a pcapstats lab sidecar"):
        beside = verify(str(capture)).to_pandas()
    assert beside["verdict"].tolist() == alone["verdict"].tolist()
