"""The result of a pre-test of parallel trends, in a module that imports neither scipy nor
numba (a saved result reads it back without loading them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PretrendTest"]


@dataclass(frozen=True)
class PretrendTest:
    """A pre-test of parallel trends.

    Attributes
    ----------
    method : {"event", "max_t", "wald"}
        ``"event"``: Wald test of the event-time averages of the pre-treatment cells;
        ``"max_t"``: largest studentised pre-treatment cell against the multiplier bootstrap;
        ``"wald"``: R did's Wald test of all pre-treatment cells.
    statistic : float
        The Wald statistic, or for ``max_t`` the largest ``|t|`` (on the normal scale when
        the cells have t degrees of freedom).
    pvalue : float
    df : float or None
        Restrictions of a Wald test (numerator degrees of freedom); None for ``max_t``.
    df_denominator : float or None
        The F reference's denominator degrees of freedom (small-sample event test).
    n_restrictions : int
        Pre-treatment cells (``max_t``, ``wald``) or event times (``event``) tested.
    power : float or None
        Power at level ``power_alpha`` against ``drift`` (see :func:`linear_drift`), where
        known in closed form.
    drift : float or None
        The pre-trend per period behind ``power``: a quarter of the median standard error of
        a pre-treatment cell.
    note : str
        Why the test is missing when ``statistic`` is NaN.
    power_alpha : float
        The level of the test behind ``power`` (the fit's ``alpha``).
    """

    method: str
    statistic: float
    pvalue: float
    df: float | None = None
    df_denominator: float | None = None
    n_restrictions: int = 0
    power: float | None = None
    drift: float | None = None
    note: str = ""
    power_alpha: float = 0.05

    def rejects(self, alpha: float = 0.05) -> bool:
        """True when the p-value is below ``alpha``."""
        return bool(self.pvalue < alpha)

    def describe(self) -> str:
        """One line for summaries and reports."""
        names = {"event": "event-time Wald", "max_t": "max-|t| (bootstrap)", "wald": "Wald (R did)"}
        if not np.isfinite(self.statistic):
            return f"{names.get(self.method, self.method)} pre-test: not available ({self.note})"
        df = "" if self.df is None else f", df = {self.df:g}"
        if self.df_denominator is not None:
            df += f" (F reference, {self.df_denominator:g} denominator df)"
        text = (f"{names.get(self.method, self.method)} pre-test of parallel trends over "
                f"{self.n_restrictions} restrictions: statistic {self.statistic:.4g}{df}, "
                f"p = {self.pvalue:.3g}")
        if self.power is not None and np.isfinite(self.power):
            text += (f"; power {self.power:.2f} at the {100 * self.power_alpha:g}% level "
                     f"against a linear pre-trend of {self.drift:.3g} per period "
                     "(0.25 pre-cell SE)")
        return text
