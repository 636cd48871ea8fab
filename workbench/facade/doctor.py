"""Workbench methods for the doctor (static checks, capture report)."""

from __future__ import annotations


class DoctorAPI:
    pass
