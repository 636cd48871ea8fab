"""Workbench methods for the accept-length predictor (predict, predict_sweep, fit)."""

from __future__ import annotations


class PredictAPI:
    pass
