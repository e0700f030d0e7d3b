"""The netem path -- the one a student's host takes -- proven on this machine, whose kernel has no
``sch_netem``.

1. tc parses what pcapstats would send.  ``tc`` parses every netem argument in user space before
   it asks the kernel: here a well-formed command fails only at the kernel ("Specified qdisc
   kind is unknown"), a malformed one in tc's parser ("What is ...", "Illegal ...", usage,
   exit 1).  Every netem command the lab, ``capture`` and ``netem`` issue, for every
   combination of what they can be asked, goes through the real ``tc`` in a namespace and must
   get the kernel's refusal, never the parser's.
2. The whole sequence, with :mod:`tests.lab.netem_tc` first on the PATH: a ``tc`` that records
   every command and answers as a netem kernel does, so ``mechanism="netem"`` runs end to end
   (``lab run``, ``lab matrix``, ``capture``, ``netem``): the qdiscs on the right interfaces,
   value by value what the fallback sets, and every one removed -- at the end, on an error
   half-way, on Ctrl-C, and after a kill by ``lab cleanup`` or ``netem --clear``.
3. The same answers both ways: a sidecar's loss counts and a run's summary, from what "the
   kernel counted" (set in the shim), read as the fallback's are.

The independent sources are the real ``tc``'s own parser (1), tc's words read back here with
tc's units (:func:`netem_words`) beside the fallback's own commands (2), ping's packet counts
and the counts the test gave the shim (3) -- never the code under test.
"""

from __future__ import annotations

import itertools
import os
import select
import shlex
import signal
import subprocess
import sys
import time
import uuid

import pytest

from pcapstats.lab import LabError, topologies
from pcapstats.lab.impair import Impairment, apply, mechanisms
from pcapstats.sidecar import load_sidecar
from tests.lab import netem_tc

pytestmark = pytest.mark.netns

KERNEL_REFUSAL = "Error: Specified qdisc kind is unknown."


# -- fixtures ----------------------------------------------------------------------------------
def _forget_probes() -> None:
    """The netem probe's answer is kept for the process: forget it across the shim's life."""
    mechanisms._probes.clear()


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


@pytest.fixture(autouse=True)
def no_failure_left(kernel):
    """A failure a test asked the shim for and did not reach does not reach the next test."""
    yield
    (kernel / "state" / "fail.json").unlink(missing_ok=True)


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


def set_and_clear_each(hosts, env: dict, *, netem: bool) -> list[str]:
    """`pcapstats netem eth0` with each of LIVE_ASKED, then --clear; the refusals, in words.
    netem sets loss and delay where the kernel has it; tbf sets the rate on every host."""
    refused = []
    for asked in LIVE_ASKED:
        done = pcapstats_in(hosts, "netem", "eth0", *asked, env=env)
        if done.returncode != 0:
            refused.append(f"{' '.join(asked)}: {done.stderr.strip()}")
            continue
        by_netem = netem and ("--loss" in asked or "--delay" in asked)
        assert ("by netem" in done.stdout) == by_netem and \
            ("by tbf" in done.stdout) == ("--rate" in asked), done.stdout
        cleared = pcapstats_in(hosts, "netem", "eth0", "--clear", env=env)
        assert cleared.returncode == 0, cleared.stderr
    return refused


def test_every_netem_command_of_netem_and_capture_passes_tcs_parser(kernel, hosts, state_env,
                                                                      tmp_path):
    """`pcapstats netem` set and cleared for each value alone, together and at the edges; a
    capture under all of them (the same installer, owned by the capture)."""
    since = len(netem_tc.calls(kernel))
    assert set_and_clear_each(hosts, state_env, netem=True) == []
    captured = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE_ASKED[-1], "-o",
                            tmp_path / "c.pcap", "--", "true", env=state_env)
    assert captured.returncode == 0, captured.stderr
    calls = new_calls(kernel, since)
    assert_parsed_by_tc(calls)
    assert len([c for c in calls if "netem" in c["argv"] and "add" in c["argv"]
                and "lo" not in c["argv"]]) == \
        len([a for a in LIVE_ASKED if "--loss" in a or "--delay" in a]) + 1
    assert netem_tc.held(kernel) == {}


def test_netem_takes_the_same_values_on_the_fallback(kernel, hosts, state_env):
    """What a netem host takes, this machine's fallback takes too (100 % loss was refused by
    the delay line: "--loss is a probability ... under 1")."""
    assert set_and_clear_each(hosts, fallback_env(kernel, state_env), netem=False) == []


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


# -- 2. the whole sequence, with a recording tc -------------------------------------------------
# tc's words read back with tc's units (tc(8)): the independent reading of what was asked.
_TIME = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0}
_RATE = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}


def _unit(text: str, table: dict) -> float:
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    return float(number) * table[text[len(number):]]


def netem_words(args: list[str]) -> dict:
    """``limit 64 delay 20000us 2000us loss 10.000000% rate 30000000bit`` -> its meaning."""
    out: dict = {"loss": 0.0, "delay_s": 0.0, "jitter_s": 0.0, "rate_bps": None}
    k = 0
    while k < len(args):
        w = args[k]
        if w == "limit":
            out["limit"], k = int(args[k + 1]), k + 2
        elif w == "delay":
            out["delay_s"], k = _unit(args[k + 1], _TIME), k + 2
            if k < len(args) and args[k][0].isdigit():
                out["jitter_s"], k = _unit(args[k], _TIME), k + 1
        elif w == "loss":
            k += 2 if args[k + 1] == "random" else 1
            out["loss"], k = float(args[k].rstrip("%")) / 100, k + 1
        elif w == "rate":
            out["rate_bps"], k = _unit(args[k + 1], _RATE), k + 2
        else:
            raise AssertionError(f"a netem word this test does not know: {w!r} in {args}")
    return out


def tbf_words(args: list[str]) -> dict:
    words = dict(zip(args[::2], args[1::2]))
    assert set(words) == {"rate", "burst", "limit"}, args
    return {"rate_bps": _unit(words["rate"], _RATE), "burst_bytes": int(words["burst"]),
            "limit_bytes": int(words["limit"])}


def netem_kernel_view(calls: list[dict], netns_suffix: str) -> dict:
    """What the recorded commands set on each interface of a namespace, in the order given:
    {iface: {"netem": words, "tbf": words, "tbf_parent": None | "H:1", "removed": bool}}."""
    out: dict = {}
    for c in calls:
        if not (c.get("netns_name") or "").endswith(netns_suffix) or c["rc"] != 0:
            continue
        opts, words = netem_tc._split(c["argv"])
        if words[:2] == ["qdisc", "add"]:
            spec = netem_tc._qdisc_spec(words[2:])
            if spec["dev"] == "lo":      # the probe: does the kernel have netem?
                continue
            dev = out.setdefault(spec["dev"], {"removed": False})
            if spec["kind"] == "netem":
                dev["netem"], dev["netem_handle"] = netem_words(spec["args"]), spec["handle"]
            elif spec["kind"] == "tbf":
                dev["tbf"], dev["tbf_parent"] = tbf_words(spec["args"]), spec["parent"]
        elif words[:2] == ["qdisc", "del"]:
            spec = netem_tc._qdisc_spec(words[2:])
            if spec["dev"] in out:
                out[spec["dev"]]["removed"] = True
    return out


def fallback_view(commands: list[str]) -> dict:
    """What the fallback's commands (as its sidecar lists them) set, by egress interface:
    {iface: {"loss", "delay_s", "jitter_s", "rate_bps" (serialisation), "tbf"}}.  The lab's
    chains are jumped to from FORWARD, a host's from mangle POSTROUTING: ``-o IFACE -j CHAIN``;
    loss is a rule's ``--probability`` (lab) or the delay line's ``--loss`` (host)."""
    chains, by_chain, lines = {}, {}, {}
    for command in commands:
        words = shlex.split(command)
        if "-o" in words and "-j" in words and words[words.index("-j") + 1] != "NFQUEUE":
            chains[words[words.index("-j") + 1]] = words[words.index("-o") + 1]
        if "-A" in words and "--probability" in words:
            by_chain.setdefault(words[words.index("-A") + 1], {})["loss"] = \
                float(words[words.index("--probability") + 1])
        if "-A" in words and "--queue-num" in words:
            by_chain.setdefault(words[words.index("-A") + 1], {})["queue"] = \
                words[words.index("--queue-num") + 1]
        if "pcapstats.tools.delayline" in words:
            flags = dict(zip(words[3::2], words[4::2]))
            lines[flags["--queue"]] = {
                "delay_s": float(flags["--delay-ms"]) / 1e3,
                "jitter_s": float(flags["--jitter-ms"]) / 1e3,
                "rate_bps": float(flags["--rate-bps"]) if "--rate-bps" in flags else None,
                **({"loss": float(flags["--loss"])} if "--loss" in flags else {})}
    out: dict = {}
    for chain, dev in chains.items():
        got = by_chain.get(chain, {})
        out[dev] = {"loss": got.get("loss", 0.0), **lines.get(got.get("queue"), {})}
    for command in commands:
        words = shlex.split(command)
        if words[:3] == ["tc", "qdisc", "add"] and "tbf" in words:
            dev = words[words.index("dev") + 1]
            out.setdefault(dev, {})["tbf"] = tbf_words(words[words.index("tbf") + 1:])
    return out


NOTHING = {"loss": 0.0, "delay_s": 0.0, "jitter_s": 0.0, "serialise_bps": None, "tbf": None}


def normalised(view: dict, mechanism: str) -> dict:
    """Either view as {iface: the values of NOTHING}: what each interface's egress does."""
    out = {}
    for dev, got in view.items():
        if mechanism == "netem":
            n = got.get("netem") or {}
            out[dev] = {"loss": n.get("loss", 0.0), "delay_s": n.get("delay_s", 0.0),
                        "jitter_s": n.get("jitter_s", 0.0), "serialise_bps": n.get("rate_bps"),
                        "tbf": got.get("tbf")}
        else:
            out[dev] = {"loss": got.get("loss", 0.0), "delay_s": got.get("delay_s", 0.0),
                        "jitter_s": got.get("jitter_s", 0.0),
                        "serialise_bps": got.get("rate_bps"), "tbf": got.get("tbf")}
    return {dev: v for dev, v in out.items() if v != NOTHING}


def same_impairment(netem: dict, fallback: dict) -> None:
    """The netem kernel's per-interface settings are the fallback's, value by value; a tbf
    under a netem hangs from it (netem's class 1); every interface's qdisc was removed."""
    got, want = normalised(netem, "netem"), normalised(fallback, "fallback")
    assert set(got) == set(want), (netem, fallback)
    for dev in want:
        for key in ("loss", "delay_s", "jitter_s", "serialise_bps"):
            assert got[dev][key] == pytest.approx(want[dev][key]), (dev, key, netem, fallback)
        assert got[dev]["tbf"] == want[dev]["tbf"], (dev, netem, fallback)
    for dev, v in netem.items():
        if "tbf" in v:
            assert v["tbf_parent"] == (f"{v['netem_handle'].split(':')[0]}:1"
                                       if "netem" in v else None), v
        assert v["removed"], (dev, "not removed", netem)


def fallback_env(kernel, env: dict | None = None) -> dict:
    """An environment without the shim: this machine's own kernel (the fallback)."""
    env = dict(env or os.environ)
    shim = str(kernel / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != shim)
    return env


def pcapstats_here(*args, env=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pcapstats", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


LAB_ASKED = ("--loss", "10%", "--delay", "20ms", "--jitter", "2ms", "--rate", "30mbit",
             "--queue", "100p", "--serialize")
PINGS = ("--tool", "ping", "--ping-count", "3", "--ping-interval", "0.05", "--snaplen", "128")
LAB_MECHANISMS = {"netem": {"loss": "netem", "delay": "netem", "jitter": "netem",
                            "serialisation": "netem", "rate": "tbf", "queue": "tbf"},
                  "fallback": {"loss": "iptables-statistic", "delay": "nfqueue-delayline",
                               "jitter": "nfqueue-delayline",
                               "serialisation": "nfqueue-delayline", "rate": "tbf",
                               "queue": "tbf"}}


def labels(summary: str) -> list[str]:
    """A summary's lines without their numbers: what each line says, not what it counted
    (before achieved against asked: measured on the wire, where the shim changes nothing)."""
    lines = summary.splitlines()
    if "achieved against asked:" in lines:
        lines = lines[:lines.index("achieved against asked:")]
    return [" ".join(w for w in line.split() if not any(ch.isdigit() for ch in w))
            for line in lines]


def test_lab_run_on_a_netem_host_sets_what_the_fallback_sets(kernel, tmp_path):
    since = len(netem_tc.calls(kernel))
    netem = pcapstats_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "n.pcap")
    assert netem.returncode == 0, netem.stderr
    calls = new_calls(kernel, since)
    fallback = pcapstats_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "f.pcap",
                              env=fallback_env(kernel))
    assert fallback.returncode == 0, fallback.stderr
    n_doc, f_doc = load_sidecar(tmp_path / "n.json"), load_sidecar(tmp_path / "f.json")
    assert_parsed_by_tc(calls)
    view = netem_kernel_view(calls, "-router")
    same_impairment(view, fallback_view(f_doc["impairment"]["settings"]["commands"]))
    b = n_doc["topology"]["bottleneck"]   # the data's way out of the router, and the ACKs'
    assert set(view) == {b["egress"], b["ingress"]}
    data, ack = view[b["egress"]], view[b["ingress"]]
    assert (data["netem"]["loss"], ack["netem"]["loss"]) == (0.1, 0.0)
    assert data["netem"]["delay_s"] == ack["netem"]["delay_s"] == 0.020
    assert data["netem"]["rate_bps"] == ack["netem"]["rate_bps"] == 30e6    # serialisation
    assert "tbf" in data and "tbf" not in ack
    assert n_doc["impairment"]["mechanisms"] == LAB_MECHANISMS["netem"]
    assert f_doc["impairment"]["mechanisms"] == LAB_MECHANISMS["fallback"]
    assert n_doc["impairment"]["asked"] == f_doc["impairment"]["asked"]
    assert labels(netem.stdout)[1:] == labels(fallback.stdout)[1:], (netem.stdout,
                                                                     fallback.stdout)
    assert netem_tc.held(kernel) == {}


def test_lab_matrix_on_a_netem_host_removes_each_cells_netem(kernel, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\ntool = "ping"\nping_count = 2\nping_interval_s = 0.05\n'
                    'snaplen = 128\nrate = "10mbit"\n[axes]\nloss = ["1%", "20%"]\n'
                    'delay = ["0ms", "5ms"]\n')
    since = len(netem_tc.calls(kernel))
    done = pcapstats_here("lab", "matrix", spec, "-o", tmp_path, "-f", "json")
    assert done.returncode == 0, done.stderr
    calls = new_calls(kernel, since)
    assert_parsed_by_tc(calls)
    runs = [c for c in calls if "netem" in c["argv"] and "add" in c["argv"]
            and (c.get("netns_name") or "").endswith("-router") and "lo" not in c["argv"]]
    asked = sorted((netem_words(netem_tc._qdisc_spec(c["argv"][2:])["args"])["loss"],
                    netem_words(netem_tc._qdisc_spec(c["argv"][2:])["args"])["delay_s"])
                   for c in runs)
    # each cell: netem on the data's way (its loss, its delay) and, with a delay, the ACKs';
    # a cell is run twice when its first attempt was out of spec -- here those with a delay,
    # which the shim (a kernel that only records) does not apply
    expected = []
    for doc in map(load_sidecar, sorted(tmp_path.glob("*.json"))):
        assert doc["status"] == "complete"
        assert doc["impairment"]["mechanisms"]["loss"] == "netem"
        assert doc["impairment"]["mechanisms"]["rate"] == "tbf"
        loss, delay = doc["impairment"]["asked"]["loss"], doc["impairment"]["asked"]["delay_s"]
        attempts = 2 if doc["achieved"]["retried_after"] else 1
        assert (attempts == 2) == bool(delay), doc["achieved"]
        expected += [(loss, delay)] * attempts + [(0.0, delay)] * (attempts if delay else 0)
    assert asked == sorted(expected)
    assert done.stdout.count('"out of spec"') == 2, done.stdout  # the matrix table says so
    assert netem_tc.held(kernel) == {}


# -- every exit path: error, Ctrl-C, killed then cleaned up ------------------------------------
def start_here(*args, env=None) -> subprocess.Popen:
    """pcapstats in a session of its own, as a terminal runs a foreground command."""
    return subprocess.Popen([sys.executable, "-m", "pcapstats", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_for(proc: subprocess.Popen, words: str, timeout: float = 60) -> None:
    """Read proc's stderr until a line has these words."""
    seen, deadline = "", time.monotonic() + timeout
    while words not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stderr], [], [], left)[0]:
            proc.kill()
            raise AssertionError(f"never saw {words!r}: {seen}")
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"ended before {words!r}: {seen}{proc.communicate()}")
        seen += line


def removed_everywhere(calls: list[dict], netns_suffix: str) -> None:
    """Each interface given a netem was given a `del ... root` after it."""
    view = netem_kernel_view(calls, netns_suffix)
    assert view and all(v["removed"] for v in view.values() if "netem" in v), view


@pytest.mark.parametrize("nth", [2, 3, 4], ids=["data netem", "its tbf", "ack netem"])
def test_a_lab_run_that_fails_half_way_through_netem_leaves_none(kernel, tmp_path, nth):
    """The kernel refuses the nth qdisc (the probe was the first): one line, exit 2, the
    qdiscs already added removed, no file written."""
    netem_tc.fail_add(kernel, nth)
    since = len(netem_tc.calls(kernel))
    done = pcapstats_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "e.pcap")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("pcapstats: error: ") and done.stderr.count("\n") == 1
    assert "failed to allocate (test)" in done.stderr, done.stderr
    calls = new_calls(kernel, since)
    if nth > 2:
        removed_everywhere(calls, "-router")
    assert netem_tc.held(kernel) == {}
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_in_a_lab_run_removes_its_netem(kernel, tmp_path):
    since = len(netem_tc.calls(kernel))
    env = {**os.environ, "PCAPSTATS_LAB_PAUSE_AT": "running ping", "PCAPSTATS_LAB_PAUSE_S": "60"}
    proc = start_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "i.pcap", env=env)
    wait_for(proc, "pausing")
    assert netem_tc.held(kernel) != {}           # the netem kernel holds the run's qdiscs
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert load_sidecar(tmp_path / "i.json")["status"] == "interrupted"
    removed_everywhere(new_calls(kernel, since), "-router")
    assert netem_tc.held(kernel) == {}


def test_a_killed_lab_run_leaves_netem_until_lab_cleanup(kernel, tmp_path):
    env = {**os.environ, "PCAPSTATS_LAB_PAUSE_AT": "running ping", "PCAPSTATS_LAB_PAUSE_S": "60"}
    proc = start_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "k.pcap", env=env)
    wait_for(proc, "pausing")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert netem_tc.held(kernel) != {}
    done = pcapstats_here("lab", "cleanup")
    assert done.returncode == 0 and f"psl-{proc.pid}-" in done.stdout, done.stdout
    assert netem_tc.held(kernel) == {}           # its namespaces went, their qdiscs with them


# -- capture and netem on a host's own interface ------------------------------------------------
LIVE = ("--loss", "10%", "--delay", "20ms", "--jitter", "2ms", "--rate", "10mbit",
        "--queue", "64kb")
LIVE_MECHANISMS = {"netem": {"loss": "netem", "delay": "netem", "jitter": "netem",
                             "rate": "tbf", "queue": "tbf"},
                   "fallback": {"loss": "nfqueue-delayline", "delay": "nfqueue-delayline",
                                "jitter": "nfqueue-delayline", "rate": "tbf", "queue": "tbf"}}
PINGS_B = ("--", "ping", "-n", "-q", "-c", "20", "-i", "0.01", "10.77.0.2")


def start_in(hosts, *args, env=None) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", hosts.netns("a"), sys.executable, "-m",
                             "pcapstats", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def capturing(proc: subprocess.Popen, partial) -> None:
    """Return once the capture has started (its partial file exists) and a second went by."""
    deadline = time.monotonic() + 30
    while not partial.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)


def test_capture_on_a_netem_host_sets_what_the_fallback_sets(kernel, hosts, state_env,
                                                              tmp_path):
    ns = hosts.netns("a")
    since = len(netem_tc.calls(kernel))
    netem = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "n.pcap",
                         *PINGS_B, env=state_env)
    assert netem.returncode == 0, netem.stderr
    calls = new_calls(kernel, since)
    fallback = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "f.pcap",
                            *PINGS_B, env=fallback_env(kernel, state_env))
    assert fallback.returncode == 0, fallback.stderr
    n_doc, f_doc = load_sidecar(tmp_path / "n.json"), load_sidecar(tmp_path / "f.json")
    assert_parsed_by_tc(calls)
    view = netem_kernel_view(calls, ns)
    same_impairment(view, fallback_view(f_doc["impairment"]["commands"]))
    assert set(view) == {"eth0"} and view["eth0"]["netem_handle"] == "5053:"
    assert n_doc["impairment"]["mechanisms"] == LIVE_MECHANISMS["netem"]
    assert f_doc["impairment"]["mechanisms"] == LIVE_MECHANISMS["fallback"]
    assert n_doc["impairment"]["asked"] == f_doc["impairment"]["asked"]
    assert n_doc["status"] == f_doc["status"] == "complete"
    assert netem_tc.held(kernel) == {}
    assert list((tmp_path / "state").rglob("*.json")) == []


@pytest.mark.parametrize("nth", [2, 3], ids=["netem", "its tbf"])
def test_a_capture_that_fails_half_way_through_netem_leaves_none(kernel, hosts, state_env,
                                                                  tmp_path, nth):
    netem_tc.fail_add(kernel, nth)     # the probe (in a namespace of its own) was the first
    done = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "e.pcap",
                        "--", "true", env=state_env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "failed to allocate (test)" in done.stderr
    assert netem_tc.held(kernel) == {}
    assert list((tmp_path / "state").rglob("*.json")) == []
    assert list(tmp_path.glob("*.pcap")) == [] and list(tmp_path.glob(".*")) == []


def test_ctrl_c_in_a_capture_removes_its_netem(kernel, hosts, state_env, tmp_path):
    proc = start_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "i.pcap", "--",
                    "sleep", "30", env=state_env)
    capturing(proc, tmp_path / ".i.pcap.partial")
    assert netem_tc.held(kernel) != {}
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert load_sidecar(tmp_path / "i.json")["status"] == "interrupted"
    assert netem_tc.held(kernel) == {}
    assert list((tmp_path / "state").rglob("*.json")) == []


def test_a_killed_capture_leaves_netem_until_netem_clear(kernel, hosts, state_env, tmp_path):
    proc = start_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "k.pcap", "--",
                    "sleep", "30", env=state_env)
    capturing(proc, tmp_path / ".k.pcap.partial")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert netem_tc.held(kernel) != {}
    shown = pcapstats_in(hosts, "netem", "eth0", "--show", env=state_env)
    assert "left behind" in shown.stdout and "not pcapstats'" not in shown.stdout, shown.stdout
    cleared = pcapstats_in(hosts, "netem", "eth0", "--clear", env=state_env)
    assert cleared.returncode == 0 and "qdisc netem 5053: removed" in cleared.stdout, \
        cleared.stdout
    assert netem_tc.held(kernel) == {}
    assert list((tmp_path / "state").rglob("*.json")) == []
    (tmp_path / ".k.pcap.partial").unlink()


def test_netem_set_show_replace_clear_on_a_netem_host(kernel, hosts, state_env):
    ns = hosts.netns("a")
    since = len(netem_tc.calls(kernel))
    done = pcapstats_in(hosts, "netem", "eth0", "--loss", "10%", "--delay", "10ms",
                        env=state_env)
    assert done.returncode == 0, done.stderr
    assert "eth0: loss 10 % by netem 5053:, delay 10 ms by netem 5053:" in done.stdout, \
        done.stdout
    shown = pcapstats_in(hosts, "netem", "eth0", "--show", env=state_env).stdout
    assert "pcapstats netem (set " in shown and "loss 10 %, delay 10 ms" in shown, shown
    assert "not pcapstats'" not in shown and "kernel default" not in shown, shown
    again = pcapstats_in(hosts, "netem", "eth0", "--delay", "20ms", "--rate", "10mbit",
                         env=state_env)
    assert again.returncode == 0, again.stderr
    assert "replaced pcapstats' netem setting (loss 10 %, delay 10 ms)" in again.stdout
    assert "rate 10 Mbit/s by tbf 5054:" in again.stdout, again.stdout
    shown = pcapstats_in(hosts, "netem", "eth0", "--show", env=state_env).stdout
    assert "not pcapstats'" not in shown, shown      # its tbf under its netem is its own
    cleared = pcapstats_in(hosts, "netem", "eth0", "--clear", env=state_env)
    assert cleared.returncode == 0 and "qdisc netem 5053: removed" in cleared.stdout
    calls = new_calls(kernel, since)
    assert_parsed_by_tc(calls)
    view = netem_kernel_view(calls, ns)
    assert view["eth0"]["netem"]["delay_s"] == 0.020 and view["eth0"]["removed"]
    assert view["eth0"]["tbf"]["rate_bps"] == 10e6 and view["eth0"]["tbf_parent"] == "5053:1"
    assert netem_tc.held(kernel) == {}
    none = pcapstats_in(hosts, "netem", "eth0", "--clear", env=state_env)
    assert none.stdout == "eth0: nothing set by pcapstats\n"


# -- 3. the same answers whichever mechanism applied it ----------------------------------------
def shapes(doc: dict) -> dict:
    """The sidecar's keys that readers use, without the mechanism's own details."""
    imp = doc["impairment"]
    counters = imp["counters"]
    return {"asked": sorted(imp["asked"]), "mechanisms": sorted(imp["mechanisms"]),
            "loss": {d: sorted(c) for d, c in (counters.get("loss") or {}).items()}
            if "topology" in doc else sorted(counters.get("loss") or {}),
            "qdisc": sorted(counters.get("qdisc") or {}),
            "qdiscs": {d: sorted(c) for d, c in (counters.get("qdiscs") or {}).items()},
            "measured": sorted(doc.get("measured") or {})}


def test_a_lab_runs_sidecar_and_summary_read_the_same_both_ways(kernel, tmp_path):
    """With what "the kernel counted" set in the shim: the loss the run reports is netem's
    drops less its tbf's, over what the data chain was offered, as the fallback's is the DROP
    rule's over the same chain; the summary says it in the same words."""
    counted = {f"eth{k} {kind}": {"drops": drops, "packets": 1000 + k, "bytes": 99}
               for k in (0, 1) for kind, drops in (("netem", 9 + k), ("tbf", 2 + k))}
    netem_tc.set_stats(kernel, counted)
    try:
        netem = pcapstats_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "n.pcap")
    finally:
        netem_tc.set_stats(kernel, {})
    assert netem.returncode == 0, netem.stderr
    fallback = pcapstats_here("lab", "run", *PINGS, *LAB_ASKED, "-o", tmp_path / "f.pcap",
                              env=fallback_env(kernel))
    assert fallback.returncode == 0, fallback.stderr
    n_doc, f_doc = load_sidecar(tmp_path / "n.json"), load_sidecar(tmp_path / "f.json")
    assert shapes(n_doc) == shapes(f_doc)
    b = n_doc["topology"]["bottleneck"]
    data = n_doc["impairment"]["counters"]["loss"]["data"]
    ack = n_doc["impairment"]["counters"]["loss"]["ack"]
    assert data["dropped_packets"] == counted[f"{b['egress']} netem"]["drops"] - \
        counted[f"{b['egress']} tbf"]["drops"]
    assert ack["dropped_packets"] == counted[f"{b['ingress']} netem"]["drops"]  # no tbf there
    # what the chains counted: the RTT's 10 requests and the run's 3, their 13 replies
    assert data["offered_packets"] == ack["offered_packets"] == 10 + 3
    assert n_doc["measured"]["loss_measured"] == data["dropped_packets"] / \
        data["offered_packets"]
    tbf = n_doc["impairment"]["counters"]["qdiscs"][b["egress"]]
    assert (tbf["kind"], tbf["dropped_packets"]) == ("tbf", counted[f"{b['egress']} tbf"]["drops"])
    got = [line for line in netem.stdout.splitlines() if line.startswith("  loss → receiver")]
    assert len(got) == 1 and got[0].startswith(
        f"  loss → receiver  {n_doc['measured']['loss_measured'] * 100:.2f} %, asked 10.00 %")
    # the lines before achieved against asked, which the shim (a kernel that only records)
    # cannot meet: it delays and drops nothing
    assert labels(netem.stdout)[1:] == labels(fallback.stdout)[1:]
    assert netem_tc.held(kernel) == {}


def test_a_captures_sidecar_and_summary_read_the_same_both_ways(kernel, hosts, state_env,
                                                                 tmp_path):
    counted = {"eth0 netem": {"drops": 7, "packets": 40}, "eth0 tbf": {"drops": 3}}
    netem_tc.set_stats(kernel, counted)
    try:
        netem = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "n.pcap",
                             *PINGS_B, env=state_env)
    finally:
        netem_tc.set_stats(kernel, {})
    assert netem.returncode == 0, netem.stderr
    fallback = pcapstats_in(hosts, "capture", "-i", "eth0", *LIVE, "-o", tmp_path / "f.pcap",
                            *PINGS_B, env=fallback_env(kernel, state_env))
    assert fallback.returncode == 0, fallback.stderr
    n_doc, f_doc = load_sidecar(tmp_path / "n.json"), load_sidecar(tmp_path / "f.json")
    assert shapes(n_doc) == shapes(f_doc)
    loss = n_doc["impairment"]["counters"]["loss"]
    assert loss["dropped_packets"] == 7 - 3
    assert loss["offered_packets"] >= 20              # ping's 20 requests left through eth0
    # netem drops a GSO burst whole and counts it once, as the chain's jump does: the share is
    # of those; the fallback's delay line counts packets on the wire
    assert loss["packets_on_wire"] is None
    said = [line for line in netem.stderr.splitlines() if "the loss dropped" in line]
    assert said == [f"pcapstats: note: the loss dropped 4 of {loss['offered_packets']} "
                    "packets as queued (GSO bursts whole): "
                    f"{4 / loss['offered_packets'] * 100:.2f} %, asked 10 %"]
    f_loss = f_doc["impairment"]["counters"]["loss"]
    assert f_loss["packets_on_wire"] >= 20
    assert f"the loss dropped {f_loss['dropped_packets']} of {f_loss['packets_on_wire']} " \
        "packets on the wire: " in fallback.stderr
    for doc, words in ((n_doc, netem.stderr), (f_doc, fallback.stderr)):
        assert "the loss dropped" in words and "tbf sent" in words, words
    assert netem_tc.held(kernel) == {}


ALONE_AND_TOGETHER = [
    Impairment(loss=0.1), Impairment(ack_loss=0.05), Impairment(delay_s=0.02),
    Impairment(delay_s=0.02, jitter_s=0.002), Impairment(rate_bps=30e6),
    Impairment(rate_bps=30e6, queue_bytes=100_000), Impairment(rate_bps=30e6, serialize=True),
    Impairment(loss=0.1, rate_bps=30e6), Impairment(delay_s=0.02, rate_bps=30e6),
    Impairment(loss=0.1, ack_loss=0.05, delay_s=0.02, jitter_s=0.002, rate_bps=30e6,
               queue_bytes=100_000, serialize=True)]


@pytest.mark.parametrize("imp", ALONE_AND_TOGETHER, ids=lambda i: ",".join(
    f"{k}={v:g}" for k, v in vars(i).items() if v not in (0, 0.0, None, False)))
def test_each_value_alone_and_together_is_the_fallbacks(kernel, lab, imp):
    """The router's netem qdiscs carry, interface by interface, what the fallback's chains,
    delay lines and tbf do; both are removed."""
    since = len(netem_tc.calls(kernel))
    apply(lab, lab.bottleneck, imp, mechanism="netem").remove()
    netem = netem_kernel_view(new_calls(kernel, since), "-router")
    fallback = apply(lab, lab.bottleneck, imp, mechanism="fallback")
    fallback.remove()
    same_impairment(netem, fallback_view(fallback.settings["commands"]))
    assert netem_tc.held(kernel) == {}
