r"""The studentised statistics of a Fisher test's permutations, as fixed sparse maps of moments.

A permutation changes which units form each cohort, never the cohorts' sizes, so every
weight of every estimand is fixed across the permutations of a test; only the cohorts'
means ``Ybar_c`` and covariances ``S_c`` change. This module lays out once per test what
the statistics need from them, so that a permutation costs its moments and a few sparse
products.

Every tested estimand is a weighted sum of pieces of cells (R ``staggered``'s
``A_theta = sum_k w_k a_k``, and ``A_0`` alike). A piece is a vector over cohorts
``a_k = e_{g_k} - [c >= s_k] N_c / N_{s_k}^+`` (cohort ``g_k`` against the cohorts from
``s_k`` on, ``N_s^+ = sum_{c >= s} N_c``) at one time: a cell's time ``t_k`` for ``theta``,
its cohort's pre-period ``p_k = g_k - 1`` for ``Xhat``. The Neyman covariance of two pieces
at times ``tau``, ``tau'`` is

.. math::

    \Sigma_{kl}(\tau, \tau') = [g_k = g_l] \frac{S_{g_k}}{N_{g_k}}
        - [g_k \ge s_l] \frac{S_{g_k}}{N^+_{s_l}} - [g_l \ge s_k] \frac{S_{g_l}}{N^+_{s_k}}
        + \frac{R_{\max(s_k, s_l)}}{N^+_{s_k} N^+_{s_l}}, \qquad
    R_s = \sum_{c \ge s} N_c S_c,

each matrix taken at ``(tau, tau')``. An estimand's three quadratic forms (``A_theta S
A_theta'``, ``A_0 S A_theta'``, ``A_0 S A_0'`` summed over cohorts over ``N_c``) are
``sum_{k,l} w_k w_l Sigma_kl`` over pairs of its pieces: entries of the ``S_c`` and of their
suffix sums ``R_s`` with fixed coefficients, that is two sparse matrices applied to the
flattened ``S`` and ``R`` (the suffix sums gathered with the moments,
:func:`~.fisher.permuted_design`). That costs the pairs of an estimand's pieces instead of
``K T^2``: an event time's estimand has about one piece per cohort, a cell one. Estimands with
many pieces (``simple``, the overall ``group`` and ``calendar``) keep the dense per-cohort
forms of :meth:`~.design.EstimandRows.quadratic_forms`. The estimates are the same sums of
the pieces' differences of means.

The pieces of each estimand are recovered from its ``A_theta`` (one triangular solve per
time over the identified cells) and its ``A_0`` (differences over the later cohorts at each
pre-period: ``staggered``'s event times put on ``A_0`` also cohorts whose ``theta`` lies
outside the panel), and checked by rebuilding both from them; an estimand that is no such
sum keeps the dense forms. The statistics equal :func:`~.fit._statistics` (the direct
computation) up to rounding (tests/test_random_timing_permutation.py).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.linalg import solve_triangular

from .design import EstimandRows, TimingDesign, cell_estimates, linear_estimates, plug_in_beta

__all__ = ["PermutationStatistics", "cell_decomposition"]

_REBUILD_TOL = 1e-10  # relative to the estimand's largest weight
_CANCELLED = 1e-12  # a variance below this share of its parts is a rounding residue


def cell_decomposition(a_theta, a_0, count, codes, g, t, s):
    """Each estimand as weighted pieces of cells, where it is such a sum.

    ``A_theta`` is decomposed on the cells ``(g, t)`` (controls from ``s``); ``A_0`` on the
    pieces ``(g, s)`` at each cohort's pre-period ``p = g - 1``, for every later first control
    ``s`` (R ``staggered``'s event times put on ``A_0`` also the cohorts whose ``theta`` lies
    outside the panel).

    Parameters
    ----------
    a_theta, a_0 : array (J, K, T)
    count, codes : array (K,)
    g, t, s : int arrays (n_cells,)
        Each cell's cohort, time and first control cohort.

    Returns
    -------
    theta_weights : ndarray (J, n_cells)
    x_pieces : tuple of int arrays ``(g, p, s)`` (n_pieces,)
    x_weights : ndarray (J, n_pieces)
    exact : ndarray (J,) of bool
        Whether the weights rebuild the estimand's ``A_theta`` and ``A_0`` (to 1e-10 of its
        largest weight); the weights of the other rows are meaningless.
    """
    a_theta = np.asarray(a_theta, dtype=np.float64)
    a_0 = np.asarray(a_0, dtype=np.float64)
    count = np.asarray(count, dtype=np.float64)
    n_rows, k, n_t = a_theta.shape
    vectors = _piece_vectors(count, g, s)  # (n_cells, K)
    theta_weights = np.zeros((n_rows, g.size))
    for time in range(n_t):
        at = np.flatnonzero(t == time)
        if not at.size:
            continue
        at = at[np.argsort(g[at], kind="stable")]
        # on the cells' own cohorts the cells' vectors are unit lower triangular (a cell's
        # controls come after its cohort)
        square = vectors[at][:, g[at]].T
        theta_weights[:, at] = solve_triangular(square, a_theta[:, g[at], time].T, lower=True,
                                                unit_diagonal=True, check_finite=False).T
    # A_0 at cohort c's pre-period: sum_s w_s (e_c - [c' >= s] N_c' / N_s^+), so that
    # -A_0[c'] / N_c' = sum_{s <= c'} w_s / N_s^+ for c' > c: differences give w_s
    suffix = np.r_[np.cumsum(count[::-1])[::-1], 0.0]
    pre = codes - 1
    own = np.flatnonzero(np.isfinite(pre) & (pre >= 0) & (pre <= n_t - 1))
    xg, xs = [], []
    x_blocks = []
    for c in own:
        starts = np.arange(c + 1, k)
        if not starts.size:
            continue
        y = -a_0[:, c + 1:, int(pre[c])] / count[c + 1:]
        w = np.diff(np.concatenate([np.zeros((n_rows, 1)), y], axis=1), axis=1) * suffix[starts]
        xg.append(np.full(starts.size, c))
        xs.append(starts)
        x_blocks.append(w)
    xg = np.concatenate(xg) if xg else np.zeros(0, dtype=np.int64)
    xs = np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)
    xp = pre[xg].astype(np.int64) if xg.size else np.zeros(0, dtype=np.int64)
    x_weights = np.concatenate(x_blocks, axis=1) if x_blocks else np.zeros((n_rows, 0))
    largest = np.maximum(np.abs(a_theta).max(axis=(1, 2)), np.abs(a_0).max(axis=(1, 2)))
    for weights in (theta_weights, x_weights):
        if weights.size:
            top = np.abs(weights).max(axis=1, keepdims=True)
            weights[np.abs(weights) <= 1e-14 * top] = 0.0
    error = np.zeros(n_rows)
    for target, weights, pieces, times in ((a_theta, theta_weights, vectors, t),
                                           (a_0, x_weights, _piece_vectors(count, xg, xs), xp)):
        rebuilt = np.zeros_like(target)
        for time in np.unique(times):
            at = np.flatnonzero(times == time)
            rebuilt[:, :, time] = weights[:, at] @ pieces[at]
        error = np.maximum(error, np.abs(rebuilt - target).max(axis=(1, 2)))
    exact = error <= _REBUILD_TOL * np.where(largest > 0, largest, 1.0)
    return theta_weights, (xg, xp, xs), x_weights, exact


def _piece_vectors(count, g, s):
    """Each piece's weights over the cohorts: ``e_g - [c >= s] N_c / N_s^+``."""
    count = np.asarray(count, dtype=np.float64)
    k = count.size
    suffix = np.r_[np.cumsum(count[::-1])[::-1], 0.0]
    share = count[None, :] / np.where(suffix[s] > 0, suffix[s], 1.0)[:, None]
    out = -np.where(np.arange(k)[None, :] >= s[:, None], share, 0.0)
    out[np.arange(g.size), g] += 1.0
    return out


class PermutationStatistics:
    """The Neyman-studentised statistics of the cells and of given estimands, for designs
    with the cohorts and sizes of ``design`` (a Fisher test's permutations).

    Calling it on a :class:`~.design.TimingDesign` gives what
    :func:`~didmem.inference.random_timing.fit._statistics` gives: the cells' statistics,
    then the estimands' in their order.

    Parameters
    ----------
    design : TimingDesign
        Any design with the test's cohorts and sizes (the observed one).
    beta : float or None
    last_treated : bool
    a_theta, a_0 : array (J, K, T)
        The tested estimands.
    pair_limit : int, optional
        Estimands with more than this many pairs of pieces keep the dense forms (default
        ``K T^2 / 4``: about where the pairs cost more than the dense products).
    """

    def __init__(self, design: TimingDesign, beta, last_treated: bool, a_theta, a_0, *,
                 pair_limit: int | None = None):
        self.beta = beta
        self.count = np.asarray(design.count, dtype=np.float64)
        k, n_t = design.cohorts.size, design.n_times
        self.shape = (k, n_t)
        cells = cell_estimates(design, beta, last_treated, refine=False, with_df=False)
        g, t, s = cells.cohort_index, cells.time_index, cells.control_start
        p = (design.codes[g] - 1).astype(np.int64)
        self.n_cells = g.size
        a_theta = np.asarray(a_theta, dtype=np.float64)
        a_0 = np.asarray(a_0, dtype=np.float64)
        self.n_rows = a_theta.shape[0]
        theta_w, (xg, xp, xs), x_w, exact = cell_decomposition(
            a_theta, a_0, self.count, design.codes, g, t, s)
        pairs = np.maximum((theta_w != 0).sum(axis=1), (x_w != 0).sum(axis=1)) ** 2
        limit = k * n_t * n_t // 4 if pair_limit is None else int(pair_limit)
        self.sparse_rows = np.flatnonzero(exact & (pairs <= limit))
        self.dense_rows = np.setdiff1d(np.arange(self.n_rows), self.sparse_rows)
        self.dense = (EstimandRows.of(a_theta[self.dense_rows], a_0[self.dense_rows])
                      if self.dense_rows.size else None)
        suffix_n = np.r_[np.cumsum(self.count[::-1])[::-1], 0.0]
        # the X pieces: each cell's own (g, p, s), then the decomposition's
        x_g, x_p, x_s = np.r_[g, xg], np.r_[p, xp], np.r_[s, xs]
        identity = sparse.identity(g.size, format="csr")
        theta_members = sparse.vstack([identity,
                                       sparse.csr_matrix(theta_w[self.sparse_rows])]).tocsr()
        x_members = sparse.vstack([
            sparse.hstack([identity, sparse.csr_matrix((g.size, xg.size))]),
            sparse.hstack([sparse.csr_matrix((self.sparse_rows.size, g.size)),
                           sparse.csr_matrix(x_w[self.sparse_rows])])]).tocsr()
        x_members.eliminate_zeros()
        theta_members.eliminate_zeros()
        self.theta = (theta_members, g, t, s, suffix_n[s])
        self.x = (x_members, x_g, x_p, x_s, suffix_n[x_s])
        self.forms = _form_maps(self.theta, self.x, self.count, k, n_t)

    def __call__(self, design: TimingDesign) -> np.ndarray:
        n = self.count
        mean, cov = design.mean, design.cov
        control = getattr(design, "control_sums", None)
        if control is None:
            control = control_sums(n, cov)
        k, n_t = self.shape
        sum_y = np.concatenate([np.cumsum((n[:, None] * mean)[::-1], axis=0)[::-1],
                                np.zeros((1, n_t))])
        (members, g, tau, s, n_ctrl), (x_members, xg, xp, xs, x_ctrl) = self.theta, self.x
        theta0 = members @ (mean[g, tau] - sum_y[s, tau] / n_ctrl)
        x_hat = x_members @ (mean[xg, xp] - sum_y[xs, xp] / x_ctrl)
        flat_s, flat_r = cov.reshape(-1), control[:k].reshape(-1)
        theta_var, x_theta, x_var = ((map_s @ flat_s + map_r @ flat_r)[rows]
                                     for map_s, map_r, rows in self.forms)
        estimate, var = _studentise(theta0, x_hat, theta_var, x_theta, x_var, self.beta)
        stat = _ratio(estimate, np.sqrt(var))
        out = np.empty(self.n_cells + self.n_rows)
        out[:self.n_cells] = stat[:self.n_cells]
        rows = out[self.n_cells:]
        rows[self.sparse_rows] = stat[self.n_cells:]
        if self.dense is not None:
            agg = linear_estimates(design, self.dense, None, self.beta, refine=False)
            rows[self.dense_rows] = _ratio(agg.estimate, agg.std_error_neyman)
        return out


def control_sums(count, cov) -> np.ndarray:
    """``R_s = sum_{c >= s} N_c S_c`` for ``s = 0 .. K`` (``R_K = 0``): (K + 1, T, T)."""
    k, n_t, _ = cov.shape
    out = np.zeros((k + 1, n_t, n_t))
    np.cumsum((np.asarray(count)[:, None, None] * cov)[::-1], axis=0, out=out[k - 1::-1])
    return out


def _studentise(theta0, x_hat, theta_var, x_theta, x_var, beta):
    """The estimate and Neyman variance with ``beta`` (None: the plug-in ``beta*``), as
    :func:`~.design.linear_estimates` computes them."""
    b = plug_in_beta(x_theta, x_var, beta, theta0.shape)
    estimate = theta0 - x_hat * b
    var = np.maximum(theta_var + b * b * x_var - 2.0 * x_theta * b, 0.0)
    # a variance within rounding of its parts' cancellation is zero: where theta and Xhat
    # are the same estimand (an event time -1), the direct computation's parts are equal
    # numbers that cancel exactly, these (summed in another order) to about 1e-16
    var[var <= _CANCELLED * (theta_var + b * b * x_var)] = 0.0
    return estimate, var


def _ratio(a, b):
    return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def _pairs(left, right):
    """Every pair of a piece of ``left`` and one of ``right`` within the same row:
    ``(row, i, j, w_i w_j)`` with ``i``, ``j`` indices into the pieces."""
    lm, rm = left[0], right[0]
    n_rows = lm.shape[0]
    per_left, per_right = np.diff(lm.indptr), np.diff(rm.indptr)
    row_of_entry = np.repeat(np.arange(n_rows), per_left)
    repeat = per_right[row_of_entry]  # each left entry pairs with its row's right entries
    first = np.repeat(np.arange(lm.nnz), repeat)
    offset = np.arange(first.size) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    second = np.repeat(rm.indptr[row_of_entry], repeat) + offset
    return (row_of_entry[first], lm.indices[first], rm.indices[second],
            lm.data[first] * rm.data[second])


def _form_maps(theta, x, count, k, n_t):
    """Sparse maps from the flattened ``S`` (K T^2) and ``R`` (K T^2) to the forms
    ``theta S theta'``, ``Xhat S theta'``, ``Xhat S Xhat'`` of every row: for each form
    ``(map_S, map_R, rows)``, the maps of its distinct rows (event times before treatment
    share their ``Xhat``) and each row's index among them.

    ``theta`` and ``x`` are ``(members, g, tau, s, N_s^+)``: the rows' weights on their
    pieces, and each piece's cohort, time, first control cohort and controls' size."""
    size = k * n_t * n_t
    out = []
    for left, right in ((theta, theta), (x, theta), (x, x)):
        index, first = _distinct_rows(left[0], right[0])
        left = (left[0][first],) + left[1:]
        right = (right[0][first],) + right[1:]
        n_rows = first.size
        row, a, b, coef = _pairs(left, right)
        _, ga, ta, sa, na = left
        _, gb, tb, sb, nb = right
        ga, ta, sa, na = ga[a], ta[a], sa[a], na[a]
        gb, tb, sb, nb = gb[b], tb[b], sb[b], nb[b]
        cell = np.minimum(ta, tb) * n_t + np.maximum(ta, tb)  # S, R symmetric
        parts_s = []
        same = ga == gb
        parts_s.append((row[same], ga[same] * n_t * n_t + cell[same],
                        coef[same] / count[ga[same]]))
        later = ga >= sb
        parts_s.append((row[later], ga[later] * n_t * n_t + cell[later],
                        -coef[later] / nb[later]))
        later = gb >= sa
        parts_s.append((row[later], gb[later] * n_t * n_t + cell[later],
                        -coef[later] / na[later]))
        out.append((_coo(parts_s, n_rows, size),
                    _coo([(row, np.maximum(sa, sb) * n_t * n_t + cell, coef / (na * nb))],
                         n_rows, size), index))
    return out


def _distinct_rows(left, right):
    """Rows with the same weights in both ``left`` and ``right`` (csr) have the same form:
    ``(index, first)``, each row's index among the distinct ones and their first rows."""
    seen: dict = {}
    index = np.empty(left.shape[0], dtype=np.int64)
    first = []
    for r in range(left.shape[0]):
        key = tuple(m.indices[m.indptr[r]:m.indptr[r + 1]].tobytes()
                    + m.data[m.indptr[r]:m.indptr[r + 1]].tobytes() for m in (left, right))
        if key not in seen:
            seen[key] = len(first)
            first.append(r)
        index[r] = seen[key]
    return index, np.asarray(first, dtype=np.int64)


def _coo(parts, n_rows, n_cols):
    rows = np.concatenate([r for r, _, _ in parts])
    cols = np.concatenate([c for _, c, _ in parts])
    vals = np.concatenate([v for _, _, v in parts])
    out = sparse.csr_matrix((vals, (rows, cols)), shape=(n_rows, n_cols))
    out.sum_duplicates()
    return out
