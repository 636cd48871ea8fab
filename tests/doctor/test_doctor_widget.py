"""The notebook's DoctorWidget shows each finding's evidence class and what it skipped."""

from tests.fixtures.drafts import KIMI_DRAFT, KIMI_TARGET
from workbench.notebook import DoctorWidget


def test_widget_shows_evidence_class_and_skipped(wb):
    w = DoctorWidget(wb, draft=str(KIMI_DRAFT), target=str(KIMI_TARGET), engine="sglang==0.5.23")
    f = next(f for f in w.report.findings if f.code == "layer-ids-engine-mismatch")
    assert f.evidence_class == "convention"
    assert "<th>evidence</th>" in w.findings.value and "<td class='evidence-class'>unsettled</td>" in w.findings.value
    assert "not an all-clear" in w.findings.value and "--trained-engine" in w.findings.value
    alone = DoctorWidget(wb, draft=str(KIMI_DRAFT), target="", engine="sglang==0.5.23")
    assert "No findings in the checks that ran" not in alone.findings.value or "skipped" in alone.findings.value
    assert "--target-config FILE" in alone.findings.value


def test_widget_takes_the_training_provenance(wb):
    w = DoctorWidget(
        wb, draft=str(KIMI_DRAFT), target=str(KIMI_TARGET), engine="sglang==0.5.23", trained_engine="specforge==0.2.0"
    )
    assert "layer-ids-engine-mismatch" not in [f.code for f in w.report.findings]
    w.set(trained_engine="sglang==0.5.12.post1")
    w.run_button.click()
    f = next(f for f in w.report.findings if f.code == "layer-ids-engine-mismatch")
    assert f.severity == "error" and "<td class='evidence-class'>provenance</td>" in w.findings.value
    w.set(trained_engine="specforge")
    w.run_button.click()
    assert "which SpecForge release" in w.error_line.value
