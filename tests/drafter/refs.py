"""Run the reference trainers' own code (SpecForge 0.2.0, speculators 0.9.0) on tiny random
drafters, and move their weights into workbench checkpoints through their own save_pretrained.

Run as a script (``python -m tests.drafter.refs specforge|speculators OUT CASES_JSON``) in a
subprocess: every case writes its checkpoint (the library's own ``save_pretrained``) and
``ref.pt`` (inputs, per-step logits, metric counts) under ``OUT/<case>``.

SpecForge's trainer module (``specforge.algorithms.eagle3.model``) cannot import on a CPU as
shipped: ``specforge.core.loss`` imports triton at top level and its KL loss is a Triton kernel.
The subprocess therefore loads SGLang's own triton stub (``sglang/_platform_stubs.py``, as
``workbench.sglang.remote`` does) so the module imports, and swaps the kernel-backed
``LogSoftmaxLoss`` for SpecForge's own torch reference of the same loss (``_compute_loss`` in the
same file). Everything else, including the acc_k counts, is SpecForge's ``OnlineEagle3Model``
as shipped; the loss value is not compared.

speculators imports on a CPU. Their ``torch.compile`` decorators (SpecForge's RMSNorm, RoPE and teacher;
speculators compiles only on CUDA) would need a C++ toolchain and minutes on two cores, so dynamo
is disabled while they run: the decorated functions then execute as written, eagerly.
speculators' default attention is ``simple_flex_attention``; the tests build it with
``_attn_implementation="eager"``, speculators' own dense path (same mask, extended by
``extend_dense_mask_for_draft_tokens``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

if __name__ == "__main__":  # a one-shot process: no collector passes over the libraries' imports
    import gc

    gc.disable()

import torch

H, HEADS, KV, HD, INTER, V, VD = 32, 4, 2, 8, 48, 50, 20


@contextlib.contextmanager
def eager():
    import torch._dynamo

    old = torch._dynamo.config.disable
    torch._dynamo.config.disable = True
    try:
        yield
    finally:
        torch._dynamo.config.disable = old


def randomize(module, seed: int, std: float = 0.3) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            p.copy_(torch.randn(p.shape, generator=g) * std + (1.0 if name.endswith("norm.weight") else 0.0))


def vocab(seed: int = 3):
    from workbench.drafter.model import vocab_mapping

    g = torch.Generator().manual_seed(seed)
    return vocab_mapping(torch.rand(V, generator=g), VD)


# ------------------------------------------------------------------ SpecForge
def specforge_drafter(tmp: Path, seed: int = 0, target_hidden: int = H, **cfg):
    """A SpecForge ``LlamaForCausalLMEagle3`` with random weights, saved by its save_pretrained."""
    from transformers import LlamaConfig

    with eager():
        from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3

        config = LlamaConfig(
            hidden_size=H,
            num_attention_heads=HEADS,
            num_key_value_heads=KV,
            head_dim=HD,
            intermediate_size=INTER,
            vocab_size=V,
            num_hidden_layers=1,
            rms_norm_eps=1e-6,
            max_position_embeddings=cfg.pop("max_position_embeddings", 2048),
            hidden_act="silu",
            **cfg,
        )
        config.draft_vocab_size = VD
        config.target_hidden_size = target_hidden
        config.architectures = ["LlamaForCausalLMEagle3"]
        model = LlamaForCausalLMEagle3(config, attention_backend="sdpa").float().eval()
    randomize(model, seed)
    d2t, t2d = vocab()
    model.d2t.copy_(d2t)
    model.t2d.copy_(t2d)
    out = tmp / "draft"
    model.save_pretrained(str(out))
    return model, out


def specforge_run(model, aux, ids, target_logits, loss_mask, K):
    """SpecForge's ``OnlineEagle3Model.forward`` on one offline sample, prepared as SpecForge's
    trainer prepares it (``normalize_offline_sample`` then ``TargetHead.preprocess``).
    Returns (per-step logits, acc_k correct counts, denominators)."""
    with eager():
        from specforge.algorithms.eagle3.data import normalize_offline_sample
        from specforge.algorithms.eagle3.model import OnlineEagle3Model
        from specforge.utils import padding

        raw = {
            "aux_hidden_state": aux[None],
            "hidden_state": target_logits[None],
            "input_ids": ids,
            "loss_mask": loss_mask,
        }
        s = normalize_offline_sample(raw, max_len=ids.shape[0])
        input_ids = padding(s["input_ids"], left=False)
        target = padding(s["target"], left=False)
        lm = s["loss_mask"][..., None]
        seen = []
        orig = model.compute_logits

        def spy(h):
            out = orig(h)
            seen.append(out.detach().clone())
            return out

        model.compute_logits = spy
        try:
            trainer = OnlineEagle3Model(model, length=K, attention_backend="sdpa")
            with torch.no_grad():
                outs = trainer(
                    input_ids=input_ids,
                    attention_mask=s["attention_mask"],
                    target=target,
                    loss_mask=lm,
                    hidden_states=s["hidden_state"],
                )
        finally:
            del model.compute_logits
    _, _, _, corrects, denoms, _, _ = outs
    return seen, [float(c) for c in corrects], [float(d) for d in denoms]


# ------------------------------------------------------------------ speculators
def speculators_drafter(
    tmp: Path,
    seed: int = 0,
    *,
    model_type: str = "qwen3",
    layer_ids=(1, 2, 3),
    rope=None,
    attention_bias: bool = False,
    max_position_embeddings: int = 2048,
    num_layers: int = 1,
    std: float = 0.3,
    **flags,
):
    """A speculators ``Eagle3DraftModel`` with random weights and the target's lm_head[t2d] as
    ``verifier_lm_head``, saved by its save_pretrained."""
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import LlamaConfig, Qwen3Config

    cls = {"qwen3": Qwen3Config, "llama": LlamaConfig}[model_type]
    kw = dict(
        hidden_size=H,
        num_attention_heads=HEADS,
        num_key_value_heads=KV,
        head_dim=HD,
        intermediate_size=INTER,
        vocab_size=V,
        num_hidden_layers=num_layers,
        rms_norm_eps=1e-6,
        attention_bias=attention_bias,
        max_position_embeddings=max_position_embeddings,
    )
    if rope is not None:
        kw["rope_parameters"] = rope
    tl = cls(**kw)
    tl._attn_implementation = "eager"
    cfg = Eagle3SpeculatorConfig(
        transformer_layer_config=tl,
        draft_vocab_size=VD,
        eagle_aux_hidden_state_layer_ids=list(layer_ids),
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=3)],
            default_proposal_method="greedy",
            verifier=VerifierConfig(name_or_path=None, architectures=[f"{model_type}ForCausalLM"]),
        ),
        **flags,
    )
    with eager():
        model = Eagle3DraftModel(cfg).float().eval()
    randomize(model, seed, std)
    d2t, t2d = vocab()
    model.load_vocab_mappings(t2d, d2t)
    out = tmp / "draft"
    model.save_pretrained(str(out))
    return model, out


def speculators_run(model, aux, ids, last, loss_mask, K, target_lm, target_norm):
    """speculators' ``shift_batch`` + ``Eagle3DraftModel.forward`` with its loss and metrics.
    ``aux [L, n*H]``, ``ids [L]``, ``last [L, H]`` (the verifier's pre-norm last state).
    Returns (per-step logits over speculators' positions, metrics dict)."""
    from speculators.losses import resolve_loss_config  # the fused (default) losses need Triton
    from speculators.models.eagle3 import shift_batch

    with torch.no_grad():
        model.verifier_lm_head.weight.copy_(target_lm[model.t2d.bool()] if model.t2d is not None else target_lm)
        model.verifier_norm.weight.copy_(target_norm)
    L = ids.shape[0]
    b = shift_batch(
        {
            "input_ids": ids,
            "hidden_states": aux,
            "verifier_last_hidden_states": last,
            "loss_mask": torch.ones(L, dtype=torch.long) if loss_mask is None else loss_mask,
            "lengths": torch.tensor([L]),
            "position_ids": torch.arange(L),
        }
    )
    seen = []
    hook = model.lm_head.register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()))
    try:
        with eager(), torch.no_grad():
            _, _, metrics = model(
                hidden_states=b["hidden_states"][None],
                input_ids=b["input_ids"][None],
                document_ids=torch.zeros(1, L - 1, dtype=torch.long),
                loss_mask=None if loss_mask is None else b["loss_mask"][None],
                position_ids=b["position_ids"][None],
                verifier_last_hidden_states=b["verifier_last_hidden_states"][None],
                ttt_steps=K,
                loss_config=resolve_loss_config("kl_div", "eager"),
            )
    finally:
        hook.remove()
    return seen, {k: float(v) for k, v in metrics.items()}


def write_target(path: Path, embed, lm, norm, eps: float = 1e-6) -> Path:
    """A minimal HF target folder: config.json + model.safetensors (embedding, lm_head, final norm)."""
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": embed.shape[1],
                "vocab_size": embed.shape[0],
                "num_hidden_layers": 4,
                "num_attention_heads": HEADS,
                "intermediate_size": INTER,
                "rms_norm_eps": eps,
            }
        )
    )
    save_file(
        {
            "model.embed_tokens.weight": embed.contiguous(),
            "lm_head.weight": lm.contiguous(),
            "model.norm.weight": norm.contiguous(),
        },
        str(path / "model.safetensors"),
    )
    return path


# ------------------------------------------------------------------ the subprocess
def _triton_stub() -> None:
    import importlib.util
    import os
    import sys

    if importlib.util.find_spec("triton") is not None:
        return
    spec = importlib.util.find_spec("sglang")
    path = os.path.join(os.path.dirname(spec.origin), "_platform_stubs.py")
    s = importlib.util.spec_from_file_location("_wb_sgl_stubs", path)
    m = importlib.util.module_from_spec(s)
    sys.modules[s.name] = m
    s.loader.exec_module(m)
    sys.meta_path.insert(0, m._TritonFinder())
    m._make_mock("triton")
    m._make_mock("triton.language")  # "import triton.language as tl" must find the mock itself


def _specforge_loss_on_cpu() -> None:
    import specforge.algorithms.eagle3.model as sm
    from specforge.core.loss import _compute_loss

    class TorchLogSoftmaxLoss:
        @staticmethod
        def apply(logits, target_p, position_mask):
            return _compute_loss(logits, target_p, position_mask)

    sm.LogSoftmaxLoss = TorchLogSoftmaxLoss


def _inputs(seed: int, L: int, width: int):
    g = torch.Generator().manual_seed(1000 + seed)
    aux = torch.randn(L, width, generator=g)
    ids = torch.randint(0, V, (L,), generator=g)
    mask = (torch.rand(L, generator=g) > 0.25).long()
    return g, aux, ids, mask


def run_specforge(out: Path, case: dict) -> None:
    cfg = dict(case.get("config", {}))
    th = int(case.get("target_hidden", H))
    L, K = int(case.get("L", 24)), int(case.get("K", 3))
    model, d = specforge_drafter(out, case.get("seed", 0), target_hidden=th, **cfg)
    g, aux, ids, mask = _inputs(case.get("seed", 0), L, 3 * th)
    # a teacher that agrees with the draft's step-0 top-1 on every other position (hits to count)
    if case.get("e2e"):
        # an offline sample as SpecForge stores it: the post-norm final state, projected by the
        # target's lm_head into the teacher (TargetHead); the files go through drafter eval
        lm = torch.randn(V, H, generator=g)
        final = torch.randn(L, H, generator=g)
        seen, _, _ = specforge_run(model, aux, ids, final @ lm.T, mask, K)
        step0 = seen[0][0].argmax(-1) + model.d2t[seen[0][0].argmax(-1)]
        for t in range(0, L - 1, 2):
            final[t + 1] = lm[step0[t]] * 3.0
        logits = final @ lm.T
        data = {
            "input_ids": ids.clone(),
            "loss_mask": mask.clone(),
            "hidden_state": final[None].clone(),
            "aux_hidden_state": aux[None].clone(),
        }
        (d.parent / "data" / "rows_0-2000").mkdir(parents=True)
        torch.save(data, str(d.parent / "data" / "rows_0-2000" / "data_0.ckpt"))
        write_target(d.parent / "target", model.embed_tokens.weight.detach(), lm, torch.ones(H))
    else:
        logits = torch.randn(L, V, generator=g)
        seen, corrects, denoms = specforge_run(model, aux, ids, logits, mask, K)
        step0 = seen[0][0].argmax(-1) + model.d2t[seen[0][0].argmax(-1)]
        for t in range(0, L - 1, 2):
            logits[t + 1, step0[t]] += 50.0
    seen, corrects, denoms = specforge_run(model, aux, ids, logits, mask, K)
    torch.save(
        {
            "aux": aux,
            "ids": ids,
            "target_logits": logits,
            "mask": mask,
            "K": K,
            "logits": [x[0] for x in seen],
            "corrects": corrects,
            "denoms": denoms,
        },
        d / "ref.pt",
    )
    (d / "case.json").write_text(json.dumps(case))


def run_speculators(out: Path, case: dict) -> None:
    seed = int(case.get("seed", 0))
    L, K = int(case.get("L", 24)), int(case.get("K", 3))
    kw = dict(case.get("config", {}))
    model, d = speculators_drafter(out, seed, **kw)
    n_aux = len(kw.get("layer_ids", (1, 2, 3)))
    g, aux, ids, mask = _inputs(seed, L, n_aux * H)
    last = torch.randn(L, H, generator=g) * 2.0
    if case.get("aux_final"):  # the last aux slot is the verifier's final (pre-norm) state itself
        aux[:, -H:] = last
    lm = torch.randn(V, H, generator=g)
    norm = 1.0 + 0.1 * torch.randn(H, generator=g)
    use_mask = mask if case.get("loss_mask", True) else None
    # a teacher that agrees with the draft's step-0 top-1 on every other position (hits to count)
    seen, _ = speculators_run(model, aux, ids, last, use_mask, K, lm, norm)
    hot = (torch.arange(VD) + model.d2t) if model.d2t is not None else torch.arange(V)
    pred = seen[0][0].argmax(-1)
    for i in range(0, L - 1, 2):
        last[i + 1] = lm[hot[pred[i]]] * 3.0
    if case.get("aux_final"):
        aux[:, -H:] = last
    if case.get("fp8"):
        # hs_connectors' FP8 connector format; the reference reads it back through hs_connectors
        from hs_connectors.fp8_utils import SCALES_KEY, dequantize_fp8_tensor, quantize_tensor_to_fp8
        from safetensors.torch import save_file

        stacked = torch.cat([aux.view(L, n_aux, H), last[:, None]], dim=1)
        q, sc = quantize_tensor_to_fp8(stacked)
        data = d.parent / "data"
        data.mkdir(exist_ok=True)
        save_file({"token_ids": ids, "hidden_states": q, SCALES_KEY: sc}, str(data / "hs_0.safetensors"))
        back = dequantize_fp8_tensor(q, sc, dtype=torch.float32)
        aux, last = back[:, :n_aux].reshape(L, n_aux * H), back[:, -1]
        write_target(d.parent / "target", model.embed_tokens.weight.detach(), lm, norm)
    seen, metrics = speculators_run(model, aux, ids, last, use_mask, K, lm, norm)
    torch.save(
        {
            "aux": aux,
            "ids": ids,
            "last": last,
            "lm": lm,
            "norm": norm,
            "mask": use_mask,
            "K": K,
            "logits": [x[0] for x in seen],
            "metrics": metrics,
        },
        d / "ref.pt",
    )
    (d / "case.json").write_text(json.dumps(case))


def main(argv) -> int:
    which, out, cases = argv[0], Path(argv[1]), json.loads(Path(argv[2]).read_text())
    out.mkdir(parents=True, exist_ok=True)
    if which == "specforge":
        import specforge.modeling.draft.llama3_eagle  # noqa: F401
        import torch.utils.flop_counter  # noqa: F401  (torch inspects triton once; before the stub)

        _triton_stub()
        with eager():
            _specforge_loss_on_cpu()
    for name, case in cases.items():
        sub = out / name
        sub.mkdir(exist_ok=True)
        (run_specforge if which == "specforge" else run_speculators)(sub, case)
    return 0


if __name__ == "__main__":
    import sys

    code = main(sys.argv[1:])
    gc.freeze()  # nor the interpreter's pass over them at exit
    raise SystemExit(code)
