"""The small linear programs of the ARP tests, solved by HiGHS without ``linprog``'s overhead.

``scipy.optimize.linprog(method="highs")`` spends most of its time on a program of 20-30 rows
checking its arguments and options (about 3 ms of CPU a call against 0.5 ms in HiGHS). The
sensitivity variants solve thousands of such programs, so :func:`linprog` hands the same
program, with the same options, to the HiGHS that SciPy ships, and reads back what ``linprog``
would return: the same solver on the same input, so the same solution (a test compares them
on the variants' programs). Where SciPy's HiGHS module is not there (another SciPy layout) it
falls back to ``scipy.optimize.linprog`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

try:  # SciPy's own HiGHS binding (private; its absence falls back to linprog)
    from scipy.optimize._highspy import _core as _highs
    _FAST = all(hasattr(_highs, name) for name in ("_Highs", "HighsLp", "HighsOptions",
                                                   "MatrixFormat", "HighsModelStatus",
                                                   "kHighsInf"))
except ImportError:  # pragma: no cover - depends on the SciPy build
    _highs, _FAST = None, False


@dataclass(frozen=True)
class Solution:
    """What the ARP code reads of a solved program (``linprog``'s fields of the same names)."""

    ok: bool
    message: str
    x: np.ndarray | None
    fun: float | None
    ineqlin_marginals: np.ndarray | None


def linprog(c, a_ub=None, b_ub=None, a_eq=None, b_eq=None, free: bool = True) -> Solution:
    """``min c'x`` s.t. ``a_ub x <= b_ub``, ``a_eq x = b_eq``, ``x`` free (or ``x >= 0``)."""
    if not _FAST:
        return _scipy(c, a_ub, b_ub, a_eq, b_eq, free)
    c = np.asarray(c, float)
    n = c.size
    a_ub = np.zeros((0, n)) if a_ub is None else np.asarray(a_ub, float)
    b_ub = np.zeros(0) if b_ub is None else np.asarray(b_ub, float)
    a_eq = np.zeros((0, n)) if a_eq is None else np.asarray(a_eq, float)
    b_eq = np.zeros(0) if b_eq is None else np.asarray(b_eq, float)
    inf = _highs.kHighsInf
    dense = np.vstack((a_ub, a_eq))
    indptr, indices, data = _csc(dense)
    lp = _highs.HighsLp()
    lp.num_col_, lp.num_row_ = n, dense.shape[0]
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, dense.shape[0]
    lp.a_matrix_.format_ = _highs.MatrixFormat.kColwise
    lp.col_cost_ = c
    lp.col_lower_ = np.full(n, -inf) if free else np.zeros(n)
    lp.col_upper_ = np.full(n, inf)
    lp.row_lower_ = np.concatenate((np.full(b_ub.size, -inf), b_eq))
    lp.row_upper_ = np.concatenate((b_ub, b_eq))
    lp.a_matrix_.start_ = indptr
    lp.a_matrix_.index_ = indices
    lp.a_matrix_.value_ = data
    highs = _solver()
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    if status != _highs.HighsModelStatus.kOptimal:
        return Solution(False, highs.modelStatusToString(status), None, None, None)
    solution = highs.getSolution()
    duals = np.array(solution.row_dual)
    return Solution(True, "", np.array(solution.col_value),
                    float(highs.getInfo().objective_function_value), duals[:b_ub.size])


def _csc(dense):
    """``(indptr, indices, data)`` of ``scipy.sparse.csc_array(dense)``: the non-zeros column
    by column, rows ascending (what ``linprog`` passes), without the sparse module's checks."""
    cols, rows = np.nonzero(dense.T)
    indptr = np.zeros(dense.shape[1] + 1, np.int32)
    np.cumsum(np.bincount(cols, minlength=dense.shape[1]), out=indptr[1:])
    return indptr, rows.astype(np.int32), dense[rows, cols]


_SOLVER = []


def _solver():
    """One HiGHS object with ``linprog``'s options for ``method="highs"``, reused: passing a
    model clears what the previous program left (no warm start), so each solve starts as
    ``linprog``'s fresh one does."""
    if not _SOLVER:
        options = _highs.HighsOptions()
        options.presolve = "on"
        options.highs_debug_level = 0
        options.log_to_console = False
        options.output_flag = False
        options.simplex_strategy = 1  # dual simplex, as linprog sets it
        highs = _highs._Highs()
        highs.passOptions(options)
        _SOLVER.append(highs)
    return _SOLVER[0]


def _scipy(c, a_ub, b_ub, a_eq, b_eq, free) -> Solution:
    n = np.size(c)
    res = optimize.linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                           bounds=[(None, None) if free else (0, None)] * n, method="highs")
    if res.status != 0:
        return Solution(False, res.message, None, None, None)
    marginals = None if a_ub is None else np.asarray(res.ineqlin.marginals)
    return Solution(True, "", np.asarray(res.x), float(res.fun), marginals)
