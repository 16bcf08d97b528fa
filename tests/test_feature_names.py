"""Sequences held in DataFrames name their step features: the names are kept and checked.

Before, a model fitted on a list of frames (or a panel) with the columns a, b, c
predicted on frames with the columns c, b, a without a word, and its probabilities
moved by up to 0.47: the network read each feature where another had been.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, RNNStepClassifier, SequenceStandardScaler
from sklearn_rnn.clinical import VisitFeatures
from sklearn_rnn.sequences import sequence_column
from sklearn_rnn.sequences._validation import step_feature_names


pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NAMES = ["hr", "bp", "temp"]


def data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(3, 9)), 3)) for _ in range(n)]
    y = np.array([int(x[0, 0] > 0) for x in X])
    return X, y


def frames(X, columns=NAMES):
    """Each sequence as a frame; ``columns`` may reorder or rename."""
    named = [pd.DataFrame(x, columns=NAMES) for x in X]
    if columns == NAMES:
        return named
    if sorted(columns) == sorted(NAMES):
        return [frame[columns] for frame in named]
    return [frame.set_axis(columns, axis=1) for frame in named]


def panel(sequences):
    return pd.concat({f"s{i:03d}": frame for i, frame in enumerate(sequences)}, names=["instance", "time"])


def model():
    return RNNClassifier(hidden_size=6, max_iter=3, random_state=0)


@pytest.mark.parametrize("container", ["list", "panel", "column"])
def test_names_are_recorded_and_other_names_or_order_refused(container):
    X, y = data()
    wrap = {"list": lambda s: s, "panel": panel, "column": lambda s: pd.Series(s, dtype=object)}[container]
    clf = model().fit(wrap(frames(X)), y)
    assert clf.feature_names_in_.tolist() == NAMES
    assert clf.n_features_in_ == 3
    same = clf.predict_proba(wrap(frames(X)))
    # The same features in the same order predict as the plain arrays do (with
    # scikit-learn's warning that the arrays carry no names).
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_array_equal(same, clf.predict_proba(X))
    with pytest.raises(ValueError, match="must be in the same order as they were in fit"):
        clf.predict(wrap(frames(X, ["temp", "bp", "hr"])))
    with pytest.raises(ValueError, match="Feature names unseen at fit time"):
        clf.predict(wrap(frames(X, ["hr", "bp", "pulse"])))


def test_reordered_columns_would_have_changed_the_predictions():
    """What the check prevents is real: the same values in another column order."""
    X, y = data()
    clf = model().fit(X, y)  # fitted on arrays, so nothing is checked by name
    swapped = [x[:, ::-1] for x in X]
    assert np.abs(clf.predict_proba(X) - clf.predict_proba(swapped)).max() > 0.01


def test_sequences_that_disagree_with_each_other_are_refused_in_fit():
    X, y = data()
    mixed_order = frames(X)
    mixed_order[5] = mixed_order[5][["bp", "hr", "temp"]]
    with pytest.raises(ValueError, match=r"sequence 5 of X has the columns \['bp', 'hr', 'temp'\], "
                                         r"but sequence 0 has \['hr', 'bp', 'temp'\]"):
        model().fit(mixed_order, y)
    half_named = frames(X)[:20] + X[20:]
    with pytest.raises(ValueError, match="sequence 20 of X has no column names, but sequence 0"):
        model().fit(half_named, y)
    assert step_feature_names(X) is None
    # Frames without string names (a RangeIndex) name nothing, as in scikit-learn.
    assert step_feature_names([pd.DataFrame(x) for x in X]) is None


def test_names_on_one_side_only_warn_as_scikit_learn_does():
    X, y = data()
    clf = model().fit(X, y)
    assert not hasattr(clf, "feature_names_in_")
    with pytest.warns(UserWarning, match="X has feature names, but RNNClassifier was fitted without"):
        clf.predict(frames(X))
    # Refitting on arrays after frames forgets the names.
    clf.fit(frames(X), y)
    assert hasattr(clf, "feature_names_in_")
    clf.fit(X, y)
    assert not hasattr(clf, "feature_names_in_")


def test_continued_training_checks_the_names():
    X, y = data()
    clf = RNNClassifier(hidden_size=6, max_iter=2, warm_start=True, random_state=0).fit(frames(X), y)
    with pytest.raises(ValueError, match="same order"):
        clf.fit(frames(X, ["bp", "hr", "temp"]), y)
    with pytest.raises(ValueError, match="same order"):
        clf.partial_fit(frames(X, ["bp", "hr", "temp"]), y)


def test_the_scaler_keeps_and_checks_the_names_and_a_pipeline_refuses_reordering():
    X, y = data()
    scaler = SequenceStandardScaler().fit(frames(X))
    assert scaler.feature_names_in_.tolist() == NAMES
    with pytest.raises(ValueError, match="same order"):
        scaler.transform(frames(X, ["temp", "bp", "hr"]))
    scaled = scaler.transform(frames(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inverse_transform reads the unnamed output silently
        back = scaler.inverse_transform(scaled)
    np.testing.assert_allclose(back[0], X[0])
    pipe = make_pipeline(SequenceStandardScaler(), model()).fit(frames(X), y)
    with pytest.raises(ValueError, match="same order"):
        pipe.predict(frames(X, ["temp", "bp", "hr"]))
    # A table's columns are its features in scikit-learn's sense, for the scaler as for
    # the estimators: kept, and another width or other names refused.
    table = pd.DataFrame(np.ones((4, 5)), columns=list("abcde"))
    on_table = SequenceStandardScaler().fit(table)
    assert on_table.feature_names_in_.tolist() == list("abcde") and on_table.n_features_in_ == 5
    with pytest.raises(ValueError, match="Feature names unseen at fit time"):
        on_table.transform(table.set_axis(list("vwxyz"), axis=1))


def test_the_step_classifier_checks_the_names():
    X, _ = data()
    Y = [(x[:, :1] > 0).astype(int) for x in X]
    clf = RNNStepClassifier(hidden_size=6, max_iter=2, random_state=0).fit(frames(X), Y)
    assert clf.feature_names_in_.tolist() == NAMES
    with pytest.raises(ValueError, match="same order"):
        clf.predict_proba(frames(X, ["bp", "hr", "temp"]))


def test_saved_models_keep_the_names(tmp_path):
    X, y = data()
    clf = model().fit(frames(X), y)
    clf.save(tmp_path / "named.safetensors")
    loaded = RNNClassifier.load(tmp_path / "named.safetensors")
    assert loaded.feature_names_in_.tolist() == NAMES
    np.testing.assert_array_equal(loaded.predict_proba(frames(X)), clf.predict_proba(frames(X)))
    with pytest.raises(ValueError, match="same order"):
        loaded.predict(frames(X, ["bp", "hr", "temp"]))


def test_a_sequence_column_of_frames_keeps_the_names():
    # imbalanced-learn's samplers need the column; its cells stay frames with the
    # names, so resampling keeps the check.
    from imblearn.over_sampling import RandomOverSampler

    X, y = data()
    column = sequence_column(frames(X))
    assert column.shape == (40, 1) and column[0, 0].columns.tolist() == NAMES
    clf = model().fit(frames(X), y)
    np.testing.assert_array_equal(clf.predict_proba(column), clf.predict_proba(frames(X)))
    resampled, y_resampled = RandomOverSampler(random_state=0).fit_resample(column, y)
    on_column = model().fit(resampled, y_resampled)
    assert on_column.feature_names_in_.tolist() == NAMES
    with pytest.raises(ValueError, match="same order"):
        on_column.predict(sequence_column(frames(X, ["bp", "hr", "temp"])))
    assert isinstance(sequence_column(X)[0, 0], np.ndarray)  # arrays stay arrays


def test_a_model_file_whose_names_do_not_match_its_width_is_refused(tmp_path):
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    from sklearn_rnn._persistence import _digest

    X, y = data()
    model().fit(frames(X), y).save(tmp_path / "named.safetensors")
    with safe_open(str(tmp_path / "named.safetensors"), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    names = header["state"]["feature_names_in_"]
    header["state"]["feature_names_in_"] = {**names, "shape": [2], "items": names["items"][:2]}
    header["sha256"] = _digest(header, tensors)  # a forger's edit, signed again
    save_file(tensors, str(tmp_path / "forged.safetensors"),
              metadata={"sklearn_rnn": json.dumps(header)})
    with pytest.raises(ValueError, match=r"names 2 features \(feature_names_in_\) for a model of "
                                         r"n_features_in_ = 3"):
        RNNClassifier.load(tmp_path / "forged.safetensors")


def test_inspection_hands_named_sequences_back_by_name():
    # The importances score changed copies of X, and integrated gradients reads one
    # sequence: as frames where X held frames, so a named model neither warns that the
    # names are missing nor reads a reordered frame without a check.
    from sklearn_rnn.inspection import integrated_gradients, sequence_permutation_importance

    X, y = data()
    named = frames(X)
    for estimator in (model(), make_pipeline(SequenceStandardScaler(), model())):
        estimator.fit(named, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            by_name = sequence_permutation_importance(estimator, named, y, n_repeats=2, random_state=0)
            attributions = integrated_gradients(estimator, named[0]).attributions
        on_arrays = clone(estimator).fit(X, y)  # the same model, fitted on plain arrays
        plain = sequence_permutation_importance(on_arrays, X, y, n_repeats=2, random_state=0)
        np.testing.assert_allclose(by_name.importances, plain.importances)
        assert by_name.feature_names.tolist() == NAMES and plain.feature_names is None
        np.testing.assert_allclose(attributions, integrated_gradients(on_arrays, X[0]).attributions)
        with pytest.raises(ValueError, match="same order"):
            integrated_gradients(estimator, named[0][["bp", "hr", "temp"]])


# ------------------------------------------------------------ the time column by name
def timed(n=50, seed=0):
    """Visit-like sequences: column 'day' holds increasing times, the label sits in 'a'."""
    rng = np.random.default_rng(seed)
    X = [np.c_[np.cumsum(rng.exponential(30.0, m)), rng.normal(size=(m, 2))] for m in rng.integers(2, 9, n)]
    y = np.array([int(x[0, 1] > 0) for x in X])
    return X, [pd.DataFrame(x, columns=["day", "a", "b"]) for x in X], y


def test_time_feature_names_a_column_of_the_frames():
    X, named, y = timed()
    params = dict(hidden_size=6, max_iter=3, random_state=0)
    by_name = RNNClassifier(time_feature="day", **params).fit(named, y)
    by_index = RNNClassifier(time_feature=0, **params).fit(X, y)
    assert by_name._encoder.time_feature == 0 and by_name.time_feature == "day"
    np.testing.assert_array_equal(by_name.predict_proba(named), by_index.predict_proba(X))
    moved = [frame[["a", "day", "b"]] for frame in named]  # the time now in column 1
    on_moved = RNNClassifier(time_feature="day", **params).fit(moved, y)
    assert on_moved._encoder.time_feature == 1
    np.testing.assert_array_equal(on_moved.predict_proba(moved), by_index.predict_proba(X))
    # Continued training and a clone keep reading it by name.
    by_name.set_params(warm_start=True).fit(named, y)
    assert clone(by_name).get_params()["time_feature"] == "day"


def test_time_feature_by_name_refuses_unnamed_input_and_unknown_names():
    X, named, y = timed()
    with pytest.raises(ValueError, match=r"time_feature='day' names a column, but X came without column names"):
        RNNClassifier(time_feature="day", max_iter=1).fit(X, y)
    with pytest.raises(ValueError, match=r"'days' is not a column of X: expected one of \['day', 'a', 'b'\]"):
        RNNClassifier(time_feature="days", max_iter=1).fit(named, y)
    # A table's columns are steps, not step features: no name of them is a time column.
    table = pd.DataFrame(np.ones((4, 3)), columns=["day", "a", "b"])
    with pytest.raises(ValueError, match="X is a 2D table, read as one univariate sequence per row: its columns "
                                         "are steps"):
        RNNClassifier(time_feature="day", max_iter=1).fit(table, [0, 1, 0, 1])


def test_a_pipeline_reads_the_time_column_by_name_through_the_scaler(tmp_path):
    X, named, y = timed()
    params = dict(hidden_size=6, max_iter=3, random_state=0)
    pipe = make_pipeline(SequenceStandardScaler(), RNNClassifier(time_feature="day", **params)).fit(named, y)
    ref = make_pipeline(SequenceStandardScaler(), RNNClassifier(time_feature=0, **params)).fit(X, y)
    assert pipe[-1].feature_names_in_.tolist() == ["day", "a", "b"]
    np.testing.assert_allclose(pipe.predict_proba(named), ref.predict_proba(X), atol=1e-12)
    rnn = pipe[-1]
    rnn.save(tmp_path / "timed.safetensors")
    loaded = RNNClassifier.load(tmp_path / "timed.safetensors")
    assert loaded.time_feature == "day"
    scaled = pipe[0].transform(named)
    np.testing.assert_array_equal(loaded.predict_proba(scaled), rnn.predict_proba(scaled))


def test_the_scaler_inverse_refuses_frames_in_another_order_as_transform_does():
    frames = [pd.DataFrame({"a": [0.0, 10.0], "b": [1000.0, 3000.0]})]
    scaler = SequenceStandardScaler().fit(frames)
    scaled = scaler.transform(frames)
    # Unscaled in fit's order, the reordered frame came back mislabelled (b held a's values).
    with pytest.raises(ValueError, match="same order as they were in fit"):
        scaler.inverse_transform([scaled[0][["b", "a"]]])
    pd.testing.assert_frame_equal(scaler.inverse_transform(scaled)[0], frames[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # arrays (say, a network's output) without a warning
        np.testing.assert_allclose(scaler.inverse_transform([scaled[0].to_numpy()])[0], frames[0])


def test_the_scaler_returns_frames_for_frames_and_keeps_every_container():
    X, named, _ = timed(6)
    indexed = [frame.set_axis(pd.RangeIndex(len(frame)) + 100 * i) for i, frame in enumerate(named)]
    scaler = SequenceStandardScaler().fit(indexed)
    out = scaler.transform(indexed)
    assert isinstance(out, list) and all(isinstance(frame, pd.DataFrame) for frame in out)
    assert out[3].columns.tolist() == ["day", "a", "b"] and out[3].index.equals(indexed[3].index)
    np.testing.assert_allclose(out[3].to_numpy(), (X[3] - scaler.mean_) / scaler.scale_)
    assert isinstance(scaler.transform(tuple(indexed)), tuple)
    column = scaler.transform(sequence_column(indexed))
    assert column.shape == (6, 1) and column[2, 0].index.equals(indexed[2].index)
    # A Series (or a one-column frame) of arrays keeps its index; its cells stay arrays.
    series = pd.Series(X, index=list("uvwxyz"))
    on_series = SequenceStandardScaler().fit(series).transform(series)
    assert isinstance(on_series, pd.Series) and on_series.index.tolist() == list("uvwxyz")
    assert isinstance(on_series["w"], np.ndarray)
    one_column = SequenceStandardScaler().fit(series.to_frame("visits")).transform(series.to_frame("visits"))
    assert one_column.columns.tolist() == ["visits"] and one_column.index.tolist() == list("uvwxyz")
    # Trailing all-NaN steps are padding: dropped, and the frame's index cut with them.
    padded = pd.concat([named[0], pd.DataFrame(np.nan, index=[50], columns=["day", "a", "b"])])
    assert scaler.transform([padded])[0].index.tolist() == named[0].index.tolist()


def test_the_scaler_on_a_sequence_column_names_that_column_for_column_transformer():
    # On a ColumnTransformer's column of sequences, get_feature_names_out gave the
    # features of a step (x0, x1, x2, or the cells' names) and refused the column's
    # name, so ColumnTransformer.get_feature_names_out and set_output("pandas") failed.
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import StandardScaler

    X, y = data(n=30)
    age = np.linspace(40.0, 80.0, 30)
    table = pd.DataFrame({"visits": sequence_column(X)[:, 0], "age": age})
    scaler = SequenceStandardScaler().fit(table[["visits"]])
    assert scaler.n_features_in_ == 3  # the features of a step, which transform checks
    assert scaler.get_feature_names_out().tolist() == ["visits"]
    assert scaler.get_feature_names_out(["visits"]).tolist() == ["visits"]
    with pytest.raises(ValueError, match=r"one sequence column .*its name 'visits'.*got \['age'\]"):
        scaler.get_feature_names_out(["age"])
    with pytest.raises(ValueError, match="one sequence column"):
        scaler.get_feature_names_out(["x0", "x1", "x2"])
    # Cells that name their features keep them as feature_names_in_; the output is the column.
    named = pd.DataFrame({"visits": sequence_column(frames(X))[:, 0]})
    on_named = SequenceStandardScaler().fit(named)
    assert on_named.feature_names_in_.tolist() == NAMES
    assert on_named.get_feature_names_out().tolist() == ["visits"]
    # An unnamed column takes the name a composite gives it, and by default names the
    # features of a step, which a next step such as VisitFeatures reads; sequences in
    # a list keep one name per feature.
    on_array = SequenceStandardScaler().fit(sequence_column(X))
    assert on_array.get_feature_names_out().tolist() == ["x0", "x1", "x2"]
    assert on_array.get_feature_names_out(["x4"]).tolist() == ["x4"]
    visits = make_pipeline(SequenceStandardScaler(), VisitFeatures()).fit(sequence_column(X))
    assert visits.get_feature_names_out()[:3].tolist() == ["last_x0", "last_x1", "last_x2"]
    assert SequenceStandardScaler().fit(frames(X)).get_feature_names_out().tolist() == NAMES
    assert SequenceStandardScaler().fit(X).get_feature_names_out().tolist() == ["x0", "x1", "x2"]

    def columns():
        return ColumnTransformer([("seq", SequenceStandardScaler(), ["visits"]), ("num", StandardScaler(), ["age"])])

    assert columns().fit(table).get_feature_names_out().tolist() == ["seq__visits", "num__age"]
    out = columns().set_output(transform="pandas").fit_transform(table)
    assert out.columns.tolist() == ["seq__visits", "num__age"] and out.index.equals(table.index)
    np.testing.assert_allclose(out["seq__visits"][4], (X[4] - scaler.mean_) / scaler.scale_)
    np.testing.assert_allclose(out["num__age"], (age - age.mean()) / age.std())
    # ... and a classifier reads the column of scaled sequences after it.
    for output in ("default", "pandas"):
        pipe = make_pipeline(ColumnTransformer([("seq", SequenceStandardScaler(), ["visits"])]), model())
        pipe.set_output(transform=output).fit(table, y)
        direct = make_pipeline(SequenceStandardScaler(), model()).fit(X, y)
        np.testing.assert_allclose(pipe.predict_proba(table), direct.predict_proba(X))
        assert pipe.predict(table).shape == (30,)


def test_visit_features_on_a_series_or_an_array_column_take_the_name_a_composite_passes():
    # A ColumnTransformer with the column spec "visits" hands VisitFeatures a Series, and
    # one over sequence_column(X) names its column x0: get_feature_names_out refused that
    # one name (advising to "name fit's input (3 names)" though it was one column), so
    # ColumnTransformer.get_feature_names_out and set_output("pandas") failed.
    from sklearn.compose import ColumnTransformer

    X = [np.c_[np.arange(len(x), dtype=float), x[:, 1:]] for x in data(n=12)[0]]  # time first
    age = np.linspace(40.0, 80.0, 12)
    table = pd.DataFrame({"visits": sequence_column(X)[:, 0], "age": age})
    expected = VisitFeatures(time_feature=0).fit(X).get_feature_names_out().tolist()
    assert expected[:2] == ["last_x1", "last_x2"] and expected[-2:] == ["n_visits", "span"]
    columns = ColumnTransformer([("v", VisitFeatures(time_feature=0), "visits")], remainder="passthrough")
    assert columns.fit(table).get_feature_names_out().tolist() == [f"v__{n}" for n in expected] + ["remainder__age"]
    out = columns.set_output(transform="pandas").fit_transform(table)
    assert out.columns.tolist() == [f"v__{n}" for n in expected] + ["remainder__age"]
    np.testing.assert_array_equal(out.iloc[:, :-1].to_numpy(), VisitFeatures(time_feature=0).fit_transform(X))
    on_array = ColumnTransformer([("v", VisitFeatures(time_feature=0), [0])]).fit(sequence_column(X))
    assert on_array.get_feature_names_out().tolist() == [f"v__{n}" for n in expected]
    # A named column takes its name only; an unnamed one any one name. Other names are
    # refused with what fit was given: one sequence column, not a visit's 3 columns.
    on_series = VisitFeatures(time_feature=0).fit(table["visits"])
    assert on_series.get_feature_names_out().tolist() == expected
    assert on_series.get_feature_names_out(["visits"]).tolist() == expected
    with pytest.raises(ValueError, match=r"or name the one sequence column fit was given \(its name 'visits'\); got \['age'\]"):
        on_series.get_feature_names_out(["age"])
    unnamed = VisitFeatures(time_feature=0).fit(sequence_column(X))
    assert unnamed.get_feature_names_out(["x0"]).tolist() == expected
    with pytest.raises(ValueError, match=r"the one sequence column fit was given \(one name\); got \['a', 'b'\]"):
        unnamed.get_feature_names_out(["a", "b"])
    with pytest.raises(ValueError, match=r"as seen in fit \(3 names\); got \['a', 'b'\]\. Leave"):
        VisitFeatures(time_feature=0).fit(X).get_feature_names_out(["a", "b"])


def test_a_non_numeric_column_of_an_integer_named_frame_is_refused_by_name():
    # pandas' default names are ints; the check looked the columns up by their text
    # (frame["1"]), a bare KeyError for text, category and date columns alike.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(10)]
    model = RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, [0, 1] * 5)
    frame = pd.DataFrame({0: rng.normal(size=5), 1: ["a", "b", "a", "b", "a"]})
    panel = pd.DataFrame({0: rng.normal(size=6), 1: list("abcabc")},
                         index=pd.MultiIndex.from_product([["p", "q"], [0, 1, 2]]))
    for given in ([frame], [frame.astype({1: "category"})], panel):
        with pytest.raises(TypeError, match=r"columns that are not real numbers: \{'1': "):
            model.predict(given)
