"""Model files: a versioned schema of the fitted state, written so that loading runs no code.

A model file is a `safetensors <https://github.com/huggingface/safetensors>`_ file: a
JSON header and raw tensor bytes. Loading it parses JSON and copies numbers; unlike a
pickle (or ``joblib.load``), it cannot execute code, so a model file from an untrusted
source is safe to open.

Format version 2 (this module writes and reads only it) holds

- tensors: the network's weights (``module.<name>``), the optimizer's tensors
  (``optimizer.<index>.<key>``, e.g. Adam's moments), and the states of the random
  generators that training draws from (``rng.dropout.<device>``: the dropout masks;
  ``rng.simplex``: the simplex method's convex weights);
- one metadata entry, ``sklearn_rnn``, a JSON object with the keys of :data:`HEADER_KEYS`:
  the format and its version, the estimator's registered class name (:func:`class_key`),
  its ``get_params()``, the fitted state as the fields of :data:`STATE_SCHEMA` (nothing
  else: no attribute dump), and a SHA-256 digest of the whole header (without the digest)
  and of every tensor's name, dtype, shape and bytes; and ``writer``, the version of
  sklearn_rnn that wrote it (files written before it was kept lack it), which a reader
  names when the file holds fields or parameters it does not know.

Loading checks, before any network is built: that the file is this format and version,
that the digest matches (an edited or damaged byte anywhere in the header or the tensors
is refused), that the class is registered, and that every state field has its schema's
kind; the estimator class then checks the weights' shapes against the parameters before
it allocates its network. Every refusal is a :class:`ValueError`.

This module imports nothing from the estimators: an estimator class registers itself
(:func:`register`, done for every subclass of the package's base estimator) and provides
two methods, ``_fitted_state()`` (the parameters, state fields and tensors to write) and
the class method ``_from_fitted_state(params, state, tensors, where)`` (the estimator
back).

JSON keeps only plain values, so values are tagged with their kind (a numpy array with
its dtype, a tuple, a dict with non-string keys, a RandomState's state) and rebuilt from
a fixed list of kinds; nothing in the file names a function to call.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
import sys
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as serialize

__all__ = [
    "FORMAT_VERSION",
    "STATE_SCHEMA",
    "class_key",
    "from_portable",
    "load",
    "register",
    "save",
    "to_portable",
]

FORMAT = "sklearn_rnn"
FORMAT_VERSION = 2

#: The keys of a version 2 header, all required.
HEADER_KEYS = frozenset({"format", "format_version", "estimator", "params", "state", "sha256"})
#: The optional header key naming the sklearn_rnn version that wrote the file.
WRITER_KEY = "writer"

#: Registered estimator classes, by :func:`class_key`.
_REGISTRY: dict[str, type] = {}


# ------------------------------------------------------------------ schema
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_float(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _float_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_float(item) for item in value)


def _float_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.float64 and value.ndim == 1


#: Entries of an epoch record that training reads again, and the check of each.
_EPOCH_ENTRIES: dict[str, Callable[[Any], bool]] = {
    **{name: _optional(_is_float) for name in ("train_loss", "valid_loss", "valid_score", "train_objective")},
    **{f"{name}_best": lambda v: isinstance(v, bool) for name in ("train_loss", "valid_loss", "valid_score")},
    "epoch": _is_int,
}


def _epoch_record(row: Any) -> bool:
    return isinstance(row, dict) and all(check(row[name]) for name, check in _EPOCH_ENTRIES.items() if name in row)


def _routing_requests(value: Any) -> bool:
    """Metadata routing requests as set_fit_request and its kin set them."""
    from sklearn.utils._metadata_requests import SIMPLE_METHODS

    return isinstance(value, dict) and all(
        method in SIMPLE_METHODS and isinstance(requests, dict)
        and all(isinstance(name, str) and (alias is None or isinstance(alias, (bool, str)))
                for name, alias in requests.items())
        for method, requests in value.items()
    )


def _label_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "biufUO"


#: The encoder's fields for the channels it reads per sequence (``instance_norm``):
#: all of them or, in files of models that read none (and files from before), none.
_SCALED_FIELDS = {"scaled", "scale_floor", "level_stats", "log_scale_stats"}


def _sorted_unique(labels: np.ndarray) -> bool:
    """Whether ``labels`` are distinct and in sorted order, as a fit's ``classes_`` are
    (the network's outputs are in that order: another would swap the predictions)."""
    try:
        return bool(np.array_equal(labels, np.unique(labels)))
    except TypeError:  # labels of mixed kinds that do not sort
        return False


def _per_sequence_fields(value: dict) -> bool:
    if not _SCALED_FIELDS & set(value):
        return True
    scaled = value["scaled"]
    n_values = value["n_features"] - (value["time_feature"] is not None) if _is_int(value["n_features"]) else 0
    if not (isinstance(scaled, list) and scaled and len(set(scaled)) == len(scaled)
            and all(_is_int(c) and 0 <= c < n_values for c in scaled)):
        return False
    k = len(scaled)
    floor, levels, log_scales = value["scale_floor"], value["level_stats"], value["log_scale_stats"]
    return (
        _float_array(floor) and floor.shape == (k,) and bool(np.all(floor > 0))
        and all(isinstance(stats, np.ndarray) and stats.dtype == np.float64 and stats.shape == (2, k)
                and bool(np.all(np.isfinite(stats))) and bool(np.all(stats[1] > 0))
                for stats in (levels, log_scales))
    )


def _encoder(value: Any) -> bool:
    base = {"n_features", "fill_values", "use_mask", "time_feature", "time_scale"}
    return (
        isinstance(value, dict)
        and set(value) in (base, base | _SCALED_FIELDS)
        and _per_sequence_fields(value)
        and _is_int(value["n_features"])
        and value["n_features"] >= 1
        and _optional(_is_int)(value["time_feature"])
        and (value["time_feature"] is None or 0 <= value["time_feature"] < value["n_features"])
        # a fill value (the training mean) for every measured feature, finite
        and _float_array(value["fill_values"])
        and value["fill_values"].shape == (value["n_features"] - (value["time_feature"] is not None),)
        and bool(np.isfinite(value["fill_values"]).all())
        and isinstance(value["use_mask"], bool)
        and _is_float(value["time_scale"])
        and math.isfinite(value["time_scale"])
        and value["time_scale"] > 0
    )


def _optimizer(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and {"name", "state", "branch_counts", "skipped_steps"} <= set(value)
        <= {"name", "state", "branch_counts", "skipped_steps", "last_step"}
        and value["name"] in ("adam", "sgd", "simplex")
        and isinstance(value["state"], dict)
        and all(isinstance(key, str) and _is_float(item) for key, item in value["state"].items())
        and _optional(lambda counts: isinstance(counts, dict)
                      and all(isinstance(k, str) and _is_int(v) for k, v in counts.items()))(value["branch_counts"])
        and _optional(_is_int)(value["skipped_steps"])
        and _last_step(value.get("last_step", {}))
    )


def _last_step(value: Any) -> bool:
    """:attr:`~sklearn_rnn.optim.SimplexSGD.last_step`: a branch name and numbers (files
    written before it was kept lack it)."""
    return isinstance(value, dict) and all(
        isinstance(key, str) and (
            isinstance(item, str) if key == "branch"
            else item is None or _is_float(item) or (isinstance(item, list) and all(map(_is_float, item)))
        )
        for key, item in value.items()
    )


def _grad_scaler(value: Any) -> bool:
    keys = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
    return (
        isinstance(value, dict)
        and set(value) == keys
        and all(_is_float(value[key]) for key in keys)
        and math.isfinite(value["scale"])
        and value["scale"] > 0
    )


#: The fitted state of format version 2: each field, whether every file has it, and the
#: test its value passes. An estimator gives exactly these fields (the optional ones
#: when it has them); a file with another field, a missing one or a value of another
#: kind is refused.
STATE_SCHEMA: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "n_features_in_": (True, _is_int, "an int"),
    "feature_names_in_": (False, _label_array, "a 1D array of names"),
    "fitted_layout": (True, lambda v: v in ("table", "sequences"), "'table' or 'sequences'"),
    "n_step_features": (True, _is_int, "an int"),
    "encoder": (True, _encoder, "the input encoder's fields"),
    "classes_": (False, lambda v: _label_array(v) and _sorted_unique(v),
                 "a 1D array of distinct labels in sorted order (as np.unique gives them)"),
    "n_outputs_": (False, _is_int, "an int"),
    "y_mean": (False, _float_array, "a 1D float64 array"),
    "y_scale": (False, _float_array, "a 1D float64 array"),
    "y_ndim": (False, _is_int, "an int"),
    "frame": (True, lambda v: _is_int(v) and v >= 1, "an int >= 1 (raw steps per network step)"),
    "readout": (False, lambda v: v in ("last", "pool"), "'last' or 'pool' (absent: 'last')"),
    "conv_kernels": (False, lambda v: isinstance(v, list) and all(_is_int(k) and k >= 1 for k in v),
                     "a list of kernel widths >= 1 (absent: no convolutional stage)"),
    "conv_pool": (False, lambda v: _is_int(v) and v >= 1,
                  "an int >= 1 (steps per pooling window of the stage; absent: 1)"),
    "early_stopping": (True, lambda v: isinstance(v, bool), "a bool (a held-out split was used)"),
    "n_iter_": (True, _is_int, "an int"),
    "loss_curve_": (True, _float_list, "a list of numbers"),
    "validation_scores_": (True, _optional(_float_list), "a list of numbers or null"),
    "best_validation_score_": (True, _optional(_is_float), "a number or null"),
    "best_validation_loss_": (True, _optional(_is_float), "a number or null"),
    "best_epoch": (False, _optional(_is_int), "an int or null (absent in earlier files)"),
    "history": (True, lambda v: isinstance(v, list) and all(_epoch_record(row) for row in v),
                "a list of epoch records (the losses and scores that training reads numbers, "
                "the epoch an int, the *_best flags booleans)"),
    "optimizer": (True, _optimizer, "the optimizer's kind and numeric state"),
    "grad_scaler": (True, _optional(_grad_scaler), "GradScaler.state_dict() or null"),
    "dropout_seed": (True, lambda v: _is_int(v) and 0 <= v < 2**63,
                     "an int from 0 to 2**63 - 1 (the seed of the dropout masks)"),
    "device": (True, lambda v: isinstance(v, str), "a device name"),
    "extra": (True, lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v),
              "a mapping of attribute names to values"),
    "cell": (False, lambda v: isinstance(v, dict) and set(v) == {"class", "settings"}
             and isinstance(v["class"], str) and isinstance(v["settings"], dict),
             "the class and settings of a user's cell (absent: one of the package's cells)"),
    "metadata_requests": (False, lambda v: _routing_requests(v),
                          "a mapping of method names to {parameter: true, false, null or an alias} "
                          "(absent: the class's own requests)"),
}


#: Required state fields that the first format-2 files (written on 2026-11-23, before
#: the defaults study) lack: their absence names such a file.
_FIRST_FILES_LACK = frozenset({"frame", "early_stopping"})


# ---------------------------------------------------------------- registry
def class_key(cls: type) -> str:
    """The name a model file gives an estimator class.

    The package's own classes go by their name (``'RNNClassifier'``); any other class
    by ``'module:qualified name'``.

    Parameters
    ----------
    cls : type

    Returns
    -------
    str

    Examples
    --------
    >>> from sklearn_rnn import RNNClassifier
    >>> from sklearn_rnn._persistence import class_key
    >>> class_key(RNNClassifier)
    'RNNClassifier'
    """
    if cls.__module__.split(".")[0] == "sklearn_rnn":
        return cls.__qualname__
    # A script's module is __mp_main__ in its spawned (or forkserver) workers: one class.
    module = "__main__" if cls.__module__ == "__mp_main__" else cls.__module__
    return f"{module}:{cls.__qualname__}"


def register(cls: type) -> type:
    """Make ``cls`` loadable: files naming :func:`class_key` of it load as ``cls``.

    Every subclass of the package's estimators registers itself when it is defined; a
    class defined again (say, in a notebook) replaces the earlier one.

    Parameters
    ----------
    cls : type
        A class with ``_fitted_state`` and ``_from_fitted_state``.

    Returns
    -------
    type
        ``cls``.
    """
    _REGISTRY[class_key(cls)] = cls
    return cls


def _check_savable_class(cls: type) -> str:
    key = class_key(cls)
    if "<locals>" in cls.__qualname__:
        raise TypeError(
            f"{cls.__qualname__} is defined inside a function, so no later session can find "
            "it by name and its model file could not be loaded: define the class at the top "
            "level of a module, or keep this model with pickle/joblib."
        )
    if key not in _REGISTRY:
        raise TypeError(
            f"{cls.__qualname__} has no model file format: model files hold the package's "
            "RNN estimators (and subclasses of them). Keep it, or a pipeline holding it, "
            "with skops, pickle or joblib."
        )
    if _REGISTRY[key] is not cls:
        raise TypeError(
            f"{cls.__qualname__} is not registered for model files (another class of the "
            f"name {key!r} was defined after it): save an instance of the class registered "
            "under that name, or register this one with sklearn_rnn._persistence.register."
        )
    return key


# ------------------------------------------------------------------ saving
def save(estimator: Any, path: str | bytes | os.PathLike) -> None:
    """Write a fitted estimator to ``path`` (see :func:`load`).

    Parameters
    ----------
    estimator : RNNClassifier, RNNRegressor, RNNStepClassifier or a subclass
        A fitted estimator.
    path : str, bytes or path-like
        The file to write (conventionally ``*.safetensors``); replaced in one step if it
        exists. What is not a regular file (a device such as ``/dev/null``, a FIFO) is
        written through as ``open(path, 'wb')`` would, never replaced; so is a file
        mounted over ``path`` (a container's volume file), which no rename can replace,
        and a writable file in a folder this user may not write to: the atomic replace
        is then not possible, and a failed write may leave such a file cut short.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        The estimator is not fitted.
    ValueError
        Parameters that shape the network were changed since it was fitted, or a
        parameter holds a value it does not take (``set_params`` does not check, and
        :func:`load` would refuse the file); or safetensors refused the file (a header
        above its 100 MB).
    OSError
        The file could not be written (no permission, a full disk, a read-only file
        already at ``path``, which save does not replace); a file already at
        ``path`` is then left as it was: a model file is written whole or not at all
        (except where it is written in place, see ``path``).
    TypeError
        A parameter or state field holds a value this format cannot store, or the
        class could not be found when loading (the message names it); pickle such a
        model instead. Or ``path`` is no path (a file object: model files are written
        by path).
    FileNotFoundError
        The folder of ``path`` does not exist, or ``path`` is empty.
    NotADirectoryError
        A folder of ``path`` is a file.
    IsADirectoryError
        ``path`` is a folder, or ends in a separator (as ``open`` refuses it).

    Notes
    -----
    The tensors are copied before they are hashed, so a file always verifies; but a
    save while another thread trains the estimator may hold weights and a history of
    different moments, and so does a pickle or save of the estimator by one of its own
    callbacks during a training call (the running epoch's weights, the fitted
    attributes of before the call). Save between training calls, or checkpoint
    ``net_`` from a callback with skorch's :class:`~skorch.callbacks.Checkpoint`.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn_rnn import RNNRegressor
    >>> from sklearn_rnn._persistence import save
    >>> X = [np.full((3, 1), v) for v in np.linspace(-1, 1, 20)]
    >>> reg = RNNRegressor(hidden_size=4, max_iter=3, random_state=0)
    >>> reg = reg.fit(X, np.linspace(-1, 1, 20))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save(reg, os.path.join(folder, "model.safetensors"))
    ...     sorted(os.listdir(folder))
    ['model.safetensors']
    """
    path = _path_of(path, "save")
    header, tensors = _header(estimator)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        blocking = folder  # the nearest existing path above: a file where a folder should be?
        while not os.path.exists(blocking) and os.path.dirname(blocking) != blocking:
            blocking = os.path.dirname(blocking)
        if os.path.exists(blocking) and not os.path.isdir(blocking):
            raise NotADirectoryError(
                f"cannot write {path!r}: {blocking!r} is a file, not a folder. Save to a path "
                "whose folders are folders, or move that file away first."
            )
        raise FileNotFoundError(
            f"cannot write {path!r}: its folder {folder!r} does not exist. Create it first, "
            "e.g. os.makedirs(folder, exist_ok=True), or save to an existing folder."
        )
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"cannot write {path!r}: it is a folder. Give a file name inside it, e.g. "
            f"os.path.join({path!r}, 'model.safetensors')."
        )
    if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)):
        raise IsADirectoryError(  # as open(path, 'wb') does
            f"cannot write {path!r}: a path that ends in a separator names a folder. Give "
            f"the file's name without it, {path.rstrip(os.sep + (os.altsep or ''))!r}, or a file "
            "name inside that folder."
        )
    text = json.dumps(header)
    try:
        data = serialize(tensors, metadata={FORMAT: text})  # in memory: no file touched yet
    except SafetensorError as error:  # the header past safetensors' limit (100 MB)
        raise ValueError(
            f"cannot save this {type(estimator).__name__} to {path!r}: safetensors refused it "
            f"({error}; its header, the parameters and fitted state but the weights, takes "
            f"{len(text.encode()) / 1e6:.1f} MB). Save it with pickle or joblib."
        ) from None
    _write_whole(path, data)


def _write_whole(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all.

    The bytes go to a new file beside the target, which then replaces it in one step, so
    a failed write (a full disk, a quota, an interrupt) leaves an existing file as it
    was. Through a symbolic link the link's target is replaced; the file gets the mode
    of the one it replaces, else the mode the umask gives a new file. A file without
    write permission (for this user, or for anyone: even an administrator's save keeps
    a file marked read-only) is refused, not replaced.

    A target that is not a regular file (a device such as ``/dev/null``, a FIFO) is
    written through, as ``open(path, 'wb')`` would, never replaced; so is a file that
    cannot be replaced (a file mounted over the path: ``EBUSY``, or ``EXDEV``; another
    user's file in a sticky shared folder: ``EPERM``), or whose folder this user may not
    write to (no file can be made beside it), which a failed write may then leave cut
    short.
    """
    target = os.path.realpath(path)
    try:
        status = os.stat(target)
    except FileNotFoundError:
        status = None
    except OSError as error:  # a name too long, a loop of links
        raise type(error)(error.errno, f"cannot write {path!r}: {error.strerror}") from None
    if status is not None and not stat.S_ISREG(status.st_mode):
        _write_in_place(path, target, data)
        return
    mode = None if status is None else status.st_mode & 0o7777
    if mode is not None and (not mode & 0o222 or not os.access(target, os.W_OK)):
        # A rename would replace a file that open(path, 'wb') may not write: keep it.
        raise PermissionError(
            errno.EACCES,
            f"cannot write {path!r}: the file there is read-only (mode {mode:o}), and save "
            "does not replace a file it may not write; nothing was changed there. Save to "
            "another path, or make the file writable first (chmod u+w)",
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for attempt in range(100):
        # A short name of its own, so that any name the target may have (up to the
        # file system's 255 bytes) can be saved; O_EXCL: never a file already there.
        temporary = os.path.join(os.path.dirname(target), f".sklearn_rnn-{os.urandom(8).hex()}.tmp")
        try:
            descriptor = os.open(temporary, flags, 0o666)  # the umask applies
            break
        except OSError as error:
            if isinstance(error, FileExistsError) and attempt < 99:
                continue
            if error.errno in (errno.EACCES, errno.EPERM) and status is not None:
                # A writable file in a folder this user may not write to (checked above):
                # open(path, 'wb') writes it, so save writes it in place too.
                _write_in_place(path, target, data)
                return
            raise type(error)(
                error.errno, f"cannot write {path!r}: creating a file in its folder failed ({error.strerror})"
            ) from None
    renaming = False
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        renaming = True  # the errors below that a rename alone gives
        os.replace(temporary, target)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        renamed = (errno.EBUSY, errno.EXDEV, errno.EPERM, errno.EACCES)
        if isinstance(error, OSError) and error.errno in renamed and status is not None and renaming:
            # A file mounted over the path (a container's volume file), or another user's
            # writable file in a sticky shared folder (only its owner may rename over it),
            # cannot be replaced by a rename: write it in place, as pickle or open() would.
            _write_in_place(path, target, data)
            return
        if isinstance(error, OSError):
            raise type(error)(
                error.errno, f"cannot write {path!r}: {error.strerror}; nothing was changed there"
            ) from None
        raise


def _write_in_place(path: str, target: str, data: bytes) -> None:
    """Write ``data`` through the existing ``target``, as ``open(path, 'wb')`` does."""
    try:
        with open(target, "wb") as file:
            file.write(data)
            file.flush()
            if stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                os.fsync(file.fileno())
    except OSError as error:
        raise type(error)(
            error.errno, f"cannot write {path!r} in place: {error.strerror or error}"
        ) from None


def _header(estimator: Any) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The signed header and the tensors of a fitted estimator."""
    key = _check_savable_class(type(estimator))
    params, state, tensors = estimator._fitted_state()
    unknown = set(state) - set(STATE_SCHEMA)
    missing = {name for name, (required, _, _) in STATE_SCHEMA.items() if required} - set(state)
    if unknown or missing:
        raise TypeError(
            f"{type(estimator).__name__}._fitted_state() gave fields {sorted(unknown)} not in "
            f"model format {FORMAT_VERSION} and lacks {sorted(missing)}: a model file holds "
            "exactly the fields of sklearn_rnn._persistence.STATE_SCHEMA."
        )
    # Copies: a CPU model's own weights and optimizer state, which training in another
    # thread may step between the digest and the write (a file failing its own digest).
    tensors = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in tensors.items()}
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        WRITER_KEY: _version(),
        "estimator": key,
        "params": {name: _encode(value, f"parameter {name!r}") for name, value in params.items()},
        "state": {name: _encode(value, f"fitted state {name!r}") for name, value in state.items()},
    }
    header["sha256"] = _digest(header, tensors)
    return header, tensors


def to_portable(estimator: Any) -> dict[str, Any]:
    """The content of a model file as plain values: a JSON string and numpy arrays.

    What the estimators' ``__getstate__`` gives pickle, joblib, ``copy.deepcopy`` and
    skops.io, so that each of them stores the fitted state of this schema (and skops
    stores nothing but a string and arrays, which it loads without running code).

    Parameters
    ----------
    estimator : a fitted estimator of the package

    Returns
    -------
    dict
        ``{'format': 'sklearn_rnn', 'header': str, 'tensors': {name: ndarray}}``.
    """
    header, tensors = _header(estimator)
    return {
        "format": FORMAT,
        "header": json.dumps(header),
        "tensors": {name: tensor.numpy() for name, tensor in tensors.items()},
    }


def from_portable(portable: Any, *, expected: type | None = None, cls: type | None = None) -> Any:
    """The estimator that :func:`to_portable` described, verified as a model file is.

    Parameters
    ----------
    portable : dict
        :func:`to_portable`'s value.
    expected : type, optional
        Raise unless the stored estimator is an instance of this class.
    cls : type, optional
        The class to restore when the stored class name is its :func:`class_key` (an
        unpickled object knows its class, even one defined again since).

    Returns
    -------
    estimator
    """
    where = "a stored estimator"
    try:
        tensors = {
            name: torch.from_numpy(np.array(array, copy=True))
            for name, array in _mapping(portable["tensors"]).items()
        }
        text = portable["header"]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{where} is not in the form to_portable gives ({error}).") from error
    header = _check_header(text, tensors, where)
    return _restore(header, tensors, expected, where, cls=cls)


# ----------------------------------------------------------------- loading
def load(path: str | bytes | os.PathLike, *, expected: type | None = None) -> Any:
    """Read an estimator written by :meth:`~sklearn_rnn.RNNClassifier.save`.

    Loading parses JSON and copies tensor bytes; it never runs code from the file.
    A model trained on a GPU loads onto the GPU when PyTorch sees one (for
    ``device='auto'`` or ``'cuda'``) and onto the CPU otherwise, with a warning for a
    model whose ``device`` is 'cuda'.

    Parameters
    ----------
    path : str, bytes or path-like
        A file written by ``save``.
    expected : type, optional
        Raise unless the stored estimator is an instance of this class.

    Returns
    -------
    RNNClassifier, RNNRegressor, RNNStepClassifier or a registered subclass
        The fitted estimator: the same parameters, fitted attributes, weights,
        optimizer state, loss scaler and random generators, hence bit for bit the same
        predictions, and training continues exactly as it would have from the saved
        estimator.

    Raises
    ------
    ValueError
        The file is not a model file of format version 2 (files of version 1, written
        before the digest covered the header, are refused: they cannot be verified),
        was damaged or edited, is inconsistent, names a class that is not defined in
        this session or a cell that is not registered in it (import the module that
        calls ``sklearn_rnn.nn.register_cell`` first), or holds another estimator
        than ``expected``.
    TypeError
        ``path`` is no path: a file object, or the file's contents.
    FileNotFoundError
        No file is at ``path``.
    IsADirectoryError
        ``path`` is a folder.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import sklearn_rnn
    >>> X = [np.full((2, 1), v) for v in np.linspace(-1, 1, 20)]
    >>> y = np.where(np.linspace(-1, 1, 20) > 0, "up", "down")
    >>> clf = sklearn_rnn.RNNClassifier(hidden_size=4, max_iter=3, random_state=0)
    >>> clf = clf.fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     clf.save(os.path.join(folder, "model.safetensors"))
    ...     loaded = sklearn_rnn.load(os.path.join(folder, "model.safetensors"))
    >>> type(loaded).__name__, loaded.classes_.tolist()
    ('RNNClassifier', ['down', 'up'])
    """
    path = _path_of(path, "load")
    where = repr(path)
    header, tensors = _read(path, where)
    return _restore(header, tensors, expected, where)


def _path_of(path: Any, action: str) -> str:
    """``path`` as the str that ``open()`` reads it as (a bytes path decoded, ``~`` expanded), refusing
    what is no path by name: a file object, the bytes of a file (``load(f.read())``
    took them for a path and raised a FileNotFoundError of the whole file), ''."""
    if isinstance(path, (bytes, bytearray)) and (len(path) > 4096 or b"\0" in path):
        raise TypeError(
            f"cannot {action} a model: got {len(path)} bytes, the contents of a file rather "
            "than its path. Pass the path of the file (a str or pathlib.Path); to keep a model "
            "in memory, use pickle.dumps (from a trusted source only)."
        )
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(
            f"cannot {action} a model with {type(path).__name__}: expected the path of a file "
            "(a str, bytes or pathlib.Path); model files are written and read by path, not "
            "through file objects. Save to a path, or pickle the estimator into the stream."
        )
    path = os.fsdecode(path)
    if not path:
        raise FileNotFoundError(errno.ENOENT, f"cannot {action} a model: the path is empty", path)
    return os.path.expanduser(path)  # '~/model.safetensors': the home folder, as pandas reads it


def _restore(
    header: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    expected: type | None,
    where: str,
    cls: type | None = None,
) -> Any:
    """The estimator of a verified header and its tensors."""
    name = header["estimator"]
    if cls is None or not isinstance(name, str) or class_key(cls) != name:
        cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        module = name.split(":")[0] if isinstance(name, str) and ":" in name else None
        hint = (
            f"it is defined in module {module!r}: import that module (or define the class) "
            "before loading."
            if module
            else f"expected one of {sorted(k for k in _REGISTRY if ':' not in k)}."
        )
        raise ValueError(f"{where} holds an estimator of unknown class {name!r}: {hint}")
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(
            f"{where} holds a {cls.__name__}, not a {expected.__name__}: load it with "
            f"{cls.__name__}.load or sklearn_rnn.load."
        )
    try:
        params = {key: _decode(value) for key, value in _mapping(header["params"]).items()}
        state = {key: _decode(value) for key, value in _mapping(header["state"]).items()}
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, RecursionError) as error:
        raise ValueError(f"{where} holds values this format does not know ({error}).") from error
    newer = _newer_writer(header)
    _check_state(state, where, newer)
    taken = set(cls._get_param_names())
    if not set(params) <= taken:
        extra = sorted(set(params) - taken)
        if not cls.__module__.startswith("sklearn_rnn."):  # a user's class: its code changed
            raise ValueError(
                f"{where} holds parameters {extra} that {class_key(cls)} in this session does not "
                "take, which it took when the file was written: load it with the code that saved "
                "it, or give the class those parameters again."
            )
        raise ValueError(
            f"{where} holds parameters {extra} that this sklearn_rnn's "
            f"{cls.__name__} does not take{newer}"
        )
    try:
        # A model loaded inside torch.inference_mode() is trained later: its network,
        # weights and optimizer state must be ordinary tensors, not inference tensors
        # (partial_fit failed, and then its rollback too).
        with torch.inference_mode(False):
            tensors = {key: tensor.clone() if tensor.is_inference() else tensor
                       for key, tensor in tensors.items()}
            return cls._from_fitted_state(params, state, tensors, where)
    except (KeyError, TypeError, IndexError, AttributeError, RuntimeError, OverflowError) as error:
        raise ValueError(
            f"{where} is inconsistent ({type(error).__name__}: {error}): its parameters, "
            "state and tensors do not describe one model. Save the model again."
        ) from error


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _version() -> str:
    """This sklearn_rnn's version, read from the package (which imports this module)."""
    return str(getattr(sys.modules.get(__package__ or "sklearn_rnn"), "__version__", "unknown"))


def _newer_writer(header: dict[str, Any]) -> str:
    """The end of the message for fields or parameters this version does not know: a
    newer sklearn_rnn's file (named when the header names its writer), or an edit."""
    writer = header.get(WRITER_KEY)
    wrote = f"sklearn_rnn {writer} wrote it" if writer else "it names no writer (older files do not)"
    return (
        f": {wrote}, and this is sklearn_rnn {_version()}. A file of a newer sklearn_rnn loads "
        "with that version or later (upgrade sklearn_rnn); otherwise the file was edited."
    )


def _check_state(state: dict[str, Any], where: str, newer: str) -> None:
    for name, (required, check, kind) in STATE_SCHEMA.items():
        if name not in state:
            if required and name in _FIRST_FILES_LACK:
                raise ValueError(
                    f"{where} lacks the fitted state field {name!r}: it was written by a "
                    "development version of format 2 from before 2026-11-24, whose networks "
                    "this version does not rebuild (their layers were laid out otherwise). "
                    "Refit the model with this version, and save it again."
                )
            if required:
                raise ValueError(f"{where} lacks the fitted state field {name!r}: save the model again.")
            continue
        try:  # a crafted value may break a check itself (an unhashable list, an array)
            fits = bool(check(state[name]))
        except Exception:
            fits = False
        if not fits:
            raise ValueError(
                f"{where} holds fitted state {name!r} = {_short(state[name])}: expected {kind}. "
                "The file is inconsistent; save the model again."
            )
    unknown = set(state) - set(STATE_SCHEMA)
    if unknown:
        raise ValueError(
            f"{where} holds fitted state fields {sorted(unknown)} that model format "
            f"{FORMAT_VERSION} does not have in this sklearn_rnn{newer}"
        )
    names = state.get("feature_names_in_")
    if names is not None and len(names) != state["n_features_in_"]:
        raise ValueError(
            f"{where} names {len(names)} features (feature_names_in_) for a model of "
            f"n_features_in_ = {state['n_features_in_']}. The file is inconsistent; save the "
            "model again."
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _zip_kind(path: str) -> str:
    """What wrote the zip file at ``path``, and how it loads, for :func:`_read`'s refusal."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        names = []
    if "schema.json" in names:  # skops' archive (a pipeline, say)
        return ("as skops.io.dump writes, not a model file of the save method: load it with "
                "skops.io.load(path, trusted=skops.io.get_untrusted_types(file=path)) after "
                "reading the types it lists.")
    if any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        return ("as torch.save writes, not a model file of the save method: an estimator saved "
                "so loads with torch.load(path, weights_only=False) (only from a trusted source: "
                "it runs a pickle); save it with its save method to get a model file.")
    if names and all(name.endswith(".npy") for name in names):
        return ("as numpy.savez writes (arrays), not a model file of the save method: expected "
                "the path given to an sklearn_rnn estimator's save.")
    return ("not a model file of the save method, which writes a safetensors file: expected "
            "the path given to an sklearn_rnn estimator's save.")


def _read(path: str, where: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    not_a_model = (
        "expected a model file written by the save method of an sklearn_rnn estimator. A "
        "pickle or joblib file loads with pickle.load or joblib.load (only from a trusted "
        "source: loading a pickle runs code)."
    )
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"cannot load {where}: it is a folder. Give the path of a model file inside it, "
            f"e.g. os.path.join({where}, 'model.safetensors')."
        )
    try:
        with safe_open(os.fspath(path), framework="pt", device="cpu") as handle:
            metadata = handle.metadata() or {}
            # Copies: the tensors read map the file, and a loaded optimizer keeps its state
            # tensors as given (a file cut in place afterwards killed the process with a
            # bus error; another file copied over it changed the Adam moments).
            tensors = {key: handle.get_tensor(key).clone() for key in handle.keys()}
    except FileNotFoundError:
        # safetensors says so of any file it cannot open: the real reason, where there is one
        # (no permission to read it, a loop of links, a name too long, a file as a folder).
        try:
            with open(path, "rb"):
                pass
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, f"cannot load {where}: no such file", path) from None
        except OSError as error:
            raise type(error)(error.errno, f"cannot load {where}: {error.strerror}", path) from None
        raise ValueError(f"{where} could not be opened as a model file: {not_a_model}") from None
    except Exception as error:  # safetensors' own errors, OSError, a bad header's errors
        try:
            empty = os.path.getsize(path) == 0
        except OSError:
            empty = False
        if empty:  # "header too small", and advice on pickles
            raise ValueError(
                f"{where} is empty (0 bytes): the save or copy that wrote it did not finish, or it "
                "was created empty. Save or copy the model again."
            ) from error
        if _starts_with(path, b"PK\x03\x04"):  # a zip: skops.io.dump's, torch.save's, numpy.savez's
            raise ValueError(f"{where} is a zip file, {_zip_kind(path)}") from error
        if _damaged_safetensors(path):
            raise ValueError(
                f"{where} is a damaged model file ({error}): its header is a model file's, but the "
                "rest does not match it (cut short by an interrupted copy or download, or extended). "
                "Copy or save the model again."
            ) from error
        raise ValueError(f"{where} is not a readable model file ({error}): {not_a_model}") from error
    if FORMAT not in metadata:
        raise ValueError(f"{where} is a safetensors file without sklearn_rnn metadata: {not_a_model}")
    if set(metadata) != {FORMAT}:
        raise ValueError(
            f"{where} holds metadata {sorted(set(metadata) - {FORMAT})} besides the model's, "
            "which no digest covers: the file was edited; save the model again."
        )
    return _check_header(metadata[FORMAT], tensors, where), tensors


def _damaged_safetensors(path: str) -> bool:
    """Whether the file at ``path`` opens as a safetensors file does (an 8-byte header
    length, then a JSON header naming this package's format) though safetensors refused it:
    a model file cut short or extended."""
    try:
        with open(path, "rb") as file:
            length = int.from_bytes(file.read(8), "little")
            if not 2 <= length <= 100_000_000:
                return False
            header = file.read(min(length, 1_000_000))
    except OSError:
        return False
    return header.startswith(b"{") and FORMAT.encode() in header


def _starts_with(path: str, magic: bytes) -> bool:
    """Whether the file at ``path`` starts with the bytes ``magic`` (False if unreadable)."""
    try:
        with open(path, "rb") as file:
            return file.read(len(magic)) == magic
    except OSError:
        return False


def _check_header(text: Any, tensors: dict[str, torch.Tensor], where: str) -> dict[str, Any]:
    """The header of JSON ``text``, checked: format, version, keys and digest."""
    try:
        header = json.loads(text)
    except (TypeError, ValueError, RecursionError) as error:  # RecursionError: crafted nesting
        raise ValueError(f"{where} has damaged metadata ({error}): save the model again.") from error
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(
            f"{where} has metadata of another format: expected a model written by the save "
            "method of an sklearn_rnn estimator."
        )
    version = header.get("format_version")
    if _is_int(version) and version == 1:  # not True, which equals 1
        raise ValueError(
            f"{where} is a model file of format version 1, whose digest covered only the "
            "tensors, so its header cannot be verified; this sklearn_rnn reads format "
            f"version {FORMAT_VERSION} only. Refit the model, or load the file with the "
            "sklearn_rnn that wrote it and move the model over by pickle (from a trusted "
            "source), then save it again."
        )
    if not _is_int(version) or version != FORMAT_VERSION:
        newer = _is_int(version) and version > FORMAT_VERSION
        raise ValueError(
            f"{where} uses model format version {version!r}, but this sklearn_rnn reads "
            f"version {FORMAT_VERSION}"
            + (": upgrade sklearn_rnn to load it." if newer else ": the file is damaged.")
        )
    if not HEADER_KEYS <= set(header) or not isinstance(header.get(WRITER_KEY, ""), str):
        raise ValueError(
            f"{where} has a header with keys {sorted(header)}: expected {sorted(HEADER_KEYS)}. "
            "The file is damaged or edited; save the model again."
        )
    if _digest(header, tensors) != header["sha256"]:
        raise ValueError(
            f"{where} was damaged or edited after it was saved: its header and tensors do "
            "not match the digest stored with them. Save the model again from its source."
        )
    unknown = set(header) - HEADER_KEYS - {WRITER_KEY}
    if unknown:  # covered by the digest: a newer writer's, or an edit
        raise ValueError(
            f"{where} has header keys {sorted(unknown)} that model format {FORMAT_VERSION} does "
            f"not have in this sklearn_rnn{_newer_writer(header)}"
        )
    return header


def _digest(header: dict[str, Any], tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of the header (without its digest, as canonical JSON) and the tensors."""
    digest = hashlib.sha256()
    body = {key: value for key, value in header.items() if key != "sha256"}
    digest.update(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    digest.update(b"\0")
    for name in sorted(tensors):
        tensor = tensors[name]
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(_tensor_bytes(tensor))
    return digest.hexdigest()


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The tensor's values as bytes in row-major order, whatever its strides."""
    flat = tensor.detach().cpu().reshape(-1).clone()  # a fresh dense copy
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


# ------------------------------------------------------------- JSON values
def _encode(value: Any, what: str) -> Any:
    """A JSON-ready form of ``value``; kinds other than plain values carry a tag."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return _encode(value.item(), what)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufUO":
            raise TypeError(
                f"{what} is an array of dtype {value.dtype}, which save() cannot store: keep this "
                "model with pickle/joblib, or fit it with labels or values of numbers or strings."
            )
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
        if dtype.kind not in "biufUO":
            raise ValueError(f"arrays of dtype {dtype} are not stored")
        items = [_decode(item) for item in value["items"]]
        shape = [int(size) for size in value["shape"]]
        if math.prod(shape) != len(items):
            raise ValueError(f"an array of shape {shape} with {len(items)} items")
        if dtype.kind == "U":  # its width is the file's word: bound it by what its items need
            longest = max((len(item) for item in items if isinstance(item, str)), default=0)
            if dtype.itemsize * len(items) > 4 * max(longest, 1) * len(items) + 2**20:
                raise ValueError(f"an array of dtype {dtype} for items of at most {longest} characters")
        array = np.empty(len(items), dtype=dtype)
        array[:] = items if dtype != object else _object_items(items)
        return array.reshape(shape)
    if kind == "tuple":
        return tuple(_decode(item) for item in value["items"])
    if kind == "dict":
        return {_hashable(_decode(key)): _decode(item) for key, item in value["pairs"]}
    if kind == "random_state":
        random_state = np.random.RandomState()
        random_state.set_state(_decode(value["state"]))
        return random_state
    raise ValueError(f"a value of unknown kind {kind!r}")


def _object_items(items: list[Any]) -> np.ndarray:
    holder = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        holder[index] = item
    return holder


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
