"""Estimators of memorisation, one per module, on the contract of :mod:`.base`."""

from .base import BaseEstimator
from .did import DiDEstimator
from .difference import DifferenceEstimator

__all__ = ["BaseEstimator", "DiDEstimator", "DifferenceEstimator"]
