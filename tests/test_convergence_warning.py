"""A ConvergenceWarning at max_iter means the loss was still falling, not that it fluctuated."""

import warnings

import numpy as np
import torch
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, RNNRegressor, SequenceStandardScaler
from sklearn_rnn._callbacks import still_improving


def readme_task():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(3, 30), 4)) for _ in range(200)]
    return X, np.array([int(x[:, 0].sum() > 0) for x in X])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("radius", [0.9, 1.2])
def test_readme_snippet_model_fits_without_a_warning(radius, seed):
    X, y = readme_task()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make_pipeline(
            SequenceStandardScaler(),
            RNNClassifier(max_iter=30, spectral_radius=radius, random_state=seed),
        ).fit(X, y)
    assert [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)] == []
    assert model[-1].n_iter_ >= 20  # trained, not stopped at once


def test_training_cut_short_still_warns_with_the_numbers():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 1)) for _ in range(64)]
    y = np.array([x[:, 0].sum() for x in X])
    model = RNNRegressor(hidden_size=8, max_iter=8, learning_rate=1e-3, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"still improving \(it fell steadily by"):
        model.fit(X, y)
    assert model.loss_curve_[-1] < model.loss_curve_[0]


def test_rule_on_curves():
    epochs = np.arange(40)
    assert still_improving(np.exp(-epochs / 30), 10, 1e-4)[0]  # a steady fall
    assert not still_improving(np.exp(-epochs / 3), 10, 1e-4)[0]  # flat at its floor
    rng = np.random.default_rng(0)
    noisy = 0.1 + 0.05 * np.abs(rng.standard_normal(40))
    assert not still_improving(noisy, 10, 1e-4)[0]  # new bests now and then, no trend
    assert not still_improving(np.linspace(1, 0.99, 40), 10, 0.1)[0]  # less than tol
    # Too short for a trend (2-5 epochs): falling to its lowest by more than tol.
    # max_iter=5 ended a falling loss without a warning before.
    assert still_improving([1.0, 0.5], 10, 1e-4)[0]
    assert still_improving([0.69, 0.64, 0.60, 0.55, 0.50], 10, 3e-3)[0]
    assert not still_improving([0.69, 0.64, 0.60, 0.62, 0.61], 10, 3e-3)[0]  # not the lowest
    assert not still_improving([1.0, 0.2, 0.2, 0.2, 0.2], 10, 3e-3)[0]  # flat at its end
    assert not still_improving([0.69, 0.689], 10, 3e-3)[0]  # less than tol
    assert not still_improving([0.69], 10, 3e-3)[0]  # one epoch: nothing to tell
    falling, words = still_improving(np.linspace(1.0, 0.5, 30), 10, 1e-4)
    assert falling and "over the last 10 epochs" in words


@pytest.mark.parametrize("warm", [False, True])
def test_a_fit_that_keeps_the_weights_it_started_from_says_so(warm):
    """Plain SGD at a step size of 50 throws the loss far up in its first epoch and
    never brings it back below the start; the stopping rule rightly keeps the weights
    training started from, which used to be returned without a word (accuracy 0.53,
    n_iter_ 30, no warning)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(t), 2)) for t in rng.integers(3, 12, size=60)]
    y = np.array([int(x[0, 0] > 0) for x in X])
    kwargs = dict(hidden_size=8, optimizer="sgd", clip_threshold=None, max_iter=30, early_stopping=False,
                  random_state=0, warm_start=warm)
    model = RNNClassifier(**kwargs)
    if warm:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.set_params(learning_rate=0.01, max_iter=3).fit(X, y)
        model.set_params(learning_rate=50.0, max_iter=30)
    start = {name: value.clone() for name, value in model.module_.state_dict().items()} if warm else None
    expected = "the weights it started from" if warm else "the network as initialized"
    with pytest.warns(ConvergenceWarning, match=f"none of the 30 epochs lowered the training loss.*model is {expected}"):
        model.set_params(learning_rate=50.0).fit(X, y)
    if warm:  # the earlier fit's weights, as the message says
        for name, value in model.module_.state_dict().items():
            assert torch.equal(value, start[name]), name


def test_a_fit_that_learns_gives_no_such_warning():
    X, y = readme_task()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RNNClassifier(hidden_size=8, max_iter=3, early_stopping=False, random_state=0).fit(X, y)
    assert not [w for w in caught if "lowered the" in str(w.message)]


def test_the_kept_start_warning_advises_a_lower_clip_threshold_when_one_is_set():
    # "or set a clip_threshold" though the default 1.0 was set.
    import warnings

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 10)), 3)) for _ in range(40)]
    for x in X:
        x[:, 0] = np.cumsum(rng.uniform(1, 5, size=len(x)))
    y = np.array([int(x[:, 1].sum() > 0) for x in X])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RNNClassifier(hidden_size=4, max_iter=2, random_state=0, optimizer="simplex").fit(X, y)
    kept = [str(w.message) for w in caught if "keeps those" in str(w.message)]
    assert kept and all(message.endswith("Lower learning_rate, or clip_threshold (now 1).") for message in kept)


def test_a_learning_rate_too_high_for_any_epoch_keeps_the_initial_weights_and_says_so():
    # No epoch got below the untrained network's loss (0.70), the best was a later one:
    # fit kept a network at log loss 1.96 without a word.
    import warnings

    from sklearn.metrics import log_loss

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 10)), 3)) for _ in range(40)]
    y = rng.integers(0, 2, 40)
    untrained = RNNClassifier(hidden_size=8, random_state=0, max_iter=1, learning_rate=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        initial = log_loss(y, untrained.fit(X, y).predict_proba(X))
    with pytest.warns(ConvergenceWarning, match=r"none of the \d+ epochs lowered the training loss below that of "
                                                r"the weights training started from.*Lower learning_rate"):
        model = RNNClassifier(hidden_size=8, random_state=0, learning_rate=5.0).fit(X, y)
    assert log_loss(y, model.predict_proba(X)) == pytest.approx(initial, abs=1e-6)


def test_warnings_point_at_the_callers_line_through_cross_validation_too():
    # diag44: the ConvergenceWarning pointed at the package's own line, and the
    # NaN-at-prediction warning under cross_validate at joblib/parallel.py.
    import warnings

    from sklearn.model_selection import cross_validate

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 12)), 2)) for _ in range(40)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    model = RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X[20:], y[20:])
    gappy = [x.copy() for x in X]
    gappy[3][1, 0] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_validate(model, gappy, y, cv=[(np.arange(20, 40), np.arange(20))])
        RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, y)
    places = {(w.category.__name__, w.filename) for w in caught}
    assert places == {("ConvergenceWarning", __file__), ("UserWarning", __file__)}, places


def test_a_warm_fit_watching_the_validation_loss_keeps_the_weights_it_started_from_when_no_epoch_beats_them():
    # engine44: with early_stopping=True a warm fit at too high a learning rate kept its own
    # best epoch, worse on the held-out data than the model it was given (test accuracy
    # 0.98 -> 0.88), without a word; early_stopping=False kept the start and warned.
    import warnings

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 1)) for _ in range(80)]
    y = np.array([int(x[-1, 0] > 0) for x in X])
    model = RNNClassifier(hidden_size=4, max_iter=20, random_state=0, early_stopping=True, n_iter_no_change=2,
                          warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    before, epochs, best = model.predict_proba(X), len(model.net_.history), model.best_epoch_
    model.set_params(learning_rate=3.0, max_iter=6)
    with pytest.warns(ConvergenceWarning, match=r"none of the \d+ epochs lowered the validation loss below that of "
                                                r"the weights training started from, so it keeps those"):
        model.fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), before)
    assert model.best_epoch_ == best <= epochs  # the earlier call's epoch that gave the weights kept
    assert np.isfinite(model.best_validation_loss_) and np.isfinite(model.best_validation_score_)


def test_an_interrupt_in_a_callbacks_on_train_begin_is_named_and_guard_warnings_point_at_the_caller():
    # engine44: a Ctrl-C in on_train_begin came out as a bare KeyboardInterrupt(''); the
    # guard's divergence and interrupt warnings pointed into the package.
    import warnings

    from skorch.callbacks import Callback

    class CtrlCAtStart(Callback):
        def on_train_begin(self, net, **kwargs):
            raise KeyboardInterrupt

    class Spoil(Callback):  # the second epoch's loss is NaN
        def on_batch_begin(self, net, batch=None, training=False, **kwargs):
            if training and len(net.history) == 2:
                with torch.no_grad():
                    next(net.module_.parameters()).fill_(float("nan"))

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 1)) for _ in range(30)]
    y = np.arange(30) % 2
    model = RNNClassifier(hidden_size=3, max_iter=3, random_state=0, callbacks=[("cb", CtrlCAtStart())])
    with pytest.raises(KeyboardInterrupt, match=r"RNNClassifier\.fit was interrupted before its first epoch finished"):
        model.fit(X, y)
    assert not hasattr(model, "net_")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RNNClassifier(hidden_size=3, max_iter=3, random_state=0, early_stopping=False,
                      callbacks=[("s", Spoil())]).fit(X, y)
    diverged = [w for w in caught if "became nan" in str(w.message)]
    assert diverged and all(w.filename == __file__ for w in diverged)


def test_a_kept_start_names_the_earlier_calls_epoch_that_gave_those_weights():
    # diff44b: best_epoch_ named the call's first epoch (validation loss 2632) while the
    # validation loss and score were those of the weights kept (an earlier epoch's).
    import warnings

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 1)) for _ in range(80)]
    y = np.array([int(x[-1, 0] > 0) for x in X])
    model = RNNClassifier(hidden_size=4, max_iter=20, random_state=0, early_stopping=True, n_iter_no_change=2,
                          warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
        earlier = (model.best_epoch_, model.best_validation_loss_)
        model.set_params(learning_rate=3.0, max_iter=6).fit(X, y)
    assert model.best_epoch_ == earlier[0]
    assert model.best_validation_loss_ == pytest.approx(earlier[1], rel=1e-5)
