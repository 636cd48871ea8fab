"""Workbench methods for the diagnosis loop on a live server and the demo.

    report = wb.doctor_live(3, training_data="/data/rows", dump="yes")
    outcome = wb.live_fix(3, confirm=True)          # history write, relaunch, measure, compare
    print(outcome.comparison.text())

Training data is read on the server's host (``[live] training_data`` in workbench.toml is the
default, ``[live.profiles.NAME] training_data`` per profile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench.confirm import Plan, require
from workbench.errors import InputError
from workbench.facade.configs import _as_fix
from workbench.facade.servers import ServersAPI
from workbench.servers.registry import ServerState

if TYPE_CHECKING:
    from workbench.configs.history import ConfigChange
    from workbench.facade.configs import FixLike
    from workbench.live.demo import DemoPrepareOps, DemoResult, DemoSetup
    from workbench.live.report import Comparison, FixOutcome, LiveReport
    from workbench.progress import ProgressCallback
    from workbench.servers.measure import Measurement
    from workbench.servers.registry import ServerRecord


class LiveAPI(ServersAPI):
    # -- settings -----------------------------------------------------------------------------------
    def live_training_data(self, profile: str | None = None) -> str | None:
        live = self.workspace.section("live") if hasattr(self.workspace, "section") else {}
        per = (live.get("profiles") or {}).get(profile or "", {}) if isinstance(live, dict) else {}
        value = (per or {}).get("training_data") or (live or {}).get("training_data")
        if value is not None and not isinstance(value, str):
            raise InputError("workbench.toml/[live].training_data: expected a path on the server's host")
        return value

    def live_prompts(self) -> str | None:
        """``[live] prompts``: the measurement protocol's prompt set (a JSON file), default the
        package's mixed set."""
        live = self.workspace.section("live")
        value = live.get("prompts") if isinstance(live, dict) else None
        if value is not None and not isinstance(value, str):
            raise InputError("workbench.toml/[live].prompts: expected the path of a prompt-set JSON file")
        return value

    def session_profile(self, name: str, table: dict[str, Any]) -> None:
        """A profile that lives for this session only (the doctor's tensor-dump relaunch)."""
        _ = self.lifecycle  # creates the overlay the lifecycle reads
        self.__dict__.setdefault("_profile_overlay", {})[name] = table

    # -- the doctor ---------------------------------------------------------------------------------
    def live_dump_plan(self, server_id: int, samples: int = 4, alongside: bool = False) -> Plan:
        """What the doctor's tensor-dump relaunch will do (confirm it, then call doctor_live with
        confirm=True)."""
        from workbench.live.doctor import LiveDoctor, dump_plan

        return dump_plan(self, LiveDoctor(self, server_id), samples, alongside)

    def doctor_live(
        self,
        server_id: int,
        training_data: str | None = None,
        *,
        accuracies: list[float] | None = None,
        samples: int = 4,
        eval_samples: int = 32,
        measure: bool = True,
        measure_tokens: int | None = None,
        measure_concurrency: int = 4,
        dump: str = "ask",
        confirm: bool | Callable[[Plan], bool] = False,
        static: bool = True,
        dump_alongside: bool = False,
        ready_timeout: float | None = None,
    ) -> LiveReport:
        """The doctor on a running server: static checks of the config it loaded, observed vs
        predicted accept length, hidden states of training samples through the server aligned with
        the training slots, findings ranked by how much of the gap they explain.

        ``dump``: ``"ask"`` (default) runs the tensor-dump relaunch when ``confirm`` is True (or a
        callable that answers its Plan with True) and otherwise returns it as ``report.pending``;
        ``"yes"`` runs it; ``"no"`` never does."""
        from workbench.live.doctor import DiagnoseOptions, diagnose

        sid = int(server_id)
        rec = self.server(sid)
        training_data = training_data or self.live_training_data(rec.profile)
        options = DiagnoseOptions(
            training_data=training_data,
            accuracies=accuracies,
            samples=samples,
            eval_samples=eval_samples,
            measure=measure,
            measure_tokens=measure_tokens,
            measure_concurrency=measure_concurrency,
            dump=dump,
            confirm=confirm,
            static=static,
            dump_alongside=dump_alongside,
            ready_timeout=ready_timeout,
            prompts=self.live_prompts(),
        )
        report = diagnose(self, sid, options, progress=self.progress)
        self._record(
            "live.doctor",
            str(sid),
            {
                "server_id": sid,
                "profile": report.profile,
                "engine": report.engine,
                "training_data": training_data,
                "observed": report.observed.to_dict(),
                "predicted": {k: v for k, v in report.predicted.to_dict().items() if k not in ("acc", "full_acc")},
                "gap": report.gap,
                "features": report.features.to_dict(),
                "findings": [
                    {
                        "code": f.code,
                        "severity": f.severity,
                        "source": f.source,
                        "explains": f.explains,
                        "share": f.share,
                        "message": f.message,
                    }
                    for f in report.findings
                ],
                "fix": report.fix.to_dict() if report.fix else None,
                "alignment": {
                    "mode": report.alignment.mode,
                    "best": [b.point for b in report.alignment.best],
                    "verdicts": [b.verdict for b in report.alignment.best],
                    "recommendation": (
                        report.alignment.recommendation.layer_ids if report.alignment.recommendation else None
                    ),
                }
                if report.alignment
                else None,
                "pending": report.pending.summary if report.pending else None,
                "transfers": [t.to_dict() for t in report.transfers],
                "seconds": round(report.seconds, 2),
            },
        )
        return report

    # -- the fix --------------------------------------------------------------------------------------
    def live_fix_plan(self, server_id: int, fix: FixLike = None) -> Plan:
        from workbench.live.fix import last_fix

        return self.config_fix_plan(fix if fix is not None else last_fix(self, int(server_id)))

    def live_apply_fix(self, server_id: int, fix: FixLike = None, *, confirm: bool = False) -> ConfigChange:
        """Write the fix (default: the newest doctor report's) through the config history: atomic,
        compare-and-swap, with the fix as the recorded reason. Returns the ConfigChange."""
        from workbench.live.fix import last_fix

        fix = fix if fix is not None else last_fix(self, int(server_id))
        change = self.config_apply_fix(fix, confirm=confirm)
        self._record(
            "live.fix",
            str(server_id),
            {
                "server_id": int(server_id),
                "location": change.location,
                "version": change.version.number,
                "summary": _as_fix(fix).summary,
            },
        )
        return change

    def live_relaunch_plan(self, server_id: int) -> Plan:
        from workbench.live.fix import relaunch_plan

        return relaunch_plan(self, int(server_id))

    def live_relaunch(
        self,
        server_id: int,
        *,
        confirm: bool = False,
        measure: bool = True,
        measure_tokens: int | None = None,
        measure_concurrency: int | None = None,
        timeout: float | None = None,
    ) -> ServerRecord:
        """Stop the server (if running), launch its profile again, wait until ready and measure with
        the same protocol settings as its last measurement. Returns the new ServerRecord."""
        from workbench.live.fix import relaunch

        sid = int(server_id)
        require(self.live_relaunch_plan(sid), confirm)
        rec, st, m = relaunch(
            self,
            sid,
            measure=measure,
            measure_tokens=measure_tokens,
            measure_concurrency=measure_concurrency,
            timeout=timeout,
            prompts=self.live_prompts(),
        )
        self._record(
            "live.relaunch",
            str(rec.id),
            {
                "server_id": rec.id,
                "from_server": sid,
                "profile": rec.profile,
                "state": st.state,
                "measured": m is not None,
            },
        )
        return rec

    def live_compare(self, before: int, after: int) -> Comparison:
        """Two servers side by side: accept length, tokens/s, the layer ids and config version each
        loaded (from their last measurements and the config history)."""
        from workbench.live.fix import compare

        cmp = compare(self, int(before), int(after))
        self._record("live.compare", str(after), {"server_id": int(after), "before": int(before), "rows": cmp.rows})
        return cmp

    def live_fix(
        self,
        server_id: int,
        fix: FixLike = None,
        *,
        confirm: bool = False,
        relaunch: bool = True,
        measure: bool = True,
        measure_tokens: int | None = None,
        timeout: float | None = None,
    ) -> FixOutcome:
        """The one-key fix: apply (history), relaunch the same profile, measure, compare."""
        from workbench.live.fix import last_fix
        from workbench.live.report import FixOutcome

        sid = int(server_id)
        fix = fix if fix is not None else last_fix(self, sid)
        fix_plan = self.live_fix_plan(sid, fix)
        plan = Plan(
            "fix",
            fix_plan.target,
            fix_plan.summary
            + (f"; then stop server {sid} and relaunch {self.server(sid).profile}" if relaunch else ""),
            fix_plan.details,
        )
        require(plan, confirm)
        change = self.live_apply_fix(sid, fix, confirm=True)
        fx: Any = getattr(fix, "fix", None) or fix
        if isinstance(fx, dict):
            from workbench.live.report import fix_from_dict

            fx = fix_from_dict(fx)
        out = FixOutcome(sid, fx, change)
        if relaunch:
            rec = self.live_relaunch(sid, confirm=True, measure=measure, measure_tokens=measure_tokens, timeout=timeout)
            out.server_after = rec.id
            out.ready = rec.state == ServerState.READY
            if measure and out.ready:
                out.comparison = self.live_compare(sid, rec.id)
        return out

    # -- the demo (the story in the lab) ------------------------------------------------------------
    @staticmethod
    def demo_default_dir() -> str:
        from workbench.live import demo

        return str(demo.default_dir())

    def demo_prepare(
        self: DemoPrepareOps,
        size: str = "small",
        *,
        lab_dir: str | None = None,
        progress: ProgressCallback | None = None,
        engine: str = "sglang",
    ) -> DemoSetup:
        """Build (or reuse) the lab world and write the demo workspace around this workbench's folder
        (``engine="vllm"``: the story on a real vLLM; without one, an error saying how to get one)."""
        from workbench.live import demo

        return demo.prepare(self, size, lab_dir=lab_dir, progress=progress, engine=engine)

    def demo_run(
        self, setup: DemoSetup, *, measure_tokens: int = 48, progress: ProgressCallback | None = None
    ) -> DemoResult:
        """The scripted story: launch with the story's config, measure, doctor, fix, relaunch, compare."""
        from workbench.live import demo

        return demo.run_story(self, setup, measure_tokens=measure_tokens, progress=progress)

    def demo_launch(self, setup: DemoSetup, *, progress: ProgressCallback | None = None) -> ServerRecord:
        from workbench.live import demo

        return demo.launch_story(self, setup, progress=progress)

    def demo_measure(self, server_id: int, measure_tokens: int = 48) -> Measurement:
        from workbench.live import demo

        return demo.measure_story(self, server_id, measure_tokens)

    def demo_stop_servers(self) -> list[int]:
        """Stop the servers this workspace still runs (identity-checked by the lifecycle)."""
        from workbench.live import demo

        return demo.stop_demo_servers(self)
