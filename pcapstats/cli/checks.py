"""Every option and path of every command checked before the command runs, in one table.

:data:`OPTIONS` says what kind of value each option is -- an interval, a duration, a count, a
size, a stream, a file to read, an output to write -- and :func:`attach` puts the one check of
that kind (:mod:`pcapstats.units` for numbers, :mod:`pcapstats.paths` for paths) on the option
of every command that has it, as the command line is parsed: the same limits and the same
one-line refusal whichever command takes it, before any capture is read or any lab run starts.
An option is looked up as ``"COMMAND --option"`` first, then ``"--option"``;
``tests/cli/test_bounded_input.py`` holds every number and path option of every command in the
table,
so a new command's options are checked too.  Captures are checked by the reader, one capture at
a time (a capture that cannot be read fails alone, the others are answered).
"""

from __future__ import annotations

import functools
import math
import os
from typing import Callable

from .. import paths, units
from ..errors import UsageError

DAY = units.DAY_S
OFFSET_MAX_S = 1e9             # --from/--to: seconds since a capture's first packet (31 years)


def _offset(value, option):
    """--from / --to: a time in the capture, seconds since its first packet."""
    seconds = units._seconds(value, option)
    if not math.isfinite(seconds) or not 0 <= seconds <= OFFSET_MAX_S:
        raise UsageError(f"{option} {value:g}: no time in a capture",
                         hint="give seconds since the capture's first packet, 0 or more")
    return value


def _stream(value, option):
    """--stream: an index (0 or more), or "all" where the command takes it."""
    if value is None or value == "all" or isinstance(value, int):
        if isinstance(value, int):
            units.check_count(value, option)
        return value
    try:
        units.check_count(int(str(value).strip()), option)
    except ValueError:
        pass            # not a number: the command's own line (output.stream_choice)
    return value


def _count(low: int, high: int = units.COUNT_MAX):
    return lambda value, option: units.check_count(value, option, low=low, high=high)


def _limit(quantity: str):
    return lambda value, option: units.check_limit(value, option, quantity)


def _reads(what: str):
    return lambda value, option: paths.readable(value, what)


def _writes(what: str, directory: bool = False):
    return lambda value, option: paths.writable(value, what, directory=directory)


def _folder(value, option):
    """A directory to look in (lab cleanup): there, and a directory."""
    path = paths.check_name(value, "directory")
    if not os.path.isdir(path):
        raise UsageError("no such directory" if not os.path.exists(path) else
                         "not a directory", path=path, hint="name an output directory of the lab")
    return value


def _text(value, option):
    """Text parsed by the command with pcapstats.units (rates, times, sizes, loss), whose own
    parser says what is wrong in one line: nothing more to check here."""
    return value


# option -> check(value, option), raising UsageError.  "COMMAND --option" before "--option".
OPTIONS: dict[str, Callable] = {
    "--interval": units.check_interval,
    "--ping-interval": units.check_interval,
    "--tcp-info-interval": units.check_interval,
    "--gap": units.check_duration,
    "--time": units.check_duration,
    "lab run --time": lambda value, option: units.check_duration(value, option, zero=True),
    "--duration": units.check_duration,
    "lab run --start-offset": lambda value, option: units.check_duration(value, option, zero=True),
    "--from": _offset,
    "--to": _offset,
    "--stream": _stream,
    "--port": _limit("port"),
    "verify --port": _count(1, 65535),
    "--jobs": _limit("jobs"),
    "--parallel": _limit("parallel"),
    "--pairs": _limit("pairs"),
    "--hops": _limit("hops"),
    "--trials": _limit("trials"),
    "--ping-count": _limit("ping_count"),
    "--seed": _limit("seed"),
    "--snaplen": _limit("snaplen"),
    "--size": _limit("message"),
    "--sndbuf": _limit("buffer"),
    "--rcvbuf": _limit("buffer"),
    "--output": _writes("output"),
    "report --output": _writes("report"),
    "export --output": _writes("export", directory=True),
    "lab run --output": _writes("capture"),
    "capture --output": _writes("capture"),
    "lab matrix --output": _writes("output directory", directory=True),
    "--sidecar": _reads("sidecar"),
    "--study": _reads("study file"),
    "--client-output": _reads("client output"),
    "lab matrix spec": _reads("matrix spec"),
    "lab run --topology": _reads("topology file"),
    "lab cleanup directories": _folder,
    "--pair": lambda v, o: v,               # two captures: the reader checks each
    "--num": _text, "--bytes": _text, "--loss": _text, "--delay": _text, "--jitter": _text,
    "--rate": _text, "--queue": _text, "--udp-rate": _text, "--app-rate": _text,
    "--ping-sizes": _text, "--trials-for": _text,
}


def check_of(command: str, option: str) -> Callable | None:
    """The check of ``option`` (its longest flag, or an argument's name) in ``command``."""
    return OPTIONS.get(f"{command} {option}") or OPTIONS.get(option)


def attach(group) -> None:
    """Put each option's check on every command of the click ``group`` (typer's), before the
    callback the option already has."""
    for command, cmd in _commands(group, ""):
        for param in cmd.params:
            name = max(param.opts, key=len) if param.opts and param.opts[0].startswith("-") \
                else param.name
            check = check_of(command, name)
            if check is not None:
                param.callback = _checked(check, name, param.callback)


def _commands(group, prefix: str):
    for name, cmd in getattr(group, "commands", {}).items():
        path = f"{prefix} {name}".strip()
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, path)
        else:
            yield path, cmd


def _checked(check: Callable, option: str, then: Callable | None) -> Callable:
    @functools.wraps(check)
    def callback(ctx, param, value):
        if value is not None and not getattr(ctx, "resilient_parsing", False):
            if isinstance(value, (list, tuple)):
                for item in value:
                    check(item, option)
            else:
                check(value, option)
        return then(ctx, param, value) if then is not None else value
    return callback
