"""Workbench methods for draft-config history (track, set, diff, revert)."""

from __future__ import annotations


class ConfigsAPI:
    pass
