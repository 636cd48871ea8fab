"""``eagle-workbench logs parse FILE``: SGLang log lines as records (decode, prefill, milestone, failure)."""

from __future__ import annotations

import argparse

from workbench.cli.common import add_json


def register(sub) -> None:
    p = sub.add_parser("logs", help="read SGLang server logs")
    s = p.add_subparsers(dest="logs_cmd", metavar="SUBCOMMAND")
    parse = s.add_parser("parse", help="one record per recognised line: decode, prefill, milestone, failure")
    parse.add_argument("file", help="an SGLang server log ('-' for stdin)")
    parse.add_argument(
        "--kind",
        choices=["decode", "prefill", "milestone", "warning", "failure"],
        action="append",
        help="only these kinds (repeatable)",
    )
    add_json(parse)
    parse.set_defaults(func=cmd_parse)


def cmd_parse(args: argparse.Namespace, ctx) -> int:
    import sys

    from workbench.api import parse_log, parse_log_json_bytes
    from workbench.errors import InputError

    if args.file == "-":
        source = sys.stdin.buffer
    else:
        try:
            source = open(args.file, "rb")
        except FileNotFoundError:
            raise InputError(f"{args.file}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{args.file}: is a directory, expected a log file") from None
        except OSError as exc:
            raise InputError(f"{args.file}: cannot read: {exc.strerror}") from None
    out = sys.stdout
    try:
        # streamed: each record is written as its chunk of the log is parsed (memory stays flat)
        if args.json:
            raw = getattr(out, "buffer", None)  # bytes straight through where stdout has them
            out.flush()
            for piece in parse_log_json_bytes(source, args.kind):
                if raw is not None:
                    raw.write(piece)
                else:
                    out.write(piece.decode("ascii"))
        else:
            for rec in parse_log(source, args.kind):
                out.write(format_record(rec) + "\n")
    except IsADirectoryError:
        raise InputError(f"{args.file}: is a directory, expected a log file") from None
    except OSError as exc:
        raise InputError(f"{args.file}: cannot read: {exc.strerror}") from None
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    return 0


def format_record(rec: dict) -> str:
    head = f"{rec.get('line') or '':>7} {rec.get('time') or '':<19} {rec['kind']:<9} "
    kind = rec["kind"]
    if kind == "decode":
        parts = [
            f"accept len {_f(rec['accept_len'])}",
            f"accept rate {_f(rec['accept_rate'])}",
            f"gen {_f(rec['gen_throughput'])} tok/s",
            f"running {_f(rec['running_req'])}",
            f"queue {_f(rec['queue_req'])}",
            f"usage {_f(rec['token_usage'])}",
        ]
        return head + "  ".join(parts)
    if kind == "prefill":
        return head + (
            f"new-seq {_f(rec['new_seq'])}  new-token {_f(rec['new_token'])}  "
            f"cached {_f(rec['cached_token'])}  running {_f(rec['running_req'])}  "
            f"queue {_f(rec['queue_req'])}"
        )
    if kind == "milestone":
        role = f" ({rec['role']})" if rec.get("role") else ""
        return head + f"{rec['name']}{role}"
    if kind == "warning":
        return head + f"{rec['name']}: {rec['text']}"
    return head + f"{rec['class']}: {rec['text']}"


def _f(v) -> str:
    return "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
