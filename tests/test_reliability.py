"""Reliability (issue 18): transactional fit, parameters that mean what they say, clear
errors for odd containers, and model files that are trusted only when all of them verify.

Each ``test_repro_NN_*`` is the reproducer ``shared/repro/NN_*.py`` as a test: it failed
before the fix.
"""

import copy
import json
import pickle
import time
from pathlib import Path
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.utils.validation import check_is_fitted

import sklearn_rnn
from sklearn_rnn import RNNClassifier, RNNRegressor, RNNStepClassifier
from sklearn_rnn._estimators import _SequenceNet
from sklearn_rnn._persistence import _digest
from sklearn_rnn.sequences import check_sequences

SMALL = dict(hidden_size=4, max_iter=2, random_state=0)


def ragged(n=12, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(rng.integers(2, 6), d)) for _ in range(n)]


def quiet_fit(model, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(*args, **kwargs)


def read_file(path):
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    return header, tensors


def write_file(path, header, tensors, *, resign=False):
    if resign:  # a forger who recomputes the digest
        header = {**header, "sha256": _digest(header, tensors)}
    save_file(tensors, str(path), metadata={"sklearn_rnn": json.dumps(header)})


def assert_forgeries_refused(path, header, tensors, forgeries):
    """Each ``(edit, message)``: the file edited by ``edit(header, tensors)``, its digest
    recomputed, is refused by load with a ValueError matching ``message``."""
    for edit, message in forgeries:
        forged_header, forged_tensors = json.loads(json.dumps(header)), dict(tensors)
        edit(forged_header, forged_tensors)
        write_file(path, forged_header, forged_tensors, resign=True)
        with pytest.raises(ValueError, match=message):
            sklearn_rnn.load(path)


def fitted_state(model):
    """Everything a refit could corrupt: predictions and fitted attributes."""
    return {
        "attributes": sorted(vars(model)),
        "n_iter_": model.n_iter_,
        "loss_curve_": list(model.loss_curve_),
        "history": len(model.net_.history),
        "weights": {k: v.clone() for k, v in model.module_.state_dict().items()},
    }


def assert_same_state(model, before):
    after = fitted_state(model)
    assert after["attributes"] == before["attributes"]
    assert after["n_iter_"] == before["n_iter_"] and after["loss_curve_"] == before["loss_curve_"]
    assert after["history"] == before["history"]
    for name, value in before["weights"].items():
        assert torch.equal(after["weights"][name], value), name


# ------------------------------------------------------------------ repro 01
def test_repro_01_rejected_refit_leaves_the_model_exactly_as_it_was():
    X = ragged()
    reg = quiet_fit(RNNRegressor(**SMALL), X, np.linspace(-1, 1, 12))
    before, state = reg.predict(X), fitted_state(reg)
    with pytest.raises(ValueError, match="negative"):
        reg.fit(X, np.linspace(-1, 1, 12) * 1000 + 5000, sample_weight=-np.ones(12))
    np.testing.assert_array_equal(reg.predict(X), before)
    assert_same_state(reg, state)

    clf = quiet_fit(RNNClassifier(**SMALL), X, ["cat", "dog"] * 6)
    proba, state = clf.predict_proba(X), fitted_state(clf)
    with pytest.raises(ValueError, match="sample_weight has shape"):
        clf.fit(X, ["ant", "bee"] * 6, sample_weight=np.ones(3))
    assert clf.classes_.tolist() == ["cat", "dog"]
    np.testing.assert_array_equal(clf.predict_proba(X), proba)
    assert_same_state(clf, state)


def test_refit_failing_during_training_is_rolled_back(monkeypatch):
    X, y = ragged(48), np.arange(48) % 2
    clf = quiet_fit(RNNClassifier(batch_size=16, **SMALL), X, y)
    proba, state = clf.predict_proba(X), fitted_state(clf)
    original, calls = _SequenceNet.train_step, {"n": 0}

    def failing(self, batch, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:  # the second epoch: one finished epoch already changed weights
            raise RuntimeError("a fault inside training")
        return original(self, batch, **kwargs)

    monkeypatch.setattr(_SequenceNet, "train_step", failing)
    clf.set_params(warm_start=True, max_iter=3)
    with pytest.raises(RuntimeError, match="a fault inside training"):
        clf.fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), proba)
    assert_same_state(clf, state)
    calls["n"] = 0
    with pytest.raises(RuntimeError, match="a fault inside training"):
        for _ in range(3):
            clf.partial_fit(X, y)  # three updates a call: the second call fails and is rolled back
    assert clf.n_iter_ == state["n_iter_"] + 1 and len(clf.net_.history) == state["history"] + 1


def test_an_architecture_change_in_a_partial_fit_stream_is_refused():
    """A stream checks the architecture once; a parameter changed in between is still
    refused with nothing changed, and the stream goes on once it is set back."""
    X, y = ragged(), np.arange(12) % 2
    clf = RNNClassifier(**SMALL).partial_fit(X, y, classes=[0, 1]).partial_fit(X, y)
    clf.partial_fit(X, y)  # a check already passed with these settings
    proba, state = clf.predict_proba(X), fitted_state(clf)
    for change in ({"hidden_size": 8}, {"cell": "lstm"}, {"num_layers": 2}, {"readout": "last"},
                   {"conv_kernels": (3,)}):
        clf.set_params(**change)
        with pytest.raises(ValueError, match="fitted with"):
            clf.partial_fit(X, y)
        np.testing.assert_array_equal(clf.predict_proba(X), proba)
        assert_same_state(clf, state)
        clf.set_params(**{name: SMALL.get(name, RNNClassifier().get_params()[name]) for name in change})
    assert clf.partial_fit(X, y).n_iter_ == state["n_iter_"] + 1
    # A list parameter changed in place is a change too.
    listed = RNNClassifier(**SMALL, conv_kernels=[3, 9]).partial_fit(X, y, classes=[0, 1])
    listed.partial_fit(X, y)
    listed.set_params(conv_channels=8)  # the width of an existing stage
    with pytest.raises(ValueError, match=r"fitted with conv_channels=32"):
        listed.partial_fit(X, y)
    listed.set_params(conv_channels=32)
    listed.conv_kernels.append(5)
    with pytest.raises(ValueError, match=r"fitted with conv_kernels=\(3, 9\)"):
        listed.partial_fit(X, y)


#: A changed value of every parameter that shapes the network or its optimizer, fitted
#: with a convolutional stage (``conv_kernels=(3,)``) so that its settings exist (but
#: for ``time_feature``, whose time-aware cell reads the raw inputs).
#: ``device`` is left to the GPU tests (this machine may have only the CPU).
SHAPING_CHANGES = {
    "hidden_size": 8, "cell": "lstm", "num_layers": 2, "dropout": 0.1, "hidden_init": "learned",
    "spectral_radius": 0.9, "time_feature": 0, "frame": 2, "instance_norm": True, "readout": "last",
    "conv_kernels": (5,), "conv_channels": 8, "conv_pool": 2, "bidirectional": True, "optimizer": "sgd",
}


@pytest.mark.parametrize("name", sorted(SHAPING_CHANGES))
def test_warm_start_refuses_a_change_of_every_shaping_parameter(name):
    """Each parameter the continuation check compares is refused under warm_start, and
    the docstrings say so: the list in ``warm_start``'s entry is the check's list."""
    from sklearn_rnn._estimators import _SHAPING_PARAMS

    assert set(SHAPING_CHANGES) | {"device"} == set(_SHAPING_PARAMS)
    X = [np.column_stack([np.arange(len(x), dtype=float), x]) for x in ragged(d=1)]  # column 0: times
    y = np.arange(12) % 2
    stage = None if name == "time_feature" else (3,)  # no stage with the time-aware cell
    clf = quiet_fit(RNNClassifier(**SMALL, conv_kernels=stage, warm_start=True), X, y)
    proba, state = clf.predict_proba(X), fitted_state(clf)
    clf.set_params(**{name: SHAPING_CHANGES[name]})
    with pytest.raises(ValueError, match=f"fitted with .*{name}="):
        clf.fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), proba)
    assert_same_state(clf, state)
    for estimator in (RNNClassifier, RNNRegressor, RNNStepClassifier):
        entry = estimator.__doc__.split("warm_start :")[1].split("callbacks :")[0]
        assert f"``{name}``" in entry and "``device``" in entry, (estimator.__name__, name)


# ------------------------------------------------------------------ repro 02
def test_repro_02_architecture_change_under_warm_start_is_refused_and_lr_applied(tmp_path):
    X, y = ragged(), np.arange(12) % 2
    clf = quiet_fit(RNNClassifier(**SMALL), X, y)
    proba, state = clf.predict_proba(X), fitted_state(clf)
    clf.set_params(warm_start=True, hidden_size=8, learning_rate=0.5, optimizer="sgd")
    with pytest.raises(ValueError, match=r"fitted with hidden_size=4, optimizer='adam'.*start afresh"):
        clf.fit(X, y)
    with pytest.raises(ValueError, match="hidden_size=8"):
        clf.partial_fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), proba)
    assert_same_state(clf, state)
    # A file must never hold parameters that contradict its weights.
    with pytest.raises(ValueError, match="cannot save .* parameters no longer describe"):
        clf.save(tmp_path / "m.safetensors")
    # Set back, continued training applies the new step size and batch size.
    clf.set_params(hidden_size=4, optimizer="adam", batch_size=5)
    quiet_fit(clf, X, y)
    assert clf.net_.optimizer_.param_groups[0]["lr"] == 0.5 and clf.net_.batch_size == 5
    clf.save(tmp_path / "m.safetensors")
    loaded = sklearn_rnn.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    # Starting afresh takes the new architecture.
    fresh = quiet_fit(clf.set_params(warm_start=False, hidden_size=8, optimizer="sgd"), X, y)
    assert fresh.module_.hidden_size == 8 and type(fresh.net_.optimizer_).__name__ == "ClippedSGD"


def test_sgd_thresholds_apply_to_continued_training():
    X, y = ragged(), np.arange(12) % 2
    clf = quiet_fit(RNNClassifier(optimizer="simplex", **SMALL), X, y)
    clf.set_params(warm_start=True, clip_threshold=0.3, switch_threshold=2.0, learning_rate=0.01)
    quiet_fit(clf, X, y)
    group = clf.net_.optimizer_.param_groups[0]
    assert group["clip_threshold"] == 0.3 and group["lr"] == 0.01
    assert clf.net_.optimizer_.switch_threshold == 2.0


# ------------------------------------------------------------------ repro 03
@pytest.mark.parametrize("move", ["pickle", "joblib", "deepcopy"])
def test_repro_03_simplex_model_saves_and_trains_after_pickle(move, tmp_path):
    X, y = ragged(), np.arange(12) % 2
    clf = quiet_fit(RNNClassifier(optimizer="simplex", **SMALL), X, y)
    if move == "pickle":
        restored = pickle.loads(pickle.dumps(clf))
    elif move == "joblib":
        joblib.dump(clf, tmp_path / "m.joblib")
        restored = joblib.load(tmp_path / "m.joblib")
    else:
        restored = copy.deepcopy(clf)
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    restored.save(tmp_path / "m.safetensors")
    loaded = sklearn_rnn.load(tmp_path / "m.safetensors")
    assert restored.net_.optimizer_.branch_counts == clf.net_.optimizer_.branch_counts
    expected = clf.partial_fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(restored.partial_fit(X, y).predict_proba(X), expected)
    np.testing.assert_array_equal(loaded.partial_fit(X, y).predict_proba(X), expected)


# ------------------------------------------------------------------ repro 04
class MyClassifier(RNNClassifier):
    """A user's subclass at module level: registered when defined."""


class WithExtra(RNNRegressor):
    _persisted_extra = ("note_",)

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight)
        self.note_ = {"fitted_on": len(X)}
        return self


class WithUndeclared(RNNRegressor):
    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight)
        self.note_ = 1
        return self


def test_repro_04_subclasses_round_trip_or_are_refused_at_save(tmp_path):
    X, y = ragged(), np.arange(12) % 2
    mine = quiet_fit(MyClassifier(**SMALL), X, y)
    mine.save(tmp_path / "mine.safetensors")
    loaded = MyClassifier.load(tmp_path / "mine.safetensors")
    assert type(loaded) is MyClassifier
    np.testing.assert_array_equal(loaded.predict_proba(X), mine.predict_proba(X))
    assert type(sklearn_rnn.load(tmp_path / "mine.safetensors")) is MyClassifier

    extra = quiet_fit(WithExtra(**SMALL), X, np.linspace(0, 1, 12))
    extra.save(tmp_path / "extra.safetensors")
    assert sklearn_rnn.load(tmp_path / "extra.safetensors").note_ == {"fitted_on": 12}

    undeclared = quiet_fit(WithUndeclared(**SMALL), X, np.linspace(0, 1, 12))
    with pytest.raises(TypeError, match=r"attributes \['note_'\] that model files do not know \(fitted ones"):
        undeclared.save(tmp_path / "undeclared.safetensors")

    class Local(RNNClassifier):
        pass

    local = quiet_fit(Local(**SMALL), X, y)
    with pytest.raises(TypeError, match="defined inside a function"):
        local.save(tmp_path / "local.safetensors")
    assert not (tmp_path / "local.safetensors").exists()


@pytest.mark.parametrize(
    "model, target",
    [
        (RNNClassifier(dropout=0.3, num_layers=2, **SMALL), "labels"),
        (RNNClassifier(optimizer="sgd", cell="gru", **SMALL), "labels"),
        (RNNClassifier(optimizer="simplex", cell="lstm", hidden_init="learned", **SMALL), "labels"),
        (RNNRegressor(time_feature=0, **SMALL), "values"),
        (RNNStepClassifier(dropout=0.2, num_layers=2, **SMALL), "steps"),
        (MyClassifier(class_weight={0: 1.0, 1: 2.0}, **SMALL), "labels"),
    ],
    ids=["dropout", "sgd-gru", "simplex-lstm", "decay-regressor", "step", "subclass"],
)
def test_every_estimator_round_trips_bit_for_bit_and_trains_on_identically(model, target, tmp_path):
    X = [np.column_stack([np.cumsum(np.ones(len(x))), x]) for x in ragged(16)]
    y = {
        "labels": np.arange(16) % 2,
        "values": np.linspace(0, 1, 16),
        "steps": [(x[:, 1:2] > 0).astype(float) for x in X],
    }[target]
    model = quiet_fit(model, X, y)
    predict = model.predict_proba if hasattr(model, "predict_proba") else model.predict
    for moved in (model, pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        path = tmp_path / "m.safetensors"
        moved.save(path)
        loaded = type(model).load(path)
        assert loaded.get_params() == model.get_params()
        outputs = [loaded.predict_proba(X), predict(X)] if hasattr(model, "predict_proba") else [loaded.predict(X), predict(X)]
        for a, b in zip(*[o if isinstance(o, list) else [o] for o in outputs]):
            np.testing.assert_array_equal(a, b)
    a = copy.deepcopy(model).partial_fit(X, y)
    b = type(model).load(tmp_path / "m.safetensors").partial_fit(X, y)
    for name, value in a.module_.state_dict().items():
        assert torch.equal(value, b.module_.state_dict()[name]), name


# ------------------------------------------------------------------ repro 05
def test_repro_05_an_edited_header_is_refused(tmp_path):
    X = ragged()
    reg = quiet_fit(RNNRegressor(**SMALL), X, np.linspace(-1, 1, 12))
    reg.save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    header["state"]["y_mean"]["items"] = [1000.0]
    write_file(tmp_path / "edited.safetensors", header, tensors)
    with pytest.raises(ValueError, match="damaged or edited after it was saved"):
        sklearn_rnn.load(tmp_path / "edited.safetensors")


# ------------------------------------------------------------------ repro 06
def test_repro_06_extreme_targets_give_finite_predictions_or_a_clear_error():
    X = ragged()
    for y in (np.linspace(-1e200, 1e200, 12), np.full(12, 1.5e308) * np.r_[np.ones(6), 0.9 * np.ones(6)]):
        reg = quiet_fit(RNNRegressor(**SMALL), X, y)
        try:
            prediction = reg.predict(X)
        except ValueError as error:
            assert "beyond float64's range" in str(error)
        else:
            assert np.isfinite(prediction).all()
            assert np.abs(prediction).max() > 1e100  # on the targets' scale
    reg = quiet_fit(RNNRegressor(**SMALL), X, np.linspace(-1, 1, 12))
    with pytest.raises(ValueError, match="beyond float32's range"):
        reg.set_params(warm_start=True).fit(X, np.linspace(-1e300, 1e300, 12))


@pytest.mark.parametrize("scale", [1e-160, 1e-200, 1e-300])
def test_tiny_targets_keep_their_scale(scale):
    # Their variance underflowed to 0 (below about 1e-162), the scale fell back to 1,
    # and the predictions were on the scale of 0.1 for targets of 1e-300.
    X, y = ragged(), np.linspace(-1, 1, 12)
    reference = quiet_fit(RNNRegressor(**SMALL), X, y)
    tiny = quiet_fit(RNNRegressor(**SMALL), X, y * scale)
    np.testing.assert_allclose(tiny.predict(X) / scale, reference.predict(X), rtol=1e-5)


# ------------------------------------------------------------------ repro 07
@pytest.mark.parametrize(
    "params",
    [
        {"hidden_size": np.int64(5)},
        {"num_layers": np.int32(2), "dropout": np.float64(0.1)},
        {"batch_size": np.int64(4), "max_iter": np.int64(2), "n_iter_no_change": np.int32(1)},
        {"learning_rate": np.float64(0.02), "clip_threshold": np.float32(0.5), "alpha": np.float64(1.0)},
        {"optimizer": "simplex", "switch_threshold": np.float64(1.0), "spectral_radius": np.float64(1.1)},
        {"time_feature": np.int64(0), "tol": np.float64(1e-3)},
    ],
)
def test_repro_07_numpy_scalar_parameters_work(params, tmp_path):
    X = [np.column_stack([np.arange(len(x)), x[:, 1:]]) for x in ragged()]  # column 0: times
    reg = quiet_fit(RNNRegressor(**{**SMALL, **params}), X, np.linspace(-1, 1, 12))
    assert np.isfinite(reg.predict(X)).all()
    reg.save(tmp_path / "m.safetensors")
    assert sklearn_rnn.load(tmp_path / "m.safetensors").get_params() == reg.get_params()
    quiet_fit(reg.set_params(warm_start=True), X, np.linspace(-1, 1, 12))  # no false "changed"


def test_repro_07_grid_search_over_np_arange():
    X = ragged()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(
            RNNRegressor(max_iter=2, random_state=0), {"hidden_size": np.arange(2, 5)}, cv=2,
            error_score="raise",
        ).fit(X, np.linspace(-1, 1, 12))
    assert search.best_params_["hidden_size"] in (2, 3, 4)


# ------------------------------------------------------------------ repro 08
def test_repro_08_rejected_first_fit_leaves_the_estimator_unfitted():
    X = ragged(5)
    clf = RNNClassifier(early_stopping=True)
    with pytest.raises(ValueError, match="early_stopping holds out"):
        clf.fit(X, [0, 1, 0, 1, 0])
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    assert set(vars(clf)) == set(clf.get_params())


def test_first_fit_failing_during_training_leaves_the_estimator_unfitted(monkeypatch):
    def failing(self, batch, **kwargs):
        raise RuntimeError("a fault inside training")

    monkeypatch.setattr(_SequenceNet, "train_step", failing)
    clf = RNNClassifier(**SMALL)
    with pytest.raises(RuntimeError, match="a fault inside training"):
        clf.fit(ragged(), np.arange(12) % 2)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    assert set(vars(clf)) == set(clf.get_params())


def test_interrupt_during_validation_of_a_first_fit_leaves_it_unfitted(monkeypatch):
    from sklearn_rnn.sequences import InputEncoder

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(InputEncoder, "fit", interrupted)  # Ctrl-C in the first second
    clf = RNNClassifier(**SMALL)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(ragged(), np.arange(12) % 2)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


# ------------------------------------------------------------------ repro 09
@pytest.mark.parametrize(
    "class_weight, message",
    [
        ({0: -1.0, 1: 1.0}, r"class_weight\[0\] is -1.0: expected a finite non-negative"),
        ({0: float("nan"), 1: 1.0}, r"class_weight\[0\] is nan"),
        ({0: 0.0, 1: 0.0}, "gives every sequence weight 0"),
        ({0: "heavy", 1: 1.0}, r"class_weight\[0\] is 'heavy'"),
    ],
)
def test_repro_09_class_weight_values_are_validated(class_weight, message):
    clf = RNNClassifier(class_weight=class_weight, **SMALL)
    with pytest.raises(ValueError, match=message):
        clf.fit(ragged(), np.arange(12) % 2)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


# ------------------------------------------------------------------ repro 10
def test_repro_10_a_forged_size_is_refused_at_once(tmp_path):
    X = ragged()
    clf = quiet_fit(RNNClassifier(tol=1.0, **SMALL), X, np.arange(12) % 2)
    clf.save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    for name, value in [("hidden_size", 3000), ("num_layers", 40)]:
        forged = json.loads(json.dumps(header))
        forged["params"][name] = value
        for resign in (False, True):
            path = tmp_path / f"forged_{name}_{resign}.safetensors"
            write_file(path, forged, tensors, resign=resign)
            start = time.perf_counter()
            with pytest.raises(ValueError, match="damaged or edited" if not resign else "inconsistent"):
                sklearn_rnn.load(path)
            assert time.perf_counter() - start < 0.5  # 12 s before the fix


# ------------------------------------------------------------------ repro 11
def test_repro_11_containers_get_clear_errors_or_work():
    y = np.arange(12) % 2
    with pytest.raises(ValueError, match=r"X is one-dimensional \(Series of 12 values\)"):
        RNNClassifier(max_iter=1).fit(pd.Series(np.arange(12.0)), y)
    ragged_rows = [np.arange(1.0, 2 + i % 4) for i in range(12)]
    with pytest.raises(ValueError, match=r"one-dimensional rows of different lengths .*np.reshape\(x, \(-1, 1\)\)"):
        RNNClassifier(max_iter=1).fit(ragged_rows, y)
    tensor = torch.randn(12, 3, 2, generator=torch.Generator().manual_seed(0))
    from_tensor = quiet_fit(RNNClassifier(**SMALL), tensor, y)
    from_array = quiet_fit(RNNClassifier(**SMALL), tensor.numpy(), y)
    np.testing.assert_array_equal(from_tensor.predict_proba(tensor), from_array.predict_proba(tensor.numpy()))
    fitted = quiet_fit(RNNClassifier(**SMALL), [np.zeros((3, 1)) + i for i in range(12)], y)
    with pytest.raises(ValueError, match="one-dimensional rows of different lengths"):
        fitted.predict(ragged_rows)
    with pytest.raises(ValueError, match="X has 2 features per step, but RNNClassifier is expecting 1"):
        fitted.predict(tensor)


# ------------------------------------------------------------------ repro 12
def test_repro_12_dropout_continues_identically_after_load(tmp_path):
    X, y = ragged(), np.arange(12) % 2
    model = quiet_fit(RNNClassifier(dropout=0.3, **SMALL), X, y)
    model.save(tmp_path / "m.safetensors")
    a = pickle.loads(pickle.dumps(model)).partial_fit(X, y).predict_proba(X)
    b = sklearn_rnn.load(tmp_path / "m.safetensors").partial_fit(X, y).predict_proba(X)
    c = model.partial_fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, c)


# ---------------------------------------------------------------- also seen
def test_a_column_array_is_refused_by_a_model_fitted_on_sequences():
    y = np.arange(12) % 2
    fitted = quiet_fit(RNNClassifier(**SMALL), [np.zeros((3, 1)) + i for i in range(12)], y)
    one_sequence = np.arange(5.0).reshape(-1, 1)
    with pytest.raises(ValueError, match=r"shape \(5, 1\).*Pass \[X\] for one sequence"):
        fitted.predict(one_sequence)
    assert fitted.predict([one_sequence]).shape == (1,)
    assert fitted.predict(one_sequence.reshape(-1, 1, 1)).shape == (5,)
    # A model fitted on a one-column table reads one the same way.
    table = quiet_fit(RNNClassifier(**SMALL), np.arange(12.0).reshape(-1, 1), y)
    assert table.predict(one_sequence).shape == (5,)


def test_a_left_padded_array_is_refused():
    padded = np.random.default_rng(0).normal(size=(12, 4, 1))
    padded[3, :2] = np.nan  # two leading padding steps
    with pytest.raises(ValueError, match="sequence 3 of X, a padded .* starts with 2 all-NaN step"):
        RNNClassifier(**SMALL).fit(padded, np.arange(12) % 2)
    padded[3, :2] = 0.0
    padded[3, 2:] = np.nan  # right padding is fine
    quiet_fit(RNNClassifier(**SMALL), padded, np.arange(12) % 2)


def test_a_time_major_padded_array_is_named():
    """pad_sequence's default layout, (T, n, d), read batch first gives one prediction
    per step: predict warns (and the left-padded error says so) instead of answering
    with the wrong count in silence."""
    sequences = [torch.randn(length, 1, generator=torch.Generator().manual_seed(length)) for length in (5, 3, 4, 2)]
    time_major = torch.nn.utils.rnn.pad_sequence(sequences, padding_value=float("nan"))  # (5, 4, 1)
    model = quiet_fit(RNNClassifier(**SMALL), ragged(d=1), np.arange(12) % 2)
    with pytest.warns(UserWarning, match=r"shape \(5, 4, 1\), may be time-major.*X.transpose\(0, 1\)"):
        model.predict(time_major)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # batch first: nothing to say
        assert model.predict(time_major.transpose(0, 1)).shape == (4,)
        # sequences sorted longest first whose all-NaN steps are trailing, or a first
        # sequence already padded, do not look time-major
        check_sequences(torch.nn.utils.rnn.pad_sequence(sorted(sequences, key=len, reverse=True),
                                                        batch_first=True, padding_value=float("nan")))
        check_sequences(np.array([[[1.0], [2.0], [np.nan]], [[3.0], [np.nan], [4.0]]]))
    padded = np.random.default_rng(0).normal(size=(3, 6, 2))
    padded[0, 5:] = np.nan  # the first sequence is shorter: time-major, step 5 "starts" padded
    with pytest.raises(ValueError, match=r"looks left-padded.*Or X may be time-major.*X.transpose\(1, 0, 2\)"):
        check_sequences(padded.transpose(1, 0, 2))


@pytest.mark.parametrize("cls, y", [(RNNClassifier, np.arange(12) % 2), (RNNRegressor, np.linspace(0, 1, 12))])
def test_score_refuses_negative_sample_weights(cls, y):
    model = quiet_fit(cls(**SMALL), ragged(), y)
    with pytest.raises(ValueError, match="sample_weight holds negative values"):
        model.score(ragged(), y, sample_weight=-np.ones(12))
    assert np.isfinite(model.score(ragged(), y, sample_weight=np.arange(12.0)))


# ---------------------------------------------------- property: rejected refits
@pytest.fixture(scope="module")
def fitted_pair():
    X, y = ragged(16, seed=1), np.arange(16) % 2
    return quiet_fit(RNNClassifier(**SMALL), X, y), X, y


_WEIGHTS = st.sampled_from(["none", "ok", "negative", "nan", "short", "zeros"])
_LABELS = st.sampled_from(["ok", "short", "one_class", "unseen", "nan"])
_INPUTS = st.sampled_from(["ok", "wider", "inf", "empty", "ragged_rows", "frames"])
_PARAMS = st.sampled_from([{}, {"hidden_size": 7}, {"class_weight": {0: -1.0, 1: 1.0}}, {"learning_rate": 0.5},
                           {"optimizer": "sgd"}, {"early_stopping": True, "validation_fraction": 0.9}])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(weights=_WEIGHTS, labels=_LABELS, inputs=_INPUTS, params=_PARAMS,
       call=st.sampled_from(["fit", "warm_fit", "partial_fit"]))
def test_property_a_rejected_refit_leaves_predict_proba_bit_for_bit(fitted_pair, weights, labels, inputs, params, call):
    original, X, y = fitted_pair
    model = copy.deepcopy(original)
    proba, state = model.predict_proba(X), fitted_state(model)
    n = len(X)
    X_new = {
        "ok": X,
        "wider": [np.hstack([x, x]) for x in X],
        "inf": [x * (np.inf if i == 2 else 1) for i, x in enumerate(X)],
        "empty": [],
        "ragged_rows": [np.arange(1.0, 2 + i % 3) for i in range(n)],
        "frames": [pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])]) for x in X],
    }[inputs]
    y_new = {
        "ok": y,
        "short": y[:-1],
        "one_class": np.zeros(n, dtype=int),
        "unseen": np.arange(n) % 3,
        "nan": np.full(n, np.nan),
    }[labels]
    weight = {
        "none": None, "ok": np.ones(n), "negative": -np.ones(n), "nan": np.full(n, np.nan),
        "short": np.ones(3), "zeros": np.zeros(n),
    }[weights]
    model.set_params(**params, warm_start=call == "warm_fit")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if call == "partial_fit":
                model.partial_fit(X_new, y_new, sample_weight=weight)
            else:
                model.fit(X_new, y_new, sample_weight=weight)
    except (ValueError, TypeError):
        np.testing.assert_array_equal(model.predict_proba(X), proba)
        assert_same_state(model, state)


# ------------------------------------------------------------- fuzz: files
def test_fuzz_every_byte_flipped_is_refused_or_harmless(tmp_path):
    X = [np.array([[0.5], [1.0]]), np.array([[-1.0]]), np.array([[2.0], [0.0], [1.0]]), np.array([[-0.5]])]
    # A tiny convolutional stage (one channel of each width), so that its fields are fuzzed too.
    tiny = RNNClassifier(hidden_size=1, conv_channels=1, max_iter=1, batch_size=4, random_state=0)
    model = quiet_fit(tiny, X, [0, 1, 0, 1])
    path = tmp_path / "tiny.safetensors"
    model.save(path)
    reference = model.predict_proba(X)
    raw = path.read_bytes()
    assert len(raw) < 8000  # tiny, so that the loop below takes seconds
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(raw)
    loaded_count = 0
    with open(damaged, "r+b") as handle:  # one byte changed in place, then put back
        for position in range(len(raw)):
            for mask in (0x01, 0xFF):
                handle.seek(position)
                handle.write(bytes([raw[position] ^ mask]))
                handle.flush()
                try:
                    loaded = sklearn_rnn.load(damaged)
                except ValueError:
                    continue
                finally:
                    handle.seek(position)
                    handle.write(raw[position : position + 1])
                    handle.flush()
                loaded_count += 1
                np.testing.assert_array_equal(loaded.predict_proba(X), reference)
    assert damaged.read_bytes() == raw
    assert loaded_count < len(raw) // 10  # almost every flip is refused


@pytest.mark.parametrize("resign", [False, True])
def test_fuzz_header_edits_are_refused_or_harmless(tmp_path, resign):
    X, y = ragged(), np.arange(12) % 2
    model = quiet_fit(RNNClassifier(**SMALL), X, y)
    model.save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    reference = model.predict_proba(X)

    def edits():
        yield lambda h: h["params"].update(hidden_size=-3)
        yield lambda h: h["params"].update(cell="warp")
        yield lambda h: h["params"].update(num_layers=2)
        yield lambda h: h["params"].update(optimizer="sgd")
        yield lambda h: h["state"].update(encoder={"kind": "dict", "pairs": []})
        yield lambda h: h["state"]["encoder"]["pairs"][0].__setitem__(1, 0)
        yield lambda h: h["state"].update(classes_={"kind": "ndarray", "dtype": "<i8", "shape": [3], "items": [0, 1, 2]})
        yield lambda h: h["state"].update(classes_={"kind": "ndarray", "dtype": "<i8", "shape": [5], "items": [0, 1]})
        yield lambda h: h["state"].update(classes_={"kind": "ndarray", "dtype": "|V8", "shape": [1], "items": [0]})
        yield lambda h: h["state"].update(n_iter_="many")
        yield lambda h: h["state"].update(history=[1, 2])
        yield lambda h: h["state"].update(surprise=1)
        yield lambda h: h["state"].pop("optimizer")
        yield lambda h: h["state"]["optimizer"].update(name="simplex")
        yield lambda h: h["state"]["optimizer"].update(state={"99.step": 1.0})
        yield lambda h: h["state"].update(dropout_seed=2**80)
        yield lambda h: h["state"].update(grad_scaler={"scale": -1})
        yield lambda h: h["state"].update(extra={"kind": "dict", "pairs": [["x", 1]]})
        yield lambda h: h.update(estimator="__main__:Nothing")
        yield lambda h: h.update(estimator=["RNNClassifier"])
        yield lambda h: h.update(params=[1])
        yield lambda h: h.update(format_version="2")
        yield lambda h: h.update(extra_key=1)

    for edit in edits():
        forged = json.loads(json.dumps(header))
        edit(forged)
        write_file(tmp_path / "edited.safetensors", forged, tensors, resign=resign)
        try:
            loaded = sklearn_rnn.load(tmp_path / "edited.safetensors")
        except ValueError:
            continue
        np.testing.assert_array_equal(loaded.predict_proba(X), reference)
    # Tensors renamed, reshaped or retyped (digest recomputed or not): refused.
    for change in (
        lambda t: t.update({"module.readout.bias": torch.zeros(3)}),
        lambda t: t.update({"module.readout.bias": t["module.readout.bias"].double()}),
        lambda t: t.update({"module.extra": torch.zeros(1)}),
        lambda t: t.pop("module.readout.bias"),
        lambda t: t.update({"optimizer.0.exp_avg": torch.zeros(7)}),
    ):
        forged_tensors = dict(tensors)
        change(forged_tensors)
        write_file(tmp_path / "edited.safetensors", header, forged_tensors, resign=resign)
        with pytest.raises(ValueError):
            sklearn_rnn.load(tmp_path / "edited.safetensors")


def test_extra_metadata_is_refused(tmp_path):
    model = quiet_fit(RNNClassifier(**SMALL), ragged(), np.arange(12) % 2)
    model.save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    save_file(tensors, str(tmp_path / "x.safetensors"),
              metadata={"sklearn_rnn": json.dumps(header), "note": "unverified"})
    with pytest.raises(ValueError, match="besides the model's, which no digest covers"):
        sklearn_rnn.load(tmp_path / "x.safetensors")


# ----------------------------------------------------------- pipelines, skops
def test_pipeline_round_trips_through_skops_bit_for_bit(tmp_path):
    skops_io = pytest.importorskip("skops.io")
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import SequenceStandardScaler

    rng = np.random.default_rng(0)
    X = [np.column_stack([np.cumsum(rng.uniform(1, 3, n)), rng.normal(size=n)])
         for n in rng.integers(2, 7, size=24)]
    y = np.array([int(x[-1, 1] > 0) for x in X])
    pipe = make_pipeline(SequenceStandardScaler(), RNNClassifier(time_feature=0, **SMALL))
    quiet_fit(pipe, X, y)
    path = tmp_path / "pipe.skops"
    skops_io.dump(pipe, path)
    untrusted = skops_io.get_untrusted_types(file=path)
    assert untrusted and all(name.startswith("sklearn_rnn.") for name in untrusted)
    loaded = skops_io.load(path, trusted=untrusted)
    np.testing.assert_array_equal(loaded.predict_proba(X), pipe.predict_proba(X))
    # What skops stored for the network: a JSON string and arrays, digest-checked.
    a = loaded[-1].partial_fit(loaded[0].transform(X), y).predict_proba(loaded[0].transform(X))
    b = pipe[-1].partial_fit(pipe[0].transform(X), y).predict_proba(pipe[0].transform(X))
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------ import graph
def test_every_module_imports_alone_and_the_import_graph_has_no_cycle():
    import ast
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(sklearn_rnn.__file__).parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if package else parts)] = (path, package)
    edges = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        here = name if package else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):  # function-level imports too
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                origin = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
            edges[name] |= {t for t in targets if t in modules and t != name}
    # A cycle is a path back to where it started.
    state = dict.fromkeys(modules, 0)
    cycles = []

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state[nxt] == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif state[nxt] == 0:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(modules):
        if state[name] == 0:
            visit(name, [name])
    assert not cycles, cycles
    assert "sklearn_rnn._estimators" not in edges["sklearn_rnn._persistence"]
    # Every module alone, in a fresh interpreter. Importing any submodule first runs
    # the package's __init__, so the interpreter imports sklearn_rnn alone once, then
    # forks a child per module that the package itself did not import.
    script = (
        "import os, sys, importlib, numpy, torch, sklearn, skorch, pandas\n"
        "import sklearn_rnn\n"
        "failed = []\n"
        f"for name in {sorted(modules)!r}:\n"
        "    if name in sys.modules: continue\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        try:\n"
        "            importlib.import_module(name)\n"
        "        except BaseException as error:\n"
        "            print(name, repr(error)); os._exit(1)\n"
        "        os._exit(0)\n"
        "    if os.waitpid(pid, 0)[1]: failed.append(name)\n"
        "print('FAILED', failed)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=root.parent, timeout=300)
    assert "FAILED []" in result.stdout, result.stdout + result.stderr


def test_a_warm_refit_with_early_stopping_after_a_fit_without_it_records_its_epochs():
    # Found by the property test above (warm_fit, early_stopping=True): the history of a
    # warm start keeps the first fit's epochs, which had no validation, so the epochs
    # of validation scores and of the history did not line up, and the refit ended in
    # an IndexError after training (the model changed, the call failed).
    X, y = ragged(16, seed=1), np.arange(16) % 2
    model = quiet_fit(RNNClassifier(**SMALL), X, y)
    model.set_params(early_stopping=True, validation_fraction=0.5, warm_start=True)
    quiet_fit(model, X, y)
    assert len(model.net_.history) == 4 and len(model.loss_curve_) == 4
    assert len(model.validation_scores_) == 2  # the two validated epochs of the refit
    assert model.best_epoch_ in (3, 4)
    assert model.best_validation_score_ == model.validation_scores_[model.best_epoch_ - 3]
    quiet_fit(model, X, y)  # a third call adds its two validated epochs
    assert len(model.validation_scores_) == 4


# ------------------------------------------------ the transformers' rejected refits
def test_a_rejected_refit_leaves_the_scaler_and_visit_features_as_they_were():
    """scikit-learn's validation of a table records the feature count and names before
    it refuses the values; the scaler's refit used to keep them (a scaler fitted on
    named frames lost its names to a rejected table)."""
    import pandas as pd

    from sklearn_rnn import SequenceStandardScaler
    from sklearn_rnn.clinical import VisitFeatures

    frames = [pd.DataFrame(x, columns=["a", "b"]) for x in ragged(12, d=2)]
    scaler = SequenceStandardScaler().fit(frames)
    before = {key: copy.deepcopy(value) for key, value in vars(scaler).items()}
    expected = scaler.transform(frames)
    rejected = [
        np.zeros((3, 0)),  # a table without columns
        pd.DataFrame({"x": [1.0, np.inf], "y": [0.0, 1.0], "z": [2.0, 3.0]}),  # an infinite value
        [np.zeros((2, 3)), np.full((2, 3), np.nan)],  # a sequence with no value
    ]
    for X in rejected:
        with pytest.raises(ValueError):
            scaler.fit(X)
        assert sorted(vars(scaler)) == sorted(before)
        for key, value in before.items():
            np.testing.assert_array_equal(getattr(scaler, key), value)
        for got, want in zip(scaler.transform(frames), expected):
            pd.testing.assert_frame_equal(got, want)
    visits = VisitFeatures(time_feature=2).fit([np.c_[x, np.arange(len(x))] for x in ragged(12, d=2)])
    with pytest.raises(ValueError, match="time_feature=2 is out of range"):
        visits.fit(ragged(12, d=2))
    assert visits.n_features_in_ == 3


# ------------------------------------------------- sample weights: only their ratios count
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("scale", [2.0, 2.0**-30, 1e30, 1e-8])
def test_weights_scaled_by_a_constant_train_the_same_model(optimizer, scale):
    # The loss was mean(w * l): weights of 1e30 (or 1e-8 with plain SGD) moved no weight
    # at all, silently, and weights summing to 1 stopped on the first epoch.
    X, y = ragged(24), np.arange(24) % 2
    weight = np.random.default_rng(1).choice([1.0, 2.0, 4.0], size=24)
    if scale not in (2.0, 2.0**-30):
        weight = np.ones(24)  # 1e30 * w / max(1e30 * w) would round differently
    params = dict(SMALL, optimizer=optimizer)
    reference = quiet_fit(RNNClassifier(**params), X, y, sample_weight=weight)
    scaled = quiet_fit(RNNClassifier(**params), X, y, sample_weight=weight * scale)
    np.testing.assert_array_equal(scaled.predict_proba(X), reference.predict_proba(X))
    assert scaled.loss_curve_ == reference.loss_curve_


def test_partial_fit_keeps_each_calls_weights_as_given():
    # Scaling every call's weights to mean 1 made a call of weights 100 train as one of
    # weights 1, and a class_weight cancel out on a batch of one class.
    X, y = ragged(24), np.arange(24) % 2
    first = RNNClassifier(**SMALL, optimizer="sgd").partial_fit(X, y, classes=[0, 1])
    heavy, light = pickle.loads(pickle.dumps(first)), pickle.loads(pickle.dumps(first))
    heavy.partial_fit(X, y, sample_weight=np.full(24, 100.0))
    light.partial_fit(X, y, sample_weight=np.ones(24))
    assert not np.allclose(heavy.predict_proba(X), light.predict_proba(X))
    ones = y == 1
    weighted = RNNClassifier(**SMALL, class_weight={0: 1.0, 1: 50.0}).partial_fit(X, y, classes=[0, 1])
    plain = RNNClassifier(**SMALL).partial_fit(X, y, classes=[0, 1])
    X_ones = [x for x, one in zip(X, ones) if one]
    weighted.partial_fit(X_ones, y[ones])
    plain.partial_fit(X_ones, y[ones])
    assert not np.allclose(weighted.predict_proba(X), plain.predict_proba(X))


def test_weights_of_one_are_no_weights_and_read_only_weights_are_copied_quietly():
    X, y = ragged(24), np.arange(24) % 2
    weight = pd.Series(np.ones(24)).to_numpy()
    weight.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch warned of a non-writable array
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = RNNClassifier(**SMALL).fit(X, y, sample_weight=weight)
        RNNClassifier(**SMALL).partial_fit(X, y, classes=[0, 1], sample_weight=weight)
    plain = quiet_fit(RNNClassifier(**SMALL), X, y)
    np.testing.assert_array_equal(weighted.predict_proba(X), plain.predict_proba(X))
    uniform = quiet_fit(RNNClassifier(**SMALL, class_weight={0: 0.01, 1: 0.01}), X, y)
    np.testing.assert_array_equal(uniform.predict_proba(X), plain.predict_proba(X))


# -------------------------------------------- a rejected fit leaves a RandomState where it was
@pytest.mark.parametrize("reject", ["float32 range", "held-out split", "interrupt"])
def test_a_rejected_fit_leaves_a_random_state_generator_where_it_stood(reject, monkeypatch):
    X, y = ragged(20), np.arange(20) % 2
    reference = quiet_fit(RNNClassifier(**{**SMALL, "random_state": np.random.RandomState(0)}), X, y)
    model = RNNClassifier(**{**SMALL, "random_state": np.random.RandomState(0)})
    position = model.random_state.get_state()
    if reject == "float32 range":
        with pytest.raises(ValueError, match="float32"):
            model.fit([x * 1e39 for x in X], y)
    elif reject == "held-out split":
        with pytest.raises(ValueError):
            model.set_params(early_stopping=True, validation_fraction=0.01).fit(X, y)
        model.set_params(early_stopping="auto", validation_fraction=0.1)
    else:
        def interrupt(self, batch, **kwargs):
            raise KeyboardInterrupt

        with monkeypatch.context() as patch:
            patch.setattr(_SequenceNet, "train_step", interrupt)
            with pytest.raises(KeyboardInterrupt):
                model.fit(X, y)
    after = model.random_state.get_state()
    assert after[2] == position[2] and np.array_equal(after[1], position[1])
    np.testing.assert_array_equal(quiet_fit(model, X, y).predict_proba(X), reference.predict_proba(X))


def test_partial_fit_refuses_other_classes_than_its_first_call():
    X, y = ragged(20), np.arange(20) % 2
    model = RNNClassifier(**SMALL).partial_fit(X, y, classes=[0, 1])
    model.partial_fit(X, y, classes=[1, 0])  # the same classes, in any order
    before = model.predict_proba(X)
    with pytest.raises(ValueError, match=r"classes=\[0, 1, 2\] differs from .* classes_ = \[0, 1\]"):
        model.partial_fit(X, y, classes=[0, 1, 2])
    np.testing.assert_array_equal(model.predict_proba(X), before)
    assert model.classes_.tolist() == [0, 1]
    fitted = quiet_fit(RNNClassifier(**SMALL), X, y)  # no first call to partial_fit to speak of
    with pytest.raises(ValueError, match=r"differs from the classes the model was fitted with, classes_ = \[0, 1\]"):
        fitted.partial_fit(X, y, classes=[0, 1, 2])


@pytest.mark.parametrize("param", ["with_mean", "with_std", "per_sequence"])
def test_the_scaler_validates_its_parameters(param):
    from sklearn.utils._param_validation import InvalidParameterError

    from sklearn_rnn import SequenceStandardScaler

    # with_mean='no' was accepted, and centred the data.
    with pytest.raises(InvalidParameterError, match=f"The '{param}' parameter"):
        SequenceStandardScaler(**{param: "no"}).fit(ragged())


def _warm_regressor(**params):
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 6), 2)) for _ in range(40)]
    y = np.linspace(-1, 1, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNRegressor(hidden_size=4, max_iter=3, random_state=0, **params).fit(X, y)
    return model.set_params(warm_start=True), X, y


def test_a_warm_fit_whose_warning_is_raised_as_an_error_leaves_the_model_as_it_was():
    # The warning came after training, outside the rollback: the network had trained
    # three more epochs while n_iter_ and loss_curve_ kept the first fit's.
    model, X, y = _warm_regressor()
    before, epochs, curve = model.predict(X), len(model.net_.history), list(model.loss_curve_)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="reached max_iter=3"):
            model.fit(X, y)
    assert len(model.net_.history) == epochs and model.loss_curve_ == curve
    np.testing.assert_array_equal(model.predict(X), before)


def test_a_warm_fit_whose_first_epoch_diverges_keeps_the_earlier_model_and_its_validation():
    # With early stopping it failed inside: "ValueError: 0 is not in list".
    model, X, y = _warm_regressor(early_stopping=True, validation_fraction=0.25,
                                  optimizer="sgd", batch_size=4)
    before, best = model.predict(X), model.best_validation_loss_
    model.set_params(learning_rate=1e30, clip_threshold=None)
    with pytest.warns(ConvergenceWarning, match="training loss became inf in epoch 4"):
        model.fit(X, y)
    assert model.n_iter_ == 0 and model.best_validation_loss_ == best
    np.testing.assert_array_equal(model.predict(X), before)


def test_a_model_loads_whatever_torchs_default_dtype_and_predicts_under_float32(tmp_path):
    # Under a float64 default the network was built in float64 and a valid file, a
    # pickle or a deep copy were refused as "weights of another dtype: inconsistent".
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 6), 2)) for _ in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, np.arange(12) % 2)
    path = tmp_path / "model.safetensors"
    model.save(path)
    blob, expected = pickle.dumps(model), model.predict_proba(X)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        copies = [sklearn_rnn.load(path), pickle.loads(blob), copy.deepcopy(model)]
        with pytest.raises(RuntimeError, match=r"default dtype is torch.float64.*set_default_dtype"):
            copies[0].predict(X)
    finally:
        torch.set_default_dtype(default)
    for loaded in copies:
        assert {p.dtype for p in loaded.module_.parameters()} == {torch.float32}
        np.testing.assert_array_equal(loaded.predict_proba(X), expected)


OLDER_FILES = Path(__file__).parent / "data" / "older_model_files"


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_model_files_of_earlier_versions_load_train_and_save_again(kind, tmp_path):
    # Files from before the readout parameter loaded with readout='auto' ('pool' now)
    # beside a network that reads the last state: partial_fit, warm fits and save
    # refused them ("fitted with readout='last', but its parameters now say 'pool'").
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(12)]
    y = np.arange(12) % 2 if kind == "classifier" else np.linspace(-1, 1, 12)
    model = sklearn_rnn.load(OLDER_FILES / f"73c5b5d_{kind}.safetensors")
    expected = np.load(OLDER_FILES / "73c5b5d_predictions.npz")
    predicted = model.predict_proba(X) if kind == "classifier" else model.predict(X)
    expected = expected["proba" if kind == "classifier" else "regression"]
    # Equal on the CPU with the libraries that wrote them; numpy 1.26 rounds one in 24 a
    # unit in the last place apart (5.6e-17).
    np.testing.assert_allclose(predicted, expected, rtol=1e-12, atol=0)
    params = model.get_params()
    assert (params["readout"], params["conv_kernels"], params["instance_norm"]) == ("last", None, False)
    model.partial_fit(X, y)
    model.save(tmp_path / "again.safetensors")
    assert sklearn_rnn.load(tmp_path / "again.safetensors").n_iter_ == model.n_iter_
    model.set_params(warm_start=True, max_iter=2).fit(X, y)


def test_the_first_format_2_files_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"lacks the fitted state field 'frame': it was written by "
                                         r"a development version of format 2.*Refit the model"):
        sklearn_rnn.load(OLDER_FILES / "739cd4b_classifier.safetensors")


def test_callbacks_changed_in_place_reach_continued_training_and_unchanged_ones_are_kept():
    # The engine compared the parameter's list with itself: a callback appended to it,
    # even with set_params(callbacks=that list), never ran in continued training.
    from skorch.callbacks import Callback

    epochs = []

    class Count(Callback):
        def __init__(self, step=1):
            self.step = step

        def on_epoch_end(self, net, **kwargs):
            epochs.append((self.step, len(net.history)))

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 6), 2)) for _ in range(12)]
    y = np.arange(12) % 2
    model = RNNClassifier(hidden_size=4, max_iter=2, tol=1.0, random_state=0, callbacks=[])
    model.partial_fit(X, y, classes=[0, 1])
    built = model.net_.callbacks_
    model.partial_fit(X, y)
    assert model.net_.callbacks_ is built  # a stream of calls builds them once
    model.callbacks.append(("count", Count()))
    model.partial_fit(X, y)
    assert epochs == [(1, 3)]
    model.callbacks[0][1].step = 2  # a setting changed in place
    model.partial_fit(X, y)
    assert epochs == [(1, 3), (2, 4)]


@pytest.mark.parametrize("value, message", [(1e39, "beyond float32's range"), (1e-50, "is 0 in float32")])
def test_partial_fit_refuses_weights_that_float32_turns_into_infinities_or_zeros(value, message):
    # 1e39 became inf: the first loss was inf and a fitted model that never trained was
    # left with n_iter_ 0 and a ConvergenceWarning. fit rescales its weights and takes them.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 6), 2)) for _ in range(12)]
    y = np.arange(12) % 2
    model = RNNClassifier(hidden_size=4, max_iter=2, random_state=0)
    with pytest.raises(ValueError, match=f"sample_weight.*{message}.*Scale the weights"):
        model.partial_fit(X, y, classes=[0, 1], sample_weight=np.full(12, value))
    assert not hasattr(model, "net_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert model.fit(X, y, sample_weight=np.full(12, value)).n_iter_ == 2


def test_a_partial_fit_loss_overflowed_by_huge_weights_blames_the_weights():
    # Weights of 1e38 pass the float32 check but the weighted loss overflows: the
    # warning advised a lower learning_rate, clipping or input scaling, none of which helps.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(20)]
    y = rng.normal(size=20)
    model = RNNRegressor(hidden_size=4, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"the training loss became inf in epoch 1, batch 1, so "
                      r"training stopped and the initial weights are kept\. The sample weights reach "
                      r"1e\+38, which partial_fit trains as given: the weighted loss overflows float32\. "
                      r"Scale the weights of every call down by one constant"):
        model.partial_fit(X, y, sample_weight=np.full(20, 1e38))
    assert model.n_iter_ == 0
    # The same weights scaled down by one constant train.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert model.partial_fit(X, y, sample_weight=np.full(20, 1.0)).n_iter_ == 1


def test_partial_fit_names_the_product_of_the_weights_it_refuses():
    # "sample_weight holds 1e+40" for weights of 1e30, which class_weight made 1e40.
    X = ragged(12)
    y = np.arange(12) % 2
    model = RNNClassifier(hidden_size=4, class_weight={1: 1e10}, random_state=0)
    with pytest.raises(ValueError, match=r"holds 1e\+40 \(sample_weight times class_weight\), beyond"):
        model.partial_fit(X, y, classes=[0, 1], sample_weight=np.full(12, 1e30))


def test_a_regressors_large_unequal_weights_train_as_the_same_weights_scaled_down():
    # fit's docstring: only the ratios of the weights count. The targets' weighted mean
    # summed weights of 1e308 to inf, and a fresh fit was refused as beyond float32.
    X = ragged(30)
    y = np.array([x[:, 0].sum() for x in X])
    weight = np.full(30, 1e308)
    weight[0] = 1e307
    model = RNNRegressor(hidden_size=4, max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow
        warnings.simplefilter("ignore", ConvergenceWarning)
        huge = clone(model).fit(X, y, sample_weight=weight)
        scaled = clone(model).fit(X, y, sample_weight=weight / 1e308)
    np.testing.assert_allclose(huge.predict(X), scaled.predict(X), rtol=1e-5)


def test_a_forged_history_of_text_losses_is_refused_on_load(tmp_path):
    # It loaded (only each record's being a dict was checked), predicted and saved, and
    # a warm-started fit then failed with "could not convert string to float: 'x'".
    X = ragged(12)
    y = np.arange(12) % 2
    quiet_fit(RNNClassifier(hidden_size=4, max_iter=2, random_state=0), X, y).save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    for record in header["state"]["history"]:  # {"kind": "dict", "pairs": [[name, value], ...]}
        record["pairs"] = [[name, "x" if name == "train_loss" else value] for name, value in record["pairs"]]
    write_file(tmp_path / "forged.safetensors", header, tensors, resign=True)
    with pytest.raises(ValueError, match="fitted state 'history'.*losses and scores that training reads numbers"):
        sklearn_rnn.load(tmp_path / "forged.safetensors")


def test_forged_optimizer_state_dropout_seed_and_format_version_are_refused_on_load(tmp_path):
    # Each loaded (digest recomputed after the edit) and then failed raw in partial_fit
    # ("Overflow when unpacking long long", KeyError: 'exp_avg'), or failed raw on load
    # ("not enough values to unpack", "invalid literal for int()"); format_version true
    # was read as format version 1.
    X = ragged(12)
    y = np.arange(12) % 2
    model = quiet_fit(RNNClassifier(hidden_size=4, max_iter=2, random_state=0, dropout=0.2, num_layers=2), X, y)
    model.save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    assert "optimizer.0.exp_avg" in tensors and "rng.dropout.cpu" in tensors  # Adam's moments, dropout masks

    def optimizer_numbers(h):  # the optimizer's numeric state: {"kind": "dict", "pairs": [...]}
        optimizer = dict(h["state"]["optimizer"]["pairs"])
        return optimizer["state"]["pairs"]

    inconsistent = r"The file is inconsistent; save the model again"
    forgeries = [
        (lambda h, t: (h["state"].update(dropout_seed=2**80), t.pop("rng.dropout.cpu")),
         r"'dropout_seed' = 1208925819614629174706176: expected an int from 0 to 2\*\*63 - 1.*" + inconsistent),
        (lambda h, t: h["state"].update(dropout_seed=-1), r"'dropout_seed' = -1: expected an int from 0"),
        (lambda h, t: t.pop("optimizer.0.exp_avg"),
         r"Adam's state of parameter 0, which lacks \['exp_avg'\].*" + inconsistent),
        (lambda h, t: (t.pop("optimizer.1.step"), t.pop("optimizer.1.exp_avg_sq")),
         r"parameter 1, which lacks \['exp_avg_sq', 'step'\]"),
        (lambda h, t: t.update({"optimizer.0.step": torch.zeros(2)}), r"parameter 0, which holds step = tensor"),
        (lambda h, t: optimizer_numbers(h).append(["lr", 1.0]),
         r"optimizer state 'lr', which does not name a parameter's optimizer state.*'0.exp_avg'.*" + inconsistent),
        (lambda h, t: t.update({"optimizer.x.exp_avg": torch.zeros(1)}),
         r"tensor 'optimizer.x.exp_avg', which does not name.*" + inconsistent),
        (lambda h, t: h.update(format_version=True), r"format version True, .*reads version 2: the file is damaged"),
    ]
    assert_forgeries_refused(tmp_path / "forged.safetensors", header, tensors, forgeries)
    # The unedited file still loads and trains on.
    write_file(tmp_path / "forged.safetensors", header, tensors, resign=True)
    loaded = sklearn_rnn.load(tmp_path / "forged.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        loaded.partial_fit(X, y)


@pytest.mark.parametrize("optimizer", ["sgd", "simplex"])
def test_incomplete_sgd_and_simplex_state_is_refused_on_load(tmp_path, optimizer):
    # Adam's state was checked for completeness; these loaded (digest recomputed after
    # the edit) and trained on with counts set to zero, negative or of unknown branches,
    # or with Adam's moments that neither optimizer keeps.
    X = ragged(12)
    y = np.arange(12) % 2
    model = quiet_fit(RNNClassifier(hidden_size=4, max_iter=2, random_state=0, optimizer=optimizer), X, y)
    model.save(tmp_path / "m.safetensors")
    header, tensors = read_file(tmp_path / "m.safetensors")
    assert not any(key.startswith("optimizer.") for key in tensors)  # no state per parameter

    def set_field(h, name, value):  # the optimizer's state: {"kind": "dict", "pairs": [[name, value], ...]}
        next(pair for pair in h["state"]["optimizer"]["pairs"] if pair[0] == name)[1] = value

    def counts(*pairs):
        return {"kind": "dict", "pairs": [list(pair) for pair in pairs]}

    inconsistent = r"The file is inconsistent; save the model again"
    moment = torch.zeros_like(model.net_.optimizer_.param_groups[0]["params"][0])
    forgeries = [
        (lambda h, t: t.update({"optimizer.0.exp_avg": moment}),
         rf"holds the '{optimizer}' optimizer's state, which has state for parameter 0 \(exp_avg\).*"
         r"no state per parameter\).*" + inconsistent),
    ]
    if optimizer == "sgd":
        forgeries += [
            (lambda h, t: set_field(h, "skipped_steps", None),
             r"the 'sgd' optimizer's state, which lacks \['skipped_steps'\] \(it keeps skipped_steps, a count.*"
             + inconsistent),
            (lambda h, t: set_field(h, "skipped_steps", -5), r"which holds a negative count: skipped_steps = -5"),
        ]
    else:
        forgeries += [
            (lambda h, t: set_field(h, "branch_counts", counts(("simplex", 2))),
             r"the 'simplex' optimizer's state, which lacks \['descent_fallback', 'switched', 'skipped'\] "
             r"\(it keeps the state of its generator and branch_counts, a count.*" + inconsistent),
            (lambda h, t: set_field(h, "branch_counts", counts(("simplex", 2), ("descent_fallback", 0),
                                                              ("switched", 0), ("skipped", 0), ("bogus", 1))),
             r"which counts \['bogus'\], which are not among"),
            (lambda h, t: set_field(h, "branch_counts", counts(("simplex", -2), ("descent_fallback", 0),
                                                              ("switched", 0), ("skipped", 0))),
             r"which holds a negative count: simplex = -2"),
        ]
    assert_forgeries_refused(tmp_path / "forged.safetensors", header, tensors, forgeries)
    # The unedited file still loads, with its counts, and trains on.
    write_file(tmp_path / "forged.safetensors", header, tensors, resign=True)
    loaded = sklearn_rnn.load(tmp_path / "forged.safetensors")
    assert loaded.branch_counts_ == model.branch_counts_
    skipped = [getattr(m.net_.optimizer_, "skipped_steps", None) for m in (loaded, model)]
    assert skipped[0] == skipped[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        loaded.partial_fit(X, y)
