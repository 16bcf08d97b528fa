"""Tests of the long-format converters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sklearn_rnn.sequences import from_long_format, to_long_format

NAN = np.nan


@pytest.fixture
def visits() -> pd.DataFrame:
    """Rows out of order, string ids, a missing value and an extra column."""
    return pd.DataFrame(
        {
            "patient": ["b", "a", "b", "a", "a", "c"],
            "day": [30, 10, 0, 0, 20, 5],
            "bili": [1.5, 0.7, 1.2, 0.5, NAN, 2.0],
            "ascites": [True, False, False, False, True, False],
        }
    )


def test_exact_output_on_a_tiny_table(visits):
    X, ids = from_long_format(visits, id_column="patient", time_column="day")
    assert ids.tolist() == ["a", "b", "c"]
    assert len(X) == 3
    expected = [
        [[0, 0.5, 0], [10, 0.7, 0], [20, NAN, 1]],
        [[0, 1.2, 0], [30, 1.5, 1]],
        [[5, 2.0, 0]],
    ]
    for x, e in zip(X, expected, strict=True):
        assert x.dtype == np.float64
        np.testing.assert_array_equal(x, np.array(e, dtype=float))


def test_ids_are_sorted_whatever_the_row_order(visits):
    shuffled = visits.sample(frac=1.0, random_state=3)
    X1, ids1 = from_long_format(visits, id_column="patient", time_column="day")
    X2, ids2 = from_long_format(shuffled, id_column="patient", time_column="day")
    assert ids1.tolist() == ids2.tolist()
    for a, b in zip(X1, X2, strict=True):
        np.testing.assert_array_equal(a, b)


def test_integer_ids_keep_their_dtype():
    table = pd.DataFrame({"id": [10, 2, 10], "t": [1.5, 0.0, 0.5], "x": [1, 2, 3]})
    X, ids = from_long_format(table, id_column="id", time_column="t")
    assert ids.dtype == np.int64 and ids.tolist() == [2, 10]
    np.testing.assert_array_equal(X[1], [[0.5, 3.0], [1.5, 1.0]])


def test_feature_columns_order_and_forms(visits):
    X, _ = from_long_format(
        visits, id_column="patient", time_column="day", feature_columns=["ascites", "bili"]
    )
    np.testing.assert_array_equal(X[1], [[0, 0, 1.2], [30, 1, 1.5]])
    X, _ = from_long_format(visits, id_column="patient", time_column="day", feature_columns="bili")
    assert X[0].shape == (3, 2)
    X, _ = from_long_format(visits, id_column="patient", time_column="day", feature_columns=[])
    np.testing.assert_array_equal(X[0], [[0.0], [10.0], [20.0]])


def test_nullable_and_missing_values_become_nan():
    table = pd.DataFrame(
        {
            "id": [1, 1, 2],
            "t": [0, 1, 0],
            "count": pd.array([3, pd.NA, 4], dtype="Int64"),
            "flag": pd.array([True, None, False], dtype="boolean"),
        }
    )
    X, _ = from_long_format(table, id_column="id", time_column="t")
    np.testing.assert_array_equal(X[0], [[0, 3, 1], [1, NAN, NAN]])


def test_duplicated_times_raise_by_default_and_keep_table_order_on_request():
    table = pd.DataFrame({"id": [1, 1, 1, 2], "t": [5, 0, 5, 0], "x": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match=r"1 row\(s\) repeat .*id 1 at time 5.*duplicates='keep'"):
        from_long_format(table, id_column="id", time_column="t")
    X, _ = from_long_format(table, id_column="id", time_column="t", duplicates="keep")
    np.testing.assert_array_equal(X[0], [[0, 2], [5, 1], [5, 3]])  # stable within time 5
    with pytest.raises(ValueError, match="duplicates must be"):
        from_long_format(table, id_column="id", time_column="t", duplicates="first")


def test_integer_times_are_ordered_and_compared_as_given_not_as_float64():
    # Epoch nanoseconds 100 ns apart are one float64: the later reading, listed first,
    # stayed first, and the two were reported as a repeated time.
    ns = 1714557600000000000
    table = pd.DataFrame({"id": [1, 1], "t": np.array([ns + 100, ns], dtype=np.int64), "x": [2.0, 1.0]})
    X, _ = from_long_format(table, id_column="id", time_column="t")
    np.testing.assert_array_equal(X[0][:, 1], [1.0, 2.0])
    unsigned = table.astype({"t": "UInt64"})
    np.testing.assert_array_equal(from_long_format(unsigned, id_column="id", time_column="t")[0][0][:, 1], [1, 2])
    # Repeated times are still found, and named as given.
    dated = pd.DataFrame({"id": [1, 1], "t": pd.to_datetime(["2024-05-01", "2024-05-01"]), "x": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"id 1 at time 2024-05-01 00:00:00\. Aggregate"):
        from_long_format(dated, id_column="id", time_column="t")


def test_round_trip_of_predictions(visits):
    X, ids = from_long_format(visits, id_column="patient", time_column="day")
    last_bili = np.array([x[-1, 1] for x in X])  # a per-sample "prediction"
    result = to_long_format(last_bili, ids, id_column="patient", columns="last_bili")
    merged = visits.merge(result, on="patient")
    assert merged.shape == (6, 5)
    assert merged.loc[merged["patient"] == "b", "last_bili"].unique().tolist() == [1.5]


def test_to_long_format_default_names_and_order():
    frame = to_long_format(np.array([1, 0, 1]), np.array([30, 10, 20]))
    assert list(frame.columns) == ["id", "value"]
    assert frame["id"].tolist() == [30, 10, 20]
    assert frame["value"].tolist() == [1, 0, 1]
    frame = to_long_format(np.eye(2), ["x", "y"])
    assert list(frame.columns) == ["id", "value_0", "value_1"]
    assert frame.iloc[1].tolist() == ["y", 0.0, 1.0]
    frame = to_long_format([[0.3, 0.7]], [5], columns=np.array(["neg", "pos"]))
    assert list(frame.columns) == ["id", "neg", "pos"]


# --------------------------------------------------------------------------- errors


def test_to_long_format_refuses_sequences_with_what_it_writes():
    with pytest.raises(ValueError, match=r"2 entries of different shapes.*per-sample results"):
        to_long_format([[0.1, 0.2], [0.3]], [0, 1])
    with pytest.raises(ValueError, match=r"shape \(2, 3, 2\).*reduce them to one value"):
        to_long_format(np.zeros((2, 3, 2)), [0, 1])
    # A list of arrays is what per-step predictions are: refused whatever their lengths
    # (of equal lengths, 1D ones came out as columns value_0, value_1, ... silently).
    for steps in ([np.zeros((3, 2)), np.zeros((5, 2))], [np.array([1, 0, 1]), np.array([0, 0, 1])],
                  (np.array([1, 0]), np.array([0, 1]))):
        with pytest.raises(ValueError, match=r"^values must be per-sample results; got a (list|tuple) "
                           r"of 2 arrays, as per-step predictions of sequences come \(e\.g\. "
                           r"RNNStepClassifier\.predict\)\..*reduce them to one value per sample "
                           r"first\. If they are rows of per-sample outputs, pass np\.vstack\(values\)\.$"):
            to_long_format(steps, ["a", "b"])
    assert to_long_format(np.vstack([np.array([1, 0]), np.array([0, 1])]), ["a", "b"]).shape == (2, 3)


def test_errors_on_the_table(visits):
    with pytest.raises(TypeError, match="must be a pandas.DataFrame"):
        from_long_format(visits.to_numpy(), id_column=0, time_column=1)
    with pytest.raises(ValueError, match="table is empty"):
        from_long_format(visits.iloc[:0], id_column="patient", time_column="day")
    with pytest.raises(ValueError, match=r"^id_column 'pid' not found.*columns are"):
        from_long_format(visits, id_column="pid", time_column="day")
    with pytest.raises(ValueError, match=r"^time_column 'days' not found"):
        from_long_format(visits, id_column="patient", time_column="days")
    with pytest.raises(ValueError, match=r"feature_columns \['alt'\] not found"):
        from_long_format(visits, id_column="patient", time_column="day", feature_columns=["alt"])
    with pytest.raises(ValueError, match="must not contain the id or time column"):
        from_long_format(visits, id_column="patient", time_column="day", feature_columns=["day"])
    with pytest.raises(ValueError, match="repeated names"):
        from_long_format(
            visits, id_column="patient", time_column="day", feature_columns=["bili", "bili"]
        )
    # Two columns of one name (a merge without suffixes) failed inside pandas with
    # "'DataFrame' object has no attribute 'dtype'".
    merged = pd.concat([visits, visits[["bili"]]], axis=1)
    for features in (None, ["bili"]):
        with pytest.raises(ValueError, match=r"repeated column names \['bili'\].*duplicated"):
            from_long_format(merged, id_column="patient", time_column="day", feature_columns=features)


def test_non_numeric_features_say_how_to_fix(visits):
    table = visits.assign(sex=["f", "m", "f", "m", "m", "f"])
    with pytest.raises(TypeError, match=r"got columns \{'sex'.*pandas.get_dummies"):
        from_long_format(table, id_column="patient", time_column="day")
    X, _ = from_long_format(table, id_column="patient", time_column="day", feature_columns=["bili"])
    assert X[0].shape == (3, 2)


def test_object_columns_of_numbers_are_numbers(visits):
    # A column of numbers with a None is of object dtype: it was refused as non-numeric
    # (with a hint to one-hot encode it), though a DataFrame table's is read as numbers.
    values = [1, None, 2.5, True, 3, np.nan]
    table = visits.assign(dose=pd.Series(values, dtype=object))
    X, ids = from_long_format(table, id_column="patient", time_column="day", feature_columns=["dose"])
    expected = from_long_format(visits.assign(dose=[1.0, np.nan, 2.5, 1.0, 3.0, np.nan]),
                                id_column="patient", time_column="day", feature_columns=["dose"])[0]
    for got, want in zip(X, expected):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match=r"got columns \{'dose'"):
        from_long_format(visits.assign(dose=pd.Series([1, "2", 3, 4, 5, 6], dtype=object)),
                         id_column="patient", time_column="day")


def test_bad_time_and_id_values(visits):
    text_dates = visits.assign(day=[f"2020-01-0{d + 1}" for d in range(6)])
    with pytest.raises(TypeError, match=r"numeric.*datetime or timedelta.*pandas.to_datetime"):
        from_long_format(text_dates, id_column="patient", time_column="day")
    with pytest.raises(ValueError, match="1 missing or infinite"):
        from_long_format(
            visits.assign(day=[0, 1, NAN, 3, 4, 5]), id_column="patient", time_column="day"
        )
    with pytest.raises(ValueError, match="id column 'patient' has 1 missing"):
        from_long_format(
            visits.assign(patient=["a", None, "b", "a", "a", "c"]),
            id_column="patient",
            time_column="day",
        )


def test_to_long_format_errors():
    with pytest.raises(ValueError, match="1D .* or 2D"):
        to_long_format(np.zeros((2, 3, 1)), [1, 2])
    # The values were the ones out of step as often: the ids were blamed (newbie44).
    with pytest.raises(ValueError, match=r"values hold 2 samples but ids 3: pass one value \(row\) per id"):
        to_long_format([0.1, 0.2], [1, 2, 3])
    with pytest.raises(ValueError, match=r"one id per sample \(2\)"):
        to_long_format([0.1, 0.2], [[1, 2]])
    with pytest.raises(ValueError, match="ids must be unique.*\\[1\\]"):
        to_long_format([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="name each of the 2 value column"):
        to_long_format(np.zeros((1, 2)), [1], columns=["only_one"])
    with pytest.raises(ValueError, match="also a value column"):
        to_long_format([0.1], [1], id_column="risk", columns="risk")


def test_as_frame_keeps_the_names_and_guards_a_later_table_in_another_order():
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import RNNClassifier, SequenceStandardScaler

    rng = np.random.default_rng(0)
    rows = []
    for patient in range(40):
        for visit in range(int(rng.integers(2, 6))):
            rows.append({"patient": patient, "day": 30.0 * visit + rng.uniform(0, 10),
                         "bili": rng.normal(), "albumin": rng.normal()})
    visits = pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # rows in any order
    arrays, ids = from_long_format(visits, id_column="patient", time_column="day")
    frames, frame_ids = from_long_format(visits, id_column="patient", time_column="day", as_frame=True)
    np.testing.assert_array_equal(frame_ids, ids)
    for frame, array in zip(frames, arrays):
        assert frame.columns.tolist() == ["day", "bili", "albumin"]
        np.testing.assert_array_equal(frame.to_numpy(), array)
        # each row is labelled as in the table
        np.testing.assert_array_equal(visits.loc[frame.index, ["day", "bili", "albumin"]].to_numpy(), array)
    y = np.array([int(frame["bili"].iloc[0] > 0) for frame in frames])
    model = make_pipeline(
        SequenceStandardScaler(), RNNClassifier(time_feature="day", hidden_size=4, max_iter=3, random_state=0)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(frames, y)
    # Next month's export lists albumin before bilirubin: as arrays the features swap
    # (with only scikit-learn's warning that arrays carry no names); as frames the model
    # refuses them.
    reordered = visits[["patient", "day", "albumin", "bili"]]
    swapped, _ = from_long_format(reordered, id_column="patient", time_column="day")
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        assert not np.allclose(model.predict_proba(swapped), model.predict_proba(frames))
    named, _ = from_long_format(reordered, id_column="patient", time_column="day", as_frame=True)
    with pytest.raises(ValueError, match="same order"):
        model.predict(named)
    with pytest.raises(TypeError, match="as_frame must be True or False"):
        from_long_format(visits, id_column="patient", time_column="day", as_frame="yes")


def test_to_long_format_refuses_values_indexed_by_the_ids_in_another_order():
    # It paired them by position: the value labelled 'b' went under id 'a'.
    with pytest.raises(ValueError, match=r"indexed by the same ids in another order.*values.loc\[ids\]"):
        to_long_format(pd.Series([1.0, 2.0], index=["b", "a"]), ["a", "b"])
    table = to_long_format(pd.Series([1.0, 2.0], index=["a", "b"]), ["a", "b"])
    assert table["value"].tolist() == [1.0, 2.0]
    table = to_long_format(pd.Series([1.0, 2.0]), [1, 0])  # pandas' default index counts positions
    assert table["id"].tolist() == [1, 0] and table["value"].tolist() == [1.0, 2.0]


def test_from_long_format_messages_lead_the_right_way():
    # The id as the table's index was told to "check the spelling", a list as id_column
    # gave pandas' raw "unhashable type: 'list'", and periods were told to convert text dates.
    table = pd.DataFrame({"id": ["a", "a", "b", "b"], "day": [0.0, 1.0, 0.0, 2.0], "x": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match=r"^id_column 'id' not found .* 'id' is the table's index: pass table.reset_index\(\)"):
        from_long_format(table.set_index("id"), id_column="id", time_column="day")
    with pytest.raises(TypeError, match=r"id_column must name one column; got \['id'\]"):
        from_long_format(table, id_column=["id"], time_column="day")
    periods = table.assign(day=pd.PeriodIndex(["2024-01", "2024-02", "2024-01", "2024-05"], freq="M"))
    with pytest.raises(TypeError, match=r"period\[M\]. Convert the periods to dates first.*to_timestamp"):
        from_long_format(periods, id_column="id", time_column="day")


def test_repeated_pairs_of_a_melted_table_name_the_pivot():
    # sktime's pd-long (one row per case, reading and channel) read with its values only
    # was told to aggregate (averaging the channels) or to keep the rows as steps.
    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, 4, 2))  # (case, reading, channel)
    table = pd.DataFrame([{"case_id": c, "reading_id": r, "dim_id": f"dim_{d}", "value": values[c, r, d]}
                          for c in range(3) for d in range(2) for r in range(4)])
    with pytest.raises(ValueError, match=r"12 row\(s\) repeat") as error:
        from_long_format(table, id_column="case_id", time_column="reading_id", feature_columns=["value"])
    pivot = "table.pivot_table(index=['case_id', 'reading_id'], columns='dim_id', values='value').reset_index()"
    assert pivot in str(error.value)
    wide = table.pivot_table(index=["case_id", "reading_id"], columns="dim_id", values="value").reset_index()
    X, ids = from_long_format(wide, id_column="case_id", time_column="reading_id")
    np.testing.assert_allclose(np.stack(X)[:, :, 1:], values)
    assert ids.tolist() == [0, 1, 2]


def test_a_repeated_time_is_named_with_every_digit_it_needs():
    # :g wrote epoch seconds 1700000010 as 1.7e+09, the same as any time of that year.
    table = pd.DataFrame({"id": [1, 1, 1], "t": [1700000005.0, 1700000010.0, 1700000010.0], "x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match=r"e\.g\. id 1 at time 1700000010\.0\. Aggregate"):
        from_long_format(table, id_column="id", time_column="t")
    with pytest.raises(ValueError, match=r"e\.g\. id 1 at time 2\.5\. Aggregate"):  # short where short is exact
        from_long_format(table.assign(t=[1.0, 2.5, 2.5]), id_column="id", time_column="t")


def test_dates_a_scalar_feature_columns_and_an_object_time_of_numbers_get_the_right_advice():
    # Date and duration features were told to one-hot encode (a column per date), an int
    # feature_columns failed with "'int' object is not iterable", and an object time
    # column of numbers was told to "Convert text dates".
    table = pd.DataFrame({"id": [1, 1], "day": [0, 1], "x": [1.0, 2.0],
                          "diagnosed": pd.to_datetime(["2020-01-01"] * 2), "since": pd.to_timedelta([3, 4], unit="D")})
    with pytest.raises(TypeError, match=r"convert them to numbers first\. Dates and durations \(diagnosed, since\) "
                                        r"become numbers of days.*pd\.Timedelta\(days=1\)") as error:
        from_long_format(table, id_column="id", time_column="day")
    assert "get_dummies" not in str(error.value)
    with pytest.raises(TypeError, match=r"get_dummies\(table, columns=\['ward'\].*Dates and durations \(since\)"):
        from_long_format(table.assign(ward=["a", "b"]), id_column="id", time_column="day",
                         feature_columns=["x", "ward", "since"])
    numbered = pd.DataFrame({0: ["a", "a", "b"], 1: [0, 1, 0], 2: [1.0, 2.0, 3.0], 3: [4.0, 5.0, 6.0]})
    with pytest.raises(TypeError, match=r"feature_columns must be a list of column names .*got int 2\. "
                                        r"For one column, pass feature_columns=\[2\]\."):
        from_long_format(numbered, id_column=0, time_column=1, feature_columns=2)
    X, _ = from_long_format(numbered, id_column=0, time_column=1, feature_columns=[2])  # the fix works
    np.testing.assert_array_equal(X[0], [[0.0, 1.0], [1.0, 2.0]])
    as_objects = pd.DataFrame({"id": [1, 1, 1], "day": np.array([2, 1, 3], dtype=object), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(TypeError, match=r"got dtype object\. It holds numbers .*pandas\.to_numeric\(table\[col\]\)"):
        from_long_format(as_objects, id_column="id", time_column="day")
    as_text = as_objects.assign(day=["2024-01-02", "2024-01-01", "2024-01-03"])
    with pytest.raises(TypeError, match=r"Convert text dates first"):  # text dates keep their advice
        from_long_format(as_text, id_column="id", time_column="day")


def test_numbers_held_as_decimal_or_text_are_told_to_go_through_pandas_to_numeric():
    # A Decimal column (what pandas.read_sql gives for NUMERIC) or numbers read as text
    # were told to one-hot encode (one column per distinct lab value) or, as times, to
    # parse dates (pandas.to_datetime(["0", "30", "0"]) fails).
    from decimal import Decimal

    visits = pd.DataFrame({"patient": [1, 1, 2], "day": [0, 30, 0],
                           "bili": [Decimal("1.5"), Decimal("2.0"), Decimal("0.7")]})
    as_text = visits.assign(bili=["1.5", "2.0", "0.7"])
    for table, held in ((visits, "Decimal values"), (as_text, "numbers written as text")):
        with pytest.raises(TypeError, match=rf"\['bili'\] hold {held}.*"
                                            r"table\[\['bili'\]\] = table\[\['bili'\]\]\.apply\(pandas\.to_numeric\)") as error:
            from_long_format(table, id_column="patient", time_column="day")
        assert "get_dummies" not in str(error.value)
        converted = table.assign(bili=pd.to_numeric(table["bili"]))  # the advice works
        np.testing.assert_array_equal(from_long_format(converted, id_column="patient", time_column="day")[0][0],
                                      [[0.0, 1.5], [30.0, 2.0]])
    with pytest.raises(TypeError, match=r"get_dummies\(table, columns=\['ward'\].*\['bili'\] hold Decimal values"):
        from_long_format(visits.assign(ward=["a", "b", "a"]), id_column="patient", time_column="day")
    for day, held in (([Decimal(0), Decimal(30), Decimal(0)], "Decimal values"), (["0", "30", "0"], "numbers written as text")):
        with pytest.raises(TypeError, match=rf"It holds {held}.*pandas\.to_numeric\(table\[col\]\)") as error:
            from_long_format(visits.assign(day=day, bili=1.0), id_column="patient", time_column="day")
        assert "text dates" not in str(error.value)


@pytest.mark.parametrize("flags", [[False, True, False], pd.array([False, True, False], dtype="boolean"),
                                   np.array([False, True, False], dtype=object)])
def test_a_boolean_time_column_is_told_it_holds_booleans(flags):
    # It was told to "Convert text dates", or, in an object column, to convert its
    # "numbers" with pandas.to_numeric, which gives booleans again.
    table = pd.DataFrame({"id": [1, 1, 2], "flag": flags, "x": [1.0, 2.0, 3.0]})
    expected = r"It holds booleans \(True/False\), which do not say when .*the rows' times as time_column"
    with pytest.raises(TypeError, match=r"time column 'flag' must be numeric .* " + expected) as error:
        from_long_format(table, id_column="id", time_column="flag")
    assert "text dates" not in str(error.value) and "to_numeric" not in str(error.value)


@pytest.mark.parametrize("unit", [7, "7", 1.5, np.int64(7)])
def test_a_time_unit_without_its_unit_is_refused(unit):
    # pandas reads a bare number as nanoseconds: time_unit=7 made a day 8.64e13.
    table = pd.DataFrame({"p": [0, 0], "day": pd.to_datetime(["2024-01-01", "2024-01-08"]), "x": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"time_unit must carry its unit, e\.g\. '7D'.*nanoseconds"):
        from_long_format(table, id_column="p", time_column="day", time_unit=unit)
    weeks = from_long_format(table, id_column="p", time_column="day", time_unit="7D")[0][0][:, 0]
    np.testing.assert_array_equal(weeks, [0.0, 1.0])


# ----------------------------------------------------------------- panel42
@pytest.mark.parametrize("kind", ["datetime", "timedelta"])
def test_to_long_format_refuses_datetime_ids_in_another_order(kind):
    # ids.tolist() turned datetime64[ns] ids into ints: the guard never matched and 0.9
    # went under the other date.
    days = pd.to_datetime(["2024-01-02", "2024-01-02", "2024-01-01"]).as_unit("ns")
    table = pd.DataFrame({"id": days if kind == "datetime" else days - days.min(), "t": [0.0, 1, 0],
                          "x": [1.0, 2, 3]})
    _, ids = from_long_format(table, id_column="id", time_column="t")
    risk = pd.Series([0.9, 0.1], index=pd.Index(ids)[::-1])
    with pytest.raises(ValueError, match="indexed by the same ids in another order"):
        to_long_format(risk, ids, columns="risk")
    assert to_long_format(risk.loc[ids], ids, columns="risk")["risk"].tolist() == [0.1, 0.9]


def test_a_part_of_a_multiindex_column_name_is_refused_as_the_id_or_time():
    # groupby().agg([...]).reset_index() names ('id', ''): 'id' was taken as a partial key,
    # and ('id', '') and ('day', '') were then read as features.
    raw = pd.DataFrame({"id": [1, 1, 1, 2], "day": [0, 0, 5, 0], "hr": [60.0, 64, 70, 80]})
    table = raw.groupby(["id", "day"]).agg(["mean", "max"]).reset_index()
    with pytest.raises(ValueError, match=r"^id_column 'id' names only part of a column of the table, whose "
                       r"columns have 2 levels, e\.g\. \('id', ''\).*flatten the columns first"):
        from_long_format(table, id_column="id", time_column="day")
    X, _ = from_long_format(table, id_column=("id", ""), time_column=("day", ""), as_frame=True)
    assert X[0].columns.tolist() == [("day", ""), ("hr", "mean"), ("hr", "max")]


def test_a_categorical_time_column_is_told_to_take_its_values_not_to_parse_dates():
    # pandas.to_datetime of the numbers made day 7 into 7 nanoseconds.
    table = pd.DataFrame({"id": [1, 1, 2], "t": pd.Categorical([0, 7, 0]), "x": [1.0, 2, 3]})
    with pytest.raises(TypeError, match=r"got dtype category\. It is categorical, of numbers: take their "
                       r"values first, e\.g\. table\[col\]\.astype\(float\)\.$"):
        from_long_format(table, id_column="id", time_column="t")
    X, _ = from_long_format(table.assign(t=table["t"].astype(float)), id_column="id", time_column="t")
    assert X[0][:, 0].tolist() == [0.0, 7.0]


def test_time_unit_takes_a_numpy_duration_and_refuses_a_signed_bare_number():
    table = pd.DataFrame({"id": [1, 1], "t": pd.to_datetime(["2024-01-01", "2024-01-03"]), "x": [1.0, 2]})
    X, _ = from_long_format(table, id_column="id", time_column="t", time_unit=np.timedelta64(1, "D"))
    assert X[0][:, 0].tolist() == [0.0, 2.0]  # refused as "1 days nanoseconds"
    with pytest.raises(ValueError, match=r"time_unit must carry its unit.*got '\+7'"):
        from_long_format(table, id_column="id", time_column="t", time_unit="+7")  # 7 nanoseconds


def test_a_melted_table_is_told_to_pivot_before_its_text_column_is_named():
    # Told first to one-hot encode the variable column, whose pivot hint then lost its names.
    melted = pd.DataFrame({"id": [1, 1, 2, 2], "t": [0, 0, 0, 0], "var": ["hr", "bp", "hr", "bp"],
                           "val": [60.0, 120, 70, 110]})
    with pytest.raises(ValueError, match=r"melted table.*table\.pivot_table\(index=\['id', 't'\], "
                       r"columns='var', values='val'\)\.reset_index\(\)"):
        from_long_format(melted, id_column="id", time_column="t")


def test_per_step_predictions_in_an_object_array_or_series_are_refused():
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.array([0, 1]), np.array([1, 1, 0])
    for values in (ragged, pd.Series(list(ragged), index=["a", "b"])):
        with pytest.raises(ValueError, match=r"^values must be per-sample results; got a (ndarray|Series) of 2 arrays"):
            to_long_format(values, ["a", "b"])


def test_a_sparse_integer_time_column_is_read():
    # pandas' "Cannot interpret 'Sparse[int64, 0]' as a data type".
    table = pd.DataFrame({"id": [1, 1, 2], "t": pd.arrays.SparseArray([0, 1, 0]), "x": [1.0, 2, 3]})
    X, ids = from_long_format(table, id_column="id", time_column="t")
    assert [x[:, 0].tolist() for x in X] == [[0.0, 1.0], [0.0]] and ids.tolist() == [1, 2]


def test_a_number_column_with_placeholders_is_told_to_make_them_missing_not_to_one_hot_encode():
    # One '?' or '<0.1' makes read_csv leave a lab column as text: it was told to be one-hot
    # encoded, a column per distinct value.
    import io

    lab = pd.read_csv(io.StringIO("pid,day,bili,sex\n1,0,1.5,f\n1,30,?,f\n2,0,0.7,m\n2,10,<0.1,m\n2,20,0.9,m\n"))
    with pytest.raises(TypeError, match=r"get_dummies\(table, columns=\['sex'\], dtype=float\)\. Column 'bili' holds "
                                        r"numbers but also \['\?', '<0\.1'\]: make those missing, e\.g\. table\['bili'\] = "
                                        r"pandas\.to_numeric\(table\['bili'\], errors='coerce'\)"):
        from_long_format(lab, id_column="pid", time_column="day")


@pytest.mark.parametrize("layout", ["frames", "panel", "wide table"])
def test_frames_panels_and_wide_tables_with_placeholders_are_told_to_make_them_missing(layout):
    # Only from_long_format gave this advice; a list of frames, a panel and a wide table with
    # a '?' in a number column were told to encode the column as numbers.
    from sklearn_rnn import RNNClassifier

    bili = ["1.5", "?", "0.7", "0.9"]
    if layout == "frames":
        X, variable = [pd.DataFrame({"bili": bili[:2]}), pd.DataFrame({"bili": bili[2:]})], "frame"
    elif layout == "panel":
        X, variable = pd.DataFrame({"bili": bili}, index=pd.MultiIndex.from_product([[1, 2], [0, 1]])), "X"
    else:
        X, variable = pd.DataFrame({"day0": [1.0, 2.0], "bili": bili[:2]}), "X"
    with pytest.raises(TypeError, match=rf"Column 'bili' holds numbers but also \['\?'\]: make those missing, "
                                        rf"e\.g\. {variable}\['bili'\] = pandas\.to_numeric\({variable}\['bili'\], "
                                        r"errors='coerce'\)"):
        RNNClassifier(max_iter=1).fit(X, [0, 1])


def test_frames_of_numbers_written_as_text_are_told_to_convert_them():
    from sklearn_rnn import RNNClassifier

    X = [pd.DataFrame({"hr": ["60", "70"]}), pd.DataFrame({"hr": ["65"]})]
    with pytest.raises(TypeError, match=r"Columns \['hr'\] hold numbers written as text, which pandas\.to_numeric "
                                        r"reads: convert them, e\.g\. frame\[\['hr'\]\] = "):
        RNNClassifier(max_iter=1).fit(X, [0, 1])


def test_a_numpy_duration_without_a_unit_is_refused_as_a_bare_number():
    # np.timedelta64(7) has numpy's generic unit: it was read as 7 nanoseconds (long43).
    table = pd.DataFrame({"p": [0, 0], "day": pd.to_datetime(["2024-01-01", "2024-01-08"]), "x": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"time_unit must carry its unit, e\.g\. '7D'"):
        from_long_format(table, id_column="p", time_column="day", time_unit=np.timedelta64(7))
    X, _ = from_long_format(table, id_column="p", time_column="day", time_unit=np.timedelta64(7, "D"))
    assert X[0][:, 0].tolist() == [0.0, 1.0]


def test_a_wide_table_with_a_repeated_text_column_name_gets_the_packages_message():
    # numbers_hint read frame[name] as one column: a repeated name gave a DataFrame and
    # "'DataFrame' object has no attribute 'dtype'" (diff43 review).
    from sklearn_rnn import RNNClassifier

    X = pd.DataFrame([[1.0, 2.0, "3"], [2.0, 1.0, "?"], [0.5, 0.1, "0.2"], [1.5, 0.3, "1"]], columns=["t", "u", "u"])
    with pytest.raises(TypeError, match=r"X could not be read as numbers: its columns \{'u': 'str'\}"):
        RNNClassifier(max_iter=1).fit(X, [0, 1, 0, 1])


def test_time_columns_of_durations_zones_or_complex_numbers_and_repeated_pairs_get_working_advice():
    # insp44: durations and dates of several zones were told to use pandas.to_datetime
    # (which fails on both); a complex time column was cut to its real part; the
    # aggregation advice for repeated (id, time) pairs named placeholders and failed on a
    # table with a text column.
    import datetime

    durations = pd.DataFrame({"id": [1, 1], "d": [datetime.timedelta(days=1), datetime.timedelta(days=3)],
                              "v": [1.0, 2.0]}).astype({"d": object})
    with pytest.raises(TypeError, match=r"It holds durations: convert them first, e.g\. pandas\.to_timedelta"):
        from_long_format(durations, id_column="id", time_column="d")
    zones = pd.DataFrame({"id": [1, 1], "v": [1.0, 2.0], "d": pd.Series(
        [pd.Timestamp("2024-01-01", tz="UTC"), pd.Timestamp("2024-01-02", tz="Europe/Paris")], dtype=object)})
    with pytest.raises(TypeError, match=r"several time zones.* pandas\.to_datetime\(table\[col\], utc=True\)"):
        from_long_format(zones, id_column="id", time_column="d")
    complex_times = pd.DataFrame({"id": [1, 1], "day": np.array([1 + 2j, 0 + 5j]), "v": [1.0, 2.0]})
    with pytest.raises(TypeError, match=r"time column 'day' holds complex numbers"):
        from_long_format(complex_times, id_column="id", time_column="day")
    repeated = pd.DataFrame({"pid": [1, 1], "t": [0, 0], "v": [1.0, 2.0], "site": ["a", "a"]})
    with pytest.raises(ValueError, match=r"table\.groupby\(\['pid', 't'\], as_index=False\)\.mean\(numeric_only=True\)"):
        from_long_format(repeated, id_column="pid", time_column="t", feature_columns=["v"])
    repeated.groupby(["pid", "t"], as_index=False).mean(numeric_only=True)  # the advice runs
