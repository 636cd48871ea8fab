"""Workbench methods for the accept-length predictor (predict, predict_sweep, fit).

Give the per-depth rates in exactly one convention: ``acc=`` (SpecForge/EAGLE training acc_k),
``conditional=``, ``marginal=`` (vLLM per-position rates) or ``alpha=``. See ``workbench.predict``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from workbench.errors import InputError
from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.predict import Fit, PointsLike, Prediction, RatesLike, Sweep, TopkHitsLike

_CONVENTIONS = ("acc", "conditional", "marginal", "alpha")


def _one_convention(
    acc: RatesLike | None, conditional: RatesLike | None, marginal: RatesLike | None, alpha: RatesLike | None
) -> tuple[str, RatesLike]:
    given = [(name, v) for name, v in zip(_CONVENTIONS, (acc, conditional, marginal, alpha)) if v is not None]
    if len(given) != 1:
        names = ", ".join(n for n, _ in given) or "none"
        raise InputError(f"rates: give exactly one of acc, conditional, marginal, alpha (got {names})")
    return given[0]


class PredictAPI(WorkbenchBase):
    def predict(
        self,
        acc: RatesLike | None = None,
        *,
        conditional: RatesLike | None = None,
        marginal: RatesLike | None = None,
        alpha: RatesLike | None = None,
        steps: int | None = None,
        topk: int | None = None,
        draft_tokens: int | None = None,
        topk_hits: TopkHitsLike | None = None,
        observed_accept_length: float | None = None,
        verify_ms: PointsLike | None = None,
        draft_ms: float | None = None,
        baseline_ms: float | None = None,
    ) -> Prediction:
        """Expected accept length of one (steps, topk, draft_tokens) configuration.

        Rates in exactly one convention (``acc``, ``conditional``, ``marginal`` or ``alpha``; each
        in [0, 1]; a list shorter than ``steps`` reuses its last rate and says so in ``warnings``).
        steps/topk/draft_tokens: all three or none (SGLang's rule; none: SGLang's usual (3, 1, 4)).
        ``topk_hits`` (trees only): cumulative top-1..top-k hit rates, one list or one per depth.
        With ``observed_accept_length`` the result carries a verdict; with ``verify_ms``
        (``{draft_tokens: ms}``) and ``draft_ms`` a throughput estimate, and a speedup with
        ``baseline_ms``. Journaled as ``predict``; a bad input raises ``InputError`` naming it.
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
        acc: RatesLike | None = None,
        *,
        conditional: RatesLike | None = None,
        marginal: RatesLike | None = None,
        alpha: RatesLike | None = None,
        verify_ms: PointsLike,
        draft_ms: float,
        baseline_ms: float | None = None,
        steps: Iterable[int] = range(1, 9),
        topks: Iterable[int] | None = None,
        topk_hits: TopkHitsLike | None = None,
    ) -> Sweep:
        """Rank (steps, topk, draft_tokens) by predicted tokens/s per request,
        ``AL / (t_verify(draft_tokens) + steps * draft_ms)``. Rates as for ``predict``; trees
        (topk > 1) only with ``topk_hits``; only draft-token counts inside the measured
        ``verify_ms`` are ranked (those left out are counted in ``warnings``). Journaled as
        ``predict.sweep``."""
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

    def fit(self, measured: PointsLike, *, max_steps: int = 8) -> Fit:
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
