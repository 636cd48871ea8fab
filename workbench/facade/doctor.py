"""Workbench methods for the doctor (static checks, capture report)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.doctor.static import DoctorReport


class DoctorAPI(WorkbenchBase):
    def doctor(
        self,
        draft: str,
        target_config: str | None = None,
        *,
        engine: str | None = None,
        algorithm: str | None = None,
        trained_layers: Sequence[int] | None = None,
        trained_convention: str = "output-of-layer",
        context_length: int | None = None,
        num_layers: int | None = None,
        trained_engine: str | None = None,
        env: dict[str, str] | None = None,
        cuda_graph: bool = True,
        read: bool = False,
    ) -> DoctorReport:
        """Static checks of a draft directory (and the target config, engine, algorithm, what the
        drafter was trained on, and ``trained_engine``: what captured its training data, e.g.
        'specforge==0.2.0'). Returns a DoctorReport: findings (each with its evidence class), the
        capture report and the checks skipped for lack of inputs. A serving release whose code was not
        read raises ``ReleaseNotReadError`` (exit 2), or with ``read=True`` its wheel is downloaded and read."""
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
            read=read,
        )
        self._record(
            "doctor",
            report.inputs.get("draft", str(draft)),
            {"inputs": report.inputs, "codes": report.codes(), "errors": len(report.errors)},
        )
        return report
