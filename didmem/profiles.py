"""Moved to :mod:`didmem.results.profiles`; this name stays for existing imports."""

from .results.profiles import *  # noqa: F401,F403
from .results.profiles import __all__  # noqa: F401
