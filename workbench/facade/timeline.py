"""Workbench methods for the timeline of a debugging effort."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.timeline import LiveConfig, Timeline


class TimelineAPI(WorkbenchBase):
    def timeline(
        self,
        *,
        server: int | None = None,
        profile: str | None = None,
        config: str | None = None,
        category: str | None = None,
    ) -> Timeline:
        """Every launch, config version, measurement and finding in time order, filtered."""
        from workbench import timeline

        return timeline.build(self.journal, server=server, profile=profile, config=config, category=category)

    def timeline_live_config(self, entry_id: int) -> LiveConfig | None:
        """The draft config that was live for a timeline entry (or None when nothing ties it to one)."""
        from workbench import timeline
        from workbench.errors import InputError

        for entry in timeline.build(self.journal).entries:
            if entry.id == entry_id:
                return timeline.live_config(self.journal, entry)
        raise InputError(f"timeline entry {entry_id}: no such entry")
