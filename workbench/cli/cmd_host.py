"""``eagle-workbench host list|check|trust``: the machines in workbench.toml."""

from __future__ import annotations

import argparse

from workbench.cli.common import add_json, confirm_or_yes, emit


def fingerprint_flag(text: str) -> str:
    from workbench.errors import InputError
    from workbench.parsing import parse_fingerprint

    try:
        return parse_fingerprint(text, "value")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None


def register(sub) -> None:
    p = sub.add_parser("host", help="hosts: list, check (reachability, SGLang, GPUs), trust a host key")
    hs = p.add_subparsers(dest="host_command", metavar="SUBCOMMAND")
    ls = hs.add_parser("list", help="hosts from workbench.toml (and local)")
    add_json(ls)
    ls.set_defaults(func=_list)
    c = hs.add_parser("check", help="connect, find the host's python and SGLang version, read the GPUs")
    c.add_argument("name", help="a host of workbench.toml ([hosts.NAME])")
    add_json(c)
    c.set_defaults(func=_check)
    t = hs.add_parser("trust", help="add an unknown host key to known_hosts (never replaces a changed one)")
    t.add_argument("name", help="a host of workbench.toml ([hosts.NAME])")
    t.add_argument(
        "--fingerprint",
        type=fingerprint_flag,
        help="the SHA256:... fingerprint you verified, as `ssh-keygen -lf` prints it (refuses any other key)",
    )
    t.add_argument("--yes", action="store_true", help="trust without asking")
    add_json(t)
    t.set_defaults(func=_trust)


def _list(args, ctx):
    hosts = ctx.wb.hosts()
    if args.json:
        emit([h.to_dict() for h in hosts], True)
        return 0
    for h in hosts:
        print(f"{h.name:<16} {h.kind:<6} {h.address or '-':<24} {h.python or '-'}")
    return 0


def _check(args, ctx):
    r = ctx.wb.host_check(args.name)

    def text(r):
        if not r.reachable:
            return f"{r.name}: unreachable: {r.error}"
        lines = [
            f"{r.name}: reachable ({r.latency_s * 1000:.0f} ms)",
            f"  python {r.python} ({r.python_version or '?'}), SGLang {r.sglang_version or 'not installed'}",
        ]
        if r.slurm is not None:
            sl = r.slurm
            if sl["missing"]:
                lines.append(f"  SLURM: client commands missing: {', '.join(sl['missing'])}")
            else:
                lines.append(f"  SLURM controller: {sl['ping'].get('text') or '?'}")
                parts = ", ".join(
                    f"{p}{'*' if p == sl['default'] else ''} ({n} nodes)" for p, n in sl["partitions"].items()
                )
                lines.append(f"  partitions: {parts or sl['sinfo'].get('err') or 'none'}")
        elif r.gpus:
            lines += [f"  GPU{g.index}: {g.used_mib:g} / {g.total_mib:g} MiB, {g.util:g}%" for g in r.gpus]
        else:
            lines.append(f"  GPUs: {r.gpu_error or 'none'}")
        if r.error:
            lines.append(f"  problem: {r.error}")
        return "\n".join(lines)

    emit(r, args.json, text)
    return 0 if r.reachable else 1


def _trust(args, ctx):
    from workbench.errors import ConfirmationRequired

    try:
        out = ctx.wb.host_trust(args.name, args.fingerprint, confirm=False)
    except ConfirmationRequired as exc:
        if not confirm_or_yes(exc.plan, args.yes):
            print("not trusted")
            return 1
        fp = args.fingerprint or exc.plan.summary.split(" host key ")[1].split(" ")[0]
        out = ctx.wb.host_trust(args.name, fp, confirm=True)
    emit(
        out,
        args.json,
        lambda o: (
            f"added {o['entry']} {o['fingerprint']} to {o['known_hosts']}"
            if o["added"]
            else f"{o['entry']} is already known ({o['fingerprint']})"
        ),
    )
    return 0
