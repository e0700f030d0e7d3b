"""verify on real TCP from deliberately wrong senders and servers, between lab namespaces.

test_verify.py proves each failure on hand-built captures; here the same mistakes go through a
real kernel and a real capture: a client writing 999-byte messages, one that never sends BYE,
one that sends BYE twice, one that resets the connection midway, and a server answering
``NAK: BYE`` (to the real simpleperf client).  The real simpleperf, client and server, is the
control that passes.

Every expectation comes from tshark's reading of the same capture (tests/helpers/wire_ref.py),
never from pcapstats: the test first proves the mistake reached the wire (tshark's segments and
payloads), then that verify fails on the right check and that the frames it names carry what
it says they carry.  test_verify_courses.py does the same for simpleperfs written in a course's
styles.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pcapstats.analyses.verify import FAIL, PASS, Expected, verify
from tests.helpers.wire_ref import Wire

pytestmark = pytest.mark.netns

SEND_S = 0.5                  # every client sends messages for this long (a "-t 0.5" run)
TIMED = Expected(tool="simpleperf", time_s=SEND_S)   # what a -t 0.5 sidecar says
ZERO, BYE, ACK = ord("0"), b"BYE", b"ACK: BYE"

# A client that gets simpleperf wrong on purpose.  argv: mode addr port seconds.  It paces its
# writes (2 ms apart, TCP_NODELAY: one write a segment) so the capture stays small and each
# mistake sits in a segment of its own.  Prints the message bytes it wrote.
WRONG_CLIENT = r"""
import socket, struct, sys, time
mode, addr, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
message = b"0" * (999 if mode == "999" else 1000)
s = socket.create_connection((addr, port), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sent, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    s.sendall(message)
    sent += len(message)
    time.sleep(0.002)
if mode == "reset":                       # abortive close: RST instead of FIN
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
else:
    for _ in range({"nobye": 0, "byetwice": 2}.get(mode, 1)):
        s.sendall(b"BYE")
    if mode != "nobye":
        answer = b""
        while len(answer) < 8 and (chunk := s.recv(8 - len(answer))):
            answer += chunk
s.close()
print(sent, flush=True)
"""

# A server that answers `reply` once the bytes read so far end with BYE, reads on to the end
# and closes.  argv: addr port reply.
SERVER = r"""
import socket, sys
addr, port, reply = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr, port))
srv.listen(1)
conn, _ = srv.accept()
tail, answered = b"", False
try:
    while chunk := conn.recv(65536):
        tail = (tail + chunk)[-3:]
        if tail == b"BYE" and not answered:
            conn.sendall(reply)
            answered = True
except ConnectionResetError:
    pass
conn.close()
"""

ADDR, PORT = object(), object()   # placeholders in argv tuples: the server's address and port
SIMPLEPERF = (sys.executable, "-m", "pcapstats.tools.simpleperf")


@pytest.fixture(scope="module")
def lab():
    """sender - router - receiver with a 20 Mbit/s bottleneck (keeps the real simpleperf's
    captures to about a megabyte); one lab for the whole module."""
    from pcapstats.lab.impair import Impairment, apply
    from pcapstats.lab import topologies
    with topologies.sender_router_receiver() as lab:
        apply(lab, lab.bottleneck, Impairment(rate_bps=20e6))
        yield lab


def exchange(lab, path: Path, port: int, server: tuple, client: tuple
             ) -> subprocess.CompletedProcess:
    """Capture the sender's link (full payload) while ``server`` runs in the receiver and
    ``client`` in the sender (argv tuples; their ADDR and PORT items filled in).  Returns the
    client's exit code and output; the server must exit by itself, with status 0."""
    from pcapstats.lab.traffic import wait_listening
    addr = lab.address("receiver")

    def argv(args):
        return [{ADDR: addr, PORT: port}.get(a, a) for a in args]
    with lab.capture("sender", lab.interface("sender", "router").name, path):
        srv = lab.popen("receiver", *argv(server), stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)
        wait_listening(lab, "receiver", port, proc=srv)
        cli = lab.popen("sender", *argv(client), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
        out, err = cli.communicate(timeout=20)
        _, srv_err = srv.communicate(timeout=15)
        assert srv.returncode == 0, srv_err
    return subprocess.CompletedProcess(client, cli.returncode, out, err)


def wrong_client(mode: str) -> tuple:
    return (sys.executable, "-c", WRONG_CLIENT, mode, ADDR, PORT, SEND_S)


def wrong_exchange(lab, path: Path, port: int, mode: str):
    """A wrong client of ``mode`` against the good server: its result (it must exit 0, having
    made its mistake) and the wire."""
    done = exchange(lab, path, port, server(), wrong_client(mode))
    assert done.returncode == 0, done.stderr
    return done, Wire(path)


def server(reply: str = "ACK: BYE") -> tuple:
    return (sys.executable, "-c", SERVER, ADDR, PORT, reply)


def checks(path: Path, expected: Expected = TIMED):
    (v,) = verify(path, expected=expected).verdicts
    assert v.app == "simpleperf"
    return v, {c.name: c for c in v.checks}


# -- the control ---------------------------------------------------------------------------------

def test_the_real_simpleperf_passes(lab, tmp_path):
    path = tmp_path / "right.pcap"
    done = exchange(lab, path, 8201, SIMPLEPERF + ("-s", "-b", ADDR, "-p", PORT, "--once"),
                    # a bounded send buffer: BYE does not wait long behind queued messages
                    SIMPLEPERF + ("-c", "-I", ADDR, "-p", PORT, "-t", SEND_S,
                                  "--sndbuf", 200_000))
    assert done.returncode == 0, done.stderr
    wire = Wire(path)
    sent = wire.stream()
    assert sent.endswith(BYE) and sent[:-3] == b"0" * (len(sent) - 3)
    assert len(sent) > 3 and (len(sent) - 3) % 1000 == 0
    assert wire.stream(client=False) == ACK
    v, c = checks(path)
    assert v.verdict == PASS, v.why()
    assert c["message_bytes"].found.startswith(f"{len(sent) - 3} bytes = ")
    (bye,) = c["bye"].frames
    assert c["bye"].offset == len(sent) - 3 and wire.carries(bye, len(sent) - 1, b"E")
    (ack,) = c["ack"].frames
    assert wire.carries(ack, 0, ACK, client=False)
    assert c["close"].frames == (wire.flagged(0x01, True)[0], wire.flagged(0x01, False)[0])


# -- wrong clients ---------------------------------------------------------------------------------

def test_999_byte_messages_fail_on_the_message_bytes(lab, tmp_path):
    path = tmp_path / "999.pcap"
    done, wire = wrong_exchange(lab, path, 8202, "999")
    sent = wire.stream()
    n = len(sent) - 3
    # on the wire: 999-byte segments of '0', then BYE; what the client says it wrote
    assert {s["len"] for s in wire.segments()[:-1]} == {999}
    assert sent == b"0" * n + BYE and n == int(done.stdout) and n % 1000
    v, c = checks(path)
    assert v.verdict == FAIL
    m = c["message_bytes"]
    assert m.verdict == FAIL and m.expected == f"whole 1000-byte messages (a -t {SEND_S:g} run)"
    # every segment ends a 999-byte write: the check names the size the client writes, from
    # the first short segment (the first data segment), rather than only the last message
    first = wire.segments()[0]
    assert m.found == (f"{n} bytes = {n // 999} x 999: the client writes 999-byte messages "
                       f"(its short segments end every 999 bytes, the first in frame "
                       f"{first['frame']})"), m.found
    assert m.frames == (first["frame"],) and m.offset == 0
    # the write boundaries it shows: the first message ends at offset 999, in the first segment
    assert (f"end inside a 1000-byte message, first frame {first['frame']} at offset 999"
            in " ".join(v.evidence)), v.evidence
    assert first["offset"] == 0 and first["len"] == 999
    for name in ("bye", "ack", "order", "close", "messages"):
        assert c[name].verdict == PASS, (name, c[name])


def test_no_bye_fails_with_the_last_bytes_and_no_answer(lab, tmp_path):
    path = tmp_path / "nobye.pcap"
    done, wire = wrong_exchange(lab, path, 8203, "nobye")
    sent = wire.stream()
    assert sent == b"0" * int(done.stdout) and BYE not in sent
    assert wire.stream(client=False) == b"" and wire.flagged(0x01, True)
    v, c = checks(path)
    b = c["bye"]
    assert v.verdict == FAIL and b.verdict == FAIL and b.expected == "'BYE' at the end"
    assert b.offset == len(sent) - 3
    assert b.found == f"'000' at offset {len(sent) - 3} (frame {b.frames[0]})"
    assert wire.carries(b.frames[0], len(sent) - 3, b"000")
    assert c["ack"].verdict == FAIL and c["ack"].found == "the server sent nothing"


def test_bye_twice_fails_at_the_first_bye(lab, tmp_path):
    path = tmp_path / "byebye.pcap"
    done, wire = wrong_exchange(lab, path, 8204, "byetwice")
    sent = wire.stream()
    n = int(done.stdout)
    assert sent == b"0" * n + BYE + BYE
    v, c = checks(path)
    assert c["bye"].verdict == PASS                  # it ends with BYE, but one came before
    m = c["messages"]
    assert v.verdict == FAIL and m.verdict == FAIL and m.offset == n
    (frame,) = m.frames
    assert m.found == f"'BYEBYE' at offset {n} (frame {frame}); 3 byte(s) other than '0' in all"
    assert wire.carries(frame, n, BYE)
    assert frame == min(s["frame"] for s in wire.segments()
                        if s["offset"] <= n < s["offset"] + s["len"])


def test_a_reset_midway_fails_on_the_close_with_the_rst_frame(lab, tmp_path):
    path = tmp_path / "rst.pcap"
    done, wire = wrong_exchange(lab, path, 8205, "reset")
    (rst,) = wire.flagged(0x04, client=True)
    assert not wire.flagged(0x01, client=True) and not wire.flagged(0x04, client=False)
    assert wire.stream() == b"0" * int(done.stdout)
    v, c = checks(path)
    cl = c["close"]
    assert v.verdict == FAIL and cl.verdict == FAIL and cl.frames == (rst,)
    assert cl.expected == "FIN from both sides (the server's after its ACK: BYE), no RST"
    assert cl.found == f"RST at frame {rst} before both FINs"
    assert c["bye"].verdict == FAIL and c["ack"].verdict == FAIL


# -- a wrong server -------------------------------------------------------------------------------

def test_a_server_answering_nak_fails_on_the_answer(lab, tmp_path):
    path = tmp_path / "nak.pcap"
    done = exchange(lab, path, 8206, server("NAK: BYE"),
                    SIMPLEPERF + ("-c", "-I", ADDR, "-p", PORT, "-t", SEND_S,
                                  "--sndbuf", 200_000))
    # the real client's own verdict
    assert done.returncode != 0 and "answered b'NAK: BYE'" in done.stderr, done.stderr
    wire = Wire(path)
    assert wire.stream(client=False) == b"NAK: BYE" and wire.stream().endswith(BYE)
    v, c = checks(path)
    a = c["ack"]
    assert v.verdict == FAIL and a.verdict == FAIL
    assert a.expected == "the server sends exactly 'ACK: BYE'"
    (frame,) = a.frames
    assert a.found == f"'NAK: BYE' (8 bytes, frame {frame})"
    assert wire.carries(frame, 0, b"NAK: BYE", client=False)
    assert c["order"].verdict == PASS and c["bye"].verdict == PASS
