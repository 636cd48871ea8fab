"""Workbench methods for hidden-state readers and the alignment engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.hidden.results import AlignResult, Thresholds
    from workbench.hidden.view import Capture


class HiddenAPI(WorkbenchBase):
    def hidden_open(self, path: str, *, format: str | None = None, sample: int | None = None, **hints: Any) -> Capture:
        """Open a capture (any supported format) and describe it: tensors, roles, points, tokens."""
        from workbench.hidden import open_capture

        return open_capture(path, format=format, sample=sample, **hints)

    def align(
        self,
        train: str,
        infer: str,
        *,
        engine: str | None = None,
        target: str | None = None,
        num_layers: int | None = None,
        arch: str | None = None,
        draft: str | None = None,
        train_format: str | None = None,
        infer_format: str | None = None,
        sample: int | None = None,
        infer_sample: int | None = None,
        train_layer_ids: Sequence[int] | None = None,
        device: str | None = None,
        include_final: bool = False,
        abs_stats: str = "top",
        thresholds: Thresholds | None = None,
    ) -> AlignResult:
        """Which capture point is each training slot? Compares every slot of ``train`` (a training
        capture) with every candidate of ``infer`` and, with ``engine`` and the layer count (from
        ``target``'s config.json, ``num_layers`` or the capture), recommends the engine's
        ``eagle_aux_hidden_state_layer_ids``; with ``draft`` (its config.json) a
        ``layer-ids-engine-mismatch`` finding carries the config edit when the draft disagrees."""
        from pathlib import Path

        from workbench.hidden import open_capture
        from workbench.hidden.align import align
        from workbench.hidden.recommend import recommend, target_info

        tr = open_capture(
            train, format=train_format, sample=sample, layer_ids=list(train_layer_ids) if train_layer_ids else None
        )
        inf = open_capture(infer, format=infer_format, sample=infer_sample)
        if target:
            t_arch, t_layers = target_info(target)
            arch = arch or t_arch
            num_layers = num_layers or t_layers
        num_layers = num_layers or inf.meta.get("num_layers")
        result = align(
            tr,
            inf,
            device=device,
            include_final=include_final,
            abs_stats=abs_stats,
            thresholds=thresholds,
            progress=self.progress,
        )
        if engine or draft:
            cfg = cfg_path = None
            if draft:
                from workbench.drafter.checkpoint import read_config

                cfg = read_config(draft)
                p = Path(draft)
                cfg_path = str((p / "config.json") if p.is_dir() else p)
            rec, findings = recommend(
                result,
                engine or "sglang",
                arch=arch,
                num_layers=num_layers,
                draft_config=cfg,
                draft_config_path=cfg_path,
            )
            result.recommendation = rec
            result.findings.extend(findings)
        self._record(
            "align",
            str(infer),
            {
                "train": str(train),
                "infer": str(infer),
                "tokens": result.tokens_compared,
                "best": [b.physical or b.candidate for b in result.best],
                "verdicts": result.verdicts(),
                "recommendation": result.recommendation.layer_ids if result.recommendation else None,
                "engine": result.recommendation.engine if result.recommendation else None,
                "codes": [f.code for f in result.findings],
                "seconds": round(result.seconds, 3),
            },
        )
        return result
