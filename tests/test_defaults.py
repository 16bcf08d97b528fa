"""The estimators' defaults (issue 17): what 'auto' resolves to, that they learn a
dependency far back, and that the model kept is the best epoch seen."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from skorch.callbacks import Callback

from sklearn_rnn import RNNClassifier, RNNRegressor, RNNStepClassifier
from sklearn_rnn._estimators import AUTO_HOLDOUT_MIN, _SequenceNet, frame_sequences


def first_step_task(n, low, high, seed):
    """Ragged Gaussian sequences labelled by the sign of the first step's feature 0."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(low, high + 1)), 2)) for _ in range(n)]
    return X, np.array([int(x[0, 0] > 0) for x in X])


def marker_task(n, low, high, seed):
    """One channel: +-1 at the first step (the label), 0 at every later step."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        x = np.zeros((int(rng.integers(low, high + 1)), 1))
        x[0, 0] = rng.choice([-1.0, 1.0])
        X.append(x)
        y.append(int(x[0, 0] > 0))
    return X, np.array(y)


def test_the_defaults_learn_a_dependency_30_steps_back():
    # The label is read at the last step, 30 to 34 steps after it was shown (random
    # states 0-3 all scored 1.0 when the defaults changed).
    X, y = marker_task(240, 31, 35, seed=0)
    X_test, y_test = marker_task(200, 31, 35, seed=1)
    clf = RNNClassifier(max_iter=30, random_state=0).fit(X, y)  # max_iter: seconds
    assert clf.module_.cell == "gru"
    assert clf.score(X_test, y_test) >= 0.95


def test_auto_settings_resolve_by_input_and_optimizer():
    X, y = first_step_task(40, 3, 6, seed=0)
    timed = [np.column_stack([np.arange(len(x)), x]) for x in X]
    fits = {
        "untimed": RNNClassifier(max_iter=1).fit(X, y),
        "timed": RNNClassifier(time_feature=0, max_iter=1).fit(timed, y),
        "simplex": RNNClassifier(optimizer="simplex", max_iter=1).fit(X, y),
    }
    assert {name: clf.module_.cell for name, clf in fits.items()} == {
        "untimed": "gru", "timed": "decay", "simplex": "tanh"}
    # Spectral initialization on the Elman-type cells only.
    assert fits["untimed"].module_.spectral_radius is None
    assert fits["timed"].module_.spectral_radius == 1.2
    assert fits["simplex"].module_.spectral_radius == 1.2
    # 40 sequences: no held-out split; from AUTO_HOLDOUT_MIN on, one.
    assert fits["untimed"].validation_scores_ is None
    X_many, y_many = first_step_task(AUTO_HOLDOUT_MIN, 3, 6, seed=1)
    many = RNNClassifier(max_iter=1).fit(X_many, y_many)
    assert len(many.validation_scores_) == 1
    # The pooled readout, but the last state for timed input (higher on the PBC cohort)
    # and for the simplex method (temporal gradients).
    assert {name: clf.module_.readout_mode for name, clf in fits.items()} == {
        "untimed": "pool", "timed": "last", "simplex": "last"}
    assert fits["untimed"].module_.readout.in_features == 3 * 50
    # The stopping rule's tol: 3e-3 for untimed input, 1e-4 for time stamps and for the
    # simplex method; the held-out rule reads the same 'auto' as the training-loss rule.
    def stopping_tol(clf):
        return dict(clf.net_.callbacks_)["stop"].threshold

    assert {name: stopping_tol(clf) for name, clf in fits.items()} == {
        "untimed": 3e-3, "timed": 1e-4, "simplex": 1e-4}
    assert stopping_tol(many) == 3e-3
    assert stopping_tol(RNNClassifier(tol=0.05, max_iter=1).fit(X, y)) == 0.05
    # The step classifier keeps the thesis' 'auto'.
    steps = RNNStepClassifier(max_iter=1).fit(X, [x[:, :1] > 0 for x in X])
    assert steps.module_.cell == "tanh" and steps.module_.spectral_radius == 1.2
    assert steps.module_.readout_mode == "last"
    assert stopping_tol(steps) == 1e-4
    # Label smoothing: 0.1 with 'adam' and 'sgd' (timed input too), none with 'simplex'.
    assert {name: clf.net_.criterion_.label_smoothing for name, clf in fits.items()} == {
        "untimed": 0.1, "timed": 0.1, "simplex": 0.0}
    sgd = RNNClassifier(optimizer="sgd", max_iter=1).fit(X, y)
    assert sgd.net_.criterion_.label_smoothing == 0.1
    assert RNNClassifier(label_smoothing=0.25, max_iter=1).fit(X, y).net_.criterion_.label_smoothing == 0.25


def _smoothed_entropy(label_smoothing, n_classes=2):
    """The lowest cross-entropy against smoothed targets: their entropy."""
    targets = np.full(n_classes, label_smoothing / n_classes)
    targets[0] += 1 - label_smoothing
    return float(-(targets * np.log(targets)).sum())


def test_label_smoothing_is_the_loss_training_minimizes():
    # Separable data: without smoothing the training loss sinks towards 0; with it, it
    # cannot go below the entropy of the smoothed targets, and ends close to it.
    X, y = first_step_task(60, 3, 6, seed=2)
    X = [x * 3 for x in X]
    losses = {}
    for smoothing in (0.0, 0.2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf = RNNClassifier(hidden_size=16, max_iter=80, tol=0.0, label_smoothing=smoothing,
                                random_state=0).fit(X, y)
        losses[smoothing] = min(clf.loss_curve_)
    floor = _smoothed_entropy(0.2)  # 0.325
    assert losses[0.0] < 0.1
    assert floor < losses[0.2] < floor + 0.1


def test_continued_training_takes_the_current_label_smoothing():
    X, y = first_step_task(40, 3, 6, seed=0)
    clf = RNNClassifier(hidden_size=4, label_smoothing=0.0, random_state=0).partial_fit(X, y, classes=[0, 1])
    assert clf.net_.criterion_.label_smoothing == 0.0
    clf.set_params(label_smoothing=0.3).partial_fit(X, y)
    assert clf.net_.criterion_.label_smoothing == 0.3
    clf.set_params(label_smoothing="auto").partial_fit(X, y)
    assert clf.net_.criterion_.label_smoothing == 0.1


def test_a_model_file_from_before_label_smoothing_loads_as_trained_without_it():
    X, y = first_step_task(40, 3, 6, seed=0)
    clf = RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, y)
    params, state, tensors = clf._fitted_state()
    assert params["label_smoothing"] == "auto"
    del params["label_smoothing"]  # what a file written before the parameter holds
    old = RNNClassifier._from_fitted_state(params, state, tensors, "'old.safetensors'")
    assert old.label_smoothing == 0.0 and old.net_.criterion_.label_smoothing == 0.0
    np.testing.assert_array_equal(old.predict_proba(X), clf.predict_proba(X))


def test_the_thesis_configuration_is_one_argument_away():
    X, y = first_step_task(AUTO_HOLDOUT_MIN, 3, 6, seed=0)
    clf = RNNClassifier(cell="tanh", optimizer="simplex", max_iter=2).fit(X, y)
    assert clf.module_.cell == "tanh" and clf.module_.spectral_radius == 1.2
    assert clf.module_.input_projection.in_features == 2  # no framing
    clf = RNNClassifier(cell="tanh", spectral_radius=1.2, early_stopping=False, max_iter=2)
    assert clf.fit(X, y).validation_scores_ is None


def test_frame_auto_groups_steps_of_long_sequences():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(400, 600)), 1)) for _ in range(30)]
    y = np.array([x[:50].sum() for x in X])
    reg = RNNRegressor(max_iter=1).fit(X, y)
    frame = int(np.ceil(np.median([len(x) for x in X]) / 128))
    assert frame == 4 and reg.module_.conv.convolutions[0].in_channels == frame
    assert reg.predict(X[:3]).shape == (3,)
    # frame=1 reads every step; an explicit frame with time stamps is refused.
    assert RNNRegressor(frame=1, max_iter=1).fit(X, y).module_.conv.convolutions[0].in_channels == 1
    timed = [np.column_stack([np.arange(len(x)), x]) for x in X]
    with pytest.raises(ValueError, match="frame=2 groups 2 steps"):
        RNNRegressor(frame=2, time_feature=0).fit(timed, y)


def test_resolved_frame_and_holdout_are_saved_and_guard_continued_training(tmp_path):
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(int(rng.integers(300, 400)), 1)) for _ in range(AUTO_HOLDOUT_MIN)]
    y = np.array([int(x[:20].sum() > 0) for x in X])
    clf = RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, y)
    assert clf._frame == 3 and clf._early_stopping
    clf.save(tmp_path / "m.safetensors")
    loaded = RNNClassifier.load(tmp_path / "m.safetensors")
    assert (loaded._frame, loaded._early_stopping) == (3, True)
    np.testing.assert_array_equal(loaded.predict_proba(X[:5]), clf.predict_proba(X[:5]))
    # A frame other than the fitted one would change what every step means: refused.
    with pytest.raises(ValueError, match="frame=3.*frame=2"):
        loaded.set_params(frame=2).partial_fit(X[:10], y[:10])


def test_frame_sequences_pads_the_last_frame_with_the_last_step():
    framed = frame_sequences([np.arange(10.0).reshape(5, 2)], 3)[0]
    np.testing.assert_array_equal(framed, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 8, 9]])


def test_the_patience_counts_after_a_warm_up():
    # No improvement counts (tol=10): epochs 1-9 (3 * patience) are a warm-up, the
    # patience of 3 runs out at epoch 12.
    X, _ = first_step_task(40, 3, 6, seed=0)
    y = np.zeros(40)
    y[::2] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = RNNRegressor(hidden_size=4, n_iter_no_change=3, tol=10.0, max_iter=50,
                           random_state=0).fit(X, y)
    assert reg.n_iter_ == 12


def test_divergence_keeps_the_best_epoch_not_the_last_finite_one(monkeypatch):
    # Epochs 1-2 train normally, epoch 3 reports a loss spike (finite), epoch 4 a NaN:
    # the model kept is epoch 2's (the lowest training loss), not epoch 3's.
    X, y = first_step_task(48, 3, 6, seed=0)
    params = dict(hidden_size=6, batch_size=16, random_state=0, early_stopping=False)
    original = _SequenceNet.train_step
    calls = {"n": 0}

    def train_step(self, batch, **fit_params):
        calls["n"] += 1
        step = original(self, batch, **fit_params)
        if calls["n"] > 6:  # three batches per epoch
            step["loss"] = step["loss"] * (1e6 if calls["n"] <= 9 else float("nan"))
        return step

    monkeypatch.setattr(_SequenceNet, "train_step", train_step)
    with pytest.warns(ConvergenceWarning, match="with the weights of the best epoch so far"):
        clf = RNNClassifier(max_iter=10, **params).fit(X, y)
    monkeypatch.undo()
    assert clf.n_iter_ == 3 and clf.loss_curve_[2] > 1e4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        two = RNNClassifier(max_iter=2, **params).fit(X, y)
        three = RNNClassifier(max_iter=3, **params).fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), two.predict_proba(X))
    assert not np.array_equal(clf.predict_proba(X), three.predict_proba(X))


def test_the_end_of_training_keeps_the_best_epoch():
    # With a held-out split the restored epoch is the one of the best validation loss;
    # random labels make the network overfit, so that epoch comes early.
    X, _ = first_step_task(AUTO_HOLDOUT_MIN, 3, 8, seed=0)
    y = np.random.default_rng(0).integers(0, 2, len(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = RNNClassifier(hidden_size=8, max_iter=25, random_state=0).fit(X, y)
    losses = clf.net_.history[:, "valid_loss"]
    best = dict(clf.net_.callbacks_)["stop"].best_epoch_
    assert best < clf.n_iter_
    # The restored epoch is the last whose loss improved on the best so far by tol
    # ('auto': 3e-3 for untimed input); no later one was lower by that much.
    assert clf.best_validation_loss_ == losses[best - 1]
    assert clf.best_validation_loss_ < min(losses) + 3e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference = RNNClassifier(hidden_size=8, max_iter=best, random_state=0).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), reference.predict_proba(X))


class SpoilLastEpoch(Callback):
    """At the end of the last epoch (before the stopping rule sees it), records the
    weights it started from and scales every weight by -3: an update that spoils the
    weights after the epoch's mean loss was taken (a small last batch's, under Adam)."""

    def __init__(self, epochs, spoil=True):
        self.epochs = epochs
        self.spoil = spoil

    def on_epoch_begin(self, net, **kwargs):
        if len(net.history) == self.epochs:  # the history already holds this epoch
            self.start_ = {k: v.detach().clone() for k, v in net.module_.state_dict().items()}

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epochs:
            losses = net.history[:, "train_loss"]
            self.last_is_best_ = losses[-1] < min(losses[:-1]) - 3e-3
            if self.spoil:
                with torch.no_grad():
                    for p in net.module_.parameters():
                        p.mul_(-3.0)
            self.end_ = {k: v.detach().clone() for k, v in net.module_.state_dict().items()}


@pytest.mark.parametrize("spoil", [True, False])
def test_the_best_epoch_of_a_training_loss_keeps_the_weights_it_started_from_when_they_are_better(spoil):
    # Without a held-out split the epoch's mean training loss picks the best epoch (the
    # last here), but its last update is in none of its batches' losses: spoiled end
    # weights are replaced by the weights the epoch started from, and only then.
    X, y = first_step_task(60, 3, 8, seed=0)
    epochs = 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = RNNClassifier(hidden_size=8, max_iter=epochs, batch_size=16, random_state=0,
                            callbacks=[("spoil", SpoilLastEpoch(epochs, spoil))]).fit(X, y)
    spy = dict(clf.net_.callbacks_)["spoil"]  # the estimator trains a copy of its callbacks
    assert len(X) < AUTO_HOLDOUT_MIN and spy.last_is_best_  # the scenario holds
    stop = dict(clf.net_.callbacks_)["stop"]
    assert stop.best_epoch_ == epochs and stop.kept_start_ is spoil
    kept = spy.start_ if spoil else spy.end_
    for name, value in clf.net_.module_.state_dict().items():
        assert torch.equal(value, kept[name]), name
    # The spoiled weights fit the training set worse than those kept.
    kept_loss = log_loss(y, clf.predict_proba(X))
    clf.net_.module_.load_state_dict(spy.end_)
    assert (log_loss(y, clf.predict_proba(X)) > kept_loss + 0.1) is spoil


@pytest.mark.parametrize("estimator, params, expected", [
    (RNNClassifier, {"readout": "pool", "optimizer": "simplex"}, "optimizer='simplex' needs the readout"),
    (RNNStepClassifier, {"readout": "pool"}, "predicts at every step"),
])
def test_a_pooled_readout_is_refused_where_it_cannot_work(estimator, params, expected):
    X, y = first_step_task(20, 3, 6, seed=0)
    targets = y if estimator is RNNClassifier else [x[:, :1] > 0 for x in X]
    with pytest.raises(ValueError, match=expected):
        estimator(max_iter=1, **params).fit(X, targets)


def test_the_pooled_readout_reads_every_valid_step_and_no_padding():
    import torch

    from sklearn_rnn.nn import RecurrentNetwork

    net = RecurrentNetwork(2, 5, 3, cell="gru", readout="pool", spectral_radius=None,
                           generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(2, 6, 2), torch.tensor([6, 3])
    states = net.forward_states(x, lengths)
    hidden = states.hidden
    for row, length in enumerate(lengths.tolist()):
        valid = hidden[row, :length]
        expected = torch.cat([valid[-1], valid.mean(0), valid.amax(0)])
        torch.testing.assert_close(states.readout_inputs[row], expected)
    padded = x.clone()
    padded[1, 3:] = 1e3  # values past a sequence's end change nothing
    torch.testing.assert_close(net(padded, lengths), net(x, lengths))
    torch.testing.assert_close(net(x, lengths), states.outputs)


def test_the_pooled_readout_changes_nothing_under_continued_training():
    X, y = first_step_task(40, 3, 6, seed=0)
    clf = RNNClassifier(max_iter=2, warm_start=True, random_state=0).fit(X, y)
    clf.set_params(readout="last")
    with pytest.raises(ValueError, match="readout='pool'"):
        clf.fit(X, y)
    assert clf.module_.readout_mode == "pool"
