"""save/load: a format that runs no code on load, round trips that keep predictions."""

import copy
import json
import os
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.exceptions import ConvergenceWarning

import sklearn_rnn
from sklearn_rnn import RNNClassifier, RNNRegressor, load

TINY = dict(hidden_size=5, max_iter=4, batch_size=8, random_state=0)


def ragged(n=30, seed=0, d=2):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(rng.integers(2, 7), d)) for _ in range(n)]


def resigned(header, tensors):
    """A forger's header: edited, with a digest recomputed to match (the digest detects
    damage and edits, not a forger who recomputes it; the checks after it must hold)."""
    from sklearn_rnn._persistence import _digest

    return {**header, "sha256": _digest(header, tensors)}


def fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.fixture(scope="module")
def classifier():
    X = ragged()
    X[3][1, 0] = np.nan  # a missing value: the encoder keeps fill values and masks
    sums = np.array([np.nansum(x[:, 0]) for x in X])
    y = np.where(sums < -0.5, "low", np.where(sums > 0.5, "high", "mid"))
    return fit(RNNClassifier(class_weight="balanced", **TINY), X, y), X, y


@pytest.fixture(scope="module")
def regressor():
    X = ragged(seed=1)
    y = np.column_stack([[x[:, 0].sum() for x in X], [len(x) for x in X]])
    return fit(RNNRegressor(optimizer="sgd", learning_rate=0.05, **TINY), X, y), X, y


def test_classifier_with_string_labels_round_trips(classifier, tmp_path):
    clf, X, y = classifier
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    loaded = RNNClassifier.load(path)
    assert type(loaded) is RNNClassifier and loaded is not clf
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)
    assert loaded.classes_.dtype == clf.classes_.dtype
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    assert loaded.get_params() == clf.get_params()
    assert loaded.n_iter_ == clf.n_iter_ and loaded.loss_curve_ == clf.loss_curve_
    assert loaded.n_features_in_ == 2
    np.testing.assert_array_equal(loaded._encoder.fill_values, clf._encoder.fill_values)
    # Values and masks reach the first layer (the sequences are too short for a stage).
    assert loaded._encoder.use_mask and loaded.module_.conv is None
    assert loaded.module_.input_projection.in_features == 4


def test_regressor_with_2d_targets_round_trips_and_continues_training(regressor, tmp_path):
    reg, X, y = regressor
    path = tmp_path / "reg.safetensors"
    reg.save(path)
    loaded = sklearn_rnn.load(path)
    prediction = loaded.predict(X)
    assert prediction.shape == (len(X), 2)
    np.testing.assert_array_equal(prediction, reg.predict(X))
    np.testing.assert_array_equal(loaded._y_mean, reg._y_mean)
    assert type(loaded.net_.history) is type(reg.net_.history)  # the engine's own kind
    assert loaded.net_.history.to_list() == reg.net_.history.to_list()
    # The optimizer's state travels too: one more epoch gives the same model.
    original = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(
        loaded.partial_fit(X, y).predict(X), original.partial_fit(X, y).predict(X)
    )


def test_table_fitted_model_keeps_feature_names(tmp_path):
    rng = np.random.default_rng(2)
    table = pd.DataFrame(rng.normal(size=(30, 4)), columns=["t0", "t1", "t2", "t3"])
    table.iloc[:10, 3] = np.nan  # shorter sequences: trailing NaN padding
    y = table["t0"].to_numpy() > 0
    clf = fit(RNNClassifier(**TINY), table, y)
    clf.save(tmp_path / "table.safetensors")
    loaded = RNNClassifier.load(tmp_path / "table.safetensors")
    np.testing.assert_array_equal(loaded.feature_names_in_, ["t0", "t1", "t2", "t3"])
    assert loaded.n_features_in_ == 4 and loaded.classes_.dtype == bool
    np.testing.assert_array_equal(loaded.predict_proba(table), clf.predict_proba(table))
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(table.rename(columns={"t0": "other"}))


def test_random_state_instance_and_dict_class_weight_survive(tmp_path):
    X = ragged(seed=3)
    y = np.arange(len(X)) % 2
    clf = fit(RNNClassifier(**{**TINY, "random_state": np.random.RandomState(5)}, class_weight={0: 1.0, 1: 2.0}), X, y)
    clf.save(tmp_path / "m.safetensors")
    loaded = RNNClassifier.load(tmp_path / "m.safetensors")
    assert loaded.class_weight == {0: 1.0, 1: 2.0}
    assert isinstance(loaded.random_state, np.random.RandomState)
    assert loaded.random_state.randint(1000) == clf.random_state.randint(1000)


def test_the_file_is_safetensors_with_json_metadata(classifier, tmp_path):
    clf, _, _ = classifier
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    with safe_open(str(path), framework="pt") as handle:
        header = json.loads(handle.metadata()["sklearn_rnn"])
        keys = set(handle.keys())
    assert header["estimator"] == "RNNClassifier" and header["format_version"] == 2
    assert "module.recurrence.weight_hh_l0" in keys
    assert any(key.startswith("optimizer.") for key in keys)
    assert header["params"]["hidden_size"] == 5


def test_unknown_and_tampered_files_give_clear_errors(classifier, tmp_path):
    clf, _, _ = classifier
    pickled = tmp_path / "model.pkl"
    pickled.write_bytes(pickle.dumps(clf))
    with pytest.raises(ValueError, match="is not a readable model file .*expected a model file written by"):
        sklearn_rnn.load(pickled)
    with pytest.raises(FileNotFoundError):
        sklearn_rnn.load(tmp_path / "missing.safetensors")

    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(plain))
    with pytest.raises(ValueError, match="without sklearn_rnn metadata"):
        sklearn_rnn.load(plain)

    path = tmp_path / "clf.safetensors"
    clf.save(path)
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF  # flip bits in the last weight
    edited = tmp_path / "edited.safetensors"
    edited.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="damaged or edited after it was saved"):
        sklearn_rnn.load(edited)

    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        metadata = handle.metadata()
    header = json.loads(metadata["sklearn_rnn"])
    for change, message in [
        ({"format_version": 99}, "format version 99, but this sklearn_rnn reads version 2: upgrade"),
        ({"format_version": 1}, "format version 1, whose digest covered only the tensors"),
        ({"estimator": "os.system"}, "damaged or edited after it was saved"),
        ({"estimator": "os:system", "sha256": None}, "unknown class 'os:system': it is defined in module 'os'"),
    ]:
        forged = tmp_path / "forged.safetensors"
        forged_header = {**header, **change}
        if forged_header["sha256"] is None:
            forged_header = resigned(forged_header, tensors)
        save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(forged_header)})
        with pytest.raises(ValueError, match=message):
            sklearn_rnn.load(forged)
    with pytest.raises(ValueError, match="holds a RNNClassifier, not a RNNRegressor"):
        RNNRegressor.load(path)


def test_unstorable_parameter_is_a_clear_error(tmp_path):
    X = ragged(seed=4)
    clf = fit(RNNClassifier(**TINY), X, np.arange(len(X)) % 2)
    clf.class_weight = {0: object()}  # set after fitting: save sees it
    with pytest.raises(TypeError, match="parameter 'class_weight' is a object, which save\\(\\) cannot store"):
        clf.save(tmp_path / "m.safetensors")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback without a GPU")
def test_a_cuda_model_loads_on_the_cpu_with_a_warning(classifier, tmp_path):
    clf, X, _ = classifier
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        metadata = handle.metadata()
    header = json.loads(metadata["sklearn_rnn"])
    header["params"]["device"] = "cuda"
    header["state"]["device"] = "cuda:0"
    forged = tmp_path / "cuda.safetensors"
    save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(resigned(header, tensors))})
    with pytest.warns(UserWarning, match="has device='cuda' .* when it was saved or copied.*restored on the CPU") as caught:
        loaded = RNNClassifier.load(forged)
    assert caught[0].filename == __file__  # the caller's line, not the package's (persist44)
    assert loaded.device == "cuda"
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_round_trip(tmp_path):
    X = ragged(seed=5)
    y = np.arange(len(X)) % 2
    gpu = fit(RNNClassifier(device="cuda", **{k: v for k, v in TINY.items()}), X, y)
    gpu.save(tmp_path / "gpu.safetensors")
    loaded = RNNClassifier.load(tmp_path / "gpu.safetensors")
    assert next(loaded.module_.parameters()).is_cuda
    np.testing.assert_allclose(loaded.predict_proba(X), gpu.predict_proba(X), atol=1e-12)
    cpu = fit(RNNClassifier(device="cpu", **TINY), X, y)
    cpu.save(tmp_path / "cpu.safetensors")
    on_cpu = RNNClassifier.load(tmp_path / "cpu.safetensors")
    assert not next(on_cpu.module_.parameters()).is_cuda


def test_a_file_from_before_the_readout_option_loads_reading_the_last_state(tmp_path):
    # Files written before `readout` and `conv_kernels` existed hold no such fields; their
    # network read its last state of the raw inputs, and loading must rebuild exactly that.
    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = fit(RNNClassifier(readout="last", conv_kernels=None, **TINY), X, y)
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    for field in ("readout", "conv_kernels"):
        del header["state"][field]
    for parameter in ("readout", "conv_kernels", "conv_channels"):
        del header["params"][parameter]
    old = tmp_path / "old.safetensors"
    save_file(tensors, str(old), metadata={"sklearn_rnn": json.dumps(resigned(header, tensors))})
    loaded = RNNClassifier.load(old)
    # The parameters say what the network is (they said 'auto', which now means 'pool'
    # and a stage, and continued training refused the model).
    assert loaded.readout == "last" and loaded.module_.readout_mode == "last"
    assert loaded.conv_kernels is None and loaded.module_.conv is None
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(loaded.partial_fit(X, y).predict_proba(X),
                                  clf.partial_fit(X, y).predict_proba(X))


def test_the_best_epoch_survives_pickle_deepcopy_and_model_files(tmp_path):
    # best_epoch_ was read from the early-stopping callback, which model files (and so
    # pickles) do not keep: it came back None.
    import copy
    import pickle

    import sklearn_rnn

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 2)) for _ in range(30)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=4, max_iter=6, early_stopping=True, validation_fraction=0.3,
                              n_iter_no_change=1, random_state=0).fit(X, y)
    assert model.best_epoch_ is not None
    model.save(tmp_path / "model.safetensors")
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model)),
                   sklearn_rnn.load(tmp_path / "model.safetensors")):
        assert copied.best_epoch_ == model.best_epoch_


def test_saving_what_has_no_model_file_format_names_what_does(tmp_path):
    # It said "another class of the name ... was defined after it", which was not so.
    from sklearn_rnn import SequenceStandardScaler
    from sklearn_rnn._persistence import save

    scaler = SequenceStandardScaler().fit([np.ones((2, 1))])
    with pytest.raises(TypeError, match="SequenceStandardScaler has no model file format.*skops, pickle or joblib"):
        save(scaler, tmp_path / "scaler.safetensors")


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["y_mean"].update(items=[0.0, 1.0, 2.0], shape=[3]), r"target scaling of shapes \(3,\) and \(1,\)"),
    (lambda s: s["y_scale"].update(items=[-5.0]), "not finite, or not positive"),
    (lambda s: s["y_scale"].update(items=[0.0]), "not finite, or not positive"),
    (lambda s: s.update(y_ndim=3), "y_ndim=3"),
    (lambda s: s.update(n_features_in_=9), "n_features_in_=9 against 2 features per step"),
    (lambda s: s.update(n_step_features=4, n_features_in_=4), "the encoder reads 2 features, not 4"),
    (lambda s: s.update(fitted_layout="table"), "a table layout reads 1 feature per step"),
])
def test_a_forged_state_that_contradicts_itself_is_refused(edit, message, tmp_path):
    # With a recomputed digest these loaded: predict gave 3 values a sequence, signs
    # flipped or constant predictions, or refused every input.
    X = ragged()
    model = fit(RNNRegressor(**TINY), X, np.linspace(-1, 1, len(X)))
    path = tmp_path / "model.safetensors"
    model.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    edit(header["state"])
    forged = tmp_path / "forged.safetensors"
    save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(resigned(header, tensors))})
    with pytest.raises(ValueError, match=f"contradicts itself.*{message}"):
        RNNRegressor.load(forged)


def test_a_crafted_deeply_nested_header_is_refused_with_a_value_error(tmp_path):
    # json.loads raised RecursionError; every refusal of load is a ValueError.
    import sklearn_rnn

    path = tmp_path / "nested.safetensors"
    depth = 100_000
    save_file({"x": torch.zeros(1)}, str(path),
              metadata={"sklearn_rnn": '{"format": "sklearn_rnn", "x": ' + "[" * depth + "]" * depth + "}"})
    with pytest.raises(ValueError, match="damaged metadata"):
        sklearn_rnn.load(path)


def test_a_model_loaded_inside_inference_mode_trains_on(tmp_path):
    # Its weights and optimizer state were inference tensors: partial_fit failed ("Inference
    # tensors cannot be saved for backward"), and then its rollback too.
    import copy
    import pickle

    import sklearn_rnn

    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    model = fit(RNNClassifier(optimizer="adam", **TINY), X, y)
    path = tmp_path / "model.safetensors"
    model.save(path)
    blob = pickle.dumps(model)
    with torch.inference_mode():
        loaded = [sklearn_rnn.load(path), pickle.loads(blob), copy.deepcopy(model)]
    expected = model.partial_fit(X, y).predict_proba(X)
    for copy_ in loaded:
        np.testing.assert_array_equal(copy_.partial_fit(X, y).predict_proba(X), expected)


# ------------------------------------------------ an outside review of persistence (session 31)
def _forge(model, tmp_path, edit):
    path = tmp_path / "model.safetensors"
    model.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    edit(header)
    forged = tmp_path / "forged.safetensors"
    save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(resigned(header, tensors))})
    return forged


def _set_encoder(key, value):
    def edit(header):
        pairs = [pair for pair in header["state"]["encoder"]["pairs"] if pair[0] == key]
        assert len(pairs) == 1
        pairs[0][1] = value
    return edit


@pytest.mark.parametrize("edit, message", [
    # column 0 read as time stamps by a model fitted without (the mask channel made the
    # shapes agree): its probabilities changed from 0.513 to 0.427
    (_set_encoder("time_feature", 0), "fitted state 'encoder'.*inconsistent"),
    (_set_encoder("time_feature", 7), "fitted state 'encoder'.*inconsistent"),
    # fill values of another length: loaded, then predict failed inside numpy
    (_set_encoder("fill_values", {"kind": "ndarray", "dtype": "<f8", "shape": [3], "items": [0.0] * 3}),
     "fitted state 'encoder'.*inconsistent"),
    (_set_encoder("fill_values", {"kind": "ndarray", "dtype": "<f8", "shape": [2], "items": [0.0, float("nan")]}),
     "fitted state 'encoder'.*inconsistent"),
    # the classes in another order than the network's outputs: every prediction swapped
    (lambda h: h["state"]["classes_"].update(items=h["state"]["classes_"]["items"][::-1]), "fitted state 'classes_'.*sorted order"),
    # parameters that do not describe the stored network: it loaded, and could then be
    # neither trained further nor saved
    (lambda h: h["params"].update(frame=2), "contradict its fitted state.*frame"),
    (lambda h: h["params"].update(readout={"pool": "last", "last": "pool"}[h["state"]["readout"]]),
     "contradict its fitted state.*readout"),
])
def test_a_forged_file_whose_fields_disagree_is_refused(classifier, edit, message, tmp_path):
    model = classifier[0]
    with pytest.raises(ValueError, match=message):
        RNNClassifier.load(_forge(model, tmp_path, edit))
    RNNClassifier.load(_forge(model, tmp_path, lambda h: None))  # the same file unedited loads


class SmallGRU(RNNClassifier):
    """A subclass of fixed architecture that takes two parameters."""

    _persisted_extra = tuple(name for name in RNNClassifier._get_param_names()
                             if name not in ("max_iter", "random_state"))

    def __init__(self, *, max_iter=2, random_state=None):
        super().__init__(hidden_size=4, cell="gru", max_iter=max_iter, random_state=random_state)


def test_a_subclass_with_a_narrower_init_saves_loads_and_pickles(tmp_path):
    # Older files' parameter values (readout, conv_kernels, instance_norm) were passed to
    # every class: a subclass without them saved files nothing could read ("unexpected
    # keyword argument 'readout'"), and its pickles did not unpickle.
    X = ragged(12)
    y = np.arange(12) % 2
    model = fit(SmallGRU(random_state=0), X, y)
    model.save(tmp_path / "small.safetensors")
    for loaded in (sklearn_rnn.load(tmp_path / "small.safetensors", expected=SmallGRU),
                   pickle.loads(pickle.dumps(model))):
        assert type(loaded) is SmallGRU and loaded.get_params() == model.get_params()
        np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_saving_to_a_folder_or_past_the_header_limit_says_why(classifier, tmp_path, monkeypatch):
    # Both were safetensors' own errors ("Is a directory"; "header too large", reached
    # by a history of about a million batches), outside the documented exceptions.
    from safetensors import SafetensorError

    import sklearn_rnn._persistence as persistence

    model = classifier[0]
    with pytest.raises(IsADirectoryError, match="it is a folder.*model.safetensors"):
        model.save(tmp_path)

    def refuse(*args, **kwargs):  # what safetensors raises for a header above 100 MB
        raise SafetensorError("Error while serializing: header too large")

    monkeypatch.setattr(persistence, "serialize", refuse)
    with pytest.raises(ValueError, match="safetensors refused it.*header too large.*MB.*pickle or joblib"):
        model.save(tmp_path / "big.safetensors")
    assert not list(tmp_path.iterdir())


def test_a_failed_save_leaves_the_file_it_would_replace_as_it_was(classifier, tmp_path, monkeypatch):
    # safetensors before 0.5 wrote in place: a full disk or a quota mid-write left a
    # truncated file where a good model had been, and every I/O error was reported as
    # "safetensors refused it ... header ... MB. Save it with pickle or joblib".
    import errno

    import sklearn_rnn._persistence as persistence

    model, X, _ = classifier
    path = tmp_path / "model.safetensors"
    model.save(path)
    before = path.read_bytes()

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(persistence.os, "fsync", full_disk)
    with pytest.raises(OSError, match="cannot write .*model.safetensors.*No space left.*nothing was changed"):
        model.save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]
    monkeypatch.undo()
    np.testing.assert_array_equal(load(path).predict_proba(X), model.predict_proba(X))


@pytest.mark.skipif(os.name != "posix", reason="file modes and symbolic links as on POSIX")
def test_a_saved_file_takes_the_umask_s_mode_keeps_a_replaced_file_s_and_writes_through_a_link(classifier, tmp_path):
    # safetensors 0.8 writes a private temporary file and renames it: new model files
    # were owner-only (0o600), a replaced file lost its mode, and a link was replaced
    # by a file of its own.
    model, X, _ = classifier
    umask = os.umask(0o022)
    try:
        model.save(tmp_path / "new.safetensors")
        assert (tmp_path / "new.safetensors").stat().st_mode & 0o777 == 0o644
        (tmp_path / "new.safetensors").chmod(0o640)
        model.save(tmp_path / "new.safetensors")
        assert (tmp_path / "new.safetensors").stat().st_mode & 0o777 == 0o640
        (tmp_path / "link.safetensors").symlink_to(tmp_path / "new.safetensors")
        (tmp_path / "new.safetensors").write_bytes(b"")
        model.save(tmp_path / "link.safetensors")
        assert (tmp_path / "link.safetensors").is_symlink()
        np.testing.assert_array_equal(load(tmp_path / "new.safetensors").predict_proba(X), model.predict_proba(X))
    finally:
        os.umask(umask)


@pytest.mark.skipif(os.name != "posix", reason="file modes as on POSIX")
def test_a_read_only_model_file_is_not_replaced(classifier, tmp_path):
    # The new file's rename replaced a file marked read-only, which open(path, 'wb')
    # would not have written.
    model, X, _ = classifier
    path = tmp_path / "kept.safetensors"
    path.write_bytes(b"an earlier model")
    path.chmod(0o444)
    with pytest.raises(PermissionError, match=r"kept.safetensors.*read-only \(mode 444\).*nothing was "
                                              r"changed there. Save to another path, or make the file writable"):
        model.save(path)
    assert path.read_bytes() == b"an earlier model" and [p.name for p in tmp_path.iterdir()] == [path.name]
    path.chmod(0o644)
    model.save(path)
    np.testing.assert_array_equal(load(path).predict_proba(X), model.predict_proba(X))


def test_metadata_routing_requests_survive_a_model_file(tmp_path):
    # They were dropped silently: the loaded model's fit no longer asked for sample_weight,
    # and cross_validate(..., params={"sample_weight": w}) failed on it.
    import sklearn
    from sklearn.model_selection import cross_validate

    from sklearn_rnn._persistence import STATE_SCHEMA

    X, y = ragged(16), np.arange(16) % 2
    with sklearn.config_context(enable_metadata_routing=True):
        model = fit(RNNClassifier(**TINY).set_fit_request(sample_weight=True).set_score_request(sample_weight="w"),
                    X, y)
        model.save(tmp_path / "model.safetensors")
        loaded = load(tmp_path / "model.safetensors")
        assert str(loaded.get_metadata_routing()) == str(model.get_metadata_routing())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            cross_validate(loaded, X, y, cv=2, params={"sample_weight": np.linspace(0.5, 2, 16), "w": np.ones(16)})
        fit(RNNClassifier(**TINY), X, y).save(tmp_path / "plain.safetensors")  # no requests set: no field
        with safe_open(tmp_path / "plain.safetensors", "pt") as file:
            assert "metadata_requests" not in json.loads(file.metadata()["sklearn_rnn"])["state"]
    assert not STATE_SCHEMA["metadata_requests"][1]({"fit": {"sample_weight": 3}})  # a forged request


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs as on POSIX")
def test_save_writes_through_what_is_not_a_regular_file_and_in_place_where_no_rename_replaces(
    classifier, tmp_path, monkeypatch
):
    # save put a regular file in place of whatever was at the path: a device such as
    # /dev/null became a file, a FIFO's reader got nothing; and a file mounted over the
    # path (a container's volume file: the rename fails with EBUSY) could not be saved.
    import errno
    import stat

    import sklearn_rnn._persistence as persistence

    model, X, _ = classifier
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so that a writer can open it
    try:
        model.save(fifo)
        received = b""
        while chunk := os.read(reader, 1 << 20):
            received += chunk
    except BlockingIOError:  # the FIFO was replaced: nothing ever came through it
        pass
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced by a file"
    (tmp_path / "received.safetensors").write_bytes(received)
    np.testing.assert_array_equal(load(tmp_path / "received.safetensors").predict_proba(X), model.predict_proba(X))

    mounted = tmp_path / "mounted.safetensors"
    mounted.write_bytes(b"an older model")
    inode = mounted.stat().st_ino

    def busy(source, destination):  # what rename(2) says of a mount point
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(persistence.os, "replace", busy)
    model.save(mounted)
    monkeypatch.undo()
    assert mounted.stat().st_ino == inode  # written in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mounted.safetensors", "pipe", "received.safetensors"]
    np.testing.assert_array_equal(load(mounted).predict_proba(X), model.predict_proba(X))


def test_save_writes_a_writable_file_in_a_folder_it_may_not_write_to_in_place(classifier, tmp_path, monkeypatch):
    # save made its new file beside the target, so a writable file in a read-only folder
    # (which open(path, 'wb') writes) was refused: "creating a file in its folder failed".
    # A new file in such a folder is still refused. (Root may write any folder, so the
    # folder's refusal is what os.open says.)
    import errno

    import sklearn_rnn._persistence as persistence

    model, X, _ = classifier
    kept = tmp_path / "kept.safetensors"
    kept.write_bytes(b"an older model")
    inode = kept.stat().st_ino
    opened = os.open

    def refused_in_folder(name, *args, **kwargs):
        if os.path.basename(name).startswith(".sklearn_rnn-"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return opened(name, *args, **kwargs)

    monkeypatch.setattr(persistence.os, "open", refused_in_folder)
    model.save(kept)
    with pytest.raises(PermissionError, match="new.safetensors'.*creating a file in its folder failed"):
        model.save(tmp_path / "new.safetensors")
    monkeypatch.undo()
    assert kept.stat().st_ino == inode  # written in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.safetensors"]
    np.testing.assert_array_equal(load(kept).predict_proba(X), model.predict_proba(X))


def test_a_model_of_a_cell_not_registered_in_this_session_says_to_import_its_module(tmp_path):
    # The file, or the pickle, was called inconsistent ("Save the model again") when the
    # session that loads it had not registered the user's cell the model is built of.
    from sklearn_rnn.nn import register_cell, unregister_cell
    from sklearn_rnn.nn.cells import ElmanCell

    X, y = ragged(16), np.arange(16) % 2
    register_cell(ElmanCell("persisted_relu", nonlinearity="relu"))
    try:
        model = fit(RNNClassifier(cell="persisted_relu", **TINY), X, y)
        model.save(tmp_path / "model.safetensors")
        pickled = pickle.dumps(model)
    finally:
        unregister_cell("persisted_relu")
    unknown = "cell 'persisted_relu', which is not registered in this session.*import the module.*register_cell"
    with pytest.raises(ValueError, match="model.safetensors' holds a model of " + unknown) as refused:
        load(tmp_path / "model.safetensors")
    assert "inconsistent" not in str(refused.value)
    with pytest.raises(ValueError, match="a stored estimator holds a model of " + unknown):
        pickle.loads(pickled)
    register_cell(ElmanCell("persisted_relu", nonlinearity="relu"))
    try:
        np.testing.assert_array_equal(load(tmp_path / "model.safetensors").predict_proba(X), model.predict_proba(X))
    finally:
        unregister_cell("persisted_relu")


def test_save_and_load_name_what_is_wrong_with_a_path_and_save_takes_every_name_open_takes(classifier, tmp_path):
    # save("models/") wrote a file named models, where open() refuses such a path; a
    # file in place of a folder was reported as a folder that does not exist; names of
    # 230 to 255 bytes failed ("File name too long") for the temporary file's longer
    # name; and load(folder) said "not a readable model file (No such device)".
    model, X, _ = classifier
    with pytest.raises(IsADirectoryError, match="ends in a separator names a folder.*'.*models'"):
        model.save(str(tmp_path / "models") + os.sep)
    (tmp_path / "afile").write_bytes(b"not a folder")
    (tmp_path / "afile.safetensors").write_bytes(b"an older model")
    with pytest.raises(IsADirectoryError, match="ends in a separator"):
        model.save(str(tmp_path / "afile.safetensors") + os.sep)
    assert (tmp_path / "afile.safetensors").read_bytes() == b"an older model"
    for path in (tmp_path / "afile" / "x.safetensors", tmp_path / "afile" / "sub" / "x.safetensors"):
        with pytest.raises(NotADirectoryError, match=r"afile' is a file, not a folder"):
            model.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "afile.safetensors"]
    longest = tmp_path / ("m" * (255 - len(".safetensors")) + ".safetensors")
    model.save(longest)
    np.testing.assert_array_equal(load(longest).predict_proba(X), model.predict_proba(X))
    with pytest.raises(IsADirectoryError, match="cannot load .* it is a folder.*model.safetensors"):
        load(tmp_path)


def test_save_and_load_take_a_bytes_path_as_open_does(classifier, tmp_path):
    # save(b"...") failed with "endswith first arg must be bytes or a tuple of bytes, not
    # str", and load(b"...") called it "not a readable model file" ("'bytes' object is not
    # an instance of 'str'"), where open() and os.fspath take a bytes path as a str one.
    model, X, _ = classifier
    path = os.fsencode(tmp_path / "model.safetensors")
    model.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]
    for loaded in (load(path), RNNClassifier.load(path)):
        np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    with pytest.raises(IsADirectoryError, match="ends in a separator"):  # its checks read the path as a str
        model.save(os.fsencode(tmp_path / "models") + os.sep.encode())
    with pytest.raises(IsADirectoryError, match="cannot load .* it is a folder"):
        load(os.fsencode(tmp_path))
    with pytest.raises(ValueError, match=r"'.*not_a_model\.safetensors' is not a readable model file"):
        (tmp_path / "not_a_model.safetensors").write_bytes(b"text")
        load(os.fsencode(tmp_path / "not_a_model.safetensors"))


def test_what_is_no_path_is_refused_by_name(classifier, tmp_path):
    # load(f.read()) took the file's bytes for a path: a FileNotFoundError whose message
    # was the whole file; file objects met Python's bare "expected str, bytes or
    # os.PathLike object"; save('') said "cannot write '' in place: Is a directory".
    import errno
    import io

    model, _, _ = classifier
    path = tmp_path / "model.safetensors"
    model.save(path)
    with pytest.raises(TypeError, match=r"got \d+ bytes, the contents of a file rather than its path"):
        load(path.read_bytes())
    with open(path, "rb") as handle, pytest.raises(TypeError, match="with BufferedReader: expected the path"):
        load(handle)
    with pytest.raises(TypeError, match="with BytesIO: expected the path"):
        model.save(io.BytesIO())
    for action in (lambda: model.save(""), lambda: load("")):
        with pytest.raises(FileNotFoundError, match="the path is empty"):
            action()
    with pytest.raises(FileNotFoundError, match="cannot load .* no such file") as missing:
        load(tmp_path / "missing.safetensors")
    assert missing.value.errno == errno.ENOENT and missing.value.filename.endswith("missing.safetensors")


@pytest.mark.parametrize("change", [dict(device="gpu"), dict(max_iter=0), dict(batch_size=0), dict(hidden_size=None)])
def test_a_model_with_a_parameter_it_does_not_take_is_not_saved_and_pickles_whole(change, tmp_path):
    # set_params does not validate: save and pickle wrote what load and unpickling then
    # refused ("inconsistent ... save the model again", which gave the same file).
    import copy

    X = ragged()
    model = fit(RNNClassifier(**TINY), X, np.arange(30) % 2)
    expected = model.predict_proba(X)
    model.set_params(**change)
    with pytest.raises(ValueError, match="cannot save this RNNClassifier: a parameter was set to a value it does not take"):
        model.save(tmp_path / "model.safetensors")
    assert not (tmp_path / "model.safetensors").exists()
    for copied in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert copied.get_params() == model.get_params()
        np.testing.assert_array_equal(copied.set_params(**TINY, device="auto").predict_proba(X), expected)


def test_a_save_while_the_weights_change_writes_a_file_that_verifies(tmp_path, monkeypatch):
    # The tensors were the CPU model's own storage, hashed first and written later: a
    # training step in another thread between the two (simulated here at the write)
    # gave files refused as "damaged or edited" (72 of 187 saves in the review's run).
    from sklearn_rnn import _persistence

    X = ragged()
    model = fit(RNNClassifier(**TINY), X, np.arange(30) % 2)
    expected = model.predict_proba(X)
    write = _persistence.serialize

    def stepped_then_written(tensors, metadata):
        with torch.no_grad():
            for parameter in model.net_.module_.parameters():
                parameter.add_(1.0)  # what an optimizer step in another thread does
        return write(tensors, metadata=metadata)

    monkeypatch.setattr(_persistence, "serialize", stepped_then_written)
    model.save(tmp_path / "model.safetensors")
    np.testing.assert_array_equal(load(tmp_path / "model.safetensors").predict_proba(X), expected)


def test_copies_of_estimators_sharing_a_random_state_share_one_copy_of_it():
    # A fitted estimator's pickle held a JSON copy of its RandomState: copies of two
    # estimators sharing one generator each had their own (refits then equal, where
    # the originals' differ), unlike unfitted estimators and scikit-learn's.
    import copy

    X, rng = ragged(), np.random.RandomState(0)
    first, second = (fit(RNNClassifier(**{**TINY, "random_state": rng}), X, np.arange(30) % 2) for _ in range(2))
    for a, b in (copy.deepcopy([first, second]), pickle.loads(pickle.dumps([first, second]))):
        assert a.random_state is b.random_state and a.random_state is not rng
        assert a.random_state.get_state()[2] == rng.get_state()[2]
        np.testing.assert_array_equal(a.predict_proba(X), first.predict_proba(X))


@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates a GPU model's file read without CUDA")
def test_a_gpu_models_dropout_stream_survives_a_load_and_save_without_cuda(tmp_path):
    # A GPU model loaded on a CPU machine dropped its CUDA mask generator's state, and a
    # save there wrote the model without it: back on a GPU the masks restarted from the
    # seed, where "training continues exactly as it would have from the saved estimator".
    X = ragged()
    model = fit(RNNClassifier(**TINY, dropout=0.2, num_layers=2), X, np.arange(30) % 2)
    model.save(tmp_path / "cpu.safetensors")
    with safe_open(str(tmp_path / "cpu.safetensors"), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    state = tensors.pop("rng.dropout.cpu")
    tensors["rng.dropout.cuda:0"] = state  # as a model trained on cuda:0 holds it
    save_file(tensors, str(tmp_path / "gpu.safetensors"), metadata={"sklearn_rnn": json.dumps(resigned(header, tensors))})
    loaded = load(tmp_path / "gpu.safetensors")
    loaded.save(tmp_path / "again.safetensors")
    with safe_open(str(tmp_path / "again.safetensors"), framework="pt") as handle:
        assert torch.equal(handle.get_tensor("rng.dropout.cuda:0"), state)
    module = loaded.net_.module_  # the generator made for that device goes on from it
    module._unplaced_generator_states["cpu"] = module._unplaced_generator_states.pop("cuda:0")
    module._dropout_generators.clear()
    assert torch.equal(module.dropout_generator("cpu").get_state(), state)


@pytest.mark.parametrize("callbacks", [None, "a callback"])
def test_a_gpu_models_dropout_stream_survives_a_pickle_whole_or_portable(callbacks):
    # A model with callbacks is pickled whole, and the network's pickle dropped every
    # stream but the CPU's: back on a GPU the masks restarted from the seed (a model
    # without callbacks travels as its model file, which kept it). A CPU generator stands
    # in for the CUDA one under its key.
    from skorch.callbacks import Callback

    X = ragged()
    model = fit(RNNClassifier(**TINY, dropout=0.2, num_layers=2,
                              callbacks=None if callbacks is None else [("noop", Callback())]), X, np.arange(30) % 2)
    module = model.net_.module_
    stand_in = torch.Generator()
    stand_in.manual_seed(7)
    torch.rand(100, generator=stand_in)
    module._dropout_generators["cuda:0"] = stand_in
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        held = copied.net_.module_._unplaced_generator_states
        assert torch.equal(held["cuda:0"], stand_in.get_state())


@pytest.mark.parametrize("edit, message", [
    (lambda h: h["state"].update(calibration=None), r"fitted state fields \['calibration'\] that model format 2"),
    (lambda h: h["params"].update(attention_heads=4), r"parameters \['attention_heads'\] that this sklearn_rnn's RNNClassifier"),
])
def test_a_newer_writers_file_says_to_upgrade_naming_the_writer(classifier, tmp_path, edit, message):
    # Files gained fields without a format bump, and the header named no writer: such a
    # file was called damaged ("save the model again", or "inconsistent (TypeError ...)").
    model, X, _ = classifier
    model.save(tmp_path / "model.safetensors")
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as handle:
        assert json.loads(handle.metadata()["sklearn_rnn"])["writer"] == sklearn_rnn.__version__

    def newer(header):
        edit(header)
        header["writer"] = "9.0"

    with pytest.raises(ValueError, match=message + r".*sklearn_rnn 9.0 wrote it, and this is sklearn_rnn .*upgrade"):
        load(_forge(model, tmp_path, newer))
    older = _forge(model, tmp_path, lambda header: header.pop("writer"))  # files before the key
    np.testing.assert_array_equal(load(older).predict_proba(X), model.predict_proba(X))


def test_the_simplex_optimizers_last_step_survives_files_and_pickles(tmp_path):
    # Model files (and so pickles and the workers of a stacked search with n_jobs=2)
    # dropped SimplexSGD.last_step, which a pickle of the optimizer alone keeps.
    X = ragged()
    model = fit(RNNClassifier(**TINY, optimizer="simplex", cell="tanh"), X, np.arange(30) % 2)
    last = model.net_.optimizer_.last_step
    assert last["branch"] in ("simplex", "descent_fallback", "switched", "skipped")
    model.save(tmp_path / "model.safetensors")
    for copied in (load(tmp_path / "model.safetensors"), pickle.loads(pickle.dumps(model))):
        assert copied.net_.optimizer_.last_step == last
    def bad_branch(header):  # the dict's tagged pairs: last_step's branch a number
        pairs = dict(header["state"]["optimizer"]["pairs"])["last_step"]["pairs"]
        pairs[0][1] = 3

    forged = _forge(model, tmp_path, bad_branch)
    with pytest.raises(ValueError, match="fitted state 'optimizer'"):
        load(forged)


def test_a_skops_file_given_to_load_is_told_to_skops(tmp_path):
    # A pipeline saved with skops.io.dump, as the README shows, met "header too large"
    # and advice to use pickle or joblib, neither of which reads it.
    import zipfile

    with zipfile.ZipFile(tmp_path / "pipe.skops", "w") as archive:  # what skops.io.dump writes: a zip
        archive.writestr("schema.json", "{}")
    with pytest.raises(ValueError, match=r"is a zip file, as skops.io.dump writes.*skops\.io\.load"):
        load(tmp_path / "pipe.skops")


def test_save_and_load_expand_a_home_folder_tilde(tmp_path, monkeypatch):
    # '~/model.safetensors' was read as the folder '<cwd>/~', with advice to create it.
    from sklearn_rnn import RNNClassifier

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 2)) for _ in range(10)]
    model = RNNClassifier(hidden_size=3, max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, np.arange(10) % 2)
    model.save("~/model.safetensors")
    assert (tmp_path / "model.safetensors").is_file() and not (tmp_path / "~").exists()
    np.testing.assert_array_equal(RNNClassifier.load("~/model.safetensors").predict_proba(X), model.predict_proba(X))


def test_a_forged_array_width_is_refused_before_any_allocation(classifier, tmp_path):
    # The width of a text array is the file's word: '<U25000000' for three empty items
    # cost 287 MB before any check refused the file, and wider asked for tens of GB.
    import resource

    clf, _, _ = classifier

    def wide(header):
        header["params"]["class_weight"] = {"kind": "ndarray", "dtype": "<U25000000", "shape": [3],
                                            "items": ["", "", ""]}

    forged = _forge(clf, tmp_path, wide)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=r"an array of dtype <U25000000 for items of at most 0 characters"):
        load(forged)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: not 287 MB


@pytest.mark.parametrize("edit, message", [
    # Checks that broke on a crafted value: "unhashable type: 'list'", numpy's "truth
    # value of an array ... is ambiguous", neither naming the file.
    (_set_encoder("scaled", [[0], [1]]), r"holds fitted state 'encoder' = .*: expected the input encoder's fields"),
    (lambda header: header["state"].update(fitted_layout={"kind": "ndarray", "dtype": "<U5", "shape": [2],
                                                          "items": ["table", "table"]}),
     r"holds fitted state 'fitted_layout' = array\(\['table', 'table'\].*: expected 'table' or 'sequences'"),
    # A newer writer's header key was read as damage ("save the model again").
    (lambda header: header.update(writer="99.0", created="2027-01-01"),
     r"has header keys \['created'\] that model format 2 does not have in this sklearn_rnn: sklearn_rnn 99.0 "
     r"wrote it, .* \(upgrade sklearn_rnn\)"),
])
def test_crafted_headers_are_refused_with_the_files_name_and_what_was_expected(tmp_path, edit, message):
    X = ragged(12)
    clf = fit(RNNClassifier(instance_norm=True, **TINY), X, np.arange(12) % 2)  # its encoder scales channels
    forged = _forge(clf, tmp_path, edit)
    with pytest.raises(ValueError, match=r"^'.*forged\.safetensors' " + message):
        load(forged)


def test_zip_files_of_torch_save_and_numpy_are_not_told_to_skops(classifier, tmp_path):
    # Every zip was called a skops file, with advice that then failed ("no item named
    # 'schema.json'"): torch.save(clf, 'model.pt'), numpy.savez.
    clf, _, _ = classifier
    torch.save(clf, tmp_path / "model.pt")
    with pytest.raises(ValueError, match=r"is a zip file, as torch\.save writes.*torch\.load\(path, weights_only=False\)"):
        load(tmp_path / "model.pt")
    np.savez(tmp_path / "arrays.npz", a=np.ones(2))
    with pytest.raises(ValueError, match=r"is a zip file, as numpy\.savez writes \(arrays\), not a model file"):
        load(tmp_path / "arrays.npz")


def test_labels_save_cannot_store_are_told_to_use_pickle(tmp_path):
    X = ragged(12)
    y = np.array(["2020-01-01", "2021-01-01"] * 6, dtype="datetime64[D]")
    clf = fit(RNNClassifier(**TINY), X, y)
    with pytest.raises(TypeError, match=r"dtype datetime64\[D\], which save\(\) cannot store: keep this model with "
                                        r"pickle/joblib"):
        clf.save(tmp_path / "dates.safetensors")


def test_a_model_file_of_a_users_cell_is_refused_where_that_name_now_means_another_cell(tmp_path):
    # A file named its cell only: loaded after the name was registered again with other
    # settings (a notebook cell run again after an edit), the weights ran the other cell
    # and predicted otherwise (0.069 off) without a word.
    from sklearn_rnn._persistence import _decode
    from sklearn_rnn.nn import register_cell, unregister_cell
    from sklearn_rnn.nn.cells import ElmanCell

    X = ragged(20)
    register_cell(ElmanCell("mine", nonlinearity="tanh"))
    try:
        model = fit(RNNClassifier(cell="mine", **TINY), X, np.arange(20) % 2)
        model.save(tmp_path / "mine.safetensors")
        np.testing.assert_array_equal(load(tmp_path / "mine.safetensors").predict_proba(X), model.predict_proba(X))
    finally:
        unregister_cell("mine")
    register_cell(ElmanCell("mine", nonlinearity="relu"))
    try:
        with pytest.raises(ValueError, match=r"holds a model of cell 'mine' trained as ElmanCell\(.*nonlinearity='tanh'"
                                             r".*but this session registers that name as ElmanCell\(.*nonlinearity='relu'"):
            load(tmp_path / "mine.safetensors")
    finally:
        unregister_cell("mine")
    with safe_open(str(tmp_path / "mine.safetensors"), framework="pt") as handle:
        recorded = _decode(json.loads(handle.metadata()["sklearn_rnn"])["state"]["cell"])
    assert recorded == {"class": "ElmanCell", "settings": {"module_options": {"nonlinearity": "tanh"},
                                                           "nonlinearity": "tanh"}}
    fit(RNNClassifier(cell="tanh", **TINY), X, np.arange(20) % 2).save(tmp_path / "tanh.safetensors")
    with safe_open(str(tmp_path / "tanh.safetensors"), framework="pt") as handle:  # the package's cells: their name
        assert "cell" not in json.loads(handle.metadata()["sklearn_rnn"])["state"]


def test_load_names_why_a_file_cannot_be_read_and_calls_a_cut_file_damaged(tmp_path):
    # persist44: safetensors' "no such file" for any file it could not open (a loop of
    # links, a file used as a folder); a model file cut short was "not a readable model
    # file", with advice to use pickle.load.
    import errno

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).fit(X, np.arange(12) % 2)
    path = tmp_path / "model.safetensors"
    model.save(path)
    loop_a, loop_b = tmp_path / "a", tmp_path / "b"
    os.symlink(loop_b, loop_a)
    os.symlink(loop_a, loop_b)
    with pytest.raises(OSError, match="cannot load .*: Too many levels of symbolic links") as error:
        RNNClassifier.load(loop_a)
    assert error.value.errno == errno.ELOOP
    with pytest.raises(NotADirectoryError, match="cannot load"):
        RNNClassifier.load(path / "inside")
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(ValueError, match=r"is a damaged model file .* \(cut short .* Copy or save the model again"):
        RNNClassifier.load(cut)
    with pytest.raises(FileNotFoundError, match="no such file"):
        RNNClassifier.load(tmp_path / "missing.safetensors")


def test_a_users_cell_under_a_package_cells_name_is_recorded_and_a_subclass_survives_spawned_workers(tmp_path):
    # persist44: a user's cell registered as 'tanh' (after unregister_cell) was saved as the
    # package's tanh and loaded as it in another session (0.054 off); a subclass from a
    # script was keyed '__mp_main__:...' in a spawned worker and refused there.
    from sklearn_rnn import RNNClassifier
    from sklearn_rnn._persistence import class_key
    from sklearn_rnn.nn import register_cell, unregister_cell
    from sklearn_rnn.nn.cells import CELLS, ElmanCell
    from sklearn_rnn.nn.cells._base import _recorded_identity

    registry = dict(CELLS)  # restored whole: the registry's order is what cell_names lists
    assert _recorded_identity(CELLS["tanh"]) is None
    unregister_cell("tanh")
    try:
        register_cell(ElmanCell("tanh", nonlinearity="relu"))
        assert _recorded_identity(CELLS["tanh"])["settings"]["nonlinearity"] == "relu"
    finally:
        CELLS.clear()
        CELLS.update(registry)
    assert list(CELLS) == list(registry) and CELLS["tanh"] is registry["tanh"]

    class Mine(RNNClassifier):
        pass

    Mine.__module__ = "__mp_main__"
    assert class_key(Mine).startswith("__main__:")


def test_a_model_of_a_package_cell_is_refused_where_the_name_runs_another_cell_and_loads_own_its_memory(tmp_path):
    # persist45 1-2, 4: a model of the package's 'tanh' (which records no identity) loaded
    # and unpickled silently as a user's cell registered under that name (0.06 off); a
    # loaded optimizer's state kept mapping the file (cut in place: a bus error at the next
    # partial_fit; another file copied over it: other Adam moments); hooks on module_,
    # which predict runs, were dropped by save silently.
    from sklearn_rnn.nn import register_cell, unregister_cell
    from sklearn_rnn.nn.cells import CELLS, ElmanCell

    X, y = ragged(16), np.arange(16) % 2
    model = fit(RNNClassifier(cell="tanh", **TINY), X, y)
    path = tmp_path / "tanh.safetensors"
    model.save(path)
    portable = pickle.dumps(model)
    whole = pickle.dumps(model.module_)  # a network pickled on its own
    registry = dict(CELLS)
    unregister_cell("tanh")
    try:
        register_cell(ElmanCell("tanh", nonlinearity="relu"))
        replaced = "the package's cell 'tanh', but this session registers that name as ElmanCell"
        with pytest.raises(ValueError, match="holds a model of " + replaced):
            load(path)
        with pytest.raises(ValueError, match=replaced):
            pickle.loads(portable)
        with pytest.raises(ValueError, match="a pickled network ran " + replaced):
            pickle.loads(whole)
        unregister_cell("tanh")
        register_cell(ElmanCell("tanh", nonlinearity="tanh"))  # the same recurrence again: accepted
        np.testing.assert_array_equal(load(path).predict_proba(X), model.predict_proba(X))
    finally:
        CELLS.clear()
        CELLS.update(registry)
    import shutil

    loaded = load(path)
    before = copy.deepcopy(loaded.net_.optimizer_.state_dict()["state"])
    other = tmp_path / "other.safetensors"
    fit(RNNClassifier(cell="tanh", **{**TINY, "random_state": 1}), X, y).save(other)
    shutil.copyfile(other, path)  # another model's bytes written over the file, in place
    after = loaded.net_.optimizer_.state_dict()["state"]
    assert before and all(torch.equal(before[k][name], after[k][name])
                          for k in before for name in before[k] if isinstance(before[k][name], torch.Tensor))
    handle = model.module_.register_forward_hook(lambda module, inputs, output: output / 0.1)
    with pytest.raises(TypeError, match=r"hooks are registered on its network \(module_\).*remove\(\)"):
        model.save(tmp_path / "hooked.safetensors")
    handle.remove()
    model.save(tmp_path / "hooked.safetensors")


def test_a_loaded_model_marks_its_best_epochs_as_the_model_it_continues(tmp_path):
    # persist45 3: the scorers built anew at load start from no best score, so the first
    # epochs after a load (or a pickle, a deepcopy) were marked best though worse.
    X, y = ragged(24), np.arange(24) % 2
    model = RNNClassifier(hidden_size=4, random_state=0, learning_rate=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(3):
            model.partial_fit(X, y, classes=[0, 1])
        model.save(tmp_path / "model.safetensors")
        copies = [load(tmp_path / "model.safetensors"), pickle.loads(pickle.dumps(model)), copy.deepcopy(model)]
        for estimator in (model, *copies):
            for _ in range(2):
                estimator.partial_fit(X, y)
    flags = model.net_.history[:, "train_loss_best"]
    assert flags != [True] * len(flags)  # the case: a worse epoch after the best
    for estimator in copies:
        assert estimator.net_.history[:, "train_loss_best"] == flags
        assert estimator.net_.history[:, "train_loss"] == model.net_.history[:, "train_loss"]


def test_save_writes_in_place_where_a_rename_is_refused_and_load_names_empty_files_and_changed_classes(
    classifier, tmp_path, monkeypatch
):
    # persist45 5, 7, 8: another user's writable file in a sticky shared folder (the rename
    # refused with EPERM) met a bare "Operation not permitted"; a 0-byte file was "not a
    # readable model file (header too small)" with advice on pickles; a user's class that
    # lost a parameter was told to upgrade sklearn_rnn.
    import errno

    import sklearn_rnn._persistence as persistence

    model, X, _ = classifier
    target = tmp_path / "shared.safetensors"
    target.write_bytes(b"an older model")
    inode = target.stat().st_ino

    def sticky(source, destination):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(persistence.os, "replace", sticky)
    model.save(target)
    monkeypatch.undo()
    assert target.stat().st_ino == inode and sorted(p.name for p in tmp_path.iterdir()) == ["shared.safetensors"]
    np.testing.assert_array_equal(load(target).predict_proba(X), model.predict_proba(X))
    (tmp_path / "empty.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.safetensors' is empty \(0 bytes\): .*Save or copy the model again"):
        load(tmp_path / "empty.safetensors")

    class Shrunk(RNNClassifier):  # a user's class, whose code no longer takes foo
        pass

    Shrunk.__module__, Shrunk.__qualname__ = "mymodels", "Mine"
    monkeypatch.setitem(persistence._REGISTRY, "mymodels:Mine", Shrunk)  # as importing mymodels registers it
    header, tensors = persistence._header(model)
    header = {**header, "estimator": "mymodels:Mine", "params": {**header["params"], "foo": 1}}
    with pytest.raises(ValueError, match=r"holds parameters \['foo'\] that mymodels:Mine in this session does "
                                         r"not take, which it took when the file was written"):
        persistence._restore(header, tensors, None, "'my.safetensors'")
