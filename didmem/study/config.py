"""A study's configuration: every table read and checked at once, before anything runs.

A configuration is a TOML or JSON file (or the same data as a dict); relative paths are read
from the file's own directory::

    model = "pythia-160m-deduped"        # a label for the plan (optional)
    metrics = ["sequence_loglik", "mean_token_loglik"]   # optional: the backend's defaults
    out = "scores/pythia-160m"           # optional; Study.run(out=...) and --out override it
    shard_size = 1024                    # instances per work item (optional: all)

    [backend]
    kind = "transformers"
    checkpoints = { 0 = "ckpt/step0", 1000 = "ckpt/step1000" }   # local directories, or
    # name = "EleutherAI/pythia-160m-deduped"  and  steps = [0, 1000]  (hub revisions)
    batch_size = 16                      # any other TransformersBackend keyword

    [instances]                          # not with [design] kind = "pythia"
    file = "instances.npy"               # 2-D int token ids (.npy), or a .parquet table
    units = "units.npy"                  # .npy only, optional: one id per row (default 0..n-1)
    unit_column = "unit"                 # .parquet only (default "unit")
    tokens_column = "token_ids"          # .parquet only (default "token_ids"): lists of ints

    [runner]
    kind = "local"                       # or "ray"
    max_retries = 2
    num_workers = 8                      # ray only (num_gpus, num_cpus, address, init_kwargs)

    [design]                             # which instances are treated when; see
    kind = "order"                       # didmem.study.designs
    file = "order.parquet"

    [estimate]                           # see didmem.study.estimate
    outcomes = ["mean_token_loglik"]

    [report]
    title = "Memorisation profile of my model"

Every mistake is reported as one :class:`~didmem.errors.ConfigError` naming the file and the
key, when the configuration is read.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ..backends._spec import BACKEND_KINDS, BackendSpec
from ..errors import ConfigError, ParameterError
from ..runners import RUNNERS
from ._tables import (closest, load_npy, need_table, optional_table, read_token_ids,
                      string_list, unknown_keys)
from .designs import Design, parse_design
from .estimate import ONE_EXPOSURE_ESTIMATORS, EstimateSettings, report_options

__all__ = ["StudyConfig", "InstanceFiles", "read_config", "TOP_KEYS", "INSTANCES_KEYS",
           "runner_keys", "runner_table"]


@dataclass(frozen=True)
class InstanceFiles:
    """The ``[instances]`` table of a configuration: where the token ids are.

    Its keys are this class's fields.

    Parameters
    ----------
    file : Path
        A ``.npy`` file of 2-D integer token ids, or a ``.parquet`` table.
    units : Path, optional
        ``.npy`` only: one unit id per row (default ``0..n-1``).
    unit_column : str
        ``.parquet`` only: the column of unit ids.
    tokens_column : str
        ``.parquet`` only: the column of token ids (lists of ints).
    """

    file: Path
    units: Path | None = None
    unit_column: str = "unit"
    tokens_column: str = "token_ids"

    def load(self, where: str):
        """Token ids and unit ids from the files; ``where`` starts each error message."""
        tokens, units = self._load(where)
        if units is not None:
            _refuse_duplicates(units, f"{where} units {str(self.units)!r}" if self.units
                               else f"{where} file {str(self.file)!r} column "
                                    f"{self.unit_column!r}")
        return tokens, units

    def _load(self, where: str):
        file = self.file
        if not file.is_file():
            raise ConfigError(f"{where} file {str(file)!r} does not exist.")
        if file.suffix == ".npy":
            tokens = read_token_ids(file, f"{where} file")
            units = None
            if self.units is not None:
                if not self.units.is_file():
                    raise ConfigError(f"{where} units {str(self.units)!r} does not exist.")
                units = load_npy(self.units, f"{where} units")
            return tokens, units
        import pandas as pd

        table = pd.read_parquet(file)
        missing = [c for c in (self.unit_column, self.tokens_column) if c not in table.columns]
        if missing:
            raise ConfigError(
                f"{where} file {str(file)!r} has no column {missing[0]!r}; it has "
                f"{list(table.columns)} (set unit_column / tokens_column)."
            )
        tokens = [np.asarray(t, dtype=np.int64) for t in table[self.tokens_column]]
        return tokens, table[self.unit_column].to_numpy()

    def check(self, where: str) -> None:
        """The files exist (read when the study is read; the token ids are loaded later)."""
        if not self.file.is_file():
            raise ConfigError(f"{where} file {str(self.file)!r} does not exist.")
        if self.units is not None and not self.units.is_file():
            raise ConfigError(f"{where} units {str(self.units)!r} does not exist.")


def _refuse_duplicates(units, what: str) -> None:
    """Unit ids must be distinct; the message names the file they came from."""
    import pandas as pd

    from .._messages import listing

    ids = pd.Series(np.asarray(units).ravel())
    repeated = ids[ids.duplicated()].unique()
    if len(repeated):
        raise ConfigError(f"{what} holds duplicate unit ids: {len(repeated)} ids appear more "
                          f"than once, e.g. {listing(list(repeated))}. Every instance needs "
                          "its own id.")


@dataclass(frozen=True)
class StudyConfig:
    """A validated study configuration (see the module's docstring for the file).

    The top-level keys of the file are this class's fields but ``where``, ``base`` and
    ``data``.

    Attributes
    ----------
    where : str
        ``config FILE`` (or ``config <dict>``): the start of every message.
    base : Path
        The directory relative paths are read from.
    data : dict
        The configuration as read (what a run records in ``OUT/study.json``).
    backend : BackendSpec
        The backend's recipe.
    metrics : tuple of str
        The metrics to score: the file's, or the backend's defaults.
    """

    where: str
    base: Path
    data: dict
    backend: BackendSpec
    metrics: tuple
    checkpoints: tuple
    instances: InstanceFiles | None = None
    model: str | None = None
    out: Path | None = None
    shard_size: int | None = None
    runner: dict | None = None
    design: Design | None = None
    estimate: EstimateSettings | None = None
    report: dict | None = None

    def load_instances(self):
        """Token ids and unit ids from the instances file."""
        return self.instances.load(f"{self.where}: [instances]")

    def make_runner(self, out_dir, *, progress=None):
        """The runner this configuration asks for, writing to ``out_dir``."""
        settings = {k: v for k, v in self.runner.items() if k != "kind"}
        common = dict(shard_size=self.shard_size, model=self.model, progress=progress)
        return RUNNERS[self.runner["kind"]](out_dir, **settings, **common)


_NOT_KEYS = ("where", "base", "data", "checkpoints")
TOP_KEYS = frozenset(f.name for f in fields(StudyConfig)) - set(_NOT_KEYS)
"""The keys of a configuration's top level."""
INSTANCES_KEYS = frozenset(f.name for f in fields(InstanceFiles))
"""The keys of ``[instances]``: the fields of :class:`InstanceFiles`."""


def runner_keys(kind: str) -> frozenset:
    """The keys of ``[runner]`` for a runner ``kind``: ``kind`` and its class's keywords.

    Keywords that the top level sets (``shard_size``, ``model``) and ``progress`` (the
    command line's) are not keys of the table.
    """
    keywords = {name for name, p in inspect.signature(RUNNERS[kind]).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return frozenset({"kind"} | keywords - TOP_KEYS - {"progress"})


def runner_table(table, where: str, kind=None, address=None) -> dict:
    """Check ``[runner]`` (``kind`` and ``address`` override the table's); return it."""
    if not isinstance(table, dict):
        raise ConfigError(
            f"{where}: [runner] must be a table, such as [runner] kind = \"ray\"; "
            f"got {type(table).__name__} {table!r}."
        )
    run = dict(table)
    if kind is not None:
        run["kind"] = kind
    run.setdefault("kind", "local")
    if not isinstance(run["kind"], str) or run["kind"] not in RUNNERS:
        raise ConfigError(
            f"{where}: [runner] kind must be {' or '.join(repr(k) for k in RUNNERS)}; got "
            f"{run['kind']!r}{closest(run['kind'], RUNNERS)}."
        )
    if address is not None:
        if run["kind"] != "ray":
            raise ConfigError("--address needs the ray runner (--runner ray).")
        run["address"] = address
    allowed = runner_keys(run["kind"])
    unknown = sorted(set(run) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: [runner] key {unknown[0]!r} is not a setting of the {run['kind']} "
            f"runner{closest(unknown[0], allowed)}; allowed: {', '.join(sorted(allowed))}."
        )
    return run


def _instances(data: dict, where: str, base: Path) -> InstanceFiles:
    inst = need_table(data, "instances", where)
    here = f"{where}: [instances]"
    unknown_keys(inst, INSTANCES_KEYS, here)
    if not isinstance(inst.get("file"), str):
        raise ConfigError(f"{here} needs file = \"PATH.npy|.parquet\"; got "
                          f"{inst.get('file')!r}.")
    file = base / inst["file"]
    if file.suffix not in (".npy", ".parquet"):
        raise ConfigError(f"{here} file must be a .npy or .parquet file; got {inst['file']!r}.")
    units = inst.get("units")
    if units is not None and not isinstance(units, str):
        raise ConfigError(f"{here} units must be the path of a .npy file (a string); got "
                          f"{type(units).__name__}.")
    for key in ("unit_column", "tokens_column"):
        if key in inst and not isinstance(inst[key], str):
            raise ConfigError(f"{here} {key} must be a column name (a string); got "
                              f"{type(inst[key]).__name__}.")
    if units is not None and file.suffix != ".npy":
        raise ConfigError(f"{here} units goes with a .npy file only.")
    files = InstanceFiles(file=file, units=None if units is None else base / units,
                          **{k: v for k, v in inst.items() if k not in ("file", "units")})
    files.check(here)
    return files


def _backend(data: dict, where: str, base: Path):
    backend = dict(need_table(data, "backend", where))
    kind = backend.pop("kind", None)
    if not isinstance(kind, str) or kind not in BACKEND_KINDS:
        raise ConfigError(f"{where}: [backend] kind must be one of {', '.join(BACKEND_KINDS)}; "
                          f"got {kind!r}{closest(kind, BACKEND_KINDS)}.")
    if isinstance(backend.get("checkpoints"), dict):
        backend["checkpoints"] = {
            str(k): str(base / v) if isinstance(v, str) and not Path(v).is_absolute() else v
            for k, v in backend["checkpoints"].items()
        }
    try:
        spec = BackendSpec(kind, backend)
        built = spec.build()  # checks the keywords and checkpoints without loading any weights
    except (ParameterError, TypeError) as exc:
        raise ConfigError(f"{where}: [backend] {exc}") from None
    return spec, built


def _metrics(data: dict, where: str, backend) -> tuple:
    metrics = data.get("metrics")
    if metrics is not None:
        metrics = string_list(metrics, "metrics", f"{where}:")
    try:
        metrics = backend.resolve_metrics(metrics)
    except ParameterError as exc:
        raise ConfigError(f"{where}: metrics: {exc}") from None
    known = backend.metric_names
    if known is not None:
        unknown = [m for m in metrics if m not in known]
        if unknown:
            raise ConfigError(f"{where}: metrics names {unknown[0]!r}"
                              f"{closest(unknown[0], known)}, which {type(backend).__name__} "
                              f"does not score; it scores {', '.join(known)}.")
    return metrics


def _scalars(data: dict, where: str) -> dict:
    shard = data.get("shard_size")
    if shard is not None and (isinstance(shard, bool) or not isinstance(shard, int) or shard < 1):
        raise ConfigError(f"{where}: shard_size must be a positive integer; got {shard!r}.")
    for key in ("model", "out"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ConfigError(f"{where}: {key} must be a string; got {data[key]!r}.")
    return {"shard_size": shard, "model": data.get("model")}


def _check_outcomes(settings: EstimateSettings, metrics: tuple, design, where: str) -> None:
    """Outcomes, lower_is_better and covariates name columns the study will have."""
    here = f"{where}: [estimate]"
    for key in ("outcomes", "lower_is_better"):
        for name in getattr(settings, key) or ():
            if name not in metrics:
                raise ConfigError(
                    f"{here} {key} names {name!r}{closest(name, metrics)}, which is not scored; "
                    f"the metrics are {', '.join(metrics)} (set metrics to score more)."
                )
    covariates = design.covariates() if design is not None else ()
    for name in settings.covariates:
        if name not in covariates:
            raise ConfigError(f"{here} covariates names {name!r}{closest(name, covariates)}; "
                              f"the study's covariates are {', '.join(covariates) or 'none'}.")
    if design is not None and design.never_treated() == 0 \
            and settings.option("control_group") == "never_treated":
        raise ConfigError(
            f"{where}: [design] n_validation = 0 leaves no never-treated instance, which "
            "[estimate] control_group = 'never_treated' needs; draw validation instances or "
            "set control_group = 'not_yet_treated'."
        )


def read_config(data: dict, where: str, base: Path, *, runner=None,
                address=None) -> StudyConfig:
    """Check every table of a configuration; return the :class:`StudyConfig`.

    Parameters
    ----------
    data : dict
        The configuration, as read from its file.
    where : str
        ``config FILE``: the start of every message.
    base : Path
        The directory relative paths are read from.
    runner : {"local", "ray"}, optional
        Overrides ``[runner] kind``.
    address : str, optional
        Overrides ``[runner] address`` (Ray only).

    Raises
    ------
    ConfigError
        One line naming the file and the key that is wrong.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a table of settings.")
    unknown_keys(data, TOP_KEYS, f"{where}:")
    spec, backend = _backend(data, where, base)
    design = None
    if "design" in data:
        design = parse_design(data["design"], f"{where}: [design]", base)
    if design is not None and design.draws_instances:
        if "instances" in data:
            raise ConfigError(
                f"{where}: [instances] is not used with [design] kind = {design.kind!r}, which "
                "draws the instances itself; remove it."
            )
        instances = None
    else:
        instances = _instances(data, where, base)
    run = runner_table(data.get("runner", {}), where, runner, address)
    metrics = _metrics(data, where, backend)
    estimate = EstimateSettings.from_table(optional_table(data, "estimate", where),
                                           f"{where}: [estimate]")
    _check_outcomes(estimate, metrics, design, where)
    report = report_options(optional_table(data, "report", where), f"{where}: [report]")
    scalars = _scalars(data, where)
    config = StudyConfig(
        where=where, base=base, data=data, backend=spec, metrics=metrics,
        checkpoints=tuple(backend.checkpoints), instances=instances,
        out=None if data.get("out") is None else base / data["out"], runner=run,
        design=design, estimate=estimate, report=report, **scalars,
    )
    try:  # runner settings are checked by the runner's constructor
        config.make_runner(None)
    except ParameterError as exc:
        raise ConfigError(f"{where}: [runner] {exc}") from None
    if design is not None:
        design.check_backend(spec, config.checkpoints)
        design.check_files(config.checkpoints)
        _check_exposure(estimate, design, where)
    return config


def _check_exposure(settings: EstimateSettings, design, where: str) -> None:
    """``[estimate] exposure = k`` needs a design that trains some instance k times; an
    estimator of one exposure per instance, a design that trains each at most once."""
    if settings.estimator in ONE_EXPOSURE_ESTIMATORS:
        most = design.max_exposures()
        if most is not None and most > 1:
            raise ConfigError(
                f"{where}: [estimate] estimator = {settings.estimator!r} takes one exposure "
                f"per instance, but the [design] trains some instance {most} times "
                f"({design.label if hasattr(design, 'label') else design.kind}); use "
                "estimator = 'did' (exposure = k), or a training order without repeats."
            )
        return
    exposure = settings.option("exposure")
    if not isinstance(exposure, int) or exposure <= 1:
        return
    most = design.max_exposures()
    if most is not None and most < exposure:
        raise ConfigError(
            f"{where}: [estimate] exposure = {exposure} needs instances trained {exposure} "
            f"times, but the [design] trains each at most {most} time{'s' * (most != 1)} "
            f"({design.label if hasattr(design, 'label') else design.kind}); remove exposure, "
            "or give a training order with repeats (several rows of a unit)."
        )
