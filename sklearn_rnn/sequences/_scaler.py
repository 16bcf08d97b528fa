"""Standardization of sequence features over all valid steps."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, _fit_context
from sklearn.utils.validation import check_is_fitted

from ._encoding import TIME_FEATURE_CONSTRAINTS, _resolve_time_feature
from ._panel import is_panel
from ._validation import (
    _column_cells,
    fitted_step_names,
    input_layout,
    numpy_readable,
    restore_layout,
    staging,
    validate_sequences,
)

__all__ = ["SequenceStandardScaler"]


class SequenceStandardScaler(
    OneToOneFeatureMixin, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None
):
    """Standardize each feature over all valid steps of the training sequences.

    Means and standard deviations are computed per feature over every observed step of
    every training sequence (NaN, a missing value, is ignored and kept as NaN; padding
    is ignored). The output has the form of the input: a list stays a list, a padded
    array stays padded, a table stays a table, and sequences held in DataFrames stay
    DataFrames with their index and columns (so the next step of a pipeline still reads
    the features by name, e.g. an estimator's ``time_feature="day"``). Use it as the first step of a
    :class:`~sklearn.pipeline.Pipeline` in front of an RNN estimator.

    With ``per_sequence=True`` each sequence is standardized by its own mean and
    standard deviation of each feature instead: what is left is the shape of each
    series, its level and amplitude dropped. That is for data whose series differ in
    amplitude by orders of magnitude, where a scale shared by all leaves most series
    nearly flat (on the PLAID set of the defaults benchmark the median series has a
    standard deviation of 0.0035 after the shared standardization, and the classifier's
    test accuracy goes from 0.45 to 0.81 with ``per_sequence=True``, seeds 0-2; see
    :ref:`defaults`); where the level or the amplitude tells the classes apart it
    loses that information (JapaneseVowels 0.990 -> 0.763 at seed 0). The estimators'
    ``instance_norm`` keeps both: each series on its own scale, with its mean and log
    standard deviation as two more channels, and 'auto' applies it where a feature is
    nearly flat in most series at the shared scale (PLAID 0.867 over ten seeds).

    Parameters
    ----------
    with_mean : bool, default=True
        Center each feature.
    with_std : bool, default=True
        Scale each feature to unit variance (a constant feature is left unscaled).
    per_sequence : bool, default=False
        Standardize each sequence by its own statistics (per feature, over its
        observed steps) rather than by those of the training data. The fitted
        ``mean_`` and ``scale_`` are then not used, and :meth:`inverse_transform` is
        not available (each sequence's own statistics are not kept). Every step then
        reads statistics of the whole sequence, its later steps included: not for
        targets at every step (:class:`~sklearn_rnn.RNNStepClassifier`), whose output at
        a step must not depend on the steps after it.
    time_feature : int, str or None, default=None
        The column of time stamps, left as it is (its ``mean_`` 0 and ``scale_`` 1):
        its index, or its name where DataFrames hold the sequences. The estimators
        read a time column's gaps on a scale of their own, so it needs no scaling; and
        with ``per_sequence=True`` each sequence's times would be rescaled by their own
        spread, erasing how far apart its steps are (visits days or years apart would
        look alike).

    Attributes
    ----------
    mean_ : ndarray of shape (d,)
        What is subtracted from each feature of a step: its mean over observed training
        steps (one value for a table of univariate sequences); zeros with
        ``with_mean=False`` and for the time column.
    scale_ : ndarray of shape (d,)
        What each feature is divided by: its standard deviation (1 where it is zero or
        undefined); ones with ``with_std=False`` and for the time column.
    n_features_in_ : int
        Features per step; for a 2D table, its number of columns, following
        scikit-learn (as the estimators count them).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen in fit, when they are all strings: the columns of
        a DataFrame table, or of the DataFrames that held the sequences; ``transform``
        then refuses other names, or the same in another order.

    Notes
    -----
    On a sequence column (see :func:`~sklearn_rnn.sequences.sequence_column`), such as
    the column of sequences a :class:`~sklearn.compose.ColumnTransformer` hands it, the
    output is that one column: :meth:`get_feature_names_out` names it (its name in a
    DataFrame, or the one name a composite passes), while ``n_features_in_`` and ``feature_names_in_`` count
    and name the features of a step, which ``transform`` checks.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import SequenceStandardScaler
    >>> X = [np.array([[0.0], [2.0]]), np.array([[4.0], [np.nan], [6.0]])]
    >>> scaler = SequenceStandardScaler().fit(X)
    >>> scaler.mean_, scaler.scale_
    (array([3.]), array([2.23606798]))
    >>> [np.round(s.ravel(), 2).tolist() for s in scaler.transform(X)]
    [[-1.34, -0.45], [0.45, nan, 1.34]]
    >>> per_sequence = SequenceStandardScaler(per_sequence=True).fit(X)
    >>> [s.ravel().tolist() for s in per_sequence.transform(X)]
    [[-1.0, 1.0], [-1.0, nan, 1.0]]
    """

    #: The parameter's value for scalers pickled before it existed (get_params, clone).
    time_feature: int | str | None = None

    _parameter_constraints: dict = {
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
        "per_sequence": ["boolean"],
        "time_feature": TIME_FEATURE_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        with_mean: bool = True,
        with_std: bool = True,
        per_sequence: bool = False,
        time_feature: int | str | None = None,
    ) -> None:
        self.with_mean = with_mean
        self.with_std = with_std
        self.per_sequence = per_sequence
        self.time_feature = time_feature

    def set_output(self, *, transform: str | None = None) -> SequenceStandardScaler:
        """Accept scikit-learn's output setting; the output keeps the form of the input.

        scikit-learn's 'pandas' and 'polars' containers hold tables, one row per
        sample; sequences of different lengths are no table. So whatever the setting
        (here, through :meth:`Pipeline.set_output <sklearn.pipeline.Pipeline.set_output>`
        or ``sklearn.set_config(transform_output=...)``), ``transform`` returns the
        form it was given: a list, a padded array, a table, a panel.

        Parameters
        ----------
        transform : {'default', 'pandas', 'polars'} or None, default=None
            The container asked for; checked, and left unused.

        Returns
        -------
        self : SequenceStandardScaler

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import SequenceStandardScaler
        >>> X = [np.array([[0.0], [2.0]]), np.array([[4.0]])]
        >>> scaled = SequenceStandardScaler().set_output(transform="pandas").fit_transform(X)
        >>> type(scaled).__name__, len(scaled)
        ('list', 2)
        """
        if transform not in (None, "default", "pandas", "polars"):
            raise ValueError(
                f"transform={transform!r}: expected 'default', 'pandas', 'polars' or None. "
                f"{type(self).__name__} returns the form of its input whatever the setting."
            )
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> SequenceStandardScaler:
        """Compute per-feature means and standard deviations.

        Parameters
        ----------
        X : sequences in any accepted form
            See :func:`sklearn_rnn.sequences.check_sequences`.
        y : None
            Ignored.

        Returns
        -------
        self : SequenceStandardScaler
        """
        with staging(self) as work:  # a rejected refit leaves the fitted scaler as it was
            steps = np.concatenate(validate_sequences(work, X, reset=True), axis=0)  # (N, d)
            # A sequence column (a ColumnTransformer's column of sequences) goes out as
            # that one column: get_feature_names_out names it, as composites ask.
            work._fitted_on_column = _column_cells(X) is not None and not is_panel(X)
            name = X.columns[0] if hasattr(X, "columns") else getattr(X, "name", None)
            work._sequence_column = name if work._fitted_on_column and isinstance(name, str) else None
            work._time_column = _resolve_time_feature(
                self.time_feature, steps.shape[1], fitted_step_names(work),
                table=work._fitted_layout == "table", fitting=True,
            )
            work.mean_, work.scale_ = work._location_and_scale(steps)
        return self

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output features: those of the input, one to one.

        Parameters
        ----------
        input_features : array-like of str, optional
            Names of the input features, checked as scikit-learn checks them; by
            default ``feature_names_in_``, else ``x0``, ``x1``, ... For a sequence
            column (one-column DataFrame, Series or ``(n, 1)`` object array of
            sequences), the one name of that column, such as the name that
            :class:`~sklearn.compose.ColumnTransformer` passes; by default its name in
            fit (a column without a name gives the features of a step, as a list does).

        Returns
        -------
        ndarray of str objects
            One name for a named or named-in-the-call sequence column (the output is
            that column of sequences), otherwise one per feature.

        Examples
        --------
        >>> import numpy as np
        >>> import pandas as pd
        >>> from sklearn_rnn import SequenceStandardScaler
        >>> from sklearn_rnn.sequences import sequence_column
        >>> X = [np.zeros((3, 2)), np.ones((1, 2))]
        >>> SequenceStandardScaler().fit(X).get_feature_names_out().tolist()
        ['x0', 'x1']
        >>> visits = pd.DataFrame({"visits": sequence_column(X)[:, 0]})
        >>> SequenceStandardScaler().fit(visits).get_feature_names_out().tolist()
        ['visits']
        """
        check_is_fitted(self)
        if not getattr(self, "_fitted_on_column", False):  # False in older pickles
            return super().get_feature_names_out(input_features)
        name = self._sequence_column
        if input_features is None:
            if name is None:  # an unnamed column: what a next step such as VisitFeatures reads
                return super().get_feature_names_out()
            return np.array([name], dtype=object)
        given = np.asarray(input_features, dtype=object).ravel()
        if len(given) != 1 or (name is not None and given[0] != name):
            expected, fix = ((f"its name {name!r}", f"pass [{name!r}]") if name is not None
                             else ("one name", "pass one name"))
            raise ValueError(
                f"input_features should name the one sequence column {type(self).__name__} was "
                f"fitted on ({expected}): its output is that column of sequences; got "
                f"{given.tolist()}. Leave input_features out, or {fix}."
            )
        return given

    def _location_and_scale(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What standardizes ``steps`` ``(N, d)``: the mean and standard deviation of each
        feature over its observed values (NaN ignored), as ``with_mean`` and
        ``with_std`` ask (a constant or never observed feature is not scaled)."""
        observed = ~np.isnan(steps)
        counts = np.maximum(observed.sum(axis=0), 1)
        values = np.where(observed, steps, 0.0)  # (N, d), finite
        with np.errstate(over="ignore"):
            mean = values.sum(axis=0) / counts
        overflow = np.isinf(mean)
        if overflow.any():  # a sum past float64's range (1e307 twenty times), though each value is finite
            peak = np.abs(values[:, overflow]).max(axis=0)
            mean[overflow] = peak * ((values[:, overflow] / peak).sum(axis=0) / counts[overflow])
        with np.errstate(over="ignore"):
            deviation = np.where(observed, steps - mean, 0.0)  # (N, d)
            std = np.sqrt((deviation**2).sum(axis=0) / counts)
        overflow = np.isinf(std)
        if overflow.any():  # squares past float64's range (values near 1e155 and up), or
            # deviations (1.7e308 and -1.7e308): taken in halves, which cannot overflow
            half = np.where(observed[:, overflow], steps[:, overflow] / 2 - mean[overflow] / 2, 0.0)
            peak = np.abs(half).max(axis=0)
            std[overflow] = 2 * (peak * np.sqrt(((half / peak) ** 2).sum(axis=0) / counts[overflow]))
        # A constant feature's computed spread is rounding error, of the order of
        # counts * eps * |mean| (0.1 repeated 12 times: 1.4e-17), not 0: dividing by it
        # would blow its values up. Spreads within that bound count as none.
        constant = std <= counts * np.finfo(np.float64).eps * np.abs(mean)
        location = mean if self.with_mean else np.zeros_like(mean)
        scale = np.where(constant, 1.0, std) if self.with_std else np.ones_like(std)
        time_column = getattr(self, "_time_column", None)  # None in older pickles
        if time_column is not None:
            location[time_column], scale[time_column] = 0.0, 1.0
        return location, scale

    def transform(self, X: Any) -> Any:
        """Standardize ``X``, keeping its form.

        Parameters
        ----------
        X : sequences in any accepted form

        Returns
        -------
        X_scaled : the same form as ``X``
        """
        check_is_fitted(self)
        if self.per_sequence:
            return self._apply(X, self._own_standardization)
        return self._apply(X, lambda steps: _standardized(steps, self.mean_, self.scale_))

    def _own_standardization(self, steps: np.ndarray) -> np.ndarray:
        """One sequence ``(T, d)`` standardized by its own statistics of each feature
        over its observed steps (a feature never observed stays NaN; a constant one is
        only centered)."""
        location, scale = self._location_and_scale(steps)
        return _standardized(steps, location, scale)

    def inverse_transform(self, X: Any) -> Any:
        """Undo :meth:`transform`.

        Parameters
        ----------
        X : sequences in any accepted form

        Returns
        -------
        X_original : the same form as ``X``

        Raises
        ------
        ValueError
            For named step features (DataFrames) other than those of ``fit``, or in
            another order, as :meth:`transform` refuses them: their values would be
            unscaled by another feature's mean and scale under their own labels.
            Unnamed sequences are taken without the warning :meth:`transform` gives,
            as scikit-learn's ``StandardScaler.inverse_transform`` takes them.
        """
        check_is_fitted(self)
        if self.per_sequence:
            raise ValueError(
                "SequenceStandardScaler(per_sequence=True) standardized each sequence by its "
                "own mean and standard deviation, which it does not keep, so its transform "
                "cannot be undone. Keep the original sequences, or use per_sequence=False "
                "(one mean and scale per feature, learned in fit) to invert."
            )
        # Names on one side only: a network's output, say, comes without them.
        return self._apply(X, lambda steps: _unstandardized(steps, self.mean_, self.scale_),
                           one_sided_names=True)

    def _apply(self, X: Any, function: Any, *, one_sided_names: bool = False) -> Any:
        X = numpy_readable(X)  # a torch nested tensor: the list of the sequences it holds
        sequences = validate_sequences(self, X, reset=False, one_sided_names=one_sided_names)
        return restore_layout([function(s) for s in sequences], input_layout(X), X)

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.three_d_array = True
        return tags


def _standardized(steps: np.ndarray, location: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(steps - location) / scale``; where the difference overflows float64 (values
    near its largest, 1.7e308, on both sides of the mean), taken as two quotients."""
    with np.errstate(over="ignore"):
        result = (steps - location) / scale
    overflow = np.isinf(result) & np.isfinite(steps)
    if overflow.any():
        result[overflow] = (steps / scale - location / scale)[overflow]
    return result


def _unstandardized(steps: np.ndarray, location: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``steps * scale + location``; where the product overflows float64 though the
    result need not, taken in halves."""
    with np.errstate(over="ignore"):
        result = steps * scale + location
        overflow = np.isinf(result) & np.isfinite(steps)
        if overflow.any():
            result[overflow] = (2 * (steps * (scale / 2) + location / 2))[overflow]
    return result
