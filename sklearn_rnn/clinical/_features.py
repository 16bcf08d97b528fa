"""Fixed-length features of visit sequences, for the non-sequential baselines of a study."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from numbers import Integral

from ..sequences import check_sequences
from ..sequences._encoding import _resolve_time_feature

__all__ = ["VisitFeatures"]


class VisitFeatures(TransformerMixin, BaseEstimator):
    """Turn each visit sequence into one row of features, for models that read tables.

    The baselines a sequence model has to beat: a logistic regression on the first
    visit, on the last visit, or on a summary of the whole history.

    - ``'first'``, ``'last'``: the values of that visit (time column left out).
    - ``'summary'``: for every feature, the last observed value, the mean over the
      visits and the least-squares slope against time (per unit of the time column;
      against the visit number without one; 0 with fewer than two observations),
      then the number of visits and the time from the first to the last visit.

    A value that is missing stays NaN (a ``'summary'`` statistic of a feature never
    observed in a sequence too): put an imputer after this step. Stateless: ``fit``
    only records the number of features.

    Parameters
    ----------
    kind : {'first', 'last', 'summary'}, default='summary'
        Which features.
    time_feature : int or None, default=None
        Column of the time stamps, as for the estimators; it is not a feature.

    Attributes
    ----------
    n_features_in_ : int
        Columns per visit, the time column included.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.clinical import VisitFeatures
    >>> visits = [np.array([[0.0, 1.0], [2.0, 3.0], [4.0, np.nan]])]   # time, value
    >>> VisitFeatures("last", time_feature=0).fit_transform(visits)
    array([[nan]])
    >>> VisitFeatures("summary", time_feature=0).fit_transform(visits)
    array([[3., 2., 1., 3., 4.]])
    """

    _parameter_constraints: dict = {
        "kind": [StrOptions({"first", "last", "summary"})],
        "time_feature": [Interval(Integral, None, None, closed="neither"), None],
    }

    def __init__(self, kind: str = "summary", *, time_feature: int | None = None) -> None:
        self.kind = kind
        self.time_feature = time_feature

    def fit(self, X: Any, y: Any = None) -> VisitFeatures:
        """Check the parameters and record the number of columns.

        Parameters
        ----------
        X : sequences in any form the estimators accept
        y : None
            Ignored.

        Returns
        -------
        self : VisitFeatures
        """
        self._validate_params()
        n_features = check_sequences(X)[0].shape[1]
        _resolve_time_feature(self.time_feature, n_features)  # refused before any change
        self.n_features_in_ = n_features
        return self

    def transform(self, X: Any) -> NDArray[np.float64]:
        """One row of features per sequence.

        Parameters
        ----------
        X : sequences in any form the estimators accept

        Returns
        -------
        ndarray of shape (n_sequences, n_output_features)
            ``n_values`` columns for 'first' and 'last', ``3 * n_values + 2`` for
            'summary', where ``n_values`` leaves out the time column.
        """
        sequences = check_sequences(X)
        if sequences[0].shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {sequences[0].shape[1]} features per step, but VisitFeatures was "
                f"fitted with {self.n_features_in_}: pass sequences with the same columns."
            )
        time = self._time_index()
        return np.array([self._row(sequence, time) for sequence in sequences])

    def _time_index(self) -> int | None:
        return _resolve_time_feature(self.time_feature, self.n_features_in_)

    def _row(self, sequence: NDArray[np.float64], time: int | None) -> NDArray[np.float64]:
        if time is None:
            times, values = np.arange(len(sequence), dtype=float), sequence
        else:
            times, values = sequence[:, time], np.delete(sequence, time, axis=1)
        if self.kind == "first":
            return values[0]
        if self.kind == "last":
            return values[-1]
        observed = ~np.isnan(values)  # (T, d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
            mean = np.nanmean(values, axis=0)
        last = np.array([column[mask][-1] if mask.any() else np.nan
                         for column, mask in zip(values.T, observed.T, strict=True)])
        slope = np.array([_slope(times[mask], column[mask])
                          for column, mask in zip(values.T, observed.T, strict=True)])
        return np.concatenate([last, mean, slope, [len(sequence), times[-1] - times[0]]])

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.three_d_array = True
        tags.requires_fit = True
        return tags


def _slope(times: NDArray[np.float64], values: NDArray[np.float64]) -> float:
    """Least-squares slope of ``values`` against ``times``; 0 without a time spread."""
    if len(times) < 2:
        return 0.0
    centered = times - times.mean()
    spread = float(centered @ centered)
    return float(centered @ (values - values.mean()) / spread) if spread > 0 else 0.0
