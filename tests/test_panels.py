"""Inputs users have: sktime/aeon panels, long tables with dates, long tables passed by mistake."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, RNNRegressor, SequenceStandardScaler
from sklearn_rnn.sequences import check_sequences, from_long_format


pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def visits(n_patients=30, seed=0):
    """A long table: patient, day (integers from 0), two lab values; shuffled rows."""
    rng = np.random.default_rng(seed)
    rows = []
    for patient in range(n_patients):
        days = np.cumsum(rng.integers(1, 200, size=rng.integers(2, 8)))
        days -= days[0]
        for day in days:
            rows.append({"patient": f"p{patient:02d}", "day": int(day),
                         "bili": rng.lognormal(), "albumin": rng.normal(3.5, 0.4)})
    table = pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)
    death = {f"p{i:02d}": int(i % 3 == 0) for i in range(n_patients)}
    return table, death


def model(**params):
    return RNNClassifier(hidden_size=6, max_iter=3, n_iter_no_change=100, random_state=0, **params)


def test_panel_multiindex_predicts_as_the_ragged_list():
    table, death = visits()
    X, ids = from_long_format(table, id_column="patient", time_column="day")
    y = np.array([death[i] for i in ids])
    panel = table.sort_values("patient").set_index(["patient", "day"])  # instances in id order
    assert panel.index.get_level_values(0).unique().tolist() == ids.tolist()
    features = [x[:, 1:] for x in X]  # the panel's columns: bili, albumin
    on_list = model().fit(features, y)
    on_panel = model().fit(panel, y)
    np.testing.assert_array_equal(on_panel.predict_proba(panel), on_list.predict_proba(features))
    with pytest.warns(UserWarning, match="X has feature names, but RNNClassifier was fitted without"):
        np.testing.assert_array_equal(on_list.predict_proba(panel), on_list.predict_proba(features))
    assert on_panel.n_features_in_ == 2
    assert on_panel.feature_names_in_.tolist() == ["bili", "albumin"]


def test_panel_instances_keep_their_order_of_appearance_and_times_order_steps():
    index = pd.MultiIndex.from_tuples(
        [("z", 5.0), ("a", 1.0), ("z", 2.0), ("a", 0.5)], names=["instance", "time"]
    )
    panel = pd.DataFrame({"x": [4.0, 3.0, 2.0, 1.0]}, index=index)
    sequences = check_sequences(panel)
    assert [s.ravel().tolist() for s in sequences] == [[2.0, 4.0], [1.0, 3.0]]


def test_panel_through_a_pipeline_with_the_scaler():
    table, death = visits()
    X, ids = from_long_format(table, id_column="patient", time_column="day")
    y = np.array([death[i] for i in ids])
    panel = table.sort_values("patient").set_index(["patient", "day"])
    scaled = SequenceStandardScaler().fit(panel).transform(panel)
    assert isinstance(scaled, pd.DataFrame) and scaled.index.equals(panel.index)
    features = [x[:, 1:] for x in X]
    on_panel = make_pipeline(SequenceStandardScaler(), model()).fit(panel, y)
    on_list = make_pipeline(SequenceStandardScaler(), model()).fit(features, y)
    np.testing.assert_allclose(on_panel.predict_proba(panel), on_list.predict_proba(features))


def test_a_panel_cross_validates_as_a_list_of_one_frame_per_instance():
    # scikit-learn's splitters index a panel's rows (visits), so it cannot be split by
    # patient; the list of one frame per instance that the input-formats page shows
    # splits by patient, keeps the names, and scores as the ragged list does.
    table, death = visits()
    X, ids = from_long_format(table, id_column="patient", time_column="day")
    y = np.array([death[i] for i in ids])
    panel = table.sort_values("patient").set_index(["patient", "day"])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        cross_val_predict(model(), panel, y, cv=3)
    per_instance = [steps.droplevel(0).sort_index(kind="stable")
                    for _, steps in panel.groupby(level=0, sort=False)]
    features = [x[:, 1:] for x in X]
    on_frames = cross_val_predict(model(), per_instance, y, cv=3, method="predict_proba")
    on_arrays = cross_val_predict(model(), features, y, cv=3, method="predict_proba")
    np.testing.assert_allclose(on_frames, on_arrays)
    assert model().fit(per_instance, y).feature_names_in_.tolist() == ["bili", "albumin"]


def test_long_table_with_time_feature_matches_the_ragged_list():
    table, death = visits()
    X, ids = from_long_format(table, id_column="patient", time_column="day")
    y = np.array([death[i] for i in ids])
    ragged = [group.sort_values("day")[["day", "bili", "albumin"]].to_numpy(dtype=float)
              for _, group in table.groupby("patient")]  # built by hand, in id order
    by_hand = model(time_feature=0).fit(ragged, y)
    via_table = model(time_feature=0).fit(X, y)
    np.testing.assert_array_equal(via_table.predict_proba(X), by_hand.predict_proba(ragged))


@pytest.mark.parametrize("kind", ["datetime", "timedelta"])
def test_dates_give_the_same_model_as_day_numbers(kind):
    table, death = visits()
    start = pd.Timestamp("2021-03-01") if kind == "datetime" else pd.Timedelta(0)
    dated = table.assign(day=start + pd.to_timedelta(table["day"], unit="D"))
    X_days, ids = from_long_format(table, id_column="patient", time_column="day")
    X_dates, ids_dates = from_long_format(dated, id_column="patient", time_column="day")
    assert ids.tolist() == ids_dates.tolist()
    for days, dates in zip(X_days, X_dates):
        np.testing.assert_array_equal(days, dates)
    y = np.array([death[i] for i in ids])
    on_days = model(time_feature=0).fit(X_days, y)
    on_dates = model(time_feature=0).fit(X_dates, y)
    np.testing.assert_array_equal(on_dates.predict_proba(X_dates), on_days.predict_proba(X_days))
    weeks, _ = from_long_format(dated, id_column="patient", time_column="day", time_unit="7D")
    np.testing.assert_allclose(weeks[0][:, 0] * 7, X_days[0][:, 0])


def test_bad_time_unit_is_refused():
    table, _ = visits()
    dated = table.assign(day=pd.Timestamp("2021-03-01") + pd.to_timedelta(table["day"], unit="D"))
    with pytest.raises(ValueError, match="time_unit must be a duration"):
        from_long_format(dated, id_column="patient", time_column="day", time_unit="fortnight")


@pytest.mark.parametrize("estimator", [RNNClassifier, RNNRegressor])
def test_long_table_passed_to_fit_is_refused_with_the_route(estimator):
    table, death = visits()
    numeric = table.assign(patient=table["patient"].str[1:].astype(int))
    y = np.zeros(len(numeric))
    with pytest.raises(ValueError, match="from_long_format") as error:
        estimator(max_iter=1).fit(numeric, y)
    message = str(error.value)
    assert "'patient' repeats ids" in message and "set_index" in message
    # The user's own values are quoted: an id of the table, not a scaled number.
    repeated = numeric["patient"][numeric["patient"].duplicated()].iloc[0]
    assert f"e.g. {int(repeated)} on " in message


def test_long_table_recognized_by_repeated_index_or_dates():
    table, _ = visits()
    by_index = table.drop(columns="patient").set_index(table["patient"].str[1:].astype(int))
    with pytest.raises(ValueError, match="index repeats labels"):
        RNNRegressor(max_iter=1).fit(by_index, np.zeros(len(by_index)))
    dated = table.drop(columns="patient").assign(
        day=pd.Timestamp("2021-03-01") + pd.to_timedelta(table["day"], unit="D"))
    with pytest.raises(ValueError, match="dates or durations"):
        check_sequences(dated)


def test_a_bootstrapped_table_of_sequences_is_told_the_way_out_that_keeps_its_names():
    from sklearn.utils import resample

    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(12, 6)), columns=[f"t{i}" for i in range(6)])
    Xb, yb = resample(table, np.arange(12) % 2, random_state=0)  # repeats row labels
    with pytest.raises(ValueError, match=r"pass X.reset_index\(drop=True\), which keeps the column"):
        RNNClassifier(hidden_size=3, max_iter=1).fit(Xb, yb)
    clf = RNNClassifier(hidden_size=3, max_iter=1).fit(Xb.reset_index(drop=True), yb)
    assert clf.feature_names_in_.tolist() == table.columns.tolist()


@pytest.mark.parametrize("name", ["PatientID", "subjectId", "userID"])
def test_long_table_with_a_camel_case_id_column_is_refused(name):
    # patient_id was refused; PatientID was read as a univariate sequence per row.
    table, _ = visits()
    numeric = table.assign(patient=table["patient"].str[1:].astype(int)).rename(columns={"patient": name})
    with pytest.raises(ValueError, match=f"column '{name}' repeats ids"):
        check_sequences(numeric)


def test_a_panel_whose_time_level_is_text_is_refused_not_sorted_as_text():
    # Day labels "1", "2", "10" came out as steps 1, 10, 2.
    table = pd.DataFrame({"patient": ["a", "a", "a"], "day": ["1", "2", "10"], "bili": [1.0, 2.0, 3.0]})
    with pytest.raises(TypeError, match=r"time level \('day'\) must be numeric, datetime, "
                                        r"timedelta or period.*to_numeric"):
        check_sequences(table.set_index(["patient", "day"]))
    as_numbers = table.assign(day=pd.to_numeric(table["day"])).set_index(["patient", "day"])
    np.testing.assert_array_equal(check_sequences(as_numbers)[0].ravel(), [1.0, 2.0, 3.0])
    periods = table.assign(day=pd.period_range("2024-01", periods=3, freq="M")[[0, 2, 1]])
    np.testing.assert_array_equal(check_sequences(periods.set_index(["patient", "day"]))[0].ravel(),
                                  [1.0, 3.0, 2.0])


def test_tables_of_sequences_still_pass_and_an_id_column_in_one_is_refused():
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(20, 5)), columns=[f"t{i}" for i in range(5)])
    model = RNNRegressor(hidden_size=4, max_iter=2, n_iter_no_change=100).fit(table, rng.normal(size=20))
    assert model.predict(table).shape == (20,)
    # An id column without repeats was read as every sequence's first step (raw id
    # numbers the network memorized); it is refused with the fix, by name.
    for name in ("id", "patient_id", "subjectID"):
        with pytest.raises(ValueError, match=rf"column '{name}' named like an id, one distinct value per row.*drop"):
            RNNRegressor(hidden_size=4, max_iter=1).fit(table.assign(**{name: np.arange(20)}), rng.normal(size=20))
    # Names that may be measurements (a unit, a case count) are not taken for ids.
    assert RNNRegressor(hidden_size=4, max_iter=1).fit(table.assign(unit=np.arange(20.0)), rng.normal(size=20)).n_features_in_ == 6


def test_an_id_column_of_groupby_frames_is_refused():
    # The frames of table.groupby('patient_id') keep the id column: it was read as a
    # feature constant within each sequence, raw id numbers, without a word.
    rng = np.random.default_rng(0)
    visits = pd.DataFrame({"patient_id": np.repeat(np.arange(1001, 1013), 4),
                           "day": np.tile([0, 30, 90, 200], 12), "bili": rng.normal(size=48)})
    frames = [group for _, group in visits.groupby("patient_id")]
    y = np.arange(12) % 2
    with pytest.raises(ValueError, match=r"column 'patient_id' named like an id and holding one value per sequence"):
        RNNClassifier(hidden_size=4, max_iter=1).fit(frames, y)
    dropped = [frame.drop(columns=["patient_id"]) for frame in frames]
    assert RNNClassifier(hidden_size=4, max_iter=1).fit(dropped, y).n_features_in_ == 2


@pytest.mark.parametrize("stem", ["case_count_w", "user_logins_w", "engine_temp_t", "series_"])
def test_a_wide_table_whose_numbered_steps_start_with_an_id_word_is_read_as_one(stem):
    # Weekly counts in columns case_count_w0 ... case_count_w7 repeat values in every
    # column, and were refused as a long table whose id column was 'case_count_w0', in
    # fit, predict and the scaler: columns named alike but for a number are steps.
    rng = np.random.default_rng(0)
    counts = pd.DataFrame(rng.poisson(3, size=(20, 8)).astype(float), columns=[f"{stem}{i}" for i in range(8)])
    y = np.arange(20) % 2
    fitted = model().fit(counts, y)
    assert fitted.n_features_in_ == 8 and fitted.predict(counts).shape == (20,)
    assert SequenceStandardScaler().fit_transform(counts).shape == (20, 8)
    # An id column beside them is still one.
    with pytest.raises(ValueError, match="column 'case' repeats ids"):
        check_sequences(counts.assign(case=np.repeat(np.arange(5), 4)))


def test_frames_with_pandas_missing_values_read_them_as_missing():
    # Nullable columns (Int64, boolean) mark a missing value with pd.NA, which numpy
    # cannot convert: read as NaN, a missing value, as the panel path reads it.
    rng = np.random.default_rng(0)
    arrays = []
    for _ in range(24):
        n = int(rng.integers(3, 7))
        arrays.append(np.column_stack([rng.integers(0, 9, n), rng.random(n) > 0.5]).astype(float))
    for a in arrays[::3]:
        a[1, 0] = np.nan
    arrays[0][2, 1] = np.nan
    y = np.arange(24) % 2

    def nullable(values, kind, dtype):
        return pd.array([None if np.isnan(v) else kind(v) for v in values], dtype=dtype)

    frames = [pd.DataFrame({"count": nullable(a[:, 0], int, "Int64"),
                            "flag": nullable(a[:, 1], bool, "boolean")}) for a in arrays]
    for got, expected in zip(check_sequences(frames), arrays):
        np.testing.assert_array_equal(got, expected)  # NaN where pd.NA was
    on_frames = model().fit(frames, y)
    on_arrays = model().fit(arrays, y)
    np.testing.assert_array_equal(on_frames.predict_proba(frames), on_arrays.predict_proba(arrays))


def test_object_columns_of_numbers_and_missing_values_are_read_as_in_a_table():
    # A boolean column with a None is of object dtype in pandas: a DataFrame table took
    # it, a frame of a sequence refused it as "not numbers".
    frame = pd.DataFrame({"flag": [True, None, False], "x": np.array([1.0, pd.NA, 3.0], dtype=object),
                          "y": [0.5, 1.5, 2.5]})
    expected = [[1, 1, 0.5], [np.nan, np.nan, 1.5], [0, 3, 2.5]]
    np.testing.assert_array_equal(check_sequences([frame])[0], expected)
    panel = frame.set_index(pd.MultiIndex.from_tuples([("a", 0), ("a", 1), ("a", 2)]))
    np.testing.assert_array_equal(check_sequences(panel)[0], expected)
    for text in (["a", None, "b"], np.array([1.0, "2", 3.0], dtype=object)):
        with pytest.raises(TypeError, match="has columns that are not real numbers"):
            check_sequences([frame.assign(flag=text)])


def test_frames_and_panels_with_columns_that_are_not_numbers_are_refused_by_name():
    days = pd.date_range("2024-01-01", periods=3, freq="7D")
    frames = [pd.DataFrame({"day": days, "bili": [1.0, 2.0, 3.0], "ward": ["a", "b", "a"]})] * 4
    with pytest.raises(TypeError, match=r"sequence 0 of X has columns that are not real numbers: "
                                        r"\{'day': 'datetime64\[[a-z]+\]', 'ward': '(object|str)'\}") as error:
        model().fit(frames, [0, 1, 0, 1])
    assert "Dates and durations (day) become numbers with sequences.from_long_format" in str(error.value)
    panel = pd.concat({i: frame for i, frame in enumerate(frames)}, names=["instance", "time"])
    with pytest.raises(TypeError, match=r"the panel has columns that are not real numbers: \{'day'"):
        model().fit(panel, [0, 1, 0, 1])
    numeric = [frame[["bili"]] for frame in frames]
    assert model().fit(numeric, [0, 1, 0, 1]).feature_names_in_.tolist() == ["bili"]


def test_a_table_with_a_text_column_is_told_to_drop_it_by_name_or_convert_a_long_table():
    # A label left in a table of sequences got "could not be read as numbers ... Encode
    # categorical or text values as numbers first", which would make it one more step of
    # every sequence; a long table with text ids under an unknown name got the same.
    rng = np.random.default_rng(0)
    y = np.arange(6) % 2
    table = pd.DataFrame(rng.normal(size=(6, 4)), columns=["t0", "t1", "t2", "t3"])
    labelled = table.assign(outcome=np.where(y, "dead", "alive"))
    with pytest.raises(TypeError, match=r"its columns \{'outcome': '(object|str)'\} are not real numbers.*"
                                        r"its columns the steps.*X\.drop\(columns=\['outcome'\]\)"):
        model().fit(labelled, y)
    fitted = model().fit(table, y)
    with pytest.raises(TypeError, match=r"X\.drop\(columns=\['outcome'\]\)"):
        fitted.predict(labelled.drop(columns="t3"))
    visits = pd.DataFrame({"animal": ["A1", "A1", "A2", "A2", "A3", "A3"], "day": [0, 9, 0, 4, 0, 7],
                           "hr": rng.normal(size=6)})
    with pytest.raises(TypeError, match=r"\{'animal': '(object|str)'\}.*If column 'animal' names the instance.*"
                                        r"from_long_format\(X, id_column='animal', time_column=\.\.\.\)"):
        model().fit(visits, [0, 1, 0])


def test_the_hint_for_a_date_column_keeps_fractions_of_a_day():
    # The hint was (column - column.min()).dt.days: readings 6 hours apart all got time 0.
    when = pd.Series(pd.date_range("2024-03-01", periods=4, freq="6h"))
    with pytest.raises(TypeError, match=r"\(column - column.min\(\)\) / pd.Timedelta\(days=1\)") as error:
        check_sequences([pd.DataFrame({"when": when, "x": np.arange(4.0)})])
    assert ".dt.days" not in str(error.value)
    assert ((when - when.min()) / pd.Timedelta(days=1)).tolist() == [0.0, 0.25, 0.5, 0.75]  # the hint's way


def test_complex_columns_are_refused_as_complex_arrays_are():
    # A complex array is refused; in a frame, a panel or a long table the same values were
    # cut to their real part with numpy's ComplexWarning only.
    frame = pd.DataFrame({"z": [1 + 2j, 3 - 1j], "x": [1.0, 2.0]})
    message = r"not real numbers: \{'z': 'complex128'\}.*Complex columns \(z\) would lose their imaginary part"
    with pytest.raises(TypeError, match=message):
        check_sequences([frame])
    with pytest.raises(TypeError, match=message):
        check_sequences(frame.set_axis(pd.MultiIndex.from_tuples([("a", 0), ("a", 1)])))
    with pytest.raises(TypeError, match=r"must hold real numbers; got columns \{'z': 'complex128'\}.*imaginary part"):
        from_long_format(frame.assign(id=[1, 1], day=[0, 1]), id_column="id", time_column="day")
    with pytest.raises(ValueError, match="holds complex numbers"):
        check_sequences([frame.to_numpy()])


def test_targets_indexed_by_instance_in_another_order_are_refused():
    # A panel's sequences follow the order in which instances first appear; targets
    # from a groupby come sorted by instance. Paired by position, as scikit-learn
    # pairs them, most sequences would train on another patient's outcome.
    table, death = visits()
    panel = table.set_index(["patient", "day"])  # rows shuffled: instances unsorted
    instances = panel.index.unique(level=0)
    assert not instances.is_monotonic_increasing
    sorted_targets = pd.Series(death).sort_index()  # indexed by patient, sorted
    for call in (lambda: model().fit(panel, sorted_targets),
                 lambda: model().fit(panel, sorted_targets.to_frame())):
        with pytest.raises(ValueError, match=r"y is indexed by the panel's instances, but in "
                                             r"another order .*y.loc\[X.index.unique\(level=0\)\]"):
            call()
    aligned = sorted_targets.loc[instances]
    clf = model().fit(panel, aligned)
    assert clf.score(panel, aligned) == clf.score(panel, aligned.to_numpy())
    with pytest.raises(ValueError, match="another order"):
        clf.score(panel, sorted_targets)
    # Plain arrays and Series with a default index are paired by position, unchecked.
    model().fit(panel, sorted_targets.to_numpy())
    model().fit(panel, sorted_targets.reset_index(drop=True))


def test_targets_under_a_range_index_of_instance_labels_are_checked_too():
    # Every RangeIndex was taken for pandas' default positions: y_all[10:13] of a
    # default-indexed Series keeps the labels 10, 11, 12, and patient 12's sequence got
    # patient 10's label without a word (the same labels in an Index were refused).
    ids = [12, 11, 10]
    panel = pd.concat([pd.DataFrame({"v": [float(i)] * 2}) for i in ids], keys=ids, names=["id", "t"])
    y_all = pd.Series([0] * 10 + [1, 0, 0])
    assert isinstance(y_all[10:13].index, pd.RangeIndex)
    with pytest.raises(ValueError, match=r"y is indexed by the panel's instances, but in another order"):
        model().fit(panel, y_all[10:13])
    model().fit(panel, y_all[10:13][::-1])  # its labels in the panel's order: RangeIndex(12, 9, -1)
    model().fit(panel, y_all[10:13].reset_index(drop=True))  # positions
    # Per-step targets whose RangeIndex counts down are in another order than the steps.
    from sklearn_rnn import RNNStepClassifier

    steps = [pd.Series([0, 1, 1], index=pd.RangeIndex(2, -1, -1)), pd.Series([1, 0], index=pd.RangeIndex(2))]
    frames = [pd.DataFrame({"v": [0.5, 0.1, 0.9]}), pd.DataFrame({"v": [0.2, 0.3]})]
    with pytest.raises(ValueError, match=r"in another order"):
        RNNStepClassifier(hidden_size=3, max_iter=1, random_state=0).fit(frames, steps)


def test_sample_weight_indexed_by_instance_in_another_order_is_refused_as_y_is():
    from sklearn_rnn import RNNStepClassifier
    from sklearn_rnn.model_selection import RNNGridSearchCV

    table, death = visits()
    panel = table.set_index(["patient", "day"])
    instances = panel.index.unique(level=0)
    y = pd.Series(death).loc[instances]
    sorted_weights = pd.Series(np.arange(1.0, len(y) + 1), index=y.index).sort_index()
    message = (r"sample_weight is indexed by the panel's instances, but in another order .*"
               r"sample_weight.loc\[X.index.unique\(level=0\)\]")
    with pytest.raises(ValueError, match=message):
        model().fit(panel, y, sample_weight=sorted_weights)
    clf = model().fit(panel, y, sample_weight=sorted_weights.loc[instances])
    with pytest.raises(ValueError, match=message):
        clf.score(panel, y, sample_weight=sorted_weights)
    with pytest.raises(ValueError, match=message):
        RNNGridSearchCV(model(), {"hidden_size": [3]}, cv=2).fit(panel, y, sample_weight=sorted_weights)
    steps = RNNStepClassifier(hidden_size=3, max_iter=1, random_state=0)
    with pytest.raises(ValueError, match=message):
        steps.fit(panel, [np.zeros(len(steps_)) for _, steps_ in panel.groupby(level=0, sort=False)],
                  sample_weight=sorted_weights)
    # Plain arrays are paired by position, unchecked.
    model().fit(panel, y, sample_weight=sorted_weights.to_numpy())


def test_targets_in_a_read_only_array_train_without_pytorch_warnings():
    # pandas hands out read-only arrays (copy-on-write); integer labels 0..k-1 went to
    # torch.as_tensor as they were, and PyTorch warned that the array is not writable.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(20)]
    labels = np.arange(20) % 2
    labels.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # a UserWarning too
        clf = model().fit(X, labels)
        model().fit(X, pd.Series(np.arange(20) % 2))
    # PyTorch warns once per process, so the check above bites only when it runs first;
    # what stops the warning does not depend on order: the targets are copied, never
    # shared with the caller's array.
    import torch

    targets = clf._target_tensor(labels, torch.device("cpu"))
    targets += 1
    assert labels.tolist() == (np.arange(20) % 2).tolist()


def test_targets_with_pandas_default_index_are_positions_even_for_integer_instances():
    # Instances numbered 0..n-1 but not in order: a Series built from a list has
    # pandas' default index (positions) and pairs as given; a groupby's index holds
    # the instance labels, sorted, and is refused.
    table, death = visits()
    numbers = {patient: i for i, patient in enumerate(sorted(death))}
    table = table.assign(patient=table["patient"].map(numbers))
    panel = table.set_index(["patient", "day"])
    instances = panel.index.unique(level=0)
    assert sorted(instances) == list(range(len(death))) and list(instances) != sorted(instances)
    by_number = {numbers[p]: d for p, d in death.items()}
    in_panel_order = pd.Series([by_number[i] for i in instances])  # RangeIndex: positions
    clf = model().fit(panel, in_panel_order)
    assert clf.score(panel, in_panel_order) == clf.score(panel, in_panel_order.to_numpy())
    from_groupby = table.assign(death=table["patient"].map(by_number)).groupby("patient")["death"].first()
    assert not isinstance(from_groupby.index, pd.RangeIndex)
    with pytest.raises(ValueError, match="another order"):
        model().fit(panel, from_groupby)


def test_sktimes_nested_format_is_refused_with_the_conversion():
    # sktime's legacy nested DataFrame (one column per channel, a Series in each cell)
    # failed with "could not be read as numbers ... encode categorical or text values".
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 8, size=12)
    nested = pd.DataFrame({f"dim_{c}": [pd.Series(rng.normal(size=n)) for n in lengths] for c in range(2)})
    y = np.arange(12) % 2
    with pytest.raises(TypeError, match=r"X is a table whose cells hold series \(a cell is a Series"):
        model().fit(nested, y)
    converted = [np.column_stack([np.asarray(cell) for cell in row]) for row in nested.itertuples(index=False)]
    assert [x.shape for x in converted] == [(n, 2) for n in lengths]
    model().fit(converted, y)


def test_a_column_of_sequences_held_as_nested_lists_is_read_as_the_sequences():
    # A Series, one-column frame or (n, 1) object array whose cells are (T_i, d) nested
    # lists, as read_json gives them back, was refused as sktime's nested
    # format, with a fix that transposed every sequence of a Series (iterating a Series
    # yields its cells); a one-column frame at predict got the (m, 1) ambiguity message.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 3)) for n in (4, 4, 6, 3, 5, 4)]
    y = np.arange(6) % 2
    nested = pd.Series([x.tolist() for x in X])
    column = np.empty((6, 1), dtype=object)
    for row, cell in enumerate(nested):
        column[row, 0] = cell
    fitted = model().fit(X, y)
    for given in (nested, nested.to_frame("seq"), column):
        assert [x.tolist() for x in check_sequences(given)] == [x.tolist() for x in X]
        np.testing.assert_array_equal(fitted.predict_proba(given), fitted.predict_proba(X))
        assert model().fit(given, y).n_features_in_ == 3
    # A cell that is no (T_i, d) sequence is named; no fix joins a column's cells as channels.
    for odd in (pd.Series([X[0], np.zeros((2, 2, 3))]), pd.Series([X[0], [1.0, 2.0]])):
        with pytest.raises((TypeError, ValueError), match="sequence 1 of X has shape") as error:
            check_sequences(odd)
        assert "column_stack" not in str(error.value)


def parquet_cell(sequence):
    """A (T_i, d) sequence as pandas.read_parquet gives a cell of nested lists back
    (pyarrow's default numpy conversion): a 1D object array holding each step as a 1D
    float array."""
    cell = np.empty(len(sequence), dtype=object)
    for step, row in enumerate(sequence):
        cell[step] = np.asarray(row, dtype=np.float64)
    return cell


def test_a_column_of_sequences_read_back_by_read_parquet_is_read_as_the_sequences():
    # read_parquet gives each cell of a column of sequences as a 1D object array of 1D
    # steps: it was refused as "a column of 1D arrays" (univariate sequences), with a
    # reshape as the fix that itself failed as "could not be read as numbers".
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 3)) for n in (4, 4, 6, 3, 5, 4)]
    y = np.arange(6) % 2
    cells = pd.Series([parquet_cell(x) for x in X], name="seq")
    assert cells.iloc[0].dtype == object and cells.iloc[0].shape == (4,) and cells.iloc[0][0].shape == (3,)
    column = np.empty((6, 1), dtype=object)
    for row, cell in enumerate(cells):
        column[row, 0] = cell
    fitted = model().fit(X, y)
    for given in (cells, cells.to_frame(), column, list(cells)):
        assert [x.tolist() for x in check_sequences(given)] == [x.tolist() for x in X]
        np.testing.assert_array_equal(fitted.predict_proba(given), fitted.predict_proba(X))
        assert model().fit(given, y).n_features_in_ == 3
    ragged = pd.Series([parquet_cell(X[0]), parquet_cell([[1.0, 2.0, 3.0], [4.0, 5.0]])])
    with pytest.raises(ValueError, match=r"sequence 1 of X has steps of different widths \[2, 3\]"):
        check_sequences(ragged)


@pytest.mark.parametrize("dtype_backend", [None, "pyarrow"])
def test_a_column_of_sequences_round_trips_through_parquet(tmp_path, dtype_backend):
    # The real round trip (pyarrow is no dependency: skipped without it). With
    # dtype_backend='pyarrow' the column is an ArrowDtype list<list<double>> Series,
    # which was refused as "one-dimensional (Series of 6 values)".
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 3)) for n in (4, 4, 6, 3, 5, 4)]
    y = np.arange(6) % 2
    path = tmp_path / "sequences.parquet"
    pd.DataFrame({"seq": [x.tolist() for x in X]}).to_parquet(path)
    frame = pd.read_parquet(path, **({"dtype_backend": dtype_backend} if dtype_backend else {}))
    fitted = model().fit(X, y)
    for given in (frame, frame["seq"]):
        assert [x.tolist() for x in check_sequences(given)] == [x.tolist() for x in X]
        np.testing.assert_array_equal(fitted.predict_proba(given), fitted.predict_proba(X))
        assert model().fit(given, y).n_features_in_ == 3


@pytest.mark.parametrize("dtype_backend", [None, "pyarrow"])
def test_a_column_of_univariate_series_read_back_by_read_parquet_is_refused_with_the_reshape(
        tmp_path, dtype_backend):
    # A column of 1-D lists read back with dtype_backend='pyarrow', as a Series, was
    # refused as "one-dimensional (Series of 2 values)" with advice for one sequence.
    pytest.importorskip("pyarrow")
    path = tmp_path / "series.parquet"
    pd.DataFrame({"seq": [[1.0, 2.0, 3.0], [4.0, 5.0]]}).to_parquet(path)
    frame = pd.read_parquet(path, **({"dtype_backend": dtype_backend} if dtype_backend else {}))
    for given, cells in ((frame, r"X\.iloc\[:, 0\]"), (frame["seq"], "X")):
        with pytest.raises(TypeError, match=rf"X is a column of 1D arrays .*for x in {cells}\]"):
            check_sequences(given)


def test_per_step_targets_of_another_instance_are_refused():
    # groupby(level=0) sorts the instances (a, b, c) while the panel keeps them as they
    # come (c, a, b): a's targets trained against c's steps without a word.
    from sklearn_rnn import RNNStepClassifier

    rng = np.random.default_rng(0)
    index = pd.MultiIndex.from_tuples([(pid, day) for pid in "cab" for day in (0, 7, 14)], names=["pid", "day"])
    table = pd.DataFrame({"a": rng.normal(size=9), "b": rng.normal(size=9)}, index=index)
    table["high"] = (table["a"] > 0).astype(int)
    panel = table[["a", "b"]]
    model = RNNStepClassifier(hidden_size=3, max_iter=2, random_state=0)
    sorted_ids = [group["high"] for _, group in table.groupby(level=0)]
    with pytest.raises(ValueError, match=r"y\[0\] holds the steps of instance 'a', but sequence 0 of X is "
                                         r"instance 'c'.*groupby\(level=0, sort=False\)"):
        model.fit(panel, sorted_ids)
    model.fit(panel, [group["high"] for _, group in table.groupby(level=0, sort=False)])  # the hint works
    with pytest.raises(ValueError, match="holds the steps of instance 'a'"):
        model.score(panel, sorted_ids)


def test_per_step_targets_indexed_out_of_time_order_are_refused():
    # A panel's steps are read sorted by time; targets from groupby(level=0) of the table
    # in its row order were paired by position: patient b trained on (bili 0.3, target 1),
    # (1.5, 0), the reverse of its rows.
    from sklearn_rnn import RNNStepClassifier

    visits = pd.DataFrame({"patient": ["b", "a", "b", "a", "a"], "day": [30, 10, 0, 0, 20],
                           "bili": [1.5, 0.7, 0.3, 0.5, 0.9]})
    visits["high"] = (visits["bili"] > 0.8).astype(int)
    table = visits.set_index(["patient", "day"])
    panel = table[["bili"]]
    y = [group["high"] for _, group in table.groupby(level=0, sort=False)]
    model = RNNStepClassifier(hidden_size=3, max_iter=2, random_state=0)
    with pytest.raises(ValueError, match=r"y\[0\] is indexed by its instance's times \(30, 0, \.\.\.\) in another order.*sort_index\(level=-1\)"):
        model.fit(panel, y)
    in_order = [target.sort_index() for target in y]
    model.fit(panel, in_order)
    for method in (model.score, model.nll_per_step):
        with pytest.raises(ValueError, match="another order"):
            method(panel, y)
    by_times = [pd.Series(target.to_numpy(), index=target.index.get_level_values(1)) for target in y]
    with pytest.raises(ValueError, match="another order"):  # indexed by the times alone
        model.fit(panel, by_times)
    model.fit(panel, [target.to_numpy() for target in in_order])  # arrays: by position
    # Targets indexed by row labels (a table sorted by id and day, then grouped) are in
    # the steps' order already: accepted, and paired by position.
    rows = visits.sort_values(["patient", "day"])
    by_rows = [group["high"] for _, group in rows.groupby("patient", sort=False)]
    assert [list(target.index) for target in by_rows] == [[3, 1, 4], [2, 0]]
    reordered = pd.concat({p: g.set_index("day")[["bili"]] for p, g in rows.groupby("patient", sort=False)},
                          names=["patient", "day"])
    model.fit(reordered, by_rows)
    with pytest.raises(ValueError, match=r"y is a scalar"):  # was a bare TypeError with a panel
        model.fit(panel, 5)


def test_a_panel_column_as_a_series_is_told_to_become_a_frame():
    # It was told to reshape itself into one univariate sequence, which joins every
    # instance into one (a single prediction for all patients).
    index = pd.MultiIndex.from_tuples([("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)], names=["pid", "day"])
    panel = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 5.0]}, index=index)
    with pytest.raises(ValueError, match=r"one column of a panel.*Pass X.to_frame\(\)") as error:
        check_sequences(panel["x"])
    assert "np.reshape" not in str(error.value)
    assert [len(x) for x in check_sequences(panel["x"].to_frame())] == [2, 3]
    with pytest.raises(ValueError, match="one-dimensional"):  # a plain Series keeps its message
        check_sequences(pd.Series([1.0, 2.0]))


def test_pandas_missing_values_in_arrays_and_tables_are_missing_values():
    # frame.to_numpy() of a nullable column holds pd.NA in an object array: a list of
    # such arrays, or a table with pd.NA in an object column, was refused as text ("Encode
    # categorical or text values as numbers first"), and check_sequences refused an Int64
    # table that fit takes. None was already NaN.
    frame = pd.DataFrame({"n": pd.array([1, None, 3], dtype="Int64"), "b": pd.array([True, None, False], dtype="boolean")})
    np.testing.assert_array_equal(check_sequences([frame.to_numpy()])[0], [[1, 1], [np.nan, np.nan], [3, 0]])
    table = pd.DataFrame({"s0": np.array([1.0, pd.NA, 2.0, 0.5], dtype=object), "s1": [1.0, 2.0, 3.0, 4.0]})
    read = check_sequences(table)
    np.testing.assert_array_equal(read[0].ravel(), [1.0, 1.0])
    np.testing.assert_array_equal(read[1].ravel(), [np.nan, 2.0])
    nullable = table.astype({"s0": "Float64"})
    assert len(check_sequences(nullable)) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model().fit(table, [0, 1, 0, 1])
        for rows in (table.to_numpy(), table.to_numpy().tolist()):  # the table as an object array, as rows
            assert model().fit(rows, [0, 1, 0, 1]).predict(rows).shape == (4,)
    with pytest.raises(TypeError, match=r"could not convert string to float: 'x'.*Encode categorical"):
        check_sequences([np.array([[1.0], ["x"], [pd.NA]], dtype=object)])


def test_a_panel_s_date_level_named_as_time_feature_gets_a_hint_that_works():
    # The hint added the dates as a column, which the panel reader then refused
    # ("columns that are not real numbers: {'time': 'datetime64'}").
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    rows = [dict(id=p, time=pd.Timestamp("2020-01-01") + pd.Timedelta(days=7 * t), a=rng.normal())
            for p in ["p3", "p1", "p2", "p0"] for t in range(4)]
    panel = pd.DataFrame(rows).set_index(["id", "time"])
    with pytest.raises(ValueError, match=r"for dates, days since the first: t = \(t - t.min\(\)\) / pd.Timedelta"):
        RNNClassifier(time_feature="time", max_iter=1).fit(panel, [0, 1, 0, 1])
    t = panel.index.get_level_values(-1)
    t = (t - t.min()) / pd.Timedelta(days=1)  # the hint, followed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert RNNClassifier(time_feature="time", max_iter=1).fit(panel.assign(time=t), [0, 1, 0, 1]).n_features_in_ == 2


def melted(n_cases=4, n_readings=5, n_dims=3, seed=0):
    """sktime's 'pd-long' by hand: case_id, reading_id, dim_id (text), value; one row per
    case, reading and channel. Returns the table and the (n_cases, n_readings, n_dims)
    array it holds."""
    values = np.random.default_rng(seed).normal(size=(n_cases, n_readings, n_dims))
    rows = [{"case_id": case, "reading_id": reading, "dim_id": f"dim_{dim}", "value": values[case, reading, dim]}
            for case in range(n_cases) for dim in range(n_dims) for reading in range(n_readings)]
    return pd.DataFrame(rows), values


def test_a_panel_that_repeats_instance_time_pairs_is_refused_with_the_pivot():
    # sktime's pd-long indexed by (case_id, reading_id), its text dim_id dropped as the
    # message said, was read as sequences of 15 steps of one feature: the channels one
    # after another. Repeated pairs are refused, as from_long_format refuses them.
    table, values = melted()
    panel = table.set_index(["case_id", "reading_id"])
    with pytest.raises(ValueError, match=r"the panel repeats \(instance, time\) pairs: 40 row\(s\) repeat "
                                         r"an earlier row's pair, e\.g\. \(0, 0\)") as error:
        check_sequences(panel)  # its text column is not the first thing to fix
    pivot = ("X.pivot_table(index=['case_id', 'reading_id'], columns='dim_id', values='value', "
             "sort=False).sort_index(axis=1)")
    assert pivot in str(error.value)
    with pytest.raises(ValueError, match=r"columns=<the column naming the variable>, values='value'"):
        RNNClassifier(max_iter=1).fit(panel.drop(columns="dim_id"), [0, 1, 0, 1])
    # The pivot, as the message writes it, gives the channels as features.
    shuffled = table.sample(frac=1.0, random_state=0).set_index(["case_id", "reading_id"])
    pivoted = shuffled.pivot_table(index=["case_id", "reading_id"], columns="dim_id", values="value",
                                   sort=False).sort_index(axis=1)
    order = shuffled.index.unique(level=0)
    np.testing.assert_allclose(np.stack(check_sequences(pivoted)), values[order])
    # Repeated measurements: merged, the instances keep their order of appearance.
    index = pd.MultiIndex.from_tuples([("b", 0), ("b", 0), ("a", 0), ("b", 1)], names=["id", "day"])
    repeated = pd.DataFrame({"hr": [60.0, 64.0, 70.0, 80.0]}, index=index)
    with pytest.raises(ValueError, match=r"1 row\(s\).*e\.g\. \('b', 0\).*X.groupby\(level=\[0, 1\], sort=False\).mean\(\)"):
        check_sequences(repeated)
    merged = repeated.groupby(level=[0, 1], sort=False).mean()
    assert [x.ravel().tolist() for x in check_sequences(merged)] == [[62.0, 80.0], [70.0]]
    unnamed = repeated.rename_axis([None, None])
    with pytest.raises(ValueError, match=r"X.rename_axis\(\['instance', 'time'\]\).pivot_table\(index=\['instance', "
                                         r"'time'\], columns=<the column naming the variable>, values='hr'"):
        check_sequences(unnamed)


def test_a_melted_long_table_is_told_to_pivot():
    # Its message named from_long_format and set_index, both of which read the channels
    # one after another as steps.
    table, values = melted()
    with pytest.raises(ValueError, match="column 'case_id' repeats ids") as error:
        RNNClassifier(max_iter=1).fit(table, np.arange(len(table)) % 2)
    message = str(error.value)
    assert ("X.pivot_table(index=['case_id', 'reading_id'], columns='dim_id', values='value', "
            "sort=False).sort_index(axis=1)" in message), message
    assert "from_long_format" not in message
    pivoted = table.pivot_table(index=["case_id", "reading_id"], columns="dim_id", values="value",
                                sort=False).sort_index(axis=1)
    np.testing.assert_allclose(np.stack(check_sequences(pivoted)), values)
    # A long table with one text feature, one row per (id, time), keeps the routes that fit it.
    visits = table[table["dim_id"] == "dim_0"].rename(columns={"dim_id": "ward"})
    with pytest.raises(ValueError, match=r"from_long_format\(X, id_column=\.\.\., time_column=\.\.\.\)") as error:
        check_sequences(visits)
    assert "pivot" not in str(error.value)


def test_sktime_s_wide_table_of_several_channels_is_refused_with_the_reshape():
    # Columns dim_0__0 ... dim_2__3 were read as one univariate series of 12 steps per
    # row, the channels laid end to end.
    values = np.random.default_rng(0).normal(size=(6, 3, 4))  # (n, channels, T), as sktime's numpy3D
    wide = pd.DataFrame(values.reshape(6, -1), columns=[f"dim_{c}__{t}" for c in range(3) for t in range(4)])
    reshape = "X.to_numpy().reshape(len(X), 3, -1).transpose(0, 2, 1)"
    with pytest.raises(ValueError, match=r"3 channels \('dim_0', 'dim_1', 'dim_2'\) of 4 time points") as error:
        RNNClassifier(max_iter=1).fit(wide, [0, 1] * 3)
    assert reshape in str(error.value) and "'pd-multiindex'" in str(error.value)
    X = wide.to_numpy().reshape(len(wide), 3, -1).transpose(0, 2, 1)  # the reshape, followed
    np.testing.assert_array_equal(np.stack(check_sequences(X)), values.transpose(0, 2, 1))
    # Columns not channel by channel in time order: no reshape is offered.
    with pytest.raises(ValueError, match="but not channel by channel") as error:
        check_sequences(wide[sorted(wide.columns, key=lambda name: name[::-1])])
    assert ".reshape(" not in str(error.value)
    # One channel is a table of univariate sequences, as before.
    univariate = wide[[f"dim_0__{t}" for t in range(4)]]
    assert [x.shape for x in check_sequences(univariate)] == [(4, 1)] * 6


def test_a_sequence_column_of_a_panel_checks_the_targets_it_will_be_paired_with():
    # The column drops the instance labels, and samplers pair by position: targets
    # sorted by instance went on to another patient's sequence without a word.
    from sklearn_rnn.sequences import sequence_column

    table, death = visits()
    panel = table.set_index(["patient", "day"])
    instances = panel.index.unique(level=0)
    sorted_targets = pd.Series(death).sort_index()
    with pytest.raises(ValueError, match=r"y is indexed by the panel's instances, but in "
                                         r"another order .*y.loc\[X.index.unique\(level=0\)\]"):
        sequence_column(panel, sorted_targets)
    column = sequence_column(panel, sorted_targets.loc[instances])
    assert len(column) == len(instances)
    for row, instance in enumerate(instances):
        np.testing.assert_array_equal(column[row, 0].to_numpy(), panel.loc[instance].sort_index().to_numpy())
    sequence_column(panel, sorted_targets.to_numpy())  # positions, unchecked, as fit


def test_a_panel_whose_time_level_is_boolean_is_told_it_holds_booleans():
    # It was told to convert text dates with pandas.to_datetime or numbers with to_numeric.
    table = pd.DataFrame({"patient": ["a", "a", "b"], "late": [False, True, False], "bili": [1.0, 2.0, 3.0]})
    with pytest.raises(TypeError, match=r"time level \('late'\) must be numeric, .*got dtype bool\. It holds "
                                        r"booleans \(True/False\), which do not say when") as error:
        check_sequences(table.set_index(["patient", "late"]))
    assert "text dates" not in str(error.value) and "to_numeric" not in str(error.value)


def test_a_panel_that_keeps_its_id_as_a_column_is_refused():
    # set_index([...], drop=False) kept patient_id among the features: the network trained
    # on raw ids, which a list of frames is refused for.
    visits = pd.DataFrame({"patient_id": [7, 7, 9, 9, 11], "day": [0.0, 30, 0, 10, 0],
                           "bili": [1.2, 1.5, 0.7, 0.9, 2.0]})
    panel = visits.set_index(["patient_id", "day"], drop=False)
    with pytest.raises(ValueError, match=r"X's columns include 'patient_id', named like an id and holding one "
                       r"value per instance.*X = X\.drop\(columns=\['patient_id'\]\)"):
        model().fit(panel, [0, 1, 0])
    assert model().fit(panel.drop(columns=["patient_id"]), [0, 1, 0]).feature_names_in_.tolist() == ["day", "bili"]


def test_a_groupby_or_its_pairs_are_refused_with_the_frames_to_take():
    from sklearn_rnn.sequences import check_sequences

    table = pd.DataFrame({"pid": [1, 1, 2, 2, 3], "day": [0.0, 1, 0, 1, 0], "x": [1.0, 2, 3, 4, 5]})
    for X, got in ((table.groupby("pid"), "a pandas DataFrameGroupBy"),
                   (list(table.groupby("pid")), r"a list of \(key, frame\) pairs"),
                   (table.groupby("pid")["x"], "a pandas SeriesGroupBy")):
        with pytest.raises(TypeError, match=rf"expected X to hold sequences; got {got}.*frame\.drop\(columns="):
            check_sequences(X)


def test_a_nested_tensor_is_laid_out_as_sequences():
    # input_layout said 'padded', although a nested tensor is read as its list of tensors.
    import torch

    from sklearn_rnn.sequences import input_layout

    nested = torch.nested.nested_tensor([torch.ones(3, 2), torch.zeros(1, 2)], layout=torch.jagged)
    assert input_layout(nested) == "sequences"


def test_the_scaler_keeps_a_panel_s_trailing_all_missing_rows_in_a_pipeline():
    # The user guide's panel (patient a's last visit has no value): the bare model and the
    # scaler's fit took it, its transform (so the recommended pipeline) refused it.
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import SequenceStandardScaler

    visits = pd.DataFrame({"patient": ["b", "a", "b", "a", "a"], "day": [30, 10, 0, 0, 20],
                           "bili": [1.5, 0.7, 1.2, 0.5, float("nan")]})
    panel = visits.set_index(["patient", "day"])
    scaled = SequenceStandardScaler().fit(panel).transform(panel)
    assert scaled.index.equals(panel.index) and np.isnan(scaled.loc[("a", 20), "bili"])
    np.testing.assert_allclose(scaled["bili"].dropna(), (panel["bili"].dropna() - 0.975) / panel["bili"].std(ddof=0))
    make_pipeline(SequenceStandardScaler(), model()).fit(panel, [0, 1]).predict(panel)


def test_repeated_column_names_empty_sequences_and_an_unnamed_time_level_are_named():
    # scikit-learn's bare DuplicateError; "[]" told to reshape as univariate; "time level (None)".
    from sklearn_rnn.sequences import check_sequences

    frame = pd.DataFrame([[0.0, 1.0], [1.0, 2.0]], columns=["day", "day"])
    with pytest.raises(ValueError, match=r"^sequence 0 of X has repeated column names \['day'\].*duplicated"):
        model().fit([frame, frame], [0, 1])
    panel = pd.DataFrame([[0.0, 1.0], [1.0, 2.0], [0.0, 3.0]], columns=["x", "x"],
                         index=pd.MultiIndex.from_tuples([("a", 0), ("a", 1), ("b", 0)]))
    with pytest.raises(ValueError, match=r"^X has repeated column names \['x'\]"):
        model().fit(panel, [0, 1])
    with pytest.raises(ValueError, match=r"^sequence 1 of X has no step \(shape \(0,\)\).*Drop empty sequences"):
        check_sequences([[[1, 2], [3, 4]], []])
    texts = pd.DataFrame({"x": [1.0, 2.0, 3.0]}, index=pd.MultiIndex.from_tuples([("a", "p"), ("a", "q"), ("b", "r")]))
    with pytest.raises(TypeError, match=r"the panel's time level \(unnamed, level 1\) must be numeric"):
        model().fit(texts, [0, 1])


def test_the_pair_from_long_format_returns_is_refused_as_x_with_the_unpacking():
    # "steps of different widths ... mark a feature missing with NaN", or numpy's raw error.
    from sklearn_rnn.sequences import from_long_format

    visits = pd.DataFrame({"pid": [1, 1, 2, 2, 2, 3, 4, 4], "day": [0, 30, 0, 10, 20, 0, 0, 5],
                           "bili": [1.5, 1.7, 0.7, 0.9, 1.1, 2.0, 0.4, 0.5]})
    for as_frame in (False, True):
        pair = from_long_format(visits, id_column="pid", time_column="day", as_frame=as_frame)
        with pytest.raises(TypeError, match=r"got the \(sequences, ids\) pair that from_long_format returns\. "
                                            r"Unpack it: X, ids = from_long_format"):
            model().fit(pair, [0, 1, 0, 1])


def test_a_series_of_sequences_labelled_by_id_refuses_targets_in_another_order():
    # panel44: X = df.groupby(id)[cols].apply(...) (a Series indexed by id) and y indexed
    # by the same ids in table order were paired by position without a word.
    from sklearn_rnn.sequences import sequence_column

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"pid": np.repeat([1, 3, 5, 9], 3), "x": rng.normal(size=12), "z": rng.normal(size=12)})
    X = df.groupby("pid")[["x", "z"]].apply(lambda g: g.to_numpy())
    y = pd.Series([1, 0, 1, 0], index=pd.Index([5, 3, 9, 1], name="pid"))
    message = r"y is indexed by X's (Series|DataFrame) index, but in another order .* Put y in X's order: y\.loc\[X\.index\]"
    for given in (X, X.to_frame("seq")):
        with pytest.raises(ValueError, match=message):
            RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(given, y)
    with pytest.raises(ValueError, match=r"sample_weight is indexed by X's Series index, but in another order"):
        RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, y.loc[X.index].to_numpy(),
                                                                     sample_weight=y + 1.0)
    with pytest.raises(ValueError, match=message):
        sequence_column(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, y.loc[X.index])  # in X's order
        RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X.reset_index(drop=True), y)  # positions


def test_long_tables_and_panels_refuse_what_would_read_them_wrong():
    # panel44: a set of feature columns came out in hash order (another in each process);
    # ids 1.0 and '1' were two patients and the message quoted a wrong pair; a panel's
    # 1 and '1' were two instances; a subclass of DataFrame was read as a table; frames of
    # a list still indexed (instance, time) were read in row order; date objects and
    # periods were told to be one-hot encoded.
    table = pd.DataFrame({"id": [1, 1, 2], "day": [0, 1, 0], "hr": [60.0, 61, 62], "bp": [120.0, 121, 122]})
    with pytest.raises(TypeError, match=r"feature_columns is a set, which has no order"):
        from_long_format(table, id_column="id", time_column="day", feature_columns={"hr", "bp"})
    mixed = pd.DataFrame({"pid": pd.Series([1, "1", 2, "2"], dtype=object), "day": [0, 1, 0, 1], "x": [1.0, 2, 3, 4]})
    with pytest.raises(ValueError, match=r"id column 'pid' holds 1 and '1', one id as values of different types"):
        from_long_format(mixed, id_column="pid", time_column="day")
    with pytest.raises(ValueError, match=r"id column 'pid' holds 1.0 and '1'"):
        from_long_format(mixed.assign(pid=pd.Series([1.0, "1", 2.0, "2"], dtype=object)), id_column="pid",
                         time_column="day")
    with pytest.raises(ValueError, match=r"the panel's instance level \('pid'\) holds 1 and '1'.*"
                                         r"X\.rename\(index=int, level=0\)"):
        check_sequences(mixed.set_index(["pid", "day"]))

    class Visits(pd.DataFrame):
        @property
        def _constructor(self):
            return Visits

    visits = pd.DataFrame({"pid": [9, 9, 7], "day": [1, 0, 0], "bili": [1.0, 2, 5], "hr": [60.0, 61, 62]})
    panel = visits.set_index(["pid", "day"])
    as_subclass = check_sequences(Visits(panel))
    assert [s.tolist() for s in as_subclass] == [s.tolist() for s in check_sequences(panel)]
    with pytest.raises(ValueError, match=r"X looks like a long table"):
        check_sequences(Visits(visits))
    frames = [frame for _, frame in panel.groupby(level=0, sort=False)]
    with pytest.raises(ValueError, match=r"sequence 0 of X is a frame indexed by \(instance, time\) whose time level "
                                         r"is out of order .* frame\.droplevel\(0\)\.sort_index\(\)"):
        check_sequences(frames)
    assert [s.tolist() for s in check_sequences([f.droplevel(0).sort_index() for f in frames])] == \
        [s.tolist() for s in check_sequences(panel)]
    dates = pd.to_datetime(["2024-01-01", "2024-02-01", "2024-01-05"])
    for column in (dates.date, dates.to_period("M")):
        with pytest.raises(TypeError, match=r"Dates and durations \(diagnosed\) become numbers of days.*"
                                            r"date objects and periods become dates first"):
            from_long_format(table.assign(diagnosed=column), id_column="id", time_column="day")


def test_a_panel_of_one_step_instances_gets_no_channels_first_warning_and_swapped_levels_are_named():
    # panel44: a panel of one visit per patient was warned to be channels first and told to
    # X.transpose(0, 2, 1); a panel indexed (time, instance) met a bare count mismatch.
    rng = np.random.default_rng(0)
    once = pd.DataFrame({"pid": np.arange(8), "day": 0, "x": rng.normal(size=8), "z": rng.normal(size=8)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(once.set_index(["pid", "day"]), [0, 1] * 4)
    visits = pd.DataFrame({"patient_id": np.repeat(np.arange(8), 3), "day": np.tile([0, 30, 60], 8),
                           "x": rng.normal(size=24)})
    with pytest.raises(ValueError, match=r"y has 8 entries, but X has 3 sequences.* X's index may be \(time, "
                                         r"instance\) rather than \(instance, time\).* X\.swaplevel\(\)\.sort_index\(\)"):
        RNNClassifier(hidden_size=4, max_iter=1).fit(visits.set_index(["day", "patient_id"]), [0, 1] * 4)


def test_a_panels_value_errors_name_the_instance_and_time():
    # panel44: "sequence 1 ... step 0" counted positions a panel's user could not find.
    panel = pd.DataFrame({"pid": ["p9", "p9", "p7", "p3"], "day": [0, 1, 0, 0],
                          "bili": [1.0, 2, np.nan, 3]}).set_index(["pid", "day"])
    with pytest.raises(ValueError, match=r"sequence 1 of X has no valid step .* \(Sequence 1 is the panel's "
                                         r"instance 'p7'\.\)"):
        check_sequences(panel)
    with pytest.raises(ValueError, match=r"holds an infinite value at step 0, feature 0.* \(Sequence 1 is the "
                                         r"panel's instance 'p7' at time 0\.\)"):
        check_sequences(panel.assign(bili=panel.bili.fillna(np.inf)))


def test_checks_added_today_leave_valid_data_alone():
    # diff44: frames indexed (day, hour) were refused as out of time order; ids 1.0 and
    # '1.0' were no longer caught; a time column named 'index' (reset_index() of frames
    # indexed by unix seconds) was refused as row numbers; two 'index' columns crashed; a
    # y short of some patients in a balanced panel was told to swap the index levels.
    from sklearn_rnn import RNNRegressor
    from sklearn_rnn.sequences import from_long_format

    rng = np.random.default_rng(0)

    def by_day_and_hour(days):
        index = pd.MultiIndex.from_product([range(days), range(3)], names=["day", "hour"])
        return pd.DataFrame({"x": rng.normal(size=3 * days)}, index=index)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNRegressor(max_iter=1, hidden_size=3).fit([by_day_and_hour(d) for d in (2, 3, 2, 4)], np.arange(4.0))
        stamped = [pd.DataFrame({"x": rng.normal(size=5)}, index=1_700_000_000 + 60 * np.arange(5) + 10_000 * i)
                   .reset_index() for i in range(4)]
        RNNRegressor(max_iter=1, hidden_size=3, time_feature="index").fit(stamped, np.arange(4.0))
        counted = [pd.DataFrame({"index": np.arange(5), "x": rng.normal(size=5)}) for _ in range(4)]
        RNNRegressor(max_iter=1, hidden_size=3, time_feature="index").fit(counted, np.arange(4.0))
        RNNRegressor(max_iter=1, hidden_size=3, time_feature=np.int64(0)).fit(counted, np.arange(4.0))
    with pytest.raises(ValueError, match=r"X's sequences have a column 'index' of integers counting up by one"):
        RNNRegressor(max_iter=1).fit(counted, np.arange(4.0))  # the per-file row numbers of read_csv
    with pytest.raises(ValueError, match=r"repeated column names \['index'\]"):
        RNNRegressor(max_iter=1).fit([pd.DataFrame(np.ones((3, 2)), columns=["index", "index"])] * 2, [0.0, 1.0])
    table = pd.DataFrame({"id": pd.Series([1.0, 1.0, "1.0", 2.0], dtype=object), "time": [0, 1, 2, 0],
                          "x": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match=r"id column 'id' holds 1.0 and '1.0'"):
        from_long_format(table, id_column="id", time_column="time")
    balanced = pd.DataFrame({"x": rng.normal(size=120)},
                            index=pd.MultiIndex.from_product([range(12), range(10)], names=["patient", "day"]))
    with pytest.raises(ValueError, match=r"y has 10 entries, but X has 12 sequences") as error:
        RNNRegressor(max_iter=1).fit(balanced, rng.normal(size=10))
    assert "swaplevel" not in str(error.value)


def test_a_model_fitted_on_a_table_with_a_time_column_before_this_was_refused_still_loads(tmp_path, monkeypatch):
    # diff44: the refusal of an int time_feature for a 2D table ran at load too, so files
    # and pickles of such models stopped loading ("contradict its fitted state").
    import pickle

    from sklearn_rnn import RNNRegressor

    X = np.cumsum(np.random.default_rng(0).random(size=(20, 6)), axis=1)
    with monkeypatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        patch.setattr(RNNRegressor, "_time_column", lambda self, n, fitting=False: 0)  # as fit read it before
        model = RNNRegressor(max_iter=1, hidden_size=3, time_feature=0, random_state=0).fit(X, X[:, -1])
    expected = model.predict(X[:2])
    model.save(tmp_path / "table.rnn")
    for again in (RNNRegressor.load(tmp_path / "table.rnn"), pickle.loads(pickle.dumps(model))):
        np.testing.assert_array_equal(again.predict(X[:2]), expected)


def test_targets_cut_apart_from_their_sequences_by_a_split_are_refused_in_every_fold():
    # sklearn45 1: fit refused a y Series indexed by X's ids in another order only when y
    # held exactly X's ids; a cross-validation fold cuts both by position, so each fold's
    # y held other ids and trained mis-paired (6 of 10 labels wrong), silently.
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import cross_val_score

    from sklearn_rnn import RNNClassifier, RNNGridSearchCV
    from sklearn_rnn.sequences import sequence_column

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 2)) for n in rng.integers(2, 6, 20)]
    ids = [f"p{i:02d}" for i in range(20)]
    visits = pd.DataFrame({"visits": sequence_column(X)[:, 0]}, index=ids)
    outcome = pd.Series(np.arange(20) % 2, index=ids).sort_values(kind="stable")
    small = dict(hidden_size=2, max_iter=2, random_state=0)
    fold = np.arange(5, 15)
    with pytest.raises(ValueError, match=r"y is indexed by labels such as X's DataFrame index, but other ones"):
        RNNClassifier(**small).fit(visits.iloc[fold], outcome.iloc[fold])
    with pytest.raises(ValueError, match="in another order"):  # before any network trains
        RNNGridSearchCV(RNNClassifier(**small), {"hidden_size": [2]}, cv=2, refit=False).fit(visits, outcome)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        aligned = outcome.loc[visits.index]
        assert len(cross_val_score(RNNClassifier(**small), visits, aligned, cv=2)) == 2  # the fix works
        renumbered = pd.Series(np.arange(20) % 2)  # positions: paired by position, unchecked
        RNNClassifier(**small).fit(visits.iloc[fold], renumbered.iloc[fold].reset_index(drop=True))
