"""Whether a launch decodes with CUDA graphs, from its SGLang arguments alone."""

from __future__ import annotations

from collections.abc import Sequence


def cuda_graph_on(argv: Sequence[str]) -> bool:
    """False for ``--disable-cuda-graph``, ``--cuda-graph-backend-decode disabled`` and a tensor-dump
    launch (SGLang turns graphs off in dump mode); True otherwise (SGLang's default)."""
    args = [str(a) for a in argv or ()]
    for i, a in enumerate(args):
        if a == "--disable-cuda-graph" or a.startswith("--debug-tensor-dump-output-folder"):
            return False
        if a.startswith("--cuda-graph-backend-decode"):
            val = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            if val.strip().lower() in ("disabled", "none", "off"):
                return False
    return True
