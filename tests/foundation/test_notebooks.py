"""Every notebook in notebooks/ runs top to bottom as a user runs it: ``jupyter execute`` (the
kernel in notebooks/), from an unrelated working directory, with an empty home; and with the
kernel in another folder again, so no cell depends on where it runs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EAGLE_WORKBENCH")}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_under_jupyter_execute(path, tmp_path):
    home, elsewhere, scratch = tmp_path / "home", tmp_path / "elsewhere", tmp_path / "tmp"
    for d in (home, elsewhere, scratch):
        d.mkdir()
    jupyter = Path(sys.executable).parent / "jupyter"
    # the notebooks' scratch folders (tempfile.mkdtemp) land in the test's own folder, not the system's
    r = subprocess.run(
        [str(jupyter), "execute", "--timeout=300", str(path)],
        cwd=elsewhere,
        env={**_env(home), "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # a notebook tries things in a scratch workspace: the user's ~/.eagle-workbench is not touched
    assert not (home / ".eagle-workbench").exists()


def test_path_sensitive_notebook_runs_with_the_kernel_anywhere(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    home = tmp_path / "home"
    home.mkdir()
    for k, v in _env(home).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's scratch copies land here
    monkeypatch.delenv("EAGLE_WORKBENCH_HOME", raising=False)
    nb = nbformat.read(ROOT / "notebooks" / "02_doctor_and_reverts.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "layer-ids-embedding" in text and "1-layer shift" in text
