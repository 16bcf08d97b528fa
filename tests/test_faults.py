"""Training faults: divergence (non-finite loss) and KeyboardInterrupt during fit."""

import os
import pickle
import signal
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import Callback

from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn._estimators import _SequenceNet

N, BATCH = 48, 16  # three batches per epoch
TINY = dict(hidden_size=6, batch_size=BATCH, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 7), 2)) for _ in range(N)]
    y_class = np.array([int(x[:, 0].sum() > 0) for x in X])
    y_real = np.array([x[:, 0].sum() for x in X])
    return X, y_class, y_real


def reference(cls, X, y, epochs, **params):
    """The same model trained for exactly ``epochs`` epochs, without faults."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return cls(max_iter=epochs, n_iter_no_change=100, **TINY, **params).fit(X, y)


def fail_at_batch(monkeypatch, batch_number, exception=None, loss=None):
    """Patch the train step: from the given batch on (counted from 1), raise or return a loss."""
    original = _SequenceNet.train_step
    calls = {"n": 0}

    def train_step(self, batch, **fit_params):
        calls["n"] += 1
        if calls["n"] >= batch_number:
            if exception is not None:
                raise exception
            step = original(self, batch, **fit_params)
            step["loss"] = step["loss"] * loss
            return step
        return original(self, batch, **fit_params)

    monkeypatch.setattr(_SequenceNet, "train_step", train_step)
    return calls


# --------------------------------------------------------------- divergence
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_exploding_inputs_stop_with_a_warning_and_finite_predictions(data, optimizer):
    X, _, y = data
    huge = [x * 1e30 for x in X]  # a relu recurrence overflows float32 at once
    with pytest.warns(ConvergenceWarning, match="the training loss became inf in epoch 1, batch 1") as record:
        reg = RNNRegressor(cell="relu", optimizer=optimizer, max_iter=5, **TINY).fit(huge, y)
    assert "the initial weights are kept" in str(record[0].message)
    assert "scale the inputs" in str(record[0].message)
    assert reg.n_iter_ == 0 and reg.loss_curve_ == []
    for name, tensor in reg.module_.state_dict().items():
        assert bool(np.isfinite(tensor.numpy()).all()), name
    assert np.isfinite(reg.predict(X)).all()


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_huge_learning_rate_restores_the_last_finite_epoch(data, optimizer):
    X, y, _ = data
    params = dict(cell="relu", optimizer=optimizer, learning_rate=1e8, clip_threshold=None)
    with pytest.warns(ConvergenceWarning, match=r"the training loss became (nan|inf)") as record:
        clf = RNNClassifier(max_iter=20, **params, **TINY).fit(X, y)
    assert "Lower learning_rate" in str(record[0].message)
    assert clf.n_iter_ == len(clf.loss_curve_) < 20
    assert np.isfinite(clf.loss_curve_).all()
    proba = clf.predict_proba(X)
    assert np.isfinite(proba).all()
    # The kept weights are those of the last finished epoch: equal to a run of that length.
    kept = reference(RNNClassifier, X, y, max(clf.n_iter_, 1), **params)
    if clf.n_iter_:
        np.testing.assert_array_equal(kept.predict_proba(X), proba)


@pytest.mark.parametrize("cls", [RNNClassifier, RNNRegressor])
def test_nan_loss_in_epoch_three_restores_epoch_two(data, cls, monkeypatch):
    X, y_class, y_real = data
    y = y_class if cls is RNNClassifier else y_real
    fail_at_batch(monkeypatch, 2 * 3 + 2, loss=float("nan"))  # epoch 3, batch 2
    with pytest.warns(ConvergenceWarning, match="became nan in epoch 3, batch 2") as record:
        model = cls(max_iter=10, **TINY).fit(X, y)
    # Epoch 2 has the lowest training loss, so the best epoch is also the last finished.
    assert "ends as after epoch 2, with the weights of the best epoch" in str(record[0].message)
    monkeypatch.undo()
    two = reference(cls, X, y, 2)
    assert model.n_iter_ == 2 and model.loss_curve_ == two.loss_curve_
    np.testing.assert_array_equal(model.predict(X), two.predict(X))
    # The optimizer's state is restored too: training on continues as from epoch 2.
    state = model.net_.optimizer_.state_dict()["state"]
    expected = two.net_.optimizer_.state_dict()["state"]
    for index in expected:
        for key, value in expected[index].items():
            np.testing.assert_array_equal(np.asarray(state[index][key]), np.asarray(value))


def test_divergence_with_early_stopping_keeps_the_best_epoch(data, monkeypatch):
    X, y, _ = data
    params = dict(early_stopping=True, validation_fraction=0.25)
    fail_at_batch(monkeypatch, 3 * 4 + 1, loss=float("inf"))  # 36 training sequences: 3 batches
    with pytest.warns(ConvergenceWarning, match="with the weights of the best epoch so far"):
        model = RNNClassifier(max_iter=10, **params, **TINY).fit(X, y)
    assert model.n_iter_ == 4 == len(model.validation_scores_)
    assert model.best_validation_loss_ == min(model.net_.history[:, "valid_loss"])
    assert np.isfinite(model.predict_proba(X)).all()


def test_a_non_finite_validation_loss_stops_training_and_keeps_the_best_epoch(data, monkeypatch):
    # Validation outputs that overflow gave "Input contains infinity" from the score
    # (regressor) or "0 is not in list" after training: a non-finite validation loss
    # never became the best epoch, so none was found.
    X, y, _ = data
    original = _SequenceNet.validation_step

    def validation_step(self, batch, **fit_params):
        result = original(self, batch, **fit_params)
        if len(self.history) >= 3:  # from epoch 3 on
            result["loss"] = result["loss"] * float("inf")
        return result

    monkeypatch.setattr(_SequenceNet, "validation_step", validation_step)
    with pytest.warns(ConvergenceWarning, match="the validation loss of epoch 3 is inf"):
        model = RNNClassifier(max_iter=10, early_stopping=True, validation_fraction=0.25,
                              **TINY).fit(X, y)
    assert model.n_iter_ == 2 == len(model.validation_scores_)
    assert model.best_validation_loss_ == min(model.net_.history[:, "valid_loss"])
    assert np.isfinite(model.predict_proba(X)).all()


def test_validation_outputs_that_overflow_in_the_first_epoch_keep_the_initial_weights(data):
    X, _, y = data
    with pytest.warns(ConvergenceWarning, match="validation loss of epoch 1 is inf.*initial weights"):
        model = RNNRegressor(max_iter=3, early_stopping=True, validation_fraction=0.25,
                             optimizer="sgd", clip_threshold=None, learning_rate=1e38,
                             **{**TINY, "batch_size": N}).fit(X, 10 * y)  # one update
    assert model.n_iter_ == 0 and model.validation_scores_ is None
    assert np.isfinite(model.predict(X)).all()


# ---------------------------------------------------------------- interrupt
@pytest.mark.parametrize("cls", [RNNClassifier, RNNRegressor])
def test_keyboard_interrupt_mid_epoch_keeps_the_last_finished_epoch(data, cls, monkeypatch):
    X, y_class, y_real = data
    y = y_class if cls is RNNClassifier else y_real
    fail_at_batch(monkeypatch, 3 * 3 + 2, exception=KeyboardInterrupt)  # epoch 4, batch 2
    with pytest.warns(UserWarning, match="interrupted during epoch 4; training ends as after epoch 3, with the weights of the best"):
        model = cls(max_iter=10, **TINY).fit(X, y)
    monkeypatch.undo()
    three = reference(cls, X, y, 3)
    assert model.n_iter_ == 3 == len(model.net_.history)
    assert model.loss_curve_ == three.loss_curve_
    np.testing.assert_array_equal(model.predict(X), three.predict(X))
    # Usable: it scores, and training continues (warm start) from the kept epoch.
    assert np.isfinite(model.score(X, y))
    model.set_params(warm_start=True, max_iter=1)
    three.set_params(warm_start=True, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        np.testing.assert_array_equal(model.fit(X, y).predict(X), three.fit(X, y).predict(X))


def test_keyboard_interrupt_in_the_first_epoch_of_a_first_fit_leaves_it_unfitted(data, monkeypatch):
    # Nothing finished, so nothing is swapped in: the estimator stays unfitted and the
    # interrupt reaches the caller (issue 18: no half-fitted estimator).
    from sklearn.exceptions import NotFittedError

    X, y, _ = data
    fail_at_batch(monkeypatch, 2, exception=KeyboardInterrupt)
    model = RNNClassifier(max_iter=10, early_stopping=True, **TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "weights are kept" warning
        with pytest.raises(KeyboardInterrupt, match="left as it was before the call"):
            model.fit(X, y)
    assert not hasattr(model, "net_") and not hasattr(model, "classes_")
    with pytest.raises(NotFittedError):
        model.predict(X)


def test_keyboard_interrupt_during_partial_fit_is_raised_and_keeps_the_previous_state(data, monkeypatch):
    # The interrupt reaches the caller (a Ctrl-C ends a loop of partial_fit calls) and
    # nothing of the call is kept; the next call trains as if it had never run.
    X, y, _ = data
    model = RNNClassifier(dropout=0.3, num_layers=2, **TINY).partial_fit(X, y, classes=[0, 1])
    twin = pickle.loads(pickle.dumps(model))
    before = model.predict_proba(X)
    with monkeypatch.context() as patch:
        fail_at_batch(patch, 2, exception=KeyboardInterrupt)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no "weights are kept" warning
            with pytest.raises(KeyboardInterrupt, match="partial_fit was interrupted before its first epoch"):
                model.partial_fit(X, y)
    assert model.n_iter_ == 1 == len(model.loss_curve_) == len(model.net_.history)
    np.testing.assert_array_equal(model.predict_proba(X), before)
    model.partial_fit(X, y)
    twin.partial_fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), twin.predict_proba(X))


@pytest.mark.parametrize("failing", ["callback", "check"])
def test_a_failed_continued_call_leaves_the_networks_settings_as_they_were(data, failing):
    """The weights were rolled back, but the call's step size, batch size, label
    smoothing and callbacks stayed on net_ (what net_.optimizer_ and the diagnostics'
    loss read), both when training failed and when building the callbacks failed."""
    from sklearn_rnn.diagnostics import temporal_gradient_norms

    class Boom(Callback):
        def on_batch_end(self, net, **kwargs):
            raise RuntimeError("boom")

    X, y, _ = data
    model = RNNClassifier(readout="last", **TINY).partial_fit(X, y, classes=[0, 1])
    twin = pickle.loads(pickle.dumps(model))
    net = model.net_

    def settings():
        return (net.lr, net.batch_size, net.optimizer_.param_groups[0]["lr"], net.criterion_.label_smoothing,
                [name for name, _ in net.callbacks_], net.max_epochs, net.verbose)

    before = settings()
    model.set_params(learning_rate=0.3, batch_size=4, label_smoothing=0.9, callbacks=[("boom", Boom())])
    if failing == "check":  # a callback that cannot be copied fails while the callbacks are built
        class Uncopyable(Callback):
            def __deepcopy__(self, memo):
                raise TypeError("cannot copy")

            def __copy__(self):
                raise TypeError("cannot copy")

        model.set_params(verbose=1, callbacks=[("bad", Uncopyable())])
        with pytest.raises(ValueError, match="cannot be copied \\(cannot copy\\)"):
            model.partial_fit(X, y)
    else:
        with pytest.raises(RuntimeError, match="boom"):
            model.partial_fit(X, y)
    assert settings() == before
    model.set_params(learning_rate="auto", batch_size=TINY["batch_size"], label_smoothing="auto", callbacks=None,
                     verbose=0)
    np.testing.assert_array_equal(temporal_gradient_norms(model, X, y).norms,
                                  temporal_gradient_norms(twin, X, y).norms)


def test_keyboard_interrupt_before_a_warm_fit_finishes_an_epoch_keeps_the_previous_state(data, monkeypatch):
    X, y, _ = data
    model = RNNClassifier(max_iter=2, warm_start=True, **TINY).fit(X, y)
    state = {key: value for key, value in vars(model).items() if key.endswith("_") and key != "net_"}
    before = model.predict_proba(X)
    with monkeypatch.context() as patch:
        fail_at_batch(patch, 2, exception=KeyboardInterrupt)  # after one update
        with pytest.raises(KeyboardInterrupt, match="RNNClassifier.fit was interrupted before its first epoch"):
            model.fit(X, y)
    assert model.n_iter_ == 2 and len(model.net_.history) == 2
    for key, value in state.items():
        assert getattr(model, key) is value, key  # not even replaced by an equal value
    np.testing.assert_array_equal(model.predict_proba(X), before)


def test_interrupt_during_validation_drops_the_unfinished_epoch(data, monkeypatch):
    X, y, _ = data
    original = _SequenceNet.validation_step
    calls = {"n": 0}

    def validation_step(self, batch, **fit_params):
        calls["n"] += 1
        if calls["n"] == 3:  # validation of epoch 3 (one validation batch per epoch)
            raise KeyboardInterrupt
        return original(self, batch, **fit_params)

    monkeypatch.setattr(_SequenceNet, "validation_step", validation_step)
    with pytest.warns(UserWarning, match="interrupted during epoch 3"):
        model = RNNClassifier(max_iter=10, early_stopping=True, validation_fraction=0.25, **TINY).fit(X, y)
    assert model.n_iter_ == 2 == len(model.validation_scores_)


def test_the_guard_copies_the_state_once_per_epoch_it_trains(data, monkeypatch):
    """The copy of a finished epoch is taken when the next epoch begins: a partial_fit
    call (one epoch) makes one copy, the rollback copy of continued training included
    (the guard keeps it as its first epoch's), a fit of n epochs n copies, and restores
    still work."""
    from sklearn_rnn import _callbacks, _engine

    copies = []
    snapshot = _callbacks._snapshot
    counted = lambda net: copies.append(1) or snapshot(net)  # noqa: E731
    monkeypatch.setattr(_callbacks, "_snapshot", counted)
    monkeypatch.setattr(_engine, "_snapshot", counted)
    X, y, _ = data
    model = RNNClassifier(**TINY).partial_fit(X, y, classes=[0, 1])
    model.partial_fit(X, y)
    assert len(copies) == 2
    copies.clear()
    reference(RNNClassifier, X, y, 3)
    assert len(copies) == 3
    copies.clear()  # with a user's callback (it might change the weights) the guard copies again
    RNNClassifier(callbacks=[("mine", Callback())], **TINY).partial_fit(X, y, classes=[0, 1]).partial_fit(X, y)
    assert len(copies) == 3


def test_interrupt_before_the_guard_copies_an_epoch_keeps_the_finished_one(data, monkeypatch):
    """Ctrl-C as epoch 3 begins, before the guard copied epoch 2's state (skorch's epoch
    timer runs first): nothing trained since epoch 2, whose weights are kept as they are."""
    from skorch.callbacks import EpochTimer

    X, y, _ = data
    epoch_begin = EpochTimer.on_epoch_begin

    def interrupt_third(self, net, **kwargs):
        if len(net.history) == 3:
            raise KeyboardInterrupt
        epoch_begin(self, net, **kwargs)

    monkeypatch.setattr(EpochTimer, "on_epoch_begin", interrupt_third)
    with pytest.warns(UserWarning, match="interrupted during epoch 3"):
        interrupted = RNNClassifier(max_iter=5, n_iter_no_change=100, **TINY).fit(X, y)
    monkeypatch.setattr(EpochTimer, "on_epoch_begin", epoch_begin)
    two = reference(RNNClassifier, X, y, 2)
    assert interrupted.n_iter_ == 2 and interrupted.loss_curve_ == two.loss_curve_
    for a, b in zip(interrupted.module_.parameters(), two.module_.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(two.module_.recurrent_weight, reference(RNNClassifier, X, y, 3).module_.recurrent_weight)


class _CtrlCAtEndOf(Callback):
    """A real Ctrl-C (SIGINT, Python's default handler) as epoch ``k`` ends, in a user's
    callback: after the guard marked the epoch finished."""

    def __init__(self, k=3):
        self.k = k

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.k:
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name == "nt", reason="POSIX signals")
def test_a_ctrl_c_landing_in_an_epoch_end_callback_is_reported(data):
    # It ended fit like a stopping rule: n_iter_ 3 of 20, no warning at all.
    X, y, _ = data
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("another SIGINT handler is installed")
    with pytest.warns(UserWarning, match=r"RNNClassifier: training was interrupted after epoch 3 "
                      r"finished; training ends as after epoch 3, with the weights of the best"):
        model = RNNClassifier(max_iter=20, n_iter_no_change=100, callbacks=[("ctrl_c", _CtrlCAtEndOf())],
                              **TINY).fit(X, y)
    assert model.n_iter_ == 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    # A user's callback ending training (skorch's way) is a stop, not an interrupt.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert RNNClassifier(max_iter=20, callbacks=[("end", _EndAfter(2))], **TINY).fit(X, y).n_iter_ == 2


class _EndAfter(Callback):
    """A user's budget: ends training (skorch's way) at the end of epoch ``k``."""

    def __init__(self, k=1):
        self.k = k

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) >= self.k:
            raise KeyboardInterrupt


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("early_stopping", [True, False])
def test_an_epoch_a_user_callback_ends_training_in_is_judged_by_the_stopping_rule(data, early_stopping, capsys):
    """A user's callback runs before the stopping rule; one that ended training at the end
    of an epoch hid that epoch from the rule: with a held-out split a first epoch ended
    so crashed the fit ("0 is not in list"), a later one was never a candidate for the
    best epoch (the weights of an earlier, worse epoch were kept), and the epoch table
    skipped its row."""
    X, y, _ = data
    params = dict(early_stopping=early_stopping, validation_fraction=0.25, n_iter_no_change=100, **TINY)
    model = RNNClassifier(max_iter=5, callbacks=[("budget", _EndAfter(1))], **params).fit(X, y)
    assert model.n_iter_ == 1
    if early_stopping:
        assert model.best_epoch_ == 1 and len(model.validation_scores_) == 1
    model = RNNClassifier(max_iter=4, callbacks=[("budget", _EndAfter(4))], verbose=1, **params).fit(X, y)
    key = "valid_loss" if early_stopping else "train_loss"
    losses = model.net_.history[:, key]
    best = int(np.argmin(losses)) + 1
    assert model.n_iter_ == 4 and best == 4  # a falling loss: the last epoch is the best
    if early_stopping:
        assert model.best_epoch_ == best
    full = reference(RNNClassifier, X, y, 4, early_stopping=early_stopping, validation_fraction=0.25)
    for a, b in zip(model.module_.parameters(), full.module_.parameters(), strict=True):
        assert torch.equal(a, b)  # epoch 4's weights, as a fit of four epochs keeps
    table = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    assert table == ["1", "2", "3", "4"]


def test_an_interrupt_during_the_end_of_fit_comparison_keeps_the_fit(data, monkeypatch):
    """Below 200 sequences the rule compares, at the end of training, the best epoch's
    start and end weights by their training-set loss: a Ctrl-C there discarded the whole
    fit (the estimator was left unfitted after five finished epochs)."""
    X, y, _ = data

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    full = reference(RNNClassifier, X, y, 5)
    monkeypatch.setattr(_SequenceNet, "training_loss", interrupted)
    with pytest.warns(UserWarning, match="interrupted while the weights epoch .* the ones it ended with are kept"):
        model = RNNClassifier(max_iter=5, n_iter_no_change=100, **TINY).fit(X, y)
    assert model.n_iter_ == 5 and model.loss_curve_ == full.loss_curve_
    best = dict(model.net_.callbacks_)["stop"].best_model_weights_
    for name, value in model.module_.state_dict().items():
        assert torch.equal(value, best[name])
