"""``didmem estimate PANEL --by FEATURE``: a profile per subgroup of an instance feature.

Fits :func:`didmem.heterogeneity` (each subgroup with its own controls), prints its summary,
each pair's instantaneous difference in words and the per-cohort equality tests, and writes
three tables beside each other:

* ``OUT`` (``.parquet``): the subgroups' profiles, one row per subgroup and cell
  (:meth:`~didmem.contrasts.Heterogeneity.profiles`);
* ``OUT``'s stem + ``.differences.parquet``: every pair's difference ``group_a - group_b``
  per cell (``aggregation`` ``"cells"``) and per key of the instantaneous, persistent,
  residual and simple aggregations, with its overall value (``overall`` True), standard
  errors paired or not, and the simultaneous band (pointwise for an overall row);
* ``OUT``'s stem + ``.equality.parquet``: the tests that memorisation is equal across the
  subgroups per cell and per aggregation key (Wald), and the joint tests over all
  post-treatment cells (``aggregation`` ``"joint"``, max-t and Wald).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import EstimationError, ParameterError

__all__ = ["run_by", "instance_feature", "written_paths", "AGGREGATIONS"]

AGGREGATIONS = ("instantaneous", "persistent", "residual", "simple")
"""The aggregations whose differences and equality tests are written."""


def instance_feature(frame, column: str, unit: str, source: str, option: str = "--by"):
    """The value of ``column`` for each unit of ``frame`` (a Series indexed by unit), refused
    in one line when it is not a column or varies within a unit."""
    if column not in frame.columns:
        raise ParameterError(f"{option} {column!r} is not a column of {source}; its columns: "
                             f"{list(frame.columns)}.")
    spread = frame.groupby(unit)[column].nunique(dropna=False)
    if (spread > 1).any():
        raise ParameterError(f"{option} {column!r} varies within unit "
                             f"{spread.index[spread > 1][0]!r} of {source}; an instance "
                             "feature is constant within each unit.")
    return frame.groupby(unit)[column].first()


def written_paths(out: Path) -> dict:
    """The three files ``--by`` writes, by table."""
    return {"profiles": out,
            "differences": out.with_name(out.stem + ".differences.parquet"),
            "equality": out.with_name(out.stem + ".equality.parquet")}


def _refuse_other_routes(args, other_flags=()) -> None:
    """Refuse the options of the other routes (``other_flags``: (flag, keyword, value when
    not given) of options that another estimator takes)."""
    given = [flag for flag, name, unset in other_flags if getattr(args, name, unset) != unset]
    given += [flag for flag, on in (
        (f"--estimator {args.estimator}", args.estimator != "did"),
        (f"--exposure {args.exposure}", args.exposure != 1),
        ("--memorised", args.memorised), ("--run", args.run is not None),
        ("--members", args.members is not None),
        ("--runner ray", args.runner != "local"), ("--address", args.address is not None),
    ) if on]
    if Path(args.panel).is_dir():
        given.append(f"the folder {args.panel!r}")
    if given:
        raise ParameterError(f"--by fits DiD per subgroup of one panel file (.parquet or "
                             f".csv); it does not take {', '.join(given)}.")


def _differences(het):
    """Every pair's difference, per cell and per aggregation key with its overall row."""
    import numpy as np
    import pandas as pd

    parts = []
    for (a, b), diff in het.differences().items():
        cells = diff.to_frame().assign(aggregation="cells", overall=False)
        parts.append(cells.assign(group_a=a, group_b=b))
        for name in AGGREGATIONS:
            try:
                agg = diff.aggregate(name)
            except EstimationError:  # e.g. no persistent cell: nothing to write
                continue
            keys = agg.to_frame().rename(columns={agg.key_name or "key": "key"})
            o = agg.overall
            last = pd.DataFrame({"key": [np.nan], "difference": [o.estimate],
                                 "std_error": [o.std_error],
                                 "unpaired_std_error": [agg.unpaired_overall_std_error],
                                 "ci_lower": [o.ci_lower], "ci_upper": [o.ci_upper]})
            table = pd.concat([keys.assign(overall=False), last.assign(overall=True)],
                              ignore_index=True)
            parts.append(table.assign(aggregation=name, group_a=a, group_b=b))
    out = pd.concat(parts, ignore_index=True)
    first = ["group_a", "group_b", "aggregation", "key", "overall"]
    return out[first + [c for c in out.columns if c not in first]]


def _equality(het):
    """The equality tests per cell, per aggregation key, and the joint ones."""
    import pandas as pd

    parts = [het.equality().assign(aggregation="cells")]
    for name in AGGREGATIONS:
        try:
            table = het.equality(name)
        except EstimationError:
            continue
        key = table.columns[0]
        parts.append(table.rename(columns={key: "key"}).assign(aggregation=name))
    for method in ("max_t", "wald"):
        test = het.joint_test(method)
        parts.append(pd.DataFrame({"aggregation": ["joint"], "method": [method],
                                   "statistic": [test.statistic], "df": [test.df],
                                   "pvalue": [test.pvalue]}))
    out = pd.concat(parts, ignore_index=True)
    if "method" not in out:
        out["method"] = None
    out["method"] = out["method"].fillna("wald")
    first = ["aggregation", "method"]
    return out[first + [c for c in out.columns if c not in first]]


def _write_all(tables: dict, paths: dict) -> None:
    """Write every table atomically; on a failure, none of them is left behind new."""
    from ..study._tables import replace_atomically

    done = []
    try:
        for name, frame in tables.items():
            frame.columns = [str(c) for c in frame.columns]
            done.append(replace_atomically(paths[name], lambda tmp, f=frame: f.to_parquet(
                tmp, index=False)))
    except BaseException:
        for path in done:
            path.unlink(missing_ok=True)
        raise


def run_by(args, other_flags=()) -> int:
    """``didmem estimate --by FEATURE``: fit, print and write (see the module's docstring);
    ``other_flags`` are refused (see :func:`_refuse_other_routes`)."""
    from ..contrasts import heterogeneity
    from ..estimators.did import DiDEstimator
    from ..panel import Panel
    from ._options import read_panel_frame

    _refuse_other_routes(args, other_flags)
    out = Path(args.out)
    frame = read_panel_frame(Path(args.panel))
    feature = instance_feature(frame, args.by, args.unit, repr(str(args.panel)))
    options = {} if args.base_period is None else {"base_period": args.base_period}
    if args.control_group is not None:  # not given: DiDEstimator's own default
        options["control_group"] = args.control_group
    estimator = DiDEstimator(n_bootstrap=args.n_bootstrap,
                             seed=args.seed, lower_is_better=args.lower_is_better,
                             outcome=args.outcome, small_sample=not args.r_inference,
                             **options)
    panel = Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                  outcome=args.outcome, never_treated=args.never_treated,
                  balance=args.balance)
    het = heterogeneity(panel, feature, estimator=estimator, seed=args.seed,
                        small_sample=not args.r_inference)
    tables = {"profiles": het.profiles(), "differences": _differences(het),
              "equality": _equality(het)}
    print(het.summary())
    for diff in het.differences().values():
        print("  " + diff.sentence("instantaneous"))
    table = het.equality("instantaneous")
    print("\ninstantaneous memorisation by subgroup and cohort (last row: overall), with the "
          "test that it is equal across subgroups:")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    paths = written_paths(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_all(tables, paths)
    print("\nwrote " + ", ".join(str(p) for p in paths.values()))
    return 0
