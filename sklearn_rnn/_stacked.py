"""Many small networks trained in one pass: every network of a grid search, stacked.

A cross-validated grid over ``spectral_radius`` and ``clip_threshold`` fits dozens of
networks of one architecture, each small (tens of units, batches of tens of sequences):
on a CPU each update of each network is a string of tiny operations whose cost is the
per-operation overhead, not the arithmetic. :func:`train_stacked` stacks the networks'
parameters along a leading *model* dimension and runs the update of all of them as one
program: the networks' own forward code (:class:`~sklearn_rnn.nn.RecurrentNetwork`,
called through :func:`torch.func.functional_call`) vectorized over the models with
:func:`torch.func.vmap`, one backward pass for all, and a per-model update.

What stacks: every cell of the package ('tanh', 'relu', 'gru', 'lstm', 'decay'), with
any number of layers. vmap has no rule for PyTorch's fused recurrent kernels
(``torch.rnn_tanh``, ``torch.gru``, ``torch.lstm``), so the stack runs
its own copy of the network with :attr:`~sklearn_rnn.nn.RecurrentNetwork.vectorizable`
switched on: each layer is then the cell's loop over steps in plain tensor operations
(:meth:`~sklearn_rnn.nn.Cell.forward_vectorizable`, the kernel's equations, gate order
and parameters), the same function up to float32 rounding. ``fit`` and prediction keep
the fused kernel. The time-aware 'decay' cell is written in plain operations anyway.

Nothing about an individual network changes. Each member is an estimator prepared by
its own training routine (``BaseRNN._prepare``: validation, input encoding, label
encoding, sample weights, the seeds drawn from its ``random_state``, the validation
split, the initialization and the training engine), and the stacked trainer reuses that
engine's pieces: its batch iterators (so each network sees its own batches in its own
shuffled order), its optimizer's settings, its loss criterion and L2 coefficient, and
its stopping callback, driven epoch by epoch with the network's own history, so that
early stopping and the restore of the best epoch follow the estimator's rule.

Per model:

* the data: a network's batches are padded to the stack's common shape and masked; a
  network whose epoch has fewer batches than another's sits out the remaining steps;
* the step: the clipped anti-gradient of eq. 3.6
  (:func:`~sklearn_rnn.optim.clipped_step_size` with the model's own ``mu`` and
  ``tau``), or Adam after clipping the gradient norm at the model's ``tau``, with the
  model's own step count, or the simplex direction of algorithm 3.2: the deltas of
  every model come from one backward pass, every model's temporal gradients are
  assembled at once from them, and the direction and the clipped step are taken for
  all models as ``(M, ...)`` tensors, each model with its own
  :class:`~sklearn_rnn.optim.SimplexSGD`'s settings, random stream and branch counts;
* stopping: a network that stops (its stopping rule, ``max_iter``, a non-finite loss)
  leaves the stack at the end of that epoch, so the stack shrinks as training goes on.

:class:`StackedStream` keeps such a stack between calls for streaming training: each of
its updates is every member's own ``partial_fit`` on a fresh batch of its own (the
thesis' experiments, their seeds and methods side by side).

What cannot be batched this way is refused by :func:`check_stackable` with the reason:
dropout (masks from each network's own generator), mixed precision, ``warm_start``,
per-step targets, callbacks of the user's, and a registered cell that is not
:attr:`~sklearn_rnn.nn.Cell.stackable`.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from skorch.callbacks import EarlyStopping as SkorchEarlyStopping
from skorch.callbacks import (
    EpochScoring,
    EpochTimer,
    GradientNormClipping,
    PassthroughScoring,
    PrintLog,
    ProgressBar,
)
from sklearn.exceptions import ConvergenceWarning
from joblib import Parallel, delayed, effective_n_jobs
from torch.func import functional_call, vmap

from ._callbacks import (Divergence, TrainingGuard, TrainingOutcome, _copied, non_finite_validation,
                         score_weights)
from ._engine import TrainingSettings, gradient_mode
from ._gathered import gathered_warnings, warn
from ._parallel import fitting_threads, with_callers_context
from .nn import NetworkStates
from .nn.cells import LayerStates, cell_names, get_cell
from .optim import ClippedSGD, SimplexSGD
from .optim._functional import _norm, _simplex_rules, _step_size
from .optim._temporal import _stacked_from_gradients
from .sequences import FlatSequences
from .sequences._validation import staging

__all__ = ["StackedMember", "StackedStream", "check_stackable", "train_stacked"]

logger = logging.getLogger(__name__)

#: Networks trained together at most, by default (memory grows with it).
MAX_STACKED = 64

#: ``torch.nn.utils.clip_grad_norm_``'s guard against a zero norm.
_CLIP_EPS = 1e-6


@dataclass(eq=False)
class StackedMember:
    """One network of the stack: a prepared estimator and its data.

    Attributes
    ----------
    estimator : BaseRNN
        An :class:`~sklearn_rnn.RNNClassifier` or :class:`~sklearn_rnn.RNNRegressor`
        after ``_prepare``: its ``net_`` holds the initialized network, optimizer and
        callbacks.
    train : SequenceDataset
        Its training data (encoded by its own encoder).
    valid : SequenceDataset or None
        Its held-out data for early stopping.
    seconds : float
        Wall-clock time of the stacked training divided among the members trained
        together (set by :func:`train_stacked`).
    outcomes : list of TrainingOutcome
        What its training ended with that its own ``fit`` warns of (a divergence, the
        starting weights kept, ``max_iter`` reached), as facts (set by
        :func:`train_stacked`, which summarizes them).

    Examples
    --------
    >>> from sklearn_rnn._stacked import StackedMember
    >>> StackedMember.__name__
    'StackedMember'
    """

    estimator: Any
    train: Any
    valid: Any = None
    seconds: float = 0.0
    outcomes: list[TrainingOutcome] = field(default_factory=list)
    # Training state, private to train_stacked.
    _epoch_losses: list[float] = field(default_factory=list)
    _epoch_objectives: list[float] = field(default_factory=list)
    _epoch_sizes: list[int] = field(default_factory=list)
    # What became non-finite in this epoch.
    _diverged: Divergence | None = None


def check_stackable(estimator: Any, *, streaming: bool = False) -> None:
    """Refuse an estimator whose networks the stacked trainer cannot train.

    Parameters
    ----------
    estimator : BaseRNN
        An unfitted :class:`~sklearn_rnn.RNNClassifier` or
        :class:`~sklearn_rnn.RNNRegressor`.
    streaming : bool, default=False
        Check for :class:`StackedStream` (continued training, one ``partial_fit``
        per update), which ``warm_start`` does not concern.

    Raises
    ------
    ValueError
        Naming the setting, why it cannot be stacked, and what to do.

    Examples
    --------
    >>> from sklearn_rnn import RNNClassifier
    >>> from sklearn_rnn._stacked import check_stackable
    >>> check_stackable(RNNClassifier(cell="decay", time_feature=0, optimizer="adam"))
    >>> check_stackable(RNNClassifier(cell="tanh", optimizer="simplex"))
    >>> check_stackable(RNNClassifier(cell="tanh", dropout=0.2))
    Traceback (most recent call last):
    ...
    ValueError: RNNClassifier(dropout=0.2) cannot be stacked: dropout masks...
    """
    if streaming:
        estimator._check_streamable()  # what partial_fit refuses
    name = type(estimator).__name__
    fix = (f"; or train this {name} with its own partial_fit, out of the stream." if streaming
           else f"; or search this {name} with sklearn.model_selection.GridSearchCV.")
    # Cells whose forward pass torch.func.vmap can vectorize (Cell.stackable): one written
    # in plain tensor operations ('decay'), or a loop over steps in plain tensor
    # operations beside a fused kernel (the Elman, GRU and LSTM cells), which the stack
    # runs instead of that kernel (RecurrentNetwork.vectorizable). Every layer's cell must
    # stack: the first layer's, and the one its layers above run.
    spec = get_cell(estimator._resolved_cell())
    layers = [spec] if estimator.num_layers == 1 or spec.upper is None else [spec, get_cell(spec.upper)]
    for layer in layers:
        if not layer.stackable:
            stackable = ", ".join(repr(name) for name in cell_names(stackable=True))
            where = "" if layer is spec else f" (the layers above the first of cell={spec.name!r})"
            raise ValueError(
                f"the stacked trainer runs the cells {stackable} (a recurrence in plain tensor "
                f"operations that torch.func.vmap vectorizes over models); got cell={layer.name!r}"
                f"{where}, which has none. Use one of those cells{fix}"
            )
    estimator._check_optimizer_cell()  # what its own fit refuses: the simplex method without temporal gradients
    refusals = {
        "dropout": (
            estimator.dropout != 0,
            "dropout masks come from each network's own generator, which a vectorized "
            "pass cannot draw from; use dropout=0",
        ),
        "precision": (
            estimator.precision != "float32",
            "mixed precision is not stacked; use precision='float32'",
        ),
        "warm_start": (
            bool(estimator.warm_start) and not streaming,
            "every member is fitted from scratch; use warm_start=False",
        ),
        "_output_steps": (
            estimator._output_steps.every_step,
            "targets at every step are not stacked; use RNNClassifier or RNNRegressor",
        ),
        "callbacks": (
            bool(estimator.callbacks),  # an empty list runs none either
            "the stacked trainer runs none of your skorch callbacks; use callbacks=None",
        ),
    }
    for setting, (refused, reason) in refusals.items():
        if refused:
            what = name  # a private attribute is no setting to show
            if not setting.startswith("_"):
                what = f"{name}({setting}={getattr(estimator, setting)!r})"
            raise ValueError(f"{what} cannot be stacked: {reason}{fix}")


def _check_not_repeated(member: StackedMember, others: Sequence[StackedMember], index: int) -> None:
    """Refuse member ``index`` when its estimator is one of ``others``' (the two rows of
    the stack would train one network twice per epoch)."""
    if any(other.estimator is member.estimator for other in others):
        raise ValueError(
            f"member {index}'s estimator is the same object as an earlier member's; each "
            "network is trained once. Give each member an estimator of its own "
            "(sklearn.base.clone), prepared on its own data."
        )


def _check_stackable_in_stream(estimator: Any, index: int) -> None:
    """:func:`check_stackable` for a stream's estimator ``index``, which its refusal names."""
    try:
        check_stackable(estimator, streaming=True)
    except ValueError as error:
        raise ValueError(f"estimator {index}: {error}") from error


def train_stacked(
    members: Sequence[StackedMember], *, max_stacked: int = MAX_STACKED, n_jobs: int | None = None,
    stacklevel: int = 1,
) -> None:
    """Train every member's network, many at a time, as its own ``fit`` would.

    Members are grouped by architecture (parameter shapes, input layout, optimizer,
    loss criterion with its label smoothing, device), and each group is trained in
    chunks of at most ``max_stacked`` networks.
    When this returns, each member's estimator is fitted: its network holds the
    trained (or, with early stopping, the best epoch's) weights and ``n_iter_``,
    ``loss_curve_``, ``validation_scores_`` are set as ``fit`` sets them. The warnings a
    member's ``fit`` would give (a divergence, the starting weights kept, ``max_iter``
    reached) are kept as facts in ``member.outcomes`` and summarized in one warning per
    cause, which counts the networks (and names their epochs where they differ).

    Parameters
    ----------
    members : sequence of StackedMember
        Prepared estimators (see :class:`StackedMember`) that pass
        :func:`check_stackable`.
    max_stacked : int, default=64
        Networks trained together at most; bounds the memory of the stacked tensors
        (the members, with their data, are the caller's).
    n_jobs : int or None, default=None
        Chunks trained at the same time in joblib worker processes; each group is then
        cut into at least ``n_jobs`` chunks. With more than one job, ``member.estimator``
        is replaced by the trained copy that comes back from the worker (in threads,
        under joblib's threading backend, the member's own estimator). 1 trains in this
        process; None too, unless a :func:`joblib.parallel_config` around the call gives
        ``n_jobs``, which then counts as for scikit-learn's ``n_jobs`` (read the trained
        estimators from ``member.estimator``).
    stacklevel : int, default=1
        Where the summarized warnings point, counted as for :func:`warnings.warn`
        called in the caller's place: 1, the line that calls ``train_stacked``; more,
        the callers above it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNRegressor
    >>> from sklearn_rnn._stacked import StackedMember, train_stacked
    >>> rng = np.random.default_rng(0)
    >>> X = [np.c_[np.arange(4.0), rng.normal(size=4)] for _ in range(20)]
    >>> y = np.array([x[:, 1].sum() for x in X])
    >>> members = []
    >>> for radius in (0.9, 1.2):
    ...     reg = RNNRegressor(cell="decay", time_feature=0, hidden_size=4, max_iter=3,
    ...                        tol=1e-9, optimizer="sgd", device="cpu",
    ...                        spectral_radius=radius, random_state=0)
    ...     train, valid = reg._prepare(X, y, None, incremental=False)
    ...     members.append(StackedMember(reg, train, valid))
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # max_iter=3 is reached
    ...     train_stacked(members)
    >>> [member.estimator.n_iter_ for member in members]
    [3, 3]
    """
    trainer = _ChunkTrainer(max_stacked, n_jobs)
    for index, member in enumerate(members):  # every member checked before any trains
        check_stackable(member.estimator)
        _check_not_repeated(member, members[:index], index)
    for member in members:
        trainer.add(member)
    trainer.finish(stacklevel + 1)


class _ChunkTrainer:
    """Prepared members trained in chunks as they come: what :func:`train_stacked` does
    with its members, for a caller that prepares them one by one (the grid search,
    which keeps no more than a chunk's networks and data prepared at once).

    The chunks are :func:`train_stacked`'s: the members grouped by architecture, each
    group, in the order its members came, cut into chunks of ``min(max_stacked,
    ceil(len(group) / n_jobs))`` networks. A group that reaches ``max_stacked * n_jobs``
    members is cut into chunks of ``max_stacked`` whatever comes later, so that each
    time it holds that many, they are trained (``n_jobs`` chunks at the same time); a
    smaller group waits for :meth:`finish`, which trains what is left and summarizes
    the warnings of them all.

    Parameters
    ----------
    max_stacked : int
        Networks trained together at most.
    n_jobs : int or None
        As for :func:`train_stacked`.
    trained : callable, optional
        Called with each chunk (a list of StackedMember) once it is trained, before the
        trainer lets go of it.
    """

    def __init__(
        self, max_stacked: int, n_jobs: int | None, trained: Callable[[list[StackedMember]], None] | None = None
    ) -> None:
        if max_stacked < 1:
            raise ValueError(f"max_stacked must be a positive int; got {max_stacked!r}.")
        self.max_stacked = max_stacked
        self.jobs = effective_n_jobs(n_jobs)
        self.trained = trained
        self.caller = os.getpid()
        # The members not trained yet, per architecture, with their place among all members.
        self.groups: dict[tuple, list[tuple[int, StackedMember]]] = {}
        self.whole: set[tuple] = set()  # the architectures cut into chunks of max_stacked
        self.outcomes: list[list[TrainingOutcome]] = []  # every member's, in their order
        self.others: list[tuple[type[Warning], str]] = []

    def add(self, member: StackedMember) -> None:
        """Take a prepared member; train its group's chunks once their size is known."""
        check_stackable(member.estimator)
        architecture = _architecture(member)
        group = self.groups.setdefault(architecture, [])
        _check_not_repeated(member, [waiting for _, waiting in group], len(self.outcomes))
        group.append((len(self.outcomes), member))
        self.outcomes.append([])
        if len(group) == self.max_stacked * self.jobs:
            self.whole.add(architecture)
            self._train([group[start : start + self.max_stacked] for start in range(0, len(group), self.max_stacked)])
            group.clear()

    def finish(self, stacklevel: int = 1) -> None:
        """Train the members left and summarize the warnings of all (``stacklevel`` as
        for :func:`warnings.warn` called in the caller's place)."""
        chunks = []
        for architecture, group in self.groups.items():
            if not group:
                continue
            size = self.max_stacked
            if architecture not in self.whole:
                size = min(self.max_stacked, -(-len(group) // self.jobs))
            chunks.extend(group[start : start + size] for start in range(0, len(group), size))
        self.groups.clear()
        self._train(chunks)
        _summarize_warnings(self.outcomes, self.others, stacklevel + 2)

    def _train(self, chunks: list[list[tuple[int, StackedMember]]]) -> None:
        members = [[member for _, member in chunk] for chunk in chunks]
        if self.jobs == 1:
            outcomes = [_train_chunk(chunk, self.caller) for chunk in members]
        else:
            task = delayed(with_callers_context(_train_chunk))  # here: joblib also dispatches from its threads
            outcomes = Parallel(n_jobs=self.jobs)(task(chunk, self.caller) for chunk in members)
        for chunk, (estimators, seconds, facts, recorded) in zip(chunks, outcomes):
            self.others.extend(recorded)
            for (position, member), estimator, member_facts in zip(chunk, estimators, facts):
                member.estimator = estimator
                member.seconds = seconds / len(chunk)
                member.outcomes = self.outcomes[position] = member_facts
            if self.trained is not None:
                self.trained([member for _, member in chunk])


def _train_chunk(
    chunk: list[StackedMember], caller: int
) -> tuple[list[Any], float, list[list[TrainingOutcome]], list[tuple[type[Warning], str]]]:
    """Train one chunk; return its estimators, the seconds it took, each member's
    :class:`TrainingOutcome` list, and the other warnings it gave: the package's training
    warnings, gathered in this thread's context (no process-wide state, which searches
    in threads would undo for one another), and in a worker process that runs its
    tasks in its main thread, one at a time (joblib's), every warning: a Dask worker
    process runs several tasks at once in threads, whose overlapping records would
    leave its warnings recorded to a list nobody reads."""
    hidden_size = chunk[0].estimator.hidden_size  # one architecture per chunk
    sequences = sum(member.estimator.batch_size for member in chunk)
    began = time.perf_counter()
    # The fits' thread rule for the work of a stacked step (every network's batch); in
    # a worker process, within its share of the CPU.
    worker = os.getpid() != caller and threading.current_thread() is threading.main_thread()
    with fitting_threads(hidden_size, sequences), gathered_warnings() as gathered:
        with warnings.catch_warnings(record=True) if worker else contextlib.nullcontext() as recorded:
            if worker:
                warnings.simplefilter("always")
            with gradient_mode(chunk[0].estimator.device):  # whatever the caller's mode, as fit
                _Stack(chunk).train()
    seconds = time.perf_counter() - began
    messages = gathered + [(message.category, str(message.message)) for message in recorded or []]
    estimators = [member.estimator for member in chunk]
    return estimators, seconds, [member.outcomes for member in chunk], messages


def _architecture(member: StackedMember) -> tuple:
    module = member.estimator.net_.module_
    shapes = tuple((name, tuple(p.shape)) for name, p in module.named_parameters())
    device = next(module.parameters()).device
    optimizer = type(member.estimator.net_.optimizer_)
    criterion = member.estimator.net_.criterion_  # one criterion runs a whole stack
    smoothing = _label_smoothing(member.estimator.net_)
    loss = type(criterion).__name__ + ("" if smoothing is None else f"(label_smoothing={smoothing})")
    return (type(member.estimator), optimizer, loss, module.cell, module.bidirectional, shapes, repr(module),
            module.gap_channel, str(device))


def _label_smoothing(net: Any) -> float | None:
    """The label smoothing of a network's criterion (None for a loss without it)."""
    return getattr(net.criterion_, "label_smoothing", None)


def _summarize_warnings(
    outcomes: Sequence[list[TrainingOutcome]], others: list[tuple[type[Warning], str]], stacklevel: int
) -> None:
    """One warning per kind: the members' outcomes (a list per member) counted per
    :attr:`TrainingOutcome.kind` (``max_iter`` reached, per its value and monitored
    loss; a divergence, per what diverged, whatever its epoch), under the text of the
    one of the earliest epoch, with the epochs where they differ; every other warning
    once. ``stacklevel`` as for :func:`warnings.warn` called here."""
    for category, text in dict.fromkeys(others):
        warnings.warn(text, category, stacklevel=stacklevel)
    by_kind: dict[tuple, list[TrainingOutcome]] = {}
    for member_outcomes in outcomes:
        for outcome in member_outcomes:
            by_kind.setdefault(outcome.kind, []).append(outcome)
    for group in by_kind.values():
        first = min(group, key=lambda outcome: outcome.epoch)
        count = f"{len(group)} of {len(outcomes)} stacked networks"
        epochs = sorted({outcome.epoch for outcome in group})
        if len(epochs) > 1 and first.cause in _EPOCHS:  # each network's own, not the first one's for all
            count += f", {_EPOCHS[first.cause].format(', '.join(map(str, epochs)))}; the first"
        warnings.warn(f"{count}: {first.message}", ConvergenceWarning, stacklevel=stacklevel)


#: How a summary names its networks' epochs where they differ, per cause.
_EPOCHS = {"diverged": "in epochs {}", "kept_start": "after {} epochs"}


#: What :func:`_architecture` compares, in its order (named in :class:`StackedStream`'s refusal).
_ARCHITECTURE_FIELDS = (
    "estimator class", "optimizer", "loss", "cell", "bidirectional", "parameter shapes", "network",
    "gap channel", "device",
)


class StackedStream:
    """Streaming training of many estimators as one stack: each update is every
    estimator's own ``partial_fit`` on its own fresh batch.

    The thesis' experiments train an estimator on an endless stream of fresh batches,
    one ``partial_fit(X_batch, y_batch)`` per batch, and run their seeds and methods
    one after the other. This object runs such streams side by side: it stacks the
    networks of estimators of one architecture once (as :func:`train_stacked` does)
    and keeps their weights and optimizer states stacked between updates; each
    :meth:`update` takes one batch per estimator and performs for every estimator the
    epoch its own ``partial_fit`` would perform (the estimator's own input encoding,
    batch order, loss, step rule and settings: eq. 3.6's clipped step, Adam, or the
    simplex direction with the optimizer's own random stream), and records it in the
    estimator's history, ``n_iter_`` and ``loss_curve_`` as ``partial_fit`` does.
    :meth:`write_back` copies the stacked weights and optimizer states into the
    estimators' networks; call it before using an estimator in any other way
    (``predict``, ``partial_fit``, pickling) and build a new stream after training
    an estimator otherwise.

    A batch that makes an estimator's loss or weights non-finite is undone for that
    estimator, with a :class:`~sklearn.exceptions.ConvergenceWarning`, as its own
    ``partial_fit`` undoes it; the other estimators' updates stand. An update that is
    refused, fails or is interrupted (Ctrl-C) before its epoch ends leaves the stack
    and every estimator as they were, as ``partial_fit`` does.

    The stack runs on the threads ``partial_fit`` would choose for the work of all its
    networks' batches together (one for small networks; :func:`sklearn_rnn.torch_threads`
    chooses the count), and torch's setting is restored afterwards.
    The weights agree with those of the estimators' own ``partial_fit`` calls to float32
    rounding, which training amplifies over many updates (see the user guide's
    :ref:`stacked_search`).

    Parameters
    ----------
    estimators : sequence of RNNClassifier or RNNRegressor
        Estimators that have been through ``partial_fit`` (or ``fit``) at least once,
        so that their networks exist; all of one architecture (class, optimizer, cell,
        sizes, device), each with its own settings (spectral radius and seed at
        initialization, ``learning_rate``, ``clip_threshold``, ``switch_threshold``),
        and each passing :func:`check_stackable`. The stream trains these objects.

    Attributes
    ----------
    estimators : list of RNNClassifier or RNNRegressor
        The estimators, in the order their batches are given.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNClassifier
    >>> from sklearn_rnn._stacked import StackedStream
    >>> from sklearn_rnn.datasets import make_temporal_order
    >>> rng = np.random.default_rng(0)
    >>> models = [RNNClassifier(cell="tanh", hidden_size=4, optimizer="sgd", batch_size=8,
    ...                         frame=1, readout="last", conv_kernels=None,
    ...                         clip_threshold=tau, random_state=seed)
    ...           for seed, tau in [(0, 1.0), (1, 10.0)]]
    >>> for model in models:
    ...     _ = model.partial_fit(*make_temporal_order(8, 6, random_state=rng), classes=np.arange(4))
    >>> stream = StackedStream(models)
    >>> for _ in range(3):
    ...     losses = stream.update([make_temporal_order(8, 6, random_state=rng) for _ in models])
    >>> losses.shape
    (2,)
    >>> models = stream.write_back()
    >>> [model.n_iter_ for model in models], models[0].predict(make_temporal_order(2, 6)[0]).shape
    ([4, 4], (2,))
    """

    def __init__(self, estimators: Sequence[Any]) -> None:
        self.estimators = list(estimators)
        if not self.estimators:
            raise ValueError("StackedStream needs at least one estimator; got none.")
        for index, estimator in enumerate(self.estimators):
            if not (hasattr(estimator, "_check_streamable") and hasattr(estimator, "partial_fit")):
                raise TypeError(
                    f"StackedStream trains RNNClassifier and RNNRegressor estimators; estimator "
                    f"{index} is a {type(estimator).__name__}. Pass the network estimator itself "
                    "(of a pipeline, its last step, with the batches transformed by the steps "
                    "before it)."
                )
            if not hasattr(estimator, "net_"):
                raise ValueError(
                    f"estimator {index} ({type(estimator).__name__}) has no network yet: call its "
                    "partial_fit once on a first batch (an RNNClassifier with classes=...) before "
                    "streaming it stacked."
                )
            if any(other is estimator for other in self.estimators[:index]):
                raise ValueError(
                    f"estimator {index} is the same object as an earlier one; a stream trains each "
                    "estimator once per update. Pass distinct estimators (sklearn.base.clone)."
                )
            _check_stackable_in_stream(estimator, index)
        members = [StackedMember(estimator, None) for estimator in self.estimators]
        architectures = [_architecture(member) for member in members]
        for index, architecture in enumerate(architectures):
            if architecture != architectures[0]:
                field_index = next(k for k, (a, b) in enumerate(zip(architecture, architectures[0])) if a != b)
                field, value, reference = (_ARCHITECTURE_FIELDS[field_index], architecture[field_index],
                                           architectures[0][field_index])
                if field == "parameter shapes":
                    difference = _shape_difference(value, reference, index)
                else:
                    difference = f"{_shown(value)} against {_shown(reference)}"
                raise ValueError(
                    f"the estimators of one stream must share their architecture; estimator {index} "
                    f"differs from estimator 0 in its {field} ({difference}). Stream each "
                    "architecture in a StackedStream of its own."
                )
        # Trainable tensors whatever the caller's mode (built under inference_mode, every
        # update failed, and so did its rollback).
        with torch.inference_mode(False):
            self._stack = _Stack(members)
            if self._stack.rule.kind == "adam":
                self._read_adam_state()
        # What the stream leaves each estimator with: its network, and its epochs.
        self._nets = [estimator.net_ for estimator in self.estimators]
        self._epochs = [len(net.history) for net in self._nets]

    def update(self, batches: Sequence[Sequence[Any]]) -> np.ndarray:
        """One ``partial_fit`` of every estimator, each on its own batch, stacked.

        Parameters
        ----------
        batches : sequence of tuples ``(X, y)`` or ``(X, y, sample_weight)``
            One per estimator, in the order of :attr:`estimators`: what that
            estimator's ``partial_fit`` would be given. A batch larger than the
            estimator's ``batch_size`` is one epoch of several updates, as in
            ``partial_fit``.

        Returns
        -------
        losses : ndarray of shape (n_estimators,)
            Each estimator's training loss of this call (the new ``loss_curve_``
            entry), NaN where the call was undone (a non-finite loss or weights).

        Raises
        ------
        ValueError
            A batch that its estimator's ``partial_fit`` refuses, a setting changed since
            the stream was built that ``partial_fit`` or the stack cannot train (see
            :func:`check_stackable`), or an estimator trained outside the stream; the
            stack and every estimator are left as they were.
        """
        if isinstance(batches, (str, bytes)) or not hasattr(batches, "__len__") or len(batches) != len(
            self.estimators
        ):
            got = f"{len(batches)} batches" if hasattr(batches, "__len__") else f"a {type(batches).__name__}"
            raise ValueError(
                f"update takes one batch (X, y) or (X, y, sample_weight) per estimator: "
                f"{len(self.estimators)} for this stream; got {got}."
            )
        stack = self._stack
        for index, estimator in enumerate(self.estimators):
            net = estimator.net_
            if net is not self._nets[index]:
                how = "its network is not the one the stream was built on: fit builds a new one"
            elif len(net.history) != self._epochs[index]:
                how = f"its history has {len(net.history)} epochs, the stream left it with {self._epochs[index]}"
            else:
                continue
            raise ValueError(
                f"estimator {index} was trained outside this stream ({how}); its weights in the "
                "stack are stale. Call write_back before training an estimator otherwise, and "
                "build a new StackedStream afterwards."
            )
        datasets = []
        nets = [estimator.net_ for estimator in self.estimators]
        # The settings a call gives each network (step size, L2 coefficient, shuffling
        # stream, ...), put back when it is refused or fails, as partial_fit puts them back.
        settings = [TrainingSettings(net) for net in nets]
        try:
            # Each estimator is prepared on a staging copy, kept only when every batch
            # passes and the epoch trains: a refused batch or an interrupted epoch leaves
            # every estimator as it was, its random_state generator too.
            with contextlib.ExitStack() as undo:
                works = [undo.enter_context(staging(estimator)) for estimator in self.estimators]
                for index, (work, batch) in enumerate(zip(works, batches)):
                    if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
                        length = f" of length {len(batch)}" if hasattr(batch, "__len__") else ""
                        raise ValueError(
                            f"batch {index} must be a tuple (X, y) or (X, y, sample_weight); got "
                            f"{type(batch).__name__}{length}."
                        )
                    X, y, weight = (*batch, None) if len(batch) == 2 else batch
                    # What partial_fit refuses and the stack cannot train, in the settings
                    # as they are now (set_params since the stream was built).
                    work._validate_params_unless_skipped()
                    _check_stackable_in_stream(work, index)
                    # Everything partial_fit checks and sets before it trains: validation, the
                    # encoding, the training settings of the call (shuffling stream, L2 coefficient).
                    try:
                        train, _ = work._prepare(X, y, weight, incremental=True)
                    except (ValueError, TypeError) as error:  # partial_fit's words, and whose batch
                        raise type(error)(f"batch {index} (estimator {index}): {error}") from error
                    datasets.append(train)
                # One criterion runs the stack: a label_smoothing set on one estimator since the
                # stream was built (which _prepare gave its criterion) would be trained with
                # estimator 0's.
                smoothing = [_label_smoothing(work.net_) for work in works]
                if len(set(smoothing)) > 1:
                    index = next(k for k, value in enumerate(smoothing) if value != smoothing[0])
                    raise ValueError(
                        f"the estimators of one stream share one loss, but estimator {index} now has "
                        f"label_smoothing={smoothing[index]} against estimator 0's {smoothing[0]}: set the "
                        "same label_smoothing on every estimator of the stream, or stream them separately."
                    )
                for member, data in zip(stack.members, datasets):
                    member.train = data
                    member._diverged = None
                stack.train_pool = _Pool(datasets)
                stack.l2 = torch.tensor([net.l2_penalty for net in nets], device=stack.device)
                stack.rule = _update_rule(nets)  # the settings of this call, as partial_fit applies them
                start = _StackState(stack, nets)
                began = time.perf_counter()
                # The thread rule of partial_fit, for the work of a stacked step.
                sequences = sum(estimator.batch_size for estimator in self.estimators)
                with fitting_threads(self.estimators[0].hidden_size, sequences):
                    try:
                        with gradient_mode(self.estimators[0].device):  # as partial_fit
                            stack._train_epoch()
                    except BaseException:
                        # An interrupt or an error before the epoch ends: nothing of the
                        # call is kept, as partial_fit keeps nothing of an unfinished epoch.
                        start.restore(stack, nets, range(len(nets)))
                        raise
        except BaseException:
            for net, saved in zip(nets, settings):
                saved.restore(net)
            raise
        seconds = (time.perf_counter() - began) / len(nets)
        finite = torch.isfinite(stack.flat).all(1).tolist()
        losses = np.full(len(nets), np.nan)
        for row, (member, net) in enumerate(zip(stack.members, nets)):
            epoch = len(net.history) + 1
            if member._diverged is None and not finite[row]:
                member._diverged = Divergence("weights", None, epoch)
            if member._diverged is not None:
                # partial_fit's training guard: the call is undone, the weights and the
                # optimizer's state are those it started from.
                start.restore(stack, nets, [row])
                # As its own partial_fit words it (the sample weights blamed where they
                # reach HUGE_WEIGHT), naming which estimator of the stream was undone.
                weights = member.train.sample_weight
                largest = float(weights.max()) if len(weights) else 1.0
                owner = f"{type(member.estimator).__name__} (estimator {row} of the stream)"
                outcome = member._diverged.outcome(owner, False, largest)
                warn(outcome.message, ConvergenceWarning, stacklevel=2)
                continue
            losses[row] = self._record(member, seconds)
            self._epochs[row] = len(net.history)
        return losses

    def _record(self, member: StackedMember, seconds: float) -> float:
        """Record the call's epoch in the estimator's history as its own partial_fit
        does, and its ``n_iter_`` and ``loss_curve_``; return the epoch's training loss."""
        net = member.estimator.net_
        epochs_before = len(net.history)
        _record_epoch(member, epochs_before + 1, seconds)
        member.estimator._record_history(epochs_before, incremental=True)
        return float(net.history[-1, "train_loss"])

    def write_back(self) -> list[Any]:
        """Copy every network's weights and optimizer state from the stack into its
        estimator, which can then predict or be trained on its own.

        The stream stays usable: a later :meth:`update` continues from the same state.

        Returns
        -------
        estimators : list of RNNClassifier or RNNRegressor
            :attr:`estimators`.
        """
        stack = self._stack
        with torch.inference_mode(False):  # the estimators' optimizer state stays trainable
            for row, member in enumerate(stack.members):
                stack._write(row, member, stack.params)
            if stack.rule.kind == "adam":
                self._write_adam_state()
        return self.estimators

    def _read_adam_state(self) -> None:
        """The stack's Adam state (moments and step count of every network) from each
        estimator's own optimizer."""
        stack = self._stack
        for row, estimator in enumerate(self.estimators):
            optimizer = estimator.net_.optimizer_
            states = [optimizer.state.get(p, {}) for p in stack.adam_parameters(estimator)]
            # A parameter that no gradient has reached yet (the decay of inputs that are
            # never missing) has no state: Adam's step leaves it and its zero moments as
            # they are, which the stack's step with a zero gradient does too.
            steps = {float(state["step"]) for state in states if state}
            if len(steps) > 1:
                raise ValueError(
                    f"estimator {row}'s Adam has taken different numbers of steps for "
                    "different parameters; the stack keeps one step count per network. Train it "
                    "with its own partial_fit."
                )
            with torch.no_grad():
                for key in ("exp_avg", "exp_avg_sq"):
                    stack.state[key][row] = torch.cat([
                        (state[key] if state else torch.zeros_like(p)).reshape(-1)
                        for state, p in zip(states, stack.adam_parameters(estimator))
                    ])
            stack.state["steps"][row] = steps.pop() if steps else 0.0

    def _write_adam_state(self) -> None:
        for row, estimator in enumerate(self.estimators):
            self._stack.write_adam_state(row, estimator)


class _StackState:
    """What an update of a :class:`StackedStream` changes of its stack and of the
    networks' optimizers, taken before the update's epoch: the stacked weights, Adam's
    moments and step counts, the simplex optimizers' random streams and branch counts
    and ClippedSGD's count of skipped steps, which the stack steps in place.
    :meth:`restore` puts back the rows whose update is undone."""

    def __init__(self, stack: _Stack, nets: list[Any]) -> None:
        self.flat = stack.flat.clone()
        self.state = {key: value.clone() for key, value in stack.state.items()}
        stepped = stack.rule.kind in ("simplex", "sgd")  # Adam's state is the stack's own
        self.optimizers = [_copied(net.optimizer_.state_dict()) for net in nets] if stepped else None

    def restore(self, stack: _Stack, nets: list[Any], rows: Sequence[int]) -> None:
        with torch.no_grad():
            for row in rows:
                stack.flat[row] = self.flat[row]
                for key, value in stack.state.items():
                    value[row] = self.state[key][row]
        if self.optimizers is not None:
            for row in rows:
                nets[row].optimizer_.load_state_dict(self.optimizers[row])


def _record_epoch(
    member: StackedMember, epoch: int, seconds: float | None = None,
    validation: tuple[float, float, list[tuple[float, int]]] | None = None,
) -> None:
    """Record a member's finished epoch in its network's history as the engine records
    it: skorch's epoch and batch entries, then the epoch scores that the engine's
    callbacks take of them (the loss, and the penalized objective where training
    minimizes one: see SequenceNet.get_loss), with skorch's ``*_best`` flags, in the
    order of fit's callbacks. ``validation``: the epoch's validation loss, score and
    ``(loss, size)`` of each validation batch (see :meth:`_Stack._validate`)."""
    net = member.estimator.net_
    history = net.history
    history.new_epoch()
    history.record("epoch", epoch)
    objective = net.minimizes_objective
    for value, data_value, size in zip(member._epoch_objectives, member._epoch_losses, member._epoch_sizes):
        history.new_batch()
        if objective:
            history.record_batch("train_objective", value)
        history.record_batch("train_loss", data_value)
        history.record_batch("train_batch_size", int(size))
    history.record("train_batch_count", len(member._epoch_losses))
    if validation is not None:
        for loss, size in validation[2]:
            history.new_batch()
            history.record_batch("valid_loss", loss)
            history.record_batch("valid_batch_size", int(size))
        history.record("valid_batch_count", len(validation[2]))
    if seconds is not None:
        history.record("dur", seconds)
    callbacks = dict(net.callbacks_)
    if "train_loss" in callbacks:
        callbacks["train_loss"].on_epoch_end(net)
    if validation is not None:  # with skorch's *_best flags, as fit's callbacks record them
        for name, value, lower in (("valid_loss", validation[0], True), ("valid_score", validation[1], False)):
            earlier = [record[name] for record in history[:-1] if name in record]
            best = not earlier or (value < min(earlier) if lower else value > max(earlier))
            history.record(name, value)
            history.record(f"{name}_best", bool(best))
    if "train_objective" in callbacks:
        callbacks["train_objective"].on_epoch_end(net)


def _shown(value: Any) -> str:
    """A field of :func:`_architecture` as a refusal names it."""
    if isinstance(value, type):
        return value.__name__
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _shape_difference(
    shapes: tuple[tuple[str, tuple[int, ...]], ...], reference: tuple[tuple[str, tuple[int, ...]], ...], index: int
) -> str:
    """The first parameter whose shape differs between network ``index``'s parameter
    shapes and network 0's (the (name, shape) pairs of :func:`_architecture`), or that
    one of them lacks, as :class:`StackedStream`'s refusal names it."""
    mine, theirs = dict(shapes), dict(reference)
    for pairs in itertools.zip_longest(shapes, reference):
        for name, _ in filter(None, pairs):
            if name not in theirs:
                return f"{name} {mine[name]}: in estimator {index} only"
            if name not in mine:
                return f"{name} {theirs[name]}: in estimator 0 only"
            if mine[name] != theirs[name]:
                return f"{name}: {mine[name]} against {theirs[name]}"
    return f"{_shown(shapes)} against {_shown(reference)}"  # the same shapes in another order


class _Stack:
    """The training state of one chunk: stacked parameters, optimizer state, members."""

    def __init__(self, members: Sequence[StackedMember]) -> None:
        self.members = list(members)
        nets = [member.estimator.net_ for member in self.members]
        for net in nets:
            _check_callbacks(net)
        # The forward pass of every network: a copy of the first one's module whose cells
        # run their loops in plain tensor operations (Cell.forward_vectorizable), which
        # vmap vectorizes, where fit runs a fused kernel; its parameters are never used
        # (functional_call reads the stack's).
        self.template = copy.deepcopy(nets[0].module_)
        self.template.vectorizable = True
        self.device = next(self.template.parameters()).device
        self.names = [name for name, p in self.template.named_parameters() if p.requires_grad]
        parameters = [dict(net.module_.named_parameters()) for net in nets]
        self.shapes = [tuple(parameters[0][name].shape) for name in self.names]
        # Each network's parameters are one row of a flat (M, P) buffer, and the
        # parameters the forward pass reads are views into it: the gradient, its norm,
        # the update and the optimizer state are then a few operations on one tensor
        # instead of a few per parameter (a per-update cost paid by every stack).
        self.flat = torch.stack(
            [torch.cat([p[name].detach().reshape(-1) for name in self.names]) for p in parameters]
        )  # (M, P)
        self.params = self._views(self.flat)  # name -> (M, *shape)
        # The weight matrices, as fit penalizes them (not the learned initial states).
        self.matrices = [
            name for name in self.names if self.params[name].ndim >= 3 and not name.startswith("initial_")
        ]
        self.criterion = nets[0].criterion_
        self.rule = _update_rule(nets)
        self.state: dict[str, torch.Tensor] = {}
        if self.rule.kind == "adam":
            self.state["exp_avg"] = torch.zeros_like(self.flat)
            self.state["exp_avg_sq"] = torch.zeros_like(self.flat)
            self.state["steps"] = torch.zeros(len(nets), dtype=torch.float64)
        self.l2 = torch.tensor([net.l2_penalty for net in nets], device=self.device)  # (M,)
        self.stoppers = [_stopper(net) for net in nets]
        self.max_epochs = [int(net.max_epochs) for net in nets]
        self.live = list(range(len(nets)))  # members still training, in stack order
        self.train_pool = _Pool([member.train for member in self.members])
        self.valid_pool = _Pool([member.valid for member in self.members])
        self._vmapped_outputs = vmap(self._member_outputs, in_dims=(0, 0, 0))
        if self.rule.kind == "simplex":
            self.states_of = _FlatStates(self.template)
            self.initial_count = sum(state is not None for state in
                                     (self.template.initial_hidden, self.template.initial_cell))
            self._vmapped_states = vmap(self._member_states, in_dims=(0, 0, 0))

    def _views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The parameters of every network as views of the flat buffer: name -> (M, *shape)."""
        sizes = [math.prod(shape) for shape in self.shapes]
        pieces = torch.split(flat, sizes, dim=1)
        return {
            name: piece.view(flat.shape[0], *shape)
            for name, piece, shape in zip(self.names, pieces, self.shapes)
        }

    # ---------------------------------------------------------------- training
    def train(self) -> None:
        for member, stopper in zip(self.members, self.stoppers):
            member.estimator.net_.history.clear()
            member.outcomes = []
            if stopper is not None:
                stopper.on_train_begin(member.estimator.net_)
        epoch = 0
        while self.live:
            epoch += 1
            snapshot = self._views(self.flat.clone())
            # The optimizers' state too: a network that diverges keeps its last finished
            # epoch's, as its fit's training guard restores it (Adam's moments, the stack's
            # own; the simplex optimizers' random streams and branch counts and ClippedSGD's
            # skipped steps, which the stack steps in place).
            moments = {key: value.clone() for key, value in self.state.items()} if self.rule.kind == "adam" else None
            live = [self.members[index] for index in self.live]
            optimizers = ([_copied(member.estimator.net_.optimizer_.state_dict()) for member in live]
                          if moments is None else None)
            began = time.perf_counter()
            self._train_epoch()
            stopped = self._end_epoch(epoch, snapshot, began)
            for row in stopped:  # what each network's own fit leaves in its optimizer
                diverged = live[row]._diverged is not None
                if moments is not None:
                    self.write_adam_state(row, live[row].estimator, moments if diverged else None)
                elif diverged:
                    live[row].estimator.net_.optimizer_.load_state_dict(optimizers[row])
            self._drop(stopped)
        for member in self.members:
            member.outcomes.extend(member.estimator._record_history(0, incremental=False))

    def _train_epoch(self) -> None:
        live = [self.members[index] for index in self.live]
        batches = [member.estimator.net_.get_iterator(member.train, training=True).batches() for member in live]
        for member in live:
            member._epoch_losses, member._epoch_objectives, member._epoch_sizes = [], [], []
        for step in range(max(len(b) for b in batches)):
            rows = [r for r, member_batches in enumerate(batches) if step < len(member_batches)
                    and live[r]._diverged is None]
            if not rows:
                break
            active = torch.zeros(len(live), dtype=torch.bool)
            active[rows] = True
            chosen = {self.live[r]: batches[r][step] for r in rows}
            losses = self._update(self.train_pool.batch(chosen, self.live), active)
            for r, (objective, loss) in zip(rows, losses):
                member = live[r]
                # The data loss, as a fit's training guard reads it: an L2 penalty past the
                # float32 range (weights above about 1e19) does not stop its fit.
                if not math.isfinite(loss):
                    epoch = len(member.estimator.net_.history) + 1  # this epoch is recorded at its end
                    member._diverged = Divergence("training loss", loss, epoch, batch=step + 1)
                    continue
                member._epoch_objectives.append(objective)
                member._epoch_losses.append(loss)
                member._epoch_sizes.append(len(batches[r][step]))

    def _member_outputs(
        self, params: dict[str, torch.Tensor], x: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        """One network's outputs ``(B, k)`` on its (padded) batch."""
        return functional_call(self.template, params, (x, lengths))

    def _loss(
        self, params: dict[str, torch.Tensor], x: torch.Tensor, lengths: torch.Tensor,
        y: torch.Tensor, weight: torch.Tensor, count: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every network's mean weighted data loss ``(M,)`` and outputs ``(M, B, k)``."""
        if x.shape[0] > 1:
            outputs = self._vmapped_outputs(params, x, lengths)
        else:
            # A stack of one (the last network of a chunk): the plain call, without the
            # per-operation cost of vmap.
            one = {name: value[0] for name, value in params.items()}
            outputs = self._member_outputs(one, x[0], lengths[0]).unsqueeze(0)
        # The criterion of every network's samples in one call outside vmap (its
        # vectorized form cost ten times the plain call): a per-sample loss, so the
        # samples of all networks can be taken as one batch.
        per_sample = self.criterion(outputs.flatten(0, 1), y.flatten(0, 1))  # (M B,) or (M B, k)
        per_sample = per_sample.reshape(*weight.shape, *per_sample.shape[1:])  # (M, B[, k])
        if per_sample.ndim > 2:
            per_sample = per_sample.mean(dim=tuple(range(2, per_sample.ndim)))
        # Selected, not only multiplied: a weighted-out sample's loss that is not finite
        # (padding, or a target of 1e20 standardized) would make 0 * inf NaN.
        return (torch.where(weight > 0, per_sample, 0.0) * weight).sum(1) / count, outputs

    def _penalty(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """``alpha / (2 n) * ||W||^2`` of every network, over its weight matrices: (M,)."""
        if not self.matrices or not bool((self.l2 != 0).any()):
            return torch.zeros_like(self.l2)
        squares = sum(params[name].square().flatten(1).sum(1) for name in self.matrices)
        return 0.5 * self.l2 * squares

    def _update(
        self, batch: dict[str, torch.Tensor], active: torch.Tensor
    ) -> list[tuple[float, float]]:
        """One update of every active network; their (penalized, data) losses."""
        if self.rule.kind == "simplex":
            return self._simplex_update(batch, active)
        flat = self.flat.requires_grad_(True)
        params = self._views(flat)
        data_loss, _ = self._loss(params, batch["x"], batch["lengths"], batch["y"],
                                  batch["weight"], batch["count"])  # (M,)
        loss = data_loss + self._penalty(params)  # (M,), as the engine records it
        mask = active.to(self.device)
        # One gradient (M, P) for the flat buffer; a parameter the loss does not reach
        # (the decay of inputs that are never missing) gets zeros.
        (grad,) = torch.autograd.grad(torch.where(mask, loss, 0.0).sum(), [flat])
        flat.requires_grad_(False)
        values = loss.detach().tolist()
        data_values = data_loss.detach().tolist()
        finite = active.clone()  # the networks whose fit takes this step: a finite data loss
        finite[[i for i, v in enumerate(data_values) if not math.isfinite(v)]] = False
        self.rule.apply(self, grad, finite)
        return [(values[i], data_values[i]) for i in torch.nonzero(active).flatten().tolist()]

    def _member_states(
        self, params: dict[str, torch.Tensor], x: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """One network's :meth:`~sklearn_rnn.nn.RecurrentNetwork.forward_states`, flat:
        outputs, readout inputs, then every layer's inputs, projection, states and
        initial states."""
        named = {f"network.{name}": value for name, value in params.items()}
        return functional_call(self.states_of, named, (x, lengths))

    def _simplex_update(
        self, batch: dict[str, torch.Tensor], active: torch.Tensor
    ) -> list[tuple[float, float]]:
        """One simplex step of every active network (algorithm 3.2, as its own fit takes it).

        The forward pass and the one backward pass to the deltas (the gradients of every
        layer's ``u``, of the outputs and of the learned initial states) run for all
        networks at once, and so does the step (:meth:`_simplex_step`). No L2 penalty:
        the simplex method has none.
        """
        flat = self.flat.requires_grad_(True)
        params = self._views(flat)
        x, lengths = batch["x"], batch["lengths"]
        pieces = self._vmapped_states(params, x, lengths)
        outputs, read, rest = pieces[0], pieces[1], pieces[2:]
        width = 3 + self.initial_count
        layers = [rest[k : k + width] for k in range(0, len(rest), width)]
        per_sample = self.criterion(outputs.flatten(0, 1), batch["y"].flatten(0, 1))
        per_sample = per_sample.reshape(*batch["weight"].shape, *per_sample.shape[1:])  # (M, B[, k])
        if per_sample.ndim > 2:
            per_sample = per_sample.mean(dim=tuple(range(2, per_sample.ndim)))
        weight = batch["weight"]
        loss = (torch.where(weight > 0, per_sample, 0.0) * weight).sum(1) / batch["count"]  # (M,)
        mask = active.to(self.device)
        wanted = [layer[1] for layer in layers] + [outputs] + [state for layer in layers for state in layer[3:]]
        grads = torch.autograd.grad(torch.where(mask, loss, 0.0).sum(), wanted,
                                    allow_unused=True, materialize_grads=True)
        flat.requires_grad_(False)
        values = loss.detach().tolist()
        stepping = [row for row in torch.nonzero(active).flatten().tolist() if math.isfinite(values[row])]
        # A non-finite loss: no step (the member stops, as its own fit's guard stops it).
        if stepping:
            self._simplex_step(stepping, layers, outputs, read, grads, lengths)
        return [(values[i], values[i]) for i in torch.nonzero(active).flatten().tolist()]

    @torch.no_grad()
    def _simplex_step(
        self, rows: list[int], layers: list[tuple[torch.Tensor, ...]], outputs: torch.Tensor,
        read: torch.Tensor, grads: tuple[torch.Tensor, ...], lengths: torch.Tensor,
    ) -> None:
        """Algorithm 3.2 for the networks ``rows`` of the stack at once, each with its own
        optimizer's settings, random stream and records.

        The temporal gradients of every network come from its slice of the one backward
        pass, side by side (:func:`~sklearn_rnn.optim._temporal._stacked_from_gradients`):
        a network's rows past its own batch hold zero-weight sequences, whose deltas are
        zero, and its steps before its longest sequence's hold zero gradients, so each
        network's per-step norms and combinations are those its own fit computes. Each
        network draws as many convex weights as its own batch has steps, from its own
        :class:`~sklearn_rnn.optim.SimplexSGD`'s generator; the direction, the switch and
        the clipped step (eq. 3.6) then run for all networks as ``(M, ...)`` tensors
        (:func:`~sklearn_rnn.optim._functional._simplex_rules`, the rule
        :meth:`SimplexSGD.step <sklearn_rnn.optim.SimplexSGD.step>` runs with one model),
        and each optimizer records its branch and last step as its own step does.
        """
        models = lengths.shape[0]
        layer_states = tuple(
            LayerStates(z.detach().flatten(0, 1), u.detach().flatten(0, 1), h.detach().flatten(0, 1),
                        tuple(state.detach().flatten(0, 1) for state in initial))
            for z, u, h, *initial in layers
        )  # the networks side by side along the batch: (M B, ...)
        states = NetworkStates(layer_states[0].inputs, layer_states[0].projected, layer_states[-1].hidden,
                               outputs.detach().flatten(0, 1), layer_states, read.detach().flatten(0, 1))
        template = dict(self.template.named_parameters())
        stacked = {id(template[name]): self.params[name] for name in self.names}
        temporal = _stacked_from_gradients(self.template, states, tuple(g.flatten(0, 1) for g in grads),
                                           lengths.flatten(), models=models, stacked=stacked)
        block = {id(p): position for position, p in enumerate(temporal.parameters)}
        order = [block[id(template[name])] for name in self.names]

        def flat(blocks: tuple[torch.Tensor, ...]) -> torch.Tensor:  # (M, P) in the stack's order
            return torch.cat([blocks[position].reshape(models, -1) for position in order], dim=1)

        index = torch.tensor(rows, device=self.device)
        optimizers = [self.members[self.live[row]].estimator.net_.optimizer_ for row in rows]
        total = temporal.steps
        steps = lengths.max(dim=1).values.tolist()  # each network's own batch length

        def combine(coefficients: torch.Tensor) -> torch.Tensor:
            full = coefficients.new_zeros(models, total)
            full[index] = coefficients
            return flat(temporal.combine(full))[index]

        gradient = flat(temporal.gradient)[index]  # (K, P)
        chosen = _simplex_rules(
            gradient,
            [int(steps[row]) for row in rows],
            total,
            lambda rescue: temporal.norms(rescue)[index],
            combine,
            dtype=gradient.dtype,
            weights=[opt.weights for opt in optimizers],
            generators=[opt.generator for opt in optimizers],
            switch_threshold=[opt.switch_threshold for opt in optimizers],
            eps=torch.tensor([opt.eps for opt in optimizers], dtype=gradient.dtype, device=self.device)[:, None],
            sizes=[temporal.gradient[position].numel() // models for position in order],
        )
        sizes = []
        for opt, branch, norm, cosine in zip(optimizers, chosen.branch, chosen.gradient_norm, chosen.cosine):
            group = opt.param_groups[0]
            # d has the gradient's norm in every branch (eq. 3.5).
            size = math.nan if branch == "skipped" else _step_size(norm, group["lr"], group["clip_threshold"])
            opt.branch_counts[branch] += 1
            opt.last_step = {"branch": branch, "gradient_norm": norm, "cosine": cosine, "step_size": size}
            sizes.append(0.0 if branch == "skipped" else size)  # a skipped row's direction is zero
        step = torch.tensor(sizes, dtype=gradient.dtype, device=self.device)[:, None]  # (K, 1)
        self.flat.index_add_(0, index, step * chosen.direction)

    # ----------------------------------------------------------------- epochs
    def _end_epoch(self, epoch: int, snapshot: dict[str, torch.Tensor], began: float) -> list[int]:
        """Record the epoch in every live network's history (its ``dur`` the stack's
        seconds since ``began`` shared among them), run its stopping rule, and return the
        positions (in ``live``) of the networks that stop."""
        live = [self.members[index] for index in self.live]
        valid = self._validate(live)
        seconds = (time.perf_counter() - began) / len(live)
        stopped = []
        finite_rows = torch.isfinite(self.flat).all(1).tolist()  # (M,)
        for row, member in enumerate(live):
            net = member.estimator.net_
            if member._diverged is None and not finite_rows[row]:
                member._diverged = Divergence("weights", None, epoch)
            if member._diverged is None and valid[row] is not None:  # as a fit's training guard
                member._diverged = non_finite_validation(epoch, *valid[row][:2])
            if member._diverged is not None:
                self._write(row, member, snapshot)  # the last finished epoch
                member.outcomes.append(member._diverged.outcome(type(member.estimator).__name__, True))
                stopped.append(row)
                continue
            _record_epoch(member, epoch, seconds, valid[row])
            stopper = self.stoppers[self.live[row]]
            done = epoch >= self.max_epochs[self.live[row]]
            if stopper is not None and stopper.load_best:
                self._write(row, member, self.params)  # the rule copies the best epoch's weights
            if stopper is not None:
                try:
                    stopper.on_epoch_end(net)
                except KeyboardInterrupt:  # skorch's signal: the rule ends training
                    done = True
            if done:
                stopped.append(row)
                self._write(row, member, self.params)
        for row in stopped:
            stopper = self.stoppers[self.live[row]]
            net = live[row].estimator.net_
            if stopper is not None and len(net.history):
                stopper.on_train_end(net, X=live[row].train)
        return stopped

    def adam_parameters(self, estimator: Any) -> list[torch.nn.Parameter]:
        """``estimator``'s parameters in the stack's order (:attr:`names`)."""
        parameters = dict(estimator.net_.module_.named_parameters())
        return [parameters[name] for name in self.names]

    def write_adam_state(self, row: int, estimator: Any, state: dict[str, torch.Tensor] | None = None) -> None:
        """Give ``estimator``'s optimizer network ``row``'s Adam moments and step count, of
        ``state`` (the stack's now when None): what its own training would have left."""
        state = self.state if state is None else state
        optimizer = estimator.net_.optimizer_
        step = float(state["steps"][row])
        if not step:
            return
        moments = {key: self._views(state[key][row : row + 1]) for key in ("exp_avg", "exp_avg_sq")}
        for name, p in zip(self.names, self.adam_parameters(estimator)):
            if not p.numel():
                continue  # a parameter of no value (the decay of missing inputs when none is
                # missing) takes no part in the forward pass: no gradient, no state, as Adam
                # leaves it. Any other gets a gradient, zero where the data do not reach it
                # (the missing inputs' decay when the missing values are held out), and the
                # state Adam keeps for it.
            # A fused or capturable step (the estimators' Adam on a GPU) reads its
            # step count on the parameter's device, the others on the CPU.
            group = next(g for g in optimizer.param_groups if any(q is p for q in g["params"]))
            on_device = group.get("fused") or group.get("capturable")
            optimizer.state[p] = {
                "step": torch.tensor(step, dtype=torch.float32, device=p.device if on_device else "cpu"),
                "exp_avg": moments["exp_avg"][name][0].clone(),
                "exp_avg_sq": moments["exp_avg_sq"][name][0].clone(),
            }

    def _write(self, row: int, member: StackedMember, source: dict[str, torch.Tensor]) -> None:
        """Copy network ``row``'s parameters from the stack into its own module."""
        parameters = dict(member.estimator.net_.module_.named_parameters())
        with torch.no_grad():
            for name in self.names:
                parameters[name].copy_(source[name][row])

    @torch.no_grad()
    def _validate(self, live: list[StackedMember]) -> list[tuple[float, float, list[tuple[float, int]]] | None]:
        """Validation loss (batch-size weighted mean, no penalty) and score of each
        network, and the loss and size of each of its validation batches."""
        rows = [r for r, member in enumerate(live) if member.valid is not None and member._diverged is None]
        results: list[tuple[float, float, list[tuple[float, int]]] | None] = [None] * len(live)
        if not rows:
            return results
        self.template.train(False)
        batches = {r: live[r].estimator.net_.get_iterator(live[r].valid, training=False).batches() for r in rows}
        losses: dict[int, list[float]] = {r: [] for r in rows}
        sizes: dict[int, list[int]] = {r: [] for r in rows}
        outputs: dict[int, list[torch.Tensor]] = {r: [] for r in rows}
        targets: dict[int, list[torch.Tensor]] = {r: [] for r in rows}
        weights: dict[int, list[torch.Tensor]] = {r: [] for r in rows}
        for step in range(max(len(b) for b in batches.values())):
            here = [r for r in rows if step < len(batches[r])]
            batch = self.valid_pool.batch({self.live[r]: batches[r][step] for r in here}, self.live)
            loss, out = self._loss(self.params, batch["x"], batch["lengths"], batch["y"],
                                   batch["weight"], batch["count"])
            values = loss.tolist()
            for r in here:
                n = len(batches[r][step])
                losses[r].append(values[r])
                sizes[r].append(n)
                outputs[r].append(out[r, :n])
                targets[r].append(batch["y"][r, :n])
                weights[r].append(batch["weight"][r, :n])
        self.template.train(True)
        for r in rows:
            estimator = live[r].estimator
            y_true = torch.cat(targets[r]).cpu().numpy()
            y_pred = torch.cat(outputs[r]).double().cpu().numpy()
            finite = bool(np.isfinite(y_pred).all())  # else a divergence (see _end_epoch)
            weight = score_weights(torch.cat(weights[r]).double().cpu().numpy())
            score = estimator._validation_score(y_true, y_pred, weight) if finite else math.nan
            results[r] = (float(np.average(losses[r], weights=sizes[r])), score, list(zip(losses[r], sizes[r])))
        return results

    def _drop(self, stopped: list[int]) -> None:
        """Take the stopped networks out of the stack."""
        if not stopped:
            return
        keep = [row for row in range(len(self.live)) if row not in set(stopped)]
        self.live = [self.live[row] for row in keep]
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        self.flat = self.flat.index_select(0, index)
        self.params = self._views(self.flat)
        for key, value in self.state.items():
            self.state[key] = value.index_select(0, index.to(value.device))
        self.l2 = self.l2.index_select(0, index)
        self.rule.keep(keep)


class _FlatStates(torch.nn.Module):
    """A network's :meth:`~sklearn_rnn.nn.RecurrentNetwork.forward_states` as a flat tuple
    of tensors (what :func:`torch.func.vmap` returns): outputs, readout inputs, then per
    layer its inputs, projection, states and learned initial states."""

    def __init__(self, network: torch.nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
        states = self.network.forward_states(x, lengths)
        flat = [states.outputs, states.readout_inputs]
        for layer in states.layers:
            flat += [layer.inputs, layer.projected, layer.hidden, *layer.initial]
        return tuple(flat)


class _Pool:
    """The datasets of a stack's members as one :class:`~sklearn_rnn.sequences.FlatSequences`,
    with one empty sequence (length 1, zero input, weight 0) that fills the rows of
    networks without a batch and of batches smaller than the largest: a step's batches
    of every network are gathered by one call to ``FlatSequences.batch``."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        present = [data for data in datasets if data is not None]
        self.empty = not present
        if self.empty:
            return
        first = present[0]
        device = first.sequences.values.device
        self.offsets: dict[int, int] = {}
        offset = 0
        for position, data in enumerate(datasets):
            if data is not None:
                self.offsets[position] = offset
                offset += len(data)
        self.pad = offset
        values = [data.sequences.values for data in present]
        values.append(first.sequences.values.new_zeros(1, first.sequences.values.shape[1]))
        lengths = [data.sequences.lengths for data in present]
        lengths.append(torch.ones(1, dtype=torch.long, device=device))
        self.flat = FlatSequences(torch.cat(values), torch.cat(lengths))
        self.y = torch.cat([data.y for data in present] + [torch.zeros_like(first.y[:1])])
        weights = [data.sample_weight for data in present]
        self.weight = torch.cat(weights + [torch.zeros_like(weights[0][:1])])

    def batch(self, chosen: dict[int, np.ndarray], order: list[int]) -> dict[str, torch.Tensor]:
        """Batches ``chosen`` (member position -> sample indices) stacked in the order
        ``order`` of member positions: ``x`` (M, B, T, d), ``lengths``, ``y``, ``weight``
        (M, B) and ``count`` (M,), the samples of each network's batch (1 without)."""
        size = max(len(indices) for indices in chosen.values())
        index = np.full((len(order), size), self.pad, dtype=np.int64)
        count = np.ones(len(order), dtype=np.float32)
        for row, position in enumerate(order):
            indices = chosen.get(position)
            if indices is not None:
                index[row, : len(indices)] = self.offsets[position] + np.asarray(indices)
                count[row] = len(indices)
        flat_index = torch.as_tensor(index.ravel(), device=self.weight.device)
        x, lengths = self.flat.batch(flat_index)  # (M * B, T, d), (M * B,)
        shape = (len(order), size)
        return {
            "x": x.reshape(*shape, *x.shape[1:]),
            "lengths": lengths.reshape(shape),
            "y": self.y[flat_index.to(self.y.device)].reshape(*shape, *self.y.shape[1:]),
            "weight": self.weight[flat_index].reshape(shape),
            "count": torch.as_tensor(count, device=self.weight.device),
        }


#: Callbacks of the engine that the stacked trainer stands in for: timing, loss
#: records, the epoch table and progress bar (side concerns), the validation score
#: (recorded by the trainer), gradient clipping (the update rule), the training guard
#: (divergence handling) and the stopping rule (driven per network).
_KNOWN_CALLBACKS = (
    EpochTimer, PassthroughScoring, PrintLog, ProgressBar, GradientNormClipping,
    SkorchEarlyStopping, TrainingGuard,
)


def _check_callbacks(net: Any) -> None:
    """Refuse an engine with a callback the stacked trainer would silently skip."""
    for name, callback in net.callbacks_:
        known = isinstance(callback, _KNOWN_CALLBACKS) or (
            type(callback) is EpochScoring and name == "valid_score"
        )
        if not known:
            raise ValueError(
                f"the stacked trainer does not run the training callback {name!r} "
                f"({type(callback).__name__}) that this estimator's fit runs, so its networks "
                "would not be the ones fit trains; search this estimator with "
                "sklearn.model_selection.GridSearchCV."
            )


def _stopper(net: Any) -> SkorchEarlyStopping | None:
    """The network's stopping callback (skorch's EarlyStopping or a subclass), if any."""
    found = [callback for _, callback in net.callbacks_ if isinstance(callback, SkorchEarlyStopping)]
    return found[0] if found else None


class _UpdateRule:
    """The per-model update of the stack, read from each network's own optimizer."""

    def __init__(self, kind: str, settings: list[dict[str, Any]]) -> None:
        self.kind = kind
        self.settings = settings

    def keep(self, rows: list[int]) -> None:
        self.settings = [self.settings[row] for row in rows]

    def apply(self, stack: _Stack, grad: torch.Tensor, active: torch.Tensor) -> None:
        """Update ``stack.flat`` with its gradient ``grad`` (M, P) where ``active``."""
        norms = grad.square().sum(1).sqrt()  # (M,)
        if self.kind == "sgd":
            self._sgd(stack, grad, self._clipped_norms(stack, grad, norms), active)
        else:
            self._adam(stack, grad, norms, active)

    @staticmethod
    def _clipped_norms(stack: _Stack, grad: torch.Tensor, norms: torch.Tensor) -> list[float]:
        """Each network's gradient norm as its ClippedSGD takes it: where the squares of
        finite entries overflow float32 (an exploding gradient), recomputed in float64
        (:func:`~sklearn_rnn.optim._functional._norm`), so that the step is clipped
        instead of skipped; infinite or NaN only where an entry is."""
        values = norms.tolist()
        sizes = [math.prod(shape) for shape in stack.shapes]
        return [_norm(torch.split(grad[row], sizes)) if math.isinf(value) else value
                for row, value in enumerate(values)]

    @torch.no_grad()
    def _sgd(self, stack: _Stack, grad: torch.Tensor, norms: list[float], active: torch.Tensor) -> None:
        # Eq. 3.6 per model, by the package's own rule; a step whose gradient holds a NaN
        # or an infinity is skipped and counted in the network's skipped_steps, as its
        # ClippedSGD skips it (a step of 0 would write 0 * inf = NaN into its weights).
        taken = [on and math.isfinite(norm) for norm, on in zip(norms, active.tolist())]
        steps = [
            _step_size(norm, s["lr"], s["clip_threshold"]) if take else 0.0
            for norm, s, take in zip(norms, self.settings, taken)
        ]
        alpha = torch.tensor(steps, device=stack.device)  # (M,)
        update = alpha[:, None] * grad
        skipped = [row for row, (on, take) in enumerate(zip(active.tolist(), taken)) if on and not take]
        if skipped:
            for row in skipped:
                stack.members[stack.live[row]].estimator.net_.optimizer_.skipped_steps += 1
            update = torch.where(torch.tensor(taken, device=stack.device)[:, None], update, 0.0)
        stack.flat.sub_(update)

    @torch.no_grad()
    def _adam(self, stack: _Stack, grad: torch.Tensor, norms: torch.Tensor, active: torch.Tensor) -> None:
        # skorch's GradientNormClipping (torch.nn.utils.clip_grad_norm_) per model, then
        # torch.optim.Adam's update (its single-tensor form) with a step count per model.
        taus = [s["clip_threshold"] for s in self.settings]
        if any(tau is not None for tau in taus):
            tau = torch.tensor([math.inf if t is None else t for t in taus], device=stack.device)
            coef = torch.clamp(tau / (norms + _CLIP_EPS), max=1.0)  # (M,)
            grad = grad * coef[:, None]
        steps = stack.state["steps"]
        on = active.cpu()
        steps += on.to(steps.dtype)
        lr, beta1, beta2, eps = [], [], [], []
        for s, step in zip(self.settings, steps.tolist()):
            b1, b2 = s["betas"]
            step = max(step, 1.0)
            lr.append(s["lr"] / (1 - b1**step))
            beta1.append(b1)
            beta2.append(b2)
            eps.append((1 - b2**step) ** 0.5)
        device = stack.device
        step_size = torch.tensor(lr, device=device)
        one_minus_b1 = 1 - torch.tensor(beta1, device=device)
        b2t = torch.tensor(beta2, device=device)
        correction = torch.tensor(eps, device=device)
        epsilon = torch.tensor([s["eps"] for s in self.settings], device=device)
        keep = on.to(device)[:, None]
        m, v = stack.state["exp_avg"], stack.state["exp_avg_sq"]
        m.copy_(torch.where(keep, m.lerp(grad, one_minus_b1[:, None]), m))
        v.copy_(torch.where(keep, v * b2t[:, None] + (1 - b2t[:, None]) * grad * grad, v))
        denom = v.sqrt() / correction[:, None] + epsilon[:, None]
        update = step_size[:, None] * m / denom
        stack.flat.sub_(torch.where(keep, update, 0.0))


def _update_rule(nets: list[Any]) -> _UpdateRule:
    optimizers = [net.optimizer_ for net in nets]
    kinds = set()
    settings = []
    for net, optimizer in zip(nets, optimizers):
        group = optimizer.param_groups[0]
        if isinstance(optimizer, SimplexSGD):
            # Each network's own optimizer is read at every update (its settings, random
            # stream and branch counts): one parameter group, as the estimators build it.
            if len(optimizer.param_groups) != 1:
                raise ValueError(
                    f"the stacked trainer steps SimplexSGD with one parameter group; got "
                    f"{len(optimizer.param_groups)}. Fit these networks one by one."
                )
            kinds.add("simplex")
            settings.append({})
        elif isinstance(optimizer, ClippedSGD):
            kinds.add("sgd")
            settings.append({"lr": float(group["lr"]), "clip_threshold": group["clip_threshold"]})
        elif type(optimizer) is torch.optim.Adam and not group["amsgrad"] and not group["weight_decay"] \
                and not group["maximize"]:
            kinds.add("adam")
            clip = [cb for _, cb in net.callbacks_ if isinstance(cb, GradientNormClipping)]
            tau = None
            if clip:
                if clip[0].gradient_clip_norm_type != 2:
                    raise ValueError("the stacked trainer clips the Euclidean norm (norm type 2) only.")
                tau = float(clip[0].gradient_clip_value)
            settings.append({"lr": float(group["lr"]), "betas": tuple(group["betas"]),
                             "eps": float(group["eps"]), "clip_threshold": tau})
        else:
            raise ValueError(
                f"the stacked trainer runs ClippedSGD ('sgd'), Adam ('adam') and SimplexSGD ('simplex') updates; "
                f"got {type(optimizer).__name__}."
            )
    if len(kinds) != 1:
        raise ValueError(f"the networks of one stack must share their optimizer; got {sorted(kinds)}.")
    return _UpdateRule(kinds.pop(), settings)
