"""Where memorisation differs: contrasts of profiles with paired inference.

* :func:`compare_profiles`: the difference of two profiles (two models, runs, learning
  rates or data orders scored on the same instances), paired on the instances they share;
* :func:`heterogeneity`: a profile per subgroup of a categorical instance feature, their
  differences and a joint test of equality;
* :func:`moderator_slopes`: the best linear projection of the instance-level effect on a
  continuous moderator, per cell and per aggregation.

Every contrast is linear in the profiles, so its influence on an instance is the same
contrast of the instance's influence functions (:mod:`didmem.contrasts._joint`).
"""

from .difference import AggregateDifference, ProfileDifference, compare_profiles
from .moderators import ModeratorResult, moderator_slopes
from .subgroups import Heterogeneity, heterogeneity

__all__ = ["compare_profiles", "ProfileDifference", "AggregateDifference", "heterogeneity",
           "Heterogeneity", "moderator_slopes", "ModeratorResult"]
