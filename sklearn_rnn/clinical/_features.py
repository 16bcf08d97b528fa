"""Fixed-length features of visit sequences, for the non-sequential baselines of a study."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import check_is_fitted

from ..sequences._encoding import (
    TIME_FEATURE_CONSTRAINTS,
    _over_observed,
    _resolve_time_feature,
    check_times,
    within_rounding,
)
from ..sequences._panel import is_panel
from ..sequences._validation import _column_cells, fitted_step_names, staging, validate_sequences

__all__ = ["VisitFeatures"]


class VisitFeatures(TransformerMixin, BaseEstimator):
    """Turn each visit sequence into one row of features, for models that read tables.

    The baselines a sequence model has to beat: a logistic regression on the first
    visit, on the last visit, or on a summary of the whole history.

    - ``'first'``, ``'last'``: the values of that visit (time column left out).
    - ``'summary'``: for every feature, the last observed value, the mean over the
      visits and the least-squares slope against time (per unit of the time column;
      against the visit number without one; 0 with one observation),
      then the number of visits and the time from the first to the last visit.

    A value that is missing stays NaN (a ``'summary'`` statistic of a feature never
    observed in a sequence too): put an imputer after this step. ``fit`` only records
    the features of a visit: their number and, for sequences held in DataFrames, their
    names, which ``transform`` then checks and :meth:`get_feature_names_out` builds on
    (so ``set_output(transform="pandas")`` gives named columns).

    Parameters
    ----------
    kind : {'first', 'last', 'summary'}, default='summary'
        Which features.
    time_feature : int, str or None, default=None
        Column of the time stamps, as for the estimators (an index, or a name for
        sequences held in DataFrames); it is not a feature.

    Attributes
    ----------
    n_features_in_ : int
        Columns per visit, the time column included (for a 2D table of univariate
        sequences, its number of columns, as scikit-learn counts them).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        The names of the columns per visit, where DataFrames held the sequences.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.clinical import VisitFeatures
    >>> visits = [np.array([[0.0, 1.0], [2.0, 3.0], [4.0, np.nan]])]   # time, value
    >>> VisitFeatures("last", time_feature=0).fit_transform(visits)
    array([[nan]])
    >>> summary = VisitFeatures("summary", time_feature=0).fit(visits)
    >>> summary.transform(visits)
    array([[3., 2., 1., 3., 4.]])
    >>> summary.get_feature_names_out().tolist()
    ['last_x1', 'mean_x1', 'slope_x1', 'n_visits', 'span']
    """

    _parameter_constraints: dict = {
        "kind": [StrOptions({"first", "last", "summary"})],
        "time_feature": TIME_FEATURE_CONSTRAINTS,
    }

    def __init__(self, kind: str = "summary", *, time_feature: int | str | None = None) -> None:
        self.kind = kind
        self.time_feature = time_feature

    def fit(self, X: Any, y: Any = None) -> VisitFeatures:
        """Check the parameters and record the features of a visit.

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
        with staging(self) as work:  # a rejected refit changes nothing
            sequences = validate_sequences(work, X, reset=True)
            # A sequence column (a ColumnTransformer's column: a one-column frame, a Series
            # or an (n, 1) object array): its name, or the one name a composite passes for
            # an unnamed one, is what composites give get_feature_names_out.
            work._fitted_on_column = _column_cells(X) is not None and not is_panel(X)
            name = X.columns[0] if hasattr(X, "columns") else getattr(X, "name", None)
            work._sequence_column = name if work._fitted_on_column and isinstance(name, str) else None
            time = work._time_index(fitting=True)  # an unknown or out-of-range time column is refused here
            if time is not None:
                check_times(sequences, time)  # as the estimators refuse them
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
        check_is_fitted(self)
        self._validate_params()  # kind may have been set since fit
        sequences = validate_sequences(self, X, reset=False)
        time = self._time_index()
        if time is not None:
            check_times(sequences, time)
        rows = np.array([self._row(sequence, time) for sequence in sequences])
        if is_panel(X) and _get_output_config("transform", self)["dense"] == "pandas":
            # One row per instance, not per visit: scikit-learn's wrapper would give the
            # rows the panel's index (a row per visit) and fail.
            import pandas as pd

            return pd.DataFrame(rows, index=X.index.unique(level=0), columns=self.get_feature_names_out())
        return rows

    def get_feature_names_out(self, input_features: Any = None) -> NDArray[np.object_]:
        """Names of the output columns: ``'{kind}_{feature}'`` for 'first' and 'last';
        ``'last_{feature}'``, ``'mean_{feature}'``, ``'slope_{feature}'`` for every
        feature, then ``'n_visits'`` and ``'span'`` for 'summary'.

        Parameters
        ----------
        input_features : array-like of str, optional
            Names of the columns of a visit, the time column included; by default
            ``feature_names_in_`` where the sequences were DataFrames, otherwise
            ``x0``, ``x1``, ... The names of fit's input, as composites pass them,
            give the default names: the columns of a 2D table, or the one name of a
            sequence column (one-column DataFrame, Series or ``(n, 1)`` object array of
            sequences, such as :class:`~sklearn.compose.ColumnTransformer` passes): its
            name in fit, or any one name for a column without one.

        Returns
        -------
        ndarray of str objects
        """
        check_is_fitted(self)
        self._validate_params()  # kind may have been set since fit
        names = self._step_names(input_features)
        time = self._time_index()
        values = [name for column, name in enumerate(names) if column != time]
        if self.kind in ("first", "last"):
            return np.array([f"{self.kind}_{name}" for name in values], dtype=object)
        out = [f"{statistic}_{name}" for statistic in ("last", "mean", "slope") for name in values]
        return np.array([*out, "n_visits", "span"], dtype=object)

    def _step_names(self, input_features: Any = None) -> list[str]:
        """The names of a visit's columns (the features of a step)."""
        fitted = fitted_step_names(self)
        if input_features is None:
            if fitted is not None:
                return [str(name) for name in fitted]
            return [f"x{column}" for column in range(self._steps_width())]
        given = [str(name) for name in np.asarray(input_features, dtype=object).ravel()]
        width = self._steps_width()
        names_in = getattr(self, "feature_names_in_", None)
        table_names = width != self.n_features_in_ and len(given) == self.n_features_in_ and (
            names_in is None or given == [str(name) for name in names_in]
        )
        on_column = getattr(self, "_fitted_on_column", False)  # False in older pickles
        column = getattr(self, "_sequence_column", None)
        unnamed_column = on_column and column is None and len(given) == 1 and width != 1
        if table_names or given == [column] or unnamed_column:
            # The names of fit's input (a table's columns, a sequence column's name, or the
            # one name a composite gives an unnamed column), as scikit-learn's composites
            # pass them: a visit's columns are named as in fit.
            return self._step_names(None)
        if len(given) != width or (fitted is not None and given != list(fitted)):
            expected = list(fitted) if fitted is not None else f"{width} names"
            if names_in is not None and len(given) == len(names_in):
                raise ValueError(
                    f"input_features is not equal to feature_names_in_ ({list(names_in)}), "
                    f"the columns of fit's input; got {given}."
                )
            if on_column:  # fit's input was one column, whatever the width of a visit
                alternative = (f", or name the one sequence column fit was given "
                               f"({f'its name {column!r}' if column is not None else 'one name'})")
            elif width != self.n_features_in_:  # a table: a column per time step
                alternative = f", or name fit's input ({self.n_features_in_} names)"
            else:
                alternative = ""
            raise ValueError(
                f"input_features should have length equal to the {width} columns of a visit "
                f"and name them as seen in fit ({expected}){alternative}; got {given}. "
                "Leave input_features out for the default names."
            )
        return given

    def _time_index(self, *, fitting: bool = False) -> int | None:
        return _resolve_time_feature(self.time_feature, self._steps_width(), fitted_step_names(self),
                                     table=getattr(self, "_fitted_layout", None) == "table", fitting=fitting)

    def _steps_width(self) -> int:
        """Columns per visit (a transformer pickled before this was recorded counted
        them in ``n_features_in_``)."""
        return getattr(self, "_n_step_features", None) or self.n_features_in_


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
        mean = _mean(values)  # all-NaN columns stay NaN, without a warning
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
    """Least-squares slope of ``values`` against ``times``; 0 without a time spread (one
    observation, or all at one time up to rounding), NaN without an observation (like the
    feature's last value and mean)."""
    if len(times) == 0:
        return np.nan
    if len(times) < 2 or within_rounding(times.max() - times.min(), np.abs(times).max()):
        # Times equal up to rounding (0.3 and 0.1 + 0.2) have no spread, nor equal times
        # whose mean rounds off them (three 0.1 average to 0.1 + 1.4e-17): the rounding
        # over its square was a slope (9e15, -10.7).
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        slope, spread = _least_squares(times, values)
    if np.isfinite(slope) and np.isfinite(spread):
        return slope
    # Sums past float64's range (values near 1e308: NaN; times 1e160 apart: a spread of
    # inf and a slope of 0): on each divided by its largest magnitude, then scaled back.
    time_peak, value_peak = np.abs(times).max(), np.abs(values).max()
    slope, _ = _least_squares(times / time_peak, values / value_peak)
    with np.errstate(over="ignore"):
        return float(slope * (value_peak / time_peak))


def _least_squares(times: NDArray[np.float64], values: NDArray[np.float64]) -> tuple[float, float]:
    """The least-squares slope of ``values`` against ``times``, and the times' spread
    (their centred sum of squares); a slope of 0 without a spread."""
    centered = times - times.mean()
    spread = float(centered @ centered)
    return (float(centered @ (values - values.mean()) / spread) if spread > 0 else 0.0), spread


def _mean(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each column's mean over its observed values, NaN for a column without any; a sum
    past float64's range (values near 1e308) summed over the column's largest magnitude."""
    with np.errstate(over="ignore"):
        mean = _over_observed(np.nanmean, values)
    overflow = np.isinf(mean) & np.isfinite(np.where(np.isnan(values), 0.0, values)).all(axis=0)
    for column in np.flatnonzero(overflow):
        peak = np.nanmax(np.abs(values[:, column]))
        mean[column] = peak * np.nanmean(values[:, column] / peak)
    return mean
