"""Real captures (made in network namespaces, see conftest.py) against tshark, packet by packet.

- every column of every packet equals what tshark says (tshark_ref.packet_reference);
- ``ps.throughput`` equals ``tshark -z conv,tcp|udp`` (side A, frames and bytes each way,
  relative start and duration to the printed precision) plus exact per-packet sums;
- the CLI's ``--format json`` has exactly the throughput columns and the same numbers;
- the captures really hold what they are meant to test (else the checks above prove little);
- the lab itself leaves nothing behind, also when killed.

Each reader kernel ("c", "numpy") is tested; one that is not built is skipped with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest

import pcapstats as ps
from pcapstats import schema
from pcapstats.analyses.throughput import STREAMS as THROUGHPUT_TABLE

from tests.conftest import (CAPTURE_NAMES, CONCURRENT_TCP, REUSE_CLIENT_PORT,
                      REUSE_SERVER_PORT, TCP_SINK_PORT, UDP_CLOSED_PORT, UDP_ECHO_PORT)
from tests.helpers.tshark_ref import (comparable, conversation_reference, packet_reference,
                                      tshark_fields)
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.netns

KERNELS = ("c", "numpy")
SHOW = 5  # mismatching packets quoted in a failure message


@functools.lru_cache(maxsize=None)
def _read(path, kernel):
    return ps.read(path, kernel=kernel)


def read_or_skip(path, kernel):
    """ps.read with one kernel; skip (with pcapstats' own reason) if that kernel is not built."""
    from pcapstats.ingest.kernel import get_kernel
    try:
        get_kernel(kernel)
    except ps.UsageError as e:
        pytest.skip(f"kernel {kernel!r} unavailable: {e}")
    return _read(str(path), kernel)


def _mismatches(column: str, got: pd.Series, want: pd.Series) -> np.ndarray:
    """Bool mask of rows where got and want differ (presence or value)."""
    if column == "frame_time_epoch":
        # A float64 cannot hold an epoch to the nanosecond; it is derived from frame_time_ns
        # (checked exactly), so allow the one rounding step between the two: 1 ulp.
        g, w = got.to_numpy("float64", na_value=np.nan), want.to_numpy("float64", na_value=np.nan)
        return ~(np.abs(g - w) <= np.spacing(w))
    na_differs = (got.isna() != want.isna()).to_numpy()
    both = (got.notna() & want.notna()).to_numpy()
    differ = np.zeros(len(got), bool)
    differ[both] = (got[both].to_numpy() != want[both].to_numpy())
    return na_differs | differ


@pytest.mark.parametrize("column", [c.name for c in schema.COLUMNS])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_column_matches_tshark(real_captures, name, kernel, column):
    path = real_captures[name]
    cap = read_or_skip(path, kernel)
    ref = packet_reference(str(path))
    assert len(cap) == len(ref.values), f"{name}: pcapstats read {len(cap)} packets, " \
                                        f"tshark {len(ref.values)}"
    if column not in ref.values:
        pytest.fail(f"no reference for column {column!r}: add one to tests/helpers/tshark_ref.py")
    rows = ref.checked[column]
    got = comparable(cap.packets[column])[rows].reset_index(drop=True)
    want = ref.values[column][rows].reset_index(drop=True)
    bad = np.flatnonzero(_mismatches(column, got, want))
    if len(bad):
        frames = ref.values["frame_number"][rows].reset_index(drop=True)
        wireshark = schema.BY_NAME[column].wireshark or "(derived, see tshark_ref.py)"
        lines = [f"frame {frames[i]}: tshark/reference {_show(want[i])}, "
                 f"pcapstats {_show(got[i])}  [{_context(ref.raw, int(frames[i]) - 1)}]"
                 for i in bad[:SHOW]]
        pytest.fail(f"{name} kernel={kernel}: column {column} ({wireshark}) differs on "
                    f"{len(bad)} of {rows.sum()} packets:\n" + "\n".join(lines))


def _show(value) -> str:
    return "<NA>" if value is pd.NA else repr(value.item() if hasattr(value, "item") else value)


def _context(raw: pd.DataFrame, i: int) -> str:
    """A few tshark fields of packet i, to say what kind of packet a mismatch is on."""
    keys = ("frame.protocols", "ip.src", "ipv6.src", "tcp.srcport", "udp.srcport", "icmp.type",
            "icmpv6.type")
    return ", ".join(f"{k}={raw[k].iat[i]}" for k in keys if raw[k].iat[i] is not pd.NA)


# -- throughput vs the conversation tables ----------------------------------------------------

_EXACT = ("address_a", "port_a", "address_b", "port_b", "packets", "bytes", "packets_a_to_b",
          "bytes_a_to_b", "packets_b_to_a", "bytes_b_to_a", "payload_bytes_a_to_b",
          "payload_bytes_b_to_a", "peak_bps_a_to_b", "peak_bps_b_to_a",
          "peak_payload_bps_a_to_b", "peak_payload_bps_b_to_a")


def _rounds_to(value: float, printed: str) -> bool:
    """Whether tshark's printed `printed` (fixed decimals) is `value` rounded.

    tshark subtracts two float seconds before printing, so on an exact tie (a duration of
    1.00145 s printed with 4 decimals) its last digit can go either way: allow half a unit
    of the last printed digit, plus float noise.
    """
    decimals = len(printed.partition(".")[2])
    return abs(value - float(printed)) <= 0.5 * 10.0 ** -decimals + 1e-12


@pytest.mark.parametrize("proto", ("tcp", "udp"))
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_throughput_matches_conversation_table(real_captures, name, kernel, proto):
    path = real_captures[name]
    cap = read_or_skip(path, kernel)
    want = conversation_reference(str(path), proto)
    got = ps.throughput(cap, proto=proto).to_pandas().set_index("stream", drop=False)
    assert list(got.index) == list(want.index), \
        f"{name} {proto}: streams {list(got.index)}, tshark's conv,{proto} {list(want.index)}"
    assert (got["proto"] == proto).all()
    problems = []
    for s in want.index:
        w, g = want.loc[s], got.loc[s]
        for col in _EXACT:
            if g[col] != w[col]:
                problems.append(f"stream {s}: {col} tshark {_show(w[col])}, "
                                f"pcapstats {_show(g[col])}")
        for col, printed in (("rel_start_s", w["rel_start"]), ("duration_s", w["duration"])):
            if not _rounds_to(g[col], printed):
                problems.append(f"stream {s}: {col} tshark {printed}, pcapstats {_show(g[col])}")
        duration = (w["last_ns"] - w["first_ns"]) / 1e9
        if g["duration_s"] != duration:
            problems.append(f"stream {s}: duration_s = (last - first frame time) = "
                            f"{_show(duration)}, pcapstats {_show(g['duration_s'])}")
        for rate, count in (("avg_stream_bps", "bytes"), ("payload_bps", "payload_bytes")):
            for d in ("a_to_b", "b_to_a"):
                exact = w[f"{count}_{d}"] * 8 / duration if duration else np.nan
                value = g[f"{rate}_{d}"]
                if not (np.isnan(exact) and pd.isna(value) or np.isclose(value, exact, rtol=1e-9,
                                                                         atol=0)):
                    problems.append(f"stream {s}: {rate}_{d} = {count}_{d} x 8 / duration "
                                    f"= {_show(exact)}, pcapstats {_show(value)}")
    assert not problems, f"{name} kernel={kernel} {proto}:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_throughput_without_proto_is_both_tables(real_captures, name):
    cap = read_or_skip(real_captures[name], "auto")
    both = ps.throughput(cap).to_pandas()
    assert list(both.columns) == THROUGHPUT_TABLE.names
    keys = set(zip(both["proto"], both["stream"]))
    want = {(p, s) for p in ("tcp", "udp")
            for s in conversation_reference(str(real_captures[name]), p).index}
    assert keys == want


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_cli_json_has_exactly_the_throughput_columns(real_captures, name):
    path = real_captures[name]
    exe = shutil.which("pcapstats")
    argv = [exe] if exe else [sys.executable, "-m", "pcapstats"]
    proc = subprocess.run([*argv, "throughput", str(path), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert isinstance(rows, list) and rows
    names = THROUGHPUT_TABLE.names
    for row in rows:
        assert list(row) == names
    for proto in ("tcp", "udp"):
        want = conversation_reference(str(path), proto)
        got = {r["stream"]: r for r in rows if r["proto"] == proto}
        assert sorted(got) == list(want.index)
        for s in want.index:
            for col in ("packets_a_to_b", "bytes_a_to_b", "packets_b_to_a", "bytes_b_to_a",
                        "address_a", "port_a"):
                assert got[s][col] == want.loc[s, col], (proto, s, col)


# -- the captures hold what they are meant to test --------------------------------------------

def _tcp_streams(path):
    f = tshark_fields(path, ("tcp.stream", "ip.src", "ipv6.src", "tcp.srcport", "ip.dst",
                             "ipv6.dst", "tcp.dstport", "tcp.flags", "frame.time_epoch"))
    return f[f["tcp.stream"].notna()]


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_capture_has_a_reused_port(real_captures, name):
    f = _tcp_streams(real_captures[name])
    syns = f[(f["tcp.flags"].map(lambda v: int(v, 16)) & 0x12) == 0x02]
    reuse = syns[(syns["tcp.srcport"] == str(REUSE_CLIENT_PORT))
                 & (syns["tcp.dstport"] == str(REUSE_SERVER_PORT))]
    assert reuse["tcp.stream"].nunique() == 2, "port reuse should give two tcp.stream ids"


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_capture_has_concurrent_transfers(real_captures, name):
    f = _tcp_streams(real_captures[name])
    f = f[f["tcp.dstport"] == str(TCP_SINK_PORT)]
    t = f["frame.time_epoch"].astype(float)
    spans = t.groupby(f["tcp.stream"]).agg(["min", "max"])
    v4 = spans[spans.index.isin(f[f["ip.src"].notna()]["tcp.stream"])]
    assert len(v4) == CONCURRENT_TCP
    assert v4["min"].max() < v4["max"].min(), "the plain-socket transfers should overlap"


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_capture_has_udp_icmp_ipv6_and_fragments(real_captures, name):
    path = real_captures[name]
    f = tshark_fields(path, ("frame.protocols", "udp.dstport", "icmp.type", "icmpv6.type",
                             "ip.flags.mf", "ipv6.fraghdr.offset", "frame.len",
                             "frame.cap_len"))
    protos = f["frame.protocols"]
    assert (f["udp.dstport"] == "5201").sum() > 100, "iperf3 UDP"
    assert (f["udp.dstport"] == str(UDP_ECHO_PORT)).sum() >= 20, "UDP echo"
    quotes = (f["icmp.type"] == "3") & protos.str.contains("icmp:ip:udp")
    assert quotes.sum() >= 2, "ICMP port unreachable quoting UDP"
    to_closed = (f["udp.dstport"] == str(UDP_CLOSED_PORT))
    assert (to_closed & quotes).sum() == 1
    # The capture filter hides the datagram itself from the router capture only.
    assert (to_closed & ~quotes).sum() == (0 if "bpf" in name else 1)
    assert (f["icmp.type"] == "8").sum() >= 3 and (f["icmpv6.type"] == "128").sum() >= 3
    assert protos.str.contains("ipv6:tcp").sum() > 50, "TCP over IPv6"
    assert (f["ip.flags.mf"] == "1").any(), "IPv4 fragments"
    assert f["ipv6.fraghdr.offset"].notna().any(), "IPv6 fragment headers"
    cut = (f["frame.cap_len"].astype(int) < f["frame.len"].astype(int)).sum()
    if "s96" in name:
        assert cut > 1000, "snaplen 96 should cut the data packets"
    else:
        assert cut == 0


# -- the lab leaves nothing behind ------------------------------------------------------------

def _our_namespaces(prefix: str) -> list[str]:
    from pcapstats.lab.cleanup import list_netns
    return [n for n in list_netns() if n.startswith(prefix)]


def test_lab_session_left_no_namespace(real_captures):
    """The capture fixture has closed its lab: no namespace of this process is left."""
    from pcapstats.lab.cleanup import PREFIX
    assert _our_namespaces(f"{PREFIX}{os.getpid()}-") == []


def test_lab_closes_on_error_inside_with():
    from pcapstats.lab import topologies
    with pytest.raises(RuntimeError, match="boom"):
        with topologies.two_hosts() as lab:
            sleeper = lab.popen("a", "sleep", "60")
            assert lab.run("a", "ping", "-c", "1", "-W", "2", lab.address("b")).returncode == 0
            raise RuntimeError("boom")
    assert _our_namespaces(lab.prefix + "-") == []
    assert sleeper.poll() is not None


def test_lab_removes_everything_when_killed_by_sigterm(tmp_path):
    """A lab program killed by SIGTERM tears its lab down, then dies of SIGTERM."""
    script = textwrap.dedent("""
        import time
        from pcapstats.lab import topologies
        lab = topologies.two_hosts()
        lab.popen("b", "sleep", "60")
        print(lab.prefix, flush=True)
        time.sleep(60)
    """)
    from pcapstats.lab import cleanup_leftovers
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    prefix = proc.stdout.readline().strip()
    try:
        assert prefix, "the lab program did not start"
        deadline = time.monotonic() + 5
        pids = []
        while not pids and time.monotonic() < deadline:  # `ip netns exec` enters, then execs
            pids = subprocess.run(["ip", "netns", "pids", f"{prefix}-b"], capture_output=True,
                                  text=True).stdout.split()
        assert pids, "the sleeper should run inside the lab"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == -signal.SIGTERM
        assert _our_namespaces(prefix + "-") == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        if prefix:  # whatever failed above, leave nothing behind
            cleanup_leftovers(prefix + "-", only_dead=False)
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids), "the sleeper survived"


def test_cleanup_leftovers_removes_only_dead_runs():
    from pcapstats.lab.cleanup import PREFIX, cleanup_leftovers
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine_alive = f"{PREFIX}{os.getpid()}-999-x"
    dead_run = f"{PREFIX}{dead.pid}-0-x"
    foreign = f"{PREFIX}{dead.pid}-not-a-lab-name"
    made = (mine_alive, dead_run, foreign)
    for ns in made:
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:  # prefixes that match only these: other runs' namespaces are none of our business
        assert cleanup_leftovers(f"{PREFIX}{os.getpid()}-999-") == []  # its run is alive
        assert cleanup_leftovers(f"{PREFIX}{dead.pid}-") == [dead_run]  # not the foreign one
        assert _our_namespaces(dead_run) == []
        assert _our_namespaces(mine_alive) == [mine_alive] and _our_namespaces(foreign)
        assert cleanup_leftovers(mine_alive, only_dead=False) == [mine_alive]
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def test_lab_refuses_without_root(monkeypatch):
    from pcapstats.lab import Lab, LabError
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabError, match="needs root") as info:
        Lab()
    assert isinstance(info.value, ps.PcapstatsError) and "\n" not in str(info.value)


def test_lab_names_a_missing_tool(monkeypatch):
    from pcapstats.lab import Lab, LabError
    from pcapstats.lab import commands
    real_which = shutil.which
    monkeypatch.setattr(commands.shutil, "which", lambda t: None if t == "ethtool" else real_which(t))
    with pytest.raises(LabError, match="'ethtool'.*apt-get install ethtool"):
        Lab()
