"""Converters between long-format tables and the list-of-arrays sequence container.

A long-format table has one row per observation (a clinical visit), a column
identifying the sample (the patient), a time column and feature columns. The
package's container is a list of 2D float64 arrays of shape ``(T_i, d)``, one
per sample, with NaN for missing values.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._panel import (
    check_no_row_numbers,
    check_one_type_of_ids,
    complex_hint,
    default_index,
    frame_values,
    holds_numbers,
    label_columns,
    numbers_as_text,
    numbers_held,
    numbers_hint,
    pivot_call,
    real_column,
)
from ._validation import _check_unique_columns, number_text

__all__ = ["from_long_format", "to_long_format"]


def _check_table(table: Any, name: str = "table") -> pd.DataFrame:
    """Check that ``table`` is a non-empty DataFrame."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(
            f"{name} must be a pandas.DataFrame in long format (one row per observation); "
            f"got {type(table).__name__}. Wrap your data with pandas.DataFrame(...)."
        )
    if table.shape[0] == 0:
        raise ValueError(
            f"{name} is empty: expected at least one row (one observation of one sample)."
        )
    _check_unique_columns(table, name, "table")
    return table


def _check_columns(table: pd.DataFrame, columns: Sequence[Any], role: str, one: bool = False) -> None:
    """Raise a ValueError naming the ``columns`` absent from ``table``; ``one``: the
    role names one column, shown as given rather than as a list."""
    for column in columns:
        if isinstance(column, (list, set, dict, pd.Index, np.ndarray)):  # a tuple names a MultiIndex column
            raise TypeError(
                f"{role} must name one column; got {column!r}. For a key of several columns, "
                "combine them into one first, e.g. table.assign(key=table[a].astype(str) + '/' "
                "+ table[b].astype(str))."
            )
    if isinstance(table.columns, pd.MultiIndex):  # groupby(...).agg([...]).reset_index()
        partial = [c for c in columns if c in table.columns and c not in list(table.columns)]
        if partial:
            raise ValueError(
                f"{role} {partial[0]!r} names only part of a column of the table, whose columns "
                f"have {table.columns.nlevels} levels, e.g. {table.columns[0]!r}: the full "
                f"name is needed (a part names several columns, or is read as the id and time "
                "again among the features). Pass the full name, or flatten the columns first, "
                "e.g. table.columns = ['_'.join(str(p) for p in c if p != '') for c in "
                "table.columns]."
            )
    missing = [c for c in columns if c not in table.columns]
    if missing:
        in_index = [c for c in missing if c is not None and c in [n for n in table.index.names if n is not None]]
        shown = (lambda names: repr(names[0])) if one else repr
        hint = (f" {shown(in_index)} {'is' if len(in_index) == 1 else 'are'} the table's index: "
                "pass table.reset_index() to make it a column." if in_index else
                " Check the spelling or rename the columns.")
        raise ValueError(
            f"{role} {shown(missing)} not found in the table; its columns are "
            f"{list(table.columns)}.{hint}"
        )


def _resolve_features(
    table: pd.DataFrame,
    id_column: Any,
    time_column: Any,
    feature_columns: Any,
    exclude: Sequence[Any] = (),
    check_types: bool = True,
) -> list[Any]:
    """Return the feature column names, checked to exist and, with ``check_types``, be
    numeric.

    With ``feature_columns=None`` every column except the id, time and
    ``exclude`` columns is a feature.
    """
    if feature_columns is None:
        skip = {id_column, time_column, *exclude}
        features = [c for c in table.columns if c not in skip]
        # Every other column: not the row numbers read_csv or reset_index() added.
        check_no_row_numbers({c: table[c] for c in features}, "the table has",
                             "pass feature_columns=[...] without it, or table.drop(columns=[{name}])")
    else:
        if not isinstance(feature_columns, str) and not hasattr(feature_columns, "__iter__"):
            raise TypeError(
                f"feature_columns must be a list of column names (or one name as a str); got "
                f"{type(feature_columns).__name__} {feature_columns!r}. For one column, pass "
                f"feature_columns=[{feature_columns!r}]."
            )
        if isinstance(feature_columns, (set, frozenset)):  # hash order: another in each process
            raise TypeError(
                f"feature_columns is a {type(feature_columns).__name__}, which has no order: the "
                "features would come out in an order that changes from one Python process to "
                "the next, and a model fitted on the arrays would read them swapped in another. "
                "Pass a list in the order wanted, e.g. sorted(...) or the table's order: "
                "[c for c in table.columns if c in feature_columns]."
            )
        features = [feature_columns] if isinstance(feature_columns, str) else list(feature_columns)
        _check_columns(table, features, "feature_columns")
        clash = [c for c in features if c in (id_column, time_column)]
        if clash:
            why = []
            if id_column in clash:
                why.append(f"the id column {id_column!r} names the sequences and is not read as a feature")
            if time_column in clash:
                why.append(f"the time column {time_column!r} is always put first in each sequence")
            raise ValueError(
                f"feature_columns must not contain the id or time column; got {clash}: "
                f"{'; '.join(why)}. Remove {'them' if len(clash) > 1 else 'it'} from feature_columns."
            )
        if len(set(features)) != len(features):
            raise ValueError(f"feature_columns has repeated names: {features}. List each once.")
    if not check_types:
        return features
    non_numeric = [c for c in features if not real_column(table, c, table[c].dtype)]
    if non_numeric:
        dtypes = {c: str(table[c].dtype) for c in non_numeric}
        # Dates and durations become counts of a unit; one-hot columns would be one a date.
        dates = [c for c in non_numeric if pd.api.types.is_datetime64_any_dtype(table[c].dtype)
                 or pd.api.types.is_timedelta64_dtype(table[c].dtype)
                 or isinstance(table[c].dtype, pd.PeriodDtype) or _holds_date_objects(table[c])]
        # Numbers as text, Decimal values or numbers with a few placeholders are converted
        # by pandas.to_numeric, not one-hot encoded (that would be a column per value).
        numbers = [c for c in non_numeric if c not in dates and numbers_held(table[c])]
        others = [c for c in non_numeric if c not in dates and c not in numbers]
        raise TypeError(
            f"feature columns must hold real numbers; got columns {dtypes}. "
            "Leave them out with feature_columns=[...] or "
            + (f"encode them first, e.g. pandas.get_dummies(table, columns={others}, dtype=float)."
               if others else "convert them to numbers first.")
            + numbers_hint(table, numbers, variable="table")
            + (f" Dates and durations ({', '.join(map(str, dates))}) become numbers of days, e.g. "
               "(column - column.min()) / pd.Timedelta(days=1) for dates, column / "
               "pd.Timedelta(days=1) for durations (fractions of a day kept); date objects "
               "and periods become dates first, pd.to_datetime(column) or "
               "column.dt.to_timestamp()." if dates else "")
            + complex_hint(table, non_numeric)
        )
    return features


def _holds_date_objects(column: pd.Series) -> bool:
    """Whether an object column holds dates (``datetime.date``, as ``.dt.date`` gives them)."""
    present = column.dropna()
    return column.dtype == object and len(present) > 0 and all(
        isinstance(value, datetime.date) for value in present.iloc[:100])


def elapsed_time(values: pd.Series, origin: Any, unit: Any = "1D") -> NDArray[np.float64]:
    """Dates as multiples of ``unit`` since ``origin``, or durations (``origin`` None)
    as multiples of ``unit``: how :func:`from_long_format` reads a time column of dates
    or durations, and what other times on its scale (such as a cohort's event dates)
    must be read as.

    Parameters
    ----------
    values : pandas.Series of datetime64 or timedelta64
    origin : pandas.Timestamp or None
        The date counted as 0 (the table's earliest), None for durations.
    unit : str or pandas.Timedelta, default="1D"

    Returns
    -------
    ndarray of float64 (NaN where a value is missing)

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._long import elapsed_time
    >>> days = pd.Series(pd.to_datetime(["2024-01-01", "2024-01-03"]))
    >>> elapsed_time(days, days.min()).tolist()
    [0.0, 2.0]
    """
    elapsed = values - origin if origin is not None else values
    return (elapsed / _duration(unit, "unit")).to_numpy(dtype=np.float64, na_value=np.nan)


def _duration(unit: Any, name: str) -> pd.Timedelta:
    """``unit`` as a positive duration; a bare number (7, 1.5, '7'), which pandas reads
    as nanoseconds (a day was then 8.64e13), is refused with the unit to add."""
    bare = (
        isinstance(unit, (int, float, np.number))
        and not isinstance(unit, (bool, np.bool_, np.timedelta64))  # an int to numpy, with its unit
    ) or (isinstance(unit, str) and unit.strip().lstrip("+-").replace(".", "", 1).isdigit()) or (
        isinstance(unit, np.timedelta64) and np.datetime_data(unit.dtype)[0] == "generic"
    )  # np.timedelta64(7): no unit of its own
    if bare:
        raise ValueError(
            f"{name} must carry its unit, e.g. '7D', '1h' or pd.Timedelta(days=7); got "
            f"{unit!r}, which pandas reads as {unit} nanoseconds."
        )
    try:
        duration = pd.Timedelta(unit)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{name} must be a duration pandas understands, e.g. '1D', '1h' or "
            f"'365.25D'; got {unit!r} ({error})."
        ) from error
    if not duration > pd.Timedelta(0):  # NaT too
        raise ValueError(f"{name} must be a positive duration; got {unit!r}.")
    return duration


def _numeric_time(
    table: pd.DataFrame, time_column: Any, time_unit: Any = "1D"
) -> NDArray[np.float64]:
    """Return the time column as finite float64 values; dates become multiples of
    ``time_unit`` since the table's earliest date, durations multiples of ``time_unit``."""
    column = table[time_column]
    dates = pd.api.types.is_datetime64_any_dtype(column)
    if dates or pd.api.types.is_timedelta64_dtype(column):
        unit = _duration(time_unit, "time_unit")
        time = elapsed_time(column, column.min() if dates else None, unit)
    elif pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        raise TypeError(
            f"time column {time_column!r} must be numeric (e.g. days since a reference "
            f"date), datetime or timedelta; got dtype {column.dtype}. "
            + ("It holds booleans (True/False), which do not say when a row was observed: "
               "pass the column of the rows' times as time_column (numbers, dates or durations)."
               if pd.api.types.infer_dtype(column, skipna=True) == "boolean" else
               "Convert the periods to dates first, e.g. table[col].dt.to_timestamp()."
               if isinstance(column.dtype, pd.PeriodDtype) else
               _categorical_hint(column)
               if isinstance(column.dtype, pd.CategoricalDtype) else
               "It holds numbers in an object column: convert them to numbers first, e.g. "
               "pandas.to_numeric(table[col])."
               if holds_numbers(table, time_column, column.dtype) else
               f"It holds {numbers_as_text(column)}: convert them to numbers first, e.g. "
               "pandas.to_numeric(table[col])."
               if numbers_as_text(column) else
               _object_times_hint(column))
        )
    elif pd.api.types.is_complex_dtype(column):  # cut to its real part, with numpy's warning only
        raise TypeError(
            f"time column {time_column!r} holds complex numbers (dtype {column.dtype}): expected "
            "real times (numbers, dates or durations). Pass the real times, e.g. "
            "table[col].to_numpy().real if the imaginary parts are zero."
        )
    else:
        time = column.to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.all(np.isfinite(time)):
        bad = int(np.sum(~np.isfinite(time)))
        raise ValueError(
            f"time column {time_column!r} has {bad} missing or infinite value(s); every row "
            "needs a time to be ordered. Drop or fill those rows first."
        )
    return time


def _object_times_hint(column: pd.Series) -> str:
    """How to convert an object time column that holds no numbers: durations by
    ``to_timedelta``, dates of several time zones by ``to_datetime(utc=True)``, text dates
    by ``to_datetime`` (each failed through the other)."""
    present = column.dropna()
    if len(present) and all(isinstance(value, (datetime.timedelta, np.timedelta64)) for value in present.iloc[:100]):
        return "It holds durations: convert them first, e.g. pandas.to_timedelta(table[col])."
    zones = {str(getattr(value, "tzinfo", None)) for value in present.iloc[:1000]
             if isinstance(value, datetime.datetime)}
    if len(zones) > 1:
        return ("It holds dates in several time zones: convert them to one first, e.g. "
                "pandas.to_datetime(table[col], utc=True).")
    return "Convert text dates first, e.g. pandas.to_datetime(table[col])."


def _categorical_hint(column: pd.Series) -> str:
    """How to read a categorical time column: by its categories' own values (numbers, or
    dates as text), never through pandas.to_datetime of numbers (day 7: 7 nanoseconds)."""
    categories = column.cat.categories
    if pd.api.types.is_numeric_dtype(categories.dtype):
        return ("It is categorical, of numbers: take their values first, e.g. "
                "table[col].astype(float).")
    if pd.api.types.is_datetime64_any_dtype(categories.dtype):
        return ("It is categorical, of dates: take their values first, e.g. "
                "table[col].astype(table[col].cat.categories.dtype).")
    return ("It is categorical: take the values of its categories first, e.g. "
            "pandas.to_numeric(table[col].astype(str)) for numbers, or "
            "pandas.to_datetime(table[col].astype(str)) for dates written as text.")


def _time_key(column: pd.Series, time: NDArray[np.float64]) -> NDArray[Any]:
    """What orders the rows of a time column and finds its repeated times: its own
    integers (dates and durations as integer counts of their unit), else ``time``."""
    if pd.api.types.is_datetime64_any_dtype(column) or pd.api.types.is_timedelta64_dtype(column):
        return np.asarray(column.array.asi8)
    if pd.api.types.is_integer_dtype(column):
        dtype = column.dtype
        dtype = getattr(dtype, "numpy_dtype", getattr(dtype, "subtype", dtype))  # nullable, sparse
        return column.to_numpy(dtype=dtype)
    return time


def _scalar(value: Any) -> Any:
    """Return numpy scalars as Python scalars, for readable error messages."""
    return value.item() if isinstance(value, np.generic) else value


def _factorize_ids(column: pd.Series) -> tuple[NDArray[np.intp], NDArray[Any]]:
    """Return per-row codes into the sorted unique ids, and those ids."""
    if column.isna().any():
        raise ValueError(
            f"id column {column.name!r} has {int(column.isna().sum())} missing value(s); "
            "every row must belong to a sample. Drop those rows first."
        )
    codes, uniques = pd.factorize(column, sort=True)
    if column.dtype == object and len(uniques) > 1:  # ids of several types: 1 and '1' are two ids
        name = f"table[{column.name!r}]"
        check_one_type_of_ids(np.asarray(uniques, dtype=object), f"id column {column.name!r}",
                              f"{name} = pd.to_numeric({name}) for ids that are numbers, or "
                              f"{name}.astype(str) for text ids (integral floats made ints first)")
    return codes, np.asarray(uniques)


def from_long_format(
    table: pd.DataFrame,
    *,
    id_column: Any,
    time_column: Any,
    feature_columns: Any = None,
    duplicates: Literal["raise", "keep"] = "raise",
    time_unit: Any = "1D",
    as_frame: bool = False,
) -> tuple[list[Any], NDArray[Any]]:
    """Convert a long-format table into the list-of-arrays sequence container.

    Rows are grouped by ``id_column``; each group becomes one sequence whose
    rows are sorted by ``time_column`` (stable: rows with the same time keep
    their table order). Each sequence holds the time column FIRST (index 0)
    followed by the feature columns, as float64. Missing values stay NaN.

    The estimators read that column as the times only when told so: pass
    ``time_feature=0`` to them (or the time column's name with ``as_frame=True``),
    e.g. ``RNNClassifier(time_feature=0)``. Without it nothing warns: the times are
    read as an ordinary feature, in their raw units, and the steps as evenly spaced.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per observation (e.g. one clinical visit).
    id_column : hashable
        Column identifying the sample (e.g. the patient). Sequences are
        returned in sorted id order, whatever the row order of ``table``.
    time_column : hashable
        Column of observation times: numbers (e.g. days since enrollment, used as
        they are), dates (``datetime64``: converted to multiples of ``time_unit`` since the
        earliest date of the table) or durations (``timedelta64``: converted to
        multiples of ``time_unit``). Missing or infinite times are an error. Rows are
        ordered, and repeated times found, on the column's own values: integer times
        (epoch nanoseconds, say) that float64 cannot tell apart keep their order, but
        come out as float64, which rounds integers beyond ``2**53`` (subtract a
        reference time first to keep their gaps).
    feature_columns : str or list of hashable, default=None
        Feature columns, in the order wanted. ``None`` takes every column
        except the id and time columns, in table order. All must be numeric
        or boolean (a column of object dtype holding only numbers, booleans and
        missing values counts as numbers); encode categorical columns first.
    duplicates : {"raise", "keep"}, default="raise"
        What to do with several rows sharing one (id, time): ``"raise"``
        raises a ValueError (often a sign of a bad merge); ``"keep"`` keeps
        them all, in table order, as steps with a zero time gap (which the
        time-aware 'decay' cell does not move its state for: merge such rows
        for it).
    time_unit : str or pandas.Timedelta, default="1D"
        The unit of a date or duration time column, one day by default (``"1h"``,
        ``"7D"``, ``"365.25D"`` for years...). Ignored for numeric times. With
        ``time_feature`` the estimators read gaps in units of the median training
        gap, so the unit does not change the model.
    as_frame : bool, default=False
        Return each sequence as a pandas DataFrame instead of an array: the same
        float64 values, with the time column's and the features' names as columns and
        the rows' labels in ``table`` as index. The estimators then keep the names
        (``feature_names_in_``), can read the time column by name
        (``time_feature="day"``), and refuse a later table whose features come in
        another order, which arrays would pass on silently.

    Returns
    -------
    sequences : list of ndarray of shape (T_i, 1 + n_features), or of DataFrame
        One float64 array (a DataFrame with ``as_frame=True``) per id: the time column
        then the features.
    ids : ndarray of shape (n_sequences,)
        The sorted unique ids (text ids as text: ``'p10'`` before ``'p2'``; a categorical
        column's in the order of its categories, as pandas sorts them); ``ids[i]``
        is the id of ``sequences[i]``. Estimators pair targets with sequences by
        position: put targets kept per id in this order, e.g. ``y = outcomes.loc[ids]``.

    See Also
    --------
    to_long_format : Put per-sample predictions back into a table keyed by id.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences import from_long_format
    >>> visits = pd.DataFrame({
    ...     "patient": ["b", "a", "b", "a", "a"],
    ...     "day": [30, 10, 0, 0, 20],
    ...     "bili": [1.5, 0.7, 1.2, 0.5, float("nan")],
    ... })
    >>> X, ids = from_long_format(visits, id_column="patient", time_column="day")
    >>> ids.tolist()
    ['a', 'b']
    >>> X[0]
    array([[ 0. ,  0.5],
           [10. ,  0.7],
           [20. ,  nan]])
    >>> X[1]
    array([[ 0. ,  1.2],
           [30. ,  1.5]])

    Dates are counted in days from the earliest one:

    >>> visits["date"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(visits["day"], unit="D")
    >>> X, ids = from_long_format(visits.drop(columns="day"), id_column="patient",
    ...                           time_column="date")
    >>> X[1][:, 0]
    array([ 0., 30.])

    With ``as_frame=True`` the sequences keep their column names (and the time column
    can be named, ``RNNClassifier(time_feature="date")``):

    >>> frames, ids = from_long_format(visits.drop(columns="day"), id_column="patient",
    ...                                time_column="date", as_frame=True)
    >>> frames[1]
       date  bili
    2   0.0   1.2
    0  30.0   1.5

    A panel in the sktime/aeon convention, ``visits.set_index(["patient", "day"])``
    (a DataFrame with an (instance, time) MultiIndex), goes to the estimators as it is.
    """
    table = _check_table(table)
    if duplicates not in ("raise", "keep"):
        raise ValueError(f"duplicates must be 'raise' or 'keep'; got {duplicates!r}.")
    if not isinstance(as_frame, (bool, np.bool_)):
        raise TypeError(f"as_frame must be True or False; got {as_frame!r}.")
    _check_columns(table, [id_column], "id_column", one=True)
    _check_columns(table, [time_column], "time_column", one=True)
    if id_column == time_column:
        raise ValueError(
            f"id_column and time_column are the same column ({id_column!r}): expected one "
            "column naming the sequence of each row and another holding its time."
        )
    named = _resolve_features(table, id_column, time_column, feature_columns, check_types=False)
    time = _numeric_time(table, time_column, time_unit)  # (n_rows,)
    codes, ids = _factorize_ids(table[id_column])  # (n_rows,), (n_ids,)
    key = _time_key(table[time_column], time)  # the times as given: float64 rounds large ints
    order = np.lexsort((key, codes))  # stable: by id, then time, then row order
    codes, key = codes[order], key[order]
    same = (codes[1:] == codes[:-1]) & (key[1:] == key[:-1])
    # Before the features' types: a melted table's text column is its variable's name,
    # which the pivot below turns into columns (one-hot encoding it would lead astray).
    if duplicates == "raise" and same.any():
        features = [c for c in named if real_column(table, c, table[c].dtype)]
        first = int(np.flatnonzero(same)[0])
        at = _scalar(table[time_column].iloc[order[first]])  # as given, not as float64
        at = number_text(at) if isinstance(at, float) else str(at)
        raise ValueError(
            f"{int(same.sum())} row(s) repeat an existing ({id_column!r}, {time_column!r}) pair, "
            f"e.g. id {_scalar(ids[codes[first]])!r} at time {at}. Aggregate them first "
            f"(e.g. table.groupby([{id_column!r}, {time_column!r}], as_index=False)"
            ".mean(numeric_only=True)) or pass "
            "duplicates='keep' to keep them as steps with a zero time gap. If each row holds "
            "one variable, as in a melted table (sktime's 'pd-long'), pivot the table instead, "
            f"one column per variable: {_pivot_call(table, id_column, time_column, features)}."
        )
    features = _resolve_features(table, id_column, time_column, feature_columns)
    values = np.empty((table.shape[0], 1 + len(features)))  # (n_rows, 1 + n_features)
    values[:, 0] = time
    if features:
        values[:, 1:] = frame_values(table[features])
    values = values[order]
    starts = np.flatnonzero(np.diff(codes)) + 1
    sequences: list[Any] = np.split(values, starts)
    if as_frame:
        columns = [time_column, *features]
        labels = table.index[order]  # the rows' labels, in the sequences' order
        bounds = [0, *starts.tolist(), len(order)]
        sequences = [
            pd.DataFrame(sequence, index=labels[start:end], columns=columns)
            for sequence, start, end in zip(sequences, bounds, bounds[1:])
        ]
    return sequences, ids


def _pivot_call(table: pd.DataFrame, id_column: Any, time_column: Any, features: list[Any]) -> str:
    """The ``pivot_table`` call that gives a melted table (one row per id, time and
    variable) a column per variable, naming the column of the variable where one column
    besides the id and the time is not numbers, and the value where one feature is read."""
    variables = label_columns(table, skip=(id_column, time_column))
    call = pivot_call("table", [repr(id_column), repr(time_column)], variables, features, keep_order=False)
    return f"{call}.reset_index()"


def _same_labels(index: pd.Index, ids: np.ndarray) -> bool:
    """Whether ``index`` holds exactly the labels of ``ids``, in any order."""
    try:
        return index.is_unique and set(index) == set(pd.Index(ids))  # tolist() made datetime64[ns] ints
    except TypeError:  # unhashable labels
        return False


def to_long_format(
    values: ArrayLike,
    ids: ArrayLike,
    *,
    id_column: Any = "id",
    columns: Any = None,
) -> pd.DataFrame:
    """Put per-sample values (e.g. predictions) into a table keyed by id.

    The inverse direction of :func:`from_long_format` for results: one row
    per sample, the id in the first column, ready to merge back into the
    original table with ``table.merge(result, on=id_column)``.

    Parameters
    ----------
    values : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Per-sample values, e.g. ``predict`` or ``predict_proba`` outputs.
    ids : array-like of shape (n_samples,)
        Unique id of each sample, e.g. the ``ids`` of :func:`from_long_format`.
    id_column : hashable, default="id"
        Name of the id column of the result.
    columns : hashable or list of hashable, default=None
        Names of the value columns. ``None`` gives ``"value"`` for 1D values
        and ``"value_0"``, ``"value_1"``, ... for 2D values (pass e.g.
        ``clf.classes_`` for ``predict_proba`` output).

    Returns
    -------
    frame : pandas.DataFrame of shape (n_samples, 1 + n_outputs)
        The id column followed by the value columns, in the order of ``ids``.

    Raises
    ------
    ValueError
        ``values`` is not one entry per sample (a list of arrays, as per-step
        predictions come, is refused whatever their lengths), ``ids`` repeat or do not match it in
        length, the column names do not fit, or ``values`` is a pandas object indexed by
        the same ids in another order (values and ids are paired by position: pass
        ``values.loc[ids]``).

    See Also
    --------
    from_long_format : Turn a long-format table into sequences and ids.

    Examples
    --------
    >>> from sklearn_rnn.sequences import to_long_format
    >>> to_long_format([0.2, 0.9], ["a", "b"], id_column="patient", columns="risk")
      patient  risk
    0       a   0.2
    1       b   0.9
    >>> to_long_format([[0.8, 0.2], [0.1, 0.9]], [7, 3], columns=[0, 1])
       id    0    1
    0   7  0.8  0.2
    1   3  0.1  0.9
    """
    reduce_first = (
        "to_long_format writes per-sample results (e.g. predict or predict_proba), one row "
        "per sample; for sequences, reduce them to one value per sample first."
    )
    if (
        (isinstance(values, (list, tuple)) or getattr(values, "dtype", None) == object)
        and len(values)
        and all(np.ndim(entry) >= 1 and hasattr(entry, "shape") for entry in values)
    ):  # per-step predictions (RNNStepClassifier.predict): of equal lengths they read as outputs
        raise ValueError(
            f"values must be per-sample results; got a {type(values).__name__} of "
            f"{len(values)} arrays, as per-step predictions of sequences come (e.g. "
            f"RNNStepClassifier.predict). {reduce_first} If they are rows of per-sample "
            "outputs, pass np.vstack(values)."
        )
    try:
        array = np.asarray(values)
    except ValueError as error:  # numpy's message for entries of different shapes
        raise ValueError(
            "values must be 1D (n_samples,) or 2D (n_samples, n_outputs), one entry per "
            f"sample; got {len(values)} entries of different shapes (sequences?). {reduce_first}"
        ) from error
    id_array = np.asarray(ids)
    if array.ndim not in (1, 2):
        raise ValueError(
            "values must be 1D (n_samples,) or 2D (n_samples, n_outputs), one entry per "
            f"sample; got shape {array.shape}. {reduce_first}"
        )
    if id_array.ndim != 1:
        raise ValueError(
            f"ids must be 1D with one id per sample ({array.shape[0]}); got shape "
            f"{id_array.shape}. Pass the ids returned with the sequences."
        )
    if id_array.shape[0] != array.shape[0]:  # the values are as often the ones out of step
        raise ValueError(
            f"values hold {array.shape[0]} samples but ids {id_array.shape[0]}: pass one value "
            "(row) per id, e.g. the predictions of the very sequences the ids came with (ids "
            "of a subset X[mask] are ids[mask])."
        )
    id_series = pd.Series(id_array)
    if id_series.duplicated().any():
        repeated = pd.unique(id_series[id_series.duplicated()])[:5].tolist()
        raise ValueError(
            f"ids must be unique to key the table; got repeated ids {repeated}. Pass one "
            "id per sample, e.g. the ids returned by from_long_format."
        )
    index = getattr(values, "index", None)
    positions = default_index(index)
    if (isinstance(index, pd.Index) and not positions and not index.equals(pd.Index(id_array))
            and _same_labels(index, id_array)):
        raise ValueError(
            "values is indexed by the same ids in another order: to_long_format pairs values "
            "and ids by position, which would put each value under another id. Pass "
            "values.loc[ids] (or values.to_numpy() if its positions already follow ids)."
        )
    matrix = array.reshape(array.shape[0], -1)  # (n_samples, n_outputs)
    if columns is None:
        names = ["value"] if array.ndim == 1 else [f"value_{j}" for j in range(matrix.shape[1])]
    elif isinstance(columns, str) or np.ndim(columns) == 0:
        names = [columns]
    else:
        names = list(columns)
    if len(names) != matrix.shape[1]:
        raise ValueError(
            f"columns must name each of the {matrix.shape[1]} value column(s); got {len(names)} "
            f"name(s): {names}."
        )
    if id_column in names:
        raise ValueError(
            f"id_column {id_column!r} is also a value column name; choose another id_column."
        )
    frame = pd.DataFrame(matrix, columns=pd.Index(names))
    frame.insert(0, id_column, id_array)
    return frame
