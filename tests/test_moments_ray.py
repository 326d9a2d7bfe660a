"""Moments of a folder of 8 parquet files on a local Ray equal the local ones (1e-9), and a
bad file raised in a Ray task reaches the caller as didmem's own error."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.errors import PanelError
from didmem.inference.moments import dataset_moments
from didmem.panel.scan import ParquetPaths

from .test_panel_scan import COLUMNS, _write

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'didmem[ray]'")

from didmem.runners.ray_tasks import ray_map, ray_session  # noqa: E402


def dataset_moments_on_ray(data):
    with ray_session() as session:  # the module's Ray, left running
        return dataset_moments(data, map_items=ray_map(session))


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def frame():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=25, n_never_treated=30,
                                           n_times=7, seed=8)
    return df


@pytest.mark.parametrize("spread", [True, False])
def test_ray_equals_local(tmp_path, frame, local_ray, spread):
    folder = _write(tmp_path / "data", frame, n_files=8, spread=spread)
    data = ParquetPaths(folder, **COLUMNS, memory_bytes=600)  # buckets of 9 units
    assert len(data.items()) > (1 if spread else 8)
    local = dataset_moments(data)
    on_ray = dataset_moments_on_ray(data)
    np.testing.assert_array_equal(on_ray.cohorts, local.cohorts)
    np.testing.assert_array_equal(on_ray.count, local.count)
    for name in ("weight", "mean", "cross"):
        np.testing.assert_allclose(getattr(on_ray, name), getattr(local, name), rtol=1e-9,
                                   atol=1e-12)


def test_a_bad_file_on_ray_raises_didmems_error(tmp_path, frame, local_ray):
    folder = _write(tmp_path / "data", frame, n_files=8)
    bad = pd.read_parquet(folder / "part-006.parquet")
    pd.concat([bad, bad.iloc[:1]]).to_parquet(folder / "part-006.parquet")
    with pytest.raises(PanelError, match=r"Duplicate \(unit, time\).*part-006\.parquet"):
        dataset_moments_on_ray(ParquetPaths(folder, **COLUMNS))


def test_cli_runner_ray_equals_local(tmp_path, frame, local_ray, capsys):
    from didmem.cli import main

    folder = _write(tmp_path / "data", frame, n_files=8)
    frames = []
    for runner in ("local", "ray"):
        out = tmp_path / f"{runner}.parquet"
        assert main(["estimate", str(folder), "--outcome", "y", "--out", str(out),
                     "--runner", runner, "--n-bootstrap", "0"]) == 0
        frames.append(didmem.load_result(out).to_frame())
    for col in ("estimate", "std_error", "ci_lower", "ci_upper"):
        np.testing.assert_allclose(frames[1][col], frames[0][col], rtol=1e-9, atol=1e-12)
