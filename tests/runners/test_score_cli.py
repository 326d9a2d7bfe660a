"""``didmem score --config FILE``: the configuration file, its checks, and the written panel."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from .conftest import METRICS, make_backend

from didmem.cli import main
from didmem.runners import LocalRunner

pytest.importorskip("torch")
pytest.importorskip("pyarrow")


def write_config(tmp_path, two_checkpoints, instances, *, suffix=".toml", **extra) -> str:
    """A configuration beside its instances file, with relative paths."""
    tokens, ids = instances
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "units.npy", np.array(ids))
    if suffix == ".json":
        config = {
            "model": "tiny", "metrics": METRICS, "shard_size": 4,
            "backend": {"kind": "transformers", "device": "cpu", "batch_size": 3,
                        "prefix_length": 8, "suffix_length": 8,
                        "checkpoints": {str(k): str(v) for k, v in two_checkpoints.items()}},
            "instances": {"file": "tokens.npy", "units": "units.npy"},
            **extra,
        }
        path = tmp_path / "run.json"
        path.write_text(json.dumps(config))
        return str(path)
    lines = [
        'model = "tiny"',
        f"metrics = {json.dumps(METRICS)}",
        "shard_size = 4",
        *extra.get("top", []),
        "[backend]",
        'kind = "transformers"',
        'device = "cpu"',
        "batch_size = 3",
        "prefix_length = 8",
        "suffix_length = 8",
        "checkpoints = { " + ", ".join(
            f'{k} = "{v}"' for k, v in two_checkpoints.items()) + " }",
        "[instances]",
        'file = "tokens.npy"',
        'units = "units.npy"',
        *extra.get("tables", []),
    ]
    path = tmp_path / "run.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_score_writes_the_local_panel(two_checkpoints, instances, tmp_path, capsys, suffix):
    config = write_config(tmp_path, two_checkpoints, instances, suffix=suffix)
    out = tmp_path / "out"
    assert main(["score", "--config", config, "--out", str(out)]) == 0
    assert "scored 10 instances at 2 checkpoints with the local runner" in capsys.readouterr().out
    tokens, ids = instances
    expected = LocalRunner(progress=False).run(make_backend(two_checkpoints), tokens,
                                               unit_ids=ids, metrics=METRICS)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "scores.parquet"), expected)
    assert len(list(out.glob("part-*.parquet"))) == 6


def test_score_plan_prints_and_saves(two_checkpoints, instances, tmp_path, capsys):
    config = write_config(tmp_path, two_checkpoints, instances)
    assert main(["score", "--config", config, "--out", str(tmp_path / "o"), "--plan"]) == 0
    text = capsys.readouterr().out
    assert "scoring plan of tiny: 6 work items = 2 checkpoints x 3 shards" in text
    assert len(json.loads((tmp_path / "o" / "plan.json").read_text())["items"]) == 6
    assert not list((tmp_path / "o").glob("part-*"))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"top": ['colour = "red"']}, "unknown key 'colour'; allowed:"),
        ({"top": ["shard_size = 0"]}, "not valid TOML"),  # a repeated key
        ({"top": ["out = 3"]}, "out must be a string"),
        ({"tables": ["[runner]", 'kind = "slurm"']}, "[runner] kind must be 'local' or 'ray'"),
        ({"tables": ["[runner]", "num_workers = 2"]},
         "[runner] key 'num_workers' is not a setting of the local runner"),
        ({"tables": ["[runner]", 'kind = "ray"', "num_workers = 0"]},
         "'num_workers' parameter of RayRunner must be an integer in [1, inf] or none"),
    ],
)
def test_bad_configs_exit_2_with_one_line(two_checkpoints, instances, tmp_path, capsys,
                                          change, message):
    config = write_config(tmp_path, two_checkpoints, instances, **change)
    assert main(["score", "--config", config]) == 2
    err = capsys.readouterr().err
    assert err.startswith("didmem score: error: ") and err.count("\n") == 1
    assert message.lower() in err.lower()


def test_config_file_errors(tmp_path, capsys):
    cases = {
        "missing.toml": None,
        "bad.yaml": "a: 1",
        "bad.json": "{",
        "nobackend.json": json.dumps({"instances": {"file": "x.npy"}}),
        "kind.json": json.dumps({"backend": {"kind": "vllm"}, "instances": {"file": "x.npy"}}),
        "noinst.json": json.dumps({"backend": {"kind": "transformers",
                                               "checkpoints": {"0": "c"}},
                                   "instances": {"file": "x.npy"}}),
    }
    expected = {
        "missing.toml": "no such file",
        "bad.yaml": "must end in .toml or .json",
        "bad.json": "not valid JSON",
        "nobackend.json": "needs a [backend] table",
        "kind.json": "[backend] kind must be one of transformers; got 'vllm'",
        "noinst.json": "x.npy' does not exist",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        assert main(["score", "--config", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected[name] in err, (name, err)


def test_runner_as_a_string_is_one_line_naming_the_file_and_key(two_checkpoints, instances,
                                                                 tmp_path, capsys):
    """``runner = "ray"`` (a string, not a table) once ended in a ValueError traceback."""
    config = write_config(tmp_path, two_checkpoints, instances, top=['runner = "ray"'])
    assert main(["score", "--config", config]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"config {config}: [runner] must be a table" in err and "got str" in err


# Every key of a configuration, given a value of the wrong shape: a scalar where a table or a
# list is expected, a table where a scalar is expected.
_TABLE = {"a": 1}
_WRONG_SHAPES = [
    ((), "model", _TABLE), ((), "metrics", _TABLE), ((), "metrics", "sequence_loglik"),
    ((), "out", _TABLE), ((), "shard_size", _TABLE), ((), "shard_size", [4]),
    ((), "backend", "transformers"), ((), "instances", "tokens.npy"), ((), "runner", "ray"),
    ((), "runner", ["ray"]), ((), "design", "order"), ((), "estimate", "x"),
    ((), "report", 1),
    (("backend",), "kind", _TABLE), (("backend",), "checkpoints", "ckpt/step0"),
    (("backend",), "checkpoints", ["ckpt/step0"]), (("backend",), "batch_size", _TABLE),
    (("backend",), "device", _TABLE), (("backend",), "dtype", _TABLE),
    (("backend",), "prefix_length", _TABLE), (("backend",), "suffix_length", [8]),
    (("backend",), "eos_token_id", _TABLE), (("backend",), "chunk_tokens", _TABLE),
    (("backend", "checkpoints"), "0", _TABLE), (("backend", "checkpoints"), "0", ["a", "b", "c"]),
    (("backend", "checkpoints"), "0", 5),
    (("instances",), "file", _TABLE), (("instances",), "units", _TABLE),
    (("instances",), "units", ["units.npy"]),
    (("runner",), "kind", _TABLE), (("runner",), "max_retries", _TABLE),
    (("design",), "kind", _TABLE), (("design",), "file", _TABLE),
]


@pytest.mark.parametrize("where, key, value", _WRONG_SHAPES)
def test_every_key_of_the_wrong_shape_is_one_line_naming_file_and_key(
        two_checkpoints, instances, tmp_path, capsys, where, key, value):
    from pathlib import Path

    config = json.loads(Path(write_config(tmp_path, two_checkpoints, instances,
                                          suffix=".json")).read_text())
    config["design"] = {"kind": "order", "file": "order.parquet"}
    config["runner"] = {"kind": "local", "max_retries": 1}
    table = config
    for name in where:
        table = table[name]
    table[key] = value
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(config))
    assert main(["score", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("didmem score: error: ") and err.count("\n") == 1, err
    assert f"config {path}" in err, err
    assert key in err, err


_RAY_KEYS = ["num_workers", "num_gpus", "num_cpus", "address"]


@pytest.mark.parametrize("key", _RAY_KEYS)
def test_ray_runner_keys_of_the_wrong_shape(two_checkpoints, instances, tmp_path, capsys, key):
    path = write_config(tmp_path, two_checkpoints, instances, suffix=".json",
                        runner={"kind": "ray", key: {"a": 1}})
    assert main(["score", "--config", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"config {path}" in err and key in err, err


@pytest.mark.parametrize("key, value", [("name", {"a": 1}), ("steps", 1000),
                                        ("steps", {"a": 1}), ("revision_format", ["step{}"])])
def test_hub_backend_keys_of_the_wrong_shape(instances, tmp_path, capsys, key, value):
    np.save(tmp_path / "tokens.npy", instances[0])
    backend = {"kind": "transformers", "name": "EleutherAI/pythia-14m", "steps": [0, 1000]}
    backend[key] = value
    path = tmp_path / "hub.json"
    path.write_text(json.dumps({"backend": backend, "instances": {"file": "tokens.npy"}}))
    assert main(["score", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"config {path}" in err and key in err, err
