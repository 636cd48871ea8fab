"""``eagle-workbench logs parse FILE``: SGLang and vLLM log lines as records (decode, prefill, metrics,
milestone, ready, warning, failure); what was not recognised is said on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.common import add_json

KINDS = ["decode", "prefill", "metrics", "milestone", "ready", "warning", "failure"]


def register(sub) -> None:
    p = sub.add_parser("logs", help="read SGLang and vLLM server logs")
    s = p.add_subparsers(dest="logs_cmd", metavar="SUBCOMMAND")
    parse = s.add_parser(
        "parse",
        help="one record per line read: decode, prefill, metrics, milestone, ready, warning, failure",
        description="One record per line read, in line order. Lines not recognised are counted on stderr "
        "(with the first few); a file that is not an SGLang or vLLM log is an error (exit 2).",
    )
    parse.add_argument("file", help="an SGLang or vLLM server log ('-' for stdin)")
    parse.add_argument("--kind", choices=KINDS, action="append", help="only these kinds (repeatable)")
    add_json(parse)
    parse.set_defaults(func=cmd_parse)


def _open(name: str):
    from workbench.errors import InputError

    if name == "-":
        return sys.stdin.buffer
    try:
        return open(name, "rb")
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory, expected a log file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror}") from None


def cmd_parse(args: argparse.Namespace, ctx) -> int:
    from workbench.api import read_log
    from workbench.errors import InputError

    source = _open(args.file)
    out = sys.stdout
    name = "stdin" if args.file == "-" else args.file
    try:
        reading = read_log(source, args.kind)
        # streamed: each chunk's records are written as it is parsed (memory stays flat)
        if args.json:
            raw = getattr(out, "buffer", None)  # bytes straight through where stdout has them
            out.flush()
            for piece in reading.json_bytes():
                if raw is not None:
                    raw.write(piece)
                else:
                    out.write(piece.decode("utf-8"))
        else:
            for rec in reading.records():
                out.write(format_record(rec) + "\n")
        out.flush()
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory, expected a log file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror}") from None
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    summary = reading.summary()
    if not summary["lines"]:
        raise InputError(f"{name}: empty, expected an SGLang or vLLM log")
    if not reading.is_log:
        raise InputError(
            f"{name}: not an SGLang or vLLM log (none of its {summary['lines']} lines is one these engines write)"
        )
    report_unrecognised(summary, sys.stderr)
    return 0


def report_unrecognised(summary: dict[str, Any], err) -> None:
    """The count of lines not recognised and the first few, on stderr (nothing when all were)."""
    n = summary["unrecognised"]
    if not n:
        return
    lines = summary["lines"]
    samples = summary["samples"]
    err.write(f"logs parse: {n} of {lines} lines not recognised; the first {len(samples)}:\n")
    for s in samples:
        err.write(f"  line {s['line']}: {s['text']}\n")


def format_record(rec: dict) -> str:
    head = f"{rec.get('line') or '':>7} {rec.get('time') or '':<19} {rec['kind']:<9} "
    kind = rec["kind"]
    who = f"[{rec['rank'] or rec.get('process')}] " if rec.get("rank") or rec.get("process") else ""
    if kind == "decode":
        parts = [
            f"accept len {_f(rec['accept_len'])}",
            f"accept rate {_f(rec['accept_rate'])}",
            f"gen {_f(rec['gen_throughput'])} tok/s",
            f"running {_f(rec['running_req'])}",
            f"queue {_f(rec['queue_req'])}",
            f"usage {_f(rec['token_usage'])}",
        ]
        return head + who + "  ".join(parts)
    if kind == "prefill":
        return (
            head
            + who
            + (
                f"new-seq {_f(rec['new_seq'])}  new-token {_f(rec['new_token'])}  "
                f"cached {_f(rec['cached_token'])}  running {_f(rec['running_req'])}  "
                f"queue {_f(rec['queue_req'])}"
            )
        )
    if kind == "metrics":
        if rec.get("name") == "spec_decode":
            pos = rec.get("per_position") or []
            per = ", ".join(_f(p) for p in pos) if isinstance(pos, list) else _f(pos)
            return head + who + f"accept len {_f(rec.get('accept_len'))}  per position [{per}]"
        return (
            head
            + who
            + (
                f"gen {_f(rec.get('gen_throughput'))} tok/s  prompt {_f(rec.get('prompt_throughput'))} tok/s  "
                f"running {_f(rec.get('running_req'))}  queue {_f(rec.get('queue_req'))}  "
                f"usage {_f(rec.get('token_usage'))}"
            )
        )
    if kind in ("milestone", "ready"):
        role = f" ({rec['role']})" if rec.get("role") else ""
        return head + who + f"{rec['name']}{role}"
    if kind == "warning":
        return head + who + f"{rec.get('name') or rec.get('level') or 'warning'}: {rec['text']}"
    exc = f" | {rec['exception']}" if rec.get("exception") and rec["exception"] != rec.get("text") else ""
    return head + who + f"{rec['class']}: {rec['text']}{exc}"


def _f(v) -> str:
    return "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
