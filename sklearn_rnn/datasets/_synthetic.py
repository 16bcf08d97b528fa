"""Synthetic long-memory tasks of Hochreiter & Schmidhuber (thesis appendix B).

The generators follow the original code of the thesis rather than the letter of
its appendix where the two disagree:

* the actual length is ``L = length + randint(floor(length / 10))``, drawn once
  per call (the original shared it across a batch), or once per sequence with
  ``variable_length=True``;
* the first marker lies in ``[0, floor(L/10))`` and the second in
  ``[floor(L/10), floor(L/2))``, positions counted from 0 (the appendix says
  ``[0.4 L, 0.5 L]``; the code did not); in short sequences an interval is pushed
  to start after the previous one and to hold at least one position, so for
  ``L < 10`` the first marker is at step 0;
* the values of the addition and multiplication tasks are drawn from ``U[0, 1)``.

Every generator returns ``(X, y)`` where ``X`` is the package's sequence
container: a list of 2D float64 arrays of shape ``(T_i, d)``.
"""

from __future__ import annotations

from numbers import Real
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "make_addition",
    "make_multiplication",
    "make_xor",
    "make_temporal_order",
    "task_error",
]

RandomStateLike = int | np.random.Generator | np.random.RandomState | None
Task = Literal["addition", "multiplication", "xor", "temporal_order"]

#: Bounds of the marker intervals as fractions of the sequence length L.
#: The first two are those of the original code; the third (three-symbol
#: temporal order only) follows Hochreiter & Schmidhuber (1997), who put it
#: around 0.7 L.
_MARKER_FRACTIONS: tuple[tuple[float, float], ...] = ((0.0, 0.1), (0.1, 0.5), (0.5, 0.75))

_TASKS: tuple[str, ...] = ("addition", "multiplication", "xor", "temporal_order")


def _as_generator(random_state: RandomStateLike) -> np.random.Generator:
    """Turn a scikit-learn style ``random_state`` into a local Generator.

    An int seeds a fresh ``default_rng``; ``None`` gives an unseeded one; a
    ``Generator`` is used as is; a legacy ``RandomState`` seeds a new
    Generator from one draw, so results stay reproducible without touching
    any global state.
    """
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int seed; got {random_state}.")
        return np.random.default_rng(random_state)
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    raise TypeError(
        "random_state must be None, an int, a numpy.random.Generator or a "
        f"numpy.random.RandomState; got {type(random_state).__name__}. "
        "Pass an int seed for reproducible data."
    )


def _check_sizes(n_samples: int, length: int, min_length: int) -> tuple[int, int]:
    """Validate ``n_samples`` and ``length`` with errors that say how to fix them.

    Returns them as Python ints: a NumPy unsigned int would make index arrays that
    NumPy casts to float when mixed with signed ones.
    """
    for name, value, low in (("n_samples", n_samples, 1), ("length", length, min_length)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int; got {type(value).__name__} ({value!r}).")
        if value < low:
            raise ValueError(
                f"{name} must be at least {low}; got {value}. "
                + (
                    f"Each sequence needs one step per marker ({min_length})."
                    if name == "length"
                    else "Ask for one sample or more."
                )
            )
    return int(n_samples), int(length)


def _draw_lengths(
    random_state: RandomStateLike, n_samples: int, length: int, variable_length: bool
) -> tuple[np.random.Generator, NDArray[np.int64]]:
    """The generator of ``random_state`` and the actual lengths ``L = length +
    randint(floor(length / 10))``, shape (n_samples,), drawn from it.

    For ``length < 10`` the extra term is 0 (there is nothing to draw from).
    ``variable_length`` is checked before a ``RandomState`` is drawn from: a call
    refused leaves the caller's generator as it was.
    """
    if not isinstance(variable_length, (bool, np.bool_)):
        raise TypeError(
            "variable_length must be True or False (True: every sequence draws its own "
            f"length; False: one length per call); got {type(variable_length).__name__} "
            f"({variable_length!r})."
        )
    rng = _as_generator(random_state)
    extra_high = max(length // 10, 1)
    size = n_samples if variable_length else 1
    extra = rng.integers(0, extra_high, size=size)
    return rng, np.broadcast_to(length + extra, (n_samples,)).astype(np.int64)


def _marker_positions(
    rng: np.random.Generator, lengths: NDArray[np.int64], n_markers: int
) -> NDArray[np.int64]:
    """Draw ``n_markers`` strictly increasing positions per sequence, shape (n, n_markers).

    Marker ``k`` is uniform in ``[floor(f_lo L), floor(f_hi L))`` with the
    fractions of ``_MARKER_FRACTIONS``; each interval is pushed to start after
    the previous one and to hold at least one position, so short sequences
    still get distinct markers.
    """
    positions = np.empty((lengths.shape[0], n_markers), dtype=np.int64)
    previous_high = np.zeros_like(lengths)
    for k, (f_lo, f_hi) in enumerate(_MARKER_FRACTIONS[:n_markers]):
        low = np.maximum(np.floor(f_lo * lengths).astype(np.int64), previous_high)
        high = np.maximum(np.floor(f_hi * lengths).astype(np.int64), low + 1)
        offsets = np.floor(rng.random(lengths.shape[0]) * (high - low)).astype(np.int64)
        positions[:, k] = low + offsets
        previous_high = high
    return positions


def _split(padded: NDArray[np.float64], lengths: NDArray[np.int64]) -> list[NDArray[np.float64]]:
    """Cut a padded (n, T_max, d) array into the list-of-arrays container."""
    if np.all(lengths == padded.shape[1]):
        return list(padded)
    return [padded[i, :t] for i, t in enumerate(lengths)]


def _two_value_task(
    n_samples: int,
    length: int,
    random_state: RandomStateLike,
    variable_length: bool,
    binary: bool,
) -> tuple[list[NDArray[np.float64]], NDArray[np.float64], NDArray[np.float64]]:
    """Shared generator of the addition, multiplication and XOR tasks.

    Returns the container and the two marked values ``a`` and ``b``.
    """
    n_samples, length = _check_sizes(n_samples, length, 2)
    rng, lengths = _draw_lengths(random_state, n_samples, length, variable_length)
    t_max = int(lengths.max())
    padded = np.zeros((n_samples, t_max, 2))  # (n, T_max, [marker, value])
    if binary:
        padded[:, :, 1] = rng.integers(0, 2, size=(n_samples, t_max))
    else:
        padded[:, :, 1] = rng.random((n_samples, t_max))
    positions = _marker_positions(rng, lengths, 2)  # (n, 2)
    rows = np.arange(n_samples)[:, None]
    padded[rows, positions, 0] = 1.0
    marked = padded[rows, positions, 1]  # (n, 2)
    return _split(padded, lengths), marked[:, 0], marked[:, 1]


def make_addition(
    n_samples: int,
    length: int,
    *,
    variable_length: bool = False,
    random_state: RandomStateLike = None,
) -> tuple[list[NDArray[np.float64]], NDArray[np.float64]]:
    """Generate the addition task: average the two marked values.

    Each step holds ``[marker, value]`` with ``value ~ U[0, 1)``; the marker
    is 1 at exactly two steps, the first in ``[0, floor(L/10))`` and the second in
    ``[floor(L/10), floor(L/2))`` (steps counted from 0; for ``L < 10`` the first is
    at step 0 and the second in ``[1, max(floor(L/2), 2))``). The target is
    ``(a + b) / 2`` of the two marked values.
    A prediction counts as correct when it is within 0.04 of the target (see
    :func:`task_error`).

    Parameters
    ----------
    n_samples : int
        Number of sequences.
    length : int
        Minimal length ``T`` (at least 2). The actual length is
        ``L = T + randint(floor(T / 10))``.
    variable_length : bool, default=False
        If False, one ``L`` is drawn for the whole call (as the original code
        did for a batch); if True, every sequence draws its own ``L``.
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Seed or generator of a local random generator. No global state is used.

    Returns
    -------
    X : list of ndarray of shape (L_i, 2)
        The sequences, channel 0 the marker and channel 1 the value.
    y : ndarray of shape (n_samples,)
        The targets ``(a + b) / 2``.

    Examples
    --------
    >>> from sklearn_rnn.datasets import make_addition
    >>> X, y = make_addition(3, 20, random_state=0)
    >>> len(X), X[0].shape, y.shape
    (3, (21, 2), (3,))
    >>> [int(x[:, 0].sum()) for x in X]
    [2, 2, 2]
    >>> bool(np.allclose(y[0], X[0][X[0][:, 0] == 1, 1].mean()))
    True
    """
    X, a, b = _two_value_task(n_samples, length, random_state, variable_length, binary=False)
    return X, (a + b) / 2.0


def make_multiplication(
    n_samples: int,
    length: int,
    *,
    variable_length: bool = False,
    random_state: RandomStateLike = None,
) -> tuple[list[NDArray[np.float64]], NDArray[np.float64]]:
    """Generate the multiplication task: multiply the two marked values.

    Same inputs as :func:`make_addition` (``[marker, value]``, values
    ``U[0, 1)``, markers in ``[0, floor(L/10))`` and ``[floor(L/10), floor(L/2))``);
    the target is ``a * b``. Success uses the same 0.04 tolerance.

    Parameters
    ----------
    n_samples : int
        Number of sequences.
    length : int
        Minimal length ``T`` (at least 2). The actual length is
        ``L = T + randint(floor(T / 10))``.
    variable_length : bool, default=False
        If True, every sequence draws its own ``L`` instead of one per call.
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Seed or generator of a local random generator.

    Returns
    -------
    X : list of ndarray of shape (L_i, 2)
        The sequences, channel 0 the marker and channel 1 the value.
    y : ndarray of shape (n_samples,)
        The targets ``a * b``.

    Examples
    --------
    >>> from sklearn_rnn.datasets import make_multiplication
    >>> X, y = make_multiplication(2, 10, random_state=0)
    >>> X[0].shape
    (10, 2)
    >>> bool(np.isclose(y[0], np.prod(X[0][X[0][:, 0] == 1, 1])))
    True
    """
    X, a, b = _two_value_task(n_samples, length, random_state, variable_length, binary=False)
    return X, a * b


def make_xor(
    n_samples: int,
    length: int,
    *,
    variable_length: bool = False,
    random_state: RandomStateLike = None,
) -> tuple[list[NDArray[np.float64]], NDArray[np.int64]]:
    """Generate the XOR task: exclusive or of the two marked binary values.

    Same layout as :func:`make_addition` (``[marker, value]``, markers in
    ``[0, floor(L/10))`` and ``[floor(L/10), floor(L/2))``), but every value is 0 or
    1 and the target is ``a XOR b``.

    Parameters
    ----------
    n_samples : int
        Number of sequences.
    length : int
        Minimal length ``T`` (at least 2). The actual length is
        ``L = T + randint(floor(T / 10))``.
    variable_length : bool, default=False
        If True, every sequence draws its own ``L`` instead of one per call.
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Seed or generator of a local random generator.

    Returns
    -------
    X : list of ndarray of shape (L_i, 2)
        The sequences, channel 0 the marker and channel 1 the binary value
        (stored as float 0.0 or 1.0).
    y : ndarray of shape (n_samples,), dtype int64
        The targets, 0 or 1. Usable as class labels or as regression targets
        (the thesis scored a real-valued output with the 0.04 tolerance).

    Examples
    --------
    >>> from sklearn_rnn.datasets import make_xor
    >>> X, y = make_xor(4, 10, random_state=0)
    >>> sorted(np.unique(X[0][:, 1]).tolist())
    [0.0, 1.0]
    >>> a, b = X[0][X[0][:, 0] == 1, 1]
    >>> int(y[0]) == int(a) ^ int(b)
    True
    """
    X, a, b = _two_value_task(n_samples, length, random_state, variable_length, binary=True)
    return X, np.logical_xor(a, b).astype(np.int64)


def make_temporal_order(
    n_samples: int,
    length: int,
    *,
    n_symbols: int = 2,
    variable_length: bool = False,
    random_state: RandomStateLike = None,
) -> tuple[list[NDArray[np.float64]], NDArray[np.int64]]:
    """Generate the temporal order task: classify the order of the special symbols.

    Every step is a one-hot vector over the six symbols ``[X, Y, a, b, c, d]``.
    All steps hold a distractor ``a``-``d`` except ``n_symbols`` marker
    positions, each holding ``X`` or ``Y``. The class is the sequence of
    special symbols read as a binary number with ``X = 0`` and ``Y = 1``,
    the first marker being the most significant digit: with two symbols the
    classes 0, 1, 2, 3 are ``XX, XY, YX, YY``.

    Markers lie in ``[0, floor(L/10))``, ``[floor(L/10), floor(L/2))`` and, for the
    three-symbol variant of Hochreiter & Schmidhuber (1997) only,
    ``[floor(L/2), floor(3L/4))`` (steps counted from 0). In short sequences an
    interval is pushed to start after the previous one and to hold at least one
    step, so the markers stay distinct: for ``L < 10`` the first is at step 0.

    Parameters
    ----------
    n_samples : int
        Number of sequences.
    length : int
        Minimal length ``T`` (at least ``n_symbols``). The actual length is
        ``L = T + randint(floor(T / 10))``.
    n_symbols : {2, 3}, default=2
        Number of special symbols in each sequence: 2 gives 4 classes, 3 gives
        8 classes. The thesis describes the 3-symbol variant but its code
        only had 2.
    variable_length : bool, default=False
        If True, every sequence draws its own ``L`` instead of one per call.
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Seed or generator of a local random generator.

    Returns
    -------
    X : list of ndarray of shape (L_i, 6)
        One-hot sequences over ``[X, Y, a, b, c, d]``.
    y : ndarray of shape (n_samples,), dtype int64
        Class indices in ``[0, 2 ** n_symbols)``.

    Examples
    --------
    >>> from sklearn_rnn.datasets import make_temporal_order
    >>> X, y = make_temporal_order(5, 10, random_state=0)
    >>> X[0].shape, bool((X[0].sum(axis=1) == 1).all())
    ((10, 6), True)
    >>> special = X[0][:, :2].argmax(axis=1)[X[0][:, :2].sum(axis=1) == 1]
    >>> int(y[0]) == 2 * int(special[0]) + int(special[1])
    True
    """
    if not isinstance(n_symbols, (int, np.integer)) or isinstance(n_symbols, bool):
        raise ValueError(
            f"n_symbols must be the int 2 (4 classes) or 3 (8 classes); got {type(n_symbols).__name__} "
            f"{n_symbols!r}." + (" Pass int(n_symbols)." if isinstance(n_symbols, Real) else "")
        )
    if n_symbols not in (2, 3):
        raise ValueError(f"n_symbols must be 2 (4 classes) or 3 (8 classes); got {n_symbols!r}.")
    n_symbols = int(n_symbols)
    n_samples, length = _check_sizes(n_samples, length, n_symbols)
    rng, lengths = _draw_lengths(random_state, n_samples, length, variable_length)
    t_max = int(lengths.max())
    # Symbol codes: 0 = X, 1 = Y, 2..5 = a..d.
    codes = rng.integers(2, 6, size=(n_samples, t_max))  # (n, T_max)
    positions = _marker_positions(rng, lengths, n_symbols)  # (n, n_symbols)
    special = rng.integers(0, 2, size=(n_samples, n_symbols))  # (n, n_symbols), 0 = X
    codes[np.arange(n_samples)[:, None], positions] = special
    padded = np.eye(6)[codes]  # (n, T_max, 6)
    weights = 2 ** np.arange(n_symbols - 1, -1, -1)  # first marker most significant
    y = (special * weights).sum(axis=1).astype(np.int64)
    return _split(padded, lengths), y


def task_error(
    task: Task, y_true: ArrayLike, y_pred: ArrayLike, *, tolerance: float = 0.04
) -> float:
    """Error rate of predictions on a synthetic task, as the thesis scores it.

    For ``"addition"``, ``"multiplication"`` and ``"xor"`` a prediction is
    wrong when ``|y_pred - y_true| >= tolerance``. For ``"temporal_order"`` a
    prediction is wrong when its class differs from the target; ``y_pred``
    may hold class indices of shape (n,) or class scores of shape
    (n, n_classes), whose argmax is taken: column ``j`` must score class ``j``
    (scores with too few columns for the labels of ``y_true`` are refused, as
    ``predict_proba`` of a classifier that never saw some classes gives them; pass
    its ``predict`` then). The thesis counts a training run
    as successful when this error is below 1% on 10,000 validation sequences.

    Parameters
    ----------
    task : {"addition", "multiplication", "xor", "temporal_order"}
        The task the targets come from.
    y_true : array-like of shape (n_samples,)
        Targets returned by the matching ``make_*`` function.
    y_pred : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predictions. A trailing axis of size 1 is accepted for real-valued tasks.
    tolerance : float, default=0.04
        Tolerance of the real-valued tasks.

    Returns
    -------
    error : float
        Fraction of wrong predictions, in ``[0, 1]``.

    Examples
    --------
    >>> from sklearn_rnn.datasets import task_error
    >>> task_error("addition", [0.5, 0.5], [0.53, 0.6])
    0.5
    >>> task_error("temporal_order", [0, 3], [[0.9, 0.1, 0, 0], [0.1, 0.8, 0, 0.1]])
    0.5
    """
    if task not in _TASKS:
        raise ValueError(f"task must be one of {_TASKS}; got {task!r}.")
    if isinstance(tolerance, (bool, np.bool_)) or not isinstance(tolerance, Real):
        raise TypeError(
            "tolerance must be a positive number (0.04 in the thesis), the distance from the "
            f"target below which a prediction counts as right; got {type(tolerance).__name__} "
            f"({tolerance!r}). Pass a float such as 0.04."
        )
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive (0.04 in the thesis); got {tolerance!r}.")
    truth = np.asarray(y_true)
    pred = np.asarray(y_pred, dtype=float)
    if truth.ndim != 1 or truth.shape[0] == 0:
        raise ValueError(
            f"y_true must be a non-empty 1D array of shape (n_samples,); got shape {truth.shape}."
        )
    if task == "temporal_order" and pred.ndim == 2:
        if pred.shape[1] < 2:
            raise ValueError(
                f"y_pred has shape {pred.shape}: for 'temporal_order' expected class labels "
                "(n_samples,) or a score per class (n_samples, n_classes), n_classes >= 2."
            )
        if pred.shape[1] not in (4, 8) or (np.issubdtype(truth.dtype, np.number) and pred.shape[1] <= truth.max()):
            # Column j is read as class j: with fewer columns than labels (a classifier
            # whose classes_ are not 0..n_classes-1) argmax names the wrong classes.
            raise ValueError(
                f"y_pred has {pred.shape[1]} columns of class scores, and y_true holds classes up "
                f"to {truth.max()}: task_error reads column j as the score of class j, so the "
                "scores need a column for every class of the task (4, or 8 with three "
                "symbols; a classifier fitted without some class has fewer). Pass the predicted "
                "labels instead (clf.predict(X), which maps columns through clf.classes_), "
                "or train the classifier on every class (partial_fit(..., "
                "classes=np.arange(n_classes)))."
            )
        # A row of scores with a NaN (a diverged model) names no class: counted wrong,
        # as NaN counts in the other tasks (argmax would read class 0).
        pred = np.where(np.isnan(pred).any(axis=1), -1, pred.argmax(axis=1))
    elif pred.ndim == 2 and pred.shape[1] == 1:
        pred = pred[:, 0]
    if pred.shape != truth.shape:
        scores = (" For a classifier's scores, pass its labels, clf.predict(X), or the score of "
                  "class 1, clf.predict_proba(X)[:, 1]." if task == "xor" and pred.ndim == 2 else "")
        raise ValueError(
            f"y_pred must have one prediction per target, shape {truth.shape}"
            + (" or (n_samples, n_classes)" if task == "temporal_order" else "")
            + f"; got shape {np.asarray(y_pred).shape}.{scores}"
        )
    if task == "temporal_order":
        wrong = pred != truth
    else:
        wrong = ~(np.abs(pred - truth.astype(float)) < tolerance)  # NaN counts as wrong
    return float(np.mean(wrong))
