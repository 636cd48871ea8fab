"""The live doctor on this machine's lab server that does not return hidden states: the drafter
still predicts accept length from the training data, the layers are left unnamed when no dump is
allowed, and the CLI says so in text."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.toml_files import write_toml
from tests.live.conftest import copy_draft, lab_profile
from workbench.live.report import LiveReport

pytestmark = pytest.mark.slow


def test_without_hidden_states_and_without_a_dump(lab_world, tmp_path, stop_servers, cli):
    from workbench.api import Workbench

    draft = copy_draft(lab_world, "draft_shifted", tmp_path / "drafts" / "shifted")
    prof = lab_profile(lab_world, draft, tmp_path, "local")
    prof["args"] = ["--host", "127.0.0.1"]  # no --enable-return-hidden-states
    write_toml(
        tmp_path / "workbench.toml",
        {"profiles": {"plain": prof}, "live": {"": {"training_data": lab_world["training_data"]}}},
    )
    wb = Workbench.open(tmp_path)
    stop_servers(wb)
    rec = wb.launch("plain", confirm=True)
    assert wb.server_wait(rec.id, timeout=240, poll=0.5).state == "ready"

    report = wb.doctor_live(rec.id, measure=False, dump="no", eval_samples=4)
    assert report.alignment is None and report.pending is None
    assert "does not return hidden states" in report.features.verdict
    assert report.predicted.accept_length > 1.0 and "4 training samples" in report.predicted.source
    assert any("not named yet" in n for n in report.notes)
    assert [f.source for f in report.findings] == ["static"] * len(report.findings)
    # the journal entry (stored with sorted keys) keeps the dict form, with the keys the doctor wrote
    entry = wb.events("live.doctor")[-1].payload
    assert entry["features"] == report.features.to_dict() and entry["features"]["verdict"] == report.features.verdict
    assert {"verdict", "train_accept_length", "live_accept_length", "samples"} <= set(entry["features"])
    assert sorted(entry["observed"]) == ["accept_length", "source", "tokens_per_s"]
    assert sorted(entry["predicted"]) == ["accept_length", "samples", "source"]
    assert entry["predicted"]["accept_length"] == report.predicted.accept_length

    r = cli(
        "--workspace",
        str(tmp_path),
        "doctor",
        "--server",
        str(rec.id),
        "--no-measure",
        "--dump",
        "no",
        "--eval-samples",
        "4",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-1500:]
    assert f"server {rec.id} (plain on local" in r.stdout and "does not return hidden states" in r.stdout
    assert "predicted" in r.stdout and "Traceback" not in r.stderr

    r = cli(
        "--workspace",
        str(tmp_path),
        "--json",
        "doctor",
        "--server",
        str(rec.id),
        "--no-measure",
        "--dump",
        "no",
        "--eval-samples",
        "4",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-1500:]
    out = json.loads(r.stdout)
    assert list(out["spec"]) == ["algorithm", "steps", "topk", "draft_tokens"] and out["alignment"] is None
    assert list(out["predicted"]) == ["accept_length", "acc", "source", "samples", "full_acc"]
    assert list(out["features"])[:4] == ["verdict", "train_accept_length", "live_accept_length", "samples"]
    assert list(out["observed"]) == ["accept_length", "tokens_per_s", "source"]
    assert list(out["draft"])[-1] == "changed_since_launch"
    back = LiveReport.from_dict(out)
    assert back.spec.steps == report.spec.steps and back.features.verdict == report.features.verdict
    for name in ("spec", "target", "draft", "observed", "predicted", "features"):
        assert json.dumps(back.to_dict()[name]) == json.dumps(out[name]), name
