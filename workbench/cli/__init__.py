"""The ``eagle-workbench`` command line.

Subcommands live in ``workbench/cli/cmd_*.py``; each module defines ``register(subparsers)``
and sets ``func`` on its parsers. Modules are discovered by name, so adding a command touches no
other file. Nothing heavy is imported before a command runs (``--help`` stays fast).
"""

from __future__ import annotations

import argparse
import contextlib
import pkgutil
import sys
from collections.abc import Sequence
from importlib import import_module

from workbench import __version__
from workbench.cli.common import Context, fail


class Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit code 2, like every other bad input.

    No abbreviated options: a prefix that is unique today becomes ambiguous when a flag is added.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line. Given a run's arguments that name a command (after the global options, with
    no help or version asked before it), only that command's parsers are built: a run parses the
    same whatever else is registered, and the other commands' parsers were two thirds of a start."""
    parser = Parser(
        prog="eagle-workbench",
        description="Diagnose EAGLE-3 speculative decoding served by SGLang. Without a command, opens the terminal UI.",
    )
    parser.add_argument("--workspace", metavar="DIR", help=WORKSPACE_HELP)
    parser.add_argument("--json", action="store_true", default=False, help=JSON_HELP)
    parser.add_argument("--version", action="version", version=f"eagle-workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = command_modules()
    only = _command_module(argv, modules)
    for name in modules:
        if only is None or name == only:
            import_module(f"workbench.cli.{name}").register(sub)
    for leaf in leaf_parsers(parser):
        add_global_options(leaf)
    return parser


WORKSPACE_HELP = "workspace folder (default: $EAGLE_WORKBENCH_HOME or ~/.eagle-workbench)"
JSON_HELP = "print machine-readable JSON (for commands that print a result)"


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every subcommand's parser, nested groups included (``config set``, ``server launch``)."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                out.append(child)
                out += leaf_parsers(child)
    return out


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """``--workspace`` (and ``--json`` where a command prints a result) after the subcommand too:
    ``eagle-workbench demo --workspace /tmp/x`` means what ``eagle-workbench --workspace /tmp/x demo``
    does. The copies default to SUPPRESS, so a value given before the subcommand is kept."""
    if "-" not in parser.prefix_chars:  # `lab serve`: every flag belongs to the server's own parser
        return
    if "--workspace" not in parser._option_string_actions:
        parser.add_argument("--workspace", metavar="DIR", default=argparse.SUPPRESS, help=WORKSPACE_HELP)
    json_action = parser._option_string_actions.get("--json")
    if json_action is not None:
        json_action.default = argparse.SUPPRESS


def _command_module(argv: Sequence[str] | None, modules: list[str]) -> str | None:
    """The module of the command ``argv`` runs, when that is all it needs (``cmd_NAME`` registers the
    command NAME); None where the whole tree is needed: no arguments given, no command, an unknown
    one (its error lists the commands), or anything but ``--workspace DIR`` and ``--json`` before it
    (``--help`` and ``--version`` among them)."""
    if argv is None:
        return None
    args = list(argv)
    i = 0
    while i < len(args) and (args[i] in ("--json", "--workspace") or args[i].startswith("--workspace=")):
        i += 2 if args[i] == "--workspace" else 1
    if i >= len(args):
        return None
    name = f"cmd_{args[i]}"
    return name if name in modules else None


def command_modules() -> list[str]:
    import workbench.cli as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("cmd_"))


def unknown_flag(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[str, str] | None:
    """The first ``--flag`` of ``argv`` that the (sub)command it is given to does not have, as
    (that command's prog, the one-line error with the closest flags): argparse itself reports a
    mistyped ``--stpes 5`` as an invalid choice '5' of a subcommand, or as unrecognized arguments."""
    import difflib

    current = parser
    for token in argv:
        if token == "--" or "-" not in current.prefix_chars:  # the rest belongs to another parser
            return None
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and token in subs[0].choices:
            current = subs[0].choices[token]
            continue
        if not token.startswith("--") or token == "--":
            continue
        name = token.split("=", 1)[0]
        known = [o for o in current._option_string_actions if o.startswith("--")]
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else f" (see {current.prog} --help)"
        return current.prog, f"unknown flag {name}{hint}"
    return None


DEBUG_ENV = "EAGLE_WORKBENCH_DEBUG"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    unknown = unknown_flag(parser, argv)
    if unknown is not None:
        prog, message = unknown
        parser.exit(2, f"{prog}: error: {message}\n")
    args = parser.parse_args(argv)
    ctx = Context(args)
    try:
        return _run(parser, args, ctx)
    except Exception as exc:  # a bug, not bad input: still one line, the traceback on request
        import os

        if os.environ.get(DEBUG_ENV):
            raise
        what = " ".join(str(exc).split())[:200]
        return fail(
            f"internal error: {type(exc).__name__}{': ' + what if what else ''} "
            f"(rerun with {DEBUG_ENV}=1 for the traceback)",
            1,
        )


def _run(parser, args, ctx) -> int:
    if not getattr(args, "func", None):
        if args.command:  # a group without its subcommand
            parser.parse_args([args.command, "--help"])
        from workbench.tui.app import run_app

        return run_app(workspace=args.workspace) or 0
    from workbench import collector
    from workbench.errors import WorkbenchError

    collector.for_a_command()
    try:
        return int(args.func(args, ctx) or 0)
    except WorkbenchError as exc:
        return fail(str(exc), getattr(exc, "exit_code", 1))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        with contextlib.suppress(Exception):  # closing must not replace the command's own outcome
            ctx.close()


def entry() -> None:  # pragma: no cover
    sys.exit(main())
