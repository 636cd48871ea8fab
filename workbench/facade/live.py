"""Workbench methods for the diagnosis loop on a live server and the demo."""

from __future__ import annotations


class LiveAPI:
    pass
