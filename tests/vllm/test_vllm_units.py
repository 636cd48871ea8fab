"""vLLM's adapter without a server: its launch command, the counters of its /metrics page, failure
classification, the engine's place in a profile, and the lab world laid out at head size 32."""

from __future__ import annotations

import json

import pytest

from workbench.errors import InputError
from workbench.servers.engines import SpecCounters, engine
from workbench.servers.profiles import load_profile

METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 264.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 6.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 792.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 18.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 505.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 200.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 124.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 181.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 5.0
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_counters_from_a_metrics_page_sum_engines_and_positions():
    from workbench.vllm.client import parse_counters

    c = parse_counters(METRICS)
    assert c == SpecCounters(270, 810, 510, [205, 181, 124])
    assert c.accept_length == pytest.approx(1 + 510 / 270)
    assert c.per_position == pytest.approx([205 / 270, 181 / 270, 124 / 270])
    d = c - SpecCounters(70, 210, 110, [55])
    assert d == SpecCounters(200, 600, 400, [150, 181, 124]) and d.accept_length == 3.0
    assert parse_counters("vllm:num_requests_running 0\n") is None  # a server without speculation
    assert SpecCounters().accept_length is None and SpecCounters().per_position == []


def test_vllm_profile_command():
    p = load_profile(
        {
            "v": {
                "engine": "vllm",
                "model": "/m",
                "draft": "/d",
                "port": 8001,
                "args": ["--host", "127.0.0.1", "--enforce-eager"],
                "speculative": {"algorithm": "EAGLE3", "num_steps": 3},
            }
        },
        "v",
    )
    eng = engine(p.engine)
    cmd = eng.build(p, "0.32.0", "/py")
    assert cmd.argv[:4] == ["/py", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    i = cmd.argv.index("--speculative-config")
    assert json.loads(cmd.argv[i + 1]) == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
    assert cmd.argv[cmd.argv.index("--host") + 2 : cmd.argv.index("--host") + 4] == ["--port", "8001"]
    assert cmd.engine_args[0] == "--model" and cmd.engine == "vllm"
    facts = eng.argv_facts(cmd.argv)
    assert (facts["model"], facts["draft"], facts["steps"], facts["topk"], facts["draft_tokens"]) == (
        "/m",
        "/d",
        3,
        1,
        4,
    )
    assert eng.tp_size([*cmd.argv, "--tensor-parallel-size", "4"]) == 4
    for bad in (["--port", "1"], ["--model", "/x"], ["--speculative-config", "{}"]):
        with pytest.raises(InputError, match="set by the profile"):
            eng.build(
                load_profile({"v": {"engine": "vllm", "model": "/m", "draft": "/d", "args": bad}}, "v"), None, "py"
            )
    # a profile without a draft may carry a method of its own (the doctor's hidden-state extraction)
    raw = load_profile({"x": {"engine": "vllm", "model": "/m", "args": ["--speculative-config", "{}"]}}, "x")
    assert "--speculative-config" in eng.build(raw, None, "py").argv


def test_engine_is_a_profile_key():
    with pytest.raises(InputError, match=r"\[profiles.v\].engine: expected one of 'sglang', 'vllm'"):
        load_profile({"v": {"engine": "trt", "model": "/m"}}, "v")
    p = load_profile(
        {"base": {"engine": "vllm", "model": "/m", "vllm_version": "0.32.0"}, "c": {"extends": "base"}}, "c"
    )
    assert p.engine == "vllm" and p.version == "0.32.0"
    assert load_profile({"s": {"model": "/m", "sglang_version": "0.5.23"}}, "s").version == "0.5.23"
    with pytest.raises(InputError, match="engine"):
        engine("tgi")


def test_vllm_rules_without_a_host():
    from workbench.vllm.validate import rule_findings

    def codes(spec, draft="/d", cfg=None):
        p = load_profile(
            {"v": {"engine": "vllm", "model": "/m", "speculative": spec, **({"draft": draft} if draft else {})}}, "v"
        )
        return {f.code for f in rule_findings(p, engine("vllm").build(p, None, "py"), cfg)}

    assert codes({"algorithm": "EAGLE3", "num_steps": 3}) == set()
    assert "spec-topk-vllm" in codes({"algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 4})
    assert "spec-chain-tokens" in codes({"algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 8})
    assert "spec-no-draft" in codes({"algorithm": "EAGLE3", "num_steps": 3}, draft=None)
    assert "spec-no-steps" in codes({"algorithm": "EAGLE3"})
    assert "spec-eagle3-under-eagle" in codes(
        {"algorithm": "EAGLE", "num_steps": 3}, cfg={"architectures": ["LlamaForCausalLMEagle3"]}
    )


def test_failure_text_is_the_root_cause():
    core = "(EngineCore pid=9) ERROR 12-05 04:50:00 [core.py:1512] "
    lines = [
        "(APIServer pid=8) WARNING 12-05 04:49:00 [system_utils.py:255] Found ulimit of 20000 ... like "
        "`OSError: [Errno 24] Too many open files`.",
        core + "EngineCore encountered a fatal error.",
        core + "Traceback (most recent call last):",
        core + "RuntimeError: shape '[-1, 192]' is invalid for input of size 512",
        "(APIServer pid=8) ERROR 12-05 04:50:00 [async_llm.py:906] "
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    ]
    eng = engine("vllm")
    root = "RuntimeError: shape '[-1, 192]' is invalid for input of size 512"
    gone = eng.classify(lines, False, None)
    assert gone["class"] == "process-died" and gone["text"] == root
    dead = eng.classify(lines, True, 503)
    assert dead["class"] == "engine-dead" and dead["text"] == root
    wrapped = eng.classify(lines[-1:], True, 503)
    assert wrapped["text"] == "EngineDeadError: EngineCore encountered an issue."


def test_layout_at_head_size_32_is_the_same_function():
    """A random tiny Llama at head size 16, laid out at 32: same logits (fp32) and greedy tokens."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    from workbench.lab.vllm_layout import places, widen

    assert places(16, 32) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
    with pytest.raises(ValueError):
        places(16, 24)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=50, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    a = LlamaForCausalLM(cfg).eval()
    wide = widen(dict(a.state_dict()), cfg.to_dict(), 32)
    cfg32 = LlamaConfig(**{**cfg.to_dict(), "head_dim": 32})
    b = LlamaForCausalLM(cfg32).eval()
    b.load_state_dict(wide)
    x = torch.randint(0, 50, (2, 24))
    with torch.no_grad():
        la, lb = a(x).logits, b(x).logits
    assert torch.allclose(la, lb, atol=1e-5) and torch.equal(la.argmax(-1), lb.argmax(-1))
