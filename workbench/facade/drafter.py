"""Workbench methods for standalone drafter evaluation and the strict weight check."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.drafter.checkpoint import WeightReport
    from workbench.drafter.evaluate import DrafterEval


class DrafterAPI(WorkbenchBase):
    def drafter_check(self, draft: str) -> WeightReport:
        """Strict weight check of a draft checkpoint: missing, unexpected (SGLang would silently drop
        them) and mis-shaped tensors against what its config.json implies. Returns a WeightReport."""
        from pathlib import Path

        from workbench.drafter.checkpoint import check_weights, read_config, read_tensor_shapes

        config = read_config(draft)
        source = Path(draft) / "config.json" if Path(draft).is_dir() else Path(draft)
        report = check_weights(config, read_tensor_shapes(draft), source=str(source))
        self._record(
            "drafter.check",
            str(draft),
            {
                "ok": report.ok,
                "missing": report.missing,
                "unexpected": report.unexpected,
                "mismatched": len(report.mismatched),
            },
        )
        return report

    def drafter_eval(
        self,
        draft: str,
        data: str,
        target: str,
        *,
        depth: int | None = None,
        topk: int = 4,
        max_samples: int | None = None,
        device: str | None = None,
        strict: bool = True,
        convention: str | None = None,
    ) -> DrafterEval:
        """Evaluate a drafter on training data the way training measures it (SpecForge acc_k and
        speculators' full/cond_acc, each computed as that tool computes it; the workbench's chain
        rates; top-k per depth, vocabulary coverage) and predict its accept length. ``target`` is
        the target model folder: only its embedding, lm_head and final norm are read,
        memory-mapped. ``convention``: read the draft's flags as "specforge", "speculators" or
        "sglang" does (default: the trainer of the checkpoint's layout)."""
        from workbench.drafter.evaluate import evaluate

        result = evaluate(
            draft,
            data,
            target,
            depth=depth,
            topk=topk,
            max_samples=max_samples,
            device=device,
            strict=strict,
            progress=self.progress,
            convention=convention,
        )
        self._record(
            "drafter.eval",
            str(draft),
            {
                "data": str(data),
                "target": str(target),
                "depth": result.depth,
                "samples": result.samples,
                "positions": result.positions,
                "acc": result.acc,
                "full_acc": result.full_acc,
                "cond_acc": result.cond_acc,
                "accept_length": result.predicted.get("accept_length"),
            },
        )
        return result

    def drafter_predictor_inputs(self, result: DrafterEval) -> dict[str, Any]:
        """What the Predictor takes for this drafter: ``marginal`` rates P_k (full_acc, made
        non-increasing), ``topk_hits`` for trees (or None), ``steps`` (the evaluated depth), and
        ``observed_accept_length`` None: an offline evaluation observed no server, so a verdict
        against some other run's observed value would say nothing about this drafter."""
        from workbench.drafter.evaluate import predict_inputs

        return {**predict_inputs(result), "observed_accept_length": None}
