"""Progress output: silent by default, an epoch table and a tqdm bar with ``verbose``."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier


def _fit(verbose, **params):
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(40)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RNNClassifier(
            hidden_size=4, max_iter=2, verbose=verbose, random_state=0, **params
        ).fit(X, y)


def test_silent_without_verbose(capfd):
    model = _fit(verbose=0)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "progress" not in dict(model.net_.callbacks_)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_verbose_on_a_terminal_prints_epochs_and_shows_a_progress_bar(capfd, monkeypatch,
                                                                       early_stopping):
    pytest.importorskip("tqdm")
    from sklearn_rnn import _engine

    monkeypatch.setattr(_engine, "_is_terminal", lambda stream: True)
    model = _fit(verbose=1, early_stopping=early_stopping)
    out, err = capfd.readouterr()
    assert "train_loss" in out  # one table row per epoch
    assert ("valid_loss" in out) is early_stopping
    assert "%|" in err  # tqdm's bar over the batches of an epoch
    assert "progress" in dict(model.net_.callbacks_)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_verbose_into_a_log_file_is_clean(capfd, early_stopping):
    """Output that is no terminal (a file, a pipe, a capture) gets the epoch table
    without colour codes and without the progress bar's carriage returns."""
    model = _fit(verbose=1, early_stopping=early_stopping)
    out, err = capfd.readouterr()
    assert "train_loss" in out and len(out.splitlines()) >= 4  # header, rule, 2 epochs
    assert "\x1b[" not in out + err and "\r" not in out + err and "%|" not in err
    assert "progress" not in dict(model.net_.callbacks_)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_the_epoch_table_ends_with_the_stopping_epoch_and_says_which_weights_are_kept(
    capfd, early_stopping
):
    # skorch runs its epoch table after every other callback, so the epoch in which
    # the stopping rule ended training had no row; nothing said which epoch was kept.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(40)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    model = RNNClassifier(hidden_size=4, n_iter_no_change=2, early_stopping=early_stopping,
                          validation_fraction=0.25, verbose=1, random_state=0).fit(X, y)
    out, _ = capfd.readouterr()
    assert model.n_iter_ < model.max_iter  # the stopping rule ended training
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [int(row[0]) for row in rows] == list(range(1, model.n_iter_ + 1))
    monitor = "valid_loss" if early_stopping else "train_loss"
    last = out.splitlines()[-1]
    assert last.startswith(f"Training stopped after epoch {model.n_iter_}: {monitor} did not")
    best = dict(model.net_.callbacks_)["stop"].best_epoch_
    assert f"weights of epoch {best}," in last or f"weights epoch {best} started from" in last


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_epoch_table_says_which_weights_are_kept_at_max_iter_too(capfd):
    # The line under the table came only when the rule stopped training or kept an
    # earlier epoch; a fit that reached max_iter printed nothing after the table.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(40)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    model = RNNClassifier(hidden_size=4, max_iter=3, verbose=1, random_state=0).fit(X, y)
    last = capfd.readouterr().out.splitlines()[-1]
    best = dict(model.net_.callbacks_)["stop"].best_epoch_
    assert last.startswith("Training reached max_iter=3 after epoch 3; keeping the weights")
    assert f"weights of epoch {best}," in last or f"weights epoch {best} started from" in last
    model.set_params(warm_start=True, max_iter=2).fit(X, y)  # epochs 4 and 5 of the history
    assert capfd.readouterr().out.splitlines()[-1].startswith("Training reached max_iter=2 after epoch 5;")


def test_no_line_names_a_kept_epoch_when_no_epoch_of_the_call_finished(capfd):
    # A warm fit whose first epoch diverged printed "keeping the weights of epoch 0"
    # (skorch's best_epoch_ before any epoch): there is no epoch 0, and the weights kept
    # are those the call started from, as the divergence warning says.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(40)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    model = _fit(verbose=0, optimizer="sgd", clip_threshold=None, batch_size=4, warm_start=True)
    before = model.predict_proba(X)
    model.set_params(learning_rate=1e38, verbose=1)
    with pytest.warns(ConvergenceWarning, match="became (inf|nan) in epoch 3, batch"):  # the batches: 12f3fc7
        model.fit(X, y)
    out = capfd.readouterr().out
    assert model.n_iter_ == 0 and "epoch 0" not in out and "keeping" not in out
    np.testing.assert_array_equal(model.predict_proba(X), before)


def test_training_loss_is_reported_without_the_penalty():
    """With an L2 penalty (the 'decay' cell's default alpha), train_loss is the data
    loss, comparable with valid_loss; train_objective adds the penalty that was minimized."""
    rng = np.random.default_rng(0)
    X = [np.column_stack([np.cumsum(rng.uniform(1, 3, size=n)), rng.normal(size=n)])
         for n in rng.integers(2, 6, size=40)]
    y = np.array([int(x[:, 1].sum() > 0) for x in X])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=4, max_iter=3, time_feature=0, random_state=0).fit(X, y)
    history = model.net_.history
    assert model._resolved_alpha() > 0
    objective = np.array(history[:, "train_objective"])
    loss = np.array(history[:, "train_loss"])
    assert np.all(objective > loss)  # the penalty is positive
    np.testing.assert_allclose(model.loss_curve_, loss)
    # Without a penalty there is no objective apart from the loss.
    unpenalized = RNNClassifier(hidden_size=4, max_iter=3, time_feature=0, alpha=0.0,
                                random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        unpenalized.fit(X, y)
    assert "train_objective" not in unpenalized.net_.history[-1]


def test_silent_partial_fit_builds_no_epoch_table_and_verbose_brings_it_back(capfd, monkeypatch):
    """With verbose=0 the epoch table is not even formatted (it cost every streaming
    update a few tenths of a millisecond); set verbose and the next call prints it."""
    from skorch.callbacks import PrintLog

    tables = []
    table = PrintLog.table
    monkeypatch.setattr(PrintLog, "table", lambda self, row: tables.append(row) or table(self, row))
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(20)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    model = RNNClassifier(hidden_size=4, batch_size=10, random_state=0)
    for _ in range(3):
        model.partial_fit(X, y, classes=[0, 1])
    out, err = capfd.readouterr()
    assert (out, err, tables) == ("", "", [])
    assert "print_log" not in dict(model.net_.callbacks_) and len(model.loss_curve_) == 3
    model.set_params(verbose=1).partial_fit(X, y)
    out, _ = capfd.readouterr()
    assert len(tables) == 1 and "train_loss" in out and "print_log" in dict(model.net_.callbacks_)


def test_a_change_of_verbose_between_partial_fit_calls_keeps_the_users_callbacks(capfd, monkeypatch):
    # The callbacks were rebuilt when verbose changed, so a user's callback lost its state
    # (an epoch counter read 1, 2, 1, 2 over four calls).
    pytest.importorskip("tqdm")
    from skorch.callbacks import Callback

    from sklearn_rnn import _engine

    class Count(Callback):
        def initialize(self):
            self.seen_ = 0
            return self

        def on_epoch_end(self, net, **kwargs):
            self.seen_ += 1

    monkeypatch.setattr(_engine, "_is_terminal", lambda stream: True)
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(20)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])

    def names(verbose):  # the callbacks a first call builds
        model = RNNClassifier(hidden_size=4, batch_size=10, random_state=0, verbose=verbose,
                              callbacks=[("count", Count())])
        return [name for name, _ in model.partial_fit(X, y, classes=[0, 1]).net_.callbacks_]

    model = RNNClassifier(hidden_size=4, batch_size=10, random_state=0, callbacks=[("count", Count())])
    seen = []
    for verbose in (0, 0, 1, 1, 0):
        model.set_params(verbose=verbose).partial_fit(X, y, classes=[0, 1])
        seen.append(dict(model.net_.callbacks_)["count"].seen_)
        assert [name for name, _ in model.net_.callbacks_] == names(verbose)
        out, err = capfd.readouterr()
        assert ("train_loss" in out) is bool(verbose) and ("%|" in err) is bool(verbose)
    assert seen == [1, 2, 3, 4, 5]
