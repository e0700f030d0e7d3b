"""Every command's default output on every shipped capture (and the public ones) fits the
terminal it is printed on, in human units: no line wider than 80 or 100 columns, no
e-notation, and the units said under the headings."""
import re

import pytest
from tests.helpers.paths import CAPTURES, DATA, PUBLIC

from pcapstats.cli import main

SHIPPED = sorted(str(p) for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
PUBLIC_FILES = sorted(str(DATA / name) for name in PUBLIC)
COMMANDS = ["throughput", "iograph", "retrans", "cwnd", "wscale", "rtt", "seqgraph",
            "flavour", "verify", "ping", "udp", "fairness", "delay", "compare"]
E_NOTATION = re.compile(r"\d\.?\d*e[+-]\d\d")


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("command", COMMANDS)
def test_default_output_fits_the_terminal(command, width, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(width))
    main([command, *SHIPPED])
    out = capsys.readouterr().out
    assert out.strip(), f"{command} printed nothing"
    wide = [line for line in out.splitlines() if len(line) > width]
    assert not wide, f"{command} at {width} columns: {len(wide)} lines wider, e.g. {wide[0]!r}"
    assert not E_NOTATION.search(out), f"{command}: e-notation in {E_NOTATION.search(out)[0]!r}"


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("options", [["--by", "cc,loss"], ["--by", "tool", "--captures"]],
                         ids=["groups", "captures"])
def test_compare_by_labels_fits_the_terminal(options, width, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["compare", *SHIPPED, *options]) == 0
    out = capsys.readouterr().out
    wide = [line for line in out.splitlines() if len(line) > width]
    assert not wide, f"compare {options} at {width} columns: e.g. {wide[0]!r}"
    assert not E_NOTATION.search(out)


@pytest.mark.parametrize("command", ["throughput", "retrans", "rtt", "cwnd", "flavour"])
def test_public_captures_fit_too(command, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    main([command, *PUBLIC_FILES])
    out = capsys.readouterr().out
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert not wide, f"{command}: {len(wide)} lines wider than 100, e.g. {wide[0]!r}"


def test_rates_are_in_bits_per_second_units(monkeypatch, capsys):
    """The throughput table says Mbit/s (or kbit/s) under its rates, as the figures do."""
    monkeypatch.setenv("COLUMNS", "100")
    main(["throughput", str(CAPTURES / "sp-reno-loss10pct.pcap")])
    lines = capsys.readouterr().out.splitlines()
    assert "avg A→B" in lines[0] and re.search(r"\b[kMG]?bit/s\b", lines[1]), lines[:2]


def test_columns_help_fits(monkeypatch, capsys):
    main(["columns"])
    wide = [line for line in capsys.readouterr().out.splitlines() if len(line) > 100]
    assert not wide, wide[:3]
