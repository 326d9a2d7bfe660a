"""The one choice of a group-time fit's route: from what the fit reads and its prepared design
to the cells' :class:`~didmem.inference.influence.CellInfluence`.

Every group-time fit (:class:`~didmem.DiDEstimator`, :class:`~didmem.DifferenceEstimator`)
runs one driver (:meth:`didmem.estimators.GroupTimeEstimator._fit`): read the data's form
(:func:`data_route`), prepare it, lay out the cells, ask :func:`cell_influence` for the
influence, draw the inference, build the result. The routes:

==========  ==============================================  ===================================
route       when                                            influence
==========  ==============================================  ===================================
moments     a scanned parquet folder (:meth:`Panel.scan     per-block moments, Gaussian draws
            <didmem.Panel.scan>`), pattern counts, or       from their exact law
            :class:`~.moments.cohort.CohortMoments`         (:mod:`.moments.cells`)
exposure    a panel and ``exposure > 1``                    history-matched controls
                                                            (:mod:`.exposure.cells`)
balanced    a balanced panel without covariates             grouped moments with the paths
                                                            (:mod:`.grouped`)
covariates  a balanced panel with covariates                Sant'Anna & Zhao per cell, stored
                                                            ``psi`` (:mod:`.covariates.cells`)
holes       a panel with holes or cross-sections            row-feature coefficients
                                                            (:mod:`.holes`); with covariates the
                                                            repeated-cross-section estimators
                                                            (:mod:`.covariates.holes`)
==========  ==============================================  ===================================
"""

from __future__ import annotations

__all__ = ["ROUTES", "data_route", "moments_refusal", "cell_influence", "uses_grouped_moments",
           "prestarts_multipliers"]

ROUTES = ("balanced", "moments", "holes", "covariates", "exposure")
"""The routes of a group-time fit (see the module notes)."""


def data_route(data, params) -> str:
    """``"moments"`` when ``data`` is not a :class:`~didmem.Panel` in memory (a scanned folder,
    pattern counts, moments), ``"exposure"`` for a panel's ``exposure > 1``, else
    ``"panel"`` (balanced, covariates or holes: chosen on the prepared panel by
    :func:`cell_influence`)."""
    from ..panel import Panel

    if not isinstance(data, Panel):
        return "moments"
    return "exposure" if params.get("exposure", 1) > 1 else "panel"


def moments_refusal(params) -> str | None:
    """Why the moments route cannot serve these (validated) parameters, or None."""
    from .bootstrap import resolve_multiplier

    if params.get("exposure", 1) > 1:
        return "repeated exposures (exposure > 1) need each unit's history"
    if params["n_bootstrap"] and resolve_multiplier(params["multiplier"],
                                                    params["small_sample"]) != "normal":
        return ("the multiplier bootstrap from moments has Gaussian multipliers only "
                "(multiplier='normal', the default with small_sample=True)")
    return None


def uses_grouped_moments(prepared, est_method: str | None) -> bool:
    """Whether the fit takes the balanced route without covariates (whose bootstrap
    multipliers can be drawn while its cells are computed)."""
    return prepared.holes is None and prepared.y is not None and est_method is None


def prestarts_multipliers(prepared, est_method: str | None, settings, *,
                          history=None) -> bool:
    """Whether the fit's multipliers are drawn unit by unit on the other core while its
    cells are computed: the balanced route without covariates with Rademacher, Mammen or
    clustered multipliers (Gaussian ones come from the moments' law, no unit's weight)."""
    per_unit = settings.multiplier != "normal" or prepared.clusters is not None
    return history is None and uses_grouped_moments(prepared, est_method) and per_unit


def cell_influence(prepared, cells, *, est_method: str | None = None, covariate_names=(),
                   owner: str, history=None):
    """The cells' estimates and influence functions on the route of ``prepared``.

    ``prepared`` is a :class:`~didmem.inference.prepared.PreparedPanel` or, on the moments
    route, a :class:`~didmem.inference.moments.cells.MomentsDesign`. ``est_method`` is the
    covariate estimator (None without covariates); ``covariate_names`` name the covariates
    in messages; ``history`` is ``(hist, n_hist)``, each unit's history code and their
    number, on the exposure route.
    """
    from dataclasses import replace

    from .moments.cells import MomentsDesign

    if isinstance(prepared, MomentsDesign):
        from .moments.cells import MomentsInfluence

        return MomentsInfluence.build(prepared, cells)
    if history is not None:
        from .exposure.cells import check_matched, exposure_influence

        influence = exposure_influence(prepared, cells, *history)
        check_matched(influence, prepared, cells)
        return influence
    with_covariates = est_method is not None
    if prepared.holes is not None:
        from .holes.influence import HolesInfluence, check_hole_cells, hole_cells

        att, coefficients, stats = hole_cells(prepared.holes, prepared.w, prepared.starts, cells,
                                              prepared.times.size)
        check_hole_cells(prepared, cells, stats, owner)
        if with_covariates:
            from .covariates.holes import covariate_hole_cells

            stored = covariate_hole_cells(prepared, cells, est_method, covariate_names, owner)[1]
            return replace(stored, stats=stats)
        return HolesInfluence.build(prepared.holes, prepared.w, prepared.starts, cells,
                                    prepared.times.size, coefficients, prepared=prepared, att=att,
                                    stats=stats)
    from .grouped import grouped_influence

    grouped = grouped_influence(prepared, cells)
    if not with_covariates:
        return grouped
    from .covariates.cells import covariate_cells

    stored = covariate_cells(prepared, cells, est_method, covariate_names, owner)[1]
    return replace(stored, stats=grouped.stats)
