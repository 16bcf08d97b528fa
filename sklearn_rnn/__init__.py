"""Recurrent neural networks as scikit-learn estimators for variable-length sequences.

The estimators :class:`RNNClassifier`, :class:`RNNRegressor` and
:class:`RNNStepClassifier` (binary targets at every step) accept ragged lists of
``(T_i, d)`` arrays, NaN-padded ``(n, T, d)`` arrays and ``(n, T)`` tables of univariate
sequences, and work inside scikit-learn pipelines and model selection.
"""

from ._estimators import RNNClassifier, RNNRegressor
from ._parallel import torch_threads
from ._persistence import load
from ._step_estimator import RNNStepClassifier
from .model_selection import RNNGridSearchCV
from .sequences import SequenceStandardScaler

__version__ = "0.1.0.dev0"

__all__ = [
    "RNNClassifier",
    "RNNGridSearchCV",
    "RNNRegressor",
    "RNNStepClassifier",
    "SequenceStandardScaler",
    "__version__",
    "load",
    "torch_threads",
]
