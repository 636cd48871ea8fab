"""The core stays headless and light: checked in fresh interpreters, as the faces would import it."""

import json
import subprocess
import sys

from tests.conftest import ROOT

HEAVY = ["textual", "ipywidgets", "rich", "torch", "transformers", "sglang"]


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_api_pulls_in_no_face_and_no_torch():
    assert _loaded_after("import workbench.api") == []


def test_predicting_through_the_api_stays_headless(tmp_path):
    code = (
        f"from workbench.api import Workbench\nwb = Workbench.open({str(tmp_path)!r})\n"
        "wb.predict(acc=[0.75], steps=5, topk=1, draft_tokens=6, observed_accept_length=1.12)\n"
        "wb.predict_sweep(acc=[0.75], verify_ms={2: 20, 6: 24}, draft_ms=1)\nwb.fit({1: 1.8, 2: 2.4})"
    )
    assert _loaded_after(code) == []


def test_cli_help_imports_no_textual_and_no_torch():
    code = (
        "from workbench.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "try:\n    main(['predict', '--help'])\nexcept SystemExit:\n    pass"
    )
    assert _loaded_after(code) == []


def _imports(path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


FACES = {"tui": "workbench.tui", "notebook": "workbench.notebook", "cli": "workbench.cli"}
#: The one crossing allowed: the command line opens the terminal UI (no subcommand, ``demo``).
ENTRY_POINTS = {("cli", "workbench.tui.app"), ("cli", "workbench.tui.demo")}
#: Core functions a face must reach through ``workbench.api`` instead (each has an API method).
PAST_THE_API = {"workbench.drafter.evaluate"}


def test_faces_do_not_import_each_other_nor_reach_past_the_api():
    crossings = []
    for face in FACES:
        for path in (ROOT / "workbench" / face).rglob("*.py"):
            for mod in _imports(path):
                for other, other_pkg in FACES.items():
                    if (
                        other != face
                        and (mod == other_pkg or mod.startswith(other_pkg + "."))
                        and (face, mod) not in ENTRY_POINTS
                    ):
                        crossings.append(f"{path.relative_to(ROOT)} imports {mod}")
                if mod in PAST_THE_API:
                    crossings.append(f"{path.relative_to(ROOT)} imports {mod} (use workbench.api)")
    assert crossings == []
