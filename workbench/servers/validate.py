"""Checks before a launch that every engine shares: the finding type, the host probe's answer, and
the doctor's static findings on the draft under the serving release's rules. Each engine's own
parser check and speculative rules live in its package (``workbench.sglang.validate``,
``workbench.vllm.validate``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from workbench.results import Result
from workbench.servers.profiles import Profile

if TYPE_CHECKING:
    from workbench.hosts.base import Host


@dataclass
class Finding(Result):
    severity: str  # "error" blocks the launch; "warning" and "info" do not
    code: str
    message: str
    fix: str = ""
    source: str = "workbench"


def doctor_findings(
    host: Host,
    profile: Profile,
    engine: str,
    draft_config: dict[str, Any] | None,
    cuda_graph: bool = True,
) -> list[Finding]:
    """The doctor's static findings for the draft (and the target's config when readable), under
    the rules of the serving release (``engine``: ``sglang==0.5.23``, ``vllm==0.32.0``). A remote
    draft is checked from its config.json. ``cuda_graph``: the launch decodes with CUDA graphs."""
    if draft_config is None:
        return []
    import os
    import tempfile

    from workbench.doctor import run_static
    from workbench.hosts.local import LocalHost

    algo = profile.speculative.get("algorithm")
    local = isinstance(host, LocalHost)
    with tempfile.TemporaryDirectory(prefix="wb-doctor-") as tmp:
        draft = os.path.expanduser(profile.draft) if local and profile.draft else None
        if draft is None or not os.path.isdir(draft):
            draft = os.path.join(tmp, "draft")
            os.makedirs(draft)
            with open(os.path.join(draft, "config.json"), "w") as fh:
                json.dump(draft_config, fh)
        target = None
        if profile.model.startswith(("/", "~", ".")):
            try:
                raw = host.read_bytes(profile.model.rstrip("/") + "/config.json")
                target = os.path.join(tmp, "target")
                os.makedirs(target)
                with open(os.path.join(target, "config.json"), "wb") as fh:
                    fh.write(raw)
            except Exception:
                target = None
        try:
            report = run_static(draft, target, engine=engine, algorithm=algo, cuda_graph=cuda_graph)
        except Exception as exc:  # the doctor must never block a launch by crashing
            return [Finding("info", "doctor-error", f"the doctor could not check the draft: {exc}", "", "doctor")]
    out = []
    for f in report.findings:
        if f.code == "weights-not-checked" and not local:
            continue  # only config.json travels for a remote draft
        fix = f.fix.summary if f.fix is not None else ""
        out.append(Finding(f.severity, f.code, f.message, fix, "doctor"))
    return out


def parse_probe(stdout: str) -> dict[str, Any]:
    try:
        return cast("dict[str, Any]", json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"version": None, "ok": None, "error": f"probe printed no JSON: {stdout[-200:]!r}"}
