"""The predictor through workbench.api: same numbers, every call journaled."""

import pytest

from workbench.errors import InputError


def test_predict_is_journaled(wb):
    r = wb.predict(acc=[0.75], steps=5, topk=1, draft_tokens=6, observed_accept_length=1.12)
    assert round(r.accept_length, 3) == 3.288
    ev = wb.events(kind="predict")
    assert len(ev) == 1 and ev[0].subject == "5/1/6"
    assert ev[0].payload["verdict"] == "accept-length-gap"
    assert ev[0].payload["accept_length"] == pytest.approx(r.accept_length)


def test_sweep_and_fit_are_journaled(wb):
    s = wb.predict_sweep(alpha=0.7, verify_ms={2: 20, 3: 21, 4: 22}, draft_ms=1.0, baseline_ms=19)
    f = wb.fit({1: 1.8, 2: 2.4})
    assert [e.kind for e in wb.events(kind="predict.*")] == ["predict.sweep", "predict.fit"]
    assert wb.events(kind="predict.sweep")[0].payload["best"]["steps"] == s.best.steps
    assert wb.events(kind="predict.fit")[0].payload["conditional"] == pytest.approx(f.conditional)


def test_exactly_one_convention(wb):
    with pytest.raises(InputError, match="exactly one of acc, conditional, marginal, alpha"):
        wb.predict(acc=[0.7], alpha=0.7, steps=1, topk=1, draft_tokens=2)
    with pytest.raises(InputError, match="got none"):
        wb.predict(steps=1, topk=1, draft_tokens=2)
    assert wb.events(kind="predict") == []
