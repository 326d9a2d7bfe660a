"""Exact agreement with R ``did`` 2.5.1 on a balanced panel with clustered standard errors.

Reference values: ``tests/data/reference/make_r_did_clusters_reference.R`` (run with
``Rscript tests/data/reference/make_r_did_clusters_reference.R`` from the repository root;
README_clusters.md there records the run, the R installation and the files' sha256).
Balanced mpdta, ``clustervars = "state"`` (``countyreal %/% 1000``, 29 clusters) and
``bstrap = FALSE``: did 2.5.1 then forms its analytic covariance from the cluster sums of the
influence functions, for the standard errors, the aggregations and its Wald pre-test alike. Both
control groups and base periods; no covariates (dr) and ``lpop`` with reg, dr and ipw;
without and with weights. ATT(g,t), standard errors, the four aggregations and the Wald
statistic at 1e-8 relative, with ``DiDEstimator(small_sample=False)``.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import didmem

from ._r_did_reference import AGGREGATIONS, check_against_r
from .conftest import reference_file

pytestmark = pytest.mark.reference

CONTROL = {"nevertreated": "never_treated", "notyettreated": "not_yet_treated"}
SPECS = (("none", "dr"), ("lpop", "reg"), ("lpop", "dr"), ("lpop", "ipw"))
GRID = list(itertools.product(CONTROL, ("varying", "universal"), SPECS, ("none", "weights")))


@pytest.fixture(scope="module")
def references():
    return tuple(pd.read_csv(reference_file(f"r_did_clusters_{what}.csv"))
                 for what in ("attgt", "aggte", "pretest"))


@pytest.fixture(scope="module")
def mpdta():
    frame = pd.read_csv(reference_file("mpdta.csv"))
    frame["wt"] = np.exp(frame["lpop"]) / np.exp(frame["lpop"]).mean()
    frame["state"] = frame["countyreal"] // 1000
    return frame


@pytest.mark.parametrize("cg,bp,spec,wts", GRID, ids=["_".join((g[0], g[1], *g[2], g[3]))
                                                      for g in GRID])
def test_matches_r_did(references, mpdta, cg, bp, spec, wts):
    covariate, method = spec
    scenario = "_".join((cg, bp, covariate, method, wts))
    panel = didmem.Panel(mpdta, unit="countyreal", time="year", cohort="first.treat",
                         outcome="lemp", never_treated=0, cluster="state",
                         covariates=[] if covariate == "none" else [covariate],
                         **({"weights": "wt"} if wts == "weights" else {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.DidmemWarning)
        res = didmem.DiDEstimator(small_sample=False, n_bootstrap=0, control_group=CONTROL[cg],
                                  base_period=bp, est_method=method).fit(panel)
        aggs = {kind: res.aggregate(kind) for kind in AGGREGATIONS}
    check_against_r(references, res, aggs, scenario)


def test_reference_files_are_the_recorded_ones():
    """The files are those README_clusters.md records (its sha256 table)."""
    readme = reference_file("README_clusters.md").read_text()
    recorded = dict(re.findall(r"^\| `(r_did_clusters_\w+\.csv)` \| `([0-9a-f]{64})` \|$",
                               readme, re.M))
    assert len(recorded) == 3
    for name, digest in recorded.items():
        assert hashlib.sha256(reference_file(name).read_bytes()).hexdigest() == digest, name
