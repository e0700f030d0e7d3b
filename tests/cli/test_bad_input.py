"""Bad input: one clear line and a non-zero exit from the CLI, the right exception from the
library, never a traceback.

Every damaged file is a crafted capture (tests/helpers/craft.py) with one known defect at a known file
offset, so the offset the error quotes is checked exactly.  The CLI runs as a subprocess, both
as ``python -m pcapstats`` and as the installed ``pcapstats`` console script.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import craft as c

import pcapstats as ps
from pcapstats import errors
from tests.helpers.paths import CAPTURES

EXIT_ERROR = 2        # the CLI's documented status for bad input

RUNNERS = {"python -m pcapstats": [sys.executable, "-m", "pcapstats"]}
if shutil.which("pcapstats"):
    RUNNERS["pcapstats script"] = [shutil.which("pcapstats")]


@pytest.fixture(params=list(RUNNERS))
def cli(request):
    """Run ``pcapstats ARGS`` one way or the other; returns the CompletedProcess."""
    root = str(Path(ps.__file__).resolve().parents[1])     # run the pcapstats under test

    def run(*args):
        env = {k: v for k, v in os.environ.items() if k != "PCAPSTATS_DEBUG"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        return subprocess.run([*RUNNERS[request.param], *map(str, args)], capture_output=True,
                              text=True, timeout=120, env=env)
    return run


# -- the damaged files ------------------------------------------------------------------------

def _tcp_frames(n=5):
    """``n`` Ethernet TCP packets of one stream, payloads of different sizes."""
    return [c.ether(c.ipv4(c.tcp(40000, 80, seq=1 + 100 * k, ack=1, flags=c.ACK,
                                 payload=b"x" * (10 * k)), c.A4, c.B4)) for k in range(n)]


def _pcap(n=5) -> c.Written:
    frames = _tcp_frames(n)
    return c.pcap([c.Record(f, t) for f, t in zip(frames, c.times(n, 1000))], c.LT_ETHERNET)


def _pcapng(n=5) -> tuple[c.Written, list[int]]:
    """A pcapng and the offsets of its EPBs."""
    g = c.Pcapng()
    g.section("<")
    i = g.interface(c.LT_ETHERNET)
    epbs = [g.epb(i, f, t) for f, t in zip(_tcp_frames(n), c.times(n, 1000))]
    return g.written(), epbs


def _patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


@dataclass
class Bad:
    """A damaged input: its bytes (None: do not create the path), what must be raised, and the
    file offset the message must quote (None: no offset is meaningful)."""
    data: bytes | None
    error: type
    offset: int | None
    suffix: str = ".pcap"


def _bad_cases() -> dict[str, Bad]:
    pc = _pcap()
    ng, epb = _pcapng()
    e = "<"
    cases = {
        "missing file": Bad(None, errors.CaptureOpenError, None),
        "empty file": Bad(b"", errors.CaptureFormatError, None),
        "text file": Bad(b"this is not a capture\n" * 40, errors.CaptureFormatError, None,
                         ".txt"),
        "pcap cut inside its file header": Bad(pc.data[:20], errors.CaptureFormatError, None),
        # the link-type field's reserved bits 16-25 set (tshark: "network type reserved
        # field not zero"): not a link type at all
        "pcap link-type field with reserved bits": Bad(_patch(pc.data, 20, e + "I", 0x01000001),
                                                       errors.CaptureFormatError, None),
        # record 3's captured length 0x7fffffff, with records after it
        "pcap absurd caplen": Bad(_patch(pc.data, pc.record_offsets[2] + 8, e + "I", 0x7FFFFFFF),
                                  errors.CorruptCaptureError, pc.record_offsets[2]),
        # the same as the file's last record: not a cut file, an impossible length
        "pcap absurd caplen in last record": Bad(
            _patch(pc.data, pc.record_offsets[-1] + 8, e + "I", 0x7FFFFFFF),
            errors.CorruptCaptureError, pc.record_offsets[-1]),
        "pcapng trailer disagrees with header": Bad(
            _patch(ng.data, _trailer(ng, epb[1]), e + "I", _block_len(ng, epb[1]) + 4),
            errors.CorruptCaptureError, epb[1], ".pcapng"),
        "pcapng block length not a multiple of 4": Bad(
            _patch(ng.data, epb[2] + 4, e + "I", _block_len(ng, epb[2]) - 2),
            errors.CorruptCaptureError, epb[2], ".pcapng"),
        "pcapng block length below 12": Bad(
            _patch(ng.data, epb[2] + 4, e + "I", 8), errors.CorruptCaptureError, epb[2],
            ".pcapng"),
        "pcapng absurd block length": Bad(
            _patch(ng.data, epb[1] + 4, e + "I", 0x7FFFFFF0), errors.CorruptCaptureError, epb[1],
            ".pcapng"),
        "pcapng EPB caplen beyond its block": Bad(
            _patch(ng.data, epb[1] + 20, e + "I", 5000), errors.CorruptCaptureError, epb[1],
            ".pcapng"),
        "pcapng EPB on undefined interface": Bad(
            _patch(ng.data, epb[3] + 8, e + "I", 1), errors.CorruptCaptureError, epb[3],
            ".pcapng"),
        "pcapng section with bad byte-order magic": Bad(
            _patch(ng.data, 8, e + "I", 0x12345678), errors.CaptureFormatError, 0, ".pcapng"),
        "corrupt gzip": Bad(_corrupt_gzip(pc.data), errors.CaptureFormatError, None, ".pcap.gz"),
        "gzip of a text file": Bad(gzip.compress(b"hello, not a capture\n" * 20),
                                   errors.CaptureFormatError, None, ".gz"),
    }
    return cases


def _block_len(w: c.Written, offset: int) -> int:
    return struct.unpack_from("<I", w.data, offset + 4)[0]


def _trailer(w: c.Written, offset: int) -> int:
    return offset + _block_len(w, offset) - 4


def _corrupt_gzip(data: bytes) -> bytes:
    """A gzip member whose deflate data is garbage (an invalid block type)."""
    gz = bytearray(gzip.compress(data, mtime=0))
    gz[10:40] = b"\xff" * 30
    return bytes(gz)


BAD = _bad_cases()


def _path(tmp_path, name: str, bad: Bad) -> Path:
    path = tmp_path / (name.replace(" ", "_") + bad.suffix)
    if bad.data is not None:
        path.write_bytes(bad.data)
    return path


def _assert_one_error_line(proc, path, offset):
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pcapstats: error: "), lines[0]
    assert str(path) in lines[0], lines[0]
    if offset is not None:
        assert f"file offset {offset}" in lines[0], lines[0]
    assert proc.stdout == "", proc.stdout


@pytest.mark.parametrize("name", BAD)
def test_cli_one_error_line(name, cli, tmp_path):
    path = _path(tmp_path, name, BAD[name])
    _assert_one_error_line(cli("throughput", path), path, BAD[name].offset)


def test_cli_directory(cli, tmp_path):
    _assert_one_error_line(cli("throughput", tmp_path), tmp_path, None)


@pytest.mark.parametrize("name", BAD)
def test_library_raises(name, tmp_path):
    """``ps.read`` raises the documented subclass, with .path and (where known) .offset."""
    bad = BAD[name]
    path = _path(tmp_path, name, bad)
    with pytest.raises(ps.PcapstatsError) as info:
        ps.read(path)
    assert isinstance(info.value, bad.error), (type(info.value), str(info.value))
    assert str(info.value.path) == str(path)
    if bad.offset is not None:
        assert info.value.offset == bad.offset, str(info.value)


def test_library_directory(tmp_path):
    with pytest.raises(errors.CaptureOpenError):
        ps.read(tmp_path)


@pytest.mark.parametrize("kernel", ["c", "numpy"])
@pytest.mark.parametrize("name", [n for n, b in BAD.items() if b.offset])
def test_both_kernels_quote_the_same_offset(name, kernel, tmp_path):
    """The C and numpy record walks stop at the same record, for the same reason."""
    why = c.kernel_unavailable(kernel)
    if why:
        pytest.skip(why)
    bad = BAD[name]
    with pytest.raises(bad.error) as info:
        ps.read(_path(tmp_path, name, bad), kernel=kernel)
    assert info.value.offset == bad.offset, str(info.value)


# -- cut files: read up to the last whole record, warn once -----------------------------------

def _cuts() -> dict[str, tuple[bytes, int, int, str]]:
    """name -> (bytes, whole packets before the cut, offset of the cut record, suffix)."""
    pc = _pcap()
    ng, epb = _pcapng()
    r3 = pc.record_offsets[3]
    return {
        "pcap cut inside a record's data": (pc.data[:r3 + 16 + 5], 3, r3, ".pcap"),
        "pcap cut inside a record header": (pc.data[:r3 + 7], 3, r3, ".pcap"),
        "pcapng cut inside a block": (ng.data[:epb[4] + 30], 4, epb[4], ".pcapng"),
        "pcapng cut inside a block header": (ng.data[:epb[2] + 6], 2, epb[2], ".pcapng"),
    }


CUTS = _cuts()


def _json_packets(stdout: str) -> int:
    return sum(row["packets"] for row in json.loads(stdout))


@pytest.mark.parametrize("name", CUTS)
def test_cli_cut_file_warns_once_and_reads_what_is_whole(name, cli, tmp_path):
    data, whole, offset, suffix = CUTS[name]
    path = tmp_path / ("cut" + suffix)
    path.write_bytes(data)
    proc = cli("throughput", path, "--format", "json")
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapstats: warning: "), proc.stderr
    assert f"file offset {offset}" in lines[0] and str(path) in lines[0], lines[0]
    assert _json_packets(proc.stdout) == whole


@pytest.mark.parametrize("kernel", ["c", "numpy"])
@pytest.mark.parametrize("name", CUTS)
def test_library_cut_file(name, kernel, tmp_path):
    why = c.kernel_unavailable(kernel)
    if why:
        pytest.skip(why)
    data, whole, offset, suffix = CUTS[name]
    path = tmp_path / ("cut" + suffix)
    path.write_bytes(data)
    with pytest.warns(ps.TruncatedCaptureWarning) as caught:
        cap = ps.read(path, kernel=kernel)
    assert len(cap) == whole
    assert [w.message.offset for w in caught] == [offset]
    assert len(cap.warnings) == 1 and f"file offset {offset}" in cap.warnings[0]


def test_cli_truncated_gzip_reads_what_inflates(cli, tmp_path):
    """A .gz cut short is a cut capture (DESIGN: read up to the last whole record, warn): the
    packets whose records inflate whole are read, every stderr line is a warning."""
    pc = _pcap(40)
    gz = gzip.compress(pc.data, mtime=0)
    cut = gz[: len(gz) * 2 // 3]
    d = zlib.decompressobj(wbits=31)
    inflated = len(d.decompress(cut))            # what any inflater can recover: independent
    whole = sum(1 for off, nxt in zip(pc.record_offsets, pc.record_offsets[1:] + [len(pc.data)])
                if nxt <= inflated)
    assert 0 < whole < 40
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(cut)
    proc = cli("throughput", path, "--format", "json")
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and all(x.startswith("pcapstats: warning: ") and str(path) in x for x in lines)
    assert _json_packets(proc.stdout) == whole


# -- link types the reader does not know -----------------------------------------------------

USER0 = 147


def test_cli_unknown_link_type_beside_known(cli, tmp_path):
    """An interface of unknown link type: its packets are counted and skipped with ONE warning
    line; the streams of the other interface are reported, exit 0."""
    g = c.Pcapng()
    g.section("<")
    eth, usr = g.interface(c.LT_ETHERNET), g.interface(USER0)
    t = iter(c.times(20, 1000))
    for f in _tcp_frames(4):
        g.epb(eth, f, next(t))
        g.epb(usr, c.opaque(USER0, b"\x01" * 40), next(t))
    path = tmp_path / "user0.pcapng"
    path.write_bytes(g.written().data)
    proc = cli("throughput", path, "--format", "json")
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapstats: warning: "), proc.stderr
    assert "4" in lines[0] and str(USER0) in lines[0] and str(path) in lines[0], lines[0]
    assert _json_packets(proc.stdout) == 4


def test_cli_only_unknown_link_type_says_so(cli, tmp_path):
    """Nothing decodable at all: the command must say so (never a silent empty output): the
    skipped packets get a warning line, the absence of streams the one "nothing to report"
    line; exit 1 (the CLI's documented "ran, found nothing to report")."""
    frames = [c.opaque(USER0, b"\x02" * 60) for _ in range(3)]
    w = c.pcap([c.Record(f, t) for f, t in zip(frames, c.times(3, 1000))], USER0)
    path = tmp_path / "user0.pcap"
    path.write_bytes(w.data)
    proc = cli("throughput", path)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    warned = [x for x in lines if x.startswith("pcapstats: warning: ")]
    nothing = [x for x in lines if x.startswith("pcapstats: nothing to report: ")]
    assert len(warned) + len(nothing) == len(lines) and len(nothing) == 1, proc.stderr
    assert any("3" in x and str(USER0) in x for x in warned), proc.stderr
    assert "no " in nothing[0] and "stream" in nothing[0] and "3 packets" in nothing[0], lines


def test_cli_several_files_one_bad(cli, tmp_path):
    """With several files, a bad one costs one error line and the exit status, not the good
    ones' rows."""
    good, bad = tmp_path / "good.pcap", tmp_path / "bad.pcap"
    good.write_bytes(_pcap().data)
    bad.write_bytes(b"not a capture at all\n")
    proc = cli("throughput", good, bad, "--format", "json")
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapstats: error: ") and str(bad) in lines[0]
    rows = json.loads(proc.stdout)
    assert {r["capture"] for r in rows} == {str(good)} and sum(r["packets"] for r in rows) == 5


# -- damage far into a file: offsets and packet numbers are absolute, not per read window ---

def _big() -> tuple[c.Written, c.Written, list[int]]:
    """A ~900 kB pcap and pcapng of the same 1500 packets, and the pcapng's EPB offsets."""
    frames = [c.ether(p) for p in c.many_flows(1500)]
    ts = c.times(len(frames), 1000, step=1_000_003)
    pc = c.pcap([c.Record(f, t) for f, t in zip(frames, ts)], c.LT_ETHERNET)
    g = c.Pcapng()
    g.section(">")
    i = g.interface(c.LT_ETHERNET)
    epbs = [g.epb(i, f, t) for f, t in zip(frames, ts)]
    return pc, g.written(), epbs


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["c", "numpy"])
def test_late_damage_quotes_absolute_offsets(kernel, tmp_path):
    """Read in 64 KiB windows, damage in the 10th window or so is reported at its offset in the
    file and with its packet number in the file."""
    from pcapstats.ingest import read_fast
    why = c.kernel_unavailable(kernel)
    if why:
        pytest.skip(why)
    pc, ng, epbs = _big()
    k = 1234
    cases = {
        "pcap absurd caplen": (_patch(pc.data, pc.record_offsets[k] + 8, "<I", 0x7FFFFFFF),
                               pc.record_offsets[k]),
        "pcapng trailer mismatch": (_patch(ng.data, epbs[k] + _block_len_be(ng, epbs[k]) - 4,
                                           ">I", 4), epbs[k]),
        "pcapng undefined interface": (_patch(ng.data, epbs[k] + 8, ">I", 3), epbs[k]),
    }
    for name, (data, offset) in cases.items():
        path = tmp_path / name.replace(" ", "_")
        path.write_bytes(data)
        try:
            cap = read_fast(path, kernel=kernel, window_bytes=1 << 16)
        except errors.CorruptCaptureError as e:
            assert (e.offset, e.packet) == (offset, k + 1), (name, str(e))
        else:
            pytest.fail(f"{name} at file offset {offset}: no error, read {len(cap)} packets")
    for name, (data, offset) in {"pcap": (pc.data, pc.record_offsets[k]),
                                 "pcapng": (ng.data, epbs[k])}.items():
        path = tmp_path / f"cut.{name}"
        path.write_bytes(data[:offset + 21])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cap = read_fast(path, kernel=kernel, window_bytes=1 << 16)
        assert len(cap) == k, f"{name} cut at {offset + 21}: read {len(cap)} packets"
        assert [(w.message.offset, w.message.packet) for w in caught] == [(offset, k + 1)], name


def _block_len_be(w: c.Written, offset: int) -> int:
    return struct.unpack_from(">I", w.data, offset + 4)[0]


def test_ctrl_c_in_a_command_is_one_line_and_130(monkeypatch, capsys):
    """typer swallows KeyboardInterrupt into a bare exit 130; the user still gets the line."""
    from pcapstats.analyses import throughput
    from pcapstats.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(throughput, "_streamed_summary", interrupted)
    capture = CAPTURES / "tcp_2streams.pcap"
    assert main(["throughput", str(capture)]) == 130
    assert capsys.readouterr().err.splitlines() == ["pcapstats: error: interrupted"]
