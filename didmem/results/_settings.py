"""The resolved settings of a group-time result: the same for a fitted result and its saved copy.

What the summary and the report read of a result besides its cells, aggregations and
pre-tests (the inference in words, the multiplier law the bootstrap drew, the small-sample
correction, the cohorts' weights in averages over cohorts) is gathered here as plain values.
A fitted result computes them from its inference and prepared panel
(:meth:`ResultSettings.of_fit`); a results file keeps them (:meth:`ResultSettings.to_doc`),
so a :class:`~didmem.results.saving.SavedResult` answers with the same values, not with a
string standing where the fitted result has an object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

__all__ = ["ResultSettings"]


@dataclass(frozen=True)
class ResultSettings:
    """The settings a fit resolved (see the module notes).

    Attributes
    ----------
    inference_line : str
        The inference in words: the standard errors, the bootstrap's draws and the band
        (the summary's ``inference:`` line).
    std_error_note : str
        Which standard error the cells' ``std_error`` column holds.
    multiplier : str or None
        The multiplier law the bootstrap drew (``"normal"``, ``"rademacher"``,
        ``"mammen"``), the default resolved; None for analytic inference.
    n_bootstrap : int
        Bootstrap draws (0 for analytic inference).
    correction_name : str or None
        ``"welch"`` under the small-sample correction (Welch variances, t critical values),
        None under R did's rule.
    cohort_shares : Mapping[float, float]
        Each treated cohort's weight in averages over cohorts (R did's ``pg``: its share
        of the sampling-weighted units, or of the observations of repeated cross-sections);
        empty when not known (a results file of format 1 or 2).
    n_clusters : int
        Clusters of the cluster bootstrap (0 when not clustered).
    source : str
        Where the fit's data came from and by which route, in words ("a parquet folder's
        moments, read on Ray", ...): the fit sets ``source`` on its prepared data
        (``prepared.source``); empty where it does not say (a panel in memory, and results
        files written before it was kept).
    """

    inference_line: str
    std_error_note: str
    multiplier: str | None
    n_bootstrap: int
    correction_name: str | None
    cohort_shares: Mapping[float, float]
    n_clusters: int
    source: str = ""

    def __post_init__(self):
        shares = {float(g): float(w) for g, w in dict(self.cohort_shares).items()}
        object.__setattr__(self, "cohort_shares", MappingProxyType(shares))

    def __reduce__(self):  # a MappingProxyType does not pickle: rebuild from a dict
        return (_rebuild, (self.to_doc(),))

    @classmethod
    def of_fit(cls, result) -> "ResultSettings":
        """The settings of a fitted :class:`~didmem.results.cells.GroupTimeResult`."""
        inference, prepared = result.inference, result.prepared
        return cls(
            inference_line=result._inference_line(),
            std_error_note=inference.std_error_note(),
            multiplier=inference.multiplier,
            n_bootstrap=int(inference.n_bootstrap),
            correction_name=None if inference.correction is None else "welch",
            cohort_shares=dict(zip(prepared.cohorts.tolist(),
                                   prepared.cohort_shares.tolist())) if prepared.n_units else {},
            n_clusters=int(prepared.n_clusters or 0),
            source=str(getattr(prepared, "source", "") or ""),
        )

    @classmethod
    def of_old_file(cls, inference_line: str) -> "ResultSettings":
        """What a results file of format 1 or 2 kept: the inference line alone (the rest is
        unknown: no multiplier named, no correction named, no cohort shares)."""
        return cls(inference_line=inference_line, std_error_note="", multiplier=None,
                   n_bootstrap=0, correction_name=None, cohort_shares={}, n_clusters=0)

    def to_doc(self) -> dict:
        """The settings as JSON-able values (cohort shares as ``[cohort, share]`` pairs)."""
        return {"inference_line": self.inference_line, "std_error_note": self.std_error_note,
                "multiplier": self.multiplier, "n_bootstrap": int(self.n_bootstrap),
                "correction_name": self.correction_name,
                "cohort_shares": [[g, w] for g, w in self.cohort_shares.items()],
                "n_clusters": int(self.n_clusters), "source": self.source}

    @classmethod
    def from_doc(cls, doc: Mapping) -> "ResultSettings":
        """The settings of :meth:`to_doc` (a KeyError or a TypeError when malformed: the
        reader of the file names it)."""
        shares = {}
        for g, w in doc["cohort_shares"]:
            shares[float(g)] = math.nan if w is None else float(w)
        return cls(inference_line=str(doc["inference_line"]),
                   std_error_note=str(doc["std_error_note"]), multiplier=doc["multiplier"],
                   n_bootstrap=int(doc["n_bootstrap"]), correction_name=doc["correction_name"],
                   cohort_shares=shares, n_clusters=int(doc["n_clusters"]),
                   source=str(doc.get("source", "")))


def _rebuild(doc: dict) -> ResultSettings:
    return ResultSettings.from_doc(doc)
