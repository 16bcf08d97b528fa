"""Mixed precision (``precision``): autocast training, the float16 loss scaler, errors."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError

import sklearn_rnn
from sklearn_rnn import RNNClassifier, RNNRegressor, _estimators
from sklearn_rnn.nn import RecurrentNetwork, get_cell
from sklearn_rnn.optim import temporal_gradients

SETTINGS = {"adam": 0.03, "sgd": 0.3, "simplex": 0.3}


def memory_task(n=160, seed=0):
    """Recall the sign of the first value of sequences of 3 to 8 steps (chance: 0.5)."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(3, 9), 2)) for _ in range(n)]
    return X, np.array([int(x[0, 0] > 0) for x in X])


def classifier(optimizer, **kwargs):
    params = {
        "hidden_size": 16, "optimizer": optimizer, "learning_rate": SETTINGS[optimizer], "batch_size": 20,
        "max_iter": 60, "device": "cpu", "random_state": 0,
    }
    return RNNClassifier(**{**params, **kwargs})


def fit_quietly(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "simplex"])
def test_bfloat16_training_on_the_cpu_learns_and_runs_in_bfloat16(optimizer):
    X, y = memory_task()
    clf = fit_quietly(classifier(optimizer, precision="bfloat16", max_iter=1, warm_start=True), X, y)
    seen = []
    clf.module_.readout.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    clf.set_params(max_iter=60)
    fit_quietly(clf, X, y)
    assert torch.bfloat16 in seen  # the training forward passes ran under autocast
    assert all(p.dtype == torch.float32 for p in clf.module_.parameters())
    X_test, y_test = memory_task(400, seed=1)
    assert clf.score(X_test, y_test) > 0.8  # chance is 0.5; float32 gets 0.87 to 0.95
    assert clf.predict_proba(X_test[:3]).dtype == np.float64


def test_bfloat16_and_float32_train_differently_but_equally_well():
    X, y = memory_task()
    full = fit_quietly(classifier("simplex"), X, y)
    half = fit_quietly(classifier("simplex", precision="bfloat16"), X, y)
    steps = min(len(full.loss_curve_), len(half.loss_curve_))
    assert not np.allclose(full.loss_curve_[:steps], half.loss_curve_[:steps])
    X_test, y_test = memory_task(400, seed=1)
    assert abs(full.score(X_test, y_test) - half.score(X_test, y_test)) < 0.1


def test_precision_survives_clone_pickle_and_save_load(tmp_path):
    X, y = memory_task(60)
    reg = fit_quietly(RNNRegressor(hidden_size=8, max_iter=2, precision="bfloat16", device="cpu",
                                   random_state=0), X, y.astype(float))
    assert clone(reg).get_params()["precision"] == "bfloat16"
    assert pickle.loads(pickle.dumps(reg)).precision == "bfloat16"
    reg.save(tmp_path / "model.safetensors")
    loaded = sklearn_rnn.load(tmp_path / "model.safetensors")
    assert loaded.precision == "bfloat16"
    np.testing.assert_allclose(loaded.predict(X[:5]), reg.predict(X[:5]))


def test_bad_values_give_clear_errors():
    X, y = memory_task(40)
    with pytest.raises(InvalidParameterError, match="'precision' parameter"):
        RNNClassifier(precision="half").fit(X, y)
    with pytest.raises(ValueError, match="precision='float16' needs a CUDA device.*'bfloat16'"):
        RNNClassifier(precision="float16", device="cpu").fit(X, y)


@pytest.fixture
def float16_on_the_cpu(monkeypatch):
    """The float16 code path (GradScaler) with bfloat16 arithmetic, so that it runs here."""
    monkeypatch.setitem(_estimators.PRECISIONS, "float16", torch.bfloat16)
    monkeypatch.setattr(_estimators.BaseRNN, "_check_precision", lambda self, device: None)


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "simplex"])
def test_loss_scaler_skips_overflowing_updates_and_training_goes_on(float16_on_the_cpu, monkeypatch, optimizer):
    get_loss = _estimators._SequenceNet.get_loss
    calls = []

    def first_overflows(self, *args, training=False, **kwargs):
        loss = get_loss(self, *args, training=training, **kwargs)
        if training:
            calls.append(1)
            if len(calls) == 1:
                return loss * 1e36  # times the scale 2**16: beyond float32, inf gradients
        return loss

    monkeypatch.setattr(_estimators._SequenceNet, "get_loss", first_overflows)
    X, y = memory_task()
    clf = classifier(optimizer, precision="float16", max_iter=1, warm_start=True)
    fit_quietly(clf, X[:20], y[:20])  # one update: the overflowing one
    scaler = clf.net_.grad_scaler_
    assert scaler.get_scale() == 2.0**15  # backed off from 2**16
    assert all(torch.isfinite(p).all() for p in clf.module_.parameters())
    if optimizer == "simplex":
        assert sum(clf.net_.optimizer_.branch_counts.values()) == 0  # the step was skipped
    clf.set_params(max_iter=60)
    fit_quietly(clf, X, y)
    X_test, y_test = memory_task(400, seed=1)
    assert clf.score(X_test, y_test) > 0.8
    assert pickle.loads(pickle.dumps(clf)).net_.grad_scaler_.get_scale() == scaler.get_scale()


def test_float16_path_skips_exactly_the_overflowing_update(float16_on_the_cpu, monkeypatch):
    """Parameters are untouched by a skipped update and move on the next one."""
    X, y = memory_task(20)
    clf = fit_quietly(classifier("sgd", precision="float16", max_iter=1, warm_start=True), X, y)
    before = [p.detach().clone() for p in clf.module_.parameters()]
    get_loss = _estimators._SequenceNet.get_loss
    monkeypatch.setattr(
        _estimators._SequenceNet, "get_loss",
        lambda self, *a, training=False, **k: get_loss(self, *a, training=training, **k) * (1e36 if training else 1),
    )
    scale = clf.net_.grad_scaler_.get_scale()
    fit_quietly(clf, X, y)
    assert all(torch.equal(a, b) for a, b in zip(before, clf.module_.parameters()))
    assert clf.net_.grad_scaler_.get_scale() == scale / 2
    monkeypatch.setattr(_estimators._SequenceNet, "get_loss", get_loss)
    fit_quietly(clf, X, y)
    assert not all(torch.equal(a, b) for a, b in zip(before, clf.module_.parameters()))


@pytest.mark.parametrize("cell", ["tanh", "lstm"])
def test_temporal_gradients_of_a_scaled_loss_are_unscaled(cell):
    net = RecurrentNetwork(3, 5, 2, cell=cell, generator=torch.Generator().manual_seed(0)).double()
    gen = torch.Generator().manual_seed(1)
    x, lengths = torch.randn(4, 6, 3, generator=gen, dtype=torch.float64), torch.tensor([6, 2, 5, 1])
    states = net.forward_states(x, lengths)
    plain = temporal_gradients(net, states, states.outputs.square().mean(), lengths)
    grads = [p.grad.clone() for p in plain.parameters]
    net.zero_grad(set_to_none=True)
    states = net.forward_states(x, lengths)
    scaled = temporal_gradients(net, states, 2048 * states.outputs.square().mean(), lengths, loss_scale=2048)
    for a, b in zip(scaled.per_step(), plain.per_step(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(scaled.norms(), plain.norms(), rtol=1e-12, atol=0)
    torch.testing.assert_close(scaled.loss, plain.loss, rtol=1e-12, atol=0)
    # .grad as backward() of the scaled loss: for GradScaler.unscale_ to unscale.
    for p, g in zip(scaled.parameters, grads):
        torch.testing.assert_close(p.grad, 2048 * g, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="loss_scale must be a positive finite float"):
        temporal_gradients(net, net.forward_states(x, lengths), states.outputs.sum(), lengths, loss_scale=0.0)


def test_losses_at_every_step_train_in_bfloat16():
    from sklearn_rnn import RNNStepClassifier

    rng = np.random.default_rng(0)
    rolls = [(rng.random((int(rng.integers(4, 10)), 3)) < 0.3).astype(float) for _ in range(40)]
    X, y = [r[:-1] for r in rolls], [r[1:] for r in rolls]
    model = RNNStepClassifier(hidden_size=8, max_iter=3, optimizer="simplex", precision="bfloat16",
                              device="cpu", random_state=0)
    fit_quietly(model, X, y)
    assert np.isfinite(model.loss_curve_).all() and len(model.loss_curve_) == 3


def test_save_and_load_keep_the_loss_scalers_state(float16_on_the_cpu, monkeypatch, tmp_path):
    """Training continued after save/load goes on as after pickling: same scale, same
    count of updates since the last overflow, hence the same weights."""
    X, y = memory_task(40)
    clf = classifier("sgd", precision="float16", max_iter=1, warm_start=True)
    get_loss = _estimators._SequenceNet.get_loss
    monkeypatch.setattr(
        _estimators._SequenceNet, "get_loss",
        lambda self, *a, training=False, **k: get_loss(self, *a, training=training, **k) * (1e36 if training else 1),
    )
    fit_quietly(clf, X[:20], y[:20])  # one overflowing update: the scale halves
    monkeypatch.setattr(_estimators._SequenceNet, "get_loss", get_loss)
    fit_quietly(clf, X, y)  # two finite updates: the growth tracker counts them
    scaler = clf.net_.grad_scaler_
    assert (scaler.get_scale(), scaler._get_growth_tracker()) == (2.0**15, 2)
    clf.save(tmp_path / "model.safetensors")
    loaded = sklearn_rnn.load(tmp_path / "model.safetensors")
    pickled = pickle.loads(pickle.dumps(clf))
    for model in (loaded, pickled):
        assert model.net_.grad_scaler_.state_dict() == scaler.state_dict()
    for model in (loaded, pickled):
        model.partial_fit(X, y)
    assert loaded.net_.grad_scaler_.state_dict() == pickled.net_.grad_scaler_.state_dict()
    assert loaded.net_.grad_scaler_._get_growth_tracker() == 4
    for a, b in zip(loaded.module_.parameters(), pickled.module_.parameters(), strict=True):
        assert torch.equal(a, b)



def test_model_files_with_damaged_loss_scaler_state(float16_on_the_cpu, tmp_path):
    """The scaler's state is a field of the model file; a forged or damaged entry (even
    with a recomputed digest) is refused with the fix."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    from sklearn_rnn._persistence import _decode, _digest, _encode

    X, y = memory_task(20)
    clf = fit_quietly(classifier("sgd", precision="float16", max_iter=1), X, y)
    path = tmp_path / "model.safetensors"
    clf.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        metadata = handle.metadata()
    header = json.loads(metadata["sklearn_rnn"])
    assert _decode(header["state"]["grad_scaler"])["scale"] == 2.0**16
    assert sklearn_rnn.load(path).net_.grad_scaler_.get_scale() == 2.0**16
    forged = tmp_path / "forged.safetensors"
    scaler = _decode(header["state"]["grad_scaler"])
    for damaged in ({**scaler, "scale": "os.system"}, {"scale": 1.0}, [1, 2], {**scaler, "scale": -1.0}):
        edited = json.loads(json.dumps(header))
        edited["state"]["grad_scaler"] = _encode(damaged, "scaler")
        edited["sha256"] = _digest(edited, tensors)
        save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(edited)})
        with pytest.raises(ValueError, match="fitted state 'grad_scaler'.*save the model again"):
            sklearn_rnn.load(forged)


def test_a_torch_without_torch_amp_grad_scaler_gets_a_clear_error_or_the_cuda_one(monkeypatch):
    # torch 2.2, the oldest torch the package accepts, has torch.cuda.amp.GradScaler only.
    from sklearn_rnn._engine import make_grad_scaler

    monkeypatch.delattr(torch.amp, "GradScaler")
    with pytest.raises(RuntimeError, match="lacks on the cpu .*torch 2.3.*'bfloat16'"):
        make_grad_scaler("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.cuda.amp.GradScaler is deprecated on new torch
        assert make_grad_scaler("cuda") is not None


@pytest.mark.parametrize("optimizer", ["adam", "simplex"])
def test_bfloat16_lstm_on_the_cpu_trains_where_onednn_runs_it_and_is_refused_elsewhere(optimizer):
    # On a CPU without bfloat16 instructions the fused LSTM raised oneDNN's "could not
    # create a primitive descriptor" at the first step (the simplex method: at the end).
    X, y = memory_task(40)
    model = RNNClassifier(cell="lstm", precision="bfloat16", optimizer=optimizer, hidden_size=4,
                          max_iter=2, random_state=0, device="cpu")
    if get_cell("lstm").runs_bfloat16_on_cpu():
        fit_quietly(model, X, y)
        assert np.isfinite(model.predict_proba(X)).all()
    else:
        with pytest.raises(ValueError, match="cell='lstm' needs a CPU whose oneDNN runs that kernel in bfloat16"):
            model.fit(X, y)
        assert not hasattr(model, "net_")
    fit_quietly(clone(model).set_params(cell="gru"), X, y)  # the other cells run either way


@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
def test_the_bfloat16_probe_leaves_the_global_generator_as_it_was(cell):
    # The first bfloat16 fit on a CPU asks the fused kernel once per process; the probe
    # module it builds drew its initial weights from torch's global generator.
    from sklearn_rnn.nn.cells._base import _fused_runs_bfloat16_on_cpu

    _fused_runs_bfloat16_on_cpu.cache_clear()  # as in a new process
    state = torch.get_rng_state()
    get_cell(cell).runs_bfloat16_on_cpu()
    assert torch.equal(torch.get_rng_state(), state)
