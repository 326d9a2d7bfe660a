"""A study: from a suite's checkpoints and instances to a panel, results and a report.

:class:`Study` owns a study: :meth:`Study.from_file` (or :meth:`Study.from_dict`) reads and
checks the whole configuration at once (:mod:`didmem.study.config`: every key, every path,
the ``[design]`` of :mod:`didmem.study.designs`, outcomes against metrics), and
:meth:`Study.run` scores, estimates and reports, resumably, returning a :class:`StudyRun`.
``didmem run`` and ``didmem score`` are thin adapters over it.
"""

from .._lazy import attach
from ..errors import ConfigError

_WHERE = {
    "Study": "pipeline",
    "StudyRun": "pipeline",
    "StudyConfig": "config",
    "InstanceFiles": "config",
    "EstimateSettings": "estimate",
    "DESIGNS": "designs",
    "Design": "designs",
    "PythiaDesign": "designs",
    "OrderDesign": "designs",
    "OlmoDesign": "designs",
    "HubbleDesign": "designs",
    "RunsDesign": "designs",
}
"""Public name -> the module of this package that defines it (imported on first use, so that
the command line reads :mod:`.estimate`'s declarations without the scoring pipeline)."""

__all__ = ["Study", "StudyRun", "StudyConfig", "InstanceFiles", "EstimateSettings",
           "ConfigError", "DESIGNS", "Design", "PythiaDesign", "OrderDesign", "OlmoDesign",
           "HubbleDesign", "RunsDesign"]

__getattr__, __dir__ = attach(__name__, _WHERE)
