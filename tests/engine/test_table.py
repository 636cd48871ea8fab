"""The generated tables as the doctor reads them: each release unpacked once, packed and unpacked
alike, the release lines listed without parsing an entry, a host's shipped entries answering alone."""

from __future__ import annotations

from workbench.engine import table
from workbench.engine.table import pack, unpack


def test_a_release_is_unpacked_once_and_packs_back_to_its_entry(monkeypatch):
    for engine in ("sglang", "vllm"):
        version = table.versions(engine)[-1]
        entry = table.load(engine)[version]
        first = table.release(engine, version)
        assert first is table.release(engine, version)  # unpacked once per loaded entry
        assert pack(first) == entry
        assert unpack(engine, version, entry, "table") == first
        assert table.release(engine, "0.0.0") is None
        # a table loaded again (here: replaced) is read again
        monkeypatch.setattr(table, "load", lambda e, v=version: {v: {"rules": []}})
        assert table.release(engine, version).rules == ()
        monkeypatch.undo()
        assert table.release(engine, version) == first


def test_the_pickers_list_the_releases_without_parsing_them():
    for engine in ("sglang", "vllm"):
        assert table.listed_versions(engine) == list(table.load(engine))


def test_a_host_answers_from_the_entries_it_was_shipped(monkeypatch):
    from workbench.engine import release
    from workbench.remote.engine import shipment

    ship = shipment(["LlamaForCausalLM"], ["LlamaForCausalLMEagle3"])
    assert set(ship) == {"sglang", "vllm"} and len(ship["sglang"]) == len(table.versions("sglang"))
    want = release("sglang==0.5.23").serve(["LlamaForCausalLM"]).rule
    monkeypatch.setattr(table, "load", lambda e: {})  # a host: no table
    monkeypatch.setattr(table, "_SHIPPED", {})
    monkeypatch.setattr(table, "_UNPACKED", {})
    table.install(ship)
    rel = release("sglang==0.5.23")
    assert rel.source == "shipped" and rel.serve(["LlamaForCausalLM"]).rule == want
    assert rel.serve(["Qwen3ForCausalLM"]).rule is None  # narrowed to what the job asks about
    assert set(rel.drafts) == {"LlamaForCausalLMEagle3"}


def test_a_jobs_shipped_slice_answers_for_that_job_alone():
    """A host process runs many jobs (and a local one runs them beside the laptop's own table): the
    narrowed slice a job was given never answers after the job."""
    from workbench.engine import release
    from workbench.remote.engine import shipment
    from workbench.remote.jobs import engine_capture

    full = len(release("sglang==0.5.23").rules)
    ship = shipment(["LlamaForCausalLM"], [])
    with table.installed(ship):
        assert {r.arch for r in table.release("sglang", "0.5.23").rules} == {"LlamaForCausalLM"}
    assert table.release("sglang", "0.5.23").source == "table"
    assert len(release("sglang==0.5.23").rules) == full
    got = engine_capture("sglang==0.5.12.post1", ["LlamaForCausalLM"], 32, [1, 15, 28], rules=ship)
    assert got["points"] == ["out(1)", "out(15)", "out(28)"] and got["source"] in ("shipped", "host")
    assert len(release("sglang==0.5.23").rules) == full and table.release("sglang", "0.5.12.post1").source == "table"
