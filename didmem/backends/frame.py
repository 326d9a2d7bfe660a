"""Backends for outcomes that exist already: precomputed tables and user functions."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from ..errors import PanelError, ParameterError
from ..cohorts import (
    COHORT_RULES,
    PAPER_LAST_STEP,
    PYTHIA_BATCH_SIZE,
    PYTHIA_STEPS_PER_CHECKPOINT,
    cohort_from_sequence_index,
    paper_first_epoch,
)
from ._instances import InstanceBatch, InstanceError, Instances, listing
from .base import OutcomeBackend, check_checkpoint_times

__all__ = ["FrameBackend", "CallableBackend", "PAPER_METRICS"]

#: Metric columns of the panels published with Lesci et al. (2024): mean surprisal (lower is
#: better), token accuracy, mean rank of the true token and mean entropy.
PAPER_METRICS = ("sup_seq", "acc_seq", "avg_rank", "entr_seq")
_LAYOUTS = ("auto", "didmem", "paper")


class FrameBackend(OutcomeBackend):
    """Outcomes read from a precomputed long table (a DataFrame or a parquet file).

    Parameters
    ----------
    data : pandas.DataFrame or str or os.PathLike
        The table, or a parquet file (or directory of parquet files) holding it.
    unit, time : str, optional
        Columns of the unit id and the checkpoint time. Default ``"unit"`` and ``"time"``, or
        ``"seq_idx"`` and ``"step"`` for the paper's layout.
    cohort : str, optional
        Column of the cohort, passed through to :meth:`score`'s frame. In the paper's layout
        the cohort is derived from ``seq_idx`` with
        :func:`didmem.cohort_from_sequence_index` (negative ``seq_idx``: validation, so
        never-treated, ``inf``).
    metrics : sequence of str, optional
        Metric columns; defaults to every numeric or boolean column that is not the unit, time
        or cohort.
    layout : {"auto", "didmem", "paper"}
        ``"paper"`` reads the layout of the panels published with Lesci et al. (2024):
        ``seq_idx``, ``step`` and metric columns such as ``sup_seq`` (mean surprisal, where
        lower is better), ``acc_seq``, ``avg_rank`` and ``entr_seq``. ``"auto"`` picks it
        when the table has ``seq_idx`` and ``step`` columns.
    batch_size, steps_per_checkpoint : int
        For the paper's layout: sequences per batch (1024) and steps between checkpoints
        (1000), as in :func:`didmem.cohort_from_sequence_index`.
    cohort_rule : {"didmem", "paper"}
        For the paper's layout: how cohorts follow from ``seq_idx`` (see
        :mod:`didmem.cohorts`). ``"paper"`` is the rule of the paper's code
        (``batch = ceil(seq_idx / 1024)``, ``cohort = ceil(batch / 1000) * 1000``,
        ``seq_idx <= 0`` is validation), and it also keeps only the rows with
        ``cohort <= 95000`` and ``step <= 95000``, as the paper does (a
        :class:`~didmem.errors.DataDroppedWarning` counts the rows left out), so that a
        published panel gives the published numbers. The default ``"didmem"`` rule is the
        correct one; they differ at macro-batch boundaries (``seq_idx = 1,024,000``: paper
        1000, didmem 2000) and at ``seq_idx = 0``.

    Examples
    --------
    >>> import pandas as pd
    >>> from didmem.backends import FrameBackend
    >>> paper = pd.DataFrame({"seq_idx": [5, 5, -1, -1], "step": [0, 1000, 0, 1000],
    ...                       "sup_seq": [9.1, 3.2, 9.0, 8.7]})
    >>> FrameBackend(paper).score()
       unit  time  cohort  sup_seq
    0    -1     0     inf      9.0
    1     5     0  1000.0      9.1
    2    -1  1000     inf      8.7
    3     5  1000  1000.0      3.2
    """

    def __init__(
        self,
        data,
        *,
        unit: str | None = None,
        time: str | None = None,
        cohort: str | None = None,
        metrics=None,
        layout: str = "auto",
        batch_size: int = PYTHIA_BATCH_SIZE,
        steps_per_checkpoint: int = PYTHIA_STEPS_PER_CHECKPOINT,
        cohort_rule: str = "didmem",
    ) -> None:
        if cohort_rule not in COHORT_RULES:
            raise ParameterError(
                f"The 'cohort_rule' parameter of FrameBackend must be one of "
                f"{set(COHORT_RULES)}. Got {cohort_rule!r}."
            )
        if layout not in _LAYOUTS:
            raise ParameterError(
                f"The 'layout' parameter of FrameBackend must be one of {set(_LAYOUTS)}. "
                f"Got {layout!r}."
            )
        if isinstance(data, (str, os.PathLike)):
            data = pd.read_parquet(data)
        if not isinstance(data, pd.DataFrame):
            raise ParameterError(
                f"FrameBackend needs a DataFrame or a parquet path; got {type(data).__name__}."
            )
        if layout == "auto":
            layout = "paper" if {"seq_idx", "step"} <= set(data.columns) else "didmem"
        default_unit, default_time = ("seq_idx", "step") if layout == "paper" else ("unit", "time")
        unit, time = unit or default_unit, time or default_time
        missing = [c for c in (unit, time, cohort) if c is not None and c not in data.columns]
        if missing:
            raise PanelError(
                f"FrameBackend: missing columns {missing}; the table has {list(data.columns)}."
            )
        if metrics is None:
            metrics = [
                c
                for c in data.columns
                if c not in (unit, time, cohort)
                and (pd.api.types.is_numeric_dtype(data[c]) or pd.api.types.is_bool_dtype(data[c]))
            ]
        metrics = tuple(metrics)
        absent = [m for m in metrics if m not in data.columns]
        if absent or not metrics:
            raise PanelError(
                f"FrameBackend: metric columns {absent or '(none)'} are not in the table; it has "
                f"{list(data.columns)}."
            )
        frame = pd.DataFrame({"unit": data[unit].to_numpy(), "time": data[time].to_numpy()})
        if layout == "paper" and cohort is None:
            frame["cohort"] = cohort_from_sequence_index(
                data[unit].to_numpy(), batch_size, steps_per_checkpoint, rule=cohort_rule
            )
        elif cohort is not None:
            frame["cohort"] = data[cohort].to_numpy(dtype=np.float64, na_value=np.inf)
        for m in metrics:
            frame[m] = data[m].to_numpy()
        if cohort_rule == "paper":
            if "cohort" not in frame.columns:
                raise ParameterError(
                    "FrameBackend: cohort_rule='paper' needs the paper's layout or a cohort "
                    "column."
                )
            frame = paper_first_epoch(frame, last=PAPER_LAST_STEP, where="FrameBackend")
        dup = frame.duplicated(["unit", "time"])
        if dup.any():
            pairs = list(zip(frame["unit"][dup], frame["time"][dup]))
            raise PanelError(
                f"FrameBackend: {int(dup.sum())} duplicate ({unit!r}, {time!r}) rows, e.g. "
                f"{listing(pairs)}."
            )
        self._checkpoints = check_checkpoint_times(pd.unique(frame["time"]), "FrameBackend")
        self.layout = layout
        self.cohort_rule = cohort_rule
        self.default_metrics = metrics
        self._frame = frame.set_index(["unit", "time"]).sort_index()

    @property
    def checkpoints(self) -> tuple:
        """Distinct times of the table, ascending."""
        return self._checkpoints

    @property
    def units(self) -> np.ndarray:
        """Distinct unit ids of the table, sorted."""
        return self._frame.index.get_level_values("unit").unique().to_numpy()

    def score_batch(self, checkpoint, batch: InstanceBatch, metrics: tuple) -> Mapping:
        """Look the batch's units up at ``checkpoint``."""
        rows = self._lookup(batch.units, (checkpoint,), metrics)
        return {m: rows[m].to_numpy() for m in metrics}

    def score(self, token_ids=None, *, unit_ids=None, metrics=None, checkpoints=None, **_):
        """The table's outcomes of the given units at the given checkpoints.

        Parameters
        ----------
        token_ids : ignored
            Accepted for a uniform interface; the outcomes are precomputed.
        unit_ids : array_like, optional
            Units to return; defaults to every unit of the table.
        metrics : sequence of str, optional
            Metric columns; defaults to all.
        checkpoints : sequence of numbers, optional
            Times to return; defaults to all.

        Returns
        -------
        pandas.DataFrame
            Columns ``unit``, ``time``, ``cohort`` (when known) and one per metric; rows
            ordered by time, then by unit in the order given.
        """
        units = self.units if unit_ids is None else unit_ids
        instances = Instances(None, units)
        metrics = self.resolve_metrics(metrics)
        unknown = [m for m in metrics if m not in self._frame.columns or m == "cohort"]
        if unknown:
            raise ParameterError(
                f"Unknown metrics {unknown}; FrameBackend has {list(self.default_metrics)}."
            )
        times = self.resolve_checkpoints(checkpoints)
        extra = ("cohort",) if "cohort" in self._frame.columns else ()
        rows = self._lookup(instances.units, times, extra + metrics)
        return rows.reset_index(drop=True)

    def _lookup(self, units, times, columns) -> pd.DataFrame:
        index = pd.MultiIndex.from_arrays(
            [np.tile(units, len(times)), np.repeat(np.asarray(times), len(units))],
            names=["unit", "time"],
        )
        present = index.isin(self._frame.index)
        if not present.all():
            cells = list(index[~present])
            raise InstanceError(
                f"FrameBackend has no row for {int((~present).sum())} (unit, time) cells, e.g. "
                f"{listing(cells)}."
            )
        rows = self._frame.loc[index, list(columns)]
        return rows.reset_index()


class CallableBackend(OutcomeBackend):
    """Outcomes from a user function ``fn(checkpoint, batch) -> metrics``.

    Parameters
    ----------
    fn : callable
        Called as ``fn(checkpoint, batch)`` with one checkpoint time and an
        :class:`~didmem.backends.InstanceBatch` (``batch.units``, ``batch.token_ids``). It
        returns a mapping (or DataFrame) from metric name to one value per instance.
    checkpoints : sequence of numbers
        The checkpoint times to score.
    metrics : sequence of str, optional
        The metrics ``fn`` returns, scored when :meth:`score` gets ``metrics=None``.
    batch_size : int
        Instances per call of ``fn``.
    name : str, optional
        Names the function in the manifest of a resumable run (``out_dir``), which refuses to
        mix parts of different functions; defaults to the function's qualified name.

    Examples
    --------
    >>> import numpy as np
    >>> from didmem.backends import CallableBackend
    >>> def length_score(checkpoint, batch):
    ...     return {"score": [checkpoint / 1000 * len(t) for t in batch.token_ids]}
    >>> backend = CallableBackend(length_score, [0, 1000], metrics=["score"], batch_size=2)
    >>> backend.score([[1, 2], [3, 4, 5]], unit_ids=["a", "b"], progress=False)
      unit  time  score
    0    a     0    0.0
    1    b     0    0.0
    2    a  1000    2.0
    3    b  1000    3.0
    """

    def __init__(
        self, fn: Callable, checkpoints, *, metrics=None, batch_size: int = 64, name=None
    ) -> None:
        if not callable(fn):
            raise ParameterError(f"CallableBackend needs a callable; got {type(fn).__name__}.")
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, (int, np.integer))
            or (batch_size < 1)
        ):
            raise ParameterError(
                f"The 'batch_size' parameter of CallableBackend must be a positive integer. "
                f"Got {batch_size!r}."
            )
        self.fn = fn
        if name is None:
            qualname = getattr(fn, "__qualname__", type(fn).__name__)
            name = f"{getattr(fn, '__module__', '')}.{qualname}"
        self.name = str(name)
        self._checkpoints = check_checkpoint_times(checkpoints, "CallableBackend")
        self.default_metrics = () if metrics is None else tuple(metrics)
        self.batch_size = int(batch_size)

    @property
    def checkpoints(self) -> tuple:
        """The checkpoint times, ascending."""
        return self._checkpoints

    def describe(self) -> dict:
        """The class and the function's name."""
        return {"backend": "CallableBackend", "function": self.name}

    def score_batch(self, checkpoint, batch: InstanceBatch, metrics: tuple) -> Mapping:
        """Call the user function."""
        values = self.fn(checkpoint, batch)
        if isinstance(values, pd.DataFrame):
            values = {c: values[c].to_numpy() for c in values.columns}
        if not isinstance(values, Mapping):
            raise ParameterError(
                f"The function of CallableBackend must return a mapping of metric name to "
                f"values; at checkpoint {checkpoint} it returned {type(values).__name__}."
            )
        return values
