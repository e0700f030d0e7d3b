"""A command's start-up loads what it uses and no more (issue 29: the fixed cost of every
command), and what it skips changes nothing.

- ``pcapstats COMMAND`` imports COMMAND's module of pcapstats/cli alone (cli/commands.py), no
  other analysis, and none of pydantic, pandas, matplotlib, rich: read from ``python -X
  importtime``'s list of what the process imported;
- cli/commands.py's table is what the command modules register, in ``--help``'s order;
- the coercion that spares pydantic (cli/values.py) gives typer's own answer, value and
  type, or typer's own error, word for word, for every parameter of every command.
"""
from __future__ import annotations

import math
import re
import subprocess
import sys
from enum import Enum
from pathlib import Path

import pytest
from typer._click import Context
from typer._coercion import build_runtime_param

from pcapstats.cli import commands, main, values
from pcapstats.cli.app import _click_command
from tests.helpers.paths import CAPTURES, ROOT

TCP = str(CAPTURES / "sp-reno-loss1pct.pcap")
HEAVY = ("pydantic", "pandas", "matplotlib", "rich")
# what every command that reads captures uses of pcapstats/cli besides its own module
SHARED = {"pcapstats.cli", "pcapstats.cli.app", "pcapstats.cli.commands", "pcapstats.cli.checks",
          "pcapstats.cli.values", "pcapstats.cli.output"}
HELPERS = {"__init__", "app", "commands", "checks", "values", "output", "impairment"}


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """A whole ``python -X importtime -m pcapstats ARGS`` run and every module it imported."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "pcapstats", *args],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", run.stderr, re.M))
    assert "pcapstats.cli.app" in modules, run.stderr[-2000:]
    return run, modules


@pytest.mark.parametrize("command, module", [("throughput", "throughput"), ("retrans", "tcp"),
                                             ("rtt", "tcp")])
def test_an_analysis_command_imports_its_own_module_and_nothing_heavy(command, module):
    run, modules = imported(command, TCP, "--format", "csv")
    assert run.returncode == 0 and run.stdout.count("\n") >= 2, run.stderr[-2000:]
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"`pcapstats {command}` imported {heavy}"
    clis = {m for m in modules if m.startswith("pcapstats.cli")}
    assert clis == SHARED | {f"pcapstats.cli.{module}"}, sorted(clis)
    analyses = {m for m in modules if m.startswith("pcapstats.analyses.")}
    assert f"pcapstats.analyses.{command}" in analyses
    assert not {m for m in analyses if m.rsplit(".", 1)[1] in
                {"iograph", "flavour", "cwnd", "seqgraph", "fairness", "udp", "ping", "verify"}}


def test_help_lists_every_command_and_imports_nothing_heavy():
    """Nor numpy: listing the commands reads no capture."""
    run, modules = imported("--help")
    assert run.returncode == 0
    listed = re.findall(r"^  (\S+)  ", run.stdout.split("Commands:")[1], re.M)
    assert listed == list(commands.COMMANDS)
    assert not sorted(m for m in modules if m.split(".")[0] in (*HEAVY, "numpy"))
    run, modules = imported("lab", "run", "--help")
    assert run.returncode == 0 and "--rate" in run.stdout
    assert not sorted(m for m in modules if m.split(".")[0] in (*HEAVY, "numpy"))


def test_the_table_is_what_the_modules_register_in_help_order():
    """Every command module of pcapstats/cli is in the table with exactly the commands it
    registers, and ``--help`` lists them in the table's order even when another command's
    module was imported first (a notebook or test running main() several times)."""
    files = {p.stem for p in (ROOT / "pcapstats" / "cli").glob("*.py")} - HELPERS
    assert set(commands.COMMANDS.values()) == files
    code = ("import sys, pcapstats.cli.tcp, pcapstats.cli.lab; from pcapstats.cli.app import "
            "app, _click_command; g = _click_command(); "
            "cmds = {c.name or c.callback.__name__: c.callback.__module__ "
            "for c in app.registered_commands}; "
            "cmds.update({i.name: i.typer_instance.registered_commands[0].callback.__module__ "
            "for i in app.registered_groups}); print(list(g.commands)); print(cmds)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    order, registered = map(eval, run.stdout.splitlines())
    assert order == list(commands.COMMANDS), run.stderr
    assert registered == {name: f"pcapstats.cli.{module}"
                          for name, module in commands.COMMANDS.items()}


def test_asked_is_the_first_word_alone():
    assert commands.asked(["rtt", "x.pcap"]) == "rtt"
    for argv in ([], ["--help", "rtt"], ["--version"], ["nosuch", "x"], ["x.pcap", "rtt"]):
        assert commands.asked(argv) is None


def test_a_mistyped_command_is_still_one_line_with_its_suggestion(capsys):
    assert main(["throughpt", TCP]) == 2
    err = capsys.readouterr().err
    assert err == ("pcapstats: error: No such command 'throughpt'. Did you mean 'throughput'? "
                   "(see `pcapstats --help`)\n")


# -- cli/values.py against typer's own coercion -------------------------------------------

NUMBERS = ["0", "1", "-1", "+1", "01", "007", "-0", "1.0", "1.", "-0.0", ".5", "-.5", "1e3",
           "1E+3", "2.5e-3", "1e400", "-1e400", "1e-400", "1.5e", "1_0", " 1", "1 ", "inf",
           "nan", "-inf", "0x10", "", "  ", "abc", "9" * 18, "9" * 19, "9" * 30, "65535",
           "65536", "0.001", "0.0009", "١"]
PATHS = ["x.pcap", TCP, str(CAPTURES), "-", "a//b", "./x", "~/x", "/", "/nonexistent/y",
         "a\udcff", "é"]
WORDS = ["csv", "CSV", " csv", "tcp", "Tcp", "auto", "c", "numpy", "fast", "tshark", "all",
         "nosuch"]


def _parameters():
    """(command path, click parameter) of every parameter of every command, --help too."""
    group = _click_command()
    ctx = Context(group, info_name="pcapstats")
    out = []

    def walk(command, path):
        for param in [*command.params, command.get_help_option(ctx)]:
            if param is not None and hasattr(param, "type_descriptor"):
                out.append((path, param))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")
    walk(group, "pcapstats")
    return out


PARAMETERS = _parameters()


def _answer(runtime, value, param, ctx):
    try:
        return "value", _typed(runtime.coerce(value, param=param, ctx=ctx))
    except Exception as e:                                       # noqa: BLE001
        text = e.format_message() if hasattr(e, "format_message") else str(e)
        return "error", (type(e).__name__, text)


def _typed(value):
    """A value with the type of every part, -0.0 and nan told apart."""
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [_typed(v) for v in value]
    if isinstance(value, float):
        return "float", repr(value) if not math.isnan(value) else "nan"
    return type(value).__name__, value


def _inputs(param):
    """Each parameter's default, and what people type, of every kind (a number to a path
    option, a word to a number: the errors must be typer's too)."""
    descriptor = param.type_descriptor
    several = param.multiple or param.nargs == -1 or param.nargs > 1
    base = [*NUMBERS, *PATHS, *WORDS]
    annotation = descriptor.annotation
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        base += [m.value for m in annotation] + [m.value.upper() for m in annotation] + \
            list(annotation)
    singles = [param.default, None, 1, 2.5, True, Path("x.pcap"), *base]
    if not several:
        return singles
    return singles + [tuple(base[:3]), ("1", "2"), (TCP, "x.pcap"), ("x.pcap",), (), [TCP],
                      tuple(PATHS), ("1", "nan")]


@pytest.mark.skipif(values.build_runtime_param is None, reason="this typer has no _coercion: "
                    "cli/values.py leaves typer's coercion whole")
@pytest.mark.parametrize("path, param", PARAMETERS,
                         ids=[f"{p} {q.name}" for p, q in PARAMETERS])
def test_plain_coercion_is_typers(path, param):
    ctx = Context(_click_command(), info_name="pcapstats")
    ours, theirs = values.Plain(param.type_descriptor), build_runtime_param(param.type_descriptor)
    for value in _inputs(param):
        assert _answer(ours, value, param, ctx) == _answer(theirs, value, param, ctx), \
            f"{path} {param.name}: {value!r}"


@pytest.mark.skipif(values.build_runtime_param is None, reason="this typer has no _coercion: "
                    "cli/values.py leaves typer's coercion whole")
def test_plain_coercion_needs_no_pydantic_for_a_default_or_a_plain_value():
    """Not a check that holds by doing nothing: every parameter's default, and the plain values
    people type, are answered without typer's own (pydantic's) coercion."""
    ctx = Context(_click_command(), info_name="pcapstats")
    plain = {int: "3", float: "0.25", str: "x", bool: True}
    for path, param in PARAMETERS:
        ours = values.Plain(param.type_descriptor)
        ours.coerce(param.default, param, ctx)
        annotation = param.type_descriptor.annotation
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            ours.coerce(list(annotation)[-1].value, param, ctx)
        elif annotation in plain:
            ours.coerce(plain[annotation], param, ctx)
        elif param.nargs == -1:
            ours.coerce((TCP, "x.pcap"), param, ctx)
        assert ours.delegated == 0, f"{path} {param.name}: {annotation}"
    subprocess_check = ("import sys; from pcapstats.cli import main; "
                        "main(['throughput', sys.argv[1], '-i', '0.5', '-s', '0', '-p', 'tcp', "
                        "'-f', 'csv', '-j', '1']); print('pydantic' in sys.modules, "
                        "file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", subprocess_check, TCP], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert run.stderr.strip().splitlines()[-1] == "False", run.stderr


def test_a_refused_value_is_typers_error_line(capsys):
    for argv, text in (
            (["throughput", TCP, "-i", "abc"], "Invalid value for '--interval' / '-i': "
                                               "Input should be a valid number, unable to "
                                               "parse string as a number"),
            (["throughput", TCP, "-j", "x"], "Invalid value for '--jobs' / '-j': Input "
                                             "should be a valid integer, unable to parse "
                                             "string as an integer"),
            (["throughput", TCP, "-p", "sctp"], "Invalid value for '--proto' / '-p': "
                                                "Value error, 'sctp' is not one of 'tcp', "
                                                "'udp'.")):
        assert main(argv) == 2
        assert capsys.readouterr().err == \
            f"pcapstats: error: {text} (see `pcapstats throughput --help`)\n"
