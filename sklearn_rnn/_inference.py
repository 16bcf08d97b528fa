"""Running a network over data: the one inference loop, and where its outputs are read.

:func:`run_network` runs a network over a :class:`~sklearn_rnn.sequences.SequenceDataset`
in length-bucketed batches and returns its outputs, un-padded, in the order it ran them.
Prediction (``BaseRNN._forward``) and the validation score of early stopping both call it;
training steps go through the skorch engine (``sklearn_rnn/_engine.py``).

Where the network is read out is a hook of the estimator class, a :class:`OutputSteps`:
:data:`LAST_STEP` (one output per sequence, at its last valid step: ``RNNClassifier``,
``RNNRegressor``) or :data:`EVERY_STEP` (an output at every step: ``RNNStepClassifier``).
The output steps say how the module is called, how the loss is reduced over a batch, how
outputs are un-padded and checked; the base class, the engine's loss and the diagnostics
ask it instead of branching on a flag.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from .sequences import SequenceDataset, bucket_batches

__all__ = ["EVERY_STEP", "LAST_STEP", "OutputSteps", "check_finite_outputs", "run_network"]


#: A module's hook registries that its forward and backward passes run.
HOOK_KINDS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def module_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``module`` whose hooks are the original's own objects.

    :func:`copy.deepcopy` copies a module's hooks with it, and a hook that is a bound
    method, a callable object or a :func:`functools.partial` with it the object that
    records what it sees: a recorder registered on ``module_`` filled a throwaway copy
    during ``predict``. The copy's hooks are the ones registered, run on the copy,
    except those that belong to the module's own tree (a submodule used as a hook, or a
    method bound to one): those are copied with it, bound to their copies, so that a
    hook reading its module reads the copy and a conversion of the copy reaches no
    part of the original.

    Parameters
    ----------
    module : torch.nn.Module

    Returns
    -------
    torch.nn.Module
    """
    tree = {id(sub) for sub in module.modules()}
    memo: dict[int, Any] = {}
    for sub in module.modules():
        for kind in HOOK_KINDS:
            for hook in getattr(sub, kind, {}).values():
                if id(hook) not in tree and id(getattr(hook, "__self__", None)) not in tree:
                    memo[id(hook)] = hook
    return copy.deepcopy(module, memo)


class OutputSteps:
    """Where a network is read out: at each sequence's last valid step, or at every step.

    Parameters
    ----------
    every_step : bool
        Read out (and put the loss) at every valid step instead of the last one.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn._inference import EVERY_STEP, LAST_STEP
    >>> values = np.arange(12.0).reshape(2, 3, 2)  # (B, T, k) of a per-step readout
    >>> [part.shape for part in EVERY_STEP.unpad(values, [3, 1])]
    [(3, 2), (1, 2)]
    >>> LAST_STEP.unpad(values[:, 0], [3, 1]).shape
    (2, 2)
    """

    def __init__(self, every_step: bool) -> None:
        self.every_step = every_step

    def __repr__(self) -> str:
        return "EVERY_STEP" if self.every_step else "LAST_STEP"

    def __reduce__(self) -> str:
        return repr(self)  # pickled as the module-level constant, so identity holds

    def unpad(self, values: np.ndarray, lengths: list[int]) -> Any:
        """A batch's outputs without padding: ``(B, k)`` as is, or one ``(T_i, k)`` array
        per sequence of a ``(B, T, k)`` per-step batch."""
        if not self.every_step:
            return values
        return [values[row, :length] for row, length in enumerate(lengths)]

    def join(self, parts: list[Any]) -> Any:
        """The un-padded outputs of several batches (at least one), in order: an
        ``(n, k)`` array, or a list of ``(T_i, k)`` arrays."""
        if self.every_step:
            return [output for part in parts for output in part]
        return np.concatenate(parts)

    def place(self, outputs: Any, positions: np.ndarray, values: Any) -> None:
        """Put outputs of the sequences at ``positions`` into ``outputs`` (in data order)."""
        if not self.every_step:
            outputs[positions] = values
            return
        for position, value in zip(positions.tolist(), values):
            outputs[position] = value

    def allocate(self, n_samples: int, n_outputs: int) -> Any:
        """Room for the outputs of ``n_samples`` sequences, filled by :meth:`place`."""
        if self.every_step:
            return [None] * n_samples
        return np.empty((n_samples, n_outputs), dtype=np.float64)

    def finite(self, outputs: Any) -> np.ndarray:
        """Whether each sequence's outputs are all finite, a bool array of shape (n,)."""
        if not self.every_step:
            return np.isfinite(outputs).reshape(len(outputs), -1).all(axis=1)
        return np.array([np.isfinite(output).all() for output in outputs], dtype=bool)

    def loss_terms(self, targets: Any) -> np.ndarray | None:
        """Each sequence's count of loss terms, from its ``targets``: its steps at every
        step; None for one term each."""
        if not self.every_step:
            return None
        return np.array([len(target) for target in targets], dtype=np.float64)

    def check_finite(self, outputs: Any, *, bounded_state: bool = True) -> None:
        """Refuse non-finite outputs as predictions (see ``check_finite_outputs``)."""
        if not self.every_step:
            check_finite_outputs(outputs, bounded_state=bounded_state)
            return
        check_finite_outputs(np.where(self.finite(outputs), 0.0, np.nan)[:, None], bounded_state=bounded_state)

    def loss(
        self,
        criterion: torch.nn.Module,
        y_pred: torch.Tensor,
        y_true: torch.Tensor,
        X: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """The batch's loss: the mean over the batch of each sequence's weight times its
        criterion, or at every step the criterion summed over the ``k`` outputs (eq. 4.2
        sums the cross-entropy of the notes), weighted per sequence and averaged over
        valid steps. Not divided by the weights' sum: a fit's weights have a mean of 1
        (:func:`~sklearn_rnn._estimators._relative`), and ``partial_fit``'s weigh its
        calls against each other."""
        if not self.every_step:
            per_sample = criterion(y_pred, y_true)  # (B,) or (B, k)
            if per_sample.ndim > 1:
                per_sample = per_sample.mean(dim=tuple(range(1, per_sample.ndim)))
            weight = X["sample_weight"] if X is not None else torch.ones_like(per_sample)
            # Selected, not only multiplied: a weighted-out sequence's loss that is not
            # finite (a target of 1e20 standardized, squared) made 0 * inf NaN.
            return (torch.where(weight > 0, per_sample, 0.0) * weight).mean()
        if X is None:
            raise ValueError("a loss at every step needs the batch's lengths: pass X=inputs.")
        per_step = criterion(y_pred, y_true).sum(dim=-1)  # (B, T)
        lengths = X["lengths"].to(per_step.device)
        valid = torch.arange(per_step.shape[1], device=per_step.device) < lengths[:, None]
        # Selected, not multiplied by the mask: a padded step's loss that is not finite
        # (an output read from an overflowed state) would make 0 * inf NaN.
        weight = X["sample_weight"].to(per_step.dtype)[:, None]  # (B, 1)
        valid_loss = torch.where(valid & (weight > 0), per_step, 0.0)  # (B, T); weighted out too
        weighted = valid_loss * weight  # (B, T)
        return weighted.sum() / valid.sum()


#: One output per sequence, at its last valid step.
LAST_STEP = OutputSteps(every_step=False)

#: An output at every valid step of each sequence.
EVERY_STEP = OutputSteps(every_step=True)


def run_network(
    module: torch.nn.Module,
    dataset: SequenceDataset,
    *,
    batch_size: int,
    steps: OutputSteps,
    targets: bool = False,
    max_padding: float | None = None,
) -> tuple[np.ndarray, Any, Any]:
    """Run ``module`` over ``dataset`` in length-bucketed batches, without gradients.

    The module is evaluated in inference mode (no dropout) and its training mode is
    restored afterwards; each batch is moved to the module's device. Outputs come back
    as float64 numpy arrays, in the order the batches ran (sorted by length), with the
    positions they have in ``dataset``.

    Parameters
    ----------
    module : torch.nn.Module
        A :class:`~sklearn_rnn.nn.RecurrentNetwork` (or any module called as
        ``module(x, lengths, every_step=...)``).
    dataset : SequenceDataset
        The encoded sequences (and, for ``targets=True``, their targets).
    batch_size : int
        Sequences per batch.
    steps : OutputSteps
        :data:`LAST_STEP` or :data:`EVERY_STEP`.
    targets : bool, default=False
        Also return the dataset's targets, un-padded and in the same order.
    max_padding : float, optional
        Bound each batch's padded steps to this many times its valid steps
        (:func:`~sklearn_rnn.sequences.bucket_batches`); prediction passes 2.

    Returns
    -------
    order : ndarray of int of shape (n_samples,)
        Position in ``dataset`` of each output.
    outputs : ndarray of shape (n_samples, n_outputs) or list of ndarray of shape (T_i, n_outputs)
    y : same form as ``outputs``, or None
        The targets (only with ``targets=True``).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.sequences import FlatSequences, SequenceDataset
    >>> from sklearn_rnn._inference import LAST_STEP, run_network
    >>> data = SequenceDataset(FlatSequences.from_arrays([np.ones((n, 2)) for n in (3, 1, 2)]))
    >>> net = RecurrentNetwork(2, 4, 1, generator=torch.Generator().manual_seed(0))
    >>> order, outputs, _ = run_network(net, data, batch_size=2, steps=LAST_STEP)
    >>> order.tolist(), outputs.shape, outputs.dtype
    ([1, 2, 0], (3, 1), dtype('float64'))
    """
    was_training = module.training
    module.train(False)
    device = next(module.parameters()).device  # a dataset encoded elsewhere is moved batch by batch
    order, parts, target_parts = [], [], []
    try:
        with torch.no_grad():
            lengths_all = dataset.sequences.lengths.cpu().numpy()
            for indices in bucket_batches(lengths_all, int(batch_size), max_padding=max_padding):
                inputs, y = dataset.collate(indices)
                lengths = inputs["lengths"].tolist()
                x, batch_lengths = inputs["x"].to(device), inputs["lengths"].to(device)
                batch = module(x, batch_lengths, every_step=steps.every_step)
                order.append(indices)
                parts.append(steps.unpad(batch.double().cpu().numpy(), lengths))
                if targets:
                    # Per-step targets as float64 (the scores' arithmetic); one target
                    # per sequence keeps its type (class indices stay integers).
                    values = y.double() if steps.every_step else y
                    target_parts.append(steps.unpad(values.cpu().numpy(), lengths))
    finally:
        module.train(was_training)
    if not order:
        raise ValueError("run_network needs at least one sequence; the dataset is empty.")
    y_out = steps.join(target_parts) if targets else None
    return np.concatenate(order), steps.join(parts), y_out


def check_finite_outputs(outputs: Any, *, bounded_state: bool = True) -> None:
    """Refuse to return non-finite network outputs as predictions.

    The guard keeps the weights finite, and no sequence's padding reaches its outputs;
    a non-finite output then comes from the sequence itself: values so large that they
    overflow where the network reads them (the input projection or convolutional stage),
    even in float64, or, for a cell whose state is not bounded ('relu'), a sequence so
    long that the state overflows.

    Parameters
    ----------
    outputs : ndarray of shape (n_samples, n_outputs)
    bounded_state : bool, default=True
        Whether every layer's cell keeps its state bounded
        (:attr:`~sklearn_rnn.nn.Cell.bounded_state`): then only the input values can
        have overflowed, and the message gives no advice about the cell.

    Raises
    ------
    ValueError
        Naming the sequences, the cause and the fix.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn._inference import check_finite_outputs
    >>> check_finite_outputs(np.zeros((2, 1)))
    >>> check_finite_outputs(np.array([[0.0], [np.nan]]))
    Traceback (most recent call last):
    ...
    ValueError: the network's outputs for 1 sequence (first: sequence 1 of X) are not finite...
    """
    finite = np.isfinite(outputs).all(axis=1)
    if finite.all():
        return
    bad = np.flatnonzero(~finite)
    plural = "s" if len(bad) > 1 else ""
    cause = "their values overflowed where the network reads them (its input projection or convolutional stage)"
    fix = ""
    if not bounded_state:  # the cell advice only where the state itself can overflow
        cause += ", or the network's state, which is not bounded, overflowed over their steps"
        fix = (", and prefer a cell whose state is bounded (cell='tanh' or 'gru') or a smaller "
               "spectral_radius for long sequences")
    raise ValueError(
        f"the network's outputs for {len(bad)} sequence{plural} (first: sequence {bad[0]} "
        f"of X) are not finite: {cause}, even in float64. Expected inputs on the scale of "
        f"the training data: scale them (e.g. with SequenceStandardScaler){fix}."
    )
