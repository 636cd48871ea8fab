"""The live doctor over a real sshd against the lab server: the planted one-layer shift
(``draft_shifted``) found from hidden states alone (static checks off), named by a tensor-dump
relaunch, fixed through the config history on the host, relaunched, measured and compared."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.toml_files import write_toml
from tests.live.conftest import copy_draft, lab_profile

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture
def remote_ws(sshd, lab_world, tmp_path, stop_servers):
    from workbench.api import Workbench

    sshd.write_known_hosts()
    if sshd.proc is None:
        sshd.start()
    draft = copy_draft(lab_world, "draft_shifted", tmp_path / "drafts" / "shifted")
    write_toml(
        tmp_path / "workbench.toml",
        {
            "hosts": {"gpu": sshd.host_table()},
            "profiles": {"shifted": lab_profile(lab_world, draft, tmp_path, "gpu")},
            "live": {"": {"training_data": lab_world["training_data"]}},
        },
    )
    wb = Workbench.open(tmp_path)
    stop_servers(wb)
    return wb, draft


def _ready(wb, profile):
    rec = wb.launch(profile, confirm=True)
    st = wb.server_wait(rec.id, timeout=240, poll=0.5)
    assert st.state == "ready", (st.state, st.failure)
    return rec


def test_live_doctor_finds_the_shift_from_hidden_states_and_the_fix_recovers(remote_ws, lab_world, cli):
    wb, draft = remote_ws
    rec = _ready(wb, "shifted")
    trained = lab_world["layers"]["trained"]
    shifted = lab_world["layers"]["draft_shifted"]
    assert shifted == [i + 1 for i in trained]

    # without consent the dump is only proposed; the packed features already disagree
    r0 = wb.doctor_live(rec.id, static=False, measure_tokens=16, eval_samples=8, dump="ask", confirm=False)
    assert r0.pending is not None and "--debug-tensor-dump-output-folder" in r0.pending.summary
    assert [f.code for f in r0.findings] == ["layer-ids-engine-mismatch"] and r0.fix is None
    assert r0.alignment.mode == "payload" and r0.alignment.cols_physical == [f"out({i})" for i in shifted]

    report = wb.doctor_live(rec.id, static=False, measure=False, eval_samples=8, dump="yes", dump_alongside=True)
    assert all(f.source == "hidden states" for f in report.findings)  # no static hint involved
    top = report.findings[0]
    assert top.code == "layer-ids-engine-mismatch" and top.severity == "error"
    ev = top.finding.evidence
    assert ev["source"] == "numeric alignment" and ev["shift"] == 1
    assert ev["config_ids"] == shifted and ev["trained_points"] == [f"out({i})" for i in trained]
    assert ev["recommended_ids"] == trained
    assert [b.verdict for b in report.alignment.best] == ["match"] * 3
    assert report.alignment.mode == "dump" and report.alignment.tokens_compared >= 200
    assert report.fix.file == f"gpu:{draft}/config.json"
    assert report.fix.edits[0].key == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert report.fix.edits[0].value == trained
    # the drafter on the server's features vs on the training features: what the shift costs
    ft = report.features
    assert ft.train_accept_length > 1.5 and ft.live_accept_length > 1.0
    assert top.explains == pytest.approx(ft.train_accept_length - ft.live_accept_length)
    assert report.observed.accept_length > 1.0 and report.predicted.accept_length > 1.0
    # every host job ran over SSH and reported what it moved
    assert report.transfers and all(t.host == "gpu" and t.wire_sent for t in report.transfers)
    assert wb.server(rec.id).state == "ready"  # the dump ran alongside; the dump server is gone
    dump_servers = [s for s in wb.servers() if s.profile == "shifted@dump"]
    assert len(dump_servers) == 1 and dump_servers[0].state == "stopped"

    # the journal holds the report (the Timeline shows it as findings)
    ev = wb.events(kind="live.doctor", subject=str(rec.id))[-1]
    assert ev.payload["findings"][0]["code"] == "layer-ids-engine-mismatch" and ev.payload["fix"]

    # the CLI answers from the same workspace (no measurement, no dump: one JSON document)
    r = cli(
        "--workspace",
        str(wb.workspace.root),
        "doctor",
        "--server",
        str(rec.id),
        "--no-measure",
        "--no-static",
        "--dump",
        "no",
        "--eval-samples",
        "4",
        "--json",
    )
    assert r.returncode == 0, r.stderr  # the provisional finding is a warning until named
    data = json.loads(r.stdout)
    assert data["findings"][0]["code"] == "layer-ids-engine-mismatch" and data["pending"] is None

    # one-key fix from the CLI: through the history on the host (atomic, CAS, reason), relaunch the
    # same profile, measure like before, compare
    r = cli(
        "--workspace",
        str(wb.workspace.root),
        "doctor",
        "--server",
        str(rec.id),
        "--apply-fix",
        "--yes",
        "--json",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-1500:]
    out = json.loads(r.stdout)
    assert out["change"]["version"]["number"] == 2 and out["change"]["location"] == f"gpu:{draft}/config.json"
    cfg = json.loads(wb.host("gpu").read_bytes(f"{draft}/config.json"))
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == trained
    assert out["ready"] and out["server_after"] != rec.id and wb.server(rec.id).state == "stopped"
    rows = {row["name"]: row for row in out["comparison"]["rows"]}
    assert rows["layer ids"]["before"] == shifted and rows["layer ids"]["after"] == trained
    assert rows["accept length"]["after"] > 1.0
    assert wb.measurements(out["server_after"])[-1]["max_new_tokens"] == 16  # measured like before
    versions = wb.config_history(f"gpu:{draft}/config.json").versions
    assert [v.reason.split(":")[0] for v in versions] == ["tracked", "doctor fix"]
    kinds = [e.kind for e in wb.events()]
    for k in ("live.doctor", "config.fix", "live.fix", "live.relaunch", "live.compare"):
        assert k in kinds

    # the fixed server feeds the drafter what it was trained on: no finding, no dump needed
    after = wb.doctor_live(out["server_after"], static=False, measure=False, eval_samples=4, dump="no")
    assert after.findings == [] and after.pending is None
    assert "every training slot is the engine's part" in after.features.verdict
