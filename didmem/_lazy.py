"""Where each public name of :mod:`didmem` lives: the table behind ``didmem.__getattr__``.

``import didmem`` loads nothing but this table; ``didmem.Panel`` (or ``from didmem import
Panel``) imports :mod:`didmem.panel` the first time it is asked for, so that numba, scipy.stats,
torch and matplotlib load only when the code that needs them runs.

To make a new name public: add ``"Name": "module"`` to :data:`_WHERE` (the module path is
relative to ``didmem``; a name equal to its module's path is that submodule itself) and list
it in ``docs/api.rst``.
"""

from __future__ import annotations

import importlib
import sys

_WHERE: dict[str, str] = {
    "__version__": "_version",
    # errors and warnings
    "DidmemError": "errors",
    "PanelError": "errors",
    "ParameterError": "errors",
    "EstimationError": "errors",
    "InstanceError": "errors",
    "CheckpointError": "errors",
    "MissingDependencyError": "errors",
    "MissingFileError": "errors",
    "DidmemWarning": "errors",
    "DataDroppedWarning": "errors",
    "SmallCohortWarning": "errors",
    "InferenceWarning": "errors",
    "OverlapWarning": "errors",
    "ConfigError": "errors",
    "OutputFileError": "errors",
    # panel
    "Panel": "panel",
    "cohort_from_sequence_index": "panel",
    # estimators
    "DiDEstimator": "estimators",
    "DifferenceEstimator": "estimators",
    "ArchitecturalEstimator": "estimators",
    "ExtractableEstimator": "estimators",
    "MembershipInferenceEstimator": "estimators",
    "InfluenceEstimator": "estimators",
    "TWFEEstimator": "estimators",
    "RunsEstimator": "estimators",
    "RandomTimingEstimator": "estimators",
    "dose_response": "estimators",
    "SubsetModels": "estimators",
    "TrainedModel": "estimators",
    # results and the analyses that take them
    # where memorisation differs
    "compare_profiles": "contrasts",
    "heterogeneity": "contrasts",
    "moderator_slopes": "contrasts",
    "ProfileDifference": "contrasts",
    "Heterogeneity": "contrasts",
    "ModeratorResult": "contrasts",
    "GroupTimeResult": "results",
    "CellResult": "results",
    "AggregateResult": "results",
    "Estimate": "results",
    "Pretest": "results",
    "PretrendTest": "results",
    "SavedResult": "results",
    "ExposureResult": "results",
    "DoseResponseResult": "results",
    "RunsResult": "results",
    "MembershipResult": "results",
    "RunsProfile": "results",
    "RandomTimingResult": "results.random_timing",
    "aligned_cells": "results",
    "compare": "results",
    "load_result": "results",
    "plot_comparison": "results",
    "profile_correlation": "results",
    "sensitivity": "honest",
    "SensitivityResult": "honest",
    "power_analysis": "power",
    "Assumptions": "power",
    "PowerAnalysis": "power",
    # studies
    "Study": "study",
    "StudyRun": "study",
    # submodules
    "datasets": "datasets",
    "montecarlo": "montecarlo",
    "plotting": "results",  # the submodule didmem.results.plotting
    "report": "report",
}
"""Public name -> the module of :mod:`didmem` (dotted, relative) that defines it."""


def attach(package: str, where: dict[str, str]):
    """The module ``__getattr__`` and ``__dir__`` of a package whose names are in ``where``.

    ``where`` maps each public name to the module (relative to ``package``) that defines it;
    a name equal to its module's path is that submodule itself. A name is imported the first
    time it is asked for and then kept in the package's namespace. A name not in ``where``
    raises :class:`AttributeError`, so that ``hasattr``, ``getattr`` with a default and
    ``from package import submodule`` behave as for any module.
    """

    def __getattr__(name: str):
        try:
            module_name = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module = importlib.import_module(f"{package}.{module_name}")
        value = module if module_name == name else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
