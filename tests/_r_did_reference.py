"""Comparison of a didmem fit with R ``did``'s reference rows (att_gt, aggte, Wald pre-test).

The reference CSVs share one layout (``scenario`` column; ``group``, ``t``, ``att``, ``se``;
``type``, ``egt``, ``att_egt``, ``se_egt``, ``overall_att``, ``overall_se``; ``W``,
``Wpval``), written by the R scripts in ``tests/data/reference/``.
"""

from __future__ import annotations

import numpy as np

AGGREGATIONS = ("simple", "group", "dynamic", "calendar")
_KEY = {"group": "cohort", "dynamic": "event_time", "calendar": "time"}


def close(got, want, what: str, rtol: float = 1e-8) -> None:
    """Equal NaN pattern and values to ``rtol`` (R writes 15 significant digits)."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=1e-12, err_msg=what)


def check_against_r(references, res, aggs, scenario: str) -> None:
    """Cells, the four aggregations (``aggs``: kind -> result) and the Wald pre-test of the
    fit ``res`` against the rows of ``scenario`` in ``references = (attgt, aggte, pretest)``."""
    attgt, aggte, pretest = references
    frame = res.to_frame()
    ref = attgt[attgt["scenario"] == scenario].reset_index(drop=True)
    assert len(ref) == len(frame) > 0, scenario
    np.testing.assert_array_equal(frame["cohort"], ref["group"])
    np.testing.assert_array_equal(frame["time"], ref["t"])
    close(frame["estimate"], ref["att"], f"{scenario} att")
    close(frame["std_error"], ref["se"], f"{scenario} se")
    for kind, agg in aggs.items():
        rows = aggte[(aggte["scenario"] == scenario) & (aggte["type"] == kind)]
        close([agg.overall.estimate, agg.overall.std_error],
              [rows["overall_att"].iloc[0], rows["overall_se"].iloc[0]],
              f"{scenario} {kind} overall")
        if kind != "simple":
            got = agg.to_frame()
            np.testing.assert_array_equal(got[_KEY[kind]], rows["egt"])
            close(got["estimate"], rows["att_egt"], f"{scenario} {kind}")
            close(got["std_error"], rows["se_egt"], f"{scenario} {kind} se")
    want = pretest[pretest["scenario"] == scenario].iloc[0]
    close([res.pretest.statistic], [want["W"]], f"{scenario} W")
    assert abs(res.pretest.pvalue - want["Wpval"]) <= 5e-6  # R rounds it to 5 places
