"""The moments of a parquet dataset computed on Ray, a task per work item, added up here.

A dataset read as unit paths (:class:`~didmem.panel_scan.ParquetPaths`) is cut into work
items (the files that share units, and buckets of their units that fit the memory budget);
each item's per-cohort moments (:func:`~didmem.inference.moments.item_moments`) are a few
megabytes whatever its rows, so a Ray task reads its item where the data are and sends back
only its moments, which the driver adds up in the items' order: the same sum as a local
run. On a cluster, every node must see the files at the same path (shared storage: NFS, a
mounted bucket); ``address`` joins the cluster (``"auto"`` on a node of it,
``"ray://head:10001"`` from outside).
"""

from __future__ import annotations

import contextlib

from ..errors import DidmemError, optional_import

__all__ = ["ray_map", "dataset_moments_on_ray", "fit_dataset_on_ray"]


@contextlib.contextmanager
def _ray_session(address, init_kwargs):
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
    """A ``map(function, items)`` that runs each call as a Ray task and returns the results
    in the items' order; a :class:`~didmem.errors.DidmemError` raised in a task (a file with
    another schema, a duplicated row...) is raised here as itself."""

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


def dataset_moments_on_ray(dataset, *, address: str | None = None, init_kwargs=None,
                           num_cpus: float = 1):
    """:func:`~didmem.inference.moments.dataset_moments` with every work item a Ray task.

    Parameters
    ----------
    dataset : didmem.panel_scan.ParquetPaths
    address : str, optional
        The Ray cluster to join; ``None`` starts a local Ray (or uses the one running).
    init_kwargs : mapping, optional
        More keyword arguments of ``ray.init``.
    num_cpus : float
        CPUs a task asks for.
    """
    from ..inference.moments import dataset_moments

    with _ray_session(address, init_kwargs) as ray:
        return dataset_moments(dataset, map_items=ray_map(ray, num_cpus))


def fit_dataset_on_ray(estimator, dataset, *, address: str | None = None, init_kwargs=None,
                       num_cpus: float = 1):
    """:func:`~didmem.estimators._moments_route.fit_dataset` with every work item a Ray task
    (parameters as :func:`dataset_moments_on_ray`)."""
    from ..estimators._moments_route import fit_dataset

    with _ray_session(address, init_kwargs) as ray:
        return fit_dataset(estimator, dataset, map_items=ray_map(ray, num_cpus))
