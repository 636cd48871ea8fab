"""``eagle-workbench timeline``: every launch, config version, measurement and finding in order."""

from __future__ import annotations

from workbench.cli.common import MAX_ID, add_json, emit, int_flag


def register(sub) -> None:
    p = sub.add_parser(
        "timeline",
        help="the journal in time order: launches, configs, measurements, findings",
        description="Filter by server, profile, config or category; --live-config ID shows the "
        "draft config that was live for an entry (what its server loaded at launch).",
    )
    p.add_argument("--server", type=int_flag(1, MAX_ID), metavar="ID", help="only this server's entries")
    p.add_argument("--profile", help="only this profile's entries")
    p.add_argument("--config", metavar="PATH", help="a tracked config (substring of its location)")
    p.add_argument(
        "--category", choices=["launch", "config", "measurement", "finding", "other"], help="only entries of this kind"
    )
    p.add_argument(
        "--live-config", type=int_flag(1, MAX_ID), metavar="ENTRY", help="show the config live for this entry"
    )
    add_json(p)
    p.set_defaults(func=_run)


def _run(args, ctx) -> int:
    if args.live_config is not None:
        live = ctx.wb.timeline_live_config(args.live_config)
        if live is None:
            emit({"live_config": None}, args.json, lambda _r: f"entry {args.live_config}: no config tied to it")
        else:
            emit(
                live,
                args.json,
                lambda r: f"{r.location} v{r.version} ({r.sha256[:12]}, {r.reason}); {r.basis}\n{r.content}",
            )
        return 0
    tl = ctx.wb.timeline(server=args.server, profile=args.profile, config=args.config, category=args.category)
    emit(tl, args.json, _text)
    return 0


def _text(tl) -> str:
    if not tl.entries:
        return "(no entries)"
    lines = []
    for e in tl.entries:
        who = f"server {e.server}" if e.server is not None else (e.profile or e.subject or "")
        lines.append(f"{e.id:>5}  {e.time}  {e.category:<11}  {e.kind:<16}  {who:<24}  {e.summary}")
    return "\n".join(lines)
