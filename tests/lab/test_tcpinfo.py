"""pcapstats.tools.tcpinfo against independent sources: the C compiler's view of the system's
<linux/tcp.h>, the kernel's other paths to the same numbers (``ss`` over netlink inet_diag,
getsockopt TCP_MAXSEG), and byte counts known by construction on a loopback connection."""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pcapstats.tools import tcpinfo
from pcapstats.tools.tcpinfo import (FIELDS, OFFSETS, SIZE, TcpInfoSampler, parse_tcp_info,
                                   set_congestion, tcp_congestion, tcp_info, tcp_info_bytes)

HEADER = Path("/usr/include/linux/tcp.h")
BITFIELDS = {"snd_wscale", "rcv_wscale", "delivery_rate_app_limited", "fastopen_client_fail",
             "ecn_mode", "accecn_opt_seen", "accecn_fail_mode", "options2"}


def _header_members() -> list[str]:
    """The tcpi_* members of struct tcp_info in the installed header, in order."""
    text = HEADER.read_text()
    body = re.search(r"struct tcp_info \{(.*?)\n\};", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"\btcpi_(\w+)", body)


def _compile_and_run(tmp_path: Path, source: str) -> str:
    if shutil.which("gcc") is None or not HEADER.exists():
        pytest.skip("needs gcc and /usr/include/linux/tcp.h")
    c, exe = tmp_path / "probe.c", tmp_path / "probe"
    c.write_text(source)
    subprocess.run(["gcc", "-o", str(exe), str(c)], check=True, capture_output=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_layout_matches_the_system_header(tmp_path):
    members = _header_members()
    plain = [m for m in members if m not in BITFIELDS]
    lines = "\n".join(f'printf("{m} %zu %zu\\n", offsetof(struct tcp_info, tcpi_{m}), '
                      f'sizeof(((struct tcp_info *)0)->tcpi_{m}));' for m in plain)
    out = _compile_and_run(tmp_path, "#include <stdio.h>\n#include <stddef.h>\n"
                           "#include <linux/tcp.h>\nint main(void) {\n" + lines +
                           '\nprintf("SIZE %zu 0\\n", sizeof(struct tcp_info));\nreturn 0;\n}\n')
    compiled = {name: (int(off), int(size)) for name, off, size in
                (line.split() for line in out.splitlines())}
    header_size = compiled.pop("SIZE")[0]
    assert compiled, "no members compiled"
    for name, (off, size) in compiled.items():
        ours_off, code = OFFSETS[name]
        assert (ours_off, struct_size(code)) == (off, size), name
    # The header is a prefix of our layout: its size ends where one of our members ends.
    ends = {off + struct_size(code) for off, code in OFFSETS.values()}
    assert header_size in ends and header_size <= SIZE


def struct_size(code: str) -> int:
    return struct.calcsize("<" + code)


def test_bitfields_match_the_compiler(tmp_path):
    """Set each bitfield in C, dump the struct's bytes, and decode them with our parser."""
    values = {"snd_wscale": 7, "rcv_wscale": 12, "delivery_rate_app_limited": 1,
              "fastopen_client_fail": 2, "state": 1, "snd_cwnd": 123456, "rtt": 98765,
              "bytes_acked": 0x123456789A}
    present = set(_header_members())
    values = {k: v for k, v in values.items() if k in present}
    sets = "\n".join(f"t.tcpi_{k} = {v}ULL;" for k, v in values.items())
    out = _compile_and_run(tmp_path, "#include <stdio.h>\n#include <string.h>\n"
                           "#include <linux/tcp.h>\nint main(void) {\nstruct tcp_info t;\n"
                           "memset(&t, 0, sizeof t);\n" + sets +
                           "\nunsigned char *p = (unsigned char *)&t;\n"
                           'for (size_t i = 0; i < sizeof t; i++) printf("%02x", p[i]);\n'
                           "return 0;\n}\n")
    decoded = parse_tcp_info(bytes.fromhex(out.strip()))
    for k, v in values.items():
        assert decoded[k] == v, k


def _loopback_pair(maxseg: int | None = None):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    if maxseg:
        srv.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, maxseg)
    srv.listen(1)
    cli = socket.socket()
    if maxseg:
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, maxseg)
    cli.connect(srv.getsockname())
    acc, _ = srv.accept()
    srv.close()
    return cli, acc


def _transfer(cli: socket.socket, acc: socket.socket, nbytes: int) -> None:
    """Send nbytes cli -> acc, read them all, and wait until cli has them acknowledged."""
    def drain():
        got = 0
        while got < nbytes:
            got += len(acc.recv(65536))
    t = threading.Thread(target=drain)
    t.start()
    cli.sendall(b"x" * nbytes)
    t.join(10)
    deadline = time.monotonic() + 5
    while tcp_info(cli)["unacked"] and time.monotonic() < deadline:
        time.sleep(0.01)


def test_counters_on_loopback_are_the_bytes_sent():
    nbytes = 300_000
    cli, acc = _loopback_pair()
    with cli, acc:
        _transfer(cli, acc, nbytes)
        sent, received = tcp_info(cli), tcp_info(acc)
    assert len(tcp_info_bytes(socket.socket())) <= SIZE  # we know every byte the kernel fills
    assert sent["state"] == 1 and received["state"] == 1  # ESTABLISHED
    assert sent["bytes_sent"] - sent["bytes_retrans"] == nbytes
    assert sent["unacked"] == 0 and sent["notsent_bytes"] == 0
    # bytes_acked counts sequence space acknowledged: the data and the SYN's one number.
    assert sent["bytes_acked"] == nbytes + 1
    assert received["bytes_received"] == nbytes
    assert sent["data_segs_out"] == received["data_segs_in"]


def test_snd_mss_is_the_negotiated_mss():
    """MSS 1000 asked on both ends: 1000 minus 12 bytes of timestamp option per segment, and
    what getsockopt(TCP_MAXSEG) reports (the kernel's mss_cache, another path)."""
    cli, acc = _loopback_pair(maxseg=1000)
    with cli, acc:
        info = tcp_info(cli)
        timestamps = info["options"] & 1
        assert info["snd_mss"] == 1000 - (12 if timestamps else 0)
        assert info["snd_mss"] == cli.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)


def _ss_fields(local: tuple, peer: tuple) -> dict[str, str]:
    out = subprocess.run(["ss", "-tinH", "dst", f"{peer[0]}:{peer[1]}", "src",
                          f"{local[0]}:{local[1]}"], capture_output=True, text=True,
                         check=True).stdout
    fields = {}
    for token in out.split():
        key, sep, value = token.partition(":")
        if sep and value and not key[0].isdigit():
            fields[key] = value
    return fields


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_agrees_with_ss_on_an_idle_connection():
    """ss reads the same socket through netlink inet_diag and decodes it itself."""
    cli, acc = _loopback_pair()
    with cli, acc:
        _transfer(cli, acc, 200_000)
        time.sleep(0.05)
        info = tcp_info(cli)
        ss = _ss_fields(cli.getsockname(), cli.getpeername())
    snd, rcv = ss["wscale"].split(",")
    assert (info["snd_wscale"], info["rcv_wscale"]) == (int(snd), int(rcv))
    rtt, rttvar = ss["rtt"].split("/")
    assert info["rtt"] / 1000 == pytest.approx(float(rtt), abs=0.0005)
    assert info["rttvar"] / 1000 == pytest.approx(float(rttvar), abs=0.0005)
    assert info["rto"] / 1000 == pytest.approx(float(ss["rto"]), abs=0.5)
    for ours, theirs in (("snd_mss", "mss"), ("pmtu", "pmtu"), ("rcv_mss", "rcvmss"),
                         ("advmss", "advmss"), ("snd_cwnd", "cwnd"),
                         ("bytes_sent", "bytes_sent"), ("bytes_acked", "bytes_acked"),
                         ("segs_out", "segs_out"), ("segs_in", "segs_in"),
                         ("data_segs_out", "data_segs_out"), ("delivered", "delivered"),
                         ("rcv_space", "rcv_space"), ("rcv_ssthresh", "rcv_ssthresh"),
                         ("snd_wnd", "snd_wnd")):
        if theirs in ss:
            assert info[ours] == int(ss[theirs]), ours
    assert info["min_rtt"] / 1000 == pytest.approx(float(ss["minrtt"]), abs=0.0005)


def test_short_buffers_decode_only_whole_fields():
    """An older kernel returns fewer bytes: exactly the fields that fit are decoded."""
    cli, acc = _loopback_pair()
    with cli, acc:
        raw = tcp_info_bytes(cli)
    full = parse_tcp_info(raw)
    container = {sub: name for name, subs in tcpinfo._BITFIELDS.items() for sub, _, _ in subs}

    def end(field):
        off, code = OFFSETS[container.get(field, field)]
        return off + struct_size(code)
    for cut in (0, 7, 8, 104, 105, 192, 232, len(raw)):
        part = parse_tcp_info(raw[:cut])
        assert set(part) == {f for f in FIELDS if end(f) <= cut}, cut
        assert all(part[k] == full[k] for k in part)


def test_congestion_control_set_and_read_back():
    available = tcpinfo.available_congestion_controls()
    for name in ("reno", "cubic", "bbr"):
        if name not in available:
            continue
        s = socket.socket()
        with s:
            try:
                set_congestion(s, name)
            except ValueError as e:  # not root: only the allowed ones
                assert "CAP_NET_ADMIN" in str(e)
                continue
            assert tcp_congestion(s) == name
    with socket.socket() as s, pytest.raises(ValueError, match="not available"):
        set_congestion(s, "nosuchcc")


def test_sampler_keeps_its_period_and_takes_a_last_sample_at_remove():
    interval_s, nbytes = 0.01, 2_000_000
    cli, acc = _loopback_pair()
    sampler = TcpInfoSampler(interval_s).start()
    with cli, acc:
        key = sampler.add(cli)
        t_end, sent = time.monotonic() + 0.4, 0
        while time.monotonic() < t_end:  # ~0.4 s of samples of a connection at work
            _transfer(cli, acc, nbytes // 20)
            sent += nbytes // 20
        final = sampler.remove(cli)
        n_after_remove = len(sampler.series(key)["t_ns"])
        time.sleep(3 * interval_s)
        assert len(sampler.series(key)["t_ns"]) == n_after_remove  # no sampling after remove
    stats = sampler.stop()
    cols = sampler.series(key)
    n = len(cols["t_ns"])
    assert all(len(v) == n for v in cols.values())
    mono, real = cols["t_mono_ns"], cols["t_ns"]
    assert all(b > a for a, b in zip(mono, mono[1:]))
    assert all(b >= a for a, b in zip(real, real[1:]))
    assert abs(real[0] - time.time_ns()) < 60e9  # CLOCK_REALTIME, like a capture's timestamps
    assert stats["period_median_s"] == pytest.approx(interval_s, rel=0.2)
    assert n >= 0.5 * 0.4 / interval_s
    assert 0 <= stats["cpu_s"] and stats["rounds"] >= n - 2
    # The last sample is the final state: everything sent was acknowledged (+1: the SYN);
    # bytes_sent counts retransmitted bytes again (loopback retransmits now and then).
    assert cols["bytes_acked"][-1] == final["bytes_acked"] == sent + 1
    assert final["bytes_sent"] - final["bytes_retrans"] == sent
    assert all(b >= a for a, b in zip(cols["bytes_acked"], cols["bytes_acked"][1:]))


def test_sampler_rejects_bad_arguments():
    with pytest.raises(ValueError):
        TcpInfoSampler(0)
    with pytest.raises(ValueError, match="unknown"):
        TcpInfoSampler(0.01, fields=["snd_cwnd", "bogus"])
