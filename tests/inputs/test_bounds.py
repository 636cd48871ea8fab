"""Sizes read from a file are bounded before anything is sized by them; shard names stay inside
their checkpoint; config set's type checks hold however the value arrives; the CLI's error handler
is total (one line, exit != 0; InputError exit 2)."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest

from tests.conftest import run_cli
from tests.fixtures.drafts import TINY_DRAFT, TINY_TARGET
from workbench.draftconfig.schema import FIELDS
from workbench.errors import InputError

HUGE = {"num_hidden_layers": 30000000}


def _bounded(fn, limit_mb: float = 40, limit_s: float = 10):
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        out = fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < limit_mb * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert time.monotonic() - t0 < limit_s
    return out


def test_every_count_field_has_a_plausible_upper_bound():
    for name, f in FIELDS.items():
        if f.kind in ("int", "int-list"):
            assert f.where.hi is not None and f.where.hi <= 2**31, name
        if f.kind in ("int-list", "str-list"):
            assert f.max_items <= 64, name


@pytest.mark.parametrize("where", ["draft", "target", "both"])
def test_doctor_on_30_million_layers_is_quick_and_small(tiny, where):
    from workbench.doctor import run_static

    d, t = tiny(config_changes=HUGE if where != "target" else None, target_changes=HUGE if where != "draft" else None)
    report = _bounded(lambda: run_static(d, t))
    hits = [f for f in report.findings if f.code == "config-invalid"]
    assert hits and all(f.evidence["field"] == "num_hidden_layers" for f in hits)
    assert all("30000000 is out of range" in f.message for f in hits)


def test_doctor_flag_and_preview_paths_are_bounded(tiny, tmp_path):
    """--num-layers is a flag (refused by its type); the launch preview's doctor runs run_static on the
    host's config text through the remote job, which is the same reader."""
    from workbench.remote.jobs import static

    d, t = tiny()
    cfg = {**TINY_DRAFT, **HUGE}
    out = _bounded(lambda: static(str(d), config_text=json.dumps(cfg), target_config=str(t)))
    assert any(f["code"] == "config-invalid" and f["evidence"]["field"] == "num_hidden_layers" for f in out["findings"])


def test_preview_doctor_refuses_a_hostile_config_text(tiny):
    from workbench.remote.jobs import static

    d, _ = tiny()
    for text in ('{"a": ' + "[" * 100000 + "]" * 100000 + "}", '{"hidden_size": NaN}', "[1]"):
        with pytest.raises(InputError) as err:
            _bounded(lambda text=text: static(str(d), config_text=text))
        assert "config.json" in str(err.value) and "\n" not in str(err.value)


def test_drafter_boundaries_refuse_before_allocating(tiny):
    from workbench.drafter.checkpoint import check_weights
    from workbench.drafter.names import draft_dims, expected_weights

    cfg = {**TINY_DRAFT, **HUGE}
    for fn in (lambda: draft_dims(cfg), lambda: expected_weights(cfg), lambda: check_weights(cfg, {})):
        with pytest.raises((InputError, ValueError)) as err:
            _bounded(fn)
        assert "num_hidden_layers" in str(err.value)
    for bad in ("16", 16.5, 16.0, True, 0, 10**9):
        with pytest.raises(InputError, match="hidden_size"):
            draft_dims({**TINY_DRAFT, "hidden_size": bad})
    assert draft_dims(TINY_DRAFT).hidden == 16


def test_drafter_model_refuses_at_its_boundary():
    pytest.importorskip("torch")
    from workbench.drafter.model import Eagle3Drafter

    with pytest.raises(InputError, match="num_attention_heads"):
        Eagle3Drafter({**TINY_DRAFT, "num_attention_heads": 0})
    with pytest.raises(InputError, match="vocab_size"):
        _bounded(lambda: Eagle3Drafter({**TINY_DRAFT, "vocab_size": 2**40}))


# ------------------------------------------------------------------------------------ shard names
@pytest.mark.parametrize(
    "entry", ["../../../../etc/passwd", "/etc/passwd", "sub/../../outside.safetensors", "..", "../outside.safetensors"]
)
def test_index_entries_never_leave_the_checkpoint(tiny, tmp_path, monkeypatch, entry):
    from workbench.draftconfig import reader
    from workbench.drafter import target

    d, _ = tiny(tensors=None)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": entry}}))
    opened = []
    real = reader.read_header
    monkeypatch.setattr(reader, "read_header", lambda p: opened.append(str(p)) or real(p))
    ck = reader.read_draft(d)
    assert not opened and "weight_map" in ck.weights_error and "\n" not in ck.weights_error
    with pytest.raises(InputError, match="weight_map"):
        target.tensor_files(d)


def test_index_inside_names_are_read(tiny):
    from tests.fixtures.drafts import tiny_tensors
    from workbench.draftconfig import read_draft, write_safetensors

    d, _ = tiny(tensors=None)
    (d / "shards").mkdir()
    tensors = tiny_tensors()
    write_safetensors(d / "shards" / "a.safetensors", tensors)
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {n: "shards/a.safetensors" for n in tensors}})
    )
    ck = read_draft(d)
    assert ck.weights_error is None and set(ck.tensors) == set(tensors)


# -------------------------------------------------------------------------------- config set types
@pytest.fixture
def cfg_file(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TINY_DRAFT, indent=2) + "\n")
    return p


@pytest.mark.parametrize(
    "edit",
    [
        {"eagle_config.eagle_aux_hidden_state_layer_ids.0": "abc"},
        {"eagle_config": {"eagle_aux_hidden_state_layer_ids": ["2", "30"]}},
        {"eagle_config": {"use_aux_hidden_state": "true"}},
        {"hidden_size": "16"},
        {"hidden_size": 16.5},
        {"num_hidden_layers": 30000000},
        {"rope_theta": float("nan")},
        {"other": float("inf")},
        {"other": [1, {"x": float("-inf")}]},
        {"other": 10**5000},
        {"other": {1, 2}},
    ],
)
def test_config_set_type_checks_cannot_be_bypassed(wb, cfg_file, edit):
    wb.config_track(str(cfg_file))
    before = cfg_file.read_bytes()
    rows = (
        wb.journal.db.execute("SELECT count(*) FROM config_versions").fetchone()[0]
        if _has(wb, "config_versions")
        else None
    )
    with pytest.raises(InputError) as err:
        wb.config_set(str(cfg_file), edit)
    assert "\n" not in str(err.value) and "config.json" in str(err.value)
    assert cfg_file.read_bytes() == before
    if rows is not None:
        assert wb.journal.db.execute("SELECT count(*) FROM config_versions").fetchone()[0] == rows


def _has(wb, table: str) -> bool:
    return wb.journal.db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def test_config_set_writes_standard_json_only(wb, cfg_file):
    from workbench import strictjson

    wb.config_set(
        str(cfg_file), {"eagle_config.eagle_aux_hidden_state_layer_ids.0": 2, "rope_theta": 500000.0}, add=True
    )
    doc = strictjson.loads(cfg_file.read_bytes(), "config.json")
    assert doc["eagle_config"]["eagle_aux_hidden_state_layer_ids"][0] == 2
    wb.config_set(str(cfg_file), {"hidden_size": "16"}, force=True)  # force writes a wrong type...
    with pytest.raises(InputError, match="NaN"):
        wb.config_set(str(cfg_file), {"x": float("nan")}, force=True)  # ...never non-standard JSON
    assert "NaN" not in cfg_file.read_text()


def test_an_old_mistake_does_not_block_an_edit_elsewhere(wb, tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**TINY_DRAFT, "hidden_size": "16"}, indent=2))
    wb.config_set(str(p), {"draft_vocab_size": 16})
    with pytest.raises(InputError, match="hidden_size"):
        wb.config_set(str(p), {"hidden_size": "32"})


# -------------------------------------------------------------------------------- CLI error handler
def test_unexpected_exception_is_one_line_with_a_debug_hint(workspace, monkeypatch, capsys):
    from workbench.cli import DEBUG_ENV, main
    from workbench.facade.configs import ConfigsAPI

    def boom(self):
        raise RuntimeError("something broke\nsecond line")

    monkeypatch.setattr(ConfigsAPI, "config_list", boom)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert main(["config", "list"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error: RuntimeError: something broke second line" in err[0]
    assert DEBUG_ENV in err[0]
    monkeypatch.setenv(DEBUG_ENV, "1")
    with pytest.raises(RuntimeError):
        main(["config", "list"])


def test_input_errors_exit_2_and_others_exit_1_through_the_console(workspace, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": NaN}')
    r = run_cli("drafter", "check", "--draft", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "hidden_size" in r.stderr
    (workspace / "workbench.toml").write_bytes(b"[hosts\n")
    r = run_cli("config", "list")
    assert r.returncode == 2 and "workbench.toml" in r.stderr and "Traceback" not in r.stderr


def test_target_config_bounded_in_align_target_info(tmp_path):
    from workbench.hidden.recommend import target_info

    p = tmp_path / "config.json"
    p.write_text(json.dumps({**TINY_TARGET, **HUGE}))
    with pytest.raises(InputError, match="num_hidden_layers"):
        target_info(p)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[1, 2]", "prompts"),
        ('{"prompts": ' + "[" * 100000 + "]" * 100000 + "}", "nested"),
        ('{"prompts": ["a", NaN]}', "NaN"),
        ('{"prompts": [1, 2]}', "strings"),
        ('{"prompts": []}', "prompts"),
        ('{"prompts": ["a"], "max_new_tokens": 1e400}', "not finite"),
        ('{"prompts": ["a"], "max_new_tokens": "256"}', "max_new_tokens"),
        ('{"prompts": ["a"], "max_new_tokens": 100000000000}', "max_new_tokens"),
    ],
)
def test_prompt_sets_are_read_strictly(tmp_path, text, needle):
    from workbench.servers.measure import prompt_set

    p = tmp_path / "prompts.json"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        prompt_set(str(p))
    assert "prompts.json" in str(err.value) and needle in str(err.value) and "\n" not in str(err.value)
