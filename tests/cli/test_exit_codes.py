"""One exit-code policy for every command (the README's "Exit status"): 0 when it answered (a
"cannot tell" verdict included, unless --strict), 1 when the capture holds nothing the command
looks for -- ONE line, ``pcapstats: nothing to report: ...``, naming the capture and what it
holds --, 2 for bad input or usage -- ONE line, ``pcapstats: error: ...``.

Each analysis command runs on a shipped capture that answers it, on one that holds nothing for
it, on a file that is no capture, and with an option it does not take.
"""
from __future__ import annotations

import struct

import pytest

from pcapstats.cli import main
from tests.helpers.paths import CAPTURES, DATA

TCP = CAPTURES / "sp-reno-loss1pct.pcap"           # one simpleperf transfer
TWO = CAPTURES / "tcp_2streams.pcap"               # two TCP streams, nothing else
PING = CAPTURES / "ping-sweep.pcap"                # ICMP echoes only, at the responder
UDP = CAPTURES / "iperf3-udp-loss10pct.pcap"       # an iperf3 UDP test

# command: (a capture it answers, a capture with nothing for it, what that one holds)
COMMANDS = {
    "throughput": (TCP, PING, "100 packets"),
    "iograph": (TCP, "empty", "in"),
    "retrans": (TCP, PING, "100 ICMP"),
    "cwnd": (TCP, PING, "100 ICMP"),
    "wscale": (TCP, PING, "100 ICMP"),
    "rtt": (TCP, PING, "100 ICMP"),
    "seqgraph": (TCP, PING, "100 ICMP"),
    "flavour": (TCP, UDP, "65536 bytes"),
    "verify": (TWO, "empty", "no simpleperf, iperf3 or ping"),
    "ping": (PING, TWO, "1414 TCP"),
    "udp": (UDP, TWO, "1414 TCP"),
    "fairness": (TWO, TCP, "has 1"),
    "delay": (CAPTURES / "ping-sweep-sender.pcap", TWO, "1414 TCP"),
    "wifi": (DATA / "ieee802.11_exthdr.pcap", TWO, "1414 TCP"),
    "hierarchy": (TCP, "empty", "no packets"),
    "compare": (TCP, "empty", "no packets"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An empty capture (a pcap header, no packet) and a file that is no capture."""
    where = tmp_path_factory.mktemp("exit")
    empty, bad = where / "empty.pcap", where / "bad.pcap"
    empty.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    bad.write_bytes(b"this is a text file, not a capture\n")
    return {"empty": empty, "bad": bad}


def _run(capsys, argv) -> tuple[int, list[str]]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in line or "internal error" in line for line in err), err
    return code, err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_answered_is_0(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, err = _run(capsys, [command, COMMANDS[command][0]])
    assert code == 0, err
    assert not any(line.startswith(("pcapstats: error", "pcapstats: nothing")) for line in err)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_nothing_to_report_is_1_with_one_line(command, files, capsys):
    _, capture, holds = COMMANDS[command]
    capture = files.get(capture, capture)
    code, err = _run(capsys, [command, capture])
    said = [line for line in err if not line.startswith(("pcapstats: warning", "pcapstats: note"))]
    assert code == 1, err
    assert len(said) == 1 and said[0].startswith("pcapstats: nothing to report: "), err
    assert str(capture) in said[0] and holds in said[0], said[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_input_is_2_with_one_line(command, files, capsys):
    for argv in ([command, files["bad"]], [command, COMMANDS[command][0], "--no-such-option"]):
        code, err = _run(capsys, argv)
        assert code == 2, (argv, err)
        assert len(err) == 1 and err[0].startswith("pcapstats: error: "), (argv, err)


def test_several_captures_answer_when_one_does(capsys):
    """A capture with nothing for the command beside one that answers: its one line, exit 0;
    every capture with nothing: exit 1."""
    code, err = _run(capsys, ["retrans", TCP, PING])
    assert code == 0 and [line for line in err if "nothing to report" in line] == [
        f"pcapstats: nothing to report: no TCP packets in {PING} (100 packets: 100 ICMP). "
        "This analysis works on TCP streams; `pcapstats throughput` lists the streams there are"]
    code, err = _run(capsys, ["udp", TCP, TWO])
    assert code == 1 and len(err) == 2 and all("nothing to report: no UDP" in e for e in err)


def test_cannot_tell_is_answered_unless_strict(capsys):
    """verify's "cannot tell" (a loss-10 % simpleperf capture whose BYE was not captured) is an
    answer (0, a warning line); --strict makes it 1."""
    lossy = CAPTURES / "sp-reno-loss10pct.pcap"
    code, err = _run(capsys, ["verify", lossy])
    assert code == 0 and any("cannot tell" in line for line in err), err
    code, err = _run(capsys, ["verify", "--strict", lossy])
    assert code == 1, err


def test_export_and_report_follow_the_policy(files, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    assert _run(capsys, ["export", TCP, "-o", tmp_path / "out", "--tables", "streams"])[0] == 0
    code, err = _run(capsys, ["export", TWO, "-o", tmp_path / "out", "--tables", "ping"])
    assert code == 1 and len(err) == 1 and "nothing to report" in err[0] and "1414 TCP" in err[0]
    code, err = _run(capsys, ["export", files["bad"], "-o", tmp_path / "out"])
    assert code == 2 and len(err) == 1 and err[0].startswith("pcapstats: error: "), err
    code, err = _run(capsys, ["report", files["empty"], "-o", tmp_path / "r.html"])
    assert code == 1 and [line for line in err if "nothing to report" in line], err
    code, err = _run(capsys, ["report", TCP, "-o", tmp_path / "r.txt"])
    assert code == 2 and len(err) == 1 and err[0].startswith("pcapstats: error: "), err
