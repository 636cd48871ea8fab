"""Every notebook in notebooks/ runs top to bottom as a user runs it: ``jupyter execute`` from an
unrelated working directory, with an empty home; and with the kernel in another folder again, so
no cell depends on where it runs. What the cells print is the workbench's own: no third-party
progress bar, and no value left as a bare ``None`` (a failing engine says why)."""

import json
import os
import re
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
    run = elsewhere / path.name  # a copy, run in place there: its outputs are read below
    run.write_bytes(path.read_bytes())
    # the notebooks' scratch folders (tempfile.mkdtemp) land in the test's own folder, not the system's
    r = subprocess.run(
        [str(jupyter), "execute", "--inplace", "--timeout=300", str(run)],
        cwd=elsewhere,
        env={**_env(home), "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # a notebook tries things in a scratch workspace: the user's ~/.eagle-workbench is not touched
    assert not (home / ".eagle-workbench").exists()
    assert unexplained_outputs(json.loads(run.read_text())) == []


#: What a tqdm bar prints ("Writing model shards:  0%|   | 0/1 [00:00<?, ?it/s]").
PROGRESS_BAR = re.compile(r"\d+%\||it/s\]|s/it\]")
#: A value printed as Python's None (in a list, a dict, after a label, or alone), not prose that
#: names Python's None (SGLang's code "adds a None residual").
BARE_NONE = re.compile(r"[\[(,:=]\s*None\b|\bNone\s*[\]),]|^\s*None\s*$", re.M)


def unexplained_outputs(nb: dict) -> list[str]:
    """Outputs a reader should not meet: progress bars of the libraries underneath, and None
    standing for a value that has a reason (an engine that fails, a field a release does not log)."""
    bad = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", ""))
            if PROGRESS_BAR.search(text):
                bad.append(f"cell {i}: a progress bar: {text[:80]!r}")
            widget = "application/vnd.jupyter.widget-view+json" in data
            if not widget and BARE_NONE.search(text):
                bad.append(f"cell {i}: a bare None: {text[max(0, BARE_NONE.search(text).start() - 60) :][:120]!r}")
    return bad


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
