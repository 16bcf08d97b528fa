"""Every cell through the estimators: learns, is seeded, pickles, saves (issue 7)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import (
    check_estimators_pickle,
    check_fit_idempotent,
    check_n_features_in,
    check_parameters_default_constructible,
)

from sklearn_rnn import RNNClassifier, RNNRegressor

CELLS = ["tanh", "relu", "gru", "lstm"]
#: Two layers, dropout and a learned initial state: every new option at once.
DEEP = {"num_layers": 2, "dropout": 0.1, "hidden_init": "learned"}


def last_sign_task(n=120, seed=0):
    """Label = sign of the first feature at the first step, lengths 2..8: a memory task."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(2, 9), 2)) for _ in range(n)]
    y = np.array(["pos" if x[0, 0] > 0 else "neg" for x in X])
    return X, y


def fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, y)


@pytest.fixture(scope="module")
def task():
    return last_sign_task()


@pytest.fixture(scope="module", params=CELLS)
def fitted(request, task):
    X, y = task
    model = RNNClassifier(
        hidden_size=12, cell=request.param, learning_rate=0.03, batch_size=20, max_iter=40,
        random_state=0, **DEEP,
    )
    return fit(model, X, y)


def test_each_cell_learns_a_memory_task(fitted):
    X, y = last_sign_task(200, seed=1)
    assert fitted.score(X, y) > 0.85, fitted.cell
    module = fitted.module_
    assert module.cell == fitted.cell and module.num_layers == 2 and module.dropout == 0.1
    assert module.initial_hidden.shape == (2, 12)


def test_each_cell_is_deterministic_with_a_seed(fitted, task):
    X, y = task
    again = fit(clone(fitted), X, y)
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))


def test_each_cell_pickles_and_saves(fitted, task, tmp_path):
    X, _ = task
    expected = fitted.predict_proba(X)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), expected)
    assert restored.get_params() == fitted.get_params()
    if not hasattr(fitted, "save"):
        pytest.skip("this version has no safetensors save/load")
    path = tmp_path / "model.safetensors"
    fitted.save(path)
    loaded = type(fitted).load(path)
    assert {k: loaded.get_params()[k] for k in DEEP} == DEEP
    np.testing.assert_array_equal(loaded.predict_proba(X), expected)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_simplex_trains_gated_stacks(cell):
    # On the CPU, where a seed fixes the run and the score; on a GPU the fits are not
    # repeatable, and eight runs of the LSTM case on an H200 scored 0.545 to 0.945
    # (test_cuda.py trains the same stacks there, over several seeds).
    X, y = last_sign_task(200)
    model = RNNClassifier(
        hidden_size=12, cell=cell, optimizer="simplex", learning_rate=0.3, switch_threshold=1.0,
        early_stopping=False,  # every sequence trains: 10 batches per epoch
        batch_size=20, max_iter=25, device="cpu", random_state=0, **DEEP,
    )
    fit(model, X, y)
    counts = model.net_.optimizer_.branch_counts
    assert counts["simplex"] > 0 and sum(counts.values()) == 25 * 10
    assert model.score(*last_sign_task(200, seed=1)) > 0.8


def test_lstm_regressor_with_multiple_outputs():
    rng = np.random.default_rng(0)
    X = [rng.uniform(size=(rng.integers(2, 8), 1)) for _ in range(100)]
    y = np.array([[x[0, 0], x.sum()] for x in X])
    reg = fit(RNNRegressor(hidden_size=12, cell="lstm", num_layers=2, max_iter=60, random_state=0), X, y)
    assert reg.predict(X).shape == (100, 2)
    assert reg.score(X, y) > 0.8


@pytest.mark.parametrize(
    "params, match",
    [
        ({"num_layers": 0}, "num_layers"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"hidden_init": "noisy"}, "hidden_init"),
        ({"cell": "elman"}, "cell"),
    ],
)
def test_invalid_parameters_are_rejected(params, match, task):
    X, y = task
    with pytest.raises(InvalidParameterError, match=match):
        RNNClassifier(**params).fit(X, y)


@pytest.mark.parametrize(
    "check",
    [check_parameters_default_constructible, check_n_features_in, check_fit_idempotent,
     check_estimators_pickle],
)
def test_scikit_learn_checks_on_a_gated_stack(check):
    estimator = RNNClassifier(cell="gru", hidden_size=8, max_iter=5, **DEEP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(type(estimator).__name__, estimator)
