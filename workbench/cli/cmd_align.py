"""``eagle-workbench align``: which capture point is each training slot, and the config it implies."""

from __future__ import annotations

import argparse

from workbench.api import MAX_LAYERS
from workbench.cli.common import add_json, emit, int_flag


def register(sub) -> None:
    p = sub.add_parser(
        "align",
        help="compare training hidden states with an inference capture, slot by layer",
        description="Compare every slot of a training capture (SpecForge data_{i}.ckpt[.gz], "
        "speculators hs_{i}.safetensors, ...) with every candidate point of an "
        "inference capture (SGLang return_hidden_states JSON, tensor-dump folder, "
        "DUMPER files, a layer stack) using SGLang's rel_diff; report the best "
        "match per slot with margin and verdict, and the layer ids the engine "
        "needs. Exit 1 when the draft's config disagrees (an error finding).",
    )
    p.add_argument("--train", required=True, metavar="FILE", help="training capture (file or folder)")
    p.add_argument("--infer", required=True, metavar="PATH", help="inference capture (file or folder)")
    p.add_argument("--engine", metavar="ENGINE", help="sglang==X.Y.Z, sglang (latest) or vllm: recommend its ids")
    p.add_argument("--draft", metavar="DIR", help="draft checkpoint (its config.json is checked)")
    p.add_argument("--target", metavar="CONFIG", help="target config.json (layer count and architecture)")
    p.add_argument(
        "--num-layers", type=int_flag(1, MAX_LAYERS), metavar="N", help="target layers, when no --target is given"
    )
    p.add_argument("--train-format", metavar="FMT", help="force the training format (default: detected)")
    p.add_argument("--infer-format", metavar="FMT", help="force the inference format (default: detected)")
    p.add_argument("--sample", type=int_flag(0), metavar="I", help="training sample data_I / hs_I in a folder")
    p.add_argument(
        "--train-layers", metavar="IDS", help="SpecForge (output-of-layer) ids the training used, to label the slots"
    )
    p.add_argument(
        "--device",
        metavar="DEV",
        default="auto",
        help="auto (default: the CPU kernels or the GPU, whichever is faster for where the bytes are), "
        "cpu, cuda, cuda:N",
    )
    p.add_argument("--with-final", action="store_true", help="also align the training file's final hidden state")
    p.add_argument(
        "--abs-stats",
        choices=["top", "all"],
        default="top",
        help="max/mean abs difference for the best pairs only (default) or every pair",
    )
    p.add_argument("--per-token", metavar="SLOT:CAND", help="print per-token rel_diff of one pair (names or indices)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx) -> int:
    from workbench.parsing import parse_ids

    layers = parse_ids(args.train_layers, "--train-layers") if args.train_layers else None
    if args.per_token:
        _pair_spec(args.per_token)  # a malformed pair is refused before the captures are read
    res = ctx.wb.align(
        args.train,
        args.infer,
        engine=args.engine,
        target=args.target,
        num_layers=args.num_layers,
        draft=args.draft,
        train_format=args.train_format,
        infer_format=args.infer_format,
        sample=args.sample,
        train_layer_ids=layers,
        device=args.device,
        include_final=args.with_final,
        abs_stats=args.abs_stats,
    )
    pair = _pair(res, args.per_token) if args.per_token else None
    if args.json:
        data = res.to_dict()
        if pair is not None:
            data["per_token"] = pair
        emit(data, True)
    else:
        print(res.text())
        if pair is not None:
            print(
                f"per-token rel_diff, {pair['slot']} vs {pair['candidate']}"
                f"{'' if pair['exact'] else ' (screen values)'}:"
            )
            for pos, v in zip(pair["positions"], pair["rel_diff"]):
                print(f"  {pos:>6}  {v:.3e}")
    return 1 if any(f.severity == "error" for f in res.findings) else 0


def _pair_spec(text: str) -> tuple[str, str]:
    from workbench.errors import InputError

    if ":" not in text:
        raise InputError(f"--per-token: {text!r} is not SLOT:CANDIDATE (names or indices)")
    a, b = text.split(":", 1)
    return a, b


def _pair(res, text: str) -> dict:
    from workbench.errors import InputError

    a, b = _pair_spec(text)

    def pick(v, names, what):
        if v.strip().isdigit() and int(v) < len(names):
            return int(v)
        if v in names:
            return names.index(v)
        raise InputError(f"--per-token: no {what} {v!r} (have: {', '.join(names)})")

    return res.per_token(pick(a, res.rows, "slot"), pick(b, res.cols, "candidate"))
