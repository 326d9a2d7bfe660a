"""Reference AUCs and DeLong variances for tests/test_membership_auc.py.

Written by this script from tools didmem does not depend on: the AUC by scikit-learn's
``sklearn.metrics.roc_auc_score`` and the DeLong variance by the PyPI package
``confidenceinterval`` (``confidenceinterval.delong.delong_roc_variance``, a fast DeLong
implementation after Sun & Xu 2014). The samples are drawn here with numpy's
``default_rng`` and stored beside the values, so the test needs neither package.

Command (versions in the JSON):
    pip install --target /tmp/mia_ref scikit-learn==1.7.2 confidenceinterval==1.0.5 \
        joblib threadpoolctl --no-deps
    PYTHONPATH=/tmp/mia_ref python tests/data/reference/make_membership_auc_reference.py
"""

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import sklearn
from confidenceinterval.delong import delong_roc_variance
from sklearn.metrics import roc_auc_score


def case(name, pos, neg):
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))].astype(bool)
    s = np.r_[pos, neg]
    auc_ci, var = delong_roc_variance(y, s)
    return {"name": name, "positives": [float(v) for v in pos],
            "negatives": [float(v) for v in neg],
            "auc_sklearn": float(roc_auc_score(y, s)),
            "auc_delong_package": float(auc_ci), "variance_delong_package": float(var)}


rng = np.random.default_rng(20261127)
cases = [
    case("normal shift 0.5, 40 vs 60", rng.normal(0.5, 1, 40), rng.normal(0, 1, 60)),
    case("heavy ties (integers 0-4), 25 vs 30", rng.integers(0, 5, 25).astype(float),
         rng.integers(0, 4, 30).astype(float)),
    case("no signal, 200 vs 150", rng.normal(0, 1, 200), rng.normal(0, 1, 150)),
    case("reversed (members lower), 12 vs 9", rng.normal(-1, 0.5, 12), rng.normal(0, 1, 9)),
    # Hanley & McNeil (1982) radiology rating example (their Table I): 58 normal and 51
    # abnormal images rated 1-5; counts per rating
    case("Hanley-McNeil 1982 ratings", np.repeat([1, 2, 3, 4, 5], [3, 2, 2, 11, 33]).astype(float),
         np.repeat([1, 2, 3, 4, 5], [33, 6, 6, 11, 2]).astype(float)),
]
out = {"source": "tests/data/reference/make_membership_auc_reference.py",
       "sklearn": sklearn.__version__, "confidenceinterval": version("confidenceinterval"),
       "numpy": np.__version__, "cases": cases}
Path(__file__).with_name("membership_auc_delong.json").write_text(json.dumps(out, indent=1))
print(json.dumps([(c["name"], c["auc_sklearn"], c["variance_delong_package"]) for c in cases],
                 indent=1))
