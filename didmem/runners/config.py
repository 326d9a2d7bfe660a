"""The configuration file of ``didmem score`` and ``didmem run`` (:mod:`didmem.cli.score`).

A configuration is a TOML or JSON file (``.toml`` or ``.json``) with four parts; relative
paths are read from the file's own directory::

    model = "pythia-160m-deduped"        # a label for the plan (optional)
    metrics = ["sequence_loglik", "mean_token_loglik"]   # optional: the backend's defaults
    out = "scores/pythia-160m"           # optional; --out overrides it
    shard_size = 1024                    # instances per work item (optional: all)

    [backend]
    kind = "transformers"
    checkpoints = { 0 = "ckpt/step0", 1000 = "ckpt/step1000" }   # local directories, or
    # name = "EleutherAI/pythia-160m-deduped"  and  steps = [0, 1000]  (hub revisions)
    batch_size = 16                      # any other TransformersBackend keyword

    [instances]
    file = "instances.npy"               # 2-D int token ids (.npy), or a .parquet table
    units = "units.npy"                  # .npy only, optional: one id per row (default 0..n-1)
    unit_column = "unit"                 # .parquet only (default "unit")
    tokens_column = "token_ids"          # .parquet only (default "token_ids"): lists of ints

    [runner]
    kind = "local"                       # or "ray"; --runner overrides it
    max_retries = 2
    num_workers = 8                      # ray only
    num_gpus = 1                         # ray only
    num_cpus = 1                         # ray only
    address = "auto"                     # ray only; --address overrides it

    [design]                             # optional: which instances are treated when
    kind = "order"                       # or "pythia"; see didmem.runners.design
    file = "order.parquet"

With a ``[design]`` table the run also writes ``OUT/panel.parquet`` (the scores with the
cohorts and the instance covariates), and ``didmem run`` (:mod:`didmem.cli.run`) reads the
same file plus its ``[estimate]`` and ``[report]`` tables.

Every mistake is reported as one line naming the file and the key.
"""

from __future__ import annotations

import json
import inspect
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ..backends._spec import BACKEND_KINDS, BackendSpec
from ..errors import ParameterError
from ._base import LocalRunner
from .ray_runner import RayRunner

__all__ = ["ScoreConfig", "InstanceFiles", "load_config", "RUNNERS", "RUNNER_KINDS", "TOP_KEYS",
           "INSTANCES_KEYS", "runner_keys"]


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
        file = self.file
        if not file.is_file():
            raise ParameterError(f"{where} file {str(file)!r} does not exist.")
        if file.suffix == ".npy":
            tokens = np.load(file, allow_pickle=False)
            if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
                raise ParameterError(
                    f"{where} file {str(file)!r} must hold a 2-D integer array of token ids; "
                    f"got shape {tokens.shape} and dtype {tokens.dtype}."
                )
            units = None
            if self.units is not None:
                if not self.units.is_file():
                    raise ParameterError(f"{where} units {str(self.units)!r} does not exist.")
                units = np.load(self.units, allow_pickle=False)
            return tokens, units
        import pandas as pd

        table = pd.read_parquet(file)
        missing = [c for c in (self.unit_column, self.tokens_column) if c not in table.columns]
        if missing:
            raise ParameterError(
                f"{where} file {str(file)!r} has no column {missing[0]!r}; it has "
                f"{list(table.columns)} (set unit_column / tokens_column)."
            )
        tokens = [np.asarray(t, dtype=np.int64) for t in table[self.tokens_column]]
        return tokens, table[self.unit_column].to_numpy()


@dataclass(frozen=True)
class ScoreConfig:
    """A validated ``didmem score`` configuration (see the module's docstring for the file).

    The file's top-level keys are this class's fields but ``path``.
    """

    path: Path
    backend: BackendSpec
    instances: InstanceFiles | None
    metrics: tuple | None
    model: str | None
    out: Path | None
    shard_size: int | None
    runner: dict
    design: object = None
    estimate: dict | None = None
    report: dict | None = None

    def load_instances(self):
        """Token ids and unit ids from the instances file."""
        return self.instances.load(f"config {self.path}: [instances]")

    def make_runner(self, out_dir, *, progress=None):
        """The runner this configuration asks for, writing to ``out_dir``."""
        settings = {k: v for k, v in self.runner.items() if k != "kind"}
        common = dict(shard_size=self.shard_size, model=self.model, progress=progress)
        return RUNNERS[self.runner["kind"]](out_dir, **settings, **common)


RUNNERS = {"local": LocalRunner, "ray": RayRunner}
"""The runner classes that ``[runner] kind`` names."""
RUNNER_KINDS = tuple(RUNNERS)
"""The names of :data:`RUNNERS`."""

TOP_KEYS = frozenset(f.name for f in fields(ScoreConfig)) - {"path"}
"""The keys of a configuration's top level: the fields of :class:`ScoreConfig`."""
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


def _read(path: Path) -> dict:
    if not path.is_file():
        raise ParameterError(f"config {path}: no such file.")
    text = path.read_text()
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"config {path}: not valid JSON: {exc}.") from None
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib
            except ImportError:
                raise ParameterError(
                    f"config {path}: reading TOML needs Python 3.11 or the 'tomli' package; "
                    "or write the configuration as JSON."
                ) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ParameterError(f"config {path}: not valid TOML: {exc}.") from None
    else:
        raise ParameterError(
            f"config {path}: the file must end in .toml or .json; got {path.suffix or 'none'!r}."
        )
    if not isinstance(data, dict):
        raise ParameterError(f"config {path}: the top level must be a table of settings.")
    return data


def _table(data: dict, key: str, path: Path, allowed: set | None) -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ParameterError(
            f"config {path}: needs a [{key}] table"
            + ("." if value is None else f"; got {type(value).__name__}.")
        )
    if allowed is not None:
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ParameterError(
                f"config {path}: unknown key {unknown[0]!r} in [{key}]; allowed: "
                f"{', '.join(sorted(allowed))}."
            )
    return value


def _optional_table(data: dict, key: str, path: Path) -> dict | None:
    if key not in data:
        return None
    if not isinstance(data[key], dict):
        raise ParameterError(f"config {path}: [{key}] must be a table.")
    return data[key]


def _instances(data: dict, path: Path, base: Path):
    inst = _table(data, "instances", path, INSTANCES_KEYS)
    if not isinstance(inst.get("file"), str):
        raise ParameterError(f"config {path}: [instances] needs file = \"PATH.npy|.parquet\".")
    file = base / inst["file"]
    if file.suffix not in (".npy", ".parquet"):
        raise ParameterError(
            f"config {path}: [instances] file must be a .npy or .parquet file; got {inst['file']!r}."
        )
    units = inst.get("units")
    if units is not None and not isinstance(units, str):
        raise ParameterError(
            f"config {path}: [instances] units must be the path of a .npy file (a string); "
            f"got {type(units).__name__}."
        )
    for key in ("unit_column", "tokens_column"):
        if key in inst and not isinstance(inst[key], str):
            raise ParameterError(
                f"config {path}: [instances] {key} must be a column name (a string); got "
                f"{type(inst[key]).__name__}."
            )
    if units is not None and file.suffix != ".npy":
        raise ParameterError(f"config {path}: [instances] units goes with a .npy file only.")
    return file, units, inst


def load_config(path, *, runner: str | None = None, address: str | None = None) -> ScoreConfig:
    """Read and check a ``didmem score`` configuration file.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.toml`` or ``.json`` file.
    runner : {"local", "ray"}, optional
        Overrides ``[runner] kind``.
    address : str, optional
        Overrides ``[runner] address`` (Ray only).

    Raises
    ------
    ParameterError
        One line naming the file and the key that is wrong.
    """
    path = Path(path)
    data = _read(path)
    base = path.resolve().parent
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise ParameterError(
            f"config {path}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(TOP_KEYS))}."
        )

    backend = dict(_table(data, "backend", path, None))
    kind = backend.pop("kind", None)
    if kind not in BACKEND_KINDS:
        raise ParameterError(
            f"config {path}: [backend] kind must be one of {', '.join(BACKEND_KINDS)}; "
            f"got {kind!r}."
        )
    if isinstance(backend.get("checkpoints"), dict):
        backend["checkpoints"] = {
            str(k): str(base / v) if isinstance(v, str) and not Path(v).is_absolute() else v
            for k, v in backend["checkpoints"].items()
        }
    try:
        spec = BackendSpec(kind, backend)
        spec.build()  # checks the keywords and checkpoints without loading any weights
    except (ParameterError, TypeError) as exc:
        raise ParameterError(f"config {path}: [backend] {exc}") from None

    design = None
    if "design" in data:
        from .design import parse_design

        design = parse_design(data["design"], path, base)
    if getattr(design, "draws_instances", False):
        if "instances" in data:
            raise ParameterError(
                f"config {path}: [instances] is not used with [design] kind = 'pythia', which "
                "draws the instances from the data order; remove it."
            )
        file, units, inst = None, None, {}
    else:
        file, units, inst = _instances(data, path, base)

    run = data.get("runner", {})
    if not isinstance(run, dict):
        raise ParameterError(
            f"config {path}: [runner] must be a table, such as [runner] kind = \"ray\"; "
            f"got {type(run).__name__} {run!r}."
        )
    run = dict(run)
    if runner is not None:
        run["kind"] = runner
    run.setdefault("kind", "local")
    if not isinstance(run["kind"], str) or run["kind"] not in RUNNERS:
        raise ParameterError(
            f"config {path}: [runner] kind must be "
            f"{' or '.join(repr(k) for k in RUNNER_KINDS)}; got {run['kind']!r}."
        )
    if address is not None:
        if run["kind"] != "ray":
            raise ParameterError("--address needs the ray runner (--runner ray).")
        run["address"] = address
    allowed = runner_keys(run["kind"])
    unknown = sorted(set(run) - allowed)
    if unknown:
        raise ParameterError(
            f"config {path}: [runner] key {unknown[0]!r} is not a setting of the "
            f"{run['kind']} runner; allowed: {', '.join(sorted(allowed))}."
        )

    metrics = data.get("metrics")
    if metrics is not None and (
        not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics)
    ):
        raise ParameterError(f"config {path}: metrics must be a list of metric names.")
    shard = data.get("shard_size")
    if shard is not None and (isinstance(shard, bool) or not isinstance(shard, int) or shard < 1):
        raise ParameterError(f"config {path}: shard_size must be a positive integer; got {shard!r}.")
    for key in ("model", "out"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ParameterError(f"config {path}: {key} must be a string.")
    config = ScoreConfig(
        path=path,
        backend=spec,
        instances=None if file is None else InstanceFiles(
            file=file, units=None if units is None else base / units,
            **{k: v for k, v in inst.items() if k not in ("file", "units")}),
        metrics=None if metrics is None else tuple(metrics),
        model=data.get("model"),
        out=None if data.get("out") is None else base / data["out"],
        shard_size=shard,
        runner=run,
        design=design,
        estimate=_optional_table(data, "estimate", path),
        report=_optional_table(data, "report", path),
    )
    try:  # runner settings are checked by the runner's constructor
        config.make_runner(None)
    except ParameterError as exc:
        raise ParameterError(f"config {path}: [runner] {exc}") from None
    return config
