"""Cohort builder: the positive/negative selection protocol of the thesis' lupus study.

From a long table of visits and an outcome, build one sequence of visits per
eligible patient with a binary label, ready for an ``RNNClassifier``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ..sequences._encoding import within_rounding
from ..sequences._long import (
    _check_columns,
    _check_table,
    _factorize_ids,
    _resolve_features,
    _scalar,
    from_long_format,
)

__all__ = ["Cohort", "build_cohort"]

#: Exclusion reasons, in the order they are checked.
REASONS: tuple[str, ...] = ("positive_at_first_visit", "too_few_visits", "span_too_short")


@dataclass(eq=False)
class Cohort:
    """Sequences, labels and bookkeeping of a cohort built by :func:`build_cohort`.

    Attributes
    ----------
    sequences : list of ndarray of shape (T_i, 1 + n_features)
        The kept visits of each included patient, time column first
        (``time_feature=0``), then the features; NaN marks missing values.
    y : ndarray of shape (n_patients,), dtype int64
        1 for a positive (the event happens after the sequence), 0 for a
        negative. The label belongs to the last kept visit.
    ids : ndarray of shape (n_patients,)
        Patient id of each sequence, sorted.
    feature_names : list
        Column names of the sequences: the time column then the features.
    summary : dict of str to int
        ``n_patients`` (in the table), ``positives``, ``negatives`` and
        ``excluded_<reason>`` counts for the reasons ``positive_at_first_visit``,
        ``too_few_visits`` and ``span_too_short``.
    patients : pandas.DataFrame
        One row per patient of the table: the id, ``event`` (whether the
        outcome happened), ``reason`` (``"included"`` or the exclusion
        reason), ``n_visits``, ``n_kept`` and ``cut_time`` (time of the last
        kept visit as the time column gives it: a number, NaN when none is
        kept, or a date or duration, NaT when none is kept).
    time_feature : int
        Index of the time column in each sequence, always 0.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.clinical import build_cohort
    >>> visits = pd.DataFrame({"id": [1, 1, 1], "day": [0, 200, 400],
    ...                        "event": [0, 0, 1], "bili": [0.5, 0.9, 2.0]})
    >>> cohort = build_cohort(visits, id_column="id", time_column="day",
    ...                       event_column="event", upper_span=365,
    ...                       lower_span=0, min_visits=2)
    >>> cohort
    Cohort(n_sequences=1, positives=1, negatives=0, feature_names=['day', 'bili'])
    >>> cohort.patients
       id  event    reason  n_visits  n_kept  cut_time
    0   1   True  included         3       2     200.0
    """

    sequences: list[NDArray[np.float64]] = field(repr=False)
    y: NDArray[np.int64] = field(repr=False)
    ids: NDArray[Any] = field(repr=False)
    feature_names: list[Any]
    summary: dict[str, int]
    patients: pd.DataFrame = field(repr=False)
    time_feature: int = 0

    def __repr__(self) -> str:
        """Short description: counts and feature names, not the arrays."""
        return (
            f"Cohort(n_sequences={len(self.sequences)}, positives={self.summary['positives']}, "
            f"negatives={self.summary['negatives']}, feature_names={self.feature_names!r})"
        )


#: The columns of ``Cohort.patients`` after the id column.
_DECISIONS = ("event", "reason", "n_visits", "n_kept", "cut_time")
#: Microseconds per day: the spans (in days) of dated visits, in their exact unit.
_DAY_US: int = 86_400_000_000


def _is_dated(visits: pd.Series) -> bool:
    """Whether the visit times are dates or durations (else numbers)."""
    return pd.api.types.is_datetime64_any_dtype(visits) or pd.api.types.is_timedelta64_dtype(visits)


def _microseconds(values: pd.Series, visits: pd.Series) -> NDArray[Any]:
    """Dates as exact integer microseconds since the earliest of the ``visits``,
    durations as integer microseconds; None where missing. The sequences' float days
    round: compared in them, a visit exactly a span away fell on either side, as the
    table's earliest visit (another patient's, often) had it. Microseconds, pandas'
    unit for dates it parses: nanoseconds held dates only from 1677 to 2262 (an end of
    follow-up of 9999-12-31, a records system's "still followed", overflowed)."""
    values = values.dt.as_unit("us")
    origin = visits.min().as_unit("us") if pd.api.types.is_datetime64_any_dtype(visits) else None
    elapsed = values - origin if origin is not None else values
    exact = elapsed.array.asi8.astype(object)
    exact[elapsed.isna().to_numpy()] = None
    return exact


def _visit_times(
    table: pd.DataFrame, id_column: Any, time_column: Any, sequences: list[NDArray[np.float64]]
) -> list[NDArray[Any]]:
    """Each sequence's visit times in exact units, as the rules compare them: the
    sequences' own times where the time column holds numbers, integer microseconds
    (see :func:`_microseconds`) where it holds dates or durations."""
    column = table[time_column]
    if not _is_dated(column):
        dtype = getattr(column.dtype, "numpy_dtype", column.dtype)
        if np.issubdtype(dtype, np.floating) and np.finfo(dtype).bits < 64:
            # float32 times (a parquet file's) as the decimals they stand for: 0.6, not
            # 0.6000000238418579, whose float32 rounding the float64 allowance of the
            # span rules does not cover (a visit exactly a span away was cut)
            return [sequence[:, 0].astype(dtype).astype(str).astype(np.float64) for sequence in sequences]
        return [sequence[:, 0] for sequence in sequences]
    exact = _microseconds(column, column).astype(np.int64)
    codes, _ = _factorize_ids(table[id_column])
    order = np.lexsort((exact, codes))  # each patient's times sorted, as its sequence's
    return np.split(exact[order], np.flatnonzero(np.diff(codes[order])) + 1)


def _time_as_given(time: Any, visits: pd.Series) -> Any:
    """A time on the visits' exact scale (see :func:`_visit_times`) as the user gave it:
    the date or duration (not microseconds since a hidden origin), or the number."""
    if pd.api.types.is_datetime64_any_dtype(visits):
        return visits.min().as_unit("us") + pd.Timedelta(int(time), unit="us")
    if pd.api.types.is_timedelta64_dtype(visits):
        return pd.Timedelta(int(time), unit="us")
    return float(time)


def _time_text(time: Any, visits: pd.Series) -> str:
    """A time on the visits' exact scale as text: the date, the duration or every digit
    of the number (':g' showed 1700086000 and 1700086400 alike)."""
    given = _time_as_given(time, visits)
    if isinstance(given, float) and given.is_integer():
        return str(int(given))
    return repr(given) if isinstance(given, float) else str(given)


def _span(span: float, visits: pd.Series) -> Any:
    """A span (in days for dates and durations) in the exact unit of the visit times."""
    return int(round(span * _DAY_US)) if _is_dated(visits) else span


def _times_like_visits(series: pd.Series, name: str, visits: pd.Series) -> pd.Series:
    """``series`` as times on the visits' exact scale (see :func:`_per_patient`)."""
    present = series.dropna()
    if pd.api.types.is_datetime64_any_dtype(visits):
        kind, convert = "dates", pd.to_datetime
    elif pd.api.types.is_timedelta64_dtype(visits):
        kind, convert = "durations", pd.to_timedelta
    else:
        if any(isinstance(value, (pd.Timestamp, pd.Timedelta, np.datetime64, np.timedelta64))
               for value in present):
            raise TypeError(
                f"{name} holds dates or durations, but the time column holds numbers: give "
                f"{name} as numbers in the time column's unit (from the same origin)."
            )
        if pd.api.types.is_bool_dtype(series) or any(
            isinstance(value, (bool, np.bool_)) for value in present
        ):
            example = ("per_patient['futime'].where(per_patient['status'] == 2), NaN for "
                       "patients without the event" if name == "event_time"
                       else "per_patient['futime']")
            raise TypeError(
                f"{name} holds booleans, but it gives each patient's time, in the unit of "
                f"the time column. Pass the times, e.g. {example}."
            )
        try:
            numbers = pd.to_numeric(series, errors="raise")
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name} values must be numeric times in the unit of the time column ({exc})."
            ) from exc
        dtype = getattr(numbers.dtype, "numpy_dtype", numbers.dtype)
        if np.issubdtype(dtype, np.floating) and np.finfo(dtype).bits < 64:
            # float32 times (taken from a float32 table, as the visits') as the decimals
            # they stand for, as _visit_times reads the visits: 0.6000000238 against a
            # visit read as 0.6 kept the visit at the death in a positive's sequence.
            values = numbers.to_numpy(dtype=dtype, na_value=np.nan)
            return pd.Series(values.astype(str).astype(np.float64), index=series.index)
        return numbers.astype(np.float64)
    if any(isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
           for value in present):
        raise TypeError(
            f"the time column holds {kind}, so {name} must hold {kind} too: numbers would "
            "be read from another origin than the visits' (days since the earliest visit)."
        )
    if present.empty:  # no time at all: nothing to convert, nor a time zone to compare
        return pd.Series(None, index=series.index, dtype=object)
    try:  # on the visits' scale, as _visit_times reads them
        exact = _microseconds(convert(series), visits)
    except (TypeError, ValueError) as exc:  # not dates, or time zones on one side only
        raise TypeError(
            f"{name} values must be {kind}, as the time column's, with the same time zone "
            f"(or none on both sides) ({exc})."
        ) from exc
    return pd.Series(exact, index=series.index, dtype=object)


def _per_patient(
    mapping: Any, name: str, ids: NDArray[Any], id_column: Any, time_column: pd.Series
) -> NDArray[Any]:
    """Look up a per-patient time ``mapping`` for each id; None where absent. Times are
    read as the visits' are compared: numbers in its unit, or, where the visits are
    dated (or timed by durations), dates (durations) turned into integer microseconds
    since the earliest visit."""
    if not isinstance(mapping, (Mapping, pd.Series)):
        raise TypeError(
            f"{name} must be a mapping or pandas.Series from patient id to time; got "
            f"{type(mapping).__name__}. E.g. from a table of one row per patient: "
            + ("per_patient.set_index(id_column)['death_time'], NaN for patients without the "
               "event" if name == "event_time" else
               "per_patient.set_index(id_column)['followup_end'], the end of each patient's "
               "follow-up, at or after the last visit")
            + "."
        )
    series = mapping if isinstance(mapping, pd.Series) else pd.Series(dict(mapping), dtype=object)
    if series.index.has_duplicates:
        raise ValueError(f"{name} has repeated patient ids; give one time per patient.")
    values = _times_like_visits(series, name, time_column)
    infinite = np.isinf(values.to_numpy(dtype=np.float64, na_value=np.nan))
    if infinite.any():  # inf is not "none": +inf made a positive, or kept every visit
        patient = values.index[infinite][0]
        none = "no event" if name == "event_time" else "an end at the last visit"
        raise ValueError(
            f"{name} of patient {_scalar(patient)!r} is {values[patient]}: give a finite time "
            f"in the unit of the time column, or NaN (or no entry) for {none}."
        )
    found = values.reindex(ids)
    if values.notna().any() and found.isna().all():
        raise ValueError(
            f"none of the patient ids of {name} (e.g. {series.index[:3].tolist()}) match the "
            f"ids of column {id_column!r} (e.g. {ids[:3].tolist()}). Check that both use the "
            "same ids and the same type (int vs str)."
        )
    return found.astype(object).where(found.notna(), None).to_numpy()


def _check_params(upper_span: Any, lower_span: Any, min_visits: Any, positive_cut: Any) -> None:
    """Validate the protocol parameters."""
    for name, value in (("upper_span", upper_span), ("lower_span", lower_span)):
        is_number = isinstance(value, Real) and not isinstance(value, bool)
        if not is_number or not np.isfinite(value) or value < 0:
            raise ValueError(
                f"{name} must be a finite number >= 0 in the unit of the time column "
                f"(e.g. 365.25 for one year in days); got {value!r}."
            )
    if isinstance(min_visits, bool) or not isinstance(min_visits, Integral) or min_visits < 1:
        raise ValueError(f"min_visits must be an int >= 1; got {min_visits!r}.")
    if positive_cut not in ("event", "upper_span"):
        raise ValueError(f"positive_cut must be 'event' or 'upper_span'; got {positive_cut!r}.")


def _select(
    times: NDArray[Any],
    event_at: Any,
    end: Any,
    upper_span: Any,
    lower_span: Any,
    min_visits: int,
    positive_cut: str,
) -> tuple[str, int]:
    """Apply the protocol to one patient's sorted visit times.

    ``event_at`` is the event time (None for a negative), ``end`` the end of
    follow-up of a negative; times and spans in one exact unit (see
    :func:`_visit_times`). Returns the decision and the number of leading visits kept.
    """
    reference = event_at if event_at is not None else end
    # Times equal up to rounding are equal: a visit upper_span before the reference, up to
    # rounding, is upper_span before it (2.3 - 1.0 is 1.2999999999999998, and the visit at
    # 1.3 was cut), and a visit at the event up to rounding is at the event (months as
    # day / 30.4375 against a death as years * 12 kept the visit at the death). Dates
    # compare exactly, in whole microseconds.
    magnitude = _magnitude(times, reference)
    if event_at is not None:
        before = int(np.count_nonzero(~_at_least(times - event_at, 0, magnitude)))  # strictly before
        if before == 0:
            return "positive_at_first_visit", 0
        if positive_cut == "event":
            return ("included" if before >= 2 else "too_few_visits"), before
        need = max(2, min_visits)
    else:
        need = min_visits
    n_kept = int(np.count_nonzero(_at_least(reference - times, upper_span, magnitude)))  # times sorted
    if event_at is not None:  # never a visit at the event (upper_span=0 reached it)
        n_kept = min(n_kept, before)
    if n_kept < need:
        return "too_few_visits", n_kept
    if not _at_least(times[n_kept - 1] - times[0], lower_span, magnitude):
        return "span_too_short", n_kept
    return "included", n_kept


def _magnitude(times: NDArray[Any], reference: Any) -> float | None:
    """The magnitude of ``times`` and ``reference`` for :func:`_at_least` (None for exact
    integer times: dates in whole nanoseconds)."""
    if np.issubdtype(times.dtype, np.integer):
        return None
    return max(float(np.max(np.abs(times))), abs(float(reference)))


def _at_least(difference: Any, span: Any, magnitude: float | None) -> Any:
    """Whether ``difference`` (of two times of at most ``magnitude``) is at least
    ``span``, a difference equal to it up to the times' rounding counting as equal
    (:func:`within_rounding`); exactly for times without rounding (``magnitude`` None:
    dates in whole nanoseconds)."""
    if magnitude is None:
        return difference >= span
    return (difference >= span) | within_rounding(np.abs(difference - span), max(magnitude, abs(float(span))))


def build_cohort(
    table: pd.DataFrame,
    *,
    id_column: Any,
    time_column: Any,
    feature_columns: Any = None,
    event_column: Any = None,
    event_time: Mapping[Any, float] | pd.Series | None = None,
    end_time: Mapping[Any, float] | pd.Series | None = None,
    upper_span: float,
    lower_span: float,
    min_visits: int,
    positive_cut: Literal["event", "upper_span"] = "event",
    duplicates: Literal["raise", "keep"] = "raise",
) -> Cohort:
    """Build labelled visit sequences with the selection protocol of the lupus study.

    The outcome is given either per visit (``event_column``, truthy where it
    is present, like a damage index above 0) or per patient (``event_time``,
    e.g. the day of death). Visits are sorted by time within each patient,
    then every patient goes through these rules:

    * **Positive at the first visit** (event at or before the first visit):
      excluded.
    * **Positive** (the event happens later): with ``positive_cut="event"``
      (the original protocol) the sequence is the visits strictly before the
      event (before the first positive visit) and needs at least 2 of them;
      ``upper_span``, ``lower_span`` and ``min_visits`` do not apply. With
      ``positive_cut="upper_span"`` positives are cut like negatives, from
      the event time: a prediction horizon of ``upper_span`` for both classes
      (and never a visit at the event's time, even with ``upper_span=0``).
    * **Negative** (no event): from the end of follow-up (``end_time``, by
      default the last visit) walk back to the latest visit at least
      ``upper_span`` before it: the cut visit. The sequence is the visits up
      to and including the cut visit. The patient is excluded if it has fewer
      than ``min_visits`` visits (``too_few_visits``) or if the first to the
      cut visit cover less than ``lower_span`` (``span_too_short``).

    Parameters
    ----------
    table : pandas.DataFrame
        Long table, one row per visit.
    id_column : hashable
        Patient id column.
    time_column : hashable
        Visit time: numbers (e.g. days since enrollment), in the unit of the spans;
        or dates (or durations), read as days since the earliest visit (spans in
        days), as :func:`~sklearn_rnn.sequences.from_long_format` reads them; the
        spans are then compared with the dates to the nanosecond, so that a visit
        exactly a span away is on the side the rules below give.
    feature_columns : str or list of hashable, default=None
        Numeric feature columns. ``None`` takes every column except the id,
        time and event columns: leave out outcome columns (such as a follow-up
        time or a status) yourself, or they leak the label.
    event_column : hashable, default=None
        Numeric or boolean column, nonzero at visits where the outcome is
        present; NaN counts as absent. Exactly one of ``event_column`` and
        ``event_time`` must be given.
    event_time : mapping or pandas.Series, default=None
        Patient id -> time of the event; patients absent or NaN had none (an
        infinite time is refused: code "no event" as NaN, not inf). Dates
        (durations) where the time column holds dates (durations), numbers in its
        unit otherwise.
    end_time : mapping or pandas.Series, default=None
        Patient id -> end of follow-up of negatives (e.g. the censoring time),
        not earlier than their last visit (a ValueError otherwise); absent or
        NaN means the last visit (an infinite time is refused). Ignored for positives.
    upper_span : float
        Prediction horizon: minimum time between the cut visit and the end of
        follow-up (or the event, with ``positive_cut="upper_span"``).
    lower_span : float
        Minimum time covered by a kept sequence, first to last visit.
    min_visits : int
        Minimum number of kept visits of a negative (and of a positive with
        ``positive_cut="upper_span"``, which also needs at least 2).
    positive_cut : {"event", "upper_span"}, default="event"
        How positives are cut; see above.
    duplicates : {"raise", "keep"}, default="raise"
        Rows repeating a (patient, time) pair: raise, or keep them in table
        order (see :func:`sklearn_rnn.sequences.from_long_format`).

    Returns
    -------
    cohort : Cohort
        ``sequences`` (time first), ``y``, ``ids``, ``feature_names``,
        ``summary`` and per-patient ``patients`` decisions.

    Notes
    -----
    The thesis (section 4.3) and its original code only describe these rules
    in years on the lupus clinic data; here spans are in the unit of
    ``time_column``. The original protocol did not feed the time between
    visits to the network; the sequences here keep the time column so that
    the estimators can use the gaps (``time_feature=0``).

    On :func:`sklearn_rnn.datasets.load_pbcseq` with death as the event and
    transplanted patients left out, one-year spans and ``min_visits=2`` give
    230 patients (122 deaths) with the defaults, 244 (122 deaths) when
    negatives are walked back from the censoring day (``end_time``), and 208
    (86 deaths) when positives are also cut one year before death
    (``positive_cut="upper_span"``), as below.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_rnn.clinical import build_cohort
    >>> visits = pd.DataFrame({
    ...     "patient": [1, 1, 1, 2, 2, 2, 2, 3, 3],
    ...     "year": [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 3.5, 0.0, 1.0],
    ...     "sdi": [0, 0, 1, 0, 0, 0, 0, 1, 1],
    ...     "crp": [1.0, 2.0, 4.0, 1.0, 1.5, 1.2, 1.1, 3.0, 3.5],
    ... })
    >>> cohort = build_cohort(visits, id_column="patient", time_column="year",
    ...                       event_column="sdi", upper_span=1, lower_span=1,
    ...                       min_visits=2)
    >>> cohort.ids.tolist(), cohort.y.tolist()
    ([1, 2], [1, 0])
    >>> cohort.sequences[1]
    array([[0. , 1. ],
           [1. , 1.5],
           [2. , 1.2]])
    >>> cohort.summary["excluded_positive_at_first_visit"]
    1

    The PBC cohort of the package documentation: death within follow-up,
    predicted at least one year ahead, time in days.

    >>> from sklearn_rnn.datasets import load_pbcseq
    >>> pbc = load_pbcseq().query("status != 1")  # transplanted patients left out
    >>> per_patient = pbc.groupby("id")[["futime", "status"]].first()
    >>> year = 365.25
    >>> cohort = build_cohort(
    ...     pbc, id_column="id", time_column="day",
    ...     feature_columns=["bili", "albumin", "protime", "edema"],
    ...     event_time=per_patient.query("status == 2")["futime"],
    ...     end_time=per_patient["futime"], upper_span=year, lower_span=year,
    ...     min_visits=2, positive_cut="upper_span")
    >>> len(cohort.y), int(cohort.y.sum())
    (208, 86)
    """
    table = _check_table(table)
    _check_params(upper_span, lower_span, min_visits, positive_cut)
    if (event_column is None) == (event_time is None):
        raise ValueError(
            "give exactly one of event_column (outcome observed per visit) and event_time "
            "(patient id -> event time); got "
            + ("both." if event_column is not None else "neither.")
        )
    _check_columns(table, [id_column, time_column], "id_column/time_column")
    if id_column in _DECISIONS:
        raise ValueError(
            f"id_column={id_column!r} is also the name of a column of the cohort's patients "
            f"table ({list(_DECISIONS)}), which would then hold two columns of that name. "
            f"Rename the id column first, e.g. table.rename(columns={{{id_column!r}: 'patient'}})."
        )
    extra: list[Any] = []
    if event_column is not None:
        _check_columns(table, [event_column], "event_column")
        if event_column in (id_column, time_column):
            raise ValueError("event_column must differ from id_column and time_column.")
        flags = table[event_column]
        if not (pd.api.types.is_numeric_dtype(flags) or pd.api.types.is_bool_dtype(flags)):
            raise TypeError(
                f"event_column {event_column!r} must be numeric or boolean (nonzero where "
                f"the outcome is present); got dtype {flags.dtype}. Turn it into flags "
                f"first, e.g. table.assign(**{{{str(event_column)!r}: "
                f"table[{event_column!r}].eq('yes')}}) for text labels."
            )
        extra = [event_column]
    features = _resolve_features(table, id_column, time_column, feature_columns, exclude=extra)
    if event_column is not None and event_column in features:
        raise ValueError(
            f"event_column {event_column!r} is also in feature_columns; the outcome must not "
            "be a feature. Remove it from feature_columns."
        )
    sequences, ids = from_long_format(  # also checks that the event column is numeric
        table,
        id_column=id_column,
        time_column=time_column,
        feature_columns=features + extra,
        duplicates=duplicates,
    )
    n_features = 1 + len(features)
    exact = _visit_times(table, id_column, time_column, sequences)  # what the rules compare
    if event_column is not None:
        events = np.full(len(ids), None, dtype=object)
        for i, seq in enumerate(sequences):
            flags = np.nan_to_num(seq[:, n_features]) != 0  # NaN counts as absent
            if flags.any():
                events[i] = _scalar(exact[i][int(np.argmax(flags))])
    else:
        events = _per_patient(event_time, "event_time", ids, id_column, table[time_column])
    ends = (
        np.full(len(ids), None, dtype=object)
        if end_time is None
        else _per_patient(end_time, "end_time", ids, id_column, table[time_column])
    )
    upper, lower = _span(upper_span, table[time_column]), _span(lower_span, table[time_column])
    rows = []
    kept_sequences, labels, kept_ids = [], [], []
    for i, seq in enumerate(sequences):
        times = seq[:, 0]
        last = _scalar(exact[i][-1])
        end = last if ends[i] is None else ends[i]
        if events[i] is None and not _at_least(end - last, 0, _magnitude(exact[i], end)):
            # (the end only matters for negatives; on the last visit's day up to rounding is on it)
            raise ValueError(
                f"end_time of patient {_scalar(ids[i])!r} ({_time_text(end, table[time_column])}) "
                f"is before its last visit ({_time_text(last, table[time_column])}); end_time "
                "must be the end of follow-up: correct it, or give NaN (or no entry) to end at "
                "the last visit."
            )
        reason, n_kept = _select(exact[i], events[i], end, upper, lower, min_visits, positive_cut)
        has_event = events[i] is not None
        cut_time = (_time_as_given(exact[i][n_kept - 1], table[time_column]) if n_kept
                    else pd.NaT if _is_dated(table[time_column]) else np.nan)
        rows.append((ids[i], has_event, reason, len(times), n_kept, cut_time))
        if reason == "included":
            kept_sequences.append(np.ascontiguousarray(seq[:n_kept, :n_features]))
            labels.append(int(has_event))
            kept_ids.append(ids[i])
    patients = pd.DataFrame(rows, columns=[id_column, *_DECISIONS])
    if _is_dated(table[time_column]):  # dates or durations, NaT where no visit is kept
        patients["cut_time"] = patients["cut_time"].astype(table[time_column].dtype)
    y = np.asarray(labels, dtype=np.int64)
    summary = {"n_patients": len(ids), "positives": int(y.sum()), "negatives": int((y == 0).sum())}
    counts = patients["reason"].value_counts()
    summary.update({f"excluded_{r}": int(counts.get(r, 0)) for r in REASONS})
    return Cohort(
        sequences=kept_sequences,
        y=y,
        ids=np.asarray(kept_ids, dtype=ids.dtype),
        feature_names=[time_column, *features],
        summary=summary,
        patients=patients,
    )
