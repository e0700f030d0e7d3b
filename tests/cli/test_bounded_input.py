"""Every input bounded, not only the capture (issue 32): what a careless script hands every
command -- a FIFO, a device, a socket, a directory, a missing or too long name, a side file of
megabytes, an output nowhere, an absurd number -- is one line and exit 2 within seconds,
before any work; and names of any bytes a file system allows go through every output.

The files are real: FIFOs made with mkfifo, /dev/zero and /dev/full, a bound unix socket,
names with bytes that are not UTF-8, a read-only and a full file system mounted for the test
(where this machine lets root mount), a process without root for a file it cannot read.
Commands are taken from the app itself, so a new command is tested as it registers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import pcapstats as ps
from pcapstats import paths, units
from pcapstats.cli import main
from pcapstats.cli.app import _click_command
from pcapstats.cli.checks import OPTIONS, check_of
from tests.helpers.paths import CAPTURES

GOOD = CAPTURES / "tcp_2streams.pcap"
SECONDS = 5                         # each case answers within this, or it hangs


def _commands() -> dict[str, object]:
    out = {}

    def walk(group, prefix):
        for name, cmd in group.commands.items():
            path = f"{prefix} {name}".strip()
            if hasattr(cmd, "commands"):
                walk(cmd, path)
            else:
                out[path] = cmd
    walk(_click_command(), "")
    return out


COMMANDS = _commands()
# Every command that reads captures (its CAPTURE argument), with what else it must be given.
CAPTURE_COMMANDS = sorted(n for n, c in COMMANDS.items() if any(p.name == "files"
                                                                 for p in c.params))
NEEDS = {"report": ["-o", "{tmp}/r.html"], "export": ["-o", "{tmp}/exp"]}


@contextlib.contextmanager
def bounded(seconds: int = SECONDS):
    """Fail, not hang, when the body takes longer than ``seconds``."""
    def expired(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s: a hang")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _run(capsys, argv, seconds: int = SECONDS) -> tuple[int, list[str], str]:
    with bounded(seconds):
        code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.err.strip().splitlines(), out.out


def _one_error(code, err, *words):
    assert code == 2, (code, err)
    assert len(err) == 1 and err[0].startswith("pcapstats: error: "), err
    assert "internal error" not in err[0] and "Traceback" not in err[0], err
    for w in words:
        assert w in err[0], (w, err[0])


def _read_bytes() -> int:
    """Bytes this process has read through read(2) so far (the kernel's count)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


# -- the classes of path --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def special(tmp_path_factory):
    """name -> (a path of that class, a word its error line must say)."""
    where = tmp_path_factory.mktemp("special")
    fifo = where / "f.pcap"
    os.mkfifo(fifo)
    sock_path = where / "s.pcap"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    loop = where / "loop.pcap"
    os.symlink(loop, loop)
    (where / "file").write_text("x")
    classes = {
        "fifo": (fifo, "FIFO"),
        "character device": ("/dev/zero", "character device"),
        "random device": ("/dev/urandom", "character device"),
        "directory": (where, "directory"),
        "socket": (sock_path, "socket"),
        "missing": (where / "missing.pcap", "no such"),
        "name too long": (where / ("n" * 300 + ".pcap"), "too long"),
        "path through a file": (where / "file" / "x.pcap", "not a directory"),
        "symlink loop": (loop, "symbolic links"),
    }
    yield classes
    sock.close()


CLASSES = ["fifo", "character device", "random device", "directory", "socket", "missing",
           "name too long", "path through a file", "symlink loop"]


@pytest.mark.parametrize("klass", CLASSES)
@pytest.mark.parametrize("command", CAPTURE_COMMANDS)
def test_a_capture_that_is_no_file_is_one_line(command, klass, special, capsys, tmp_path):
    path, word = special[klass]
    extra = [a.format(tmp=tmp_path) for a in NEEDS.get(command, [])]
    code, err, out = _run(capsys, [*command.split(), path, *extra])
    said = [e for e in err if e.startswith("pcapstats: error: ")]
    assert code == 2 and len(said) == 1, (code, err)
    assert all(e.startswith("pcapstats: ") for e in err), err
    assert word in said[0] and "internal error" not in said[0], said[0]


@pytest.mark.parametrize("command", [c for c in CAPTURE_COMMANDS if c not in NEEDS])
def test_a_fifo_beside_a_good_capture_fails_alone(command, special, capsys):
    """compare good.pcap f.pcap (any command): the FIFO's one line, the good one answered."""
    fifo, _ = special["fifo"]
    code, err, out = _run(capsys, [command, GOOD, fifo], seconds=30)
    assert code == 2, (code, err)
    assert [e for e in err if e.startswith("pcapstats: error: ")] == [
        f"pcapstats: error: capture is a FIFO (named pipe), not a regular file ({fifo}). "
        "Save what it carries to a file first: pcapstats reads files, not streams"]


def test_udp_pair_of_a_fifo_is_one_line(special, capsys):
    fifo, _ = special["fifo"]
    _one_error(*_run(capsys, ["udp", "--pair", GOOD, fifo])[:2], "FIFO", str(fifo))


def test_the_library_refuses_the_same(special):
    for klass in CLASSES:
        path, word = special[klass]
        with bounded(), pytest.raises(ps.CaptureOpenError, match=word):
            ps.read(path)


@pytest.mark.parametrize("command", CAPTURE_COMMANDS)
def test_a_file_this_user_cannot_read(command, capsys, tmp_path):
    """As a user who may not read it (root reads anything: the test runs the command with
    the effective uid of nobody, then takes root back; once as root first, so the modules it
    imports, which nobody cannot read under /root, are there): the capture's one line."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    import tempfile
    where = Path(tempfile.mkdtemp(prefix="pcapstats-unreadable-"))
    try:
        where.chmod(0o755)
        private = where / "private.pcap"
        shutil.copy(GOOD, private)
        private.chmod(0o600)
        (where / "out").mkdir(mode=0o777)
        (where / "out").chmod(0o777)
        warm = [a.format(tmp=where) for a in NEEDS.get(command, [])]
        _run(capsys, [*command.split(), GOOD, *warm], seconds=120)    # its modules imported
        extra = [a.format(tmp=where / "out") for a in NEEDS.get(command, [])]
        os.setegid(65534)
        os.seteuid(65534)
        try:
            code, err, _ = _run(capsys, [*command.split(), private, *extra])
        finally:
            os.seteuid(0)
            os.setegid(0)
        said = [e for e in err if e.startswith("pcapstats: error: ")]
        assert code == 2 and len(said) == 1, (code, err)
        assert said[0].startswith("pcapstats: error: cannot read the capture: permission "
                                  f"denied ({private})"), said[0]
    finally:
        shutil.rmtree(where, ignore_errors=True)


# -- side files ----------------------------------------------------------------------------------

SIDE = {   # command line with the side file as {side}; a capture when the command needs one
    "verify --sidecar": ["verify", GOOD, "--sidecar", "{side}"],
    "verify --client-output": ["verify", GOOD, "--client-output", "{side}"],
    "compare --study": ["compare", GOOD, "--study", "{side}"],
    "report --study": ["report", GOOD, "--study", "{side}", "-o", "{tmp}/r.html"],
    "lab matrix": ["lab", "matrix", "{side}", "-o", "{tmp}/runs"],
}


def _side_argv(which, side, tmp):
    return [str(a).format(side=side, tmp=tmp) for a in SIDE[which]]


@pytest.mark.parametrize("klass", ["fifo", "character device", "random device", "directory",
                                   "socket", "missing", "name too long"])
@pytest.mark.parametrize("which", SIDE)
def test_a_side_file_that_is_no_file_is_one_line(which, klass, special, capsys, tmp_path):
    path, word = special[klass]
    code, err, _ = _run(capsys, _side_argv(which, path, tmp_path))
    _one_error(code, err, word)


@pytest.mark.parametrize("which", SIDE)
def test_a_side_file_is_read_only_to_its_bound(which, capsys, tmp_path):
    """A 64 MB side file: one line naming the bound, and at most the bound read of it."""
    big = tmp_path / ("big.csv" if "study" in which else "big.toml" if "matrix" in which
                      else "big.json")
    with open(big, "wb") as f:
        f.truncate(64 << 20)
    before = _read_bytes()
    code, err, _ = _run(capsys, _side_argv(which, big, tmp_path))
    read = _read_bytes() - before
    _one_error(code, err, f"larger than {paths.SIDE_FILE_BYTES >> 20} MiB", str(big))
    assert read < paths.SIDE_FILE_BYTES + (4 << 20), read


@pytest.mark.parametrize("text, words", [
    ('{"schema": "pcapstats-lab/1",\n "status": "complete",\n "scenario": [1],\n'
     ' "captures": [], "flows": []}', ["'scenario'", "line 3"]),
    ('{"schema": "pcapstats-lab/1",\n "status": "complete",\n  "scenario": {}, '
     '"captures": "x",\n "flows": []}', ["'captures'", "line 3"]),
    ('{"schema": "pcapstats-lab/1",\n\n "status": 5, "scenario": {}, "captures": [],'
     ' "flows": []}', ["'status'", "line 3"]),
    ('{"schema": "pcapstats-lab/1",\n "status": "complete"\n "scenario": {}}',
     ["line 3", "not JSON"]),
    ("[" * 200000 + "]" * 200000, ["nested too deep"]),
])
def test_a_broken_sidecar_names_its_line_and_field(text, words, capsys, tmp_path):
    side = tmp_path / "x.json"
    side.write_text(text)
    code, err, _ = _run(capsys, ["verify", GOOD, "--sidecar", side])
    _one_error(code, err, str(side), *words)


@pytest.mark.parametrize("name, text, words", [
    ("s.csv", "file,distance\nx.pcap,close\ny.pcap,far,extra\n", ["line 3"]),
    ("s.toml", '[[capture]]\nfile = "x.pcap"\ndistance = \n', ["line 3"]),
    ("s.csv", b"file,place\nx.pcap,M\xfcnchen\n", ["not UTF-8", "line 2"]),
])
def test_a_broken_study_file_names_its_line(name, text, words, capsys, tmp_path):
    study = tmp_path / name
    study.write_bytes(text if isinstance(text, bytes) else text.encode())
    for command in (["compare"], ["report", "-o", tmp_path / "r.html"]):
        code, err, _ = _run(capsys, [*command, GOOD, "--study", study])
        _one_error(code, err, str(study), *words)


@pytest.mark.parametrize("text, words", [
    ('[base]\ntool = "simpleperf"\nduration_s = "abc"\n', ["duration_s", "line 3"]),
    ('[base]\npairs = "many"\n', ["pairs", "line 2"]),
    ("[base]\nduration_s = 1e30\n", ["longer than a day", "line 2"]),
    ('[base]\ntool = "ping"\nping_sizes = [56, 99999]\n', ["ping size 99999", "65,507"]),
    ('trials = "x"\n[base]\n', ["'trials'", "line 1"]),
    ("base = 5\n", ["'base'", "line 1"]),
    ('name = "{tool:>999999999}"\n[base]\n', ["is no field"]),
    ("[axes]\n" + "\n".join(f"a{k} = [{', '.join(map(str, range(10)))}]" for k in range(5)),
     ["100,000 cells"]),
])
def test_a_broken_matrix_spec_is_refused_before_any_run(text, words, capsys, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    code, err, _ = _run(capsys, ["lab", "matrix", spec, "-o", tmp_path / "runs"])
    _one_error(code, err, str(spec), *words)
    assert not (tmp_path / "runs").exists()


# -- outputs -------------------------------------------------------------------------------------

# command -> (its arguments before -o, what -o names: a file suffix, or "dir")
OUTPUTS = {name: ([GOOD], ".csv") for name in CAPTURE_COMMANDS}
OUTPUTS.update({"report": ([GOOD], ".html"), "export": ([GOOD], "dir"),
                "lab run": ([], ".pcap"), "capture": (["-i", "lo"], ".pcap"),
                "lab matrix": ([CAPTURES / "captures.toml"], "dir")})


def _out_classes(tmp: Path, special) -> dict:
    fifo, _ = special["fifo"]
    (tmp / "file").write_text("x")
    return {
        "missing directory": (tmp / "no" / "such" / "out{s}", "no such directory"),
        "full device": ("/dev/full", "character device"),
        "directory": (tmp, "directory"),
        "fifo": (fifo, "FIFO"),
        "name too long": (tmp / ("o" * 300 + "{s}"), "too long"),
        "through a file": (tmp / "file" / "out{s}", "not a directory"),
    }


OUT_CLASSES = ["missing directory", "full device", "directory", "fifo", "name too long",
               "through a file"]


@pytest.mark.parametrize("klass", OUT_CLASSES)
@pytest.mark.parametrize("command", sorted(OUTPUTS))
def test_an_output_nowhere_is_one_line_before_any_work(command, klass, special, capsys,
                                                       tmp_path):
    before, suffix = OUTPUTS[command]
    path, word = _out_classes(tmp_path, special)[klass]
    if suffix == "dir" and klass in ("directory", "missing directory"):
        pytest.skip("a directory is what this -o names, made with its parents if need be")
    if suffix == "dir" and klass == "fifo":
        word = "not a directory"
    path = str(path).format(s="" if suffix == "dir" else suffix)
    code, err, out = _run(capsys, [*command.split(), *before, "-o", path])
    _one_error(code, err, word)
    assert out == ""


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs mounted for the test (None where this machine does not let us)."""
    where = tmp_path / "fs"
    where.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                        capture_output=True).returncode == 0
    yield where if ok else None
    if ok:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.parametrize("command", ["throughput", "report", "export", "lab run", "lab matrix"])
def test_a_full_or_read_only_file_system_is_one_line(command, small_fs, capsys):
    if small_fs is None:
        pytest.skip("cannot mount a tmpfs here")
    before, suffix = OUTPUTS[command]
    target = str(small_fs / ("out" + ("" if suffix == "dir" else suffix)))
    with open(small_fs / "filler", "wb") as f:               # fill it: ENOSPC from here on
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    code, err, _ = _run(capsys, [*command.split(), *before, "-o", target])
    _one_error(code, err, "no space left")
    (small_fs / "filler").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    code, err, _ = _run(capsys, [*command.split(), *before, "-o", target])
    _one_error(code, err, "read-only file system")


# -- options -------------------------------------------------------------------------------------

def _options_of(kind_check) -> list[tuple[str, str]]:
    """(command, option) for every option of every command whose check is ``kind_check``."""
    out = []
    for name, cmd in COMMANDS.items():
        for p in cmd.params:
            if p.opts and p.opts[0].startswith("-"):
                long = max(p.opts, key=len)
                if check_of(name, long) is kind_check:
                    out.append((name, long))
    return sorted(out)


def _argv(command: str, option: str, value: str, tmp: Path) -> list:
    """A command line that would run but for ``option``'s value."""
    before, suffix = OUTPUTS.get(command, ([GOOD], ".csv"))
    if command in ("netem",):
        return ["netem", "lo", option, value]
    out = [] if command not in ("lab run", "capture", "report", "export", "lab matrix") else \
        ["-o", str(tmp / ("out" + ("" if suffix == "dir" else suffix)))]
    return [*command.split(), *before, *out, option, value]


KINDS = {
    "interval": (units.check_interval, ["inf", "nan", "1e300", "0", "-1", "1e-12", "90000"]),
    "duration": (units.check_duration, ["inf", "nan", "1e30", "0", "-1", "90000"]),
}


@pytest.mark.parametrize("kind", KINDS)
def test_one_validator_a_kind_with_the_same_line_everywhere(kind, capsys, tmp_path):
    """Every option of the kind, in every command that takes it, refuses each absurd value
    in one line; the line after the option's name is the same whichever command it is."""
    check, values = KINDS[kind]
    options = _options_of(check)
    assert options, kind
    for value in values:
        said = {}
        for command, option in options:
            code, err, _ = _run(capsys, _argv(command, option, value, tmp_path))
            _one_error(code, err, f"pcapstats: error: {option} ")
            said.setdefault(option, set()).add(err[0])
        for option, lines in said.items():
            assert len(lines) == 1, (option, value, lines)


def test_durations_are_capped_at_a_day_and_say_so(capsys, tmp_path):
    for argv in (["lab", "run", "-t", "86401", "-o", tmp_path / "x.pcap"],
                 ["capture", "-i", "lo", "--duration", "1e30", "-o", tmp_path / "x.pcap"],
                 ["iograph", GOOD, "--gap", "1e30"],
                 ["lab", "run", "--delay", "1e30s", "-o", tmp_path / "x.pcap"]):
        code, err, _ = _run(capsys, argv)
        _one_error(code, err, "longer than a day (86400 s)")
    assert units.check_duration(86400, "x") == 86400


@pytest.mark.parametrize("command, option", [(c, o) for c, o in sorted(
    {(n, max(p.opts, key=len)) for n, cmd in COMMANDS.items() for p in cmd.params
     if p.opts and max(p.opts, key=len) in ("--stream", "--jobs", "--port", "--parallel",
                                            "--pairs", "--hops", "--trials", "--ping-count",
                                            "--snaplen", "--size", "--sndbuf", "--rcvbuf",
                                            "--seed")})])
def test_counts_and_sizes_out_of_range_are_one_line(command, option, capsys, tmp_path):
    for value in ("99999999999999999999999", "-1"):
        code, err, _ = _run(capsys, _argv(command, option, value, tmp_path))
        _one_error(code, err, f"{option} ")


def test_every_number_and_path_option_is_checked():
    """Each option of every command that takes a number or a path has its check in
    cli.checks.OPTIONS (a new command's too), so none reaches the work unchecked."""
    missing = []
    for name, cmd in COMMANDS.items():
        for p in cmd.params:
            kind = p.type_descriptor.annotation
            long = max(p.opts, key=len) if p.opts and p.opts[0].startswith("-") else p.name
            if (kind in (int, float) or p.type_descriptor.is_path) and p.name != "files" \
                    and check_of(name, long) is None:
                missing.append(f"{name} {long} ({kind})")
    assert not missing, missing
    assert set(OPTIONS)


# -- names are data ------------------------------------------------------------------------------

ODD = [b"caf\xe9.pcap", "rtl\u200f\u05e9\u05dc\u05d5\u05dd.pcap".encode(),
       "\u65e5\u672c\u8a9e.pcap".encode(), "\U0001f4e1\U0001f422.pcap".encode(),
       b"n" * 250 + b".pcap", b"new\nline.pcap", b"dollar$5$.pcap"]


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """A capture (and its sidecar) under each odd name, in one directory."""
    where = tmp_path_factory.mktemp("odd")
    out = []
    for name in ODD:
        path = os.path.join(os.fsencode(where), name)
        shutil.copy(CAPTURES / "sp-reno-loss1pct.pcap", path)
        shutil.copy(CAPTURES / "sp-reno-loss1pct.json", path[:-5] + b".json")
        out.append(os.fsdecode(path))
    return out


def _expected(path: str) -> str:
    """The name as every file output writes it: the file system's bytes as UTF-8, each
    byte that is not UTF-8 as \\xNN (computed here from the bytes, not by pcapstats)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _clean(err: list[str]):
    assert all(e.startswith("pcapstats: ") for e in err), err
    assert not [e for e in err if "error" in e.split(":")[1] or "internal" in e], err


@pytest.mark.parametrize("command", [c for c in CAPTURE_COMMANDS if c not in NEEDS])
def test_odd_names_go_through_every_table(command, odd, capsys, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a glyph warning would fail here
        code, err, out = _run(capsys, [command, *odd, "-f", "json"], seconds=120)
    _clean(err)
    assert code in (0, 1), err
    if code == 0:
        rows = json.loads(out)
        rows = rows if isinstance(rows, list) else [rows]
        assert {r["capture"] for r in rows if "capture" in r} <= {_expected(p) for p in odd}
        code, err, out = _run(capsys, [command, *odd, "-o", tmp_path / "t.csv"], seconds=120)
        _clean(err)
        text = (tmp_path / "t.csv").read_bytes().decode("utf-8")      # valid UTF-8
        assert any(_expected(p) in text for p in odd if "\n" not in p)
        code, err, out = _run(capsys, [command, *odd], seconds=120)    # the human table
        _clean(err)
        assert all(line.isprintable() for line in out.splitlines()), out


@pytest.mark.parametrize("command", ["throughput", "iograph", "cwnd", "rtt", "seqgraph",
                                     "limits", "fairness", "compare"])
def test_odd_names_in_figures_draw_without_a_warning(command, odd, capsys, tmp_path):
    out = tmp_path / "f.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, err, _ = _run(capsys, [command, *odd, "-o", out], seconds=120)
    _clean(err)
    written = list(tmp_path.glob("f*.png"))
    assert code in (0, 1) and (code == 1 or written), err
    for png in written:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(os.fsencode(png.name)) <= paths.NAME_MAX


def test_a_missing_glyph_is_said_another_way():
    """A CJK name where no font has CJK: drawn as escapes, silently (the figure's own text)."""
    from matplotlib.font_manager import FontProperties, findfont, get_font
    font = get_font(findfont(FontProperties()))
    if font.get_char_index(ord("\u65e5")):
        pytest.skip("a font with CJK is installed: the name is drawn as it is")
    fig = ps.throughput([os.fspath(p) for p in [GOOD]]).figure()
    fig.axes[0].set_title("\u65e5\u672c.pcap")
    from pcapstats.plots import drawable_text
    drawable_text(fig)
    assert fig.axes[0].get_title() == "\\u65e5\\u672c.pcap"


def test_odd_names_in_the_report_and_parquet(odd, capsys, tmp_path):
    pytest.importorskip("pyarrow")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, err, _ = _run(capsys, ["report", *odd, "-o", tmp_path / "r.html"], seconds=300)
    _clean(err)
    assert code == 0, err
    html = (tmp_path / "r.html").read_bytes().decode("utf-8")          # valid UTF-8
    assert "caf\\xe9.pcap" in html and "\u65e5\u672c\u8a9e.pcap" in html
    code, err, _ = _run(capsys, ["export", *odd, "-o", tmp_path / "exp", "--tables",
                                 "streams"], seconds=120)
    _clean(err)
    assert code == 0, err
    import pyarrow.dataset as ds
    table = ds.dataset(tmp_path / "exp" / "streams", partitioning="hive").to_table()
    names = set(table.column("capture").to_pylist())
    assert len(names) == len(odd)
    assert all(len(n.encode()) <= paths.NAME_MAX for n in names)
    assert "\u65e5\u672c\u8a9e.pcap" in names and "caf\\xe9.pcap" in names


@pytest.mark.parametrize("analysis", ["throughput", "iograph", "fairness"])
@pytest.mark.parametrize("interval", [float("inf"), float("nan"), 1e300, 1e-12, 0, -1])
def test_the_library_takes_an_interval_as_the_command_line_does(analysis, interval):
    with bounded(), pytest.raises(ps.UsageError) as info:
        getattr(ps, analysis)(GOOD, interval=interval)
    with pytest.raises(ps.UsageError) as same:
        units.check_interval(interval, "interval")
    assert str(info.value) == str(same.value)
