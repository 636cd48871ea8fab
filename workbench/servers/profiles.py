"""Launch profiles: ``[profiles.NAME]`` in workbench.toml, with ``extends`` (debug = prod + overrides).

    [profiles.kimi-debug]
    extends = "kimi-prod"
    env = { EAGLE3_DEBUG = "1" }
    args = ["--disable-cuda-graph"]
    log = "/data/logs/debug.log"

A server may span nodes: ``hosts = ["n1", "n2"]`` (rank order, in place of ``host``) runs one rank on
each SSH host; ``host = "CLUSTER"`` with ``nodes = N`` asks a SLURM host (``kind = "slurm"``) for N nodes.

``engine`` picks the engine that serves it: ``"sglang"`` (the default) or ``"vllm"``; the other keys mean
the same for both (``speculative`` is mapped to each engine's flags: SGLang's ``--speculative-*``, vLLM's
``--speculative-config``).

Merging: scalars and ``speculative`` keys override; ``env`` merges (the child's variables first);
``args`` merge by flag (a flag the child repeats takes the child's value in place, new flags are
appended); ``remove_args`` drops flags of the parent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.numbers import Range, number
from workbench.results import Result

SPEC_KEYS = ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")
_KEYS = {
    "extends",
    "host",
    "hosts",
    "nodes",
    "launcher",
    "model",
    "draft",
    "port",
    "log",
    "run_dir",
    "env",
    "args",
    "remove_args",
    "speculative",
    "sglang_version",
    "vllm_version",
    "engine",
    "gpus",
    "description",
    "ready_timeout",
    "stop_grace",
}
DEFAULT_PORT = 30000
# seconds, finite and bounded, so a stop or a readiness wait always ends (an infinite grace would
# hang a stop over SSH for ever); used for profile keys and for the matching flags alike
GRACE = Range(0, 86400)  # stop_grace / --grace: 0 = SIGKILL right after SIGTERM
TIMEOUT = Range(0, 7 * 86400, lo_open=True)  # ready_timeout / --timeout


@dataclass
class Profile(Result):
    name: str
    host: str = "local"
    launcher: list[Any] | None = None  # None: [host python, -m, the engine's server module]
    model: str = ""
    draft: str | None = None
    port: int = DEFAULT_PORT
    log: str | None = None
    run_dir: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    args: list[Any] = field(default_factory=list)
    speculative: dict[str, Any] = field(default_factory=dict)
    sglang_version: str | None = None
    gpus: list[Any] | None = None
    description: str = ""
    ready_timeout: float = 1200.0
    stop_grace: float = 30.0
    chain: list[Any] = field(default_factory=list)  # [name, parent, grandparent, ...]
    engine: str = "sglang"
    vllm_version: str | None = None
    hosts: list[Any] | None = None  # one SSH host per rank, rank 0 first (``host`` is then hosts[0])
    nodes: int | None = None  # the nodes a SLURM host gives the server

    @property
    def node_count(self) -> int:
        """The nodes the server spans (ranks): ``len(hosts)``, ``nodes``, else 1."""
        return len(self.hosts) if self.hosts else (self.nodes or 1)

    @property
    def version(self) -> str | None:
        """The engine release the profile pins (``sglang_version`` / ``vllm_version``), if any."""
        return self.vllm_version if self.engine == "vllm" else self.sglang_version

    @property
    def log_path(self) -> str:
        return self.log or f"/tmp/eagle-workbench/{self.name}.log"


class Attached(str):
    """A value written as ``--flag=value``: it is joined back in that form, because a value that
    starts with ``-`` (``--x=-1``, ``--opts=-v``) would be read as another option once separated."""


def flag_int(flags: dict[str, list[str]], names: tuple[str, ...], where: str, default: int = 1) -> int:
    """The integer value of the first of ``names`` set in ``flags`` (``dict(split_flags(...))``), else
    ``default``; a value that is not an integer is an input error naming ``where`` and the flag."""
    for n in names:
        vals = flags.get(n)
        if vals:
            try:
                return int(vals[0])
            except ValueError:
                raise InputError(f"{where}: {n} {vals[0]!r} is not an integer") from None
    return default


_SHORT_OPTION = re.compile(r"-[A-Za-z][A-Za-z0-9]*(?:=|$)")


def split_flags(args: list[Any], where: str) -> list[tuple[str, list[str]]]:
    """["--tp-size", "8", "--trust-remote-code", "--x=1"] -> [("--tp-size", ["8"]), ...]. A short option
    (vLLM's ``-tp 8``, ``-pp 2``) is a flag too; a negative number is a value."""
    items: list[tuple[str, list[str]]] = []
    for tok in args:
        if not isinstance(tok, str):
            raise InputError(f"{where}: every argument must be a string, got {tok!r}")
        if tok.startswith("--") or _SHORT_OPTION.match(tok):
            flag, eq, val = tok.partition("=")
            items.append((flag, [Attached(val)] if eq else []))
        elif items:
            items[-1][1].append(tok)
        else:
            raise InputError(f"{where}: {tok!r} comes before any --flag")
    return items


def join_flags(items: list[tuple[str, list[str]]]) -> list[str]:
    out: list[str] = []
    for flag, vals in items:
        if vals and isinstance(vals[0], Attached):
            out.append(f"{flag}={vals[0]}")
            out.extend(vals[1:])
        else:
            out.append(flag)
            out.extend(vals)
    return out


def _merge_args(parent: list[Any], child: list[Any], remove: list[Any], where: str) -> list[Any]:
    items = split_flags(parent, where)
    drop = set(remove or [])
    items = [(f, v) for f, v in items if f not in drop]
    index = {f: i for i, (f, _) in enumerate(items)}
    for flag, vals in split_flags(child, where):
        if flag in index:
            items[index[flag]] = (flag, vals)
        else:
            index[flag] = len(items)
            items.append((flag, vals))
    return join_flags(items)


def load_profile(profiles: dict[str, Any], name: str, source: str = "workbench.toml") -> Profile:
    if name not in profiles:
        if not profiles:
            raise InputError(
                f"{source}: no profile {name!r}: no profiles are defined yet (to start from the "
                "samples, copy sample_configs/workbench.toml into the workspace folder)"
            )
        import difflib

        close = difflib.get_close_matches(name, list(profiles), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InputError(f"{source}: no profile {name!r} ({hint}known: {', '.join(sorted(profiles))})")
    chain: list[str] = []
    cur: str | None = name
    while cur is not None:
        if cur in chain:
            raise InputError(f"{source}/[profiles.{name}].extends: cycle {' -> '.join([*chain, cur])}")
        if cur not in profiles:
            raise InputError(f"{source}/[profiles.{chain[-1]}].extends: no profile {cur!r}")
        table = profiles[cur]
        if not isinstance(table, dict):
            raise InputError(f"{source}/[profiles.{cur}]: expected a table")
        _check_table(table, f"{source}/[profiles.{cur}]")
        chain.append(cur)
        cur = table.get("extends")
    merged: dict[str, Any] = {}
    for pname in reversed(chain):
        t = profiles[pname]
        where = f"{source}/[profiles.{pname}]"
        for key, value in t.items():
            if key in ("extends", "remove_args"):
                continue
            if key == "env":
                merged["env"] = {
                    **{k: str(v) for k, v in value.items()},
                    **{k: v for k, v in merged.get("env", {}).items() if k not in value},
                }
            elif key == "args":
                merged["args"] = _merge_args(merged.get("args", []), value, t.get("remove_args", []), where + ".args")
            elif key == "speculative":
                merged["speculative"] = {**merged.get("speculative", {}), **value}
            elif key in ("host", "hosts"):  # a child's placement replaces its parent's
                merged.pop("hosts" if key == "host" else "host", None)
                merged[key] = list(value) if key == "hosts" else value
            else:
                merged[key] = value
        if "remove_args" in t and "args" not in t:
            merged["args"] = _merge_args(merged.get("args", []), [], t["remove_args"], where + ".args")
    if not merged.get("model"):
        raise InputError(f"{source}/[profiles.{name}].model: expected the target model path")
    launcher = merged.get("launcher")
    if isinstance(launcher, str):
        launcher = launcher.split()
    hosts = merged.get("hosts")
    return Profile(
        name=name,
        host=hosts[0] if hosts else merged.get("host", "local"),
        launcher=launcher,
        model=merged["model"],
        draft=merged.get("draft"),
        port=int(merged.get("port", DEFAULT_PORT)),
        log=merged.get("log"),
        run_dir=merged.get("run_dir"),
        env=merged.get("env", {}),
        args=merged.get("args", []),
        speculative=merged.get("speculative", {}),
        sglang_version=merged.get("sglang_version"),
        gpus=merged.get("gpus"),
        description=merged.get("description", ""),
        ready_timeout=float(merged.get("ready_timeout", 1200)),
        stop_grace=float(merged.get("stop_grace", 30)),
        chain=chain,
        engine=merged.get("engine", "sglang"),
        vllm_version=merged.get("vllm_version"),
        hosts=hosts,
        nodes=merged.get("nodes"),
    )


def _check_table(t: dict[str, Any], where: str) -> None:
    _check_keys(t, where)
    _check_scalars(t, where)
    _check_env(t, where)
    _check_speculative(t, where)
    _check_placement(t, where)
    if "gpus" in t and (not isinstance(t["gpus"], list) or not all(isinstance(g, int) for g in t["gpus"])):
        raise InputError(f"{where}.gpus: expected a list of GPU indices like [0, 1]")
    for key, where_range in (("ready_timeout", TIMEOUT), ("stop_grace", GRACE)):
        if key in t:
            number(t[key], f"{where}.{key} (seconds)", where_range, allow_str=False)


def _check_keys(t: dict[str, Any], where: str) -> None:
    unknown = set(t) - _KEYS
    if "draft_config_version" in unknown:  # once accepted and ignored: the launch records the version itself
        raise InputError(
            f"{where}.draft_config_version: not a profile key; each launch records the draft config "
            "it loaded in the config history (see `eagle-workbench config history`)"
        )
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r} (expected one of {', '.join(sorted(_KEYS))})")


def _check_scalars(t: dict[str, Any], where: str) -> None:
    for key in ("extends", "host", "model", "draft", "log", "run_dir", "sglang_version", "vllm_version", "description"):
        if key in t and not isinstance(t[key], str):
            raise InputError(f"{where}.{key}: expected a string, got {t[key]!r}")
    if "engine" in t:
        from workbench.servers.engines import ENGINES

        if t["engine"] not in ENGINES:
            raise InputError(f"{where}.engine: expected one of {', '.join(map(repr, ENGINES))}, got {t['engine']!r}")
    if "port" in t and (not isinstance(t["port"], int) or not 0 < t["port"] < 65536):
        raise InputError(f"{where}.port: expected a port number, got {t['port']!r}")
    for key in ("args", "remove_args"):
        if key in t and (not isinstance(t[key], list) or not all(isinstance(a, str) for a in t[key])):
            raise InputError(f'{where}.{key}: expected a list of strings like ["--tp-size", "8"]')
    if "launcher" in t and not (
        isinstance(t["launcher"], str)
        or (isinstance(t["launcher"], list) and all(isinstance(a, str) for a in t["launcher"]))
    ):
        raise InputError(f"{where}.launcher: expected a command (string or list of strings)")


def _check_env(t: dict[str, Any], where: str) -> None:
    if "env" in t:
        if not isinstance(t["env"], dict):
            raise InputError(f'{where}.env: expected a table of NAME = "value"')
        for k, v in t["env"].items():
            if not isinstance(v, (str, int, float, bool)) or isinstance(v, bool):
                raise InputError(f"{where}.env.{k}: expected a string value, got {v!r}")


def _check_speculative(t: dict[str, Any], where: str) -> None:
    if "speculative" in t:
        spec = t["speculative"]
        if not isinstance(spec, dict):
            raise InputError(
                f"{where}.speculative: expected a table {{algorithm, num_steps, eagle_topk, num_draft_tokens}}"
            )
        for k, v in spec.items():
            if k not in SPEC_KEYS:
                raise InputError(f"{where}.speculative.{k}: unknown key (expected {', '.join(SPEC_KEYS)})")
            if k == "algorithm":
                if not isinstance(v, str):
                    raise InputError(f'{where}.speculative.algorithm: expected a name like "EAGLE3"')
            elif not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"{where}.speculative.{k}: expected a positive integer, got {v!r}")


def _check_placement(t: dict[str, Any], where: str) -> None:
    """``hosts`` (several SSH hosts, rank order) or ``host``; ``nodes`` (a SLURM host's node count)."""
    if "hosts" in t:
        hosts = t["hosts"]
        if "host" in t:
            raise InputError(f"{where}: host and hosts both given (hosts lists every node, rank 0 first)")
        if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
            raise InputError(f'{where}.hosts: expected host names in rank order, like ["n1", "n2"]')
        seen: set[str] = set()
        for h in hosts:
            if h in seen:
                raise InputError(f"{where}.hosts: {h!r} is listed twice (one rank per host)")
            seen.add(h)
        if "nodes" in t:
            raise InputError(f"{where}: nodes is for a SLURM host; hosts already names every node")
    if "nodes" in t:
        n = t["nodes"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError(f"{where}.nodes: expected a node count of at least 1, got {n!r}")
