"""The doctor explains each drafter variant a config selects (sentences from workbench.drafter.variants)."""

from tests.fixtures.drafts import TINY_DRAFT, tiny_tensors
from workbench.doctor import run_static


def test_draft_variant_explained(tiny):
    changes = {"norm_before_fc": True, "norm_output": False}
    d, t = tiny(config_changes=changes, tensors=tiny_tensors(dict(TINY_DRAFT, **changes)))
    found = [f for f in run_static(d, t).findings if f.code == "draft-variant"]
    text = " ".join(f.message for f in found)
    assert all(f.severity == "info" for f in found)
    assert "Norm_before_fc: the fc input" in text
    assert "SGLang reads norm_output as 'feed the normed state to the next step'" in text


def test_plain_draft_has_no_variant_finding(tiny):
    d, t = tiny()
    assert "draft-variant" not in run_static(d, t).codes()
