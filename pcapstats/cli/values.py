"""Command-line values as typer coerces them, without loading pydantic (~50 ms of every run).

typer 0.29 turns every parameter's value, a default included, into its declared type through
a pydantic TypeAdapter built on first use: a command's first parameter imports pydantic
(~45 ms of CPU, a sixth of a command's start-up) and each builds an adapter.  :func:`install`
gives each parameter of a built command a :class:`Plain` coercion that returns typer's own
answer where it is plain to tell -- a value of the declared type already (a default), a
number written as digits (a sign, a point, an exponent), a str, a path (typer's own path
checks), a choice (typer's own matching), lists and tuples of those -- and hands every other
value, and every value these refuse, to typer's own coercion: every error, and every unusual
spelling (``1_000``, `` 2``, ``inf``), is typer's, word for word.  tests/cli/test_startup.py
holds the two equal on every parameter of every command.

It uses three of typer's private names; a typer without them keeps its own coercion whole
(:func:`install` does nothing) and the test says so.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from pathlib import Path
from typing import Any, Callable, get_args, get_origin

try:
    from typer._coercion import build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path
except ImportError:                       # another typer: its own coercion throughout
    build_runtime_param = None

_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")   # ASCII digits:
_INT = re.compile(r"[+-]?[0-9]{1,18}")                   # float('١') is 1.0, pydantic's an error
_EXACT = 2 ** 53                          # ints up to this are floats exactly


class _Unsure(Exception):
    """A value :class:`Plain` leaves to typer's own coercion."""


def install(command) -> None:
    """Give every typer parameter of ``command`` and of its subcommands, their ``--help``
    included (made when first asked for), a :class:`Plain` coercion (one that opens files
    keeps typer's: it uses no pydantic)."""
    if build_runtime_param is None:
        return
    for param in command.params:
        _plain(param)
    made = command.get_help_option

    def get_help_option(ctx):
        return _plain(made(ctx))
    command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        install(sub)


def _plain(param):
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and getattr(param, "_runtime_param", False) is None \
            and descriptor.file_annotation is None:
        param._runtime_param = Plain(descriptor)
    return param


class Plain:
    """One parameter's coercion (typer's ``RuntimeParam.coerce``): typer's answer for a plain
    value, typer's own coercion for the rest (``delegated`` counts those)."""

    def __init__(self, descriptor):
        self.descriptor = descriptor
        self.own = None                   # typer's RuntimeParam, built when first needed
        self.delegated = 0
        annotation, info = descriptor.annotation, descriptor.parameter_info
        origin, args = get_origin(annotation), get_args(annotation)
        if origin is list and len(args) == 1 and _leaf(args[0], info):
            self.plain = _listed(_leaf(args[0], info))
        elif origin is tuple and args and all(_leaf(a, info) for a in args):
            self.plain = _tupled([_leaf(a, info) for a in args])
        else:
            self.plain = _leaf(annotation, info) or _unsure

    def coerce(self, value: Any, param, ctx) -> Any:
        several = param.multiple or param.nargs == -1
        if value is None:
            return () if several else None
        if not (several and isinstance(value, str)):
            try:
                return self.plain(value, param, ctx)
            except Exception:             # _Unsure, or refused: typer says why, its way
                pass
        self.delegated += 1
        if self.own is None:
            self.own = build_runtime_param(self.descriptor)
        return self.own.coerce(value, param=param, ctx=ctx)


def _unsure(value, param, ctx):
    raise _Unsure


def _leaf(annotation, info) -> Callable | None:
    """The plain coercion of one value to ``annotation`` (typer's order of kinds), or None."""
    if info.parser is not None or not isinstance(annotation, type):
        return None
    if issubclass(annotation, Enum):
        choices = list(annotation)
        return lambda value, param, ctx: coerce_cli_choice(
            value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx)
    if annotation in (int, float):
        return _number(annotation, info)
    if annotation in (bool, str):
        return _already(annotation)
    if issubclass(annotation, Path) and info.path_type is None:
        def path(value, param, ctx):
            if type(value) is str:
                value = annotation(value)     # what pydantic makes of a str, as typer asks it
            elif not isinstance(value, annotation):
                raise _Unsure
            return coerce_cli_path(value, info, path_type=annotation, param=param, ctx=ctx)
        return path
    return None


def _already(kind: type) -> Callable:
    """A value of exactly ``kind``, as it is (what typer makes of a str, and of a bool)."""
    def already(value, param, ctx):
        if type(value) is not kind:
            raise _Unsure
        return value
    return already


def _number(kind: type, info) -> Callable:
    """An int or a float: from digits, or a value of the kind (a float from an exact int),
    within typer's ``min`` / ``max`` (outside them, and ``clamp``: typer's own)."""
    pattern = _INT if kind is int else _FLOAT
    low, high = info.min, info.max
    if info.clamp:
        return _unsure

    def number(value, param, ctx):
        if type(value) is str and pattern.fullmatch(value):
            value = kind(value)
        elif type(value) is int and (kind is int or abs(value) <= _EXACT):
            value = kind(value)
        elif type(value) is not kind:
            raise _Unsure
        if kind is float and not math.isfinite(value):
            raise _Unsure
        if (low is not None and not value >= low) or (high is not None and not value <= high):
            raise _Unsure
        return value
    return number


def _listed(leaf: Callable) -> Callable:
    def listed(value, param, ctx):
        items = value if isinstance(value, (list, tuple)) else [value]
        return [leaf(item, param, ctx) for item in items]
    return listed


def _tupled(leaves: list[Callable]) -> Callable:
    def tupled(value, param, ctx):
        if not isinstance(value, (list, tuple)) or len(value) != len(leaves):
            raise _Unsure
        return tuple(leaf(item, param, ctx) for leaf, item in zip(leaves, value))
    return tupled
