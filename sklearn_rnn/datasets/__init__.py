"""Datasets: synthetic long-memory tasks, shipped clinical data, Bach chorales."""

from ._music import get_data_home, load_bach_chorales, piano_roll
from ._pbcseq import load_pbcseq
from ._synthetic import (
    make_addition,
    make_multiplication,
    make_temporal_order,
    make_xor,
    task_error,
)

__all__ = [
    "get_data_home",
    "load_bach_chorales",
    "load_pbcseq",
    "make_addition",
    "make_multiplication",
    "make_temporal_order",
    "make_xor",
    "piano_roll",
    "task_error",
]
