"""Workbench methods for hosts, profiles and SGLang server lifecycle."""

from __future__ import annotations


class ServersAPI:
    pass
