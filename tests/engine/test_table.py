"""The generated rule table as the doctor reads it: each release unpacked once, the same answers."""

from __future__ import annotations

from workbench.engine import table
from workbench.engine.rule import CaptureRule
from workbench.engine.table import unpack


def test_a_release_is_unpacked_once_and_each_caller_gets_its_own_list(monkeypatch):
    version = table.latest()
    assert version is not None
    want = [CaptureRule.from_dict(r) for r in unpack(table.load()[version])]
    first = table.release(version)
    assert first == want
    first.clear()  # a caller's list is its own
    assert table.release(version) == want
    assert table.release_rules(version) is table.release_rules(version)
    assert table.release("0.0.0") is None

    # a table loaded again (here: replaced) is read again, and the loaded one again after it
    monkeypatch.setattr(table, "load", lambda: {version: []})
    assert table.release(version) == []
    monkeypatch.undo()
    assert table.release(version) == want


def test_the_layers_rule_follows_the_table(monkeypatch):
    from workbench.layers import rule_for

    rule = rule_for("sglang==0.5.23", "LlamaForCausalLM")
    assert rule.plus_one != "unsupported" and "generated table" in rule.source
    monkeypatch.setattr(table, "load", lambda: {"0.5.23": []})
    assert rule_for("sglang==0.5.23", "LlamaForCausalLM").plus_one == "unsupported"
    monkeypatch.undo()
    assert rule_for("sglang==0.5.23", "LlamaForCausalLM") == rule
