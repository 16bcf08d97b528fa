"""Every wrong input is a ValueError or TypeError (NotFittedError before fit) whose message
says what was expected, what came, and the fix; never an error from deep inside.

Complements the bad-input cases of ``test_estimators.py`` (empty X, a zero-length
sequence, differing feature counts, inf, non-numeric values, > 3 dimensions, NaN in a
regressor's y, y of the wrong length, a single class, an unknown cell, a negative
spectral radius, another feature count at prediction, 'cuda' without a GPU), which are
not repeated here.
"""

import copy
import inspect
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_rnn import SequenceStandardScaler, RNNClassifier, RNNRegressor

TINY = dict(hidden_size=3, max_iter=2, random_state=0)


def ragged(n=12, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(rng.integers(2, 6), d)) for _ in range(n)]


X_OK = ragged()
Y_CLASS = np.arange(len(X_OK)) % 2
Y_REAL = np.linspace(-1.0, 1.0, len(X_OK))


@pytest.fixture(scope="module")
def fitted_classifier():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RNNClassifier(**TINY).fit(X_OK, Y_CLASS)


@pytest.fixture(scope="module")
def table_regressor():
    table = pd.DataFrame(np.random.default_rng(1).normal(size=(12, 6)), columns=list("abcdef"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RNNRegressor(**TINY).fit(table, Y_REAL)


def fit_classifier(X, y=Y_CLASS, **params):
    return lambda: RNNClassifier(**{**TINY, **params}).fit(X, y)


def fit_regressor(X, y=Y_REAL, **params):
    return lambda: RNNRegressor(**{**TINY, **params}).fit(X, y)


def generator_of_sequences():
    return (x for x in X_OK)


# (id, call, error type, fragments that must all appear in the message: what was
#  expected, what came, the fix)
FIT_CASES = [
    # --- X: not a container of sequences
    ("X None", fit_classifier(None), TypeError,
     ["expected X to hold sequences", "got NoneType None", "Pass the sequences"]),
    ("X string", fit_classifier("abc"), TypeError, ["expected X to hold sequences", "got str 'abc'"]),
    ("X dict", fit_classifier({"a": X_OK[0]}), TypeError, ["got dict", "list(X.values())"]),
    ("X generator", lambda: RNNClassifier(**TINY).fit(generator_of_sequences(), Y_CLASS), TypeError,
     ["got generator", "e.g. list(X)"]),
    # A dict's view (d.values()) was let through as a table, and told to encode text as numbers.
    ("X dict values", fit_classifier(dict(enumerate(X_OK)).values()), TypeError,
     ["expected X to hold sequences", "got dict_values", "e.g. list(X)"]),
    ("X number", fit_classifier(3.0), TypeError, ["expected X to hold sequences", "got float 3.0"]),
    # --- X: shapes
    ("series as (channels, timepoints), aeon's layout",
     fit_classifier([np.zeros((2, n)) for n in (5, 7, 6, 9)] * 3), ValueError,
     ["sequence 1 of X has 7 features per step, but sequence 0 has 5",
      "(channels, timepoints) as aeon and sktime keep series", "[np.asarray(x).T for x in X]"]),
    ("zero features, ragged", fit_classifier([np.zeros((3, 0))] * 12), ValueError,
     ["sequence 0 of X has 0 features per step", "(3, 0)", "expected at least one feature"]),
    ("zero features, padded", fit_classifier(np.zeros((12, 3, 0))), ValueError,
     ["has 0 features per step", "expected at least one feature"]),
    ("steps of different widths", fit_classifier([X_OK[0], [[1.0, 2.0], [3.0]]] + X_OK[2:]), ValueError,
     ["sequence 1 of X has steps of different widths [1, 2]", "same number of features", "NaN"]),
    ("1D sequence", fit_classifier([X_OK[0], np.zeros(3)] + X_OK[2:]), ValueError,
     ["sequence 1 of X has shape (3,)", "expected a 2D array", "np.reshape(x, (-1, 1))"]),
    ("5 dimensions", fit_classifier(np.zeros((12, 2, 2, 2, 2))), ValueError,
     ["X has 5 dimensions", "expected a list of (T_i, d) arrays"]),
    # --- X: values
    ("text in a table", fit_classifier(np.array([["1.0", "x"]] * 12)), TypeError,
     ["X could not be read as numbers", "expected a numeric array", "Encode categorical"]),
    ("text in a DataFrame", fit_classifier(pd.DataFrame({"a": ["x"] * 12, "b": [1.0] * 12})), TypeError,
     ["X could not be read as numbers", "Encode categorical"]),
    ("object dict cell", fit_classifier([np.array([[{"a": 1}, 1.0]], dtype=object)] * 12), TypeError,
     ["sequence 0 of X could not be read as numbers"]),
    ("complex values", fit_classifier([np.zeros((2, 1), dtype=complex)] * 12), ValueError,
     ["sequence 0 of X holds complex numbers", "expected real numbers"]),
    ("inf in padded array", fit_classifier(np.concatenate([np.zeros((11, 3, 1)), np.full((1, 3, 1), -np.inf)])),
     ValueError, ["sequence 11 of X holds an infinite value at step 0, feature 0", "Replace or clip"]),
    # instance_norm=False: 'auto' would read this channel per sequence (one sequence a
    # 1e39 times the others leaves the rest nearly flat), and the network never sees 1e39.
    ("beyond float32", fit_classifier([X_OK[0], X_OK[1] * 1e39] + X_OK[2:], instance_norm=False), ValueError,
     ["sequence 1 of X, step 0, holds a value beyond float32's range", "Scale the inputs"]),
    # frame=3 reads steps 0-2 as one: the raw step is named, not the frame (it said step 50).
    ("beyond float32 in a frame", fit_classifier([np.zeros((300, 1))] * 2 + [np.r_[np.zeros((151, 1)), [[1e39]]]]
                                                 + [np.zeros((300, 1))] * 9, instance_norm=False, frame=3),
     ValueError, ["sequence 2 of X, step 151, holds a value beyond float32's range"]),
    # A Python int past float64's range gave a bare OverflowError.
    ("int beyond float64", fit_classifier([X_OK[0], np.array([[10**400, 1.0]], dtype=object)] + X_OK[2:]),
     ValueError, ["sequence 1 of X holds an integer too large for a float", "Scale it first"]),
    ("int beyond float64 in a frame",
     fit_classifier([pd.DataFrame({"a": np.array([1, 10**400], dtype=object), "b": [0.0, 1.0]})] * 12),
     ValueError, ["column 'a' holds an integer too large for a float", "Scale the column first"]),
    ("int beyond float64 in a table",
     fit_classifier(pd.DataFrame({"a": [1.0] * 12, "b": np.array([10**400] * 12, dtype=object)})),
     ValueError, ["X holds an integer too large for a float", "Scale it first"]),
    ("sparse sequence", lambda: RNNClassifier(**TINY).fit([_sparse()] * 12, Y_CLASS), TypeError,
     ["sequence 0 of X is a sparse matrix", ".toarray()"]),
    # --- y
    ("NaN in classifier y", fit_classifier(X_OK, np.where(Y_CLASS == 0, np.nan, 1.0)), ValueError,
     ["y holds a missing label (nan) for 6 of 12 sequences (first: sequence 0)",
      "every sequence needs a class label", "Drop those sequences from X and y together"]),
    ("None in classifier y", fit_classifier(X_OK, np.array([None] + ["a", "b"] * 5 + ["a"], dtype=object)),
     ValueError, ["y holds a missing label (None) for 1 of 12 sequences (first: sequence 0)"]),
    ("inf in regressor y", fit_regressor(X_OK, np.full(12, np.inf)), ValueError,
     ["y holds an infinite value: the targets of 12 of 12 sequences are not finite",
      "(first: sequence 0)", "fill in their targets"]),
    ("int beyond float64 in regressor y", fit_regressor(X_OK, np.array([*Y_REAL[:11], 10**400], dtype=object)), ValueError,
     ["y holds an integer too large for a float", "Scale y first"]),
    ("NaN in regressor y", fit_regressor(X_OK, np.r_[Y_REAL[:3], np.nan, Y_REAL[4:]]), ValueError,
     ["y holds NaN: the targets of 1 of 12 sequences are not finite (first: sequence 3)"]),
    ("scalar y", fit_classifier(X_OK, 1), ValueError,
     ["y is a scalar", "expected one target per sequence", "12 entries"]),
    ("regressor y of the wrong length", fit_regressor(X_OK, Y_REAL[:3]), ValueError,
     ["y has 3 entries, but X has 12 sequences", "one target per sequence"]),
    ("2D classifier y", fit_classifier(X_OK, np.c_[Y_CLASS, Y_CLASS]), ValueError,
     ["y has 2 columns (shape (12, 2))", "MultiOutputClassifier(RNNClassifier(...))"]),
    ("3D regressor y", fit_regressor(X_OK, np.zeros((12, 2, 2))), ValueError,
     ["y has shape (12, 2, 2)", "expected (n_samples,) or (n_samples, n_outputs)"]),
    ("continuous classifier y", fit_classifier(X_OK, Y_REAL + 0.5), ValueError, ["Unknown label type"]),
    ("text regressor y", fit_regressor(X_OK, np.array(["a", "b"] * 6)), ValueError,
     ["RNNRegressor needs numeric targets", "text such as 'a'", "use RNNClassifier"]),
    ("a word among numeric strings", fit_regressor(X_OK, ["1.5", "x"] + ["2"] * 10), ValueError,
     ["text such as 'x'", "convert y to numbers"]),
    ("partial_fit with one label in classes",
     lambda: RNNClassifier(**TINY).partial_fit(X_OK, Y_CLASS, classes=[0]), ValueError,
     ["classes=[0] names 1 label", "needs at least 2", "every label that y may hold"]),
    # classes gets y's checks: a missing label became a class no sequence could train,
    # which still took a share of predict_proba; 'a' and 1 became the strings 'a', '1'.
    ("partial_fit with NaN in classes",
     lambda: RNNClassifier(**TINY).partial_fit(X_OK, Y_CLASS, classes=[0, 1, np.nan]), ValueError,
     ["classes=[0.0, 1.0, nan] holds a missing label (nan)", "share of predict_proba"]),
    ("partial_fit with None in classes",
     lambda: RNNClassifier(**TINY).partial_fit(X_OK, Y_CLASS, classes=[0, 1, None]), ValueError,
     ["classes=[0, 1, None] holds a missing label (None)"]),
    ("partial_fit with mixed classes",
     lambda: RNNClassifier(**TINY).partial_fit(X_OK, np.where(Y_CLASS == 1, "1", "a"), classes=["a", 1]),
     ValueError, ["classes=['a', 1] mixes strings and numbers", "1 and '1' are different labels"]),
    ("partial_fit with a string as classes",
     lambda: RNNClassifier(**TINY).partial_fit(X_OK, np.where(Y_CLASS == 1, "b", "a"), classes="ab"),
     ValueError, ["classes='ab' is a str", "expected an array-like of the labels"]),
    ("partial_fit with 2-D classes",
     lambda: RNNClassifier(**TINY).partial_fit(X_OK, Y_CLASS, classes=[[0, 1]]), ValueError,
     ["classes has shape (1, 2)", "expected a 1-D array-like"]),
    # --- sample_weight
    ("NaN sample_weight", lambda: RNNClassifier(**TINY).fit(X_OK, Y_CLASS, sample_weight=np.full(12, np.nan)),
     ValueError, ["sample_weight holds a missing weight (NaN, or a masked entry) for 12 of 12 sequences",
                  "Drop those sequences"]),
    ("negative sample_weight", lambda: RNNClassifier(**TINY).fit(X_OK, Y_CLASS, sample_weight=-np.ones(12)),
     ValueError, ["sample_weight holds negative values (min -1)", "expected non-negative weights"]),
    ("sample_weight of the wrong length", lambda: RNNClassifier(**TINY).fit(X_OK, Y_CLASS, sample_weight=np.ones(3)),
     ValueError, ["sample_weight has shape (3,): expected (12,)", "one weight per sequence"]),
    ("all-zero sample_weight", lambda: RNNClassifier(**TINY).fit(X_OK, Y_CLASS, sample_weight=np.zeros(12)),
     ValueError, ["at least one non-zero", "no sequence counts"]),
    # --- parameters
    ("unknown optimizer", fit_classifier(X_OK, optimizer="rmsprop"), InvalidParameterError,
     ["The 'optimizer' parameter of RNNClassifier must be a str among", "Got 'rmsprop' instead"]),
    ("zero spectral radius", fit_classifier(X_OK, spectral_radius=0.0), InvalidParameterError,
     ["'spectral_radius' parameter", "range (0.0, inf), None or a str among {'auto'}", "Got 0.0 instead"]),
    ("zero batch size", fit_classifier(X_OK, batch_size=0), InvalidParameterError,
     ["'batch_size' parameter", "range [1, inf)", "Got 0 instead"]),
    ("negative batch size", fit_regressor(X_OK, batch_size=-4), InvalidParameterError,
     ["'batch_size' parameter of RNNRegressor", "Got -4 instead"]),
    ("zero learning rate", fit_classifier(X_OK, learning_rate=0.0), InvalidParameterError,
     ["'learning_rate' parameter", "range (0.0, inf)", "Got 0.0 instead"]),
    ("negative learning rate", fit_regressor(X_OK, learning_rate=-0.1), InvalidParameterError,
     ["'learning_rate' parameter", "Got -0.1 instead"]),
    ("zero clip threshold", fit_classifier(X_OK, clip_threshold=0.0), InvalidParameterError,
     ["'clip_threshold' parameter", "(0.0, inf) or None", "Got 0.0 instead"]),
    ("negative clip threshold", fit_regressor(X_OK, clip_threshold=-1.0), InvalidParameterError,
     ["'clip_threshold' parameter", "Got -1.0 instead"]),
    ("unknown device", fit_classifier(X_OK, device="gpu"), InvalidParameterError,
     ["'device' parameter", "Got 'gpu' instead"]),
    # --- early stopping with too little data
    ("early stopping, too few sequences", fit_classifier(X_OK[:5], Y_CLASS[:5], early_stopping=True), ValueError,
     ["early_stopping holds out validation_fraction=0.1 of 5 sequences", "at least 2 (one per class)",
      "got class counts {0: 3, 1: 2}", "set early_stopping=False"]),
    ("early stopping, a class seen once", fit_classifier(X_OK, np.r_[np.zeros(11), 1], early_stopping=True),
     ValueError, ["at least 2 sequences of each class", "{0: 11, 1: 1}", "Pass more sequences"]),
    ("early stopping, one sequence", fit_regressor(X_OK[:1], Y_REAL[:1], early_stopping=True), ValueError,
     ["of 1 sequence (1 for validation, 0 for training)", "at least 1 left for training"]),
    ("sktime's multivariate pd-wide table",
     fit_classifier(pd.DataFrame(np.zeros((12, 10)), columns=[f"dim_{c}__{t}" for c in range(2) for t in range(5)])),
     ValueError, ["wide table of a multivariate panel ('pd-wide')", "2 channels ('dim_0', 'dim_1') of 5 time points",
                  "X.to_numpy().reshape(len(X), 2, -1).transpose(0, 2, 1)", "return_type='pd-multiindex'"]),
    # A ragged list in a dict was made an array to count its dimensions: numpy's
    # "inhomogeneous shape" ValueError instead of this message.
    ("X dict of a ragged list", fit_classifier({"x": [np.zeros((2, 1)), np.zeros((3, 1))]}), TypeError,
     ["expected X to hold sequences", "got dict", "list(X.values())"]),
]


def _sparse():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    return scipy_sparse.csr_matrix(np.ones((3, 2)))


def check_message(error_info, fragments):
    message = str(error_info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize(
    "call, error, fragments", [case[1:] for case in FIT_CASES], ids=[case[0] for case in FIT_CASES]
)
def test_fit_rejects_bad_input_with_a_message(call, error, fragments):
    with pytest.raises(error) as error_info:
        call()
    assert type(error_info.value) is not IndexError
    check_message(error_info, fragments)


def test_prediction_with_another_feature_count(fitted_classifier):
    with pytest.raises(ValueError) as padded:
        fitted_classifier.predict_proba(np.zeros((2, 4, 3)))
    check_message(padded, ["X has 3 features per step", "expecting 2", "features used in fit"])
    with pytest.raises(ValueError) as other:
        fitted_classifier.partial_fit([np.zeros((2, 5))], [0])
    check_message(other, ["X has 5 features per step", "expecting 2"])
    # One sequence passed without its list reads as a table of univariate sequences.
    with pytest.raises(ValueError) as one:
        fitted_classifier.predict(np.zeros((7, 2)))
    check_message(one, ["X has 1 features per step", "X has shape (7, 2): for one sequence of 7 steps, pass [X]."])


def test_table_fitted_model_checks_columns(table_regressor):
    with pytest.raises(ValueError, match="X has 5 features, but RNNRegressor is expecting 6"):
        table_regressor.predict(np.zeros((3, 5)))
    # scikit-learn's message alone gave no way to series of another length.
    rows = np.random.default_rng(0).normal(size=(3, 8))
    with pytest.raises(ValueError, match=r"expecting 6 features as input\. A table's columns are the steps.*"
                                         r"\[np\.reshape\(row, \(-1, 1\)\) for row in np\.asarray\(X\)\]\.") as longer:
        table_regressor.predict(rows)
    assert "pad" not in str(longer.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fitted with names, given none
        assert table_regressor.predict([np.reshape(row, (-1, 1)) for row in np.asarray(rows)]).shape == (3,)
        with pytest.raises(ValueError, match=r"or pad shorter rows with NaN to 6 columns"):
            table_regressor.predict(rows[:, :4])
        padded = np.c_[rows[:, :4], np.full((3, 2), np.nan)]
        np.testing.assert_array_equal(table_regressor.predict(padded),
                                      table_regressor.predict([row[:4, None] for row in rows]))
    renamed = pd.DataFrame(np.zeros((3, 6)), columns=list("uvwxyz"))
    with pytest.raises(ValueError, match="feature names"):
        table_regressor.predict(renamed)


def test_prediction_input_is_validated_like_fit_input(fitted_classifier):
    with pytest.raises(TypeError, match="expected X to hold sequences"):
        fitted_classifier.predict(None)
    with pytest.raises(TypeError, match=r"got dict_values .*e\.g\. list\(X\)"):
        fitted_classifier.predict({"p1": X_OK[0], "p2": X_OK[1]}.values())
    with pytest.raises(ValueError, match="sequence 1 of X has no valid step"):
        fitted_classifier.predict([np.zeros((2, 2)), np.full((2, 2), np.nan)])
    with pytest.raises(ValueError, match="sequence 0 of X holds an infinite value"):
        fitted_classifier.predict_log_proba([np.array([[np.inf, 0.0]])])



@pytest.mark.parametrize("batch_size", ["auto", None, float("inf"), 0, 2.5])
def test_a_batch_size_set_after_fit_is_checked_by_prediction_as_fit_checks_it(fitted_classifier, batch_size):
    """Prediction reads batch_size: a value fit would refuse gets fit's error there, not
    int()'s ValueError, TypeError or OverflowError (and 0 no longer passes)."""
    model = clone(fitted_classifier).set_params(batch_size=batch_size)
    with pytest.raises(InvalidParameterError) as fit_error:
        model.fit(X_OK, Y_CLASS)
    model = copy.deepcopy(fitted_classifier).set_params(batch_size=batch_size)
    for method in (model.predict, model.predict_proba):
        with pytest.raises(InvalidParameterError) as error_info:
            method(X_OK)
        assert str(error_info.value) == str(fit_error.value)

def test_overflowing_outputs_are_an_error_not_nan():
    # An expanding relu network on huge inputs: the float64 hidden state overflows.
    X = [np.ones((3, 1)), -np.ones((3, 1))] * 6
    params = dict(TINY, cell="relu", hidden_size=8, spectral_radius=3.0, learning_rate=1e-6,
                  conv_kernels=None)  # the raw inputs reach the expanding recurrence
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = RNNRegressor(**params).fit(X, Y_REAL)
    assert np.isfinite(reg.predict(X)).all()
    huge = [np.full((50, 1), 1e300)]
    with pytest.raises(ValueError) as error_info:
        reg.predict(huge)
    check_message(error_info, ["outputs for 1 sequence (first: sequence 0 of X) are not finite", "scale them",
                               "state, which is not bounded, overflowed", "smaller spectral_radius"])


def test_overflowing_outputs_of_a_bounded_cell_blame_the_input_stage_not_the_state():
    """A GRU's state cannot overflow: the values overflowed where the network reads X,
    and neither cell='tanh' nor a smaller spectral_radius ('auto', unused) would help."""
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(length, 2)) for length in range(18, 58)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = RNNRegressor(hidden_size=4, max_iter=1, random_state=0, instance_norm=False,
                           conv_kernels=(9,)).fit(X, rng.normal(size=40))
    assert reg._resolved_cell() == "gru"
    with pytest.raises(ValueError) as error_info:
        reg.predict([np.full((20, 2), 1.7e308)])
    check_message(error_info, ["outputs for 1 sequence (first: sequence 0 of X) are not finite",
                               "overflowed where the network reads them", "scale them"])
    assert "spectral_radius" not in str(error_info.value) and "cell=" not in str(error_info.value)


def test_save_into_a_missing_folder_says_so(tmp_path):
    model = RNNClassifier(**TINY).fit(X_OK, Y_CLASS)
    target = tmp_path / "no" / "such" / "model.safetensors"
    with pytest.raises(FileNotFoundError, match=r"its folder .*such' does not exist.*os.makedirs"):
        model.save(target)
    assert not (tmp_path / "no").exists()  # nothing written on the way


@pytest.mark.parametrize("method", ["predict", "predict_proba", "predict_log_proba", "score", "save"])
def test_not_fitted_error_before_fit(method, tmp_path):
    clf = RNNClassifier()
    args = {"score": (X_OK, Y_CLASS), "save": (tmp_path / "m.safetensors",)}.get(method, (X_OK,))
    with pytest.raises(NotFittedError, match="This RNNClassifier instance is not fitted yet"):
        getattr(clf, method)(*args)
    with pytest.raises(NotFittedError):
        RNNRegressor().predict(X_OK)


HAS_TIME_FEATURE = "time_feature" in inspect.signature(RNNClassifier).parameters
needs_time_feature = pytest.mark.skipif(
    not HAS_TIME_FEATURE, reason="the estimators have no time_feature parameter yet"
)


@needs_time_feature
def test_time_feature_out_of_range():
    with pytest.raises(ValueError) as error_info:
        RNNClassifier(time_feature=5, **TINY).fit(X_OK, Y_CLASS)
    check_message(error_info, ["time_feature=5 is out of range", "X has 2 features per step"])


@needs_time_feature
@pytest.mark.parametrize("flag", [False, True, np.True_])
def test_time_feature_refuses_a_bool(flag):
    # False would read as column 0 (and True as column 1): refused wherever
    # time_feature is a parameter, and by the encoder.
    from sklearn_rnn.clinical import VisitFeatures
    from sklearn_rnn.sequences import InputEncoder, SequenceStandardScaler

    X = [np.c_[np.arange(4.0), np.ones(4)] for _ in range(12)]
    for estimator in (RNNClassifier(time_feature=flag, **TINY), SequenceStandardScaler(time_feature=flag),
                      VisitFeatures(time_feature=flag)):
        with pytest.raises(InvalidParameterError, match=r"must be an int \(a column's index, not a bool\)"):
            estimator.fit(X, Y_CLASS)
    with pytest.raises(TypeError, match="got .*, which would read as column"):
        InputEncoder.fit(X, time_feature=flag)
    # Other int parameters take a bool as scikit-learn's estimators do (max_iter=True is 1).
    assert RNNClassifier(hidden_size=3, max_iter=True, random_state=0).fit(X, Y_CLASS).n_iter_ == 1


@needs_time_feature
def test_decreasing_times():
    X = [np.c_[np.arange(4.0), np.ones(4)] for _ in range(12)]
    X[1] = np.array([[0.0, 1.0], [5.0, 1.0], [3.0, 1.0]])
    with pytest.raises(ValueError) as error_info:
        RNNClassifier(time_feature=0, **TINY).fit(X, Y_CLASS)
    check_message(error_info, ["sequence 1 of X has times that decrease at step 2", "(3 after 5)"])


def test_a_column_of_1d_arrays_is_told_to_reshape_each_and_a_table_has_no_named_time_column():
    from sklearn_rnn.sequences import check_sequences

    ragged_1d = [np.arange(3.0), np.arange(5.0)] * 6
    column = np.empty((12, 1), dtype=object)
    column[:, 0] = ragged_1d
    frame = pd.DataFrame({"s": ragged_1d})
    for X, cells, named in ((pd.Series(ragged_1d), "X", pd.Series(ragged_1d)), (column, "X[:, 0]", column[:, 0]),
                            (frame, "X.iloc[:, 0]", frame.iloc[:, 0])):
        # The fix given named X.itertuples, which a Series or an array does not have.
        for call in (lambda: check_sequences(X), lambda: RNNClassifier(**TINY).fit(X, Y_CLASS)):
            with pytest.raises(TypeError, match=re.escape(f"[np.reshape(x, (-1, 1)) for x in {cells}]")):
                call()
        assert RNNClassifier(**TINY).fit([np.reshape(x, (-1, 1)) for x in named], Y_CLASS).n_features_in_ == 1
    # A DataFrame table has names, but its columns are steps: not "came without names".
    table = pd.DataFrame(np.ones((12, 4)), columns=["t0", "t1", "t2", "t3"])
    with pytest.raises(ValueError, match="X is a 2D table, read as one univariate sequence per row: its columns "
                                         "are steps"):
        RNNRegressor(time_feature="t0", **TINY).fit(table, Y_REAL)


def test_no_error_escapes_as_an_internal_type():
    """A sweep of odd inputs: each either fits or raises ValueError/TypeError."""
    odd = [
        [[[1.0]], [[1.0], [2.0]]] * 6,  # nested lists
        np.array([np.zeros((2, 1)), np.ones((3, 1))] * 6, dtype=object),
        [np.ones((2, 1), dtype=bool)] * 12,
        [np.array([[None, 1.0]], dtype=object)] * 12,  # None is a missing value
        [np.zeros((1, 1))] * 12,
        np.full((12, 4), np.nan),
        [np.zeros((2, 1)), np.zeros((2, 1, 1))] * 6,
        [],
        [[]] * 12,
    ]
    for X in odd:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                RNNClassifier(**TINY).fit(X, Y_CLASS[: len(X)] if len(X) else Y_CLASS[:0])
        except (ValueError, TypeError) as error:
            assert re.search(r"expected|Expected|must|at least|required", str(error)), str(error)


# ----------------------------------------------- found by trying the package from outside
def test_frames_with_a_column_more_than_in_fit_are_refused_by_name():
    # The message counted features and said "a 2D table is read as univariate
    # sequences", which was not what came.
    frames = [pd.DataFrame(x, columns=["hr", "bp"]) for x in X_OK]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(**TINY).fit(frames, Y_CLASS)
    wider = [frame.assign(spo2=1.0) for frame in frames]
    with pytest.raises(ValueError, match=r"(?s)Feature names unseen at fit time:\n- spo2"):
        model.predict(wider)
    with pytest.raises(ValueError) as lists:
        model.predict([np.c_[x, x[:, :1]] for x in X_OK])
    check_message(lists, ["X has 3 features per step", "expecting 2"])
    assert "2D table" not in str(lists.value)


def test_frames_whose_column_names_mix_types_are_refused():
    # The names were dropped silently (scikit-learn refuses such a table).
    frames = [pd.DataFrame(x, columns=["hr", 0]) for x in X_OK]
    with pytest.raises(TypeError, match=r"mix of types \['int', 'str'\].*astype\(str\)"):
        RNNClassifier(**TINY).fit(frames, Y_CLASS)


def test_a_one_dimensional_array_is_refused_with_the_fix(fitted_classifier):
    # fit said how to reshape; a fitted model's predict only counted dimensions.
    univariate = RNNClassifier(**TINY).fit([x[:, :1] for x in X_OK], Y_CLASS)
    for call in (lambda: RNNClassifier(**TINY).fit(np.zeros(12), Y_CLASS),
                 lambda: univariate.predict(np.zeros(12))):
        with pytest.raises(ValueError, match=r"X is one-dimensional \(ndarray of 12 values\).*"
                                             r"pass \[np.reshape\(x, \(-1, 1\)\)\]"):
            call()


def test_a_scalar_sample_weight_weights_every_sequence_alike():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = RNNClassifier(**TINY).fit(X_OK, Y_CLASS, sample_weight=2.0)
        plain = RNNClassifier(**TINY).fit(X_OK, Y_CLASS)
    np.testing.assert_array_equal(weighted.predict_proba(X_OK), plain.predict_proba(X_OK))
    with pytest.raises(ValueError, match="negative"):
        RNNClassifier(**TINY).fit(X_OK, Y_CLASS, sample_weight=-1.0)


def test_a_feature_never_observed_in_fit_is_warned_of():
    X = [np.c_[x[:, :1], np.full(len(x), np.nan)] for x in X_OK]
    frames = [pd.DataFrame(x, columns=["hr", "spo2"]) for x in X]
    from sklearn_rnn import SequenceStandardScaler

    for fit in (lambda: SequenceStandardScaler().fit(X),
                lambda: RNNClassifier(**TINY).fit(frames, Y_CLASS)):
        with pytest.warns(UserWarning, match=r"feature\(s\) \[(1|'spo2')\] of X hold no value"):
            fit()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        SequenceStandardScaler().fit(X_OK)  # every feature observed somewhere: quiet


def test_data_stored_channels_first_is_pointed_to_the_transpose():
    """aeon's and sktime's collections keep series channels first, (n_cases, n_channels,
    n_timepoints). A univariate one, (n, 1, T), was trained as n sequences of one step of
    T features without a word; at predict, a collection of the fitted feature count in
    steps was refused without the way out."""
    import torch

    rng = np.random.default_rng(0)
    stored = rng.normal(size=(12, 1, 24))
    for fit in (lambda: RNNClassifier(**TINY).fit(stored, Y_CLASS),
                lambda: SequenceStandardScaler().fit(list(stored))):
        with pytest.warns(UserWarning, match=r"every sequence .* is one step of 24 features.*X\.transpose\(0, 2, 1\)"):
            fit()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # one-step sequences of one value are as advised
        quiet_classifier = RNNClassifier(**TINY)
        warnings.simplefilter("ignore", ConvergenceWarning)
        quiet_classifier.fit(np.reshape(np.arange(12.0), (-1, 1, 1)), Y_CLASS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(**TINY).fit(rng.normal(size=(12, 30, 3)), Y_CLASS)
    channels_first = rng.normal(size=(12, 3, 30))
    for X in (channels_first, list(channels_first), torch.as_tensor(channels_first)):
        with pytest.raises(ValueError, match=r"Every sequence has 3 steps, as many as the features used in fit.*"
                                             r"X\.transpose\(0, 2, 1\)"):
            model.predict(X)
    with pytest.raises(ValueError, match="features per step") as refused:  # steps that differ: no such hint
        model.predict(rng.normal(size=(12, 4, 30)))
    assert "transpose" not in str(refused.value)


def test_a_dict_of_model_inputs_and_a_time_major_tensor_are_pointed_to_the_sequences():
    import torch

    rng = np.random.default_rng(0)
    lengths = np.array([3, 5] * 6)
    padded = np.zeros((12, 5, 2))
    inputs = {"x": padded, "lengths": lengths}  # what a skorch user's module takes
    with pytest.raises(TypeError, match=r"a model's inputs.*\[x\[:n\] for x, n in zip\(X\['x'\], X\['lengths'\]\)\]"):
        RNNClassifier(**TINY).fit(inputs, Y_CLASS)
    with warnings.catch_warnings():  # the hint works
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert RNNClassifier(**TINY).fit([x[:n] for x, n in zip(inputs["x"], inputs["lengths"])],
                                         Y_CLASS).n_features_in_ == 2
    sequences = [torch.as_tensor(rng.normal(size=(n, 2))) for n in lengths]
    time_major = torch.nn.utils.rnn.pad_sequence(sequences)  # (5, 12, 2), as pad_sequence pads by default
    with pytest.raises(ValueError, match=r"X has 5 sequences.*shape \(5, 12, 2\).*time-major.*X\.transpose\(0, 1\)"):
        RNNClassifier(**TINY).fit(time_major, Y_CLASS)
    with pytest.raises(ValueError, match=r"time-major.*X\.transpose\(1, 0, 2\)"):
        RNNClassifier(**TINY).fit(time_major.numpy(), Y_CLASS)


def test_a_float64_default_dtype_is_refused_with_the_fix():
    # The networks were built in float64 and met float32 inputs: "mat1 and mat2 must
    # have the same dtype", from inside PyTorch.
    import torch

    model = RNNClassifier(**TINY).fit(X_OK, Y_CLASS)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for call in (lambda: RNNClassifier(**TINY).fit(X_OK, Y_CLASS), lambda: model.predict(X_OK)):
            with pytest.raises(RuntimeError, match=r"default dtype is torch.float64.*set_default_dtype\(torch.float32\)"):
                call()
    finally:
        torch.set_default_dtype(before)


def test_torch_tensors_numpy_cannot_read_are_taken_as_their_values():
    # bfloat16 tensors and tensors that need grad were refused as "could not be read
    # as numbers ... Encode categorical or text values as numbers first" (and a
    # regressor's bfloat16 y with torch's bare "Got unsupported ScalarType BFloat16").
    import torch

    rng = np.random.default_rng(0)
    X = [torch.tensor(rng.normal(size=(5, 2)), dtype=torch.bfloat16) for _ in range(20)]
    as_float = [x.float() for x in X]  # every bfloat16 value, exactly
    y = np.array([0, 1] * 10)
    params = dict(hidden_size=4, max_iter=2, random_state=0)
    expected = RNNClassifier(**params).fit(as_float, y).predict_proba(as_float)
    np.testing.assert_array_equal(RNNClassifier(**params).fit(X, y).predict_proba(X), expected)
    padded = torch.stack(as_float).requires_grad_()
    np.testing.assert_array_equal(RNNClassifier(**params).fit(padded, y).predict_proba(padded), expected)
    targets = torch.linspace(-1, 1, 20, dtype=torch.bfloat16)
    expected = RNNRegressor(**params).fit(as_float, targets.float().numpy()).predict(as_float)
    np.testing.assert_array_equal(RNNRegressor(**params).fit(X, targets).predict(X), expected)
    np.testing.assert_array_equal(
        RNNRegressor(**params).fit(X, targets.float().requires_grad_()).predict(X), expected)


def test_torch_tensors_are_read_as_their_values_in_every_input():
    # After the fix above, a 2-D table, the classifier's y, sample_weight, the step
    # classifier's targets and score's y still failed with torch's bare messages.
    import torch

    from sklearn_rnn import RNNStepClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 5, 2)).astype(np.float32)
    labels = (X[:, :, 0].sum(1) > 0).astype(int)
    targets = X[:, :, 0].sum(1)
    params = dict(hidden_size=3, max_iter=1, random_state=0)

    def grad(a):
        return torch.tensor(a, dtype=torch.float32).requires_grad_()

    def bf16(a):
        return torch.tensor(a).to(torch.bfloat16)

    table = X[:, :, 0]
    expected = RNNRegressor(**params).fit(table, targets).predict(table)
    np.testing.assert_array_equal(RNNRegressor(**params).fit(grad(table), targets).predict(table), expected)
    expected = RNNClassifier(**params).fit(X, labels).predict_proba(X)
    np.testing.assert_array_equal(RNNClassifier(**params).fit(X, bf16(labels)).predict_proba(X), expected)
    weighted = RNNRegressor(**params).fit(X, targets, sample_weight=np.ones(20)).predict(X)
    np.testing.assert_array_equal(
        RNNRegressor(**params).fit(X, targets, sample_weight=grad(np.ones(20))).predict(X), weighted)
    model = RNNRegressor(**params).fit(X, targets)
    assert model.score(X, grad(targets)) == model.score(X, targets)
    steps = [(x[:, :1] > 0).astype(np.float32) for x in X]
    expected = RNNStepClassifier(**params).fit(X, steps).predict_proba(X[:2])[0]
    np.testing.assert_array_equal(
        RNNStepClassifier(**params).fit(X, [grad(s) for s in steps]).predict_proba(X[:2])[0], expected)



@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
@pytest.mark.parametrize("layout", ["strided", "jagged"])
def test_a_torch_nested_tensor_is_read_as_the_sequences_it_holds(layout):
    # PyTorch's own ragged batch was refused as "could not be read as numbers (Internal
    # error: NestedTensorImpl doesn't support sizes. Please file an issue.)", with advice
    # about categorical values.
    import torch

    from sklearn_rnn import RNNStepClassifier
    from sklearn_rnn.sequences import check_sequences

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(1, 10)), 2)) for _ in range(20)]
    y = np.arange(20) % 2
    layout = getattr(torch, layout)
    nested = torch.nested.nested_tensor([torch.tensor(x, requires_grad=True) for x in X], layout=layout)
    for got, expected in zip(check_sequences(nested), X, strict=True):
        np.testing.assert_array_equal(got, expected)
    params = dict(hidden_size=4, max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(**params).fit(X, y)
        np.testing.assert_array_equal(RNNClassifier(**params).fit(nested, y).predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(model.predict_proba(nested), model.predict_proba(X))
    steps = [(x[:, :1] > 0).astype(np.float32) for x in X]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        step_model = RNNStepClassifier(**params).fit(X, steps)
        nested_steps = torch.nested.nested_tensor([torch.tensor(s) for s in steps], layout=layout)
        refit = RNNStepClassifier(**params).fit(nested, nested_steps)
    for got, expected in zip(refit.predict_proba(nested), step_model.predict_proba(X), strict=True):
        np.testing.assert_array_equal(got, expected)

def test_a_packed_sequence_an_empty_panel_and_one_column_for_id_and_time_are_refused_as_such():
    # A PackedSequence (a tuple of four tensors) was read as four sequences ("sequence 1 of
    # X has shape (4,)"); an empty panel was "sequence 0 of X has no valid step"; the same
    # column as id and time was read as repeated (id, time) pairs, whose suggested
    # duplicates='keep' gave sequences timed by their id.
    import pandas as pd
    import torch
    from torch.nn.utils.rnn import pack_sequence

    from sklearn_rnn.sequences import check_sequences, from_long_format

    packed = pack_sequence([torch.ones(3, 2), torch.ones(2, 2)])
    with pytest.raises(TypeError, match=r"PackedSequence.*torch.nn.utils.rnn.unpack_sequence\(X\)"):
        RNNClassifier().fit(packed, [0, 1])
    index = pd.MultiIndex.from_tuples([("a", 0), ("a", 1)], names=["pid", "day"])
    panel = pd.DataFrame({"x": [1.0, 2.0]}, index=index)
    with pytest.raises(ValueError, match="X is empty"):
        check_sequences(panel.iloc[:0])
    table = pd.DataFrame({"id": [1, 1, 2], "x": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match=r"id_column and time_column are the same column \('id'\)"):
        from_long_format(table, id_column="id", time_column="id")


def test_messages_for_a_panel_s_per_step_targets_and_its_time_level_point_the_right_way():
    # The step classifier was told to pass "one target per sequence"; naming the panel's
    # time level as time_feature was told to pass "its index", which reads as the level.
    import pandas as pd

    from sklearn_rnn import RNNStepClassifier

    index = pd.MultiIndex.from_product([["a", "b"], [0.0, 1.0, 2.0]], names=["pid", "day"])
    panel = pd.DataFrame({"x": np.arange(6.0), "label": [0, 1, 0, 1, 1, 0]}, index=index)
    with pytest.raises(ValueError, match=r"6 entries, but X has 2 sequences: pass one \(T_i, k\) array of per-step "
                                         r"targets per sequence.*y.xs\(i, level=0\)"):
        RNNStepClassifier(max_iter=1).fit(panel[["x"]], panel["label"])
    with pytest.raises(ValueError, match=r"'day' is not a column.*X.assign\(day=t\) with t = X.index.get_level_values\(-1\)"):
        RNNClassifier(time_feature="day", max_iter=1).fit(panel[["x"]], [0, 1])
    with pytest.raises(ValueError, match="pass one target per sequence, in the order of X"):
        RNNClassifier(max_iter=1).fit(panel[["x"]], [0, 1, 0])


def test_a_classifier_given_several_labels_per_sequence_is_pointed_to_multioutput():
    # It gave scikit-learn's bare "y should be a 1d array, got an array of shape (20, 2)".
    X = [np.ones((3, 2)) * i for i in range(6)]
    y = np.arange(6) % 2
    with pytest.raises(ValueError, match=r"y has 2 columns \(shape \(6, 2\)\).*MultiOutputClassifier\(RNNClassifier"):
        RNNClassifier(max_iter=1).fit(X, np.c_[y, 1 - y])


@pytest.mark.parametrize("estimator", [RNNClassifier, RNNRegressor])
def test_per_step_targets_of_different_lengths_are_refused_as_such(estimator):
    # One (T_i,) array of targets per sequence, in a list, tuple, object array or Series,
    # failed with numpy's "inhomogeneous shape" (or scikit-learn's "Unknown label type").
    import pandas as pd

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in (3, 7, 5, 4, 6, 2)]
    targets = [(x[:, 0] > 0).astype(int) for x in X]
    column = np.empty(6, dtype=object)
    column[:] = targets
    for y in (targets, tuple(targets), [t.tolist() for t in targets], column, pd.Series(targets)):
        with pytest.raises(ValueError, match=r"y holds one array per sequence \(lengths 3, 7, 5, 4, 6, 2\): "
                                             f"{estimator.__name__} takes one target per sequence.*RNNStepClassifier"):
            estimator(max_iter=1).fit(X, y)
    with pytest.raises(ValueError, match=r"lengths 1, 1, 5, 1, 1, 1\)"):  # one array among labels
        estimator(max_iter=1).fit(X, [1, 0, targets[2], 1, 0, 1])


def test_a_regressor_refuses_date_and_duration_targets_as_x_refuses_them():
    # They were fitted as counts of their dtype's unit: the same durations of 1 to 4 days
    # trained as 1 to 4, or as 8.64e10 to 3.5e11 (pandas' timedelta64[us]), by the unit alone.
    import datetime

    import pandas as pd

    X = [np.ones((2, 1)) * i for i in range(4)]
    days = np.array([1, 2, 3, 4])
    durations = pd.to_timedelta(days, unit="D")
    for y in (durations, pd.Series(durations), pd.DataFrame({"stay": durations}), days.astype("timedelta64[D]"),
              np.datetime64("2024-01-01") + days.astype("timedelta64[D]"),
              pd.Series(pd.date_range("2024-01-01", periods=4, tz="UTC")),
              [np.timedelta64(int(n), "D") for n in days], [datetime.timedelta(days=int(n)) for n in days]):
        with pytest.raises(TypeError, match=r"y holds dates or durations \(.+\): expected numbers.*"
                                            r"np.asarray\(y, dtype='timedelta64\[ns\]'\) / np.timedelta64\(1, 'D'\) "
                                            r"for durations"):
            RNNRegressor(max_iter=1).fit(X, y)
    in_days = RNNRegressor(max_iter=1).fit(X, np.asarray(durations, dtype="timedelta64[ns]") / np.timedelta64(1, "D"))
    assert in_days._y_mean.tolist() == [2.5]


def test_a_long_table_under_other_id_names_is_refused_or_hinted():
    # An id column named 'participant' or 'unit' (C-MAPSS) went through: with one target
    # per row the fit trained on 20 "sequences" of (id, time, s1, s2); with one per id
    # the error gave no hint of a long table.
    import pandas as pd

    rng = np.random.default_rng(0)

    def visits(name):
        return pd.DataFrame([{name: i, "cycle": t, "s1": rng.normal()} for i in range(1, 5) for t in range(1, 6)])

    for name in ("participant", "unit"):
        with pytest.raises(ValueError, match=f"long table, one row per visit: column '{name}' repeats ids"):
            RNNRegressor(max_iter=1).fit(visits(name), np.arange(20.0))
    with pytest.raises(ValueError, match=r"y has 4 entries, but X has 20 sequences.*long table.*4 ids in column "
                                         r"'session'.*from_long_format\(X, id_column='session'"):
        RNNClassifier(max_iter=1).fit(visits("session"), [0, 1, 0, 1])


def test_the_long_table_hint_leaves_panels_and_wide_tables_alone():
    # It told a panel to set_index on one of its step features, and a wide table of daily
    # counts that a column of them held as many ids as y had entries.
    import pandas as pd

    from sklearn_rnn.sequences._panel import long_table_hint

    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.integers(0, 5, size=(40, 3)), columns=["day_0", "day_1", "day_2"])
    assert long_table_hint(wide, 5) == ""
    long = pd.DataFrame({"session": np.repeat([1, 2, 3, 4], 5), "t": np.tile(range(5), 4), "x": rng.normal(size=20)})
    assert "4 ids in column 'session'" in long_table_hint(long, 4)
    panel = long.set_index(["session", "t"]).assign(dose=np.tile([1, 2, 3, 1, 2], 4))
    assert long_table_hint(panel, 3) == ""


def test_numpy_dates_in_an_object_array_or_a_list_are_refused_as_dates():
    # An object array of np.datetime64 values was cast to day counts (18262.0) without a word.
    dates = np.array([[np.datetime64("2020-01-01"), 1.0], [np.datetime64("2020-01-03"), 2.0]], dtype=object)
    with pytest.raises(TypeError, match=r"holds dates or durations \(NumPy dates in an object array\)"):
        RNNRegressor(max_iter=1).fit([dates, dates], [0.0, 1.0])
    with pytest.raises(TypeError, match=r"holds dates or durations \(datetime64\[D\]\)"):
        RNNRegressor(max_iter=1).fit([[[np.datetime64("2020-01-01")]], [[np.datetime64("2020-01-02")]]], [0.0, 1.0])


def test_one_step_sequences_numpy_cannot_stack_are_warned_of_and_fitted():
    # The one-step warning made X an array to describe its shape: a ragged list that
    # trimming leaves one step each failed with numpy's "inhomogeneous shape" error, and
    # tensors that need grad with torch's "Can't call numpy() on Tensor that requires grad".
    import torch

    ragged_then_trimmed = [np.array([[1.0, 2.0], [np.nan, np.nan]]), np.array([[3.0, 1.0]]), np.array([[0.5, 0.2]])]
    needing_grad = [torch.randn(1, 2, requires_grad=True) for _ in range(3)]
    for X in (ragged_then_trimmed, needing_grad):
        for fit in (lambda: RNNRegressor(**TINY).fit(X, [1.0, 2.0, 3.0]), lambda: SequenceStandardScaler().fit(X)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                with pytest.warns(UserWarning, match=r"X holds 3 sequences: every sequence .* is one step of 2 features"):
                    fit()
    with pytest.warns(UserWarning, match=r"X has shape \(3, 1, 2\): every sequence"):  # a padded X keeps its shape
        SequenceStandardScaler().fit(torch.randn(3, 1, 2, requires_grad=True))


@pytest.mark.parametrize("bad, message", [
    ("label", r"y is a str: .*not a column's name"),
    ({i: i % 2 for i in range(12)}, r"y is a dict: .*in the order of X"),
    (set(range(12)), r"y is a set: .*no order"),
])
def test_targets_given_as_a_string_dict_or_set_are_named(bad, message):
    # A str's letters were counted as targets ("y has 5 entries"); a dict or a set met
    # scikit-learn's "array of shape ()", or a raw float() TypeError in the regressor.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(7, 2)) for _ in range(12)]
    for Estimator in (RNNClassifier, RNNRegressor):
        with pytest.raises(ValueError, match=message):
            Estimator(max_iter=1).fit(X, bad)


def test_one_sequence_with_one_label_is_told_to_go_in_as_a_list():
    X = np.random.default_rng(0).normal(size=(7, 2))
    with pytest.raises(ValueError, match=r"a table of 7 univariate sequences of 2 steps: .*pass \[X\] and \[y\]"):
        RNNClassifier(max_iter=1).fit(X, 1)


def test_an_empty_padded_array_or_tensor_is_refused_as_empty():
    # _time_major_hint read row 0 of no rows: a bare IndexError (a list [] was told "X is empty").
    import torch

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 5, 2))
    clf = RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, (X[:, :, 0].sum(1) > 0).astype(int))
    for empty in (np.empty((0, 5, 2)), torch.empty(0, 5, 2)):
        with pytest.raises(ValueError, match="^X is empty: expected at least one sequence"):
            clf.predict(empty)
    with pytest.raises(ValueError, match="^X is empty: expected at least one sequence"):
        RNNClassifier().fit(np.empty((0, 5, 2)), [])


@pytest.mark.parametrize("weighted", [False, True])
def test_score_with_a_y_of_the_wrong_length_says_so_as_fit_does(weighted):
    # With weights it blamed them ("sample_weight has shape (40,): expected (10,)") and
    # sent the user to look for a sampler; without, scikit-learn's bare "Found input
    # variables with inconsistent numbers of samples" (infer43 review).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        models = [RNNClassifier(**TINY).fit(X_OK, Y_CLASS), RNNRegressor(**TINY).fit(X_OK, Y_REAL)]
    for model, y in zip(models, (Y_CLASS, Y_REAL)):
        weight = np.ones(len(X_OK)) if weighted else None
        with pytest.raises(ValueError, match=rf"^y has 3 entries, but X has {len(X_OK)} sequences: pass one target "
                                             r"per sequence, in the order of X\.$"):
            model.score(X_OK, y[:3], sample_weight=weight)
        assert model.score(X_OK, y, sample_weight=weight) == model.score(X_OK, y)


def test_a_flat_list_of_numbers_is_refused_as_a_1d_array_is():
    # A list got scikit-learn's "Expected 2D array ... reshape(-1, 1)", advice that makes
    # one-step sequences; a 1D array got the package's message (newbie43 review).
    from sklearn_rnn import SequenceStandardScaler

    for call in (lambda: RNNClassifier(**TINY).fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1]),
                 lambda: SequenceStandardScaler().fit((0.1, 0.2, 0.3))):
        with pytest.raises(ValueError, match=r"X is one-dimensional \(ndarray of \d values\): expected sequences.*"
                                             r"for one univariate sequence pass \[np\.reshape\(x, \(-1, 1\)\)\]"):
            call()


def test_one_sequence_with_a_one_label_list_gets_the_one_sequence_hint():
    # fit(x, [1]) with x of shape (8, 2) got the bare count; fit(x, 1) had the hint (newbie43).
    x = np.random.default_rng(0).normal(size=(8, 2))
    with pytest.raises(ValueError, match=r"y has 1 entries, but X has 8 sequences.*for one sequence of 8 steps, pass "
                                         r"\[X\] and y\.$"):
        RNNClassifier(**TINY).fit(x, [1])
    with pytest.raises(ValueError, match=r"for one sequence of 8 steps, pass \[X\] and \[y\]\."):
        RNNClassifier(**TINY).fit(x, 1)


def test_a_target_left_in_a_table_is_warned_of():
    # A 'label' column equal to y trained without a word: cross-validated accuracy 1.0
    # against 0.55 without it (newbie43 review).
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(20, 4)), columns=[f"t{i}" for i in range(4)])
    y = np.arange(20) % 2
    with pytest.warns(UserWarning, match=r"column 'label' of X equals y in every row: a target left in the features"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            RNNClassifier(**TINY).fit(table.assign(label=y), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNClassifier(**TINY).fit(table, y)  # no such column: no warning


def test_pandas_row_numbers_are_refused_as_data():
    # newbie44: 'Unnamed: 0' (to_csv then read_csv) or 'index' (reset_index()) were read as
    # data: with rows stored sorted by outcome, noise scored a cross-validated AUC of 1.0.
    import io

    import pandas as pd

    from sklearn_rnn.sequences import from_long_format

    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.normal(size=(12, 4)), columns=[f"t{i}" for i in range(4)])
    buffer = io.StringIO()
    wide.to_csv(buffer)
    buffer.seek(0)
    for X, name in ((pd.read_csv(buffer), "Unnamed: 0"), (wide.reset_index(), "index")):
        with pytest.raises(ValueError, match=rf"X has a column '{name}' of integers counting up by one, the row numbers "
                                             r"pandas writes .* pd\.read_csv\(path, index_col=0\)"):
            RNNClassifier(max_iter=1).fit(X, np.repeat([0, 1], 6))
    visits = pd.DataFrame({"patient": np.repeat(np.arange(4), 3), "day": np.tile([0, 7, 14], 4),
                           "hr": rng.normal(size=12)}).reset_index()
    with pytest.raises(ValueError, match=r"the table has a column 'index' of integers counting up by one.* "
                                         r"pass feature_columns=\[\.\.\.\] without it"):
        from_long_format(visits, id_column="patient", time_column="day")
    with pytest.raises(ValueError, match=r"X has a column 'index' of integers counting up by one"):
        RNNClassifier(max_iter=1).fit(visits.set_index(["patient", "day"]), [0, 1, 0, 1])
    frames = [frame.drop(columns=["patient"]) for _, frame in visits.groupby("patient")]
    with pytest.raises(ValueError, match=r"X's sequences have a column 'index' of integers counting up by one"):
        RNNClassifier(max_iter=1).fit(frames, [0, 1, 0, 1])
    assert len(from_long_format(visits, id_column="patient", time_column="day", feature_columns=["hr"])[0]) == 4


def test_misuse_is_named_in_the_estimators_words():
    # newbie44: a sequence column beside a column of ages got sktime's nested-format advice
    # (whose fix failed in numpy); RNNRegressor(class_weight=...) named the private
    # BaseRNN.__init__; cell='decay' without time_feature spoke of a gap_channel.
    import pandas as pd

    from sklearn_rnn import RNNRegressor, RNNStepClassifier

    rng = np.random.default_rng(0)
    seqs = [rng.normal(size=(int(n), 2)) for n in rng.integers(3, 8, size=6)]
    X = pd.DataFrame({"series": seqs, "age": rng.normal(60, 10, size=6)})
    with pytest.raises(TypeError, match=r"X holds sequences in column\(s\) \['series'\] beside column\(s\) \['age'\] "
                                        r"of one value per row.* X\['series'\]"):
        RNNClassifier(max_iter=1).fit(X, [0, 1] * 3)
    with pytest.raises(TypeError, match=r"^RNNRegressor\.__init__\(\) got an unexpected keyword argument 'class_weight'"):
        RNNRegressor(class_weight="balanced")
    with pytest.raises(TypeError, match=r"^RNNStepClassifier\.__init__\(\) got an unexpected keyword argument"):
        RNNStepClassifier(epochs=5)
    with pytest.raises(ValueError, match=r"cell='decay' reads the time between steps, so it needs time_feature"):
        RNNClassifier(cell="decay", max_iter=1).fit(seqs, [0, 1] * 3)


def test_a_missing_sequence_and_ragged_scoring_targets_are_named():
    # infer45 (minor): a None among the sequences was "has shape ()"; score with one
    # array per sequence met numpy's "inhomogeneous shape" where fit names the mistake.
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier, RNNRegressor

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(10)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        models = [RNNRegressor(hidden_size=4, max_iter=1, random_state=0).fit(X, np.arange(10.0)),
                  RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, np.arange(10) % 2)]
    for model in models:
        with pytest.raises(ValueError, match="sequence 1 of X is None: expected a 2D array"):
            model.predict([X[0], None])
        with pytest.raises(ValueError, match=rf"y holds one array per sequence \(lengths 1, 2\): "
                                             rf"{type(model).__name__} takes one target per sequence"):
            model.score(X[:2], [[1.0], [1.0, 2.0]])


def test_dates_as_sample_weights_are_refused_by_name():
    # diff45 (outside): datetime64 weights were read as days since 1970 (18262 and 1).
    from sklearn_rnn import RNNRegressor

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 1)) for _ in range(8)]
    for weights in (np.array(["2020-01-01"] * 7 + ["1970-01-02"], dtype="datetime64[D]"),
                    np.arange(8).astype("timedelta64[D]")):
        with pytest.raises(TypeError, match="sample_weight holds dates or durations"):
            RNNRegressor(hidden_size=4, max_iter=1).fit(X, np.arange(8.0), sample_weight=weights)
