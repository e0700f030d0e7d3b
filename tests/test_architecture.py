"""The package points one way: no module imports a higher layer, no import cycle, and a
function-local import of a pcapstats module says why it is there (``# lazy: ...``, start-up).

The layers are ARCHITECTURE.md's table, read here: a row a layer, bottom first, its modules
cell naming each module (``name``) or package (``name/``) of the layer.  A module may import its
own layer and the ones below.  Imports only for type checking (``if TYPE_CHECKING:``) are not
imports.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "pcapstats"
ARCHITECTURE = (ROOT / "ARCHITECTURE.md").read_text()
ROW = re.compile(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|$", re.M)
TABLE = [(int(m.group(1)), re.findall(r"`([^`]+)`", m.group(2)), m.group(3).strip())
         for m in ROW.finditer(ARCHITECTURE)]


def _prefix(name: str) -> str:
    """A modules-cell name as a module prefix: `streams/` -> pcapstats.streams."""
    name = name.rstrip("/")
    return "pcapstats" if name == "pcapstats" else f"pcapstats.{name}"


# Bottom first.  A module belongs to the first layer one of whose prefixes it starts with.
LAYERS: list[tuple[str, ...]] = [tuple(_prefix(n) for n in names) for _, names, _ in TABLE]


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def layer(module: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "pcapstats"):
            return i
    if module == "pcapstats":
        return len(LAYERS) - 1
    raise AssertionError(f"{module} is in no layer: add it to ARCHITECTURE.md's layer table")


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """The pcapstats modules an ``from X import a, b`` names (a submodule when a is one)."""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if not base.startswith("pcapstats"):
        return []
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in MODULES else base)
    return out


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if hasattr(sub, "lineno"):
                    lines.add(sub.lineno)
    return lines


def imports() -> list[tuple[str, str, int, bool, str]]:
    """(importer, imported, line, inside a function, source line) of every pcapstats import."""
    out = []
    for module, path in MODULES.items():
        source = path.read_text()
        tree = ast.parse(source)
        skip = _type_checking_lines(tree)
        local = {sub.lineno for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom))}
        lines = source.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(module, path, node)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("pcapstats")]
            else:
                continue
            if node.lineno in skip:
                continue
            for target in targets:
                out.append((module, target, node.lineno, node.lineno in local,
                            lines[node.lineno - 1]))
    return out


IMPORTS = imports()


def test_every_module_has_a_layer():
    for module in MODULES:
        layer(module)


def test_no_module_imports_a_higher_layer():
    upward = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)}), line {line}"
              for a, b, line, _, _ in IMPORTS if layer(b) > layer(a)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a, b, _, local, _ in IMPORTS:
        if b in graph and a != b and not local:
            graph[a].add(b)
    # the package __init__ files re-export what is below them: an edge to a parent package
    # is the parent's own business, not a cycle through it
    for a in graph:
        graph[a] = {b for b in graph[a] if not a.startswith(b + ".")}
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)


def test_function_local_imports_say_why():
    silent = [f"{a} line {line}: {text.strip()}" for a, _, line, local, text in IMPORTS
              if local and "# lazy:" not in text]
    assert not silent, "a function-local import of a pcapstats module needs a '# lazy: <why>' " \
                       "comment (only start-up time is a reason):\n" + "\n".join(silent)


def test_the_layer_table_is_a_row_a_layer_bottom_first():
    assert [number for number, _, _ in TABLE] == list(range(len(TABLE))), \
        "ARCHITECTURE.md's layer table: one row a layer, numbered from 0"
    named = [name for _, names, _ in TABLE for name in names]
    assert len(named) == len(set(named)), "a module is named in two rows"


@pytest.mark.parametrize("number,names,job", TABLE, ids=lambda v: str(v)[:20])
def test_each_row_names_what_is_there_and_says_its_job_in_a_sentence(number, names, job):
    for name in names:
        if name == "pcapstats":
            continue
        path = PACKAGE / name.rstrip("/")
        if name.endswith("/"):
            assert (path / "__init__.py").is_file(), f"layer {number}: `{name}` is no package"
        else:
            assert path.with_suffix(".py").is_file(), f"layer {number}: `{name}` is no module"
    assert job.endswith(".") and ". " not in job.rstrip("."), \
        f"layer {number}'s job is one sentence (the detail goes in the sections): {job}"
