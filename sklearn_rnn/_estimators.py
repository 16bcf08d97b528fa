"""scikit-learn estimators around a skorch training engine."""

from __future__ import annotations

import copy
import functools
import logging
import math
import os
import re
import types
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterator
import warnings
from numbers import Integral, Real
from typing import Any, NamedTuple, TypeVar

import numpy as np
import torch
from sklearn import config_context, get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state, column_or_1d
from sklearn.utils._metadata_requests import SIMPLE_METHODS
from sklearn.utils._param_validation import Interval, StrOptions, validate_parameter_constraints
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted
from skorch.callbacks import Callback

from ._callbacks import TrainingOutcome, noting_interrupts, still_improving
from ._engine import (PRECISIONS, Rollback, SequenceNet, TrainingSettings, callbacks_current, configure,
                      copy_callback, gradient_mode, make_grad_scaler, make_net, mark_callbacks_current,
                      resume_best_scores)
from ._engine import SequenceNet as _SequenceNet  # noqa: F401  (its former name, as tests read it)
from ._engine import _History  # noqa: F401  (importable from here, as before)
from ._gathered import outside_stacklevel, warn
from ._inference import HOOK_KINDS, LAST_STEP, OutputSteps, module_copy, run_network
from .nn import RecurrentNetwork
from .nn._network import HIDDEN_INITS, READOUTS
from .nn.cells import CellNames, cell_names, get_cell, resolve_cell
from .nn.cells._base import (
    _cell_identity,
    _identity_text,
    _recorded_identity,
    _registration_change,
    _replaced_package_cell,
    _same_identity,
)
from .optim import BRANCHES, ClippedSGD, SimplexSGD
from ._parallel import with_fit_threads
from ._persistence import from_portable, to_portable
from ._persistence import load as load_model
from ._persistence import register as register_model_class
from ._persistence import save as save_model
from .sequences import InputEncoder, SequenceDataset, check_float32_range
from .sequences._encoding import (
    TIME_FEATURE_CONSTRAINTS,
    _resolve_time_feature,
    check_times,
    same_time,
    step_gaps,
)
from .sequences._panel import (
    check_step_targets_follow_steps,
    check_targets_follow_instances,
    integer_overflow,
    is_panel,
    long_table_hint,
)
from .sequences._validation import (
    _refuse_dates,
    batch_first_swap,
    check_holdout,
    dates_dtype,
    fitted_step_names,
    joined_steps,
    readable_targets,
    staging,
    validate_sequences,
)

__all__ = ["BaseRNN", "RNNClassifier", "RNNRegressor"]

logger = logging.getLogger(__name__)

#: Values (steps times features) that prediction encodes at a time, 32 MB in float64:
#: memory beyond the validated input stays bounded however long or many the sequences.
PREDICT_CHUNK_VALUES = 2**22

#: Prediction's batches hold at most this many padded steps per valid step: a sequence
#: far longer than the others runs in a batch of its own instead of padding a whole
#: batch to its length (the outputs do not depend on the batches).
PREDICT_MAX_PADDING = 2.0

#: ``frame='auto'`` frames raw steps so that the median training sequence is read in at
#: most this many recurrent steps (see :func:`frame_sequences`).
AUTO_FRAME_STEPS = 128

#: ``conv_kernels='auto'``: the kernel widths of the convolutional input stage for
#: untimed sequences with one target each (chosen with ``benchmarks/bench_defaults.py``).
AUTO_CONV_KERNELS: tuple[int, ...] = (3, 9)

#: ``conv_kernels='auto'`` uses the stage when the median training sequence (after
#: framing) holds the widest kernel at least this many times: on shorter sequences most
#: windows reach past a sequence's ends (18 steps with the widths above).
AUTO_CONV_MIN_SPANS = 2

#: ``conv_pool='auto'``: the stage's features are max-pooled over this many steps when
#: the median training sequence (after framing) has at least ``AUTO_CONV_POOL_MIN_STEPS``
#: steps, so that the recurrence still runs over at least 32 of them (chosen with
#: ``benchmarks/bench_defaults.py``: half the steps, faster fits and better accuracy on
#: the real sets of 76-333 steps; lower accuracy on the synthetic tasks of 40-52 steps,
#: whose label sits in one early step).
AUTO_CONV_POOL = 2
AUTO_CONV_POOL_MIN_STEPS = 64

#: ``instance_norm='auto'`` reads a channel per sequence when the median training
#: sequence's standard deviation of it is below this share of its standard deviation
#: over all steps (see :meth:`~sklearn_rnn.sequences.InputEncoder.nearly_flat_channels`):
#: sequences whose amplitudes differ by orders of magnitude, most of them nearly flat at
#: a shared scale (PLAID's median series has 0.0035 of it; every other set of the
#: defaults study 0.36 or more).
AUTO_INSTANCE_NORM_RATIO = 0.1

#: ``tol='auto'``: the smallest improvement of the monitored loss that counts, for untimed
#: sequences with one target each and the 'adam' or 'sgd' optimizer (the defaults study's
#: stopping rule: ``benchmarks/bench_defaults.py``, variant ``tol1e-4`` for the finer one);
#: ``AUTO_TOL_OTHERWISE`` with ``time_feature``, per-step targets, 'simplex' and in the
#: thesis' configuration.
AUTO_TOL = 3e-3
AUTO_TOL_OTHERWISE = 1e-4

#: ``label_smoothing='auto'`` of :class:`RNNClassifier`: the share of each target spread
#: evenly over the classes with the 'adam' or 'sgd' optimizer, timed input included (the
#: defaults study: ``benchmarks/bench_defaults.py``, variant ``ls0`` for none); none with
#: 'simplex' and in the thesis' configuration, whose loss is the plain cross-entropy.
AUTO_LABEL_SMOOTHING = 0.1

#: ``early_stopping='auto'`` holds out ``validation_fraction`` from this many training
#: sequences on (a validation set of at least 20 at the default fraction).
AUTO_HOLDOUT_MIN = 200


def _moments(values: np.ndarray, weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The mean and standard deviation of ``values`` ``(n, k)`` per column, weighted by
    the sequences' sample weights (a sequence of weight 0 does not count); equal
    weights give the unweighted moments, computed as such."""
    if weight is None or bool((weight == weight[0]).all()):
        return values.mean(axis=0), values.std(axis=0)
    weight = weight / weight.max()  # a sum of large weights could overflow; only ratios count
    mean = np.average(values, axis=0, weights=weight)
    return mean, np.sqrt(np.average((values - mean) ** 2, axis=0, weights=weight))


def _relative(weight: np.ndarray, terms: np.ndarray | None = None) -> np.ndarray:
    """A fit's sequence weights scaled to a mean of 1 per loss term: the loss, a mean
    over a batch's terms, is then the weighted mean in expectation, the same for weights
    scaled by any constant (the stopping rule's ``tol`` and plain SGD's step are for
    losses of this scale). ``terms`` counts each sequence's loss terms (its steps, for a
    loss at every step; one each when None). Weights of 1 stay exactly 1.
    ``partial_fit`` keeps a call's weights as given, so that they weigh calls against
    each other, as in scikit-learn's ``partial_fit`` estimators."""
    weight = weight / weight.max()  # first: a mean of large weights could overflow
    if terms is None:
        return weight / weight.mean()
    return weight / np.average(weight, weights=terms)


#: What the stopping rule's monitored records are called in messages.
_LOSS_NAMES = {"valid_loss": "validation loss", "train_loss": "training loss",
               "train_objective": "training objective (the loss plus the L2 penalty)"}


def _wrong_outputs(given: int, fitted: int, per: str) -> str:
    """The message for targets of ``given`` outputs (``per`` step, or "") where the
    fitted model has ``fitted``: in scoring, ``partial_fit`` or a warm fit alike."""
    return (
        f"y has {given} outputs{per}, but the fitted model has {fitted}: scoring it and "
        f"training it further (partial_fit, warm_start=True) take targets of {fitted} "
        f"outputs. Pass those, or fit a new model on {given} (warm_start=False)."
    )


def _warn_of_simultaneous_steps(sequences: list[np.ndarray], time_column: int | None, cell: str) -> None:
    """Warn when steps share the time of the step before: a cell that moves its state by
    ``1 - exp(-rate * gap)`` does not move it at all at a gap of 0, so such a step's
    values do not reach the prediction."""
    if time_column is None:  # refused with the network, which needs the gaps
        return
    times = np.concatenate([sequence[:, time_column] for sequence in sequences])
    lengths = np.array([len(sequence) for sequence in sequences])
    # Steps at the time of the one before, up to rounding (gaps of 1e-16 leave the state as still).
    same = int(same_time(times, step_gaps(times, lengths), lengths).sum()) - len(sequences)  # not first steps
    if same:
        steps = sum(len(sequence) for sequence in sequences)
        warnings.warn(
            f"{same} of the {steps} training steps share the time of the step before. The "
            f"{cell!r} cell moves its state by 1 - exp(-rate * gap), so at a gap of 0 it does "
            "not move, and such a step's values do not reach the predictions. Merge the "
            "steps of one time first (e.g. average the rows of one (id, time) in the long "
            "table), or use cell='gru', which reads the gap as an input.",
            UserWarning,
            stacklevel=7,  # fit's caller, past _prepare, _fit, the thread rule and sklearn's wrapper
        )


def _check_float32_weights(weight: np.ndarray, class_weight: Any = None) -> None:
    """Refuse ``partial_fit`` weights that float32, in which they are trained, turns into
    infinities (a loss of inf: the call is undone) or zeros (nothing is learned)."""
    largest = np.finfo(np.float32).max
    product = " (sample_weight times class_weight)" if class_weight is not None else ""
    if weight.max() > largest:
        raise ValueError(
            f"sample_weight holds {weight.max():g}{product}, beyond float32's range (at most "
            f"{largest:.3g}), in which partial_fit trains its weights as given. Scale the "
            "weights of every call by one constant (only their ratios between calls count)."
        )
    if not np.float32(weight).any():
        raise ValueError(
            f"sample_weight's largest value, {weight.max():g}{product}, is 0 in float32, in which "
            "partial_fit trains its weights as given: nothing would be learned. Scale the "
            "weights of every call by one constant (only their ratios between calls count)."
        )


def _clone_sharing(callback: Any) -> Any:
    """A clone of a skorch callback, as :func:`~sklearn.base.clone` makes one, sharing the
    parameters that cannot be copied (an open file)."""
    if not hasattr(callback, "get_params"):
        return copy.deepcopy(callback)
    params = {}
    for name, value in callback.get_params(deep=False).items():
        try:
            params[name] = clone(value, safe=False)
        except (TypeError, copy.Error):
            params[name] = value  # shared, as fit shares it
    return type(callback)(**params)


def _chunks(sizes: list[int], budget: int) -> list[tuple[int, int]]:
    """``(start, stop)`` ranges of consecutive items whose sizes add up to at most
    ``budget``, or of one item larger than it.

    >>> _chunks([3, 3, 3, 10, 1], 6)
    [(0, 2), (2, 3), (3, 4), (4, 5)]
    """
    ranges, start, total = [], 0, 0
    for index, size in enumerate(sizes):
        if index > start and total + size > budget:
            ranges.append((start, index))
            start, total = index, 0
        total += size
    if sizes:
        ranges.append((start, len(sizes)))
    return ranges


def frame_sequences(sequences: list[np.ndarray], frame: int) -> list[np.ndarray]:
    """Group every ``frame`` consecutive steps into one step of ``frame * d`` features.

    A sequence of ``T`` steps of ``d`` features becomes ``ceil(T / frame)`` steps of
    ``frame * d`` features (step ``t`` of a frame in columns ``t * d`` to
    ``(t + 1) * d``); a last, incomplete frame repeats the sequence's last step. The
    recurrence then runs ``frame`` times fewer steps, which is what makes a recurrent
    network affordable, and trainable, on sequences of hundreds to thousands of steps.

    Parameters
    ----------
    sequences : list of ndarray of shape (T_i, d)
    frame : int
        Raw steps per frame; 1 returns ``sequences`` unchanged.

    Returns
    -------
    list of ndarray of shape (ceil(T_i / frame), frame * d)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn._estimators import frame_sequences
    >>> frame_sequences([np.arange(5.0).reshape(5, 1)], 2)[0]
    array([[0., 1.],
           [2., 3.],
           [4., 4.]])
    """
    if frame == 1:
        return sequences
    framed = []
    for sequence in sequences:
        missing = -len(sequence) % frame
        if missing:
            sequence = np.concatenate([sequence, np.repeat(sequence[-1:], missing, axis=0)])
        framed.append(sequence.reshape(len(sequence) // frame, frame * sequence.shape[1]))
    return framed

OPTIMIZERS = ("sgd", "adam", "simplex")

#: The parameters that shape a fitted network or its optimizer (what
#: ``BaseRNN._check_continuation`` compares with the network).
_SHAPING_PARAMS = (
    "hidden_size", "cell", "num_layers", "dropout", "hidden_init", "spectral_radius",
    "time_feature", "frame", "instance_norm", "readout", "conv_kernels", "conv_channels", "conv_pool",
    "bidirectional", "optimizer", "device",
)

class _Seeds(NamedTuple):
    """Seeds of every random draw of one call to ``fit``, drawn together from
    ``random_state`` so that changing one setting (say, the optimizer) does not shift
    the others' streams."""

    init: int
    split: int
    shuffle: int
    optimizer: int

    @classmethod
    def draw(cls, random_state: Any) -> _Seeds:
        if isinstance(random_state, Integral) and not isinstance(random_state, bool):
            return _seeds_of_int(int(random_state))
        return cls.from_generator(check_random_state(random_state))

    @classmethod
    def from_generator(cls, generator: np.random.RandomState) -> _Seeds:
        values = generator.randint(np.iinfo(np.int32).max, size=4)
        return cls(*(int(value) for value in values))


def _class_indices(classes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The index of each label of ``y`` in the sorted ``classes`` (what
    ``LabelEncoder.transform`` returns), -1 for a label that is not among them: one
    binary search over the classes, for labels of any comparable type."""
    if (
        y.dtype.kind in "iu" and classes.dtype.kind in "iu" and len(classes) and len(y)
        and classes[0] == 0 and classes[-1] == len(classes) - 1
    ):
        # The classes are 0, ..., k - 1 (sorted and unique): a label in that range is
        # its own index, found with two reductions instead of a search (a streaming
        # partial_fit encodes its labels on every call).
        if y.min() >= 0 and y.max() < len(classes):
            # Contiguous: a reversed view (y[::-1]) has a negative stride, which torch refuses.
            return np.ascontiguousarray(y, dtype=np.intp)
    try:
        index = np.searchsorted(classes, y).clip(max=len(classes) - 1)
        known = np.asarray(classes[index] == y, dtype=bool)
    except TypeError:  # labels that do not compare with the classes' type
        return np.full(len(y), -1, dtype=np.intp)
    return np.where(known, index, -1)


def _check_class_weight_values(class_weight: dict) -> None:
    """Refuse class weights that are not finite non-negative numbers."""
    for label, value in class_weight.items():
        number = isinstance(value, Real) and not isinstance(value, bool)
        if not number or not np.isfinite(value) or value < 0:
            raise ValueError(
                f"class_weight[{label!r}] is {value!r}: expected a finite non-negative "
                "number for every class (a negative weight would maximize that class' "
                "loss, NaN would spoil training). Pass weights such as {label: 2.0}, or "
                "class_weight='balanced'."
            )


def _check_no_missing_labels(y: np.ndarray) -> None:
    """Refuse missing class labels (None, NaN, pandas' NA), naming the first sequence:
    scikit-learn's checks say only "Input y contains NaN", or fail to sort None."""
    import pandas as pd

    missing = np.asarray(pd.isna(y), dtype=bool)
    if missing.any():
        bad = np.flatnonzero(missing)
        raise ValueError(
            f"y holds a missing label ({y[bad[0]]}) for {len(bad)} of {len(y)} sequences "
            f"(first: sequence {bad[0]}): every sequence needs a class label. Drop those "
            "sequences from X and y together, or label them."
        )


def _checked_classes(classes: Any) -> np.ndarray:
    """The sorted unique labels of partial_fit's ``classes``, checked as ``y`` is: an
    array-like of labels of one kind, none missing."""
    if isinstance(classes, (str, bytes, set, frozenset, dict)):
        raise ValueError(
            f"classes={classes!r} is a {type(classes).__name__}: expected an array-like of "
            "the labels y may hold, e.g. classes=np.unique(y_all)."
        )
    labels = np.asarray(classes)
    if labels.ndim != 1:
        raise ValueError(
            f"classes has shape {labels.shape}: expected a 1-D array-like of the labels y "
            "may hold, e.g. classes=np.unique(y_all)."
        )
    import pandas as pd

    missing = np.asarray(pd.isna(labels), dtype=bool)
    if missing.any():
        raise ValueError(
            f"classes={labels.tolist()} holds a missing label ({labels[missing][0]}): a class "
            "that no sequence can carry would still take a share of predict_proba. Name only "
            "the labels y may hold, e.g. classes=np.unique(y_all)."
        )
    # Read as objects: numpy's own reading turns ['a', 1] into the strings 'a', '1'.
    as_given = np.asarray(classes, dtype=object) if not isinstance(classes, np.ndarray) else labels
    kinds = {"string" if isinstance(label, str) else "number" for label in as_given.tolist()}
    if len(kinds) > 1:
        raise ValueError(
            f"classes={as_given.tolist()} mixes strings and numbers: expected labels of one "
            "kind, as y holds them (1 and '1' are different labels)."
        )
    return np.unique(labels)


def _each_class_on_both_sides(
    train: np.ndarray, valid: np.ndarray, pool: np.ndarray, stratify: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A stratified split's sides with one sequence of each class on each: a class whose
    share of the held-out sequences rounds to 0 (2 of 42 at 10%) gets its first training
    sequence moved there, as the hold-out check promises (the stopping rule and the
    validation scores ignored that class, the one class_weight='balanced' weighs most);
    and the other way round. Every class has at least 2 sequences (checked before)."""
    classes = dict(zip(np.asarray(pool).tolist(), np.asarray(stratify).tolist()))
    train, valid = list(np.asarray(train).tolist()), list(np.asarray(valid).tolist())
    for label in dict.fromkeys(classes.values()):
        for source, target in ((train, valid), (valid, train)):
            if not any(classes[index] == label for index in target):
                moved = next(index for index in source if classes[index] == label)
                source.remove(moved)
                target.append(moved)
    return np.asarray(train), np.asarray(valid)


def _warn_of_target_in_table(X: Any, y: Any) -> None:
    """Warn of a column of a table ``X`` (a DataFrame read one sequence per row) that
    equals the targets ``y`` row for row: a target left in the features, which the
    network reads as a step (cross-validated accuracy 1.0 where it was 0.55)."""
    if not (hasattr(X, "columns") and getattr(X, "ndim", None) == 2 and len(X) > 1):
        return
    if is_panel(X):
        return
    try:
        targets = np.asarray(y)
        if targets.ndim != 1 or len(targets) != len(X):
            return
        equal = [name for name in X.columns if np.array_equal(np.asarray(X[name]), targets)]
    except (TypeError, ValueError):
        return
    if equal:
        warnings.warn(
            f"column {equal[0]!r} of X equals y in every row: a target left in the features is "
            "read as one of the steps, and the model learns it rather than the sequences. Drop "
            f"it first: X.drop(columns=[{equal[0]!r}]).",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )


def _one_sequence_hint(X: Any, n_samples: int, targets: str) -> str:
    """For one target beside a 2D ``X`` (read as a table of ``n_samples`` univariate
    sequences): the sentence saying how to pass one ``(T, d)`` sequence instead, with its
    target as ``targets`` shows it; empty for any other ``X``."""
    if getattr(X, "ndim", None) != 2:
        return ""
    return (f" X has shape {np.shape(X)}, a table of {n_samples} univariate sequences of "
            f"{np.shape(X)[1]} steps: for one sequence of {np.shape(X)[0]} steps, pass [X] and {targets}.")


def _n_targets(y: Any) -> int:
    return len(y) if hasattr(y, "__len__") else len(np.asarray(y))


@functools.cache
def _has_fused_adam(device_type: str) -> bool:
    """Whether this PyTorch runs :class:`torch.optim.Adam` with ``fused=True`` on
    ``device_type`` (CUDA; the CPU from torch 2.4, before which it raises)."""
    try:
        torch.optim.Adam([torch.zeros(1, device=device_type, requires_grad=True)], fused=True)
    except (RuntimeError, ValueError):
        return False
    return True


def _optional_float(value: Any) -> float | None:
    """A numeric parameter as a Python float (None stays None)."""
    return None if value is None else float(value)


@functools.lru_cache(maxsize=64)
def _seeds_of_int(seed: int) -> _Seeds:
    """``_Seeds.draw`` of an integer ``random_state``, the same every call: seeding a
    RandomState (about 0.1 ms) was a noticeable part of a streaming partial_fit."""
    return _Seeds.from_generator(check_random_state(seed))


@functools.lru_cache(maxsize=64)
def _seed_sequence(seed: int) -> np.random.SeedSequence:
    """``SeedSequence(seed)``, hashed once per seed (nothing here spawns from it)."""
    return np.random.SeedSequence(seed)


def _first_text(values: Any) -> str | None:
    """The first string among ``values`` (an array-like of targets) that is not a
    number, or None."""
    try:
        flat = np.asarray(values, dtype=object).ravel()
    except ValueError:  # ragged: not text that made the conversion fail
        return None
    for value in flat:
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                return value
    return None


def _target_moments(outputs: np.ndarray, weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weighted mean and spread of each target column, ``(n_outputs,)`` each, and
    whether it has no spread (scale 1 then). Targets near float64's limits are taken
    scaled by their largest (squared, 1e200 is inf and 1e-200 is 0). A spread within the
    rounding of the mean is none (scikit-learn's bound for a constant feature): thirty
    targets of 0.1 have a mean off 0.1 by 1.4e-17 and a "spread" of 2.8e-17, which made a
    stream's later targets 1e16 (unlearnable)."""
    magnitude = np.abs(outputs).max(axis=0)
    magnitude = np.where(magnitude > 0, magnitude, 1.0)
    if ((magnitude > 1e100) | (magnitude < 1e-100)).any():
        mean, std = _moments(outputs / magnitude, weight)
        mean, std = mean * magnitude, std * magnitude
    else:
        mean, std = _moments(outputs, weight)
    rounding = len(outputs) * np.finfo(np.float64).eps * np.abs(mean)
    return mean, std, ~(std > rounding)


def _refuse_missing(values: Any, name: str, what: str) -> None:
    """Refuse NaN among numbers given one per sequence (masked entries read as missing,
    :func:`~sklearn_rnn.sequences._validation.readable_targets`), naming how many and the
    first; anything that is not numbers is left to the checks that follow."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return
    missing = np.isnan(array).reshape(len(array), -1).any(axis=1) if array.ndim else np.isnan(array)[None]
    if missing.any():
        raise ValueError(
            f"{name} holds a missing {what} (NaN, or a masked entry) for {int(missing.sum())} of "
            f"{len(missing)} sequences (first: sequence {int(np.flatnonzero(missing)[0])}): expected a "
            f"{what} for every sequence. Drop those sequences from X and {name} together, or fill them in."
        )


def _check_one_target_per_sequence(y: Any, estimator: Any) -> None:
    """Refuse targets given as one array per sequence, of different lengths (per-step
    targets, or an array among labels): numpy's conversion says only that the shape is
    inhomogeneous. Equal lengths are a 2D ``y``, which the estimators explain."""
    if getattr(y, "dtype", object) != object or type(y).__name__ == "DataFrame":
        return  # numbers (an array, a Series), or a table of outputs
    sized = [hasattr(target, "__len__") and not isinstance(target, (str, bytes))
             and getattr(target, "ndim", 1) != 0 for target in y]  # a 0-d array is one value
    if not any(sized):
        return
    lengths = [len(target) if is_sized else 1 for target, is_sized in zip(y, sized)]
    if all(sized) and len(set(lengths)) == 1:
        return
    name = type(estimator).__name__
    shown = ", ".join(map(str, lengths[:6])) + (", ..." if len(lengths) > 6 else "")
    if isinstance(estimator, ClassifierMixin):
        fix = ("For binary labels at every step, use RNNStepClassifier (y a list of one (T_i, k) "
               "array per sequence); else pass one label per sequence, y of shape (n_samples,).")
    else:
        fix = ("Pass one value per sequence, or the same number of outputs for each, y of shape "
               "(n_samples,) or (n_samples, n_outputs); for binary labels at every step, use "
               "RNNStepClassifier.")
    raise ValueError(
        f"y holds one array per sequence (lengths {shown}): {name} takes one target per "
        f"sequence. {fix}"
    )


def _shuffle_generator(seed: int, epochs: int = 0) -> np.random.Generator:
    """``numpy.random.default_rng(seed)``, the same stream, without hashing the seed
    again; after ``epochs`` epochs of a streaming ``partial_fit``, a stream of its own
    (``default_rng([seed, epochs])``), so that its calls do not repeat one another."""
    if epochs:
        return np.random.default_rng([seed, epochs])
    return np.random.Generator(np.random.PCG64(_seed_sequence(seed)))


def _partial_fit_context(partial_fit: Any) -> Any:
    """scikit-learn's ``_fit_context(prefer_skip_nested_validation=True)`` for
    ``partial_fit``, except that the parameters of a fitted estimator are validated too:
    scikit-learn validates them on the first call only, so a value set since
    (``set_params(learning_rate=-0.5)``) was trained with. One wrapper, as scikit-learn's,
    so that warnings' stack levels reach the caller as fit's do."""

    @functools.wraps(partial_fit)
    def wrapper(self: BaseRNN, *args: Any, **kwargs: Any) -> Any:
        self._validate_params_unless_skipped()
        with config_context(skip_parameter_validation=True):  # nested estimators' checks
            return partial_fit(self, *args, **kwargs)

    return wrapper


_Method = TypeVar("_Method", bound=Callable[..., Any])


def reads_one_model(method: _Method) -> _Method:
    """Run a prediction method on a view of the estimator that holds its attributes as
    the call begins.

    ``fit`` swaps its new state in whole (a new attribute dict) when it ends, so a fit
    ending in another thread during the call changes nothing the call reads: the
    network was read as the call began and ``classes_`` or the target scale after the
    forward pass, and a prediction mixed the two models (the old network's outputs on
    the new scale, or an IndexError on fewer classes). The view shares the dict, so
    what the call writes still reaches the estimator.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        view = object.__new__(type(self))
        view.__dict__ = self.__dict__  # the dict itself: one reading
        return method(view, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class BaseRNN(BaseEstimator, metaclass=ABCMeta):
    """Training logic shared by :class:`RNNClassifier` and :class:`RNNRegressor`.

    Subclasses define the loss, how targets are encoded and decoded, the validation
    score, and the output size. Not meant to be used directly.
    """

    #: Where the network is read out: :data:`~sklearn_rnn._inference.LAST_STEP` (one
    #: output, target and loss term per sequence) or ``EVERY_STEP`` (one ``(T_i, k)``
    #: target array per sequence, a loss at every step). The hook that the engine's
    #: loss, prediction, validation scoring and the diagnostics ask.
    _output_steps: OutputSteps = LAST_STEP

    _parameter_constraints: dict = {
        "hidden_size": [Interval(Integral, 1, None, closed="left")],
        "cell": [StrOptions(CellNames("auto"))],  # read from the registry at each check
        "time_feature": TIME_FEATURE_CONSTRAINTS,
        "frame": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "instance_norm": ["boolean", StrOptions({"auto"})],
        "readout": [StrOptions({"auto", *READOUTS})],
        "conv_kernels": [StrOptions({"auto"}), tuple, list, None],
        "conv_channels": [Interval(Integral, 1, None, closed="left")],
        "conv_pool": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "bidirectional": ["boolean"],
        "num_layers": [Interval(Integral, 1, None, closed="left")],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "hidden_init": [StrOptions(set(HIDDEN_INITS))],
        "spectral_radius": [Interval(Real, 0, None, closed="neither"), None, StrOptions({"auto"})],
        "optimizer": [StrOptions(set(OPTIMIZERS))],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "clip_threshold": [Interval(Real, 0, None, closed="neither"), None],
        "switch_threshold": [Interval(Real, 0, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean", StrOptions({"auto"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "alpha": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "precision": [StrOptions(set(PRECISIONS))],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "callbacks": [list, None],
    }

    def __init__(
        self,
        *,
        hidden_size: int = 50,
        cell: str = "auto",
        time_feature: int | str | None = None,
        frame: int | str = "auto",
        instance_norm: bool | str = "auto",
        readout: str = "auto",
        conv_kernels: tuple[int, ...] | list[int] | str | None = "auto",
        conv_channels: int = 32,
        conv_pool: int | str = "auto",
        bidirectional: bool = False,
        num_layers: int = 1,
        dropout: float = 0.0,
        hidden_init: str = "zero",
        spectral_radius: float | str | None = "auto",
        optimizer: str = "adam",
        learning_rate: float | str = "auto",
        clip_threshold: float | None = 1.0,
        switch_threshold: float | None = None,
        batch_size: int = 32,
        max_iter: int = 200,
        early_stopping: bool | str = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float | str = "auto",
        alpha: float | str = "auto",
        device: str = "auto",
        precision: str = "float32",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list | None = None,
    ) -> None:
        self.hidden_size = hidden_size
        self.cell = cell
        self.time_feature = time_feature
        self.frame = frame
        self.instance_norm = instance_norm
        self.readout = readout
        self.conv_kernels = conv_kernels
        self.conv_channels = conv_channels
        self.conv_pool = conv_pool
        self.bidirectional = bidirectional
        self.num_layers = num_layers
        self.dropout = dropout
        self.hidden_init = hidden_init
        self.spectral_radius = spectral_radius
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.clip_threshold = clip_threshold
        self.switch_threshold = switch_threshold
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.alpha = alpha
        self.device = device
        self.precision = precision
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callbacks = callbacks

    #: Names of fitted attributes that a subclass adds and that model files should
    #: keep (plain values: numbers, strings, arrays, lists, dicts); :meth:`save` refuses
    #: a model with fitted attributes it does not know.
    _persisted_extra: tuple[str, ...] = ()

    #: Parameters added after model files were first written, with the value under
    #: which a file that lacks them was trained (its parameters are read as that, so
    #: that they describe the stored network and continued training accepts them).
    _params_of_older_files: dict[str, Any] = {
        "readout": "last", "conv_kernels": None, "instance_norm": False,
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register every estimator of this family to save and load, and give one without
        an ``__init__`` of its own a copy of the one it inherits, named after it: Python's
        "got an unexpected keyword argument" named the private ``BaseRNN.__init__`` for
        ``RNNRegressor(class_weight=...)``."""
        super().__init_subclass__(**kwargs)
        register_model_class(cls)  # every estimator of this family saves and loads
        if "__init__" in vars(cls):
            return
        inherited = cls.__init__
        name = f"{cls.__qualname__}.__init__"
        code = inherited.__code__
        if hasattr(code, "co_qualname"):  # Python 3.11+: the message reads the code's name
            code = code.replace(co_qualname=name)
        init = types.FunctionType(code, inherited.__globals__, "__init__", inherited.__defaults__,
                                  inherited.__closure__)
        init.__kwdefaults__ = inherited.__kwdefaults__
        init.__annotations__ = inherited.__annotations__
        init.__doc__, init.__module__, init.__qualname__ = inherited.__doc__, cls.__module__, name
        cls.__init__ = init

    # ----------------------------------------------------------------- hooks
    @abstractmethod
    def _encode_targets(
        self, y: Any, *, reset: bool, classes: Any = None, weight: np.ndarray | None = None,
        lengths: list[int] | None = None,
    ) -> np.ndarray:
        """Validate ``y`` and return it as the network's training targets (``weight``:
        the sequences' sample weights, where a fit learns something from the targets;
        ``lengths``: the steps of X's sequences, which per-step targets follow)."""

    @abstractmethod
    def _criterion(self) -> torch.nn.Module:
        """Per-sample loss (``reduction='none'``)."""

    @abstractmethod
    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        """Encoded targets as a tensor of the criterion's type."""

    @staticmethod
    @abstractmethod
    def _validation_score(y_true: np.ndarray, outputs: np.ndarray, sample_weight: np.ndarray | None) -> float:
        """Score of network outputs against encoded targets (higher is better), weighted
        as the validation loss is (None: equal weights)."""

    #: The fewest held-out sequences :meth:`_validation_score` is defined on.
    _min_held_out = 1

    @property
    @abstractmethod
    def _n_outputs(self) -> int:
        """Outputs of the readout."""

    def _sample_weight(self, y: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        return sample_weight

    def _check_target_steps(self, y: Any, sequences: list[np.ndarray]) -> None:
        """Check per-step targets against the steps of ``X`` (nothing to check when
        there is one target per sequence)."""

    @staticmethod
    def _target_ndim(y: Any) -> int:
        """The number of dimensions of ``y`` (checked), which predictions follow."""
        return np.ndim(y)


    # ------------------------------------------------------------- training
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> BaseRNN:
        """Train the network on sequences ``X`` with targets ``y``.

        Parameters
        ----------
        X : list of array-like of shape (T_i, n_features), ndarray of shape (n_samples, T, n_features), or array-like of shape (n_samples, T)
            Ragged sequences; NaN-padded sequences (trailing all-NaN steps are
            padding); or a table of univariate sequences. Any other NaN is a missing
            value: the network gets the last observed value and a mask (with ``frame``
            above 1, the value at the same place of the frame before, or the
            training mean: see ``frame``).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            One target per sequence.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weight of each sequence in the loss. Only their ratios count:
            the loss is the weighted mean, so weights scaled by any constant train the
            same model (``partial_fit`` keeps each call's weights as given, so that
            they also weigh the calls against each other). A sequence of weight 0
            counts for nothing in the loss but still takes part in the input encoding
            (fill values, mask channels, the time scale): drop it from ``X`` and ``y``
            to leave it out entirely.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight, incremental=False)

    @with_fit_threads  # one thread for a small network; a pool worker's CPU share
    def _fit(
        self, X: Any, y: Any, sample_weight: Any, *, incremental: bool, classes: Any = None
    ) -> BaseRNN:
        """The one training routine: ``fit`` (up to ``max_iter`` epochs, with stopping
        rules) and ``partial_fit`` (one epoch over the data given, no stopping rules).

        Transactional: everything is validated and trained on a staging copy of the
        estimator, and its state replaces this estimator's only when training ends (a
        stopping rule, ``max_iter``, divergence, or an interrupt after at least one
        finished epoch). A call that is rejected, fails, or is interrupted before an
        epoch finishes leaves the estimator exactly as it was (unfitted if it was);
        continued training that fails is rolled back to the weights it started from.
        Continued training shares the fitted network with the staging copy, so a
        prediction in another thread reads the running epoch's weights (a fresh fit's
        network is the copy's own).

        Training runs with autograd and without a caller's autocast, whatever mode the
        caller's code holds (:func:`~sklearn_rnn._engine.gradient_mode`).
        """
        with gradient_mode(self.device):  # in this frame: warnings' stack levels count it
            reset = not (hasattr(self, "net_") and (incremental or self.warm_start))
            if incremental:
                self._check_streamable()
            # A continued call sets its step size, callbacks, ... on the fitted network:
            # put back if it fails.
            settings = None if reset else TrainingSettings(self.net_)
            with staging(self) as work:  # swapped in only when training ends
                try:
                    train, valid = work._prepare(
                        X, y, sample_weight, incremental=incremental, classes=classes, reset=reset
                    )
                except BaseException:
                    if settings is not None:
                        settings.restore(self.net_)
                    raise
                net = work.net_
                epochs_before = len(net.history)
                rollback = None if reset else Rollback(net)
                guard = dict(net.callbacks_)["guard"]
                if rollback is not None and not self.callbacks:
                    # Only a user's callback could change the weights before the first epoch
                    # begins: without one, that epoch's copy is the rollback's.
                    guard.start_state = rollback.state
                # Trained as given by partial_fit (fit's have a mean of 1): huge ones overflow the loss.
                guard.largest_weight = float(train.sample_weight.max()) if incremental else 1.0
                try:
                    # The fitted model keeps no data; a Ctrl-C is reported wherever it lands.
                    with net.train_split.serving(valid), noting_interrupts(guard):
                        try:
                            net.partial_fit(train, y=None)
                        except KeyboardInterrupt as interrupt:
                            if len(net.history) == epochs_before and not str(interrupt):
                                # Before the first epoch began (a callback's on_train_begin):
                                # skorch lets it through bare, where one in the epoch is named.
                                call = "partial_fit" if incremental else "fit"
                                raise KeyboardInterrupt(
                                    f"{type(self).__name__}.{call} was interrupted before its first "
                                    "epoch finished; the estimator is left as it was before the call."
                                ) from None
                            if not (guard.train_ended_ and len(net.history) > epochs_before):
                                raise
                            # In a callback's on_train_end (skorch runs them past its own
                            # handling of interrupts), once training ended: keep it.
                            warnings.warn(
                                f"{type(self).__name__}: training was interrupted in a callback's "
                                f"on_train_end, after epoch {len(net.history)} finished; the "
                                "trained epochs are kept (the callbacks after it did not run).",
                                UserWarning,
                                stacklevel=outside_stacklevel(),
                            )
                    if guard.interrupted_ and len(net.history) == epochs_before:
                        # Nothing of this call finished: nothing is swapped in.
                        call = "partial_fit" if incremental else "fit"
                        raise KeyboardInterrupt(
                            f"{type(self).__name__}.{call} was interrupted before its first "
                            "epoch finished; the estimator is left as it was before the call."
                        )
                    # Its warnings too: one raised as an error (warnings.simplefilter("error"))
                    # fails the call, which then leaves the estimator as it was.
                    for outcome in work._record_history(epochs_before, incremental=incremental):
                        warn(outcome.message, ConvergenceWarning, stacklevel=outside_stacklevel())
                except BaseException:
                    if rollback is not None:
                        rollback.restore(net)  # the weights, history and dropout generators
                        settings.restore(net)
                    raise
                finally:
                    guard.start_state, guard.largest_weight = None, 1.0
            return self

    def _prepare(
        self,
        X: Any,
        y: Any,
        sample_weight: Any,
        *,
        incremental: bool,
        classes: Any = None,
        reset: bool | None = None,
    ) -> tuple[SequenceDataset, SequenceDataset | None]:
        """Validate and encode the data; build the network on the first call.

        Every check runs before anything of a fitted network is changed.
        """
        # Tensors made here are trained: not inference tensors, whatever the caller's mode
        # (a search or train_stacked under torch.inference_mode prepares its networks here).
        with gradient_mode(self.device):
            if reset is None:
                reset = not (hasattr(self, "net_") and (incremental or self.warm_start))
            self._check_default_dtype()
            if not reset:
                self._check_continuation()
            sequences = self._validate_sequences(X, reset=reset)
            given_weight = self._check_sample_weight(sample_weight, len(sequences), X)
            given_y, y = y, self._check_y(y, X, sequences, reset=reset, classes=classes, weight=given_weight)
            if reset and not self._output_steps.every_step:
                _warn_of_target_in_table(X, given_y)
            if not (reset or incremental) and hasattr(self, "_y_ndim"):
                self._y_ndim = self._target_ndim(given_y)  # a warm refit's predictions take its y's shape
            self._check_target_steps(y, sequences)
            weight = self._sample_weight(y, given_weight)
            if not incremental:  # a fit's loss is the weighted mean: only the ratios count
                weight = _relative(weight, self._output_steps.loss_terms(y))
            else:
                # Kept as given, and trained in float32.
                _check_float32_weights(weight, getattr(self, "class_weight", None))
            if reset:
                self._frame = self._resolved_frame(sequences)
            raw, sequences = sequences, frame_sequences(sequences, self._frame)
            self._early_stopping = not incremental and self._resolved_early_stopping(y, weight)
            seeds = _Seeds.draw(self.random_state)
            device = self._resolve_device()
            self._check_precision(device)
            if reset:
                self._encoder = InputEncoder.fit(
                    sequences, time_feature=self._time_column(sequences[0].shape[1], fitting=True),
                    scaled=self._resolved_instance_norm(sequences),
                )
            if get_cell(self._resolved_cell()).needs_gaps:  # every training call's data
                _warn_of_simultaneous_steps(sequences, self._encoder.time_feature, self._resolved_cell())
            data = self._encoded(raw, sequences, device)
            train, valid = self._split(data, y, weight, seeds, device, incremental=incremental)
            if reset:
                conv = self._resolved_conv(sequences)
                self.net_ = self._build_net(
                    seeds, device, incremental=incremental, readout=self._resolved_readout(),
                    conv=conv, conv_pool=self._resolved_conv_pool(conv, sequences),
                )
            else:
                self._configure_training(self.net_, seeds, incremental=incremental)
            self.net_.l2_penalty = self._resolved_alpha() / len(train)
            return train, valid

    def _fitted_architecture(self) -> dict[str, Any]:
        """What the fitted network and optimizer were built with, read from them."""
        module = self.net_.module_
        return {
            "hidden_size": module.hidden_size,
            "cell": module.cell,
            "num_layers": module.num_layers,
            "dropout": module.dropout,
            "hidden_init": module.hidden_init,
            "spectral_radius": module.spectral_radius,
            "time_feature": self._encoder.time_feature,
            "frame": self._frame,
            "instance_norm": self._encoder.scaled,
            "readout": module.readout_mode,
            "conv_kernels": () if module.conv is None else module.conv.kernel_sizes,
            "conv_channels": None if module.conv is None else module.conv.channels,
            "conv_pool": 1 if module.conv is None else module.conv.pool,
            "bidirectional": module.bidirectional,
            "optimizer": _OPTIMIZER_NAMES.get(type(self.net_.optimizer_), "adam"),
            "device": next(module.parameters()).device.type,
        }

    def _check_continuation(self, *, device: bool = True) -> None:
        """Refuse continued training when a parameter that shaped the network or its
        optimizer changed since it was built (it would be silently ignored); with
        ``device=False``, whatever the device (a model file may go anywhere).

        A stream of ``partial_fit`` calls checks once: the check is skipped while the
        network, the encoder, the frame and the parameters it reads are the ones that
        passed it last time."""
        settings = None
        if device:
            # Lists as tuples: a list changed in place must not compare equal to itself.
            shaping = tuple(
                tuple(value) if isinstance(value, list) else value
                for value in (getattr(self, name) for name in _SHAPING_PARAMS)
            )
            settings = (id(self.net_.module_), id(self._encoder), self._frame, shaping)
            if self.net_.checked_settings == settings:
                return
        fitted = self._fitted_architecture()
        if not device:
            del fitted["device"]
        wanted = {
            "hidden_size": int(self.hidden_size),
            "cell": self._resolved_cell(),
            "num_layers": int(self.num_layers),
            "dropout": float(self.dropout),
            "hidden_init": self.hidden_init,
            "spectral_radius": self._resolved_spectral_radius(),
            "time_feature": self._time_column(self._encoder.n_features),
            "frame": self._frame if isinstance(self.frame, str) else int(self.frame),
            "instance_norm": self._resolved_instance_norm(),
            "readout": self._resolved_readout(),
            "conv_kernels": (conv := self._resolved_conv()),
            "conv_channels": int(self.conv_channels) if conv else None,
            "conv_pool": self._resolved_conv_pool(conv),
            "bidirectional": self._resolved_bidirectional(),
            "optimizer": self.optimizer,
            "device": self._resolve_device().type if device else None,
        }
        changed = [name for name in fitted if fitted[name] != wanted[name]]
        if changed:
            was = ", ".join(f"{name}={fitted[name]!r}" for name in changed)
            now = ", ".join(f"{name}={wanted[name]!r}" for name in changed)
            raise ValueError(
                f"{type(self).__name__} was fitted with {was}, but its parameters now say "
                f"{now}. These shape the network or its optimizer, which continued training "
                "(warm_start=True or partial_fit) keeps; nothing was changed. Set them back to "
                "continue, or start afresh with the new values: set_params(warm_start=False) "
                "and call fit, or fit sklearn.base.clone(model). learning_rate, "
                "clip_threshold, switch_threshold, batch_size, alpha, max_iter and the "
                "stopping rule do apply to continued training."
            )
        self.net_.checked_settings = settings

    def _encoded(self, raw: list[np.ndarray], sequences: list[np.ndarray], device: Any) -> Any:
        """The encoder's float32 data of ``sequences`` (framed from ``raw``), refused where a
        value passes float32's range, naming the raw step where it does."""
        data = self._encoder.encode(sequences, device=device)
        try:
            check_float32_range(data.values, data.lengths)
        except ValueError:
            if self._frame > 1:  # the raw step, not the frame, where a raw value overflows
                steps, lengths, _ = joined_steps(raw)
                check_float32_range(torch.as_tensor(np.where(np.isnan(steps), 0.0, steps), dtype=torch.float32),
                                    torch.as_tensor(lengths))
            raise
        return data

    def _diagnostic_batch(self, X: Any, y: Any) -> tuple[Any, ...]:
        """The network and ``(X, y)`` as one padded batch, for :mod:`sklearn_rnn.diagnostics`.

        A fitted estimator gives its trained network; an unfitted one a network freshly
        initialized from its parameters (on a clone: the estimator stays unfitted).

        Returns
        -------
        network, x, lengths, targets, loss
            ``loss(outputs, targets)`` is the training loss, ``class_weight`` included as
            ``fit`` weighs it (scaled to a mean of 1).
        """
        model = self if hasattr(self, "net_") else clone(self)
        if model is self:
            sequences = self._validate_sequences(X, reset=False)
            targets = self._check_y(y, X, sequences, reset=False)
            self._check_target_steps(targets, sequences)
            raw, sequences = sequences, frame_sequences(sequences, self._frame)
            device = next(self.module_.parameters()).device
            data = SequenceDataset(
                self._encoded(raw, sequences, device),  # beyond float32: NaN norms, no word
                self._target_tensor(targets, device),
                self._fit_weights(targets, torch.ones(len(targets), device=device)),
            )
        else:
            # A first partial_fit's data, whose class weights are kept as given.
            data, _ = model._prepare(X, y, None, incremental=True)
            data.sample_weight = model._fit_weights(None, data.sample_weight)
        inputs, targets = data.collate(np.arange(len(data)))
        network = model.net_.module_

        def loss(outputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return model.net_.get_loss(outputs, target, X=inputs)

        return network, inputs["x"], inputs["lengths"], targets, loss

    def _fit_weights(self, targets: Any, given: torch.Tensor) -> torch.Tensor:
        """The weights ``fit`` gives sequences when no ``sample_weight`` is passed:
        ``class_weight``'s for these (encoded) targets, or, with ``targets`` None, the
        ``given`` weights that already hold them, scaled to a mean of 1 as :func:`_relative`
        scales them (left as they are when all are 0)."""
        weight = given.cpu().numpy().astype(np.float64)
        if targets is not None:
            weight = self._sample_weight(targets, weight)
        if weight.max() > 0:
            weight = _relative(weight)
        return torch.as_tensor(weight, dtype=torch.float32, device=given.device)

    def _split(
        self,
        data: Any,
        y: np.ndarray,
        weight: np.ndarray,
        seeds: _Seeds,
        device: torch.device,
        *,
        incremental: bool,
    ) -> tuple[SequenceDataset, SequenceDataset | None]:
        targets = self._target_tensor(y, device)
        weights = torch.as_tensor(weight, dtype=torch.float32, device=device)
        full = SequenceDataset(data, targets, weights)
        if incremental or not self._early_stopping:
            return full, None
        pool, trains_only, stratify = self._holdout_pool(y, weight)
        check_holdout(len(pool), self.validation_fraction, stratify, min_held_out=self._min_held_out,
                      weightless=len(trains_only))
        train_index, valid_index = train_test_split(
            pool,
            test_size=self.validation_fraction,
            random_state=seeds.split,
            stratify=stratify,
        )
        if stratify is not None:
            train_index, valid_index = _each_class_on_both_sides(train_index, valid_index, pool, stratify)
        if len(trains_only):
            train_index = np.concatenate([train_index, trains_only])
        valid = full.subset(valid_index)
        # Weights of mean 1 per loss term over each split: each split's loss, the batches'
        # mean of the weighted losses, is then the weighted mean over its sequences.
        train = full.subset(train_index)
        for part, index in ((train, train_index), (valid, valid_index)):
            terms = self._output_steps.loss_terms([y[i] for i in index])
            part.sample_weight = torch.as_tensor(
                _relative(weight[index], terms), dtype=torch.float32, device=device
            )
        return train, valid

    def _check_optimizer_cell(self) -> None:
        """Refuse the simplex method with a cell that has no temporal gradients, and a cell
        that reads the time between steps without a time column (the network's message
        spoke of a gap_channel, which no estimator parameter sets)."""
        cell = self._resolved_cell()
        if get_cell(cell).needs_gaps and self.time_feature is None:
            raise ValueError(
                f"cell={cell!r} reads the time between steps, so it needs time_feature: set it to "
                "the column of the steps' time stamps (time_feature=0, or the column's name), or "
                "use a cell without time, e.g. cell='gru'."
            )
        if self.optimizer == "simplex" and not get_cell(cell).temporal_gradients:
            *others, last = (repr(name) for name in cell_names(temporal_gradients=True))
            raise ValueError(
                f"optimizer='simplex' combines temporal gradients of the {', '.join(others)} "
                f"and {last} cells; cell={cell!r} has none. Use optimizer='adam' or "
                f"'sgd' with cell={cell!r}, or another cell with the simplex method."
            )

    def _build_net(
        self, seeds: _Seeds, device: torch.device, *, incremental: bool, readout: str,
        conv: tuple[int, ...], conv_pool: int = 1,
    ) -> SequenceNet:
        cell = self._resolved_cell()
        self._check_optimizer_cell()
        generator = torch.Generator().manual_seed(seeds.init)
        module = RecurrentNetwork(  # numpy scalars (a grid over np.arange) as Python numbers
            int(self._encoder.n_inputs),
            int(self.hidden_size),
            int(self._n_outputs),
            cell=cell,
            num_layers=int(self.num_layers),
            dropout=float(self.dropout),
            hidden_init=self.hidden_init,
            spectral_radius=self._resolved_spectral_radius(),
            generator=generator,
            gap_channel=self._encoder.gap_channel,
            n_masked=self._encoder.n_masked,
            readout=readout,
            conv_kernels=conv,
            conv_channels=int(self.conv_channels),
            conv_pool=conv_pool,
            bidirectional=self._resolved_bidirectional(),
        ).to(device)
        optimizer, optimizer_params = self._optimizer_spec(seeds, device)
        net = make_net(
            module,
            self._criterion(),
            optimizer,
            optimizer_params,
            lr=self._resolved_learning_rate(),
            max_epochs=int(self.max_iter),
            batch_size=int(self.batch_size),
            device=device,
            verbose=self.verbose,
            classifier=isinstance(self, ClassifierMixin),
        )
        self._configure_training(net, seeds, incremental=incremental)
        net.initialize()
        return net

    #: What 'auto' settings mean: the defaults chosen with ``benchmarks/bench_defaults.py``
    #: (the user guide's defaults page), or the thesis' configuration (the step
    #: classifier keeps it).
    _thesis_auto: bool = False

    def _resolved_cell(self) -> str:
        """``cell``, with 'auto' read as 'decay' for timed sequences; otherwise 'gru',
        or the thesis' 'tanh' with ``optimizer='simplex'`` (and for the step classifier)."""
        return resolve_cell(
            self.cell, timed=self.time_feature is not None, simplex=self.optimizer == "simplex",
            thesis=self._thesis_auto,
        )

    def _resolved_spectral_radius(self) -> float | None:
        """``spectral_radius``, with 'auto' read as 1.2 (thesis algorithm 3.1) for the
        Elman-type cells ('tanh', 'relu', 'decay') and None (PyTorch's initialization)
        for the gated 'gru' and 'lstm' (see :ref:`defaults`)."""
        if not isinstance(self.spectral_radius, str):
            return None if self.spectral_radius is None else float(self.spectral_radius)
        return get_cell(self._resolved_cell()).default_spectral_radius

    def _time_column(self, n_features: int, *, fitting: bool = False) -> int | None:
        """The index of the time column among ``n_features`` step features: ``time_feature``
        itself, or the position of the column it names among the step features' names
        recorded by ``fit`` (those of DataFrames; a table's columns are steps, not step
        features)."""
        return _resolve_time_feature(self.time_feature, n_features, fitted_step_names(self),
                                     table=getattr(self, "_fitted_layout", None) == "table", fitting=fitting)

    def _resolved_frame(self, sequences: list[np.ndarray]) -> int:
        """``frame``, with 'auto' read as ``ceil(median length / AUTO_FRAME_STEPS)`` for
        untimed sequences with one target each and the 'adam' or 'sgd' optimizer, 1
        otherwise."""
        if self.frame != "auto":
            frame = int(self.frame)
            if frame > 1 and (self.time_feature is not None or self._output_steps.every_step):
                raise ValueError(
                    f"frame={frame} groups {frame} steps into one, which would mix the time "
                    "stamps of a time_feature and the targets of every step; use frame=1 "
                    "(or 'auto') with time_feature or per-step targets."
                )
            return frame
        if not self._auto_untimed():
            return 1
        median = float(np.median([len(sequence) for sequence in sequences]))
        return max(1, int(np.ceil(median / AUTO_FRAME_STEPS)))

    def _resolved_instance_norm(self, sequences: list[np.ndarray] | None = None) -> tuple[int, ...]:
        """``instance_norm`` as the value channels the encoder reads per sequence: all of
        them for True, none for False; for 'auto', the nearly flat channels of the
        (framed) training ``sequences`` (:data:`AUTO_INSTANCE_NORM_RATIO`) for untimed
        sequences with one target each and the 'adam' or 'sgd' optimizer, none
        otherwise. Without ``sequences`` (continued training), 'auto' is what the fit
        chose."""
        if isinstance(self.instance_norm, str):  # 'auto'
            if sequences is None:
                return self._encoder.scaled
            if not self._auto_untimed():
                return ()
            picked = InputEncoder.nearly_flat_channels(sequences, ratio=AUTO_INSTANCE_NORM_RATIO)
            frame = getattr(self, "_frame", 1)
            if frame > 1 and picked:  # one decision per raw feature, for every frame position
                # (judged alone, a feature's even steps were scaled and its odd ones not)
                width = sequences[0].shape[1] // frame  # untimed: column j is feature j % width
                features = {channel % width for channel in picked}
                picked = tuple(j for j in range(sequences[0].shape[1]) if j % width in features)
            return picked
        if not self.instance_norm:
            return ()
        if self._output_steps.every_step:
            raise ValueError(
                f"instance_norm=True reads each sequence's mean and standard deviation, which "
                f"would make {type(self).__name__}'s output at a step depend on the steps "
                "after it; use instance_norm=False (or 'auto'), or scale the sequences by "
                "statistics of the training data before the estimator "
                "(SequenceStandardScaler(), not per_sequence=True, which reads each "
                "sequence's future as this would)."
            )
        if sequences is None:
            return tuple(range(self._encoder.n_values))
        return tuple(range(sequences[0].shape[1] - (self.time_feature is not None)))

    def _auto_untimed(self) -> bool:
        """Whether 'auto' settings take the choices of the defaults study for untimed
        sequences with one output each and the 'adam' or 'sgd' optimizer (framing, the
        pooled readout, the convolutional stage): not with ``time_feature``, per-step
        targets, 'simplex' or the thesis' configuration."""
        return not (
            self.time_feature is not None
            or self._output_steps.every_step
            or self.optimizer == "simplex"
            or self._thesis_auto
        )

    def _resolved_tol(self) -> float:
        """``tol``, with 'auto' read as :data:`AUTO_TOL` (3e-3) for untimed sequences with
        one output each and the 'adam' or 'sgd' optimizer, and :data:`AUTO_TOL_OTHERWISE`
        (1e-4) otherwise (see :ref:`defaults`)."""
        if isinstance(self.tol, str):  # 'auto'
            return AUTO_TOL if self._auto_untimed() else AUTO_TOL_OTHERWISE
        return float(self.tol)

    def _resolved_readout(self) -> str:
        """``readout``, with 'auto' read as 'pool' for untimed sequences with one output
        each and the 'adam' or 'sgd' optimizer; 'last' with ``time_feature`` (it scored
        higher on the visit histories), with 'simplex' (temporal gradients need it), for
        per-step targets and in the thesis' configuration (see :ref:`defaults`)."""
        if self.readout == "auto":
            return "pool" if self._auto_untimed() else "last"
        if self.readout == "pool" and self.optimizer == "simplex":
            raise ValueError(
                "readout='pool' reads the mean and maximum of the states over all steps, but "
                "optimizer='simplex' needs the readout at the last step (its temporal "
                "gradients); use readout='last' (or 'auto') with 'simplex', or "
                "optimizer='adam'/'sgd' with readout='pool'."
            )
        if self.readout == "pool" and self._output_steps.every_step:
            raise ValueError(
                f"readout='pool' pools the states of a whole sequence into one output, but "
                f"{type(self).__name__} predicts at every step; use readout='last' (or 'auto')."
            )
        return self.readout

    def _resolved_bidirectional(self) -> bool:
        """``bidirectional``, after refusing what a backward pass over the steps cannot
        serve: the simplex method (its temporal gradients follow one direction of time),
        per-step targets (a step's output would read the steps after it) and a cell that
        reads the time since the previous step."""
        if not self.bidirectional:
            return False
        name = type(self).__name__
        cell = self._resolved_cell()
        chosen = f"cell={cell!r}" if self.cell == cell else f"cell={self.cell!r} (here {cell!r})"
        # The class first: no other setting lifts that refusal.
        refusals = [
            (self._output_steps.every_step,
             f"{name}, which predicts at every step (the backward direction would let a "
             "step's output read the steps after it); use bidirectional=False, or "
             "RNNClassifier/RNNRegressor for one output per sequence"),
            (self.optimizer == "simplex",
             "optimizer='simplex', whose temporal gradients follow one direction of time; "
             "use optimizer='adam' or 'sgd' with bidirectional=True"),
            (get_cell(cell).needs_gaps,
             f"{chosen}, which reads the time since the previous step (one direction of "
             "time); pass cell='gru' (the time column is then an ordinary input to both "
             "directions), or bidirectional=False"),
        ]
        for refused, reason in refusals:
            if refused:
                raise ValueError(f"bidirectional=True cannot be used with {reason}.")
        return True

    def _resolved_conv(self, sequences: list[np.ndarray] | None = None) -> tuple[int, ...]:
        """``conv_kernels`` as a tuple of widths (empty: no convolutional stage), with
        'auto' read as :data:`AUTO_CONV_KERNELS` for untimed sequences with one output
        each and the 'adam' or 'sgd' optimizer whose median length (the framed training
        ``sequences``) is at least :data:`AUTO_CONV_MIN_SPANS` times the widest kernel,
        and none otherwise. Without ``sequences`` (continued training), 'auto' is what
        the fit chose from its data."""
        name = type(self).__name__
        if isinstance(self.conv_kernels, str):  # 'auto'
            gaps = get_cell(self._resolved_cell()).needs_gaps  # 'decay' without time_feature
            if not self._auto_untimed() or gaps:
                return ()
            if sequences is None:
                conv = self.net_.module_.conv
                return () if conv is None else conv.kernel_sizes
            median = float(np.median([len(sequence) for sequence in sequences]))
            long_enough = median >= AUTO_CONV_MIN_SPANS * max(AUTO_CONV_KERNELS)
            return AUTO_CONV_KERNELS if long_enough else ()
        if self.conv_kernels is None:
            return ()
        kernels = tuple(self.conv_kernels)
        if not all(isinstance(k, Integral) and not isinstance(k, bool) and k >= 1 for k in kernels):
            raise ValueError(
                f"conv_kernels must be widths in steps, whole numbers of at least 1 (such as "
                f"(3, 9)), 'auto' or None; got {self.conv_kernels!r}."
            )
        if not kernels:
            return ()
        refusals = [
            (self.optimizer == "simplex",
             "optimizer='simplex' (its temporal gradients cover the recurrent layers and the "
             "readout only); use conv_kernels=None (or 'auto') with 'simplex'"),
            (self._output_steps.every_step,
             f"{name}, which predicts at every step (the kernels read steps ahead of the "
             "one predicted); use conv_kernels=None (or 'auto')"),
            (get_cell(self._resolved_cell()).needs_gaps,
             f"cell={self._resolved_cell()!r}, which reads the raw inputs and the time between "
             "steps; use conv_kernels=None (or 'auto') with time_feature, or another cell"),
        ]
        for refused, reason in refusals:
            if refused:
                raise ValueError(f"conv_kernels={self.conv_kernels!r} cannot be used with {reason}.")
        return tuple(int(k) for k in kernels)

    def _resolved_conv_pool(
        self, conv: tuple[int, ...], sequences: list[np.ndarray] | None = None
    ) -> int:
        """``conv_pool`` for the stage ``conv`` (the resolved kernel widths): 1 without a
        stage; 'auto' read as :data:`AUTO_CONV_POOL` when the median length of the
        (framed) training ``sequences`` is at least :data:`AUTO_CONV_POOL_MIN_STEPS`,
        1 otherwise. Without ``sequences`` (continued training), 'auto' is what the fit
        chose from its data."""
        if not conv:
            if self.conv_pool not in ("auto", 1):
                raise ValueError(
                    f"conv_pool={self.conv_pool!r} pools the features of the convolutional "
                    f"stage, but this fit has none (conv_kernels={self.conv_kernels!r} "
                    "resolved to no stage); use conv_pool='auto' or 1, or give conv_kernels."
                )
            return 1
        if not isinstance(self.conv_pool, str):
            return int(self.conv_pool)
        if sequences is None:  # a fitted stage's, or 1 where the fit had none
            fitted = self.net_.module_.conv
            return 1 if fitted is None else fitted.pool
        median = float(np.median([len(sequence) for sequence in sequences]))
        return AUTO_CONV_POOL if median >= AUTO_CONV_POOL_MIN_STEPS else 1

    def _holdout_pool(self, y: Any, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The sequences early stopping holds out from, those that only train, and the
        pool's labels to stratify by (None for a regressor).

        Held out from the sequences that weigh: one of weight 0 (say, one a bagging draw
        left out, as BaggingClassifier passes its draws as counts) is no evidence, and
        trains with the rest, where its loss counts for nothing. Where some weigh 0, a
        class that the weights keep one sequence of (a draw that picked one of a rare
        class's) cannot be split either, and trains too.
        """
        # Weighing as training reads the weights, scaled and in float32: 1e-50 beside 1 is
        # 0 there (a hold-out of such weights passed the count, and scored one sequence).
        weighs = _relative(weight).astype(np.float32) > 0 if weight.max() > 0 else weight > 0
        pool, trains_only = np.flatnonzero(weighs), np.flatnonzero(~weighs)
        if not isinstance(self, ClassifierMixin):
            return pool, trains_only, None
        labels = np.asarray(y)[pool]
        classes, counts = np.unique(labels, return_counts=True)
        if len(trains_only) and (counts < 2).any() and (counts >= 2).any():
            lone = np.isin(labels, classes[counts < 2])
            pool, trains_only, labels = pool[~lone], np.concatenate([trains_only, pool[lone]]), labels[~lone]
        return pool, trains_only, labels

    def _resolved_early_stopping(self, y: Any, weight: np.ndarray) -> bool:
        """``early_stopping``, with 'auto' read as True from ``AUTO_HOLDOUT_MIN``
        sequences of positive ``weight`` on when the held-out split of them is possible
        (not with 'simplex', the thesis' configuration), False otherwise."""
        if self.early_stopping != "auto":
            return bool(self.early_stopping)
        pool, _, stratify = self._holdout_pool(y, weight)
        if self._thesis_auto or self.optimizer == "simplex" or len(pool) < AUTO_HOLDOUT_MIN:
            return False
        try:
            check_holdout(len(pool), self.validation_fraction, stratify, min_held_out=self._min_held_out)
        except ValueError:
            return False
        return True

    def _resolved_learning_rate(self) -> float:
        """``learning_rate``, with 'auto' read as 0.01 for 'adam' and 0.05 for 'sgd' and
        'simplex' (chosen with ``benchmarks/bench_learning_rates.py``, see :ref:`method`)."""
        if not isinstance(self.learning_rate, str):
            return float(self.learning_rate)
        return 0.01 if self.optimizer == "adam" else 0.05

    def _resolved_alpha(self) -> float:
        """``alpha``, with 'auto' read as 10 for the 'decay' cell and 0 for the others."""
        if not isinstance(self.alpha, str):
            return float(self.alpha)
        return get_cell(self._resolved_cell()).default_alpha

    def _penalized(self) -> bool:
        """Whether training minimizes the loss plus an L2 penalty (not under 'simplex')."""
        return self._resolved_alpha() > 0 and self.optimizer != "simplex"

    def _monitored_training_loss(self) -> str:
        """The history key the stopping rule watches without validation: the objective
        that is minimized (the loss plus the L2 penalty when there is one)."""
        return "train_objective" if self._penalized() else "train_loss"

    def _optimizer_spec(
        self, seeds: _Seeds, device: torch.device
    ) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
        if self.optimizer == "sgd":
            return ClippedSGD, {"optimizer__clip_threshold": _optional_float(self.clip_threshold)}
        if self.optimizer == "simplex":
            return SimplexSGD, {
                "optimizer__clip_threshold": _optional_float(self.clip_threshold),
                "optimizer__switch_threshold": _optional_float(self.switch_threshold),
                "optimizer__generator": seeds.optimizer,
            }
        # PyTorch's fused step where this PyTorch has it for the device (CUDA; the CPU
        # from torch 2.4): one kernel over every parameter, on a CPU about a third of the
        # time of the multi-tensor step (0.05 against 0.15 ms an update for the default
        # network of one input channel). The same update, with the products rounded in a
        # different order (the stacked trainer, which writes Adam's arithmetic out,
        # agrees to rounding). Elsewhere the multi-tensor step.
        if _has_fused_adam(device.type):
            return torch.optim.Adam, {"optimizer__fused": True}
        return torch.optim.Adam, {"optimizer__foreach": True}

    def _configure_training(
        self, net: SequenceNet, seeds: _Seeds, *, incremental: bool
    ) -> None:
        """Set what may change between calls: shuffling stream, epochs, callbacks (built
        again only when their settings changed, see :func:`~sklearn_rnn._engine.configure`)."""
        stopping = self._early_stopping and not incremental
        clip = self.optimizer == "adam" and self.clip_threshold is not None
        configure(
            net,
            owner=type(self).__name__,
            incremental=incremental,
            stopping=stopping,
            scoring=self._validation_score,
            clip_threshold=float(self.clip_threshold) if clip else None,
            penalized=self._penalized(),
            monitor="valid_loss" if stopping else self._monitored_training_loss(),
            n_iter_no_change=int(self.n_iter_no_change),
            tol=self._resolved_tol(),
            user_callbacks=self.callbacks,
            verbose=self.verbose,
            every_step=self._output_steps.every_step,
        )
        net.output_steps = self._output_steps
        net.precision = self.precision
        net.max_epochs = 1 if incremental else int(self.max_iter)
        # A partial_fit call after the first, or a warm-started fit, continues the stream
        # at its epoch: an int random_state gave every call the same batches, and
        # balanced batches (drawn with replacement) then trained on the same few
        # sequences call after call.
        epochs = len(net.history) if net.initialized_ else 0
        net.iterator_train__random_state = _shuffle_generator(seeds.shuffle, epochs)
        if net.initialized_:
            self._apply_optimizer_params(net)

    def _apply_optimizer_params(self, net: SequenceNet) -> None:
        """Give continued training the current step size, batch size and thresholds
        (the architecture and the optimizer's kind are checked, not changed: see
        :meth:`_check_continuation`)."""
        learning_rate = self._resolved_learning_rate()
        net.lr = learning_rate
        net.batch_size = int(self.batch_size)
        for group in net.optimizer_.param_groups:
            group["lr"] = learning_rate
            # The last call's scheduler left its base rate: without it, this call's
            # scheduler starts as a first fit's does (a CyclicLR at its base_lr, where
            # a base rate set to learning_rate ran the first epoch at learning_rate).
            group.pop("initial_lr", None)
            if "clip_threshold" in group:
                group["clip_threshold"] = _optional_float(self.clip_threshold)
        if isinstance(net.optimizer_, SimplexSGD):
            net.optimizer_.switch_threshold = _optional_float(self.switch_threshold)

    @property
    def best_epoch_(self) -> int | None:
        """The epoch (1-based, counted over ``net_.history``) whose weights early
        stopping restored, or None without early stopping and after a ``partial_fit``.
        Model files (and so pickles) keep it; files of earlier versions give None.
        """
        if self.validation_scores_ is None:
            return None
        return getattr(self, "_best_epoch", None)  # None in pickles of earlier versions

    @property
    def branch_counts_(self) -> dict[str, int] | None:
        """How many updates took each branch of the simplex method (a copy of the
        ``branch_counts`` of :class:`~sklearn_rnn.optim.SimplexSGD`) for
        ``optimizer='simplex'``; None for the other optimizers.

        Read from the fitted optimizer, not stored.
        """
        counts = getattr(self.net_.optimizer_, "branch_counts", None)
        return None if counts is None else dict(counts)

    def _record_history(self, epochs_before: int, *, incremental: bool) -> list[TrainingOutcome]:
        """Set ``n_iter_``, ``loss_curve_`` and the validation attributes from the
        history of a training call that began after ``epochs_before`` epochs; return
        what its ``fit`` warns of (the weights it started from kept, ``max_iter``
        reached while still improving), for the caller to warn or summarize."""
        outcomes: list[TrainingOutcome] = []
        history = self.net_.history
        self.n_iter_ = len(history) if incremental else len(history) - epochs_before
        previous = getattr(self, "loss_curve_", None)
        if incremental and previous is not None and len(previous) == epochs_before:
            # Append this call's epochs, as scikit-learn's MLP does: rebuilding the list
            # from the whole history made every streaming update cost time in proportion
            # to the updates before it (5 ms per call after 10,000 calls).
            new = range(epochs_before, len(history))
            self.loss_curve_.extend(float(history[epoch, "train_loss"]) for epoch in new)
        else:
            # No epoch finished when the first one was interrupted or diverged.
            self.loss_curve_ = [float(loss) for loss in history[:, "train_loss"]] if history else []
        self.module_ = self.net_.module_
        validated_call = bool(self._early_stopping) and not incremental and len(history) > 0
        # A warm start whose first epoch diverged (validated_call, n_iter_ 0) keeps the
        # earlier fit's validation attributes, as it keeps its weights.
        if validated_call and self.n_iter_:
            # The validated epochs: a warm start keeps the epochs of earlier calls, which
            # a fit without a held-out split did not validate.
            validated = [row for row in history if "valid_score" in row]
            self.validation_scores_ = [float(row["valid_score"]) for row in validated]
            # The epoch whose weights early stopping restored (improved by more than tol).
            stop = dict(self.net_.callbacks_)["stop"]
            earlier = getattr(self, "_best_epoch", None)  # an earlier call's, before it is replaced
            self._best_epoch = int(stop.best_epoch_)
            if getattr(stop, "start_validation_", None) is not None:
                # The weights the call started from, kept: their own loss and score, and
                # the epoch whose weights they are, as the earlier call kept them (None
                # where it kept the network as initialized, or a loaded model's earlier
                # call was not validated).
                self.best_validation_loss_, self.best_validation_score_ = stop.start_validation_
                kept = getattr(self, "_kept_epoch", None)
                self._best_epoch = kept if kept is not None or earlier is None else earlier
            else:
                best = [row["epoch"] for row in validated].index(self._best_epoch)
                self.best_validation_loss_ = float(validated[best]["valid_loss"])
                self.best_validation_score_ = self.validation_scores_[best]
        elif not validated_call:
            self.validation_scores_ = None
            self.best_validation_loss_ = None
            self.best_validation_score_ = None
            self._best_epoch = None
        stop = dict(self.net_.callbacks_).get("stop")
        kept_start = bool(not incremental and self.n_iter_ and getattr(stop, "kept_call_start_", False))
        # The epoch whose weights the network now holds, for a later call that keeps the
        # weights it starts from (its best_epoch_); None for the network as initialized.
        if len(history) > epochs_before and not kept_start:
            if stop is not None and not incremental:
                best = int(stop.best_epoch_)
                self._kept_epoch = best - 1 if getattr(stop, "kept_start_", False) else best
                self._kept_epoch = self._kept_epoch or None
            else:
                self._kept_epoch = int(history[-1, "epoch"])
        if kept_start:
            start = "the network as initialized" if not epochs_before else "the weights it started from"
            monitor = "valid_loss" if getattr(stop, "start_validation_", None) is not None else (
                self._monitored_training_loss())
            outcomes.append(TrainingOutcome(
                type(self).__name__, "kept_start", (monitor,), self.n_iter_,
                f"{type(self).__name__}: none of the {self.n_iter_} epochs lowered the "
                f"{_LOSS_NAMES[monitor]} below that of the weights training started from, so "
                f"it keeps those: the model is {start}. Lower learning_rate"
                + (", or set a clip_threshold." if self.clip_threshold is None else
                   f", or clip_threshold (now {self.clip_threshold:g})."),
            ))
        # Not beside kept_start: no epoch beat the starting weights, and the curve only
        # improved on its own first epoch ("increase max_iter" contradicted "lower
        # learning_rate").
        if not incremental and self.n_iter_ >= self.max_iter and not kept_start:
            # Warn only when the monitored loss was still falling as a trend, not when it
            # fluctuated around a level (mini-batch noise keeps setting new bests).
            key = "valid_loss" if self._early_stopping else self._monitored_training_loss()
            curve = [float(value) for value in history[-self.n_iter_ :, key]]
            improving, fall = still_improving(curve, self.n_iter_no_change, self._resolved_tol())
            if improving:
                outcomes.append(TrainingOutcome(
                    type(self).__name__, "max_iter", (int(self.max_iter), key), self.n_iter_,
                    f"{type(self).__name__} reached max_iter={self.max_iter} epochs without "
                    f"converging: the {_LOSS_NAMES[key]} was still improving ({fall}). Increase "
                    "max_iter" + (" or tol." if self._early_stopping else ", or set early_stopping=True."),
                ))
        return outcomes

    def _check_precision(self, device: torch.device) -> None:
        if self.precision == "float16" and device.type != "cuda":
            raise ValueError(
                f"precision='float16' needs a CUDA device; training would run on {device.type}. "
                "PyTorch's CPU recurrent kernels do not run in float16 (oneDNN has no float16 "
                "LSTM), and float16's narrow range needs loss scaling besides. Use "
                "precision='bfloat16' on the CPU (float32's range, no scaling), or 'float32'."
            )
        cell = self._resolved_cell()
        if (self.precision == "bfloat16" and device.type == "cpu"
                and not get_cell(cell).runs_bfloat16_on_cpu()):
            runs = [name for name in cell_names() if get_cell(name).runs_bfloat16_on_cpu()]
            raise ValueError(
                f"precision='bfloat16' with cell={cell!r} needs a CPU whose oneDNN runs "
                "that kernel in bfloat16 (bfloat16 instructions, such as AVX-512 BF16 or "
                "AMX); this one does not. Use precision='float32', another cell (here "
                f"{', '.join(runs)} run in bfloat16), or a GPU."
            )

    def _resolve_device(self) -> torch.device:
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                "device='cuda' was requested, but PyTorch sees no CUDA device "
                "(torch.cuda.is_available() is False). Use device='auto' to take a GPU "
                "when there is one and the CPU otherwise, or device='cpu'."
            )
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def _validate_params_unless_skipped(self) -> None:
        """Validate the parameters as ``fit`` validates them, unless scikit-learn's
        ``skip_parameter_validation`` is set: before every ``partial_fit`` call and
        every :class:`~sklearn_rnn._stacked.StackedStream` update, since a fitted
        estimator's parameters may have been set since. Every call validates (a fraction
        of a millisecond); nothing is kept on the estimator, whose attributes model files
        and clones must know."""
        if not get_config()["skip_parameter_validation"]:
            self._validate_params()

    def _check_streamable(self) -> None:
        """Refuse what a stream of ``partial_fit`` calls cannot honour: a 'balanced'
        class_weight, which needs the whole data (each call would be balanced alone)."""
        if getattr(self, "class_weight", None) == "balanced":
            raise ValueError(
                "class_weight='balanced' balances the classes of the data fit sees whole; "
                "partial_fit sees one call's data at a time (a call of one class would be "
                "unweighted). Compute the weights over all the data, e.g. dict(zip(classes, "
                "sklearn.utils.class_weight.compute_class_weight('balanced', classes=classes, "
                "y=y_all))), and set class_weight to that dict, as scikit-learn's "
                "SGDClassifier asks."
            )

    def _check_default_dtype(self) -> None:
        """Refuse to build or run a network under a default dtype other than float32:
        its layers would be built in it and meet float32 inputs (PyTorch's "mat1 and
        mat2 must have the same dtype")."""
        default = torch.get_default_dtype()
        if default != torch.float32:
            raise RuntimeError(
                f"torch's default dtype is {default} (torch.set_default_dtype), but "
                f"{type(self).__name__} builds and runs float32 networks (its precision "
                "parameter chooses float32 or mixed precision, never the default dtype). "
                "Set torch.set_default_dtype(torch.float32) around the estimator's calls."
            )

    # ------------------------------------------------------------ prediction
    @with_fit_threads
    def _forward(self, X: Any, sequences: list[np.ndarray] | None = None) -> np.ndarray | list[np.ndarray]:
        """Network outputs for every sequence of ``X``, in the order of ``X``:
        ``(n_samples, n_outputs)``, or with a readout at every step a list of
        ``(T_i, n_outputs)`` arrays (run by :func:`~sklearn_rnn._inference.run_network`).
        ``sequences``: ``X`` as the caller validated it already (its warnings once).

        The float32 weights are evaluated in float64, so that a sequence's output does
        not depend on which other sequences share its batch (float32 matrix kernels
        round differently for different batch shapes).
        """
        check_is_fitted(self)
        # Read below: a value set after fit gets fit's check, not int()'s errors.
        validate_parameter_constraints({"batch_size": self._parameter_constraints["batch_size"]},
                                       {"batch_size": self.batch_size}, caller_name=type(self).__name__)
        self._check_default_dtype()
        if sequences is None:
            sequences = self._validate_sequences(X, reset=False)
        if self._encoder.time_feature is not None:
            # On all of X before any network work: a chunk's own check below would count
            # the sequences from the chunk's first one.
            check_times(sequences, self._encoder.time_feature)
        sequences = frame_sequences(sequences, self._frame)
        device = next(self.module_.parameters()).device
        # A float64 twin of the network: cheaper per batch than functional_call.
        network = module_copy(self.module_).double()  # the hooks registered on module_ run
        steps = self._output_steps
        outputs = steps.allocate(len(sequences), self._n_outputs)
        # Encoded in chunks of about PREDICT_CHUNK_VALUES values (a longer sequence alone):
        # memory beyond the validated input stays bounded. Missing values are warned of
        # once for all of X, not once per chunk.
        self._encoder.warn_of_missing(sequences)
        for start, stop in _chunks([sequence.size for sequence in sequences], PREDICT_CHUNK_VALUES):
            chunk = sequences[start:stop]
            dataset = SequenceDataset(self._encoder.encode(chunk, dtype=torch.float64, device=device,
                                                           warn_missing=False))
            order, values, _ = run_network(network, dataset, batch_size=int(self.batch_size), steps=steps,
                                           max_padding=PREDICT_MAX_PADDING)
            steps.place(outputs, start + order, values)
        steps.check_finite(outputs, bounded_state=all(cell.bounded_state for cell, _, _ in network.stack()))
        return outputs

    # ------------------------------------------------------------ validation
    def _validate_sequences(self, X: Any, *, reset: bool) -> list[np.ndarray]:
        return validate_sequences(self, X, reset=reset)

    def _score_weight(self, sample_weight: Any, y: Any, X: Any, predicted: np.ndarray) -> np.ndarray | None:
        """``score``'s weights, after checking that ``y`` has one target per sequence of
        ``X`` (``predicted``: its predictions), checked and divided by the largest: only
        their ratios count, and scikit-learn's sums of weights of 1e307 overflowed (an
        accuracy of NaN, or 0.0)."""
        if _n_targets(y) != len(predicted):
            raise ValueError(
                f"y has {_n_targets(y)} entries, but X has {len(predicted)} sequences: pass one "
                "target per sequence, in the order of X."
            )
        if sample_weight is None:
            return None
        sample_weight = self._check_sample_weight(sample_weight, len(predicted), X)
        largest = sample_weight.max()
        return sample_weight / largest if largest > 0 else sample_weight

    def _check_sample_weight(self, sample_weight: Any, n_samples: int, X: Any = None) -> np.ndarray:
        """One weight per sequence of ``X``, checked; a Series indexed by the instances of a
        panel ``X`` must follow their order, as y must."""
        sample_weight = readable_targets(sample_weight, "sample_weight")
        dates = dates_dtype(sample_weight) if sample_weight is not None else None
        if dates is not None:  # read as days since 1970 (a list of dates too)
            _refuse_dates("sample_weight", dates, fix="Pass one number per sequence.")
        check_targets_follow_instances(X, sample_weight, name="sample_weight")
        if sample_weight is None:
            return np.ones(n_samples)
        if isinstance(sample_weight, Real):
            sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)  # as scikit-learn
        _refuse_missing(sample_weight, "sample_weight", "weight")  # scikit-learn's "contains NaN" named no entry
        try:
            weight = check_array(  # a copy: PyTorch warns of a read-only array
                sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight", copy=True
            )
        except ValueError as error:
            if "Found array with dim" in str(error):  # per-step weights shaped like y, (n, T, 1)
                raise ValueError(
                    f"sample_weight has shape {np.shape(sample_weight)}: expected ({n_samples},), "
                    f"one weight per sequence of X. {type(self).__name__} weighs whole sequences: "
                    "give each sequence one weight (e.g. the mean of its steps' weights)."
                ) from None
            if "inhomogeneous" not in str(error):
                raise
            raise ValueError(  # numpy's "setting an array element with a sequence"
                f"sample_weight must hold one weight per sequence of X, shape ({n_samples},); got "
                f"{len(sample_weight)} entries of different lengths (a weight for each step?). "
                f"{type(self).__name__} weighs whole sequences: give each sequence one weight."
            ) from None
        if weight.ndim != 1 or weight.shape[0] != n_samples:
            resampled = (
                " If a sampler (an imbalanced-learn step with fit_resample) runs before this "
                "estimator in a pipeline, it changed the number of sequences and left the "
                "weights without theirs: weigh the classes with the sampler or with "
                "class_weight instead of sample_weight."
                if weight.ndim == 1 else
                f" {type(self).__name__} weighs whole sequences: give each sequence one weight "
                "(e.g. the mean of its steps' weights)."
            )
            raise ValueError(
                f"sample_weight has shape {weight.shape}: expected ({n_samples},), one "
                f"weight per sequence of X.{resampled}"
            )
        if (weight < 0).any():
            raise ValueError(
                f"sample_weight holds negative values (min {weight.min():g}): expected "
                "non-negative weights."
            )
        if not weight.any():
            raise ValueError(
                "Sample weights must contain at least one non-zero number: every weight "
                "is 0, so no sequence counts."
            )
        return weight

    def _check_y(
        self, y: Any, X: Any, sequences: list[np.ndarray], *, reset: bool, classes: Any = None,
        weight: np.ndarray | None = None,
    ) -> np.ndarray:
        """The targets of ``X``'s ``sequences`` (as validated), checked and encoded
        (``weight``: their sample weights, for what a fit learns from the targets)."""
        n_samples = len(sequences)
        y = readable_targets(y)
        check_targets_follow_instances(X, y)
        per_sequence = (
            "one (T_i, k) array of per-step targets per sequence" if self._output_steps.every_step
            else "one target per sequence"
        )
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: "
                f"pass {per_sequence}."
            )
        if isinstance(y, Iterator):  # np.asarray made it a 0-d object array: "a scalar"
            raise ValueError(
                f"y is an iterator ({type(y).__name__}): expected {per_sequence}, an array-like "
                f"of {n_samples} entries. Collect it into a list first, e.g. list(y)."
            )
        if isinstance(y, (str, bytes, dict, set, frozenset)):  # len() of a str counts its letters
            if isinstance(y, dict):
                fix = ("Pass its values in the order of X, e.g. [y[key] for key in ids], or "
                       "pandas.Series(y).loc[ids] with the ids of X's sequences.")
            elif isinstance(y, (set, frozenset)):
                fix = "A set has no order to pair its entries with the sequences: pass a list in the order of X."
            else:
                fix = "Pass the targets themselves, not a column's name: e.g. table['label']."
            raise ValueError(
                f"y is a {type(y).__name__}: expected {per_sequence}, an array-like of {n_samples} "
                f"entries in the order of X. {fix}"
            )
        if not hasattr(y, "__len__"):
            y = np.asarray(y)  # array-likes that only define __array__
        if getattr(y, "ndim", 1) == 0:
            # One (T, d) array with one label: read as a table of T univariate sequences.
            one = _one_sequence_hint(X, n_samples, "[y]")
            raise ValueError(
                f"y is a scalar ({y!r}): expected {per_sequence}, an array-like of {n_samples} entries.{one}"
            )
        n_targets = len(y)
        if n_targets != n_samples:
            what = (
                f"{per_sequence}, in the order of X (a panel's column of per-step targets y: "
                "[y.xs(i, level=0).sort_index().to_numpy() for i in X.index.unique(level=0)])"
                if self._output_steps.every_step else f"{per_sequence}, in the order of X"
            )
            library = type(X).__module__.split(".")[0]
            shape = tuple(np.shape(X)) if library in ("numpy", "torch") else ()
            time_major = (
                f" X has shape {shape}, whose second axis has one entry per target: if it is "
                "time-major (T, n, d), as torch.nn.utils.rnn.pad_sequence gives by default, pass "
                f"it batch first, {batch_first_swap(X)} (or pad_sequence(..., batch_first=True))."
                if len(shape) == 3 and shape[1] == n_targets else ""
            )
            one = _one_sequence_hint(X, n_samples, "y") if n_targets == 1 else ""
            raise ValueError(
                f"y has {n_targets} entries, but X has {n_samples} sequences: pass {what}."
                + one + time_major + long_table_hint(X, n_targets)
            )
        if self._output_steps.every_step:
            check_step_targets_follow_steps(X, y)
        else:
            _check_one_target_per_sequence(y, self)
        return self._encode_targets(y, reset=reset, classes=classes, weight=weight,
                                    lengths=[len(sequence) for sequence in sequences])

    # ----------------------------------------------------------- persistence
    def save(self, path: str | bytes | os.PathLike) -> None:
        """Write the fitted model to ``path`` in a format that runs no code on load.

        A safetensors file: the weights and the optimizer's state as tensors, the
        parameters, fitted attributes and (with ``precision='float16'``) the loss
        scaler's state as JSON (see :func:`sklearn_rnn.load`). Unlike a pickle, such a
        file is safe to load from an untrusted source. Save between training calls: a
        save during one (from another thread, or by one of the estimator's callbacks)
        holds the running epoch's weights beside the fitted attributes of before the call.

        Parameters
        ----------
        path : str, bytes or path-like
            The file to write, e.g. ``'model.safetensors'`` (``~`` is the home folder);
            replaced if it exists. The
            file is written whole or not at all: should writing fail (a full disk, no
            permission), a file already there is left as it was. What is not a regular
            file (a device such as ``/dev/null``, a FIFO), or a file mounted over the
            path, is written through in place as ``open(path, 'wb')`` would, without
            that guarantee.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_rnn import RNNClassifier
        >>> X = [np.full((2, 1), v) for v in np.linspace(-1, 1, 20)]
        >>> y = np.where(np.linspace(-1, 1, 20) > 0, "up", "down")
        >>> clf = RNNClassifier(hidden_size=4, max_iter=3, random_state=0).fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     clf.save(os.path.join(folder, "model.safetensors"))
        ...     loaded = RNNClassifier.load(os.path.join(folder, "model.safetensors"))
        >>> bool((loaded.predict_proba(X) == clf.predict_proba(X)).all())
        True
        """
        save_model(self, path)

    @classmethod
    def load(cls, path: str | bytes | os.PathLike) -> BaseRNN:
        """Read a model written by :meth:`save`; never runs code from the file.

        Parameters
        ----------
        path : str, bytes or path-like
            A file written by :meth:`save`.

        Returns
        -------
        estimator : object
            The fitted estimator, predicting as the saved one did. It is placed on the
            GPU when PyTorch sees one and its ``device`` allows it, on the CPU otherwise.

        Raises
        ------
        ValueError
            The file is not such a model file, is damaged, or holds another class.
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
        >>> from sklearn_rnn import RNNRegressor
        >>> X = [np.full((2, 1), v) for v in np.linspace(-1, 1, 20)]
        >>> reg = RNNRegressor(hidden_size=4, max_iter=3, random_state=0)
        >>> reg = reg.fit(X, np.linspace(-1, 1, 20))
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     reg.save(os.path.join(folder, "model.safetensors"))
        ...     loaded = RNNRegressor.load(os.path.join(folder, "model.safetensors"))
        >>> loaded.get_params() == reg.get_params()
        True
        """
        return load_model(path, expected=cls)

    def __sklearn_clone__(self) -> BaseRNN:
        """scikit-learn's :func:`~sklearn.base.clone`, sharing with the clone what a
        callback holds that cannot be copied (a logger's open file or lock), as ``fit``
        shares it with its training copy: ``clone``, ``cross_val_score`` and searches
        failed with ``cannot pickle '_io.TextIOWrapper'``.

        Returns
        -------
        estimator
            Unfitted, with the same parameters.
        """
        try:
            return super().__sklearn_clone__()
        except (TypeError, copy.Error):
            if not isinstance(self.callbacks, (list, tuple)):
                raise
        params = {name: clone(value, safe=False) for name, value in self.get_params(deep=False).items()
                  if name != "callbacks"}
        callbacks = [(item[0], _clone_sharing(item[1])) if isinstance(item, tuple) and len(item) == 2
                     else clone(item, safe=False) for item in self.callbacks]
        new = type(self)(**params, callbacks=callbacks)
        # What scikit-learn's clone carries over besides the parameters: the metadata
        # requests (set_fit_request, ...) and the set_output configuration.
        if hasattr(self, "_metadata_request"):  # as scikit-learn's clone copies them
            new._metadata_request = clone(self._metadata_request)
        if hasattr(self, "_sklearn_output_config"):
            new._sklearn_output_config = copy.deepcopy(self._sklearn_output_config)
        return new

    def __getstate__(self) -> dict[str, Any]:
        """The state pickle, joblib, ``copy.deepcopy`` and skops.io store.

        A fitted estimator gives the content of its model file (:meth:`save`): a JSON
        string and numpy arrays, checked by the same digest when restored. A fitted
        estimator that the model format refuses (say, parameters changed since it was
        fitted), or a network prepared but not trained yet, travels whole, as before. A
        copy taken during a training call (by a callback, or another thread) mixes the
        running epoch's weights with the fitted attributes of before the call (see
        :meth:`save`).
        """
        state = super().__getstate__()
        if "net_" not in state or "n_iter_" not in state:
            return state  # unfitted, or a network prepared but not yet trained
        try:
            portable = to_portable(self)
        except (TypeError, ValueError):
            # Whole; callbacks built for the user's as they are now stay theirs in the copy
            # (new objects there, which their key would take for a change).
            return {**state, _CALLBACKS_CURRENT: callbacks_current(self.net_, self.callbacks, type(self).__name__)}
        kept = {k: v for k, v in state.items() if k.startswith(("_sklearn", "_metadata_request"))}
        if isinstance(self.random_state, (np.random.RandomState, np.random.Generator)):
            # The object itself beside its copy in the header: pickle's memo then keeps
            # a generator shared by several estimators shared in the copy too.
            kept["random_state"] = self.random_state
        return {**kept, _PORTABLE: portable}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        current = state.pop(_CALLBACKS_CURRENT, False)
        if _PORTABLE in state:
            restored = from_portable(state.pop(_PORTABLE), expected=type(self), cls=type(self))
            state = {**vars(restored), **state}
        # Pickled whole before the option existed: one direction.
        super().__setstate__({"bidirectional": False, **state})
        if current:
            mark_callbacks_current(self.net_, self.callbacks, type(self).__name__)

    def _fitted_state(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, torch.Tensor]]:
        """The parameters, state fields (:data:`~sklearn_rnn._persistence.STATE_SCHEMA`)
        and tensors that a model file holds."""
        check_is_fitted(self)
        if self.callbacks:  # an empty list holds no code (set_params removing the last one gives it)
            # Callbacks are code (and may hold files, loggers, schedules): a model file
            # runs no code on load, so it cannot hold them, and dropping them silently
            # would give back a different estimator.
            raise TypeError(
                f"cannot save this {type(self).__name__} to a model file: it has "
                f"callbacks={self.callbacks!r}, skorch objects that a file which runs no "
                "code cannot hold. Save it with pickle or joblib, or set_params(callbacks=None) "
                "first if the loaded model may train without them."
            )
        hooked = [name or "module_" for name, sub in self.net_.module_.named_modules()
                  if any(getattr(sub, kind) for kind in HOOK_KINDS)]
        if hooked:  # code, which predict runs: dropping it silently gave another model
            raise TypeError(
                f"cannot save this {type(self).__name__} to a model file: hooks are registered "
                f"on its network ({', '.join(hooked)}), code that a file which runs no code cannot "
                "hold, and predict runs them. Remove them first (the handle's remove()), or save "
                "it with pickle or joblib, which keep hooks that pickle."
            )
        cell = self.net_.module_._cell  # the cell its network runs, whatever the registry holds now
        now = _registration_change(cell)
        if now is not None:
            raise ValueError(
                f"cannot save this {type(self).__name__} to a model file, which names its cell: "
                f"its network runs {_identity_text(_cell_identity(cell))}, and the name "
                f"{cell.name!r} {now}. Register the model's cell under that name again "
                "(sklearn_rnn.nn.unregister_cell, then register_cell) before saving, or keep "
                "the model with pickle or joblib."
            )
        try:
            # What load validates (set_params does not): a file or pickle that its own
            # reader refuses ("inconsistent ... save the model again", with the same
            # result) would be written otherwise, and the model lost with the original.
            self._validate_params()
        except ValueError as error:
            raise ValueError(
                f"cannot save this {type(self).__name__}: a parameter was set to a value it does "
                f"not take ({error}). Set it back with set_params before saving."
            ) from None
        fitted = self._fitted_architecture()
        try:
            self._check_continuation(device=False)
        except ValueError as error:
            raise ValueError(
                f"cannot save this {type(self).__name__}: its parameters no longer describe "
                f"its network ({error})"
            ) from None
        params = self.get_params(deep=False)
        known = set(params) | _STATE_ATTRIBUTES | set(self._persisted_extra)
        unknown = sorted(
            name for name in vars(self)
            if name not in known and not name.startswith(("_sklearn", "_metadata_request"))
        )
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has attributes {unknown} that model files do not know "
                "(fitted ones, or settings its __init__ sets without taking them as "
                "parameters), so a loaded model would lack them: name them in the class "
                "attribute _persisted_extra (plain values only), or keep this model with "
                "pickle/joblib."
            )
        net = self.net_
        tensors = {f"module.{name}": value for name, value in net.module_.state_dict().items()}
        optimizer_state = net.optimizer_.state_dict()
        numbers = {}
        for index, entry in optimizer_state["state"].items():
            for key, value in entry.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"optimizer.{index}.{key}"] = value
                else:
                    numbers[f"{index}.{key}"] = value
        simplex = optimizer_state.get("simplex")
        if simplex is not None:
            tensors["rng.simplex"] = simplex["generator_state"]
        for device, generator in getattr(net.module_, "_dropout_generators", {}).items():
            tensors[f"rng.dropout.{device}"] = generator.get_state()
        for device, held in getattr(net.module_, "_unplaced_generator_states", {}).items():
            tensors.setdefault(f"rng.dropout.{device}", held)  # a device absent here
        scaler = getattr(net, "grad_scaler_", None)
        state: dict[str, Any] = {
            "n_features_in_": self.n_features_in_,
            "fitted_layout": self._fitted_layout,
            "n_step_features": self._n_step_features,
            "encoder": {
                "n_features": self._encoder.n_features,
                "fill_values": np.asarray(self._encoder.fill_values, dtype=np.float64),
                "use_mask": bool(self._encoder.use_mask),
                "time_feature": self._encoder.time_feature,
                "time_scale": float(self._encoder.time_scale),
                **({} if not self._encoder.scaled else {
                    "scaled": list(self._encoder.scaled),
                    "scale_floor": np.asarray(self._encoder.scale_floor, dtype=np.float64),
                    "level_stats": np.asarray(self._encoder.level_stats, dtype=np.float64),
                    "log_scale_stats": np.asarray(self._encoder.log_scale_stats, dtype=np.float64),
                }),
            },
            "frame": int(self._frame),
            "readout": self.module_.readout_mode,
            "conv_kernels": [] if self.module_.conv is None else list(self.module_.conv.kernel_sizes),
            "conv_pool": 1 if self.module_.conv is None else self.module_.conv.pool,
            "early_stopping": bool(self._early_stopping),
            "n_iter_": self.n_iter_,
            "loss_curve_": list(self.loss_curve_),
            "validation_scores_": self.validation_scores_,
            "best_validation_score_": self.best_validation_score_,
            "best_validation_loss_": self.best_validation_loss_,
            "best_epoch": self.best_epoch_,
            "history": net.history.to_list(),
            "optimizer": {
                "name": fitted["optimizer"],
                "state": numbers,
                "branch_counts": None if simplex is None else dict(simplex["branch_counts"]),
                "skipped_steps": getattr(net.optimizer_, "skipped_steps", None),
                **({} if simplex is None else {"last_step": dict(net.optimizer_.last_step)}),
            },
            "grad_scaler": None if scaler is None else scaler.state_dict(),
            "dropout_seed": int(getattr(net.module_, "_dropout_seed", 0)),
            "device": str(next(net.module_.parameters()).device),
            "extra": {name: getattr(self, name) for name in self._persisted_extra if hasattr(self, name)},
        }
        for attribute, field in _OPTIONAL_STATE.items():
            if hasattr(self, attribute):
                state[field] = getattr(self, attribute)
        requests = _set_routing_requests(self)
        if requests:
            state["metadata_requests"] = requests
        identity = _recorded_identity(cell)  # a user's cell: what it was, not only its name
        if identity is not None:
            state["cell"] = identity
        return params, state, tensors

    @classmethod
    def _from_fitted_state(
        cls, params: dict[str, Any], state: dict[str, Any], tensors: dict[str, torch.Tensor], where: str
    ) -> BaseRNN:
        """The estimator that :meth:`_fitted_state` described (the persistence hook).

        The weights' shapes are checked against the parameters before the network is
        allocated, so that a forged size costs nothing.
        """
        # Older files lack parameters added since, which take the values they had then;
        # a subclass whose __init__ takes fewer parameters gets only those it takes.
        accepted = set(cls._get_param_names())
        older = {name: value for name, value in cls._params_of_older_files.items() if name in accepted}
        estimator = cls(**{**older, **params})
        if isinstance(getattr(estimator, "cell", None), str):  # a cell of the user's, not registered?
            try:
                get_cell(estimator._resolved_cell())
            except ValueError:
                raise ValueError(
                    f"{where} holds a model of cell {estimator.cell!r}, which is not registered in "
                    f"this session (the cells are {sorted(CellNames())}): import the module that "
                    "registers it (with sklearn_rnn.nn.register_cell) before loading."
                ) from None
        replaced = _replaced_package_cell(estimator._resolved_cell()) if "cell" not in state else None
        if replaced is not None:  # a model of the package's cell, which records no identity
            raise ValueError(
                f"{where} holds a model of the package's cell {estimator._resolved_cell()!r}, but this "
                f"session registers that name as {_identity_text(_cell_identity(replaced))}: its "
                "weights would run another recurrence. Unregister that cell "
                "(sklearn_rnn.nn.unregister_cell) and load in a session where the name is the "
                "package's cell."
            )
        if "cell" in state and not _same_identity(_cell_identity(get_cell(estimator._resolved_cell())), state["cell"]):
            raise ValueError(
                f"{where} holds a model of cell {estimator._resolved_cell()!r} trained as "
                f"{_identity_text(state['cell'])}, but this session registers that name as "
                f"{_identity_text(_cell_identity(get_cell(estimator._resolved_cell())))}: its weights "
                "would run another recurrence. Register the cell the model was trained with under "
                "that name (sklearn_rnn.nn.unregister_cell, then register_cell) before loading."
            )
        estimator._validate_params()
        for attribute, field in _OPTIONAL_STATE.items():
            if field in state:
                setattr(estimator, attribute, state[field])
        estimator.n_features_in_ = state["n_features_in_"]
        estimator._fitted_layout = state["fitted_layout"]
        estimator._n_step_features = state["n_step_features"]
        estimator._encoder = InputEncoder(**state["encoder"])  # files before instance_norm: none scaled
        estimator._frame = state["frame"]
        estimator._early_stopping = state["early_stopping"]
        for name in ("n_iter_", "loss_curve_", "validation_scores_", "best_validation_score_",
                     "best_validation_loss_"):
            setattr(estimator, name, state[name])
        best_epoch = state.get("best_epoch")  # files of earlier versions have none
        if best_epoch is not None and not 1 <= best_epoch <= len(state["history"]):
            raise ValueError(
                f"{where} names epoch {best_epoch} as the best, but its history holds "
                f"{len(state['history'])} epochs."
            )
        estimator._best_epoch = best_epoch
        estimator._check_loaded_state(where)
        for name, value in state["extra"].items():
            if name not in cls._persisted_extra:
                raise ValueError(f"{where} holds an extra attribute {name!r} that {cls.__name__} does not declare.")
            setattr(estimator, name, value)
        if "metadata_requests" in state:
            _restore_routing_requests(estimator, state["metadata_requests"], where)
        if hasattr(estimator, "classes_"):
            estimator._label_encoder = LabelEncoder()
            estimator._label_encoder.classes_ = estimator.classes_
        # Files from before these options read the last state of the raw inputs.
        readout = state.get("readout", "last")
        conv = tuple(state.get("conv_kernels", ()))
        conv_pool = state.get("conv_pool", 1)
        if conv_pool != 1 and not conv:
            raise ValueError(f"{where} pools the features of a convolutional stage "
                             f"(conv_pool={conv_pool}) but holds no stage (conv_kernels).")
        estimator._check_stored_shapes(tensors, where, readout, conv)
        device = _load_device(estimator, state["device"])
        # The seeds only draw initial weights, which the stored ones replace.
        try:
            net = estimator._build_net(_Seeds.draw(0), device, incremental=False, readout=readout, conv=conv,
                                       conv_pool=conv_pool)
        except ValueError as error:  # parameters that no fit accepts together
            raise ValueError(f"{where} holds parameters that cannot build a network: {error}") from error
        # The network is float32 whatever torch's default dtype (a float64 default built
        # float64 layers, and a valid file was refused as one of another dtype); fit and
        # predict refuse to run under such a default, with the way out.
        net.module_.float()
        estimator.net_ = net
        estimator.module_ = net.module_
        if state["optimizer"]["name"] != _OPTIMIZER_NAMES.get(type(net.optimizer_)):
            raise ValueError(f"{where} holds the state of optimizer {state['optimizer']['name']!r}, "
                             f"but its parameters say optimizer={estimator.optimizer!r}.")
        _load_network_state(net, state, tensors, where, device)
        net.history = type(net.history)(state["history"])  # the engine's kind of history
        resume_best_scores(net)  # its scorers continue from the history's best scores
        try:  # what save requires: parameters that describe the stored network
            estimator._check_continuation(device=False)
        except ValueError as error:
            raise ValueError(f"{where} holds parameters that contradict its fitted state ({error})") from None
        return estimator

    def _check_loaded_state(self, where: str) -> None:
        """Refuse a loaded state whose fields contradict each other (a file whose digest
        was recomputed after an edit): the feature counts of the layout, the encoder and
        the frame, the feature names, and a regressor's target scaling."""
        d = int(self._n_step_features)
        layout_count = d if self._fitted_layout == "sequences" else int(self.n_features_in_)
        problems = []
        if self._fitted_layout == "table" and d != 1:
            problems.append(f"a table layout reads 1 feature per step, not n_step_features={d}")
        if int(self.n_features_in_) != layout_count:
            problems.append(f"n_features_in_={self.n_features_in_} against {d} features per step")
        if int(self._encoder.n_features) != d * int(self._frame):
            problems.append(f"the encoder reads {self._encoder.n_features} features, not "
                            f"{d} per step times frame={self._frame}")
        names = getattr(self, "feature_names_in_", None)
        if names is not None and len(names) != int(self.n_features_in_):
            problems.append(f"{len(names)} feature names for n_features_in_={self.n_features_in_}")
        if hasattr(self, "_y_mean") or hasattr(self, "_y_scale"):
            outputs = getattr(self, "n_outputs_", None)
            mean = np.asarray(getattr(self, "_y_mean", np.nan), dtype=np.float64)
            scale = np.asarray(getattr(self, "_y_scale", np.nan), dtype=np.float64)
            if not (isinstance(outputs, Integral) and outputs >= 1):
                problems.append(f"n_outputs_={outputs!r}")
            elif mean.shape != (outputs,) or scale.shape != (outputs,):
                problems.append(f"target scaling of shapes {mean.shape} and {scale.shape} for "
                                f"{outputs} output(s)")
            elif not (np.isfinite(mean).all() and np.isfinite(scale).all() and (scale > 0).all()):
                problems.append("a target scaling that is not finite, or not positive")
            ndim = getattr(self, "_y_ndim", None)
            if ndim not in (1, 2) or (ndim == 1 and outputs != 1):
                problems.append(f"y_ndim={ndim!r} for {outputs} output(s)")
        if problems:
            raise ValueError(
                f"{where} holds a fitted state that contradicts itself ({'; '.join(problems)}): "
                "the file is inconsistent; save the model again."
            )

    def _check_stored_shapes(
        self, tensors: dict[str, torch.Tensor], where: str, readout: str, conv: tuple[int, ...]
    ) -> None:
        """Refuse weights whose sizes contradict the parameters, before anything is built."""
        n_outputs = len(self.classes_) if hasattr(self, "classes_") else self.n_outputs_
        n_inputs = int(self._encoder.n_inputs)
        channels = int(self.conv_channels)
        directions = 2 if self.bidirectional else 1
        expected = {
            "module.readout.weight": (int(n_outputs), READOUTS[readout] * directions * int(self.hidden_size)),
            "module.readout.bias": (int(n_outputs),),
        }
        for index, width in enumerate(conv):
            expected[f"module.conv.convolutions.{index}.weight"] = (channels, n_inputs, width)
            expected[f"module.conv.convolutions.{index}.bias"] = (channels,)
        stored_conv = sum(name.startswith("module.conv.") for name in tensors)
        if stored_conv != 2 * len(conv):
            raise ValueError(
                f"{where} holds {stored_conv} convolution tensors, but its state describes "
                f"conv_kernels={list(conv)} (two each): the file is inconsistent; save the model again."
            )
        for name, shape in expected.items():
            found = tuple(tensors[name].shape) if name in tensors else None
            if found != shape:
                raise ValueError(
                    f"{where} holds {name} of shape {found}, but its parameters and state "
                    f"describe {shape} (hidden_size={self.hidden_size}, readout={readout!r}, "
                    f"bidirectional={bool(self.bidirectional)}, "
                    f"conv_kernels={list(conv)}, conv_channels={channels}, {n_outputs} outputs): "
                    "the file is inconsistent; save the model again."
                )
        first_inputs = len(conv) * channels if conv else n_inputs
        projection = tensors.get("module.input_projection.weight")
        if projection is None or projection.shape[-1] != first_inputs:
            raise ValueError(
                f"{where} holds an input projection of shape "
                f"{None if projection is None else tuple(projection.shape)} for "
                f"{first_inputs} inputs to the first layer: the file is inconsistent."
            )
        layers = {name.split(".")[2] for name in tensors if name.startswith("module.upper_layers.")}
        if len(layers) != int(self.num_layers) - 1:
            raise ValueError(
                f"{where} holds {len(layers) + 1} layers of weights, but num_layers="
                f"{self.num_layers}: the file is inconsistent; save the model again."
            )
        reverse = {name.split(".")[2] for name in tensors if name.startswith("module.reverse_layers.")}
        if len(reverse) != (int(self.num_layers) if self.bidirectional else 0):
            raise ValueError(
                f"{where} holds {len(reverse)} layers of backward-direction weights, but "
                f"num_layers={self.num_layers} and bidirectional={bool(self.bidirectional)}: "
                "the file is inconsistent; save the model again."
            )
        total = sum(t.numel() for name, t in tensors.items() if name.startswith("module."))
        conv_weights = sum(channels * (n_inputs * width + 1) for width in conv)
        width = int(self.hidden_size) + int(n_outputs) + first_inputs
        if total - conv_weights > 64 * width**2 * int(self.num_layers) * directions:
            raise ValueError(f"{where} holds more weights ({total}) than its parameters describe.")

    def set_params(self, **params: Any) -> BaseRNN:
        """Set the estimator's parameters, as scikit-learn's ``set_params`` does.

        ``callbacks__<name>__<parameter>`` sets a parameter of the callback named
        ``<name>`` in ``callbacks``, as skorch's nets take it (and so grid searches
        over it): on a copy, so that the list and callbacks given are never changed.
        ``callbacks__<name>`` replaces that callback, or with None takes it out.

        Parameters
        ----------
        **params : dict
            Estimator parameters, and ``callbacks__<name>__<parameter>`` values.

        Returns
        -------
        self : object

        Examples
        --------
        >>> from skorch.callbacks import LRScheduler
        >>> from sklearn_rnn import RNNClassifier
        >>> schedule = LRScheduler(policy="StepLR", step_size=5, gamma=0.5)
        >>> model = RNNClassifier(callbacks=[("lr", schedule)])
        >>> model.set_params(callbacks__lr__gamma=0.9).callbacks[0][1].kwargs["gamma"], schedule.kwargs["gamma"]
        (0.9, 0.5)
        """
        nested = {key: params.pop(key) for key in list(params) if key.startswith("callbacks__")}
        if nested:
            pairs = list(params.get("callbacks", self.callbacks) or [])
            names = [pair[0] if isinstance(pair, tuple) and len(pair) == 2 else None for pair in pairs]
            updates: dict[str, dict[str, Any]] = {}
            replaced: dict[str, Any] = {}
            for key, value in nested.items():
                name, _, parameter = key[len("callbacks__"):].partition("__")
                if name not in names:
                    doubled = [n for n in names if isinstance(n, str) and "__" in n]
                    raise ValueError(
                        f"{key!r} sets a callback, or one of its parameters, by name, as "
                        "callbacks__<name> or callbacks__<name>__<parameter>: expected one "
                        f"of the callbacks' names {[n for n in names if n is not None]}. Name "
                        "the callback in callbacks=[(name, callback)], or set callbacks whole."
                        + (f" A name holding '__' ({doubled[0]!r}) cannot be set so: the key is "
                           "read up to its first '__'; rename the callback." if doubled else "")
                    )
                if parameter:
                    updates.setdefault(name, {})[parameter] = value
                else:
                    replaced[name] = value
            changed = []
            for pair, name in zip(pairs, names):
                if name not in replaced and name not in updates:  # untouched (or not a pair)
                    changed.append(pair)
                    continue
                callback = replaced.get(name, pair[1])
                if name in updates:  # on the replacement, when both are given (as in skorch)
                    if callback is None:
                        raise ValueError(
                            f"callbacks__{name}=None takes that callback out, so its parameters "
                            f"{sorted(updates[name])} cannot be set too; drop one of the two."
                        )
                    callback = _callback_with(name, callback, updates[name], type(self).__name__)
                if callback is not None:  # None takes it out, as in skorch
                    changed.append((name, callback))
            params["callbacks"] = changed
        return super().set_params(**params)

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.three_d_array = True
        return tags


#: The key of a fitted estimator's model-file content in its pickled state.
_PORTABLE = "_sklearn_rnn_model"
#: In a whole pickle: whether the network's built callbacks were the user's as they are.
_CALLBACKS_CURRENT = "_sklearn_rnn_callbacks_current"

#: Fitted attributes that a model file keeps or rebuilds (see ``_fitted_state``).
_STATE_ATTRIBUTES = frozenset({
    "net_", "module_", "_label_encoder", "_encoder", "_fitted_layout", "_n_step_features",
    "classes_", "n_outputs_", "_y_mean", "_y_scale", "_y_ndim", "n_features_in_",
    "feature_names_in_", "n_iter_", "loss_curve_", "validation_scores_", "_frame", "_early_stopping",
    "best_validation_score_", "best_validation_loss_", "_best_epoch",
    "_kept_epoch",  # not stored: a loaded model falls back on _best_epoch
})

#: Attributes that only some estimators have, and their state fields.
_OPTIONAL_STATE = {
    "feature_names_in_": "feature_names_in_",
    "classes_": "classes_",
    "n_outputs_": "n_outputs_",
    "_y_mean": "y_mean",
    "_y_scale": "y_scale",
    "_y_ndim": "y_ndim",
}


def _set_routing_requests(estimator: BaseRNN) -> dict[str, dict[str, Any]]:
    """The metadata routing requests set on ``estimator`` (``set_fit_request`` and its
    kin) that differ from its class's own, by method."""
    if "_metadata_request" not in vars(estimator):
        return {}
    cls = type(estimator)
    own, default = estimator._get_metadata_request(), cls.__new__(cls)._get_metadata_request()  # the class's
    changed = {}
    for method in SIMPLE_METHODS:
        requests = dict(getattr(own, method).requests)
        if requests != getattr(default, method).requests:
            changed[method] = requests
    return changed


def _restore_routing_requests(estimator: BaseRNN, saved: dict[str, dict[str, Any]], where: str) -> None:
    request = estimator._get_metadata_request()
    for method, requests in saved.items():
        known = getattr(request, method).requests
        for name, alias in requests.items():
            if name not in known:
                raise ValueError(
                    f"{where} routes {name!r} to {method}, which takes no such metadata "
                    f"(it takes {sorted(known)}). The file is inconsistent; save the model again."
                )
            try:
                getattr(request, method).add_request(param=name, alias=alias)
            except ValueError as error:
                raise ValueError(f"{where} holds a routing request {name!r} = {alias!r}: {error}") from None
    estimator._metadata_request = request


def _load_device(estimator: BaseRNN, saved_on: str) -> torch.device:
    """Where a loaded model goes: a GPU when PyTorch sees one and ``device`` allows it."""
    if torch.cuda.is_available() and estimator.device in ("auto", "cuda"):
        return torch.device("cuda")
    if estimator.device == "cuda":
        warnings.warn(
            f"This {type(estimator).__name__} has device='cuda' (its weights were on "
            f"{saved_on} when it was saved or copied), but PyTorch sees no CUDA device: it is "
            "restored on the CPU and predicts there. Set device='cpu' or 'auto' before fitting "
            "it again.",
            UserWarning,
            stacklevel=outside_stacklevel(),  # load's caller, or pickle.loads'
        )
    return torch.device("cpu")


def _load_network_state(
    net: SequenceNet, state: dict[str, Any], tensors: dict[str, torch.Tensor], where: str, device: torch.device
) -> None:
    """Weights, optimizer state, loss scaler and random generators from a model file."""
    module_state = {k[len("module."):]: v for k, v in tensors.items() if k.startswith("module.")}
    wanted = {name: tuple(t.shape) for name, t in net.module_.state_dict().items()}
    found = {name: tuple(t.shape) for name, t in module_state.items()}
    if found != wanted:
        raise ValueError(
            f"{where} holds weights {found} that do not fit the network its parameters "
            f"describe ({wanted}): the file is inconsistent; save the model again."
        )
    dtypes = {name: t.dtype for name, t in net.module_.state_dict().items()}
    if any(module_state[name].dtype != dtype for name, dtype in dtypes.items()):
        raise ValueError(f"{where} holds weights of another dtype than the network's: the file is inconsistent.")
    net.module_.load_state_dict(module_state)
    net.module_.to(device)
    optimizer_state: dict[int, dict[str, Any]] = {}
    for key, tensor in tensors.items():
        if key.startswith("optimizer."):
            index, name = _optimizer_key(key[len("optimizer."):], f"tensor {key!r}", where)
            optimizer_state.setdefault(index, {})[name] = tensor  # load_state_dict places it
    for key, value in state["optimizer"]["state"].items():
        index, name = _optimizer_key(key, f"optimizer state {key!r}", where)
        optimizer_state.setdefault(index, {})[name] = value
    n_params = sum(len(group["params"]) for group in net.optimizer_.param_groups)
    if any(index not in range(n_params) for index in optimizer_state):
        raise ValueError(f"{where} holds optimizer state for parameters the network does not have.")
    if isinstance(net.optimizer_, torch.optim.Adam):
        for index, entry in sorted(optimizer_state.items()):
            _check_adam_entry(index, entry, where)
    elif isinstance(net.optimizer_, (ClippedSGD, SimplexSGD)):
        _check_step_rule_state(net.optimizer_, optimizer_state, state["optimizer"], where)
    for index, entry in optimizer_state.items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor) and name != "step":
                parameter = _nth_parameter(net.optimizer_, index)
                if value.shape != parameter.shape:
                    raise ValueError(f"{where} holds optimizer state {index}.{name} of shape "
                                     f"{tuple(value.shape)} for a parameter of shape {tuple(parameter.shape)}.")
    full = {"state": optimizer_state, "param_groups": net.optimizer_.state_dict()["param_groups"]}
    if isinstance(net.optimizer_, SimplexSGD):
        if "rng.simplex" not in tensors or state["optimizer"]["branch_counts"] is None:
            raise ValueError(f"{where} lacks the simplex method's generator state: the file is inconsistent.")
        full["simplex"] = {
            "generator_state": tensors["rng.simplex"],
            "branch_counts": state["optimizer"]["branch_counts"],
        }
    net.optimizer_.load_state_dict(full)
    if state["optimizer"]["skipped_steps"] is not None and hasattr(net.optimizer_, "skipped_steps"):
        net.optimizer_.skipped_steps = state["optimizer"]["skipped_steps"]
    if isinstance(net.optimizer_, SimplexSGD):  # the last step's record, as a pickle of it keeps
        net.optimizer_.last_step = dict(state["optimizer"].get("last_step", {}))
    if state["grad_scaler"] is not None:
        try:
            scaler = make_grad_scaler(torch.device(net.device).type)
        except RuntimeError:  # torch 2.2 on the CPU: no scaler, and no float16 training here
            scaler = None
        else:
            scaler.load_state_dict(state["grad_scaler"])
        net.grad_scaler_ = scaler
    module = net.module_
    module._dropout_seed = state["dropout_seed"]
    module._dropout_generators = {}
    module._unplaced_generator_states = {}
    for key, tensor in tensors.items():
        if key.startswith("rng.dropout."):
            where_to = key[len("rng.dropout."):]
            if where_to == "cpu" or (where_to.startswith("cuda") and torch.cuda.is_available()):
                module.dropout_generator(where_to).set_state(tensor)
            else:  # kept for that device, and for the next save (it was dropped)
                module._unplaced_generator_states[where_to] = tensor


def _optimizer_key(key: str, what: str, where: str) -> tuple[int, str]:
    """The parameter index and entry name of an optimizer state key, ``'<index>.<name>'``."""
    match = re.fullmatch(r"(0|[1-9][0-9]*)\.(\w+)", key, flags=re.ASCII)
    if match is None:
        raise ValueError(
            f"{where} holds {what}, which does not name a parameter's optimizer state: expected "
            "'<parameter index>.<name>', such as '0.exp_avg'. The file is inconsistent; save the "
            "model again."
        )
    return int(match[1]), match[2]


def _check_adam_entry(index: int, entry: dict[str, Any], where: str) -> None:
    """Refuse Adam state of a parameter that Adam's next step could not use."""
    missing = sorted({"step", "exp_avg", "exp_avg_sq"} - set(entry))
    step = entry.get("step")
    if isinstance(step, torch.Tensor):
        step = step.item() if step.numel() == 1 else None
    if missing:
        problem = f"lacks {missing}"
    elif not all(isinstance(entry[name], torch.Tensor) for name in ("exp_avg", "exp_avg_sq")):
        problem = "holds a moment (exp_avg, exp_avg_sq) that is not a tensor"
    elif isinstance(step, bool) or not isinstance(step, (int, float)) or not 0 <= step < math.inf:
        problem = f"holds step = {entry['step']!r:.60}, not a count of steps"
    else:
        return
    raise ValueError(
        f"{where} holds Adam's state of parameter {index}, which {problem} (Adam keeps step, "
        "exp_avg and exp_avg_sq for every parameter it has stepped). The file is "
        "inconsistent; save the model again."
    )


def _check_step_rule_state(
    optimizer: ClippedSGD | SimplexSGD, entries: dict[int, dict[str, Any]], saved: dict[str, Any], where: str
) -> None:
    """Refuse state of the 'sgd' or 'simplex' optimizer that is not what it keeps: counts
    of its steps (skipped_steps; branch_counts, one per branch), none per parameter."""
    simplex = isinstance(optimizer, SimplexSGD)
    if simplex:
        counts, wanted = saved["branch_counts"] or {}, list(BRANCHES)
        keeps = f"the state of its generator and branch_counts, a count of the updates of each branch {wanted}"
    else:
        skipped = saved["skipped_steps"]
        counts, wanted = {} if skipped is None else {"skipped_steps": skipped}, ["skipped_steps"]
        keeps = "skipped_steps, a count of the steps it skipped"
    missing = [name for name in wanted if name not in counts]
    unknown = sorted(set(counts) - set(wanted))
    negative = [f"{name} = {value}" for name, value in counts.items() if value < 0]
    if entries:
        index = min(entries)
        problem = f"has state for parameter {index} ({', '.join(sorted(entries[index]))})"
    elif missing:
        problem = f"lacks {missing}"
    elif unknown:
        problem = f"counts {unknown}, which are not among {wanted}"
    elif negative:
        problem = f"holds a negative count: {', '.join(negative)}"
    else:
        return
    name = "simplex" if simplex else "sgd"
    raise ValueError(
        f"{where} holds the {name!r} optimizer's state, which {problem} (it keeps {keeps}, and "
        "no state per parameter). The file is inconsistent; save the model again."
    )


def _nth_parameter(optimizer: torch.optim.Optimizer, index: int) -> torch.Tensor:
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    return parameters[index]


#: The estimators' name of each optimizer class.
_OPTIMIZER_NAMES: dict[type, str] = {ClippedSGD: "sgd", SimplexSGD: "simplex", torch.optim.Adam: "adam"}


def _callback_with(name: str, callback: Any, parameters: dict[str, Any], owner: str) -> Any:
    """A copy of the skorch callback ``name`` with ``parameters`` set."""
    if not isinstance(callback, Callback):  # a class where an instance belongs: a bare TypeError
        made = getattr(callback, "__name__", type(callback).__name__)
        raise ValueError(
            f"{owner}(callbacks=...) callback {name!r} is {callback!r}, not a skorch callback "
            f"instance, so its parameters {sorted(parameters)} cannot be set. Pass an instance, "
            f"e.g. ({name!r}, {made}(...))."
        )
    changed = copy_callback(name, callback, owner)
    changed.set_params(**parameters)
    return changed


class RNNClassifier(ClassifierMixin, BaseRNN):
    """Recurrent-network classifier for variable-length sequences.

    A recurrent network reads each sequence and a softmax readout gives the class
    probabilities; training minimizes the (sample- and class-weighted) cross-entropy.
    At the defaults the network is a GRU whose readout sees its last state together
    with the mean and maximum of its states (``readout``), after a small convolutional
    stage on sequences of 18 steps or more (``conv_kernels``); with ``time_feature``
    it is a time-aware cell. ``cell='tanh', optimizer='simplex'`` is the thesis'
    Elman network (eq. 1.30-1.34) with its training method. :ref:`defaults` lists what
    every 'auto' setting becomes.

    The features are not standardized inside the estimator: for features of different
    or large scales (lab values, counts, raw times), put a
    :class:`~sklearn_rnn.SequenceStandardScaler` in front,
    ``make_pipeline(SequenceStandardScaler(), RNNClassifier())``, as the defaults'
    measurements do (:ref:`defaults-study`).

    Parameters
    ----------
    hidden_size : int, default=50
        Recurrent units.
    cell : {'auto', 'tanh', 'relu', 'gru', 'lstm', 'decay'}, default='auto'
        The recurrent cell: the thesis' Elman recurrence with a ``tanh`` or ``relu``
        non-linearity, or PyTorch's gated GRU and LSTM cells (fused kernels, cuDNN on
        a GPU; every optimizer). 'decay' is a time-aware, continuous-time ``tanh``
        recurrence (:class:`~sklearn_rnn.nn.DecayRecurrence`): between steps each unit
        relaxes towards its new value at a learned rate, moving the further the longer
        the gap (slow units keep early steps, fast ones follow the latest), and a
        value carried forward over missing steps fades towards a learned baseline, as
        in GRU-D. It needs ``time_feature``, and works with 'adam' and 'sgd' (not
        'simplex'). 'auto' takes 'decay' when ``time_feature`` is set (and the
        optimizer is not 'simplex'), the thesis' 'tanh' with ``optimizer='simplex'``,
        and 'gru' otherwise (chosen with ``benchmarks/bench_defaults.py``, see
        :ref:`defaults`).
    time_feature : int, str or None, default=None
        Index of the column that holds each step's time stamp (e.g. the day of a
        visit), or its name where the sequences come in pandas DataFrames (a list
        of frames, a panel or a sequence column of frames; resolved against
        ``feature_names_in_`` in ``fit``). That column is not an ordinary feature:
        the network reads the gap since the previous step and the time since the
        sequence's first step, both divided by the median gap of the training
        sequences, so the time unit does not matter (see
        :class:`~sklearn_rnn.sequences.InputEncoder`); training data with no
        positive gap (every sequence one step long, or times that only repeat) leave
        the gaps unscaled, with a warning, and the unit then matters. Times must be
        non-decreasing within each sequence and never missing. None: the steps are
        taken as evenly spaced.
    frame : int or 'auto', default='auto'
        Raw steps read as one recurrent step: a sequence of ``T`` steps of ``d``
        features becomes ``ceil(T / frame)`` steps of ``frame * d`` features (a last,
        incomplete frame repeats the last step), so that the recurrence
        runs ``frame`` times fewer steps on long sequences. 'auto' is
        ``ceil(median training length / 128)`` for untimed sequences with 'adam' or
        'sgd', and 1 with ``time_feature`` or ``optimizer='simplex'``; a frame
        above 1 with ``time_feature`` is refused. The first layer's weights (and the
        convolutional stage's, ``32 * 12 * frame * d`` with 'auto') grow with
        ``frame * d``: on long sequences of many features (thousands of steps of
        hundreds of features), set ``frame`` and ``conv_pool`` yourself. Missing
        values are filled after framing: a frame's missing value gets the value at
        the same place of the frame before (``frame`` raw steps back), or that
        place's training mean, not the last value observed.
    instance_norm : bool or 'auto', default='auto'
        Read the values of each sequence on its own scale: every value channel (the
        time column excluded) is centred on the sequence's own mean and divided by its
        own standard deviation, and those two statistics reach the network as two more
        channels, constant along the sequence (the mean, and the logarithm of the
        standard deviation, each standardized over the training sequences; see
        :class:`~sklearn_rnn.sequences.InputEncoder`). For series whose amplitudes
        differ by orders of magnitude, which at any scale they share leave most of them
        nearly flat lines. 'auto' reads so the channels whose median training sequence
        varies by less than a tenth of the channel's spread over all steps
        (:meth:`~sklearn_rnn.sequences.InputEncoder.nearly_flat_channels`), for
        untimed sequences with 'adam' or 'sgd', and none otherwise (it keeps a
        set's model unchanged unless its series differ in amplitude that much); see
        :ref:`defaults`.
    readout : {'auto', 'last', 'pool'}, default='auto'
        What the output layer reads: 'last', the state at each sequence's last valid
        step (the thesis), or 'pool', that state concatenated with the mean and the
        maximum of the states over all valid steps, so that what the network saw
        early in a sequence reaches the output without being carried to its end.
        'auto' is 'pool' for untimed sequences, and 'last' with ``time_feature`` (it
        scored higher on visit histories) or ``optimizer='simplex'``, whose temporal
        gradients need it ('pool' with 'simplex' is refused); see :ref:`defaults`.
    conv_kernels : tuple of int, list of int, None or 'auto', default='auto'
        Widths, in steps, of a convolutional input stage
        (:class:`~sklearn_rnn.nn.ConvStage`): each width gives ``conv_channels``
        features per step (a convolution over the neighbouring steps and a ReLU), and
        the first recurrent layer reads the features of all widths instead of the raw
        inputs, so that local shapes (a peak, a rise) reach the recurrence as one
        step. None: no stage. 'auto' is ``(3, 9)`` for untimed sequences with 'adam' or
        'sgd' whose median training length (after framing) is at least 18 steps, twice
        the widest kernel; None for shorter sequences (most windows would reach past
        their ends), with ``time_feature`` (steps are not evenly spaced) or with
        ``optimizer='simplex'`` (its temporal gradients cover the recurrent layers
        only; a stage with 'simplex' is refused); see :ref:`defaults`.
    conv_channels : int, default=32
        Features per kernel width of the convolutional stage.
    conv_pool : int or 'auto', default='auto'
        Steps per max-pooling window of the stage's features: the recurrence runs over
        ``ceil(length / conv_pool)`` steps, each reading the strongest response of every
        feature in its window, so the recurrence's share of an epoch costs about
        ``1 / conv_pool`` as much and a memory spans fewer steps. 'auto' is 2 when the
        median training length (after framing) is at least 64 steps, 1 (no pooling) on
        shorter sequences, whose label may sit in a single step; only with a stage (see
        :ref:`defaults`).
    bidirectional : bool, default=False
        Run every layer a second time over each sequence read backwards, with weights
        of its own, as ``torch.nn.GRU(bidirectional=True)`` does; the readout reads
        the forward state at the last step and the backward state at the first (the
        ends of both passes), and with 'pool' the mean and maximum of both. About twice
        the recurrence's cost. Not with ``optimizer='simplex'`` (its temporal gradients
        follow one direction of time) nor with a cell that reads the time between
        steps ('decay'). What it gave on the defaults' benchmark is on
        :ref:`defaults`.
    num_layers : int, default=1
        Stacked recurrent layers, each reading the states of the one below.
    dropout : float, default=0.0
        Probability of dropping a unit's output between layers and before the
        readout during training; the recurrence itself is never dropped (thesis
        2.2.5). Masks come from the seeded initialization, not the global generator.
    hidden_init : {'zero', 'learned'}, default='zero'
        The state before the first step: zero (the thesis), or a vector per layer
        (and direction) learned with the other weights (the LSTM also learns its
        initial cell state). Not available with cell='decay'.
    spectral_radius : float, None or 'auto', default='auto'
        Initialize the recurrent matrix as a Gaussian draw rescaled to this spectral
        radius, input and output weights from ``N(0, 0.1^2)`` (thesis algorithm 3.1).
        Gated cells rescale each gate's square block of the recurrent matrix to this
        radius, and start the LSTM's forget gate at bias 1. None uses PyTorch's
        default initialization. 'auto' is 1.2 for the 'tanh', 'relu' and 'decay'
        cells and None for 'gru' and 'lstm', on which the rescaled gate blocks learned
        less (see :ref:`defaults`).
    optimizer : {'adam', 'sgd', 'simplex'}, default='adam'
        'sgd' is the thesis' anti-gradient with the clipped step rule (eq. 3.6);
        'simplex' the thesis' method (algorithm 3.2): a random convex combination of
        the normalized per-step ("temporal") gradients, with the anti-gradient when
        that is no descent direction or the gradient norm exceeds
        ``switch_threshold``, and the clipped step rule (see
        :class:`~sklearn_rnn.optim.SimplexSGD`); 'adam' clips the gradient norm at
        ``clip_threshold`` before each Adam step.
    learning_rate : float or 'auto', default='auto'
        Step size (``mu`` of eq. 3.6 for 'sgd' and 'simplex'). 'auto' is 0.01 for
        'adam' and 0.05 for 'sgd' and 'simplex', whose clipped steps learned less in
        the same number of updates with 0.01 (measured in :ref:`method`).
    clip_threshold : float or None, default=1.0
        Gradient-norm threshold ``tau``; None never clips.
    switch_threshold : float or None, default=None
        ``psi`` of the simplex method: follow the anti-gradient when the gradient norm
        exceeds it (a large gradient is not vanishing); None never switches. Only
        used with ``optimizer='simplex'``.
    batch_size : int, default=32
        Sequences per update. Batches group sequences of similar lengths.
    max_iter : int, default=200
        Maximum number of epochs.
    early_stopping : bool or 'auto', default='auto'
        Hold out ``validation_fraction`` of the data (stratified), stop when the
        validation loss has not improved by ``tol`` for ``n_iter_no_change`` epochs,
        and restore the weights of the best epoch: the last epoch whose loss improved
        on the best before it by more than ``tol`` (a later epoch lower by less is not
        kept). When False, the same rule watches the training loss and restores its
        best epoch the same way: the weights that epoch ended with, or those it
        started with where their loss on the training set is lower (an epoch's mean
        loss does not see its last update; one pass over the training set each, at
        the end). Either way the patience is counted only after
        ``3 * n_iter_no_change`` epochs, so training runs at least
        ``4 * n_iter_no_change`` epochs (or ``max_iter``): a loss may stay flat for a
        while before the network learns what lies far back. 'auto'
        holds out from 200 training sequences of positive ``sample_weight`` on (when
        the stratified split is possible; not with ``optimizer='simplex'``), and watches the training loss
        below that.
    validation_fraction : float, default=0.1
        Share of the data held out for early stopping, drawn from the sequences of
        positive ``sample_weight`` (those of weight 0 train with the rest). The input
        encoding is fitted on all of ``X``, the held-out sequences included: the fill
        values of missing values, the time scale, the ``instance_norm`` statistics and
        the 'auto' settings read from ``X``, such as ``frame`` and ``instance_norm``
        (no label reaches them). The split is drawn from ``random_state`` on every call
        to ``fit``: with an int, a warm-started fit on the same data holds out the same
        sequences; with None or a ``RandomState``, each draws a new split (so its
        held-out sequences may have been trained on by the call before, and
        ``validation_scores_`` joins scores of different splits), as scikit-learn's
        ``MLPClassifier`` does.
    n_iter_no_change : int, default=10
        Patience, in epochs, counted after a warm-up of ``3 * n_iter_no_change``
        epochs.
    tol : float or 'auto', default='auto'
        Smallest improvement of the monitored loss that counts, for the patience and
        for the best epoch kept (see ``early_stopping``). 'auto' is 3e-3 for
        untimed sequences (no ``time_feature``) with the 'adam' or 'sgd' optimizer: a
        loss that sinks by less than that over ``n_iter_no_change`` epochs is a long
        tail not worth the time (on the defaults benchmark, 1e-4 let a held-out loss
        sinking by about 1e-4 an epoch keep a fit running to ``max_iter`` with no gain
        in test accuracy). It is 1e-4 with ``time_feature`` and with
        ``optimizer='simplex'``.
    alpha : float or 'auto', default='auto'
        Strength of the L2 penalty on the weight matrices (not biases, decay rates
        or learned initial states): ``alpha / (2 n_samples) * ||W||^2`` is added to the mean training loss,
        ``n_samples`` the sequences a training call trains on, so its weight against
        the data shrinks as the data grows (``alpha / n_samples`` is 0.05 at
        ``alpha=10`` for 200 sequences, 0.001 for 10,000; scikit-learn's MLP divides
        by each batch's size instead). Each ``partial_fit`` call divides by its own
        sequences: a stream of small calls is penalized more than one ``fit`` on all
        of them (chunks of 4 of 64 sequences: 16 times), so lower ``alpha`` for it.
        'auto' is 10 for the 'decay' cell and 0 for the others: the 'decay' cell
        keeps its memory in its relaxation rates, which are not
        penalized, while the other cells keep it in the recurrent weights that a
        penalty shrinks (on small noisy data such as clinical visit histories the
        penalty is what keeps the 'decay' cell from overfitting; on a task that needs
        the first of 2-8 steps, 120 training sequences, ``alpha=10`` cost the 'decay'
        cell 2.5 points of test accuracy and the 'tanh' and 'gru' cells 13 and 43).
        Not used by ``optimizer='simplex'``, whose directions combine the temporal
        gradients of the data loss.
    class_weight : dict, 'balanced' or None, default=None
        Weights of the classes in the loss, multiplied with ``sample_weight``.
        'balanced' weighs the classes of the data ``fit`` is given (inversely to their
        frequency, counted with ``sample_weight``); ``partial_fit`` refuses it (each call's data would be balanced on
        its own): give it a dict computed over all the data.
    balanced_batches : bool, default=False
        Train on mini-batches that hold ``max(1, batch_size // n_classes)`` sequences
        of every class, drawn with replacement (the lupus study of the thesis drew 10 positives
        and 10 negatives per batch); an epoch is ``ceil(n_samples / batch_size)``
        batches. An alternative to ``class_weight='balanced'`` for rare classes (see
        :func:`~sklearn_rnn.sequences.balanced_batches`).
    label_smoothing : float in [0, 1) or 'auto', default='auto'
        Share of each training target spread evenly over the classes: the loss is the
        cross-entropy against ``1 - label_smoothing`` on the true class plus
        ``label_smoothing / n_classes`` on every class (:class:`torch.nn.CrossEntropyLoss`'s
        ``label_smoothing``). It keeps the network from growing ever more confident on
        its training data, which on small data sets is where a recurrent network's
        validation loss turns up early. 'auto' is 0.1 with the 'adam' and 'sgd'
        optimizers (on the defaults benchmark: ahead on six of seven sets over ten
        seeds, and better pooled ROC AUC, Brier score and log loss on the visit-history
        cohorts; see :ref:`defaults`) and 0 with ``optimizer='simplex'``, the thesis'
        plain cross-entropy. The loss curves report the smoothed loss; its floor is
        the entropy of the smoothed targets, not 0. ``predict_proba`` is the network's
        softmax, which smoothing keeps away from 0 and 1.
    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where to train: 'auto' takes a GPU when PyTorch sees one. 'cuda' without a GPU
        raises a ValueError (no silent fallback to the CPU).
    precision : {'float32', 'bfloat16', 'float16'}, default='float32'
        Arithmetic of training. 'bfloat16' and 'float16' are mixed precision: the
        parameters and the optimizer stay in float32, the forward pass runs under
        :func:`torch.autocast` in that type and the loss in float32. 'float16' also
        scales the loss with a :class:`torch.amp.GradScaler`: gradients (and the
        simplex method's temporal gradients) are unscaled before the clipping rule, and
        an update whose gradients overflow is skipped; it needs a GPU. 'bfloat16' has
        float32's range (no scaling) and runs on the CPU too, where the simplex
        method's step-by-step recurrence stays in float32 (with ``cell='lstm'`` only on
        a CPU with bfloat16 instructions: elsewhere it is refused); on a GPU cuDNN's
        recurrence runs in float32 (PyTorch's autocast would run it in unscaled
        float16). Prediction is
        unaffected (float64). On a GPU, 'float32' follows PyTorch's TensorFloat-32
        settings (``torch.backends.cuda.matmul.allow_tf32``,
        ``torch.backends.cudnn.allow_tf32``),
        which the estimator leaves as they are.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialization, the shuffling and the validation split (through
        local generators): the same seed gives the same model on the CPU.
    verbose : int, default=0
        Print a table of losses per epoch and show a progress bar.
    warm_start : bool, default=False
        Continue training the fitted network on the next call to ``fit``. The
        step size, batch size, thresholds, ``alpha`` and stopping rule take their
        current values; a changed parameter that shaped the network or chose the
        optimizer (``hidden_size``, ``cell``, ``num_layers``, ``dropout``,
        ``hidden_init``, ``spectral_radius``, ``time_feature``, ``frame``,
        ``instance_norm``, ``readout``, ``conv_kernels``, ``conv_channels``,
        ``conv_pool``, ``bidirectional``, ``optimizer``, ``device``) is refused with a ValueError (as by
        ``partial_fit``): refit afresh for those.

    callbacks : list of (str, skorch callback) or None, default=None
        Your own skorch callbacks, as ``(name, callback)`` pairs, run by the training
        engine after its own (gradient clipping, the validation score, the training
        guard) and before its stopping rule, whose best epoch is restored before their
        ``on_train_end`` (a ``TrainEndCheckpoint`` saves the weights kept); a scorer may
        not write under the history's own records (``name='valid_loss'``, ...):
        a :class:`skorch.callbacks.LRScheduler`,
        :class:`~skorch.callbacks.Checkpoint` (which saves; to resume, continue the fitted
        estimator with ``warm_start`` or ``partial_fit``: a
        :class:`~skorch.callbacks.LoadInitState` is refused),
        :class:`~skorch.callbacks.EarlyStopping` (which ends training as the built-in rule does; leave its ``load_best`` False:
        ``fit`` refuses a callback that loads weights of its own as training ends,
        since the rule restores its best epoch itself), an
        :class:`~skorch.callbacks.EpochScoring` (with its default ``use_caching=True``
        for a scorer by name or object; a plain callable may turn caching off, and is then
        called with ``y=None``) or a logger. Training uses deep copies, so the objects given here
        are never changed (what cannot be deep-copied, a logger's open file or lock,
        is shared with the copy, and keeps the fitted estimator from being pickled:
        ``set_params(callbacks=None)`` first); they are made when the network is built and again when the
        training settings change (a stream of ``partial_fit`` calls, or warm-started
        fits, keep them with their state; a change of ``verbose`` only adds or removes
        the epoch table and progress bar). Every training call starts at
        ``learning_rate`` and runs the schedule of a
        :class:`~skorch.callbacks.LRScheduler` from its start, as a first fit does
        (unless the callback names its own ``last_epoch``): what a scheduler did to the
        step size does not carry over to the next call (over a stream of ``partial_fit``
        calls, lower ``learning_rate`` with ``set_params`` between calls). The fitted
        ones are in ``net_.callbacks_`` (the network trains on the indices of
        ``classes_``, and a scorer of an :class:`~skorch.callbacks.EpochScoring` reads
        it as a classifier of those indices). The names 'clip', 'valid_score',
        'train_objective', 'guard', 'stop' and 'progress' are the engine's own,
        and 'epoch_timer', 'train_loss', 'valid_loss' and 'print_log' skorch's.
        ``set_params(callbacks__<name>__<parameter>=...)`` sets one callback's
        parameter, as skorch does (a grid searches over it). With
        ``optimizer='simplex'``, a callback that acts on the gradients (overrides
        ``on_grad_computed``, as :class:`~skorch.callbacks.GradientNormClipping` does)
        is refused: the simplex step is built from the per-step gradients, so clip it
        with ``clip_threshold``. A model with callbacks is
        not saved by :meth:`save` (they are code); use pickle or joblib for it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Features per step (for a 2D table input: its number of columns, following
        scikit-learn).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen in fit, when they are all strings: the columns of
        a DataFrame table, or of the DataFrames that held the sequences (a list of
        frames or a panel). Prediction refuses other names or another order.
    n_iter_ : int
        Epochs run by the last call to ``fit``; after ``partial_fit``, the epochs of
        ``net_.history``, every call's (a ``fit`` before them included), as
        ``loss_curve_`` counts them.
    loss_curve_ : list of float
        Training loss of every epoch, without the L2 penalty of ``alpha`` (comparable
        with the validation loss); the penalized loss that training minimizes is
        ``net_.history[:, 'train_objective']`` when there is a penalty.
    validation_scores_ : list of float or None
        Validation accuracy of every epoch when ``early_stopping``, weighted as the
        validation loss is (``sample_weight`` times ``class_weight``).
    best_validation_score_ : float or None
        Validation accuracy of the restored (best) epoch.
    best_validation_loss_ : float or None
        Validation loss of the restored epoch.
    best_epoch_ : int or None
        The restored epoch (1-based, over ``net_.history``) when ``early_stopping``;
        None otherwise and after ``partial_fit`` (a property).
    branch_counts_ : dict of str to int or None
        Updates that took each branch of the simplex method (``'simplex'``,
        ``'descent_fallback'``, ``'switched'``, ``'skipped'``) for
        ``optimizer='simplex'``, kept by a saved model; None otherwise (a property).
    module_ : sklearn_rnn.nn.RecurrentNetwork
        The trained network.
    net_ : skorch.NeuralNet
        The training engine, a supported, readable skorch net: its ``history`` (every
        epoch's losses and scores), ``callbacks_`` (the fitted callbacks, yours
        included), ``optimizer_`` and ``module_``. Read it; train through the
        estimator (``fit``, ``partial_fit``), which owns its settings.

    Notes
    -----
    Training stops with a ``ConvergenceWarning`` when the loss (or, with early
    stopping, the validation loss or score) becomes non-finite, and keeps the weights
    of the best finished epoch (of the monitored loss, as at the end of training), not
    merely the last finite one; an interrupt (Ctrl-C) during ``fit``
    ends training as after the last finished epoch (``n_iter_`` and ``loss_curve_``
    count up to it) and, as at the end of training, keeps the best epoch's weights,
    with a warning. Inside ``cross_val_score`` or a search run in one process, a
    Ctrl-C so ends only the fit in progress, and the search goes on, scoring that
    shortened fit among the others.
    Where no epoch lowered the training loss below that of the weights training
    started from, ``fit`` keeps those and says so with a ``ConvergenceWarning``.
    ``fit`` and ``partial_fit`` are transactional: a call that
    is rejected or fails, or is interrupted before its first epoch finishes (the
    interrupt is raised again, so Ctrl-C also ends a loop of ``partial_fit`` calls),
    leaves the estimator exactly as it was, unfitted if it was. A prediction in another
    thread while a fit runs uses the model from before it, except while training
    continues (``warm_start`` or ``partial_fit``), which trains the fitted network in
    place: such a prediction reads the running epoch's weights. A fit's state replaces
    the estimator's whole when it ends, parameters included: ``set_params`` (or a
    ``set_*_request``) called from another thread while it runs is undone; set them
    between calls. In a joblib or Dask worker, training uses that worker's share of
    the CPU threads (see :doc:`/scaling`).

    The 'auto' settings (``cell``, ``spectral_radius``, ``early_stopping``, ``frame``,
    ``label_smoothing`` and the others) are resolved by ``fit`` from the data and the
    optimizer (see :ref:`defaults`); the
    thesis' configuration stays one argument away, ``cell='tanh', optimizer='simplex'``
    (with 'simplex', 'auto' keeps the radius 1.2, ``frame=1`` and no held-out split).

    Fitted models pickle, and load with ``pickle`` or ``joblib``; loading a pickle runs
    code, so load only pickles you trust. :meth:`save` and :func:`sklearn_rnn.load`
    write and read a safetensors file that runs no code when loaded and is verified
    in full (see :ref:`saving`).

    See Also
    --------
    RNNRegressor : The same network for real-valued targets.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(rng.integers(3, 9), 2)) for _ in range(60)]
    >>> y = np.array(["up" if x[:, 0].sum() > 0 else "down" for x in X])
    >>> clf = RNNClassifier(hidden_size=16, max_iter=30, random_state=0).fit(X, y)
    >>> clf.classes_
    array(['down', 'up'], dtype='<U4')
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(clf.score(X, y) > 0.8)
    True

    Your own skorch callbacks, here a learning-rate schedule, run with the estimator's:

    >>> from skorch.callbacks import LRScheduler
    >>> halving = LRScheduler(policy="StepLR", step_size=5, gamma=0.5)
    >>> clf = RNNClassifier(hidden_size=16, max_iter=10, random_state=0,
    ...                     callbacks=[("halving", halving)]).fit(X, y)
    >>> clf.net_.optimizer_.param_groups[0]["lr"]  # 0.01, halved after epochs 5 and 10
    0.0025
    """

    # Files written before label_smoothing existed were trained without smoothing.
    _params_of_older_files = {**BaseRNN._params_of_older_files, "label_smoothing": 0.0}

    _parameter_constraints: dict = {
        **BaseRNN._parameter_constraints,
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "balanced_batches": ["boolean"],
        "label_smoothing": [Interval(Real, 0, 1, closed="left"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        *,
        hidden_size: int = 50,
        cell: str = "auto",
        time_feature: int | str | None = None,
        frame: int | str = "auto",
        instance_norm: bool | str = "auto",
        readout: str = "auto",
        conv_kernels: tuple[int, ...] | list[int] | str | None = "auto",
        conv_channels: int = 32,
        conv_pool: int | str = "auto",
        bidirectional: bool = False,
        num_layers: int = 1,
        dropout: float = 0.0,
        hidden_init: str = "zero",
        spectral_radius: float | str | None = "auto",
        optimizer: str = "adam",
        learning_rate: float | str = "auto",
        clip_threshold: float | None = 1.0,
        switch_threshold: float | None = None,
        batch_size: int = 32,
        max_iter: int = 200,
        early_stopping: bool | str = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float | str = "auto",
        alpha: float | str = "auto",
        class_weight: dict | str | None = None,
        balanced_batches: bool = False,
        label_smoothing: float | str = "auto",
        device: str = "auto",
        precision: str = "float32",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list | None = None,
    ) -> None:
        super().__init__(
            hidden_size=hidden_size,
            cell=cell,
            time_feature=time_feature,
            frame=frame,
            instance_norm=instance_norm,
            readout=readout,
            conv_kernels=conv_kernels,
            conv_channels=conv_channels,
            conv_pool=conv_pool,
            bidirectional=bidirectional,
            num_layers=num_layers,
            dropout=dropout,
            hidden_init=hidden_init,
            spectral_radius=spectral_radius,
            optimizer=optimizer,
            learning_rate=learning_rate,
            clip_threshold=clip_threshold,
            switch_threshold=switch_threshold,
            batch_size=batch_size,
            max_iter=max_iter,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            alpha=alpha,
            device=device,
            precision=precision,
            random_state=random_state,
            verbose=verbose,
            warm_start=warm_start,
            callbacks=callbacks,
        )
        self.class_weight = class_weight
        self.balanced_batches = balanced_batches
        self.label_smoothing = label_smoothing

    def _encode_targets(
        self, y: Any, *, reset: bool, classes: Any = None, weight: np.ndarray | None = None,
        lengths: list[int] | None = None,
    ) -> np.ndarray:
        if not (isinstance(y, np.ndarray) and y.ndim == 1 and y.dtype.kind in "biu"):
            # A 1-D array of integer labels is already what column_or_1d returns (whose
            # checks cost a streaming partial_fit about 0.1 ms).
            try:
                shape = y.shape if hasattr(y, "shape") else np.shape(y)
            except ValueError:  # ragged: _check_y has refused arrays per sequence already
                shape = ()
            if len(shape) == 2 and shape[1] > 1:
                raise ValueError(
                    f"y has {shape[1]} columns (shape {tuple(shape)}): {type(self).__name__} "
                    "predicts one label per sequence. For several labels per sequence, wrap it: "
                    f"sklearn.multioutput.MultiOutputClassifier({type(self).__name__}(...)); for "
                    "labels at every step, use RNNStepClassifier."
                )
            y = column_or_1d(y, warn=True)
        if y.dtype.kind not in "biu":
            # Integer and boolean labels always pass (type 'binary' or 'multiclass'):
            # the check costs a streaming partial_fit a few tenths of a millisecond.
            _check_no_missing_labels(y)
            check_classification_targets(y)
        if classes is not None:
            classes = _checked_classes(classes)
        if reset:
            self._label_encoder = LabelEncoder().fit(y if classes is None else classes)
            self.classes_ = self._label_encoder.classes_
            if len(self.classes_) < 2 and classes is not None:
                count = len(self.classes_)
                raise ValueError(
                    f"classes={self.classes_.tolist()} names {count} label"
                    f"{'' if count == 1 else 's'}; {type(self).__name__} needs at least 2. "
                    "Pass every label that y may hold, e.g. classes=np.unique(y_all)."
                )
            if len(self.classes_) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in y; got "
                    f"1 class: {self.classes_.tolist()}. Check the labels of your data."
                )
        elif classes is not None and not (
            len(classes) == len(self.classes_) and (_class_indices(self.classes_, classes) >= 0).all()
        ):
            raise ValueError(
                f"classes={classes.tolist()} differs from the classes the model "
                f"was fitted with, classes_ = {self.classes_.tolist()}: a continued fit "
                "keeps its classes. Pass the same classes (or none), or fit from scratch "
                "to learn other labels."
            )
        index = _class_indices(self.classes_, y)
        unseen = index < 0
        if unseen.any():
            raise ValueError(
                f"y holds labels {np.unique(y[unseen]).tolist()} that are not among the "
                f"fitted classes_ = {self.classes_.tolist()}: the model reads only the labels "
                "it was fitted on. Pass targets among them; to train on other labels, fit "
                "from scratch (warm_start=False), or name every label in `classes` on the "
                "first call to partial_fit."
            )
        return index

    @property
    def _n_outputs(self) -> int:
        return len(self.classes_)

    def _criterion(self) -> torch.nn.Module:
        return torch.nn.CrossEntropyLoss(reduction="none", label_smoothing=self._resolved_label_smoothing())

    def _resolved_label_smoothing(self) -> float:
        """``label_smoothing``, with 'auto' read as :data:`AUTO_LABEL_SMOOTHING` (0.1) with
        the 'adam' or 'sgd' optimizer and 0 with 'simplex' and in the thesis'
        configuration (see :ref:`defaults`)."""
        if isinstance(self.label_smoothing, str):  # 'auto'
            return 0.0 if self.optimizer == "simplex" or self._thesis_auto else AUTO_LABEL_SMOOTHING
        return float(self.label_smoothing)

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        # A copy: labels already 0..k-1 arrive as the caller's own array, read-only
        # when it is a pandas Series' (on which PyTorch would warn), and never shared.
        return torch.tensor(y, dtype=torch.long, device=device)

    def _sample_weight(self, y: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        if self.class_weight is None:
            return sample_weight
        class_weight = self.class_weight
        if isinstance(class_weight, dict):
            _check_class_weight_values(class_weight)
            known = set(self.classes_.tolist())
            if not known & set(class_weight):
                raise ValueError(
                    f"class_weight names labels {sorted(class_weight, key=str)}, none of them "
                    f"a class of y (classes: {self.classes_.tolist()}): use the labels of y "
                    "as keys."
                )
            # A label that is no class while a class of y has no weight: a mistyped key
            # ('Sick' for 'sick'), whose weight was dropped without a word; scikit-learn
            # refuses such a dict too.
            extra = [label for label in class_weight if label not in known]
            missing = [label for label in self.classes_[np.unique(y)].tolist() if label not in class_weight]
            if extra and missing:
                raise ValueError(
                    f"class_weight names labels {sorted(extra, key=str)} that are no class of y, "
                    f"and gives no weight to the classes {missing} of y (classes: "
                    f"{self.classes_.tolist()}): a mistyped key? Use the labels of y as keys."
                )
            # Labels that are no class are ignored, as scikit-learn ignores them when every
            # class is weighted: a dict made for all the data serves every cross-validation
            # fold. Classes left out weigh 1, whichever classes this y holds (a partial_fit batch may lack some:
            # scikit-learn's compute_sample_weight refuses a dict naming a class absent from its y).
            per_class = np.ones(len(self.classes_))
            for label, value in class_weight.items():
                if label in known:
                    per_class[np.flatnonzero(self.classes_ == label)[0]] = value
            with np.errstate(over="ignore"):  # checked below
                weight = sample_weight * per_class[y]
        else:  # 'balanced': inversely to each class's total weight in this y, as
            # scikit-learn counts it (bagging's draws come as count weights)
            totals = np.bincount(y, weights=sample_weight, minlength=len(self.classes_))
            present = totals > 0
            largest = totals.max()  # > 0: all-zero weights were refused
            # w / total_c * (sum of totals) / classes, in factors of at most 1 but the
            # largest total: sum / (classes * total_c) overflowed for totals 1e320
            # apart, whose balanced weights are finite. A class of total 0 weighs 0.
            share = np.where(present, totals, 1.0)[y]
            weight = (sample_weight / share) * (np.sum(totals / largest) / present.sum()) * largest
        if not np.isfinite(weight).all():
            raise ValueError(
                f"class_weight={self.class_weight!r} times the sample weights overflows "
                f"(largest sample weight {float(np.max(sample_weight)):g}): only their ratios "
                "count, so scale one of them down."
            )
        if not weight.any():
            raise ValueError(
                f"class_weight={self.class_weight!r} with these sample weights gives every "
                "sequence weight 0: there is nothing to learn from. Give at least one class "
                "of y a positive weight."
            )
        return weight

    @staticmethod
    def _validation_score(y_true: np.ndarray, outputs: np.ndarray, sample_weight: np.ndarray | None) -> float:
        return float(accuracy_score(y_true, outputs.argmax(axis=1), sample_weight=sample_weight))

    def _configure_training(
        self, net: SequenceNet, seeds: _Seeds, *, incremental: bool
    ) -> None:
        super()._configure_training(net, seeds, incremental=incremental)
        net.iterator_train__balanced = self.balanced_batches
        if net.initialized_:  # continued training takes the current label_smoothing
            net.criterion_.label_smoothing = self._resolved_label_smoothing()

    @_partial_fit_context
    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None
    ) -> RNNClassifier:
        """Train for one epoch over ``X`` (one update when it holds at most ``batch_size``).

        The first call builds the network and needs every label in ``classes``; later
        calls continue from the current weights. The first call also fixes the input
        encoding (see :class:`~sklearn_rnn.sequences.InputEncoder`) from its ``X``: the
        fill values of missing values, whether mask channels are used, the time scale
        of a ``time_feature`` (give it sequences of two or more steps at different
        times) and the statistics of ``instance_norm``, and resolves the 'auto' settings
        that read the data (``frame``, ``conv_pool``, ``instance_norm``) from its batch
        alone: set them for a stream whose first batch is not typical of its lengths.
        Stopping rules and early
        stopping do not apply: the caller decides when to stop, e.g. when feeding fresh batches
        from a generator and checking a validation error every few hundred updates.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), optional
            All labels; required on the first call.
        sample_weight : array-like of shape (n_samples,), optional
            Weight of each sequence in this call's loss, as given (not rescaled, so
            that the weights of different calls compare).

        Returns
        -------
        self : object
        """
        if not hasattr(self, "net_") and classes is None:
            raise ValueError(
                "classes must be passed on the first call to partial_fit: give every "
                "label that y may hold, e.g. classes=np.unique(y_all)."
            )
        return self._fit(X, y, sample_weight, incremental=True, classes=classes)

    @reads_one_model
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of each sequence.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        logits = self._forward(X)
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        return probabilities / probabilities.sum(axis=1, keepdims=True)

    @reads_one_model
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        logits = self._forward(X)
        logits -= logits.max(axis=1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))

    @reads_one_model
    def predict(self, X: Any) -> np.ndarray:
        """Most probable class of each sequence.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        outputs = self._forward(X)
        return self.classes_[outputs.argmax(axis=1)]

    @reads_one_model
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy on ``X`` and ``y``, weighted by non-negative ``sample_weight``.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights, not all zero.

        Returns
        -------
        float
        """
        y = readable_targets(y)
        check_targets_follow_instances(X, y)
        _check_one_target_per_sequence(y, self)
        _refuse_missing(y, "y", "target")
        predicted = self.predict(X)
        return float(accuracy_score(y, predicted, sample_weight=self._score_weight(sample_weight, y, X, predicted)))


class RNNRegressor(RegressorMixin, BaseRNN):
    """Recurrent-network regressor for variable-length sequences.

    A recurrent network reads each sequence and a linear readout predicts one or
    several real values; training minimizes the sample-weighted squared error on
    standardized targets (by their sample-weighted mean and standard deviation, so a
    sequence of weight 0 counts for nothing; constant targets, up to the rounding of
    their mean, are only centred; predictions are mapped back to the
    original scale, and ``loss_curve_`` is in standardized units). The network is the one of
    :class:`RNNClassifier`, with the same defaults: a GRU reading its last state
    with the mean and maximum of its states, a time-aware cell with ``time_feature``,
    the thesis' Elman network with ``cell='tanh', optimizer='simplex'``. As there, the
    features are not standardized inside the estimator: put a
    :class:`~sklearn_rnn.SequenceStandardScaler` in front for features of different or
    large scales, ``make_pipeline(SequenceStandardScaler(), RNNRegressor())``.

    Parameters
    ----------
    hidden_size : int, default=50
        Recurrent units.
    cell : {'auto', 'tanh', 'relu', 'gru', 'lstm', 'decay'}, default='auto'
        The recurrent cell: the thesis' Elman recurrence with a ``tanh`` or ``relu``
        non-linearity, or PyTorch's gated GRU and LSTM cells (fused kernels, cuDNN on
        a GPU; every optimizer). 'decay' is a time-aware, continuous-time ``tanh``
        recurrence (:class:`~sklearn_rnn.nn.DecayRecurrence`): between steps each unit
        relaxes towards its new value at a learned rate, moving the further the longer
        the gap (slow units keep early steps, fast ones follow the latest), and a
        value carried forward over missing steps fades towards a learned baseline, as
        in GRU-D. It needs ``time_feature``, and works with 'adam' and 'sgd' (not
        'simplex'). 'auto' takes 'decay' when ``time_feature`` is set (and the
        optimizer is not 'simplex'), the thesis' 'tanh' with ``optimizer='simplex'``,
        and 'gru' otherwise (chosen with ``benchmarks/bench_defaults.py``, see
        :ref:`defaults`).
    time_feature : int, str or None, default=None
        Index of the column that holds each step's time stamp (e.g. the day of a
        visit), or its name where the sequences come in pandas DataFrames (a list
        of frames, a panel or a sequence column of frames; resolved against
        ``feature_names_in_`` in ``fit``). That column is not an ordinary feature:
        the network reads the gap since the previous step and the time since the
        sequence's first step, both divided by the median gap of the training
        sequences, so the time unit does not matter (see
        :class:`~sklearn_rnn.sequences.InputEncoder`); training data with no
        positive gap (every sequence one step long, or times that only repeat) leave
        the gaps unscaled, with a warning, and the unit then matters. Times must be
        non-decreasing within each sequence and never missing. None: the steps are
        taken as evenly spaced.
    frame : int or 'auto', default='auto'
        Raw steps read as one recurrent step: a sequence of ``T`` steps of ``d``
        features becomes ``ceil(T / frame)`` steps of ``frame * d`` features (a last,
        incomplete frame repeats the last step), so that the recurrence
        runs ``frame`` times fewer steps on long sequences. 'auto' is
        ``ceil(median training length / 128)`` for untimed sequences with 'adam' or
        'sgd', and 1 with ``time_feature`` or ``optimizer='simplex'``; a frame
        above 1 with ``time_feature`` is refused. The first layer's weights (and the
        convolutional stage's, ``32 * 12 * frame * d`` with 'auto') grow with
        ``frame * d``: on long sequences of many features (thousands of steps of
        hundreds of features), set ``frame`` and ``conv_pool`` yourself. Missing
        values are filled after framing: a frame's missing value gets the value at
        the same place of the frame before (``frame`` raw steps back), or that
        place's training mean, not the last value observed.
    instance_norm : bool or 'auto', default='auto'
        Read each sequence's values on its own scale, with its mean and log standard
        deviation as two more channels; 'auto' does so for the channels that most
        untimed sequences hold nearly flat at the shared scale (see
        :class:`RNNClassifier`).
    readout : {'auto', 'last', 'pool'}, default='auto'
        What the output layer reads: 'last', the state at each sequence's last valid
        step (the thesis), or 'pool', that state concatenated with the mean and the
        maximum of the states over all valid steps, so that what the network saw
        early in a sequence reaches the output without being carried to its end.
        'auto' is 'pool' for untimed sequences, and 'last' with ``time_feature`` (it
        scored higher on visit histories) or ``optimizer='simplex'``, whose temporal
        gradients need it ('pool' with 'simplex' is refused); see :ref:`defaults`.
    conv_kernels : tuple of int, list of int, None or 'auto', default='auto'
        Widths, in steps, of a convolutional input stage
        (:class:`~sklearn_rnn.nn.ConvStage`): each width gives ``conv_channels``
        features per step (a convolution over the neighbouring steps and a ReLU), and
        the first recurrent layer reads the features of all widths instead of the raw
        inputs, so that local shapes (a peak, a rise) reach the recurrence as one
        step. None: no stage. 'auto' is ``(3, 9)`` for untimed sequences with 'adam' or
        'sgd' whose median training length (after framing) is at least 18 steps, twice
        the widest kernel; None for shorter sequences (most windows would reach past
        their ends), with ``time_feature`` (steps are not evenly spaced) or with
        ``optimizer='simplex'`` (its temporal gradients cover the recurrent layers
        only; a stage with 'simplex' is refused); see :ref:`defaults`.
    conv_channels : int, default=32
        Features per kernel width of the convolutional stage.
    conv_pool : int or 'auto', default='auto'
        Steps per max-pooling window of the stage's features: the recurrence runs over
        ``ceil(length / conv_pool)`` steps, each reading the strongest response of every
        feature in its window, so the recurrence's share of an epoch costs about
        ``1 / conv_pool`` as much and a memory spans fewer steps. 'auto' is 2 when the
        median training length (after framing) is at least 64 steps, 1 (no pooling) on
        shorter sequences, whose label may sit in a single step; only with a stage (see
        :ref:`defaults`).
    bidirectional : bool, default=False
        Run every layer a second time over each sequence read backwards, with weights
        of its own, as ``torch.nn.GRU(bidirectional=True)`` does; the readout reads
        the forward state at the last step and the backward state at the first (the
        ends of both passes), and with 'pool' the mean and maximum of both. About twice
        the recurrence's cost. Not with ``optimizer='simplex'`` (its temporal gradients
        follow one direction of time) nor with a cell that reads the time between
        steps ('decay'). What it gave on the defaults' benchmark is on
        :ref:`defaults`.
    num_layers : int, default=1
        Stacked recurrent layers, each reading the states of the one below.
    dropout : float, default=0.0
        Probability of dropping a unit's output between layers and before the
        readout during training; the recurrence itself is never dropped (thesis
        2.2.5). Masks come from the seeded initialization, not the global generator.
    hidden_init : {'zero', 'learned'}, default='zero'
        The state before the first step: zero (the thesis), or a vector per layer
        (and direction) learned with the other weights (the LSTM also learns its
        initial cell state). Not available with cell='decay'.
    spectral_radius : float, None or 'auto', default='auto'
        Initialize the recurrent matrix with this spectral radius (thesis algorithm
        3.1); None uses PyTorch's default initialization; 'auto' is 1.2 for the
        'tanh', 'relu' and 'decay' cells and None for 'gru' and 'lstm' (see
        :class:`RNNClassifier`).
    optimizer : {'adam', 'sgd', 'simplex'}, default='adam'
        'sgd' is the thesis' anti-gradient with the clipped step rule (eq. 3.6);
        'simplex' the thesis' simplex method (see :class:`RNNClassifier`).
    learning_rate : float or 'auto', default='auto'
        Step size; 'auto' is 0.01 for 'adam' and 0.05 for 'sgd' and 'simplex' (see
        :class:`RNNClassifier`).
    clip_threshold : float or None, default=1.0
        Gradient-norm threshold; None never clips.
    switch_threshold : float or None, default=None
        ``psi`` of the simplex method (see :class:`RNNClassifier`).
    batch_size : int, default=32
        Sequences per update.
    max_iter : int, default=200
        Maximum number of epochs.
    early_stopping : bool or 'auto', default='auto'
        Stop on the validation loss of a held-out ``validation_fraction``; otherwise
        on the training loss. Either way the best epoch's weights are restored (with
        the training loss, as :class:`RNNClassifier` says) and the patience is counted
        only after ``3 * n_iter_no_change`` epochs. 'auto' holds out from 200 training
        sequences on (see :class:`RNNClassifier`).
    validation_fraction : float, default=0.1
        Share of the data held out for early stopping, drawn from the sequences of
        positive ``sample_weight`` (those of weight 0 train with the rest). The input
        encoding is fitted on all of ``X``, the held-out sequences included: the fill
        values of missing values, the time scale, the ``instance_norm`` statistics and
        the 'auto' settings read from ``X``, such as ``frame`` and ``instance_norm``
        (no label reaches them). The split is drawn from ``random_state`` on every call
        to ``fit``: with an int, a warm-started fit on the same data holds out the same
        sequences; with None or a ``RandomState``, each draws a new split (so its
        held-out sequences may have been trained on by the call before, and
        ``validation_scores_`` joins scores of different splits), as scikit-learn's
        ``MLPClassifier`` does.
    n_iter_no_change : int, default=10
        Patience, in epochs, counted after a warm-up of ``3 * n_iter_no_change``
        epochs.
    tol : float or 'auto', default='auto'
        Smallest improvement of the monitored loss that counts, for the patience and
        for the best epoch kept: 'auto' is 3e-3 for
        untimed sequences with the 'adam' or 'sgd' optimizer and 1e-4 with
        ``time_feature`` and with ``optimizer='simplex'`` (see :class:`RNNClassifier`).
    alpha : float or 'auto', default='auto'
        Strength of the L2 penalty on the weight matrices (not biases, decay rates
        or learned initial states): ``alpha / (2 n_samples) * ||W||^2`` is added to the mean training loss,
        ``n_samples`` the sequences a training call trains on, so its weight against
        the data shrinks as the data grows (``alpha / n_samples`` is 0.05 at
        ``alpha=10`` for 200 sequences, 0.001 for 10,000; scikit-learn's MLP divides
        by each batch's size instead). Each ``partial_fit`` call divides by its own
        sequences: a stream of small calls is penalized more than one ``fit`` on all
        of them (chunks of 4 of 64 sequences: 16 times), so lower ``alpha`` for it.
        'auto' is 10 for the 'decay' cell and 0 for the others: the 'decay' cell
        keeps its memory in its relaxation rates, which are not
        penalized, while the other cells keep it in the recurrent weights that a
        penalty shrinks (on small noisy data such as clinical visit histories the
        penalty is what keeps the 'decay' cell from overfitting; on a task that needs
        the first of 2-8 steps, 120 training sequences, ``alpha=10`` cost the 'decay'
        cell 2.5 points of test accuracy and the 'tanh' and 'gru' cells 13 and 43).
        Not used by ``optimizer='simplex'``, whose directions combine the temporal
        gradients of the data loss.
    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where to train: 'auto' takes a GPU when PyTorch sees one. 'cuda' without a GPU
        raises a ValueError (no silent fallback to the CPU).
    precision : {'float32', 'bfloat16', 'float16'}, default='float32'
        Arithmetic of training. 'bfloat16' and 'float16' are mixed precision: the
        parameters and the optimizer stay in float32, the forward pass runs under
        :func:`torch.autocast` in that type and the loss in float32. 'float16' also
        scales the loss with a :class:`torch.amp.GradScaler`: gradients (and the
        simplex method's temporal gradients) are unscaled before the clipping rule, and
        an update whose gradients overflow is skipped; it needs a GPU. 'bfloat16' has
        float32's range (no scaling) and runs on the CPU too, where the simplex
        method's step-by-step recurrence stays in float32 (with ``cell='lstm'`` only on
        a CPU with bfloat16 instructions: elsewhere it is refused); on a GPU cuDNN's
        recurrence runs in float32 (PyTorch's autocast would run it in unscaled
        float16). Prediction is
        unaffected (float64). On a GPU, 'float32' follows PyTorch's TensorFloat-32
        settings (``torch.backends.cuda.matmul.allow_tf32``,
        ``torch.backends.cudnn.allow_tf32``),
        which the estimator leaves as they are.
    random_state : int, RandomState instance or None, default=None
        Seeds every random draw through local generators.
    verbose : int, default=0
        Print losses per epoch and show a progress bar.
    warm_start : bool, default=False
        Continue training the fitted network on the next call to ``fit``. The
        step size, batch size, thresholds, ``alpha`` and stopping rule take their
        current values; a changed parameter that shaped the network or chose the
        optimizer (``hidden_size``, ``cell``, ``num_layers``, ``dropout``,
        ``hidden_init``, ``spectral_radius``, ``time_feature``, ``frame``,
        ``instance_norm``, ``readout``, ``conv_kernels``, ``conv_channels``,
        ``conv_pool``, ``bidirectional``, ``optimizer``, ``device``) is refused with a ValueError (as by
        ``partial_fit``): refit afresh for those.

    callbacks : list of (str, skorch callback) or None, default=None
        Your own skorch callbacks, as ``(name, callback)`` pairs, run by the training
        engine after its own (gradient clipping, the validation score, the training
        guard) and before its stopping rule, whose best epoch is restored before their
        ``on_train_end`` (a ``TrainEndCheckpoint`` saves the weights kept); a scorer may
        not write under the history's own records (``name='valid_loss'``, ...):
        a :class:`skorch.callbacks.LRScheduler`,
        :class:`~skorch.callbacks.Checkpoint` (which saves; to resume, continue the fitted
        estimator with ``warm_start`` or ``partial_fit``: a
        :class:`~skorch.callbacks.LoadInitState` is refused),
        :class:`~skorch.callbacks.EarlyStopping` (which ends training as the built-in rule does; leave its ``load_best`` False:
        ``fit`` refuses a callback that loads weights of its own as training ends,
        since the rule restores its best epoch itself), an
        :class:`~skorch.callbacks.EpochScoring` (with its default ``use_caching=True``
        for a scorer by name or object; a plain callable may turn caching off, and is then
        called with ``y=None``) or a logger. Training uses deep copies, so the objects given here
        are never changed (what cannot be deep-copied, a logger's open file or lock,
        is shared with the copy, and keeps the fitted estimator from being pickled:
        ``set_params(callbacks=None)`` first); they are made when the network is built and again when the
        training settings change (a stream of ``partial_fit`` calls, or warm-started
        fits, keep them with their state; a change of ``verbose`` only adds or removes
        the epoch table and progress bar). Every training call starts at
        ``learning_rate`` and runs the schedule of a
        :class:`~skorch.callbacks.LRScheduler` from its start, as a first fit does
        (unless the callback names its own ``last_epoch``): what a scheduler did to the
        step size does not carry over to the next call (over a stream of ``partial_fit``
        calls, lower ``learning_rate`` with ``set_params`` between calls). The fitted
        ones are in ``net_.callbacks_``. A scorer of an
        :class:`~skorch.callbacks.EpochScoring` reads the network's own targets and
        outputs, which are standardized (``neg_mean_squared_error`` is then in units of
        the targets' variance; ``r2`` is the same in either unit). The names 'clip',
        'valid_score', 'train_objective', 'guard', 'stop' and 'progress' are the
        engine's own, and 'epoch_timer', 'train_loss', 'valid_loss' and 'print_log'
        skorch's. ``set_params(callbacks__<name>__<parameter>=...)`` sets one
        callback's parameter, as skorch does (a grid searches over it). With
        ``optimizer='simplex'``, a callback that acts on the gradients (overrides
        ``on_grad_computed``, as :class:`~skorch.callbacks.GradientNormClipping` does)
        is refused: the simplex step is built from the per-step gradients, so clip it
        with ``clip_threshold``. A model with callbacks is not saved by :meth:`save`
        (they are code); use pickle or joblib for it.

    Attributes
    ----------
    n_features_in_ : int
        Features per step (for a 2D table input: its number of columns).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen in fit, when they are all strings: the columns of
        a DataFrame table, or of the DataFrames that held the sequences (a list of
        frames or a panel). Prediction refuses other names or another order.
    n_outputs_ : int
        Targets per sequence.
    n_iter_ : int
        Epochs run by the last call to ``fit``; after ``partial_fit``, the epochs of
        ``net_.history``, every call's (a ``fit`` before them included), as
        ``loss_curve_`` counts them.
    loss_curve_ : list of float
        Training loss of every epoch (standardized targets), without the L2 penalty of
        ``alpha``; the penalized loss is ``net_.history[:, 'train_objective']`` when
        there is a penalty.
    validation_scores_ : list of float or None
        Validation R^2 of every epoch when ``early_stopping``, weighted by
        ``sample_weight`` as the validation loss is.
    best_validation_score_ : float or None
        Validation R^2 of the restored epoch.
    best_validation_loss_ : float or None
        Validation loss of the restored epoch.
    best_epoch_ : int or None
        The restored epoch (1-based, over ``net_.history``) when ``early_stopping``;
        None otherwise and after ``partial_fit`` (a property).
    branch_counts_ : dict of str to int or None
        Updates that took each branch of the simplex method (``'simplex'``,
        ``'descent_fallback'``, ``'switched'``, ``'skipped'``) for
        ``optimizer='simplex'``, kept by a saved model; None otherwise (a property).
    module_ : sklearn_rnn.nn.RecurrentNetwork
        The trained network.
    net_ : skorch.NeuralNet
        The training engine, a supported, readable skorch net: its ``history`` (every
        epoch's losses and scores), ``callbacks_`` (the fitted callbacks, yours
        included), ``optimizer_`` and ``module_``. Read it; train through the
        estimator (``fit``, ``partial_fit``), which owns its settings.

    Notes
    -----
    Training stops with a ``ConvergenceWarning`` when the loss (or, with early
    stopping, the validation loss or score) becomes non-finite, and keeps the weights
    of the best finished epoch (of the monitored loss, as at the end of training), not
    merely the last finite one; an interrupt (Ctrl-C) during ``fit``
    ends training as after the last finished epoch (``n_iter_`` and ``loss_curve_``
    count up to it) and, as at the end of training, keeps the best epoch's weights,
    with a warning. Inside ``cross_val_score`` or a search run in one process, a
    Ctrl-C so ends only the fit in progress, and the search goes on, scoring that
    shortened fit among the others.
    Where no epoch lowered the training loss below that of the weights training
    started from, ``fit`` keeps those and says so with a ``ConvergenceWarning``.
    ``fit`` and ``partial_fit`` are transactional: a call that
    is rejected or fails, or is interrupted before its first epoch finishes (the
    interrupt is raised again, so Ctrl-C also ends a loop of ``partial_fit`` calls),
    leaves the estimator exactly as it was, unfitted if it was. A prediction in another
    thread while a fit runs uses the model from before it, except while training
    continues (``warm_start`` or ``partial_fit``), which trains the fitted network in
    place: such a prediction reads the running epoch's weights. A fit's state replaces
    the estimator's whole when it ends, parameters included: ``set_params`` (or a
    ``set_*_request``) called from another thread while it runs is undone; set them
    between calls. In a joblib or Dask worker, training uses that worker's share of
    the CPU threads (see :doc:`/scaling`).

    Fitted models pickle, and load with ``pickle`` or ``joblib``; loading a pickle runs
    code, so load only pickles you trust. :meth:`save` and :func:`sklearn_rnn.load`
    write and read a safetensors file that runs no code when loaded and is verified
    in full (see :ref:`saving`).

    See Also
    --------
    RNNClassifier : The same network for class labels.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.uniform(size=(rng.integers(3, 9), 1)) for _ in range(80)]
    >>> y = np.array([x.sum() for x in X])
    >>> reg = RNNRegressor(hidden_size=16, max_iter=40, random_state=0).fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
    >>> bool(reg.score(X, y) > 0.8)
    True

    Mixed precision: bfloat16 arithmetic in training (on the CPU or a GPU), float32
    parameters, float64 predictions:

    >>> half = RNNRegressor(hidden_size=16, max_iter=40, precision="bfloat16",
    ...                     device="cpu", random_state=0).fit(X, y)
    >>> half.predict(X[:3]).dtype, bool(half.score(X, y) > 0.8)
    (dtype('float64'), True)
    """

    def _encode_targets(
        self, y: Any, *, reset: bool, classes: Any = None, weight: np.ndarray | None = None,
        lengths: list[int] | None = None,
    ) -> np.ndarray:
        dates = dates_dtype(y)
        if dates is not None:
            _refuse_dates("y", dates, fix=(
                "Convert them to numbers in a unit of your choice, e.g. days: np.asarray(y, "
                "dtype='timedelta64[ns]') / np.timedelta64(1, 'D') for durations, "
                "(np.asarray(y, dtype='datetime64[ns]') - origin) / np.timedelta64(1, 'D') for "
                "dates, with origin a fixed date such as np.datetime64('2000-01-01'); "
                "predictions then come in that unit."
            ))
        try:
            y = check_array(y, ensure_2d=False, allow_nd=True, dtype=np.float64, input_name="y",
                            ensure_all_finite=False)
        except OverflowError as error:  # a Python int past float64's range
            raise integer_overflow("y", error, "y") from error
        except ValueError as error:
            text = _first_text(y)
            if text is None:
                raise
            raise ValueError(
                f"{type(self).__name__} needs numeric targets, but y holds text such as "
                f"{text!r}. For class labels use RNNClassifier; otherwise convert y to "
                "numbers first."
            ) from error
        finite = np.isfinite(y.reshape(len(y), -1)).all(axis=1)  # (n,)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            kind = "NaN" if np.isnan(y).any() else "an infinite value"
            raise ValueError(
                f"y holds {kind}: the targets of {len(bad)} of {len(y)} sequences are not "
                f"finite (first: sequence {bad[0]}). Expected a finite target for every "
                "sequence: drop those sequences from X and y together, or fill in their "
                "targets."
            )
        if y.ndim > 2:
            raise ValueError(
                f"y has shape {y.shape}: expected (n_samples,) or (n_samples, n_outputs). "
                "Flatten the targets of each sequence, e.g. y.reshape(len(y), -1)."
            )
        outputs = y.reshape(len(y), -1)
        if reset:
            self._y_ndim = y.ndim
            self.n_outputs_ = outputs.shape[1]
            mean, std, flat = _target_moments(outputs, weight)
            self._y_mean = mean
            self._y_scale = np.where(flat, 1.0, std)
        elif outputs.shape[1] != self.n_outputs_:
            raise ValueError(_wrong_outputs(outputs.shape[1], self.n_outputs_, ""))
        with np.errstate(over="ignore", invalid="ignore"):
            standardized = (outputs - self._y_mean) / self._y_scale
            if not np.isfinite(standardized).all():  # the difference overflowed
                standardized = outputs / self._y_scale - self._y_mean / self._y_scale
        if not (np.abs(standardized) <= np.finfo(np.float32).max).all() and reset:
            row = int(np.flatnonzero(~(np.abs(standardized) <= np.finfo(np.float32).max).all(axis=1))[0])
            given = "" if weight is None else f" (weight {float(weight[row]):g})"
            raise ValueError(
                f"y spans more than float32, the type the network trains in, holds once standardized "
                f"(mean {self._y_mean.tolist()}, scale {self._y_scale.tolist()}): the target of sequence "
                f"{row}{given}, {outputs[row].tolist()}, lies beyond it. Rescale y (e.g. np.log1p for "
                "heavy tails), or drop that sequence from X and y: a weight of 0 leaves it in the data."
            )
        if not (np.abs(standardized) <= np.finfo(np.float32).max).all():
            raise ValueError(
                "y, standardized with the mean and scale of the targets of the first fit "
                f"(mean {self._y_mean.tolist()}, scale {self._y_scale.tolist()}), goes beyond "
                "float32's range, the type the network trains in: expected targets on the "
                "scale of the first fit. Refit from scratch (warm_start=False), or rescale y."
            )
        return standardized

    @property
    def _n_outputs(self) -> int:
        return self.n_outputs_

    def _criterion(self) -> torch.nn.Module:
        return torch.nn.MSELoss(reduction="none")

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.as_tensor(y, dtype=torch.float32, device=device)

    @staticmethod
    def _validation_score(y_true: np.ndarray, outputs: np.ndarray, sample_weight: np.ndarray | None) -> float:
        return float(r2_score(y_true, outputs, sample_weight=sample_weight))

    _min_held_out = 2  # R2 of one target is undefined (NaN), which read as a divergence

    @_partial_fit_context
    def partial_fit(self, X: Any, y: Any, sample_weight: Any = None) -> RNNRegressor:
        """Train for one epoch over ``X`` (one update when it holds at most ``batch_size``).

        The first call builds the network (and fixes the target standardization from
        its ``y``: give it several targets that differ, or the scale is 1, ``y``'s own
        unit, which it warns of); later calls continue from the current weights. The first call also
        fixes the input encoding (see :class:`~sklearn_rnn.sequences.InputEncoder`)
        from its ``X``: the fill values of missing values, whether mask channels are
        used, the time scale of a ``time_feature`` (give it sequences of two or more
        steps at different times) and the statistics of ``instance_norm``, and
        resolves the 'auto' settings that read the data (``frame``, ``conv_pool``,
        ``instance_norm``) from its batch alone: set them for a stream whose first batch
        is not typical of its lengths. Stopping rules and early stopping do not apply.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), optional
            Weight of each sequence in this call's loss, as given (not rescaled, so
            that the weights of different calls compare).

        Returns
        -------
        self : object
        """
        first = not hasattr(self, "net_")
        self._fit(X, y, sample_weight, incremental=True)
        if first:  # as the fit weighed them (validated by now)
            outputs = np.asarray(readable_targets(y), dtype=np.float64).reshape(_n_targets(y), -1)
            weight = self._check_sample_weight(sample_weight, len(outputs), X)
            flat = np.flatnonzero(_target_moments(outputs, weight)[2])
            if flat.size:
                which = "targets" if outputs.shape[1] == 1 else f"targets of outputs {flat.tolist()}"
                warnings.warn(
                    f"{type(self).__name__}.partial_fit: the first call's {which} have no spread "
                    "among the sequences that weigh, so the target standardization keeps scale 1, "
                    "y's own unit, for every later call, and the model depends on that unit. Give "
                    "the first call a batch of several differing targets, or standardize y yourself.",
                    UserWarning, stacklevel=outside_stacklevel(),
                )
        return self

    @reads_one_model
    def predict(self, X: Any) -> np.ndarray:
        """Predicted targets of each sequence.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_outputs)
            The shape of ``y`` in :meth:`fit`.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            outputs = self._forward(X) * self._y_scale + self._y_mean
        if not np.isfinite(outputs).all():
            raise ValueError(
                "the predictions, on the scale of the training targets (scale "
                f"{self._y_scale.tolist()}), go beyond float64's range (about 1.8e308): "
                "expected targets of a magnitude whose predictions can be represented. "
                "Divide y by a large constant before fitting (e.g. y / 1e300) and multiply "
                "the predictions back where the numbers fit."
            )
        return outputs.ravel() if self._y_ndim == 1 else outputs

    @reads_one_model
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Coefficient of determination R^2, weighted by non-negative ``sample_weight``.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights, not all zero.

        Returns
        -------
        float
        """
        y = readable_targets(y)
        check_targets_follow_instances(X, y)
        _check_one_target_per_sequence(y, self)
        _refuse_missing(y, "y", "target")  # numpy's "inhomogeneous shape" before
        if hasattr(self, "n_outputs_"):
            try:
                width = np.asarray(y, dtype=float).reshape(_n_targets(y), -1).shape[1]
            except (TypeError, ValueError):
                width = self.n_outputs_  # not numbers: r2_score's own checks say so
            if width != self.n_outputs_:
                raise ValueError(_wrong_outputs(width, self.n_outputs_, ""))
        predicted = self.predict(X)
        return float(r2_score(y, predicted, sample_weight=self._score_weight(sample_weight, y, X, predicted)))

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
