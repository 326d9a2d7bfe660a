"""Memorisation profiles by a categorical instance feature, and whether they differ.

:func:`heterogeneity` fits one profile per subgroup of instances (each subgroup with its own
never-treated controls: the feature is an instance feature, so validation instances have it
too), sets them on their common grid, gives the pairwise differences
(:class:`~didmem.contrasts.difference.ProfileDifference`, independent because the subgroups
share no instance) and joint tests that memorisation is equal across subgroups, per cell,
per aggregation key and over all post-treatment cells.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping

import numpy as np
import pandas as pd
from scipy.special import chdtrc

from .._validation import Alpha, Boolean, Count, Instance, Satisfies, Seed, validate_params
from ..errors import EstimationError, PanelError, ParameterError
from ..results.aggregations import KEY_NAMES, canonical_aggregation
from ._joint import Contrast, contrast, standard_errors
from ._unit_influence import UnitInfluence, aggregation_influence, cell_influence
from .difference import ProfileDifference, compare_profiles

__all__ = ["heterogeneity", "Heterogeneity", "unit_feature", "subpanel"]


def _feature_like(value) -> bool:
    return isinstance(value, (str, pd.Series, Mapping))


#: An instance feature, as ``heterogeneity``'s ``by`` and ``moderator_slopes``' ``moderator``.
FEATURE = Satisfies(_feature_like, "a pandas Series indexed by unit, a mapping from unit to "
                    "value, or the name of a covariate of the panel that is constant within "
                    "each unit")
#: The fit and inference arguments that the contrasts of instance features share.
INFERENCE_CONSTRAINTS = {
    "estimator": Instance("didmem.estimators.did:DiDEstimator", allow_none=True),
    "alpha": Alpha(allow_none=True),
    "n_draws": Count(0),
    "seed": Seed(),
    "small_sample": Boolean(),
}
_CONSTRAINTS = {"by": FEATURE, **INFERENCE_CONSTRAINTS}


def unit_feature(panel, by, owner: str = "heterogeneity") -> pd.Series:
    """The feature's value of every unit of ``panel`` (a Series indexed by ``panel.units``).

    Refuses a unit without a value (naming up to three), and a covariate that varies within
    a unit.
    """
    if isinstance(by, str):
        if by not in panel.covariates:
            raise ParameterError(
                f"{owner}: by={by!r} is not a covariate of the panel (its covariates: "
                f"{list(panel.covariates)}); pass a Series indexed by unit instead.")
        frame = panel.to_frame()
        spread = frame.groupby("unit")[by].nunique()
        if (spread > 1).any():
            raise PanelError(f"{owner}: covariate {by!r} varies within unit "
                             f"{spread.index[spread > 1][0]!r}; an instance feature is constant "
                             "within a unit.")
        values = frame.groupby("unit")[by].first()
        values.name = by
    else:
        values = pd.Series(by) if not isinstance(by, pd.Series) else by
        if values.index.has_duplicates:
            raise ParameterError(f"{owner}: the feature gives unit "
                                 f"{values.index[values.index.duplicated()][0]!r} twice.")
    values = values.reindex(pd.Index(panel.units))
    missing = values.isna()
    if missing.any():
        units = list(values.index[missing][:3])
        raise PanelError(f"{owner}: {int(missing.sum())} units have no value of the feature"
                         f"{feature_label(values.name)}, e.g. {units} (or a NaN value); give "
                         "every instance a value.")
    return values


def feature_label(name) -> str:
    """How messages name a feature: `` 'length'``, or nothing for an unnamed Series."""
    return "" if name is None else f" {name!r}"


def subpanel(panel, units, drop=()):
    """The panel of ``units`` only (same columns and settings, less the covariates ``drop``),
    built through the public :class:`~didmem.Panel` constructor so that it is checked as any
    panel."""
    from ..panel import Panel

    if panel.run_column is not None:
        raise PanelError("heterogeneity takes a single-run panel; fit each run's panel "
                         "(panel.run_panel(run)) or use RunsEstimator.")
    frame = panel.to_frame()
    frame = frame[frame["unit"].isin(pd.Index(units))]
    cohorts = ["cohort"] + [f"cohort_{k + 1}" for k in range(1, panel.exposure_cohorts.shape[1])]
    return Panel(frame, unit="unit", time="time",
                 cohort=cohorts if len(cohorts) > 1 else "cohort",
                 outcome=list(panel.outcomes),
                 weights="weights" if panel.has_weights else None,
                 cluster="cluster" if panel.clusters is not None else None,
                 covariates=[c for c in panel.covariates if c not in drop] or None,
                 balance="error" if panel.layout == "balanced" else "keep")


@validate_params(_CONSTRAINTS, owner="heterogeneity")
def heterogeneity(panel, by, *, estimator=None, alpha=None, n_draws=999,
                  seed=0, small_sample=True) -> "Heterogeneity":
    r"""Memorisation profiles by a categorical instance feature, and tests of their equality.

    Parameters
    ----------
    panel : Panel
        A single-run panel.
    by : str, pandas.Series or mapping
        The feature: a Series (or mapping) from unit to value, or the name of a covariate of
        the panel constant within each unit. Every unit needs a value, validation
        (never-treated) instances included.
    estimator : DiDEstimator, optional
        The estimator fitted on each subgroup (default ``DiDEstimator()``).
    alpha : float, optional
        One minus the coverage of bands (default: the estimator's).
    n_draws : int
        Gaussian draws of the simultaneous bands and max-t tests.
    seed : None, int or Generator
    small_sample : bool
        Welch's correction of the differences and tests (see
        :func:`~didmem.compare_profiles`).

    Returns
    -------
    Heterogeneity

    Notes
    -----
    Design: each subgroup's profile uses the subgroup's own controls (never-treated, or
    not yet treated, of that subgroup), so parallel trends need only hold within
    subgroups, and the subgroup profiles share no instance: given the design they are
    independent and the variance of a difference is the sum of the two variances. The
    equality test of a cell (or aggregation key) is the Wald test of the ``S - 1``
    differences from the first subgroup, chi-squared with ``S - 1`` degrees of freedom
    (the covariance from the stacked influence functions); over all post-treatment cells
    both the Wald and the max-t test are given.
    """
    from ..estimators import DiDEstimator

    estimator = DiDEstimator() if estimator is None else estimator
    values = unit_feature(panel, by)
    groups = pd.unique(values)
    try:
        groups = np.sort(groups)
    except TypeError:
        pass
    if groups.size < 2:
        raise ParameterError(f"heterogeneity: the feature{feature_label(values.name)} takes one "
                             f"value ({groups[0]!r}); subgroups need at least two.")
    results = {}
    for group in groups:
        units = values.index[values.to_numpy() == group]
        try:
            # a feature given as a covariate is constant within its subgroup: not a covariate there
            drop = (by,) if isinstance(by, str) else ()
            results[group] = estimator.fit(subpanel(panel, units, drop))
        except (EstimationError, PanelError) as exc:
            raise type(exc)(f"heterogeneity: subgroup {values.name or 'by'}={group!r} "
                            f"({units.size} units): {exc}") from exc
    first = next(iter(results.values()))
    alpha = float(first.alpha if alpha is None else alpha)
    return Heterogeneity(feature=values.name, results=results, alpha=alpha, n_draws=n_draws,
                         seed=seed, small_sample=small_sample)


def _from_first(parts) -> list:
    """Each subgroup's difference from the first, all on the union of every subgroup's
    units (so that they stack unit by unit)."""
    out = []
    for s in range(1, len(parts)):
        coefficients = np.zeros(len(parts))
        coefficients[0], coefficients[s] = -1.0, 1.0
        out.append(contrast(parts, coefficients))
    return out


@dataclass(frozen=True, eq=False)
class Heterogeneity:
    """Profiles by subgroup (from :func:`heterogeneity`).

    Attributes
    ----------
    feature : str
    results : dict
        Subgroup value -> its fitted :class:`~didmem.GroupTimeResult`.
    alpha : float
    """

    feature: object
    results: Mapping = field(repr=False)
    alpha: float
    n_draws: int = field(default=999, repr=False)
    seed: object = field(default=0, repr=False)
    small_sample: bool = field(default=True, repr=False)

    @property
    def groups(self) -> list:
        return list(self.results)

    def profiles(self) -> pd.DataFrame:
        """Every subgroup's cells, long: ``group`` then the columns of ``to_frame``."""
        return pd.concat([r.to_frame().assign(group=g) for g, r in self.results.items()],
                         ignore_index=True).loc[:, lambda f: ["group"] + list(f.columns[:-1])]

    def difference(self, a, b) -> ProfileDifference:
        """The difference ``a - b`` of two subgroups' profiles, with its simultaneous band."""
        for g in (a, b):
            if g not in self.results:
                raise ParameterError(f"{g!r} is not a subgroup of {self.feature!r}; they are "
                                     f"{self.groups}.")
        return compare_profiles(self.results[a], self.results[b], labels=(str(a), str(b)),
                                alpha=self.alpha, n_draws=self.n_draws, seed=self.seed,
                                small_sample=self.small_sample)

    def differences(self) -> dict:
        """Every pairwise difference ``(a, b) -> ProfileDifference`` (``a`` before ``b``)."""
        return {(a, b): self.difference(a, b)
                for a, b in itertools.combinations(self.groups, 2)}

    @cached_property
    def _cells(self):
        """The common non-reference cells: per subgroup, indices into its cells."""
        frames = []
        for g, r in self.results.items():
            f = r.to_frame()[["cohort", "time", "event_time", "post"]]
            f[f"index_{len(frames)}"] = np.arange(len(f))
            frames.append(f[np.asarray(r.cells.ref) == 0])
        grid = frames[0]
        for k, f in enumerate(frames[1:], start=1):
            grid = grid.merge(f[["cohort", "time", f"index_{k}"]], on=["cohort", "time"])
        if grid.empty:
            raise EstimationError(f"The subgroups of {self.feature!r} have no cell in common.")
        return grid.reset_index(drop=True)

    def equality(self, aggregation: str | None = None) -> pd.DataFrame:
        """Tests that memorisation is equal across subgroups, per cell or per key.

        ``aggregation`` None: one row per common cell; otherwise one row per key the
        subgroups share and a last row for the overall value (key NaN). Columns: the cell or
        key, each subgroup's estimate, ``statistic`` (Wald, ``S - 1`` degrees of freedom),
        ``df``, ``pvalue``.
        """
        parts, labels = self._parts(aggregation)
        stacked = _from_first(parts)
        d = np.stack([s.estimates for s in stacked])  # (S-1, R)
        psi = np.stack([s.psi for s in stacked], axis=1)  # (n, S-1, R)
        cov = np.einsum("isr,itr->rst", psi, psi)
        raw = np.sqrt(np.einsum("rss->rs", cov)).T  # (S-1, R)
        corrected = np.stack([standard_errors(x, self.small_sample)[0] for x in stacked])
        factor = np.where(raw > 0, corrected / np.where(raw > 0, raw, 1.0), 1.0).T  # (R, S-1)
        cov = cov * factor[:, :, None] * factor[:, None, :]
        stat = np.full(d.shape[1], np.nan)
        df = np.zeros(d.shape[1], dtype=int)
        for r in range(d.shape[1]):
            values, vectors = np.linalg.eigh(cov[r])
            keep = values > max(values.max(), 0) * 1e-10
            if keep.any() and np.all(np.isfinite(d[:, r])):
                z = vectors[:, keep].T @ d[:, r]
                stat[r], df[r] = float(np.sum(z * z / values[keep])), int(keep.sum())
        out = labels.copy()
        for g, p in zip(self.groups, parts):
            out[f"estimate_{g}"] = p.estimates
        out["statistic"], out["df"] = stat, df
        out["pvalue"] = np.where(df > 0, chdtrc(np.maximum(df, 1), np.nan_to_num(stat)), np.nan)
        return out

    def joint_test(self, method: str = "max_t", aggregation: str | None = None):
        """One test that memorisation is equal across subgroups on all post-treatment cells
        (``aggregation`` None) or all keys of an aggregation and its overall value."""
        parts, labels = self._parts(aggregation)
        rows = (np.flatnonzero(labels["post"].to_numpy()) if aggregation is None
                else np.arange(len(labels)))
        stacked = _from_first(parts)
        joint = UnitInfluence(stacked[0].units,
                              np.concatenate([s.psi[:, rows] for s in stacked], axis=1),
                              np.concatenate([s.estimates[rows] for s in stacked]),
                              stacked[0].groups)
        c = Contrast.of(joint, alpha=self.alpha, n_draws=self.n_draws,
                        rng=np.random.default_rng(self.seed), small_sample=self.small_sample)
        if method == "wald":
            return c.wald()
        if method == "max_t":
            return c.max_t()
        raise ParameterError(f"The 'method' parameter of Heterogeneity.joint_test must be one "
                             f"of {{'wald', 'max_t'}}. Got {method!r}.")

    def _parts(self, aggregation):
        """Each subgroup's influence on the common cells (or keys + overall), and their labels."""
        if aggregation is None:
            grid = self._cells
            parts = [cell_influence(r, grid[f"index_{k}"].to_numpy())
                     for k, r in enumerate(self.results.values())]
            return parts, grid[["cohort", "time", "event_time", "post"]].copy()
        aggregation = canonical_aggregation(aggregation)
        specs = [aggregation_influence(r, aggregation) for r in self.results.values()]
        keys = specs[0][0].keys
        for spec, _ in specs[1:]:
            keys = np.intersect1d(keys, spec.keys)
        parts = []
        for spec, part in specs:
            rows = np.append(np.searchsorted(spec.keys, keys), spec.keys.size)
            parts.append(part.rows(rows))
        name = KEY_NAMES[aggregation] or "key"
        return parts, pd.DataFrame({name: np.append(keys, np.nan)})

    def summary(self) -> str:
        sizes = ", ".join(f"{g}: {r.n_units}" for g, r in self.results.items())
        lines = [f"Memorisation by {self.feature!r}: {len(self.results)} subgroups "
                 f"(instances {sizes}), each with its own controls",
                 "  equal on all post-treatment cells: " + self.joint_test("wald").describe()
                 + "; " + self.joint_test("max_t").describe()]
        for name in ("instantaneous", "persistent", "residual", "simple"):
            try:
                row = self.equality(name).iloc[-1]
                lines.append(f"  {name} (overall) equal: Wald {row['statistic']:.4g}, "
                             f"df {int(row['df'])}, p = {row['pvalue']:.4g}")
            except EstimationError as exc:
                lines.append(f"  {name}: {exc}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Heterogeneity by {self.feature!r}: {len(self.results)} subgroups>"
