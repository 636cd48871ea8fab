"""Workbench methods for the miniature EAGLE-3 world."""

from __future__ import annotations


class LabAPI:
    pass
