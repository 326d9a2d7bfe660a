"""Moved to :mod:`didmem.results.comparison`; this name stays for existing imports."""

from .results.comparison import *  # noqa: F401,F403
from .results.comparison import __all__  # noqa: F401
