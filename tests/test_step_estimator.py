"""RNNStepClassifier: binary targets and a loss at every step (issue 6)."""

from __future__ import annotations

import os
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split

from sklearn_rnn import RNNClassifier, RNNStepClassifier, load
from sklearn_rnn._estimators import _Seeds
from sklearn_rnn.diagnostics import temporal_gradient_norms


def delayed_bits(n, *, delay=2, seed=0, low=6, high=16):
    """Per-step task: the targets are the input bit now and ``delay`` steps ago.

    The delayed column needs memory; at steps before ``delay`` its target is 0. A
    model without memory can do no better than ``log 2`` per step on that column.
    """
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        bits = rng.integers(0, 2, size=rng.integers(low, high)).astype(float)
        delayed = np.concatenate([np.zeros(delay), bits[:-delay]])
        X.append(bits[:, None])
        y.append(np.stack([bits, delayed], axis=1))
    return X, y


def quiet_fit(model, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y, **kwargs)


@pytest.fixture(scope="module")
def task():
    return delayed_bits(200, seed=0), delayed_bits(100, seed=1)


@pytest.fixture(scope="module")
def fitted(task):
    (X, y), _ = task
    model = RNNStepClassifier(hidden_size=12, learning_rate=0.03, max_iter=40, random_state=0)
    return quiet_fit(model, X, y)


# ------------------------------------------------------------------- learning
def test_learns_a_task_that_needs_memory(task, fitted):
    """Memoryless guessing of the delayed bit costs log(2) = 0.69 per step, the
    present bit costs nothing; a model that learned the delay is far below."""
    _, (X_test, y_test) = task
    nll = fitted.nll_per_step(X_test, y_test)
    assert nll < 0.15, nll
    predictions = fitted.predict(X_test)
    accuracy = np.mean(np.concatenate([(p == t).ravel() for p, t in zip(predictions, y_test)]))
    assert accuracy > 0.97


def test_an_untrained_or_memoryless_model_fails_the_threshold(task):
    """The threshold above could fail: one epoch leaves the NLL near chance."""
    (X, y), (X_test, y_test) = task
    model = quiet_fit(RNNStepClassifier(hidden_size=12, max_iter=1, random_state=0), X, y)
    assert model.nll_per_step(X_test, y_test) > 0.5


@pytest.mark.parametrize("optimizer, learning_rate", [("simplex", 0.5), ("sgd", 0.5)])
def test_thesis_optimizers_learn_with_losses_at_every_step(task, optimizer, learning_rate):
    """The simplex direction combines temporal gradients that include the readout's
    gradient at every step (thesis section 3.3)."""
    (X, y), (X_test, y_test) = task
    start = quiet_fit(RNNStepClassifier(hidden_size=12, max_iter=1, optimizer=optimizer,
                                        learning_rate=learning_rate, random_state=0), X, y)
    model = RNNStepClassifier(
        hidden_size=12, optimizer=optimizer, learning_rate=learning_rate, max_iter=60,
        switch_threshold=None, random_state=0,
    )
    quiet_fit(model, X, y)
    before, after = start.nll_per_step(X_test, y_test), model.nll_per_step(X_test, y_test)
    assert after < 0.6 * before and after < 0.5, (before, after)


def test_simplex_step_uses_every_step_temporal_gradients(task, monkeypatch):
    """The simplex optimizer receives per-step gradients aligned by absolute step."""
    from sklearn_rnn.optim import SimplexSGD

    seen = []
    original = SimplexSGD.step

    def spy(self, temporal=None, *args, **kwargs):
        seen.append((temporal.alignment, temporal.steps, tuple(temporal.names)))
        return original(self, temporal, *args, **kwargs)

    monkeypatch.setattr(SimplexSGD, "step", spy)
    (X, y), _ = task
    quiet_fit(RNNStepClassifier(hidden_size=4, optimizer="simplex", max_iter=1, batch_size=50,
                                random_state=0), X, y)
    assert seen and all(alignment == "absolute" for alignment, _, _ in seen)
    assert all("W_out" in names for _, _, names in seen)


def test_loss_is_the_nll_per_step_and_ignores_padding():
    """The training loss of a batch is the Bernoulli NLL summed over outputs, averaged
    over valid steps; nll_per_step computes the same on the whole data."""
    X = [np.array([[1.0], [0.0], [1.0]]), np.array([[0.0]])]
    y = [np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 1.0]])]
    model = quiet_fit(RNNStepClassifier(hidden_size=3, max_iter=1, random_state=0), X, y)
    proba = model.predict_proba(X)
    expected = -sum(
        (t * np.log(p) + (1 - t) * np.log(1 - p)).sum() for p, t in zip(proba, y)
    ) / 4
    assert model.nll_per_step(X, y) == pytest.approx(expected, rel=1e-10)
    assert model.score(X, y) == pytest.approx(-expected, rel=1e-10)
    # The engine's loss on the padded batch, with garbage in the padded target rows.
    dataset, _ = model._prepare(X, y, None, incremental=True)
    inputs, targets = dataset.collate(np.arange(2))
    targets[1, 1:] = 7.0
    with torch.no_grad():
        outputs = model.net_.module_.double()(inputs["x"].double(), inputs["lengths"], every_step=True)
        model.net_.module_.float()
        loss = model.net_.get_loss(outputs, targets.double(), X=inputs)
    assert float(loss) == pytest.approx(expected, rel=1e-6)



@pytest.mark.parametrize("padding", [float("inf"), float("nan")])
def test_the_every_step_loss_selects_the_valid_steps_whatever_the_padding_holds(padding):
    """A padded step's per-step loss is selected away, not multiplied by zero: an output
    there that overflowed made the batch's loss NaN."""
    from sklearn_rnn._inference import EVERY_STEP

    criterion = torch.nn.MSELoss(reduction="none")
    y_pred = torch.randn(2, 4, 1, generator=torch.Generator().manual_seed(0))
    y_true = torch.zeros(2, 4, 1)
    inputs = {"lengths": torch.tensor([4, 2]), "sample_weight": torch.tensor([1.0, 2.0])}
    expected = EVERY_STEP.loss(criterion, y_pred, y_true, inputs)
    y_pred[1, 2:] = padding
    assert float(EVERY_STEP.loss(criterion, y_pred, y_true, inputs)) == float(expected)

def test_sample_weight_weights_a_sequences_steps(task, fitted):
    _, (X, y) = task
    one = fitted.nll_per_step(X[:1], y[:1])
    two = fitted.nll_per_step(X[1:2], y[1:2])
    weighted = fitted.nll_per_step(X[:2], y[:2], sample_weight=[1.0, 0.0])
    assert weighted == pytest.approx(one)
    mixed = fitted.nll_per_step(X[:2], y[:2])
    n1, n2 = len(X[0]), len(X[1])
    assert mixed == pytest.approx((one * n1 + two * n2) / (n1 + n2))


def test_large_sample_weights_score_as_their_ratios(task, fitted):
    """The weighted sum of the steps overflowed to inf before that of the losses, so
    weights of 1e307 scored 0.0, a perfect model's; fit already scaled them (only the
    ratios count)."""
    _, (X, y) = task
    weight = np.array([1.0, 2.0, 3.0])
    expected = fitted.nll_per_step(X[:3], y[:3], sample_weight=weight)
    assert expected > 0
    assert fitted.nll_per_step(X[:3], y[:3], sample_weight=weight * 1e307) == pytest.approx(expected, rel=1e-12)
    assert fitted.score(X[:3], y[:3], sample_weight=weight * 1e307) == pytest.approx(-expected, rel=1e-12)
    logits = fitted.decision_function(X[:3])  # the validation score, of the held-out sequences
    assert RNNStepClassifier._validation_score(y[:3], logits, weight * 1e307) == pytest.approx(-expected, rel=1e-12)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_fit_minimizes_the_weighted_nll_per_step(task, early_stopping):
    """``fit``'s loss with sample weights is the weighted NLL per step that
    ``nll_per_step`` reports: scaled per loss term, not per sequence (weights of
    ``1 / T`` once gave a first-epoch loss of 0.42 where the weighted NLL was 0.69).
    A step size of 1e-9 leaves the network as initialized, so the first epoch's
    losses are the weighted NLL of that network on each split."""
    (X, y), _ = task
    weight = np.array([1.0 / len(x) for x in X])
    model = RNNStepClassifier(
        hidden_size=4, max_iter=1, batch_size=len(X), optimizer="sgd", learning_rate=1e-9,
        alpha=0.0, early_stopping=early_stopping, validation_fraction=0.5, random_state=0,
    )
    quiet_fit(model, X, y, sample_weight=weight)
    train = np.arange(len(X))
    if early_stopping:  # the split fit draws from random_state=0
        train, held = train_test_split(train, test_size=0.5, random_state=_Seeds.draw(0).split)
        expected = model.nll_per_step([X[i] for i in held], [y[i] for i in held], sample_weight=weight[held])
        assert model.net_.history[0, "valid_loss"] == pytest.approx(expected, rel=1e-5)
    expected = model.nll_per_step([X[i] for i in train], [y[i] for i in train], sample_weight=weight[train])
    assert model.loss_curve_[0] == pytest.approx(expected, rel=1e-5)


# --------------------------------------------------------------------- shapes
def test_prediction_shapes_follow_each_sequence(fitted, task):
    _, (X, _) = task
    proba = fitted.predict_proba(X[:5])
    labels = fitted.predict(X[:5])
    logits = fitted.decision_function(X[:5])
    for x, p, label, z in zip(X[:5], proba, labels, logits):
        assert p.shape == label.shape == z.shape == (len(x), 2)
        assert set(np.unique(label)) <= {0, 1}
        np.testing.assert_array_equal(label, (p > 0.5).astype(int))
    assert fitted.n_outputs_ == 2 and fitted.n_features_in_ == 1


def test_predictions_do_not_depend_on_batch_mates(fitted, task):
    _, (X, _) = task
    alone = fitted.predict_proba(X[3:4])[0]
    together = fitted.predict_proba(X[:20])[3]
    np.testing.assert_allclose(alone, together, rtol=1e-12, atol=1e-15)


def test_one_dimensional_targets_give_one_dimensional_predictions():
    X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
    y = [x[:, 0] for x in X]
    model = quiet_fit(RNNStepClassifier(hidden_size=3, max_iter=2, random_state=0), X, y)
    assert model.n_outputs_ == 1
    assert [p.shape for p in model.predict(X)] == [(3,), (2,)]
    assert model.predict_proba(X)[0].shape == (3, 1)


def test_padded_array_input_and_3d_targets():
    X = np.zeros((4, 5, 2))
    y = np.ones((4, 5, 3))
    model = quiet_fit(RNNStepClassifier(hidden_size=3, max_iter=2, random_state=0), X, y)
    assert [p.shape for p in model.predict_proba(X)] == [(5, 3)] * 4


def test_targets_padded_with_nan_beside_a_padded_array_train_as_lists():
    # A NaN-padded y was refused ("y[0] holds nan"), though X's padding is read as such.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in (3, 5, 4, 2)]
    y = [(x > 0).astype(float) for x in X]
    padded_X, padded_y = np.full((4, 5, 2), np.nan), np.full((4, 5, 2), np.nan)
    for i, (x, t) in enumerate(zip(X, y)):
        padded_X[i, : len(x)], padded_y[i, : len(t)] = x, t
    params = dict(hidden_size=3, max_iter=2, random_state=0)
    lists = quiet_fit(RNNStepClassifier(**params), X, y)
    padded = quiet_fit(RNNStepClassifier(**params), padded_X, padded_y)
    for a, b in zip(padded.predict_proba(padded_X), lists.predict_proba(X)):
        np.testing.assert_array_equal(a, b)


def test_a_last_step_with_nothing_observed_is_padding_and_the_error_says_so():
    X, y = _small()
    X[2] = np.vstack([X[2][:3], np.full((1, 1), np.nan)])  # nothing observed at the last step
    with pytest.raises(ValueError, match=r"y\[2\] has 4 steps but sequence 2 of X has 3.*"
                                         r"all-NaN rows, of X and of y, are padding"):
        RNNStepClassifier(max_iter=1).fit(X, y)


def test_classifier_keeps_one_label_per_sequence(task):
    (X, y), _ = task
    labels = np.array([int(t[-1, 0]) for t in y])
    clf = quiet_fit(RNNClassifier(hidden_size=4, max_iter=2, random_state=0), X, labels)
    assert clf.predict(X[:3]).shape == (3,)
    assert not is_classifier(RNNStepClassifier())


# --------------------------------------------------------------------- errors
def _small():
    X = [np.zeros((3, 1)), np.zeros((2, 1)), np.zeros((4, 1))]
    y = [np.zeros((3, 2)), np.zeros((2, 2)), np.zeros((4, 2))]
    return X, y


def test_error_names_the_sequence_whose_length_differs():
    X, y = _small()
    y[1] = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"y\[1\] has 5 steps but sequence 1 of X has 2"):
        RNNStepClassifier(max_iter=1).fit(X, y)


def test_error_on_differing_number_of_outputs():
    X, y = _small()
    y[2] = np.zeros((4, 3))
    with pytest.raises(ValueError, match=r"y\[2\] has 3 outputs per step but y\[0\] has 2"):
        RNNStepClassifier(max_iter=1).fit(X, y)


@pytest.mark.parametrize("bad", [0.5, 2.0, -1.0])
def test_error_on_non_binary_targets(bad):
    X, y = _small()
    y[1] = y[1].copy()
    y[1][1, 0] = bad
    with pytest.raises(ValueError, match=r"y\[1\] holds .* at step 1, output 0: the targets must be 0 or 1"):
        RNNStepClassifier(max_iter=1).fit(X, y)


def test_a_missing_target_before_a_sequences_end_is_refused_with_its_own_fix():
    """A NaN target inside a sequence (a label unknown at that step) got the advice for
    values other than 0 and 1, 'Threshold or binarize them first'."""
    X, y = _small()
    y[1] = y[1].copy()
    y[1][1, 0] = np.nan
    with pytest.raises(ValueError, match=r"y\[1\] holds NaN at step 1, output 0: a missing target.*trailing "
                                         r"all-NaN rows.*Fill it with 0 or 1, or drop step 1 from both X\[1\] and y\[1\]") as error:
        RNNStepClassifier(max_iter=1).fit(X, y)
    assert "binarize" not in str(error.value)


@pytest.mark.parametrize("sentinel", [-1.0, -100.0])
def test_targets_padded_with_a_sentinel_are_told_to_pad_with_nan(sentinel):
    # A (n, T, k) array padded with -1 (or PyTorch's -100) past X's ends was told to
    # "Threshold or binarize them first", which would turn the padding into targets.
    X, y = _small()
    T = max(len(t) for t in y)
    padded = np.full((len(y), T, y[0].shape[1]), sentinel)
    for i, t in enumerate(y):
        padded[i, : len(t)] = t
    short = next(i for i, t in enumerate(y) if len(t) < T)
    with pytest.raises(ValueError, match=rf"y\[{short}\] holds {sentinel!r} at step {len(y[short])}, output 0.*If "
                       rf"{sentinel!r} pads y past the end of sequence {short} of X, pad with NaN instead") as error:
        RNNStepClassifier(max_iter=1).fit(X, padded)
    assert "binarize" not in str(error.value)


def test_error_on_one_target_per_sequence():
    X, _ = _small()
    with pytest.raises(ValueError, match="one \\(T_i, k\\) array of 0/1 targets per sequence"):
        RNNStepClassifier(max_iter=1).fit(X, np.array([0, 1, 0]))


def test_error_on_wrong_number_of_sequences_and_outputs_after_fit():
    X, y = _small()
    with pytest.raises(ValueError, match="y has 2 entries, but X has 3 sequences"):
        RNNStepClassifier(max_iter=1).fit(X, y[:2])
    model = quiet_fit(RNNStepClassifier(hidden_size=2, max_iter=1, random_state=0), X, y)
    wide = [np.zeros((len(x), 3)) for x in X]
    # Once told to 'refit with warm_start=False', which does not apply to scoring.
    for call in (model.partial_fit, model.score, model.nll_per_step):
        with pytest.raises(ValueError, match=r"y has 3 outputs per step, but the fitted model has 2: scoring it "
                                             r"and training it further .* Pass those, or fit a new model on 3"):
            call(X, wide)


# ------------------------------------------------- scikit-learn conventions
def test_clone_and_params_round_trip():
    model = RNNStepClassifier(hidden_size=7, optimizer="simplex", clip_threshold=3.0)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert copy.set_params(hidden_size=9).hidden_size == 9
    assert "class_weight" not in model.get_params()


def test_pickle_and_save_load_predict_the_same(fitted, task, tmp_path):
    _, (X, y) = task
    again = pickle.loads(pickle.dumps(fitted))
    path = os.fspath(tmp_path / "steps.safetensors")
    fitted.save(path)
    loaded = load(path)
    assert type(loaded) is RNNStepClassifier and loaded.n_outputs_ == 2
    for other in (again, loaded):
        for a, b in zip(other.predict_proba(X[:5]), fitted.predict_proba(X[:5])):
            np.testing.assert_array_equal(a, b)
        assert other.score(X, y) == fitted.score(X, y)


def test_grid_search_uses_its_own_score(task):
    (X, y), _ = task
    search = GridSearchCV(
        RNNStepClassifier(max_iter=3, learning_rate=0.03, random_state=0),
        {"hidden_size": [2, 12]},
        cv=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X[:80], y[:80])
    scores = search.cv_results_["mean_test_score"]
    assert np.all(scores < 0) and np.all(np.isfinite(scores))
    assert search.best_score_ == pytest.approx(-search.best_estimator_.nll_per_step(X[:40], y[:40]), abs=1.0)
    assert search.score(X[80:120], y[80:120]) == search.best_estimator_.score(X[80:120], y[80:120])


def test_early_stopping_scores_minus_the_exact_validation_nll(task):
    (X, y), _ = task
    model = RNNStepClassifier(hidden_size=6, max_iter=8, early_stopping=True,
                              validation_fraction=0.25, n_iter_no_change=3, random_state=0)
    quiet_fit(model, X, y)
    assert len(model.validation_scores_) == model.n_iter_
    assert model.best_validation_score_ == max(model.validation_scores_) or model.n_iter_ < 8
    assert all(score < 0 for score in model.validation_scores_)


def test_seeded_fits_are_identical_and_partial_fit_continues(task):
    (X, y), _ = task
    a = quiet_fit(RNNStepClassifier(hidden_size=4, max_iter=3, random_state=5), X, y)
    b = quiet_fit(RNNStepClassifier(hidden_size=4, max_iter=3, random_state=5), X, y)
    np.testing.assert_array_equal(a.predict_proba(X[:2])[0], b.predict_proba(X[:2])[0])
    model = RNNStepClassifier(hidden_size=4, random_state=0)
    first = model.partial_fit(X, y).nll_per_step(X, y)
    for _ in range(5):
        model.partial_fit(X, y)
    assert model.nll_per_step(X, y) < first and model.n_iter_ == 6


def test_partial_fit_on_a_fitted_estimator_validates_its_parameters_as_fit_does(task):
    # scikit-learn validates partial_fit's parameters on the first call only.
    from sklearn.utils._param_validation import InvalidParameterError

    (X, y), _ = task
    model = RNNStepClassifier(hidden_size=4, random_state=0).partial_fit(X, y)
    model.set_params(batch_size=0)
    with pytest.raises(InvalidParameterError, match="The 'batch_size' parameter of RNNStepClassifier"):
        model.partial_fit(X, y)
    assert model.n_iter_ == 1


def test_gradient_diagnostics_put_the_loss_at_every_step(fitted, task):
    _, (X, y) = task
    stats = temporal_gradient_norms(fitted, X[:10], y[:10])
    assert stats.alignment == "absolute"
    assert stats.norms.shape == (max(len(x) for x in X[:10]),)


def test_scoring_an_unfitted_model_says_it_is_not_fitted():
    # score and nll_per_step raised AttributeError ('n_features_in_').
    from sklearn.exceptions import NotFittedError

    X, y = _small()
    for call in (RNNStepClassifier().score, RNNStepClassifier().nll_per_step):
        with pytest.raises(NotFittedError):
            call(X, y)


def test_targets_in_a_series_without_label_0_and_frames_scored_without_a_names_warning():
    # A Series of targets whose labels lack 0 (what a split leaves) failed with
    # KeyError: 0; score and nll_per_step on the frames of fit warned "X does not have
    # valid feature names" (the validated arrays reached the prediction).
    import pandas as pd

    rng = np.random.default_rng(0)
    frames = [pd.DataFrame(rng.normal(size=(int(rng.integers(3, 7)), 2)), columns=["a", "b"])
              for _ in range(12)]
    Y = pd.Series([(frame[["a"]].to_numpy() > 0).astype(float) for frame in frames],
                  index=range(100, 112))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNStepClassifier(hidden_size=4, max_iter=2, random_state=0).fit(frames, Y)
    assert model.n_outputs_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score = model.score(frames, Y)
        assert score == -model.nll_per_step(frames, Y)


def test_targets_as_a_tensor_or_table_get_the_arrays_check_and_no_outputs_are_refused():
    # An (n, T) tensor passed the check that refuses an (n, T) array (and trained as one
    # output), a DataFrame was read by its column labels ("y[0] has shape ()"), and k = 0
    # was reported as "0 steps".
    X = [np.random.default_rng(i).normal(size=(4, 2)) for i in range(5)]
    flat = np.random.default_rng(0).integers(0, 2, size=(5, 4)).astype(float)
    model = RNNStepClassifier(hidden_size=3, max_iter=1, random_state=0)
    import pandas as pd

    for y in (flat, torch.as_tensor(flat), pd.DataFrame(flat)):
        with pytest.raises(ValueError, match=r"y is an array of shape \(5, 4\).*\(T_i, k\) array"):
            model.fit(X, y)
    with pytest.raises(ValueError, match=r"y\[0\] has shape \(4, 0\): expected \(T_i, k\) with k >= 1"):
        model.fit(X, [np.empty((4, 0))] * 5)
    assert model.fit(X, torch.as_tensor(flat[:, :, None])).n_outputs_ == 1  # (n, T, k): taken


def test_the_validation_score_weighs_each_sequence_s_steps_by_its_weight():
    # Unweighted, a held-out sequence of weight 0 counted as much as any other.
    from sklearn_rnn import RNNStepClassifier

    outputs = [np.array([[0.0], [2.0]]), np.array([[-3.0]])]
    targets = [np.array([[1.0], [1.0]]), np.array([[1.0]])]
    nll = lambda z: np.logaddexp(0.0, -z)  # noqa: E731  -log sigmoid(z), target 1
    score = RNNStepClassifier._validation_score
    assert score(targets, outputs, None) == pytest.approx(-(nll(0.0) + nll(2.0) + nll(-3.0)) / 3)
    assert score(targets, outputs, np.array([1.0, 0.0])) == pytest.approx(-(nll(0.0) + nll(2.0)) / 2)
    assert score(targets, outputs, np.array([1.0, 2.0])) == pytest.approx(-(nll(0.0) + nll(2.0) + 2 * nll(-3.0)) / 4)


def test_the_net_s_outputs_at_every_step_follow_the_dataset_s_order():
    # Outputs at every step came back in the batches' order (sorted by length): where
    # the batches' widths matched, row 0 was another sequence's outputs without a word.
    import warnings

    from sklearn_rnn import RNNStepClassifier
    from sklearn_rnn.sequences import SequenceDataset

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in (5, 2, 5, 3)]
    Y = [(x[:, :1] > 0).astype(float) for x in X]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RNNStepClassifier(hidden_size=3, max_iter=2, batch_size=2, random_state=0).fit(X, Y)
    outputs = model.net_.forward(SequenceDataset(model._encoder.encode(X, device="cpu"))).numpy()
    assert outputs.shape == (4, 5, 1)
    for logits, x, proba in zip(outputs, X, model.predict_proba(X)):
        np.testing.assert_allclose(1 / (1 + np.exp(-logits[: len(x), 0])), np.asarray(proba)[:, -1], atol=1e-5)
        assert np.isnan(logits[len(x):]).all()  # past its last step


def test_a_scorer_by_name_is_refused_and_a_callable_scores_each_epoch(task):
    """scikit-learn's scorers take one target per sequence; given by name, they failed
    after the first epoch on the per-step targets ('unknown is not supported')."""
    from skorch.callbacks import EpochScoring

    (X, y), _ = task
    kwargs = dict(hidden_size=4, max_iter=2, early_stopping=True, random_state=0)
    by_name = RNNStepClassifier(callbacks=[("acc", EpochScoring("accuracy"))], **kwargs)
    with pytest.raises(ValueError, match="scoring='accuracy': scikit-learn's scorers take one target per sequence"):
        by_name.fit(X[:40], y[:40])

    def mean_output(net, X, y):
        outputs = net.forward(X)
        assert outputs.shape == y.shape  # both padded with NaN to (n, T, k)
        return float(outputs.nanmean())

    model = quiet_fit(RNNStepClassifier(callbacks=[("mean", EpochScoring(mean_output, name="mean"))], **kwargs), X[:40], y[:40])
    assert np.isfinite(model.net_.history[:, "mean"]).all()


@pytest.mark.parametrize("on_train", [True, False])
def test_a_callable_epoch_scoring_gets_every_batch_padded_with_nan_to_the_longest_sequence(on_train):
    """Each length bucket is padded to its own T: over more than one batch, skorch's
    joining of the cached targets failed at the end of the first epoch ('all the input
    array dimensions except for the concatenation axis must match exactly'). Padded with
    NaN past each sequence's end, the outputs and targets are the scorer's to mask: on
    the held-out sequences their NLL per step is the validation score."""
    from skorch.callbacks import EpochScoring

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in rng.integers(1, 20, size=40)]
    y = [(x[:, :1] > 0).astype(float) for x in X]
    seen = []

    def log_likelihood(net, X, y):
        outputs = net.forward(X).numpy()
        assert outputs.shape == y.shape and (np.isnan(outputs) == np.isnan(y)).all()
        seen.append(sorted((~np.isnan(y[:, :, 0])).sum(axis=1)))
        steps = ~np.isnan(y)
        return -float(np.mean(np.logaddexp(0.0, outputs[steps]) - y[steps] * outputs[steps]))

    scoring = EpochScoring(log_likelihood, on_train=on_train, name="ll", lower_is_better=False)
    model = quiet_fit(RNNStepClassifier(hidden_size=4, max_iter=2, batch_size=8, early_stopping=True,
                                        validation_fraction=0.5, random_state=0,
                                        callbacks=[("ll", scoring)]), X, y)
    history = model.net_.history
    assert len(seen) == 2 and all(len(lengths) == 20 for lengths in seen)  # 3 batches of 8 or fewer
    _, held_out = train_test_split(np.arange(40), test_size=0.5, random_state=_Seeds.draw(0).split)
    lengths = sorted(len(X[i]) for i in (held_out if not on_train else np.setdiff1d(np.arange(40), held_out)))
    assert seen[0] == lengths
    if not on_train:  # the end-of-epoch weights on the held-out sequences
        np.testing.assert_allclose(history[:, "ll"], history[:, "valid_score"], rtol=1e-5)


def test_a_warm_refit_predicts_in_the_shape_of_its_own_targets():
    """A warm refit on (T,) targets after (T, 1) ones kept predicting (T, 1), though
    predictions take the shape of y in fit; scoring leaves the shape alone."""
    X, y = _small()
    column = [np.asarray(target)[:, :1] for target in y]
    model = quiet_fit(RNNStepClassifier(hidden_size=2, max_iter=1, warm_start=True, random_state=0), X, column)
    assert model.predict(X)[0].shape == (len(X[0]), 1)
    quiet_fit(model, X, [target.ravel() for target in column])
    assert model.predict(X)[0].shape == (len(X[0]),)
    model.score(X, column)
    assert model.predict(X)[0].shape == (len(X[0]),)


def test_targets_labelled_by_their_frames_rows_in_another_order_are_refused():
    # from_long_format(as_frame=True) sorts each patient's visits by time; a groupby of
    # the table keeps its row order: fit and score paired visits with other visits'
    # targets, silently (a panel's targets were checked, a list of frames' were not).
    from sklearn_rnn.sequences import from_long_format

    visits = pd.DataFrame({"patient": ["b", "a", "b", "a", "a"], "day": [30, 10, 0, 0, 20],
                           "bili": [1.5, 0.7, 1.2, 0.5, 0.9], "flag": [1, 1, 1, 0, 1]})
    frames, _ = from_long_format(visits.drop(columns="flag"), id_column="patient", time_column="day", as_frame=True)
    y = [group for _, group in visits.groupby("patient")["flag"]]
    model = RNNStepClassifier(hidden_size=3, max_iter=1, time_feature="day", random_state=0)
    with pytest.raises(ValueError, match=r"labelled by the rows of X\[0\] \(3, 1, 4, ...\) in another order \(1, 3, 4"):
        model.fit(frames, y)
    aligned = [target.loc[frame.index] for target, frame in zip(y, frames)]
    model.fit(frames, aligned)
    with pytest.raises(ValueError, match="in another order"):
        model.score(frames, y)
    assert np.isfinite(model.score(frames, aligned))
    # The frames held in a Series, a one-column DataFrame or sequence_column's array (all
    # forms of X) went unchecked (long43 review).
    from sklearn_rnn.sequences import sequence_column

    for held in (pd.Series(frames), pd.DataFrame({"visits": frames}), sequence_column(frames)):
        with pytest.raises(ValueError, match=r"labelled by the rows of X\[0\] \(3, 1, 4, ...\) in another order"):
            model.fit(held, y)
    # The first patient of a table with pandas' default index: its targets' row labels
    # are 0, 1, 2, read as positions beside a frame of rows 1, 2, 0 (long43 review).
    first = visits.sort_values("patient", kind="stable").reset_index(drop=True)
    first = first.iloc[[1, 2, 0, 3, 4]].reset_index(drop=True).assign(day=[10, 20, 0, 30, 0])
    frames, _ = from_long_format(first.drop(columns="flag"), id_column="patient", time_column="day", as_frame=True)
    y = [group for _, group in first.groupby("patient")["flag"]]
    assert y[0].index.equals(pd.RangeIndex(3)) and frames[0].index.tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match=r"in another order .* or, if its entries are already in the frame's step "
                                         r"order \(an index reset\), pass target\.to_numpy\(\)"):
        model.fit(frames, y)
    model.fit(frames, [target.loc[frame.index] for target, frame in zip(y, frames)])


def test_per_step_targets_as_a_table_and_misgiven_targets_or_weights_are_named_with_the_fix():
    # An (n, T) target table beside an (n, T) table X was refused without the fix (its
    # list form is taken); weights given per step met numpy's "inhomogeneous shape"; y as
    # an iterator was "a scalar", and y=None asked for "one target per sequence".
    X = np.array([[0.1, 0.5, -0.2, 0.3], [1.0, -1.0, 0.2, np.nan]])
    Y = (np.nan_to_num(X) > 0).astype(float)
    Y[1, 3] = np.nan  # padding, as in X
    model = RNNStepClassifier(hidden_size=3, max_iter=1, random_state=0)
    with pytest.raises(ValueError, match=r"y is an array of shape \(2, 4\).*pass list\(y\) or y\[:, :, None\]"):
        model.fit(X, Y)
    assert [p.shape for p in model.fit(X, list(Y)).predict(X)] == [(4,), (3,)]
    sequences, targets = [np.zeros((2, 1)), np.ones((3, 1))], [np.array([0, 1]), np.array([1, 0, 1])]
    with pytest.raises(ValueError, match=r"one weight per sequence of X, shape \(2,\); got 2 entries of different lengths"):
        model.fit(sequences, targets, sample_weight=[np.array([1.0, 2.0]), np.array([1.0, 1.0, 0.0])])
    with pytest.raises(ValueError, match=r"y is an iterator \(list_iterator\).*per-step targets.*list\(y\)"):
        model.fit(sequences, iter(targets))
    with pytest.raises(ValueError, match=r"pass one \(T_i, k\) array of per-step targets per sequence"):
        model.fit(sequences, None)


def test_score_gives_each_warning_about_x_once():
    # nll_per_step validated X, then its forward pass validated X again: every warning
    # about X came twice (infer43 review).
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(10)]
    y = [(x[:, :1] > 0).astype(float) for x in X]
    model = quiet_fit(RNNStepClassifier(hidden_size=3, max_iter=1, random_state=0), X, y)
    frames = [pd.DataFrame(x, columns=["a", "b"]) for x in X]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.score(frames, y)
    assert len([w for w in caught if "feature names" in str(w.message)]) == 1


def _ragged_steps():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in rng.integers(2, 12, size=30)]
    y = [np.hstack([(x[:, :1] > 0), (x[:, 1:] > 0)]).astype(float) for x in X]
    return X, y


def test_scikit_learn_scorer_objects_are_refused_as_scorer_names_are():
    # step44: make_scorer / get_scorer objects passed the `callable` test and failed the
    # fit after its first epoch ("unknown is not supported").
    from sklearn.metrics import accuracy_score, get_scorer, make_scorer
    from skorch.callbacks import BatchScoring, EpochScoring

    X, y = _ragged_steps()
    for callback in (EpochScoring(make_scorer(accuracy_score), on_train=True, name="acc"),
                     EpochScoring(get_scorer("neg_log_loss"), name="nll"),
                     BatchScoring(make_scorer(accuracy_score), on_train=True, name="acc")):
        model = RNNStepClassifier(hidden_size=4, max_iter=2, random_state=0, callbacks=[("s", callback)])
        with pytest.raises(ValueError, match=r"callback 's' is an? \w+ of scoring=make_scorer\(.*scikit-learn's "
                                             r"scorers take one target per sequence"):
            model.fit(X, y)
        assert not hasattr(model, "net_")


def test_a_rolled_back_call_leaves_the_scorers_best_scores_as_they_were():
    # step44: a call that failed after scoring its epoch left that epoch's loss as the
    # scorers' best; the retried epoch was then not marked train_loss_best.
    from skorch.callbacks import Callback

    class FailOnce(Callback):
        def __init__(self, box):
            self.box = box

        def on_epoch_end(self, net, **kwargs):
            if self.box.get("fail"):
                self.box["fail"] = False
                raise ValueError("a logger's disk is full")

    X, y = _ragged_steps()

    def stream(fail_at):
        box = {}
        model = RNNStepClassifier(hidden_size=4, batch_size=8, random_state=0, learning_rate=0.05,
                                  callbacks=[("f", FailOnce(box))])
        for call in range(4):
            if call == fail_at:
                dict(model.net_.callbacks_)["f"].box["fail"] = True
                with pytest.raises(ValueError, match="disk is full"):
                    model.partial_fit(X, y)
            model.partial_fit(X, y)
        return model.net_.history

    clean, retried = stream(None), stream(2)
    assert retried[:, "train_loss"] == clean[:, "train_loss"]
    assert retried[:, "train_loss_best"] == clean[:, "train_loss_best"] == [True] * 4


def test_partial_fit_keeps_the_users_callbacks_when_only_the_stopping_rule_changes():
    # step44: tol and n_iter_no_change, which partial_fit does not use, rebuilt the
    # user's callbacks between calls (an epoch counter read 1, 2, 1, 2).
    from skorch.callbacks import Callback

    class Count(Callback):
        def initialize(self):
            self.seen_ = 0
            return self

        def on_epoch_end(self, net, **kwargs):
            self.seen_ += 1

    X, y = _ragged_steps()
    for change in ({"tol": 1e-3}, {"n_iter_no_change": 3}):
        model = RNNStepClassifier(hidden_size=4, batch_size=8, random_state=0, callbacks=[("c", Count())])
        seen = []
        for call in range(4):
            if call == 2:
                model.set_params(**change)
            model.partial_fit(X, y)
            seen.append(dict(model.net_.callbacks_)["c"].seen_)
        assert seen == [1, 2, 3, 4], change


def test_kept_start_weights_are_not_also_told_to_increase_max_iter():
    # step44: "none of the epochs lowered the training loss ... lower learning_rate"
    # came with "still improving ... increase max_iter".
    X, y = _ragged_steps()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RNNStepClassifier(hidden_size=4, batch_size=8, random_state=0, max_iter=4, learning_rate=5.0).fit(X, y)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert any("keeps those" in message for message in messages), messages
    assert not any("Increase max_iter" in message for message in messages), messages


def test_a_label_outside_0_1_on_a_last_step_inside_x_is_told_to_binarize():
    # step44: a 2 on a sequence's last step (inside X) was explained as padding past X's end.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)), rng.normal(size=(3, 2))]
    with pytest.raises(ValueError, match=r"y\[0\] holds 2.0 at step 3, output 0: .* Threshold or binarize them "
                                         r"first \(per-step class labels: one output per class") as error:
        RNNStepClassifier(max_iter=1).fit(X, [np.array([0, 1, 0, 2]), np.array([2, 1, 0])])
    assert "pads y" not in str(error.value)


def test_callbacks_are_kept_across_a_shared_events_state_and_rebuilt_for_a_change_in_a_large_array():
    # step44: the callbacks were keyed by the repr of their settings: a shared Event set by
    # another thread read as a change (every callback rebuilt, a counter reset to 1), and a
    # change inside an array of over 1,000 entries (repr'd with "...") was missed.
    import threading

    from skorch.callbacks import Callback

    class Count(Callback):
        def __init__(self, flag=None, weights=None):
            self.flag, self.weights = flag, weights

        def initialize(self):
            self.seen_, self.sums_ = 0, []
            return self

        def on_epoch_end(self, net, **kwargs):
            self.seen_ += 1
            self.sums_.append(float(self.weights.sum()))

    X, y = _ragged_steps()
    flag, weights = threading.Event(), np.zeros(2000)
    given = Count(flag, weights)
    model = RNNStepClassifier(hidden_size=4, batch_size=8, random_state=0, callbacks=[("c", given)])
    model.partial_fit(X, y)
    flag.set()
    model.partial_fit(X, y)
    assert dict(model.net_.callbacks_)["c"].seen_ == 2  # kept
    weights[1000] = 5.0
    model.partial_fit(X, y)
    assert dict(model.net_.callbacks_)["c"].sums_ == [5.0]  # rebuilt from the setting as it is now


def test_masked_entries_of_targets_and_weights_are_missing_values_as_in_x():
    # long45 1: y and sample_weight were read with the values under the mask: a masked
    # per-step target was trained and scored on, a masked weight counted at its hidden
    # value, a 3D y masked past each end (as X is) was refused for its step count.
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(4)]
    y = [(x[:, :1] > 0).astype(float) for x in X]
    masked = [np.ma.masked_array(t) for t in y]
    masked[0][1, 0] = np.ma.masked
    small = dict(hidden_size=4, max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(ValueError, match=r"y\[0\] holds NaN at step 1, output 0: a missing target"):
            RNNStepClassifier(**small).fit(X, masked)
        model = RNNStepClassifier(**small).fit(X, y)
        with pytest.raises(ValueError, match="holds NaN at step 1"):
            model.score(X, masked)
        weights = np.ma.masked_array([1, 1, 1e6, 1.0], mask=[0, 0, 1, 0])
        with pytest.raises(ValueError, match="NaN"):
            model.score(X, y, sample_weight=weights)
        dense = rng.normal(size=(4, 4, 2))
        targets = (dense[..., :1] > 0).astype(float)
        lengths = np.array([3, 4, 2, 4])
        padded = np.arange(4)[None, :, None] >= lengths[:, None, None]
        Xm = np.ma.masked_array(dense, np.broadcast_to(padded, dense.shape))
        ym = np.ma.masked_array(targets, np.broadcast_to(padded, targets.shape))
        fitted = RNNStepClassifier(**small).fit(Xm, ym)
        alike = RNNStepClassifier(**small).fit([d[:n] for d, n in zip(dense, lengths)],
                                               [t[:n] for t, n in zip(targets, lengths)])
        for a, b in zip(fitted.predict_proba(Xm), alike.predict_proba(Xm)):
            np.testing.assert_array_equal(a, b)
        labels = np.ma.masked_array([0, 1, 0, 1], mask=[0, 0, 0, 1])
        with pytest.raises(ValueError, match="missing label"):
            RNNClassifier(**small).fit(X, labels)
        unmasked = RNNClassifier(**small).fit(X, np.ma.masked_array([0, 1, 0, 1]))
        assert unmasked.classes_.dtype.kind == "i"  # no masked entry: the labels as they are
        with pytest.raises(ValueError, match="y is a masked array with masked entries of <U1"):
            RNNClassifier(**small).fit(X, np.ma.masked_array(list("abab"), mask=[0, 0, 0, 1]))


def test_per_step_targets_and_weights_of_other_shapes_get_the_fix_that_works():
    # long45 3-5: a DataFrame y of shape (n, T) was told to pass list(y) (its column
    # names); string labels got numpy's conversion error without a way forward; per-step
    # weights shaped like y, (n, T, 1), got scikit-learn's bare "Found array with dim 3".
    import warnings

    import pandas as pd
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(6, 5)), columns=[f"t{i}" for i in range(5)])
    model = RNNStepClassifier(hidden_size=4, max_iter=1, random_state=0)
    with pytest.raises(ValueError, match=r"pass list\(y.to_numpy\(\)\) or y.to_numpy\(\)\[:, :, None\]"):
        model.fit(table, (table > 0).astype(int))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(table, list((table > 0).astype(float).to_numpy()))  # the fix works
    X = [rng.normal(size=(3, 2)) for _ in range(4)]
    with pytest.raises(ValueError, match=r"y\[0\] is not numeric .* Binarize labels first: .*LabelBinarizer"):
        model.fit(X, [np.array(["no", "yes", "no"])] * 4)
    y = [(x[:, :1] > 0).astype(float) for x in X]
    for weights, shape in (([np.ones((3, 1))] * 4, r"\(4, 3, 1\)"), ([np.ones(3)] * 4, r"\(4, 3\)")):
        with pytest.raises(ValueError, match=rf"sample_weight has shape {shape}: expected \(4,\), one weight per "
                                             r"sequence of X. RNNStepClassifier weighs whole sequences"):
            model.fit(X, y, sample_weight=weights)


def test_flat_sequences_keep_integer_values_and_refuse_nan_and_generators():
    # long45 2, 6: a ragged batch turned int64 values into float32 (2**40 + 1 came back
    # as 2**40), NaN passed from_arrays silently though its docstring refuses it, and a
    # generator met "object of type 'generator' has no len()".
    from sklearn_rnn.sequences import FlatSequences

    big = FlatSequences(torch.tensor([[2**40 + 1], [3], [4]], dtype=torch.long), torch.tensor([2, 1]))
    values, _ = big.batch([0, 1])
    assert values.dtype == torch.int64 and values[0, 0, 0].item() == 2**40 + 1 and values[1, 1, 0].item() == 0
    ragged = FlatSequences.from_arrays([np.array([[1], [2]]), np.array([[0]])], dtype=torch.long)
    assert ragged.batch([0, 1])[0].dtype == torch.int64
    with pytest.raises(ValueError, match="sequence 1 holds NaN. Encode missing values first"):
        FlatSequences.from_arrays([np.ones((2, 1)), np.array([[1.0], [np.nan]])])
    with pytest.raises(TypeError, match=r"got generator. Pass a list, e.g. list\(arrays\)"):
        FlatSequences.from_arrays(np.ones((2, 1)) for _ in range(2))
