"""``eagle-workbench server launch|status|logs|stop|measure|sweep|metrics|acceptance``: servers on hosts."""

from __future__ import annotations

import sys

from workbench.cli.common import add_json, confirm_or_yes, emit
from workbench.display import rank_lines, server_where


def register(sub) -> None:
    p = sub.add_parser("server", help="SGLang servers: launch, status, logs, stop, measure, sweep")
    ss = p.add_subparsers(dest="server_command", metavar="SUBCOMMAND")

    la = ss.add_parser("launch", help="check and start a profile (shows the command and its diff first)")
    la.add_argument("profile", help="a profile of workbench.toml ([profiles.NAME])")
    la.add_argument("--yes", action="store_true", help="start without asking")
    la.add_argument("--wait", action="store_true", help="follow startup until ready or failed")
    la.add_argument("--timeout", type=float, help="seconds to wait for readiness (default: the profile's)")
    la.add_argument("--sglang-version", metavar="X", help="assume this SGLang version (default: detect)")
    add_json(la)
    la.set_defaults(func=_launch)

    st = ss.add_parser("status", help="state, uptime, accept length, tokens/s, GPUs (one round trip per host)")
    st.add_argument("ids", nargs="*", type=int, help="server ids (default: every active server)")
    st.add_argument("--all", action="store_true", help="include finished servers")
    add_json(st)
    st.set_defaults(func=_status)

    lg = ss.add_parser("logs", help="print a server's log")
    lg.add_argument("id", type=int, help="server id (see `server status`)")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing as it grows (Ctrl+C stops)")
    lg.add_argument("--offset", type=int, default=0, help="start at this byte")
    lg.add_argument("--rank", type=int, default=0, help="a server across nodes: that rank's log (default 0)")
    lg.set_defaults(func=_logs)

    sp = ss.add_parser("stop", help="TERM the server's process group, grace, KILL; then check GPUs idle")
    sp.add_argument("id", type=int, help="server id (see `server status`)")
    sp.add_argument("--yes", action="store_true", help="stop without asking")
    sp.add_argument("--grace", type=float, help="seconds between SIGTERM and SIGKILL")
    sp.add_argument("--gpu-wait", type=float, default=60.0, help="seconds to wait for the GPUs to be idle")
    add_json(sp)
    sp.set_defaults(func=_stop)

    me = ss.add_parser("measure", help="flush, send the fixed prompt set, report accept length and tokens/s")
    me.add_argument("id", type=int, help="server id (see `server status`)")
    me.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (default 4)")
    me.add_argument("--max-new-tokens", type=int, help="tokens generated per prompt (default: the protocol's)")
    me.add_argument("--rounds", type=int, default=1, help="timed rounds over the prompt set (default 1)")
    me.add_argument("--prompts", metavar="FILE.json", help='another prompt set ({"prompts": [...]})')
    me.add_argument(
        "--context",
        metavar="N,N,...",
        help="sweep these context lengths (tokens before each continuation), e.g. 256,1024,4096, or auto: "
        "accept length per context, the drafter's trained length marked",
    )
    me.add_argument("--trained-length", type=int, metavar="N", help="the sequence length the drafter was trained on")
    me.add_argument("--training-data", metavar="DIR", help="the drafter's training data (its rows give the length)")
    add_json(me)
    me.set_defaults(func=_measure)

    ac = ss.add_parser(
        "acceptance", help="accept length over time from the engine's counters, with the alarm against its first hour"
    )
    ac.add_argument("id", type=int, help="server id (see `server status`)")
    ac.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep reading the counters: each window as it is kept, the alarm when it changes (Ctrl+C stops)",
    )
    ac.add_argument("--interval", type=float, default=5.0, help="seconds between readings with --follow (default 5)")
    ac.add_argument("--window", type=float, help="seconds a kept window spans at least (default: [acceptance] or 60)")
    ac.add_argument(
        "--baseline", type=float, help="seconds of the server's start that make the baseline (default 3600)"
    )
    ac.add_argument("--no-read", action="store_true", help="only what the journal holds (no request to the server)")
    add_json(ac)
    ac.set_defaults(func=_acceptance)

    mt = ss.add_parser("metrics", help="accept length and throughput from the log and /server_info")
    mt.add_argument("id", type=int, help="server id (see `server status`)")
    add_json(mt)
    mt.set_defaults(func=_metrics)

    sw = ss.add_parser("sweep", help="relaunch over speculative triples and env variants; rank by tokens/s")
    sw.add_argument("profile", help="the profile whose speculative settings are swept")
    sw.add_argument("--steps", required=True, help="e.g. 1,2,3,5")
    sw.add_argument("--topk", default="1", help="e.g. 1,4 (default 1)")
    sw.add_argument("--draft-tokens", help="for topk > 1, e.g. 4,8 (chains use steps+1)")
    sw.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="'K=V K2=V2'",
        help="an env variant (repeatable; each is one relaunch per point)",
    )
    sw.add_argument("--baseline", action="store_true", help="also run without speculation")
    sw.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (default 4)")
    sw.add_argument("--max-new-tokens", type=int, help="tokens generated per prompt (default: the protocol's)")
    sw.add_argument("--yes", action="store_true", help="run without asking")
    add_json(sw)
    sw.set_defaults(func=_sweep)


def _ints(text: str, name: str) -> list[int]:
    from workbench.errors import InputError

    out = []
    for part in text.replace(",", " ").split():
        try:
            out.append(int(part))
        except ValueError:
            raise InputError(f"{name}: {part!r} is not an integer") from None
    if not out:
        raise InputError(f"{name}: expected integers like 1,2,3")
    return out


def _env(text: str) -> dict:
    from workbench.errors import InputError

    env = {}
    for part in text.split():
        k, eq, v = part.partition("=")
        if not eq or not k:
            raise InputError(f"--env: {part!r} is not NAME=VALUE")
        env[k] = v
    return env


def _launch(args, ctx):
    wb = ctx.wb
    if args.timeout is not None:  # refused before anything starts (nan/inf would wait for ever)
        from workbench.api import TIMEOUT
        from workbench.numbers import number

        number(args.timeout, "--timeout", TIMEOUT)
    preview = wb.launch_preview(args.profile, args.sglang_version)
    plan = wb.launch_plan(preview)
    if not preview.ok:
        for f in preview.findings:
            if f.severity == "error":
                print(f"error: {f.message}" + (f" (fix: {f.fix})" if f.fix else ""), file=sys.stderr)
        from workbench.errors import WorkbenchError

        raise WorkbenchError(
            f"profile {args.profile}: not launched ({sum(f.severity == 'error' for f in preview.findings)} problem(s))"
        )
    if not confirm_or_yes(plan, args.yes):
        print("not launched")
        return 1
    rec = wb.launch(args.profile, confirm=True, preview=preview)
    print(f"server {rec.id}: pid {rec.pid} on {rec.host}, log {rec.log}", file=sys.stderr)
    if not args.wait:
        emit(rec, args.json, lambda r: f"launched server {r.id} ({r.profile})")
        return 0
    st = wb.server_wait(rec.id, timeout=args.timeout)
    emit(st, args.json, _status_line)
    return 0 if st.state == "ready" else 1


def _status_line(s) -> str:
    m = s.metrics or {}
    al = m.get("accept_len")
    gt = m.get("gen_throughput")
    gpu = ", ".join(f"{g.index}:{(g.used_mib or 0) / 1024:.0f}G" for g in s.gpus) or "-"
    up = f"{s.uptime_s / 60:.0f}m" if s.uptime_s else "-"
    line = (
        f"{s.id:>4} {s.profile:<18} {server_where(s):<12} {s.state + (' (stale)' if s.stale else ''):<14} {up:>6} "
        f"AL {al if al is not None else '-':>5} {f'{gt:.1f}' if gt else '-':>8} tok/s  GPU {gpu}"
    )
    if s.engine != "sglang":
        line += f"  [{s.engine}]"
    line += "".join(f"\n     {r}" for r in rank_lines(s))
    if s.failure:
        line += f"\n     {s.failure.get('class')}: {s.failure.get('hint', '')}"
        if s.engine != "sglang" and s.failure.get("text"):
            line += f" ({s.failure['text']})"
    elif s.state == "starting":
        line += f"\n     {s.stage}"
    if s.log_unrecognised:
        n, text = s.log_unrecognised_lines[0]
        line += f"\n     log: {s.log_unrecognised} lines not recognised, the first (line {n}): {text}"
    return line


def _status(args, ctx):
    wb = ctx.wb
    if args.all and not args.ids:
        ids = [r.id for r in wb.servers()]
        sts = wb.server_status(ids) if ids else []
    else:
        sts = wb.server_status(args.ids or None)
    if args.json:
        emit([s.to_dict() for s in sts], True)
        return 0
    if not sts:
        print("no running servers (launch one: eagle-workbench server launch PROFILE)")
    for s in sts:
        print(_status_line(s))
    return 0


def _logs(args, ctx):
    out = sys.stdout.buffer
    if args.follow and args.rank:
        from workbench.errors import InputError

        raise InputError("--follow reads rank 0's log (the server's); give --rank without --follow")
    if not args.follow:
        out.write(ctx.wb.server_log(args.id, args.offset, rank=args.rank))
        out.flush()
        return 0
    try:
        for _, data in ctx.wb.server_follow(args.id, args.offset):
            out.write(data)
            out.flush()
    except KeyboardInterrupt:
        pass
    return 0


def _stop(args, ctx):
    wb = ctx.wb
    if not confirm_or_yes(wb.stop_plan(args.id, args.grace), args.yes):  # a bad --grace is refused first
        print("not stopped")
        return 1
    res = wb.server_stop(args.id, confirm=True, grace=args.grace, gpu_wait=args.gpu_wait)
    emit(
        res,
        args.json,
        lambda r: (
            f"server {r.id}: {r.message} (signals: {', '.join(r.signals) or 'none'}"
            + (f", GPUs idle: {r.gpus_idle}" if r.gpus_idle is not None else "")
            + ")"
        ),
    )
    return 0 if res.result in ("stopped", "already-gone") else 1


def _measure(args, ctx):
    m = ctx.wb.server_measure(
        args.id,
        concurrency=args.concurrency,
        max_new_tokens=args.max_new_tokens,
        rounds=args.rounds,
        prompts=args.prompts,
        context=args.context,
        trained_length=args.trained_length,
        training_data=args.training_data,
    )

    def text(m):
        al, tps = m.accept_len, m.tokens_per_s_per_request
        head = (
            f"server {m.server_id}: {m.prompts} prompts x {m.rounds} at concurrency {m.concurrency}, "
            f"{m.wall_s:.1f} s timed after a {m.warmup_s:.1f} s warm-up"
        )
        c = m.counters
        if c and c.get("drafts"):  # the engine's own counters over the workload (vLLM)
            rates = ", ".join(f"{r:.3f}" for r in m.per_position)
            body = (
                f"\n  accept length {m.accept_length:.3f} = 1 + {c['accepted']} accepted / {c['drafts']} drafts "
                f"({m.engine or 'the engine'}'s counters; per position {rates})\n"
                f"  {m.tokens_per_s:.1f} tok/s total; per request {tps['mean']:.1f} ± {tps['stdev']:.1f} tok/s"
            )
        elif al["mean"] is not None:
            body = (
                f"\n  accept length {al['mean']:.3f} ± {al['stdev']:.3f} (min {al['min']:.2f}, max {al['max']:.2f}); "
                f"server says {m.server_accept_len if m.server_accept_len is not None else '-'}\n"
                f"  {m.tokens_per_s:.1f} tok/s total; per request {tps['mean']:.1f} ± {tps['stdev']:.1f} tok/s"
            )
        else:
            body = f"\n  {m.tokens_per_s:.1f} tok/s (no speculation)"
        flags = "".join(f"\n  UNSTABLE: {w}" for w in m.unstable) + "".join(f"\n  note: {n}" for n in m.notes)
        return head + body + _per_request_text(m) + _context_text(m) + flags

    emit(m, args.json, text)
    return 0


def _per_request_text(m) -> str:
    d = m.distribution or {}
    if not d.get("n"):
        return ""
    out = (
        f"\n  per request ({m.per_request_source}): p10 {d['p10']:.2f}  median {d['p50']:.2f}  p90 {d['p90']:.2f}  "
        f"(min {d['min']:.2f}, max {d['max']:.2f}, {d['n']} requests)"
    )
    c = m.counters_check
    if c:
        out += (
            f"\n  sums {'agree with' if c['agree'] else 'DIFFER from'} the counters: "
            f"{c['rounds']['requests']} rounds ({c['rounds']['counters']}), "
            f"{c['tokens']['requests']} tokens ({c['tokens']['counters']})"
        )
    for x in m.low_requests[:5]:
        ctx = f" at {x['context_tokens']} tokens" if x.get("context_tokens") else ""
        out += (
            f"\n  far below (< {d['low']:.2f}): {x['accept_len']:.2f}  prompt {x['prompt']}{ctx}: {x['prompt_start']}"
        )
    return out


def _context_text(m) -> str:
    if not m.by_context:
        return ""
    from workbench.textplot import bar_lines, render

    f = m.context_facts or {}
    trained, mpe = f.get("trained_length"), f.get("max_position_embeddings")
    rows = [r for r in m.by_context if r.get("accept_length") is not None]
    marks = {r["context_tokens"]: ("  past trained" if r.get("past_trained_length") else "") for r in rows}
    lines = bar_lines(
        [f"{r['context_tokens']} tok" for r in rows],
        [r["accept_length"] for r in rows],
        lo=1.0,
        hi=max([r["accept_length"] for r in rows] + [2.0]),
        width=30,
    )
    plot = "\n".join("  " + line + marks[r["context_tokens"]] for line, r in zip(render(lines).splitlines(), rows))
    head = (
        f"\n  accept length by context (trained length {trained if trained else 'unknown'}"
        f"{' from ' + f['trained_from'] if f.get('trained_from') else ''}; max_position_embeddings {mpe or '?'}):\n"
    )
    finds = "".join(f"\n  {x['severity']}: {x['message']}" for x in m.findings)
    return head + plot + finds


def _acceptance(args, ctx):
    import json
    import time

    from workbench.numbers import Range, number

    wb = ctx.wb
    interval = number(args.interval, "--interval", Range(0.05, 3600.0))

    def once():
        return wb.server_acceptance(args.id, record=not args.no_read, window_s=args.window, baseline_s=args.baseline)

    if not args.follow:
        emit(once(), args.json, _acceptance_text)
        return 0
    # the whole series once, then each window as it is kept and the alarm when it changes
    shown, alarm = 0, None
    try:
        while True:
            s = once()
            new, now = s.windows[shown:], (s.alarm.raised, s.alarm.current)
            if args.json and (new or now != alarm):
                print(json.dumps({**s.to_dict(), "windows": [w.to_dict() for w in new]}), flush=True)
            elif not args.json and alarm is None:
                print(_acceptance_text(s), flush=True)
            elif not args.json:
                lines = [_window_line(w) for w in new]
                if now != alarm:
                    lines.append(_alarm_line(s))
                if lines:
                    print("\n".join(lines), flush=True)
            shown, alarm = len(s.windows), now
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0


def _window_line(w) -> str:
    import datetime as dt

    def hms(t):
        return dt.datetime.fromtimestamp(t).strftime("%H:%M:%S")

    al = f"{w.accept_length:.3f}" if w.accept_length is not None else "idle"
    tag = "  LOW" if w.low else ""
    label = "  (running average, not a window)" if w.fallback else f"  {w.rounds} rounds"
    return f"  {hms(w.t0)}-{hms(w.t1)}  {al:>6}{label}{tag}"


def _alarm_line(s) -> str:
    return f"  ALARM: {s.alarm.message}" if s.alarm.raised else f"  no alarm ({s.rule})"


def _acceptance_text(s) -> str:
    from workbench.display import sparkline

    b = s.baseline
    lines = [f"server {s.server_id}: accept length over time ({s.source or 'no window yet'})"]
    if b.get("accept_length") is not None:
        lines.append(
            f"  baseline {b['accept_length']:.3f} over {b['windows']} windows of its first {s.baseline_s:g} s"
            + ("" if b.get("complete") else " (still forming)")
        )
    series = [w.accept_length for w in s.windows if w.accept_length is not None]
    if series:
        lines.append(f"  {sparkline(series, min(60, len(series)))}")
    lines += [_window_line(w) for w in s.windows]
    lines.append(_alarm_line(s))
    lines += [f"  note: {n}" for n in s.notes]
    return "\n".join(lines)


def _metrics(args, ctx):
    emit(ctx.wb.server_metrics(args.id), True)
    return 0


def _sweep(args, ctx):
    from workbench.errors import ConfirmationRequired

    wb = ctx.wb
    from workbench.api import SweepRun

    kw = dict(
        steps=_ints(args.steps, "--steps"),
        topks=_ints(args.topk, "--topk"),
        draft_tokens=_ints(args.draft_tokens, "--draft-tokens") if args.draft_tokens else None,
        envs=[_env(e) for e in args.env],
        baseline=args.baseline,
        run=SweepRun(concurrency=args.concurrency, max_new_tokens=args.max_new_tokens),
    )
    try:
        res = wb.server_sweep(args.profile, confirm=False, **kw)
    except ConfirmationRequired as exc:
        if not confirm_or_yes(exc.plan, args.yes):
            print("not started")
            return 1
        res = wb.server_sweep(args.profile, confirm=True, **kw)

    def text(r):
        lines = [
            f"sweep {r.sweep_id} of {r.profile} ({r.resumed} point(s) resumed from the journal)",
            f"{'point':<40} {'tok/s':>9} {'AL':>6} {'state':<9}",
        ]
        for p in r.points:
            tps = f"{p.tokens_per_s:.1f}" if p.tokens_per_s else "-"
            al = f"{p.accept_len:.2f}" if p.accept_len else "-"
            lines.append(f"{p.key:<40} {tps:>9} {al:>6} {p.state:<9}" + (f" {p.error}" if p.error else ""))
        if r.best:
            lines.append(
                f"best: {r.best['key']} at {r.best['tokens_per_s']:.1f} tok/s"
                + (f" ({(r.speedup_vs_baseline - 1) * 100:+.1f}% vs baseline)" if r.speedup_vs_baseline else "")
            )
        if r.model:
            a, b = r.model["t_verify_a_s"] * 1000, r.model["t_verify_b_s_per_token"] * 1000
            lines.append(
                f"model: t_verify = {a:.2f} + {b:.3f}*ndt ms, "
                f"t_draft = {r.model['t_draft_s'] * 1000:.2f} ms (r2 {r.model['r2']:.2f})"
            )
        return "\n".join(lines)

    emit(res, args.json, text)
    return 0 if res.best else 1
