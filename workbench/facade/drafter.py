"""Workbench methods for standalone drafter evaluation."""

from __future__ import annotations


class DrafterAPI:
    pass
