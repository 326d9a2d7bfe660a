"""The run dimension of a panel: one training run per value of the ``run`` column.

A panel of several runs (``Panel(..., run="run")``, e.g. PolyPythias' seeds) holds the same
instances at the same checkpoints in every run; only the cohorts (each run's data order) and
the outcomes differ. :func:`split_runs` builds one ordinary :class:`~didmem.Panel` per run
(every check of a single-run panel applies to each) and checks what joins them: every run
has every checkpoint and every instance. A run missing a checkpoint another has, or an
instance absent from one run, is a :class:`~didmem.errors.PanelError` that names the run
and the first missing values: nothing is dropped or filled in silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._messages import listing, python_scalar
from ..errors import PanelError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["split_runs", "PER_RUN_ATTRIBUTES", "PerRunAttributeError"]


class PerRunAttributeError(PanelError, AttributeError):
    """A single run's attribute asked of a panel of several runs (also an AttributeError, so
    that ``hasattr`` and ``getattr`` with a default read it as absent)."""

PER_RUN_ATTRIBUTES = frozenset({
    "cohorts", "exposure_cohorts", "weights", "clusters", "cluster_labels", "layout",
    "_outcomes", "_covariates", "_rows", "has_weights", "_unit_exposures",
    # properties that read them (an AttributeError inside a property comes back by its name)
    "has_holes", "n_rows", "never_treated"})
"""A single run's attributes, which a panel of several runs has one of per run (read them
from :meth:`~didmem.Panel.run_panel`)."""


def split_runs(data: pd.DataFrame, run: str, build):
    """One panel per run of ``data`` and the checks that join them.

    Parameters
    ----------
    data : pandas.DataFrame
        The long table, with the ``run`` column.
    run : str
        The run column: any hashable labels, no missing value.
    build : callable
        ``build(frame)`` -> the single-run :class:`~didmem.Panel` of one run's rows.

    Returns
    -------
    runs : pandas.Index
        The run labels, sorted.
    panels : dict
        Run label -> its panel.

    Raises
    ------
    PanelError
        A missing run label, one run's rows failing a panel check (the message names the
        run), or runs that do not share their checkpoints and instances.
    """
    import pandas as pd

    labels = data[run]
    if labels.isna().any():
        rows = np.flatnonzero(labels.isna().to_numpy())
        raise PanelError(f"The run column {run!r} has {rows.size} missing values (rows "
                         f"{listing([int(r) for r in rows])}); every row must name its run.")
    codes, runs = pd.factorize(labels, sort=True)
    runs = pd.Index(runs, name=run)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(runs.size + 1))
    panels = {}
    for j, label in enumerate(runs):
        frame = data.iloc[order[bounds[j]:bounds[j + 1]]]
        try:
            panels[label] = build(frame)
        except PanelError as exc:
            raise PanelError(f"Run {python_scalar(label)!r} (column {run!r}): {exc}") from None
    _check_shared(runs, panels, run)
    return runs, panels


def _check_shared(runs, panels: dict, run: str) -> None:
    """Every run has the first run's checkpoints and instances, and no other."""
    first = runs[0]
    ref = panels[first]
    for label in runs[1:]:
        panel = panels[label]
        for what, mine, theirs, column in (
                ("checkpoint", panel.times, ref.times, ref.time_column),
                ("instance", np.asarray(panel.units), np.asarray(ref.units), ref.unit_column)):
            lacks = np.setdiff1d(theirs, mine)
            extra = np.setdiff1d(mine, theirs)
            if lacks.size or extra.size:
                who, other, missing = ((label, first, lacks) if lacks.size
                                       else (first, label, extra))
                raise PanelError(
                    f"Run {python_scalar(who)!r} lacks {missing.size} {what}(s) that run "
                    f"{python_scalar(other)!r} has ({column!r} = "
                    f"{listing([python_scalar(v) for v in missing])}): every run must hold the "
                    f"same {what}s (column {run!r}). Select the shared ones before building "
                    "the Panel, or build one Panel per run.")
