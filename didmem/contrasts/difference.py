"""The difference of two memorisation profiles, with paired inference.

:func:`compare_profiles` sets two fitted group-time results side by side on their common
(cohort, checkpoint) grid and gives the difference profile, its aggregations, standard
errors and a simultaneous band from the units' joint influence functions, and joint tests
that the profiles are equal (see :mod:`didmem.contrasts._joint`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from .._validation import Alpha, Boolean, Count, Satisfies, Seed, validate_params
from ..errors import EstimationError, ParameterError
from ..results.common import Estimate, level_label
from ..results.aggregations import KEY_NAMES, canonical_aggregation
from ._joint import Contrast, JointTest, contrast, overlap, pairing_of, standard_errors
from ._unit_influence import aggregation_influence, cell_influence, check_pairable

__all__ = ["compare_profiles", "ProfileDifference", "AggregateDifference"]

#: the aggregations a comparison reports by default (each result's own default options)
COMPARED_AGGREGATIONS = ("instantaneous", "persistent", "residual", "simple", "group",
                         "dynamic", "calendar")
TEST_CELLS = ("post", "all")


def _labels(value) -> bool:
    return (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, str) and v for v in value) and value[0] != value[1])


_CONSTRAINTS = {
    "labels": Satisfies(_labels, "two different non-empty names, e.g. ('1.4B', '410M')"),
    "alpha": Alpha(allow_none=True),
    "n_draws": Count(0),
    "seed": Seed(),
    "small_sample": Boolean(),
}


@validate_params(_CONSTRAINTS, owner="compare_profiles")
def compare_profiles(result_a, result_b, *, labels=("a", "b"), alpha=None, n_draws=999,
                     seed=0, small_sample=True) -> "ProfileDifference":
    r"""The difference of two memorisation profiles, paired on the instances they share.

    Parameters
    ----------
    result_a, result_b : GroupTimeResult
        Two fits of :class:`~didmem.DiDEstimator` (two models, runs, learning rates or data
        orders scored on the same instances, or two subgroups of instances). Units are
        matched by their identifiers.
    labels : tuple of str
        Names of the two results, for tables and sentences.
    alpha : float, optional
        One minus the coverage of intervals and bands (default: ``result_a``'s).
    n_draws : int
        Gaussian draws of the simultaneous band and the max-t test (0: pointwise intervals).
    seed : None, int or Generator
        Seed of the draws.
    small_sample : bool
        Welch's correction (the default, as :class:`~didmem.DiDEstimator`'s): each group of
        instances (a cohort's block in each result) contributes its plug-in variance times
        ``n_g / (n_g - 1)``, and each row's band multiplier is the t quantile with its
        Welch-Satterthwaite degrees of freedom at the sup-t value's pointwise level.
        False: ``sqrt(sum_i psi_i**2)`` and the normal-scale sup-t value (R's rule).

    Returns
    -------
    ProfileDifference

    Raises
    ------
    EstimationError
        A result that keeps no per-instance influence (read from a file, fitted from moments
        or with clusters), or two results with no cell in common or with different base
        periods on the cells they share.

    Notes
    -----
    The difference of cell ``(g, c)`` is ``tau_a(g, c) - tau_b(g, c)``; its influence on
    instance ``i`` is ``psi_a(i) - psi_b(i)``, with ``psi_r(i) = 0`` when ``i`` is not in
    result ``r``. Its variance ``sum_i (psi_a(i) - psi_b(i))**2`` is
    ``V_a + V_b - 2 sum_{i shared} psi_a(i) psi_b(i)``: pairing saves the covariance term
    when the two profiles are correlated through their shared instances (the same
    instance is hard or easy for both models), and with no instance shared it is
    ``V_a + V_b``. An aggregation's difference is that of each result's own aggregation
    (its own cohort weights, with R ``did``'s estimated-weights term), on the keys both
    have. Standard errors come from the influence functions, whatever inference each fit
    used (with ``small_sample``, Welch's correction by group of instances: the same numbers
    as each fit's own Welch standard errors when the instances are disjoint); the band is
    the sup-t band of the Gaussian multiplier bootstrap (Callaway & Sant'Anna 2021,
    section 4), drawn from its exact law given the data (Welch 1947 for the t margins).
    """
    for name, result in (("result_a", result_a), ("result_b", result_b)):
        check_pairable(result, name)
    alpha = float(result_a.alpha if alpha is None else alpha)
    rng = np.random.default_rng(seed)
    return ProfileDifference(result_a, result_b, tuple(labels), alpha, n_draws, rng,
                             small_sample)


def _cell_keys(result) -> pd.DataFrame:
    frame = result.to_frame()[["cohort", "time", "base_time", "event_time", "post"]]
    frame["index"] = np.arange(len(frame))
    frame["ref"] = np.asarray(result.cells.ref) != 0
    return frame


@dataclass(frozen=True, eq=False)
class AggregateDifference:
    """The difference of one aggregation of two profiles.

    Attributes
    ----------
    aggregation, key_name
        As :class:`~didmem.AggregateResult`'s (``key_name`` None for ``simple``).
    keys : ndarray
        The keys both results have.
    table : pandas.DataFrame
        One row per key: the key, ``estimate_a``, ``estimate_b``, ``difference``,
        ``std_error`` (paired), ``unpaired_std_error`` (``sqrt(se_a**2 + se_b**2)``, as if
        the instances were independent), ``ci_lower``, ``ci_upper`` (the simultaneous band
        over keys), ``significant``.
    overall : Estimate
        The difference of the overall values, with a pointwise interval.
    critical_value : float
        The band's multiplier.
    same_keys : bool
        Whether the two results have the same keys (otherwise the overall values average
        different keys).
    unpaired_overall_std_error : float
        The overall difference's standard error as if the instances were independent.
    """

    aggregation: str
    key_name: str | None
    keys: np.ndarray = field(repr=False)
    table: pd.DataFrame = field(repr=False)
    overall: Estimate = None
    critical_value: float = float("nan")
    same_keys: bool = True
    unpaired_overall_std_error: float = float("nan")
    alpha: float = 0.05
    contrast: Contrast = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def test(self, method: str = "max_t") -> JointTest:
        """Joint test that every key's difference is zero (``"max_t"``, the default, or
        ``"wald"``; see :meth:`ProfileDifference.test`)."""
        rows = np.arange(self.keys.size)
        if method == "wald":
            return self.contrast.wald(rows)
        if method == "max_t":
            return self.contrast.max_t(rows)
        raise ParameterError(f"The 'method' parameter of AggregateDifference.test must be one "
                             f"of {{'wald', 'max_t'}}. Got {method!r}.")


@dataclass(frozen=True, eq=False)
class ProfileDifference:
    """The difference ``a - b`` of two memorisation profiles (from :func:`compare_profiles`).

    Attributes
    ----------
    labels : tuple of str
    alpha : float
    pairing : {"paired", "partial", "independent"}
        Whether the results share all their instances, some, or none.
    n_shared, n_only_a, n_only_b : int
        Instances in both results, in ``a`` only, in ``b`` only.
    contrast
        The cells' joint inference (estimates, standard errors, covariance, draws).
    """

    result_a: object = field(repr=False)
    result_b: object = field(repr=False)
    labels: tuple
    alpha: float
    n_draws: int = field(repr=False)
    rng: object = field(repr=False)
    small_sample: bool = True

    @cached_property
    def _grid(self):
        a, b = _cell_keys(self.result_a), _cell_keys(self.result_b)
        both = a.merge(b, on=["cohort", "time"], suffixes=("_a", "_b"))
        if both.empty:
            raise EstimationError(
                f"{self.labels[0]!r} and {self.labels[1]!r} have no (cohort, checkpoint) cell "
                "in common; compare results fitted on the same checkpoints and cohorts.")
        base_a, base_b = both["base_time_a"].to_numpy(), both["base_time_b"].to_numpy()
        differ = ~((base_a == base_b) | (np.isnan(base_a) & np.isnan(base_b)))
        if differ.any():
            row = both[differ].iloc[0]
            raise EstimationError(
                f"The two results compare cell (cohort {row['cohort']:g}, time {row['time']:g}) "
                f"with different base periods ({row['base_time_a']:g} and "
                f"{row['base_time_b']:g}); fit both with the same base_period.")
        both = both[~(both["ref_a"] | both["ref_b"])].reset_index(drop=True)
        return both, len(a), len(b)

    @property
    def same_grid(self) -> bool:
        """Whether the two results have the same cells (otherwise only common ones are compared)."""
        both, n_a, n_b = self._grid
        n_ref = int(np.sum(np.asarray(self.result_a.cells.ref) != 0))
        return len(both) + n_ref == n_a == n_b

    @cached_property
    def _overlap(self):
        return overlap(self.result_a.prepared.unit_labels, self.result_b.prepared.unit_labels)

    @property
    def n_shared(self) -> int:
        return self._overlap[0]

    @property
    def n_only_a(self) -> int:
        return self._overlap[1]

    @property
    def n_only_b(self) -> int:
        return self._overlap[2]

    @property
    def pairing(self) -> str:
        shared, only_a, only_b = self._overlap
        return pairing_of(shared, shared + only_a, shared + only_b)

    @cached_property
    def _parts(self):
        both, _, _ = self._grid
        return (cell_influence(self.result_a, both["index_a"].to_numpy()),
                cell_influence(self.result_b, both["index_b"].to_numpy()))

    @cached_property
    def contrast(self) -> Contrast:
        return Contrast.of(contrast(list(self._parts), (1.0, -1.0)), alpha=self.alpha,
                           n_draws=self.n_draws, rng=self.rng, small_sample=self.small_sample)

    def to_frame(self) -> pd.DataFrame:
        """One row per common cell (reference cells left out): cohort, time, event_time,
        post, estimate_a, estimate_b, difference, std_error (paired), unpaired_std_error,
        ci_lower, ci_upper (the simultaneous band), significant."""
        both, _, _ = self._grid
        part_a, part_b = self._parts
        c = self.contrast
        lo, hi = c.interval()
        unpaired = np.hypot(standard_errors(part_a, self.small_sample)[0],
                            standard_errors(part_b, self.small_sample)[0])
        return pd.DataFrame({
            "cohort": both["cohort"].to_numpy(), "time": both["time"].to_numpy(),
            "event_time": both["event_time_a"].to_numpy(), "post": both["post_a"].to_numpy(),
            "estimate_a": part_a.estimates, "estimate_b": part_b.estimates,
            "difference": c.estimates, "std_error": c.std_errors,
            "unpaired_std_error": unpaired, "ci_lower": lo, "ci_upper": hi,
            "significant": (lo > 0) | (hi < 0)})

    def profile(self, value: str = "difference") -> pd.DataFrame:
        """The cohort x time matrix of one column of :meth:`to_frame`."""
        frame = self.to_frame()
        if value not in frame.columns:
            raise ParameterError(f"Unknown column {value!r}; choose from {list(frame.columns)}.")
        return frame.pivot(index="cohort", columns="time", values=value)

    def test(self, method: str = "max_t", cells: str = "post") -> JointTest:
        """Joint test that the two profiles are equal on the common cells.

        ``method``: ``"max_t"`` (the default: the largest studentised difference against
        the Gaussian draws' maxima; size 0.058 (0.012) at 5% in the Monte Carlo of
        ``benchmarks/contrasts_mc.py``) or ``"wald"`` (chi-squared with the covariance's
        rank; it over-rejects when the cells are many against the instances: 0.090 (0.014)
        there, with 12 post cells and 60 instances per cohort). ``cells``: ``"post"``
        (post-treatment cells, the memorisation profile) or ``"all"``.
        """
        if cells not in TEST_CELLS:
            raise ParameterError(f"The 'cells' parameter of ProfileDifference.test must be one "
                                 f"of {set(TEST_CELLS)}. Got {cells!r}.")
        both, _, _ = self._grid
        rows = np.flatnonzero(both["post_a"].to_numpy()) if cells == "post" else None
        if method == "wald":
            return self.contrast.wald(rows)
        if method == "max_t":
            return self.contrast.max_t(rows)
        raise ParameterError(f"The 'method' parameter of ProfileDifference.test must be one of "
                             f"{{'wald', 'max_t'}}. Got {method!r}.")

    def aggregate(self, aggregation: str = "simple") -> AggregateDifference:
        """The difference of one aggregation (each result's, with default options)."""
        return _aggregate_difference(self, canonical_aggregation(aggregation))

    def sentence(self, aggregation: str = "instantaneous") -> str:
        """The comparison in words, e.g. "a's instantaneous memorisation is larger than b's by
        0.12 (95% CI [0.05, 0.19]); the band excludes zero in 3 of 4 cohorts"."""
        agg = self.aggregate(aggregation)
        o = agg.overall
        a, b = self.labels
        name = {"simple": "overall"}.get(agg.aggregation, agg.aggregation)
        if not np.isfinite(o.estimate):
            return f"{a} and {b}: the {name} difference is not defined."
        word = "larger" if o.estimate > 0 else "smaller"
        text = (f"{a}'s {name} memorisation is {word} than {b}'s by {abs(o.estimate):.3g} "
                f"({level_label(self.alpha)} CI [{o.ci_lower:.3g}, {o.ci_upper:.3g}]"
                f"{'' if o.significant else ', not significant'})")
        if agg.key_name is not None:
            sig = agg.table["significant"].to_numpy()
            keys = {"cohort": "cohorts", "event_time": "event times", "time": "checkpoints"}
            text += (f"; the band excludes zero in {int(sig.sum())} of {sig.size} "
                     f"{keys[agg.key_name]}")
        note = {"paired": "paired on all instances", "independent": "no instance shared: "
                "independent", "partial": f"paired on {self.n_shared} shared instances"}
        return text + f" ({note[self.pairing]})."

    def plot(self, aggregation: str = "instantaneous", **options):
        """The difference of an aggregation by key with its band
        (:func:`didmem.results.plotting.plot_difference`); returns the Axes."""
        from ..results.plotting import plot_difference

        return plot_difference(self, aggregation, **options)

    def summary(self) -> str:
        a, b = self.labels
        frame = self.to_frame()
        post = frame[frame["post"]]
        lines = [f"Difference of memorisation profiles: {a} - {b}",
                 f"  instances: {self.n_shared} shared, {self.n_only_a} in {a} only, "
                 f"{self.n_only_b} in {b} only ({self.pairing})",
                 f"  cells compared: {len(frame)} ({len(post)} post-treatment)"
                 + ("" if self.same_grid else "; the results' grids differ: common cells only"),
                 f"  simultaneous {level_label(self.alpha)} band, critical value "
                 f"{self.contrast.critical_value:.3f}; significant post cells: "
                 f"{int(post['significant'].sum())}",
                 "  equal profiles (post cells): " + self.test("wald").describe() + "; "
                 + self.test("max_t").describe()]
        for name in ("instantaneous", "persistent", "residual", "simple"):
            try:
                lines.append("  " + self.sentence(name))
            except EstimationError as exc:
                lines.append(f"  {name}: {exc}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<ProfileDifference {self.labels[0]} - {self.labels[1]}: {self.pairing}, "
                f"{self.n_shared} shared instances>")


def _aggregate_difference(diff: ProfileDifference, aggregation: str) -> AggregateDifference:
    spec_a, part_a = aggregation_influence(diff.result_a, aggregation)
    spec_b, part_b = aggregation_influence(diff.result_b, aggregation)
    keys_a, keys_b = spec_a.keys, spec_b.keys
    keys = np.intersect1d(keys_a, keys_b)
    rows_a = np.append(np.searchsorted(keys_a, keys), keys_a.size)
    rows_b = np.append(np.searchsorted(keys_b, keys), keys_b.size)
    sub = [part_a.rows(rows_a), part_b.rows(rows_b)]
    c = Contrast.of(contrast(sub, (1.0, -1.0)), alpha=diff.alpha, n_draws=diff.n_draws,
                    rng=diff.rng, band_rows=np.arange(keys.size),
                    small_sample=diff.small_sample)
    lo, hi = c.interval()  # the overall row's is pointwise
    o_lo, o_hi = lo[-1], hi[-1]
    unpaired = np.hypot(standard_errors(sub[0], diff.small_sample)[0],
                        standard_errors(sub[1], diff.small_sample)[0])
    key_name = KEY_NAMES[aggregation]
    table = pd.DataFrame({"estimate_a": sub[0].estimates[:-1], "estimate_b": sub[1].estimates[:-1],
                          "difference": c.estimates[:-1], "std_error": c.std_errors[:-1],
                          "unpaired_std_error": unpaired[:-1], "ci_lower": lo[:-1],
                          "ci_upper": hi[:-1]})
    table["significant"] = (table["ci_lower"] > 0) | (table["ci_upper"] < 0)
    if key_name is not None:
        table.insert(0, key_name, keys)
    else:
        table = pd.DataFrame({"estimate_a": sub[0].estimates[-1:], "estimate_b": sub[1].estimates[-1:],
                              "difference": c.estimates[-1:], "std_error": c.std_errors[-1:],
                              "unpaired_std_error": unpaired[-1:], "ci_lower": [o_lo],
                              "ci_upper": [o_hi], "significant": [bool(o_lo > 0 or o_hi < 0)]})
    same = keys.size == keys_a.size == keys_b.size
    return AggregateDifference(
        aggregation=aggregation, key_name=key_name, keys=keys, table=table,
        overall=Estimate(float(c.estimates[-1]), float(c.std_errors[-1]), float(o_lo), float(o_hi)),
        critical_value=c.critical_value, same_keys=same,
        unpaired_overall_std_error=float(unpaired[-1]), alpha=diff.alpha, contrast=c)
