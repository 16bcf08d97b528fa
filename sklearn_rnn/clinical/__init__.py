"""Clinical helpers: cohorts of visit sequences built from long tables, pooled evaluation."""

from ._cohort import Cohort, build_cohort
from ._evaluation import PooledCVResult, pooled_cross_validate

__all__ = ["Cohort", "PooledCVResult", "build_cohort", "pooled_cross_validate"]
