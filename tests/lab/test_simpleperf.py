"""simpleperf against its spec: the flags, the tables, and the wire as tshark reads it.

Expected values come from the spec (1000-byte messages, decimal units, BYE / ACK: BYE), from
tshark's reassembly and analysis of a tcpdump capture, and from the sender kernel's TCP_INFO.
The lab tests run sender - router - receiver with a 50 Mbit/s tbf on the router's egress to
the receiver (captures stay small, and a real bottleneck queue is crossed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.tshark_ref import tshark, tshark_fields

SP = [sys.executable, "-m", "pcapstats.tools.simpleperf"]
PCAPSTATS_SP = [sys.executable, "-m", "pcapstats", "simpleperf"]
MESSAGE = b"0" * 1000
RATE_MBIT = 50


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(text: str) -> list[list[str]]:
    """Table rows (ID, Interval, Transfer, Bandwidth) of simpleperf's output; the format
    separates columns by two or more spaces."""
    rows = []
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 4 and re.fullmatch(r"\S+:\d+", cells[0]):
            rows.append(cells)
    return rows


def _bytes_of(cell: str) -> int:
    number, unit = cell.split()
    assert unit == "B", "tests read exact byte counts: run with -f B"
    return int(number)


# -- the flags ----------------------------------------------------------------------------------

BAD_FLAGS = [
    (["-c", "-p", "80"], "invalid port '80'"),
    (["-s", "-p", "65536"], "invalid port '65536'"),
    (["-c", "-p", "http"], "invalid port 'http'"),
    (["-c", "-I", "10.0.0.256"], "invalid IP address '10.0.0.256'"),
    (["-s", "-b", "server"], "invalid IP address 'server'"),
    (["-c", "-n", "10XB"], "invalid size '10XB'"),
    (["-c", "-n", "1.5MB"], "invalid size '1.5MB'"),
    (["-c", "-n", "0KB"], "invalid size '0KB'"),
    (["-c", "-P", "0"], "invalid number of connections '0'"),
    (["-c", "-P", "6"], "invalid number of connections '6'"),
    (["-c", "-t", "0"], "invalid time '0'"),
    (["-c", "-t", "-2"], "invalid time '-2'"),
    (["-c", "-i", "x"], "invalid time 'x'"),
    (["-c", "-f", "GB"], "invalid choice: 'GB'"),
    (["-s", "-c"], "exactly one mode"),
    ([], "exactly one mode"),
    (["-c", "-t", "2", "-n", "1KB"], "not both"),
    (["-s", "-t", "2"], "-t/--time cannot be used in server (-s) mode"),
    (["-c", "-b", "127.0.0.1"], "-b/--bind cannot be used in client (-c) mode"),
    (["-c", "--sndbuf", "-5"], "invalid buffer size '-5'"),
    (["-c", "--cc", "no such"], "invalid congestion control"),
    (["-c", "--report", "/nonexistent-dir/r.json"], "no directory /nonexistent-dir"),
    (["-c", "--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize("argv,message", BAD_FLAGS,
                         ids=[" ".join(a) or "none" for a, _ in BAD_FLAGS])
def test_bad_flags_give_one_line_and_exit_2(argv, message):
    proc = subprocess.run(SP + argv, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simpleperf: error: "), proc.stderr
    assert message in lines[0]
    assert proc.stdout == ""


@pytest.mark.slow
def test_pcapstats_simpleperf_forwards_every_argument():
    helped = subprocess.run(PCAPSTATS_SP + ["-h"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "usage: pcapstats simpleperf" in helped.stdout
    assert "--serverip" in helped.stdout and "--tcp-info-interval" in helped.stdout
    bad = subprocess.run(PCAPSTATS_SP + ["-c", "-P", "9"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "simpleperf: error: argument -P/--parallel: invalid number of connections '9': must "
        "be 1 to 5"]


def test_connection_refused_names_the_address():
    port = _free_port()  # nobody listens there now
    proc = subprocess.run(SP + ["-c", "-I", "127.0.0.1", "-p", str(port), "-n", "1KB"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"simpleperf: error: cannot connect to 127.0.0.1:{port}: connection "
                     "refused (is a simpleperf server running there? start one with -s)"]


def test_unknown_congestion_control_is_one_line():
    proc = subprocess.run(SP + ["-c", "-p", str(_free_port()), "--cc", "nosuchcc"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("simpleperf: error: congestion control 'nosuchcc' is not available")


def test_sizes_are_decimal_as_the_spec_says():
    from pcapstats.units import parse_simpleperf_size
    assert parse_simpleperf_size("10MB") == 10 * 1000 * 1000
    assert parse_simpleperf_size("1KB") == 1000
    assert parse_simpleperf_size("500B") == 500
    assert parse_simpleperf_size("2kb") == 2000


# -- a run on loopback (no root needed) -------------------------------------------------------

@contextlib.contextmanager
def _server(popen, *args):
    """Start a --once server with popen(argv...), wait for its banner, yield it, stop it."""
    proc = popen(*SP, "-s", "--once", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True)
    try:
        banner = ""
        deadline = time.monotonic() + 15
        while "is listening on port" not in banner:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError(f"server did not start: {banner!r} "
                                     f"{proc.stderr.read() if proc.poll() is not None else ''}")
            fd = proc.stdout.fileno()  # raw reads: the text wrapper's buffer stays empty
            if select.select([fd], [], [], 0.2)[0]:
                banner += os.read(fd, 4096).decode()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _local_server(*args):
    return _server(lambda *argv, **kw: subprocess.Popen(list(argv), **kw), "-b", "127.0.0.1",
                   *args)


def _finish(proc, timeout=30) -> str:
    """Wait for a --once server to end by itself; its stdout."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    return out


def test_loopback_run_with_a_short_last_message(tmp_path):
    """-n 2500B: two 1000-byte messages and one of 500 (exactly -n bytes); both reports."""
    port = str(_free_port())
    srv_report, cli_report = tmp_path / "server.json", tmp_path / "client.json"
    with _local_server("-p", port, "-f", "B", "--report", str(srv_report)) as srv:
        cli = subprocess.run(SP + ["-c", "-p", port, "-n", "2500B", "-f", "B", "--report",
                                   str(cli_report)], capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        srv_out = _finish(srv)
    assert "A simpleperf client connecting to server 127.0.0.1, port " + port in cli.stdout
    (cid, interval, transfer, bandwidth), = _rows(cli.stdout)
    assert _bytes_of(transfer) == 2500 and bandwidth.endswith(" Mbps")
    assert f"A simpleperf client with {cid} is connected with 127.0.0.1:{port}" in srv_out
    (sid, _, received, rate), = _rows(srv_out)
    assert (sid, _bytes_of(received)) == (cid, 2500) and rate.endswith(" Mbps")

    client, server = json.loads(cli_report.read_text()), json.loads(srv_report.read_text())
    assert client["schema"] == server["schema"] == "pcapstats.simpleperf/1"
    c, = client["connections"]
    s, = server["connections"]
    assert c["id"] == s["id"] == c["local"] == s["remote"] == cid
    assert c["remote"] == s["local"] == f"127.0.0.1:{port}"
    assert c["bytes"] == s["bytes"] == 2500 and c["protocol_ok"] and s["protocol_ok"]
    assert c["start_ns"] <= c["bye_sent_ns"] <= c["end_ns"]
    assert c["start_mono_ns"] < c["end_mono_ns"]
    assert c["bandwidth_bps"] == pytest.approx(2500 * 8 / c["duration_s"])
    # The kernel's own count: 2500 message bytes + BYE acknowledged, +1 for the SYN.
    assert c["tcp_info_final"]["bytes_acked"] == 2500 + 3 + 1
    # The server's last TCP_INFO is read after the client's FIN (+1) has arrived.
    assert s["tcp_info_final"]["bytes_received"] == 2500 + 3 + 1
    series = c["tcp_info"]
    assert len(series["t_ns"]) >= 2 and series["bytes_acked"][-1] == 2500 + 3 + 1


def test_server_ends_on_sigterm_with_exit_0_and_its_report(tmp_path):
    port, report = str(_free_port()), tmp_path / "server.json"
    with _local_server("-p", port, "--report", str(report)) as srv:
        srv.send_signal(signal.SIGTERM)
        out, err = srv.communicate(timeout=10)
    assert srv.returncode == 0 and err == ""
    doc = json.loads(report.read_text())
    assert doc["role"] == "server" and doc["connections"] == []


@pytest.mark.slow
def test_client_interrupted_says_one_line_and_exits_130():
    port = str(_free_port())
    with _local_server("-p", port) as srv:
        cli = subprocess.Popen(SP + ["-c", "-p", port, "-t", "20"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=10)
        srv.communicate(timeout=15)  # its client went away: --once ends it
    assert cli.returncode == 130
    assert err.strip().splitlines() == ["simpleperf: error: interrupted"]
    assert srv.returncode == 2  # the connection never sent BYE


def test_server_reports_a_client_that_breaks_the_protocol():
    """A client that closes after 1500 bytes without BYE: a warning line for the connection,
    and --once ends with one error line and exit 2."""
    port = int(_free_port())
    with _local_server("-p", str(port), "-f", "B") as srv:
        with socket.create_connection(("127.0.0.1", port)) as raw:
            raw.sendall(MESSAGE + MESSAGE[:500])
        out, err = srv.communicate(timeout=15)
    assert srv.returncode == 2 and "Traceback" not in err
    warning, error = err.strip().splitlines()
    assert warning.startswith("simpleperf: warning: client 127.0.0.1:")
    assert "closed the connection after 1500 bytes without sending BYE" in warning
    assert error.startswith("simpleperf: error: 1 of 1 connections did not follow the protocol")
    (_, _, received, _), = _rows(out)
    assert received == "1500 B"


# -- the lab: sender - router - receiver ------------------------------------------------------

@pytest.fixture(scope="module")
def lab():
    from pcapstats.lab import topologies
    with topologies.sender_router_receiver() as lab:
        dev = lab.interface("router", "receiver").name
        lab.run("router", "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                f"{RATE_MBIT}mbit", "burst", "15k", "latency", "20ms")
        yield lab


def _lab_server(lab, *args):
    return _server(lambda *argv, **kw: lab.popen("receiver", *argv, **kw), *args)


def _lab_client(lab, *args, timeout=90) -> subprocess.CompletedProcess:
    proc = lab.run("sender", *SP, "-c", "-I", lab.address("receiver"), *args, check=False,
                   timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def _follow(path: Path) -> dict[str, tuple[bytes, bytes]]:
    """Each TCP stream's reassembled bytes (client->server, server->client), by client
    ip:port, from ``tshark -z follow,tcp,raw``."""
    streams = sorted({int(s) for s in tshark_fields(path, ("tcp.stream",))["tcp.stream"]})
    out = {}
    for stream in streams:
        text = tshark("-r", str(path), "-q", "-z", f"follow,tcp,raw,{stream}")
        client = re.search(r"^Node 0: (\S+)$", text, re.M).group(1)
        body = text.split(re.search(r"^Node 1: \S+$", text, re.M).group(0), 1)[1]
        up, down = bytearray(), bytearray()
        for line in body.splitlines():
            if not line.strip() or line.startswith("="):
                continue
            (down if line.startswith("\t") else up).extend(bytes.fromhex(line.strip()))
        out[client] = (bytes(up), bytes(down))
    return out


def _count(path: Path, display_filter: str) -> int:
    return len(tshark("-r", str(path), "-Y", display_filter, "-T", "fields", "-e",
                      "frame.number").split())


@pytest.mark.netns
@pytest.mark.parametrize("num,expected", [("10KB", 10_000), ("2500B", 2500)])
def test_wire_carries_messages_then_bye_and_ack(lab, tmp_path, num, expected):
    pcap = tmp_path / "n.pcap"
    with _lab_server(lab, "-f", "B") as srv:
        with lab.capture("sender", "eth0", pcap, bpf="tcp"):
            cli = _lab_client(lab, "-n", num, "-f", "B")
        srv_out = _finish(srv)
    streams = _follow(pcap)
    (cid, _, transfer, _), = _rows(cli.stdout)
    assert list(streams) == [cid]
    up, down = streams[cid]
    assert up == MESSAGE * (expected // 1000) + MESSAGE[:expected % 1000] + b"BYE"
    assert down == b"ACK: BYE"
    assert _bytes_of(transfer) == expected == _bytes_of(_rows(srv_out)[0][2])
    # Both close: a FIN each way.
    assert _count(pcap, "tcp.flags.fin == 1 && ip.src == 10.77.1.1") >= 1
    assert _count(pcap, "tcp.flags.fin == 1 && ip.src == 10.77.2.1") >= 1


@pytest.mark.netns
def test_parallel_connections_each_follow_the_protocol_at_once(lab, tmp_path):
    """-P 3 -n 300KB: three connections, each messages + BYE / ACK: BYE, served at once.

    300 KB each takes ~50 ms through the 50 Mbit/s bottleneck, far longer than starting the
    three senders: on the wire and at the server their transfers overlap."""
    pcap, report = tmp_path / "p3.pcap", tmp_path / "server.json"
    with _lab_server(lab, "-f", "B", "--report", str(report)) as srv:
        with lab.capture("sender", "eth0", pcap, snaplen=65535, bpf="tcp"):
            cli = _lab_client(lab, "-P", "3", "-n", "300KB", "-f", "B")
        srv_out = _finish(srv)
    client_rows, server_rows = _rows(cli.stdout), _rows(srv_out)
    ids = {row[0] for row in client_rows}
    assert len(client_rows) == 3 and len(ids) == 3
    assert {(r[0], _bytes_of(r[2])) for r in client_rows} == {(i, 300_000) for i in ids}
    assert {(r[0], _bytes_of(r[2])) for r in server_rows} == {(i, 300_000) for i in ids}
    streams = _follow(pcap)
    assert set(streams) == ids
    for up, down in streams.values():
        assert up == MESSAGE * 300 + b"BYE" and down == b"ACK: BYE"
    # Concurrent: every connection was accepted before any had read its BYE (a server that
    # served one after the other could not), and every one's data started on the wire before
    # any one's ended.
    conns = json.loads(report.read_text())["connections"]
    assert max(c["start_mono_ns"] for c in conns) < min(c["end_mono_ns"] for c in conns)
    f = tshark_fields(pcap, ("tcp.stream", "frame.time_epoch", "tcp.len", "ip.src"))
    data = f[(f["ip.src"] == "10.77.1.1") & (f["tcp.len"].astype(int) > 0)]
    times = data.assign(t=data["frame.time_epoch"].astype(float)).groupby("tcp.stream")["t"]
    assert times.min().max() < times.max().min()


@pytest.mark.netns
def test_time_flag_sends_for_that_long(lab, tmp_path):
    """-t 2: the capture shows 2 s from the first message to BYE.

    A small send buffer (--sndbuf 65536; the kernel doubles it) keeps what is still queued
    when sending stops to < 22 ms at 50 Mbit/s, tbf's queue adds <= 20 ms: so the wire's data
    phase is 2 s, +0.1 s for those and for scheduling on a busy machine, -0.01 s."""
    pcap = tmp_path / "t2.pcap"
    with _lab_server(lab, "-f", "B") as srv:
        with lab.capture("sender", "eth0", pcap, snaplen=128, bpf="tcp"):
            cli = _lab_client(lab, "-t", "2", "-f", "B", "--sndbuf", "65536")
        srv_out = _finish(srv)
    f = tshark_fields(pcap, ("frame.time_epoch", "ip.src", "tcp.len", "tcp.seq", "tcp.nxtseq",
                             "tcp.flags.syn"))
    up = f[f["ip.src"] == "10.77.1.1"]
    isn = int(up[up["tcp.flags.syn"] == "1"]["tcp.seq"].iloc[0])
    data = up[up["tcp.len"].astype(int) > 0]
    end_seq = data["tcp.nxtseq"].astype(int).max()
    first = float(data["frame.time_epoch"].iloc[0])
    bye = float(data[data["tcp.nxtseq"].astype(int) == end_seq]["frame.time_epoch"].iloc[0])
    assert 2.0 - 0.01 <= bye - first <= 2.0 + 0.1
    message_bytes = end_seq - (isn + 1) - len(b"BYE")
    assert message_bytes > 0 and message_bytes % 1000 == 0
    (_, interval, transfer, _), = _rows(cli.stdout)
    assert _bytes_of(transfer) == message_bytes == _bytes_of(_rows(srv_out)[0][2])
    assert interval.startswith("0.0 - ")


@pytest.mark.netns
def test_interval_rows_sum_to_the_total(lab, tmp_path):
    """-t 2 -i 0.5 -P 2: four rows per connection, labelled k*0.5 - (k+1)*0.5, whose
    Transfer adds up to the summary's and to what the server received."""
    report = tmp_path / "client.json"
    with _lab_server(lab, "-f", "B") as srv:
        cli = _lab_client(lab, "-t", "2", "-i", "0.5", "-P", "2", "-f", "B", "--report",
                          str(report))
        srv_out = _finish(srv)
    lines = cli.stdout.splitlines()
    separator = lines.index("-" * 63, 3)  # the first after the banner's own lines
    intervals = _rows("\n".join(lines[:separator]))
    summaries = {r[0]: r for r in _rows("\n".join(lines[separator + 1:]))}
    assert len(summaries) == 2 and {r[0] for r in intervals} == set(summaries)
    received = {r[0]: _bytes_of(r[2]) for r in _rows(srv_out)}
    conns = {c["id"]: c for c in json.loads(report.read_text())["connections"]}
    for cid, summary in summaries.items():
        mine = [r for r in intervals if r[0] == cid]
        assert [r[1] for r in mine] == ["0.0 - 0.5", "0.5 - 1.0", "1.0 - 1.5", "1.5 - 2.0"]
        total = _bytes_of(summary[2])
        assert sum(_bytes_of(r[2]) for r in mine) == total == received[cid]
        assert [i["bytes"] for i in conns[cid]["intervals"]] == [_bytes_of(r[2]) for r in mine]


@pytest.mark.netns
@pytest.mark.parametrize("cc", ["reno", "cubic", "bbr"])
def test_congestion_control_is_set_on_both_ends(lab, tmp_path, cc):
    """cubic cannot be a namespace's default, but root sets it per socket (TCP_CONGESTION)."""
    cli_report, srv_report = tmp_path / "c.json", tmp_path / "s.json"
    with _lab_server(lab, "--cc", cc, "--report", str(srv_report)) as srv:
        _lab_client(lab, "-n", "100KB", "--cc", cc, "--report", str(cli_report))
        _finish(srv)
    c, = json.loads(cli_report.read_text())["connections"]
    s, = json.loads(srv_report.read_text())["connections"]
    assert c["cc"] == s["cc"] == cc


@pytest.mark.netns
def test_tcp_info_series_matches_the_wire_under_loss(lab, tmp_path):
    """5 % random loss on the router's forwarding path; sender-side capture.

    The sender kernel counts every retransmitted segment in total_retrans.  tshark labels each
    of them, on a sender-side capture, as tcp.analysis.retransmission or -- when it follows
    the previous segment closely (tshark's out-of-order threshold) -- as
    tcp.analysis.out_of_order; a sender never sends new data below its highest sequence
    number, so both are retransmissions, and the two counts must agree exactly.  FINs are left
    out: the last sample is taken before close(), so a FIN's retransmission comes after it."""
    pcap, report = tmp_path / "loss.pcap", tmp_path / "client.json"
    rule = ["FORWARD", "-m", "statistic", "--mode", "random", "--probability", "0.05", "-j",
            "DROP"]
    lab.run("router", "iptables", "-A", *rule)
    try:
        with _lab_server(lab, "-f", "B") as srv:
            with lab.capture("sender", "eth0", pcap, snaplen=128, bpf="tcp"):
                cli = _lab_client(lab, "-t", "3", "-f", "B", "--cc", "cubic", "--report",
                                  str(report), "--tcp-info-interval", "0.01")
            _finish(srv)
        drops = lab.run("router", "iptables", "-L", "FORWARD", "-v", "-n", "-x").stdout
    finally:
        lab.run("router", "iptables", "-D", *rule)
    assert int(re.search(r"^\s*(\d+)\s+\d+\s+DROP", drops, re.M).group(1)) > 0

    doc = json.loads(report.read_text())
    conn, = doc["connections"]
    series, final = conn["tcp_info"], conn["tcp_info_final"]
    sender = "ip.src == 10.77.1.1 && tcp.flags.fin == 0"
    retrans = _count(pcap, f"{sender} && tcp.analysis.retransmission")
    ooo = _count(pcap, f"{sender} && tcp.analysis.out_of_order && !tcp.analysis.retransmission")
    assert retrans > 0
    assert final["total_retrans"] == retrans + ooo
    assert series["total_retrans"][-1] == final["total_retrans"]

    # Byte and segment counters against the wire (retransmissions included).
    f = tshark_fields(pcap, ("ip.src", "tcp.len"))
    lens = f[f["ip.src"] == "10.77.1.1"]["tcp.len"].astype(int)
    assert final["bytes_sent"] == lens.sum()
    assert final["data_segs_out"] == (lens > 0).sum()
    message_bytes = _bytes_of(_rows(cli.stdout)[-1][2])
    assert final["bytes_acked"] == message_bytes + len(b"BYE") + 1  # +1: the SYN

    # The series: monotone in time, sampled near the asked 10 ms, covering the transfer.
    mono, real = series["t_mono_ns"], series["t_ns"]
    n = len(mono)
    assert all(len(col) == n for col in series.values())
    assert all(b > a for a, b in zip(mono, mono[1:]))
    assert all(b >= a for a, b in zip(real, real[1:]))
    gaps = sorted(b - a for a, b in zip(mono, mono[1:]))
    assert gaps[len(gaps) // 2] == pytest.approx(10e6, rel=0.2)
    assert doc["sampler"]["period_median_s"] == pytest.approx(0.01, rel=0.2)
    assert real[0] <= conn["start_ns"] and real[-1] >= conn["end_ns"]
    assert n >= 0.8 * conn["duration_s"] / 0.01

    # cwnd and mss plausible: mss is the largest segment on the wire; what is in flight never
    # exceeds cwnd by more than the one tail-loss probe the kernel may send beyond it.
    assert set(series["snd_mss"]) == {lens.max()}
    for unacked, sacked, lost, retr, cwnd in zip(series["unacked"], series["sacked"],
                                                 series["lost"], series["retrans"],
                                                 series["snd_cwnd"]):
        assert 1 <= cwnd < 10_000
        assert unacked - sacked - lost + retr <= cwnd + 1
    # Under 5 % loss cubic's window shrinks and grows again: ca_state leaves Open (0).
    assert max(series["ca_state"]) > 0 and max(series["snd_cwnd"]) > min(series["snd_cwnd"])
