"""Workbench methods for standalone drafter evaluation and the strict weight check."""

from __future__ import annotations

from typing import Optional


class DrafterAPI:
    def drafter_check(self, draft: str):
        """Strict weight check of a draft checkpoint: missing, unexpected (SGLang would silently drop
        them) and mis-shaped tensors against what its config.json implies. Returns a WeightReport."""
        from workbench.drafter.checkpoint import check_weights, read_config, read_tensors

        from pathlib import Path

        config = read_config(draft)
        source = Path(draft) / "config.json" if Path(draft).is_dir() else Path(draft)
        report = check_weights(config, read_tensors(draft), source=str(source))
        self._record("drafter.check", str(draft), {"ok": report.ok, "missing": report.missing,
                                                  "unexpected": report.unexpected,
                                                  "mismatched": len(report.mismatched)})
        return report

    def drafter_eval(self, draft: str, data: str, target: str, *, depth: Optional[int] = None, topk: int = 4,
                     max_samples: Optional[int] = None, device: Optional[str] = None, strict: bool = True):
        """Evaluate a drafter on training data the way training measures it (SpecForge acc_k,
        full/conditional accuracy, top-k per depth, vocabulary coverage) and predict its accept
        length. ``target`` is the target model folder: only its embedding, lm_head and final norm
        are read, memory-mapped."""
        from workbench.drafter.evaluate import evaluate

        result = evaluate(draft, data, target, depth=depth, topk=topk, max_samples=max_samples, device=device,
                          strict=strict, progress=self.progress)
        self._record("drafter.eval", str(draft), {
            "data": str(data), "target": str(target), "depth": result.depth, "samples": result.samples,
            "positions": result.positions, "acc": result.acc, "full_acc": result.full_acc,
            "cond_acc": result.cond_acc, "accept_length": result.predicted.get("accept_length")})
        return result
