"""Recurrent neural networks as scikit-learn estimators for variable-length sequences."""

__version__ = "0.1.0.dev0"
