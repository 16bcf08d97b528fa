"""Optimizers of the thesis, usable with plain PyTorch code."""

from ._clipped import ClippedSGD, clipped_step_size
from ._functional import (
    BRANCHES,
    WEIGHT_RULES,
    Direction,
    choose_direction,
    clipped_step_,
    combine_temporal_gradients,
    convex_weights,
    normalization_factors,
    normalize_temporal_gradients,
    simplex_direction,
    step_norms,
)
from ._simplex import SimplexSGD
from ._temporal import TemporalGradients, temporal_gradients

__all__ = [
    "BRANCHES",
    "ClippedSGD",
    "Direction",
    "SimplexSGD",
    "TemporalGradients",
    "WEIGHT_RULES",
    "choose_direction",
    "clipped_step_",
    "clipped_step_size",
    "combine_temporal_gradients",
    "convex_weights",
    "normalization_factors",
    "normalize_temporal_gradients",
    "simplex_direction",
    "step_norms",
    "temporal_gradients",
]
