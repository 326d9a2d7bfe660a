"""The one choice of a group-time fit's route: from a prepared design and its cells to the
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


def uses_grouped_moments(design, est_method: str | None) -> bool:
    """Whether the fit takes the balanced route without covariates (whose bootstrap
    multipliers can be drawn while its cells are computed)."""
    return design.holes is None and est_method is None


def cell_influence(design, cells, *, est_method: str | None, covariate_names, owner: str):
    """The cells' estimates and influence functions on the route of ``design``.

    ``est_method`` is the covariate estimator (None without covariates);
    ``covariate_names`` name the covariates in messages.
    """
    from dataclasses import replace

    with_covariates = est_method is not None
    if design.holes is not None:
        from .holes import HolesInfluence, check_hole_cells, hole_cells

        att, coefficients, stats = hole_cells(design.holes, design.w, design.starts, cells,
                                              design.times.size)
        check_hole_cells(design, cells, stats, owner)
        if with_covariates:
            from .covariates_holes import covariate_hole_cells

            stored = covariate_hole_cells(design, cells, est_method, covariate_names, owner)[1]
            return replace(stored, stats=stats)
        return HolesInfluence.build(design.holes, design.w, design.starts, cells,
                                    design.times.size, coefficients, design=design, att=att,
                                    stats=stats)
    from .grouped import grouped_influence

    grouped = grouped_influence(design, cells)
    if not with_covariates:
        return grouped
    from .covariates import covariate_cells

    stored = covariate_cells(design, cells, est_method, covariate_names, owner)[1]
    return replace(stored, stats=grouped.stats)
