"""The efficient combination of the pooled DiD (runs held fixed) and the within-instance
comparison of several runs, cell by cell.

Both estimates of a cell are linear in the same instances' data to first order: the pooled
DiD's influence ``a_i`` (the runs' influence functions averaged per instance) and the
within-instance comparison's ``b_i`` (an instance's pairs in every run). Their variances and
covariance are ``V_a = sum a_i^2``, ``V_b = sum b_i^2``, ``C = sum a_i b_i``, and the
combination ``(1 - w) a + w b`` with the inverse-variance weight

.. math::

    w = \\frac{V_a - C}{V_a + V_b - 2C},\\qquad
    \\operatorname{Var} = V_a - \\frac{(V_a - C)^2}{V_a + V_b - 2C}
    = \\frac{V_a V_b - C^2}{V_a + V_b - 2C}

has the least variance of all such combinations, never more than either's (``V_a - Var`` and
``V_b - Var`` are squares over ``V_a + V_b - 2C >= 0``). Its target is the runs-held-fixed
effect that both estimate; it is the same for both when the runs' effects are equal or each
run gives the cell as many (run, instance) pairs as instances in its cohort (the pooled DiD
weighs runs equally, the within-instance comparison by their pairs). The weight is estimated;
its sampling error is of a smaller order (the usual feasible-GLS argument).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CombinedCells", "combine_cells"]


@dataclass(frozen=True)
class CombinedCells:
    """Per cell: the combined estimate and standard error, the weight on the
    within-instance estimate, and the two estimates' variances and covariance."""

    estimate: np.ndarray
    std_error: np.ndarray
    weight: np.ndarray
    pooled_variance: np.ndarray
    within_variance: np.ndarray
    covariance: np.ndarray


def combine_cells(pooled_estimate, pooled_psi, within_estimate, within_psi) -> CombinedCells:
    """The inverse-variance combination of two estimates of the same cells.

    Parameters
    ----------
    pooled_estimate, within_estimate : ndarray (cells,)
        NaN where an estimate is missing: the combination is then the other one.
    pooled_psi, within_psi : ndarray (instances x cells)
        Their influence functions on the same instances (rows aligned), scaled so that
        ``sum_i psi_i**2`` is each one's variance.
    """
    a, b = np.asarray(pooled_estimate, float), np.asarray(within_estimate, float)
    pa, pb = np.asarray(pooled_psi, float), np.asarray(within_psi, float)
    va = np.einsum("ij,ij->j", pa, pa)
    vb = np.einsum("ij,ij->j", pb, pb)
    cov = np.einsum("ij,ij->j", pa, pb)
    denom = va + vb - 2 * cov
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(denom > 1e-14 * (va + vb), (va - cov) / denom, 0.0)
    weight = np.where(np.isnan(b), 0.0, np.where(np.isnan(a), 1.0, weight))
    var = (1 - weight) ** 2 * va + weight ** 2 * vb + 2 * weight * (1 - weight) * cov
    var = np.where(np.isnan(b), va, np.where(np.isnan(a), vb, var))
    estimate = np.where(np.isnan(b), a, np.where(np.isnan(a), b, (1 - weight) * a + weight * b))
    return CombinedCells(estimate=estimate, std_error=np.sqrt(np.maximum(var, 0.0)),
                         weight=weight, pooled_variance=va, within_variance=vb, covariance=cov)
