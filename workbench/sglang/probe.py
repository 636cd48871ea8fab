"""SGLang's host probe: its version, and its own argument parser run on a launch's arguments
(``python -c PROBE JSON`` under the host's python; one JSON line out)."""

from __future__ import annotations

PROBE = r"""
import gc; gc.disable()    # a short-lived process: the collector's passes over SGLang's imports cost a fifth
import contextlib, importlib.util, io, json, os, sys
req = json.loads(sys.argv[1])
out = {"python": sys.executable, "python_version": sys.version.split()[0]}
try:
    import importlib.metadata as md
    out["version"] = md.version("sglang")
except Exception:
    out["version"] = None
if req.get("argv") is not None and out["version"]:
    if importlib.util.find_spec("triton") is None:
        # SGLang imports triton at top level; without it, use SGLang's own stub, loaded by path
        # (importing sglang._platform_stubs would run sglang/__init__ first).
        spec = importlib.util.find_spec("sglang")
        path = os.path.join(os.path.dirname(spec.origin), "_platform_stubs.py")
        if os.path.exists(path):
            s = importlib.util.spec_from_file_location("_wb_sgl_stubs", path)
            m = importlib.util.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m)
            sys.meta_path.insert(0, m._TritonFinder()); m._make_mock("triton")
            out["triton"] = "stub"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            from sglang.srt.server_args import prepare_server_args
            sa = prepare_server_args(req["argv"])
        out["ok"] = True
        keys = req.get("keys") or []
        out["args"] = {k: getattr(sa, k, None) for k in keys}
    except SystemExit:
        lines = [l for l in err.getvalue().strip().splitlines() if l.strip()]
        out["ok"] = False
        out["error"] = lines[-1] if lines else "the parser rejected the arguments"
    except BaseException as e:
        out["ok"] = False
        out["error"] = (type(e).__name__ + ": " + str(e)).strip()
print(json.dumps(out, default=str))
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)                # the answer is out: no teardown of SGLang's 3000 modules, nor a last collection
"""
