"""Arm-then-confirm: the first click shows exactly what will happen, the second does it."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

import ipywidgets as w

if TYPE_CHECKING:
    from workbench.confirm import Plan


class ArmButton(w.VBox):
    """``plan_fn()`` returns a Plan (or raises WorkbenchError); ``act_fn()`` runs after the second click."""

    def __init__(self, label: str, plan_fn: Callable, act_fn: Callable, *, on_error: Callable[[str], None]):
        self.label = label
        self.plan_fn, self.act_fn, self.on_error = plan_fn, act_fn, on_error
        self.button = w.Button(description=label, button_style="warning")
        self.cancel = w.Button(description="Cancel", layout=w.Layout(display="none"))
        self.plan_view = w.HTML()
        self.plan: Plan | None = None
        self.button.on_click(lambda _b: self.click())
        self.cancel.on_click(lambda _b: self.disarm())
        super().__init__([w.HBox([self.button, self.cancel]), self.plan_view])

    @property
    def armed(self) -> bool:
        return self.plan is not None

    def click(self) -> object | None:
        from workbench.errors import WorkbenchError

        if self.plan is None:
            try:
                self.plan = self.plan_fn()
            except WorkbenchError as exc:
                self.on_error(str(exc))
                return None
            self.button.description = "Confirm: " + self.plan.action
            self.button.button_style = "danger"
            self.cancel.layout.display = None
            self.plan_view.value = (
                f"<b>{html.escape(self.plan.summary)}</b><pre style='max-height:20em;"
                f"overflow:auto'>{html.escape(chr(10).join(self.plan.details))}</pre>"
            )
            return None
        try:
            return self.act_fn()
        except WorkbenchError as exc:
            self.on_error(str(exc))
            return None
        finally:
            self.disarm()

    def disarm(self) -> None:
        self.plan = None
        self.button.description = self.label
        self.button.button_style = "warning"
        self.cancel.layout.display = "none"
        self.plan_view.value = ""
