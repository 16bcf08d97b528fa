"""Clinical helpers: cohorts of visit sequences built from long tables."""

from ._cohort import Cohort, build_cohort

__all__ = ["Cohort", "build_cohort"]
