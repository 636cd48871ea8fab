"""Workbench methods for hidden-state readers and the alignment engine."""

from __future__ import annotations


class HiddenAPI:
    pass
