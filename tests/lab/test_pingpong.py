"""pingpong against its docstring: the flags, the table, the report, and the wire.

Everything runs on loopback (127.0.0.1), no namespaces.  Expected values come from the
documented wire format (an 18-byte header ``>2sIIQ``: b"PP", seq, size, time_ns; S bytes each
way), from servers and clients written here in a few lines of socket code, from statistics
recomputed here from the report's samples, and from tcpdump + tshark reading the packets.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PP = [sys.executable, "-m", "pcapstats.tools.pingpong"]
HDR = struct.Struct(">2sIIQ")       # written from the docstring, not imported from the tool
END = 0xFFFFFFFF
TABLE_HEADER = ["size (B)", "n", "lost", "avg (ms)", "min (ms)", "max (ms)", "mdev (ms)"]

needs_capture = pytest.mark.skipif(
    shutil.which("tcpdump") is None or shutil.which("tshark") is None or os.geteuid() != 0,
    reason="needs root, tcpdump and tshark (apt-get install tcpdump tshark)")


def _free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and the rows of the client's table (columns split on 2+ spaces)."""
    header, rows = None, []
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells == TABLE_HEADER:
            header = cells
        elif header and len(cells) == 7 and cells[0].isdigit():
            rows.append(cells)
    assert header, stdout
    return header, rows


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pingpong: error: "), proc.stderr
    return lines[0]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _send_order(sizes: list[int], reps: int, order: str) -> list[int]:
    if order == "sweep":
        return [s for s in sizes for _ in range(reps)]
    return [s for _ in range(reps) for s in sizes]


@contextlib.contextmanager
def _tool_server(*args):
    """The tool's server on 127.0.0.1, once it says it listens; killed if still running."""
    proc = subprocess.Popen(PP + ["-s", "-b", "127.0.0.1", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        banner, deadline = "", time.monotonic() + 15
        while "listening on" not in banner:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError(f"server did not start: {banner!r}")
            fd = proc.stdout.fileno()  # raw reads: the text wrapper's buffer stays empty
            if select.select([fd], [], [], 0.2)[0]:
                banner += os.read(fd, 4096).decode()
        proc.banner = banner
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _finish(proc, timeout=20) -> tuple[str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.banner + out, err


def _client(*args, timeout=60):
    return subprocess.run(PP + ["-c", "127.0.0.1", *args], capture_output=True, text=True,
                          timeout=timeout)


@contextlib.contextmanager
def _thread(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    yield t
    t.join(timeout=20)
    assert not t.is_alive()


# -- the flags --------------------------------------------------------------------------------

BAD_FLAGS = [
    (["-c", "127.0.0.1", "--sizes", "17"], "invalid size '17'"),
    (["-c", "127.0.0.1", "--sizes", "18,64,17"], "invalid size '17'"),
    (["-c", "127.0.0.1", "--udp", "--sizes", "70000"], "invalid size 70000 with --udp"),
    (["-c", "127.0.0.1", "--sizes", "16385KiB"], "the largest message is 16777216"),
    (["-c", "127.0.0.1", "--sizes", "1KB"], "invalid size '1KB'"),
    (["-c", "127.0.0.1", "-p", "80"], "invalid port '80'"),
    (["-s", "-p", "65536"], "invalid port '65536'"),
    (["-c", "127.0.0.1", "-p", "http"], "invalid port 'http'"),
    (["-c", "127.0.0.1", "--bogus"], "unrecognized arguments: --bogus"),
    (["-c", "127.0.0.1", "-r", "0"], "invalid number of repetitions '0'"),
    (["-c", "127.0.0.1", "-r", "1000001"], "invalid number of repetitions '1000001'"),
    (["-c", "127.0.0.1", "--interval", "-1"], "invalid time '-1'"),
    (["-c", "127.0.0.1", "--udp", "--timeout", "0"], "invalid time '0'"),
    (["-c", "127.0.0.1", "--order", "random"], "invalid choice: 'random'"),
    ([], "exactly one mode"),
    (["-s", "-c", "127.0.0.1"], "exactly one mode"),
    (["-s", "--sizes", "18"], "--sizes cannot be used in server (-s) mode"),
    (["-c", "127.0.0.1", "--once"], "--once cannot be used in client (-c) mode"),
    (["-s", "-b", "server"], "invalid IP address 'server'"),
    (["-c", "127.0.0.1", "--report", "/nonexistent-dir/r.json"], "no directory"),
]


@pytest.mark.parametrize("argv,message", BAD_FLAGS, ids=[" ".join(a) or "none"
                                                          for a, _ in BAD_FLAGS])
def test_bad_flags_give_one_line_and_exit_2(argv, message):
    proc = subprocess.run(PP + argv, capture_output=True, text=True, timeout=30)
    assert message in _one_error_line(proc)
    assert proc.stdout == ""


@pytest.mark.parametrize("udp", [False, True], ids=["tcp", "udp"])
def test_nothing_listening_is_one_line(udp):
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    port = _free_port(kind)
    proc = _client("-p", str(port), "-r", "1", *(["--udp"] if udp else []), timeout=30)
    line = _one_error_line(proc)
    assert f"127.0.0.1:{port}" in line and "connection refused" in line


@pytest.mark.slow
def test_kib_sizes_and_defaults(tmp_path):
    """64KiB is 65536; the default sizes (the UDP default ends at the largest datagram)."""
    port = str(_free_port())
    with _tool_server("-p", port, "--once"):
        proc = _client("-p", port, "--sizes", "1KiB,18,64kib", "-r", "1", "--interval", "0",
                       "--report", str(tmp_path / "c.json"))
    assert proc.returncode == 0, proc.stderr
    assert [r[0] for r in _table(proc.stdout)[1]] == ["1024", "18", "65536"]
    port = str(_free_port(socket.SOCK_DGRAM))
    with _tool_server("-p", port, "--udp", "--once"):
        proc = _client("-p", port, "--udp", "-r", "1", "--interval", "0")
    assert proc.returncode == 0, proc.stderr
    assert [int(r[0]) for r in _table(proc.stdout)[1]] == [18, 64, 256, 1024, 4096, 16384,
                                                          65507]


# -- runs between the tool's client and server --------------------------------------------

RUNS = [("tcp", "sweep", "1024,18,65536,300,100000", 5),
        ("udp", "interleave", "1024,18,65507,300,1473", 5)]


@pytest.mark.parametrize("proto,order,sizes,reps", RUNS, ids=[r[0] for r in RUNS])
def test_run_table_agrees_with_samples(tmp_path, proto, order, sizes, reps):
    udp = ["--udp"] if proto == "udp" else []
    port = str(_free_port(socket.SOCK_DGRAM if udp else socket.SOCK_STREAM))
    c_json, s_json = tmp_path / "client.json", tmp_path / "server.json"
    interval = 0.002
    with _tool_server("-p", port, *udp, "--once", "--report", str(s_json)) as srv:
        cli = _client("-p", port, *udp, "--sizes", sizes, "-r", str(reps), "--order", order,
                      "--interval", str(interval), "--report", str(c_json))
        assert cli.returncode == 0, cli.stderr
        srv_out, srv_err = _finish(srv)
    assert srv.returncode == 0 and "Traceback" not in srv_err, srv_err
    size_list = [int(s) for s in sizes.split(",")]
    plan = _send_order(size_list, reps, order)

    first = cli.stdout.splitlines()[0]
    assert f"server 127.0.0.1, port {port}, {proto.upper()}" in first
    _, rows = _table(cli.stdout)
    assert [int(r[0]) for r in rows] == size_list            # the order of --sizes
    assert all((int(r[1]), int(r[2])) == (reps, 0) for r in rows)

    report = json.loads(c_json.read_text())
    assert report["schema"] == "pcapstats.pingpong/1" and report["role"] == "client"
    assert report["settings"] == {"server": "127.0.0.1", "port": int(port), "proto": proto,
                                  "sizes": size_list, "repetitions": reps,
                                  "interval_s": interval, "order": order,
                                  "timeout_s": 1.0 if udp else None, "cc": None}
    samples = report["samples"]
    assert [s[0] for s in samples] == list(range(len(plan)))
    assert [s[1] for s in samples] == plan
    assert samples[0][2] == 0
    for (_, _, sent, lat), (_, _, next_sent, _) in zip(samples, samples[1:]):
        assert isinstance(lat, int) and lat > 0
        # one message in flight: the next goes after the answer and the pause
        assert next_sent >= sent + lat + interval * 1e9
    assert samples[-1][3] > 0

    by_row = {int(r[0]): r for r in rows}
    for summary in report["sizes"]:
        lat = [s[3] for s in samples if s[1] == summary["size"]]
        expect = {"avg_ms": statistics.fmean(lat) / 1e6, "min_ms": min(lat) / 1e6,
                  "max_ms": max(lat) / 1e6, "mdev_ms": statistics.pstdev(lat) / 1e6}
        assert (summary["n"], summary["lost"]) == (reps, 0)
        row = by_row[summary["size"]]
        for cell, key in zip(row[3:], ("avg_ms", "min_ms", "max_ms", "mdev_ms")):
            assert summary[key] == pytest.approx(expect[key], rel=1e-9, abs=1e-12), key
            assert abs(float(cell) - expect[key]) <= 0.0005 + 1e-9, (key, cell, expect[key])

    server = json.loads(s_json.read_text())
    peer, = server["peers"]
    assert server["role"] == "server" and server["settings"]["proto"] == proto
    assert peer["remote"] == report["local"] and peer["local"] == report["remote"] \
        == f"127.0.0.1:{port}"
    assert peer["messages"] == server["messages"] == len(plan)
    assert peer["bytes_received"] == peer["bytes_sent"] == sum(plan)
    assert peer["ended"] == ("END" if udp else "closed")
    line, = [ln for ln in srv_out.splitlines() if ln.startswith("client ")]
    assert line.startswith(f"client {report['local']}: {len(plan)} messages answered")


# -- the wire, as tcpdump and tshark see it ---------------------------------------------------

@contextlib.contextmanager
def _tcpdump(path: Path, port: int):
    proc = subprocess.Popen(["tcpdump", "-i", "lo", "-n", "-s", "160", "-Z", "root",
                             "--immediate-mode", "-w", str(path), "port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen, deadline = "", time.monotonic() + 10
    try:
        time.sleep(0.1)
        while "listening on" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen
            if select.select([proc.stderr.fileno()], [], [], 0.2)[0]:
                seen += os.read(proc.stderr.fileno(), 4096).decode()
        yield
    finally:
        time.sleep(0.3)  # packets in flight
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    assert re.search(r"^0 packets dropped by kernel", seen + err, re.M), seen + err


def _tshark_rows(path: Path, proto: str, port: int) -> list[tuple[str, int, bytes, int]]:
    """(direction, payload bytes, first payload bytes, frame time ns) of every packet that
    carries payload, in capture order; direction c2s or s2c."""
    fields = (["-e", "tcp.srcport", "-e", "tcp.len"] if proto == "tcp" else
              ["-e", "udp.srcport", "-e", "udp.length"])
    filt = "tcp.len > 0" if proto == "tcp" else "udp and not icmp"
    proc = subprocess.run(["tshark", "-n", "-r", str(path), "-d", f"{proto}.port=={port},data",
                           "-Y", filt, "-T", "fields", *fields, "-e", "data.data",
                           "-e", "frame.time_epoch", "-E", "separator=/t"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = []
    for line in proc.stdout.splitlines():
        sport, length, data, epoch = line.split("\t")
        payload = int(length) - (8 if proto == "udp" else 0)
        rows.append(("s2c" if int(sport) == port else "c2s", payload, bytes.fromhex(data),
                     int(Decimal(epoch) * 10**9)))
    return rows


@pytest.mark.slow
@needs_capture
@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_wire_is_one_message_each_way_in_turn(tmp_path, proto):
    udp = ["--udp"] if proto == "udp" else []
    sizes = [18, 1473, 65507] + ([] if udp else [200000])
    reps = 3
    port = _free_port(socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
    pcap = tmp_path / "pp.pcap"
    with _tcpdump(pcap, port):
        with _tool_server("-p", str(port), *udp, "--once") as srv:
            cli = _client("-p", str(port), *udp, "--sizes", ",".join(map(str, sizes)), "-r",
                          str(reps), "--order", "interleave", "--interval", "0")
            assert cli.returncode == 0, cli.stderr
            _finish(srv)
    plan = _send_order(sizes, reps, "interleave")
    rows = _tshark_rows(pcap, proto, port)

    # Group consecutive payload of one direction into blocks: they must alternate
    # request, answer, request, ... each block one whole message.
    blocks = []   # [direction, bytes, first packet's payload, first packet's time]
    for direction, nbytes, data, t_ns in rows:
        if blocks and blocks[-1][0] == direction and proto == "tcp":
            blocks[-1][1] += nbytes
        else:
            blocks.append([direction, nbytes, data, t_ns])
    ends = []
    if udp:   # END: bare headers after the last answer (up to three; --once leaves at one)
        while blocks and blocks[-1][0] == "c2s" and blocks[-1][1] == 18 \
                and HDR.unpack(blocks[-1][2][:18])[1] == END:
            ends.append(blocks.pop())
        assert 1 <= len(ends) <= 3
        assert all(HDR.unpack(e[2][:18])[:3] == (b"PP", END, 18) for e in ends)
    expected = [(d, size) for size in plan for d in ("c2s", "s2c")]
    assert [(b[0], b[1]) for b in blocks] == expected

    total = sum(size for size in plan)
    for direction in ("c2s", "s2c"):
        assert sum(b[1] for b in blocks if b[0] == direction) == total
    for seq, (request, answer) in enumerate(zip(blocks[::2], blocks[1::2])):
        magic, got_seq, size, sent_ns = HDR.unpack(request[2][:18])
        assert (magic, got_seq, size) == (b"PP", seq, plan[seq])
        assert answer[2][:18] == request[2][:18]            # the header echoed
        assert request[2][18:] == b"p" * (len(request[2]) - 18)   # fill, as documented
        # time.time_ns() just before the write: before the packet, and close to it
        assert 0 <= request[3] - sent_ns < 0.5e9


# -- an independent server and client, written from the docstring ----------------------------

def _hand_tcp_server(lsock, log, answer_seq_offset=0):
    """Read the header, then exactly S - 18 more bytes; check the client sent nothing more
    (one message in flight); answer header + fill."""
    sock, _ = lsock.accept()
    with sock:
        while True:
            header = _recv_exact(sock, 18)
            if not header:
                log.append("closed")
                return
            magic, seq, size, t_ns = HDR.unpack(header)
            rest = _recv_exact(sock, size - 18)
            time.sleep(0.002)
            try:
                early = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                early = b""
            log.append((magic, seq, size, t_ns, len(rest), early))
            reply = HDR.pack(magic, seq + answer_seq_offset, size, t_ns)
            sock.sendall(reply + b"z" * (size - 18))


def test_tool_client_against_a_hand_written_tcp_server(tmp_path):
    lsock = socket.create_server(("127.0.0.1", 0))
    port, log = lsock.getsockname()[1], []
    before = time.time_ns()
    with lsock, _thread(_hand_tcp_server, lsock, log):
        cli = _client("-p", str(port), "--sizes", "18,100,5000", "-r", "3", "--interval", "0",
                      "--report", str(tmp_path / "c.json"))
    after = time.time_ns()
    assert cli.returncode == 0, cli.stderr
    assert log[-1] == "closed"
    plan = _send_order([18, 100, 5000], 3, "sweep")
    assert [(m, seq, size, n + 18) for m, seq, size, _, n, _ in log[:-1]] == \
        [(b"PP", i, s, s) for i, s in enumerate(plan)]
    assert all(early == b"" for *_, early in log[:-1])
    times = [t for _, _, _, t, _, _ in log[:-1]]
    assert before <= times[0] and times == sorted(times) and times[-1] <= after
    _, rows = _table(cli.stdout)
    assert [(r[0], r[1], r[2]) for r in rows] == [("18", "3", "0"), ("100", "3", "0"),
                                                   ("5000", "3", "0")]


@pytest.mark.parametrize("udp", [False, True], ids=["tcp", "udp"])
def test_tool_client_exits_2_when_the_server_breaks_the_protocol(udp):
    if udp:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))

        def serve():   # answers one byte short
            data, peer = sock.recvfrom(65536)
            sock.sendto(data[:-1], peer)
        port = sock.getsockname()[1]
    else:
        sock = socket.create_server(("127.0.0.1", 0))
        port = sock.getsockname()[1]

        def serve():
            _hand_tcp_server(sock, [], answer_seq_offset=1)
    with sock, _thread(serve):
        cli = _client("-p", str(port), "--sizes", "100", "-r", "2", *(["--udp"] if udp else []))
    line = _one_error_line(cli)
    assert "broke the protocol" in line and "seq 0" in line
    assert ("99 bytes instead of 100" if udp else "seq 1 instead of 0") in line


def test_hand_written_tcp_client_against_the_tool_server(tmp_path):
    port, report = _free_port(), tmp_path / "s.json"
    sizes = [18, 1000, 70000, 1 << 20]
    with _tool_server("-p", str(port), "--once", "--report", str(report)) as srv:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for seq, size in enumerate(sizes):
                header = HDR.pack(b"PP", seq, size, time.time_ns())
                sock.sendall(header[:7])             # the server must wait for the rest
                time.sleep(0.05)
                sock.sendall(header[7:] + b"x" * (size - 18))
                answer = _recv_exact(sock, size)
                assert answer[:18] == header and answer[18:] == b"p" * (size - 18)
            sock.settimeout(0.2)
            with pytest.raises(socket.timeout):      # nothing more than the answers
                sock.recv(1)
        out, err = _finish(srv)
    assert srv.returncode == 0 and err == ""
    doc = json.loads(report.read_text())
    assert (doc["messages"], doc["bytes_received"], doc["bytes_sent"]) == \
        (4, sum(sizes), sum(sizes))
    assert f"{len(sizes)} messages answered ({sum(sizes)} bytes each way), closed" in out


def test_hand_written_udp_client_against_the_tool_server(tmp_path):
    port, report = _free_port(socket.SOCK_DGRAM), tmp_path / "s.json"
    sizes = [18, 1473, 65507]
    with _tool_server("-p", str(port), "--udp", "--once", "--report", str(report)) as srv:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(2)
            sock.connect(("127.0.0.1", port))
            for seq, size in enumerate(sizes):
                header = HDR.pack(b"PP", seq, size, time.time_ns())
                sock.send(header + b"x" * (size - 18))
                answer = sock.recv(65536)
                assert len(answer) == size and answer[:18] == header
            sock.send(b"hello")                               # not a message: ignored
            sock.send(HDR.pack(b"PP", 7, 500, 0) + b"x")      # size disagrees: ignored
            sock.settimeout(0.3)
            with pytest.raises(socket.timeout):
                sock.recv(65536)
            sock.send(HDR.pack(b"PP", END, 18, time.time_ns()))
            sock.settimeout(0.3)
            with pytest.raises(socket.timeout):             # END gets no answer
                sock.recv(65536)
        out, err = _finish(srv)
    assert srv.returncode == 0                              # --once: gone after END
    assert "Traceback" not in err and err.count("pingpong: warning: ") == 1
    doc = json.loads(report.read_text())
    assert (doc["messages"], doc["bytes_sent"], doc["ignored_datagrams"]) == \
        (3, sum(sizes), 2)
    assert doc["peers"][0]["ended"] == "END"


BAD_HEADERS = [(HDR.pack(b"PP", 0, (16 << 20) + 1, 0), "above the limit of 16777216 bytes"),
               (HDR.pack(b"PP", 0, 17, 0), "says size 17, less than"),
               (HDR.pack(b"XX", 0, 100, 0), "starts with b'XX'")]


@pytest.mark.parametrize("header,message", BAD_HEADERS, ids=["too big", "too small", "magic"])
def test_server_refuses_a_bad_header_at_once(header, message):
    """A --once server refuses the header without waiting for (or allocating) the message:
    it closes the connection and exits 2 with one line."""
    port = _free_port()
    with _tool_server("-p", str(port), "--once") as srv:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(header)
            sock.settimeout(5)
            try:
                assert sock.recv(1) == b""
            except ConnectionResetError:
                pass
        out, err = _finish(srv)
    assert message in _one_error_line(subprocess.CompletedProcess([], srv.returncode, out, err))


def test_server_outlives_a_bad_client_and_stops_cleanly_on_sigterm(tmp_path):
    port, report = _free_port(), tmp_path / "s.json"
    with _tool_server("-p", str(port), "--report", str(report)) as srv:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(HDR.pack(b"PP", 0, 1 << 30, 0))
            sock.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
        cli = _client("-p", str(port), "--sizes", "64", "-r", "2", "--interval", "0")
        assert cli.returncode == 0, cli.stderr
        srv.send_signal(signal.SIGTERM)
        out, err = _finish(srv)
    assert srv.returncode == 0
    assert "Traceback" not in err and err.count("pingpong: warning: ") == 1
    doc = json.loads(report.read_text())
    assert [(p["ended"], p["messages"]) for p in doc["peers"]] == [("protocol error", 0),
                                                                   ("closed", 2)]


def test_client_interrupted_exits_130():
    lsock = socket.create_server(("127.0.0.1", 0))
    with lsock:   # accepts (the kernel does) but never answers
        proc = subprocess.Popen(PP + ["-c", "127.0.0.1", "-p", str(lsock.getsockname()[1])],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["pingpong: error: interrupted"]


# -- UDP loss ---------------------------------------------------------------------------------

def test_udp_loss_is_counted_and_the_run_goes_on(tmp_path):
    """A server that drops every 3rd message and answers the 4th too late: those count as
    lost, the late answer is discarded, the other messages are measured."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    def serve():
        count = 0
        while True:
            data, peer = sock.recvfrom(65536)
            if HDR.unpack(data[:18])[1] == END:
                return
            count += 1
            if count % 3 == 0:
                continue
            if count == 4:
                time.sleep(0.35)
            sock.sendto(data[:18] + b"q" * (len(data) - 18), peer)
    report = tmp_path / "c.json"
    t0 = time.monotonic()
    with sock, _thread(serve):
        cli = _client("-p", str(port), "--udp", "--sizes", "100,2000", "-r", "6", "--timeout",
                      "0.2", "--interval", "0", "--report", str(report))
    took = time.monotonic() - t0
    assert cli.returncode == 0, cli.stderr
    lost = [2, 3, 5, 8, 11]
    plan = _send_order([100, 2000], 6, "sweep")
    assert re.findall(r"no answer to seq (\d+) \((\d+) B\) within 0.2 s: lost", cli.stdout) \
        == [(str(i), str(plan[i])) for i in lost]
    _, rows = _table(cli.stdout)
    assert [(r[0], r[1], r[2]) for r in rows] == [("100", "3", "3"), ("2000", "4", "2")]
    doc = json.loads(report.read_text())
    assert [s[0] for s in doc["samples"] if s[3] is None] == lost
    assert all(s[3] < 0.2e9 for s in doc["samples"] if s[3] is not None)
    assert doc["late_answers"] == 1
    assert [(r["n"], r["lost"]) for r in doc["sizes"]] == [(3, 3), (4, 2)]
    assert took >= len(lost) * 0.2


# -- the pieces around it ---------------------------------------------------------------------

@pytest.mark.slow
def test_pcapstats_pingpong_passes_its_arguments_through():
    """cli/pingpong.py: `pcapstats pingpong ARGS` is the tool with ARGS (registered here by
    importing the module, whether or not cli/__init__ imports it yet)."""
    code = ("import sys, pcapstats.cli.pingpong; from pcapstats.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    helped = subprocess.run([sys.executable, "-c", code, "pingpong", "-h"], capture_output=True,
                            text=True, timeout=30)
    assert helped.returncode == 0 and "usage: pcapstats pingpong" in helped.stdout
    assert "--repetitions" in helped.stdout
    bad = subprocess.run([sys.executable, "-c", code, "pingpong", "-c", "127.0.0.1", "--sizes",
                          "9"], capture_output=True, text=True, timeout=30)
    assert "invalid size '9'" in _one_error_line(bad)


def test_the_tool_imports_only_the_standard_library_layers_0_1_and_its_neighbours():
    tree = ast.parse((ROOT / "pcapstats" / "tools" / "pingpong.py").read_text())
    allowed = {"pcapstats._version", "pcapstats.errors", "pcapstats.units", "pcapstats.addresses"}
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and not node.level else
                 ["relative"] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top == "__future__" or name in allowed \
                or name == "pcapstats.tools" or name.startswith("pcapstats.tools."), name
