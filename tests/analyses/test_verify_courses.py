"""verify recognises anyone's simpleperf by the shape of its exchange (messages, ``BYE``,
``ACK: BYE``, close), whatever its fill, port and quirks, and checks the client's printed
report against the wire.

Three parts:

- hand-built exchanges (tests/helpers/conversation.py) for the quirks that are hard to make
  happen live -- ``BYE`` in the last data segment, the server's FIN first or on its answer, a
  retransmitted ``BYE``, random fill with ``BYE`` inside, the client's RST answering an
  ``ACK: BYE`` it did not read -- and for ``--app`` / ``--port`` / ``--size``;
- the client's printed report (``--client-output``): what a row is, the roundings, the errors;
- live: simpleperfs written in a course's styles (tests/helpers/course_simpleperf.py, which
  does not import pcapstats) run between lab namespaces on ports 9000 and 5555, captured with
  the lab's tcpdump.  Each right one passes with no ``--app`` / ``--port`` help (through
  ``ps.verify`` and the command), its printed report too; each wrong one fails on the right
  check and frame, after tshark (tests/helpers/wire_ref.py) has shown the mistake is on the
  wire.
"""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import pcapstats as ps
from pcapstats.analyses.verify import CANNOT_TELL, FAIL, PASS, Expected, parse_client_output
from pcapstats.cli import main
from tests.helpers import course_simpleperf, craft
from tests.helpers.conversation import Conversation
from tests.helpers.wire_ref import FIN, RST, Wire, tcp_streams

X = b"x" * 1000
BYE, ACK = b"BYE", b"ACK: BYE"
CLIENT_ID = "10.0.0.1:40000"


class Course(Conversation):
    """A Conversation on a course's port: 10.0.0.1:40000 -> 10.0.0.2:9000 (not simpleperf's
    8088, so the port cannot be what recognises it)."""
    ends = (("10.0.0.1", 40000), ("10.0.0.2", 9000))

    def _raw(self, side, flags, seq, ack, payload, options=()):
        src, dst = self.ends if side == 0 else self.ends[::-1]
        l4 = craft.tcp(src[1], dst[1], seq=seq % 2**32, ack=ack % 2**32, flags=flags,
                       payload=payload, options=options)
        self.packets.append(craft.ether(craft.ipv4(l4, src[0], dst[0])))


def exchange(messages, *, bye=BYE, answer=ACK, fins=(0, 1)) -> Course:
    """Handshake (frames 1-3), one frame a message, BYE, the answer, FINs in that order."""
    conv = Course().handshake()
    for m in messages:
        conv.send(0, m)
    if bye:
        conv.send(0, bye)
    if answer:
        conv.send(1, answer)
    for side in fins:
        conv.fin(side)
    return conv


def verdict(path, **options):
    result = ps.verify(path, **options)
    (v,) = [v for v in result.verdicts if v.proto == "tcp"]
    return v, {c.name: c for c in v.checks}, result


def write(conv, tmp_path, name="x.pcap"):
    return conv.write(tmp_path / name, step_ns=10_000_000)


# -- recognised by shape, hand-built ------------------------------------------------------------

def random_fill(n: int, seed: int = 7, inside: int | None = None) -> list[bytes]:
    rng = random.Random(seed)
    msgs = [rng.randbytes(1000) for _ in range(n)]
    if inside is not None:   # the random bytes "happen to" hold BYE in the middle of a message
        msgs[inside] = msgs[inside][:500] + BYE + msgs[inside][503:]
    return msgs


@pytest.mark.parametrize("fill", ["x", "0", "random"])
def test_any_fill_on_any_port_is_simpleperf_by_its_shape(tmp_path, fill):
    msgs = random_fill(5, inside=2) if fill == "random" else [fill.encode() * 1000] * 5
    v, c, result = verdict(write(exchange(msgs), tmp_path))
    assert v.app == "simpleperf" and v.server == "10.0.0.2:9000"
    assert v.verdict == PASS, v.why()
    assert c["bye"].frames == (9,) and c["ack"].frames == (10,) and c["close"].frames == (11, 12)
    assert c["message_bytes"].found == "5000 bytes = 5 x 1000"
    assert not result.notes
    if fill == "random":         # BYE inside message 3 (offset 2500) is data, not a second BYE
        assert "a free fill, so a 'BYE' inside the messages is data" in c["messages"].found
    else:
        assert c["messages"].found == f"5000 bytes, all {fill!r}"


def test_a_random_fill_still_fails_on_bye_twice_at_the_end(tmp_path):
    v, c, _ = verdict(write(exchange(random_fill(3), bye=BYE + BYE), tmp_path))
    m = c["messages"]
    assert m.verdict == FAIL and m.frames == (7,) and m.offset == 3000
    assert m.found == "'BYEBYE' at offset 3000 (frame 7): BYE twice"


def test_bye_in_the_same_segment_as_the_last_message(tmp_path):
    v, c, _ = verdict(write(exchange([X] * 3 + [X + BYE], bye=None), tmp_path))
    assert v.verdict == PASS, v.why()
    assert c["bye"].frames == (7,) and c["bye"].offset == 4000
    assert c["message_bytes"].found == "4000 bytes = 4 x 1000"


def test_the_server_closing_first_passes(tmp_path):
    v, c, _ = verdict(write(exchange([X] * 3, fins=(1, 0)), tmp_path))
    assert v.verdict == PASS, v.why()
    assert c["close"].found == "client FIN frame 10, server FIN frame 9"


def test_the_server_fin_on_its_answer_passes(tmp_path):
    conv = exchange([X] * 3, answer=None, fins=())
    conv.send(1, ACK, flags=craft.FIN | craft.ACK | craft.PSH).fin(0)
    v, c, _ = verdict(write(conv, tmp_path))
    assert v.verdict == PASS, v.why()
    assert c["ack"].frames == (8,) and c["close"].frames == (9, 8)


def test_a_retransmitted_bye_is_counted_once_at_its_first_copy(tmp_path):
    conv = Course().handshake()
    for _ in range(3):
        conv.send(0, X)
    conv.send(0, BYE).send(0, BYE, at=3000)          # frames 7 and 8: the same BYE twice
    conv.send(1, ACK).fin(0).fin(1)
    v, c, _ = verdict(write(conv, tmp_path))
    assert v.verdict == PASS, v.why()
    assert c["bye"].frames == (7,) and c["order"].frames == (7, 9)
    assert any("3 bytes sent again" in e for e in v.evidence), v.evidence


def test_a_client_closing_without_reading_the_ack_passes(tmp_path):
    """Its FIN goes before ACK: BYE; its kernel answers the ACK: BYE with an RST."""
    conv = exchange([X] * 3, answer=None, fins=(0,))
    conv.send(1, ACK).fin(1).send(0, flags=craft.RST)
    v, c, _ = verdict(write(conv, tmp_path))
    assert v.verdict == PASS, v.why()
    cl = c["close"]
    assert cl.frames == (8, 11, 10)
    assert cl.found.startswith("client FIN frame 8; its RST at frame 11 answers the server's "
                               "bytes (frame 9) arriving after it closed")


def test_an_rst_instead_of_the_clients_fin_fails(tmp_path):
    conv = exchange([X] * 3, fins=())
    conv.send(0, flags=craft.RST)
    v, c, _ = verdict(write(conv, tmp_path))
    assert v.verdict == FAIL and v.why().startswith("close:")
    assert c["close"].frames == (9,) and c["close"].found == "RST at frame 9 before both FINs"
    assert c["message_bytes"].verdict == PASS     # the BYE marks the end without a FIN


def test_data_after_bye_fails_at_its_frame(tmp_path):
    conv = exchange([X] * 3, answer=None, fins=())
    conv.send(0, b"x" * 500).send(1, ACK).fin(0).fin(1)
    v, c, _ = verdict(write(conv, tmp_path))
    b = c["bye"]
    assert v.verdict == FAIL and b.verdict == FAIL and b.frames == (8,) and b.offset == 3003
    assert b.found == ("500 byte(s) after the 'BYE' at offset 3000 (frame 7): "
                       "'xxxxxxxxxxxxxxxxxxxxxxxx' at offset 3003 (frame 8)")
    assert c["message_bytes"].found == "3000 bytes = 3 x 1000"
    assert c["order"].frames == (7, 9)


def test_more_than_ack_bye_fails_at_the_extra_frame(tmp_path):
    conv = exchange([X] * 2, answer=ACK, fins=())
    conv.send(1, b"!!").fin(0).fin(1)
    v, c, _ = verdict(write(conv, tmp_path))
    a = c["ack"]
    assert a.verdict == FAIL and a.frames == (8,) and a.offset == 8
    assert a.found == "'ACK: BYE' (frame 7), then '!!' at offset 8 (frame 8)"


def test_message_size_other_than_1000(tmp_path):
    path = write(exchange([b"x" * 1024] * 4), tmp_path)
    asked = Expected(time_s=0.05)
    v, c, _ = verdict(path, expected=asked)
    m = c["message_bytes"]
    assert m.verdict == FAIL and m.frames == (4,) and m.offset == 0
    assert m.found == ("4096 bytes = 4 x 1024: the client writes 1024-byte messages (its short "
                       "segments end every 1024 bytes, the first in frame 4)")
    v, c, _ = verdict(path, expected=Expected(time_s=0.05, message_bytes=1024))
    assert c["message_bytes"].verdict == PASS
    assert c["message_bytes"].found == "4096 bytes = 4 x 1024"


def test_n_bytes_asked_by_hand(tmp_path):
    path = write(exchange([X, X, b"x" * 500]), tmp_path)
    v, c, _ = verdict(path, expected=Expected(num_bytes=2500))
    assert v.verdict == PASS
    v, c, _ = verdict(path, expected=Expected(num_bytes=2000))
    m = c["message_bytes"]
    assert m.verdict == FAIL and m.frames == (6,) and m.found.endswith("the last in frame 6")


# -- --app / --port -----------------------------------------------------------------------------

def test_a_stream_of_no_protocol_is_checked_only_when_told(tmp_path):
    """No BYE, no answer, fill x on port 9000: nothing says simpleperf, until --port does."""
    path = write(exchange([X] * 3, bye=None, answer=None), tmp_path)
    result = ps.verify(path)
    assert not result.verdicts
    assert any("not recognised as simpleperf or iperf3" in n.detail for n in result.notes)
    v, c, result = verdict(path, port=9000)
    assert v.app == "simpleperf" and v.verdict == FAIL
    assert c["bye"].found == "'xxx' at offset 2997 (frame 6)" and c["bye"].frames == (6,)
    assert c["ack"].found == "the server sent nothing"
    assert result.notes == ["1 TCP stream(s) checked as simpleperf because --port said so: 0"]
    assert verdict(path, app="simpleperf")[0].app == "simpleperf"
    assert not ps.verify(path, port=5555).verdicts
    assert ps.verify(path, port=5555).notes[0] == "no TCP stream has server port 5555 (--port)"


def test_app_iperf3_checks_a_stream_as_iperf3_and_its_cookie_fails(tmp_path):
    path = write(exchange([X] * 3, bye=None, answer=None), tmp_path)
    v, c, _ = verdict(path, app="iperf3", port=9000)
    assert v.app == "iperf3-data" and c["cookie"].verdict == FAIL and c["cookie"].frames == (4,)
    # --port wins over the shape: a simpleperf-shaped stream taken as iperf3
    shaped = write(exchange([X] * 3), tmp_path, "shaped.pcap")
    assert verdict(shaped, app="iperf3", port=9000)[0].app == "iperf3-data"
    assert verdict(shaped, app="iperf3")[0].app == "simpleperf"   # --app alone: unrecognised only


def test_wrong_app_options_are_one_line_errors(tmp_path, capsys):
    path = write(exchange([X]), tmp_path)
    with pytest.raises(ps.UsageError, match="ping has no port"):
        ps.verify(path, app="ping", port=9000)
    with pytest.raises(ps.UsageError, match="unknown app 'http'"):
        ps.verify(path, app="http")
    assert main(["verify", str(path), "--app", "ping", "--port", "9000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pcapstats: error: ping has no port")
    assert main(["verify", str(path), "-t", "1", "-n", "1KB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "use --time (seconds) or --num (bytes), not both" in err
    assert main(["verify", str(path), "--app", "ping"]) == 0
    assert "ping needs no --app" in capsys.readouterr().err


def test_cli_options_say_what_was_asked(tmp_path, capsys):
    path = write(exchange([b"x" * 1024] * 4), tmp_path)
    assert main(["verify", str(path), "-t", "0.05"]) == 1
    assert "message_bytes: expected whole 1000-byte messages (a -t 0.05 run)" in \
        capsys.readouterr().out
    assert main(["verify", str(path), "-t", "0.05", "--size", "1024", "-P", "1"]) == 0
    out = capsys.readouterr().out
    assert "found 4096 bytes = 4 x 1024" in out and "-P 1 connections" in out
    assert main(["verify", str(path), "-n", "4KB"]) == 1
    assert "expected -n 4000 bytes" in capsys.readouterr().out


# -- the client's printed report ----------------------------------------------------------------

def report(tmp_path, *lines, name="client.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def five_messages(tmp_path) -> Path:
    """5000 message bytes, first data frame 4, BYE frame 9."""
    return write(exchange([X] * 5), tmp_path)


@pytest.mark.parametrize("row", [
    f"{CLIENT_ID}  0.0 - 1.0  0.01 MB  0.04 Mbps",                 # course spacing
    f"{CLIENT_ID:<21}  0.0 - 1.0       5.00 KB         0.04 Mbps",  # pcapstats' layout
    f"{CLIENT_ID}\t0.0 - 1.0\t5000 B\t0.04 Mbps",                  # tabs, bytes
    f"{CLIENT_ID}   0.00-1.00 sec   5 KB   40 Kbps",                # iperf-ish
])
def test_a_report_in_any_layout_passes(tmp_path, row):
    out = report(tmp_path, "A simpleperf client connecting to server 10.0.0.2, port 9000",
                 "ID  Interval  Transfer  Bandwidth", row)
    v, c, _ = verdict(five_messages(tmp_path), client_output=out)
    assert v.verdict == PASS, v.why()
    assert c["report_transfer"].frames == (4, 9)
    assert "the wire: 5000 bytes (frames 4-9)" in c["report_transfer"].found


def test_transfer_is_right_within_half_a_unit_of_its_last_digit(tmp_path):
    path = five_messages(tmp_path)
    for printed, ok in [("5.00 KB", True), ("5.0 KB", True), ("5.004 KB", False),
                        ("4.99 KB", False), ("0.005 MB", True), ("0.0049 MB", False),
                        ("4999 B", False)]:
        out = report(tmp_path, f"{CLIENT_ID}  0.0 - 1.0  {printed}  0.04 Mbps")
        v, c, _ = verdict(path, client_output=out)
        t = c["report_transfer"]
        assert t.verdict == (PASS if ok else FAIL), (printed, t.found)
    out = report(tmp_path, f"{CLIENT_ID}  0.0 - 1.0  4.99 KB  0.04 Mbps")
    t = verdict(path, client_output=out)[1]["report_transfer"]
    assert t.found == "'4.99 KB' (client.txt line 1) = 4985-4995 bytes; the wire: 5000 bytes " \
                      "(frames 4-9)"


def test_a_transfer_in_units_of_1024_says_so(tmp_path):
    path = write(exchange([b"x" * 1024] * 5), tmp_path)    # 5120 bytes = 5.00 KiB
    out = report(tmp_path, f"{CLIENT_ID}  0.0 - 1.0  5.00 KB  0.04 Mbps")
    t = verdict(path, client_output=out)[1]["report_transfer"]
    assert t.verdict == FAIL and t.found.endswith(
        "it is right in units of 1024 (1 KB = 1024 B), the spec's are decimal (1 KB = 1000 B)")


def test_bandwidth_is_the_wire_bytes_over_the_printed_interval(tmp_path):
    path = five_messages(tmp_path)      # 40 000 bits: over 0.95-1.05 s, 0.0381-0.0421 Mbps
    for printed, ok in [("0.04 Mbps", True), ("0.05 Mbps", False), ("40.0 Kbps", True),
                        ("38 Kbps", True), ("37 Kbps", False)]:
        out = report(tmp_path, f"{CLIENT_ID}  0.0 - 1.0  5.00 KB  {printed}")
        b = verdict(path, client_output=out)[1]["report_bandwidth"]
        assert b.verdict == (PASS if ok else FAIL), (printed, b.found)
    out = report(tmp_path, f"{CLIENT_ID}  0.0 - 1.0  5.00 KB  0.05 Mbps")
    b = verdict(path, client_output=out)[1]["report_bandwidth"]
    assert b.found == ("'0.05 Mbps' over 0.0 - 1.0 s (client.txt line 1); the wire's 5000 bytes "
                       "over 0.950-1.050 s: 0.038-0.042 Mbps") and b.frames == (4, 9)


def test_interval_rows_and_the_summary(tmp_path):
    path = five_messages(tmp_path)
    rows = [f"{CLIENT_ID}  0.0 - 0.5  3.00 KB  0.05 Mbps",
            f"{CLIENT_ID}  0.5 - 1.0  2.00 KB  0.03 Mbps"]
    summary = f"{CLIENT_ID}  0.0 - 1.0  5.00 KB  0.04 Mbps"
    v, c, _ = verdict(path, client_output=report(tmp_path, *rows, "-" * 40, summary))
    assert v.verdict == PASS, v.why()
    assert c["report_intervals"].found.startswith("2 rows (client.txt lines 1-2) adding up to "
                                                  "4990-5010 bytes")
    # rows that do not add up to the wire's bytes
    wrong = [rows[0], f"{CLIENT_ID}  0.5 - 1.0  1.00 KB  0.02 Mbps"]
    c = verdict(path, client_output=report(tmp_path, *wrong, summary))[1]
    assert c["report_intervals"].verdict == FAIL and c["report_transfer"].verdict == PASS
    # a row whose bandwidth is not its transfer over its interval
    odd = [rows[0], f"{CLIENT_ID}  0.5 - 1.0  2.00 KB  0.30 Mbps"]
    c = verdict(path, client_output=report(tmp_path, *odd, summary))[1]
    assert c["report_intervals"].verdict == FAIL and "line 2" in c["report_intervals"].found
    # interval rows and no summary
    c = verdict(path, client_output=report(tmp_path, *rows))[1]
    assert c["report_row"].verdict == FAIL and "none spanning the others" in c["report_row"].found


def test_rows_of_other_connections(tmp_path):
    path = five_messages(tmp_path)
    out = report(tmp_path, "10.0.0.1:40001  0.0 - 1.0  5.00 KB  0.04 Mbps",
                 "10.9.9.9:1234  0.0 - 1.0  5.00 KB  0.04 Mbps")
    v, c, result = verdict(path, client_output=out)
    assert c["report_row"].verdict == FAIL       # the same client, not this connection's port
    assert c["report_row"].found == "none; its rows are for 10.0.0.1:40001, 10.9.9.9:1234"
    assert result.notes == ["client output client.txt: 2 ID(s) are no connection of this "
                            "capture"]
    assert result.notes[0].detail == "10.0.0.1:40001, 10.9.9.9:1234"


def test_a_file_without_the_table_is_one_clear_line(tmp_path, capsys):
    path = five_messages(tmp_path)
    junk = report(tmp_path, "Traceback (most recent call last):", "ConnectionRefusedError")
    with pytest.raises(ps.UsageError, match="no simpleperf client table in it"):
        parse_client_output(junk)
    assert main(["verify", str(path), "--client-output", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pcapstats: error: no simpleperf client "
                                                   "table in it (rows 'ID  Interval  Transfer"
                                                   "  Bandwidth', e.g. '10.0.0.1:41234  0.0 - "
                                                   "10.0  12.00 MB  9.60 Mbps')")
    server = report(tmp_path, "ID  Interval  Received  Rate",
                    f"{CLIENT_ID}  0.0 - 1.0  5.00 KB  0.04 Mbps", name="server.txt")
    assert main(["verify", str(path), "--client-output", str(server)]) == 2
    assert "a simpleperf server's table (1 rows under 'Received  Rate')" in capsys.readouterr().err
    assert main(["verify", str(path), "--client-output", str(tmp_path / "none.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such client output" in err


def test_report_checks_cannot_tell_without_the_start(tmp_path):
    conv = exchange([X] * 5)
    conv.packets = conv.packets[3:]                 # no handshake: counts start mid-way
    out = report(tmp_path, f"{CLIENT_ID}  0.0 - 1.0  5.00 KB  0.04 Mbps")
    v, c, _ = verdict(write(conv, tmp_path), client_output=out)
    assert c["report_transfer"].verdict == CANNOT_TELL


# -- live: the course's implementations between lab namespaces -------------------------------

HELPER = Path(course_simpleperf.__file__)
PY = sys.executable


@pytest.fixture(scope="module")
def lab():
    """sender - router - receiver with a 20 Mbit/s bottleneck; one lab for the module."""
    from pcapstats.lab import topologies
    from pcapstats.lab.impair import Impairment, apply
    with topologies.sender_router_receiver() as lab:
        apply(lab, lab.bottleneck, Impairment(rate_bps=20e6))
        yield lab


@dataclass
class Run:
    capture: Path
    printed: Path        # the client's standard output
    stdout: str


def run(lab, tmp_path: Path, name: str, port: int, server: list, client: list) -> Run:
    """The course server in the receiver and client in the sender, the sender's link captured;
    both must exit 0."""
    from pcapstats.lab.traffic import wait_listening
    addr = lab.address("receiver")
    path, printed = tmp_path / f"{name}.pcap", tmp_path / f"{name}.txt"
    procs = []
    with lab.capture("sender", lab.interface("sender", "router").name, path):
        try:
            srv = lab.popen("receiver", PY, HELPER, "server", "-b", addr, "-p", port, *server,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(srv)
            wait_listening(lab, "receiver", port, proc=srv)
            cli = lab.popen("sender", PY, HELPER, "client", "-I", addr, "-p", port, *client,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(cli)
            out, err = cli.communicate(timeout=40)
            _, srv_err = srv.communicate(timeout=40)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    lab.stop(proc)
    assert cli.returncode == 0, err
    assert srv.returncode == 0, srv_err
    printed.write_text(out)
    return Run(path, printed, out)


def passes(r: Run, cli_options: tuple = (), **asked):
    """ps.verify and the command both pass it, recognised as simpleperf unaided, its printed
    report included; returns the verdicts."""
    result = ps.verify(r.capture, client_output=r.printed, **asked)
    assert result.verdicts and all(v.app == "simpleperf" for v in result.verdicts)
    for v in result.verdicts:
        assert v.verdict == PASS, (v.stream, v.why())
        names = {c.name for c in v.checks}
        assert {"bye", "messages", "message_bytes", "ack", "order", "close", "report_transfer",
                "report_bandwidth"} <= names, names
    assert not result.notes, result.notes
    assert main(["verify", str(r.capture), "--client-output", str(r.printed),
                 *map(str, cli_options)]) == 0
    return result.verdicts


def right_on_the_wire(wire: Wire, message_bytes: int, fill: bytes | None) -> bytes:
    """tshark: the client's bytes are the messages then BYE; the server's exactly ACK: BYE."""
    sent = wire.stream()
    assert sent.endswith(BYE) and len(sent) - 3 == message_bytes
    if fill is not None:
        assert sent[:-3] == fill * message_bytes
    assert wire.stream(client=False) == ACK
    return sent


@pytest.mark.netns
def test_classic_client_fill_x_recv1000_server_port_9000(lab, tmp_path):
    """The course report's pair: b"x" * 1000 in a sendall loop for -t, s.send("BYE".encode());
    a server doing recv(1000) and "BYE" in data.decode(), which closes first (the client reads
    until it has)."""
    r = run(lab, tmp_path, "classic", 9000, ["--style", "recv1000"], ["-t", "1", "--wait-close"])
    wire = Wire(r.capture)
    v = passes(r, ("-t", "1"), expected=Expected(time_s=1))[0]
    c = {x.name: x for x in v.checks}
    right_on_the_wire(wire, v.facts["message_bytes"], b"x")
    assert wire.flagged(FIN, client=False)[0] < wire.flagged(FIN, client=True)[0]
    assert c["duration"].verdict == PASS
    assert c["close"].frames == (wire.flagged(FIN, True)[0], wire.flagged(FIN, False)[0])


@pytest.mark.netns
def test_n_bytes_fill_0_endswith_server_port_5555_kb_report(lab, tmp_path):
    r = run(lab, tmp_path, "n0", 5555, ["--style", "endswith"],
            ["-n", "1000000", "--fill", "0", "-f", "KB", "--layout", "wide"])
    sent = right_on_the_wire(Wire(r.capture), 1_000_000, b"0")
    (v,) = passes(r, ("-n", "1MB"), expected=Expected(num_bytes=1_000_000))
    c = {x.name: x for x in v.checks}
    assert c["message_bytes"].expected == "-n 1000000 bytes"
    assert c["report_transfer"].found.startswith("'1000.00 KB'") and len(sent) == 1_000_003


@pytest.mark.netns
def test_interval_rows_socketserver_port_9000(lab, tmp_path):
    r = run(lab, tmp_path, "interval", 9000, ["--style", "socketserver"],
            ["-t", "1.2", "-i", "0.4", "--layout", "tabs"])
    assert r.stdout.count("\t") >= 4 * 3
    (v,) = passes(r, ("-t", "1.2"), expected=Expected(time_s=1.2))
    right_on_the_wire(Wire(r.capture), v.facts["message_bytes"], b"x")
    c = {x.name: x for x in v.checks}
    assert c["report_intervals"].verdict == PASS
    assert c["report_intervals"].found.startswith("3 rows ")


@pytest.mark.netns
def test_two_parallel_connections_socketserver_port_5555(lab, tmp_path):
    r = run(lab, tmp_path, "p2", 5555, ["--style", "socketserver", "--count", "2"],
            ["-t", "0.6", "-P", "2", "-f", "KB", "--decimals", "0"])
    verdicts = passes(r, ("-t", "0.6", "-P", "2"), expected=Expected(time_s=0.6, parallel=2))
    assert len(verdicts) == 2 and tcp_streams(r.capture) == [0, 1]
    for v in verdicts:
        right_on_the_wire(Wire(r.capture, v.stream), v.facts["message_bytes"], b"x")
        c = {x.name: x for x in v.checks}
        assert c["parallel"].verdict == PASS
    syns = sorted(Wire(r.capture, s).flagged(0x02, True)[0] for s in (0, 1))
    # asked for 3: the parallel check fails, naming both connections' SYN frames
    for v in ps.verify(r.capture, expected=Expected(parallel=3)).verdicts:
        p = {x.name: x for x in v.checks}["parallel"]
        assert p.verdict == FAIL and p.frames == tuple(syns)


@pytest.mark.netns
def test_random_fill_with_bye_inside_endswith_server_port_9000(lab, tmp_path):
    r = run(lab, tmp_path, "random", 9000, ["--style", "endswith"],
            ["-n", "1000000", "--fill", "random", "-f", "B"])
    sent = Wire(r.capture).stream()
    assert len(sent) == 1_000_003 and sent.endswith(BYE)
    assert sent.find(BYE) == 2500                # message 3 holds BYE in its middle, on the wire
    passes(r, ("-n", "1MB"))


@pytest.mark.netns
def test_bye_in_the_same_write_as_the_last_message_recv1000_port_5555(lab, tmp_path):
    r = run(lab, tmp_path, "byewithlast", 5555, ["--style", "recv1000"],
            ["-n", "1000000", "--bye-with-last"])
    right_on_the_wire(Wire(r.capture), 1_000_000, b"x")
    passes(r, ("-n", "1MB"))


@pytest.mark.netns
def test_a_client_that_closes_without_reading_the_ack_port_9000(lab, tmp_path):
    r = run(lab, tmp_path, "noread", 9000, ["--style", "endswith"], ["-t", "0.5", "--noread"])
    wire = Wire(r.capture)
    # first ones: a FIN may be sent again, and each late segment gets an RST
    fin, rst = wire.flagged(FIN, True)[0], wire.flagged(RST, True)[0]
    ack = wire.first_carrying(0, client=False)
    assert fin < ack < rst                       # tshark: FIN, then ACK: BYE, then its RST
    (v,) = passes(r, ("-t", "0.5"), expected=Expected(time_s=0.5))
    right_on_the_wire(wire, v.facts["message_bytes"], b"x")
    cl = {x.name: x for x in v.checks}["close"]
    assert cl.frames[:2] == (fin, rst)


# -- live: wrong variants, each first seen on the wire by tshark -----------------------------

def failing(path: Path, check: str, cli_options: tuple = (), **asked):
    """verify fails the (one) connection, first on ``check``; the command exits 1."""
    (v,) = ps.verify(path, **asked).verdicts
    assert v.app == "simpleperf" and v.verdict == FAIL
    assert v.why().startswith(check + ":"), v.why()
    assert main(["verify", str(path), *map(str, cli_options)]) == 1
    return v, {x.name: x for x in v.checks}


@pytest.mark.netns
def test_1024_byte_messages_fail_on_the_message_bytes(lab, tmp_path, capsys):
    for attempt in range(3):                       # 1024 k is a multiple of 1000 once in 125
        r = run(lab, tmp_path, f"m1024-{attempt}", 9000, ["--style", "endswith"],
                ["-t", "0.5", "--msg", "1024"])
        wire = Wire(r.capture)
        sent = wire.stream()
        n = len(sent) - 3
        if n % 1000:
            break
    # tshark: the first write went out alone, 1024 bytes; the total is 1024-byte messages
    assert wire.segments()[0]["len"] == 1024 and n % 1024 == 0 and n % 1000
    assert sent == b"x" * n + BYE
    v, c = failing(r.capture, "message_bytes", ("-t", "0.5"), expected=Expected(time_s=0.5))
    m = c["message_bytes"]
    assert m.offset == 0 and m.frames == (wire.segments()[0]["frame"],)
    assert m.found.startswith(f"{n} bytes = {n // 1024} x 1024: the client writes 1024-byte "
                              "messages (its short segments end every 1024 bytes")
    for name in ("bye", "messages", "ack", "order", "close", "report_transfer"):
        assert c.get(name) is None or c[name].verdict == PASS, (name, c[name])
    # the same capture is right for 1024-byte messages
    (ok,) = ps.verify(r.capture, expected=Expected(time_s=0.5, message_bytes=1024)).verdicts
    assert ok.verdict == PASS, ok.why()
    assert main(["verify", str(r.capture), "-t", "0.5", "--size", "1024",
                 "--client-output", str(r.printed)]) == 0


@pytest.mark.netns
@pytest.mark.parametrize("timed", [True, False])
def test_999_byte_messages_fail_naming_999(lab, tmp_path, timed):
    """A client that writes 999-byte messages: tshark shows its writes end every 999 bytes; the
    failure names 999-byte messages, whether or not verify is told it was a -t run."""
    r = run(lab, tmp_path, f"m999-{timed}", 5555, ["--style", "endswith"],
            ["-t", "0.5", "--msg", "999"])
    wire = Wire(r.capture)
    n = len(wire.stream()) - 3
    assert wire.segments()[0]["len"] == 999 and n % 999 == 0
    asked = {"expected": Expected(time_s=0.5)} if timed else {}
    v, c = failing(r.capture, "message_bytes", ("-t", "0.5") if timed else (), **asked)
    assert "the client writes 999-byte messages" in c["message_bytes"].found


@pytest.mark.netns
def test_a_report_whose_id_is_the_server_and_whose_mbps_are_megabytes_fails(lab, tmp_path):
    """Seed 000's client prints the server's ip:port as its ID and MB/s under 'Mbps': with one
    connection in the capture its rows are that connection's, and the bandwidth fails (it is
    an eighth of the wire's) -- never a pass because the ID matched nothing."""
    r = run(lab, tmp_path, "seed000", 9000, ["--style", "endswith"],
            ["-t", "0.5", "--id-server", "--mbytes-as-mbps"])
    server = f"{lab.address('receiver')}:9000"
    rows = r.stdout.splitlines()
    header = next(k for k, line in enumerate(rows) if line.startswith("ID"))
    assert rows[header + 1].split()[0] == server          # the row's ID
    (v,) = ps.verify(r.capture, client_output=r.printed).verdicts
    c = {x.name: x for x in v.checks}
    assert c["report_transfer"].verdict == PASS
    assert c["report_bandwidth"].verdict == FAIL and v.verdict == FAIL
    assert any(f"speaks of {server}" in e for e in v.evidence), v.evidence
    assert main(["verify", str(r.capture), "--client-output", str(r.printed)]) == 1


@pytest.mark.netns
def test_ack_without_the_space_fails_on_the_answer(lab, tmp_path):
    r = run(lab, tmp_path, "acknospace", 5555, ["--style", "endswith", "--ack", "ACK:BYE"],
            ["-t", "0.3"])
    wire = Wire(r.capture)
    assert wire.stream(client=False) == b"ACK:BYE" and wire.stream().endswith(BYE)
    frame = wire.first_carrying(0, client=False)
    assert wire.carries(frame, 0, b"ACK:BYE", client=False)
    v, c = failing(r.capture, "ack")
    assert c["ack"].frames == (frame,)
    assert c["ack"].found == f"'ACK:BYE' (7 bytes, frame {frame})"


@pytest.mark.netns
def test_no_answer_to_bye_fails_on_the_answer_at_the_bye(lab, tmp_path):
    r = run(lab, tmp_path, "noanswer", 9000, ["--style", "endswith", "--ack", ""],
            ["-t", "0.3"])
    wire = Wire(r.capture)
    sent = wire.stream()
    assert wire.stream(client=False) == b"" and sent.endswith(BYE)
    bye = wire.first_carrying(len(sent) - 1)
    v, c = failing(r.capture, "ack")
    assert c["ack"].frames == (bye,)
    assert c["ack"].found == f"the server sent nothing after the BYE (frame {bye})"


@pytest.mark.netns
def test_data_after_bye_fails_on_the_bye_at_the_first_byte_after_it(lab, tmp_path):
    r = run(lab, tmp_path, "afterbye", 5555, ["--style", "recv1000"],
            ["-t", "0.3", "--after-bye", "500"])
    wire = Wire(r.capture)
    sent = wire.stream()
    at = len(sent) - 503
    assert sent[at:at + 3] == BYE and sent[at + 3:] == b"x" * 500 and BYE not in sent[:at]
    after = wire.first_carrying(at + 3)
    v, c = failing(r.capture, "bye")
    b = c["bye"]
    assert b.frames == (after,) and b.offset == at + 3
    assert b.found.startswith(f"500 byte(s) after the 'BYE' at offset {at} (frame "
                              f"{wire.first_carrying(at + 2)}): 'xxx")
    # a server that closes with those bytes unread answers with an RST, which may reach the
    # client before it closes (when one recv got BYE and them, both sides close with FIN)
    no_fin = "" if wire.flagged(FIN, client=True) else ", and no FIN"
    assert no_fin == "" or wire.flagged(RST, client=False)
    assert b.found.endswith(f"at offset {at + 3} (frame {after}){no_fin}")
    assert c["message_bytes"].found.startswith(f"{at} bytes = ")


@pytest.mark.netns
def test_no_bye_is_not_simpleperf_until_port_says_so_then_fails_on_the_bye(lab, tmp_path, capsys):
    r = run(lab, tmp_path, "nobye", 9000, ["--style", "endswith"], ["-t", "0.3", "--no-bye"])
    wire = Wire(r.capture)
    sent = wire.stream()
    assert BYE not in sent and sent == b"x" * len(sent) and wire.stream(client=False) == b""
    assert not ps.verify(r.capture).verdicts
    assert main(["verify", str(r.capture)]) == 1
    assert "nothing recognised" in capsys.readouterr().out
    v, c = failing(r.capture, "bye", ("--port", 9000), port=9000)
    last = wire.first_carrying(len(sent) - 1)
    assert c["bye"].frames == (last,) and c["bye"].offset == len(sent) - 3
    assert c["bye"].found == f"'xxx' at offset {len(sent) - 3} (frame {last})"
    assert c["ack"].verdict == FAIL and c["ack"].found == "the server sent nothing"


@pytest.mark.netns
def test_a_reset_fails_on_the_close_at_the_rst(lab, tmp_path):
    r = run(lab, tmp_path, "reset", 5555, ["--style", "endswith"], ["-t", "0.3", "--reset"])
    wire = Wire(r.capture)
    rst = wire.flagged(RST, client=True)[0]
    assert not wire.flagged(FIN, client=True) and wire.stream(client=False) == ACK
    assert wire.first_carrying(0, client=False) < rst
    v, c = failing(r.capture, "close")
    assert c["close"].frames == (rst,)
    assert c["close"].found == f"RST at frame {rst} before both FINs"
    for name in ("bye", "messages", "message_bytes", "ack", "order"):
        assert c[name].verdict == PASS, (name, c[name])
