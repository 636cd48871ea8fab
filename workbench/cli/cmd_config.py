"""``eagle-workbench config``: track a config file, see its history, edit by key, diff, revert."""

from __future__ import annotations

from workbench.cli.common import add_json, confirm_or_yes, emit

#: How every VERSION argument is spelled (``ConfigStore.resolve``).
VERSION_HELP = (
    "a version: its number (3 or v3), 'latest', 'previous', a sha256 prefix (6+ hex digits), "
    "or -N counting back from the newest (-1 is the newest, -2 the one before it)"
)


def register(sub) -> None:
    p = sub.add_parser(
        "config",
        help="config history: track, history, show, set, diff, revert",
        description="Every version of a tracked config is kept (content-addressed, with time "
        "and reason); writes are atomic; edits made elsewhere are stored first.",
    )
    cs = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND")

    t = cs.add_parser("track", help="start tracking a file (stores its current content as version 1)")
    t.add_argument("path", help="config.json to track: a local path or HOST:/path")
    t.add_argument("--label", default="", help="a name for it in listings (default: none)")
    add_json(t)
    t.set_defaults(func=_track)

    ls = cs.add_parser("list", help="tracked files")
    add_json(ls)
    ls.set_defaults(func=_list)

    h = cs.add_parser("history", help="versions of a tracked file")
    h.add_argument("path", help="a tracked config (local path or HOST:/path)")
    add_json(h)
    h.set_defaults(func=_history)

    s = cs.add_parser("show", help="print a stored version (default: latest)")
    s.add_argument("path", help="a tracked config (local path or HOST:/path)")
    s.add_argument("--version", "-v", default=None, metavar="VERSION", help=f"{VERSION_HELP}; default: latest")
    add_json(s)
    s.set_defaults(func=_show)

    st = cs.add_parser("set", help="set dotted keys, keeping key order and indentation")
    st.add_argument("path", help="the config.json to edit (local path or HOST:/path)")
    st.add_argument(
        "assignments",
        nargs="*",
        metavar="KEY=VALUE",
        help="e.g. eagle_config.eagle_aux_hidden_state_layer_ids=[2,30,58] (VALUE is JSON)",
    )
    st.add_argument("--delete", action="append", default=[], metavar="KEY", help="remove a key")
    st.add_argument("--reason", help="why (stored with the version)")
    st.add_argument(
        "--force", action="store_true", help="write a value of an unexpected type, or a key the file lacks, anyway"
    )
    st.add_argument(
        "--add",
        action="store_true",
        help="the keys may be new (otherwise a missing key is refused with the closest existing ones)",
    )
    add_json(st)
    st.set_defaults(func=_set)

    d = cs.add_parser("diff", help="unified diff between two versions (default: previous -> latest)")
    d.add_argument("path", help="a tracked config (local path or HOST:/path)")
    d.add_argument("a", nargs="?", default=None, metavar="FROM", help=f"{VERSION_HELP}; default: the one before TO")
    d.add_argument("b", nargs="?", default=None, metavar="TO", help=f"{VERSION_HELP}; default: the newest")
    add_json(d)
    d.set_defaults(func=_diff)

    r = cs.add_parser("revert", help="write a stored version back, byte for byte")
    r.add_argument("path", help="a tracked config (local path or HOST:/path)")
    r.add_argument(
        "--to", required=True, metavar="VERSION", help=f"the version to restore, byte for byte: {VERSION_HELP}"
    )
    r.add_argument("--yes", action="store_true", help="do it without asking")
    add_json(r)
    r.set_defaults(func=_revert)


def _versions_text(h) -> str:
    import datetime as dt

    state = f", {h.config.state}" if h.config.state != "clean" else ""
    lines = [f"{h.config.location}  ({h.config.versions} versions{state})"]
    for v in h.versions:
        when = dt.datetime.fromtimestamp(v.ts).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"  v{v.number:<3} {when}  {v.sha256[:12]}  {v.size:>7} B  {v.reason}")
    return "\n".join(lines)


def _track(args, ctx):
    res = ctx.wb.config_track(args.path, args.label)
    emit(res, args.json, lambda r: f"tracking {r.location} ({r.versions} version{'s' if r.versions != 1 else ''})")


def _list(args, ctx):
    res = ctx.wb.config_list()
    if args.json:
        emit([r.to_dict() for r in res], True)
    else:
        print("\n".join(f"{r.location}  {r.versions} versions  {r.state}" for r in res) or "no tracked configs")


def _history(args, ctx):
    emit(ctx.wb.config_history(args.path), args.json, _versions_text)


def _show(args, ctx):
    res = ctx.wb.config_show(args.path, args.version)
    emit(res, args.json, lambda r: r.text.rstrip("\n"))


def _set(args, ctx):
    from workbench.errors import InputError

    if not args.assignments and not args.delete:
        raise InputError("config set: give at least one KEY=VALUE or --delete KEY")
    res = ctx.wb.config_set(
        args.path, args.assignments, reason=args.reason, force=args.force, delete=args.delete or None, add=args.add
    )
    emit(res, args.json, _change_text)


def _change_text(c) -> str:
    lines = []
    if c.external_edit:
        lines.append(f"stored an external edit first as v{c.external_edit.number}")
    if not c.changed:
        lines.append(f"{c.location}: unchanged (already v{c.version.number})")
    else:
        lines.append(f"{c.location}: now v{c.version.number} ({c.version.reason})")
        lines.append(c.diff.rstrip("\n"))
    return "\n".join(lines)


def _diff(args, ctx):
    res = ctx.wb.config_diff(args.path, args.a, args.b)
    emit(res, args.json, lambda r: r.diff.rstrip("\n") or f"{r.a} and {r.b} are identical")


def _revert(args, ctx):
    plan = ctx.wb.config_revert_plan(args.path, args.to)
    if not confirm_or_yes(plan, args.yes):
        print("not reverted")
        return 1
    res = ctx.wb.config_revert(args.path, args.to, confirm=True)
    emit(res, args.json, _change_text)
