"""Candidate rules for the pooled band's critical value, compared offline on stored components.

The pooled band's rule (:func:`didmem.inference.runs.pooled.pooled_band`) was chosen with this
script on seeds 20000-20399, apart from the seeds whose coverage ``benchmarks/runs_montecarlo.py``
reports. ``collect`` fits :class:`didmem.RunsEstimator` on replications of one of that
script's DGPs and stores, per replication, what every rule needs (the run estimates, the sums
``sum_r psi_r' psi_r`` and ``(sum_r psi_r)' (sum_r psi_r)`` over the shared cells, the mean
truth); ``evaluate`` draws each rule's simultaneous 95% band from them and prints its
coverage of the mean truth with its Monte Carlo standard error. Rules:

* ``satterthwaite``: the earlier rule (normal sup-t value of the instance part plus the
  between-run variances, converted to per-cell t quantiles on Satterthwaite's degrees of
  freedom, capped at the band's ratio);
* ``plugin``: the studentised sup simulated from the components with the run-specific
  variance ``max(S, V_d)`` plugged in;
* ``median``: the same with the median-unbiased ``k S`` (the package's rule: evaluated
  through :func:`~didmem.inference.runs.pooled.pooled_band` itself);
* ``ratio``, ``shrunk`` (issue 50): the simulated band with the between-run variances pooled
  over cells, one ratio to ``V_d`` or empirical-Bayes shrinkage of the per-cell plug-ins
  toward their mean (:func:`~didmem.inference.runs.pooled.between_plug_in`);
* ``fiducial``: a generalised pivot (the runs' mean deviation drawn as ``S``'s rows times a
  Gaussian over ``sqrt(chi2_{R-1} / (R - 1))``, floored at ``V_d``).

Usage (the figures in benchmarks/RESULTS.md, issue 38; about 0.2 s a replication)::

    for d in order difficulty few_runs; do
      nice -n 15 python benchmarks/runs_montecarlo_rules.py collect --dgp $d --seed0 20000 \\
          --reps 400 --out /tmp/pooled_$d.npz
    done
    nice -n 15 python benchmarks/runs_montecarlo_rules.py evaluate /tmp/pooled_*.npz
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

import didmem
from didmem.datasets import simulate_runs
from didmem.estimators._runs_fit import _run_cells
from didmem.inference.runs.pooled import PooledCells, _common_cells, pooled_band
from runs_montecarlo import DGPS

RULES = ("satterthwaite", "plugin", "median", "fiducial", "ratio", "shrunk")


def collect(dgp: str, seed0: int, reps: int, n_runs: int | None, out: str) -> None:
    settings = {**DGPS[dgp], **({"n_runs": n_runs} if n_runs else {})}
    keep = {"est": [], "own": [], "sumsum": [], "mu": []}
    for seed in range(seed0, seed0 + reps):
        df, truth = simulate_runs(**settings, seed=seed)
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                             run="run")
        res = didmem.RunsEstimator(n_bootstrap=0, seed=seed).fit(panel)
        runs = [_run_cells(res.per_run[r], panel.units) for r in res.runs]
        columns, _ = _common_cells(runs)
        psis = [r.psi[:, c] for r, c in zip(runs, columns)]
        total = sum(psis)
        first, c0 = runs[0], columns[0]
        mean = truth[truth["run"] == 0].set_index(["cohort", "time"])["tau_mean"]
        keep["est"].append(np.stack([r.estimate[c] for r, c in zip(runs, columns)]))
        keep["own"].append(sum(p.T @ p for p in psis))
        keep["sumsum"].append(total.T @ total)
        keep["mu"].append([mean.get((g, t), 0.0)
                           for g, t in zip(first.cohort[c0], first.time[c0])])
    np.savez(out, **{k: np.asarray(v) for k, v in keep.items()},
             settings=str(settings), seeds=[seed0, seed0 + reps - 1])
    print(f"{dgp}: {reps} replications -> {out}")


def _psd(a):
    vals, vecs = np.linalg.eigh((a + a.T) / 2)
    return (vecs * np.clip(vals, 0, None)) @ vecs.T


def components(est, own, sumsum) -> PooledCells:
    """The pooled cells' components from the stored sums (as :func:`pooled_cells` forms
    them from the runs' influence functions)."""
    r, m = est.shape
    instance = sumsum / r**2
    specific = (own - sumsum / r) / (r - 1)
    shared = instance - specific / r
    spread = np.cov(est, rowvar=False, ddof=1).reshape(m, m)
    s, d = np.diag(spread), np.diag(specific)
    between = np.maximum(s - d, 0.0)
    covariance = instance + np.diag(between / r)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (r - 1) * (np.diag(covariance) / (np.maximum(s, d) / r)) ** 2
    zeros = np.zeros(m)
    return PooledCells(cohort=zeros, time=zeros, base_time=zeros, estimate=est.mean(axis=0),
                       run_estimates=est, covariance=covariance, instance_covariance=instance,
                       shared_covariance=shared, specific_covariance=specific, spread=spread,
                       between_variance=between, df=df, n_runs=r, n_dropped=0)


def _studentised_sup(p: PooledCells, run_var: np.ndarray, rng, draws: int) -> float:
    r, m = p.n_runs, p.estimate.size
    root_w = np.linalg.cholesky(_psd(run_var) + 1e-15 * np.eye(m))
    root_c = np.linalg.cholesky(_psd(p.shared_covariance + run_var / r) + 1e-15 * np.eye(m))
    dev = rng.standard_normal((draws, m)) @ root_c.T
    res = rng.standard_normal((draws, r - 1, m)) @ root_w.T
    s = (res**2).sum(axis=1) / (r - 1)
    d, c = np.diag(p.specific_covariance), np.diag(p.shared_covariance)
    return float(np.quantile(np.max(np.abs(dev) / np.sqrt(np.maximum(s, d) / r + c), axis=1),
                             0.95))


def band(rule: str, p: PooledCells, rng, draws: int):
    """(standard errors, per-cell critical values) of one rule's 95% simultaneous band."""
    r = p.n_runs
    se = np.sqrt(np.diag(p.covariance))
    s, d = np.diag(p.spread), np.diag(p.specific_covariance)
    if rule in ("median", "ratio", "shrunk"):
        out = pooled_band(p, alpha=0.05, n_draws=draws, rng=rng, simultaneous=True,
                          between="cell" if rule == "median" else rule)
        return out.std_errors, out.critical_values
    if rule == "plugin":
        run_var = p.specific_covariance + np.diag(np.maximum(s - d, 0))
        return se, np.full(se.size, _studentised_sup(p, run_var, rng, draws))
    if rule == "satterthwaite":
        root = np.linalg.cholesky(_psd(p.covariance) + 1e-15 * np.eye(se.size))
        z = rng.standard_normal((draws, se.size)) @ root.T
        crit = np.quantile(np.max(np.abs(z) / se, axis=1), 0.95)
        run_part, total = np.maximum(s, d) / r, np.diag(p.covariance)
        df = np.minimum((r - 1) * (total / run_part) ** 2,
                        (r - 1) * (total.sum() / run_part.sum()) ** 2)
        return se, stats.t.ppf(stats.norm.cdf(crit), df)
    if rule == "fiducial":
        rows = (p.run_estimates - p.estimate) / np.sqrt(r - 1)  # rows' Gram = S
        root_c = np.linalg.cholesky(_psd(p.shared_covariance) + 1e-15 * np.eye(se.size))
        u = rng.chisquare(r - 1, size=draws)
        dev = rng.standard_normal((draws, r)) @ rows / np.sqrt(r) / np.sqrt(u / (r - 1))[:, None]
        fid = s[None, :] * (r - 1) / u[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            dev *= np.where(fid > 0, np.sqrt(np.maximum(fid, d) / fid), 1.0)
        z = rng.standard_normal((draws, se.size)) @ root_c.T
        crit = np.quantile(np.max(np.abs(z + dev) / se, axis=1), 0.95)
        return se, np.full(se.size, crit)
    raise ValueError(rule)


def evaluate(files, rules, draws: int) -> None:
    for path in files:
        data = np.load(path)
        n = data["est"].shape[0]
        seeds = [int(x) for x in data["seeds"]] if "seeds" in data.files else "?"
        line = [f"{path} ({n} reps, seeds {seeds}):"]
        for rule in rules:
            rng = np.random.default_rng(1)
            hits = []
            for k in range(n):
                p = components(data["est"][k], data["own"][k], data["sumsum"][k])
                se, crit = band(rule, p, rng, draws)
                hits.append(bool(np.all(np.abs(p.estimate - data["mu"][k]) <= crit * se)))
            rate = float(np.mean(hits))
            line.append(f"{rule} {rate:.3f} ± {np.sqrt(rate * (1 - rate) / n):.3f}")
        print(" ".join(line), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--dgp", choices=list(DGPS), required=True)
    c.add_argument("--seed0", type=int, default=20_000)
    c.add_argument("--reps", type=int, default=400)
    c.add_argument("--runs", type=int, default=None, help="override the DGP's number of runs")
    c.add_argument("--out", required=True)
    e = sub.add_parser("evaluate")
    e.add_argument("files", nargs="+")
    e.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES)
    e.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.dgp, args.seed0, args.reps, args.runs, args.out)
    else:
        evaluate(args.files, args.rules, args.draws)


if __name__ == "__main__":
    main()
