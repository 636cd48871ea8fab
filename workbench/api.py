"""``workbench.api``: the one entry point the TUI, the notebook widgets, the CLI and scripts use.

    from workbench.api import Workbench
    wb = Workbench.open("~/my-workspace")
    wb.predict(acc=[0.75], steps=5, topk=1, draft_tokens=6)

Every operation is one method here, journaled, returning a dataclass with ``to_dict()``.
Destructive methods take ``confirm=True`` (see ``workbench.confirm``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from workbench.confirm import Plan
from workbench.draftconfig.schema import MAX_CONTEXT, MAX_LAYERS
from workbench.errors import ConfirmationRequired, InputError, WorkbenchError
from workbench.facade.base import WorkbenchBase
from workbench.facade.configs import ConfigsAPI
from workbench.facade.doctor import DoctorAPI
from workbench.facade.drafter import DrafterAPI
from workbench.facade.engine import EngineAPI
from workbench.facade.hidden import HiddenAPI
from workbench.facade.lab import LabAPI
from workbench.facade.live import LiveAPI
from workbench.facade.predict import PredictAPI
from workbench.facade.servers import ServersAPI
from workbench.facade.timeline import TimelineAPI
from workbench.live.types import (
    AlignedSlot,
    Alignment,
    Draft,
    Features,
    LayerRecommendation,
    Observed,
    Predicted,
    Spec,
    Target,
)
from workbench.servers.profiles import GRACE, TIMEOUT
from workbench.servers.registry import STAGES as SERVER_STAGES
from workbench.servers.registry import ServerState
from workbench.servers.sweep import PointRun as SweepRun
from workbench.workspace import default_root, load_keymap

__all__ = [
    "GRACE",
    "MAX_CONTEXT",
    "MAX_LAYERS",
    "SERVER_STAGES",
    "TIMEOUT",
    "AlignedSlot",
    "Alignment",
    "ConfirmationRequired",
    "Draft",
    "Features",
    "InputError",
    "LayerRecommendation",
    "Observed",
    "Plan",
    "Predicted",
    "ServerState",
    "Spec",
    "SweepRun",
    "Target",
    "Workbench",
    "WorkbenchError",
    "default_root",
    "engine_choices",
    "lab_serve",
    "load_keymap",
    "parse_log",
    "parse_log_json_bytes",
    "read_log",
]


def engine_choices() -> list[tuple[str, str]]:
    """(label, engine) for the faces' engine pickers: SGLang releases, then every vLLM release read."""
    from workbench.doctor.engines import engine_choices as choices

    return choices()


def read_log(source: BinaryIO, kinds: Sequence[str] | None = None) -> Any:
    """An SGLang or vLLM log read a chunk at a time (``workbench.logs.Reading``): ``records()`` or
    ``json_bytes()`` as they are parsed (memory stays flat), then ``summary()`` (what was not
    recognised) and ``is_log``."""
    from workbench.logs import Reading

    return Reading(source, kinds)


def parse_log(source: BinaryIO, kinds: Sequence[str] | None = None) -> Iterator[Any]:
    """SGLang or vLLM log records from a binary stream, as they are parsed (memory stays flat)."""
    return read_log(source, kinds).records()  # type: ignore[no-any-return]


def parse_log_json_bytes(source: BinaryIO, kinds: Sequence[str] | None = None) -> Iterator[bytes]:
    """The records of ``parse_log`` as JSON Lines, a piece per chunk of the log (each ends in a newline)."""
    return read_log(source, kinds).json_bytes()  # type: ignore[no-any-return]


def lab_serve(argv: Sequence[str]) -> int:
    """Run the lab's reference server in this process (``sglang.launch_server`` flags)."""
    from workbench.lab.serve import main

    return int(main(list(argv)) or 0)


class Workbench(
    PredictAPI,
    DoctorAPI,
    EngineAPI,
    HiddenAPI,
    DrafterAPI,
    LabAPI,
    LiveAPI,
    ServersAPI,
    ConfigsAPI,
    TimelineAPI,
    WorkbenchBase,
):
    """Open a workspace and operate on it."""
