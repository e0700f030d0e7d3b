"""The netem path -- the one a student's host takes -- proven on this machine, whose kernel has no
``sch_netem``.

1. tc parses what pcapstats would send.  ``tc`` parses every netem argument in user space before
   it asks the kernel: here a well-formed command fails only at the kernel ("Specified qdisc
   kind is unknown"), a malformed one in tc's parser ("What is ...", "Illegal ...", usage,
   exit 1).  Every netem command the lab, ``capture`` and ``netem`` issue, for every
   combination of what they can be asked, goes through the real ``tc`` in a namespace and must
   get the kernel's refusal, never the parser's.
2. The whole sequence, with :mod:`tests.lab.netem_tc` first on the PATH: a ``tc`` that records
   every command and answers as a netem kernel does, so ``mechanism="netem"`` runs end to end.

The independent source is the real ``tc``'s own parser (1), and tc's words read back here with
tc's units (:func:`netem_words`), not with the code under test (2).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import uuid

import pytest

from pcapstats.lab import LabError, impair, live_impair, topologies
from pcapstats.lab.impair import Impairment, apply
from tests.lab import netem_tc

pytestmark = pytest.mark.netns

KERNEL_REFUSAL = "Error: Specified qdisc kind is unknown."


# -- fixtures ----------------------------------------------------------------------------------
def _forget_probes() -> None:
    """The netem probe's answer is kept for the process: forget it across the shim's life."""
    impair._netem_cache.clear()
    live_impair._netem_cache.clear()


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """This machine as a netem kernel: the recording tc first on the PATH (children inherit)."""
    directory = tmp_path_factory.mktemp("netem-tc")
    bin_dir = netem_tc.install(directory)
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{path}"
    _forget_probes()
    try:
        yield directory
    finally:
        os.environ["PATH"] = path
        _forget_probes()


@pytest.fixture(scope="module")
def lab(kernel):
    with topologies.sender_router_receiver() as lab:
        yield lab


@pytest.fixture(scope="module")
def hosts(kernel):
    """Two namespaces joined by a veth: pcapstats runs in ``a`` on its eth0, as on a VM."""
    with topologies.two_hosts() as lab:
        yield lab


def new_calls(kernel, since: int) -> list[dict]:
    return netem_tc.calls(kernel)[since:]


def assert_parsed_by_tc(calls: list[dict]) -> None:
    """Every qdisc command tc was given passed its parser: a netem add got the kernel's refusal
    (which the shim then answers as a netem kernel), never tc's own."""
    checked = 0
    for c in calls:
        if "real_rc" not in c:
            continue
        checked += 1
        words = c["argv"]
        assert c["real_rc"] != netem_tc.PARSER_EXIT, (words, c["real_stderr"])
        for parser_words in ("What is", "Illegal", "Usage", "Unknown", "invalid"):
            assert parser_words not in c["real_stderr"], (words, c["real_stderr"])
        if "netem" in words and "add" in words:
            assert c["real_stderr"] == KERNEL_REFUSAL, (words, c["real_stderr"])
            assert c["rc"] == 0 and c["answered"] == "netem-kernel", c
    assert checked


# -- 1. tc parses what pcapstats would send ----------------------------------------------------
# Every combination of what can be asked, at ordinary values; then each edge Impairment takes.
EDGES = [Impairment(loss=1e-7), Impairment(loss=1.0), Impairment(ack_loss=1.0),
         Impairment(delay_s=1e-6, jitter_s=1e-6), Impairment(delay_s=60.0),
         Impairment(rate_bps=1e3), Impairment(rate_bps=1e3, serialize=True),
         Impairment(rate_bps=1e12, queue_bytes=2**31),
         Impairment(rate_bps=1e12, delay_s=60.0, jitter_s=60.0),
         Impairment(rate_bps=1e12, delay_s=60.0, jitter_s=60.0, queue_bytes=2**31,
                    serialize=True, loss=1.0, ack_loss=1.0)]


def lab_impairments() -> list[Impairment]:
    out = []
    for loss, ack_loss, (delay, jitter), (rate, queue), serialize in itertools.product(
            (0.0, 0.1), (0.0, 0.05), ((0.0, 0.0), (0.020, 0.0), (0.020, 0.002)),
            ((None, None), (30e6, None), (30e6, 100_000)), (False, True)):
        if serialize and not rate:
            continue
        out.append(Impairment(loss=loss, ack_loss=ack_loss, delay_s=delay, jitter_s=jitter,
                              rate_bps=rate, queue_bytes=queue, serialize=serialize))
    return out + EDGES


def test_every_netem_command_of_the_lab_passes_tcs_parser(kernel, lab):
    """Every Impairment the lab takes, applied with mechanism="netem" in the router and
    removed: each command reached the kernel."""
    since = len(netem_tc.calls(kernel))
    asked = lab_impairments()
    refused = []
    for imp in asked:
        try:
            apply(lab, lab.bottleneck, imp, mechanism="netem").remove()
        except LabError as e:   # tc's parser said no: collect them all, then say which
            refused.append(f"{imp}: {e}")
    assert refused == []
    calls = new_calls(kernel, since)
    assert_parsed_by_tc(calls)
    adds = [c for c in calls if c["argv"][:2] == ["qdisc", "add"] and "netem" in c["argv"]]
    assert len(adds) >= len([i for i in asked if i.loss or i.delayed or i.rate_bps])
    assert netem_tc.held(kernel) == {}


LIVE_ASKED = [["--loss", "10%"], ["--delay", "20ms"], ["--delay", "20ms", "--jitter", "2ms"],
              ["--rate", "10mbit"], ["--rate", "10mbit", "--queue", "100p"],
              ["--loss", "0.00001%"], ["--loss", "100%"], ["--delay", "1us", "--jitter", "1us"],
              ["--delay", "60s"], ["--rate", "1kbit"], ["--rate", "1tbit", "--queue", "2048mb"],
              ["--rate", "1tbit", "--delay", "60s", "--jitter", "60s"],
              ["--loss", "10%", "--delay", "20ms", "--jitter", "2ms", "--rate", "10mbit",
               "--queue", "64kb"]]


def pcapstats_in(hosts, *args, env=None) -> subprocess.CompletedProcess:
    """pcapstats as a user runs it on their own machine: inside host a."""
    return subprocess.run(["ip", "netns", "exec", hosts.netns("a"), sys.executable, "-m",
                           "pcapstats", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture
def state_env(tmp_path):
    return {**os.environ, "PCAPSTATS_STATE_DIR": str(tmp_path / "state"),
            "PCAPSTATS_NETEM_TEST_TAG": uuid.uuid4().hex}


def test_every_netem_command_of_netem_and_capture_passes_tcs_parser(kernel, hosts, state_env,
                                                                      tmp_path):
    """`pcapstats netem` set and cleared for each value alone, together and at the edges; a
    capture under all of them (the same installer, owned by the capture)."""
    since = len(netem_tc.calls(kernel))
    refused = []
    for asked in LIVE_ASKED:
        done = pcapstats_in(hosts, "netem", "eth0", *asked, env=state_env)
        if done.returncode != 0:
            refused.append(f"{' '.join(asked)}: {done.stderr.strip()}")
            continue
        assert "by netem" in done.stdout, done.stdout
        cleared = pcapstats_in(hosts, "netem", "eth0", "--clear", env=state_env)
        assert cleared.returncode == 0, cleared.stderr
    assert refused == []
    captured = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE_ASKED[-1], "-o",
                            tmp_path / "c.pcap", "--", "true", env=state_env)
    assert captured.returncode == 0, captured.stderr
    calls = new_calls(kernel, since)
    assert_parsed_by_tc(calls)
    assert len([c for c in calls if "netem" in c["argv"] and "add" in c["argv"]
                and "lo" not in c["argv"]]) == len(LIVE_ASKED) + 1
    assert netem_tc.held(kernel) == {}


def test_the_fallback_takes_the_same_edges(kernel, lab):
    """The edges again, on the fallback this machine runs for real (tbf's limit is 32-bit too:
    an unbounded default queue of one BDP at 1 Tbit/s x 240 ms was refused by tc)."""
    for imp in EDGES:
        applied = apply(lab, lab.bottleneck, imp, mechanism="fallback")
        assert "netem" not in applied.mechanisms.values()
        applied.remove()
    assert netem_tc.held(kernel) == {}


def test_a_rate_without_its_unit_is_one_line_and_a_slow_one_ends(kernel, hosts, state_env,
                                                                 tmp_path):
    """Under 1 kbit/s is a unit left out (tc counts bytes/s: netem's "rate 1bit" is no rate at
    all); at 1 kbit/s a capture still ends in seconds, not after draining its queue for 13 min."""
    for args in (["netem", "eth0", "--rate", "500bit"],
                 ["capture", "-i", "eth0", "--rate", "30bit", "-o", tmp_path / "x.pcap"]):
        done = pcapstats_in(hosts, *args, env=state_env)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith("pcapstats: error: rate ") and \
            "under 1 kbit/s" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    done = pcapstats_in(hosts, "capture", "-i", "eth0", "--rate", "1kbit", "-o",
                        tmp_path / "slow.pcap", "--", "true", env=state_env)
    assert done.returncode == 0, done.stderr
    assert netem_tc.held(kernel) == {}
