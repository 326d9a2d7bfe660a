"""Moved to :mod:`didmem.cli._options`; this name stays for older imports."""

from .cli._options import (CLI_SEED, PANEL_COLUMNS, bootstrap_option, panel_column_options,
                           seed_option)

__all__ = ["bootstrap_option", "seed_option", "panel_column_options", "CLI_SEED", "PANEL_COLUMNS"]
