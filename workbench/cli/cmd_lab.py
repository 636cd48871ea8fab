"""``eagle-workbench lab``: build the miniature EAGLE-3 world and run its reference server."""

from __future__ import annotations

import argparse

from workbench.cli.common import add_json, emit


def register(sub) -> None:
    p = sub.add_parser("lab", help="the miniature EAGLE-3 world (CPU target, trained drafter, SGLang-like server)")
    lab = p.add_subparsers(dest="lab_command", metavar="ACTION")

    b = lab.add_parser("build", help="build (or reuse) the lab world; prints its paths and drafter accuracy")
    b.add_argument(
        "--dir",
        metavar="DIR",
        help="cache folder (default: $EAGLE_WORKBENCH_LAB_CACHE or ~/.cache/eagle-workbench/lab)",
    )
    b.add_argument(
        "--size",
        choices=["tiny", "small"],
        default="tiny",
        help="tiny: the tests' world; small: the demo's (the same target, half again the data)",
    )
    b.add_argument("--force", action="store_true", help="rebuild even when a cached world exists")
    b.add_argument(
        "--seed",
        type=_count("--seed", 0),
        metavar="N",
        help="the world's seed (default: the size's); a build outside the calibration bands "
        "retries with the next seeds, and lab.json records which one landed",
    )
    b.add_argument(
        "--threads",
        type=_count("--threads", 1),
        metavar="N",
        help="torch threads for the build (default 2; part of the world's settings)",
    )
    add_json(b)
    b.set_defaults(func=_build)

    # '+' as the prefix: every '--flag' is left to the server's own (SGLang-like) parser
    s = lab.add_parser(
        "serve", help="run the reference server: takes sglang.launch_server flags", add_help=False, prefix_chars="+"
    )
    s.add_argument(
        "server_args",
        nargs=argparse.REMAINDER,
        help="sglang.launch_server flags (--model-path, --speculative-*, --port, ...)",
    )
    s.set_defaults(func=_serve)


def _count(flag: str, low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        return value

    parse.__name__ = flag
    return parse


KEYS = ("dir", "target", "draft", "draft_broken", "draft_shifted", "training_data", "acc", "layers")


def _build(args, ctx) -> int:
    world = ctx.wb.lab_build(size=args.size, dir=args.dir, force=args.force, seed=args.seed, threads=args.threads)

    def text(w) -> str:
        al = w.accept_length or {}
        meas = al.get("measured", {})
        lines = [
            f"lab world ({w.size}{', cached' if w.cached else ''}): {w.dir}",
            f"  target        {w.target}",
            f"  draft         {w.draft}   ids {w.layers['draft']}",
            f"  draft_broken  {w.draft_broken}   ids {w.layers['draft_broken']}",
            f"  draft_shifted {w.draft_shifted}   ids {w.layers['draft_shifted']}",
            f"  training_data {w.training_data}",
            "  acc           " + "  ".join(f"{k} {v:.3f}" for k, v in w.acc.items()),
        ]
        if meas:
            lines.append(
                f"  accept length (steps {al.get('steps')}): predicted {al.get('predicted'):.2f}, "
                + ", ".join(f"{k} {v:.2f}" for k, v in meas.items())
            )
        cal = w.calibration or {}
        if cal:
            where = "in the calibration bands" if cal.get("ok") else "OUTSIDE the calibration bands"
            lines.append(
                f"  seed          {cal.get('seed_used')} (asked {cal.get('seed')}, "
                f"{cal.get('retries', 0)} retries), {where}"
            )
        mach = w.machine or {}
        if mach:
            lines.append(f"  built with    torch {mach.get('torch')}, {mach.get('threads')} threads, {mach.get('cpu')}")
        return "\n".join(lines)

    if args.json:
        data = world.to_dict()
        emit(
            {k: data[k] for k in KEYS}
            | {
                "size": data["size"],
                "cached": data["cached"],
                "accept_length": data["accept_length"],
                "calibration": data["calibration"],
                "machine": data["machine"],
            },
            True,
        )
    else:
        emit(world, False, text)
    return 0


def _serve(args, ctx) -> int:
    from workbench.api import lab_serve

    return lab_serve(args.server_args)
