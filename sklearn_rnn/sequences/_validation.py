"""Accepted input forms, checked and turned into one canonical form.

A collection of sequences is canonically a ``list`` of float64 arrays of shape
``(T_i, d)``, one per sample, with ``T_i >= 1``; a NaN inside a sequence is a missing
value. Users may also pass a 3D array ``(n, T, d)`` whose trailing all-NaN rows are
padding, or a 2D table ``(n, T)`` whose rows are univariate sequences (trailing NaNs
are padding there too).
"""

from __future__ import annotations

import datetime
import itertools
import math
import operator
import re
import sys
import warnings
from collections.abc import Iterator, MappingView, Sequence
from contextlib import contextmanager
from numbers import Real
from typing import Any, Literal

import numpy as np

from numpy.typing import NDArray
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from ._panel import (
    check_no_id_column,
    check_no_panel_id_column,
    check_not_long_table,
    check_numeric_columns,
    check_row_number_columns,
    check_targets_follow_instances,
    frame_values,
    integer_overflow,
    is_frame,
    is_panel,
    is_series,
    numbers_hint,
    panel_to_sequences,
    real_column,
    sequences_to_panel,
)

__all__ = [
    "check_float32_range",
    "check_sequences",
    "input_layout",
    "restore_layout",
    "sequence_column",
]

Layout = Literal["sequences", "padded", "table"]


def input_layout(X: Any) -> Layout:
    """Tell which accepted form ``X`` has, without converting it.

    Parameters
    ----------
    X : object
        Candidate input.

    Returns
    -------
    {'sequences', 'padded', 'table'}
        ``'sequences'`` for a list, tuple or 1D object array of 2D arrays (ragged), or
        a sequence column (see :func:`sequence_column`),
        ``'padded'`` for a 3D numeric array, ``'table'`` for anything else (a 2D
        array-like whose rows are univariate sequences; it is validated as such).

    Raises
    ------
    TypeError
        ``X`` is no container of sequences at all: None, a number, a string, a
        mapping or a view of one (``d.values()``), a set or an iterator.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import input_layout
    >>> input_layout([np.zeros((3, 2)), np.zeros((5, 2))])
    'sequences'
    >>> input_layout(np.zeros((4, 6, 2)))
    'padded'
    >>> input_layout(np.zeros((4, 6)))
    'table'
    """
    check_container(X)
    # A torch nested tensor is read as the list of the tensors it holds, ragged or not.
    if is_panel(X) or _column_cells(X) is not None or getattr(X, "is_nested", False) is True:
        return "sequences"
    if isinstance(X, np.ndarray):
        if X.dtype == object and X.ndim == 1:
            return "sequences"
        return "padded" if X.ndim >= 3 else "table"
    ndim = getattr(X, "ndim", None)
    if hasattr(X, "__array__") and isinstance(ndim, int) and ndim >= 3:
        return "padded"  # a torch tensor or another array type of (n, T, d)
    if isinstance(X, (list, tuple)):
        # An empty list, or one holding any 2D-or-more sample, is read as sequences so
        # that errors name the offending sample; a list of flat rows is a table.
        if len(X) == 0 or any(_is_two_dimensional(sample) for sample in X):
            return "sequences"
        _check_equal_rows(X)
    return "table"


def _check_equal_rows(X: list[Any] | tuple[Any, ...]) -> None:
    """Refuse a list of flat rows of different lengths: not a table, and not sequences."""
    lengths = {len(row) for row in X if getattr(row, "ndim", 1) == 1 and hasattr(row, "__len__")}
    if len(lengths) > 1 and all(hasattr(row, "__len__") and not isinstance(row, str) for row in X):
        raise ValueError(
            f"X holds {len(X)} one-dimensional rows of different lengths "
            f"({', '.join(map(str, sorted(lengths)[:6]))}{', ...' if len(lengths) > 6 else ''}): "
            "read as a table its rows must be equally long, and a sequence is a 2D (T_i, d) "
            "array. For univariate sequences of different lengths pass (T_i, 1) arrays, e.g. "
            "[np.reshape(x, (-1, 1)) for x in X]."
        )


def check_container(X: Any) -> None:
    """Refuse an X that cannot hold sequences (None, a generator, a scalar, a dict), by
    name and with the fix, before anything counts it: what ``fit`` checks first."""
    _check_not_grouped(X)
    if is_frame(X) and X.shape[1] == 0 and not is_panel(X):
        raise ValueError(
            f"X is a DataFrame with no columns (shape {X.shape}): expected at least one column "
            "of values. Check how it was built, e.g. a column selection that matched nothing."
        )
    not_array_like = not (hasattr(X, "__array__") or hasattr(X, "__len__"))
    if isinstance(X, (str, bytes, dict, set, frozenset, MappingView, np.generic)) or not_array_like:
        # The values' own ndim: np.ndim would build an array of a ragged list to count it.
        if isinstance(X, dict) and any(getattr(value, "ndim", None) == 3 for value in X.values()):
            # A dict of a model's inputs, as skorch passes them to forward.
            padded = next(key for key, value in X.items() if getattr(value, "ndim", None) == 3)
            lengths = next((key for key, value in X.items() if getattr(value, "ndim", None) == 1), None)
            fix = (f"It looks like a model's inputs: pass the sequences themselves, e.g. the padded "
                   f"array X[{padded!r}] (NaN after each end, or zero padding is read as data)"
                   + (f", or it cut to each length: [x[:n] for x, n in zip(X[{padded!r}], "
                      f"X[{lengths!r}])]." if lengths is not None else "."))
        elif isinstance(X, dict):
            fix = "Pass the sequences as a list, e.g. list(X.values())."
        elif hasattr(X, "__iter__") and not isinstance(X, (str, bytes)):
            fix = "Collect the sequences into a list first, e.g. list(X)."
        else:
            fix = "Pass the sequences themselves."
        raise TypeError(
            "expected X to hold sequences: a list of (T_i, d) arrays, a 3D array (n, T, d) "
            f"or a 2D table (n, T); got {type(X).__name__} {_short_repr(X)}. {fix}"
        )


def _check_not_grouped(X: Any) -> None:
    """Refuse a pandas groupby, the list of its ``(key, frame)`` pairs, or the
    ``(sequences, ids)`` pair of :func:`from_long_format`, by name: numpy's
    "inhomogeneous shape", an "encode categorical values" hint or pandas' "truth value of
    a Series is ambiguous" came instead."""
    groupby = sys.modules.get("pandas.core.groupby")
    grouped = groupby is not None and isinstance(X, groupby.GroupBy)
    pairs = (isinstance(X, (list, tuple)) and len(X) > 0
             and all(isinstance(item, tuple) and len(item) == 2 and is_frame(item[1]) for item in X))
    if (isinstance(X, tuple) and len(X) == 2 and isinstance(X[0], list)
            and getattr(X[1], "ndim", None) == 1 and len(X[1]) == len(X[0])):
        raise TypeError(
            "expected X to hold sequences; got the (sequences, ids) pair that "
            "from_long_format returns. Unpack it: X, ids = from_long_format(table, ...)."
        )
    if grouped or pairs:
        got = f"a pandas {type(X).__name__}" if grouped else "a list of (key, frame) pairs, as list(groupby) gives"
        raise TypeError(
            f"expected X to hold sequences; got {got}. Take the frames, without the id "
            "column: X = [frame.drop(columns=[id_column]) for _, frame in "
            "table.groupby(id_column)] (keep the keys beside, to put predictions back), or "
            "use sklearn_rnn.sequences.from_long_format(table, id_column=..., time_column=...)."
        )


def check_numeric_table(X: Any) -> None:
    """Raise the TypeError of :func:`check_sequences` when a table is not numeric.

    Parameters
    ----------
    X : array-like of shape (n, T)
        A table of univariate sequences.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._validation import check_numeric_table
    >>> check_numeric_table(np.array([["1.5", "a"]]))
    Traceback (most recent call last):
    ...
    TypeError: X could not be read as numbers ...
    """
    if type(X).__module__.startswith("scipy.sparse"):
        return  # scikit-learn's validation explains that dense data is needed
    if getattr(X, "ndim", None) == 1 and not _holds_objects(getattr(X, "dtype", object)):
        raise ValueError(_dimension_message(1, X))
    if isinstance(X, (list, tuple)) and X and all(isinstance(item, Real) for item in X):
        raise ValueError(_dimension_message(1, np.asarray(X)))  # a flat list: as a 1D array
    dtypes = getattr(X, "dtypes", None)  # a DataFrame: check column types, not values
    check_not_long_table(X)  # visits of repeated ids are no table of sequences
    if getattr(X, "ndim", None) == 2 and dtypes is not None and all(dtype.kind in "biuf" for dtype in dtypes):
        return
    try:
        array = np.asarray(X)
    except ValueError:  # rows of different lengths: scikit-learn's validation says so
        return
    _check_not_nested(X, array)
    if array.dtype.kind not in "biufc":  # complex: scikit-learn's message
        try:
            _as_float_array(array, where="X")
        except TypeError as error:
            if is_frame(X):
                _refuse_text_columns(X, error)
            raise


def _refuse_text_columns(X: Any, error: TypeError) -> None:
    """Refuse a DataFrame read as a table whose columns are not all numbers (``error``:
    the conversion's), naming them: a label or an id left in it is no step, and encoded
    as numbers it would be read as one. A column whose text repeats may be a long
    table's ids."""
    text = {}
    for position, (name, dtype) in enumerate(X.dtypes.items()):
        if real_column(X, name, dtype):
            continue
        try:
            np.asarray(X.iloc[:, position], dtype=np.float64)
        except (TypeError, ValueError):
            text[name] = position
    if not text:
        return
    repeated = next((name for name, position in text.items() if X.iloc[:, position].duplicated().any()), None)
    hint = (
        f" If column {repeated!r} names the instance of each row (its values repeat, as the ids "
        "of a long table's visits do), convert X with sklearn_rnn.sequences.from_long_format("
        f"X, id_column={repeated!r}, time_column=...), or index it by (instance, time), "
        f"X.set_index([{repeated!r}, time_column])."
        if repeated is not None else ""
    )
    shown = {str(name): str(X.dtypes.iloc[position]) for name, position in text.items()}
    raise TypeError(
        f"X could not be read as numbers: its columns {shown} are not real numbers. A table "
        "is read as one univariate sequence per row, its columns the steps, and a label or "
        f"an id left in it is no step: drop such columns, X.drop(columns={list(text)!r}) "
        "(encoded as numbers, they would be read as steps). Encode categorical or text "
        f"values as numbers only where they are steps.{hint}"
        f"{numbers_hint(X, [X.columns[position] for position in text.values()], variable='X')}"
    ) from error


def _check_not_nested(X: Any, array: Any = None) -> None:
    """Refuse a table whose cells hold arrays (``array``: ``X`` as an array, made here
    when not given), naming the fix that fits its container: a column of 1D arrays
    holds univariate sequences, more columns sktime's nested channels."""
    if array is None:
        dtypes = getattr(X, "dtypes", None)
        if getattr(X, "ndim", None) == 2 and dtypes is not None:
            if all(dtype != object for dtype in dtypes):
                return
        elif getattr(X, "dtype", object) != object:
            return
        try:
            array = np.asarray(X)
        except ValueError:  # rows of different lengths: the caller says so
            return
    if not (array.dtype == object and array.size and np.ndim(array.flat[0]) >= 1):
        return
    cell = array.flat[0]
    frame = is_frame(X)
    if np.ndim(cell) == 1 and (array.ndim == 1 or (array.ndim == 2 and array.shape[1] == 1)):
        cells = "X" if array.ndim == 1 else "X.iloc[:, 0]" if frame else "X[:, 0]"
        raise TypeError(
            f"X is a column of 1D arrays (a cell is a {type(cell).__name__} of shape "
            f"{np.shape(cell)}): a sequence is one (T_i, d) array, steps in rows, so a "
            "univariate sequence is a (T_i, 1) array. Reshape each, e.g. "
            f"[np.reshape(x, (-1, 1)) for x in {cells}]."
        )
    if frame and array.ndim == 2:  # a column of sequences beside columns of one value each
        scalars = [name for name, column in X.items()
                   if not any(np.ndim(value) >= 1 for value in column.iloc[:20])]
        series = [name for name in X.columns if name not in scalars]
        if scalars and series:
            raise TypeError(
                f"X holds sequences in column(s) {series} beside column(s) {scalars} of one value "
                "per row: a sequence is one (T_i, d) array, steps in rows, and X's other columns "
                f"are not steps of it. Pass the sequences alone, X[{series[0]!r}] (a label column "
                "is y), or add a per-sequence value as a constant channel, e.g. "
                f"[np.column_stack([s, np.full(len(s), v)]) for s, v in zip(X[{series[0]!r}], "
                f"X[{scalars[0]!r}])]."
            )
    rows = "X.itertuples(index=False)" if frame else "X"
    raise TypeError(
        f"X is a table whose cells hold series (a cell is a {type(cell).__name__}; "
        "sktime's nested format keeps one column per channel so): a sequence here is one "
        "(T_i, d) array, steps in rows. Join each row's channels, e.g. "
        f"[np.column_stack([np.asarray(cell) for cell in row]) for row in {rows}] "
        "(a sequence's channels must have the same length), or pass a panel, a DataFrame "
        "with an (instance, time) MultiIndex."
    )


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def number_text(value: Any) -> str:
    """A number as ``:g`` writes it where that reads back as the same value, else in
    full: epoch seconds such as 1700000010 and 1700000005 are both ``1.7e+09`` to ``:g``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._validation import number_text
    >>> number_text(4.0), number_text(np.float64(1700000010.0)), number_text(np.int64(1700000005))
    ('4', '1700000010.0', '1700000005')
    """
    short = f"{value:g}"
    try:
        exact = type(value)(short) == value
    except (TypeError, ValueError):  # an int type refuses '1.7e+09'
        exact = False
    return short if exact else str(value)


def _column_cells(X: Any) -> list[Any] | None:
    """The sequences of a sequence column ((n, 1) object array, Series or one-column frame)
    whose cells are 2D: arrays, frames or nested lists (as ``read_json`` and
    ``read_parquet`` give a column of sequences back). One such cell makes it a column of
    sequences, so that a cell of another shape is refused by its position."""
    if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 2 and X.shape[1] == 1:
        cells = list(X[:, 0])
    elif is_series(X) and _holds_objects(X.dtype):
        cells = list(X)
    elif is_frame(X) and X.shape[1] == 1 and _holds_objects(X.dtypes.iloc[0]):
        cells = list(X.iloc[:, 0])
    else:
        return None
    if any(_is_two_dimensional(cell) for cell in cells):
        return cells
    return None


def _holds_objects(dtype: Any) -> bool:
    """Whether a pandas column of ``dtype`` holds Python objects: the object dtype, or an
    ``ArrowDtype`` of nested lists (``read_parquet(..., dtype_backend='pyarrow')``),
    whose cells are lists."""
    return dtype == object or (type(dtype).__name__ == "ArrowDtype" and dtype.kind == "O")


def sequence_column(sequences: Any, y: Any = None) -> np.ndarray:
    """Wrap sequences as a column: an ``(n, 1)`` object array holding one sequence a cell.

    Tools that insist on a 2D array, such as imbalanced-learn's samplers
    (:class:`~imblearn.over_sampling.RandomOverSampler`,
    :class:`~imblearn.under_sampling.RandomUnderSampler`), select and repeat whole rows
    of this column, and the estimators read it like the ragged list. Samplers that
    synthesize new samples by interpolating numeric features (SMOTE and its variants)
    cannot apply to sequences and fail on it.

    The column keeps the sequences' order but not a panel's instance labels, so nothing
    downstream (a sampler, a pipeline, the estimator) can check that targets keyed by
    instance follow that order. Pass them as ``y`` to have them checked here.

    Parameters
    ----------
    sequences : sequences in any accepted form
        See :func:`check_sequences`.
    y : array-like, optional
        The targets that will be paired with the column, checked only: a pandas Series
        or DataFrame indexed by a panel's instances in another order than the panel's is
        refused, as ``fit(panel, y)`` refuses it.

    Returns
    -------
    ndarray of shape (n, 1), dtype object
        Each cell a validated float64 ``(T_i, d)`` array, or, where the sequences name
        their features (DataFrames, a panel), a DataFrame with those columns, so that an
        estimator fitted on the column keeps and checks the names.

    Raises
    ------
    ValueError
        ``y`` is indexed by the panel's instances in another order.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import sequence_column
    >>> column = sequence_column([np.zeros((3, 2)), np.ones((1, 2))])
    >>> column.shape, column[1, 0].shape
    ((2, 1), (1, 2))
    """
    check_targets_follow_instances(sequences, y)
    checked = check_sequences(sequences)
    names = step_feature_names(sequences)
    column = np.empty((len(checked), 1), dtype=object)
    if names is None:
        column[:, 0] = checked
        return column
    for row, frame in enumerate(frames_like(checked, sequences, names)):
        column[row, 0] = frame  # one at a time: numpy would unpack frames
    return column


@contextmanager
def staging(estimator: Any) -> Iterator[Any]:
    """A shallow copy of ``estimator`` to fit on, swapped into it when the block ends
    without an error: a ``fit`` that is rejected or fails leaves the estimator as it
    was (scikit-learn's ``validate_data`` records the feature count and names before
    it refuses the values), and a ``random_state`` generator where it stood.

    Parameters
    ----------
    estimator : BaseEstimator

    Yields
    ------
    BaseEstimator
        The copy; its attributes replace all of ``estimator``'s at the end.

    Examples
    --------
    >>> from sklearn_rnn import SequenceStandardScaler
    >>> from sklearn_rnn.sequences._validation import staging
    >>> scaler = SequenceStandardScaler()
    >>> with staging(scaler) as work:
    ...     work.note_ = 1
    >>> scaler.note_
    1
    """
    work = object.__new__(type(estimator))  # not copy.copy: an estimator may define __getstate__
    work.__dict__.update(estimator.__dict__)  # shares what a continued fit trains further
    generator = getattr(estimator, "random_state", None)
    if not isinstance(generator, np.random.RandomState):
        generator = None
    position = generator.get_state() if generator is not None else None
    try:
        yield work
    except BaseException:
        if generator is not None:  # the draws of a call that is not kept are undone
            generator.set_state(position)
        raise
    # All of the new state at once, in one assignment: a clear() then update() left a
    # moment without any attribute, where a predict in another thread met NotFittedError.
    estimator.__dict__ = dict(work.__dict__)


def frames_like(sequences: list[np.ndarray], X: Any, names: NDArray[np.object_]) -> list[Any]:
    """``sequences`` (validated from ``X``, whose steps ``names`` name) as DataFrames
    again: each with the index and columns of the frame of ``X`` it came from, or, from
    a panel, with the names only.

    Parameters
    ----------
    sequences : list of ndarray of shape (T_i, d)
    X : sequences held in DataFrames (a list of frames, a sequence column of frames, a panel)
    names : ndarray of shape (d,)
        As :func:`step_feature_names` reads them from ``X``.

    Returns
    -------
    list of pandas.DataFrame

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn_rnn.sequences._validation import frames_like, step_feature_names
    >>> X = [pd.DataFrame({"hr": [60.0, 62.0]}, index=[7, 8])]
    >>> frames_like([np.array([[0.0], [1.0]])], X, step_feature_names(X))[0].index.tolist()
    [7, 8]
    """
    if is_panel(X):
        import pandas as pd

        return [pd.DataFrame(sequence, columns=names) for sequence in sequences]
    return _like_samples(sequences, X)


def validate_sequences(
    estimator: Any, X: Any, *, reset: bool, one_sided_names: bool = False
) -> list[np.ndarray]:
    """Validate ``X`` for an estimator's ``fit`` (``reset=True``) or a later call.

    The one validation of the package's estimators and of
    :class:`SequenceStandardScaler`. A 2D table's columns are its features in
    scikit-learn's sense: scikit-learn's ``validate_data`` sets and checks
    ``n_features_in_`` and ``feature_names_in_`` (and gives scikit-learn's messages for
    empty, complex or one-dimensional tables), and its rows are then read as univariate
    sequences. The features of sequences are their steps' columns: ``n_features_in_``
    is their count, named where DataFrames hold them (:func:`check_step_feature_names`).
    ``fit`` records on the estimator the form it was given (``_fitted_layout``) and the
    features per step (``_n_step_features``); later calls must match them.

    Parameters
    ----------
    estimator : BaseEstimator
    X : sequences in any accepted form
    reset : bool
        Whether this is ``fit``.
    one_sided_names : bool, default=False
        In a later call, take features named on one side only (in ``fit`` or in ``X``)
        without scikit-learn's warning, as ``inverse_transform`` takes a network's
        unnamed output; names on both sides must still match. The warning is not
        raised, rather than caught: catching it swaps the process-wide warning state,
        which calls in threads undo for one another.

    Returns
    -------
    list of ndarray of shape (T_i, d), dtype float64

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import SequenceStandardScaler
    >>> from sklearn_rnn.sequences._validation import validate_sequences
    >>> scaler = SequenceStandardScaler()
    >>> [x.shape for x in validate_sequences(scaler, np.zeros((2, 5)), reset=True)]
    [(5, 1), (5, 1)]
    >>> scaler.n_features_in_, scaler._n_step_features
    (5, 1)
    """
    X = _unmasked(numpy_readable(X))
    layout = input_layout(X)
    fitted_on_table = getattr(estimator, "_fitted_layout", None) == "table"
    name = type(estimator).__name__
    if layout == "table" and not reset and not fitted_on_table:
        _check_unambiguous_table(X, name)
    if layout == "table" and (reset or fitted_on_table):
        check_numeric_table(X)  # our message for text, before scikit-learn's
        # numbers with pandas' missing values (pd.NA), which scikit-learn cannot read
        if hasattr(X, "columns"):
            if any(dtype == object for dtype in X.dtypes):
                X = type(X)(frame_values(X), index=X.index, columns=X.columns)
        elif isinstance(X, (list, tuple)) or (isinstance(X, np.ndarray) and X.dtype == object):
            read = _pandas_missing_as_nan(X)  # rows, or an object array, holding pd.NA
            X = X if read is None else read
        try:
            if one_sided_names and not reset and _named_on_one_side(estimator, X):
                # scikit-learn's validate_data, but for its warning of the names: the
                # values alone, then the width against fit's names, as for sequences
                X = check_array(X, estimator=estimator, input_name="X", dtype=np.float64,
                                ensure_all_finite="allow-nan", ensure_min_samples=1)
                check_step_feature_names(estimator, X, X.shape[1], reset=False, one_sided=True)
            else:
                X = validate_data(
                    estimator, X, reset=reset, dtype=np.float64, ensure_all_finite="allow-nan", ensure_min_samples=1,
                )
        except ValueError as error:
            hint = "" if reset else _table_width_hint(X, estimator.n_features_in_)
            if not hint:
                raise
            raise ValueError(f"{error}{hint}") from error
    sequences = check_sequences(X)
    if reset:  # pandas' row numbers among the frames' or panel's columns, the time column aside
        check_row_number_columns(X, getattr(estimator, "time_feature", None))
    n_step_features = sequences[0].shape[1]
    if reset:
        estimator._fitted_layout = "table" if layout == "table" else "sequences"
        estimator._n_step_features = n_step_features
    else:
        # A scaler pickled before it recorded _n_step_features counted them in n_features_in_.
        expected = getattr(estimator, "_n_step_features", None) or estimator.n_features_in_
        if n_step_features != expected:
            named = layout != "table" and hasattr(estimator, "feature_names_in_")
            if named and step_feature_names(X) is not None:
                # Named frames: scikit-learn's message names the columns added or missing.
                check_step_feature_names(estimator, X, n_step_features, reset=False)
            shape = np.shape(X) if layout == "table" else ()
            one = (f" X has shape {tuple(shape)}: for one sequence of {shape[0]} steps, pass [X]."
                   if len(shape) == 2 and shape[1] == expected else "")
            table = (" A 2D table is read as univariate sequences, one column a step."
                     if layout == "table" else "")
            if layout != "table" and all(len(sequence) == expected for sequence in sequences):
                one += (f" Every sequence has {expected} steps, as many as the features used in "
                        "fit: X may hold series channels first, (n_channels, n_timepoints) as "
                        "aeon and sktime keep them; transpose it, e.g. X.transpose(0, 2, 1) "
                        "(a list: [x.T for x in X]).")
            raise ValueError(
                f"X has {n_step_features} features per step, but {name} is expecting "
                f"{expected} features per step as input.{table} Pass (T_i, d) arrays with "
                f"the features used in fit.{one}"
            )
    # The features of sequences are their steps' columns, named where DataFrames hold them.
    read_as_sequences = layout != "table" if reset else not fitted_on_table
    if read_as_sequences:
        check_step_feature_names(estimator, X, n_step_features, reset=reset, one_sided=one_sided_names)
    if reset and n_step_features > 1:
        _warn_of_unobserved_features(estimator, sequences)
        _warn_of_one_step_sequences(estimator, sequences, X)
    return sequences


def _named_on_one_side(estimator: Any, table: Any) -> bool:
    """Whether the columns of ``table`` are named (all strings) where the estimator was
    fitted without names, or unnamed where it was fitted with them. (A mix of names is
    neither: scikit-learn refuses it.)"""
    strings = [isinstance(name, str) for name in getattr(table, "columns", [])]
    if any(strings) and not all(strings):
        return False
    return bool(strings) != hasattr(estimator, "feature_names_in_")


def _table_width_hint(X: Any, expected: int) -> str:
    """The ways to series of another length for a table ``X`` whose width is not the
    ``expected`` one of the table a model was fitted on (empty when it is)."""
    try:
        shape = np.shape(X)
    except ValueError:  # rows of different lengths
        return ""
    if len(shape) != 2 or shape[1] == expected:
        return ""
    pad = (f", or pad shorter rows with NaN to {expected} columns (trailing NaNs are padding)"
           if shape[1] < expected else "")
    return (f" A table's columns are the steps of its univariate sequences, {expected} as in "
            "fit: pass sequences of another length as a list of (T_i, 1) arrays, e.g. "
            f"[np.reshape(row, (-1, 1)) for row in np.asarray(X)]{pad}.")


def _warn_of_one_step_sequences(estimator: Any, sequences: list[np.ndarray], X: Any) -> None:
    """Warn when every training sequence is one step of several features: what a
    collection stored channels first, ``(n_cases, 1, n_timepoints)`` as aeon and
    sktime keep univariate series, becomes when read steps first. (One-step sequences
    of one feature, ``(n, 1, 1)``, are what the docs advise for single values.)"""
    if any(len(sequence) != 1 for sequence in sequences):
        return
    if is_panel(X) or (isinstance(X, (list, tuple)) and X and all(is_frame(x) for x in X)):
        return  # a panel's index, or frames' rows and columns, say what the steps are
    # X's own shape, if it has one: converting X to read it fails on a ragged list that
    # trimming made one step each, and on tensors that need grad.
    shape = getattr(X, "shape", None)
    shape = (f"X has shape {tuple(shape)}" if shape is not None and len(shape) == 3
             else f"X holds {len(sequences)} sequences")
    width = sequences[0].shape[1]
    warnings.warn(
        f"{shape}: every sequence {type(estimator).__name__} is fitted on is one step of "
        f"{width} features, read as (n_samples, n_steps, n_features). If X holds series "
        "channels first, (n_cases, n_channels, n_timepoints) as aeon and sktime keep them, "
        "transpose it: X.transpose(0, 2, 1) (a list: [x.T for x in X]; a torch tensor: "
        "X.transpose(1, 2)).",
        UserWarning,
        stacklevel=3,
    )


def _warn_of_unobserved_features(estimator: Any, sequences: list[np.ndarray]) -> None:
    """Warn of step features that hold no value at any step of the training sequences:
    nothing is learnt from them (scikit-learn's ``SimpleImputer`` warns alike)."""
    steps = joined_steps(sequences)[0]
    unobserved = np.flatnonzero(np.isnan(steps).all(axis=0))
    if not len(unobserved):
        return
    names = getattr(estimator, "feature_names_in_", None)
    which = [str(names[i]) for i in unobserved] if names is not None else unobserved.tolist()
    warnings.warn(
        f"feature(s) {which} of X hold no value (all NaN) at any step of the sequences "
        f"{type(estimator).__name__} is fitted on: nothing is learnt from them, and values "
        "given there later are read through what was never trained. Drop those features, "
        "or check how the data were read.",
        UserWarning,
        stacklevel=3,
    )


def fitted_step_names(estimator: Any) -> NDArray[np.object_] | None:
    """The names of the step features that :func:`validate_sequences` recorded in ``fit``:
    ``feature_names_in_`` where DataFrames held the sequences; None for unnamed
    sequences and for a table, whose columns are steps, not step features.

    Parameters
    ----------
    estimator : BaseEstimator
        Fitted (or being fitted) through :func:`validate_sequences`.

    Returns
    -------
    ndarray of str objects of shape (d,), or None

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn import SequenceStandardScaler
    >>> from sklearn_rnn.sequences._validation import fitted_step_names
    >>> frames = [pd.DataFrame({"day": [0.0, 7.0], "hr": [60.0, 62.0]})]
    >>> fitted_step_names(SequenceStandardScaler().fit(frames)).tolist()
    ['day', 'hr']
    >>> fitted_step_names(SequenceStandardScaler().fit(pd.DataFrame({"t0": [1.0], "t1": [2.0]}))) is None
    True
    """
    if getattr(estimator, "_fitted_layout", "sequences") != "sequences":
        return None
    return getattr(estimator, "feature_names_in_", None)


def _check_unambiguous_table(X: Any, name: str) -> None:
    """Refuse an ``(m, 1)`` array given to a model fitted on ``(T_i, d)`` sequences.

    Read by the table rule it is ``m`` one-step sequences, but passed to such a model it
    is far more likely one sequence of ``m`` steps: the rule is to refuse it and ask.
    """
    shape = getattr(X, "shape", None)
    if shape is None:
        try:
            shape = np.shape(X)
        except ValueError:
            return
    if len(shape) == 2 and shape[1] == 1:
        raise ValueError(
            f"X has shape {tuple(shape)}: read as a table (one univariate sequence per row) it "
            f"is {shape[0]} one-step sequences, but this {name} was fitted on (T_i, d) "
            f"sequences, so it may also be one sequence of {shape[0]} steps. Pass [X] for one "
            f"sequence, or np.reshape(X, (-1, 1, 1)) for {shape[0]} one-step sequences."
        )


def step_feature_names(X: Any) -> NDArray[np.object_] | None:
    """The names of the features at every step, where the sequences carry them.

    Sequences given as pandas DataFrames (a list of frames, a sequence column of
    frames, or one panel frame with an (instance, time) MultiIndex) name their step
    features by their columns, as a table names its features in scikit-learn. The
    names count only when they are all strings, as in scikit-learn.

    Parameters
    ----------
    X : sequences in any accepted form
        See :func:`check_sequences`.

    Returns
    -------
    ndarray of str objects of shape (d,), or None
        The columns, in order; None for plain arrays, padded arrays and tables (whose
        columns are steps, not step features).

    Raises
    ------
    ValueError
        Two sequences name their columns differently (other names, or the same in
        another order), or frames with names are mixed with plain arrays: the model
        would read one feature where another was meant.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn_rnn.sequences._validation import step_feature_names
    >>> frames = [pd.DataFrame(np.zeros((n, 2)), columns=["hr", "bp"]) for n in (3, 5)]
    >>> step_feature_names(frames).tolist()
    ['hr', 'bp']
    >>> step_feature_names([np.zeros((3, 2))]) is None
    True
    >>> step_feature_names([frames[0], frames[1][["bp", "hr"]]])
    Traceback (most recent call last):
    ...
    ValueError: sequence 1 of X has the columns ['bp', 'hr'], but sequence 0 has ['hr', 'bp']: ...
    """
    if is_panel(X):
        return _string_names(X)
    if input_layout(X) != "sequences":
        return None
    cells = _column_cells(X)
    samples = cells if cells is not None else list(X)
    names = [_string_names(sample) for sample in samples]
    first = next((index for index, named in enumerate(names) if named is not None), None)
    if first is None:
        return None
    expected = names[first]
    for index, named in enumerate(names):
        if named is None:
            raise ValueError(
                f"sequence {index} of X has no column names, but sequence {first} has the "
                f"columns {expected.tolist()}: the features of unnamed sequences cannot be "
                "checked against them. Pass every sequence as a DataFrame with those columns, "
                "or every one as a plain array (e.g. [np.asarray(x) for x in X])."
            )
        if not np.array_equal(named, expected):
            raise ValueError(
                f"sequence {index} of X has the columns {named.tolist()}, but sequence "
                f"{first} has {expected.tolist()}: every sequence must hold the same features "
                "in the same order. Select them in one order, e.g. [frame[columns] for frame in X]."
            )
    return expected


def _string_names(sample: Any) -> NDArray[np.object_] | None:
    """A frame's column names when they are all strings; None when none is. A mix is
    refused, as scikit-learn refuses it for a table (the names would silently go)."""
    columns = getattr(sample, "columns", None)
    if columns is None:
        return None
    strings = [isinstance(name, str) for name in columns]
    if all(strings):
        return np.asarray(list(columns), dtype=object)
    if any(strings):
        kinds = sorted({type(name).__name__ for name in columns})
        raise TypeError(
            f"X's frames name their columns with a mix of types {kinds} "
            f"({list(columns)}): the names are read only when all are strings. Make them "
            "all strings, e.g. frame.columns = frame.columns.astype(str), or drop them."
        )
    return None


def check_step_feature_names(
    estimator: Any, X: Any, n_features: int, *, reset: bool, one_sided: bool = False
) -> None:
    """Record or check an estimator's ``feature_names_in_`` from the step features of ``X``.

    scikit-learn's own rules for a table's columns, applied to the names that
    :func:`step_feature_names` reads: with ``reset=True``, ``n_features_in_`` becomes
    ``n_features`` and ``feature_names_in_`` the names (removed when there are none);
    otherwise names that differ from those of fit raise a ``ValueError``, and names
    present on one side only warn (unless ``one_sided``).

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator whose attributes are set or read.
    X : sequences in any accepted form
        See :func:`check_sequences`; already validated, holding ``n_features``
        features per step.
    n_features : int
        Features per step.
    reset : bool
        Whether this is ``fit`` (record) or a later call (check).
    one_sided : bool, default=False
        In a later call, take names present on one side only without the warning: the
        features read as those of ``fit`` (of its width).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn_rnn import SequenceStandardScaler
    >>> frames = [pd.DataFrame(np.ones((3, 2)), columns=["hr", "bp"])]
    >>> scaler = SequenceStandardScaler().fit(frames)
    >>> scaler.feature_names_in_.tolist()
    ['hr', 'bp']
    >>> scaler.transform([frames[0][["bp", "hr"]]])
    Traceback (most recent call last):
    ...
    ValueError: The feature names should match those that were passed during fit....
    """
    names = step_feature_names(X)
    fitted = getattr(estimator, "feature_names_in_", None)
    if one_sided and not reset and (names is None) != (fitted is None):
        names = fitted if fitted is not None and len(fitted) == n_features else None
    if names is None:
        proxy: Any = np.empty((0, n_features))
    else:
        import pandas as pd

        proxy = pd.DataFrame(columns=names)  # no rows: only its names and width are read
    validate_data(estimator, proxy, reset=reset, skip_check_array=True)


def _is_two_dimensional(sample: Any) -> bool:
    """Whether ``sample`` holds steps in rows: an array of 2 or more dimensions, or a
    list, tuple or 1D object array (a cell of nested lists as ``read_parquet`` gives it
    back) whose every element is a row."""
    return getattr(sample, "ndim", 0) >= 2 or (
        (isinstance(sample, (list, tuple)) or _is_array_of_rows(sample))
        and len(sample) > 0
        and all(isinstance(row, (list, tuple, np.ndarray)) for row in sample)
    )


def _is_array_of_rows(sample: Any) -> bool:
    """Whether ``sample`` is a 1D object array, which may hold a sequence's steps as its
    elements (pyarrow's numpy conversion of a list of lists)."""
    return isinstance(sample, np.ndarray) and sample.dtype == object and sample.ndim == 1


def check_sequences(X: Any, *, allow_table: bool = True) -> list[np.ndarray]:
    """Validate sequences in any accepted form and return the canonical list.

    Parameters
    ----------
    X : list of array-like of shape (T_i, d), ndarray of shape (n, T, d) or (n, T)
        Ragged sequences, NaN-padded sequences, or a table of univariate sequences.
        Trailing rows that are entirely NaN are padding and are removed; any other
        NaN is a missing value and is kept.
    allow_table : bool, default=True
        Accept a 2D table of univariate sequences. The estimators validate tables
        through scikit-learn's ``validate_data`` first and then pass the array here.

    Returns
    -------
    list of ndarray of shape (T_i, d), dtype float64
        Fresh arrays (views of one new array holding every step): the input is never
        modified.

    Raises
    ------
    ValueError
        Empty input, a zero-length sequence, differing feature counts, infinite
        values, or more than 3 dimensions; the message names the sample.
    TypeError
        Non-numeric values; the message names the sample.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import check_sequences
    >>> padded = np.array([[[1.0], [2.0], [np.nan]], [[3.0], [np.nan], [4.0]]])
    >>> [s.ravel().tolist() for s in check_sequences(padded)]
    [[1.0, 2.0], [3.0, nan, 4.0]]
    """
    if type(X).__name__ == "PackedSequence" and type(X).__module__.startswith("torch"):
        # a tuple of four tensors, which would be read as four sequences
        raise TypeError(
            "X is a torch PackedSequence: expected sequences, a list of (T_i, d) tensors or "
            "arrays. Unpack it first: torch.nn.utils.rnn.unpack_sequence(X)."
        )
    X = numpy_readable(X)  # a torch nested tensor: the list of its sequences
    layout = input_layout(X)
    if layout == "table":
        if not allow_table:
            raise ValueError(_table_not_allowed_message(X))
        check_numeric_table(X)  # a long table, nested cells, text columns named
        table = _as_float_array(X, where="X")
        if table.ndim != 2:
            raise ValueError(_dimension_message(table.ndim, X))
        samples: Sequence[Any] = [row[:, None] for row in table]
    elif layout == "padded":
        padded = _as_float_array(X, where="X")
        _check_not_left_padded(padded, X)
        samples = list(padded)
    elif is_panel(X):
        _check_unique_columns(X, "X")
        check_no_panel_id_column(X)  # set_index([...], drop=False) keeps the id
        samples = panel_to_sequences(X)  # sktime/aeon: (instance, time) MultiIndex
    else:
        cells = _column_cells(X)
        samples = cells if cells is not None else list(X)
        check_no_id_column(samples)  # the frames of a groupby keep the id column
    if len(samples) == 0:
        raise ValueError(
            "X is empty: expected at least one sequence. Pass a list of (T_i, d) arrays, "
            "a (n, T, d) array or a (n, T) table with n >= 1."
        )
    arrays = [_check_one(sample, index) for index, sample in enumerate(samples)]
    _check_feature_counts(arrays)
    if not is_panel(X):
        return _trim_padding(arrays)
    try:
        return _trim_padding(arrays)
    except ValueError as error:  # positions, which a panel's user cannot find: its labels
        raise ValueError(_with_panel_labels(str(error), X)) from None


def _with_panel_labels(message: str, X: Any) -> str:
    """``message``, whose "sequence i of X" (and "step j") count positions, with the
    panel's instance label and time for them: sequence i is the i-th instance in order
    of first appearance, step j its j-th time once sorted."""
    found = re.match(r"sequence (\d+) of X", message)
    if found is None:
        return message
    sequence = int(found.group(1))
    instance = X.index.unique(level=0)[sequence]
    times = X.xs(instance, level=0, drop_level=True).index.sort_values()
    step = re.search(r"at step (\d+)", message)
    def shown(label: Any) -> str:
        label = label.item() if isinstance(label, np.generic) else label
        return repr(label) if isinstance(label, str) else str(label)

    where = f"the panel's instance {shown(instance)}"
    if step is not None and int(step.group(1)) < len(times):
        where += f" at time {shown(times[int(step.group(1))])}"
    return f"{message} (Sequence {sequence} is {where}.)"


def _check_not_left_padded(padded: np.ndarray, X: Any) -> None:
    """Refuse all-NaN steps before the first observed step of a padded (n, T, d) array,
    and warn of one that looks time-major, ``(T, n, d)``.

    Padding goes after a sequence's steps; leading all-NaN steps would silently be read
    as missing observations (a left-padded array) and change what the network sees.
    A time-major array (``pad_sequence``'s default) read batch first gives one
    "sequence" per step, whose all-NaN steps are the sequences already ended: the
    sequences that end at a step stay ended at every later one.
    """
    if padded.ndim != 3 or padded.shape[0] == 0 or padded.shape[1] < 2 or padded.shape[2] == 0:
        return  # no sequence (refused as empty later), no step or no feature
    empty_steps = np.isnan(padded).all(axis=2)  # (n, T)
    time_major = _time_major_hint(empty_steps, X)
    leading = empty_steps[:, 0] & ~empty_steps.all(axis=1)
    if leading.any():
        index = int(np.flatnonzero(leading)[0])
        count = int(np.argmin(empty_steps[index]))
        raise ValueError(
            f"sequence {index} of X, a padded (n, T, d) array, starts with {count} all-NaN "
            "step(s) before its first observed step: padding goes at the end of each "
            "sequence (trailing all-NaN steps), so this looks left-padded. Move the padding "
            "to the end, or, if those steps are really missing observations, pass a list "
            "of (T_i, d) arrays, where an all-NaN step is read as missing."
            + (f" Or X may be time-major: {time_major}" if time_major else "")
        )
    if time_major:
        warnings.warn(
            f"X, a padded array of shape {padded.shape}, may be time-major: {time_major} If "
            "its all-NaN steps are really missing observations, pass a list of (T_i, d) arrays.",
            UserWarning, stacklevel=3,
        )


def _time_major_hint(empty_steps: np.ndarray, X: Any) -> str:
    """Advice to pass ``X`` batch first where its all-NaN steps, ``empty_steps`` of shape
    ``(n, T)``, follow the pattern of a time-major array of sequences of several lengths:
    none in the first row, never fewer in a later row (each is the set of sequences that
    have ended), and an all-NaN step before an observed one (a sequence that ended
    before a later one) in some row. Empty where they do not."""
    if empty_steps[0].any() or (empty_steps[:-1] & ~empty_steps[1:]).any():
        return ""
    observed_after = np.flip(np.logical_or.accumulate(np.flip(~empty_steps, axis=1), axis=1), axis=1)
    holes = empty_steps[:, :-1] & observed_after[:, 1:]  # all-NaN steps before an observed one
    if not holes.any():
        return ""
    return (
        "its all-NaN steps are those of a (T, n, d) array, as "
        "torch.nn.utils.rnn.pad_sequence gives by default, read batch first (one sequence "
        f"per step, {empty_steps.shape[0]} here). Pass it batch first, {batch_first_swap(X)} "
        "(or pad_sequence(..., batch_first=True))."
    )


def batch_first_swap(X: Any) -> str:
    """The expression that makes ``X``, a time-major ``(T, n, d)`` tensor or array, batch
    first, for messages: ``X.transpose(0, 1)`` for torch, ``X.transpose(1, 0, 2)`` else."""
    return "X.transpose(0, 1)" if type(X).__module__.split(".")[0] == "torch" else "X.transpose(1, 0, 2)"


def _trim_padding(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Check values and drop trailing all-NaN steps, for all sequences at once.

    One copy of all steps, checked with array operations: the cost per sequence is a
    slice, so that a million short sequences validate in seconds.
    """
    counts = [len(array) for array in arrays]
    # (N, d), a fresh copy in C order whatever the inputs' layout: numpy joins
    # column-major arrays (a DataFrame's values) column-major, and statistics over
    # the steps would then round differently than for the same values row-major.
    steps = np.ascontiguousarray(np.concatenate(arrays, axis=0))
    finite = bool(np.isfinite(steps).all())  # no infinite value, and no NaN
    if finite and min(counts) > 0:
        # Nothing to trim and no empty sequence: each sequence is its slice of the steps.
        bounds = [0, *itertools.accumulate(counts)]
        return _CutSteps([steps[start:end] for start, end in zip(bounds, bounds[1:])], steps, counts)
    lengths = np.array(counts, dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    if finite:  # nothing to trim: an empty sequence is refused
        return _valid_steps(arrays, steps, starts, lengths)
    infinite = np.isinf(steps)
    if infinite.any():
        row, feature = np.argwhere(infinite)[0]
        index = int(np.searchsorted(ends, row, side="right"))
        raise ValueError(
            f"sequence {index} of X holds an infinite value at step {row - starts[index]}, "
            f"feature {feature}: expected finite numbers (NaN marks a missing value). "
            "Replace or clip infinite values."
        )
    observed = ~np.isnan(steps).all(axis=1)  # (N,)
    valid = np.zeros(len(arrays), dtype=np.int64)  # steps up to the last observed one
    nonempty = lengths > 0
    if nonempty.any():
        index_type = np.int32 if len(steps) < 2**31 else np.int64
        rows = np.where(observed, np.arange(len(steps), dtype=index_type), -1)  # (N,)
        last = np.maximum.reduceat(rows, starts[nonempty])  # last observed row of each
        valid[nonempty] = np.maximum(last - starts[nonempty] + 1, 0)
    return _valid_steps(arrays, steps, starts, valid)


class _CutSteps(list):
    """Checked sequences that are consecutive slices of one array of steps, kept with
    them so that encoding reads it instead of joining the slices again (see
    :func:`joined_steps`)."""

    __slots__ = ("_cut", "_lengths", "_steps")

    def __init__(self, cut: list[np.ndarray], steps: np.ndarray, lengths: list[int]) -> None:
        super().__init__(cut)
        self._cut = tuple(cut)
        self._steps = steps
        self._lengths = lengths

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy (pickle, deepcopy) is a plain list: its arrays no longer share memory.
        return (list, (list(self),))


def joined_steps(sequences: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """All steps of ``sequences`` in one ``(N, d)`` array, and their lengths.

    For sequences as :func:`check_sequences` returned them (finite, cut from one array)
    and unchanged since (the same arrays in the same order), that array itself: the
    steps are not joined a second time. Otherwise a new array.

    Parameters
    ----------
    sequences : list of ndarray of shape (T_i, d)

    Returns
    -------
    steps : ndarray of shape (sum T_i, d)
    lengths : ndarray of int of shape (n,)
    shared : bool
        Whether ``steps`` is the sequences' own memory (not a new array).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._validation import joined_steps
    >>> checked = check_sequences([np.ones((2, 1)), np.zeros((1, 1))])
    >>> steps, lengths, shared = joined_steps(checked)
    >>> steps.ravel().tolist(), lengths.tolist(), shared, np.shares_memory(steps, checked[1])
    ([1.0, 1.0, 0.0], [2, 1], True, True)
    >>> joined_steps(list(checked))[2]  # any other list: joined anew
    False
    """
    if type(sequences) is _CutSteps and len(sequences) == len(sequences._cut) and all(
        map(operator.is_, sequences, sequences._cut)
    ):
        return sequences._steps, np.array(sequences._lengths), True
    lengths = np.array([len(sequence) for sequence in sequences])
    return np.concatenate(sequences, axis=0), lengths, False


def _valid_steps(
    arrays: list[np.ndarray], steps: np.ndarray, starts: np.ndarray, valid: np.ndarray
) -> list[np.ndarray]:
    """The first ``valid`` steps of each sequence, as views of ``steps``; an error for a
    sequence without any."""
    if not valid.all():
        index = int(np.flatnonzero(valid == 0)[0])
        raise ValueError(
            f"sequence {index} of X has no valid step (shape {arrays[index].shape}, every "
            "value NaN or no rows): expected at least one step with an observed value. "
            "Drop empty sequences before fitting or predicting."
        )
    return [steps[start : start + length] for start, length in zip(starts.tolist(), valid.tolist())]


def _check_unique_columns(frame: Any, where: str, variable: str = "frame") -> None:
    """Refuse a frame with repeated column names, ``where`` naming it in the message and
    ``variable`` in its fix (scikit-learn's bare DuplicateError came from the names'
    check; pandas' errors from from_long_format's)."""
    repeated = frame.columns[frame.columns.duplicated()].unique().tolist()
    if repeated:
        raise ValueError(
            f"{where} has repeated column names {repeated} (a merge or concat without "
            "suffixes?): each column needs its own name to be read. Rename or drop the "
            f"copies first, e.g. {variable}.loc[:, ~{variable}.columns.duplicated()] to keep "
            "the first of each."
        )


def _check_frame_in_time_order(frame: Any, where: str) -> None:
    """Refuse a frame of a list still indexed by a panel's (instance, time) whose time
    level is out of order: its rows are read in order, and the same rows as one panel
    are sorted by time (one frame per instance of ``panel.groupby(level=0)`` keeps the
    panel's row order)."""
    index = frame.index
    if getattr(index, "nlevels", 1) != 2 or index.get_level_values(0).nunique() != 1:
        return  # not one instance's rows: (day, hour) and the like are in order as they come
    times = index.get_level_values(1)
    try:
        ordered = bool(times.is_monotonic_increasing)
    except TypeError:  # labels that do not compare: no order to check
        return
    if not ordered:
        raise ValueError(
            f"{where} is a frame indexed by (instance, time) whose time level is out of order "
            f"({list(times[:3])}...): a frame's rows are read as steps in their order, while "
            "the same rows as one panel are sorted by time. Sort it first: "
            "frame.droplevel(0).sort_index() (or pass the whole panel)."
        )


def _check_one(sample: Any, index: int) -> np.ndarray:
    """``sample`` as a float64 array of shape (steps, features); values are checked later."""
    if (
        type(sample) is np.ndarray
        and sample.dtype == np.float64
        and sample.ndim == 2
        and sample.shape[1] > 0
    ):
        return sample  # the common case, without the checks' overhead
    where = f"sequence {index} of X"
    if sample is None:  # reported as "shape ()" before
        raise ValueError(
            f"{where} is None: expected a 2D array of shape (steps, features). Drop the "
            "missing sequence, or give its steps."
        )
    if _is_array_of_rows(sample) and _is_two_dimensional(sample):
        sample = list(sample)  # its steps, which numpy stacks as the rows of nested lists
    if is_frame(sample):  # named columns: refused by name, pandas' missing values as NaN
        _check_unique_columns(sample, where)
        check_numeric_columns(sample, where=where)
        _check_frame_in_time_order(sample, where)
        sample = frame_values(sample)
    array = _as_float_array(sample, where=where)
    if array.size == 0 and array.ndim < 2:  # [] among the sequences: empty, not univariate
        raise ValueError(
            f"{where} has no step (shape {array.shape}): expected at least one step with an "
            "observed value. Drop empty sequences before fitting or predicting."
        )
    if array.ndim != 2:
        hint = (
            " For a univariate sequence use shape (T_i, 1), e.g. np.reshape(x, (-1, 1))."
            if array.ndim < 2
            else ""
        )
        raise ValueError(
            f"{where} has shape {array.shape}: expected a 2D array of shape "
            f"(steps, features).{hint}"
        )
    if array.shape[1] == 0:
        raise ValueError(
            f"{where} has 0 features per step (shape {array.shape}): expected at least one "
            "feature. Check how the sequences were built, e.g. a column selection that "
            "kept no column."
        )
    return array


def numpy_readable(value: Any) -> Any:
    """``value``, or a torch tensor as numpy can read it: detached from autograd, on the
    CPU, and bfloat16 (which numpy lacks) as float32, which holds every bfloat16 value.
    A nested tensor, PyTorch's ragged batch (which numpy cannot read as a whole), comes
    back as the list of the tensors it holds, each readable.

    >>> import torch
    >>> numpy_readable(torch.ones(2, dtype=torch.bfloat16, requires_grad=True)).dtype
    torch.float32
    >>> nested = torch.nested.nested_tensor([torch.ones(3, 2), torch.ones(1, 2)], layout=torch.jagged)
    >>> [part.shape for part in numpy_readable(nested)]
    [torch.Size([3, 2]), torch.Size([1, 2])]
    """
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        if getattr(value, "is_nested", False) is True:
            return [numpy_readable(part) for part in value.unbind()]
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
    return value


def readable_targets(value: Any, name: str = "y") -> Any:
    """:func:`numpy_readable` ``value`` (targets or weights), with a numpy masked array's
    masked entries read as missing values, as they are in ``X``: NaN for numbers (which
    the checks of targets and weights then name), refused for other values. A masked
    array with no masked entry is its data, in its own dtype. (``numpy.asarray`` kept
    the values under the mask: a masked target was trained on, a masked weight counted.)

    >>> import numpy as np
    >>> readable_targets(np.ma.masked_array([1.0, 2.0], mask=[0, 1]))
    array([ 1., nan])
    >>> readable_targets(np.ma.masked_array([0, 1], mask=[0, 0])).dtype
    dtype('int64')
    """
    value = numpy_readable(value)
    if isinstance(value, np.ma.MaskedArray):
        if not np.ma.getmaskarray(value).any():
            return value.data
        if value.dtype.kind in "biuf":
            return np.ma.filled(value.astype(np.float64), np.nan)
        raise ValueError(
            f"{name} is a masked array with masked entries of {value.dtype}: a masked entry is a "
            f"missing value, which {name} may not hold. Drop those sequences, or fill the entries."
        )
    if isinstance(value, list):  # per-step targets: one array per sequence
        return [readable_targets(part, f"{name}[{index}]") if isinstance(part, np.ma.MaskedArray) else part
                for index, part in enumerate(value)]
    return value


def _unmasked(value: Any) -> Any:
    """A numpy masked array as a float array with NaN, a missing value, at its masked
    entries (``numpy.asarray`` would keep the values under the mask); anything else as
    it is."""
    if not isinstance(value, np.ma.MaskedArray):
        return value
    try:
        return np.ma.filled(value.astype(np.float64), np.nan)
    except (TypeError, ValueError):  # not numbers: refused with the unmasked values
        return value.data


def _refuse_dates(where: str, dtype: Any, fix: str | None = None) -> None:
    """Refuse dates or durations in ``where`` (of ``dtype``), with ``fix`` (by default
    the way to convert the values of sequences)."""
    if fix is None:
        fix = ("Convert them, e.g. to days since the first: (x - x.min()) / np.timedelta64(1, "
               "'D'), or build the sequences with sklearn_rnn.sequences.from_long_format, which "
               "turns dates into days.")
    raise TypeError(
        f"{where} holds dates or durations ({dtype}): expected numbers (read "
        "as they are, they would count the array's own unit: days since 1970 for "
        f"datetime64[D], nanoseconds for timedelta64[ns]). {fix}"
    )


def dates_dtype(values: Any) -> Any:
    """The dtype of the dates or durations that ``values`` (an array-like, a Series or a
    DataFrame) holds, or None when it holds none. NumPy's and pandas' ``datetime64`` and
    ``timedelta64``, and dates or durations as objects (``np.datetime64``, ``datetime``,
    ``timedelta``, pandas' ``Timestamp`` and ``Timedelta``), which a cast to float would
    turn into counts of their unit or refuse with a bare message.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._validation import dates_dtype
    >>> dates_dtype(np.arange(3).astype("timedelta64[D]")), dates_dtype([1.0, 2.0])
    (dtype('<m8[D]'), None)
    """
    if is_frame(values):
        return next((dtype for dtype in values.dtypes if getattr(dtype, "kind", None) in ("M", "m")), None)
    dtype = getattr(values, "dtype", None)
    if dtype is None:  # a list or tuple: the type numpy reads its values as
        try:
            dtype = np.asarray(values).dtype
        except (TypeError, ValueError):
            return None
    if getattr(dtype, "kind", None) in ("M", "m"):
        return dtype
    if dtype != object:
        return None
    try:
        cells = np.asarray(values, dtype=object).ravel()
    except (TypeError, ValueError):
        return None
    if any(isinstance(cell, (np.datetime64, np.timedelta64, datetime.date, datetime.timedelta)) for cell in cells):
        return "dates or durations in an object array"
    return None


def _as_float_array(value: Any, *, where: str) -> np.ndarray:
    if hasattr(value, "sparse") or type(value).__module__.startswith("scipy.sparse"):
        raise TypeError(
            f"{where} is a sparse matrix: expected dense numbers. Convert it with .toarray()."
        )
    value = _unmasked(numpy_readable(value))
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind in ("M", "m"):
        _refuse_dates(where, value.dtype)
    dates = None
    try:
        # Read first as it is, so that complex input is refused below with our message:
        # casting it would warn, and catching that warning changes process-wide state,
        # which fits in threads undo for one another.
        try:
            array = np.asarray(value)
            if array.dtype.kind in ("M", "m"):  # a list of NumPy dates
                dates = array.dtype
            elif array.dtype.kind == "O" and any(isinstance(item, (np.datetime64, np.timedelta64))
                                                 for item in array.flat):
                dates = "NumPy dates in an object array"  # cast, they would count days
            elif array.dtype.kind != "c":
                array = array.astype(np.float64, copy=False)
        except (TypeError, ValueError) as numpy_error:
            # pandas' missing values (pd.NA, NaT in an object array, as DataFrame.to_numpy
            # gives for a nullable column) are NaN, as None already is; else as before.
            read = _pandas_missing_as_nan(value)
            if read is None:
                raise numpy_error
            array = read
    except OverflowError as error:  # a Python int past float64's range
        raise integer_overflow(where, error) from error
    except (TypeError, ValueError, RuntimeError) as error:  # RuntimeError: from an array type's own conversion
        widths = _row_widths(value)
        if len(widths) > 1:
            raise ValueError(
                f"{where} has steps of different widths {sorted(widths)}: expected every "
                "step to hold the same number of features. Mark a feature missing at a "
                "step with NaN."
            ) from error
        raise TypeError(
            f"{where} could not be read as numbers ({error}): expected a numeric "
            "array. Encode categorical or text values as numbers first."
        ) from error
    if dates is not None:
        _refuse_dates(where, dates)
    if array.dtype.kind == "c":
        raise ValueError(f"{where} holds complex numbers: expected real numbers.")
    if array.ndim > 3:
        raise ValueError(_dimension_message(array.ndim, value))
    return array


def _pandas_missing_as_nan(value: Any) -> np.ndarray | None:
    """``value`` as float64 with pandas' missing values as NaN, or None when it holds
    none (or anything else that is not a number: NumPy's own error then stands)."""
    import pandas as pd

    try:
        objects = np.asarray(value, dtype=object)
        missing = pd.isna(objects)
        if objects.ndim == 0 or not np.any(missing):
            return None
        return np.where(missing, np.nan, objects).astype(np.float64)
    except (TypeError, ValueError):
        return None


def _row_widths(value: Any) -> set[int]:
    """The lengths of the rows of a nested list (empty when it is not one)."""
    if not isinstance(value, (list, tuple)):
        return set()
    return {len(row) for row in value if isinstance(row, (list, tuple, np.ndarray))}


def check_float32_range(values: Any, lengths: Any) -> None:
    """Check that encoded steps are finite in float32, the type the network trains in.

    A finite float64 value beyond float32's range (about ``3.4e38`` in magnitude)
    becomes infinite when the training data is cast to float32.

    Parameters
    ----------
    values : torch.Tensor of shape (total_steps, n_inputs)
        Encoded steps of every sequence, concatenated (float32).
    lengths : torch.Tensor of shape (n_sequences,)
        Steps of each sequence.

    Raises
    ------
    ValueError
        Naming the first sequence and step that overflow.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.sequences import check_float32_range
    >>> check_float32_range(torch.ones(3, 1), torch.tensor([2, 1]))
    >>> check_float32_range(torch.tensor([[1.0], [float("inf")]]), torch.tensor([1, 1]))
    Traceback (most recent call last):
    ...
    ValueError: sequence 1 of X, step 0, holds a value beyond float32's range ...
    """
    # One reduction for the common case (the largest magnitude is NaN or infinite if
    # any value is): 10 times cheaper than isfinite() on a (5000, 6) block.
    if values.numel() == 0 or math.isfinite(values.abs().amax().item()):
        return
    finite = values.isfinite().all(dim=1)  # (total_steps,)
    row = int((~finite).nonzero()[0, 0])
    ends = np.cumsum(np.asarray(lengths.cpu()))
    sample = int(np.searchsorted(ends, row, side="right"))
    step = row - (int(ends[sample - 1]) if sample else 0)
    raise ValueError(
        f"sequence {sample} of X, step {step}, holds a value beyond float32's range "
        f"(|x| > {np.finfo(np.float32).max:.3g}), the type the network trains in: expected "
        "values of moderate magnitude. Scale the inputs, e.g. with SequenceStandardScaler."
    )


def check_holdout(
    n_samples: int, validation_fraction: float, labels: Any = None, *, min_held_out: int = 1,
    weightless: int = 0,
) -> None:
    """Check that early stopping can hold out ``validation_fraction`` of the samples.

    Mirrors the rules of :func:`~sklearn.model_selection.train_test_split` (the held-out
    part has ``ceil(fraction * n)`` samples) and, when ``labels`` are given (a stratified
    split), needs every class twice and room for every class on both sides.

    Parameters
    ----------
    n_samples : int
    validation_fraction : float
    labels : array-like of shape (n_samples,), optional
        Class of each sample, for a stratified split.
    min_held_out : int, default=1
        The fewest held-out samples the validation score is defined on (2 for R2).
    weightless : int, default=0
        Samples besides the ``n_samples`` that the split leaves to training (of weight
        0, or alone in their class among those that weigh), named in the message.

    Raises
    ------
    ValueError
        What the split needs, what the data has, and how to fix it.

    Examples
    --------
    >>> from sklearn_rnn.sequences._validation import check_holdout
    >>> check_holdout(20, 0.1, [0, 1] * 10)
    >>> check_holdout(5, 0.1, [0, 1, 0, 1, 0])
    Traceback (most recent call last):
    ...
    ValueError: early_stopping holds out validation_fraction=0.1 of 5 sequences ...
    """
    n_valid = int(np.ceil(validation_fraction * n_samples))
    n_train = n_samples - n_valid
    held_out = (
        f"early_stopping holds out validation_fraction={validation_fraction} of "
        f"{n_samples} sequence{'' if n_samples == 1 else 's'} ({n_valid} for validation, "
        f"{n_train} for training)"
    )
    if weightless:
        held_out += (f", the ones of positive sample_weight ({weightless} of weight 0, or 0 in float32 "
                     "beside the others, or alone in their class among those, train with them)")
    fix = "Pass more sequences, change validation_fraction, or set early_stopping=False."
    if n_train < 1:
        raise ValueError(f"{held_out}: expected at least 1 left for training. {fix}")
    if n_valid < min_held_out:
        raise ValueError(
            f"{held_out}: expected at least {min_held_out} for validation (a regressor's "
            f"validation score, R2, is undefined on fewer). {fix}"
        )
    if labels is None:
        return
    classes, counts = np.unique(np.asarray(labels), return_counts=True)
    if counts.min() < 2 or min(n_valid, n_train) < len(classes):
        found = ", ".join(
            f"{label!r}: {count}" for label, count in zip(classes.tolist(), counts.tolist())
        )
        raise ValueError(
            f"{held_out}, stratified by class: expected at least 2 sequences of each "
            f"class and at least {len(classes)} (one per class) on each side; got class "
            f"counts {{{found}}}. {fix}"
        )


def _check_feature_counts(sequences: list[np.ndarray]) -> None:
    expected = sequences[0].shape[1]
    for index, sequence in enumerate(sequences):
        if sequence.shape[1] != expected:
            raise ValueError(
                f"sequence {index} of X has {sequence.shape[1]} features per step, but "
                f"sequence 0 has {expected}: every sequence must have the same number of "
                "features. Use NaN for a feature missing at some steps. If each array holds "
                "its steps in columns, (channels, timepoints) as aeon and sktime keep series, "
                "transpose each one: [np.asarray(x).T for x in X]."
            )


def check_step_arrays(arrays: Any, *, where: str, n_features: int | None = None) -> None:
    """Refuse anything but what the low-level sequence tools read: a non-empty list of
    ``(T_i, d)`` arrays of one width ``d`` (``n_features`` when given), each at least one
    step long, as :func:`check_sequences` returns them.

    Parameters
    ----------
    arrays : list of ndarray of shape (T_i, d)
    where : str
        The tool being called, as the message names it (``"InputEncoder.fit"``).
    n_features : int, optional
        The width the arrays must have (what an encoder was fitted on).

    Raises
    ------
    ValueError
        Saying what was expected, what came and how to fix it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._validation import check_step_arrays
    >>> check_step_arrays([np.ones((3, 2)), np.ones((1, 2))], where="FlatSequences.from_arrays")
    >>> check_step_arrays([np.ones(3)], where="FlatSequences.from_arrays")
    Traceback (most recent call last):
    ...
    ValueError: FlatSequences.from_arrays expects a list of (n_steps, n_features) arrays; sequence 0 has shape (3,)...
    """
    fix = "Pass the sequences as check_sequences(X) returns them."
    if not hasattr(arrays, "__len__") or isinstance(arrays, (str, bytes)):  # a generator: "has no len()"
        raise TypeError(
            f"{where} expects a list of (n_steps, n_features) arrays, one per sequence; got "
            f"{type(arrays).__name__}. Pass a list, e.g. list(arrays)."
        )
    if isinstance(arrays, np.ndarray) and arrays.dtype != object and arrays.ndim != 3:  # (n, T, d): n sequences
        raise ValueError(
            f"{where} expects a list of (n_steps, n_features) arrays, one per sequence; got one "
            f"array of shape {arrays.shape}. {fix}" + (" For one sequence, pass [X]." if arrays.ndim == 2 else "")
        )
    if not len(arrays):
        raise ValueError(f"{where} needs at least one sequence; got none. {fix}")
    if (isinstance(arrays, np.ndarray) and arrays.ndim == 3 and arrays.dtype.kind == "f" and arrays.shape[1]
            and np.isnan(arrays[:, -1]).all(axis=-1).any()):
        # Its trailing all-NaN steps were read as missing values (masks on, values carried
        # forward, a time column refused), where the estimators read them as padding.
        raise ValueError(
            f"{where} reads each of the {arrays.shape[0]} sequences of a 3D array as "
            f"{arrays.shape[1]} steps, but some end in steps that are all NaN, which the "
            "estimators read as padding. Pass sklearn_rnn.sequences.check_sequences(X), which "
            "strips it."
        )
    expected = n_features
    for index, array in enumerate(arrays):
        shape = np.shape(array)
        if len(shape) != 2:
            raise ValueError(
                f"{where} expects a list of (n_steps, n_features) arrays; sequence {index} has "
                f"shape {shape}. {fix} A univariate series is one column: np.reshape(x, (-1, 1))."
            )
        if shape[0] == 0:
            raise ValueError(
                f"{where} expects sequences of at least one step; sequence {index} has none "
                f"(shape {shape}). Drop empty sequences first."
            )
        kind = np.asarray(array).dtype.kind
        if kind not in "biuf":
            raise ValueError(
                f"{where} expects arrays of numbers (bool, int or float); sequence {index} holds "
                f"values of dtype {np.asarray(array).dtype}. {fix}"
            )
        if expected is None:
            expected = shape[1]  # sequence 0's
        elif shape[1] != expected:
            reference = "sequence 0 has" if n_features is None else "the encoder was fitted on"
            raise ValueError(
                f"{where}: sequence {index} has {shape[1]} features per step, but {reference} "
                f"{expected}; every sequence must have {expected}. {fix}"
            )


def _dimension_message(ndim: int, X: Any) -> str:
    index = getattr(X, "index", None)
    if ndim == 1 and getattr(index, "nlevels", 1) == 2 and hasattr(X, "to_frame"):
        return (
            f"X is a Series of {len(X)} values indexed by (instance, time), one column of a "
            "panel: expected a panel, a DataFrame with that index. Pass X.to_frame() (or "
            "panel[[column]] rather than panel[column]) to keep each instance a sequence."
        )
    if ndim == 1:
        return (
            f"X is one-dimensional ({type(X).__name__} of {len(X)} values): expected "
            "sequences, a list of (T_i, d) arrays, a 3D array (n, T, d) or a 2D table (n, T). "
            "Reshape your data: for one univariate sequence pass [np.reshape(x, (-1, 1))]; "
            "for one-step sequences of one feature, np.reshape(x, (-1, 1, 1))."
        )
    return (
        f"X has {ndim} dimensions: expected a list of (T_i, d) arrays, a 3D array "
        "(n_samples, steps, features) or a 2D table (n_samples, steps) of univariate "
        "sequences."
    )


def _table_not_allowed_message(X: Any) -> str:
    shape = getattr(X, "shape", None)
    return (
        f"expected a list of (T_i, d) arrays or a 3D array (n, T, d); got {type(X).__name__}"
        + (f" of shape {shape}" if shape is not None else "")
        + "."
    )


def _like_samples(sequences: list[np.ndarray], like: Any) -> list[Any]:
    """``sequences``, each a DataFrame with its index and columns where ``like`` (a list,
    tuple, object array or sequence column) held it as one, cut to its length."""
    cells = _column_cells(like)
    if cells is not None:
        samples = cells
    else:
        samples = list(like) if isinstance(like, (list, tuple, np.ndarray)) else []
    out: list[Any] = list(sequences)
    for index, sample in enumerate(samples[: len(out)]):
        if type(sample).__name__ == "DataFrame" and sample.shape[1] == out[index].shape[1]:
            steps = len(out[index])
            out[index] = type(sample)(out[index], index=sample.index[:steps], columns=sample.columns)
    return out


def _like_container(sequences: list[np.ndarray], like: Any) -> Any:
    """``sequences`` in the container of ``like`` (a list, tuple, object array, sequence
    column, Series or one-column frame), each one a DataFrame with its index and columns
    where ``like`` held it as one (cut to its length: trailing padding is dropped)."""
    out = _like_samples(sequences, like)
    if isinstance(like, tuple):
        return tuple(out)
    if isinstance(like, list) or like is None:
        return out
    column = getattr(like, "ndim", 1) == 2
    container = np.empty((len(out), 1) if column else len(out), dtype=object)
    for row, sequence in enumerate(out):  # one at a time: numpy would unpack arrays
        container[(row, 0) if column else row] = sequence
    if type(like).__name__ == "DataFrame":  # a one-column frame of sequences
        return type(like)(container, index=like.index, columns=like.columns)
    if type(like).__name__ == "Series":
        return type(like)(container, index=like.index, name=like.name, dtype=object)
    return container


def restore_layout(
    sequences: list[np.ndarray], layout: Layout, like: Any = None
) -> Any:
    """Put canonical sequences back into the form the user passed.

    Parameters
    ----------
    sequences : list of ndarray of shape (T_i, d)
        Canonical sequences.
    layout : {'sequences', 'padded', 'table'}
        The form to return, as given by :func:`input_layout`.
    like : object, optional
        The original input, whose container is kept: a tuple stays a tuple, an object
        array or a sequence column stays one, a pandas Series or DataFrame keeps its
        index and columns, and a sequence held in a DataFrame comes back as one, with
        its index and columns.

    Returns
    -------
    list, tuple, ndarray or DataFrame
        Ragged sequences as the same kind of container; padded or table forms
        NaN-padded to the longest sequence (or to the original width when ``like``
        is given).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import restore_layout
    >>> restore_layout([np.ones((1, 1)), np.ones((2, 1))], "table")
    array([[ 1., nan],
           [ 1.,  1.]])
    """
    if layout == "sequences":
        if is_panel(like):
            return sequences_to_panel(sequences, like)
        return _like_container(sequences, like)
    width = max(len(sequence) for sequence in sequences)
    like_shape = getattr(like, "shape", None)
    if like_shape is not None and len(like_shape) >= 2:
        width = max(width, like_shape[1])
    elif like_shape is None and isinstance(like, (list, tuple)) and len(like):
        # a list of rows (or of padded sequences): its trailing all-NaN steps are kept
        width = max(width, max(len(row) for row in like))
    n_features = sequences[0].shape[1]
    padded = np.full((len(sequences), width, n_features), np.nan)
    for index, sequence in enumerate(sequences):
        padded[index, : len(sequence)] = sequence
    if layout == "padded":
        return padded
    table = padded[:, :, 0]
    if hasattr(like, "columns") and hasattr(like, "index"):
        return type(like)(table, index=like.index, columns=like.columns)
    return table
