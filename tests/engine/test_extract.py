"""The extractor on real SGLang code (the installed release and downloaded wheels) against the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine import capture, read_at, table
from workbench.engine.extract import extract
from workbench.engine.host import local_installation
from workbench.engine.rule import CaptureRule

WHEELS = ("0.5.10", "0.5.14", "0.5.17")  # a handful, cached under ~/.cache/eagle-workbench
KEY = (
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV3ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "GptOssForCausalLM",
    "Glm4MoeLiteForCausalLM",
)


def _wheel(version):
    from workbench.engine.wheels import unpacked

    try:
        return unpacked("sglang", version)
    except Exception as exc:  # no index reachable: the table is still checked against the installed release
        pytest.skip(f"sglang=={version} wheel not available: {exc}")


def _same(extracted, version, archs=None):
    rel = table.release("sglang", version)
    assert rel is not None, f"{version} missing from the table"
    tab = {r.arch: r.to_dict() for r in rel.rules if archs is None or r.arch in archs}
    got = {r.arch: r.to_dict() for r in extracted}
    assert set(got) == set(tab)
    for arch in got:
        assert got[arch] == tab[arch], arch


def test_installed_release_matches_table():
    root, version = local_installation()
    rel = read_at(root, version)
    assert {r.arch for r in rel.rules} >= set(KEY)
    _same(rel.rules, version)
    want = table.release("sglang", version)
    assert rel.registry == want.registry and rel.drafts == want.drafts


@pytest.mark.parametrize("version", WHEELS)
def test_wheel_matches_table(version):
    if table.release("sglang", version) is None:
        pytest.skip(f"{version} not yet in the table")
    # the target classes of the story (every class of every release: `make engine-rules`)
    _same(extract(_wheel(version), version=version, archs=set(KEY)), version, set(KEY))


def _cfg(tmp_path, arch, n, text=None):
    d = tmp_path / arch
    d.mkdir()
    cfg = {"architectures": [arch]}
    if text:
        cfg["text_config"] = {"architectures": [text], "num_hidden_layers": n}
    else:
        cfg["num_hidden_layers"] = n
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_capture_0523_kimi_llama_gptoss(tmp_path):
    kimi = _cfg(tmp_path, "KimiK25ForConditionalGeneration", 61, "DeepseekV3ForCausalLM")
    r = capture("sglang==0.5.23", target_config=kimi, ids=[2, 30, 58], source="table")
    assert r.points == ["out(1)", "out(29)", "out(57)"] and r.fatal is None and r.source == "table"
    assert r.cuda_graph_points == r.points
    # -1 -> index -1 never fires; the packer then raises at the first forward
    r = capture("sglang==0.5.23", target_config=kimi, ids=[-1, 2, 30], source="table")
    assert r.fatal and "AuxHiddenStatePacker" in r.fatal
    llama = _cfg(tmp_path, "LlamaForCausalLM", 32)
    r = capture("sglang==0.5.23", target_config=llama, ids=[-1, 2, 30], source="table")
    assert r.points == ["embed", "out(2)", "out(30)"] and r.fatal is None
    gpt = _cfg(tmp_path, "GptOssForCausalLM", 36)
    r = capture("sglang==0.5.23", target_config=gpt, ids=[24, 30, 36], source="table")
    assert r.points == ["out(23)", "out(29)", "final-prenorm"]
    qmoe = _cfg(tmp_path, "Qwen3MoeForCausalLM", 48)
    r = capture("sglang==0.5.23", target_config=qmoe, ids=[2, 30, 47], source="table")
    assert r.fatal and "IndexError" in r.fatal
    # defaults when the config has none
    r = capture("sglang==0.5.23", target_config=llama, ids=None, source="table")
    assert r.points == ["out(1)", "out(15)", "out(28)"]


def test_cuda_graph_defaults_before_0511(tmp_path):
    if table.release("sglang", "0.5.10") is None:
        pytest.skip("0.5.10 not yet in the table")
    llama = _cfg(tmp_path, "LlamaForCausalLM", 32)
    r = capture("sglang==0.5.10", target_config=llama, ids=[5, 10, 20], source="table")
    assert r.points == ["out(5)", "out(10)", "out(20)"]
    assert r.cuda_graph_points == ["out(1)", "out(15)", "out(28)"] and r.graph_differs
    off = capture("sglang==0.5.10", target_config=llama, ids=[5, 10, 20], cuda_graph=False, source="table")
    assert off.cuda_graph_points is None
    if table.release("sglang", "0.5.11") is not None:
        r = capture("sglang==0.5.11", target_config=llama, ids=[5, 10, 20], source="table")
        assert r.cuda_graph_points == r.points


def test_unrecognised_pattern_is_unknown(tmp_path):
    """A model whose forward the extractor cannot read gives unknown with evidence, never a guess."""
    root, _v = local_installation()
    import shutil

    dst = tmp_path / "inst"
    shutil.copytree(
        Path(root) / "sglang" / "srt" / "models",
        dst / "sglang" / "srt" / "models",
        ignore=shutil.ignore_patterns("*.pyc"),
    )
    (dst / "sglang" / "srt" / "models" / "toy.py").write_text(
        "class ToyModel:\n"
        "    def __init__(self):\n        self.layers_to_capture = []\n"
        "    def forward(self, x):\n        return self.weird(self.layers_to_capture)\n"
        "class ToyForCausalLM:\n"
        "    def __init__(self, config):\n        self.model = ToyModel()\n"
        "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
        "        self.model.layers_to_capture = [i * 2 for i in (layer_ids or [1, 2, 3])]\n"
        "EntryClass = ToyForCausalLM\n"
    )
    rules = {r.arch: r for r in extract(dst, version="0.0.0")}
    toy = rules["ToyForCausalLM"]
    assert toy.id_map == "unknown" and toy.index0 == "unknown"
    assert any("unknown" in e.text for e in toy.evidence)


def test_cli_capture_json(tmp_path):
    kimi = _cfg(tmp_path, "KimiK25ForConditionalGeneration", 61, "DeepseekV3ForCausalLM")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "engine",
            "capture",
            "--engine",
            "sglang==0.5.23",
            "--target-config",
            str(kimi),
            "--ids",
            "2,30,58",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert set(d) >= {"points", "fatal", "cuda_graph_points", "evidence", "source"}
    assert d["source"] == "table" and d["evidence"]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "engine",
            "capture",
            "--engine",
            "sglang==0.5.23",
            "--target-config",
            str(tmp_path / "nope"),
            "--ids",
            "2,x",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_rule_roundtrip():
    rows = table.release("sglang", "0.5.23").rules
    for r in rows:
        assert CaptureRule.from_dict(r.to_dict()) == r


def test_a_hook_that_raises_leaves_the_parsed_sources_to_reference_counting(tmp_path):
    """The traceback of a hook that raised is read and dropped: kept in the frame it points back
    to, the two (and the whole parsed installation the frame holds) would wait for the collector."""
    import ast
    import gc
    import weakref

    from workbench.engine.source import Source
    from workbench.engine.stub import run_hook

    models = tmp_path / "sglang" / "srt" / "models"
    models.mkdir(parents=True)
    (models / "toy.py").write_text(
        "class ToyForCausalLM:\n"
        "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
        "        raise ValueError('no ids for a toy')\n"
    )
    src = Source(tmp_path)
    rel = "sglang/srt/models/toy.py"
    cls = next(n for n in src.tree(rel).body if isinstance(n, ast.ClassDef))
    was = gc.isenabled()
    gc.disable()
    try:
        out = run_hook(src, rel, cls, [1, 2], 8)
        assert out.error == "ValueError: no ids for a toy" and out.error_line[1] == 3
        kept = weakref.ref(src)
        del src, cls
        assert kept() is None
    finally:
        if was:
            gc.enable()


def _vllm_forward(tmp_path, capture_before_loop: str):
    import ast

    from workbench.engine.source import Source
    from workbench.engine.vllm_extract import classify_forward

    body = f"""
class M:
    def forward(self, input_ids, positions):
        hidden_states = self.embed_tokens(input_ids)
        residual = None
        aux_hidden_states = []
        if self.start_layer in self.aux_hidden_state_layers:
{capture_before_loop}
        for layer_idx, layer in enumerate(self.layers):
            hidden_states, residual = layer(positions, hidden_states, residual)
            if layer_idx + 1 in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states + residual)
        return hidden_states, aux_hidden_states
"""
    pkg = tmp_path / "vllm" / "model_executor"
    pkg.mkdir(parents=True)
    (pkg / "m.py").write_text(body)
    fwd = next(n for n in ast.walk(ast.parse(body)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return classify_forward(Source(tmp_path), "vllm/model_executor/m.py", fwd, [])


def test_vllm_index0_a_capture_that_adds_no_residual_is_the_embedding(tmp_path):
    """vLLM 0.31/0.32 Cohere2Moe: ``aux_hidden_states.append(hidden_states)`` before the loop takes the
    embedding; one that adds the (None) residual first, as DeepSeek's does, fails."""
    plain = _vllm_forward(tmp_path / "a", "            aux_hidden_states.append(hidden_states)")
    assert plain["index0"] == "embed" and plain["boundary"] == "final-prenorm"
    added = _vllm_forward(
        tmp_path / "b", "            x = hidden_states + residual\n            aux_hidden_states.append(x)"
    )
    assert added["index0"] == "type-error"
