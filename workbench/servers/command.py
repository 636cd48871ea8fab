"""A launch command (argv + env + log + warnings), engine-neutral: each engine's adapter builds one
(``workbench.sglang.command``, ``workbench.vllm.command``); ``diff_argv`` compares two launches."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from workbench.results import Result
from workbench.servers.profiles import Profile, split_flags

#: the flags that start an engine's own arguments (its target model), per engine
MODEL_FLAGS = ("--model-path", "--model")


@dataclass
class Command(Result):
    profile: str
    host: str
    version: str | None
    argv: list[Any]
    env: dict[str, Any]
    log: str
    port: int
    run_dir: str | None = None
    warnings: list[Any] = field(default_factory=list)
    engine: str = "sglang"

    @property
    def engine_args(self) -> list[Any]:
        """The arguments the engine's own parser sees (after ``-m MODULE``)."""
        return self.argv[model_index(self.argv) :]

    @property
    def display(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (f"{env} " if env else "") + " ".join(map(_show, self.argv)) + f" > {_show(self.log)} 2>&1"

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "host": self.host,
            "version": self.version,
            "argv": self.argv,
            "env": self.env,
            "log": self.log,
            "port": self.port,
            "run_dir": self.run_dir,
            "warnings": self.warnings,
            "engine": self.engine,
            "display": self.display,
        }


def _show(arg: str) -> str:
    """Quote for display; ``~/path`` stays readable (the remote shell expands it as $HOME)."""
    if arg.startswith("~/") and shlex.quote(arg[2:]) == arg[2:]:
        return arg
    return shlex.quote(arg)


def launcher_for(profile: Profile, python: str, module: str) -> list[Any]:
    """The profile's launcher (``{python}`` standing for the host's python), else ``python -m module``."""
    if profile.launcher:
        return [python if a == "{python}" else a for a in profile.launcher]
    return [python, "-m", module]


def model_index(argv: list[Any]) -> int:
    """Where an engine's own arguments start in a launch argv (its model flag), else 0."""
    for i, a in enumerate(argv):
        if a in MODEL_FLAGS:
            return i
    return 0


def diff_argv(old: list[Any] | None, new: list[Any]) -> list[str]:
    """Flag-level difference between two launch commands: '+ --flag v', '- --flag v', '~ --flag a -> b'."""
    if old is None:
        return ["(first launch of this profile)"]

    def flags(argv: list[Any]) -> dict[str, str]:
        return {f: " ".join(v) for f, v in split_flags(argv[model_index(argv) :], "argv")}

    a, b = flags(old), flags(new)
    out = []
    for f in b:
        if f not in a:
            out.append(f"+ {f} {b[f]}".rstrip())
        elif a[f] != b[f]:
            out.append(f"~ {f} {a[f]} -> {b[f]}")
    for f in a:
        if f not in b:
            out.append(f"- {f} {a[f]}".rstrip())
    i, j = model_index(old), model_index(new)
    if i and j and old[:i] != new[:j]:
        out.append(f"~ launcher {shlex.join(old[:i])} -> {shlex.join(new[:j])}")
    return out
