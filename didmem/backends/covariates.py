"""Instance covariates for conditional parallel trends.

Training and validation instances may differ in length, domain or token rarity, and their
scores need not move in parallel unless such differences are held fixed. These helpers
compute the covariates from the instances themselves and attach them to a scored panel, so
that ``didmem.Panel(..., covariates=[...])`` and ``DiDEstimator(est_method="dr")`` can use
them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._messages import listing
from ..errors import InstanceError
from ._instances import Instances

__all__ = ["instance_covariates", "add_instance_covariates"]


def instance_covariates(token_ids, unit_ids=None, *, domains=None,
                        domain_dummies: bool = True) -> pd.DataFrame:
    """Length, token rarity and (optionally) domain of every instance.

    Parameters
    ----------
    token_ids : 2-D array_like of int or sequence of 1-D arrays
        The instances' token ids, as given to a backend's ``score``.
    unit_ids : array_like, optional
        One id per instance (default ``0 .. n-1``).
    domains : array_like or mapping, optional
        A domain or source label per instance (aligned with ``token_ids``), or a mapping from
        unit id to label.
    domain_dummies : bool
        Add one 0/1 column ``domain[<label>]`` per label but the most frequent one (the
        reference level), ready to use as numeric covariates.

    Returns
    -------
    pandas.DataFrame
        One row per instance: ``unit``, ``length`` (tokens), ``mean_log_unigram_freq`` (the
        mean over the instance's tokens of ``log(count / total)``, counts taken over all
        the given instances), and ``domain`` plus its dummies when ``domains`` is given.

    Examples
    --------
    >>> from didmem.backends import instance_covariates
    >>> instance_covariates([[1, 2, 2], [2, 3]], unit_ids=["a", "b"])[["unit", "length"]]
      unit  length
    0    a       3
    1    b       2
    """
    instances = Instances(token_ids, unit_ids)
    seqs = instances.token_ids
    lengths = np.array([s.size for s in seqs], dtype=np.int64)
    flat = np.concatenate(seqs).astype(np.int64)
    if flat.size == 0:
        raise InstanceError("Every instance is empty: no tokens to count.")
    if flat.min() < 0:
        raise InstanceError(f"Token ids must be non-negative; found {int(flat.min())}.")
    counts = np.bincount(flat)
    owner = np.repeat(np.arange(len(seqs)), lengths)
    sums = np.bincount(owner, weights=np.log(counts[flat] / flat.size), minlength=len(seqs))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_log = np.where(lengths > 0, sums / lengths, np.nan)
    frame = pd.DataFrame({"unit": instances.units, "length": lengths,
                          "mean_log_unigram_freq": mean_log})
    if domains is not None:
        frame["domain"] = _domain_labels(domains, instances.units)
        if domain_dummies:
            levels = frame["domain"].value_counts().index  # most frequent first
            for label in sorted(levels[1:], key=str):
                frame[f"domain[{label}]"] = (frame["domain"] == label).astype(np.float64)
    return frame


def _domain_labels(domains, units) -> np.ndarray:
    if isinstance(domains, dict):
        missing = [u for u in units.tolist() if u not in domains]
        if missing:
            raise InstanceError(f"No domain label for {len(missing)} units: {listing(missing)}.")
        return np.array([domains[u] for u in units.tolist()], dtype=object)
    labels = np.asarray(domains, dtype=object)
    if labels.shape != (units.size,):
        raise InstanceError(
            f"domains must give one label per instance ({units.size}); got shape {labels.shape}."
        )
    return labels


def add_instance_covariates(frame: pd.DataFrame, covariates: pd.DataFrame,
                            unit: str = "unit") -> pd.DataFrame:
    """Attach time-invariant instance covariates to a long scored panel.

    Every unit of ``frame`` must have a row in ``covariates``; the result has the same rows
    as ``frame`` in the same order.
    """
    if unit not in frame.columns or "unit" not in covariates.columns:
        raise InstanceError(f"Both tables need a unit column ({unit!r} and 'unit').")
    table = covariates.rename(columns={"unit": unit})
    clash = (set(table.columns) - {unit}) & set(frame.columns)
    if clash:
        raise InstanceError(f"Columns {sorted(clash)} are in both tables.")
    missing = pd.Index(frame[unit].unique()).difference(table[unit])
    if len(missing):
        raise InstanceError(
            f"{len(missing)} units of the panel have no covariates, e.g. {listing(missing)}."
        )
    return frame.merge(table, on=unit, how="left", validate="many_to_one")
