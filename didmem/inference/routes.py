"""The one choice of a group-time fit's route: from a prepared panel and its cells to the
cells' :class:`~didmem.inference.influence.CellInfluence`.

========================  ===========================  ==========================================
panel                     without covariates           with covariates (``est_method``)
========================  ===========================  ==========================================
balanced                  grouped moments              Sant'Anna & Zhao per cell, stored ``psi``
                          (:mod:`.grouped`)            (:mod:`.covariates`)
holes, cross-sections     row-feature coefficients     the repeated-cross-section estimators per
                          (:mod:`.holes`)              cell, stored ``psi`` (:mod:`.covariates_holes`)
========================  ===========================  ==========================================

The k-th exposure's route is :func:`~didmem.inference.exposure.exposure_influence`.
"""

from __future__ import annotations

__all__ = ["cell_influence", "uses_grouped_moments"]


def uses_grouped_moments(prepared, est_method: str | None) -> bool:
    """Whether the fit takes the balanced route without covariates (whose bootstrap
    multipliers can be drawn while its cells are computed)."""
    return prepared.holes is None and est_method is None


def cell_influence(prepared, cells, *, est_method: str | None, covariate_names, owner: str):
    """The cells' estimates and influence functions on the route of ``prepared``.

    ``est_method`` is the covariate estimator (None without covariates);
    ``covariate_names`` name the covariates in messages.
    """
    from dataclasses import replace

    with_covariates = est_method is not None
    if prepared.holes is not None:
        from .holes import HolesInfluence, check_hole_cells, hole_cells

        att, coefficients, stats = hole_cells(prepared.holes, prepared.w, prepared.starts, cells,
                                              prepared.times.size)
        check_hole_cells(prepared, cells, stats, owner)
        if with_covariates:
            from .covariates_holes import covariate_hole_cells

            stored = covariate_hole_cells(prepared, cells, est_method, covariate_names, owner)[1]
            return replace(stored, stats=stats)
        return HolesInfluence.build(prepared.holes, prepared.w, prepared.starts, cells,
                                    prepared.times.size, coefficients, prepared=prepared, att=att,
                                    stats=stats)
    from .grouped import grouped_influence

    grouped = grouped_influence(prepared, cells)
    if not with_covariates:
        return grouped
    from .covariates import covariate_cells

    stored = covariate_cells(prepared, cells, est_method, covariate_names, owner)[1]
    return replace(stored, stats=grouped.stats)
