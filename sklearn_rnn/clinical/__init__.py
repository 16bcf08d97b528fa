"""Clinical helpers: cohorts of visit sequences, baselines, pooled evaluation, the PBC study."""

from ._cohort import Cohort, build_cohort
from ._evaluation import PooledCVResult, auc_intervals, pooled_cross_validate
from ._features import VisitFeatures
from ._pbc_study import PBCStudy, StudyResult, load_pbc_cohort, study_models

__all__ = [
    "Cohort",
    "PBCStudy",
    "PooledCVResult",
    "StudyResult",
    "VisitFeatures",
    "auc_intervals",
    "build_cohort",
    "load_pbc_cohort",
    "pooled_cross_validate",
    "study_models",
]
