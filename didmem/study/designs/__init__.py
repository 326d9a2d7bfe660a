"""The kinds of a study's ``[design]`` table: which instances are treated when.

:data:`DESIGNS` maps each ``kind`` to its class. To add a kind: write a module here with a
frozen dataclass derived from :class:`~didmem.study.designs.Design` (its fields are the
table's keys, ``_constraints`` what they accept; override ``instances`` and ``cohorts_of``,
and ``check_files`` for the checks made when the study is read), then add one line to
:data:`DESIGNS`. Nothing else changes: the study reads, checks and documents the keys from
the class.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from .._tables import closest
from ._base import Design
from .hubble import HubbleDesign
from .olmo import OlmoDesign
from .order import OrderDesign
from .pythia import PythiaDesign
from .runs import RunsDesign

__all__ = ["DESIGNS", "Design", "PythiaDesign", "OrderDesign", "OlmoDesign", "HubbleDesign",
           "RunsDesign"]

DESIGNS = {
    "pythia": PythiaDesign,
    "order": OrderDesign,
    "olmo": OlmoDesign,
    "hubble": HubbleDesign,
    "runs": RunsDesign,
}
"""``[design] kind`` -> the class that reads the table."""


def parse_design(table, where: str, base: Path) -> Design:
    """Check a ``[design]`` table (``where`` starts each message); return the design.

    Raises
    ------
    ConfigError
        One line naming ``where`` and the key that is wrong.
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table; got {type(table).__name__} {table!r}.")
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in DESIGNS:
        raise ConfigError(f"{where} kind must be one of {', '.join(DESIGNS)}; got "
                          f"{kind!r}{closest(kind, DESIGNS)}.")
    return DESIGNS[kind].from_table(table, where, base)
