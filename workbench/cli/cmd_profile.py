"""``eagle-workbench profile list|show``: launch profiles and their exact commands."""

from __future__ import annotations

from workbench.cli.common import add_json, emit, warn


def register(sub) -> None:
    p = sub.add_parser("profile", help="launch profiles: list, show the exact command for an SGLang version")
    ps = p.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    ls = ps.add_parser("list", help="profiles in workbench.toml")
    add_json(ls)
    ls.set_defaults(func=_list)
    s = ps.add_parser("show", help="the resolved profile and its launch command")
    s.add_argument("name", help="a profile of workbench.toml ([profiles.NAME])")
    s.add_argument("--sglang-version", metavar="X", help="spell flags for this version (no host contacted)")
    s.add_argument("--argv", action="store_true", help="only the command: argv, env and warnings")
    s.add_argument("--offline", action="store_true", help="never contact the host (version unknown: flags as written)")
    add_json(s)
    s.set_defaults(func=_show)


def _list(args, ctx):
    ps = ctx.wb.profiles()
    if args.json:
        emit([p.to_dict() for p in ps], True)
        return 0
    for p in ps:
        ext = f" (extends {p.extends})" if p.extends else ""
        print(f"{p.name:<20} {p.host:<14} {p.description}{ext}")
    return 0


def _show(args, ctx):
    cmd = ctx.wb.profile_command(args.name, args.sglang_version, offline=args.offline)
    if args.argv:
        data = {"argv": cmd.argv, "env": cmd.env, "warnings": cmd.warnings}
        if cmd.ranks:  # a server across nodes: each rank's command (placeholders filled in at launch)
            data["ranks"] = [{"rank": r["rank"], "host": r["host"], "argv": r["argv"]} for r in cmd.ranks]
        if args.json:
            emit(data, True)
        else:
            print(cmd.display)
            warn(cmd.warnings)
        return 0
    prof = ctx.wb.profile(args.name)
    data = {"profile": prof.to_dict(), "command": cmd.to_dict()}
    if args.json:
        emit(data, True)
        return 0
    print(f"{prof.name}: {prof.description}" if prof.description else prof.name)
    print(f"  host {prof.host}, port {prof.port}, log {prof.log_path}")
    if len(prof.chain) > 1:
        print(f"  extends: {' <- '.join(reversed(prof.chain))}")
    print(f"  SGLang: {cmd.version or 'unknown (flags as written)'}")
    print(cmd.display)
    warn(cmd.warnings)
    return 0
