"""(k, l)-extractable memorisation (Carlini et al. 2023; the paper's Estimator 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import EstimationError, ParameterError
from ..results import CellResult
from ._per_instance import cell_means
from .base import Alpha, BaseEstimator, Instance

__all__ = ["ExtractableEstimator", "EXTRACTABLE_ASSUMPTION"]

EXTRACTABLE_ASSUMPTION = (
    "Y_c(x; inf) = 0: had the model never been trained on x, x would not be extractable "
    "(the counterfactual outcome is zero), so the observed outcome is the effect."
)


class ExtractableEstimator(BaseEstimator):
    r"""Extractable memorisation: the observed 0/1 outcome taken as the effect.

    .. math:: \hat\tau_{\mathrm{extr}}(x, c) = Y_c(x), \qquad
              \hat\tau_{\mathrm{extr}}(g, c) = \frac{1}{|G_g|} \sum_{x \in G_g} Y_c(x)

    for every trained instance ``x`` (finite cohort) and checkpoint ``c``, with ``Y`` the
    ``extractable`` metric of the transformers backend (1 when greedy decoding from the
    first ``k`` tokens reproduces the next ``l``) or any other 0/1 outcome.

    **Assumption.** :math:`Y_c(x; \infty) = 0`: an instance the model was not trained on
    would not be extractable. It fails for text that is easy to predict without having seen
    it (boiler-plate, repetitive or templated text), which the estimator then counts as
    memorised; validation instances that are extractable show how badly (their share is
    reported in ``extra["never_treated_rate"]``). The assumption is also stored in the
    result's ``assumption``.

    Parameters
    ----------
    outcome : str, optional
        The 0/1 outcome; by default ``"extractable"`` when the panel has it, otherwise the
        panel's only outcome.
    alpha : float
        One minus the coverage of the pointwise normal intervals of the cell means.

    Notes
    -----
    Cell standard errors are ``sd / sqrt(n)`` of the instances' outcomes in the cohort;
    pre-treatment cells (``c < g``) are reported too: there the true effect is zero, so a
    nonzero value there is direct evidence against the assumption. Sampling weights are
    ignored.

    References
    ----------
    Carlini, N. et al. (2023). Quantifying memorization across neural language models. ICLR.
    Lesci, P. et al. (2024). Causal estimation of memorisation profiles. ACL 2024, App. B.3.

    Examples
    --------
    >>> import didmem, pandas as pd
    >>> df = pd.DataFrame({"unit": [1, 1, 2, 2, 3, 3], "time": [1, 2] * 3,
    ...                    "cohort": [2, 2, 2, 2, None, None],
    ...                    "extractable": [0, 1, 0, 0, 0, 0]})
    >>> panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort",
    ...                      outcome="extractable")
    >>> didmem.ExtractableEstimator().fit(panel).to_frame()["estimate"].tolist()
    [0.0, 0.5]
    """

    _constraints = {
        "outcome": Instance(str, allow_none=True),
        "alpha": Alpha(),
    }

    def __init__(self, *, outcome=None, alpha=0.05):
        super().__init__(outcome=outcome, alpha=alpha)

    def _fit(self, panel, params) -> CellResult:
        name = params["outcome"]
        if name is None and "extractable" in panel.outcomes:
            name = "extractable"
        name = panel.resolve_outcome(name)
        y = np.asarray(panel.outcome_matrix(name), dtype=np.float64)
        bad = ~np.isin(y, (0.0, 1.0))
        if bad.any():
            raise ParameterError(
                f"ExtractableEstimator needs a 0/1 outcome; {name!r} has "
                f"{int(bad.sum())} other values (first: {y[bad][0]!r})."
            )
        treated = ~panel.never_treated
        if not treated.any():
            raise EstimationError("ExtractableEstimator needs trained instances (a finite "
                                  "cohort); the panel has only never-treated units.")
        n_t, n_times = int(treated.sum()), panel.n_times
        units = pd.DataFrame({
            "unit": np.repeat(np.asarray(panel.units)[treated], n_times),
            "cohort": np.repeat(panel.cohorts[treated], n_times),
            "time": np.tile(panel.times.astype(np.float64), n_t),
            "estimate": y[treated].ravel(),
            "std_error": np.nan,
        })
        never = panel.never_treated
        rate = float(y[never].mean()) if never.any() else float("nan")
        return CellResult.from_cells(
            **cell_means(units), alpha=params["alpha"], estimator=type(self).__name__,
            params=params, outcome=name, assumption=EXTRACTABLE_ASSUMPTION, units=units,
            extra={"never_treated_rate": rate},
        )
