"""Datasets: synthetic long-memory tasks and shipped clinical data."""

from ._pbcseq import load_pbcseq
from ._synthetic import (
    make_addition,
    make_multiplication,
    make_temporal_order,
    make_xor,
    task_error,
)

__all__ = [
    "load_pbcseq",
    "make_addition",
    "make_multiplication",
    "make_temporal_order",
    "make_xor",
    "task_error",
]
