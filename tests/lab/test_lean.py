"""The lab target's lean forward computes exactly what transformers' forward does, or is not used."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _fresh(model):
    """Forget the cached outcome of the agreement check."""
    from workbench.lab import lean

    if hasattr(model, lean._CHECKED):
        delattr(model, lean._CHECKED)
    return model


def _tiny_llama(**overrides):
    from transformers import LlamaConfig, LlamaForCausalLM

    from workbench.lab.target import quiet_transformers

    quiet_transformers()
    torch.manual_seed(0)
    cfg = dict(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
    )
    cfg.update(overrides)
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    return model.eval()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rounds_over_a_cropped_cache_equal_the_models_forward(lab_world, dtype):
    """Prefill, then verify rounds of 1-4 tokens with a crop after each (as speculation does): the
    logits and every stream point equal transformers' bit for bit, on the world's own target with
    its weights as the engine serves them."""
    from transformers import DynamicCache

    from workbench.lab.engine import _rounded, torch_dtype
    from workbench.lab.lean import lean_for
    from workbench.lab.streams import StreamTap
    from workbench.lab.target import load_target

    model = _rounded(load_target(lab_world["target"]), torch_dtype(dtype))
    lean = lean_for(model)
    assert lean is not None
    tap = StreamTap(model)
    gen = torch.Generator().manual_seed(3)
    V = model.config.vocab_size
    with torch.inference_mode():
        cache, kv = DynamicCache(), lean.kv()
        for length, crop in ((30, 0), (4, 3), (4, 0), (1, 0), (4, 2), (3, 1), (4, 4), (2, 0)):
            ids = torch.randint(3, V, (1, length), generator=gen)
            store = tap.grab(tap.all_names())
            ref = model(input_ids=ids, past_key_values=cache, use_cache=True).logits
            tap.release()
            got, streams = lean.forward(ids, kv, list(store))
            assert torch.equal(ref, got)
            assert set(streams) == set(store) and all(torch.equal(store[n], streams[n]) for n in store)
            assert kv.length == cache.get_seq_length()
            if crop:
                cache.crop(-crop)
                kv.crop(crop)
    tap.close()


def test_greedy_gives_the_same_tokens_either_way(lab_world):
    """640-row greedy continuation of the world's training prompts (the build's data step) through
    the lean forward and through transformers' forward with its cache: the same tokens."""
    from workbench.lab import capture as C
    from workbench.lab import lean
    from workbench.lab.settings import SIZES, corpus_style
    from workbench.lab.target import load_target

    s = SIZES["tiny"]
    model = load_target(lab_world["target"])
    prompts = C.make_prompts(s.prompt_len, 96, s.seed + 1, s.seed, corpus_style(s))
    setattr(model, lean._CHECKED, False)  # transformers' forward
    theirs = C.greedy(model, prompts, 12)
    mine = C.greedy(_fresh(model), prompts, 12)
    assert getattr(model, lean._CHECKED) is True
    assert torch.equal(theirs, mine)


def test_the_engine_decodes_the_same_either_way(lab_world):
    """Speculative decoding through the lean forward and through transformers': the same tokens,
    rounds, accepted drafts and returned hidden rows, for a good and a broken draft."""
    from workbench.lab.build import MEASURE_ENGINE
    from workbench.lab.engine import LabEngine

    prompts = [[1, 5, 9, 14, 20, 7, 33, 41, 12], [1, 60, 61, 62, 3, 9]]
    for draft in ("draft", "draft_broken"):
        runs = []
        for use_lean in (True, False):
            eng = LabEngine(lab_world["target"], lab_world[draft], dtype="bfloat16", engine=MEASURE_ENGINE)
            assert eng.lean is not None
            if not use_lean:
                eng.lean = None
            outs = [eng.generate(p, 20, ignore_eos=True, return_hidden=True) for p in prompts]
            runs.append([(o.output_ids, o.verify_ct, o.accepted_drafts, o.histogram, o.hidden_states) for o in outs])
            eng.close()
        assert runs[0] == runs[1]


def test_a_dump_uses_the_models_own_forward(lab_world, tmp_path):
    """A dumper reads the modules' hooks, which the lean forward does not call."""
    from workbench.lab.build import MEASURE_ENGINE
    from workbench.lab.dump import Dumper
    from workbench.lab.engine import LabEngine

    eng = LabEngine(
        lab_world["target"],
        lab_world["draft"],
        dtype="bfloat16",
        engine=MEASURE_ENGINE,
        dumper=Dumper(tmp_path / "dump"),
    )
    assert eng.lean is None
    eng.generate([1, 5, 9, 14], 4, ignore_eos=True)
    assert any((tmp_path / "dump").rglob("*"))
    eng.close()


@pytest.mark.parametrize(
    "overrides",
    [
        {"attention_bias": True},
        {"num_key_value_heads": 2},
        {"mlp_bias": True},
        {"hidden_act": "gelu"},
        {"attn_implementation": "eager"},
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    ],
)
def test_a_model_it_does_not_implement_keeps_its_own_forward(overrides):
    from workbench.lab import capture as C
    from workbench.lab.lean import implements, lean_for

    model = _tiny_llama(**overrides)
    assert not implements(model) and lean_for(model) is None
    assert C.greedy(model, torch.tensor([[1, 2, 3]]), 4).shape == (1, 7)
    plain = _tiny_llama()
    assert implements(plain) and lean_for(plain) is not None


def test_a_forward_that_disagrees_is_not_used(monkeypatch):
    """The check compares, it does not assume: an RMS norm off by its epsilon's place fails it."""
    from workbench.lab import lean

    def rms_elsewhere(x, weight, eps):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) + eps)

    monkeypatch.setattr(lean, "_rms", rms_elsewhere)
    model = _tiny_llama()
    assert lean.implements(model) and lean.lean_for(model) is None
    monkeypatch.undo()
    assert lean.lean_for(_fresh(model)) is not None


def test_the_cache_grows_and_crops_in_place():
    from workbench.lab.lean import KV

    kv = KV(1)
    rows = [torch.full((1, 2, n, 3), float(i)) for i, n in enumerate((10, 9, 1))]
    k, v = kv.put(0, rows[0], rows[0] + 100)
    kv.length = 10
    assert k.shape == (1, 2, 10, 3) and kv.k[0].shape[-2] == 16
    k, v = kv.put(0, rows[1], rows[1] + 100)  # past the capacity: doubled, old rows kept
    kv.length = 19
    assert (
        kv.k[0].shape[-2] == 32 and torch.equal(k[..., :10, :], rows[0]) and torch.equal(v[..., 10:, :], rows[1] + 100)
    )
    kv.crop(4)
    k, _ = kv.put(0, rows[2], rows[2])  # written over the cropped rows
    assert (
        k.shape[-2] == 16
        and torch.equal(k[..., 15:, :], rows[2])
        and torch.equal(k[..., 10:15, :], rows[1][..., :5, :])
    )
