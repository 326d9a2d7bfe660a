"""Run independent tasks on Ray and get their results back in order (``pip install
'didmem[ray]'``).

The estimation wing cuts a parquet folder into work items whose per-cohort moments add up
(:func:`didmem.inference.moments.dataset_moments`); it takes a ``map(function, items)``, and
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

__all__ = ["ray_map", "ray_session"]


@contextlib.contextmanager
def ray_session(address: str | None = None, init_kwargs=None):
    """Ray, started (or joined at ``address``) for the block and shut down after it; a Ray
    already running is used as it is and left running."""
    ray = optional_import("ray", "ray")
    started = False
    if not ray.is_initialized():
        ray.init(address=address, **{"log_to_driver": False, **dict(init_kwargs or {})})
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def ray_map(ray, num_cpus: float = 1):
    """A ``map(function, items)`` that runs each call as a Ray task asking for ``num_cpus``
    and yields the results in the items' order; a :class:`~didmem.errors.DidmemError` raised
    in a task (a file with another schema, a duplicated row...) is raised here as itself and
    the other tasks are cancelled."""

    def mapper(function, items):
        task = ray.remote(num_cpus=num_cpus)(function)
        refs = [task.remote(item) for item in items]
        for ref in refs:
            try:
                yield ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, DidmemError):
                    for other in refs:
                        ray.cancel(other)
                    raise cause from None
                raise

    return mapper
