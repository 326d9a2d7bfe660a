"""Sensitivity of event studies to violations of parallel trends (Rambachan & Roth 2023)."""

from .api import SensitivityResult, sensitivity

__all__ = ["sensitivity", "SensitivityResult"]
