"""Optimizers of the thesis, usable with plain PyTorch code."""

from ._clipped import ClippedSGD, clipped_step_size

__all__ = ["ClippedSGD", "clipped_step_size"]
