"""Moments of a folder of 8 parquet files on a local Ray equal the local ones (1e-9), and a
bad file raised in a Ray task reaches the caller as didmem's own error."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.errors import PanelError
from didmem.inference.moments.cohort import dataset_moments
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


def test_two_bad_files_on_ray_settle_before_the_error(tmp_path, frame, local_ray, capfd):
    """The error path reads every task's outcome before the error leaves the map (issue 50:
    'didmem estimate DIR --runner ray' sometimes ended with Ray's stack trace, printed for
    tasks cancelled or failed but never read, while Ray shut down)."""
    import gc

    folder = _write(tmp_path / "data", frame, n_files=8)
    for name in ("part-002.parquet", "part-006.parquet"):
        bad = pd.read_parquet(folder / name)
        pd.concat([bad, bad.iloc[:1]]).to_parquet(folder / name)
    with pytest.raises(PanelError, match=r"Duplicate \(unit, time\).*part-002\.parquet"):
        dataset_moments_on_ray(ParquetPaths(folder, **COLUMNS))
    gc.collect()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Unhandled error" not in err


class _FakeRay:
    """The few calls ray_map makes, recorded in order; task ``k`` of ``fail`` raises."""

    class exceptions:  # noqa: N801 - ray's own spelling
        class RayTaskError(Exception):
            def __init__(self, cause):
                super().__init__(str(cause))
                self.cause = cause

    def __init__(self, fail=()):
        self.fail, self.calls = set(fail), []

    def remote(self, num_cpus=1):
        def wrap(function):
            class Task:
                @staticmethod
                def remote(item):
                    return item
            return Task
        return wrap

    def get(self, ref, timeout=None):
        self.calls.append(("get", ref))
        if ref in self.fail:
            raise self.exceptions.RayTaskError(PanelError(f"bad item {ref}"))
        return ref * 10

    def cancel(self, ref):
        self.calls.append(("cancel", ref))

    def wait(self, refs, num_returns, timeout):
        self.calls.append(("wait", tuple(refs)))
        return refs, []


def test_ray_map_cancels_waits_and_reads_every_task_on_an_error():
    fake = _FakeRay(fail={2, 4})
    results = []
    with pytest.raises(PanelError, match="bad item 2"):
        for value in ray_map(fake)(None, range(6)):
            results.append(value)
    assert results == [0, 10]
    calls = fake.calls
    cancels = [ref for kind, ref in calls if kind == "cancel"]
    assert cancels == [2, 3, 4, 5]  # every task not read yet
    wait = calls.index(("wait", (2, 3, 4, 5)))
    assert all(calls.index(("cancel", r)) < wait for r in cancels)
    assert {ref for kind, ref in calls[wait:] if kind == "get"} == {2, 3, 4, 5}
    # a caller that stops early settles the rest too; a full map cancels nothing
    fake = _FakeRay()
    gen = ray_map(fake)(None, range(4))
    next(gen)
    gen.close()
    assert [ref for kind, ref in fake.calls if kind == "cancel"] == [1, 2, 3]
    fake = _FakeRay()
    assert list(ray_map(fake)(None, range(3))) == [0, 10, 20]
    assert not [c for c in fake.calls if c[0] in ("cancel", "wait")]
