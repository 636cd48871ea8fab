"""LabAPI: start the reference server locally and stop it by PID (a confirmed, destructive step)."""

from __future__ import annotations

import pytest

from tests.fixtures.lab import http
from workbench.errors import ConfirmationRequired, InputError

pytestmark = pytest.mark.slow


def test_start_and_stop_by_pid(wb, lab_world):
    proc = wb.lab_start(lab_world["dir"], "draft", extra=["--disable-cuda-graph"])
    try:
        assert proc.ready and http(proc, "/health")[0] == 200
        assert wb.events(kind="lab.start")
        with pytest.raises(ConfirmationRequired):
            wb.lab_stop(proc.pid)
        with pytest.raises(InputError):
            wb.lab_stop(proc.pid + 100000, confirm=True)
        assert wb.lab_stop(proc.pid, confirm=True) == "stopped (TERM)"
    finally:
        from workbench.lab.process import stop_server

        stop_server(proc)
    with pytest.raises(InputError, match="draft"):
        wb.lab_start(lab_world["dir"], "draft_other")


def test_cli_lab_serve_rejects_unknown_flags_fast(cli, lab_world):
    r = cli("lab", "serve", "--model-path", lab_world["target"], "--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
