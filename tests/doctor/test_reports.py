"""The doctor on real reports from the engines' and trainers' trackers, one case per class
(corpus/reports.json, each with its source URL): it names the cause on the release the report is
about, and raises no such finding on the release whose code fixed it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.doctor import run_static

ROOT = Path(__file__).parent / "corpus"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
REPORTS = json.loads((ROOT / "reports.json").read_text())["cases"]
RUNS = [(c, run) for c in REPORTS for run in c["runs"]]


def _draft(case: dict, target: Path, tmp: Path) -> Path:
    spec = case["draft"]
    d = tmp / "draft"
    if spec.get("target_folder"):  # the target passed as its own draft
        d.mkdir()
        shutil.copy(target / "config.json", d / "config.json")
        return d
    if "inline" in spec:
        d.mkdir()
        (d / "config.json").write_text(json.dumps(spec["inline"]))
        return d
    shutil.copytree(ROOT / "drafts" / spec["name"], d)
    cfg = json.loads((d / "config.json").read_text())
    for key, value in (spec.get("set") or {}).items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def _target(case: dict, tmp: Path) -> Path:
    cfg = json.loads((ROOT / MANIFEST["targets"][case["target"]]["file"]).read_text())
    for key in case.get("target_drop") or []:
        cfg.pop(key, None)
    t = tmp / "target"
    t.mkdir()
    (t / "config.json").write_text(json.dumps(cfg))
    return t


def test_every_report_names_its_source_and_class():
    assert len({c["class"] for c in REPORTS}) >= 8
    for c in REPORTS:
        assert c["url"].startswith("https://github.com/") and c["report"] and c["runs"]
        assert all("expect" in r or "forbid" in r for r in c["runs"])


@pytest.mark.parametrize("case,run", RUNS, ids=[f"{c['id']}@{r['engine']}" for c, r in RUNS])
def test_the_doctor_names_the_reported_cause(case, run, tmp_path):
    t = _target(case, tmp_path)
    d = _draft(case, t, tmp_path)
    r = run_static(
        d,
        t,
        engine=run["engine"],
        algorithm=case.get("algorithm", "EAGLE3"),
        trained_engine=case.get("trained_engine"),
    )
    codes = set(r.codes())
    for code in run.get("expect", []):
        assert code in codes, (code, [f.message for f in r.findings])
        f = next(f for f in r.findings if f.code == code)
        if f.evidence_class == "engine-code":  # the lines of the release's code it rests on
            assert f.evidence["code"] and f.evidence["read_from"].startswith(run["engine"])
    for code in run.get("forbid", []):
        assert code not in codes, (code, [f.message for f in r.findings if f.code == code])
