"""The lab server's command line: the ``sglang.launch_server`` flags launch profiles use, the ``vllm serve``
flags a vLLM profile's command has (``--model``, ``--speculative-config`` and a few others), plus ``--lab-*``.

Parsed with argparse exactly as SGLang does (prefixes such as ``--tp`` work; an unknown flag is
``error: unrecognized arguments`` with exit status 2). Flags that only matter on a GPU (TP size,
CUDA graphs, all-reduce, memory fraction, ...) are accepted and recorded, not acted upon.

``parse(argv) -> (args, version)``; ``resolve_spec(args, arch)`` (SGLang's auto-choice and the
topk == 1 adjustment); ``server_args_dict(args)``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from typing import Any

from workbench.engine.version import Version

DEFAULT_ENGINE = "sglang-0.5.12"


def _lab_version(argv: Sequence[str]) -> Version:
    """The emulated SGLang version, read before the full parse (it decides the parser's prog)."""
    from workbench.engine.spec import parse_engine

    engine, version = DEFAULT_ENGINE, None
    for i, a in enumerate(argv):
        if a.startswith("--lab-engine"):
            engine = a.split("=", 1)[1] if "=" in a else (argv[i + 1] if i + 1 < len(argv) else engine)
        if a.startswith("--lab-sglang-version"):
            version = a.split("=", 1)[1] if "=" in a else (argv[i + 1] if i + 1 < len(argv) else None)
    try:
        if version:
            return Version.parse(version)
        spec = parse_engine(engine)
        return spec.version if (spec.name == "sglang" and spec.version) else Version.parse("0.5.12")
    except Exception:
        return Version.parse("0.5.12")


def build_parser(version: Version) -> argparse.ArgumentParser:
    prog = "sglang serve" if version >= Version.parse("0.5.23") else "launch_server.py"
    p = argparse.ArgumentParser(prog=prog)
    a = p.add_argument
    # model and tokenizer
    a("--model-path", "--model", dest="model_path", required=True)
    a("--tokenizer-path", default=None)
    a("--tokenizer-mode", default="auto")
    a("--trust-remote-code", action="store_true")
    a("--revision", default=None)
    a("--dtype", default="auto")
    a("--kv-cache-dtype", default="auto")
    a("--quantization", default=None)
    a("--load-format", default="auto")
    a("--context-length", type=int, default=None)
    a("--served-model-name", default=None)
    a("--random-seed", type=int, default=None)
    # http
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--api-key", default=None)
    a("--skip-server-warmup", action="store_true")
    # memory and scheduling
    a("--mem-fraction-static", type=float, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--schedule-policy", default="fcfs")
    a("--schedule-conservativeness", type=float, default=1.0)
    a("--page-size", type=int, default=1)
    a("--num-continuous-decode-steps", type=int, default=1)
    a("--stream-interval", type=int, default=1)
    a("--disable-radix-cache", action="store_true")
    a("--disable-overlap-schedule", action="store_true")
    a("--enable-mixed-chunk", action="store_true")
    a("--watchdog-timeout", type=float, default=300)
    a("--sleep-on-idle", action="store_true")
    # parallelism (accepted, ignored: one CPU process)
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    a("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    a("--ep-size", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    a("--enable-dp-attention", action="store_true")
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", default=None)
    a("--disable-custom-all-reduce", action="store_true")
    a("--enable-torch-compile", action="store_true")
    a("--attention-backend", default=None)
    # graphs
    a("--disable-cuda-graph", action="store_true")
    a("--disable-cuda-graph-padding", action="store_true")
    a("--cuda-graph-bs", type=int, nargs="+", default=None)
    if version < Version.parse("0.5.23"):
        a("--cuda-graph-max-bs", type=int, default=None)
    else:
        a("--cuda-graph-max-bs-decode", type=int, default=None)
        a("--cuda-graph-max-bs-prefill", type=int, default=None)
        a("--cuda-graph-backend-decode", choices=["full", "breakable", "disabled"], default=None)
        a("--cuda-graph-backend-prefill", choices=["full", "breakable", "disabled"], default=None)
    # speculative decoding
    if version >= Version.parse("0.5.23"):
        a("--speculative-algorithm", default=None)
    else:
        a(
            "--speculative-algorithm",
            choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"],
            default=None,
            type=lambda s: s.upper(),
        )
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path", default=None)
    a("--speculative-draft-model-revision", default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    a("--speculative-accept-threshold-single", type=float, default=1.0)
    a("--speculative-accept-threshold-acc", type=float, default=1.0)
    a("--speculative-token-map", default=None)
    a("--speculative-attention-mode", default="prefill")
    a("--decrypted-draft-config-file", default=None)
    # observability and debugging
    a("--log-level", default="info")
    a("--log-level-http", default=None)
    a("--log-requests", action="store_true")
    a("--show-time-cost", action="store_true")
    a("--enable-metrics", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    a("--enable-return-hidden-states", action="store_true")
    a("--debug-tensor-dump-output-folder", default=None)
    a("--debug-tensor-dump-layers", type=int, nargs="*", default=None)
    a("--debug-tensor-dump-input-file", default=None)
    # vLLM's (a vLLM profile's command): the speculative settings as one JSON object, and a few flags
    # that matter only on its engine (accepted and recorded)
    a("--speculative-config", "-sc", type=json.loads, default=None)
    a("--enforce-eager", action="store_true")
    a("--max-model-len", type=int, default=None)
    a("--gpu-memory-utilization", type=float, default=None)
    a("--seed", type=int, default=None)
    a("--per-request-spec-decode-metrics", choices=["none", "summary", "detailed"], default="none")
    # the lab's own
    a(
        "--lab-engine",
        default=DEFAULT_ENGINE,
        help="capture rule and emulated version: sglang-0.5.12 | sglang-0.5.13 | sglang==X.Y.Z | vllm",
    )
    a("--lab-sglang-version", default=None, help="log/API format version (default: from --lab-engine)")
    a("--lab-arch", default=None, help="target architecture for the capture rule (default: the target's)")
    a(
        "--lab-embed-patch",
        action="store_true",
        help="capture index 0 yields the embedding output (a patched engine, as in the story)",
    )
    a("--lab-threads", type=int, default=None)
    return p


def parse(argv: Iterable[str]) -> tuple[argparse.Namespace, Version]:
    argv = list(argv)
    version = _lab_version(argv)
    parser = build_parser(version)
    args = parser.parse_args(argv)
    spec = args.speculative_config
    if spec is not None:
        # vLLM's --speculative-config: method -> algorithm, model -> the draft, num_speculative_tokens ->
        # a chain of that many steps (topk 1, steps + 1 tokens verified a round)
        if not isinstance(spec, dict) or not spec.get("method"):
            parser.error("argument --speculative-config: expected a JSON object with a method")
        args.speculative_algorithm = str(spec["method"]).upper()
        args.speculative_draft_model_path = spec.get("model") or args.speculative_draft_model_path
        steps = spec.get("num_speculative_tokens")
        if steps is not None:
            args.speculative_num_steps = int(steps)
            args.speculative_eagle_topk = 1
            args.speculative_num_draft_tokens = int(steps) + 1
    if args.max_model_len and not args.context_length:
        args.context_length = args.max_model_len
    return args, version


def resolve_spec(args: argparse.Namespace, arch: str | None) -> list[str]:
    """Fill steps/topk/draft tokens like SGLang; returns warning lines to log."""
    notes: list[str] = []
    if args.speculative_algorithm is None:
        return notes
    if args.speculative_num_steps is None:
        # SGLang's _auto_choose_speculative_params: (5, 4, 8) for LlamaForCausalLM, (3, 1, 4) for most others
        steps, topk, ndt = (5, 4, 8) if str(arch) == "LlamaForCausalLM" else (3, 1, 4)
        args.speculative_num_steps = steps
        args.speculative_eagle_topk = args.speculative_eagle_topk or topk
        args.speculative_num_draft_tokens = args.speculative_num_draft_tokens or ndt
    if args.speculative_eagle_topk is None:
        args.speculative_eagle_topk = 1
    if args.speculative_eagle_topk == 1 and args.speculative_num_draft_tokens != args.speculative_num_steps + 1:
        if args.speculative_num_draft_tokens is not None:
            notes.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
            )
        args.speculative_num_draft_tokens = args.speculative_num_steps + 1
    if args.max_running_requests is None:
        args.max_running_requests = 48
        notes.append(
            "Max running requests is reset to 48 for speculative decoding. You can override "
            "this by explicitly setting --max-running-requests."
        )
    return notes


def server_args_dict(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items()}
