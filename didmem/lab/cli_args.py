"""Moved to :mod:`didmem.cli.lab` (``didmem lab``); these names stay for older imports."""

from ..cli.lab import DESCRIPTION, HELP, add_arguments, config_changes
from ..cli.lab import run as main_from_args

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "config_changes", "main_from_args"]
