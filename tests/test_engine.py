"""The skorch engine: public skorch API only, the user's callbacks passed through, a
stable train_split, callbacks kept over a stream of partial_fit calls, one inference path."""

from __future__ import annotations

import ast
import copy
import pathlib
import pickle
import warnings

import numpy as np
import pytest
import sklearn
import skorch
import torch
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from skorch import NeuralNet
from skorch.callbacks import (BatchScoring, Callback, Checkpoint, EarlyStopping, EpochScoring,
                               LoadInitState, LRScheduler, PassthroughScoring, PrintLog)
from skorch.history import History

from _helpers import on_device

import sklearn_rnn
from sklearn_rnn import RNNClassifier, RNNRegressor, RNNStepClassifier
from sklearn_rnn import _callbacks, _engine, _estimators, _inference
from sklearn_rnn._inference import EVERY_STEP, LAST_STEP

PACKAGE = pathlib.Path(sklearn_rnn.__file__).parent


def _private_names(root: pathlib.Path) -> set[str]:
    """Private (one leading underscore, not dunder) names defined in the source under root:
    functions, classes, methods, attributes and variables assigned."""
    names = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {name for name in names if name.startswith("_") and not name.endswith("__") and name != "_"}


SKORCH_PRIVATE = _private_names(pathlib.Path(skorch.__file__).parent)
OURS = _private_names(PACKAGE)
# scikit-learn's own private methods on our estimators (BaseEstimator._validate_params):
# skorch happens to define some of the same names.
SKLEARN = {name for name in dir(BaseEstimator) if name.startswith("_")}


def private_skorch_uses(source: str) -> list[str]:
    """Uses of skorch's private names in ``source``: imports of them, and attribute
    reads of names that only skorch defines (not this package, not scikit-learn)."""
    forbidden = SKORCH_PRIVATE - OURS - SKLEARN
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skorch"):
            found += [alias.name for alias in node.names if alias.name.startswith("_")]
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names
                      if alias.name.startswith("skorch") and "._" in alias.name]
        elif isinstance(node, ast.Attribute) and node.attr in forbidden:
            found.append(node.attr)
    return found


def test_the_scan_finds_private_skorch_names():
    """The scan below is not vacuous: skorch's private step helpers are found."""
    assert {"_set_training", "_step_optimizer", "_zero_grad_optimizer", "_sink"} <= SKORCH_PRIVATE
    snippet = (
        "from skorch.utils import _indexing\n"
        "import skorch._version\n"
        "def step(net):\n"
        "    net._set_training(True)\n"
        "    net._step_optimizer(None)\n"
    )
    assert sorted(private_skorch_uses(snippet)) == [
        "_indexing", "_set_training", "_step_optimizer", "skorch._version"]


def test_no_private_skorch_name_anywhere_in_the_package():
    found = {
        str(path.relative_to(PACKAGE)): uses
        for path in PACKAGE.rglob("*.py")
        if (uses := private_skorch_uses(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "ours, base",
    [
        (_engine.SequenceNet, NeuralNet),
        (_engine.FitGuard, Callback),
        (_callbacks.TrainingGuard, Callback),
        (_callbacks.EarlyStopping, EarlyStopping),
        (_callbacks.PlainPrintLog, PrintLog),
        (_engine.EpochMeanScoring, PassthroughScoring),
        (_engine._History, History),
    ],
)
def test_engine_overrides_only_public_skorch_methods(ours, base):
    """A subclass that overrides a private skorch method depends on skorch's internals."""
    for klass in ours.__mro__:
        if klass.__module__.startswith("skorch") or klass is object:
            break
        overridden = {name for name in vars(klass) if hasattr(base, name)}
        private = {name for name in overridden if name.startswith("_") and not name.endswith("__")}
        assert private == set(), (klass, private)


def test_history_reads_answer_as_skorch_does():
    """The history's fast reads of one epoch give skorch's values, and its errors."""
    rows = [
        {"epoch": 1, "train_loss": 0.5, "none": None, "batches": [
            {"train_loss": 0.7, "train_batch_size": 3}, {"train_loss": 0.9, "train_batch_size": 2},
            {"other": 1}]},
        {"epoch": 2, "batches": []},
    ]
    ours, skorchs = _engine._History(rows), History(rows)
    for key in [(-1, "epoch"), (0, "train_loss"), (0, "none"), (0, "batches"), (0, "batches", -1, "other"),
                (0, "batches", 0, "train_loss"), (0, "batches", slice(None), "train_loss"),
                (0, "batches", slice(None), ["train_batch_size", "train_loss"]),
                (0, "batches", slice(None), ("train_batch_size", "train_loss")), (0, "batches", 1),
                (1, "batches"), (slice(None), "epoch")]:
        assert ours[key] == skorchs[key] and type(ours[key]) is type(skorchs[key]), key
    for key in [(1, "train_loss"), (1, "batches", slice(None), "train_loss"), (0, "batches", -1, "train_loss"),
                (0, "batches", 5, "x"), (0, "nope"), (5, "epoch")]:
        errors = []
        for history in (ours, skorchs):
            with pytest.raises((KeyError, IndexError)) as error:
                history[key]
            errors.append((error.type, str(error.value)))
        assert errors[0] == errors[1], key


def test_the_epoch_loss_is_skorchs_bit_for_bit():
    """The epoch's mean of its batches' losses, read from its list of batches, is the
    value skorch's history slice and numpy.average give: for one batch, a few, and more
    than numpy's pairwise summation adds one by one; training and validation batches
    side by side, as skorch records them."""
    rng = np.random.default_rng(0)

    def batch(kind):
        return {f"{kind}_loss": float(rng.normal() * 10.0 ** rng.integers(-6, 6)),
                f"{kind}_batch_size": int(rng.integers(1, 5000))}

    for n_train, n_valid in [(1, 0), (1, 1), (3, 0), (3, 2), (40, 5), (200, 0)]:
        for _ in range(50):
            rows = [{"batches": [batch("train") for _ in range(n_train)] + [batch("valid") for _ in range(n_valid)]}]
            for kind in ("train", "valid")[: 1 + bool(n_valid)]:
                on_train = kind == "train"
                mine = _engine.EpochMeanScoring(f"{kind}_loss", on_train=on_train).get_avg_score(History(rows))
                reference = PassthroughScoring(f"{kind}_loss", on_train=on_train).get_avg_score(History(rows))
                assert mine == reference and type(mine) is type(reference)
    empty = [{"batches": [batch("valid")]}]
    with pytest.raises(KeyError):  # no training batch: skorch's error
        _engine.EpochMeanScoring("train_loss", on_train=True).get_avg_score(History(empty))


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(3, 7)), 2)) for _ in range(n)]
    return X, np.array([int(x[:, 0].sum() > 0) for x in X])


@pytest.mark.skipif(not _estimators._has_fused_adam("cpu"),
                    reason="PyTorch before 2.4 has no fused Adam on the CPU (the fallback is tested below)")
def test_adam_takes_the_fused_step_which_agrees_with_the_single_tensor_step(monkeypatch):
    """'adam' runs PyTorch's fused step (one kernel over every parameter: a third of the
    multi-tensor step's time on a CPU); the weights after training agree with those of
    the single-tensor step to rounding, not bit for bit (the kernels order the products
    differently)."""
    X, y = _data()
    fast = RNNClassifier(hidden_size=6, max_iter=4, device="cpu", random_state=0).fit(X, y)
    assert fast.net_.optimizer_.defaults["fused"] is True
    spec = _estimators.RNNClassifier._optimizer_spec
    monkeypatch.setattr(_estimators.RNNClassifier, "_optimizer_spec",
                        lambda self, seeds, device: (spec(self, seeds, device)[0], {"optimizer__foreach": False}))
    slow = RNNClassifier(hidden_size=6, max_iter=4, device="cpu", random_state=0).fit(X, y)
    assert not slow.net_.optimizer_.defaults["fused"]
    assert fast.n_iter_ == slow.n_iter_
    for name, weight in fast.net_.module_.state_dict().items():
        torch.testing.assert_close(weight, slow.net_.module_.state_dict()[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("threshold", [1e-3, 1.0, 1e3])  # clipped, about the norm, left alone
def test_gradient_clipping_is_torchs_clip_grad_norm_bit_for_bit(threshold):
    """The engine's clipping callback reads the parameters once per training call and
    scales the gradients by the arithmetic of torch.nn.utils.clip_grad_norm_."""
    torch.manual_seed(0)
    net = RNNClassifier(hidden_size=5, max_iter=1, random_state=0).fit(*_data()).net_
    parameters = [p for _, p in net.get_all_learnable_params()]
    grads = [torch.randn_like(p) for p in parameters]
    grads[1] = None  # a parameter without a gradient is skipped by both
    clip = _callbacks.GradientClipping(threshold).initialize()
    for p, g in zip(parameters, grads):
        p.grad = None if g is None else g.clone()
    clip.on_train_begin(net)
    clip.on_grad_computed(net, named_parameters=iter(()))
    ours = [None if p.grad is None else p.grad.clone() for p in parameters]
    # Outside a training call it reads the parameters given with the call.
    for p, g in zip(parameters, grads):
        p.grad = None if g is None else g.clone()
    _callbacks.GradientClipping(threshold).initialize().on_grad_computed(net, named_parameters=net.get_all_learnable_params())
    given = [None if p.grad is None else p.grad.clone() for p in parameters]
    for p, g in zip(parameters, grads):
        p.grad = None if g is None else g.clone()
    torch.nn.utils.clip_grad_norm_(parameters, threshold)
    for a, b, c, p in zip(ours, given, (p.grad for p in parameters), parameters):
        assert (a is None) == (p.grad is None)
        if a is not None:
            assert torch.equal(a, c) and torch.equal(b, c)
    unclipped = [g for g in grads if g is not None]
    assert any(not torch.equal(a, g) for a, g in zip([a for a in ours if a is not None], unclipped)) == (
        threshold < 1e3
    )


class _AdamWithoutFusedCPU(torch.optim.Adam):
    """torch.optim.Adam as PyTorch 2.2 and 2.3 build it on the CPU: fused=True refused."""

    def __init__(self, params, *args, fused=None, **kwargs):
        if fused:
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                               "of supported devices: ['cuda', 'xpu', 'privateuseone'].")
        super().__init__(params, *args, fused=fused, **kwargs)


def test_adam_falls_back_to_the_multi_tensor_step_where_pytorch_has_no_fused_one(monkeypatch):
    """The fused step exists on the CPU from torch 2.4 (the package accepts 2.2): where
    PyTorch refuses it for the device, 'adam' takes the multi-tensor step."""
    has_it = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 4)
    assert _estimators._has_fused_adam("cpu") is has_it
    monkeypatch.setattr(torch.optim, "Adam", _AdamWithoutFusedCPU)
    _estimators._has_fused_adam.cache_clear()
    try:
        assert _estimators._has_fused_adam("cpu") is False
        model = RNNClassifier(hidden_size=6, max_iter=2, device="cpu", random_state=0).fit(*_data())
    finally:
        monkeypatch.undo()
        _estimators._has_fused_adam.cache_clear()
    defaults = model.net_.optimizer_.defaults
    assert type(model.net_.optimizer_) is _AdamWithoutFusedCPU
    assert defaults["foreach"] is True and not defaults["fused"]
    assert _estimators._has_fused_adam("cpu") is has_it


class EpochCounter(Callback):
    """Counts the epochs it saw, and whether validation data was served in each."""

    def initialize(self):
        self.epochs_ = 0
        self.served_ = []
        return self

    def on_epoch_end(self, net, **kwargs):
        self.epochs_ += 1
        self.served_.append(net.train_split.valid is not None)


def test_user_callbacks_run_and_the_parameter_is_not_changed():
    X, y = _data()
    counter = EpochCounter()
    callbacks = [
        ("lr", LRScheduler(policy="StepLR", step_size=2, gamma=0.5)),
        ("count", counter),
        # Never improves by 10: skorch's own rule ends training after patience + 1 epochs.
        ("my_stop", EarlyStopping(monitor="train_loss", patience=2, threshold=10.0)),
    ]
    model = RNNClassifier(hidden_size=4, max_iter=20, learning_rate=0.01, callbacks=callbacks,
                          random_state=0).fit(X, y)
    assert model.n_iter_ == 3 == len(model.loss_curve_)
    fitted = dict(model.net_.callbacks_)
    assert fitted["count"].epochs_ == 3 and fitted["count"] is not counter
    assert model.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(0.005)  # halved after 2 epochs
    assert not hasattr(counter, "epochs_")  # the parameter's object never trained
    assert model.get_params()["callbacks"] is callbacks


class EpochRates(Callback):
    """Gives ``sink`` the step size each epoch runs at."""

    def __init__(self, sink=None):
        self.sink = sink

    def on_epoch_begin(self, net, **kwargs):
        self.sink(net.optimizer_.param_groups[0]["lr"])


def _schedule(policy, kwargs, epochs, lr=0.01):
    """The step size of each epoch under PyTorch's scheduler, built fresh."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    scheduler = getattr(torch.optim.lr_scheduler, policy)(optimizer, **kwargs)
    rates = []
    for _ in range(epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("policy, kwargs", [
    ("StepLR", dict(step_size=1, gamma=0.5)), ("ExponentialLR", dict(gamma=0.5)),
    ("LambdaLR", dict(lr_lambda=lambda epoch: 0.5 ** epoch)),
    ("LinearLR", dict(start_factor=0.1, total_iters=3)), ("ConstantLR", dict(factor=0.5, total_iters=2)),
    # Warm calls ran CyclicLR's first epoch at learning_rate (0.01, 10 times base_lr):
    # the estimator set the base rate the last scheduler left to learning_rate.
    ("CyclicLR", dict(base_lr=0.001, max_lr=0.1, step_size_up=2, cycle_momentum=False)),
])
def test_every_training_call_starts_at_learning_rate_and_runs_the_schedule_from_its_start(policy, kwargs):
    # A scheduler's changes do not carry over to the next call (the callbacks' docs).
    # skorch rebuilt the scheduler from the history at every call: StepLR's first step
    # then halved the rate (three partial_fit calls ran at 0.01, 0.005, 0.005) and
    # LambdaLR went on from the history. (A first fix set the rate back after the
    # scheduler was built, which scaled warm-up schedules: LinearLR from 0.1 ran at
    # 10 times learning_rate.) Every call now runs the schedule as a first fit does.
    X, y = _data()
    seen = []

    def record(rate):  # a function: the engine's deep copies of the callback share it
        seen.append(rate)

    scheduler = getattr(torch.optim.lr_scheduler, policy)  # skorch reads some by name only
    callbacks = [("rates", EpochRates(sink=record)), ("lr", LRScheduler(policy=scheduler, **kwargs))]
    model = RNNClassifier(hidden_size=4, batch_size=8, learning_rate=0.01, callbacks=callbacks,
                          max_iter=4, n_iter_no_change=100, random_state=0)
    model.fit(X, y)
    np.testing.assert_allclose(seen, _schedule(policy, kwargs, 4))  # as PyTorch runs it
    model.set_params(warm_start=True).fit(X, y)
    np.testing.assert_allclose(seen[4:], _schedule(policy, kwargs, 4))
    for _ in range(3):
        model.partial_fit(X, y)
    np.testing.assert_allclose(seen[8:], _schedule(policy, kwargs, 1) * 3)
    model.set_params(learning_rate=0.002, warm_start=False).fit(X, y)
    np.testing.assert_allclose(seen[11:], _schedule(policy, kwargs, 4, lr=0.002))
    assert "last_epoch" not in callbacks[1][1].kwargs  # the callback given is left as it was


class _Halving(torch.optim.lr_scheduler.StepLR):
    """A scheduler whose constructor passes its keywords on (no last_epoch of its own)."""

    def __init__(self, optimizer, **kwargs):
        super().__init__(optimizer, step_size=1, gamma=0.5, **kwargs)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_scheduler_taking_keywords_restarts_at_every_call_too():
    # The first version of the restart took only a policy naming last_epoch; skorch gave
    # this one the history's last_epoch, after the estimator had removed the optimizer's
    # initial_lr: every warm fit and partial_fit after a fit failed (KeyError).
    X, y = _data()
    seen = []

    def record(rate):
        seen.append(rate)

    model = RNNClassifier(hidden_size=4, batch_size=8, max_iter=3, n_iter_no_change=100, random_state=0,
                          callbacks=[("rates", EpochRates(sink=record)), ("lr", LRScheduler(policy=_Halving))])
    model.fit(X, y)
    model.set_params(warm_start=True).fit(X, y)
    model.partial_fit(X, y)
    np.testing.assert_allclose(seen, [0.01, 0.005, 0.0025] * 2 + [0.01])


@pytest.mark.parametrize("scoring", ["accuracy", "roc_auc", "f1", "neg_log_loss"])
def test_a_users_epoch_scoring_reads_the_classifier_as_scikit_learn_scorers_do(scoring):
    # The net's predict gave probabilities, and it had no classes_: 'accuracy' and 'f1'
    # failed with "a mix of binary and continuous-multioutput targets", 'roc_auc' with
    # "y should be a 1d array".
    X, y = _data(80)
    y = np.where(y == 1, "up", "down")
    model = RNNClassifier(hidden_size=4, max_iter=3, early_stopping=True, random_state=0,
                          callbacks=[("s", EpochScoring(scoring, lower_is_better=False))]).fit(X, y)
    net = model.net_
    scores = net.history[:, scoring]
    assert len(scores) == 3 and np.isfinite(scores).all()
    assert is_classifier(net) and list(net.classes_) == [0, 1]  # indices of model.classes_
    if scoring == "accuracy":  # a share of the 8 held-out sequences
        np.testing.assert_allclose(np.asarray(scores) * 8, np.round(np.asarray(scores) * 8), atol=1e-9)


def test_a_users_callback_watching_validation_without_validation_data_is_refused():
    X, y = _data()
    for callback, record in ((EarlyStopping(), "valid_loss"), (Checkpoint(dirname="unused"), "valid_loss_best")):
        model = RNNClassifier(hidden_size=4, max_iter=2, callbacks=[("mine", callback)], random_state=0)
        with pytest.raises(ValueError, match=f"watches '{record}'.*no validation data.*set early_stopping=True"):
            model.fit(X, y)  # 'auto': no hold-out below 200 sequences; was a bare KeyError
        assert not hasattr(model, "net_")
        with pytest.raises(ValueError, match="partial_fit holds none out"):
            model.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="'acc' scores the validation data.*on_train=True"):
        RNNClassifier(hidden_size=4, max_iter=2, callbacks=[("acc", EpochScoring("accuracy"))]).fit(X, y)
    RNNClassifier(hidden_size=4, max_iter=2,  # the training data: allowed
                  callbacks=[("acc", EpochScoring("accuracy", on_train=True))]).fit(X, y)
    model = RNNClassifier(hidden_size=4, max_iter=2, early_stopping=True, random_state=0,
                          callbacks=[("mine", EarlyStopping())]).fit(X, y)
    before = model.predict_proba(X)
    with pytest.raises(ValueError, match="no validation data"):
        model.set_params(early_stopping=False, warm_start=True).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), before)
    assert model.n_iter_ == 2


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_users_callback_that_loads_its_best_weights_is_refused_where_the_stopping_rule_runs(tmp_path):
    # A user's EarlyStopping(load_best=True) reloaded its own best weights at the end of
    # training, before the stopping rule: the rule then kept (or judged as the last
    # epoch's) weights of another epoch, and the model scored -0.674 on the held-out
    # sequences, epoch 1's validation score, while best_epoch_ said 4 (-0.611).
    X, y = _data()
    steps = [(x[:, :1] > 0).astype(float) for x in X]
    for callback in (EarlyStopping(monitor="train_loss", patience=100, load_best=True),
                     Checkpoint(dirname=str(tmp_path), monitor="train_loss_best", load_best=True)):
        for model, target in ((RNNStepClassifier(hidden_size=4, max_iter=3, early_stopping=True), steps),
                              (RNNClassifier(hidden_size=4, max_iter=3), y)):
            model.set_params(callbacks=[("mine", callback)], random_state=0)
            with pytest.raises(ValueError, match="'mine' .* has load_best=True.*set load_best=False.*early_stopping"):
                model.fit(X, target)
            assert not hasattr(model, "net_")
    # Without load_best it only ends training, and partial_fit runs no stopping rule.
    callback = EarlyStopping(monitor="train_loss", patience=100, load_best=True)
    RNNClassifier(hidden_size=4, callbacks=[("mine", callback)], random_state=0).partial_fit(X, y, classes=[0, 1])
    callback.set_params(load_best=False)
    model = RNNStepClassifier(hidden_size=4, max_iter=3, early_stopping=True, random_state=0,
                              callbacks=[("mine", callback)]).fit(X, steps)
    assert model.n_iter_ == 3


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_callback_that_loads_a_checkpoint_s_history_is_refused(tmp_path):
    # LoadInitState replaced the history as training began: a fit of max_iter=1 after a
    # checkpoint of 3 epochs reported n_iter_ == 4, and the max_iter check read the
    # checkpoint's epochs. A Checkpoint(load_best=True) loaded its history as each
    # partial_fit call ended: after four calls n_iter_ was 1 and loss_curve_ the first.
    X, y = _data()
    checkpoint = Checkpoint(dirname=str(tmp_path), monitor="train_loss_best")
    RNNClassifier(hidden_size=4, max_iter=3, random_state=0, callbacks=[("cp", checkpoint)]).fit(X, y)
    model = RNNClassifier(hidden_size=4, max_iter=1, random_state=0, callbacks=[("load", LoadInitState(checkpoint))])
    for train in (lambda: model.fit(X, y), lambda: model.partial_fit(X, y, classes=[0, 1])):
        with pytest.raises(ValueError, match="'load' \\(LoadInitState\\) replaces the network's weights, optimizer "
                                             "state and history.*warm_start=True or partial_fit"):
            train()
        assert not hasattr(model, "net_")
    checkpoint.set_params(load_best=True)
    model = RNNClassifier(hidden_size=4, random_state=0, callbacks=[("cp", checkpoint)])
    with pytest.raises(ValueError, match="'cp' \\(Checkpoint\\) has load_best=True.*each partial_fit call.*"
                                         "set load_best=False"):
        model.partial_fit(X, y, classes=[0, 1])
    assert not hasattr(model, "net_")


def test_a_batch_scoring_is_refused_where_an_epoch_scoring_is():
    # The checks looked at EpochScoring only: BatchScoring('accuracy') on per-step targets
    # failed in scikit-learn ('unknown is not supported'), and a BatchScoring of the
    # validation data in a call without any silently recorded nothing.
    X, y = _data()
    steps = [(x[:, :1] > 0).astype(float) for x in X]
    one = lambda net, X, y: 1.0  # noqa: E731
    with pytest.raises(ValueError, match="'acc' is a BatchScoring of scoring='accuracy': scikit-learn's scorers "
                                         "take one target per sequence.*Pass a callable.*X\\['lengths'\\]"):
        RNNStepClassifier(hidden_size=3, max_iter=1, callbacks=[("acc", BatchScoring("accuracy", on_train=True))]).fit(X, steps)
    for model, target in ((RNNClassifier(hidden_size=3, max_iter=1), y), (RNNStepClassifier(hidden_size=3, max_iter=1), steps)):
        with pytest.raises(ValueError, match="'v' scores the validation data, but this training call has none.*on_train=True"):
            model.set_params(callbacks=[("v", BatchScoring(one, name="v"))]).fit(X, target)
        assert not hasattr(model, "net_")
    # A callable, of the training data or with validation data, records its score.
    model = RNNStepClassifier(hidden_size=3, max_iter=2, callbacks=[("v", BatchScoring(one, name="v", on_train=True))])
    assert model.fit(X, steps).net_.history[:, "v"] == [1.0, 1.0]
    model = RNNClassifier(hidden_size=3, max_iter=2, early_stopping=True, callbacks=[("v", BatchScoring(one, name="v"))])
    assert model.fit(X, y).net_.history[:, "v"] == [1.0, 1.0]


def test_an_epoch_scoring_without_caching_is_refused_before_training():
    # skorch reads the targets of an uncached EpochScoring from its own Dataset type
    # only: the scorer got y=None and failed after the first epoch ("Expected
    # array-like (array or non-string sequence), got None").
    X, y = _data()
    model = RNNClassifier(hidden_size=4, max_iter=2, early_stopping=True, random_state=0).fit(X, y)
    before = model.predict_proba(X)
    scoring = EpochScoring("accuracy", use_caching=False, lower_is_better=False)
    for on_train in (True, False):
        scoring.set_params(on_train=on_train)
        with pytest.raises(ValueError, match="'acc' is an EpochScoring of scoring='accuracy' with use_caching=False.*Leave use_caching=True"):
            model.set_params(warm_start=True, callbacks=[("acc", scoring)]).fit(X, y)
        np.testing.assert_array_equal(model.predict_proba(X), before)
        assert model.n_iter_ == 2
    # A callable scorer is called with y=None, which one that does not read y takes.
    scored = EpochScoring(lambda net, dataset, y: float(len(net.predict(dataset))), use_caching=False,
                          on_train=True, name="count")
    fitted = RNNClassifier(hidden_size=4, max_iter=2, random_state=0, callbacks=[("count", scored)]).fit(X, y)
    assert list(fitted.net_.history[:, "count"]) == [float(len(X))] * 2


def test_the_net_s_predictions_on_a_dataset_follow_the_dataset_s_order():
    # A scoring callable without caching reads the targets from the dataset and the
    # predictions from net.predict(dataset), which came back in the batches' order
    # (sorted by length): its accuracy was that of other sequences' labels.
    from sklearn.metrics import accuracy_score

    from sklearn_rnn.sequences import SequenceDataset

    rng = np.random.default_rng(3)
    X = [rng.normal(size=(rng.integers(1, 12), 2)) for _ in range(60)]
    y = np.array([int(x[-1, 0] > 0) for x in X])

    def accuracy(net, dataset, _):
        return accuracy_score(dataset.y.cpu().numpy(), net.predict(dataset))

    scoring = EpochScoring(accuracy, name="mine", use_caching=False, lower_is_better=False)
    model = RNNClassifier(hidden_size=8, max_iter=4, early_stopping=True, validation_fraction=0.3,
                          random_state=0, callbacks=[("mine", scoring)]).fit(X, y)
    history = model.net_.history
    assert list(history[:, "mine"]) == list(history[:, "valid_score"])
    dataset = SequenceDataset(model._encoder.encode(X, device="cpu"))
    # net_ computes in float32, predict_proba in float64 (TensorFloat-32 on a GPU: 4e-5 apart)
    np.testing.assert_allclose(model.net_.predict_proba(dataset), model.predict_proba(X), atol=on_device(1e-6, 1e-4))


class FileLog(Callback):
    """A logger: one line per epoch to a file it holds open, and a list of notes."""

    def __init__(self, file=None, notes=None):
        self.file = file
        self.notes = notes

    def initialize(self):
        self.epochs_ = 0
        return self

    def on_epoch_end(self, net, **kwargs):
        self.epochs_ += 1
        self.notes.append(self.epochs_)
        self.file.write(f"{float(net.history[-1, 'train_loss'])!r}\n")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_callback_holding_an_open_file_trains_on_a_copy_that_shares_the_file(tmp_path):
    # Training deep-copies the user's callbacks, and an open file (a lock, a SummaryWriter:
    # what a logger holds) cannot be: fit failed with copy's bare "TypeError: cannot pickle
    # '_io.TextIOWrapper' object", and so did set_params(callbacks__log__...).
    X, y = _data()
    with open(tmp_path / "log.txt", "w") as file:
        logger = FileLog(file, notes=[])
        model = RNNClassifier(hidden_size=4, max_iter=3, n_iter_no_change=100, random_state=0,
                              callbacks=[("log", logger)]).fit(X, y)
        fitted = dict(model.net_.callbacks_)["log"]
        assert fitted is not logger and fitted.file is file  # the file shared, the rest copied
        assert fitted.notes == [1, 2, 3] and logger.notes == [] and not hasattr(logger, "epochs_")
        model.set_params(callbacks__log__notes=[0], warm_start=True).fit(X, y)
        assert model.callbacks[0][1].file is file and dict(model.net_.callbacks_)["log"].notes == [0, 1, 2, 3]
    lines = (tmp_path / "log.txt").read_text().split()
    assert [float(line) for line in lines] == model.net_.history[:, "train_loss"]

    class Unique(Callback):
        def __copy__(self):
            raise TypeError("one of a kind")

        __deepcopy__ = lambda self, memo: self.__copy__()  # noqa: E731

    model = RNNClassifier(hidden_size=4, max_iter=2, callbacks=[("mine", Unique())])
    with pytest.raises(ValueError, match="'mine' \\(Unique\\) cannot be copied \\(one of a kind\\).*initialize"):
        model.fit(X, y)
    assert not hasattr(model, "net_")


def test_callbacks_clone_and_refit_the_same():
    X, y = _data()
    model = RNNClassifier(hidden_size=4, max_iter=4, tol=0.0, random_state=0,
                          callbacks=[("lr", LRScheduler(policy="StepLR", step_size=1, gamma=0.9))])
    twin = clone(model)
    assert twin.callbacks is not model.callbacks and twin.callbacks[0][0] == "lr"
    assert twin.callbacks[0][1].get_params()["gamma"] == 0.9
    a = model.fit(X, y).predict_proba(X)
    b = twin.fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_validation_data_is_served_during_fit_and_kept_nowhere_after():
    X, y = _data(60)
    model = RNNClassifier(hidden_size=4, max_iter=3, early_stopping=True, tol=0.0,
                          callbacks=[("count", EpochCounter())], random_state=0).fit(X, y)
    assert dict(model.net_.callbacks_)["count"].served_ == [True, True, True]
    assert model.net_.train_split.valid is None
    assert isinstance(model.net_.train_split, _engine.ValidationSplit)


def test_a_stream_of_partial_fit_builds_the_callbacks_once():
    X, y = _data()
    model = RNNClassifier(hidden_size=4, batch_size=8, callbacks=[("count", EpochCounter())],
                          random_state=0)
    model.partial_fit(X[:10], y[:10], classes=[0, 1])
    first = [callback for _, callback in model.net_.callbacks_]
    for start in range(10, 40, 10):
        model.partial_fit(X[start:start + 10], y[start:start + 10])
    assert [callback for _, callback in model.net_.callbacks_] == first  # the same objects
    assert dict(model.net_.callbacks_)["count"].epochs_ == 4


def test_changed_settings_rebuild_the_callbacks():
    X, y = _data()
    model = RNNClassifier(hidden_size=4, random_state=0).partial_fit(X, y, classes=[0, 1])
    assert dict(model.net_.callbacks_)["clip"].gradient_clip_value == 1.0
    model.set_params(clip_threshold=0.5).partial_fit(X, y)
    assert dict(model.net_.callbacks_)["clip"].gradient_clip_value == 0.5


@pytest.mark.parametrize(
    "callbacks, message",
    [
        ([LRScheduler()], "expected a \\(name, callback\\) pair"),
        ([("lr", "StepLR")], "expected a \\(name, callback\\) pair"),
        ([("stop", EarlyStopping())], "a name the estimator uses for its own"),
        # skorch's defaults: skorch refused these as "duplicate user-set" names, and
        # 'valid_loss' or 'print_log' only in calls that run that default.
        ([("train_loss", EpochCounter())], "or for skorch's default callbacks"),
        ([("valid_loss", EpochCounter())], "or for skorch's default callbacks"),
        ([("print_log", EpochCounter())], "or for skorch's default callbacks"),
        # No penalty (alpha 'auto' is 0 for this cell): no 'train_objective' is recorded,
        # and the callback failed with a KeyError after the first epoch.
        ([("es", EarlyStopping(monitor="train_objective"))], "has no penalty"),
        ([("a", EpochCounter()), ("a", EpochCounter())], "names a callback twice"),
    ],
)
def test_bad_callbacks_are_refused_with_the_fix(callbacks, message):
    X, y = _data()
    model = RNNRegressor(hidden_size=4, max_iter=2, callbacks=callbacks)
    with pytest.raises(ValueError, match=message):
        model.fit(X, y.astype(float))
    assert not hasattr(model, "net_")


def test_a_model_with_callbacks_is_refused_by_save_and_kept_by_pickle(tmp_path):
    X, y = _data()
    model = RNNClassifier(hidden_size=4, max_iter=2, tol=0.0, random_state=0,
                          callbacks=[("count", EpochCounter())]).fit(X, y)
    with pytest.raises(TypeError, match="pickle or joblib"):
        model.save(tmp_path / "model.safetensors")
    assert not (tmp_path / "model.safetensors").exists()
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))
    assert dict(restored.net_.callbacks_)["count"].epochs_ == 2
    model.set_params(callbacks=None).save(tmp_path / "model.safetensors")  # then it saves
    loaded = RNNClassifier.load(tmp_path / "model.safetensors")
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


@pytest.mark.parametrize("copy_of", [copy.deepcopy, lambda model: pickle.loads(pickle.dumps(model))],
                         ids=["deepcopy", "pickle"])
def test_a_copy_of_a_model_with_callbacks_keeps_training_them_with_their_state(copy_of):
    # The callbacks' key held their objects' identities: a copy's callbacks are new
    # objects, so its next training call built them afresh (a warm-up schedule counted
    # from its start again, and the copy's weights went apart from the original's).
    X, y = _data()
    model = RNNClassifier(hidden_size=4, max_iter=2, random_state=1, callbacks=[("count", EpochCounter())])
    model.partial_fit(X, y, classes=[0, 1])
    copied, changed = copy_of(model), copy_of(model)
    changed.callbacks[0][1].note = "changed in place"  # no longer the callbacks it was built for
    for estimator in (model, copied, changed):
        estimator.partial_fit(X, y)
    assert dict(copied.net_.callbacks_)["count"].epochs_ == dict(model.net_.callbacks_)["count"].epochs_ == 2
    assert dict(changed.net_.callbacks_)["count"].epochs_ == 1  # built afresh
    np.testing.assert_array_equal(copied.predict_proba(X), model.predict_proba(X))


def test_a_model_whose_callbacks_were_all_removed_saves(tmp_path):
    # callbacks=[] (what set_params(callbacks__<name>=None) leaves after the last one)
    # was refused by save as "skorch objects that a file which runs no code cannot hold".
    X, y = _data()
    model = RNNClassifier(hidden_size=4, max_iter=2, random_state=0, callbacks=[("count", EpochCounter())])
    model.fit(X, y).set_params(callbacks__count=None)
    assert model.callbacks == []
    model.save(tmp_path / "model.safetensors")
    loaded = RNNClassifier.load(tmp_path / "model.safetensors")
    assert loaded.callbacks == []
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_stacked_training_refuses_callbacks():
    from sklearn_rnn._stacked import check_stackable

    model = RNNRegressor(cell="decay", time_feature=0, optimizer="sgd", num_layers=1,
                         callbacks=[("count", EpochCounter())])
    with pytest.raises(ValueError, match="callbacks"):
        check_stackable(model)


def test_the_readout_is_a_hook_of_the_estimator_class():
    assert RNNClassifier._output_steps is LAST_STEP and RNNRegressor._output_steps is LAST_STEP
    assert RNNStepClassifier._output_steps is EVERY_STEP
    assert pickle.loads(pickle.dumps(EVERY_STEP)) is EVERY_STEP
    for path in PACKAGE.rglob("*.py"):
        assert "_every_step" not in path.read_text(encoding="utf-8"), path


def test_prediction_and_validation_scores_run_the_one_inference_function(monkeypatch):
    """predict and the early-stopping score both run the network through run_network."""
    calls = []
    run = _inference.run_network

    def counting(module, dataset, **kwargs):
        calls.append((module.training, kwargs["steps"]))
        return run(module, dataset, **kwargs)

    monkeypatch.setattr(_estimators, "run_network", counting)
    monkeypatch.setattr(_engine, "run_network", counting)
    X, y = _data(60)
    model = RNNClassifier(hidden_size=4, max_iter=3, early_stopping=True, tol=0.0,
                          random_state=0).fit(X, y)
    assert len(calls) == 3  # one validation score per epoch
    model.predict(X)
    assert len(calls) == 4 and all(steps is LAST_STEP for _, steps in calls)


def test_the_engine_and_inference_do_not_import_the_estimators():
    """The one-way flow of docs/architecture.rst: estimators -> engine -> inference."""
    for name in ("_engine.py", "_inference.py", "_callbacks.py"):
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"_estimators", "_step_estimator", "_persistence"}, name
    inference = ast.parse((PACKAGE / "_inference.py").read_text(encoding="utf-8"))
    assert "_engine" not in {n.module for n in ast.walk(inference) if isinstance(n, ast.ImportFrom)}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_named_callback_s_parameters_are_set_and_searched_as_in_skorch():
    # callbacks__<name>__<parameter> failed with "'list' object has no attribute
    # 'set_params'", in set_params and in a grid over it.
    from sklearn.model_selection import GridSearchCV

    X, y = _data()
    schedule = LRScheduler(policy="StepLR", step_size=1, gamma=0.5)
    given = [("lr", schedule)]
    model = RNNClassifier(hidden_size=4, max_iter=2, random_state=0, callbacks=given)
    changed = clone(model).set_params(callbacks__lr__gamma=0.9, max_iter=3)
    assert changed.callbacks[0][1].kwargs["gamma"] == 0.9 and changed.max_iter == 3
    assert schedule.kwargs["gamma"] == 0.5 and given[0][1] is schedule  # the objects given are left
    changed.fit(X, y)
    assert changed.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(0.01 * 0.9**3)
    search = GridSearchCV(model, {"callbacks__lr__gamma": [0.5, 0.9]}, cv=2).fit(X, y)
    assert search.cv_results_["param_callbacks__lr__gamma"].tolist() == [0.5, 0.9]
    for key in ("callbacks__other__gamma", "callbacks__other"):
        with pytest.raises(ValueError, match=r"callbacks__<name>__<parameter>: expected one of the callbacks' names \['lr'\]"):
            clone(model).set_params(**{key: 0.9})
    other = LRScheduler(policy="StepLR", step_size=2, gamma=0.1)  # replaced, or taken out, by name as in skorch
    assert clone(model).set_params(callbacks__lr=other).callbacks == [("lr", other)]
    assert clone(model).set_params(callbacks__lr=None).callbacks == []
    both = clone(model).set_params(callbacks__lr=other, callbacks__lr__step_size=7).callbacks
    assert both[0][1].kwargs["step_size"] == 7 and other.kwargs["step_size"] == 2  # on the replacement
    with pytest.raises(ValueError, match=r"callbacks__lr=None takes that callback out.*\['gamma'\]"):
        clone(model).set_params(callbacks__lr=None, callbacks__lr__gamma=0.5)
    bare = LRScheduler(policy="StepLR", step_size=3)  # not a pair: left for fit's own refusal
    mixed = RNNClassifier(callbacks=[("lr", schedule), bare]).set_params(callbacks__lr__gamma=0.9)
    assert mixed.callbacks[0][1].kwargs["gamma"] == 0.9 and mixed.callbacks[1] is bare
    with pytest.raises(ValueError, match="Invalid parameter 'nope'"):
        clone(model).set_params(callbacks__lr__nope=1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_simplex_refuses_a_callback_that_acts_on_the_gradients():
    """The engine notifies on_grad_computed, but SimplexSGD steps from the temporal
    gradients computed before it: a GradientNormClipping's edit of .grad was silently
    ignored (the weights came out the same as without it). Such a callback is refused up
    front, naming the way out; with 'sgd' it clips, and callbacks that leave the
    gradients alone (and the engine's own) train with 'simplex'."""
    from skorch.callbacks import GradientNormClipping

    X, y = _data()
    clip = [("gclip", GradientNormClipping(gradient_clip_value=1e-9))]

    class GradientLogger(Callback):  # acts on the gradients as far as the engine can tell
        def on_grad_computed(self, net, named_parameters, **kwargs):
            pass

    for callbacks in (clip, [("log", GradientLogger())]):
        model = RNNClassifier(optimizer="simplex", hidden_size=4, max_iter=2, random_state=0,
                              callbacks=callbacks)
        with pytest.raises(ValueError, match=r"callback '(gclip|log)' \((GradientNormClipping|GradientLogger)\) "
                                             r"acts on the gradients.*clip_threshold.*optimizer='sgd' or 'adam'.*"
                                             r"read them in on_batch_end"):
            model.fit(X, y)
        fitted = RNNClassifier(optimizer="simplex", hidden_size=4, max_iter=2, random_state=0).fit(X, y)
        with pytest.raises(ValueError, match="acts on the gradients"):
            fitted.set_params(callbacks=callbacks).partial_fit(X, y)

    def weights(**params):
        model = RNNClassifier(hidden_size=4, max_iter=2, random_state=0, **params).fit(X, y)
        return torch.cat([p.detach().flatten() for p in model.net_.module_.parameters()])

    assert not torch.equal(weights(optimizer="sgd"), weights(optimizer="sgd", callbacks=clip))
    schedule = [("lr", LRScheduler(policy="StepLR", step_size=1, gamma=0.5))]
    assert not torch.equal(weights(optimizer="simplex"), weights(optimizer="simplex", callbacks=schedule))

    class GradientReader(Callback):  # where the message sends a callback that only reads
        def initialize(self):
            self.norms_ = []
            return self

        def on_batch_end(self, net, training=False, **kwargs):
            if training:
                self.norms_.append(sum(float(p.grad.square().sum()) for p in net.module_.parameters()
                                      if p.grad is not None) ** 0.5)

    model = RNNClassifier(optimizer="simplex", hidden_size=4, max_iter=2, random_state=0,
                          callbacks=[("read", GradientReader())]).fit(X, y)
    norms = dict(model.net_.callbacks_)["read"].norms_
    assert len(norms) >= 2 and all(norm > 0 for norm in norms)


def test_a_callback_watching_the_objective_runs_where_there_is_a_penalty():
    X, y = _data()
    callbacks = [("es", EarlyStopping(monitor="train_objective", patience=50))]
    model = RNNRegressor(hidden_size=4, max_iter=3, alpha=0.01, callbacks=callbacks).fit(X, y.astype(float))
    assert len(model.net_.history[:, "train_objective"]) == 3


# ------------------------------------------------ callbacks at the engine's records (step42)
def _step_task(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(k, 2)) for k in rng.integers(2, 12, size=n)]
    return X, [np.hstack([x[:, :1] > 0, x[:, 1:] > 0]).astype(float) for x in X]


@pytest.mark.parametrize("name", ["valid_loss", "valid_score", "train_loss", "train_loss_best"])
def test_a_users_scorer_may_not_write_under_the_engines_own_records(name):
    # EpochScoring(name='valid_loss') replaced the record the stopping rule reads: it kept
    # epoch 1 of 4 (the worst), and loss_curve_ showed the user's constant.
    from skorch.callbacks import EpochScoring

    from sklearn_rnn import RNNStepClassifier

    X, y = _step_task()
    scorer = EpochScoring(lambda net, X_, y_: 123.0, on_train=name.startswith("train"), name=name)
    with pytest.raises(ValueError, match=rf"callback 'mine' \(EpochScoring\) writes its score under "
                                         rf"name='{name}', a record of the estimator's own history.*"
                                         r"Give the scorer another name"):
        RNNStepClassifier(hidden_size=4, max_iter=2, callbacks=[("mine", scorer)]).fit(X, y)


def test_a_subclass_of_epoch_scoring_is_refused_for_per_step_outputs_before_training():
    # It was not given the per-step joining of cached batches: numpy's concatenate error
    # after the first epoch, the whole fit lost.
    from skorch.callbacks import EpochScoring

    from sklearn_rnn import RNNStepClassifier

    class Logged(EpochScoring):
        pass

    X, y = _step_task()
    mean_output = lambda net, X_, y_: float(net.forward(X_).nanmean())  # noqa: E731
    with pytest.raises(ValueError, match=r"callback 'mo' is a subclass of EpochScoring \(Logged\).*Use "
                                         r"EpochScoring itself"):
        RNNStepClassifier(hidden_size=4, max_iter=2, callbacks=[("mo", Logged(mean_output, on_train=True,
                                                                             name="mo"))]).fit(X, y)
    model = RNNStepClassifier(hidden_size=4, max_iter=2, batch_size=8, random_state=0,
                              callbacks=[("mo", EpochScoring(mean_output, on_train=True, name="mo"))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert len(model.fit(X, y).net_.history[:, "mo"]) == 2


def test_a_users_train_end_callback_sees_the_weights_the_estimator_keeps():
    # The stopping rule restored the best epoch after the user's on_train_end: a
    # TrainEndCheckpoint saved the last epoch's weights, not the fitted model.
    from skorch.callbacks import Callback

    from sklearn_rnn import RNNStepClassifier

    class AtTrainEnd(Callback):
        def on_train_end(self, net, **kwargs):
            self.state_ = {k: v.clone() for k, v in net.module_.state_dict().items()}

    X, y = _step_task()
    model = RNNStepClassifier(hidden_size=4, max_iter=6, batch_size=8, random_state=0, learning_rate=0.5,
                              early_stopping=True, validation_fraction=0.3, n_iter_no_change=1,
                              callbacks=[("end", AtTrainEnd())])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert model.best_epoch_ < model.n_iter_  # a restore happened
    seen = dict(model.net_.callbacks_)["end"].state_
    for key, value in model.module_.state_dict().items():
        assert torch.equal(seen[key], value)


def test_weights_a_users_callback_spoils_after_the_guard_s_check_are_rolled_back():
    # A callback that made the weights NaN at the last epoch's end: fit returned a NaN
    # model without a word, and predict blamed the inputs' scale.
    from skorch.callbacks import Callback

    from sklearn_rnn import RNNStepClassifier

    class Spoil(Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 3:
                with torch.no_grad():
                    for parameter in net.module_.parameters():
                        parameter.mul_(float("nan"))

    X, y = _step_task()
    two = RNNStepClassifier(hidden_size=4, max_iter=2, batch_size=8, random_state=0, learning_rate=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        two.fit(X, y)
    spoiled = RNNStepClassifier(hidden_size=4, max_iter=3, batch_size=8, random_state=0, learning_rate=0.1,
                                callbacks=[("spoil", Spoil())])
    with pytest.warns(ConvergenceWarning, match=r"the weights became non-finite at the end of epoch 3, after "
                      r"the training guard's check.*the weights of epoch 2 are kept"):
        spoiled.fit(X, y)
    assert spoiled.n_iter_ == 2
    for a, b in zip(spoiled.module_.parameters(), two.module_.parameters(), strict=True):
        assert torch.equal(a, b)
    # With training going on after the spoiled epoch (the next epoch began from it, and
    # its rollback copy held NaN: a NaN model was kept), and under early stopping (whose
    # best epoch was the one removed: a bare "3 is not in list") (engine43 review).
    for options in (dict(max_iter=6), dict(max_iter=3, early_stopping=True), dict(max_iter=6, early_stopping=True)):
        later = RNNStepClassifier(hidden_size=4, batch_size=8, random_state=0, learning_rate=0.1,
                                  callbacks=[("spoil", Spoil())], **options)
        with pytest.warns(ConvergenceWarning, match=r"non-finite at the end of epoch 3, after the training guard's "
                          r"check.*the weights of epoch 2 are kept"):
            later.fit(X, y)
        assert later.n_iter_ == 2 and all(bool(torch.isfinite(p).all()) for p in later.module_.parameters())
        if "early_stopping" in options:
            assert later.best_epoch_ <= 2


def test_an_estimator_whose_callback_holds_an_open_file_clones_and_cross_validates(tmp_path):
    # fit shared the file with its training copy, but clone (and so cross_val_score and
    # searches) deep-copied the callback's parameters: "cannot pickle '_io.TextIOWrapper'".
    from sklearn.model_selection import cross_val_score

    from sklearn_rnn import RNNClassifier

    class FileLog(Callback):
        def __init__(self, f):
            self.f = f

        def on_epoch_end(self, net, **kwargs):
            self.f.write(f"{net.history[-1, 'train_loss']}\n")

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(20)]
    y = np.arange(20) % 2
    with open(tmp_path / "log.txt", "w") as f:
        model = RNNClassifier(hidden_size=3, max_iter=1, random_state=0, callbacks=[("log", FileLog(f))])
        twin = clone(model)
        assert twin.callbacks[0][1] is not model.callbacks[0][1] and twin.callbacks[0][1].f is f
        assert twin.get_params(deep=False).keys() == model.get_params(deep=False).keys()
        # What scikit-learn's clone keeps besides the parameters: the metadata requests
        # were lost, and a pipeline under metadata routing refused the weights.
        with sklearn.config_context(enable_metadata_routing=True):
            requested = clone(clone(model).set_fit_request(sample_weight=True))
            assert requested.get_metadata_routing().fit.requests == {"sample_weight": True}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            assert len(cross_val_score(model, X, y, cv=2)) == 2
    assert len((tmp_path / "log.txt").read_text().splitlines()) == 2  # one epoch per fold


def test_training_runs_with_autograd_under_a_callers_no_grad_or_inference_mode():
    # fit under torch.no_grad failed for the simplex step ("states.projected does not
    # require grad"); partial_fit under torch.inference_mode failed, and its rollback
    # rebuilt Adam's state as inference tensors, so no later call could train (infer43).
    import torch

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(20)]
    y = np.arange(20) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        outside = RNNClassifier(hidden_size=3, max_iter=2, random_state=0, optimizer="simplex").fit(X, y)
        with torch.no_grad():
            inside = RNNClassifier(hidden_size=3, max_iter=2, random_state=0, optimizer="simplex").fit(X, y)
        np.testing.assert_array_equal(inside.predict_proba(X), outside.predict_proba(X))
        model = RNNClassifier(hidden_size=3, max_iter=2, random_state=0).fit(X, y)
        twin = clone(model).fit(X, y)
        with torch.inference_mode():
            model.partial_fit(X, y)
        twin.partial_fit(X, y)
        np.testing.assert_array_equal(model.predict_proba(X), twin.predict_proba(X))
        model.partial_fit(X, y)  # and it trains on outside
        # A caller's autocast trained precision='float32' in bfloat16 (0.03 off).
        with torch.autocast("cpu", dtype=torch.bfloat16):
            under_autocast = RNNClassifier(hidden_size=3, max_iter=2, random_state=0, cell="gru").fit(X, y)
        plain = RNNClassifier(hidden_size=3, max_iter=2, random_state=0, cell="gru").fit(X, y)
        np.testing.assert_array_equal(under_autocast.predict_proba(X), plain.predict_proba(X))


def test_a_callers_autocast_reaches_neither_validation_nor_mixed_precision_training():
    # Under a caller's bfloat16 autocast, float32 training's validation loss was computed
    # in bfloat16 (early stopping kept another epoch), and precision='bfloat16' training
    # read the first step's cast weights at every step (PyTorch caches an autocast's casts
    # until the outermost autocast exits): its training loss stayed at 0.7069.
    import torch

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(40)]
    y = np.arange(40) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for precision in ("float32", "bfloat16"):
            settings = dict(hidden_size=3, max_iter=3, random_state=0, cell="gru", early_stopping=True,
                            precision=precision)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                inside = RNNClassifier(**settings).fit(X, y)
            outside = RNNClassifier(**settings).fit(X, y)
            for key in ("train_loss", "valid_loss"):
                assert inside.net_.history[:, key] == outside.net_.history[:, key], (precision, key)
            np.testing.assert_array_equal(inside.predict_proba(X), outside.predict_proba(X))


def test_the_bfloat16_kernel_probe_answers_the_same_under_no_grad():
    # Cached for the process, it ran its backward pass in the caller's mode: under
    # torch.no_grad it failed, was read as "no bfloat16 kernel", and every later bfloat16
    # fit was refused with a false claim about the CPU (infer43).
    import torch

    from sklearn_rnn.nn.cells._base import _fused_runs_bfloat16_on_cpu

    _fused_runs_bfloat16_on_cpu.cache_clear()
    answer = _fused_runs_bfloat16_on_cpu(torch.nn.GRU)
    _fused_runs_bfloat16_on_cpu.cache_clear()
    with torch.no_grad():
        assert _fused_runs_bfloat16_on_cpu(torch.nn.GRU) == answer
    _fused_runs_bfloat16_on_cpu.cache_clear()
    with torch.inference_mode():
        assert _fused_runs_bfloat16_on_cpu(torch.nn.GRU) == answer


def test_an_interrupt_in_a_callbacks_on_train_end_keeps_the_trained_epochs():
    # skorch runs on_train_end past its own handling of interrupts: a Ctrl-C while a
    # final checkpoint was written discarded the whole fit (a warm one rolled back) with
    # a bare KeyboardInterrupt (engine43 review).
    from skorch.callbacks import Callback

    from sklearn_rnn import RNNClassifier

    class Interrupted(Callback):
        def on_train_end(self, net, **kwargs):
            raise KeyboardInterrupt

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 1)) for _ in range(20)]
    y = np.arange(20) % 2
    model = RNNClassifier(hidden_size=3, max_iter=5, random_state=0, callbacks=[("save", Interrupted())])
    with pytest.warns(UserWarning, match=r"interrupted in a callback's on_train_end, after epoch 5 finished; the "
                                         r"trained epochs are kept") as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
    assert model.n_iter_ == 5 and caught[0].filename == __file__
    plain = RNNClassifier(hidden_size=3, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain.fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), plain.predict_proba(X))


def test_callback_names_with_double_underscores_and_callback_classes_are_refused_by_name():
    # sklearn44: a callback named 'my__lr' was accepted by fit but could never be set by
    # set_params(callbacks__my__lr__gamma=...) or a grid over it; a callback class where
    # an instance belongs met a bare TypeError from the nested set_params.
    from skorch.callbacks import LRScheduler

    from sklearn_rnn import RNNClassifier

    X = [np.ones((3, 2))] * 4
    with pytest.raises(ValueError, match=r"names a callback 'lr___step', which holds '__'.* e\.g\. 'lr_step'"):
        RNNClassifier(max_iter=1, callbacks=[("lr___step", LRScheduler(policy="StepLR", step_size=1))]).fit(X, [0, 1] * 2)
    with pytest.raises(ValueError, match=r"A name holding '__' \('lr__step'\) cannot be set so"):
        RNNClassifier(callbacks=[("lr__step", LRScheduler())]).set_params(callbacks__lr__step__gamma=0.9)
    with pytest.raises(ValueError, match=r"names a callback 'my__lr', which holds '__'.* e\.g\. 'my_lr'"):
        RNNClassifier(max_iter=1, callbacks=[("my__lr", LRScheduler(policy="StepLR", step_size=1))]).fit(X, [0, 1] * 2)
    with pytest.raises(ValueError, match=r"callback 'lr' is <class .*LRScheduler'>, not a skorch callback instance, "
                                         r"so its parameters \['gamma'\] cannot be set.* \('lr', LRScheduler\(\.\.\.\)\)"):
        RNNClassifier(callbacks=[("lr", LRScheduler)]).set_params(callbacks__lr__gamma=0.9)


def test_the_end_of_training_judges_weights_by_the_loss_training_minimized():
    # engine45 1-4: with balanced batches the end-of-training comparison weighed the
    # classes at the data's frequencies, so the untrained network won on a rare class
    # ("none of the epochs lowered the training loss" beside a falling loss_curve_); under
    # bfloat16 a warm fit compared its start and best in bfloat16 against float32 records;
    # best_epoch_ named the call's first epoch, not the one whose weights were kept;
    # weights of 1e-50 (0 in float32) counted as held out.
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier, RNNRegressor

    r = np.random.default_rng(3)
    y = (np.arange(100) < 8).astype(int)
    X = [r.normal(size=(int(r.integers(2, 6)), 1)) + 0.6 * c for c in y]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ConvergenceWarning)
        RNNClassifier(hidden_size=4, max_iter=12, random_state=3, early_stopping=False, n_iter_no_change=2,
                      balanced_batches=True).fit(X, y)
    assert not [w for w in seen if "keeps those" in str(w.message)]

    r = np.random.default_rng(0)
    X = [r.normal(size=(int(r.integers(2, 6)), 1)) for _ in range(200)]
    y = np.array([int(x[-1, 0] > 0) for x in X])
    model = RNNClassifier(hidden_size=4, max_iter=10, random_state=0, early_stopping=True, n_iter_no_change=1,
                          warm_start=True, precision="bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
        start = model.net_.history[model.best_epoch_ - 1]["valid_loss"]
        model.set_params(learning_rate=3e-4, max_iter=3)
        model.fit(X, y)
    recorded = model.net_.history[model.best_epoch_ - 1]["valid_loss"]
    assert model.best_validation_loss_ == recorded
    if min(row["valid_loss"] for row in model.net_.history[-3:]) < start:
        assert model.best_epoch_ > 10  # an epoch of the call, by the recorded losses

    model = RNNClassifier(hidden_size=4, max_iter=20, random_state=0, early_stopping=False, warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
        first = dict(model.net_.callbacks_)["stop"]
        restored = first.best_epoch_ - first.kept_start_  # the epoch whose weights the first fit kept
        kept = [p.detach().clone() for p in model.module_.parameters()]
        model.set_params(learning_rate=3.0, max_iter=8, early_stopping=True, n_iter_no_change=2)
        model.fit(X, y)
    assert all(torch.equal(p, q) for p, q in zip(model.module_.parameters(), kept))  # the start kept
    assert model.best_epoch_ == restored  # the epoch whose weights these are, not the call's first (21)

    X = [r.normal(size=(int(r.integers(2, 6)), 1)) for _ in range(60)]
    weight = np.full(60, 1e-50)
    weight[:6] = 1.0
    with pytest.raises(ValueError, match=r"or 0 in float32 beside the others.*expected at least 2 for validation"):
        RNNRegressor(hidden_size=3, max_iter=2, random_state=0, early_stopping=True).fit(
            X, np.array([x[-1, 0] for x in X]), sample_weight=weight)
