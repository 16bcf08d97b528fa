"""Save and load fitted estimators in a format that never runs code on load.

A model file is a `safetensors <https://github.com/huggingface/safetensors>`_ file: a
JSON header and raw tensor bytes. Loading it parses JSON and copies numbers; unlike a
pickle (or ``joblib.load``), it cannot execute code, so a model file from an untrusted
source is safe to open.

The file holds

- the network's weights (``module.*``) and the optimizer's state (``optimizer.*``), as
  tensors on the CPU;
- in the header's metadata, as JSON: the estimator's class, ``get_params()``, and every
  fitted attribute needed to predict and to continue training (classes, the input
  encoder's fill values, target scaling, ``n_features_in_``, ``feature_names_in_``,
  the input layout, ``n_iter_``, ``loss_curve_`` and the training history), the state
  of ``precision='float16'``'s loss scaler (scale and count of updates since the last
  overflow, as :meth:`torch.amp.GradScaler.state_dict` gives them), plus a SHA-256
  digest of the tensors, which detects a damaged or edited file.

JSON keeps only plain values, so values are tagged with their kind (a numpy array with
its dtype, a tuple, a dict with non-string keys, a RandomState's state) and rebuilt from
a fixed list of kinds; nothing in the file names a class or function to call.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from sklearn.preprocessing import LabelEncoder

from .sequences import InputEncoder

if TYPE_CHECKING:
    from ._estimators import BaseRNN

__all__ = ["load", "save"]

FORMAT = "sklearn_rnn"
FORMAT_VERSION = 1

#: Attributes rebuilt from others or from the weights, never stored as such.
_NOT_STORED = frozenset({"net_", "module_", "_label_encoder"})


def save(estimator: BaseRNN, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path`` (see :func:`load`).

    Parameters
    ----------
    estimator : RNNClassifier or RNNRegressor
        A fitted estimator.
    path : str or path-like
        The file to write (conventionally ``*.safetensors``); replaced if it exists.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        The estimator is not fitted.
    TypeError
        A parameter or fitted attribute holds a value this format cannot store (the
        message names it); pickle such a model instead.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn_rnn import RNNRegressor
    >>> from sklearn_rnn._persistence import save
    >>> X = [np.full((3, 1), v) for v in np.linspace(-1, 1, 20)]
    >>> reg = RNNRegressor(hidden_size=4, max_iter=3, tol=1.0, random_state=0)
    >>> reg = reg.fit(X, np.linspace(-1, 1, 20))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save(reg, os.path.join(folder, "model.safetensors"))
    ...     sorted(os.listdir(folder))
    ['model.safetensors']
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    tensors = {
        f"module.{name}": tensor.detach().to("cpu").contiguous()
        for name, tensor in estimator.net_.module_.state_dict().items()
    }
    optimizer_state = {}
    for index, state in estimator.net_.optimizer_.state_dict()["state"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{index}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                optimizer_state[f"{index}.{key}"] = _encode(value, f"optimizer state {key!r}")
    attributes = {
        name: _encode(value, f"fitted attribute {name!r}")
        for name, value in vars(estimator).items()
        if name not in _NOT_STORED and name not in estimator._get_param_names()
    }
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": type(estimator).__name__,
        "params": {
            name: _encode(value, f"parameter {name!r}")
            for name, value in estimator.get_params(deep=False).items()
        },
        "attributes": attributes,
        "optimizer_state": optimizer_state,
        "history": _encode(estimator.net_.history.to_list(), "training history"),
        "grad_scaler": _scaler_state(estimator.net_),
        "device": str(next(estimator.net_.module_.parameters()).device),
        "sha256": _digest(tensors),
    }
    from . import __version__

    metadata = {FORMAT: json.dumps(header), "sklearn_rnn_version": __version__}
    save_file(tensors, os.fspath(path), metadata=metadata)


def load(path: str | os.PathLike, *, expected: type | None = None) -> BaseRNN:
    """Read an estimator written by :meth:`~sklearn_rnn.RNNClassifier.save`.

    Loading parses JSON and copies tensor bytes; it never runs code from the file.
    A model trained on a GPU loads onto the GPU when PyTorch sees one (for
    ``device='auto'`` or ``'cuda'``) and onto the CPU otherwise, with a warning for a
    model whose ``device`` is 'cuda'.

    Parameters
    ----------
    path : str or path-like
        A file written by ``save``.
    expected : type, optional
        Raise unless the stored estimator is an instance of this class.

    Returns
    -------
    RNNClassifier or RNNRegressor
        The fitted estimator: the same parameters, fitted attributes, weights,
        optimizer state and loss scaler, hence the same predictions, and training
        continues as it would have from the saved estimator. (Files saved before the
        loss scaler's state was stored load with a fresh scaler.)

    Raises
    ------
    ValueError
        The file is not a model file written by ``save``, was written by a newer
        format, was damaged or edited, or holds another estimator than ``expected``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import sklearn_rnn
    >>> X = [np.full((2, 1), v) for v in np.linspace(-1, 1, 20)]
    >>> y = np.where(np.linspace(-1, 1, 20) > 0, "up", "down")
    >>> clf = sklearn_rnn.RNNClassifier(hidden_size=4, max_iter=3, tol=1.0, random_state=0)
    >>> clf = clf.fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     clf.save(os.path.join(folder, "model.safetensors"))
    ...     loaded = sklearn_rnn.load(os.path.join(folder, "model.safetensors"))
    >>> type(loaded).__name__, loaded.classes_.tolist()
    ('RNNClassifier', ['down', 'up'])
    """
    from ._estimators import RNNClassifier, RNNRegressor, _Seeds
    from ._step_estimator import RNNStepClassifier

    known = {
        "RNNClassifier": RNNClassifier,
        "RNNRegressor": RNNRegressor,
        "RNNStepClassifier": RNNStepClassifier,
    }
    header, tensors = _read(path)
    name = header.get("estimator")
    if name not in known:
        raise ValueError(
            f"{os.fspath(path)!r} holds an estimator of unknown class {name!r}: expected "
            f"one of {sorted(known)}. Load it with the sklearn_rnn version that saved it."
        )
    cls = known[name]
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(
            f"{os.fspath(path)!r} holds a {name}, not a {expected.__name__}: load it with "
            f"{name}.load or sklearn_rnn.load."
        )
    estimator = cls(**{key: _decode(value) for key, value in header["params"].items()})
    for key, value in header["attributes"].items():
        setattr(estimator, key, _decode(value))
    if hasattr(estimator, "classes_"):
        estimator._label_encoder = LabelEncoder()
        estimator._label_encoder.classes_ = estimator.classes_
    device = _target_device(estimator, header.get("device", "cpu"))
    # The seeds only draw initial weights, which the stored ones replace.
    net = estimator._build_net(_Seeds.draw(0), device, incremental=False)
    _load_weights(net, tensors, header, path, device)
    net.history = type(net.history)(_decode(header["history"]))  # the engine's kind of history
    _load_scaler(net, header.get("grad_scaler"), path)  # absent from files saved before it was stored
    estimator.net_ = net
    estimator.module_ = net.module_
    return estimator


# ------------------------------------------------------------------ reading
def _read(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    where = repr(os.fspath(path))
    not_a_model = (
        f"expected a model file written by RNNClassifier.save or RNNRegressor.save. A "
        "pickle or joblib file loads with pickle.load or joblib.load (only from a "
        "trusted source: loading a pickle runs code)."
    )
    try:
        with safe_open(os.fspath(path), framework="pt", device="cpu") as handle:
            metadata = handle.metadata() or {}
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except (SafetensorError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{where} is not a readable model file ({error}): {not_a_model}") from error
    if FORMAT not in metadata:
        raise ValueError(f"{where} is a safetensors file without sklearn_rnn metadata: {not_a_model}")
    try:
        header = json.loads(metadata[FORMAT])
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} has damaged metadata ({error}): save the model again.") from error
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{where} has metadata of another format: {not_a_model}")
    version = header.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(
            f"{where} uses model format version {version!r}, but this sklearn_rnn reads "
            f"versions up to {FORMAT_VERSION}: upgrade sklearn_rnn to load it."
        )
    missing = {"estimator", "params", "attributes", "optimizer_state", "history", "sha256"} - set(header)
    if missing:
        raise ValueError(f"{where} has incomplete metadata (no {sorted(missing)}): save the model again.")
    if _digest(tensors) != header["sha256"]:
        raise ValueError(
            f"{where} was damaged or edited after it was saved: its tensors do not match "
            "the digest stored with them. Save the model again from its source."
        )
    return header, tensors


def _load_weights(
    net: Any, tensors: dict[str, torch.Tensor], header: dict[str, Any], path: Any, device: torch.device
) -> None:
    module_state = {k[len("module.") :]: v for k, v in tensors.items() if k.startswith("module.")}
    expected = net.module_.state_dict()
    shapes = {name: tuple(tensor.shape) for name, tensor in module_state.items()}
    wanted = {name: tuple(tensor.shape) for name, tensor in expected.items()}
    if shapes != wanted:
        raise ValueError(
            f"{os.fspath(path)!r} holds weights {shapes} that do not fit the network its "
            f"parameters describe ({wanted}): the file is inconsistent; save the model again."
        )
    net.module_.load_state_dict(module_state)
    net.module_.to(device)
    state: dict[int, dict[str, Any]] = {}
    for key, tensor in tensors.items():
        if key.startswith("optimizer."):
            index, name = key[len("optimizer.") :].split(".", 1)
            state.setdefault(int(index), {})[name] = tensor  # load_state_dict places it
    for key, value in header["optimizer_state"].items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = _decode(value)
    if state:
        param_groups = net.optimizer_.state_dict()["param_groups"]
        net.optimizer_.load_state_dict({"state": state, "param_groups": param_groups})


#: The entries of :meth:`torch.amp.GradScaler.state_dict`, with their types.
_SCALER_STATE = {
    "scale": float,
    "growth_factor": float,
    "backoff_factor": float,
    "growth_interval": int,
    "_growth_tracker": int,
}


def _scaler_state(net: Any) -> dict[str, float | int] | None:
    """The float16 loss scaler's state (plain numbers), or None without a scaler."""
    scaler: torch.amp.GradScaler | None = getattr(net, "grad_scaler_", None)
    return None if scaler is None else scaler.state_dict()


def _load_scaler(net: Any, state: Any, path: Any) -> None:
    """Give ``net`` the loss scaler that :func:`_scaler_state` described, as a pickle would."""
    if state is None:
        return
    def number(value: Any, kind: type) -> bool:  # JSON writes 2.0**16 as 65536.0; an int is a float here too
        kinds = (int, float) if kind is float else (int,)
        return isinstance(value, kinds) and not isinstance(value, bool)

    valid = (
        isinstance(state, dict)
        and set(state) == set(_SCALER_STATE)
        and all(number(state[key], kind) for key, kind in _SCALER_STATE.items())
        and math.isfinite(state["scale"])
        and state["scale"] > 0
    )
    if not valid:
        raise ValueError(
            f"{os.fspath(path)!r} holds damaged loss-scaler state {state!r}: expected the "
            f"numbers {sorted(_SCALER_STATE)} of GradScaler.state_dict(), with a positive "
            "finite scale. The file was edited or damaged; save the model again."
        )
    scaler = torch.amp.GradScaler(torch.device(net.device).type)
    scaler.load_state_dict(state)
    net.grad_scaler_ = scaler


def _target_device(estimator: Any, saved_on: str) -> torch.device:
    if torch.cuda.is_available() and estimator.device in ("auto", "cuda"):
        return torch.device("cuda")
    if estimator.device == "cuda":
        warnings.warn(
            f"This {type(estimator).__name__} was saved with device='cuda' (its weights "
            f"were on {saved_on}), but PyTorch sees no CUDA device: it is loaded on the "
            "CPU and predicts there. Set device='cpu' or 'auto' before fitting it again.",
            UserWarning,
            stacklevel=3,
        )
    return torch.device("cpu")


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name]
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        digest.update(raw.numpy().tobytes())
    return digest.hexdigest()


# ------------------------------------------------------------- JSON values
def _encode(value: Any, what: str) -> Any:
    """A JSON-ready form of ``value``; kinds other than plain values carry a tag."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return _encode(value.item(), what)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufUO":
            raise TypeError(f"{what} is an array of dtype {value.dtype}, which save() cannot store.")
        items = [_encode(item, what) for item in value.ravel().tolist()]
        return {"kind": "ndarray", "dtype": value.dtype.str, "shape": list(value.shape), "items": items}
    if isinstance(value, list):
        return [_encode(item, what) for item in value]
    if isinstance(value, tuple):
        return {"kind": "tuple", "items": [_encode(item, what) for item in value]}
    if isinstance(value, dict):
        pairs = [[_encode(key, what), _encode(item, what)] for key, item in value.items()]
        return {"kind": "dict", "pairs": pairs}
    if isinstance(value, np.random.RandomState):
        return {"kind": "random_state", "state": _encode(value.get_state(), what)}
    if isinstance(value, InputEncoder):
        return {"kind": "input_encoder", "state": _encode(vars(value), what)}
    raise TypeError(
        f"{what} is a {type(value).__name__}, which save() cannot store: use plain "
        "values (numbers, strings, None, arrays), or keep this model with pickle/joblib."
    )


def _decode(value: Any) -> Any:
    """Rebuild a value from :func:`_encode`'s form; only the kinds listed here exist."""
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("kind")
    if kind == "ndarray":
        dtype = np.dtype(value["dtype"])
        items = [_decode(item) for item in value["items"]]
        array = np.empty(len(items), dtype=dtype)
        array[:] = items if dtype != object else _object_items(items)
        return array.reshape(value["shape"])
    if kind == "tuple":
        return tuple(_decode(item) for item in value["items"])
    if kind == "dict":
        return {_hashable(_decode(key)): _decode(item) for key, item in value["pairs"]}
    if kind == "random_state":
        random_state = np.random.RandomState()
        random_state.set_state(_decode(value["state"]))
        return random_state
    if kind == "input_encoder":
        encoder = InputEncoder.__new__(InputEncoder)
        vars(encoder).update(_decode(value["state"]))
        return encoder
    raise ValueError(f"a model file holds a value of unknown kind {kind!r}: save the model again.")


def _object_items(items: list[Any]) -> np.ndarray:
    holder = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        holder[index] = item
    return holder


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
