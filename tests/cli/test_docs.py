"""The README's commands and code, and the notebooks' cells, run as written (so they cannot rot)."""
import json
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


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_cells_run(notebook, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.chdir(notebook.parent)
    ns: dict = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), str(notebook), "exec"), ns)
