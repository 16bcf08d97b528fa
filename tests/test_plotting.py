"""plot_training_history draws exactly the recorded history."""

import warnings

import matplotlib
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, RNNRegressor, SequenceStandardScaler
from sklearn_rnn.plotting import plot_training_history

matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(2, 7)), 2)) for _ in range(n)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    return X, y


def _fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, y)


def _restored_epoch(model):
    (stop,) = [cb for _, cb in model.net_.callbacks_ if getattr(cb, "load_best", False)]
    return stop.best_epoch_


def test_loss_only_without_early_stopping():
    X, y = _data()
    clf = _fit(RNNClassifier(hidden_size=4, max_iter=5, random_state=0), X, y)
    ax = plot_training_history(clf)
    assert len(ax.figure.axes) == 1  # no validation axis
    (line,) = ax.lines
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 6))
    assert list(line.get_ydata()) == clf.loss_curve_
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("epoch", "training loss")
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["training loss"]


def test_validation_score_and_best_epoch_with_early_stopping():
    X, y = _data(120)
    clf = _fit(
        RNNClassifier(
            hidden_size=6,
            max_iter=12,
            early_stopping=True,
            validation_fraction=0.25,
            n_iter_no_change=3,
            random_state=0,
        ),
        X,
        y,
    )
    ax = plot_training_history(clf)
    loss_ax, score_ax = ax.figure.axes
    assert loss_ax is ax
    assert list(ax.lines[0].get_ydata()) == clf.loss_curve_
    score_line, best_marker = score_ax.lines
    assert list(score_line.get_ydata()) == clf.validation_scores_
    assert score_ax.get_ylabel() == "validation accuracy"

    best = _restored_epoch(clf)
    assert list(best_marker.get_xdata()) == [best]
    assert list(best_marker.get_ydata()) == [clf.validation_scores_[best - 1]]
    assert best_marker.get_marker() == "*"
    # the dotted line at the best epoch spans the loss axes
    (vline,) = ax.lines[1:]
    assert list(vline.get_xdata()) == [best, best]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["training loss", "validation accuracy", f"best epoch ({best})"]


def test_a_warm_refit_with_early_stopping_plots_its_scores_at_its_epochs():
    # The first fit (no held-out split) ran epochs 1-4; the warm refit validated 5-8.
    # Its scores belong at epochs 5-8, and the best epoch is among them.
    X, y = _data(120)
    clf = _fit(RNNClassifier(hidden_size=6, max_iter=4, random_state=0), X, y)
    clf.set_params(warm_start=True, early_stopping=True, validation_fraction=0.25)
    _fit(clf, X, y)
    assert len(clf.loss_curve_) == 8 and len(clf.validation_scores_) == 4
    ax = plot_training_history(clf)
    _, score_ax = ax.figure.axes
    score_line, best_marker = score_ax.lines
    np.testing.assert_array_equal(score_line.get_xdata(), [5, 6, 7, 8])
    best = clf.best_epoch_
    assert 5 <= best <= 8
    assert list(best_marker.get_xdata()) == [best]
    assert list(best_marker.get_ydata()) == [clf.validation_scores_[best - 5]]


def test_regressor_score_is_r2():
    X, _ = _data(100)
    target = np.array([x[:, 0].sum() for x in X])
    reg = _fit(
        RNNRegressor(hidden_size=4, max_iter=6, early_stopping=True, random_state=0), X, target
    )
    ax = plot_training_history(reg)
    assert ax.figure.axes[-1].get_ylabel() == "validation R²"
    assert list(ax.figure.axes[-1].lines[0].get_ydata()) == reg.validation_scores_


def test_step_classifier_score_is_named_as_a_log_likelihood_per_step():
    from sklearn_rnn import RNNStepClassifier

    X, _ = _data(100)
    Y = [(x > 0).astype(float) for x in X]
    model = _fit(RNNStepClassifier(hidden_size=4, max_iter=6, early_stopping=True, random_state=0), X, Y)
    ax = plot_training_history(model)
    assert ax.figure.axes[-1].get_ylabel() == "validation log-likelihood per step"


def test_draws_on_given_axes_of_a_pipeline_and_a_search():
    X, y = _data()
    pipe = _fit(
        make_pipeline(
            SequenceStandardScaler(), RNNClassifier(hidden_size=4, max_iter=3, random_state=0)
        ),
        X,
        y,
    )
    _, (left, right) = plt.subplots(1, 2)
    assert plot_training_history(pipe, ax=left) is left
    assert list(left.lines[0].get_ydata()) == pipe[-1].loss_curve_

    search = _fit(
        GridSearchCV(
            RNNClassifier(max_iter=2, hidden_size=4, random_state=0), {"hidden_size": [2, 4]}, cv=2
        ),
        X,
        y,
    )
    assert plot_training_history(search, ax=right) is right
    assert list(right.lines[0].get_ydata()) == search.best_estimator_.loss_curve_
    # A pipeline ending in a fitted search ("GridSearchCV ... has no loss_curve_" before).
    ending = _fit(make_pipeline(SequenceStandardScaler(), clone(search)), X, y)
    ax = plot_training_history(ending)
    assert list(ax.lines[0].get_ydata()) == ending[-1].best_estimator_.loss_curve_


def test_scikit_learn_mlp_marks_its_best_validation_score():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    mlp = _fit(MLPClassifier(max_iter=30, early_stopping=True, random_state=0), X, y)
    ax = plot_training_history(mlp)
    best_marker = ax.figure.axes[-1].lines[-1]
    best = int(np.argmax(mlp.validation_scores_)) + 1
    assert list(best_marker.get_xdata()) == [best]


def test_unfitted_and_history_less_estimators_are_refused():
    with pytest.raises(NotFittedError):
        plot_training_history(RNNClassifier())
    rng = np.random.default_rng(0)
    logistic = LogisticRegression().fit(rng.normal(size=(20, 2)), np.arange(20) % 2)
    with pytest.raises(TypeError, match="loss_curve_"):
        plot_training_history(logistic)
    search = GridSearchCV(LogisticRegression(), {"C": [1.0]}, cv=2, refit=False)
    search.fit(rng.normal(size=(20, 2)), np.arange(20) % 2)
    with pytest.raises(TypeError, match="fitted with refit=False.*refit=True"):
        plot_training_history(search)


def test_axes_sharing_their_epochs_show_every_history_whole():
    # As the gallery example draws them: the last call set the x limits of every axes
    # of the sharex group, and cut the earlier, longer histories to its own epochs.
    X, y = _data()
    long = _fit(RNNClassifier(hidden_size=4, max_iter=8, early_stopping=True, random_state=0), X, y)
    short = _fit(RNNClassifier(hidden_size=4, max_iter=3, random_state=0), X, y)
    for models in ((long, short), (short, long)):
        _, axes = plt.subplots(2, 1, sharex=True)
        for ax, model in zip(axes, models):
            plot_training_history(model, ax=ax)
        for ax in axes:
            assert ax.get_xlim() == (0.5, len(long.loss_curve_) + 0.5)
    assert plot_training_history(short).get_xlim() == (0.5, 3.5)  # alone, its own epochs
