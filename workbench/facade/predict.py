"""Workbench methods for the accept-length predictor (predict, predict_sweep, fit).

Give the per-depth rates in exactly one convention: ``acc=`` (SpecForge/EAGLE training acc_k),
``conditional=``, ``marginal=`` (vLLM per-position rates) or ``alpha=``. See ``workbench.predict``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.predict import Fit, Prediction, Sweep

_CONVENTIONS = ("acc", "conditional", "marginal", "alpha")


def _one_convention(acc: Any, conditional: Any, marginal: Any, alpha: Any) -> tuple[str, Any]:
    given = [(name, v) for name, v in zip(_CONVENTIONS, (acc, conditional, marginal, alpha)) if v is not None]
    if len(given) != 1:
        names = ", ".join(n for n, _ in given) or "none"
        raise InputError(f"rates: give exactly one of acc, conditional, marginal, alpha (got {names})")
    return given[0]


class PredictAPI(WorkbenchBase):
    def predict(
        self,
        acc: Any = None,
        *,
        conditional: Any = None,
        marginal: Any = None,
        alpha: Any = None,
        steps: int | None = None,
        topk: int | None = None,
        draft_tokens: int | None = None,
        topk_hits: Any = None,
        observed_accept_length: float | None = None,
        verify_ms: Any = None,
        draft_ms: float | None = None,
        baseline_ms: float | None = None,
    ) -> Prediction:
        """Expected accept length of one (steps, topk, draft_tokens) configuration.

        steps/topk/draft_tokens: all three or none (SGLang's rule). With ``observed_accept_length``
        the result carries a verdict; with ``verify_ms`` ({draft_tokens: ms}) and ``draft_ms`` a
        throughput estimate (and a speedup with ``baseline_ms``).
        """
        from workbench import predict as core

        convention, values = _one_convention(acc, conditional, marginal, alpha)
        result = core.predict(
            convention,
            values,
            steps,
            topk,
            draft_tokens,
            topk_hits=topk_hits,
            observed_accept_length=observed_accept_length,
            verify_ms=verify_ms,
            draft_ms=draft_ms,
            baseline_ms=baseline_ms,
        )
        payload = {
            "convention": convention,
            "values": list(core.parse_rates(convention, values).values),
            "steps": result.steps,
            "topk": result.topk,
            "draft_tokens": result.draft_tokens,
            "accept_length": result.accept_length,
            "warnings": result.warnings,
        }
        if result.verdict is not None:
            payload["observed_accept_length"] = observed_accept_length
            payload["verdict"] = result.verdict.code
        if result.throughput is not None:
            payload["tokens_per_s"] = result.throughput.tokens_per_s
        self._record("predict", f"{result.steps}/{result.topk}/{result.draft_tokens}", payload)
        return result

    def predict_sweep(
        self,
        acc: Any = None,
        *,
        conditional: Any = None,
        marginal: Any = None,
        alpha: Any = None,
        verify_ms: Any,
        draft_ms: float,
        baseline_ms: float | None = None,
        steps: Iterable[int] = range(1, 9),
        topks: Iterable[int] | None = None,
        topk_hits: Any = None,
    ) -> Sweep:
        """Rank (steps, topk, draft_tokens) by tokens/s per request; trees only with ``topk_hits``."""
        from workbench import predict as core

        convention, values = _one_convention(acc, conditional, marginal, alpha)
        result = core.sweep(
            convention,
            values,
            verify_ms=verify_ms,
            draft_ms=draft_ms,
            baseline_ms=baseline_ms,
            steps=steps,
            topks=topks,
            topk_hits=topk_hits,
        )
        best = result.best
        self._record(
            "predict.sweep",
            f"{best.steps}/{best.topk}/{best.draft_tokens}",
            {
                "convention": convention,
                "configurations": len(result),
                "best": best,
                "baseline_tokens_per_s": result.baseline_tokens_per_s,
                "warnings": result.warnings,
            },
        )
        return result

    def fit(self, measured: Any, *, max_steps: int = 8) -> Fit:
        """Per-depth conditional rates from chain accept lengths measured at several step counts
        (``{steps: accept_length}``), extrapolated to ``max_steps``."""
        from workbench import predict as core

        result = core.fit(measured, max_steps=max_steps)
        self._record(
            "predict.fit",
            ",".join(result.measured),
            {
                "measured": result.measured,
                "conditional": result.conditional,
                "max_residual": result.max_residual,
                "warnings": result.warnings,
            },
        )
        return result
