"""The demo's app: the Dashboard first, with a note on every screen (a line of the frame, not a
toast: nothing covers a dialog's buttons) that names the guided path's next key until the
Diagnose screen is shown."""

from __future__ import annotations

import signal
import sys

from workbench.tui.app import SCREENS, WorkbenchApp


class DemoApp(WorkbenchApp):
    def __init__(
        self,
        workspace: str,
        server_id: int,
        *,
        accept_length: float | None = None,
        measure_tokens: int | None = None,
    ):
        ids = {s.id for s in SCREENS}
        start = "servers" if "servers" in ids else "diagnose"
        super().__init__(
            workspace,
            start=start,
            screen_args={"diagnose": {"server_id": server_id, "guided": True, "measure_tokens": measure_tokens}},
        )
        key = next((s.key for s in SCREENS if s.id == "diagnose"), "f8").upper()
        al = f" shows accept length {accept_length:.2f}" if accept_length is not None else " runs"
        self.demo_note = (
            f"Demo: server {server_id}{al} with the story's draft config. Press {key} (Diagnose) "
            f"and follow the guided path: doctor, alignment, fix, relaunch, compare."
        )

    def on_mount(self) -> None:
        super().on_mount()
        self.banner_until = "diagnose"
        self.banner = self.demo_note
        # a closed terminal ends the app the normal way, so the demo still stops its lab servers
        for sig in (signal.SIGHUP, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.exit())


def run_demo_app(workspace: str, server_id: int, **kw) -> int:
    if not sys.stdout.isatty():
        print(
            "eagle-workbench: the demo's terminal UI needs a terminal; use `eagle-workbench demo --no-tui`",
            file=sys.stderr,
        )
        return 2
    DemoApp(workspace, server_id, **kw).run()
    return 0
