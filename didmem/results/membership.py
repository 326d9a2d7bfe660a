"""The result of a membership-inference estimator: its AUC per checkpoint and implied profile.

:class:`MembershipResult` is the :class:`~didmem.CellResult` that
:class:`~didmem.MembershipInferenceEstimator` returns, with what makes it a result of its own:
the membership AUC with its interval (:attr:`MembershipResult.auc`, per cohort
:attr:`MembershipResult.cell_auc`) in the summary, the report and a figure
(:func:`didmem.results.plotting.plot_membership_auc`), and a results file (``save``; read back
with :func:`didmem.load_result`). Its cells carry pointwise intervals and no covariance, so
it has no aggregation over cells (the AUC is its summary over the instances).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import pandas as pd

from ..errors import ParameterError
from .common import SIGN_NOTE, level_label
from ._table_file import TableFile
from .cells import CellResult

__all__ = ["MembershipResult", "AUC_COLUMNS"]

AUC_COLUMNS = ("auc", "std_error", "ci_lower", "ci_upper", "n_members", "n_nonmembers")
"""The columns of the AUC tables (after ``time``, or ``cohort, time``)."""


def _table_doc(frame: pd.DataFrame) -> str:
    """A small table as JSON (pandas' ``split`` orientation, floats round-tripped exactly)."""
    return frame.to_json(orient="split", index=False, double_precision=15)


def _table_from(doc: str) -> pd.DataFrame:
    return pd.read_json(io.StringIO(doc), orient="split", precise_float=True)


@dataclass(frozen=True, eq=False)
class MembershipResult(CellResult, TableFile):
    """A membership-inference score read as memorisation (see
    :class:`~didmem.MembershipInferenceEstimator`).

    Attributes
    ----------
    cells : pandas.DataFrame
        The score's implied profile: one row per (cohort, checkpoint), the mean score of the
        cohort minus that of the non-members, with Welch's standard error and a pointwise
        normal interval.
    extra : Mapping
        ``"auc"``: the membership AUC at each checkpoint (``time`` and the columns of
        :data:`AUC_COLUMNS`: DeLong's standard error, the interval of the estimator (see its Notes), the numbers of
        members and non-members); ``"cell_auc"``: the same per cohort (``cohort, time, ...``).
    units : pandas.DataFrame or None
        Each member's score minus the non-members' mean (a fitted result; a result read from
        a file holds none: refit for them).
    """

    FILE_KIND, FILE_WHAT = "membership", "membership-inference results"

    @property
    def auc(self) -> pd.DataFrame:
        """The membership AUC per checkpoint, a copy: ``time, auc, std_error, ci_lower,
        ci_upper, n_members, n_nonmembers``."""
        return self.extra["auc"].copy()

    @property
    def cell_auc(self) -> pd.DataFrame:
        """The AUC of each cohort against the non-members at each checkpoint, a copy."""
        return self.extra["cell_auc"].copy()

    def to_frame(self) -> pd.DataFrame:
        """The implied profile's cells, one row per (cohort, checkpoint), with ``post``
        (``c >= g``) as in a group-time result's table."""
        frame = self.cells.copy()
        frame.insert(3, "post", frame["time"] >= frame["cohort"])
        return frame

    def aggregate(self, aggregation: str = "simple", **options):
        """Refused: a membership-inference result has pointwise cells and no covariance."""
        raise ParameterError(
            f"A membership-inference result has no {aggregation!r} aggregation: its cells have "
            "pointwise intervals and no covariance between them. Its summary over instances "
            "is the membership AUC per checkpoint (result.auc); for aggregated memorisation "
            "with a band fit the panel with didmem.DiDEstimator.")

    def summary(self) -> str:
        """The estimator, its assumption, the AUC (at the last checkpoint, with its interval,
        and its range over checkpoints) and the implied profile's cells."""
        auc = self.extra["auc"]
        level = level_label(self.alpha)
        lines = [f"{self.estimator} on score {self.outcome!r} (members: "
                 f"{dict(self.params).get('members', 'trained')})",
                 f"  assumption: {self.assumption}"]
        rated = auc[auc["auc"].notna()]
        if rated.empty:
            lines.append("  membership AUC: none (no checkpoint has both members and "
                         "non-members)")
        else:
            last = rated.iloc[-1]
            lines.append(f"  membership AUC at checkpoint {last['time']:g}: {last['auc']:.3f} "
                         f"({level} CI [{last['ci_lower']:.3f}, {last['ci_upper']:.3f}], DeLong "
                         f"SE {last['std_error']:.3f}; {int(last['n_members'])} members, "
                         f"{int(last['n_nonmembers'])} non-members); 0.5 is chance")
            if len(rated) > 1:
                top = rated.loc[rated["auc"].idxmax()]
                lines.append(f"  over {len(rated)} checkpoints: AUC {rated['auc'].min():.3f} to "
                             f"{rated['auc'].max():.3f} (highest at checkpoint {top['time']:g}, "
                             f"{level} CI [{top['ci_lower']:.3f}, {top['ci_upper']:.3f}])")
            pre = _pre_treatment_auc(self)
            if pre:
                lines.append(pre)
        c = self.cells
        post = c[c["time"] >= c["cohort"]]
        lines.append(f"  implied profile: {len(c)} cells ({len(post)} post-treatment); "
                     f"significant post ({level} pointwise): {int(post['significant'].sum())}")
        if self.units is not None:
            lines.append(f"  instances: {self.units['unit'].nunique()} members")
        lines.append("  " + SIGN_NOTE)
        return "\n".join(lines)

    def plot(self, figure: str = "auc", **options):
        """Draw the AUC per checkpoint (``"auc"``, the default) or the implied profile
        (``"profile"``); returns the Axes."""
        from . import plotting

        if figure == "auc":
            return plotting.plot_membership_auc(self, **options)
        if figure == "profile":
            return plotting.plot_profile(self, **options)
        raise ParameterError(f"A membership-inference result draws the figures 'auc' and "
                             f"'profile'; got {figure!r}.")

    def __repr__(self) -> str:
        return (f"<MembershipResult {self.estimator} score={self.outcome!r}: "
                f"{len(self.cells)} cells, {len(self.extra['auc'])} checkpoints>")

    def _file_contents(self):
        return self.cells, {
            "estimator": self.estimator, "params": dict(self.params), "outcome": self.outcome,
            "assumption": self.assumption, "alpha": float(self.alpha),
            "auc": _table_doc(self.extra["auc"]), "cell_auc": _table_doc(self.extra["cell_auc"])}

    @classmethod
    def _from_file(cls, frame, settings: dict) -> "MembershipResult":
        extra = {name: _table_from(settings[name]) for name in ("auc", "cell_auc")}
        for table in extra.values():
            for column in table.columns:
                if column.startswith("n_"):
                    table[column] = table[column].astype("int64")
                else:
                    table[column] = table[column].astype("float64")
        alpha = float(settings["alpha"])
        if not 0 < alpha < 1 or math.isnan(alpha):
            raise ValueError(f"alpha {alpha!r} outside (0, 1)")
        return cls(estimator=settings["estimator"], params=settings["params"],
                   outcome=settings["outcome"], assumption=settings["assumption"],
                   cells=frame, units=None, extra=extra, alpha=alpha)


def _pre_treatment_auc(result: MembershipResult) -> str:
    """A line on the pre-treatment cohorts' AUC, which measures a shift between the splits."""
    cells = result.extra["cell_auc"]
    pre = cells[(cells["time"] < cells["cohort"]) & cells["auc"].notna()]
    if pre.empty:
        return ""
    worst = pre.loc[(pre["auc"] - 0.5).abs().idxmax()]
    return (f"  before training (c < g, {len(pre)} cells, truth 0.5): AUC "
            f"{pre['auc'].min():.3f} to {pre['auc'].max():.3f}; farthest from chance "
            f"cohort {worst['cohort']:g} at {worst['time']:g} ({level_label(result.alpha)} CI "
            f"[{worst['ci_lower']:.3f}, {worst['ci_upper']:.3f}]): an AUC away from 0.5 there "
            "is a shift between members and non-members, not memorisation")
