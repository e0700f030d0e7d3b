"""Fuzz every analysis command with mutated captures: nothing but the project's own errors.

    python bench/fuzz.py --count 100000 --seed 1 [--jobs 2] [--out bench/fuzz-out]
    python bench/fuzz.py --replay bench/fuzz-out/failures/x.pcap     # one saved input again
    python bench/fuzz.py --cli --count 20000 --seed 1                 # the CLI layer

Inputs are the shipped captures (captures/) and the public ones (tests/data/), each cut to a
prefix of 20 to PREFIX_PACKETS packets, then mutated 1 to 4 times.  Mutations know the formats: record
timestamps (+1 s, +66 days, -2 s, 0, all ones, another record's), record lengths, IPv4/IPv6
header fields (lengths, IHL, fragment offset and flags, TTL, protocol, identification), TCP
fields (ports, sequence and acknowledgement numbers, data offset, flags, window) and options
(MSS, window scale shift, SACK edges, TSval/TSecr), UDP length and ports, ICMP type, identifier
and sequence, payload bytes (BYE, ACK: BYE, iperf's counters), and blind ones: byte flips, a
cut at any offset, a record duplicated, dropped or moved.  Field offsets come from reading the
unmutated prefix with pcapstats itself (frame offsets, header lengths).

Each input runs in a child forked from a warmed parent (pcapstats and numpy imported), which
runs every command's CLI entry (`main([command, file])`, default table output) one after
another under a 10 s alarm each and an address-space limit; the parent measures the child's
peak RSS (wait4).  Outcomes per command: ``ok`` (exit 0), ``clean`` (exit 1 or 2: the project's
own one-line error), and failures: ``internal`` (exit 3: an exception that is not the
project's, named by type), ``timeout``, ``signal`` (the child died), ``memory`` (peak RSS over
--memory-mb).  A failing input is saved under --out/failures with a JSON line saying what
failed.  The table at the end counts inputs and outcomes; speed is not measured here.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("throughput", "iograph", "hierarchy", "retrans", "rtt", "cwnd", "limits", "seqgraph",
            "wscale", "flavour", "verify", "ping", "udp", "fairness", "delay", "wifi", "compare")
COMMAND_TIMEOUT_S = 10


def set_commands(names: tuple[str, ...]) -> None:
    """The commands every input goes through (forked children read the module's COMMANDS)."""
    global COMMANDS
    COMMANDS = names
PREFIX_PACKETS = 800              # inputs are the seeds' first 20 to this many packets
ADDRESS_SPACE = 6 << 30           # a runaway allocation becomes a MemoryError, not a dead machine
LINK_HEADER = {1: 14, 113: 16, 276: 20, 101: 0, 228: 0, 229: 0, 0: 4, 12: 0, 14: 0}


# -- seeds -----------------------------------------------------------------------------------------

class Seed:
    """A capture's bytes with what the mutators need: where each record and header is."""

    def __init__(self, path: Path):
        import numpy as np
        import pcapstats as ps
        self.path, self.data = path, path.read_bytes()
        self.pcapng = self.data[:4] == b"\x0a\x0d\x0d\x0a"
        self.little = True
        if not self.pcapng:
            self.little = self.data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
        cap = ps.read(path)
        col = cap.column
        n = len(cap)
        self.frame = col("frame_offset").astype(np.int64)
        self.caplen = col("frame_cap_len").astype(np.int64)
        link = col("link_type").astype(np.int64)
        vlan = col("vlan_count").astype(np.int64)
        base = np.array([LINK_HEADER.get(int(lt), -1) for lt in link], np.int64)
        self.ip = np.where(base >= 0, self.frame + base + 4 * vlan, -1)
        self.ip_version = col("ip_version").astype(np.int64)
        self.ip_hdr = col("ip_hdr_len").astype(np.int64)
        self.l4_proto = np.where(cap.layer("tcp") & ~col("l4_quoted"), 6,
                                 np.where(cap.layer("udp") & ~col("l4_quoted"), 17,
                                          np.where(cap.layer("icmp"), 1, 0)))
        self.tcp_hdr = col("tcp_hdr_len").astype(np.int64)
        self.payload = col("payload_offset").astype(np.int64)
        self.payload_cap = col("payload_cap_len").astype(np.int64)
        # record header offsets: pcap 16 bytes before the data; pcapng EPB 28 (SPB/OPB: none)
        self.record = self.frame - (28 if self.pcapng else 16)
        self.ends = self.frame + self.caplen
        if self.pcapng:   # a block ends at its trailing length, 4-aligned
            self.ends = self.record + np.array([self._u32(int(r) + 4) if r >= 0 else 0
                                                for r in self.record], np.int64)
        self.n = n

    def _u32(self, off: int) -> int:
        return struct.unpack_from("<I" if self.little else ">I", self.data, off)[0]

    def prefix_end(self, packets: int) -> int:
        return int(self.ends[min(packets, self.n) - 1]) if self.n else len(self.data)


# -- mutations -------------------------------------------------------------------------------------

class Mutator:
    def __init__(self, seed: Seed, rng: random.Random, packets: int):
        self.s, self.rng, self.k = seed, rng, min(packets, seed.n)
        self.buf = bytearray(seed.data[:seed.prefix_end(self.k)])
        self.did: list[str] = []

    def pick(self, want=None) -> int | None:
        rows = [i for i in range(self.k) if want is None or want(i)]
        return self.rng.choice(rows) if rows else None

    def put(self, off: int, fmt: str, value) -> None:
        if 0 <= off and off + struct.calcsize(fmt) <= len(self.buf):
            struct.pack_into(fmt, self.buf, off, value)

    def get(self, off: int, fmt: str):
        if 0 <= off and off + struct.calcsize(fmt) <= len(self.buf):
            return struct.unpack_from(fmt, self.buf, off)[0]
        return 0

    def endian(self) -> str:
        return "<" if self.s.little else ">"

    # each returns a short description, or None when the prefix has nothing to mutate
    def timestamp(self):
        i = self.pick(lambda i: self.s.record[i] >= 0)
        if i is None:
            return None
        r, e = int(self.s.record[i]), self.endian()
        at = r + (12 if self.s.pcapng else 0)
        hi_first = self.s.pcapng
        secs = [1, 66 * 86400, -2, -(66 * 86400), 2**31, 0]
        how = self.rng.choice(["add", "zero", "ones", "copy"])
        if how == "add":
            d = self.rng.choice(secs)
            if self.s.pcapng:      # 64-bit count of (usually) microseconds, high word first
                v = (self.get(at, e + "I") << 32 | self.get(at + 4, e + "I")) + d * 10**6
                v &= (1 << 64) - 1
                self.put(at, e + "I", v >> 32)
                self.put(at + 4, e + "I", v & 0xFFFFFFFF)
            else:
                self.put(at, e + "I", (self.get(at, e + "I") + d) & 0xFFFFFFFF)
            return f"timestamp of packet {i + 1} {d:+d} s"
        if how in ("zero", "ones"):
            v = 0 if how == "zero" else 0xFFFFFFFF
            self.put(at, e + "I", v)
            self.put(at + 4, e + "I", v)
            return f"timestamp of packet {i + 1} set to {how}"
        j = self.pick(lambda j: self.s.record[j] >= 0)
        src = int(self.s.record[j]) + (12 if hi_first else 0)
        self.buf[at:at + 8] = self.buf[src:src + 8]
        return f"timestamp of packet {i + 1} copied from packet {j + 1}"

    def record_length(self):
        i = self.pick(lambda i: self.s.record[i] >= 0)
        if i is None:
            return None
        r, e = int(self.s.record[i]), self.endian()
        field = r + (24 if self.s.pcapng else 12)      # original length: keeps the framing
        v = self.rng.choice([0, 1, 0xFFFFFFFF, self.get(field, e + "I") * 7, 65535])
        self.put(field, e + "I", v & 0xFFFFFFFF)
        return f"original length of packet {i + 1} = {v}"

    def ip_field(self):
        i = self.pick(lambda i: self.s.ip[i] >= 0 and self.s.ip_version[i])
        if i is None:
            return None
        ip = int(self.s.ip[i])
        if self.s.ip_version[i] == 4:
            name, off, fmt = self.rng.choice([("total length", 2, "!H"), ("id", 4, "!H"),
                                              ("flags/fragment", 6, "!H"), ("ttl", 8, "B"),
                                              ("protocol", 9, "B"), ("ihl", 0, "B")])
            if name == "ihl":
                v = 0x40 | self.rng.choice([0, 1, 4, 5, 6, 15])
            elif name == "flags/fragment":
                v = self.rng.choice([0x2000, 0x2001, 0x1FFF, 0x0001, 0x4000, 0xFFFF])
            else:
                v = self.rng.choice([0, 1, 0xFF, self.rng.getrandbits(16)]) & \
                    (0xFF if fmt == "B" else 0xFFFF)
        else:
            name, off, fmt = self.rng.choice([("payload length", 4, "!H"), ("next header", 6, "B"),
                                              ("hop limit", 7, "B")])
            v = self.rng.choice([0, 1, 44, 0xFF, self.rng.getrandbits(16)]) & \
                (0xFF if fmt == "B" else 0xFFFF)
        self.put(ip + off, fmt, v)
        return f"IPv{self.s.ip_version[i]} {name} of packet {i + 1} = {v}"

    def tcp_field(self):
        i = self.pick(lambda i: self.s.l4_proto[i] == 6 and self.s.ip[i] >= 0)
        if i is None:
            return None
        t = int(self.s.ip[i] + self.s.ip_hdr[i])
        name, off, fmt = self.rng.choice([("sport", 0, "!H"), ("dport", 2, "!H"),
                                          ("seq", 4, "!I"), ("ack", 8, "!I"),
                                          ("offset", 12, "B"), ("flags", 13, "B"),
                                          ("window", 14, "!H"), ("options", 20, None)])
        if fmt is None:
            return self.tcp_option(i, t)
        if name in ("seq", "ack"):
            old = self.get(t + off, fmt)
            v = self.rng.choice([0, 0xFFFFFFFF, old + 2**31, old - 1, old + 1448,
                                 self.rng.getrandbits(32)]) & 0xFFFFFFFF
        elif name == "offset":
            v = self.rng.choice([0, 1, 4, 15]) << 4
        elif name == "flags":
            v = self.rng.choice([0x02, 0x12, 0x01, 0x04, 0x3F, 0x00, 0x11, 0xFF])
        else:
            v = self.rng.choice([0, 1, 0xFFFF, self.rng.getrandbits(16)])
        self.put(t + off, fmt, v)
        return f"TCP {name} of packet {i + 1} = {v}"

    def tcp_option(self, i: int, t: int):
        end = t + int(self.s.tcp_hdr[i])
        at = t + 20
        options = []
        while at < end and at < len(self.buf):
            kind = self.buf[at]
            if kind == 0:
                break
            if kind == 1:
                at += 1
                continue
            length = self.buf[at + 1] if at + 1 < len(self.buf) else 0
            options.append((kind, at, length))
            if length < 2:
                break
            at += length
        if not options:
            return None
        kind, at, length = self.rng.choice(options)
        how = self.rng.choice(["value", "length"])
        if how == "length":
            v = self.rng.choice([0, 1, 2, 40, 255])
            self.put(at + 1, "B", v)
            return f"TCP option {kind} length of packet {i + 1} = {v}"
        if kind == 3:                                   # window scale shift
            v = self.rng.choice([14, 15, 31, 255])
            self.put(at + 2, "B", v)
        elif kind == 2:                                 # MSS
            v = self.rng.choice([0, 1, 65535])
            self.put(at + 2, "!H", v)
        else:                                           # SACK edges, timestamps, others
            v = self.rng.getrandbits(32)
            self.put(at + 2 + 4 * self.rng.randrange(max((length - 2) // 4, 1)), "!I", v)
        return f"TCP option {kind} value of packet {i + 1} = {v}"

    def udp_icmp_field(self):
        i = self.pick(lambda i: self.s.l4_proto[i] in (17, 1) and self.s.ip[i] >= 0)
        if i is None:
            return None
        u = int(self.s.ip[i] + self.s.ip_hdr[i])
        if self.s.l4_proto[i] == 17:
            name, off = self.rng.choice([("length", 4), ("sport", 0), ("dport", 2)])
            v = self.rng.choice([0, 7, 8, 0xFFFF, self.rng.getrandbits(16)])
            self.put(u + off, "!H", v)
            return f"UDP {name} of packet {i + 1} = {v}"
        name, off, fmt = self.rng.choice([("type", 0, "B"), ("id", 4, "!H"), ("seq", 6, "!H")])
        v = self.rng.choice([0, 8, 3, 11, 0xFF, 0xFFFF, self.rng.getrandbits(16)]) & \
            (0xFF if fmt == "B" else 0xFFFF)
        self.put(u + off, fmt, v)
        return f"ICMP {name} of packet {i + 1} = {v}"

    def payload(self):
        i = self.pick(lambda i: self.s.payload[i] >= 0 and self.s.payload_cap[i] > 0)
        if i is None:
            return None
        p, n = int(self.s.payload[i]), int(self.s.payload_cap[i])
        what = self.rng.choice([b"BYE", b"ACK: BYE", b"\x00\x00\x00\x00", b"\xff" * 8,
                                bytes(self.rng.getrandbits(8) for _ in range(4))])
        at = p + self.rng.randrange(n)
        self.buf[at:at + len(what)] = what[:max(0, min(len(what), len(self.buf) - at))]
        return f"payload of packet {i + 1} at +{at - p}: {what!r}"

    def blind(self):
        how = self.rng.choice(["flip", "cut", "dup", "drop", "move"])
        if how == "flip":
            for _ in range(self.rng.randint(1, 8)):
                at = self.rng.randrange(len(self.buf))
                self.buf[at] ^= 1 << self.rng.randrange(8)
            return "random bit flips"
        if how == "cut":
            at = self.rng.randrange(len(self.buf))
            del self.buf[at:]
            return f"cut at {at}"
        i = self.pick(lambda i: self.s.record[i] >= 0 and self.s.ends[i] <= len(self.buf))
        if i is None:
            return None
        a, b = int(self.s.record[i]), int(self.s.ends[i])
        chunk = bytes(self.buf[a:b])
        if how == "dup":
            self.buf[b:b] = chunk
            return f"packet {i + 1} duplicated"
        del self.buf[a:b]
        if how == "drop":
            return f"packet {i + 1} dropped"
        at = int(self.s.record[self.pick(lambda j: self.s.record[j] >= 0
                                         and self.s.record[j] <= len(self.buf))] or a)
        self.buf[at:at] = chunk
        return f"packet {i + 1} moved"

    def mutate(self) -> bytes:
        field_ops = [self.timestamp, self.record_length, self.ip_field, self.tcp_field,
                     self.udp_icmp_field, self.payload]
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.choice(field_ops * 3 + [self.blind])
            said = op()
            if said:
                self.did.append(said)
        return bytes(self.buf)


# -- running one input -------------------------------------------------------------------------

def _child(path: str, out_fd: int, memory_limit: int) -> None:
    """Run every command on path; one JSON line per command to out_fd; never returns."""
    from pcapstats.cli import main
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    devnull = os.open(os.devnull, os.O_WRONLY)
    err_path = path + ".err"
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(devnull, 1)
    os.dup2(err, 2)
    current = {"command": None}

    def on_alarm(signum, frame):
        os.write(out_fd, (json.dumps({"command": current["command"], "outcome": "timeout"})
                          + "\n").encode())
        os._exit(124)
    signal.signal(signal.SIGALRM, on_alarm)
    os.environ["COLUMNS"] = "100"
    for command in COMMANDS:
        current["command"] = command
        os.ftruncate(err, 0)
        os.lseek(err, 0, os.SEEK_SET)
        signal.alarm(COMMAND_TIMEOUT_S)
        t = time.perf_counter()
        try:
            code = main([command, path])
        except BaseException as e:        # noqa: BLE001 -- main should never raise
            code = f"raised {type(e).__name__}"
        signal.alarm(0)
        seconds = time.perf_counter() - t
        text = open(err_path, errors="replace").read()
        line = next((ln for ln in text.splitlines() if "internal error" in ln), "")
        outcome = ("ok" if code == 0 else "clean" if code in (1, 2) else "internal")
        os.write(out_fd, (json.dumps({"command": command, "outcome": outcome, "code": str(code),
                                      "seconds": round(seconds, 3), "error": line[-300:]})
                          + "\n").encode())
    os._exit(0)


# -- the campaign -------------------------------------------------------------------------------

def seeds() -> list[Path]:
    files = [p for p in sorted((ROOT / "captures").iterdir()) if p.suffix in (".pcap", ".pcapng")]
    files += [p for p in sorted((ROOT / "tests" / "data").iterdir())
              if p.suffix in (".pcap", ".pcapng")]
    return files


def _warm() -> None:
    """Run every command once in the parent, so each forked child finds every module (pandas,
    rich's tables ...) imported already: forks then start in a millisecond, not 0.2 s."""
    import io
    from pcapstats.cli import main
    os.environ["COLUMNS"] = "100"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for command in COMMANDS:
            main([command, str(ROOT / "captures" / "udp_ping.pcapng")])


def stop_on_sigterm() -> None:
    """SIGTERM (and SIGINT, which a shell's background job ignores) ends a campaign as Ctrl-C
    does: its table of what ran, then exit."""
    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def campaign(args) -> int:
    import warnings
    warnings.simplefilter("ignore")
    stop_on_sigterm()
    _warm()
    rng = random.Random(args.seed)
    loaded = [Seed(p) for p in seeds()]
    out = Path(args.out)
    (out / "failures").mkdir(parents=True, exist_ok=True)
    log = open(out / "failures.jsonl", "a")
    tally = collections.Counter()
    per_command = collections.defaultdict(collections.Counter)
    kinds = collections.Counter()
    slowest = []
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="pcapstats-fuzz-")
    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    running: dict[int, tuple] = {}
    jobs = max(1, args.jobs)
    made = 0

    def make(k: int):
        seed = rng.choice(loaded)
        m = Mutator(seed, rng, rng.randint(20, PREFIX_PACKETS))
        data = m.mutate()
        # a name of its own: a slow input's file must not be rewritten under it while its child
        # still has it mapped (a shared name once gave a child SIGBUS, the harness's own fault)
        path = os.path.join(work, f"in{k}{'.pcapng' if seed.pcapng else '.pcap'}")
        Path(path).write_bytes(data)
        return path, seed.path.name, m.did, data

    def judge(lines, status, rss_kb, origin, did, data, k):
        failed = []
        seen = {x["command"] for x in lines}
        for x in lines:
            per_command[x["command"]][x["outcome"]] += 1
            if x["outcome"] in ("internal", "timeout"):
                failed.append((x["command"], x["outcome"], x.get("error", "")))
            if x.get("seconds", 0) > 2:
                slowest.append((x["seconds"], x["command"], origin, did))
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL or \
                (os.WIFEXITED(status) and os.WEXITSTATUS(status) not in (0, 124)):
            missing = [c for c in COMMANDS if c not in seen]
            failed.append((missing[0] if missing else "?", "signal", f"status {status}"))
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            failed.append(("?", "timeout", "input over its total time"))
        peak_mb = (rss_kb - baseline_kb) / 1024
        if peak_mb > args.memory_mb:
            failed.append(("?", "memory", f"{peak_mb:.0f} MB over the parent's"))
        tally["inputs"] += 1
        if failed:
            tally["failed inputs"] += 1
            for command, outcome, error in failed:
                kinds[(command, outcome, error.split(":")[-2].strip() if error.count(":") > 1
                       else error[:60])] += 1
            name = f"{k:06d}-{origin}"
            (out / "failures" / name).write_bytes(data)
            log.write(json.dumps({"file": name, "from": origin, "mutations": did,
                                  "failed": failed}) + "\n")
            log.flush()

    k = 0
    try:
        while k < args.count or running:
            while len(running) < jobs and made < args.count:
                path, origin, did, data = make(made)
                pid_info = _start(path, args)
                running[pid_info[0]] = (pid_info, origin, did, data, made, path)
                made += 1
            finished = _reap(running)
            for key, (lines, status, rss) in finished:
                (_, origin, did, data, index, path) = running.pop(key)
                judge(lines, status, rss, origin, did, data, index)
                for leftover in (path, path + ".err"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(leftover)
                k += 1
                if k % 500 == 0:
                    rate = k / (time.monotonic() - started)
                    print(f"fuzz: {k}/{args.count} inputs, {tally['failed inputs']} failed, "
                          f"{rate:.1f}/s", file=sys.stderr, flush=True)
            if not finished:
                time.sleep(0.002)
    except KeyboardInterrupt:      # Ctrl-C: the table of what ran, not a traceback
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        print(f"fuzz: interrupted after {k} of {args.count} inputs", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    report(args, tally, per_command, kinds, slowest, time.monotonic() - started)
    return 1 if tally["failed inputs"] else 0


_pipes: dict[int, tuple[int, float, list]] = {}


def _start(path: str, args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _child(path, w, ADDRESS_SPACE)
        finally:
            os._exit(99)
    os.close(w)
    os.set_blocking(r, False)
    _pipes[pid] = (r, time.monotonic() + COMMAND_TIMEOUT_S * len(COMMANDS) + 5, [])
    return (pid,)


def _reap(running) -> list:
    done = []
    for key in list(running):
        pid = key
        r, deadline, chunks = _pipes[pid]
        try:
            while True:
                data = os.read(r, 65536)
                if not data:
                    break
                chunks.append(data)
        except BlockingIOError:
            pass
        got, status, rusage = os.wait4(pid, os.WNOHANG)
        if not got and time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            got, status, rusage = os.wait4(pid, 0)
        if got:
            try:
                while True:
                    data = os.read(r, 65536)
                    if not data:
                        break
                    chunks.append(data)
            except BlockingIOError:
                pass
            os.close(r)
            del _pipes[pid]
            lines = [json.loads(x) for x in b"".join(chunks).decode().splitlines() if x.strip()]
            done.append((key, (lines, status, rusage.ru_maxrss)))
    return done


def report(args, tally, per_command, kinds, slowest, seconds) -> None:
    print(f"\n{tally['inputs']} inputs (seed {args.seed}) in {seconds / 60:.1f} min, "
          f"{tally['failed inputs']} failed")
    print(f"{'command':<11} {'ok':>8} {'clean':>8} {'internal':>8} {'timeout':>8}")
    for c in COMMANDS:
        n = per_command[c]
        print(f"{c:<11} {n['ok']:>8} {n['clean']:>8} {n['internal']:>8} {n['timeout']:>8}")
    if kinds:
        print("\nfailures by kind:")
        for (command, outcome, error), n in kinds.most_common():
            print(f"  {n:>6}  {command} {outcome} {error}")
    if slowest:
        print("\nslowest commands (over 2 s):")
        for s, command, origin, did in sorted(slowest, reverse=True)[:10]:
            print(f"  {s:6.2f} s  {command}  {origin}: {'; '.join(did)}")


def replay(path: str) -> int:
    """Run one saved input as the campaign does and print what each command did."""
    _warm()
    running = {_start(path, None)[0]: None}
    while not (done := _reap(running)):
        time.sleep(0.01)
    lines, status, rss = done[0][1]
    for x in lines:
        print(json.dumps(x))
    print(f"exit status {status}, peak RSS {rss / 1024:.0f} MB")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--memory-mb", type=float, default=1024,
                        help="peak RSS an input may add to the parent's (default 1024)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "fuzz-out"))
    parser.add_argument("--replay", help="run one saved input and print what each command did")
    parser.add_argument("--cli", action="store_true",
                        help="the CLI layer: command lines with options and paths drawn from "
                             "their classes (bench/fuzz_cli.py), --count of them")
    parser.add_argument("--commands", default=",".join(COMMANDS), metavar="A,B",
                        help="only these commands (a campaign after a change to a few of them); "
                             "default: every one")
    args = parser.parse_args(argv)
    asked = tuple(c.strip() for c in args.commands.split(",") if c.strip())
    unknown = [c for c in asked if c not in COMMANDS]
    if unknown or not asked:
        parser.error(f"unknown command {unknown[0]!r}: choose from {', '.join(COMMANDS)}"
                     if unknown else "--commands names none")
    set_commands(asked)
    if args.cli:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import fuzz_cli  # lazy: the CLI layer, only when asked
        return fuzz_cli.campaign(args)
    if args.replay:
        return replay(args.replay)
    return campaign(args)


if __name__ == "__main__":
    sys.exit(main())
