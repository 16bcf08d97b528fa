"""The estimators' derived public reads: ``best_epoch_``, the validation loss, ``branch_counts_``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from _helpers import on_device

from sklearn_rnn import RNNClassifier, RNNRegressor, load


def _data(n=60):
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(n)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    return X, y


def _fit(estimator, X, y, **fit_params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, y, **fit_params)


def test_best_epoch_is_the_epoch_whose_validation_loss_is_reported():
    X, y = _data()
    clf = _fit(RNNClassifier(hidden_size=4, max_iter=30, early_stopping=True, n_iter_no_change=3,
                             random_state=0), X, y)
    best = clf.best_epoch_
    assert isinstance(best, int) and 1 <= best <= clf.n_iter_
    assert clf.net_.history[best - 1, "valid_loss"] == clf.best_validation_loss_
    assert clf.validation_scores_[best - 1] == clf.best_validation_score_
    # Early stopping restored it: no later epoch improved on it by more than tol
    # (tol='auto' is 3e-3 for untimed input), and it improved on every epoch before it.
    tol = 3e-3
    losses = clf.net_.history[:, "valid_loss"]
    assert min(losses[best - 1 :]) > clf.best_validation_loss_ - tol
    assert all(clf.best_validation_loss_ <= loss for loss in losses[: best - 1])


def test_best_epoch_is_none_without_early_stopping_and_after_partial_fit_and_loads_as_saved(tmp_path):
    X, y = _data()
    plain = _fit(RNNRegressor(hidden_size=4, max_iter=3, random_state=0), X, y.astype(float))
    assert plain.best_epoch_ is None
    clf = _fit(RNNClassifier(hidden_size=4, max_iter=5, early_stopping=True, random_state=0), X, y)
    assert clf.best_epoch_ is not None
    clf.save(tmp_path / "model.safetensors")
    assert load(tmp_path / "model.safetensors").best_epoch_ == clf.best_epoch_  # None before
    clf.partial_fit(X, y)
    assert clf.validation_scores_ is None and clf.best_epoch_ is None
    assert not hasattr(RNNClassifier(), "best_epoch_")


def test_branch_counts_of_a_simplex_model_count_its_updates_and_survive_saving(tmp_path):
    X, y = _data()
    clf = _fit(RNNClassifier(hidden_size=4, max_iter=3, batch_size=32, optimizer="simplex",
                             random_state=0), X, y)
    counts = clf.branch_counts_
    assert set(counts) == {"simplex", "descent_fallback", "switched", "skipped"}
    assert sum(counts.values()) == 3 * 2  # 3 epochs of 2 batches (60 sequences, 32 a batch)
    counts["simplex"] += 100  # a copy: the optimizer's counts are not changed
    assert clf.branch_counts_["simplex"] == counts["simplex"] - 100
    clf.save(tmp_path / "model.safetensors")
    loaded = load(tmp_path / "model.safetensors")
    assert loaded.branch_counts_ == clf.branch_counts_
    loaded.partial_fit(X[:10], y[:10])
    assert sum(loaded.branch_counts_.values()) == 3 * 2 + 1


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_branch_counts_are_none_for_other_optimizers(optimizer):
    X, y = _data(20)
    clf = _fit(RNNClassifier(hidden_size=4, max_iter=1, optimizer=optimizer, random_state=0), X, y)
    assert clf.branch_counts_ is None
    assert not hasattr(RNNClassifier(), "branch_counts_")


def test_the_validation_loss_of_a_weighted_fit_is_the_weighted_mean_over_the_held_out_split():
    # It was the mean of (weight scaled over all the data) x loss: its scale changed with
    # which sequences were held out, against the "weighted mean" of the fit docstring.
    from sklearn.model_selection import train_test_split

    from sklearn_rnn._estimators import _Seeds

    X, y = _data()
    weight = np.random.default_rng(1).uniform(0.1, 3.0, size=len(y))
    clf = _fit(RNNClassifier(hidden_size=4, max_iter=1, early_stopping=True, validation_fraction=0.25,
                             label_smoothing=0.0, random_state=0), X, y, sample_weight=weight)
    _, held = train_test_split(np.arange(len(y)), test_size=0.25, random_state=_Seeds.draw(0).split,
                               stratify=y)
    proba = clf.predict_proba([X[i] for i in held])
    losses = -np.log(proba[np.arange(len(held)), y[held]])
    expected = np.sum(weight[held] * losses) / np.sum(weight[held])
    assert clf.best_validation_loss_ == pytest.approx(expected, rel=on_device(1e-5, 1e-3))
