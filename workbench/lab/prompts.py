"""A lab world's measured prompts as a prompt set of token ids (``workbench.servers.measure``): what the
build measured its accept lengths on (``measured``, never trained on) or the demo's (``demo``), sent
to any engine as they are (no tokenizer between the world and the server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# the seeds the build draws these prompts with (workbench.lab.build: seed + 2, seed + 7)
OFFSETS = {"measured": 2, "demo": 7}


def prompt_ids(world: dict[str, Any], which: str = "measured", count: int | None = None) -> list[list[int]]:
    from workbench.lab.build import load_manifest
    from workbench.lab.capture import make_prompts
    from workbench.lab.settings import corpus_style

    built = load_manifest(world["dir"])["settings"]
    n = count or int(built["eval_prompts"])
    rows = make_prompts(built["prompt_len"], n, built["seed"] + OFFSETS[which], built["seed"], corpus_style(built))
    return [[int(t) for t in r] for r in rows.tolist()]


def write_prompt_set(
    world: dict[str, Any], path: str | Path, which: str = "measured", max_new_tokens: int | None = None
) -> Path:
    """The prompt set file (``{"name", "max_new_tokens", "prompts": [[ids...], ...]}``)."""
    from workbench.lab.build import load_manifest

    built = load_manifest(world["dir"])["settings"]
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "name": f"lab-{Path(world['dir']).name}-{which}",
        "description": f"the lab world's {which} prompts as token ids (greedy)",
        "max_new_tokens": int(max_new_tokens or built["eval_new_tokens"]),
        "prompts": prompt_ids(world, which),
    }
    p.write_text(json.dumps(doc) + "\n")
    return p
