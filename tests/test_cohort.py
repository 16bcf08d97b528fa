"""Tests of the cohort builder (the lupus selection protocol)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sklearn_rnn.clinical import Cohort, build_cohort
from sklearn_rnn.datasets import load_pbcseq

NAN = np.nan
YEAR = 365.25

# One patient per rule; times in years, the event is sdi > 0.
#   1: positive at year 2, two earlier visits            -> included, y = 1
#   2: negative, last visit 3.5, cut at 2                -> included, y = 0
#   3: positive at its first visit                       -> positive_at_first_visit
#   4: positive with one earlier visit                   -> too_few_visits
#   5: negative, cut leaves 0 and 0.5: span 0.5 < 1      -> span_too_short
#   6: negative, cut leaves one visit                    -> too_few_visits
#   7: negative, cut visit exactly 1 year before the end -> included (bounds inclusive)
#   8: positive at year 3, NaN sdi counts as absent      -> included, y = 1
ROWS = [
    (1, 0.0, 0, 1.0), (1, 1.0, 0, 2.0), (1, 2.0, 1, 4.0),
    (2, 0.0, 0, 1.0), (2, 1.0, 0, 1.5), (2, 2.0, 0, 1.2), (2, 3.5, 0, 1.1),
    (3, 0.0, 1, 3.0), (3, 1.0, 1, 3.5),
    (4, 0.0, 0, 1.0), (4, 0.5, 2, 2.0),
    (5, 0.0, 0, 1.0), (5, 0.5, 0, 1.0), (5, 3.0, 0, 1.0),
    (6, 0.0, 0, 1.0), (6, 1.0, 0, 1.0),
    (7, 0.0, 0, 7.0), (7, 1.0, 0, 7.1), (7, 2.0, 0, 7.2),
    (8, 0.0, 0, 8.0), (8, 1.0, NAN, 8.1), (8, 2.0, 0, 8.2), (8, 3.0, 2, 8.3),
]  # fmt: skip
EVENT_TIMES = {1: 2.0, 3: 0.0, 4: 0.5, 8: 3.0}


@pytest.fixture
def visits() -> pd.DataFrame:
    table = pd.DataFrame(ROWS, columns=["patient", "year", "sdi", "crp"])
    return table.sample(frac=1.0, random_state=0)  # row order must not matter


def _build(table: pd.DataFrame, **kwargs) -> Cohort:
    params = dict(id_column="patient", time_column="year", upper_span=1, lower_span=1, min_visits=2)
    params.update(kwargs)
    if "event_time" not in params:
        params.setdefault("event_column", "sdi")
    return build_cohort(table, **params)


def _check_reference_cohort(cohort: Cohort) -> None:
    assert cohort.ids.tolist() == [1, 2, 7, 8]
    assert cohort.y.tolist() == [1, 0, 0, 1]
    assert cohort.y.dtype == np.int64
    assert cohort.feature_names == ["year", "crp"]
    assert cohort.time_feature == 0
    expected = [
        [[0, 1.0], [1, 2.0]],
        [[0, 1.0], [1, 1.5], [2, 1.2]],
        [[0, 7.0], [1, 7.1]],
        [[0, 8.0], [1, 8.1], [2, 8.2]],
    ]
    for sequence, e in zip(cohort.sequences, expected, strict=True):
        np.testing.assert_array_equal(sequence, e)
    assert cohort.summary == {
        "n_patients": 8,
        "positives": 2,
        "negatives": 2,
        "excluded_positive_at_first_visit": 1,
        "excluded_too_few_visits": 2,
        "excluded_span_too_short": 1,
    }
    patients = cohort.patients.set_index("patient")
    assert patients["reason"].to_dict() == {
        1: "included", 2: "included", 3: "positive_at_first_visit", 4: "too_few_visits",
        5: "span_too_short", 6: "too_few_visits", 7: "included", 8: "included",
    }  # fmt: skip
    assert patients["event"].tolist() == [True, False, True, True, False, False, False, True]
    assert patients["n_visits"].tolist() == [3, 4, 2, 2, 3, 2, 3, 4]
    assert patients["n_kept"].tolist() == [2, 3, 0, 1, 2, 1, 2, 3]
    np.testing.assert_array_equal(patients["cut_time"], [1, 2, NAN, 0, 0.5, 0, 1, 2])


def test_event_column_protocol(visits):
    _check_reference_cohort(_build(visits))


def test_event_time_gives_the_same_cohort(visits):
    table = visits.drop(columns="sdi")
    _check_reference_cohort(_build(table, event_time=EVENT_TIMES))
    series = pd.Series({**EVENT_TIMES, 2: NAN, 99: 5.0})  # NaN and unknown ids mean no event
    _check_reference_cohort(_build(table, event_time=series))


def test_boolean_event_column(visits):
    _check_reference_cohort(_build(visits.assign(sdi=visits["sdi"].fillna(0) > 0)))


def test_positives_keep_the_visits_strictly_before_the_event(visits):
    table = visits.drop(columns="sdi")
    between = _build(table, event_time={1: 1.5})
    np.testing.assert_array_equal(between.sequences[0][:, 0], [0.0, 1.0])
    after = _build(table, event_time={1: 2.5})
    np.testing.assert_array_equal(after.sequences[0][:, 0], [0.0, 1.0, 2.0])


def test_positives_ignore_spans_in_the_original_protocol(visits):
    cohort = _build(visits, upper_span=1.5, lower_span=1.9, min_visits=3)
    assert cohort.ids.tolist() == [1, 2, 8]  # 1 keeps 2 visits covering 1 year
    assert cohort.y.tolist() == [1, 0, 1]


def test_positive_cut_upper_span(visits):
    event = _build(visits, upper_span=1.5)
    assert event.ids.tolist() == [1, 2, 8]
    horizon = _build(visits, upper_span=1.5, positive_cut="upper_span")
    # Patient 1 (event at 2) keeps only the visit at 0; patient 8 (event at 3) keeps 0 and 1.
    assert horizon.ids.tolist() == [2, 8]
    np.testing.assert_array_equal(horizon.sequences[1][:, 0], [0.0, 1.0])
    assert horizon.patients.set_index("patient").loc[1, "reason"] == "too_few_visits"


def test_upper_span_zero_never_keeps_the_visit_at_the_event():
    # The visit at which the event is observed was the last kept step: the label leaked.
    table = pd.DataFrame({"id": [1, 1, 1, 2, 2, 2], "day": [0, 100, 200, 0, 100, 200],
                          "damage": [0, 0, 1, 0, 0, 0], "x": [1.0, 2.0, 9.0, 1.0, 1.0, 1.0]})
    cohort = build_cohort(table, id_column="id", time_column="day", event_column="damage",
                          upper_span=0, lower_span=0, min_visits=2, positive_cut="upper_span")
    np.testing.assert_array_equal(cohort.sequences[0], [[0, 1.0], [100, 2.0]])
    np.testing.assert_array_equal(cohort.sequences[1][:, 0], [0, 100, 200])  # a negative keeps its end
    by_time = build_cohort(table.drop(columns="damage"), id_column="id", time_column="day",
                           event_time={1: 200.0}, upper_span=0, lower_span=0, min_visits=2,
                           positive_cut="upper_span")
    np.testing.assert_array_equal(by_time.sequences[0][:, 0], [0, 100])


def test_upper_span_positives_need_two_visits_even_with_min_visits_one(visits):
    table = visits.drop(columns="sdi")
    cohort = _build(
        table, event_time={1: 2.0}, upper_span=1.5, lower_span=0, min_visits=1,
        positive_cut="upper_span",
    )  # fmt: skip
    assert 1 not in cohort.ids.tolist()
    # A negative with a single kept visit is fine with min_visits=1.
    assert cohort.sequences[cohort.ids.tolist().index(7)].shape == (1, 2)


def test_end_time_moves_the_cut_of_negatives(visits):
    cohort = _build(visits, end_time={6: 2.0, 2: NAN})
    assert cohort.ids.tolist() == [1, 2, 6, 7, 8]
    np.testing.assert_array_equal(cohort.sequences[2][:, 0], [0.0, 1.0])
    with pytest.raises(ValueError, match="end_time of patient 2 .* before its last visit"):
        _build(visits, end_time={2: 3.0})
    _check_reference_cohort(_build(visits, end_time={1: 0.5}))  # ignored for positives


def test_features_and_repr(visits):
    cohort = _build(visits.assign(alt=1.0), feature_columns=["alt"])
    assert cohort.feature_names == ["year", "alt"]
    assert cohort.sequences[0].shape == (2, 2)
    assert repr(cohort) == (
        "Cohort(n_sequences=4, positives=2, negatives=2, feature_names=['year', 'alt'])"
    )


def test_empty_cohort(visits):
    cohort = _build(visits, upper_span=10)
    assert cohort.ids.tolist() == [1, 8]  # only positives are left
    cohort = _build(visits[visits["patient"].isin([3, 6])])
    assert cohort.sequences == [] and cohort.y.shape == (0,) and cohort.ids.shape == (0,)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"event_column": None}, ValueError, "exactly one of event_column .* neither"),
        ({"event_time": {1: 2.0}}, ValueError, "exactly one of event_column .* both"),
        ({"upper_span": -1}, ValueError, "upper_span must be a finite number >= 0"),
        ({"lower_span": NAN}, ValueError, "lower_span must be a finite number"),
        ({"lower_span": "1"}, ValueError, "lower_span must be a finite number"),
        ({"min_visits": 0}, ValueError, "min_visits must be an int >= 1"),
        ({"min_visits": 2.5}, ValueError, "min_visits must be an int >= 1"),
        ({"positive_cut": "horizon"}, ValueError, "positive_cut must be"),
        ({"event_column": "damage"}, ValueError, r"event_column \['damage'\] not found"),
        ({"feature_columns": ["crp", "sdi"]}, ValueError, "outcome must not be a feature"),
        ({"event_column": "year"}, ValueError, "event_column must differ"),
    ],
)
def test_parameter_errors(visits, kwargs, error, match):
    params = {"event_column": "sdi", **kwargs}
    if params["event_column"] is None and "event_time" in params:
        del params["event_time"]
    with pytest.raises(error, match=match):
        _build(visits, **params)


def test_event_time_errors(visits):
    table = visits.drop(columns="sdi")
    with pytest.raises(TypeError, match="mapping or pandas.Series"):
        _build(table, event_time=[2.0, 3.0])
    with pytest.raises(ValueError, match="none of the patient ids of event_time"):
        _build(table, event_time={"1": 2.0, "8": 3.0})
    with pytest.raises(TypeError, match="event_time values must be numeric"):
        _build(table, event_time={1: "soon"})
    with pytest.raises(ValueError, match="repeated patient ids"):
        _build(table, event_time=pd.Series([2.0, 3.0], index=[1, 1]))
    # Booleans (per_patient["status"] == 2) were read as event days 0 and 1: every
    # patient, censored ones too, had an event, and the cohort came out empty.
    flags = pd.Series({1: True, 2: False, 8: True})
    with pytest.raises(TypeError, match=r"event_time holds booleans.*\.where\("):
        _build(table, event_time=flags)
    with pytest.raises(TypeError, match=r"event_time holds booleans"):
        _build(table, event_time={1: True, 8: False})
    with pytest.raises(TypeError, match=r"end_time holds booleans.*per_patient\['futime'\]\."):
        _build(table, event_time=EVENT_TIMES, end_time=flags)


def test_table_errors(visits):
    with pytest.raises(TypeError, match="pandas.DataFrame"):
        _build(visits.to_dict())
    with pytest.raises(ValueError, match="table is empty"):
        _build(visits.iloc[:0])
    with pytest.raises(TypeError, match=r"event_column 'sdi' must be numeric or boolean.*"
                                        r"table\['sdi'\]\.eq\('yes'\)"):  # not the features' message
        _build(visits.assign(sdi=visits["sdi"].map({0: "no", 1: "yes", 2: "yes"})))
    with pytest.raises(ValueError, match="repeat an existing"):
        _build(pd.concat([visits, visits.iloc[:1]]))


# --------------------------------------------------------------------------- pbcseq


@pytest.fixture(scope="module")
def pbc_death():
    """PBC visits without transplanted patients, and their follow-up and death days."""
    pbc = load_pbcseq()
    pbc = pbc[pbc["status"] != 1]
    per_patient = pbc.groupby("id")[["futime", "status"]].first()
    deaths = per_patient.loc[per_patient["status"] == 2, "futime"]
    return pbc, deaths, per_patient["futime"]


def _pbc_cohort(pbc_death, **kwargs) -> Cohort:
    pbc, deaths, _ = pbc_death
    return build_cohort(
        pbc, id_column="id", time_column="day", feature_columns=["bili", "albumin"],
        event_time=deaths, upper_span=YEAR, lower_span=YEAR, min_visits=2, **kwargs,
    )  # fmt: skip


def test_pbcseq_cohort_of_the_issue_208_patients_86_deaths(pbc_death):
    pbc, deaths, futime = pbc_death
    cohort = _pbc_cohort(pbc_death, end_time=futime, positive_cut="upper_span")
    assert len(cohort.y) == 208 and int(cohort.y.sum()) == 86
    assert cohort.summary == {
        "n_patients": 283,
        "positives": 86,
        "negatives": 122,
        "excluded_positive_at_first_visit": 0,
        "excluded_too_few_visits": 38,
        "excluded_span_too_short": 37,
    }
    for patient, label, sequence in zip(cohort.ids, cohort.y, cohort.sequences, strict=True):
        days = sequence[:, 0]
        assert len(days) >= 2 and days[-1] - days[0] >= YEAR
        assert days[-1] <= futime[patient] - YEAR  # a year of horizon for both classes
        assert label == (patient in deaths.index)
        # The cut is the LATEST visit a year before the end: the next visit is later.
        all_days = pbc.loc[pbc["id"] == patient, "day"].to_numpy()
        if len(all_days) > len(days):
            assert all_days[len(days)] > futime[patient] - YEAR


def test_pbcseq_cohort_with_the_original_protocol(pbc_death):
    # Positives cut at death (all their visits), negatives walked back from the last visit.
    cohort = _pbc_cohort(pbc_death)
    assert (cohort.summary["positives"], cohort.summary["negatives"]) == (122, 108)
    # Negatives walked back from the censoring day instead.
    cohort = _pbc_cohort(pbc_death, end_time=pbc_death[2])
    assert (cohort.summary["positives"], cohort.summary["negatives"]) == (122, 122)


def test_dated_visits_take_dated_event_times_and_refuse_numbers():
    # Dates in event_time were refused with "convert dates to numbers first"; numbers
    # counted from another origin than the visits' then kept a visit 200 days before
    # the death although the horizon is 365 days.
    day0 = pd.Timestamp("2020-01-01")
    visits = pd.DataFrame({"id": [1, 1, 1, 2, 2, 2], "x": [1.0, 2, 3, 4, 5, 6],
                           "t": day0 + pd.to_timedelta([0, 400, 800, 100, 500, 900], "D")})
    options = dict(id_column="id", time_column="t", upper_span=365, lower_span=0,
                   min_visits=2, positive_cut="upper_span")
    cohort = build_cohort(visits, event_time={1: day0 + pd.Timedelta(days=1000)}, **options)
    assert cohort.sequences[0][:, 0].tolist() == [0.0, 400.0]
    numbers = visits.assign(t=(visits["t"] - day0).dt.days)
    same = build_cohort(numbers, event_time={1: 1000}, **options)
    for a, b in zip(cohort.sequences, same.sequences, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(cohort.y, same.y)
    with pytest.raises(TypeError, match="the time column holds dates, so event_time must hold dates"):
        build_cohort(visits, event_time={1: 1000}, **options)
    with pytest.raises(TypeError, match="end_time holds dates or durations, but the time column holds numbers"):
        build_cohort(numbers, event_time={1: 1000}, end_time={2: day0}, **options)
    with pytest.raises(TypeError, match="event_time values must be dates, as the time column's, with the same time zone"):
        build_cohort(visits, event_time={1: (day0 + pd.Timedelta(days=1000)).tz_localize("UTC")}, **options)


def test_dated_visits_with_a_time_zone_take_event_and_end_times_that_hold_no_date():
    # An empty mapping, or one of NaT alone, was refused as "not the same time zone":
    # it became time-zone-naive dates, which cannot be subtracted from the visits'.
    day0 = pd.Timestamp("2020-01-01", tz="UTC")
    visits = pd.DataFrame({"id": [1, 1, 2, 2], "x": [1.0, 2, 3, 4],
                           "t": day0 + pd.to_timedelta([0, 400, 100, 500], "D")})
    options = dict(id_column="id", time_column="t", upper_span=365, lower_span=0, min_visits=1)
    expected = build_cohort(visits, event_time={1: None}, **options).patients
    for event_time, end_time in (({}, None), ({1: pd.NaT}, None), ({}, {2: pd.NaT})):
        cohort = build_cohort(visits, event_time=event_time, end_time=end_time, **options)
        pd.testing.assert_frame_equal(cohort.patients, expected)
    with pytest.raises(TypeError, match="with the same time zone"):
        build_cohort(visits, event_time={1: pd.Timestamp("2021-06-01")}, **options)


def _alone_and_together(table: pd.DataFrame, **options) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The decisions on patient 1 built with the whole table, and with its rows alone."""
    options = dict(id_column="id", time_column="t", **options)
    together = build_cohort(table, **options).patients.set_index("id")
    alone = build_cohort(table[table["id"] == 1], **options).patients.set_index("id")
    return together.loc[1, ["reason", "n_kept"]], alone.loc[1, ["reason", "n_kept"]]


@pytest.mark.parametrize("kind", ["dates", "durations"])
def test_a_dated_visit_exactly_a_span_away_is_on_the_documented_side(kind):
    # The spans were compared in float days since the table's earliest visit: visits at
    # 08:00 are at fractional days when another patient's earliest visit is at 00:00, and
    # a visit exactly upper_span (lower_span) away fell outside by rounding. So patient 1
    # was excluded with patient 2 in the table and included without it.
    def times(*stamps: str) -> pd.Series:
        dates = pd.Series(pd.to_datetime(list(stamps)))
        return dates if kind == "dates" else dates - pd.Timestamp("2019-12-25 00:00")

    upper = pd.DataFrame({  # patient 1: its first visit exactly 366 days before the last
        "id": [1, 1, 1, 2, 2], "x": [1.0, 2, 3, 4, 5],
        "t": times("2020-01-01 08:00", "2020-06-01 08:00", "2021-01-01 08:00",
                   "2020-01-01 00:00", "2021-01-01 00:00")})
    options = dict(event_time={}, lower_span=0, min_visits=1)
    together, alone = _alone_and_together(upper, upper_span=366, **options)
    assert together.tolist() == alone.tolist() == ["included", 1]
    lower = pd.DataFrame({  # patient 1: two visits exactly 30 days apart
        "id": [1, 1, 2], "x": [1.0, 2, 3],
        "t": times("2020-01-11 00:01", "2020-02-10 00:01", "2020-01-01 00:00")})
    together, alone = _alone_and_together(lower, upper_span=0, lower_span=30, min_visits=2,
                                          event_time={})
    assert together.tolist() == alone.tolist() == ["included", 2]
    # A positive cut a year (365.25 days) before its death: its visit exactly a year
    # before is kept.
    death = times("2020-05-31 07:00")[0]
    year = pd.DataFrame({
        "id": [1, 1, 1, 2, 2], "x": [1.0, 2, 3, 4, 5],
        "t": times("2019-01-15 01:00", "2019-06-01 01:00", "2020-01-01 01:00",
                   "2019-01-01 00:00", "2019-06-01 00:00")})
    together, alone = _alone_and_together(
        year, event_time={1: death}, upper_span=365.25, lower_span=0, min_visits=2,
        positive_cut="upper_span")
    assert together.tolist() == alone.tolist() == ["included", 2]


def test_an_end_before_the_last_visit_is_refused_in_the_times_given():
    # Dated visits got day counts from a hidden origin: "end_time of patient 2 (335) is
    # before its last visit (366)".
    visits = pd.DataFrame({"id": [1, 1, 2, 2], "x": [1.0, 2, 3, 4],
                           "t": pd.to_datetime(["2020-01-01 00:00", "2020-06-01 00:00", "2020-02-01 00:00",
                                                 "2021-01-01 08:00"])})
    options = dict(id_column="id", time_column="t", event_time={}, upper_span=0, lower_span=0,
                   min_visits=1)
    advice = r"; end_time must be the end of follow-up: correct it, or give NaN \(or no entry\) to end at the last visit\.$"
    with pytest.raises(ValueError, match=r"^end_time of patient 2 \(2020-12-01 00:00:00\) is before its last "
                                         r"visit \(2021-01-01 08:00:00\)" + advice):
        build_cohort(visits, end_time={2: pd.Timestamp("2020-12-01")}, **options)
    durations = visits.assign(t=visits["t"] - pd.Timestamp("2019-12-01"))
    with pytest.raises(ValueError, match=r"^end_time of patient 2 \(366 days 00:00:00\) is before its last "
                                         r"visit \(397 days 08:00:00\)" + advice):
        build_cohort(durations, end_time={2: pd.Timedelta(days=366)}, **options)
    numbers = visits.assign(t=[0, 150, 30, 400.5])
    with pytest.raises(ValueError, match=r"^end_time of patient 2 \(400\) is before its last visit \(400.5\)" + advice):
        build_cohort(numbers, end_time={2: 400}, **options)


@pytest.mark.parametrize("name", ["event", "reason", "n_visits", "n_kept", "cut_time"])
def test_an_id_column_named_as_a_decision_column_is_refused(visits, name):
    # The patients table got two columns of that name.
    renamed = visits.rename(columns={"patient": name})
    with pytest.raises(ValueError, match=rf"id_column='{name}' is also the name of a column"):
        _build(renamed, id_column=name)


def test_load_pbc_cohort_takes_one_name_as_a_string_and_refuses_a_log_of_zero():
    # features="bili" was read letter by letter; log_features=("edema",) put -inf in
    # the cohort with only numpy's warning.
    from sklearn_rnn.clinical import load_pbc_cohort

    one = load_pbc_cohort(1, 1, 2, features="bili", log_features="bili")
    listed = load_pbc_cohort(1, 1, 2, features=["bili"], log_features=["bili"])
    assert one.feature_names == ["day", "bili"]
    for a, b in zip(one.sequences, listed.sequences, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="'edema', which has .* values of 0 or below"):
        load_pbc_cohort(1, 1, 2, log_features=("edema",))
    with pytest.raises(ValueError, match=r"\['bilirubin'\] are not columns of load_pbcseq"):
        load_pbc_cohort(1, 1, 2, features=("bilirubin",))


def test_load_pbc_cohort_takes_the_log_of_features_only_and_of_each_once():
    # log_features=["id"] made the ids log(id) and ["futime"] corrupted the outcome (blamed
    # on an end_time never passed); a name given twice was logged twice; "sex" gave
    # pandas' "Unordered Categoricals can only compare equality".
    from sklearn_rnn.clinical import load_pbc_cohort

    for name in ("id", "futime", "day"):
        with pytest.raises(ValueError, match=rf"log_features names \['{name}'\], which are not among features"):
            load_pbc_cohort(1, 1, 2, features=["bili"], log_features=[name])
    twice = load_pbc_cohort(1, 1, 2, features=["bili"], log_features=["bili", "bili"])
    once = load_pbc_cohort(1, 1, 2, features=["bili"], log_features=["bili"])
    for a, b in zip(twice.sequences, once.sequences, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"log_features names 'sex', whose values are not numbers"):
        load_pbc_cohort(1, 1, 2, features=["sex"], log_features=["sex"])
    # The default applies to the features it names: bilirubin alone is logged.
    default = load_pbc_cohort(1, 1, 2, features=["bili", "albumin"])
    raw = load_pbc_cohort(1, 1, 2, features=["bili", "albumin"], log_features=[])
    for logged, plain in zip(default.sequences, raw.sequences, strict=True):
        np.testing.assert_allclose(logged[:, 1], np.log(plain[:, 1]))
        np.testing.assert_array_equal(logged[:, 2], plain[:, 2])


def test_load_pbc_cohort_refuses_none_for_its_names_and_advises_only_what_works():
    # None gave "'NoneType' object is not iterable"; log_features=["id"] advised adding
    # "id" to features, which build_cohort refuses next.
    from sklearn_rnn.clinical import load_pbc_cohort

    for name in ("features", "log_features"):
        with pytest.raises(TypeError, match=rf"^{name} must be a column name of load_pbcseq\(\) or a "
                                            rf"sequence of them.*; got None\.$"):
            load_pbc_cohort(1, 1, 2, **{name: None})
    for names in (["id"], ["day", "futime"]):
        with pytest.raises(ValueError, match=r"which are not among features=\['bili'\].*Leave them "
                                             r"out of log_features\.$"):
            load_pbc_cohort(1, 1, 2, features=["bili"], log_features=names)
    with pytest.raises(ValueError, match=r"Leave them out of log_features, or add \['albumin'\] to features\.$"):
        load_pbc_cohort(1, 1, 2, features=["bili"], log_features=["id", "albumin"])


@pytest.mark.parametrize("name", ["event_time", "end_time"])
@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_an_infinite_per_patient_time_is_refused_naming_the_patient(visits, name, value):
    # "No event" coded as +inf made patient 2 a positive keeping all its visits, -inf
    # made it positive_at_first_visit, and end_time=+inf kept every visit of a negative.
    table = visits.drop(columns="sdi")
    times = {"event_time": dict(EVENT_TIMES), "end_time": {5: 3.0}}
    times[name][2] = value
    with pytest.raises(ValueError, match=rf"{name} of patient 2 is {value}: give a finite time .* or NaN \(or no entry\)"):
        _build(table, **times)
    times[name][2] = NAN  # NaN keeps meaning none: the reference cohort
    _check_reference_cohort(_build(table, **times))


def test_load_pbc_cohort_refuses_sex_with_code_that_builds_the_cohort_with_it():
    # features=[..., "sex"] passed on build_cohort's advice: encode `table` with
    # pandas.get_dummies (a table the caller never holds) or leave it out with
    # feature_columns= (not an argument of load_pbc_cohort).
    from sklearn_rnn.clinical import load_pbc_cohort

    with pytest.raises(ValueError, match=r"features names \['sex'\], which hold text categories") as refused:
        load_pbc_cohort(1, 2, 3, features=["age", "sex", "bili"])
    message = str(refused.value)
    assert "Leave it out of features" in message
    assert "feature_columns=[" not in message.split("\n")[0] and "get_dummies" not in message
    # The code it gives runs, and builds load_pbc_cohort's cohort with sex as a 0/1 column.
    code = "\n".join(line[4:] for line in message.split("\n")[1:])
    namespace: dict = {}
    exec(code, namespace)
    with_sex = namespace["cohort"]
    without = load_pbc_cohort(1, 2, 3, features=["age", "bili"])
    assert with_sex.feature_names == ["day", "age", "male", "bili"]
    np.testing.assert_array_equal(with_sex.ids, without.ids)
    np.testing.assert_array_equal(with_sex.y, without.y)
    for sequence, expected in zip(with_sex.sequences, without.sequences, strict=True):
        np.testing.assert_array_equal(np.delete(sequence, 2, axis=1), expected)
        assert set(np.unique(sequence[:, 2])) <= {0.0, 1.0}
    assert any(sequence[0, 2] == 1.0 for sequence in with_sex.sequences)


def test_a_visit_exactly_a_span_away_in_fractional_years_is_at_that_span():
    # 2.3 - 1.0 is 1.2999999999999998 and 0.3 - 0.1 is 0.19999999999999998: a visit
    # exactly upper_span before the end, or a history exactly lower_span long, fell on
    # the wrong side by rounding (about 1 in 10 exact boundaries on a 0.1-year grid),
    # and the patient was dropped.
    visits = pd.DataFrame({"id": [1, 1, 1, 2, 2], "year": [0.0, 1.3, 2.3, 0.0, 1.3], "x": [1.0, 2, 3, 4, 5]})
    cohort = build_cohort(visits, id_column="id", time_column="year", event_time={2: 2.3},
                          upper_span=1, lower_span=1.3, min_visits=2, positive_cut="upper_span")
    assert cohort.patients["reason"].tolist() == ["included", "included"]
    assert cohort.patients["cut_time"].tolist() == [1.3, 1.3]
    short = pd.DataFrame({"id": [1, 1, 1], "year": [0.1, 0.3, 2.0], "x": [1.0, 2, 3]})
    assert build_cohort(short, id_column="id", time_column="year", event_time={}, upper_span=1,
                        lower_span=0.2, min_visits=2).patients["reason"].tolist() == ["included"]
    # A real shortfall is still one.
    assert build_cohort(short, id_column="id", time_column="year", event_time={}, upper_span=1,
                        lower_span=0.2000001, min_visits=2).patients["reason"].tolist() == ["span_too_short"]


def test_cohort_messages_show_times_whole_and_name_the_clashing_column():
    # ':g' printed 1700086000 and 1700086400 alike ("1.70009e+09 is before 1.70009e+09"),
    # and an id column among the features was explained as the time column.
    from sklearn_rnn.clinical import load_pbc_cohort
    from sklearn_rnn.sequences import from_long_format

    visits = pd.DataFrame({"id": [1, 1], "t": [1700000000, 1700086400], "x": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"\(1700086000\) is before its last visit \(1700086400\)"):
        build_cohort(visits, id_column="id", time_column="t", event_time={}, end_time={1: 1700086000},
                     upper_span=0, lower_span=0, min_visits=1)
    with pytest.raises(ValueError, match=r"the id column 'id' names the sequences"):
        from_long_format(visits, id_column="id", time_column="t", feature_columns=["id", "x"])
    for features, message in ((("day", "bili"), r"features must not name \['day'\]"),
                              (("bili", "bili"), "features has repeated names")):
        with pytest.raises(ValueError, match=message):
            load_pbc_cohort(features=features)


# ----------------------------------------------------------------- clin42
@pytest.mark.parametrize("positive_cut", ["event", "upper_span"])
def test_a_visit_at_the_event_up_to_rounding_is_never_kept(positive_cut):
    # Visits in months (day / 30.4375), the death converted from years (years * 12): the
    # visit on the day of death was 1 ulp "before" it and stayed in the sequence (bili 9.9,
    # the outcome itself, as the positive's last input).
    visits = pd.DataFrame({"id": [1, 1, 1], "day": [0, 47, 101], "bili": [1.0, 1.5, 9.9]})
    visits["month"] = visits["day"] / 30.4375
    cohort = build_cohort(visits, id_column="id", time_column="month", feature_columns=["bili"],
                          event_time={1: (101 / 365.25) * 12}, upper_span=0, lower_span=0, min_visits=2,
                          positive_cut=positive_cut)
    assert cohort.patients["n_kept"].tolist() == [2]
    assert cohort.sequences[0][:, 1].tolist() == [1.0, 1.5]
    # An event at the first visit up to rounding is at the first visit.
    first = pd.DataFrame({"id": [1, 1, 1], "year": [0.3, 0.5, 0.9], "x": [1.0, 2.0, 3.0]})
    cohort = build_cohort(first, id_column="id", time_column="year", feature_columns=["x"],
                          event_time={1: 0.1 + 0.2}, upper_span=0, lower_span=0, min_visits=2,
                          positive_cut=positive_cut)
    assert cohort.patients["reason"].tolist() == ["positive_at_first_visit"]


def test_an_end_of_follow_up_on_the_last_visit_up_to_rounding_is_on_it():
    # Refused: "end_time (0.22997946611909648) is before its last visit (0.2299794661190965)".
    visits = pd.DataFrame({"id": [1, 1, 1], "day": [0, 3, 7], "bili": [1.0, 1.5, 2.0]})
    visits["month"] = visits["day"] / 30.4375
    cohort = build_cohort(visits, id_column="id", time_column="month", feature_columns=["bili"], event_time={},
                          end_time={1: (7 / 365.25) * 12}, upper_span=0, lower_span=0, min_visits=2)
    assert cohort.patients["reason"].tolist() == ["included"] and cohort.patients["n_kept"].tolist() == [3]


def test_float32_times_build_the_cohort_float64_times_build():
    # The span allowance is float64's: with float32 times the visit exactly 0.1 before the
    # last was cut, and the patient dropped as too_few_visits.
    cohorts = {}
    for dtype in ("float64", "float32"):
        table = pd.DataFrame({"id": [1, 1, 1], "year": np.array([0.0, 0.6, 0.7], dtype=dtype), "x": [1.0, 2, 3]})
        cohorts[dtype] = build_cohort(table, id_column="id", time_column="year", feature_columns=["x"],
                                      event_time={}, upper_span=0.1, lower_span=0.6, min_visits=2)
    for dtype, cohort in cohorts.items():
        assert cohort.patients[["reason", "n_kept"]].values.tolist() == [["included", 2]], dtype


def test_one_id_written_as_two_types_is_refused_and_the_type_error_gives_a_valid_example():
    # 1 and '1' were two patients: one history split in two sequences, which pooled
    # cross-validation could put in different folds. The event_time advice was the first
    # visit's time, which made every patient positive at the first visit.
    table = pd.DataFrame({"id": [1, 1, "1", 2, 2], "t": [0.0, 1, 2, 0, 1], "x": [1.0, 2, 3, 4, 5]})
    with pytest.raises(ValueError, match=r"id column 'id' holds 1 and '1', one id as values of different types.*"
                                         r"table\['id'\] = pd\.to_numeric\(table\['id'\]\) for ids that are numbers, "
                                         r"or table\['id'\]\.astype\(str\)"):
        build_cohort(table, id_column="id", time_column="t", feature_columns=["x"], event_time={},
                     upper_span=0, lower_span=0, min_visits=1)
    for name, example in (("event_time", "'death_time'\\], NaN for patients without the event"),
                          ("end_time", "'followup_end'\\], the end of each patient's follow-up")):
        given = {"event_time": {}, name: [2.0, None]}
        with pytest.raises(TypeError, match=rf"^{name} must be a mapping .*got list\. E\.g\. from a table of one row "
                                            rf"per patient: per_patient\.set_index\(id_column\)\[{example}"):
            build_cohort(table.assign(id=[1, 1, 1, 2, 2]), id_column="id", time_column="t", feature_columns=["x"],
                         upper_span=0, lower_span=0, min_visits=1, **given)


@pytest.mark.parametrize("kind", ["dates", "durations"])
def test_the_cut_time_of_dated_visits_is_the_visit_as_given_whatever_the_other_patients(kind):
    # It was a float day count since the table's earliest visit: patient 2's cut visit on
    # 2020-03-01 read 60.0 beside patient 1 and 56.0 alone.
    stamps = pd.Series(pd.to_datetime(["2020-01-01", "2020-02-01", "2020-01-05", "2020-03-01", "2020-04-01"],
                                      utc=True))
    times = stamps if kind == "dates" else stamps - pd.Timestamp("2019-12-01", tz="UTC")
    visits = pd.DataFrame({"id": [1, 1, 2, 2, 3], "t": times, "x": [1.0, 2, 3, 4, 5]})
    options = dict(id_column="id", time_column="t", event_time={3: times[4]}, upper_span=0, lower_span=0,
                   min_visits=1)
    together = build_cohort(visits, **options).patients.set_index("id")["cut_time"]
    alone = build_cohort(visits[visits["id"] == 2], **{**options, "event_time": {}})
    alone = alone.patients.set_index("id")["cut_time"]
    assert together.dtype == times.dtype
    assert together[1] == times[1] and together[2] == alone[2] == times[3]
    assert pd.isna(together[3])  # positive at its first visit: nothing kept


def test_float32_event_and_end_times_are_read_as_the_float32_visits_are():
    # clin44: per-patient times from the same float32 table were read as 0.6000000238
    # against visits read as 0.6: the visit at the death stayed in the positive's sequence
    # (the label leaked), an end_time equal to the last visit was refused.
    table = pd.DataFrame({"id": [1, 1, 1, 2, 2, 2], "t": np.array([0, 0.3, 0.6, 0, 0.3, 0.7], dtype=np.float32),
                          "futime": np.array([0.6] * 3 + [0.7] * 3, dtype=np.float32), "status": [2, 2, 2, 0, 0, 0],
                          "x": [1.0, 2, 3, 4, 5, 6]})
    per_patient = table.groupby("id")[["futime", "status"]].first()
    cohort = build_cohort(table, id_column="id", time_column="t", feature_columns=["x"],
                          event_time=per_patient.query("status == 2")["futime"], end_time=per_patient["futime"],
                          upper_span=0.3, lower_span=0, min_visits=2)
    assert cohort.patients[["event", "n_kept"]].values.tolist() == [[True, 2], [False, 2]]
    assert cohort.sequences[0][:, 0].tolist() == pytest.approx([0.0, 0.3])  # not the visit at 0.6, the death


def test_dates_outside_pandas_nanosecond_range_build_the_cohort():
    # clin44: an end of follow-up of 9999-12-31 (a records system's "still followed") was
    # refused as "must be dates ... with the same time zone", visits of 1650 or a typo of
    # 2920 met pandas' bare OutOfBounds errors: the spans were compared in nanoseconds.
    table = pd.DataFrame({"id": [1, 1, 2, 2], "t": pd.to_datetime(["2020-01-01", "2020-06-01", "2020-01-01",
                                                                   "2920-09-01"]), "x": [1.0, 2, 3, 4]})
    end = pd.Series(pd.to_datetime(["2021-01-01", "9999-12-31"]), index=[1, 2])
    cohort = build_cohort(table, id_column="id", time_column="t", event_time={}, end_time=end,
                          upper_span=30, lower_span=0, min_visits=1)
    assert cohort.patients["cut_time"].tolist() == [pd.Timestamp("2020-06-01"), pd.Timestamp("2920-09-01")]
    early = table.assign(t=pd.to_datetime(["1650-01-01", "1650-06-01", "1650-01-01", "1650-09-01"]))
    cohort = build_cohort(early, id_column="id", time_column="t", event_time={}, upper_span=30, lower_span=0,
                          min_visits=1)
    assert cohort.patients["cut_time"].tolist() == [pd.Timestamp("1650-01-01")] * 2  # the last visit cut (no end_time)
