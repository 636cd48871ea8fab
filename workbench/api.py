"""``workbench.api``: the one entry point the TUI, the notebook widgets, the CLI and scripts use.

    from workbench.api import Workbench
    wb = Workbench.open("~/my-workspace")
    wb.predict(acc=[0.75], steps=5, topk=1, draft_tokens=6)

Every operation is one method here, journaled, returning a dataclass with ``to_dict()``.
Destructive methods take ``confirm=True`` (see ``workbench.confirm``).
"""

from __future__ import annotations

from workbench.confirm import Plan
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
from workbench.sglang.registry import STAGES as SERVER_STAGES
from workbench.sglang.registry import ServerState

__all__ = ["Workbench", "Plan", "WorkbenchError", "InputError", "ConfirmationRequired", "ServerState", "SERVER_STAGES"]


class Workbench(PredictAPI, DoctorAPI, EngineAPI, HiddenAPI, DrafterAPI, LabAPI, LiveAPI, ServersAPI, ConfigsAPI,
                TimelineAPI, WorkbenchBase):
    """Open a workspace and operate on it."""
