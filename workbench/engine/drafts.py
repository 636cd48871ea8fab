"""An engine release's EAGLE-3 draft classes, read from its code: the draft-config keys the class's
code reads (``config.x``, ``getattr(config, "x")``, ``eagle_config.get("x")``; a key no code reads is
silently ignored) and how many target states its ``fc`` takes."""

from __future__ import annotations

import ast
import re

from workbench.engine.release import DraftClass
from workbench.engine.rule import UNKNOWN, Evidence
from workbench.engine.source import Source

# a name or attribute chain that holds the draft's config (config, self.config, hf_config, ...)
_CONFIG = re.compile(r"(^|\.)(\w*config)$")
_DRAFT_CONFIG_NAMES = ("config", "hf_config", "draft_config", "pretrained_config")


def _scope(holder: ast.expr) -> str | None:
    """'' for the config itself, 'eagle_config.' for its eagle_config, None for anything else."""
    text = ast.unparse(holder)
    m = _CONFIG.search(text)
    if not m:
        return None
    name = m.group(2)
    if name == "eagle_config":
        return "eagle_config."
    return "" if name in _DRAFT_CONFIG_NAMES else None


def config_reads(src: Source, rel: str) -> dict[str, Evidence]:
    """Every draft-config key the module at ``rel`` reads, with the first line that reads it."""
    t = src.tree(rel)
    out: dict[str, Evidence] = {}

    def add(key: str, node: ast.AST) -> None:
        line = getattr(node, "lineno", 0)
        if key not in out:
            out[key] = Evidence("reads", rel, line, src.line(rel, line))

    for n in ast.walk(t) if t else ():
        if isinstance(n, ast.Call) and n.args:
            fn = n.func
            if (
                isinstance(fn, ast.Name)
                and fn.id in ("getattr", "hasattr")
                and len(n.args) >= 2
                and isinstance(n.args[1], ast.Constant)
                and isinstance(n.args[1].value, str)
            ):
                scope = _scope(n.args[0])
                if scope is not None:
                    add(scope + n.args[1].value, n)
            elif (
                isinstance(fn, ast.Attribute)
                and fn.attr == "get"
                and isinstance(n.args[0], ast.Constant)
                and isinstance(n.args[0].value, str)
            ):
                scope = _scope(fn.value)
                if scope is not None:
                    add(scope + n.args[0].value, n)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and n.attr != "get":
            scope = _scope(n.value)
            if scope is not None:
                add(scope + n.attr, n)
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            scope = _scope(n.value)
            if scope is not None:
                add(scope + n.slice.value, n)
    return out


def fc_states(src: Source, rel: str) -> tuple[str, Evidence | None]:
    """``3`` (fc sized for three states whatever the config says) or ``config`` (``num_aux_hidden_states``,
    else the number of ``eagle_config`` ids, else 3), from the assignment that sizes ``fc``."""
    t = src.tree(rel)
    for node in ast.walk(t) if t else ():
        if isinstance(node, ast.Assign) and any(
            ast.unparse(x) in ("self.fc", "self.fc_input_size", "fc_input_size") for x in node.targets
        ):
            text = ast.unparse(node.value)
            ev = Evidence("fc_states", rel, node.lineno, src.line(rel, node.lineno))
            if re.search(r"\* 3\b", text):
                return "3", ev
            if "num_aux_hidden_states" in text:
                return "config", ev
    return UNKNOWN, None


def draft_class(src: Source, arch: str, rel: str) -> DraftClass | None:
    """The draft class ``arch`` served from the module ``rel``: its module's reads and those of the
    modules of the parts its ``__init__`` builds."""
    found = src.find_class(rel, arch)
    if found is None:
        return None
    f, cls = found
    files = [f]
    for pf, _pc, _line in src.attr_classes(f, cls).values():
        if pf not in files and "eagle" in pf.rsplit("/", 1)[-1]:
            files.append(pf)
    reads: dict[str, Evidence] = {}
    fc, fc_ev = UNKNOWN, None
    for g in files:
        for k, e in config_reads(src, g).items():
            reads.setdefault(k, e)
        if fc == UNKNOWN:
            fc, fc_ev = fc_states(src, g)
    ev = (Evidence("draft", f, cls.lineno, f"class {cls.name}"),) + ((fc_ev,) if fc_ev else ())
    return DraftClass(arch, f, reads, fc, ev)
