"""The live doctor checks the production configuration: on a release whose CUDA-graph runner resets the
capture ids (sglang 0.5.10, read from its wheel), a server whose prefill looks right is not healthy."""

from __future__ import annotations

import pytest

from tests.fixtures.toml_files import write_toml
from tests.live.conftest import copy_draft, lab_profile


def _release(version):
    """The release's wheel from PyPI (cached under ~/.cache/eagle-workbench); skip when offline."""
    from workbench.engine.wheels import unpacked

    try:
        unpacked("sglang", version)
    except Exception as exc:
        pytest.skip(f"sglang=={version} wheel not available: {exc}")


pytestmark = pytest.mark.slow


def _launch(lab_world, tmp_path, stop_servers, name, extra, version=None):
    from workbench.api import Workbench

    _release("0.5.10")
    root = tmp_path / name
    draft = copy_draft(lab_world, "draft_shifted", root / "drafts" / "shifted")  # ids [2, 6, 9]
    prof = lab_profile(lab_world, draft, root, "local")
    prof["launcher"] = [*prof["launcher"][:-1], "sglang==0.5.10"]
    prof["args"] = prof["args"] + extra
    if version:
        prof["sglang_version"] = version  # the launch is spelled (and checked) for that release
    write_toml(root / "workbench.toml", {"profiles": {name: prof}})
    wb = Workbench.open(root)
    stop_servers(wb)
    rec = wb.launch(name, confirm=True)
    assert wb.server_wait(rec.id, timeout=240, poll=0.5).state == "ready"
    return wb, rec


def test_decode_graphs_are_checked_before_healthy(lab_world, tmp_path, stop_servers):
    wb, rec = _launch(lab_world, tmp_path, stop_servers, "prod", [])
    report = wb.doctor_live(rec.id, measure=False, dump="no", static=False)
    f = [r for r in report.findings if r.code == "layer-ids-cuda-graph-defaults"]
    assert len(f) == 1 and f[0].source == "production" and f[0].finding.severity == "error"
    ev = f[0].finding.evidence
    assert ev["engine_points"] == ["out(2)", "out(6)", "out(9)"]
    assert ev["cuda_graph_points"] == ["out(1)", "out(5)", "out(8)"]
    assert ev["source"] in ("host", "shipped", "table") and any("cuda_graph_runner.py" in e for e in ev["code"])

    wb2, rec2 = _launch(lab_world, tmp_path, stop_servers, "debug", ["--disable-cuda-graph"], "0.5.10")
    report = wb2.doctor_live(rec2.id, measure=False, dump="no", static=False)
    assert not [r for r in report.findings if r.code == "layer-ids-cuda-graph-defaults"]
    assert any("CUDA graphs off" in n for n in report.notes)


def test_launch_preflight_refuses_from_the_files_alone(lab_world, tmp_path, stop_servers):
    """Knowing the release, the launch's pre-flight doctor sees the CUDA-graph override before starting."""
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="CUDA graphs that capture out\\(1\\), out\\(5\\), out\\(8\\)"):
        _launch(lab_world, tmp_path, stop_servers, "known", [], "0.5.10")
