"""The README's commands and code, and the notebooks' cells, run as written (so they cannot rot),
the notebooks through the public API alone (``import pcapstats as ps``, names in ``ps.__all__``)."""
import ast
import re
import subprocess
import sys

import pandas as pd
import pytest
from tests.helpers.paths import ROOT

README = (ROOT / "README.md").read_text()


def _main_command() -> str:
    m = re.search(r"^    pip install \. && (pcapstats .+)$", README, re.M)
    assert m, "README lost its one-command main job"
    return m.group(1)


def test_readme_main_command_runs_on_the_shipped_capture():
    args = _main_command().split()[1:]
    assert (ROOT / args[-1]).exists(), f"README names {args[-1]}, which is not shipped"
    proc = subprocess.run([sys.executable, "-m", "pcapstats", *args, "--format", "csv"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    import io
    table = pd.read_csv(io.StringIO(proc.stdout))
    assert len(table) >= 1 and table["packets"].sum() > 0


def test_readme_test_command_is_what_ci_runs():
    m = re.search(r"^    (bash \.ci/setup && .+)$", README, re.M)
    assert m, "README lost its one-command test set-up"
    ci = (ROOT / ".ci" / "run").read_text()
    assert m.group(1).split("&& ", 1)[1] in ci


@pytest.mark.slow
def test_readme_python_blocks_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    for block in re.findall(r"```python\n(.*?)```", README, re.S):
        exec(compile(block, "README.md", "exec"), {})


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _private_uses(source: str) -> list[str]:
    """What a cell reaches past the API for: a pcapstats module imported (anything but
    ``import pcapstats as ps``), or a ``ps.NAME`` that is not in ``ps.__all__``."""
    import pcapstats as ps
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [f"import {a.name}" for a in node.names if a.name.split(".")[0] ==
                    "pcapstats" and (a.name, a.asname) != ("pcapstats", "ps")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pcapstats"):
            out.append(f"from {node.module} import ...")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "ps" and node.attr not in ps.__all__):
            out.append(f"ps.{node.attr}")
    return out


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_uses_only_the_public_api(notebook):
    import nbformat
    nb = nbformat.read(notebook, as_version=4)
    used = [u for c in nb.cells if c.cell_type == "code" for u in _private_uses(c.source)]
    assert not used, f"{notebook.name} reaches past pcapstats' API: {used}"
    assert any("import pcapstats as ps" in c.source for c in nb.cells)


def test_the_api_check_sees_what_it_must():
    assert _private_uses("from pcapstats.sidecar import load_sidecar\nimport pcapstats.plots\n"
                         "import pcapstats as ps\nps.results.describe('x')\nps.cwnd(f)") == [
        "from pcapstats.sidecar import ...", "import pcapstats.plots", "ps.results"]


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel_and_shows_its_figures(notebook):
    """Executed by a real Jupyter kernel, as a user runs it: every cell runs, and every cell
    tagged ``figure`` shows an image (not ``<Figure size 960x540 with 1 Axes>`` as text)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    tagged = [c for c in code if "figure" in c.metadata.get("tags", [])]
    assert tagged, f"{notebook.name}: no cell is tagged as drawing a figure"
    for cell in code:
        kinds = {k for o in cell.outputs for k in o.get("data", {})}
        texts = [o["data"].get("text/plain", "") for o in cell.outputs
                 if "data" in o and "image/png" not in o["data"]]     # text with no image
        assert not any(t.startswith("<Figure size") for t in texts), \
            f"{notebook.name}: a figure shown as text in cell {cell.source[:60]!r}"
        if cell in tagged:
            assert "image/png" in kinds, f"{notebook.name}: no image from {cell.source[:60]!r}"
