"""Panels in the sktime/aeon convention, and long tables passed where a panel belongs.

sktime and aeon hold a panel of sequences as a pandas DataFrame with a two-level
MultiIndex: the first level names the instance (a patient), the second the time point
(a visit), one row per observation and one column per variable. The estimators accept
such a frame directly, as the ragged list it stands for; :func:`panel_to_sequences`
performs the conversion.

A long table with the id and the time as ordinary *columns* (one row per visit) is
another matter: read as a 2D table, each row would become a sequence whose steps are the
columns, and a model would train without a word on the wrong problem. :func:`check_not_long_table`
recognizes such tables and refuses them with the route that works,
:func:`~sklearn_rnn.sequences.from_long_format`.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["check_not_long_table", "is_panel", "panel_to_sequences", "sequences_to_panel"]

#: Column names that identify an instance in a long table (matched whole or as a
#: ``_``-separated part, case-insensitively: ``id``, ``patient_id``, ``subject``...).
ID_NAMES = (
    "id", "ids", "pid", "uid", "mrn", "patient", "subject", "subj", "participant", "instance",
    "case", "series", "person", "user", "unit", "engine",
)

_NAME_PART = re.compile(r"[^a-z0-9]+")
_NUMBER = re.compile(r"\d+")
_WIDE_NAME = re.compile(r"(.+)__(\d+)")  # sktime's 'pd-wide' columns: <channel>__<time>
_CAMEL_CASE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_panel(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame with an (instance, time) MultiIndex.

    Parameters
    ----------
    X : object
        Candidate input.

    Returns
    -------
    bool

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import is_panel
    >>> index = pd.MultiIndex.from_tuples([("a", 0), ("a", 1)], names=["instance", "time"])
    >>> is_panel(pd.DataFrame({"x": [1.0, 2.0]}, index=index))
    True
    >>> is_panel(pd.DataFrame({"x": [1.0, 2.0]}))
    False
    """
    return is_frame(X) and getattr(X.index, "nlevels", 1) > 1


def is_frame(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame, a subclass's too (without importing pandas:
    none exists before pandas is)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(X, pandas.DataFrame)


def is_series(X: Any) -> bool:
    """Whether ``X`` is a pandas Series, a subclass's too (without importing pandas)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(X, pandas.Series)


def panel_to_sequences(X: Any) -> list[NDArray[np.float64]]:
    """The ragged list of a DataFrame with an (instance, time) MultiIndex.

    One sequence per instance (the first index level), in the order in which the
    instances first appear in the frame, so that predictions line up with
    ``X.index.unique(level=0)``. Each sequence's steps are the instance's rows sorted
    by the second index level, one row per (instance, time) pair; its features are the
    frame's columns. The time level orders the steps and is not a feature: to let the
    network read the gaps between steps, keep the time as a column as well (e.g.
    ``X.assign(day=X.index.get_level_values(1))``, in days) and pass its position as
    ``time_feature``.

    Parameters
    ----------
    X : pandas.DataFrame
        A panel: a two-level MultiIndex (instance, time), numeric or boolean columns.

    Returns
    -------
    list of ndarray of shape (T_i, n_columns), dtype float64

    Raises
    ------
    ValueError
        An index with more than two levels, missing instance or time labels, or
        repeated (instance, time) pairs (a melted table, one row per variable, is
        told to pivot first).
    TypeError
        Non-numeric columns, named with their dtypes.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import panel_to_sequences
    >>> index = pd.MultiIndex.from_tuples(
    ...     [("b", 2), ("a", 0), ("b", 1)], names=["patient", "day"]
    ... )
    >>> frame = pd.DataFrame({"bili": [1.5, 0.7, 1.2]}, index=index)
    >>> [x.ravel().tolist() for x in panel_to_sequences(frame)]
    [[1.2, 1.5], [0.7]]
    """
    _check_panel(X)
    if not len(X):
        return []  # no instance (np.split would give one of no steps)
    order, starts = _panel_order(X)
    return list(np.split(frame_values(X)[order], starts))  # (T_i, n_columns) each


def panel_frames(X: Any) -> list[Any]:
    """A panel as a list of DataFrames, one per instance, indexed by time.

    The instances and steps of :func:`panel_to_sequences`, in its order, with the
    panel's columns: what a search or a cross-validation can index by instance (a
    panel has a row per step, which scikit-learn's splitters would count as samples).

    Parameters
    ----------
    X : pandas.DataFrame
        A panel: a two-level MultiIndex (instance, time), numeric or boolean columns.

    Returns
    -------
    list of pandas.DataFrame

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import panel_frames
    >>> panel = pd.DataFrame({"bili": [1.5, 0.7, 1.2]},
    ...                      index=pd.MultiIndex.from_tuples([("b", 2), ("a", 0), ("b", 1)]))
    >>> frames = panel_frames(panel)
    >>> [frame["bili"].tolist() for frame in frames], frames[0].index.tolist()
    ([[1.2, 1.5], [0.7]], [1, 2])
    """
    _check_panel(X)
    order, starts = _panel_order(X)
    rows = X.iloc[order].droplevel(0)
    bounds = [0, *starts, len(order)]
    return [rows.iloc[start:end] for start, end in zip(bounds, bounds[1:])]


def by_instance(X: Any, y: Any) -> Any:
    """``X`` as a splitter or a search indexes it: a panel (one row per step) becomes
    :func:`panel_frames`, once ``y`` is checked to follow its instances; anything else
    is returned as it is.

    Parameters
    ----------
    X : sequences in any accepted form
    y : array-like of shape (n_samples,), optional

    Returns
    -------
    X, or a list of pandas.DataFrame

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import by_instance
    >>> index = pd.MultiIndex.from_tuples([("a", 0), ("a", 1), ("b", 0)])
    >>> len(by_instance(pd.DataFrame({"x": [1.0, 2.0, 3.0]}, index=index), [0, 1]))
    2
    """
    if not is_panel(X):
        return X
    check_targets_follow_instances(X, y)
    return panel_frames(X)


def _id_texts(value: Any) -> set[str]:
    """An id's spellings as text: ``str(value)``, and for an integral float its integer
    too (1.0 is the id '1.0' and the id '1')."""
    texts = {str(value)}
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        texts.add(str(int(value)))
    return texts


def check_one_type_of_ids(ids: NDArray[Any], where: str, fix: str) -> None:
    """Refuse distinct ``ids`` (of ``where``: a long table's id column, a panel's instance
    level) that are one id written in two types, 1 and '1' (or 1.0 and '1'): their rows
    would be two sequences, one patient's history split in two. ``fix`` converts them."""
    seen: dict[str, Any] = {}
    for value in ids:
        twin = next((seen[key] for key in _id_texts(value) if key in seen), None)
        if twin is not None:
            first = [value.item() if isinstance(value, np.generic) else value for value in (twin, value)]
            raise ValueError(
                f"{where} holds {first[0]!r} and {first[1]!r}, one id as values of different "
                "types (a table joined from two sources?): their rows would be two sequences, "
                f"one patient's history split in two. Give the ids one type first, e.g. {fix}."
            )
        for key in _id_texts(value):
            seen[key] = value


def _check_panel(X: Any) -> None:
    """Refuse a panel whose index or columns cannot be read as sequences."""
    index = X.index
    if index.nlevels != 2:
        raise ValueError(
            f"X has a {index.nlevels}-level index {list(index.names)}: a panel has two "
            "levels, (instance, time). Drop or reset the extra levels first, e.g. "
            "X.reset_index(level=...)."
        )
    instances = index.get_level_values(0)
    times = index.get_level_values(1)
    for level, values in (("instance", instances), ("time", times)):
        if values.isna().any():
            raise ValueError(
                f"the panel's {level} level ({index.names[0 if level == 'instance' else 1]!r}) "
                f"has {int(values.isna().sum())} missing label(s): every row needs an "
                "instance and a time. Drop those rows first."
            )
    if instances.dtype == object:  # 1 and '1' as two instances
        unique = instances.unique()
        if len(unique) > 1:
            check_one_type_of_ids(np.asarray(unique, dtype=object), f"the panel's instance level "
                                  f"({index.names[0]!r})", "X = X.rename(index=int, level=0) for ids that "
                                  "are whole numbers, or X.rename(index=str, level=0) for text ids")
    repeated = index.duplicated()
    if repeated.any():  # before the column check: a melted table's text column is its key
        raise ValueError(
            f"the panel repeats (instance, time) pairs: {int(repeated.sum())} row(s) repeat "
            f"an earlier row's pair, e.g. {_plain_pair(index[repeated][0])}. A panel holds one row "
            "per instance and time, each variable in its own column; these rows would be read "
            "as steps one after another. If each row holds one variable, as in a melted table "
            f"(sktime's 'pd-long'), pivot it first, one column per variable: {_panel_pivot(X)} "
            "(sort=False keeps the instances in their order, which y follows; sort_index(axis=1) "
            "the variables in one order in every table). Otherwise merge the rows of each pair, "
            "e.g. X.groupby(level=[0, 1], sort=False).mean()."
        )
    check_numeric_columns(X, where="the panel", variable="X")
    import pandas as pd

    kinds = pd.api.types
    ordered = (kinds.is_numeric_dtype(times) and not kinds.is_bool_dtype(times)) or (
        kinds.is_datetime64_any_dtype(times) or kinds.is_timedelta64_dtype(times)
        or isinstance(times.dtype, pd.PeriodDtype)
    )
    if not ordered:  # text sorts as text: "10" before "2"
        raise TypeError(
            f"the panel's time level ({'unnamed, level 1' if index.names[1] is None else repr(index.names[1])}) "
            "must be numeric, datetime, "
            f"timedelta or period, which orders the steps; got dtype {times.dtype}. "
            + ("It holds booleans (True/False), which do not say when a step was observed: "
               "make the steps' times the index's second level, after the instances."
               if kinds.infer_dtype(times, skipna=True) == "boolean" else
               "Convert it first, e.g. X.set_axis(X.index.set_levels(pandas.to_datetime("
               "X.index.levels[1]), level=1)) for text dates, or pandas.to_numeric for "
               "numbers written as text.")
        )


def check_targets_follow_instances(X: Any, y: Any, *, name: str = "y") -> None:
    """Refuse targets indexed by a panel's instances (or by the labels of a Series or
    DataFrame of one sequence per row) in another order than X's.

    scikit-learn pairs ``X`` and ``y`` by position. A panel's sequences come in the
    order in which its instances first appear; targets in a pandas Series (or
    DataFrame) indexed by the same instances in another order, as ``groupby`` sorts
    them, would give each sequence another instance's target without a word.

    Parameters
    ----------
    X : sequences in any accepted form
        Only a panel, and a pandas Series or DataFrame of one sequence per row labelled by
        its index (not pandas' default index), are checked.
    y : array-like
        Only a pandas object whose index holds exactly the panel's instances is checked
        (not pandas' default index, which counts positions).
    name : str, default='y'
        What ``y`` is, for the message (``'sample_weight'`` for weights, ``'groups'`` for
        a splitter's groups, checked alike).

    Raises
    ------
    ValueError
        ``y``'s index holds the panel's instances (X's labels) in another order.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import check_targets_follow_instances
    >>> index = pd.MultiIndex.from_tuples([("b", 0), ("a", 0), ("a", 1)], names=["id", "day"])
    >>> panel = pd.DataFrame({"bili": [1.0, 2.0, 3.0]}, index=index)
    >>> check_targets_follow_instances(panel, pd.Series([1, 0], index=["b", "a"]))
    >>> check_targets_follow_instances(panel, pd.Series([0, 1], index=["a", "b"]))
    Traceback (most recent call last):
    ...
    ValueError: y is indexed by the panel's instances, but in another order ...
    """
    index = getattr(y, "index", None)
    # A panel, or a sequence column or table of one sequence per row.
    if not (is_frame(X) or is_series(X)) or index is None or not hasattr(index, "equals"):
        return
    if default_index(index):
        return  # positions, not instance labels
    panel = is_panel(X)
    instances = X.index.unique(level=0) if panel else X.index
    if not panel and default_index(instances):
        return  # X's rows are positions: nothing to compare the labels with
    what = {"y": "targets", "sample_weight": "weights"}.get(name, name)
    if (not panel and len(index) == len(instances) and not index.equals(instances)
            and getattr(index.dtype, "kind", "O") not in "biufc" and bool(index.isin(instances).any())
            and not index.isin(instances).all()):
        # Labels such as X's (ids, not numbers, which a reset may renumber), some of them
        # X's, at other positions: a fold of X and y cut apart, y in another order (the
        # check of the whole set below did not survive a split).
        raise ValueError(
            f"{name} is indexed by labels such as X's {type(X).__name__} index, but other ones at "
            f"the same positions ({name} starts with {list(index[:3])}, X's rows with "
            f"{list(instances[:3])}): scikit-learn pairs X and {name} by position, so sequences "
            f"would get other instances' {what}. Put {name} in X's order ({name}.loc[X.index]) "
            "before splitting or selecting."
        )
    if len(index) != len(instances) or index.equals(instances) or not index.isin(instances).all():
        return
    rows = "instances" if panel else "rows"
    if panel:
        owner, order = "the panel's instances", f"the panel's order: {name}.loc[X.index.unique(level=0)]"
    else:
        owner, order = f"X's {type(X).__name__} index", f"X's order: {name}.loc[X.index]"
    raise ValueError(
        f"{name} is indexed by {owner}, but in another order ({name} starts "
        f"with {list(index[:3])}, X's {rows} with {list(instances[:3])}): scikit-learn "
        f"pairs X and {name} by position, so sequences would get other instances' {what}. "
        f"Put {name} in {order}."
    )


def default_index(index: Any) -> bool:
    """Whether ``index`` is pandas' default index ``RangeIndex(0, n)``: positions. Any
    other ``RangeIndex`` holds labels (``y[10:13]`` of a default-indexed Series keeps
    10, 11, 12; ``y[::-1]`` counts down).

    >>> import pandas as pd
    >>> default_index(pd.RangeIndex(3)), default_index(pd.Series(range(13)).index[10:13])
    (True, False)
    """
    import pandas as pd

    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def check_step_targets_follow_steps(X: Any, y: Any) -> None:
    """Refuse per-step targets of a panel whose labels put the steps in another order.

    A panel's sequences hold each instance's rows sorted by its time level; per-step
    targets are paired with them by position. A target that is a pandas object indexed
    by its instance's times (the panel's ``(instance, time)`` pairs, or the times
    alone), as ``groupby(level=0)`` of the panel's table in its row order gives them,
    would be paired with other steps without a word where those times are not in
    increasing order. Targets indexed by anything else (row numbers, pandas' default
    index) are paired by position, unchecked.

    Parameters
    ----------
    X : sequences in any accepted form
        A panel, or a list of DataFrames (each target then compared with its frame's
        row labels); other forms are not checked.
    y : sequence of per-step targets
        One per instance of the panel, in the order of its instances.

    Raises
    ------
    ValueError
        A target indexed by its instance's times holds them out of order, or a target
        indexed by ``(instance, time)`` pairs belongs to another instance; or a target
        beside a DataFrame is labelled by that frame's rows in another order (the
        frames of ``from_long_format(..., as_frame=True)`` are sorted by time, a
        ``groupby`` of the table keeps its row order).

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import check_step_targets_follow_steps
    >>> index = pd.MultiIndex.from_tuples([("a", 5), ("a", 0)], names=["id", "day"])
    >>> panel = pd.DataFrame({"bili": [1.5, 0.3]}, index=index)
    >>> check_step_targets_follow_steps(panel, [pd.Series([1, 0], index=index).sort_index()])
    >>> check_step_targets_follow_steps(panel, [pd.Series([1, 0], index=[7, 3])])  # row labels
    >>> check_step_targets_follow_steps(panel, [pd.Series([1, 0], index=index)])
    Traceback (most recent call last):
    ...
    ValueError: y[0] is indexed by its instance's times (5, 0, ...) in another order than X's steps...
    """
    if not is_panel(X):
        cells = _cells(X)
        if cells is not None:
            _check_targets_follow_frames(cells, y)
        return
    import pandas as pd

    codes, instances = pd.factorize(X.index.get_level_values(0), sort=False)
    times = np.asarray(X.index.get_level_values(1))
    for position, target in enumerate(y):
        if not isinstance(target, (pd.Series, pd.DataFrame)) or default_index(target.index):
            continue
        if isinstance(target.index, pd.MultiIndex) and position < len(instances):
            owners = pd.unique(target.index.get_level_values(0))
            if len(owners) == 1 and owners[0] in instances and owners[0] != instances[position]:
                # groupby(level=0) sorts the instances; the panel keeps them as they come.
                raise ValueError(
                    f"y[{position}] holds the steps of instance {_plain(owners[0])!r}, but sequence "
                    f"{position} of X is instance {_plain(instances[position])!r}: targets are "
                    "paired with the sequences by position, in the order in which the panel's "
                    "instances first appear. Put y in that order, e.g. "
                    "[g['target'] for _, g in table.groupby(level=0, sort=False)], or "
                    "[y_by_id[i] for i in X.index.unique(level=0)]."
                )
        labels = np.asarray(target.index.get_level_values(-1))
        own = times[codes == position]  # the instance's times, in row order
        try:
            same_times = len(labels) == len(own) and bool(np.array_equal(np.sort(labels), np.sort(own)))
        except TypeError:  # labels that do not compare with the times
            same_times = False
        if same_times and not pd.Index(labels).is_monotonic_increasing:
            shown = ", ".join(str(label) for label in labels[:2])
            raise ValueError(
                f"y[{position}] is indexed by its instance's times ({shown}, ...) in another "
                "order than X's steps, which a panel holds sorted by its time level: targets "
                "are paired with the steps by position, so they would be paired with other "
                "steps. Sort each target by its times first (e.g. "
                "y = [target.sort_index(level=-1) for target in y])."
            )


def _cells(X: Any) -> list[Any] | tuple[Any, ...] | None:
    """The sequences of ``X`` held one per item or cell (a list or tuple, an object
    array, a Series or a one-column DataFrame of them: ``sequence_column``'s), to check
    frames among them; None for other forms."""
    import pandas as pd

    if isinstance(X, (list, tuple)):
        return X
    if isinstance(X, pd.Series) or (isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1):
        return list(X)
    if isinstance(X, np.ndarray) and X.dtype == object and X.shape[1:] == (1,):
        return list(X[:, 0])
    if isinstance(X, pd.DataFrame) and X.shape[1] == 1:
        return list(X.iloc[:, 0])
    return None


def _check_targets_follow_frames(X: list[Any] | tuple[Any, ...], y: Any) -> None:
    """Refuse a pandas target labelled by its DataFrame's rows in another order (see
    :func:`check_step_targets_follow_steps`): it would be paired with other steps. A
    target of positions (0, 1, ..., pandas' default) beside a frame whose rows are
    labelled by those numbers in another order is refused too: it may be either (the
    first patient's rows of a table with the default index, or a target whose index was
    reset), and read as positions it paired other steps without a word."""
    import pandas as pd

    for position, (steps, target) in enumerate(zip(X, y)):
        if not (isinstance(steps, pd.DataFrame) and isinstance(target, (pd.Series, pd.DataFrame))):
            continue
        rows, labels = steps.index, target.index
        if len(labels) != len(rows) or labels.equals(rows) or (default_index(labels) and default_index(rows)):
            continue
        try:
            same_rows = bool(np.array_equal(np.sort(np.asarray(labels)), np.sort(np.asarray(rows))))
        except TypeError:  # labels that do not compare with one another
            same_rows = False
        if same_rows:
            shown = ", ".join(str(label) for label in list(rows)[:3])
            given = ", ".join(str(label) for label in list(labels)[:3])
            raise ValueError(
                f"y[{position}] is labelled by the rows of X[{position}] ({shown}, ...) in another "
                f"order ({given}, ...): targets are paired with the steps by position, so they "
                "would be paired with other steps. Put each target in its frame's row order "
                "first: y = [target.loc[frame.index] for target, frame in zip(y, X)]"
                + (", or, if its entries are already in the frame's step order (an index "
                   "reset), pass target.to_numpy()." if default_index(labels) else ".")
            )


def check_numeric_columns(frame: Any, *, where: str, variable: str = "frame") -> None:
    """Refuse a DataFrame with columns that are not numbers, naming them and their dtypes.

    Parameters
    ----------
    frame : pandas.DataFrame
    where : str
        What the frame is, for the message (``'the panel'``, ``'sequence 3 of X'``).
    variable : str, default='frame'
        The frame's name in the code the message suggests (``'X'`` for a panel).

    Raises
    ------
    TypeError
        Columns that are neither numeric nor boolean (text, categories, dates). A
        column of object dtype that holds only numbers, booleans and missing values
        (a boolean column with a ``None``) is read as numbers, as in a table.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import check_numeric_columns
    >>> check_numeric_columns(pd.DataFrame({"hr": [60.0], "ward": ["b"]}), where="sequence 0 of X")
    Traceback (most recent call last):
    ...
    TypeError: sequence 0 of X has columns that are not real numbers: {'ward': ...}. Leave them out ...
    """
    import pandas as pd

    # The labels themselves for lookups (pandas' default names are ints: frame["1"] was a
    # KeyError), their text for the message.
    columns = [(name, dtype) for name, dtype in frame.dtypes.items() if not real_column(frame, name, dtype)]
    if not columns:
        return
    bad = [name for name, _ in columns]
    non_numeric = {str(name): str(dtype) for name, dtype in columns}
    dates = [name for name, dtype in frame.dtypes.items()
             if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype)]
    hint = (
        f" Dates and durations ({', '.join(map(str, dates))}) become numbers with "
        "sequences.from_long_format, which turns them into days, or by hand, e.g. "
        "(column - column.min()) / pd.Timedelta(days=1) for dates, column / "
        "pd.Timedelta(days=1) for durations (fractions of a day kept)."
        if dates else ""
    ) + numbers_hint(frame, bad, variable=variable) + complex_hint(frame, bad)
    raise TypeError(
        f"{where} has columns that are not real numbers: {non_numeric}. Leave them out "
        f"(drop(columns=[...])) or encode them as numbers first.{hint}"
    )


def complex_hint(frame: Any, names: Any) -> str:
    """A sentence for the complex columns among ``names`` (empty when none is)."""
    import pandas as pd

    complex_names = [str(name) for name in names if pd.api.types.is_complex_dtype(frame[name].dtype)]
    if not complex_names:
        return ""
    return (f" Complex columns ({', '.join(complex_names)}) would lose their imaginary part: "
            "split each into two real columns (its .to_numpy().real and .imag), or take its "
            "magnitude (.abs()).")


def numbers_held(column: Any) -> bool:
    """Whether ``column``, a text or object Series, holds numbers that
    :func:`pandas.to_numeric` reads: written as text, as ``Decimal`` values, or with a
    few placeholders ('?', '<0.1') among them, as ``read_csv`` leaves a lab column."""
    return bool(numbers_as_text(column) or _placeholders(column))


def numbers_hint(frame: Any, names: Any, *, variable: str) -> str:
    """Sentences telling how to convert the columns among ``names`` that hold numbers
    (:func:`numbers_held`) with :func:`pandas.to_numeric`, in code on ``variable`` (the
    frame's name in the user's code); empty when none does."""
    def column(name: Any) -> Any:  # the first of repeated names (a frame of them otherwise)
        selected = frame[name]
        return selected.iloc[:, 0] if selected.ndim == 2 else selected

    placeholders = {name: cells for name in names if (cells := _placeholders(column(name)))}
    held = {name: kind for name in names if (kind := numbers_as_text(column(name)))}
    text = "".join(
        f" Column {name!r} holds numbers but also {cells}: make those missing, e.g. "
        f"{variable}[{name!r}] = pandas.to_numeric({variable}[{name!r}], errors='coerce') (or "
        "read the file with read_csv(na_values=[...]))."
        for name, cells in placeholders.items()
    )
    if held:
        columns = list(held)
        text += (f" Columns {columns} hold {' or '.join(sorted(set(held.values())))}, which "
                 f"pandas.to_numeric reads: convert them, e.g. {variable}[{columns}] = "
                 f"{variable}[{columns}].apply(pandas.to_numeric).")
    return text


def _placeholders(column: Any) -> list[Any]:
    """A few cells of a text column that are no number where most of its cells are
    numbers (placeholders such as '?' or '<0.1'); empty otherwise."""
    import pandas as pd

    if not (pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(column.dtype)):
        return []
    cells = column.dropna()
    numbers = pd.to_numeric(cells, errors="coerce")
    if not len(cells) or numbers.notna().sum() < len(cells) / 2:
        return []
    return pd.unique(cells[numbers.isna()])[:3].tolist()


def numbers_as_text(column: Any) -> str:
    """What ``column``, of text or object dtype, holds where :func:`pandas.to_numeric`
    reads it as real numbers: ``Decimal`` values (as ``pandas.read_sql`` gives a NUMERIC
    column), numbers written as text, or both; empty where it does not."""
    import pandas as pd

    if not (pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(column.dtype)):
        return ""
    try:
        numbers = pd.to_numeric(column)
    except (TypeError, ValueError):  # text that is not a number: dates, categories
        return ""
    if (not pd.api.types.is_numeric_dtype(numbers.dtype) or pd.api.types.is_bool_dtype(numbers.dtype)
            or pd.api.types.is_complex_dtype(numbers.dtype)):
        return ""
    cells = column.dropna()
    kinds = []
    if any(isinstance(cell, Decimal) for cell in cells):
        kinds.append("Decimal values (as pandas.read_sql gives a NUMERIC column)")
    if any(isinstance(cell, str) for cell in cells):
        kinds.append("numbers written as text")
    return " and ".join(kinds) or "numbers in an object column"


def integer_overflow(what: str, error: OverflowError, scaled: str = "it") -> ValueError:
    """The error for ``what`` holding a Python int past float64's range (``error``: the
    conversion's), saying how to bring ``scaled`` into it."""
    return ValueError(
        f"{what} holds an integer too large for a float ({error}): expected numbers within "
        f"float64's range (about 1.8e308). Scale {scaled} first, e.g. divide it or take its "
        "logarithm."
    )


def real_column(frame: Any, name: Any, dtype: Any) -> bool:
    """Whether column ``name`` holds real numbers or booleans: a numeric dtype that is not
    complex (whose imaginary part the float conversion would drop), a boolean one, or an
    object column of numbers (:func:`holds_numbers`)."""
    import pandas as pd

    if pd.api.types.is_complex_dtype(dtype):
        return False
    return (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
            or holds_numbers(frame, name, dtype))


def holds_numbers(frame: Any, name: Any, dtype: Any) -> bool:
    """Whether column ``name`` is of object dtype and holds only real numbers, booleans
    and missing values."""
    if dtype != object:
        return False
    import pandas as pd

    cells = frame[name].to_numpy()
    return all(isinstance(cell, (Real, np.bool_)) and not isinstance(cell, complex)
               for cell in cells[~pd.isna(cells)])


def frame_values(frame: Any) -> NDArray[np.float64]:
    """A numeric DataFrame's values as float64, with pandas' missing values (NaN, None,
    ``pd.NA`` of the nullable dtypes or in an object column) as NaN.

    Parameters
    ----------
    frame : pandas.DataFrame
        Numeric or boolean columns (see :func:`check_numeric_columns`).

    Returns
    -------
    ndarray of shape (n_rows, n_columns), dtype float64

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import frame_values
    >>> frame_values(pd.DataFrame({"n": pd.array([1, None], dtype="Int64")})).ravel().tolist()
    [1.0, nan]
    """
    objects = [i for i, dtype in enumerate(frame.dtypes) if dtype == object]
    if not objects:
        return frame.to_numpy(dtype=np.float64, na_value=np.nan)
    import pandas as pd

    values = np.empty(frame.shape, dtype=np.float64)
    for i in range(frame.shape[1]):
        column = frame.iloc[:, i]
        if i in objects:  # numbers and missing values (None, NaN, pd.NA) of any kind
            cells = column.to_numpy()
            missing = pd.isna(cells)
            try:
                values[:, i] = np.where(missing, 0.0, cells).astype(np.float64)
            except OverflowError as error:  # a Python int past float64's range
                raise integer_overflow(f"column {frame.columns[i]!r}", error, "the column") from error
            values[missing, i] = np.nan
        else:
            values[:, i] = column.to_numpy(dtype=np.float64, na_value=np.nan)
    return values


def _panel_order(X: Any) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The row order that groups the rows by instance (in order of first appearance)
    and sorts each instance's rows by time, and where in that order each instance but
    the first starts."""
    import pandas as pd

    codes, _ = pd.factorize(X.index.get_level_values(0), sort=False)
    time_order = pd.Series(X.index.get_level_values(1)).rank(method="first").to_numpy()
    order = np.lexsort((np.arange(len(codes)), time_order, codes))
    return order, np.flatnonzero(np.diff(codes[order])) + 1


def sequences_to_panel(sequences: list[NDArray[np.float64]], like: Any) -> Any:
    """Put sequences read from the panel ``like`` back into its rows, index and columns
    (the inverse of :func:`panel_to_sequences`, e.g. for a scaler's output)."""
    order, starts = _panel_order(like)
    bounds = [0, *starts.tolist(), len(order)]
    if len(bounds) - 1 != len(sequences) or any(
        len(sequence) > end - start for sequence, start, end in zip(sequences, bounds[:-1], bounds[1:])
    ):
        raise ValueError(
            f"{len(sequences)} sequences cannot be put back into the panel's rows: it has "
            f"{len(bounds) - 1} instances, and each sequence at most its instance's rows."
        )
    # An instance's trailing all-NaN rows were read as padding: they stay all-NaN.
    values = np.full((len(order), sequences[0].shape[1]), np.nan)
    for sequence, start in zip(sequences, bounds[:-1]):
        values[order[start : start + len(sequence)]] = sequence
    return type(like)(values, index=like.index, columns=like.columns)


def _plain_pair(pair: Any) -> tuple[Any, ...]:
    """An (instance, time) label with numpy scalars as Python ones, to quote."""
    return tuple(_plain(label) for label in pair)


def _panel_pivot(X: Any) -> str:
    """The ``pivot_table`` call that turns a melted panel (one row per instance, time and
    variable) into a panel with a column per variable: the column that names the variable
    and the one that holds its value are named where the panel has exactly one of each."""
    labels = label_columns(X)
    values = [name for name, dtype in X.dtypes.items() if real_column(X, name, dtype)]
    names = list(X.index.names)
    frame = "X"
    if any(name is None for name in names) or names[0] == names[1]:  # pivot_table groups by names
        names = ["instance", "time"]
        frame = f"X.rename_axis({names!r})"
    return pivot_call(frame, [repr(name) for name in names], labels, values, keep_order=True)


def label_columns(frame: Any, skip: Sequence[Any] = ()) -> list[Any]:
    """The columns of ``frame`` outside ``skip`` whose values name something: not real
    numbers, dates or durations (a melted table's variable column)."""
    import pandas as pd

    kinds = pd.api.types
    return [name for name, dtype in frame.dtypes.items()
            if name not in skip and not real_column(frame, name, dtype)
            and not kinds.is_datetime64_any_dtype(dtype) and not kinds.is_timedelta64_dtype(dtype)]


def pivot_call(frame: str, index: list[str], variables: list[Any], values: list[Any], *, keep_order: bool) -> str:
    """The ``pivot_table`` call, as text, that gives a melted table (one row per id, time
    and variable) one column per variable: the variable and value columns are named
    where there is one candidate of each, else placeholders. ``keep_order`` keeps the
    ids in the order of the rows (which y follows) and sorts the variables."""
    variable = repr(variables[0]) if len(variables) == 1 else "<the column naming the variable>"
    value = repr(values[0]) if len(values) == 1 else "<the value column>"
    order = (", sort=False", ".sort_index(axis=1)") if keep_order else ("", "")
    return (f"{frame}.pivot_table(index=[{', '.join(index)}], columns={variable}, "
            f"values={value}{order[0]}){order[1]}")


def _looks_like_id(name: Any) -> bool:
    words = _CAMEL_CASE.sub("_", str(name))  # PatientID, subjectId: Patient_ID, subject_Id
    parts = [part for part in _NAME_PART.split(words.lower()) if part]
    return bool(parts) and (parts[-1] in ID_NAMES or parts[0] in ID_NAMES)


#: Names that say "identifier" outright (a whole name, or its last part), unlike ``unit``
#: or ``case``, which may name a measurement: :func:`check_no_id_column` refuses such a
#: column in data read as steps or features.
_PLAIN_ID_PARTS = ("id", "ids", "pid", "uid", "mrn")
_PLAIN_ID_NAMES = ("patient", "subject", "subj", "participant", "person")


#: The names pandas gives the row numbers it writes or keeps: read_csv of a table saved
#: with its index ('Unnamed: 0'), reset_index() ('index', 'level_0').
_ROW_NUMBER_NAME = re.compile(r"Unnamed: \d+|index|level_\d+")


def check_no_row_numbers(columns: Any, where: str, drop: str) -> None:
    """Refuse a column of ``columns`` (a mapping of names to Series) named as pandas names
    the row numbers it writes or keeps and holding them, integers that count up by one: a
    table saved with ``to_csv`` and read back, or one after ``reset_index()``, gained it,
    and it was read as data (rows stored sorted by outcome gave a cross-validated ROC AUC
    of 1.0 on noise). ``where`` names the container with its verb ("X has"), ``drop`` the
    code that drops the column ``{name}``."""
    for name, column in columns.items():
        if not (isinstance(name, str) and _ROW_NUMBER_NAME.fullmatch(name)) or is_frame(column):
            continue  # a repeated name (a frame of columns) is refused as such elsewhere
        if getattr(column.dtype, "kind", None) not in ("i", "u") or len(column) < 2:
            continue
        values = column.to_numpy()
        if (np.diff(values) == 1).all():
            raise ValueError(
                f"{where} a column {name!r} of integers counting up by one, the row numbers "
                "pandas writes with a table (to_csv, then read_csv) or keeps in reset_index(): "
                f"it would be read as data. Drop it: {drop.format(name=repr(name))}; or read the "
                "file with pd.read_csv(path, index_col=0), or call reset_index(drop=True). A "
                "column of data under that name: rename it."
            )


def check_row_number_columns(X: Any, time_feature: Any = None) -> None:
    """:func:`check_no_row_numbers` for the frames of a list (the first one's columns,
    every frame's being alike) or a panel, leaving out the time column ``time_feature``
    (a name or position: ``frame.reset_index()`` of frames indexed by their times names
    it 'index'), for an estimator's fit."""
    if is_panel(X):
        frame, where, drop = X, "X has", "X = X.drop(columns=[{name}])"
    elif isinstance(X, (list, tuple)) and X and is_frame(X[0]):
        frame, where, drop = X[0], "X's sequences have", "X = [frame.drop(columns=[{name}]) for frame in X]"
    else:
        return
    columns = {}
    for position, name in enumerate(frame.columns):
        numbered = isinstance(time_feature, Integral) and not isinstance(time_feature, bool)
        if name == time_feature or (numbered and position == int(time_feature) % len(frame.columns)):
            continue
        if isinstance(name, str) and _ROW_NUMBER_NAME.fullmatch(name):
            columns[name] = frame[name]
    check_no_row_numbers(columns, where, drop)


def _plainly_an_id(name: Any) -> bool:
    words = _CAMEL_CASE.sub("_", str(name))
    parts = [part for part in _NAME_PART.split(words.lower()) if part]
    return bool(parts) and (parts[-1] in _PLAIN_ID_PARTS or (len(parts) == 1 and parts[0] in _PLAIN_ID_NAMES))


def check_no_id_column(frames: Sequence[Any]) -> None:
    """Refuse a column named plainly like an id (``id``, ``patient_id``, ``subject``)
    that holds one value in each of the DataFrames ``frames`` (the sequences of a
    ``groupby`` of a long table): it would be read as a feature, raw id numbers the
    network memorizes and extrapolates from.

    Parameters
    ----------
    frames : sequence
        The sequences of ``X``; only DataFrames among them are looked at.

    Raises
    ------
    ValueError
        Naming the column and how to drop it.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import check_no_id_column
    >>> visits = pd.DataFrame({"patient_id": [7, 7, 9], "bili": [1.2, 1.5, 0.7]})
    >>> check_no_id_column([frame for _, frame in visits.groupby("patient_id")])
    Traceback (most recent call last):
    ...
    ValueError: X's sequences have a column 'patient_id' ...
    """
    import pandas as pd

    tables = [frame for frame in frames if isinstance(frame, pd.DataFrame)]
    if not tables:
        return
    for name in tables[0].columns:
        if not _plainly_an_id(name) or not all(name in frame.columns for frame in tables):
            continue
        if all(frame[name].nunique(dropna=False) <= 1 for frame in tables):
            raise ValueError(
                f"X's sequences have a column {name!r} named like an id and holding one value "
                "per sequence: it would be read as a feature, raw id numbers the network "
                f"would memorize. Drop it: X = [frame.drop(columns=[{name!r}]) for frame in X] "
                "(keep the ids beside, to put predictions back), or build the sequences with "
                "sklearn_rnn.sequences.from_long_format(table, id_column=..., time_column=...). "
                "A per-sequence covariate that is no id: rename the column."
            )


def check_no_panel_id_column(panel: Any) -> None:
    """:func:`check_no_id_column` for a panel: a column named plainly like an id with one
    value per instance (the id kept by ``set_index([...], drop=False)``) is refused.

    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import check_no_panel_id_column
    >>> visits = pd.DataFrame({"patient_id": [7, 7, 9], "day": [0.0, 30.0, 0.0], "bili": [1.2, 1.5, 0.7]})
    >>> check_no_panel_id_column(visits.set_index(["patient_id", "day"], drop=False))
    Traceback (most recent call last):
    ...
    ValueError: X's columns include 'patient_id', named like an id and holding one value per instance ...
    """
    for name in panel.columns:
        if not _plainly_an_id(name):
            continue
        if panel.groupby(level=0, sort=False)[name].nunique(dropna=False).max() <= 1:
            raise ValueError(
                f"X's columns include {name!r}, named like an id and holding one value per "
                "instance of the panel: it would be read as a feature, raw id numbers the "
                f"network would memorize. Drop it: X = X.drop(columns=[{name!r}]) (a panel "
                "built with set_index([...], drop=False) keeps it; drop=True does not). A "
                "per-instance covariate that is no id: rename the column."
            )


def _id_like_columns(columns: Any) -> list[Any]:
    """The columns named like an id column (:func:`_looks_like_id`), less those named
    as the steps of a wide table are: alike but for their numbers (``case_count_w0``,
    ``case_count_w1``, ...), which a long table's one id column is not."""
    stems = [_NUMBER.sub("#", name) if isinstance(name, str) and _NUMBER.search(name) else None
             for name in columns]
    counts = Counter(stem for stem in stems if stem is not None)
    return [name for name, stem in zip(columns, stems)
            if _looks_like_id(name) and not (stem is not None and counts[stem] > 1)]


def check_not_long_table(X: Any) -> None:
    """Refuse a long table (one row per visit) passed where a table of sequences belongs.

    A 2D DataFrame is read as one univariate sequence per row. A frame whose rows are
    visits instead, recognized by an id column with repeated values (a column named
    like ``id``, ``patient_id`` or ``subject``, and not numbered alike other columns, as
    the steps ``case_w0``, ``case_w1``, ... of a wide table are), a repeated row index,
    or a date or duration column, raises a ValueError naming
    :func:`~sklearn_rnn.sequences.from_long_format` and the panel form; a melted table
    (columns id, time, one naming the variable and one holding its value, as sktime's
    ``pd-long``) is told to pivot instead, one column per variable. A table whose columns
    are all named ``<channel>__<time>`` for more than one channel (sktime's 'pd-wide' of
    a multivariate panel, ``dim_0__0`` ... ``dim_5__99``) would put the channels one after
    another as steps: it raises a ValueError naming the reshape into ``(n, T, channels)``
    where its columns run channel by channel, and sktime's 'pd-multiindex'. Other input
    passes unchanged.

    Parameters
    ----------
    X : object
        Input read as a table.

    Raises
    ------
    ValueError
        ``X`` looks like a long table, or a wide table of several channels.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import check_not_long_table
    >>> check_not_long_table(pd.DataFrame({"t0": [1.0, 2.0], "t1": [0.5, 0.1]}))
    >>> visits = pd.DataFrame({"id": [1, 1, 2], "day": [0, 30, 0], "bili": [1.2, 1.5, 0.7]})
    >>> check_not_long_table(visits)
    Traceback (most recent call last):
    ...
    ValueError: X looks like a long table, one row per visit: ...
    >>> check_not_long_table(pd.DataFrame([[1.0, 2.0, 0.1, 0.2]],
    ...                                   columns=["hr__0", "hr__1", "bp__0", "bp__1"]))
    Traceback (most recent call last):
    ...
    ValueError: X looks like sktime's wide table of a multivariate panel ('pd-wide'): ...
    """
    if not is_frame(X):
        return
    import pandas as pd

    reason, way_out = None, "X.to_numpy()"
    ids = set(_id_like_columns(X.columns))
    for name in X.columns:
        column = X[name]
        if pd.api.types.is_datetime64_any_dtype(column) or pd.api.types.is_timedelta64_dtype(column):
            reason = f"column {name!r} holds dates or durations ({column.dtype})"
            break
        if name in ids and column.duplicated().any():
            repeated = column[column.duplicated()].iloc[0]
            count = int((column == repeated).sum())
            reason = (
                f"column {name!r} repeats ids (e.g. {_plain(repeated)!r} on {count} rows), "
                "as an id column of one row per visit does"
            )
            break
    if reason is None and len(X) > 1:
        check_no_row_numbers(X, "X has", "X.drop(columns=[{name}])")
    if reason is None:
        for name in ids:
            if _plainly_an_id(name) and len(X) > 1 and X[name].is_unique:
                raise ValueError(
                    f"X has a column {name!r} named like an id, one distinct value per row: a "
                    f"2D table is read as one univariate sequence per row, every column a step "
                    f"({X.shape[0]} sequences of {X.shape[1]} steps here), so the ids would be "
                    f"read as each sequence's first value. Drop it: X.drop(columns=[{name!r}]) "
                    "(keep the ids beside, to put predictions back). A step that is no id: "
                    "rename the column."
                )
    if reason is None and X.index.has_duplicates:
        repeated = X.index[X.index.duplicated()][0]
        reason = f"its index repeats labels (e.g. {_plain(repeated)!r}), as visits of one id do"
        # A bootstrap sample (sklearn.utils.resample) or pd.concat repeats them as well.
        way_out = ("X.reset_index(drop=True), which keeps the column names (a bootstrap "
                   "sample or a concatenation repeats row labels too)")
    if reason is None:
        _check_not_wide_panel(X)
        return
    read = (f"A 2D table is read as one univariate sequence per row ({X.shape[0]} sequences "
            f"of {X.shape[1]} steps here), which is not what these rows are.")
    pivot = _melted_pivot(X)
    if pivot:  # the routes below would read the variables one after another, as steps
        raise ValueError(
            f"X looks like a long table, one row per visit: {reason}. {read} Each row holds "
            f"one variable, as in a melted table (sktime's 'pd-long'): {pivot}"
        )
    raise ValueError(
        f"X looks like a long table, one row per visit: {reason}. {read} Convert the long table with "
        "sklearn_rnn.sequences.from_long_format(X, id_column=..., time_column=...), "
        "which returns the sequences and their ids, or index it by (instance, time), "
        "X.set_index([id_column, time_column]), which the estimators read as a panel. "
        f"If the rows really are sequences, pass {way_out}."
    )


def _check_not_wide_panel(X: Any) -> None:
    """Refuse sktime's wide table of a multivariate panel ('pd-wide'): columns all named
    ``<channel>__<time>`` (``dim_0__0`` ... ``dim_5__99``) with more than one channel,
    which read as a table would put the channels one after another as steps. One channel
    (a univariate 'pd-wide') is a table of univariate sequences, and passes."""
    parts = [_WIDE_NAME.fullmatch(name) if isinstance(name, str) else None for name in X.columns]
    if not parts or not all(parts):
        return
    channels = list(dict.fromkeys(part.group(1) for part in parts))  # in order of appearance
    if len(channels) < 2:
        return
    n_channels, n_columns = len(channels), X.shape[1]
    shown = ", ".join(repr(channel) for channel in channels)
    if n_channels > 3:
        shown = f"{channels[0]!r}, {channels[1]!r}, ..., {channels[-1]!r}"
    # The values reshape to (n, channels, T) only where the columns run channel by
    # channel, each over the same time points, in increasing order.
    times = [int(part.group(2)) for part in parts]
    steps = n_columns // n_channels
    blocks = [times[start:start + steps] for start in range(0, n_columns, steps)]
    channel_major = (
        n_columns % n_channels == 0
        and [part.group(1) for part in parts] == [channel for channel in channels for _ in range(steps)]
        and all(block == blocks[0] for block in blocks)
        and all(earlier < later for earlier, later in zip(blocks[0], blocks[0][1:]))
    )
    if channel_major:
        layout = f"{n_channels} channels ({shown}) of {steps} time points each, channel by channel"
        way_out = (f"Reshape it into (n, T, channels), X.to_numpy().reshape(len(X), {n_channels}, -1)"
                   ".transpose(0, 2, 1), or load it")
    else:
        layout = (f"{n_channels} channels ({shown}), but not channel by channel over the same "
                  "time points in order, so that no reshape of its values gives (n, T, channels)")
        way_out = "Order its columns channel by channel first, or load it"
    raise ValueError(
        "X looks like sktime's wide table of a multivariate panel ('pd-wide'): its "
        f"{n_columns} columns are named <channel>__<time> for {layout}. A 2D table is read "
        "as one univariate sequence per row, which would put the channels one after another, "
        f"{n_columns} steps of one feature. {way_out} as return_type='pd-multiindex', a panel "
        "that the estimators read as it is. If the rows really are univariate sequences, pass "
        "X.to_numpy()."
    )


def _melted_pivot(X: Any) -> str:
    """The way out for a melted long table, one row per (id, time, variable): columns id,
    time, one that names the variable (not a number) and one that holds its value,
    recognized by (id, time) pairs that repeat once per variable. Else an empty string."""
    if X.shape[1] != 4 or X.columns.has_duplicates:
        return ""
    ids = [name for name in _id_like_columns(X.columns) if X[name].duplicated().any()]
    labels = label_columns(X, skip=ids[:1])
    if not ids or len(labels) != 1:
        return ""
    key, variable = ids[0], labels[0]
    rest = [name for name in X.columns if name not in (key, variable)]  # numbers, dates
    # The time: its (id, time) pairs repeat, once per variable, and never with one variable.
    times = [name for name in rest if X.duplicated([key, name]).any()
             and not X.duplicated([key, name, variable]).any()]
    if not times:  # one row per (id, time): a long table with a text feature
        return ""
    dated = [name for name in rest if not real_column(X, name, X[name].dtype)]
    others = [name for name in rest if name not in times]
    time, values = "<the time column>", []
    if len(times) == 1 and others[0] not in dated:
        time, values = repr(times[0]), others
    call = pivot_call("X", [repr(key), time], [variable], values, keep_order=True)
    return (
        f"pivot it first, one column per variable, {call}, a panel that "
        "the estimators read as it is (sort=False keeps the ids in their order, which y "
        "follows; sort_index(axis=1) the variables in one order in every table). Leaving "
        f"{variable!r} out, or converting the table as it is, would read the variables one "
        "after another, as steps."
    )


def long_table_hint(X: Any, n_targets: int) -> str:
    """A hint for targets that do not match a 2D DataFrame's rows: when one of its
    columns repeats values and holds exactly ``n_targets`` distinct ones, the rows may
    be visits of that column's ids (a long table under a name that
    :func:`check_not_long_table` does not know); for a panel whose time level holds
    ``n_targets`` labels, its levels may be swapped. Else an empty string.

    Parameters
    ----------
    X : object
        The input read as a table.
    n_targets : int
        How many targets came.

    Returns
    -------
    str

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.sequences._panel import long_table_hint
    >>> visits = pd.DataFrame({"ward": [1, 1, 2], "day": [0, 30, 0], "bili": [1.2, 1.5, 0.7]})
    >>> long_table_hint(visits, 2)[:71]
    " X may be a long table, one row per visit of the 2 ids in column 'ward'"
    """
    if is_panel(X) and X.index.nlevels == 2:  # read as (instance, time): unless swapped
        instances, times = (X.index.get_level_values(level).nunique() for level in (0, 1))
        names = list(X.index.names)
        # Only where the names say so too: in a balanced panel the counts alone cannot tell
        # (instance, time) from (time, instance), and a y short of some patients matched.
        if times == n_targets != instances and _looks_like_id(names[1]) and not _looks_like_id(names[0]):
            return (
                f" X's index may be (time, instance) rather than (instance, time): its level 1 "
                f"({names[1]!r}) holds {n_targets} distinct labels, as many as the targets, and its "
                f"level 0 ({names[0]!r}) the {instances} sequences X is read as. Swap them: "
                "X.swaplevel().sort_index()."
            )
        return ""
    if not is_frame(X):
        return ""
    for name in X.columns:
        column = X[name]
        ids = column.nunique(dropna=False)
        # As ids of a long table sorted by them: repeated, each in one block of rows.
        blocks = int((column != column.shift()).sum())
        if ids == n_targets and blocks == ids < len(column):
            return (
                f" X may be a long table, one row per visit of the {n_targets} ids in column "
                f"{name!r}: convert it with sklearn_rnn.sequences.from_long_format(X, "
                f"id_column={name!r}, time_column=...), or index it by (instance, time), "
                f"X.set_index([{name!r}, time_column])."
            )
    return ""


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
