"""The planner's choices, in a module that imports nothing (read by the declaration of
:func:`didmem.power_analysis` and by the command line without loading the estimators)."""

AGGREGATION = {"instantaneous": "instantaneous", "persistent": "persistent", "overall": "simple"}
"""Each target of a plan and the aggregation whose band it is planned under."""
TARGETS = tuple(AGGREGATION)
METHODS = ("simulated", "analytic")
"""Routes to the power: resampling a pilot and fitting, or the closed form."""
POOLS = ("all", "cohort")
"""Where the simulated route draws a new unit's deviation from its group's mean."""
