"""Every repository path a document, docstring or comment names exists.

Files move (tests into packages, a module into a package); a path left behind in prose sends a
reader to nothing.  This reads every tracked source and document, finds the words that look
like a path inside the repository (``pcapstats/...``, ``tests/...``, ``bench/...``,
``captures/...``, ``notebooks/...``, ``.ci/...``) and asks the file system.  Not checked: glob
patterns and placeholders (``captures/sp-*.pcap``, ``captures/NAME.pcap``), a path given to
``-o`` (a file a command will write), and what git ignores (``bench/data/``: the benchmarks
make it).
"""
import re
import subprocess

from tests.helpers.paths import ROOT

ROOTS = ("pcapstats", "tests", "bench", "captures", "notebooks", ".ci")
PATH = re.compile(r"(?<![\w/.+-])((?:%s)/[A-Za-z0-9_./+-]*[A-Za-z0-9_+])" %
                  "|".join(re.escape(r) for r in ROOTS))
READ = (".py", ".md", ".c", ".toml", ".ipynb", ".txt")
ELSEWHERE = {"tests/filter"}     # a directory of libpcap's repository (tests/data/README.md)


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [f for f in out if (f.endswith(READ) or f.startswith(".ci/"))
            and f != "tests/test_paths.py"]          # its own examples name missing paths


def _ignored(paths: list[str]) -> set[str]:
    if not paths:
        return set()
    run = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT,
                         input="\n".join(f"{p}/-" for p in paths) + "\n"
                         + "\n".join(paths), capture_output=True, text=True)
    return {p.removesuffix("/-") for p in run.stdout.split()}


def named_paths() -> dict[str, set[str]]:
    """Each path named in a tracked file that is not there -> the files naming it."""
    missing: dict[str, set[str]] = {}
    for name in _tracked():
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for m in PATH.finditer(text):
            path = m.group(1).rstrip(".")
            rest = re.match(r"[\w*{}<>\[\].+-]*", text[m.end():]).group(0)
            before = text[max(0, m.start() - 3):m.start()]
            if any(c in rest for c in "*{<[") or before.endswith("-o ") or path in ELSEWHERE:
                continue
            if any(part.isupper() for part in re.split(r"[/.]", path)):   # NAME, FILE: a slot
                continue
            if not (ROOT / path).exists():
                missing.setdefault(path, set()).add(name)
    ignored = _ignored(sorted(missing))
    return {p: names for p, names in missing.items() if p not in ignored}


def test_every_path_named_in_the_repository_exists():
    missing = named_paths()
    assert not missing, "\n".join(f"{p} (named in {', '.join(sorted(n))})"
                                  for p, n in sorted(missing.items()))


def test_the_check_finds_a_missing_path(tmp_path):
    """The pattern catches a moved file in prose, and leaves globs and outputs alone."""
    text = ("see tests/test_cwnd.py and pcapstats/lab/impair.py; captures/sp-*.pcap; "
            "-o captures/new.pcap; pcapstats/analyses/NAME.py")
    found = [m.group(1) for m in PATH.finditer(text)]
    assert found[:2] == ["tests/test_cwnd.py", "pcapstats/lab/impair.py"]
    assert not (ROOT / found[0]).exists() and not (ROOT / found[1]).exists()
