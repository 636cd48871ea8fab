"""Workbench methods for the doctor (static checks, capture report)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.doctor.static import DoctorReport
    from workbench.layers import CaptureResult


class DoctorAPI(WorkbenchBase):
    def doctor(
        self,
        draft: str,
        target_config: Optional[str] = None,
        *,
        engine: Optional[str] = None,
        algorithm: Optional[str] = None,
        trained_layers: Optional[Sequence[int]] = None,
        trained_convention: str = "output-of-layer",
        context_length: Optional[int] = None,
        num_layers: Optional[int] = None,
        trained_engine: Optional[str] = None,
        env: Optional[dict[str, str]] = None,
        cuda_graph: bool = True,
    ) -> "DoctorReport":
        """Static checks of a draft directory (and the target config, engine, algorithm, what the
        drafter was trained on, and ``trained_engine``: what captured its training data, e.g.
        'specforge==0.2.0'). Returns a DoctorReport: findings (each with its evidence class), the
        capture report and the checks skipped for lack of inputs."""
        from workbench.doctor import run_static

        report = run_static(
            draft,
            target_config,
            engine=engine,
            algorithm=algorithm,
            trained_layers=list(trained_layers) if trained_layers is not None else None,
            trained_convention=trained_convention,
            context_length=context_length,
            num_layers=num_layers,
            trained_engine=trained_engine,
            env=env,
            cuda_graph=cuda_graph,
        )
        self._record(
            "doctor",
            report.inputs.get("draft", str(draft)),
            {"inputs": report.inputs, "codes": report.codes(), "errors": len(report.errors)},
        )
        return report

    def layer_capture(
        self, engine: str, ids: Optional[Sequence[int]], num_layers: int, arch: Optional[str] = None
    ) -> "CaptureResult":
        """What ``engine`` captures for config ids on a target with ``num_layers`` layers."""
        from workbench.doctor.engines import engine_rule

        return engine_rule(engine, arch).capture(list(ids) if ids is not None else None, num_layers)
