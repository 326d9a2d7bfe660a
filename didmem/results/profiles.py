"""Comparing memorisation profiles across models: the correlation of the paper's Figure 6."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ..errors import ParameterError

__all__ = ["profile_correlation"]


def _named(results) -> dict:
    if len(results) == 1 and isinstance(results[0], Mapping):
        named = dict(results[0])
    else:
        named = {}
        for i, res in enumerate(results):
            name = getattr(res, "name", None) or f"{res.estimator}:{res.outcome}"
            if name in named:
                name = f"{name} #{i + 1}"
            named[name] = res
    if len(named) < 2:
        raise ParameterError(
            f"profile_correlation needs at least two results to compare; got {len(named)}."
        )
    return named


def profile_correlation(*results, value: str = "estimate", post_only: bool = True,
                        method: str = "pearson") -> pd.DataFrame:
    """Correlation of memorisation profiles across models, on the cells they share.

    Parameters
    ----------
    *results : GroupTimeResult or mapping
        Two or more fitted (or loaded) results, or one mapping ``{name: result}``. Without
        names, a result is named ``"estimator:outcome"`` (its ``name`` attribute when it has
        one).
    value : str
        The column of :meth:`GroupTimeResult.to_frame` to correlate.
    post_only : bool
        Only post-treatment cells (c >= g), as in the paper; pre-treatment cells measure
        pre-trends, not memorisation.
    method : {"pearson", "spearman", "kendall"}

    Returns
    -------
    pandas.DataFrame
        The symmetric correlation matrix, rows and columns named after the results;
        ``attrs["n_cells"]`` holds the number of shared cells it was computed on.

    Notes
    -----
    Models trained on the same data order share the (cohort, checkpoint) grid; the
    correlation is computed over the inner join of the cells, the paper's Figure 6.
    """
    if method not in ("pearson", "spearman", "kendall"):
        raise ParameterError(
            f"The 'method' parameter of profile_correlation must be one of "
            f"{{'pearson', 'spearman', 'kendall'}}. Got {method!r}."
        )
    named = _named(results)
    columns = {}
    for name, res in named.items():
        frame = res.to_frame()
        if value not in frame.columns:
            raise ParameterError(f"Unknown column {value!r}; choose from {list(frame.columns)}.")
        if post_only:  # a CellResult's table has no "post" column: c >= g says it
            frame = frame[frame["post"] if "post" in frame else frame["time"] >= frame["cohort"]]
        columns[name] = frame.set_index(["cohort", "time"])[value]
    table = pd.concat(columns, axis=1, join="inner").dropna()
    if len(table) < 2:
        raise ParameterError(
            f"The results share {len(table)} cells; a correlation needs at least 2. "
            "Were they fitted on the same checkpoints and cohorts?"
        )
    corr = table.corr(method=method)
    corr.attrs["n_cells"] = int(len(table))
    return corr
