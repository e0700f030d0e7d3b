"""The CLI layer of the fuzz campaign: every command with options and paths drawn from the
classes a careless script (or a new user) hands pcapstats: special files, odd names, absurd
numbers, unwritable outputs.

    python bench/fuzz.py --cli --count 20000 --seed 1 [--jobs 2]

A case is one command line: a command (every one that reads or writes files, the lab's
included), 0 to 3 of its own options (each value drawn from that option's kind: an interval,
a duration, a count, a size, a rate, a time, a loss, a word, a path to read, an output to
write; valid values and bad ones), and its captures (a small good capture most of the time,
else a FIFO, /dev/zero, a directory, a socket, a missing file, a name of 300 bytes, a capture
named with bytes that are not UTF-8, right-to-left marks, CJK, emoji or 255 bytes ...).  Each
case runs `main(argv)` in a child forked from a warmed parent, in a directory of its own,
with 10 s of CPU time (a busy loop) and 120 s of wall time (blocked, on a FIFO say: long,
since on a shared machine a case's 3 s of work can wait 30 s for a core).  Outcomes: ``ok`` (exit 0), ``clean`` (1 or 2, every stderr line a
``pcapstats:`` line), and failures: ``internal`` (exit 3, or an exception out of main),
``hang`` (the alarm), ``lines`` (a traceback or a stray line on stderr), ``accepted`` (a lab,
capture or netem command that would have started its work with a value from a bad class).

The lab's, capture's and netem's own work is not started: in the child their entry points
(`lab.run.run`, `lab.matrix.run_matrix`, `lab.live.capture`, netem's install, show and
clear) validate what they were given, as the real ones do first, and then stop; `lab
cleanup`, `lab check`, `simpleperf` and `pingpong` (which act on this host's namespaces or
run servers) are left out.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = {"lab cleanup", "lab check", "lab fields", "simpleperf", "pingpong", "columns"}
CASE_CPU_S = 10           # a case's own CPU time: past it, a busy loop (a hang)
CASE_TIMEOUT_S = 120      # its wall time: past it, blocked (a FIFO read); long, since the
                          # machine's other jobs can hold a case's 3 s of work for 30 s
# A case's command is drawn with these weights (report and export write figures and Parquet:
# slower; every command still gets thousands of cases).
WEIGHT = {"report": 0.3, "export": 0.5}

GOOD_CAPTURES = ("tcp_2streams.pcap", "udp_ping.pcapng", "ping-sweep.pcap",
                 "sp-reno-loss1pct.pcap")


class WouldRun(BaseException):
    """A lab, capture or netem command got past every check: it would start its work now."""


# -- the files every case may name, made once ----------------------------------------------------

class Files:
    """The paths of every class, in one directory made for the campaign."""

    def __init__(self, where: Path):
        self.where = where
        where.mkdir(parents=True, exist_ok=True)
        self.good = []
        for name in GOOD_CAPTURES:
            src = ROOT / "captures" / name
            short = where / f"good-{name}"
            _prefix(src, short, 150)
            self.good.append(str(short))
        sidecar = ROOT / "captures" / "sp-reno-loss1pct.json"
        odd = [b"caf\xe9-latin1.pcap", "rtl-\u200f\u05e9\u05dc\u05d5\u05dd.pcap".encode(),
               "\u65e5\u672c\u8a9e\u306e\u8a66\u9a13.pcap".encode(),
               "\U0001f4e1\U0001f422.pcap".encode(), b"n" * 250 + b".pcap",
               b"new\nline.pcap", b"dollar$5$.pcap", b"-dash.pcap", b" spaced .pcap"]
        self.odd = []
        for name in odd:
            path = os.path.join(os.fsencode(where), name)
            shutil.copy(self.good[3], path)
            with contextlib.suppress(OSError):
                shutil.copy(sidecar, path[:-5] + b".json")
            self.odd.append(os.fsdecode(path))
        self.fifo = str(where / "fifo.pcap")
        os.mkfifo(self.fifo)
        self.sock = str(where / "socket.pcap")
        s = socket.socket(socket.AF_UNIX)
        s.bind(self.sock)
        self._sock = s
        self.empty = str(where / "empty.pcap")
        Path(self.empty).write_bytes(b"")
        self.text = str(where / "text.pcap")
        Path(self.text).write_text("not a capture\n" * 20)
        self.big = str(where / "big.json")
        with open(self.big, "wb") as f:
            f.truncate(6 << 20)                       # 6 MB of zeros: no side file is that
        self.dir = str(where / "adir")
        os.mkdir(self.dir)
        self.loop = str(where / "loop.pcap")
        os.symlink(self.loop, self.loop)              # ELOOP
        self.through = str(where / "text.pcap" / "x.pcap")  # a path through a file
        self.side = {}
        for name, text in {
                "sidecar.json": sidecar.read_text(),
                "bad.json": '{"schema": "pcapstats-lab/1", "status": 5, "scenario": []',
                "list.json": "[1, 2, 3]",
                "deep.json": "[" * 100000 + "]" * 100000,
                "types.json": json.dumps({"schema": "pcapstats-lab/1", "status": "complete",
                                          "scenario": 5, "captures": "x", "flows": [1]}),
                "study.csv": f"file,distance\n{self.good[0]},close\n{self.good[3]},far\n",
                "ragged.csv": "file,distance\nx.pcap,close,extra,more\n",
                "study.toml": f'[[capture]]\nfile = "{self.good[0]}"\ndistance = "close"\n',
                "bad.toml": "[[capture]\nfile = ",
                "spec.toml": '[base]\ntool = "simpleperf"\nduration_s = 1\n[axes]\n'
                             'loss = ["0%", "1%"]\n',
                "hugespec.toml": "[axes]\n" + "\n".join(
                    f"a{k} = [{', '.join(map(str, range(30)))}]" for k in range(6)),
                "typespec.toml": '[base]\npairs = "many"\nduration_s = [1]\n',
                "fmtspec.toml": 'name = "{tool:>999999999}"\n[base]\n',
                "dayspec.toml": "[base]\nduration_s = 1e30\n",
                "client.txt": "ID Interval Transfer Bandwidth\n10.0.0.1:5001 0.0 - 10.0 "
                              "12 MB 9.6 Mbps\n"}.items():
            path = where / name
            path.write_text(text)
            self.side[name] = str(path)
        latin = where / "latin1.csv"
        latin.write_bytes(b"file,place\nx.pcap,M\xfcnchen\n")
        self.side["latin1.csv"] = str(latin)
        self.readonly = None

    def capture(self, rng: random.Random) -> tuple[str, bool]:
        """A capture argument and whether it is from a bad class."""
        r = rng.random()
        if r < 0.55:
            return rng.choice(self.good), False
        if r < 0.7:
            return rng.choice(self.odd), False
        return rng.choice([self.fifo, self.sock, "/dev/zero", "/dev/urandom", "/dev/null",
                           self.dir, str(self.where / "missing.pcap"), self.empty, self.text,
                           "x" * 300 + ".pcap", self.loop, self.through, "",
                           str(self.where / ("a" * 200)) + "/" + "b" * 200 + ".pcap"]), True

    def read_path(self, rng, kinds: tuple[str, ...]) -> tuple[str, bool]:
        """A side file to read: one of ``kinds`` (the good ones), or a bad class."""
        if rng.random() < 0.4:
            return self.side[rng.choice(kinds)], False
        return rng.choice([self.fifo, "/dev/zero", "/dev/urandom", self.big, self.dir,
                           self.sock, str(self.where / "missing.json"), "x" * 300,
                           self.loop, *(self.side[k] for k in self.side)]), None

    def output(self, rng, suffixes: tuple[str, ...], directory: bool = False,
               here: Path | None = None) -> tuple[str, bool]:
        """An output path: a good one in the case's directory, or a bad class."""
        if rng.random() < 0.45:
            name = rng.choice(["out", "caf\udce9", "\u65e5\u672c", "\U0001f4e1", "o" * 240,
                               "new\nline", "rtl\u200f"])
            return str((here or Path(".")) / (name + ("" if directory else
                                                      rng.choice(suffixes)))), False
        # (a directory output is made with its parents: a missing one is no bad class there)
        return rng.choice(["/dev/full", "/dev/null", self.fifo, self.dir if not directory
                           else self.text, "/nonexistent/dir/out" + rng.choice(suffixes)
                           if not directory else self.through,
                           "o" * 300 + rng.choice(suffixes), self.through,
                           "/proc/version", "/sys/x" + rng.choice(suffixes)]), True


def _prefix(src: Path, dst: Path, packets: int) -> None:
    """The first ``packets`` packets of a capture (a small input: fast cases)."""
    import pcapstats as ps
    cap = ps.read(src)
    data = src.read_bytes()
    n = min(packets, len(cap))
    ends = cap.column("frame_offset")[:n] + cap.column("frame_cap_len")[:n]
    end = int(ends.max()) if n else len(data)
    if data[:4] == b"\x0a\x0d\x0d\x0a":        # pcapng: a block ends 4-aligned + trailer
        end = (end + 3) // 4 * 4 + 4
    dst.write_bytes(data[:end])


# -- values of each kind ----------------------------------------------------------------------------

BAD_NUMBERS = ["inf", "-inf", "nan", "1e300", "-1", "1e-12", "0", "99999999999999999999999",
               "abc", "", "1e999", "0x10", " ", "-0", "1_0"]
# Bad for some options, fine for others (--stream 0, --seed 0, -t 0 with -n; Python reads
# 1_0 as 10): drawn, but no failure when a command takes them.
EITHER = {"0", "-0", "1_0"}
TEXT_VALUES = {
    "rate": (["30mbit", "1.5gbit", "500kbit", "1mbps"],
             ["0mbit", "1e999mbit", "30", "-5mbit", "abc", "30furlongs", "1e30tbit"]),
    "time": (["20ms", "0.5s", "100us"],
             ["1e30s", "90000s", "-5ms", "20", "abc", "1e999ms", "nan ms"]),
    "loss": (["10%", "0.1", "0%"], ["200%", "1", "-5%", "abc", "1e999%", "nan"]),
    "size": (["64kb", "100p", "1500", "0"], ["1e300", "-5kb", "abc", "1e999mb"]),
    "bytes": (["10MB", "1KB", "500B"], ["0B", "99999999999999999MB", "-1MB", "10GB", "abc"]),
    "sizes": (["56,500,1000", "56", "56,,"], ["-1", "abc", "1e99", "99999999999"]),
    "width": (["10%", "rtt median=2ms", "goodput=0.5mbit"],
              ["0%", "abc=", "rtt median=1e30s", "=", "1e999%", "goodput=-1mbit"]),
    "regex": (["(?P<loss>\\d+)pct", "(?P<cc>reno|cubic)"],
              ["(", "(?P<1x>a)", "[", "(?P<a>x)(?P<a>y)", "*"]),
    "words": (["cc,loss", "goodput,avg", "packets,streams", "tool"],
              ["nosuchthing", ",,,", "x" * 5000, "cc,cc"]),
}


def number_values(kind: str, option: str):
    good = {"interval": ["1", "0.1", "0.001", "60"], "duration": ["1", "5", "0.5"],
            "count": ["0", "1", "3"], "port": ["80", "8088", "1"], "offset": ["0", "1.5"],
            "jobs": ["1", "2"], "size": ["1000", "128", "65536"]}[kind]
    return good, BAD_NUMBERS


# -- the case --------------------------------------------------------------------------------------

def commands():
    """Every command of the app (name, click command) but those left out."""
    from pcapstats.cli.app import _click_command
    out = []

    def walk(group, prefix):
        for name, cmd in group.commands.items():
            path = f"{prefix} {name}".strip()
            if hasattr(cmd, "commands"):
                walk(cmd, path)
            elif path not in LEFT_OUT:
                out.append((path, cmd))
    walk(_click_command(), "")
    return out


NUMBER_KINDS = {"--interval": "interval", "--ping-interval": "interval",
                "--tcp-info-interval": "interval", "--gap": "duration", "--time": "duration",
                "--duration": "duration", "--from": "offset", "--to": "offset",
                "--stream": "count", "--port": "port", "--jobs": "jobs", "--parallel": "count",
                "--pairs": "count", "--hops": "count", "--trials": "count",
                "--ping-count": "count", "--seed": "count", "--snaplen": "size",
                "--size": "size", "--sndbuf": "size", "--rcvbuf": "size"}
TEXT_KINDS = {"--rate": "rate", "--udp-rate": "rate", "--app-rate": "rate", "--delay": "time",
              "--jitter": "time", "--loss": "loss", "--queue": "size", "--bytes": "bytes",
              "--num": "bytes", "--ping-sizes": "sizes", "--trials-for": "width",
              "--label": "regex", "--by": "words", "--metrics": "words", "--tables": "words"}
READS = {"--sidecar": ("sidecar.json", "bad.json", "list.json", "types.json", "deep.json"),
         "--study": ("study.csv", "study.toml", "ragged.csv", "bad.toml", "latin1.csv"),
         "--client-output": ("client.txt",),
         "spec": ("spec.toml", "hugespec.toml", "typespec.toml", "fmtspec.toml",
                  "dayspec.toml", "bad.toml")}
LEFT_ALONE = {"--scheduler", "--dask", "--kernel", "--engine", "--explain", "--help",
              "--fields", "--version", "--interface", "--filter", "--title", "--cc", "--host",
              "--from"}


def make_case(rng: random.Random, files: Files, cmds, here: Path) -> dict:
    """One command line: {"argv": [...], "bad": whether a value is from a bad class}."""
    weights = [WEIGHT.get(name, 1.0) for name, _ in cmds]
    name, cmd = rng.choices(cmds, weights)[0]
    argv, bad = name.split(), False
    options = [p for p in cmd.params if p.opts and p.opts[0].startswith("-")
               and max(p.opts, key=len) not in LEFT_ALONE]
    chosen = rng.sample(options, min(len(options), rng.randint(0, 3)))
    for param in chosen:
        flag = rng.choice(param.opts)
        long = max(param.opts, key=len)
        value, was_bad = _value(rng, files, name, long, param, here)
        if value is _FLAG:
            argv.append(flag)
            continue
        argv += [flag, *value] if isinstance(value, list) else [flag, value]
        bad |= bool(was_bad)
    if name == "netem":
        argv.insert(1, rng.choice(["pcapsfz0", "", "x" * 300, "lo/../x"]))
        bad = True      # no such interface: it must never be touched
    elif name == "lab matrix":
        value, was_bad = files.read_path(rng, READS["spec"])
        argv.insert(2, value)
        bad |= was_bad is True or value != files.side["spec.toml"]
        if "-o" not in argv and "--output" not in argv:
            argv += ["-o", str(here / "runs")]
    elif name in ("lab run", "capture"):
        if "-o" not in argv and "--output" not in argv:
            argv += ["-o", str(here / "run.pcap")]
        if name == "capture" and "-i" not in argv:
            argv += ["-i", rng.choice(["pcapsfz0", "lo"])]
    elif name == "udp" and "--pair" in argv:
        pass
    else:
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            path, was_bad = files.capture(rng)
            argv.append(path)
        if name in ("report", "export") and "-o" not in argv and "--output" not in argv:
            argv += ["-o", str(here / ("r.html" if name == "report" else "exp"))]
    return {"argv": argv, "bad": bad}


_FLAG = object()


def _value(rng, files: Files, command: str, long: str, param, here: Path):
    """A value for one option, and whether it is from a bad class (None: cannot tell)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return _FLAG, False
    if long == "--output":
        if command == "export" or command == "lab matrix":
            return files.output(rng, ("",), directory=True, here=here)
        suffixes = {"report": (".html", ".txt"), "lab run": (".pcap", ".pcapng"),
                    "capture": (".pcap",)}.get(command, (".csv", ".json", ".png", ".svg",
                                                          ".txt", ""))
        value, bad = files.output(rng, suffixes, here=here)
        return value, bad
    if long in READS:
        value, bad = files.read_path(rng, READS[long])
        return value, bad
    if long == "--pair":
        a, bad_a = files.capture(rng)
        b, bad_b = files.capture(rng)
        return [a, b], bad_a or bad_b
    if long in NUMBER_KINDS:
        good, badlist = number_values(NUMBER_KINDS[long], long)
        if rng.random() < 0.5:
            return rng.choice(good), False
        value = rng.choice(badlist)
        return value, None if value in EITHER else True
    if long in TEXT_KINDS:
        good, badlist = TEXT_VALUES[TEXT_KINDS[long]]
        if rng.random() < 0.5:
            return rng.choice(good), None     # valid alone; may not fit the others
        return rng.choice(badlist), True
    choices = getattr(getattr(param, "type_descriptor", None), "choices", None)
    if choices:
        return (rng.choice(list(choices)) if rng.random() < 0.8 else "nosuch"), None
    return rng.choice(["x", "", "\udce9", "1.2.3.4", "all"]), None


# -- running a case ----------------------------------------------------------------------------------

def _stubs() -> None:
    """In the child: the lab's, capture's and netem's work replaced by its own checks, then
    WouldRun (nothing is built, no interface is touched)."""
    import importlib
    live = importlib.import_module("pcapstats.lab.live")
    matrix = importlib.import_module("pcapstats.lab.matrix")
    labrun = importlib.import_module("pcapstats.lab.run")     # the module, not lab.run()
    host = importlib.import_module("pcapstats.lab.impair.host")

    def run(scenario, output, **kw):
        scenario.validate()
        raise WouldRun("lab run")

    def run_matrix(spec, out, **kw):
        matrix.load_spec(spec)
        raise WouldRun("lab matrix")

    def capture(req, **kw):
        req.validate()
        raise WouldRun("capture")

    def touched(*a, **kw):
        raise WouldRun("netem")
    labrun.run = run
    matrix.run_matrix = run_matrix
    live.capture = capture
    host.InterfaceImpairment.install = classmethod(touched)
    host.clear = host.show = touched


def child(case: dict, out_fd: int, work: str) -> None:
    """Run one case; one JSON line to out_fd; never returns."""
    from pcapstats.cli import main
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(work)
    os.environ["PATH"] = work      # and no ip, tc, tcpdump or iperf3 to run: nothing is built
    err_path = os.path.join(work, ".stderr")
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(err, 2)

    def on_alarm(signum, frame):
        why = "blocked" if signum == signal.SIGALRM else "busy"
        os.write(out_fd, (json.dumps({"outcome": "hang", "error": why}) + "\n").encode())
        os._exit(124)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGPROF, on_alarm)
    os.environ["COLUMNS"] = "100"
    signal.alarm(CASE_TIMEOUT_S)
    signal.setitimer(signal.ITIMER_PROF, CASE_CPU_S)
    t = time.perf_counter()
    ran = False
    try:
        code = main(case["argv"])
    except WouldRun:
        code, ran = 0, True
    except BaseException as e:            # noqa: BLE001 -- main should never raise
        code = f"raised {type(e).__name__}: {e}"
    signal.alarm(0)
    signal.setitimer(signal.ITIMER_PROF, 0)
    seconds = time.perf_counter() - t
    sys.stderr.flush()
    text = open(err_path, errors="replace").read()
    stray = [ln for ln in text.splitlines()
             if ln.strip() and not ln.startswith(("pcapstats: ", "    ", "      "))]
    internal = next((ln for ln in text.splitlines() if "internal error" in ln), "")
    if isinstance(code, str):
        outcome, said = "internal", code
    elif code == 3:
        outcome, said = "internal", internal
    elif ran and case["bad"]:
        outcome, said = "accepted", " ".join(case["argv"])
    elif "Traceback" in text or stray:
        outcome, said = "lines", (stray or ["Traceback"])[0]
    else:
        outcome, said = ("ok" if code == 0 or ran else "clean"), ""
    os.write(out_fd, (json.dumps({"outcome": outcome, "code": str(code), "ran": ran,
                                  "seconds": round(seconds, 3), "error": said[-300:]})
                      + "\n").encode())
    os._exit(0)


# -- the campaign ------------------------------------------------------------------------------------

def _warm(files: Files) -> None:
    """Every command once in the parent (pcapstats, pandas, matplotlib, pyarrow imported):
    forked children then start in a millisecond."""
    import io
    import warnings
    from pcapstats.cli import main
    warnings.simplefilter("ignore")
    os.environ["COLUMNS"] = "100"
    here = files.where / "warm"
    here.mkdir(exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for name, _ in commands():
            if name.startswith(("lab", "capture", "netem")):
                continue
            extra = {"report": ["-o", str(here / "r.html")], "export": ["-o", str(here / "x")],
                     "iograph": ["-o", str(here / "x.png")]}.get(name, [])
            main([*name.split(), files.good[3], *extra])


def campaign(args) -> int:
    import collections
    import tempfile
    from fuzz import stop_on_sigterm
    stop_on_sigterm()
    rng = random.Random(args.seed)
    top = Path(tempfile.mkdtemp(prefix="pcapstats-fuzz-cli-"))
    files = Files(top / "files")
    _warm(files)
    _stubs()                # in the parent: every child finds the lab imported and stubbed
    cmds = commands()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "cli-failures.jsonl", "a")
    per = collections.defaultdict(collections.Counter)
    kinds = collections.Counter()
    slowest, seconds_all = [], []
    started = time.monotonic()
    running: dict[int, tuple] = {}
    made = done = 0
    try:
        while done < args.count:
            while len(running) < max(1, args.jobs) and made < args.count:
                work = top / f"case{made}"
                work.mkdir()
                case = make_case(rng, files, cmds, work)
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    try:
                        child(case, w, str(work))
                    finally:
                        os._exit(99)
                os.close(w)
                os.set_blocking(r, False)
                running[pid] = (case, work, r, [], time.monotonic() + CASE_TIMEOUT_S + 5)
                made += 1
            for pid in list(running):
                case, work, r, chunks, deadline = running[pid]
                with contextlib.suppress(BlockingIOError):
                    while data := os.read(r, 65536):
                        chunks.append(data)
                got, status = os.waitpid(pid, os.WNOHANG)
                if not got and time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    got, status = os.waitpid(pid, 0)
                if not got:
                    continue
                with contextlib.suppress(BlockingIOError):
                    while data := os.read(r, 65536):
                        chunks.append(data)
                os.close(r)
                del running[pid]
                lines = [json.loads(x) for x in b"".join(chunks).decode().splitlines() if x]
                x = lines[0] if lines else {"outcome": "hang" if os.WIFSIGNALED(status)
                                            else "internal", "error": f"status {status}"}
                command = " ".join(case["argv"][:2]) if case["argv"][0] == "lab" \
                    else case["argv"][0]
                per[command][x["outcome"]] += 1
                seconds_all.append(x.get("seconds", 0))
                if x.get("seconds", 0) > 3:
                    slowest.append((x["seconds"], case["argv"]))
                if x["outcome"] not in ("ok", "clean"):
                    kinds[(command, x["outcome"], x.get("error", "")[:120])] += 1
                    log.write(json.dumps({"argv": [os.fsencode(a).decode("utf-8",
                                                   "backslashreplace") for a in case["argv"]],
                                          **x}) + "\n")
                    log.flush()
                shutil.rmtree(work, ignore_errors=True)
                done += 1
                if done % 1000 == 0:
                    failed = sum(n for (_, o, _), n in kinds.items())
                    print(f"fuzz --cli: {done}/{args.count} cases, {failed} failed, "
                          f"{done / (time.monotonic() - started):.1f}/s", file=sys.stderr,
                          flush=True)
            time.sleep(0.002)
    except KeyboardInterrupt:
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        print(f"fuzz --cli: interrupted after {done} of {args.count} cases", file=sys.stderr)
    files._sock.close()
    shutil.rmtree(top, ignore_errors=True)
    _report(args, done, per, kinds, slowest, time.monotonic() - started)
    if seconds_all:
        seconds_all.sort()
        print(f"\nseconds a case: median {seconds_all[len(seconds_all) // 2]:.3f}, 99th "
              f"percentile {seconds_all[len(seconds_all) * 99 // 100]:.3f}, most "
              f"{seconds_all[-1]:.2f}")
    return 1 if kinds else 0


def _report(args, done, per, kinds, slowest, seconds) -> None:
    failed = sum(kinds.values())
    print(f"\n{done} command lines (seed {args.seed}) over {len(per)} commands in "
          f"{seconds / 60:.1f} min, {failed} failed")
    print("| command | cases | ok | clean error | internal | hang | stray line | bad value "
          "accepted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in sorted(per):
        n = per[c]
        print(f"| {c} | {sum(n.values())} | {n['ok']} | {n['clean']} | {n['internal']} | "
              f"{n['hang']} | {n['lines']} | {n['accepted']} |")
    if kinds:
        print("\nfailures by kind:")
        for (command, outcome, error), n in kinds.most_common(40):
            print(f"  {n:>6}  {command} {outcome} {error}")
    if slowest:
        print("\nslowest cases (over 3 s):")
        for s, argv in sorted(slowest, reverse=True)[:10]:
            print(f"  {s:6.2f} s  {' '.join(argv)[:150]!r}")
