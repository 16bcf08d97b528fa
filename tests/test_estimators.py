"""RNNClassifier and RNNRegressor: input forms, training behaviour, ecosystem."""

import pickle
import re
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from imblearn.over_sampling import RandomOverSampler
from imblearn.pipeline import make_pipeline as make_imblearn_pipeline
from imblearn.under_sampling import RandomUnderSampler
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, RNNRegressor, SequenceStandardScaler
from sklearn_rnn.sequences import restore_layout, sequence_column

from _helpers import convergence_warning_allowed, on_device

FAST = dict(hidden_size=12, max_iter=25, random_state=0)


def ragged_sign_task(n=80, seed=0, n_features=2):
    """Label = sign of the sum of feature 0; lengths 2..9, features on different scales."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(2, 10), n_features)) * [1.0, 50.0][:n_features] for _ in range(n)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    return X, y


@pytest.fixture(scope="module")
def task():
    return ragged_sign_task()


@pytest.fixture(scope="module")
def fitted(task):
    X, y = task
    with convergence_warning_allowed():
        return RNNClassifier(**FAST).fit(X, y)


# ---------------------------------------------------------------- input forms
def test_ragged_and_padded_forms_give_identical_predictions(task, fitted):
    X, _ = task
    padded = restore_layout(X, "padded")
    assert padded.shape == (len(X), max(len(x) for x in X), 2)
    np.testing.assert_array_equal(fitted.predict_proba(X), fitted.predict_proba(padded))
    np.testing.assert_array_equal(fitted.predict_proba(X), fitted.predict_proba(tuple(X)))
    np.testing.assert_array_equal(fitted.predict_proba(X), fitted.predict_proba(sequence_column(X)))


def test_fit_on_padded_equals_fit_on_ragged(task, fitted):
    X, y = task
    with convergence_warning_allowed():
        other = RNNClassifier(**FAST).fit(restore_layout(X, "padded"), y)
    np.testing.assert_array_equal(other.predict_proba(X), fitted.predict_proba(X))


def test_table_of_univariate_sequences_with_trailing_nan_padding():
    rng = np.random.default_rng(1)
    lengths = rng.integers(2, 7, size=60)
    X = [rng.normal(size=(n, 1)) for n in lengths]
    y = np.array([x[-1, 0] for x in X])
    table = restore_layout(X, "table")  # (60, 6), NaN after each sequence's end
    frame = pd.DataFrame(table, columns=[f"t{i}" for i in range(table.shape[1])])
    with convergence_warning_allowed():
        reg = RNNRegressor(**FAST).fit(frame, y)
    assert reg.n_features_in_ == table.shape[1]
    np.testing.assert_array_equal(reg.feature_names_in_, frame.columns)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        np.testing.assert_allclose(reg.predict(frame), reg.predict(table))
    # The table's rows are univariate sequences: the ragged form gives the same numbers.
    np.testing.assert_allclose(reg.predict(X), reg.predict(table))
    assert reg.score(X, y) > 0.5


def test_string_labels_and_multiclass(task):
    X, _ = task
    sums = np.array([x[:, 0].sum() for x in X])
    y = np.where(sums < -1, "low", np.where(sums > 1, "high", "mid"))
    with convergence_warning_allowed():
        clf = make_pipeline(SequenceStandardScaler(), RNNClassifier(**FAST)).fit(X, y)
    np.testing.assert_array_equal(clf[-1].classes_, ["high", "low", "mid"])
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(clf.predict(X)) <= set(clf.classes_)
    assert clf.score(X, y) > 0.85


def test_multi_output_regression(task):
    X, _ = task
    y = np.column_stack([[x[:, 0].sum() for x in X], [len(x) for x in X]])
    with convergence_warning_allowed():
        reg = make_pipeline(SequenceStandardScaler(), RNNRegressor(**FAST)).fit(X, y)
    assert reg[-1].n_outputs_ == 2
    assert reg.predict(X).shape == (len(X), 2)
    assert reg.score(X, y) > 0.5


def test_missing_values_are_masked_not_propagated(task):
    X, y = task
    rng = np.random.default_rng(3)
    holed = [np.where(rng.random(x.shape) < 0.2, np.nan, x) for x in X]
    holed = [np.vstack([[1.0, 1.0], x]) for x in holed]  # keep a valid first step
    with convergence_warning_allowed():
        clf = RNNClassifier(**FAST).fit(holed, y)
    # One mask channel per feature is added because training data had missing values
    # (these sequences are too short for the convolutional stage of 'auto').
    assert clf.module_.conv is None and clf.module_.input_projection.in_features == 4
    proba = clf.predict_proba(holed)
    assert np.isfinite(proba).all()
    # A missing value is not a zero: filling it changes the prediction.
    filled = [np.nan_to_num(x, nan=0.0) for x in holed]
    assert not np.allclose(proba, clf.predict_proba(filled))


# ------------------------------------------------------------------ training
def test_same_seed_same_model_and_input_not_modified(task):
    X, y = task
    copies = [x.copy() for x in X]
    with convergence_warning_allowed():
        a = RNNClassifier(**FAST).fit(X, y).predict_proba(X)
    with convergence_warning_allowed():
        b = RNNClassifier(**FAST).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    for original, copy in zip(X, copies, strict=True):
        np.testing.assert_array_equal(original, copy)


def test_fit_does_not_touch_global_torch_generator(task):
    X, y = task
    state = torch.get_rng_state()
    with convergence_warning_allowed():
        RNNClassifier(**FAST).fit(X, y)
    assert torch.equal(state, torch.get_rng_state())


def test_loss_decreases_and_attributes(fitted, task):
    X, y = task
    assert fitted.n_iter_ == 25 == len(fitted.loss_curve_)
    # The loss falls by more than half of what it can fall: with label smoothing
    # (label_smoothing='auto', 0.1) its floor is the entropy of the smoothed targets.
    share = fitted.net_.criterion_.label_smoothing / len(fitted.classes_)
    assert share == pytest.approx(0.05)
    targets = np.array([1 - share, share])
    floor = -(targets * np.log(targets)).sum()
    assert fitted.loss_curve_[-1] - floor < 0.5 * (fitted.loss_curve_[0] - floor)
    assert fitted.n_features_in_ == 2
    assert fitted.validation_scores_ is None
    # 0.8875 with the 'gru' default (issue 17; the old 'tanh' default passed 0.9): one
    # feature is 50 times the other's scale, unstandardized, which slows the GRU.
    assert fitted.score(X, y) > 0.85


def test_spectral_radius_initialization(task):
    X, y = task
    clf = RNNClassifier(hidden_size=20, cell="tanh", spectral_radius=0.7, max_iter=1, random_state=0)
    clf.set_params(learning_rate=1e-12)  # effectively untrained: inspect the draw
    with convergence_warning_allowed():
        clf.fit(X, y)
    radius = torch.linalg.eigvals(clf.module_.recurrent_weight.detach().double()).abs().max().item()
    assert radius == pytest.approx(0.7, abs=1e-5)


def test_tolerance_stops_before_max_iter(task):
    X, y = task
    clf = RNNClassifier(hidden_size=12, max_iter=500, tol=10.0, n_iter_no_change=3, random_state=0)
    # No improvement of 10 in the loss: a warm-up of 3 * 3 epochs, then a patience of 3.
    clf.fit(X, y)
    assert clf.n_iter_ == 12


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_early_stopping_restores_best_epoch(task):
    X, y = task
    kwargs = dict(hidden_size=12, early_stopping=True, validation_fraction=0.25, tol=0.0, random_state=0)
    clf = RNNClassifier(max_iter=80, n_iter_no_change=4, learning_rate=0.05, **kwargs).fit(X, y)
    losses = clf.net_.history[:, "valid_loss"]
    best = int(np.argmin(losses))  # with tol=0 the restored epoch is the lowest loss
    assert clf.n_iter_ < 80 and best < clf.n_iter_ - 1  # stopped after a few worse epochs
    assert len(clf.validation_scores_) == clf.n_iter_
    assert clf.best_validation_loss_ == pytest.approx(losses[best])
    assert clf.best_validation_score_ == clf.validation_scores_[best]
    # Same seed, stopped exactly at the best epoch: the same weights, hence predictions.
    at_best = RNNClassifier(max_iter=best + 1, n_iter_no_change=100, learning_rate=0.05, **kwargs)
    np.testing.assert_array_equal(at_best.fit(X, y).predict_proba(X), clf.predict_proba(X))
    assert clf.net_.train_split.valid is None  # the validation data is not kept in the model


def test_warm_start_continues_training(task):
    X, y = task
    clf = RNNClassifier(hidden_size=12, max_iter=5, warm_start=True, random_state=0)
    with convergence_warning_allowed():
        clf.fit(X, y)
    first = clf.loss_curve_[-1]
    module = clf.module_
    with convergence_warning_allowed():
        clf.fit(X, y)
    assert clf.module_ is module
    assert len(clf.loss_curve_) == 10 and clf.n_iter_ == 5
    assert clf.loss_curve_[-1] < first


def test_sgd_optimizer_is_the_clipped_rule(task):
    X, y = task
    clf = RNNClassifier(optimizer="sgd", learning_rate=0.1, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # whether tol stops it early does not matter here
        clf.fit(X, y)
    assert type(clf.net_.optimizer_).__name__ == "ClippedSGD"
    assert clf.net_.optimizer_.param_groups[0]["clip_threshold"] == 1.0
    # The loss of clipped SGD on this small task moves up and down by 0.05 from epoch to
    # epoch: the last five epochs' mean, not the last epoch alone, is below the first.
    assert np.mean(clf.loss_curve_[-5:]) < clf.loss_curve_[0] - 0.005


def test_class_weight_balanced_moves_the_decision():
    rng = np.random.default_rng(4)
    X = [rng.normal(size=(4, 1)) for _ in range(120)]
    # About 20% positives, with label noise: a network that separates the classes
    # perfectly (as the default one does without noise) has no decision left to move.
    y = np.array([int(x.sum() + rng.normal(scale=1.5) > 2.0) for x in X])
    kwargs = dict(hidden_size=8, max_iter=15, random_state=0)
    with convergence_warning_allowed():
        plain = RNNClassifier(**kwargs).fit(X, y)
    with convergence_warning_allowed():
        balanced = RNNClassifier(class_weight="balanced", **kwargs).fit(X, y)
    assert balanced.predict(X).mean() > plain.predict(X).mean()
    with convergence_warning_allowed():
        by_dict = RNNClassifier(class_weight={0: 1.0, 1: 4.0}, **kwargs).fit(X, y)
    assert by_dict.predict(X).mean() > plain.predict(X).mean()


def test_zero_sample_weight_equals_leaving_the_samples_out(task):
    X, y = task
    weight = np.ones(len(X))
    weight[-10:] = 0.0
    # One full batch per epoch and no clipping: the weighted loss is the loss on the
    # first n - 10 samples times a constant, to which Adam's steps are invariant. Three
    # updates: Adam divides each gradient component by its own size, so the rounding of
    # components near zero (ReLU features of the convolutional stage) grows from update
    # to update (1e-5 after 3, 4e-4 after 25); counting the 10 samples moves the
    # probabilities by 0.2 after 3.
    kwargs = dict(FAST, batch_size=len(X), clip_threshold=None, max_iter=3)
    with convergence_warning_allowed():
        weighted = RNNClassifier(**kwargs).fit(X, y, sample_weight=weight)
    with convergence_warning_allowed():
        left_out = RNNClassifier(**kwargs).fit(X[:-10], y[:-10])
    np.testing.assert_allclose(weighted.predict_proba(X), left_out.predict_proba(X), atol=1e-4)


def test_each_split_of_a_weighted_fit_reports_its_weighted_mean_loss(task):
    """With a held-out split, the training loss is the weighted mean over the training
    sequences (weights once kept the scale of the whole data's mean: 0.713 against
    0.675 here). A step size of 1e-9 leaves the network as initialized."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn_rnn._estimators import _Seeds

    X, y = task
    weight = np.linspace(0.1, 3.0, len(X)) ** 2
    model = RNNClassifier(
        hidden_size=4, max_iter=1, batch_size=len(X), optimizer="sgd", learning_rate=1e-9, alpha=0.0,
        label_smoothing=0.0, early_stopping=True, validation_fraction=0.5, random_state=0,
    )
    with convergence_warning_allowed():
        model.fit(X, y, sample_weight=weight)
    train, held = train_test_split(np.arange(len(X)), test_size=0.5, random_state=_Seeds.draw(0).split, stratify=y)
    for rows, loss in ((train, model.loss_curve_[0]), (held, model.net_.history[0, "valid_loss"])):
        proba = model.predict_proba([X[i] for i in rows])
        assert loss == pytest.approx(log_loss(y[rows], proba, sample_weight=weight[rows]), rel=1e-5)


def test_a_regressor_names_the_fitted_outputs_when_trained_further_on_others(task):
    X, _ = task
    y = np.column_stack([[x[:, 0].sum() for x in X], [len(x) for x in X]]).astype(float)
    with convergence_warning_allowed():
        model = RNNRegressor(hidden_size=4, max_iter=1, random_state=0).fit(X, y)
    for call in (model.score, model.partial_fit, model.set_params(warm_start=True).fit):
        with pytest.raises(ValueError, match=r"y has 1 outputs, but the fitted model has 2: .* Pass those, "
                                             r"or fit a new model on 1 \(warm_start=False\)"):
            call(X, y[:, 0])
    with pytest.raises(ValueError, match=r"y has 4 outputs, but the fitted model has 2"):
        model.score(X, np.column_stack([y, y]))  # was r2_score's "different number of output (4!=2)"


def test_a_warm_regressor_refit_predicts_in_the_shape_of_its_own_targets(task):
    # A refit on (n,) targets after (n, 1) ones kept predicting (n, 1), and the reverse.
    X, _ = task
    y = np.array([x[:, 0].sum() for x in X])
    model = RNNRegressor(hidden_size=4, max_iter=1, warm_start=True, random_state=0)
    for targets, shape in ((y[:, None], (len(X), 1)), (y, (len(X),)), (y[:, None], (len(X), 1))):
        with convergence_warning_allowed():
            model.fit(X, targets)
        assert model.predict(X).shape == shape


# --------------------------------------------------------------- bad input
BAD_X = [
    ([], ValueError, "X is empty: expected at least one sequence"),
    ([np.zeros((3, 2)), np.zeros((0, 2))], ValueError, "sequence 1 of X has no valid step"),
    ([np.zeros((3, 2)), np.zeros((3, 3))], ValueError, "sequence 1 of X has 3 features per step, but sequence 0 has 2"),
    ([np.zeros((3, 2)), np.array([[0.0, np.inf]])], ValueError, "sequence 1 of X holds an infinite value at step 0, feature 1"),
    ([np.zeros((3, 2)), np.array([["a", "b"]])], TypeError, "sequence 1 of X could not be read as numbers"),
    (np.zeros((2, 3, 2, 2)), ValueError, "X has 4 dimensions"),
    ([np.zeros((3, 2)), np.zeros((2, 2, 2))], ValueError, r"sequence 1 of X has shape \(2, 2, 2\)"),
    (np.full((2, 3, 1), np.nan), ValueError, "sequence 0 of X has no valid step"),
]


@pytest.mark.parametrize("X, error, message", BAD_X)
def test_bad_X_names_the_problem_and_the_fix(X, error, message):
    y = np.arange(len(X)) % 2
    with pytest.raises(error, match=message):
        RNNClassifier(**FAST).fit(X, y)


def test_bad_y_and_prediction_inputs(task, fitted):
    X, y = task
    with pytest.raises(ValueError, match=f"y has {len(y) - 1} entries, but X has {len(X)} sequences"):
        RNNClassifier(**FAST).fit(X, y[:-1])
    with pytest.raises(ValueError, match="at least 2 classes"):
        RNNClassifier(**FAST).fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="y holds NaN"):
        RNNRegressor(**FAST).fit(X, np.full(len(X), np.nan))
    with pytest.raises(ValueError, match="X has 3 features per step, but RNNClassifier is expecting 2"):
        fitted.predict([np.zeros((4, 3))])
    with pytest.raises(NotFittedError):
        RNNClassifier().predict(X)
    with pytest.raises(ValueError, match="'cell' parameter of RNNClassifier must be"):
        RNNClassifier(cell="lstmish").fit(X, y)
    with pytest.raises(ValueError, match="'spectral_radius' parameter"):
        RNNClassifier(spectral_radius=-1.0).fit(X, y)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_cuda_without_gpu_is_a_clear_error(task):
    X, y = task
    with pytest.raises(ValueError, match=re.escape("device='cuda' was requested, but PyTorch sees no CUDA device")):
        RNNClassifier(device="cuda", **FAST).fit(X, y)


# ------------------------------------------------------------ persistence
def test_pickle_and_joblib_round_trips_keep_predictions(task, fitted, tmp_path):
    X, _ = task
    expected = fitted.predict_proba(X)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), expected)
    joblib.dump(fitted, tmp_path / "model.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "model.joblib").predict_proba(X), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_fit_matches_cpu_closely_and_loads_on_cpu(task):
    X, y = task
    with convergence_warning_allowed():
        gpu = RNNClassifier(device="cuda", **FAST).fit(X, y)
    assert next(gpu.module_.parameters()).is_cuda
    cpu_copy = pickle.loads(pickle.dumps(gpu))
    cpu_copy.module_.to("cpu")
    np.testing.assert_allclose(cpu_copy.predict_proba(X), gpu.predict_proba(X), atol=1e-5)


# -------------------------------------------------------------- ecosystem
def test_pipeline_clone_and_cross_val_roc_auc_on_ragged_input(task):
    X, y = task
    pipe = make_pipeline(SequenceStandardScaler(), RNNClassifier(hidden_size=12, max_iter=15, random_state=0))
    assert clone(pipe).get_params()["rnnclassifier__hidden_size"] == 12
    with convergence_warning_allowed():
        scores = cross_val_score(pipe, X, y, scoring="roc_auc", cv=StratifiedKFold(3))
    assert scores.shape == (3,)
    assert scores.mean() > 0.8


def test_grid_search_over_spectral_radius_and_clip_threshold(task):
    X, y = task
    search = GridSearchCV(
        RNNClassifier(hidden_size=8, max_iter=8, random_state=0),
        {"spectral_radius": [0.8, 1.2], "clip_threshold": [0.5, 1.0]},
        scoring="roc_auc",
        cv=2,
    )
    with convergence_warning_allowed():
        search.fit(X, y)
    assert len(search.cv_results_["params"]) == 4
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_params_["spectral_radius"] in (0.8, 1.2)
    assert search.predict_proba(X[:3]).shape == (3, 2)


def test_soft_voting_over_seeded_classifiers_averages_their_probabilities(task):
    # The ensemble the defaults page measures on JapaneseVowels, built from scikit-learn.
    from sklearn.ensemble import VotingClassifier

    X, y = task
    members = [(f"seed{k}", RNNClassifier(hidden_size=6, max_iter=3, random_state=k)) for k in range(3)]
    with convergence_warning_allowed():
        vote = VotingClassifier(members, voting="soft").fit(X, y)
        alone = [clone(model).fit(X, y) for _, model in members]
    mean = np.mean([model.predict_proba(X) for model in alone], axis=0)
    np.testing.assert_allclose(vote.predict_proba(X), mean, rtol=1e-6)
    assert len({round(float(model.predict_proba(X)[0, 1]), 6) for model in alone}) == 3  # three networks


@pytest.mark.parametrize("sampler", [RandomOverSampler(random_state=0), RandomUnderSampler(random_state=0)])
def test_imbalanced_learn_pipeline_on_ragged_sequences(sampler):
    X, y = ragged_sign_task(n=90, seed=5)
    keep = np.flatnonzero(y == 0).tolist() + np.flatnonzero(y == 1)[:12].tolist()
    X = [X[i] for i in keep]
    y = y[keep]
    column = sequence_column(X)
    resampled, y_resampled = clone(sampler).fit_resample(column, y)
    counts = np.bincount(y_resampled)
    assert counts[0] == counts[1]
    assert all(any(cell is x for x in column[:, 0]) for cell in resampled[:, 0])  # whole sequences
    pipe = make_imblearn_pipeline(sampler, RNNClassifier(hidden_size=8, max_iter=10, random_state=0))
    with convergence_warning_allowed():
        pipe.fit(column, y)
    assert pipe.predict_proba(X).shape == (len(X), 2)


def test_smote_cannot_interpolate_sequences():
    from imblearn.over_sampling import SMOTE

    X, y = ragged_sign_task(n=30)
    with pytest.raises(ValueError):
        SMOTE(k_neighbors=2).fit_resample(sequence_column(X), y)


# ------------------------------------------------------------- partial_fit
def test_partial_fit_streams_fresh_batches():
    rng = np.random.default_rng(7)
    clf = RNNClassifier(hidden_size=12, batch_size=50, random_state=0)

    def batch(n=50):
        X = [rng.normal(size=(rng.integers(2, 8), 1)) for _ in range(n)]
        return X, np.array([int(x.sum() > 0) for x in X])

    X_valid, y_valid = batch(200)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        RNNClassifier().partial_fit(*batch())
    clf.partial_fit(*batch(), classes=[0, 1])
    module = clf.module_
    start = clf.score(X_valid, y_valid)
    for _ in range(60):
        clf.partial_fit(*batch())
    assert clf.module_ is module and clf.n_iter_ == 61 == len(clf.loss_curve_)
    assert clf.score(X_valid, y_valid) > max(0.9, start)
    with pytest.raises(ValueError, match=r"labels \[2\] that are not among the fitted classes_"):
        clf.partial_fit(X_valid[:3], [0, 1, 2])


def test_partial_fit_accepts_its_classes_again_in_any_order_and_type(task):
    # The streaming loop passes the same classes on every call (classes with NaN, now
    # refused, were refused again on the second call: NaN != NaN). Guards the comparison
    # by label that replaced np.array_equal.
    X, y = task
    clf = RNNClassifier(hidden_size=3, random_state=0).partial_fit(X, y, classes=np.array([1, 0]))
    clf.partial_fit(X, y, classes=[0.0, 1.0]).partial_fit(X, y, classes=(1, 0, 1))
    assert clf.classes_.tolist() == [0, 1] and clf.n_iter_ == 3
    with pytest.raises(ValueError, match=r"classes=\[0, 1, 2\] differs from the classes"):
        clf.partial_fit(X, y, classes=[0, 1, 2])


@pytest.mark.parametrize("estimator", [RNNClassifier, RNNRegressor])
def test_partial_fit_on_a_fitted_estimator_validates_its_parameters_as_fit_does(task, estimator):
    # scikit-learn validates partial_fit's parameters on the first call only: a value set
    # since was trained with (the optimizer's step size became -0.5).
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = task
    model = estimator(hidden_size=3, optimizer="sgd", random_state=0)
    model.partial_fit(X, y, **({"classes": [0, 1]} if estimator is RNNClassifier else {}))
    weights = [p.detach().clone() for p in model.module_.parameters()]
    model.set_params(learning_rate=-0.5)
    with pytest.raises(InvalidParameterError) as refused_by_fit:
        clone(model).fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'learning_rate' parameter") as refused:
        model.partial_fit(X, y)
    assert str(refused.value) == str(refused_by_fit.value)
    assert model.n_iter_ == 1 and model.net_.optimizer_.param_groups[0]["lr"] > 0
    assert all(torch.equal(p, q) for p, q in zip(model.module_.parameters(), weights))
    model.set_params(learning_rate=0.05)  # a valid value again: the stream goes on
    assert model.partial_fit(X, y).n_iter_ == 2


def test_partial_fit_regressor_continues_from_current_weights(task):
    X, _ = task
    y = np.array([x[:, 0].sum() for x in X])
    reg = RNNRegressor(hidden_size=12, batch_size=len(X), random_state=0)
    losses = [reg.partial_fit(X, y).loss_curve_[-1] for _ in range(30)]
    assert reg.n_iter_ == 30
    assert losses[-1] < 0.5 * losses[0]


def test_partial_fit_cost_does_not_grow_with_the_updates_before_it(task, monkeypatch):
    """A streaming update reads the history's last epoch without copying every epoch,
    and appends to loss_curve_ instead of rebuilding it: the history rows copied per
    call are the same after 3 calls as after 40 (skorch copied them all, ~14 times)."""
    from skorch.history import History

    X, y = task
    copied = []
    to_list = History.to_list
    monkeypatch.setattr(History, "to_list", lambda self: copied.append(len(self)) or to_list(self))
    clf = RNNClassifier(hidden_size=4, batch_size=40, random_state=0)
    per_call = []
    for _ in range(40):
        copied.clear()
        clf.partial_fit(X, y, classes=[0, 1])
        per_call.append(sum(copied))
    assert per_call[2] == per_call[-1] > 0
    assert clf.loss_curve_ == [float(loss) for loss in clf.net_.history[:, "train_loss"]]
    assert clf.n_iter_ == 40


def test_loss_curve_follows_the_history_through_fit_partial_fit_and_interrupts(task, monkeypatch):
    from sklearn_rnn._estimators import _SequenceNet

    X, y = task
    clf = RNNClassifier(hidden_size=4, batch_size=40, max_iter=3, tol=0.0, random_state=0)

    def check(epochs):
        history = clf.net_.history
        assert clf.loss_curve_ == [float(row["train_loss"]) for row in history.to_list()]
        assert clf.n_iter_ == len(history) == epochs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    check(3)
    clf.partial_fit(X, y)
    check(4)
    train_step = _SequenceNet.train_step
    calls = []

    def interrupt_second_batch(self, batch, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return train_step(self, batch, **kwargs)

    monkeypatch.setattr(_SequenceNet, "train_step", interrupt_second_batch)
    with pytest.raises(KeyboardInterrupt, match="partial_fit was interrupted"):
        clf.partial_fit(X, y)
    check(4)
    monkeypatch.setattr(_SequenceNet, "train_step", train_step)
    clf.partial_fit(X, y)
    check(5)
    clf.loss_curve_ = clf.loss_curve_[:2]  # out of step with the history: rebuilt whole
    clf.partial_fit(X, y)
    check(6)


def test_history_reads_one_epoch_as_skorch_does(task):
    from skorch.history import History

    from sklearn_rnn._estimators import _History

    X, y = task
    clf = RNNClassifier(hidden_size=4, batch_size=30, max_iter=3, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    fast = clf.net_.history
    assert isinstance(fast, _History)
    plain = History(fast.to_list())
    for key in [-1, 0, 2, (-1, "train_loss"), (1, "batches"), (-1, "batches", -1, "train_loss"),
                (-1, "batches", 0), (-2, "batches", slice(None), "train_loss"), slice(1, None),
                (slice(None), "train_loss"), (-1, ("train_loss", "dur"))]:
        assert fast[key] == plain[key], key
    for key in [3, -4, (-1, "missing"), (-1, "batches", -1, "missing"), (-1, "train_loss", 0)]:
        with pytest.raises(Exception) as expected:
            plain[key]
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
            fast[key]


def test_seeds_of_an_int_random_state_are_kept_and_an_instance_advances():
    from sklearn_rnn._estimators import _Seeds

    def drawn(random_state):  # what _Seeds.draw drew before integer seeds were cached
        return tuple(int(v) for v in np.random.RandomState(random_state).randint(np.iinfo(np.int32).max, size=4))

    for seed in [0, 7, np.int64(7), 2**32 - 1]:
        assert tuple(_Seeds.draw(seed)) == tuple(_Seeds.draw(seed)) == drawn(seed)
    generator = np.random.RandomState(3)
    assert tuple(_Seeds.draw(generator)) == drawn(3) != tuple(_Seeds.draw(generator))
    with pytest.raises(ValueError, match="Seed must be between 0 and 2\\*\\*32 - 1"):
        _Seeds.draw(-1)


# ------------------------------------------------ an outside review of the estimators (session 31)
def test_the_regressors_target_scaling_weighs_the_sequences():
    # A sequence of weight 0 set the targets' mean and scale: one at 1e6 gave R2 -2.6e7.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 1)) for _ in range(60)]
    y = np.array([x.sum() for x in X])
    weight = np.ones(61)
    weight[-1] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNRegressor(hidden_size=8, max_iter=30, random_state=0).fit(
            X + [rng.normal(size=(5, 1))], np.r_[y, 1e6], sample_weight=weight)
        plain = RNNRegressor(hidden_size=8, max_iter=3, random_state=0).fit(X, y)
    np.testing.assert_allclose(model._y_mean, [y.mean()], rtol=1e-12)
    np.testing.assert_allclose(model._y_scale, [y.std()], rtol=1e-12)
    assert model.score(X, y) > 0.9
    # Equal weights give the unweighted moments, bit for bit.
    assert plain._y_mean[0] == y.mean() and plain._y_scale[0] == y.std()


def test_a_class_weight_dict_serves_batches_without_some_classes():
    # compute_sample_weight refused a dict naming a class absent from a partial_fit
    # batch: "The classes, [0, 2], are not in class_weight".
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 1)) for _ in range(12)]
    y = np.array(["a", "b", "c"] * 4)
    lacking = y != "b"
    Xa = [x for x, keep in zip(X, lacking) if keep]
    model = RNNClassifier(hidden_size=4, class_weight={"b": 5.0}, random_state=0)
    model.partial_fit(X, y, classes=["a", "b", "c"])
    model.partial_fit(Xa, y[lacking])
    np.testing.assert_array_equal(model._sample_weight(np.array([0, 1, 2]), np.ones(3)), [1.0, 5.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm = RNNClassifier(hidden_size=4, class_weight={"b": 5.0}, max_iter=2, warm_start=True,
                             random_state=0).fit(X, y)
        warm.fit(Xa, y[lacking])
    assert warm.n_iter_ == 2


def test_automatic_early_stopping_trains_on_everything_when_its_split_has_no_weight():
    # 'auto' holds out from 200 sequences on; a split drawn with only weight-0 sequences
    # refused the fit for some seeds, telling a user who never asked for early stopping to
    # turn it off. Sequences of weight 0 do not count towards the 200.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 1)) for _ in range(220)]
    y = np.array([int(x.sum() > 0) for x in X])
    weight = np.zeros(220)
    weight[:6] = 1.0
    for seed in range(4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = RNNClassifier(hidden_size=3, max_iter=2, random_state=seed).fit(X, y, sample_weight=weight)
        assert model._early_stopping is False and len(model.loss_curve_) == 2


def test_the_held_out_split_is_drawn_from_the_sequences_that_weigh():
    """A held-out split of only weight-0 sequences was refused ("holds only sequences of
    sample_weight 0"), and one that held some validated on fewer sequences than
    validation_fraction says. BaggingClassifier passes its draws as counts, so about a
    third of the sequences came with weight 0: bagging an early-stopped network failed
    for some seeds, blaming weights the user never passed."""
    from sklearn.ensemble import BaggingClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 1)) for _ in range(40)]
    y = np.array([int(x.sum() > 0) for x in X])
    weight = np.where(np.arange(40) % 3 == 0, 0.0, rng.uniform(0.5, 2.0, size=40))
    model = RNNClassifier(hidden_size=3, max_iter=2, early_stopping=True, validation_fraction=0.25, random_state=0)
    for seed in range(5):
        model.set_params(random_state=seed)
        train, valid = model._prepare(X, y, weight, incremental=False)
        positive = int((weight > 0).sum())
        assert len(valid) == int(np.ceil(0.25 * positive)) and len(train) + len(valid) == 40
        assert bool((valid.sample_weight > 0).all())
    bagged = BaggingClassifier(clone(model), n_estimators=6, random_state=0)
    with convergence_warning_allowed():
        bagged.fit(sequence_column(X), y)
    assert bagged.predict_proba(sequence_column(X)).shape == (40, 2)
    with pytest.raises(ValueError, match=r"of 1 sequence .*the ones of positive sample_weight \(39 of weight 0, or "
                                         r"0 in float32 beside the others, or alone in their class among those, "
                                         r"train with them\): expected at least 1"):
        model.fit(X, y, sample_weight=np.r_[1.0, np.zeros(39)])


@pytest.mark.parametrize("early_stopping", [True, "auto"])
def test_a_class_the_weights_keep_one_sequence_of_trains_and_the_rest_is_held_out(early_stopping):
    """A bagging draw that keeps one sequence of a rare class (3 of 220 here) left the
    stratified hold-out of the weighted sequences impossible: fits of BaggingClassifier
    failed for some seeds ("class counts {0: 127, 1: 1}"), or 'auto' silently trained
    without early stopping. The lone sequence now trains; a fit without weight-0
    sequences is refused as before, as stratification needs two of each class."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 5)), 1)) for _ in range(220)]
    y = np.zeros(220, dtype=int)
    y[:3] = 1
    weight = np.ones(220)
    weight[1:3] = 0.0  # the draw kept one of the three
    weight[100:110] = 0.0
    model = RNNClassifier(hidden_size=3, max_iter=2, early_stopping=early_stopping, random_state=0)
    train, valid = model._prepare(X, y, weight, incremental=False)
    assert model._early_stopping and len(train) + len(valid) == 220
    assert bool((valid.sample_weight > 0).all()) and not bool((valid.y == 1).any())
    lonely = np.r_[1.0, np.ones(219)]
    with pytest.raises(ValueError, match="expected at least 2 sequences of each class"):
        RNNClassifier(early_stopping=True).fit(X[2:], y[2:], sample_weight=lonely[2:])


def test_a_regressor_s_held_out_split_of_one_sequence_is_refused():
    # R2 of one held-out target is NaN, which the divergence guard read as outputs not
    # finite: the fit kept its initial weights (n_iter_ 0) and blamed the learning rate.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 1)) for _ in range(12)]
    y = np.array([x.sum() for x in X])
    regressor = RNNRegressor(hidden_size=3, max_iter=3, early_stopping=True, random_state=0)
    with pytest.raises(ValueError, match=r"\(1 for validation, 9 for training\): expected at least 2 for validation"):
        regressor.fit(X[:10], y[:10])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        regressor.fit(X, y)  # 12 sequences: 2 held out
    assert regressor.n_iter_ == 3 and np.isfinite(regressor.validation_scores_).all()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Estimator", [RNNClassifier, RNNRegressor])
def test_validation_scores_weigh_the_held_out_sequences_as_the_validation_loss_does(Estimator):
    # They were unweighted while the loss and score() read the weights: with half the
    # held-out sequences mislabelled at weight 0, best_validation_score_ was 0.475 where
    # the weighted score of the same predictions was 0.571 (weight 0.05 here: the held-out
    # split is drawn from sequences of positive weight).
    from sklearn.model_selection import train_test_split

    from sklearn_rnn._estimators import _Seeds

    rng = np.random.default_rng(1)
    X = [rng.normal(size=(rng.integers(2, 8), 2)) for _ in range(80)]
    clean = np.array([x[:, 0].sum() for x in X])
    weight = np.tile([1.0, 0.05], 40)
    y = (clean > 0).astype(int) if Estimator is RNNClassifier else clean
    y = np.where(weight < 1, 1 - y, y) if Estimator is RNNClassifier else np.where(weight < 1, -5 * y, y)
    model = Estimator(hidden_size=6, max_iter=3, early_stopping=True, validation_fraction=0.5,
                      n_iter_no_change=100, random_state=0).fit(X, y, sample_weight=weight)
    stratify = y if Estimator is RNNClassifier else None
    _, held = train_test_split(np.arange(80), test_size=0.5, random_state=_Seeds.draw(0).split, stratify=stratify)
    Xh = [X[i] for i in held]
    weighted = model.score(Xh, y[held], sample_weight=weight[held])
    assert model.best_validation_score_ == pytest.approx(weighted, abs=on_device(1e-6, 1e-4))  # the weights kept
    assert weighted != pytest.approx(model.score(Xh, y[held]), abs=1e-3)  # the weights matter here
    equal = Estimator(hidden_size=6, max_iter=3, early_stopping=True, validation_fraction=0.5,
                      n_iter_no_change=100, random_state=0)
    assert equal.fit(X, y, sample_weight=np.full(80, 2.0)).validation_scores_ == equal.fit(X, y).validation_scores_


def test_class_and_sample_weights_whose_product_overflows_are_refused():
    # class_weight {1: 1e300} with sample weights 1e10 gave inf weights, then NaN, and a
    # ConvergenceWarning blaming the learning rate; the model kept its initial weights.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 1)) for _ in range(20)]
    y = np.arange(20) % 2
    model = RNNClassifier(hidden_size=3, max_iter=2, class_weight={1: 1e300}, random_state=0)
    with pytest.raises(ValueError, match=r"times the sample weights overflows .*scale one of them down"):
        model.fit(X, y, sample_weight=np.full(20, 1e10))


def test_balanced_class_weights_of_class_totals_far_apart_are_those_of_their_ratios():
    # Totals 1e320 apart: sum / (classes * total_c) overflowed, and the message's fix
    # (scale the weights down) could not help, as balancing reads ratios only.
    X = [np.zeros((2, 1))] * 4
    y = np.array([0, 1, 1, 1])
    model = RNNClassifier(class_weight="balanced")
    model.classes_ = np.array([0, 1])
    far = model._sample_weight(y, np.array([1e-160, 1e160, 2e160, 1e160]))
    near = model._sample_weight(y, np.array([1.0, 1.0, 2.0, 1.0]))
    np.testing.assert_allclose(far / far.sum(), near / near.sum(), rtol=1e-12)
    np.testing.assert_allclose(near, [2.5, 0.625, 1.25, 0.625])  # w * total / (classes * total_c)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 1)) for _ in range(8)]
    y = np.arange(8) % 2
    fitted = RNNClassifier(hidden_size=3, max_iter=1, class_weight="balanced", random_state=0)
    assert fitted.fit(X, y, sample_weight=np.where(y == 0, 1e-160, 1e160)).n_iter_ == 1


def test_a_relu_model_predicts_and_trains_alike_whatever_shares_the_batch():
    """A short sequence padded to a long batch mate's length: the state of a 'relu' cell
    run on over that padding overflowed, which made the short sequence's prediction
    "not finite" and the batch's training loss NaN (a divergence that did not happen)."""
    rng = np.random.default_rng(0)
    X = [np.abs(rng.normal(size=(int(rng.integers(5, 15)), 1))) for _ in range(20)]
    y = np.array([x.sum() for x in X])
    with convergence_warning_allowed():
        model = RNNRegressor(hidden_size=4, max_iter=1, random_state=0, cell="relu", readout="pool",
                             conv_kernels=None, instance_norm=False, device="cpu").fit(X, y)
    with torch.no_grad():  # a state that grows over zero inputs (the padding), and stays
        net = model.module_  # at zero over large inputs (the long sequence)
        net.input_projection.weight.fill_(-1.0)
        net.input_projection.bias.fill_(0.5)
        net.recurrence.weight_hh_l0.abs_()
    short, long = X[0], np.full((5000, 1), 50.0)
    alone = np.concatenate([model.predict([short]), model.predict([long])])
    np.testing.assert_allclose(model.predict([short, long]), alone, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*became nan")
        model.partial_fit([short, long[:800]], [y[0], 0.0])
    assert np.isfinite(model.loss_curve_[-1])


@pytest.mark.parametrize("value", [0.1, 0.5])
def test_targets_constant_up_to_rounding_are_scaled_as_constant_ones(value):
    # Thirty targets of 0.1 average to 0.1 + 1.4e-17, a "spread" of 2.8e-17 that became
    # the scale: a stream's later targets standardized to about 1e16, and the model
    # stayed at 0.1 whatever it was shown. Thirty of 0.5 average exactly and were fine.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 1)) for n in rng.integers(3, 8, size=60)]
    model = RNNRegressor(random_state=0).partial_fit(X[:30], np.full(30, value))
    assert model._y_scale[0] == 1.0
    later = rng.uniform(0, 1, size=30)
    for _ in range(5):
        model.partial_fit(X[30:], later)
    assert np.ptp(model.predict(X[30:])) > 0.01  # it learns from the later targets


@pytest.mark.parametrize("Estimator", [RNNClassifier, RNNRegressor])
def test_a_weighted_score_reads_only_the_weights_ratios(Estimator):
    # scikit-learn's score summed the weights as given: weights of 1e307, which fit
    # takes, overflowed that sum (an accuracy and an R^2 of NaN; 0.0 with 3 classes).
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(30)]
    y = np.arange(30) % 3 if Estimator is RNNClassifier else rng.normal(size=30)
    model = Estimator(hidden_size=4, max_iter=2, random_state=0).fit(X, y)
    weight = rng.uniform(0.5, 2.0, size=30)
    expected = model.score(X, y, sample_weight=weight)
    for scale in (1e307, 1e-300):
        assert model.score(X, y, sample_weight=weight * scale) == pytest.approx(expected, rel=1e-12)


def test_a_weighted_out_huge_target_trains_and_a_streams_first_target_without_spread_warns():
    # numerics45 3-4: a target weighted out (weight 0) but 1e20 once standardized made
    # the loss 0 * inf = NaN (fit kept the initial weights, advising a lower learning
    # rate); one beyond float32 was refused with advice for a continued fit; a stream
    # whose first partial_fit held one target kept scale 1, y's unit, silently.
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 1)) for _ in range(40)]
    y, weight = rng.normal(size=40), np.ones(40)
    y[3], weight[3] = 1e20, 0.0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ConvergenceWarning)
        model = RNNRegressor(hidden_size=4, max_iter=3, tol=0.0, random_state=0).fit(X, y, sample_weight=weight)
    assert not [w for w in seen if "became nan" in str(w.message)]  # no divergence
    assert len(model.loss_curve_) == 3 and np.isfinite(model.loss_curve_).all()
    small = 1e-3 * y
    small[3] = 1e120
    with pytest.raises(ValueError, match=r"the target of sequence 3 \(weight 0\), \[1e\+120\], lies beyond it"):
        RNNRegressor(hidden_size=4, max_iter=1, random_state=0).fit(X, small, sample_weight=weight)
    stream = RNNRegressor(hidden_size=4, random_state=0)
    with pytest.warns(UserWarning, match=r"partial_fit: the first call's targets have no spread .* scale 1"):
        stream.partial_fit(X[:1], [5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        stream.partial_fit(X[1:3], [1.0, 2.0])  # later calls: no warning
        RNNRegressor(hidden_size=4, random_state=0).partial_fit(X[:2], [1.0, 2.0])


def test_the_second_diff_review_s_regressions_are_mended():
    # diff45b 1-5: scaled= as an iterator was used up by its check (no channel scaled,
    # silently) and a tensor of indices refused; a warm call keeping its start named the
    # earlier call's last epoch, not the one whose weights it holds; a list of dates as
    # weights was read as days since 1970; the first partial_fit's no-spread warning
    # ignored the weights; masked weights and scoring targets met scikit-learn's bare
    # "contains NaN".
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn.sequences import InputEncoder

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) * (i + 1) for i in range(6)]
    for scaled in (iter([0]), (c for c in [0]), torch.tensor([0]), np.array([0])):
        assert InputEncoder.fit(X, scaled=scaled).scaled == (0,)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 2)) for _ in range(40)]
    y = rng.normal(size=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RNNRegressor(hidden_size=4, max_iter=6, learning_rate=0.3, optimizer="sgd", clip_threshold=None,
                             early_stopping=False, random_state=1, batch_size=8).fit(X, y)
        stop = dict(model.net_.callbacks_)["stop"]
        restored = stop.best_epoch_ - stop.kept_start_  # the start of the best epoch: the one before's
        model.set_params(warm_start=True, early_stopping=True, max_iter=2, learning_rate=50.0).fit(X, y)
    assert dict(model.net_.callbacks_)["stop"].kept_call_start_
    assert model.best_epoch_ == restored  # the epoch whose weights the model holds
    dates = list(np.array(["2020-01-01", "2021-06-01", "2019-03-03"], dtype="datetime64[D]"))
    with pytest.raises(TypeError, match="sample_weight holds dates or durations"):
        RNNRegressor(hidden_size=4, max_iter=1).fit(X[:3], [1.0, 2.0, 3.0], sample_weight=dates)
    weight = np.zeros(40)
    weight[0] = 1.0
    with pytest.warns(UserWarning, match="the first call's targets have no spread among the sequences that weigh"):
        RNNRegressor(hidden_size=4, random_state=0).partial_fit(X, y, sample_weight=weight)
    masked = np.ma.masked_array(np.ones(40), mask=[1] + [0] * 39)
    with pytest.raises(ValueError, match=r"sample_weight holds a missing weight \(NaN, or a masked entry\) for 1 of 40"):
        RNNRegressor(hidden_size=4, max_iter=1).fit(X, y, sample_weight=masked)
    with pytest.raises(ValueError, match=r"y holds a missing target \(NaN, or a masked entry\) for 1 of 40"):
        model.score(X, np.ma.masked_array(y, mask=[1] + [0] * 39))
