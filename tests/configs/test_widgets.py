"""The notebook widgets, driven without a browser: arm-then-confirm fix and revert."""

import json
import shutil

from tests.fixtures.drafts import KIMI_BROKEN, KIMI_TARGET
from workbench.notebook import ConfigsWidget, DoctorWidget

IDS = "eagle_config.eagle_aux_hidden_state_layer_ids"


def _ids(path):
    return json.loads(path.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]


def test_doctor_widget_finds_and_fixes(wb, tmp_path):
    d = tmp_path / "draft"
    shutil.copytree(KIMI_BROKEN, d)
    widget = DoctorWidget(wb, draft=str(d), target=str(KIMI_TARGET), engine="sglang==0.5.12.post1", trained="2,30,58")
    assert [f.code for f in widget.report.findings][:2] == ["layer-ids-embedding", "layer-ids-engine-mismatch"]
    assert "layer-ids-embedding" in widget.findings.value and "MISMATCH" in widget.capture.value
    assert widget.fix_choice.options and widget.fix_choice.value == 0
    widget.fix_button.button.click()  # arm: shows the diff, writes nothing
    assert widget.fix_button.armed and "+      58" in widget.fix_button.plan_view.value
    assert _ids(d / "config.json") == [-1, 2, 30]
    widget.fix_button.cancel.click()
    assert not widget.fix_button.armed
    widget.fix_button.button.click()
    widget.fix_button.button.click()  # confirm
    assert _ids(d / "config.json") == [2, 30, 58]
    assert "is now v2" in widget.status.value and widget.report.ok


def test_doctor_widget_bad_input(wb, tmp_path):
    widget = DoctorWidget(wb, draft=str(tmp_path / "nowhere"))
    assert widget.report is None and "no such directory" in widget.error_line.value
    widget.set(draft=str(KIMI_BROKEN), trained="2,x")
    widget.run_button.click()
    assert "trained layers" in widget.error


def test_configs_widget_history_diff_revert(wb, tmp_path):
    d = tmp_path / "draft"
    shutil.copytree(KIMI_BROKEN, d)
    p = d / "config.json"
    original = p.read_bytes()
    widget = ConfigsWidget(wb, path=str(p))
    wb.config_set(str(p), {IDS: [2, 30, 58]})
    widget.refresh_button.click()
    assert "v2" in widget.table.value and "+      58" in widget.diff.value
    assert widget.revert_to.value == 1
    widget.revert_button.button.click()
    assert widget.revert_button.armed and p.read_bytes() != original
    widget.revert_button.button.click()
    assert p.read_bytes() == original and "revert to v1" in widget.status.value
    widget.diff_a.value, widget.diff_b.value = 1, 2
    assert "-      -1," in widget.diff.value and "+      58" in widget.diff.value
    bad = ConfigsWidget(wb, path=str(tmp_path / "missing.json"))
    assert "no such file" in bad.error
