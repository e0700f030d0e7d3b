"""A ``tc`` that answers as a kernel with ``sch_netem`` does, for a machine whose kernel has none.

Put first on the PATH (:func:`install` writes the ``tc`` wrapper), it lets the lab, ``capture``
and ``netem`` take the branch a student's host takes -- ``mechanism="netem"`` -- and records
every command they issue.  It is not a netem: packets pass unimpaired.  What it checks and
answers:

- every ``tc qdisc add`` of a netem, and of a qdisc under one, first goes to the real ``tc`` in
  the same namespace.  The real ``tc`` parses every argument in user space before it asks the
  kernel, so a well-formed command fails only at the kernel ("Specified qdisc kind is unknown";
  a child: "Failed to find specified qdisc") and a malformed one in tc's parser ("What is ...",
  "Illegal ...", usage, exit 1).  The kernel's refusal is taken as the netem kernel's yes and the
  qdisc is kept in a state file; tc's own refusal is passed on as it is.
- a root netem on an interface whose root is already not the kernel's default is refused as
  the kernel refuses it ("Exclusivity flag on"), as is a second root of ours;
- ``tc qdisc del dev IF root`` removes our root (and its child) the way the kernel does;
- ``tc [-s] [-j] qdisc show [dev IF]``: the real answer with our qdiscs in place of the
  interface's default root, in tc's text or JSON shape; ``-s`` counts come from ``stats.json``
  in the state directory (a test writes what "the kernel counted"), zeros by default;
- anything else (tbf on its own, ``-V``, filters) is the real ``tc``.

State is per network namespace (the inode of /proc/self/ns/net) and interface; a namespace
that no longer exists takes its qdiscs with it, as in the kernel.  ``log.jsonl`` holds one
line a call: argv, the namespace's inode and name, what the real ``tc`` said and what we
answered.  ``fail.json`` ({"add": N}) makes the N-th netem-kernel add fail as a kernel may,
for the error paths.  Standard library only: it starts for every ``tc`` call.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

KERNEL_REFUSALS = {
    "netem": "Error: Specified qdisc kind is unknown.",
    "child": "Error: Failed to find specified qdisc.",
}
STAT_KEYS = ("bytes", "packets", "drops", "overlimits", "requeues", "backlog", "qlen")
PARSER_EXIT = 1   # tc's own parser refuses with exit status 1; the kernel's errors give 2


def install(directory: Path, python: str = sys.executable) -> Path:
    """Write ``directory/bin/tc`` (the wrapper to put first on PATH); returns the bin dir."""
    real = _real_tc(None)
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (directory / "state").mkdir(exist_ok=True)
    wrapper = bin_dir / "tc"
    wrapper.write_text(f"#!/bin/sh\nNETEM_TC_DIR='{directory / 'state'}' NETEM_TC_REAL='{real}' "
                       f"exec '{python}' -I -S '{Path(__file__).resolve()}' \"$@\"\n")
    wrapper.chmod(0o755)
    return bin_dir


def _real_tc(skip: str | None) -> str:
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]:
        path = Path(d or ".") / "tc"
        if skip and path.resolve().parent == Path(skip).resolve():
            continue
        if path.is_file() and os.access(path, os.X_OK) and "NETEM_TC_DIR" not in _head(path):
            return str(path)
    raise FileNotFoundError("no real tc on the PATH")


def _head(path: Path) -> str:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open(path, "rb") as f:
            return f.read(200).decode()
    return ""


# -- reading a state directory (for tests) ------------------------------------------------------
def calls(directory: Path) -> list[dict]:
    """Every recorded call, in order."""
    path = directory / "state" / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def held(directory: Path) -> dict:
    """{namespace inode: {interface: [qdisc]}} of our qdiscs in namespaces that still exist."""
    state = _load(directory / "state")
    alive = _live_namespaces()
    return {ns: devs for ns, devs in state.items() if int(ns) in alive and any(devs.values())}


def set_stats(directory: Path, stats: dict) -> None:
    """What "the kernel counted", by ``"IFACE KIND"`` or ``"KIND"``: {"bytes": ..., ...}."""
    (directory / "state" / "stats.json").write_text(json.dumps(stats))


def fail_add(directory: Path, n: int) -> None:
    """Make the n-th netem-kernel add from now on fail as the kernel may (no memory)."""
    (directory / "state" / "fail.json").write_text(json.dumps({"add": n}))


# -- the state ---------------------------------------------------------------------------------
def _load(state_dir: Path) -> dict:
    try:
        return json.loads((state_dir / "qdiscs.json").read_text())
    except FileNotFoundError:
        return {}


def _save(state_dir: Path, state: dict) -> None:
    tmp = state_dir / ".qdiscs.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, state_dir / "qdiscs.json")


def _live_namespaces() -> set[int]:
    alive = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            alive.add(os.stat(f"/proc/{pid}/ns/net").st_ino)
    with contextlib.suppress(OSError):
        for name in os.listdir("/run/netns"):
            with contextlib.suppress(OSError):
                alive.add(os.stat(f"/run/netns/{name}").st_ino)
    return alive


def _netns_name(inode: int) -> str | None:
    with contextlib.suppress(OSError):
        for name in os.listdir("/run/netns"):
            with contextlib.suppress(OSError):
                if os.stat(f"/run/netns/{name}").st_ino == inode:
                    return name
    return None


# -- parsing tc's words ------------------------------------------------------------------------
def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(global options, the rest): ``-s -j qdisc show dev x`` -> ([-s, -j], [qdisc, ...])."""
    k = 0
    while k < len(argv) and argv[k].startswith("-"):
        k += 1
    return argv[:k], argv[k:]


def _qdisc_spec(words: list[str]) -> dict:
    """``dev X root|parent P [handle H] KIND ARGS`` (after add/del/replace)."""
    spec: dict = {"dev": None, "root": False, "parent": None, "handle": None, "kind": None,
                  "args": []}
    k = 0
    while k < len(words):
        w = words[k]
        if w == "dev" and k + 1 < len(words):
            spec["dev"], k = words[k + 1], k + 2
        elif w == "root":
            spec["root"], k = True, k + 1
        elif w == "parent" and k + 1 < len(words):
            spec["parent"], k = words[k + 1], k + 2
        elif w == "handle" and k + 1 < len(words):
            spec["handle"], k = words[k + 1], k + 2
        else:
            spec["kind"], spec["args"] = w, words[k + 1:]
            break
    return spec


def _major(handle: str | None) -> str | None:
    return handle.split(":")[0].lower() if handle else None


# -- the answers -------------------------------------------------------------------------------
class Shim:
    def __init__(self, argv: list[str]):
        self.argv = argv
        self.dir = Path(os.environ["NETEM_TC_DIR"])
        self.real = os.environ["NETEM_TC_REAL"]
        self.netns = os.stat("/proc/self/ns/net").st_ino
        self.entry: dict = {"argv": argv, "netns": self.netns,
                            "netns_name": _netns_name(self.netns), "t": time.time()}

    def real_tc(self, argv: list[str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.real, *(self.argv if argv is None else argv)],
                              capture_output=True, text=True)
        if argv is None:
            self.entry.update(real_rc=proc.returncode, real_stderr=proc.stderr.strip())
        return proc

    def answer(self) -> int:
        opts, rest = _split(self.argv)
        if len(rest) < 2 or rest[0] not in ("qdisc", "qd", "q") or \
                rest[1] not in ("add", "del", "delete", "replace", "show", "list", "ls"):
            return self.passthrough()
        with self.locked():
            self.state = _load(self.dir)
            alive = _live_namespaces()
            self.state = {ns: d for ns, d in self.state.items() if int(ns) in alive}
            mine = self.state.setdefault(str(self.netns), {})
            verb, spec = rest[1], _qdisc_spec(rest[2:])
            if verb in ("show", "list", "ls"):
                code = self.show(opts, spec["dev"], mine)
            elif verb in ("del", "delete"):
                code = self.delete(spec, mine)
            else:
                code = self.add(spec, mine, replace=verb == "replace")
            _save(self.dir, self.state)
        return code

    @contextlib.contextmanager
    def locked(self):
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def passthrough(self) -> int:
        proc = self.real_tc()
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        return self.done(proc.returncode, "real")

    def done(self, code: int, how: str, stderr: str | None = None) -> int:
        if stderr:
            print(stderr, file=sys.stderr)
        self.entry.update(rc=code, answered=how)
        with open(self.dir / "log.jsonl", "a") as f:
            f.write(json.dumps(self.entry) + "\n")
        return code

    # -- add / replace / del ---------------------------------------------------------------
    def add(self, spec: dict, mine: dict, *, replace: bool) -> int:
        dev = spec["dev"]
        ours = mine.get(dev) or []
        under_ours = spec["parent"] and any(_major(q["handle"]) == _major(spec["parent"])
                                            for q in ours)
        if spec["kind"] != "netem" and not under_ours:
            return self.passthrough()
        proc = self.real_tc()
        if proc.returncode == 0:      # a kernel with netem after all: it is the real one
            sys.stdout.write(proc.stdout)
            return self.done(0, "real")
        refusal = KERNEL_REFUSALS["child" if under_ours else "netem"]
        if proc.stderr.strip() != refusal:   # tc's parser (or another kernel error): as is
            sys.stdout.write(proc.stdout)
            sys.stderr.write(proc.stderr)
            return self.done(proc.returncode, "real")
        if self.fail_now():
            return self.done(2, "kernel-error", "Error: netem: failed to allocate (test).")
        if spec["root"]:
            if ours and not replace:
                return self.done(2, "exclusive", "Error: Exclusivity flag on, cannot modify.")
            if not ours and self.real_root_is_set(dev):
                return self.done(2, "exclusive", "Error: Exclusivity flag on, cannot modify.")
            ours = []
        elif not under_ours:
            return self.done(2, "no-parent", KERNEL_REFUSALS["child"])
        else:
            ours = [q for q in ours if q.get("parent") != spec["parent"]]
        handle = spec["handle"] or self.free_handle(ours)
        if not handle.endswith(":"):
            handle = handle.split(":")[0] + ":"
        ours.append({"kind": spec["kind"], "handle": handle.lower(),
                     **({"root": True} if spec["root"] else {"parent": spec["parent"]}),
                     "args": spec["args"]})
        mine[dev] = ours
        return self.done(0, "netem-kernel")

    def fail_now(self) -> bool:
        path = self.dir / "fail.json"
        try:
            fail = json.loads(path.read_text())
        except FileNotFoundError:
            return False
        fail["add"] -= 1
        if fail["add"] <= 0:
            path.unlink()
            return True
        path.write_text(json.dumps(fail))
        return False

    def free_handle(self, ours: list[dict]) -> str:
        used = {_major(q["handle"]) for q in ours}
        n = 0x8001
        while f"{n:x}" in used:
            n += 1
        return f"{n:x}:"

    def real_root_is_set(self, dev: str) -> bool:
        proc = self.real_tc(["-j", "qdisc", "show", "dev", dev])
        for q in json.loads(proc.stdout or "[]") if proc.returncode == 0 else []:
            if q.get("root") and q.get("handle") != "0:":
                return True
        return False

    def delete(self, spec: dict, mine: dict) -> int:
        dev = spec["dev"]
        if not spec["root"] or not mine.get(dev):
            return self.passthrough()
        proc = self.real_tc()       # parsed too: the kernel then finds no root of its own
        if proc.returncode == PARSER_EXIT:
            sys.stderr.write(proc.stderr)
            return self.done(proc.returncode, "real")
        mine[dev] = []
        return self.done(0, "netem-kernel")

    # -- show ------------------------------------------------------------------------------
    def show(self, opts: list[str], dev: str | None, mine: dict) -> int:
        proc = self.real_tc()
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return self.done(proc.returncode, "real")
        ours = {d: qs for d, qs in mine.items() if qs and (dev is None or d == dev)}
        as_json = any(o.startswith("-j") for o in opts)
        stats = any(o.startswith("-s") for o in opts)
        if as_json:
            real = json.loads(proc.stdout or "[]")
            kept = [q for q in real if not (q.get("dev", dev) in ours and _egress(q))]
            shown = [self.as_json(d, q, stats, dev is None) for d, qs in ours.items()
                     for q in qs]
            sys.stdout.write(json.dumps(shown + kept) + "\n")
        else:
            blocks = _text_blocks(proc.stdout)
            kept = [b for b in blocks if not (_text_dev(b, dev) in ours and _text_egress(b))]
            shown = [self.as_text(d, q, stats, dev is None) for d, qs in ours.items()
                     for q in qs]
            sys.stdout.write("".join(shown + kept))
        return self.done(0, "netem-kernel" if ours else "real")

    def counts(self, dev: str, kind: str) -> dict:
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            table = json.loads((self.dir / "stats.json").read_text())
            for key in (f"{dev} {kind}", kind):
                if key in table:
                    return {k: int(table[key].get(k, 0)) for k in STAT_KEYS}
        return dict.fromkeys(STAT_KEYS, 0)

    def as_json(self, dev: str, q: dict, stats: bool, with_dev: bool) -> dict:
        out = {"kind": q["kind"], "handle": q["handle"]}
        if with_dev:
            out["dev"] = dev
        out.update({"root": True, "refcnt": 2} if q.get("root") else {"parent": q["parent"]})
        out["options"] = {"args": " ".join(q["args"])}
        if stats:
            out.update(self.counts(dev, q["kind"]))
        return out

    def as_text(self, dev: str, q: dict, stats: bool, with_dev: bool) -> str:
        where = ("root refcnt 2" if q.get("root") else f"parent {q['parent']}")
        where = f"dev {dev} {where}" if with_dev else where
        line = f"qdisc {q['kind']} {q['handle']} {where} {' '.join(q['args'])}\n"
        if stats:
            c = self.counts(dev, q["kind"])
            line += (f" Sent {c['bytes']} bytes {c['packets']} pkt (dropped {c['drops']}, "
                     f"overlimits {c['overlimits']} requeues {c['requeues']})\n"
                     f" backlog {c['backlog']}b {c['qlen']}p requeues {c['requeues']}\n")
        return line


def _egress(q: dict) -> bool:
    return q.get("kind") not in ("ingress", "clsact") and \
        not str(q.get("parent", "")).startswith("ffff:")


def _text_blocks(text: str) -> list[str]:
    blocks: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("qdisc ") or not blocks:
            blocks.append(line)
        else:
            blocks[-1] += line
    return blocks


def _text_dev(block: str, dev: str | None) -> str | None:
    m = re.search(r" dev (\S+)", block.splitlines()[0]) if block else None
    return m.group(1) if m else dev


def _text_egress(block: str) -> bool:
    head = block.split("\n", 1)[0].split()
    return len(head) > 1 and head[1] not in ("ingress", "clsact") and " parent ffff:" not in block


def main() -> int:
    return Shim(sys.argv[1:]).answer()


if __name__ == "__main__":
    sys.exit(main())
