"""Runs one job on a host: the job as JSON on stdin, one marked JSON line on stdout.

Started as ``python -B -c BOOT CACHE_DIR`` (see ``workbench.remote.near``), with the shipped bundle
first on ``sys.path``. Anything a library prints goes to stderr, so stdout carries only the result.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from typing import Any

MARK = "@@wb-result@@"


def main() -> int:
    real_out = sys.stdout
    t0 = time.perf_counter()
    try:
        job = json.loads(sys.stdin.read())
        from workbench.remote.jobs import JOBS

        fn: Any = JOBS.get(job.get("job"))
        if fn is None:
            raise KeyError(f"no job {job.get('job')!r} (have {', '.join(sorted(JOBS))})")
        with contextlib.redirect_stdout(sys.stderr):
            result = fn(**(job.get("args") or {}))
        out = {"ok": True, "result": result}
    except Exception as exc:
        from workbench.errors import InputError, WorkbenchError

        kind = "input" if isinstance(exc, InputError) else "workbench" if isinstance(exc, WorkbenchError) else "bug"
        msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if isinstance(exc, ImportError):
            kind, msg = "workbench", f"{msg} (the host's python needs numpy, torch and safetensors)"
        out = {
            "ok": False,
            "kind": kind,
            "error": msg if kind != "bug" else f"{type(exc).__name__}: {msg}",
            "trace": traceback.format_exc()[-2000:] if kind == "bug" else None,
        }
    out["seconds"] = time.perf_counter() - t0
    from workbench.results import jsonable

    real_out.write(MARK + json.dumps(jsonable(out)) + "\n")
    real_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
