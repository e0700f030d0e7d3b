"""Fuzzing the readers: damaged captures give a Capture or a PcapstatsError, nothing else.

Valid crafted captures (pcap in both byte orders, pcapng with several interfaces and
sections, a gzip) are mutated by hypothesis: byte flips, truncations, insertions, deletions,
and length fields (record caplen, block lengths) set to hostile values.  Each mutated file is
read by a worker *subprocess* (this file run as a script), with each kernel, because a bug in
the C kernel can segfault or hang, which an in-process test could neither see nor survive.

The worker also builds ``cap.packets`` and ``ps.throughput(cap)``, under an address-space limit
so a runaway allocation is a MemoryError (a failure) rather than a swapping machine.  The C and
numpy kernels must agree on every file: same table, same warnings, or the same error at the
same offset.

Runtime: ``PCAPSTATS_FUZZ_EXAMPLES`` examples per seed (default 40, about 30 s in all); set it
higher to fuzz longer locally.
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = int(os.environ.get("PCAPSTATS_FUZZ_EXAMPLES", "40"))
READ_TIMEOUT_S = 20          # a read of a few KB takes milliseconds: this only catches hangs
MEMORY_LIMIT = 3 << 30       # bytes of address space for the worker


# -- the worker (runs as `python test_fuzz.py --worker`) --------------------------------------

def _worker() -> None:
    """Read JSON requests {path, kernel} from stdin; answer one JSON line each."""
    import resource
    import traceback
    import warnings

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    sys.path.insert(0, os.environ["PCAPSTATS_FUZZ_IMPORT_ROOT"])   # the parent's pcapstats
    import faulthandler
    faulthandler.enable()
    import pandas as pd
    import pcapstats as ps

    for line in sys.stdin:
        req = json.loads(line)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                cap = ps.read(req["path"], kernel=req["kernel"])
                table = cap.packets
                digest = int(pd.util.hash_pandas_object(table, index=False).sum())
                ps.throughput(cap)
            foreign = [f"{w.category.__name__}: {w.message}" for w in caught
                       if not issubclass(w.category, ps.PcapstatsWarning)]
            clock = [str(w.message) for w in caught if issubclass(w.category, ps.ClockWarning)]
            answer = {"outcome": "capture", "packets": len(cap), "digest": digest,
                      "warnings": [w for w in cap.warnings if w not in clock],
                      "clock_warnings": clock, "foreign_warnings": foreign}
        except ps.PcapstatsError as e:
            answer = {"outcome": "error", "type": type(e).__name__, "offset": e.offset,
                      "message": str(e)}
        except BaseException as e:   # noqa: BLE001 - reporting anything else is the point
            answer = {"outcome": "bad", "type": type(e).__name__,
                      "traceback": traceback.format_exc()}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker()
    sys.exit(0)


# -- the tests --------------------------------------------------------------------------------

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import craft as c

KERNELS = ("c", "numpy")


class Worker:
    """One long-lived reader subprocess; restarted after it dies or hangs."""

    def __init__(self, argv=(sys.executable, __file__, "--worker"), timeout=READ_TIMEOUT_S):
        self.argv, self.timeout, self.proc, self.err = list(argv), timeout, None, None

    def _start(self):
        import pcapstats
        root = str(Path(pcapstats.__file__).resolve().parents[1])
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True,
                                     env={**os.environ, "PCAPSTATS_FUZZ_IMPORT_ROOT": root})

    def read(self, path, kernel) -> dict:
        if self.proc is None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps({"path": str(path), "kernel": kernel}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass                      # it died already: reported below
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if not ready:
            self.stop()
            return {"outcome": "bad", "type": "hang", "traceback": f"no answer in {self.timeout} s"}
        self.proc.wait(timeout=10)
        code = self.proc.returncode
        self.err.seek(0)
        err = self.err.read().decode(errors="replace")
        self.stop()
        return {"outcome": "bad", "type": f"worker died (exit status {code})", "traceback": err}

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                f.close()
            self.err.close()
            self.proc = None


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory(prefix="pcapstats-fuzz-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def kernels():
    """The kernels this install has (the fuzz needs at least one)."""
    usable = [k for k in KERNELS if not c.kernel_unavailable(k)]
    if not usable:
        pytest.skip("no usable kernel")
    return usable


# Seeds: small valid captures covering both formats, both byte orders, both resolutions,
# several link types and interfaces, and gzip.

def _seed_pcap_le():
    frames = [c.ether(p, pad_to=60) for p in c.zoo()[:14]]
    return c.pcap([c.Record(f, t) for f, t in zip(frames, c.times(len(frames), 1000))],
                  c.LT_ETHERNET, snaplen=128)


def _seed_pcap_be_ns():
    frames = [c.raw(p) for p in c.zoo()[14:]]
    return c.pcap([c.Record(f, t) for f, t in zip(frames, c.times(len(frames)))], c.LT_RAW,
                  endian=">", nano=True)


def _seed_pcapng():
    b = c.basic()
    g = c.Pcapng()
    g.section("<")
    e, s2, n = (g.interface(c.LT_ETHERNET, tsresol=9), g.interface(c.LT_SLL2, snaplen=90),
                g.interface(c.LT_NULL, tsresol=0x80 | 10))
    t = iter(c.times(20, 15_625_000))       # 2^-6 s: exact in every resolution used here
    for k, p in enumerate(b):
        g.epb(e, c.ether(p, vlans=[10, 20] if k % 2 else []), next(t))
        g.epb(s2, c.sll2(p), next(t))
        if k == 2:
            g.nrb()
            g.isb(e)
    g.epb(n, c.null(b[0]), next(t))
    g.section(">")
    r = g.interface(c.LT_RAW)
    g.opb(r, c.raw(b[3]), next(t))
    g.spb(c.raw(b[4]))
    g.unknown()
    g.epb(r, c.raw(b[5]), next(t))
    return g.written()


def _seed_pcap_gz():
    return c.gzipped(_seed_pcap_le())


# radiotap headers of the shapes the walk knows: several radiotap namespaces (Linux, one per
# antenna) and an FCS; a padded 802.11 header and an MCS rate (Atheros); a vendor namespace
_RADIOTAP_SHAPES = (
    dict(namespaces=([c.rt_tsft(), c.rt_flags(fcs=True), c.rt_rate(12), c.rt_channel(2412),
                      c.rt_signal(-40), c.rt_field(14)], [c.rt_signal(-41), c.rt_field(11)],
                     [c.rt_signal(-43), c.rt_field(11)])),
    dict(namespaces=([c.rt_flags(datapad=True), c.rt_mcs(7, bw40=True), c.rt_signal(-50)],),
         pad=True),
    dict(namespaces=([c.rt_flags(), c.rt_signal(-33)], [c.rt_rate(22), c.rt_channel(5745)]),
         vendor=(b"\x00\x11\x22", 1, b"vendor")),
)


def _seed_radiotap():
    """802.11 data frames (QoS, 4 addresses, HT control) under radiotap headers, all with IP."""
    frames = []
    for k, p in enumerate(c.basic()):
        for shape in _RADIOTAP_SHAPES:
            pad = shape.get("pad", False)
            frame = (c.wlan(p, qos=0, pad=pad), c.wlan(p, tods=True, fromds=True, qos=1, pad=pad),
                     c.wlan(p, qos=0, htc=bytes(4), pad=pad))[k % 3]
            frames.append(c.radiotap(frame, *shape["namespaces"], vendor=shape.get("vendor")))
    return c.pcap([c.Record(f, t) for f, t in zip(frames, c.times(len(frames), 1000))],
                  c.LT_RADIOTAP, name="pcap-radiotap")


def _seed_pcapng_wifi():
    """Ethernet, plain 802.11 and radiotap interfaces in one section."""
    g = c.Pcapng("pcapng-wifi")
    g.section("<")
    eth, dot11, radio = (g.interface(c.LT_ETHERNET), g.interface(c.LT_IEEE802_11),
                         g.interface(c.LT_RADIOTAP, tsresol=9))
    t = iter(c.times(30, 1000))
    for p in c.basic():
        g.epb(eth, c.ether(p), next(t))
        g.epb(dot11, c.wlan(p, tods=False, fromds=True), next(t))
        g.epb(radio, c.radiotap(c.wlan(p, qos=0), *_RADIOTAP_SHAPES[0]["namespaces"]), next(t))
    return g.written()


SEEDS = {"pcap-le": _seed_pcap_le(), "pcap-be-ns": _seed_pcap_be_ns(), "pcapng": _seed_pcapng(),
         "pcap.gz": _seed_pcap_gz(), "pcap-radiotap": _seed_radiotap(),
         "pcapng-wifi": _seed_pcapng_wifi()}

HOSTILE = (0, 1, 3, 4, 7, 8, 11, 12, 13, 16, 20, 28, 32, 0xFFFF, 0x10000, 0x40000, 0x7FFFFFFF,
           0x80000000, 0xFFFFFFF0, 0xFFFFFFFC, 0xFFFFFFFF)


@st.composite
def mutations(draw, seed: c.Written):
    """A list of edits (short to print, so a failure names its input in one line): length
    fields set to hostile values first (at the seed's offsets), then flips, truncations,
    insertions and deletions anywhere (positions wrap around the current length)."""
    ops = []
    if seed.length_fields and not seed.name.endswith(".gz"):
        for _ in range(draw(st.integers(0, 2))):
            off, _, endian = draw(st.sampled_from(seed.length_fields))
            old = struct.unpack_from(endian + "I", seed.data, off)[0]
            new = draw(st.one_of(st.sampled_from(HOSTILE), st.integers(0, 2**32 - 1),
                                 st.integers(-8, 8).map(lambda d, o=old: (o + d) % 2**32)))
            ops.append(("length", off, endian, new))
    for _ in range(draw(st.integers(0 if ops else 1, 4))):
        kind = draw(st.sampled_from(("flip", "flip", "truncate", "insert", "delete")))
        pos = draw(st.integers(0, len(seed.data) + 16))
        if kind == "flip":
            ops.append(("flip", pos, draw(st.integers(1, 255))))
        elif kind == "truncate":
            ops.append(("truncate", pos))
        elif kind == "insert":
            ops.append(("insert", pos, draw(st.binary(min_size=1, max_size=16))))
        else:
            ops.append(("delete", pos, draw(st.integers(1, 16))))
    return ops


def mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for kind, pos, *arg in ops:
        if kind == "length":
            struct.pack_into(arg[0] + "I", b, pos, arg[1])
            continue
        pos = pos % (len(b) + 1)
        if kind == "flip" and pos < len(b):
            b[pos] ^= arg[0]
        elif kind == "truncate":
            del b[pos:]
        elif kind == "insert":
            b[pos:pos] = arg[0]
        elif kind == "delete":
            del b[pos:pos + arg[0]]
    return bytes(b)


def _check_file(worker, kernels, path, what) -> None:
    """Read ``path`` with each kernel: only Captures and PcapstatsErrors, kernels agreeing."""
    answers = {}
    for k in kernels:
        t0 = time.monotonic()
        a = worker.read(path, k)
        assert a["outcome"] != "bad", (
            f"{what} [{k}]: {a['type']} after {time.monotonic() - t0:.1f} s\n{a['traceback']}")
        assert not a.get("foreign_warnings"), f"{what} [{k}]: {a['foreign_warnings']}"
        answers[k] = a
    if len(answers) == 2:
        a, b = answers["c"], answers["numpy"]
        keys = (("outcome", "packets", "digest", "warnings") if a["outcome"] == "capture"
                else ("outcome", "type", "offset"))
        assert [a.get(x) for x in keys] == [b.get(x) for x in keys], (
            f"{what}: the kernels disagree\n c:     {a}\n numpy: {b}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_captures(seed, worker, kernels, scratch):
    path = scratch / f"mutated-{seed}"

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(ops=mutations(SEEDS[seed]))
    def check(ops):
        path.write_bytes(mutate(SEEDS[seed].data, ops))
        _check_file(worker, kernels, path, f"{seed} mutated by {ops}")

    check()


@pytest.mark.slow
@pytest.mark.parametrize("seed", ["pcap-le", "pcapng", "pcap-radiotap"])
def test_truncations_near_boundaries(seed, worker, kernels, scratch):
    """Every cut within 3 bytes of a record or block boundary, and every cut in the first 64
    bytes (file header, first record): a cut file is read or refused, never crashes."""
    w = SEEDS[seed]
    cuts = set(range(64))
    for off in w.record_offsets + [f[0] for f in w.length_fields]:
        cuts.update(range(max(off - 3, 0), min(off + 4, len(w.data))))
    path = scratch / f"cut-{seed}"
    for n in sorted(cuts):
        path.write_bytes(w.data[:n])
        _check_file(worker, kernels, path, f"{seed} cut at {n} bytes")


@pytest.mark.parametrize("seed", SEEDS)
def test_seeds_are_valid(seed, worker, kernels, scratch):
    """Guard: unmutated seeds read cleanly, to the same table with each kernel, so the fuzz
    starts from real captures and a disagreement it reports is caused by the damage."""
    w = SEEDS[seed]
    path = scratch / f"seed-{seed}"
    path.write_bytes(w.data)
    for k in kernels:
        a = worker.read(path, k)
        assert a["outcome"] == "capture" and a["packets"] == len(w.rows), (seed, k, a)
        assert a["warnings"] == [], (seed, k, a)     # the seeds' odd clocks are on purpose
    _check_file(worker, kernels, path, f"{seed} (not mutated)")


def _radiotap_header(words, data=b"", length=None) -> bytes:
    body = struct.pack(f"<{len(words)}I", *words) + data
    return struct.pack("<BBH", 0, 0, 4 + len(body) if length is None else length) + body


_EXT, _NS, _VNS = c.RT_EXT, c.RT_NS_RADIOTAP, c.RT_NS_VENDOR
HOSTILE_RADIOTAP = {
    "length past the packet": _radiotap_header([0x22], b"\x04\xc0", length=0xFFFF),
    "length under 8": _radiotap_header([0x22], b"\x04\xc0", length=3),
    "bitmap that never ends": _radiotap_header([_EXT] * 100),
    "bitmap that never ends, 64 KB": _radiotap_header([_EXT] * 16382),
    "bitmap past the length": _radiotap_header([_EXT] * 8, length=16),
    "misaligned field at the end": _radiotap_header([0x1 | 0x2 | 0x20], b"\x10", length=13),
    "field past the end": _radiotap_header([0x200000], bytes(10)),
    "vendor data past the end": _radiotap_header([0x20 | _VNS | _EXT, 0x7],
                                                  b"\xc9\x00\x00\x11\x22\x00\xff\xff"),
    "vendor namespaces all the way": _radiotap_header([_VNS | _EXT] * 200 + [0], bytes(1200)),
    "both namespaces": _radiotap_header([_NS | _VNS | _EXT, 0x20], b"\xc0"),
    "every bit": _radiotap_header([0xFFFFFFFF] * 20 + [0x7FFFFFFF], bytes(400)),
    "FCS flag, nothing after": _radiotap_header([0x2], b"\x10"),
    "0-length PSDU": _radiotap_header([1 << 26], b"\x00"),
    "only the first bytes": b"\x00\x00",
}


@pytest.mark.parametrize("name", HOSTILE_RADIOTAP)
def test_damaged_radiotap_headers(name, worker, kernels, scratch):
    """Radiotap headers a capture should never have, before a frame with IP, alone, and cut
    at every length: each is read (the packet counted, its header refused or its fields up to
    the damage kept), never a crash, a hang or a read past the packet."""
    header = HOSTILE_RADIOTAP[name]
    frame = c.wlan(c.basic()[0], qos=0).data
    packets = [header + frame, header] + [(header + frame)[:k] for k in range(0, 80, 7)]
    data = struct.pack("<IHHiIII", c.PCAP_MAGIC_US, 2, 4, 0, 0, 1 << 18, c.LT_RADIOTAP)
    for i, packet in enumerate(packets):
        data += struct.pack("<IIII", 1_700_000_000 + i, 0, len(packet), len(packet)) + packet
    path = scratch / "hostile-radiotap.pcap"
    path.write_bytes(data)
    _check_file(worker, kernels, path, f"radiotap header: {name}")
    assert worker.read(path, kernels[0])["packets"] == len(packets)


def test_worker_reports_death_and_hangs(scratch):
    """Guard: a reader that dies (as a segfaulting kernel would) or never answers is reported
    as a failure, not taken for an answer."""
    dying = Worker([sys.executable, "-c", "import os, sys; sys.stdin.readline(); os.abort()"])
    a = dying.read(scratch / "x", "c")
    assert a["outcome"] == "bad" and "worker died" in a["type"], a
    hanging = Worker([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    a = hanging.read(scratch / "x", "c")
    assert a["outcome"] == "bad" and a["type"] == "hang", a
    assert hanging.proc is None and dying.proc is None
