"""Run independent tasks on Ray and get their results back in order (``pip install
'didmem[ray]'``).

The estimation wing cuts a parquet folder into work items whose per-cohort moments add up
(:func:`didmem.inference.moments.cohort.dataset_moments`); it takes a ``map(function, items)``, and
:func:`ray_map` is that map on Ray: each call a task, run where Ray places it, the results
returned in the items' order. Each task reads its files where the data are and sends back
only its moments (a few megabytes), so the sum is the local one. On a cluster every node must
see the files at the same path (shared storage: NFS, a mounted bucket); ``address`` joins it
(``"auto"`` on a node of the cluster, ``"ray://head:10001"`` from outside)::

    from didmem.runners.ray_tasks import ray_map, ray_session

    with ray_session(address="auto") as ray:
        data = didmem.Panel.scan("scores/", unit="unit", time="time", cohort="cohort",
                                 outcome="y", map_items=ray_map(ray))
        result = didmem.DiDEstimator().fit(data)
"""

from __future__ import annotations

import contextlib

from ..errors import DidmemError, optional_import
from ._ray_connect import init_ray

__all__ = ["ray_map", "ray_session", "read_outcomes"]


@contextlib.contextmanager
def ray_session(address: str | None = None, init_kwargs=None):
    """Ray, started (or joined at ``address``) for the block and shut down after it; a Ray
    already running is used as it is and left running. An address where nothing answers
    fails within seconds (:func:`didmem.runners._ray_connect.init_ray`)."""
    ray = optional_import("ray", "ray")
    started = False
    if not ray.is_initialized():
        init_ray(ray, address, **{"log_to_driver": False, **dict(init_kwargs or {})})
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def ray_map(ray, num_cpus: float = 1):
    """A ``map(function, items)`` that runs each call as a Ray task asking for ``num_cpus``
    and yields the results in the items' order.

    A :class:`~didmem.errors.DidmemError` raised in a task (a file with another schema, a
    duplicated row...) is raised here as itself, after the error path has settled: the
    other tasks are cancelled, and every task's result or error is collected (waiting for
    the cancellations, a few seconds at most), so that Ray has no failed task left whose
    error it would print with its traceback when the session shuts down. The same happens
    when the caller stops early or another error ends the map."""

    def mapper(function, items):
        task = ray.remote(num_cpus=num_cpus)(function)
        refs = [task.remote(item) for item in items]
        done = 0
        try:
            for ref in refs:
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, DidmemError):
                        raise cause from None
                    raise
                done += 1
                yield value
        finally:
            if done < len(refs):
                _settle(ray, refs[done:])

    return mapper


SETTLE_SECONDS = 30.0
"""How long the error path waits for cancelled tasks to end before shutting Ray down."""


def _settle(ray, refs) -> None:
    """Cancel ``refs`` and collect each one's outcome, ignoring it: a cancelled or failed
    task whose error is never read is printed by Ray, traceback and all, as an "unhandled
    error" when the driver lets go of it (at shutdown)."""
    for ref in refs:
        try:
            ray.cancel(ref)
        except Exception:  # noqa: BLE001 - already finished, or Ray going down: nothing to stop
            pass
    read_outcomes(ray, refs)


def read_outcomes(ray, refs) -> None:
    """Wait for ``refs`` to end (at most :data:`SETTLE_SECONDS`) and read each outcome,
    ignoring it, so that no failed task is left unread for Ray to print at shutdown."""
    if not refs:
        return
    try:
        ray.wait(list(refs), num_returns=len(refs), timeout=SETTLE_SECONDS)
    except Exception:  # noqa: BLE001 - the outcomes below are read whatever this says
        pass
    for ref in refs:
        try:
            ray.get(ref, timeout=0)
        except Exception:  # noqa: BLE001 - cancelled, failed or still running: read, ignored
            pass
