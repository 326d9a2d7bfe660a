"""``[design] kind = "order"``: your own model, with a table of its training order.

::

    [design]
    kind = "order"
    file = "order.parquet"         # .parquet or .csv: columns unit and step (empty step =
                                   # validation), or unit and index (0-based position in
                                   # the data order, empty = validation) with batch_size;
                                   # several rows of a unit are several exposures
    batch_size = 32                # only with an index column

The instances come from ``[instances]`` and every one of them needs a row of the order
table (other rows are ignored). A unit with several rows was trained several times: the
panel then gets ``cohort`` (the first exposure), ``cohort_2``, ... and ``exposures``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..._messages import listing
from ..._validation import Constraint, Integral
from ...cohorts import step_from_sequence_index
from ...errors import ConfigError, ParameterError
from ._base import ExposureDesign

__all__ = ["OrderDesign"]

_POSITION_COLUMNS = ("step", "index")


class _TableFile(Constraint):
    description = "the path of a .parquet or .csv table (a string)"

    def __call__(self, value) -> bool:
        return isinstance(value, str) and Path(value).suffix in (".parquet", ".csv")


@dataclass(frozen=True)
class OrderDesign(ExposureDesign):
    """``kind = "order"``: a table of each instance's training step (or index).

    Parameters
    ----------
    where : str
        Where the table is; every message starts with it.
    file : Path
        A ``.parquet`` or ``.csv`` table with a ``unit`` column and one of ``step`` (the
        optimisation step that trained the unit; empty: never trained) or ``index`` (its
        0-based position in the data order; empty: never trained).
    batch_size : int, optional
        Sequences per optimisation step; needed with an ``index`` column only.
    """

    file: Path
    batch_size: int | None = None

    kind: ClassVar[str] = "order"
    _paths: ClassVar[tuple] = ("file",)
    _constraints: ClassVar[dict] = {"file": _TableFile(), "batch_size": Integral(1)}

    def check_files(self, checkpoints) -> None:
        """The table has ``unit`` and exactly one of ``step`` / ``index``."""
        self._table()

    def _table(self) -> pd.DataFrame:
        file = self.file
        if not file.is_file():
            raise ConfigError(f"{self.where} file {str(file)!r} does not exist.")
        try:
            table = pd.read_parquet(file) if file.suffix == ".parquet" else pd.read_csv(file)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ConfigError(f"{self.where} file {str(file)!r} cannot be read: {reason}") from None
        has = [c for c in _POSITION_COLUMNS if c in table.columns]
        if len(has) > 1:
            raise ConfigError(
                f"{self.where} file {str(file)!r} has both a 'step' and an 'index' column; it "
                "needs only one of them (step: the optimisation step; index: the position in "
                "the data order, with batch_size)."
            )
        if "unit" not in table.columns or not has:
            raise ConfigError(
                f"{self.where} file {str(file)!r} needs a 'unit' column and one of 'step' or "
                f"'index'; it has {list(table.columns)}."
            )
        if has == ["index"] and self.batch_size is None:
            raise ConfigError(
                f"{self.where} batch_size is needed with the 'index' column of {str(file)!r}."
            )
        if has == ["step"] and self.batch_size is not None:
            raise ConfigError(
                f"{self.where} batch_size goes with an 'index' column; {str(file)!r} has 'step'."
            )
        return table

    def max_exposures(self) -> int:
        """The most rows with a step (or index) of any unit of the table."""
        table = self._table()
        column = "step" if "step" in table.columns else "index"
        trained = table[table[column].notna()]
        return int(trained.groupby("unit").size().max()) if len(trained) else 0

    @property
    def label(self) -> str:
        """How errors about the order start."""
        return f"{self.where} file {str(self.file)!r}"

    def exposures(self, units, checkpoints) -> pd.DataFrame:
        """Each unit's training steps from its rows (several rows: several exposures)."""
        table = self._table()
        missing = pd.Index(pd.unique(np.asarray(units))).difference(pd.Index(table["unit"]))
        if len(missing):
            ours, theirs = np.asarray(units), table["unit"].to_numpy()
            hint = ""
            if ours.size and theirs.size and ours.dtype.kind != theirs.dtype.kind:
                one, other = ours[:1].tolist()[0], theirs[:1].tolist()[0]
                hint = (f" Its unit column holds {type(other).__name__} ids (e.g. {other!r}) "
                        f"and the scored instances {type(one).__name__} ids (e.g. {one!r}): "
                        "write both with the same type.")
            raise ConfigError(
                f"{self.where} file {str(self.file)!r} has no row for {len(missing)} scored "
                f"units, e.g. {listing(list(missing))}.{hint}"
            )
        try:
            if "step" in table.columns:
                step = table["step"].to_numpy(dtype=np.float64, na_value=np.nan)
            else:
                index = table["index"].to_numpy(dtype=np.float64, na_value=np.nan)
                if (index[np.isfinite(index)] < 0).any():
                    raise ParameterError("indices must be non-negative (empty for validation).")
                step = np.full(index.shape, np.nan)
                known = np.isfinite(index)
                step[known] = step_from_sequence_index(index[known], self.batch_size)
        except (ParameterError, ValueError, TypeError) as exc:
            raise ConfigError(f"{self.label}: {exc}") from None
        return pd.DataFrame({"unit": table["unit"].to_numpy(), "step": step})

    def cohort_table(self, units, checkpoints) -> pd.DataFrame:
        """``cohort`` (and ``cohort_2``, ..., ``exposures`` where units have several rows)."""
        table = super().cohort_table(units, checkpoints)
        if "cohort_2" not in table.columns:  # one exposure each: the panel as before
            table = table.drop(columns="exposures")
        return table
