"""Runners: execute a scoring plan locally or on Ray, resumably, with the same result.

A run is cut into work items (model, checkpoint, shard of instances) by
:class:`ScoringPlan`. :class:`LocalRunner` runs them one after the other in this process;
:class:`RayRunner` (``pip install 'didmem[ray]'``) runs them on Ray actors, one model per
actor at a time. Both use the backends' :meth:`~didmem.backends.OutcomeBackend.run_item` and
write the same atomic parquet parts, skip finished parts on a re-run, and return the same
frame as :meth:`~didmem.backends.OutcomeBackend.score`. Ray itself is imported only when a
:class:`RayRunner` runs.
"""

from .._lazy import attach

_WHERE = {
    "Runner": "_base", "LocalRunner": "_base", "ScoringError": "_base",
    "ScoringPlan": "_plan", "RayRunner": "ray_runner",
}
"""Public name -> the module of this package that defines it (imported when first asked for,
so that the command line's options do not load pandas)."""

RUNNER_KINDS = {"local": "LocalRunner", "ray": "RayRunner"}
"""The runner kinds that a study's ``[runner] kind`` (and ``--runner``) names, and their
classes' names."""

__all__ = ["Runner", "LocalRunner", "RayRunner", "ScoringPlan", "ScoringError", "RUNNERS",
           "RUNNER_KINDS"]

_attribute, _dir = attach(__name__, _WHERE)


def __getattr__(name: str):
    if name == "RUNNERS":  # the classes by kind, one registry for the whole process
        value = {kind: _attribute(cls) for kind, cls in RUNNER_KINDS.items()}
        globals()[name] = value
        return value
    return _attribute(name)


def __dir__() -> list[str]:
    return sorted(set(_dir()) | {"RUNNERS"})
