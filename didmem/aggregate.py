"""Moved to :mod:`didmem.results.aggregations`; this name stays for existing imports."""

from .results.aggregations import *  # noqa: F401,F403
from .results.aggregations import __all__  # noqa: F401
