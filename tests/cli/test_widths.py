"""Every command's human tables, and every option that prints one, on every shipped capture (and
the public ones), read as a person copying numbers into a report would: at 80 and 200 columns
no line is wider than the terminal, no column an option asked for is left out (a table too
wide is printed in column blocks), no e-notation, one unit per unit family in one output
(every block of every capture), every cell of a column with the same decimals, and each note
one line, said once.

The columns an option asks for are read from the result's own spec and view (not written
here), and their headings derived here by the rule render documents, so a column renamed in
an analysis is still checked: a view's heading, else the column's declared one, else the one
another of the result's views gives it, else one derived from its name."""
import contextlib
import io
import re

import pytest
from tests.helpers.paths import CAPTURES, DATA, PUBLIC

import pcapstats as ps
from pcapstats.cli import main

SHIPPED = sorted(str(p) for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
PUBLIC_FILES = sorted(str(DATA / name) for name in PUBLIC)
ONE = str(CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap")   # a capture every TCP analysis reads
PINGS = str(CAPTURES / "ping-sweep-sender.pcap")
UDP = str(CAPTURES / "iperf3-udp-loss10pct.pcap")
# the commands that read what the shipped (wired) captures do not have, and what they read
WIFI = sorted(str(DATA / n) for n in ("ieee802.11_exthdr.pcap", "ieee802.11_htc.pcap",
                                      "ieee802.11_meshid.pcap", "ieee802.11_rx-stbc.pcap",
                                      "wpa-Induction.pcap", "Network_Join_Nokia_Mobile.pcap",
                                      "wpa2linkuppassphraseiswireshark.pcap"))
FILES = {"wifi": WIFI}
E_NOTATION = re.compile(r"\d\.?\d*e[+-]?\d\d")
WIDTHS = (80, 200)

# (command, options, the table they print when it is not the default view (None), and the
# library call that gives that table's spec and view: analysis, keyword options)
CASES = [
    ("throughput", [], None),
    ("throughput", ["--all"], "streams"),
    ("iograph", [], None),
    ("iograph", ["--all"], "summary"),
    ("iograph", ["--by", "stream"], None),
    ("iograph", ["--by", "stream+direction", "--all"], "summary"),
    ("iograph", ["--series"], "series"),
    ("iograph", ["--transfers"], "transfers"),
    ("retrans", [], None),
    ("retrans", ["--all"], "counts"),
    ("retrans", ["--events"], "events"),
    ("cwnd", [], None),
    ("cwnd", ["--all"], "summary"),
    ("cwnd", ["--series"], "samples"),
    ("cwnd", ["--losses"], "losses"),
    ("cwnd", ["--window-scaling"], None),
    ("wscale", ["--series"], "flight"),
    ("rtt", [], None),
    ("rtt", ["--all"], "summary"),
    ("rtt", ["--series"], "samples"),
    ("seqgraph", [], None),
    ("seqgraph", ["--all"], "summary"),
    ("seqgraph", ["--series"], "segments"),
    ("limits", [], None),
    ("limits", ["--all"], "streams"),
    ("limits", ["--intervals"], "limited"),
    ("flavour", [], None),
    ("flavour", ["--all"], "streams"),
    ("verify", [], None),
    ("verify", ["--all"], "streams"),
    ("ping", [], None),
    ("ping", ["--all"], "sessions"),
    ("ping", ["--echoes"], "echoes"),
    ("udp", [], None),
    ("udp", ["--all"], "flows"),
    ("fairness", [], None),
    ("fairness", ["--all"], "summary"),
    ("fairness", ["--flows"], "flows"),
    ("fairness", ["--series"], "shares"),
    ("fairness", ["--jain-series"], "series"),
    ("wifi", [], None),
    ("wifi", ["--all"], "frames"),
    ("wifi", ["--series"], "intervals"),
    ("wifi", ["--series", "--interval", "0.01", "--all"], "intervals"),
    ("delay", [], None),
    ("hierarchy", [], None),
    ("hierarchy", ["--all"], "protocols"),
    ("delay", ["--all"], "model"),
    ("delay", ["--sizes"], "sizes"),
    ("delay", ["--samples"], "samples"),
    ("compare", [], None),
    ("compare", ["--all"], "captures"),
    ("compare", ["--by", "cc,loss"], None),
    ("compare", ["--by", "cc,loss", "--all"], "groups"),
    ("compare", ["--by", "tool", "--captures"], None),
    ("compare", ["--by", "cc", "--trials-for", "10%"], None),
    ("compare", ["--by", "cc", "--trials-for", "rtt median=2ms", "--all"], "trials"),
]
ANALYSIS = {"wscale": "cwnd"}
LIBRARY_OPTIONS = {"--by": "by", "--trials-for": "trials_for", "--interval": "interval"}


def run(args: list[str], width: int, monkeypatch, capsys) -> tuple[str, str]:
    monkeypatch.setenv("COLUMNS", str(width))
    main(args)
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.fixture(scope="module")
def outputs():
    """Each case's output at each width, run once for all the checks."""
    cache = {}

    def get(command, options, width):
        key = (command, tuple(options), width)
        if key not in cache:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("COLUMNS", str(width))
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    main([command, *FILES.get(command, SHIPPED), *options])
            cache[key] = out.getvalue(), err.getvalue()
        return cache[key]
    return get


def ids(case):
    command, options, _ = case
    return " ".join([command, *options])


# -- the checks ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_fits_the_terminal(case, width, outputs):
    command, options, _ = case
    out, _ = outputs(command, options, width)
    assert out.strip(), f"{ids(case)} printed nothing"
    wide = [line for line in out.splitlines() if len(line) > width]
    assert not wide, f"{ids(case)} at {width}: {len(wide)} lines wider, e.g. {wide[0]!r}"
    assert not E_NOTATION.search(out), f"{ids(case)}: e-notation in {E_NOTATION.search(out)[0]!r}"
    assert "too narrow for" not in out, f"{ids(case)} at {width} left a column out"


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_one_unit_a_family(case, width, outputs):
    """All the rates of one output in one unit (all the sizes in another ...), whatever the
    captures and blocks."""
    command, options, _ = case
    out, _ = outputs(command, options, width)
    seen = units_by_family(out)
    mixed = {family: units for family, units in seen.items() if len(units) > 1}
    assert not mixed, f"{ids(case)} at {width}: {mixed}"


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_decimals_aligned(case, width, outputs):
    """Every number of a column has the same decimals, so they align on the point."""
    command, options, _ = case
    out, _ = outputs(command, options, width)
    for block, column, decimals in numeric_columns(out):
        assert len(decimals) == 1, (f"{ids(case)} at {width}: a column ending at {column} "
                                    f"has {sorted(decimals)} decimals:\n{block}")


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", [c for c in CASES if c[2]], ids=[ids(c) for c in CASES if c[2]])
def test_no_column_asked_for_is_left_out(case, width, outputs):
    command, options, table = case
    out, _ = outputs(command, options, width)
    missing = [h for h in asked_headings(command, options, table) if not heading_shown(out, h)]
    assert not missing, f"{ids(case)} at {width}: left out {missing}\n{out[:3000]}"


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_compare_never_leaves_out_a_metric_asked_for(width, monkeypatch, capsys):
    """-m names the metrics: none of them is left out, not even those the default view
    leaves out first when narrow (its minor ones, read from the view)."""
    result = library_result("compare", [])
    metrics = result.spec("captures").names
    labels = {c for label in result.label_columns.values() for c in label.names}  # loss_label
    minor = [s for s in result.view["captures"] if s.minor and s.column in metrics
             and s.column not in labels]
    assert minor, "the comparison's view has no minor metric to ask for"
    out, _ = run(["compare", *SHIPPED, "-m", ",".join(s.column for s in minor)], width,
                 monkeypatch, capsys)
    missing = [s.heading for s in minor if not heading_shown(out, s.heading)]
    assert not missing, f"compare -m at {width}: left out {missing}\n{out}"


def test_wide_tables_repeat_their_keys_in_every_block(monkeypatch, capsys):
    """throughput --all at 80 columns: several column blocks, each led by the stream."""
    out, _ = run(["throughput", "--all", str(CAPTURES / "tcp_2streams.pcap")], 80, monkeypatch,
                 capsys)
    parts = [p for p in out.split("\n\n") if p.strip()]
    assert len(parts) > 2, out
    for part in parts:
        heading = part.splitlines()[:2]
        assert any(re.match(r"stream\s+proto\b", line) for line in heading), part


def test_a_hierarchy_in_blocks_says_each_rows_protocol(monkeypatch, capsys):
    """hierarchy --all at 80 columns: the decoded column in a block of its own, led by the
    protocols as the tree (else a column of yes/no with no row named)."""
    out, _ = run(["hierarchy", "--all", str(CAPTURES / "ping-sweep-sender.pcap")], 80,
                 monkeypatch, capsys)
    parts = [p.splitlines() for p in out.split("\n\n") if p.strip()]
    assert len(parts) == 2, out
    assert parts[1][0].split() == ["protocol", "decoded"]
    assert [line.split()[0] for line in parts[1][1:]] == [
        "frame", "eth", "ip", "icmp", "data", "ipv6", "icmpv6"]
    assert parts[1][4].startswith("      icmp ") and parts[1][5].split()[1] == "no"


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_notes_one_line_each_said_once(case, outputs):
    command, options, _ = case
    _, err = outputs(command, options, 80)
    notes = [line for line in err.splitlines() if line.startswith("pcapstats: note: ")]
    long = [n for n in notes if len(n) > 100]
    assert not long, f"{ids(case)}: {len(long)} notes over 100 columns, e.g. {long[0]!r}"
    said = [re.sub(r"\d+", "N", re.sub(r"\S+\.pcap(ng)?(\.gz)?\b", "", n)) for n in notes]
    assert len(said) == len(set(said)), f"{ids(case)}: a note said more than once: {notes}"


def test_explain_gives_the_long_form(monkeypatch, capsys):
    """cwnd's capture-side note is one short line; --explain says why at length."""
    capture = str(CAPTURES / "sp-reno-loss10pct.pcap")
    _, err = run(["cwnd", capture], 80, monkeypatch, capsys)
    assert "sender-side capture" in err and "--explain" in err and "handshake" not in err
    _, err = run(["cwnd", capture, "--explain"], 80, monkeypatch, capsys)
    assert "handshake" in err and "TTL" in err
    assert all(len(line) <= 100 for line in err.splitlines()), err


def test_columns_defines_the_capture_side(monkeypatch, capsys):
    """What --explain says about the capture side is also where the side column is defined."""
    out, _ = run(["columns", "cwnd"], 100, monkeypatch, capsys)
    side = out[out.index("  side "):]
    assert "handshake" in side and "TTL" in side


@pytest.mark.parametrize("command", ["throughput", "retrans", "rtt", "cwnd", "flavour"])
def test_public_captures_fit_too(command, monkeypatch, capsys):
    out, _ = run([command, *PUBLIC_FILES], 100, monkeypatch, capsys)
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert not wide, f"{command}: {len(wide)} lines wider than 100, e.g. {wide[0]!r}"
    assert not units_by_family(out) or all(len(u) == 1 for u in units_by_family(out).values())


def test_the_two_captures_of_a_study_read_in_one_unit(monkeypatch, capsys):
    """The issue's example: a lossless and a 30 % loss capture, both in Mbit/s (the lossy one's
    357 kbit/s as 0.36), every rate with the same decimals, and the same widths."""
    out, _ = run(["throughput", str(CAPTURES / "sp-reno-loss0pct.pcap"),
                  str(CAPTURES / "sp-reno-loss30pct.pcap")], 80, monkeypatch, capsys)
    assert units_by_family(out)["bit/s"] == {"Mbit/s"}, out
    assert "0.36" in out and "9.93" in out, out


def test_cwnd_sizes_in_one_unit(monkeypatch, capsys):
    out, _ = run(["cwnd", str(CAPTURES / "sp-reno-loss10pct.pcap")], 80, monkeypatch, capsys)
    assert units_by_family(out)["bytes"] == {"kB"}, out


@pytest.mark.slow
def test_jain_index_shows_its_distance_from_one(monkeypatch, capsys):
    """Digits do not drift in a column: Jain's index has four decimals, none stripped."""
    out, _ = run(["compare", *SHIPPED, "--all"], 200, monkeypatch, capsys)
    jain = {c for _, c, d in numeric_cells(out) if d == 4}
    assert jain, out


def test_columns_help_fits(monkeypatch, capsys):
    out, _ = run(["columns"], 100, monkeypatch, capsys)
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert not wide, wide[:3]


# -- reading the output --------------------------------------------------------------------------

FAMILIES = {"bit/s": {"bit/s", "kbit/s", "Mbit/s", "Gbit/s"},
            "bytes": {"B", "kB", "MB", "GB"},
            "bytes/s": {"B/s", "kB/s", "MB/s", "GB/s"},
            "fraction": {"%"}}
UNITS = set().union(*FAMILIES.values()) | {"s", "ms", "µs/B", "dBm", "packets/s"}
NUMBER = re.compile(r"-?\d+(?:\.(\d+))?")


def cells(line: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each cell: text separated by two spaces or more."""
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]


def unit_line(line: str) -> bool:
    words = line.split()
    return bool(words) and all(w in UNITS for w in words)


def units_by_family(out: str) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for line in out.splitlines():
        if unit_line(line):
            for word in line.split():
                for family, units in FAMILIES.items():
                    if word in units:
                        seen.setdefault(family, set()).add(word)
    return seen


def blocks(out: str) -> list[list[str]]:
    """The data lines under each unit line, up to the next blank line."""
    found, current = [], None
    for line in out.splitlines():
        if unit_line(line):
            current = []
            found.append(current)
        elif not line.strip():
            current = None
        elif current is not None:
            current.append(line)
    return found


def numeric_cells(out: str):
    """(block index, end column, decimals) of every number alone in a cell under a unit line."""
    for b, lines in enumerate(blocks(out)):
        for line in lines:
            for _, end, text in cells(line):
                m = NUMBER.fullmatch(text)
                if m:
                    yield b, end, len(m.group(1) or "")


def numeric_columns(out: str):
    columns: dict[tuple[int, int], set[int]] = {}
    for b, end, decimals in numeric_cells(out):
        columns.setdefault((b, end), set()).add(decimals)
    text = blocks(out)
    return [("\n".join(text[b][:8]), end, d) for (b, end), d in columns.items()]


def heading_shown(out: str, heading: str) -> bool:
    """The heading over a column of the output: a cell of its own, on one line or on two
    (split at a space; a numeric column's lines right-aligned, a text column's left)."""
    lines = out.splitlines()
    parts = heading.split("\n")
    splits = [parts] if len(parts) > 1 else [[heading]] + [
        [heading[:i], heading[i + 1:]] for i, ch in enumerate(heading) if ch == " "]
    for k, line in enumerate(lines):
        here = cells(line)
        for split in splits:
            if len(split) == 1:
                if any(text == split[0] for _, _, text in here):
                    return True
            elif k + 1 < len(lines):
                below = cells(lines[k + 1])
                for s, e, text in here:
                    if text == split[0] and any(t == split[1] and (e2 == e or s2 == s)
                                                for s2, e2, t in below):
                        return True
    return False


# -- what an option asks for: from the result's spec and view -------------------------------------

UNIT_SUFFIXES = ("_per_s", "_bytes", "_bps", "_pct", "_ms", "_ns", "_s")
DIRECTIONS = {"_a_to_b": " A→B", "_b_to_a": " B→A"}


def derived(name: str, keep_unit: bool = False) -> str:
    """The heading of a column no view or catalogue names (ARCHITECTURE's vocabulary: the unit
    suffix dropped, the direction as an arrow, underscores as spaces)."""
    arrow = ""
    for suffix, text in DIRECTIONS.items():
        if name.endswith(suffix):
            name, arrow = name[:-len(suffix)], text
    if not keep_unit:
        for suffix in UNIT_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[:-len(suffix)]
                break
    return name.replace("_", " ") + arrow


def asked_headings(command: str, options: list[str], table: str) -> list[str]:
    result = library_result(command, options)
    spec, view = result.spec(table), result.view.get(table)
    every = "--all" in options or not view
    by_column = {s.column: s for s in (view or ()) if s.column and not s.join}
    elsewhere = {}              # the heading another table's view gives the column, first
    for s in (s for v in result.view.values() for s in v):
        if s.column and s.heading and not s.join and not s.endpoints:
            elsewhere.setdefault(s.column, s.heading)
    names = [c.name for c in spec.columns if c.name != "capture" or command == "compare"] \
        if every else [s.column for s in view if s.column and not s.minor]
    headings, declared = {}, set()
    for name in names:
        column, s = spec.column(name), by_column.get(name)
        given = (s.heading if s is not None and s.heading else
                 getattr(column, "heading", None) or elsewhere.get(name))
        headings[name] = given or derived(name)
        if given:
            declared.add(name)
    counts = {}
    for h in headings.values():
        counts[h] = counts.get(h, 0) + 1
    # a derived heading another column also has keeps its unit word
    return [derived(n, keep_unit=True) if counts[h] > 1 and n not in declared else h
            for n, h in headings.items()]


_RESULTS: dict = {}


def library_result(command: str, options: list[str]):
    """The result whose spec and view the command prints (one capture that has every table;
    compare: the study, whose label columns depend on its captures)."""
    key = (command, tuple(o for o in options if o != "--all"))
    if key not in _RESULTS:
        kwargs = {LIBRARY_OPTIONS[o]: v for o, v in zip(options, options[1:])
                  if o in LIBRARY_OPTIONS}
        analysis = getattr(ps, ANALYSIS.get(command, command))
        capture = (SHIPPED if command == "compare" else PINGS if command in ("ping", "delay")
                   else UDP if command == "udp" else
                   str(DATA / "wpa2linkuppassphraseiswireshark.pcap") if command == "wifi"
                   else ONE)
        _RESULTS[key] = analysis(capture, **kwargs)
    return _RESULTS[key]
