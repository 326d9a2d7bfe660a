"""Moved to :mod:`didmem.results.saving`; this name stays for existing imports."""

from .results.saving import *  # noqa: F401,F403
from .results.saving import __all__  # noqa: F401
