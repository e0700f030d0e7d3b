"""The README's commands and code, and the notebooks' cells, run as written (so they cannot rot)."""
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


def test_readme_python_blocks_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    for block in re.findall(r"```python\n(.*?)```", README, re.S):
        exec(compile(block, "README.md", "exec"), {})


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


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
