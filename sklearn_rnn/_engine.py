"""The skorch engine: the one module that knows skorch's training loop.

The estimators (``sklearn_rnn/_estimators.py``) validate and encode data, build a
:class:`~sklearn_rnn.nn.RecurrentNetwork` and hand it to the engine built here,
:class:`SequenceNet` (a :class:`skorch.NeuralNet`), through :func:`make_net`; they set
its training settings between calls with :func:`configure` and train it with skorch's
public ``partial_fit``. Everything goes through skorch's documented extension points:

- ``infer`` and ``get_loss`` read the batches of
  :class:`~sklearn_rnn.sequences.BucketBatchLoader` and reduce the loss as the estimator's
  :class:`~sklearn_rnn._inference.OutputSteps` says (last step or every step);
- ``train_step_single`` computes one batch's gradients, and ``train_step`` applies them:
  skorch's own step is used unchanged for Adam and the clipped SGD rule in float32; the
  thesis' simplex method (whose ``step`` takes the batch's temporal gradients) and mixed
  precision (whose :class:`torch.amp.GradScaler` steps the optimizer itself, and takes
  no closure) need a step of their own, which skorch's documentation asks for in that
  case ("if more fine-grained control is desired ... override the ``train_step``
  method"). It uses public calls only (``notify``, ``get_all_learnable_params``, the
  optimizer's ``zero_grad`` and ``step``);
- side concerns are callbacks: gradient clipping, the validation score, the training
  guard, the stopping rule, the progress bar, and the user's own (``callbacks``);
- ``train_split`` is one :class:`ValidationSplit` per net, set when it is built: it
  serves the validation data of the call in progress and holds none afterwards.

How training stops. skorch ends its epoch loop when a callback raises
``KeyboardInterrupt``: its ``partial_fit`` catches it and still runs ``on_train_end``.
That is what skorch's own :class:`skorch.callbacks.EarlyStopping` does when its patience
runs out, and it is skorch's documented way for a callback to end training; the package's
stopping rule (a subclass of it) and :class:`~sklearn_rnn._callbacks.TrainingGuard` (on a
non-finite loss or weights) use it the same way, rather than a mechanism of their own.
An interrupt from the user is told apart by the guard (nothing diverged, the epoch did
not finish) and reported as such; one landing in a callback after the guard's epoch end,
by the Ctrl-C that :func:`~sklearn_rnn._callbacks.noting_interrupts` saw during the call.

No private name of skorch is used here or anywhere in the package
(``tests/test_engine.py`` checks it).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

import joblib
import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics._scorer import _BaseScorer
from skorch import NeuralNet
from skorch.callbacks import (
    BatchScoring,
    Callback,
    Checkpoint,
    EpochScoring,
    LoadInitState,
    LRScheduler,
    PassthroughScoring,
    ProgressBar,
)
from skorch.history import History
from skorch.utils import TeeGenerator

from ._callbacks import (
    EarlyStopping,
    GradientClipping,
    PlainPrintLog,
    TrainingGuard,
    score_weights,
    _finite_parameters,
    _is_terminal,
    _kept,
    _restore,
    _snapshot,
)
from ._gathered import outside_stacklevel, warn
from ._inference import LAST_STEP, OutputSteps, run_network
from .nn.cells._base import autocast_on
from .optim import SimplexSGD, temporal_gradients
from .sequences import BucketBatchLoader, SequenceDataset, restore_layout

__all__ = ["PRECISIONS", "SequenceNet", "TrainingSettings", "ValidationSplit", "configure", "make_net",
           "gradient_mode"]

logger = logging.getLogger("sklearn_rnn._estimators")  # the stopping rule's messages, as before

#: The estimators' ``precision``: the autocast dtype of training (None: plain float32).
PRECISIONS: dict[str, torch.dtype | None] = {
    "float32": None,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

#: Names of the engine's own callbacks; a user's callback may not take them.
ENGINE_CALLBACKS = frozenset({"clip", "valid_score", "train_objective", "guard", "stop", "progress"})
#: Names of skorch's default callbacks, which the engine keeps or drops by call (``print_log``
#: with ``verbose``, ``valid_loss`` with validation data); a user's callback may not take them
#: either, whether the call at hand runs them or not.
SKORCH_CALLBACKS = frozenset({"epoch_timer", "train_loss", "valid_loss", "print_log"})
#: History keys the engine and skorch write each epoch, which the stopping rule and the
#: fitted attributes (``loss_curve_``, ``validation_scores_``) read: a user's scorer may not
#: write under them (or their ``_best`` keys).
RECORDED = frozenset({"train_loss", "valid_loss", "valid_score", "train_objective", "dur", "epoch",
                      "batches"})


@contextlib.contextmanager
def gradient_mode(device: str | torch.device) -> Iterator[None]:
    """Autograd on and a caller's autocast off for a call that differentiates the network
    (training, the gradient diagnostics), whatever the caller's code holds: an evaluation loop's ``torch.no_grad()`` or ``torch.inference_mode()``
    (the simplex step and mixed precision failed there, and tensors made in inference
    mode cannot be trained later), or a mixed-precision loop's ``torch.autocast`` on the
    CPU, CUDA or ``device`` (it trained ``precision='float32'`` in bfloat16 and recorded
    another validation loss): ``precision`` alone sets the arithmetic of training, and
    the diagnostics measure the float32 network that predicts."""
    with contextlib.ExitStack() as modes:
        modes.enter_context(torch.inference_mode(False))
        modes.enter_context(torch.enable_grad())
        device_types = {"cpu", "cuda"}
        try:
            device_types.add(torch.device(device).type)
        except RuntimeError:  # 'auto', or a name the call refuses later, by name
            pass
        for device_type in sorted(device_types):
            if autocast_on(device_type):
                modes.enter_context(torch.autocast(device_type, enabled=False))
        yield


@contextlib.contextmanager
def _fresh_autocast(device_type: str, dtype: torch.dtype) -> Iterator[None]:
    """:func:`torch.autocast`, whose casts of the weights are dropped when it exits: under
    an outer autocast (a caller's, which :func:`gradient_mode` turns off) PyTorch keeps
    them until the outer one exits, and every later step read the first step's weights
    (a bfloat16 fit under a caller's autocast did not learn)."""
    with torch.autocast(device_type, dtype=dtype):
        yield
    torch.clear_autocast_cache()


class _History(History):
    """skorch's training history, reading one epoch's row without copying every row.

    skorch's ``History.__getitem__`` copies the whole list of epochs before it indexes,
    and skorch and the callbacks read the last epoch (``history[-1, 'batches', -1,
    'train_loss']`` and the like) about fourteen times per epoch: a streaming
    ``partial_fit``, one epoch per update, paid about 1 ms per update after 15,000
    updates, growing with every update. An index that starts with an epoch number is
    resolved here on that epoch's row alone, by skorch's own code; any other index
    (slices, keys over all epochs) goes to skorch unchanged.

    Examples
    --------
    >>> from sklearn_rnn._engine import _History
    >>> history = _History([{"epoch": 1, "train_loss": 0.5, "batches": [{"train_loss": 0.7}]}])
    >>> history[-1, "train_loss"], history[-1, "batches", -1, "train_loss"], history[:, "epoch"]
    (0.5, 0.7, [1])
    """

    def __getitem__(self, i: Any) -> Any:
        key = i if isinstance(i, tuple) else (i,)
        if key and isinstance(key[0], int) and not isinstance(key[0], bool):
            row = list.__getitem__(self, key[0])  # IndexError as skorch's
            found = _read_row(row, key[1:])
            return found if found is not _MISSING else History([row])[(0, *key[1:])]
        return super().__getitem__(i)


#: What :func:`_read_row` returns when skorch's own indexing must answer.
_MISSING = object()


def _read_row(row: Any, key: tuple) -> Any:
    """What skorch's history returns for ``key`` on one epoch's ``row``, for the keys
    that skorch and the callbacks read every epoch (a value of the epoch, of one batch,
    or of every batch), found with plain dict and list lookups; ``_MISSING`` for any
    other key, or when the value is absent (skorch then raises its own ``KeyError``)."""
    if not isinstance(row, dict):
        return _MISSING
    if len(key) == 1 and type(key[0]) is str:  # history[e, key]
        return row.get(key[0], _MISSING)
    if len(key) != 3 or type(key[0]) is not str or key[0] != "batches" or not isinstance(
        row.get("batches"), list
    ):
        return _MISSING
    batches, index, name = row["batches"], key[1], key[2]
    if type(index) is int and type(name) is str:  # history[e, 'batches', b, key]
        if not -len(batches) <= index < len(batches) or not isinstance(batches[index], dict):
            return _MISSING
        return batches[index].get(name, _MISSING)
    if index != slice(None) or not all(isinstance(batch, dict) for batch in batches):
        return _MISSING
    if type(name) is str:  # history[e, 'batches', :, key]: the batches that have it
        values = [batch[name] for batch in batches if name in batch]
    elif type(name) is list and all(type(part) is str for part in name):
        # history[e, 'batches', :, [key, ...]]: the batches that have every key
        values = [[batch[part] for part in name] for batch in batches if all(part in batch for part in name)]
    else:
        return _MISSING
    return values if values else _MISSING


class ValidationSplit:
    """A net's ``train_split``: the validation data of the training call in progress.

    skorch asks ``train_split(dataset)`` for the training and validation datasets at
    the start of every ``partial_fit``. The estimators split their data themselves (a
    stratified, seeded hold-out), so this split only serves what :meth:`serving` was
    given, and nothing outside that block: a fitted model keeps no data.

    Examples
    --------
    >>> from sklearn_rnn._engine import ValidationSplit
    >>> split = ValidationSplit()
    >>> with split.serving("valid"):
    ...     split("train")
    ('train', 'valid')
    >>> split("train"), split.valid
    (('train', None), None)
    """

    def __init__(self) -> None:
        self.valid: SequenceDataset | None = None

    def __call__(self, dataset: Any, y: Any = None, **fit_params: Any) -> tuple[Any, Any]:
        return dataset, self.valid

    @contextlib.contextmanager
    def serving(self, valid: SequenceDataset | None) -> Any:
        """Serve ``valid`` as the validation data inside the block."""
        self.valid = valid
        try:
            yield self
        finally:
            self.valid = None


class SequenceNet(NeuralNet):
    """skorch engine reading the batches of :class:`~sklearn_rnn.sequences.BucketBatchLoader`.

    A batch is ``({'x', 'lengths', 'sample_weight'}, y)``; the module reads ``x`` and
    ``lengths``, and the loss is reduced as :attr:`output_steps` say: the sample-weighted
    mean of the per-sample criterion, or with a readout at every step the
    sample-weighted mean over valid steps of the criterion summed over the outputs.

    This is the estimators' ``net_``: a skorch net a user can read (``history``,
    ``module_``, ``optimizer_``, ``callbacks_``), built and trained by the estimator.
    """

    #: Coefficient of the L2 penalty on the weight matrices, ``alpha / n_samples``; set
    #: by the estimator before each training call.
    l2_penalty: float = 0.0

    #: Where the network is read out (and the loss put); the estimator class's readout.
    output_steps: OutputSteps = LAST_STEP

    #: Training arithmetic, one of :data:`PRECISIONS`; set by the estimator with the
    #: other training settings.
    precision: str = "float32"

    #: What the callbacks were built from (see :func:`configure`).
    callback_spec: tuple | None = None

    #: The estimator's settings that the network and its optimizer were last checked
    #: against before continued training (set and read by the estimator).
    checked_settings: tuple | None = None

    #: Whether the training calls have validation data (with the stopping rule); set
    #: by :func:`configure` with the callbacks.
    validates: bool = True

    def initialize_history(self) -> SequenceNet:
        """skorch's history, as a :class:`_History` (last epoch read in constant time)."""
        super().initialize_history()
        if not isinstance(self.history_, _History):
            self.history_ = _History(self.history_)
        return self

    def get_default_callbacks(self) -> list[tuple[str, Any]]:
        """skorch's default callbacks, without those that have nothing to do: the
        epoch table (``PrintLog``) when ``verbose=0`` (it formats the table at the end
        of every epoch, printed or not), and the validation loss (``valid_loss``) when
        no training call has validation data (it looks for validation batches at the
        end of every epoch, and records nothing). A streaming ``partial_fit`` runs one
        epoch per update and would pay for both on every call."""
        unused = {"print_log"} if not self.verbose else set()
        if not self.validates:
            unused.add("valid_loss")
        replaced = {"print_log": PlainPrintLog, "train_loss": EpochMeanScoring, "valid_loss": EpochMeanScoring}
        return [
            (name, _replaced(callback, replaced[name]) if name in replaced else callback)
            for name, callback in super().get_default_callbacks()
            if name not in unused
        ]

    def infer(self, x: dict[str, torch.Tensor], **fit_params: Any) -> torch.Tensor:
        return self.module_(x["x"], x["lengths"], every_step=self.output_steps.every_step)

    def forward_iter(self, X: Any, training: bool = False, device: str = "cpu") -> Any:
        """skorch's ``forward_iter``, with one output per sequence in the order of ``X``.

        The batches run sorted by length; skorch would yield their outputs in that order,
        so ``net.predict(dataset)`` (what a user's scoring callable reads) paired its
        rows with another sequence's target. Outside training the outputs come back as
        one block in the dataset's order; outputs at every step are padded with NaN to
        the longest sequence.
        """
        dataset = self.get_dataset(X)
        if training or not isinstance(dataset, SequenceDataset):
            yield from super().forward_iter(X, training=training, device=device)
            return
        steps = self.output_steps  # the batches of prediction (run_network), put in order
        order, values, _ = run_network(self.module_, dataset, batch_size=self.batch_size, steps=steps)
        outputs = steps.allocate(len(dataset), self.module_.readout.out_features)
        steps.place(outputs, order, values)
        if steps.every_step:  # (n, T, k), NaN past each sequence's last step
            outputs = restore_layout(outputs, "padded")
        dtype = next(self.module_.parameters()).dtype
        yield torch.as_tensor(outputs, dtype=dtype, device=device)

    def _skorch_step(self) -> bool:
        """Whether skorch's own training step applies (float32, not the simplex method)."""
        return self.precision == "float32" and not isinstance(self.optimizer_, SimplexSGD)

    def train_step(self, batch: Any, **fit_params: Any) -> dict[str, torch.Tensor]:
        """One update; the history's ``train_loss`` is the loss without the L2 penalty
        (comparable with ``valid_loss``), ``train_objective`` the penalized loss that
        was minimized (recorded when there is a penalty).

        Under mixed precision the forward pass runs under autocast and the loss in
        float32; with float16 the loss is scaled, the gradients (and the temporal
        gradients) are unscaled before any clipping, and an update whose gradients
        overflow is skipped, as :class:`torch.amp.GradScaler` does.
        """
        self.data_loss_: torch.Tensor | None = None
        if self._skorch_step():
            step = super().train_step(batch, **fit_params)
        else:
            self.optimizer_.zero_grad()
            step = self.train_step_single(batch, **fit_params)
            scaler = self.grad_scaler()
            if scaler is not None:
                scaler.unscale_(self.optimizer_)  # before the clipping callback and rule
            self.notify(
                "on_grad_computed",
                named_parameters=TeeGenerator(self.get_all_learnable_params()),
                batch=batch,
            )
            step_args = step.pop("step_args")
            if scaler is None:
                self.optimizer_.step(*step_args)
            else:
                scaler.step(self.optimizer_, *step_args)  # skipped if a gradient overflowed
                scaler.update()
        if self.data_loss_ is not None:
            self.history.record_batch("train_objective", step["loss"].item())
            step = {**step, "loss": self.data_loss_}
        return step

    def train_step_single(self, batch: Any, **fit_params: Any) -> dict[str, Any]:
        """One batch's loss and gradients; with the simplex method the batch's temporal
        gradients (for the optimizer's step), under mixed precision an autocast forward
        pass and, with float16, a scaled loss."""
        if self._skorch_step():
            with self._autocast():
                return super().train_step_single(batch, **fit_params)
        # What skorch's own step does first: modules in training mode (dropout on).
        self.module_.train(True)
        self.criterion_.train(True)
        inputs, y = batch
        simplex = isinstance(self.optimizer_, SimplexSGD)
        scaler = self.grad_scaler()
        every_step = self.output_steps.every_step
        with self._autocast():
            if simplex:
                states = self.module_.forward_states(inputs["x"], inputs["lengths"], every_step=every_step)
                outputs = states.outputs
            else:
                outputs = self.infer(inputs)
        loss = self.get_loss(outputs.float(), y, X=inputs, training=True)
        scaled = loss if scaler is None else scaler.scale(loss)
        step_args: tuple[Any, ...] = ()
        if simplex:
            # One backward pass gives every step's gradient and fills .grad as backward() would.
            scale = None if scaler is None else scaler.get_scale()
            step_args = (temporal_gradients(self.module_, states, scaled, inputs["lengths"], loss_scale=scale),)
        else:
            scaled.backward()
        return {"loss": loss.detach(), "y_pred": outputs.detach().float(), "step_args": step_args}

    def training_loss(
        self, dataset: SequenceDataset, *, objective: bool = False, balanced: bool = False, autocast: bool = True
    ) -> float:
        """The loss of the network's current weights on ``dataset``, in inference mode.

        The sample-weighted loss an epoch's ``train_loss`` averages (with
        ``objective=True`` the ``train_objective``: the loss plus the L2 penalty, when
        training minimizes one), with the weights held fixed rather than moving between
        an epoch's batches, and averaged as the epoch's is: each batch's loss weighted by
        its sequences (with a loss at every step, a batch's loss is the mean over its
        valid steps, so this is the mean of per-step means, which depends on how the
        sequences are batched, as ``valid_loss`` does; the exact loss per step is
        ``validation_scores_``' and ``nll_per_step``'s). The stopping rule reads it
        when it watches the training loss (:class:`~sklearn_rnn._callbacks.EarlyStopping`).

        Parameters
        ----------
        dataset : SequenceDataset
            The sequences and their targets (a training call's ``X``).
        objective : bool, default=False
            Add the L2 penalty, when training minimizes one.
        balanced : bool, default=False
            Weigh each class as class-balanced batches draw it (each sequence by
            ``n / (n_classes * n_c)`` besides its own weight): the loss that training on
            such batches minimizes, which ``train_loss`` reports (at the data's own class
            frequencies the untrained network won on a rare class).
        autocast : bool, default=True
            Compute in the training precision; False: in the weights' own dtype, as the
            recorded validation loss is (bfloat16 rounding ranked two sets of weights
            against their recorded float32 losses).

        Returns
        -------
        float
            The mean over the sequences, weighted as an epoch's batches are.
        """
        if balanced:
            labels = dataset.y.cpu().numpy()
            classes, position, counts = np.unique(labels, return_inverse=True, return_counts=True)
            share = torch.as_tensor(len(labels) / (len(classes) * counts[position]),
                                    dtype=dataset.sample_weight.dtype, device=dataset.sample_weight.device)
            dataset = SequenceDataset(dataset.sequences, dataset.y, dataset.sample_weight * share)
        was_training = self.module_.training
        self.module_.train(False)
        total, count = 0.0, 0
        try:
            with torch.no_grad(), (self._autocast() if autocast else contextlib.nullcontext()):
                # The batches of the validation loss (skorch's iterator_valid).
                for inputs, y in self.get_iterator(dataset, training=False):
                    loss = self.get_loss(self.infer(inputs).float(), y, X=inputs, training=objective)
                    size = len(inputs["lengths"])
                    total += float(loss) * size
                    count += size
        finally:
            self.data_loss_ = None  # set by get_loss for a penalized objective; not a training step's
            self.module_.train(was_training)
        return total / max(count, 1)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The arithmetic of ``precision`` for a pass: its autocast, or for float32 none
        (the training calls turn a caller's autocast off: :func:`gradient_mode`)."""
        dtype = PRECISIONS[self.precision]
        if dtype is None:
            return contextlib.nullcontext()
        return _fresh_autocast(torch.device(self.device).type, dtype)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """float16's loss scaler, kept (with its scale) across updates and epochs."""
        if self.precision != "float16":
            return None
        if getattr(self, "grad_scaler_", None) is None:
            self.grad_scaler_ = make_grad_scaler(torch.device(self.device).type)
        return self.grad_scaler_

    @property
    def minimizes_objective(self) -> bool:
        """Whether training minimizes the loss plus the L2 penalty (recorded per batch
        as ``train_objective``, beside the data loss as ``train_loss``); the simplex
        method takes no penalty."""
        return bool(self.l2_penalty) and not isinstance(self.optimizer_, SimplexSGD)

    def get_loss(
        self,
        y_pred: torch.Tensor,
        y_true: torch.Tensor,
        X: dict[str, torch.Tensor] | None = None,
        training: bool = False,
    ) -> torch.Tensor:
        loss = self.output_steps.loss(self.criterion_, y_pred, y_true, X)
        if training and self.minimizes_objective:
            # alpha / (2 n) * ||W||^2 over weight matrices (not biases, not decay rates,
            # not the learned initial states: a vector per layer, stored as rows).
            matrices = [
                p for name, p in self.module_.named_parameters()
                if p.requires_grad and p.ndim >= 2 and not name.startswith("initial_")
            ]
            self.data_loss_ = loss.detach()  # reported as train_loss
            loss = loss + 0.5 * self.l2_penalty * sum(p.square().sum() for p in matrices)
        return loss


class SequenceClassifierNet(ClassifierMixin, SequenceNet):
    """The engine of :class:`~sklearn_rnn.RNNClassifier`: a :class:`SequenceNet` that
    scikit-learn's scorers read as a classifier, for a user's
    :class:`~skorch.callbacks.EpochScoring` ('accuracy', 'roc_auc', 'f1', ...).

    The network trains on the indices of the estimator's ``classes_``, so here
    ``classes_`` are ``0 .. n_classes - 1``; ``predict_proba`` gives the class
    probabilities (skorch's softmax of the outputs, as for its cross-entropy) and
    ``predict`` the index of the most probable class, as skorch's
    :class:`~skorch.NeuralNetClassifier` does.
    """

    @property
    def classes_(self) -> np.ndarray:
        """The class indices the network trains on."""
        return np.arange(self.module_.readout.out_features)

    def predict(self, X: Any) -> np.ndarray:
        """The index of the most probable class of each sequence."""
        return self.predict_proba(X).argmax(axis=1)


def _replaced(callback: Callback, kind: type[Callback]) -> Callback:
    """``callback`` (skorch's default, or a copy of a user's) as an instance of ``kind``,
    a subclass of its class, with the same parameters."""
    return kind(**callback.get_params(deep=False))


class StepEpochScoring(EpochScoring):
    """skorch's :class:`~skorch.callbacks.EpochScoring`, for a network with an output
    at every step: the batches it caches are joined as one ``(n, T, k)`` block, NaN
    past each sequence's last step.

    Each batch is padded to its own longest sequence (with targets of 0, and outputs
    read from the state run on: neither is data), so skorch's joining of the batches an
    epoch cached (``numpy.concatenate`` of the targets, ``torch.cat`` of the outputs)
    failed as soon as the scored data spanned two batches. Here each cached batch is
    set to NaN past each sequence's end and padded with NaN to the epoch's longest
    sequence before skorch joins them: the scorer gets the outputs and the targets row
    by row, in the order the epoch's batches ran. The engine gives a user's
    ``EpochScoring`` of such a network this class (:func:`configure`).

    Examples
    --------
    >>> import torch
    >>> from types import SimpleNamespace
    >>> from sklearn_rnn._engine import StepEpochScoring
    >>> scoring = StepEpochScoring(lambda net, X, y: 0.0, on_train=True).initialize()
    >>> net = SimpleNamespace(use_caching="auto")  # skorch's net setting
    >>> for length, steps in ((3, 3), (1, 2)):  # two batches of one sequence, padded to 3 and 2 steps
    ...     inputs, y = {"lengths": torch.tensor([length])}, torch.zeros(1, steps, 1)
    ...     scoring.on_batch_end(net, (inputs, y), y_pred=torch.ones(1, steps, 1), training=True)
    >>> _, y, y_pred = scoring.get_test_data(None, None, use_caching=True)
    >>> y[:, :, 0].tolist(), torch.cat(y_pred)[:, :, 0].tolist()
    ([[0.0, 0.0, 0.0], [0.0, nan, nan]], [[1.0, 1.0, 1.0], [1.0, nan, nan]])
    """

    def on_batch_end(
        self, net: Any, batch: Any, y_pred: torch.Tensor, training: bool, **kwargs: Any
    ) -> None:
        cached = len(self.y_preds_)
        super().on_batch_end(net, batch, y_pred=y_pred, training=training, **kwargs)
        if len(self.y_preds_) == cached:  # the other data's batch, or no caching
            return
        inputs, y = batch
        self.y_preds_[-1] = _past_ends(y_pred, inputs["lengths"])
        if y is not None:  # cached with it
            self.y_trues_[-1] = _past_ends(y, inputs["lengths"])

    def get_test_data(self, dataset_train: Any, dataset_valid: Any, use_caching: bool) -> tuple[Any, Any, Any]:
        if use_caching and self.y_preds_:
            longest = max(part.shape[1] for part in self.y_preds_)
            self.y_preds_ = [_padded_to(part, longest) for part in self.y_preds_]
            self.y_trues_ = [_padded_to(part, longest) for part in self.y_trues_]
        return super().get_test_data(dataset_train, dataset_valid, use_caching)


def _past_ends(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """A ``(B, T, k)`` batch with NaN past each sequence's last step (outside the graph:
    skorch's training step gives the outputs that its loss was computed from)."""
    steps = torch.arange(values.shape[1], device=values.device)
    valid = steps < lengths.to(values.device)[:, None]
    return torch.where(valid[:, :, None], values.detach(), float("nan"))


def _padded_to(values: torch.Tensor, steps: int) -> torch.Tensor:
    """A ``(B, T, k)`` batch padded with NaN to ``steps`` steps."""
    return torch.nn.functional.pad(values, (0, 0, 0, steps - values.shape[1]), value=float("nan"))


class EpochMeanScoring(PassthroughScoring):
    """skorch's :class:`~skorch.callbacks.PassthroughScoring` (an epoch's score is the
    mean of its batches' scores, weighted by their sizes, as :func:`numpy.average`
    computes it), reading the epoch's batches directly.

    skorch gathers the scores and sizes with a slice of its history, which cost an
    epoch of three batches about 0.1 ms; here they are read from the epoch's list of
    batches (those that have both, as the slice keeps them) and averaged by the same
    ``numpy.average`` call. A streaming ``partial_fit`` trains one batch per epoch;
    there the mean is that batch's score, computed as ``numpy.average`` does
    (``score * size / size`` in float64), without the call. An epoch with no such
    batch goes to skorch (which raises its ``KeyError``).

    Examples
    --------
    >>> from skorch.history import History
    >>> from sklearn_rnn._engine import EpochMeanScoring
    >>> history = History([{"batches": [{"train_loss": 0.3, "train_batch_size": 7}]}])
    >>> float(EpochMeanScoring("train_loss", on_train=True).get_avg_score(history))
    0.3
    """

    def get_avg_score(self, history: History) -> Any:
        size_key = "train_batch_size" if self.on_train else "valid_batch_size"
        pairs = [
            (batch[size_key], batch[self.name])
            for batch in history[-1, "batches"]
            if isinstance(batch, dict) and size_key in batch and self.name in batch
        ]
        if not pairs:
            return super().get_avg_score(history)
        if len(pairs) == 1:
            size, score = pairs[0]
            if isinstance(size, int) and size > 0 and isinstance(score, float):
                weight = np.float64(size)
                return np.float64(score) * weight / weight
        sizes, scores = zip(*pairs)
        return np.average(scores, weights=sizes)


def make_net(
    module: torch.nn.Module,
    criterion: torch.nn.Module,
    optimizer: type[torch.optim.Optimizer],
    optimizer_params: dict[str, Any],
    *,
    lr: float,
    max_epochs: int,
    batch_size: int,
    device: torch.device,
    verbose: int,
    classifier: bool = False,
) -> SequenceNet:
    """The engine of one estimator: a :class:`SequenceNet` over ``module`` (a
    :class:`SequenceClassifierNet` for a classifier of one label per sequence), not
    yet initialized (:func:`configure` sets its callbacks, then skorch's
    ``initialize``)."""
    return (SequenceClassifierNet if classifier else SequenceNet)(
        module=module,
        criterion=criterion,
        optimizer=optimizer,
        lr=lr,
        max_epochs=max_epochs,
        batch_size=batch_size,
        iterator_train=BucketBatchLoader,
        iterator_valid=BucketBatchLoader,
        iterator_train__shuffle=True,
        train_split=ValidationSplit(),
        device=device,
        verbose=verbose,
        **optimizer_params,
    )


def _restarting(pairs: list[tuple[str, Callback]]) -> list[tuple[str, Callback]]:
    """The user's callbacks, each skorch :class:`~skorch.callbacks.LRScheduler` among them
    restarting its schedule at every training call.

    skorch builds the scheduler as a call begins with ``last_epoch`` set to the epochs
    already trained, and PyTorch's schedulers take a step as they are built: a warm
    call's first epoch then ran at ``learning_rate * gamma`` under StepLR whenever the
    history's length was a multiple of ``step_size``, and LambdaLR went on from the
    history, while the estimator sets the rate back to ``learning_rate`` at every call.
    Built with ``last_epoch=-1`` (unless the callback names its own), every call runs
    the schedule from its start, as a first fit does (the estimator removes the base
    rate, ``initial_lr``, that the last call's scheduler left in the optimizer).
    ReduceLROnPlateau, which takes no ``last_epoch``, is left as it is.
    """
    for _, callback in pairs:
        if not isinstance(callback, LRScheduler) or "last_epoch" in callback.kwargs:
            continue
        policy = callback.policy
        if isinstance(policy, str):
            policy = getattr(sys.modules[LRScheduler.__module__], policy, None)
        try:
            parameters = inspect.signature(policy).parameters.values()
            takes = any(p.name == "last_epoch" or p.kind is p.VAR_KEYWORD for p in parameters)
        except (TypeError, ValueError):
            takes = False
        if takes and policy is not torch.optim.lr_scheduler.ReduceLROnPlateau:
            callback.last_epoch = -1  # one of the scheduler's arguments, for skorch
    return pairs


def copy_callback(name: str, callback: Callback, owner: str, memo: dict[int, Any] | None = None) -> Callback:
    """A copy of the user's callback ``name`` for training (or for ``set_params``), so
    that the object given is never changed.

    A deep copy; when that fails, a copy whose attributes are deep copies, but for those
    that cannot be copied (an open file, a lock, a ``SummaryWriter``: what a logger
    holds), which it shares with the original. ``memo`` is :func:`copy.deepcopy`'s, one
    for the callbacks copied together, so that what they share stays shared among the
    copies (a ``LoadInitState`` reads its ``Checkpoint``).

    Raises
    ------
    ValueError
        When not even the callback itself can be copied, naming it and the fix.

    Examples
    --------
    >>> import threading
    >>> from skorch.callbacks import Callback
    >>> from sklearn_rnn._engine import copy_callback
    >>> class Log(Callback):
    ...     def __init__(self, lock=None, notes=None):
    ...         self.lock, self.notes = lock, notes
    >>> log = Log(threading.Lock(), notes=[])  # a lock cannot be deep-copied
    >>> twin = copy_callback("log", log, "RNNClassifier")
    >>> twin.lock is log.lock, twin.notes is log.notes
    (True, False)
    """
    memo = {} if memo is None else memo
    saved = dict(memo)
    try:
        return copy.deepcopy(callback, memo)
    except (TypeError, copy.Error):  # "cannot pickle '_io.TextIOWrapper' object"
        _reset(memo, saved)  # what the failed copy left half made
    try:
        twin = copy.copy(callback)
    except (TypeError, copy.Error) as error:
        raise ValueError(
            f"{owner}(callbacks=...) callback {name!r} ({type(callback).__name__}) cannot be "
            f"copied ({error}): training runs a copy, so that the callback given is never "
            "changed. Give the callback what it holds that cannot be copied (an open file, a "
            "lock, a writer) in its initialize() or on_train_begin(), or through a function it "
            "calls; or make it copyable (__copy__)."
        ) from error
    memo[id(callback)] = twin
    for key, value in list(getattr(twin, "__dict__", {}).items()):
        saved = dict(memo)
        try:
            setattr(twin, key, copy.deepcopy(value, memo))
        except (TypeError, copy.Error):
            _reset(memo, saved)  # shared with the original
    return twin


def _reset(memo: dict[int, Any], saved: dict[int, Any]) -> None:
    """Put ``memo`` back as ``saved`` was, after a deep copy that failed."""
    memo.clear()
    memo.update(saved)


def check_user_callbacks(callbacks: Any, owner: str) -> list[tuple[str, Callback]]:
    """The ``callbacks`` parameter as a list of ``(name, skorch callback)`` pairs.

    Raises
    ------
    ValueError
        Naming what was expected, what came, and the fix.
    """
    if callbacks is None:
        return []
    pairs = []
    for index, item in enumerate(callbacks):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], Callback)):
            raise ValueError(
                f"{owner}(callbacks=...) item {index} is {item!r}: expected a (name, "
                "callback) pair of a string and a skorch callback instance, e.g. "
                "('lr', skorch.callbacks.LRScheduler(policy='StepLR', step_size=10))."
            )
        if "__" in item[0]:  # set_params(callbacks__<name>__<parameter>) splits at the first
            raise ValueError(
                f"{owner}(callbacks=...) names a callback {item[0]!r}, which holds '__': "
                "set_params(callbacks__<name>__<parameter>=...) and a grid search over it "
                "read the name up to the first '__'. Choose a name without '__', e.g. "
                f"{re.sub('_{2,}', '_', item[0])!r}."
            )
        if item[0] in ENGINE_CALLBACKS | SKORCH_CALLBACKS:
            raise ValueError(
                f"{owner}(callbacks=...) names a callback {item[0]!r}, a name the estimator "
                f"uses for its own ({', '.join(sorted(ENGINE_CALLBACKS))}) or for skorch's "
                f"default callbacks ({', '.join(sorted(SKORCH_CALLBACKS))}); choose another name."
            )
        written = getattr(item[1], "name", None) if isinstance(item[1], (EpochScoring, BatchScoring)) else None
        if isinstance(written, str) and written.removesuffix("_best") in RECORDED:
            raise ValueError(
                f"{owner}(callbacks=...) callback {item[0]!r} ({type(item[1]).__name__}) writes its "
                f"score under name={written!r}, a record of the estimator's own history "
                f"({', '.join(sorted(RECORDED))}, and their _best keys) that the stopping rule "
                "and loss_curve_ / validation_scores_ read: it would replace them. Give the "
                f"scorer another name, e.g. name='my_{written.removesuffix('_best')}'."
            )
        if isinstance(item[1], EpochScoring) and not item[1].use_caching and _reads_one_target(item[1].scoring):
            raise ValueError(
                f"{owner}(callbacks=...) callback {item[0]!r} is an EpochScoring of "
                f"scoring={item[1].scoring!r} with use_caching=False, which makes skorch read "
                "the targets from a skorch.dataset.Dataset; the estimator's batches come from "
                "its own dataset, so the scorer would be called with y=None and fail after "
                "the first epoch. Leave use_caching=True (skorch's default): the scorer then "
                "reads the predictions the epoch made (a callable scorer, called as "
                "scoring(net, dataset, None), may use use_caching=False)."
            )
        pairs.append(item)
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError(f"{owner}(callbacks=...) names a callback twice: {names}; use unique names.")
    return pairs


def _check_scorers_take_steps(pairs: list[tuple[str, Callback]], owner: str) -> None:
    """Refuse a scorer given by name (or skorch's default, the net's ``score``), of an
    ``EpochScoring`` or a ``BatchScoring``, to an estimator with an output at every step:
    scikit-learn's scorers take one target per sequence and would fail after the first
    epoch (or batch) on the per-step targets."""
    for name, callback in pairs:
        if isinstance(callback, EpochScoring) and type(callback) not in (EpochScoring, StepEpochScoring):
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} is a subclass of EpochScoring "
                f"({type(callback).__name__}): {owner} has an output at every step, and joins an "
                "EpochScoring's cached batches of other lengths through its own class, which a "
                "subclass would lose (it failed after the first epoch in numpy's concatenate). "
                "Use EpochScoring itself, with what the subclass adds in a callback of its own "
                "(e.g. one that reads the score from net.history in on_epoch_end)."
            )
        if isinstance(callback, (EpochScoring, BatchScoring)) and _reads_one_target(callback.scoring):
            kind, epoch = type(callback).__name__, isinstance(callback, EpochScoring)
            how = (
                "epoch's cached outputs: net.forward(X), a tensor, and y are padded with NaN to "
                "(n, T, k) past each sequence's last step"
                if epoch else
                "outputs of each batch: net.forward(X), a tensor, and y are the batch's outputs "
                "and targets, (B, T, k), each sequence's valid up to its length X['lengths']"
            )
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} is {_article(kind)} {kind} of "
                f"scoring={callback.scoring!r}: scikit-learn's scorers take one target per "
                f"sequence, but {owner} has a target at every step, so it would fail after "
                f"the first {'epoch' if epoch else 'batch'}. Pass a callable, called as "
                f"scoring(net, X, y) with the {how}."
            )


def _reads_one_target(scoring: Any) -> bool:
    """Whether a skorch scorer's ``scoring`` is scikit-learn's: a name (or None, the net's
    ``score``) or a scorer object (``make_scorer``, ``get_scorer``), which reads the
    targets as scikit-learn does, one per sequence, rather than a plain callable
    ``scoring(net, X, y)`` (a scorer object passed the old test, ``callable``, and
    failed after the first epoch)."""
    return not callable(scoring) or isinstance(scoring, _BaseScorer)


def _article(word: str) -> str:
    """'a' or 'an', as ``word`` is spoken."""
    return "an" if word[:1].upper() in "AEIOU" else "a"


def _check_nothing_edits_gradients(pairs: list[tuple[str, Callback]], owner: str) -> None:
    """Refuse, under the simplex method, a user's callback whose class acts on the
    gradients (overrides ``on_grad_computed``, as skorch's ``GradientNormClipping``
    does): the engine runs it, but :class:`~sklearn_rnn.optim.SimplexSGD` steps from the
    temporal gradients computed before it, and never reads ``.grad``, so what it does
    there would be silently ignored."""
    for name, callback in pairs:
        if type(callback).on_grad_computed is not Callback.on_grad_computed:
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} ({type(callback).__name__}) acts on the "
                "gradients in on_grad_computed, but optimizer='simplex' builds its step from the "
                "per-step (temporal) gradients, computed before the callback runs, and never reads "
                ".grad: what the callback does there would be silently ignored. Clip the simplex "
                "step with clip_threshold (the step rule of the thesis, eq. 3.6), or use "
                "optimizer='sgd' or 'adam', whose steps read the .grad the callback leaves. A "
                "callback that only reads the gradients can read them in on_batch_end, where "
                ".grad holds the batch's gradient."
            )


def _check_nothing_restores_weights(pairs: list[tuple[str, Callback]], owner: str) -> None:
    """Refuse, in a training call that the stopping rule ends, a user's callback that
    loads weights of its own when training ends (``load_best=True``: skorch's
    ``EarlyStopping`` restores its best epoch's weights, its ``Checkpoint`` its best
    checkpoint). It runs before the rule, which then kept, or judged as the last
    epoch's, weights of another epoch: the model was not the network that
    ``best_epoch_`` and the validation attributes describe."""
    for name, callback in pairs:
        if getattr(callback, "load_best", False):
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} ({type(callback).__name__}) has "
                "load_best=True: it would load weights of its own choosing when training ends, "
                f"behind {owner}'s stopping rule, which restores the best epoch of the loss it "
                "watches itself, so the model would not be the epoch that best_epoch_ and the "
                "validation scores describe. To let the callback only end training (the rule then "
                "keeps its best epoch so far) or save checkpoints, set load_best=False; choose "
                "what the rule watches and its patience with early_stopping (the validation "
                "loss), n_iter_no_change and tol."
            )


def _check_nothing_replaces_history(pairs: list[tuple[str, Callback]], owner: str) -> None:
    """Refuse a user's callback that replaces the network's history with a checkpoint's:
    skorch's ``LoadInitState`` as a training call begins, its ``Checkpoint`` with
    ``load_best=True`` as one ends (in ``fit`` refused already, as any ``load_best``).
    ``n_iter_``, ``loss_curve_`` and the stopping rule count the epochs of the history
    against those it had before the call: a fit of one epoch after a checkpoint of three
    reported ``n_iter_`` 4, and a stream of ``partial_fit`` calls stayed at its first."""
    for name, callback in pairs:
        if isinstance(callback, LoadInitState):
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} (LoadInitState) replaces the network's "
                "weights, optimizer state and history with its checkpoint's as each training call "
                "begins: n_iter_, loss_curve_ and the stopping rule would count the checkpoint's "
                f"epochs as the call's, and the checkpoint holds the network without {owner}'s "
                "encoding of the inputs. To resume training, keep the fitted estimator (pickle or "
                "joblib, or save and sklearn_rnn.load) and continue it with warm_start=True or "
                "partial_fit; a Checkpoint may still save the network as it trains."
            )
        if isinstance(callback, Checkpoint) and callback.load_best:
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} (Checkpoint) has load_best=True: it "
                "loads its best checkpoint's weights and history in place of the network's as each "
                "partial_fit call ends, so n_iter_ and loss_curve_ would not count the epochs "
                "trained. To only save checkpoints, set load_best=False; to keep the best state of "
                "a stream, keep a copy of the estimator (pickle or joblib) when its score improves."
            )


def _check_nothing_watches_validation(
    pairs: list[tuple[str, Callback]], owner: str, incremental: bool
) -> None:
    """Refuse a user's callback that watches a validation record ('valid_loss',
    skorch's default for its ``EarlyStopping``; 'valid_loss_best', its ``Checkpoint``'s)
    in a training call without validation data, where it would fail with a bare
    ``KeyError`` after the first epoch, and a scorer of the validation data (an
    ``EpochScoring`` or ``BatchScoring`` with ``on_train=False``, skorch's default),
    which would record nothing."""
    why, way = (
        ("partial_fit holds none out", "fit with early_stopping=True")
        if incremental else
        ("early_stopping is False, or 'auto' and holding none out", "set early_stopping=True")
    )
    for name, callback in pairs:
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor.startswith("valid_"):
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} watches {monitor!r}, but this "
                f"training call has no validation data ({why}). To hold out "
                f"validation_fraction of the data, {way}; or have the callback watch the "
                f"training loss (monitor={'train_' + monitor[len('valid_'):]!r})."
            )
        if isinstance(callback, (EpochScoring, BatchScoring)) and not callback.on_train:
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} scores the validation data, but "
                f"this training call has none ({why}): it would record nothing. To hold "
                f"out validation_fraction of the data, {way}; or score the training data "
                "(on_train=True)."
            )


def _check_nothing_watches_the_objective(pairs: list[tuple[str, Callback]], owner: str) -> None:
    """Refuse a user's callback that watches 'train_objective' (the loss plus the L2
    penalty) in a training call without a penalty, which records none: it would fail
    with a bare ``KeyError`` after the first epoch (switching to a cell whose 'auto'
    alpha is 0 turned a working callback into that failure)."""
    for name, callback in pairs:
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor.startswith("train_objective"):
            raise ValueError(
                f"{owner}(callbacks=...) callback {name!r} watches {monitor!r}, the loss plus "
                "the L2 penalty, but this training call has no penalty (alpha resolves to 0, "
                "or optimizer='simplex', which takes none), so none is recorded. Have the "
                f"callback watch the loss (monitor={'train_loss' + monitor[len('train_objective'):]!r}), "
                "or set alpha > 0 with optimizer 'adam' or 'sgd'."
            )


def _callbacks_key(pairs: list[tuple[str, Callback]]) -> tuple:
    """The user's callbacks by value: each one's name, object and settings. The list
    itself would compare equal to itself after a change in place (a callback appended,
    or one's settings changed), and the engine would keep the callbacks built before.
    Settings are keyed by :func:`_setting_key`."""

    def settings(callback: Callback) -> tuple | None:
        try:
            params = callback.get_params(deep=False)
        except Exception:  # a callback whose parameters cannot be read: its object stands
            return None
        return tuple((key, _setting_key(value)) for key, value in sorted(params.items()))

    return tuple((name, id(callback), settings(callback)) for name, callback in pairs)


def _setting_key(value: Any, depth: int = 0) -> Any:
    """A callback setting by content where it is data (numbers, text, arrays and tables
    by a hash of their values, containers item by item, an estimator by its parameters),
    and by identity where it is an object (a file, a lock, an event, a function: what
    :func:`copy_callback` shares with the copy). Their ``repr`` missed a change inside an
    array of over 1,000 entries (shown with "...") and saw one in a shared lock's or
    event's state (set by another thread), which rebuilt every callback, resetting them."""
    if depth > 20:  # a container that holds itself
        return ("object", id(value))
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        return ("value", type(value).__name__, repr(value))  # repr: NaN equals NaN
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_setting_key(item, depth + 1) for item in value))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, tuple(sorted(repr(_setting_key(item, depth + 1)) for item in value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(key), _setting_key(item, depth + 1)) for key, item in value.items())))
    if isinstance(value, np.ndarray) or type(value).__module__.split(".")[0] == "pandas":
        try:
            return ("data", joblib.hash(value))
        except Exception:  # objects inside that cannot be pickled
            return ("object", id(value))
    if hasattr(value, "get_params") and not isinstance(value, type):
        try:
            params = value.get_params(deep=False)
        except Exception:
            return ("object", id(value))
        return ("estimator", id(value), tuple((key, _setting_key(item, depth + 1))
                                              for key, item in sorted(params.items())))
    return ("object", id(value))


#: Where :func:`configure`'s spec holds :func:`_callbacks_key`.
_SPEC_KEY = 8


def callbacks_current(net: SequenceNet, user_callbacks: Any, owner: str) -> bool:
    """Whether ``net``'s built callbacks are those of ``user_callbacks`` as they are now,
    so that the next training call keeps them with their state.

    Parameters
    ----------
    net : SequenceNet
    user_callbacks : list or None
        The estimator's ``callbacks`` parameter.
    owner : str
        The estimator's class name.

    Returns
    -------
    bool
    """
    spec = net.callback_spec
    if spec is None:
        return False
    try:
        return spec[_SPEC_KEY] == _callbacks_key(check_user_callbacks(user_callbacks, owner))
    except (TypeError, ValueError):  # callbacks set since, that training would refuse
        return False


def mark_callbacks_current(net: SequenceNet, user_callbacks: Any, owner: str) -> None:
    """Key ``net``'s built callbacks to ``user_callbacks`` as they are now.

    For a copy (pickle, joblib, :func:`copy.deepcopy`) of an estimator whose callbacks
    were current (:func:`callbacks_current`): its callbacks are new objects, which the
    key, made of the objects' identities, would take for a change, and the copy's next
    training call would build its callbacks afresh and lose their state.

    Parameters
    ----------
    net : SequenceNet
    user_callbacks : list or None
    owner : str
    """
    spec = list(net.callback_spec)
    spec[_SPEC_KEY] = _callbacks_key(check_user_callbacks(user_callbacks, owner))
    net.callback_spec = tuple(spec)


def configure(
    net: SequenceNet,
    *,
    owner: str,
    incremental: bool,
    stopping: bool,
    scoring: Any,
    clip_threshold: float | None,
    penalized: bool,
    monitor: str,
    n_iter_no_change: int,
    tol: float,
    user_callbacks: Any,
    verbose: int,
    every_step: bool = False,
) -> None:
    """Set the engine's callbacks for a training call, in the order they must run.

    The callbacks are built (and skorch initializes them) only when what they are
    built from changed: a stream of ``partial_fit`` calls builds them once. Each is
    fresh when built; the user's are copies of ``user_callbacks`` (:func:`copy_callback`),
    so that the estimator's parameter is never changed by training.
    """
    progress = bool(verbose) and _is_terminal(sys.stderr)
    pairs = check_user_callbacks(user_callbacks, owner)
    if isinstance(net.optimizer, type) and issubclass(net.optimizer, SimplexSGD):
        _check_nothing_edits_gradients(pairs, owner)
    if every_step:
        _check_scorers_take_steps(pairs, owner)
    if not incremental:
        _check_nothing_restores_weights(pairs, owner)
    _check_nothing_replaces_history(pairs, owner)
    if not stopping:
        _check_nothing_watches_validation(pairs, owner, incremental)
    if not penalized:
        _check_nothing_watches_the_objective(pairs, owner)
    # The stopping rule's settings, which an incremental call (no rule) leaves unused:
    # changing them between partial_fit calls rebuilt the user's callbacks, resetting them.
    rule = (monitor, n_iter_no_change, tol) if not incremental else (None, None, None)
    spec = (owner, incremental, stopping, clip_threshold, penalized, *rule,
            _callbacks_key(pairs), bool(verbose), progress)  # key: _SPEC_KEY
    net.verbose = verbose  # the epoch table (skorch's print_log) reads it at each epoch
    if net.callback_spec is not None and net.callback_spec == spec:
        return
    if net.initialized_ and net.callback_spec is not None and net.callback_spec[:-2] == spec[:-2]:
        # Only printing changed: the epoch table and the progress bar come or go, and
        # the other callbacks (the user's among them) keep their state.
        _set_printing(net, progress)
        net.callback_spec = spec
        return
    net.validates = stopping  # skorch's default callbacks follow it
    callbacks: list[tuple[str, Any]] = []
    if clip_threshold is not None:
        callbacks.append(("clip", GradientClipping(float(clip_threshold))))
    # The score is recorded before the stopping rule may end the epoch loop.
    if stopping:
        callbacks.append(
            ("valid_score", EpochScoring(ValidationScore(scoring), lower_is_better=False,
                                         name="valid_score", use_caching=False))
        )
    if penalized:  # the epoch's mean penalized loss, before the stopping rule
        callbacks.append(
            ("train_objective", PassthroughScoring(name="train_objective", on_train=True))
        )
    # Before "stop" and the user's: an epoch is recorded as finished before a callback
    # ends training.
    callbacks.append(("guard", FitGuard(owner, restores_best=not incremental)))
    memo: dict[int, Any] = {}  # one for all: what the callbacks share stays shared
    user = _restarting([(name, copy_callback(name, callback, owner, memo)) for name, callback in pairs])
    if every_step:  # a scorer's cached batches joined as one block
        user = [(name, _replaced(callback, StepEpochScoring) if type(callback) is EpochScoring else callback)
                for name, callback in user]
    callbacks.extend(user)
    if not incremental:
        callbacks.append(
            (
                "stop",
                EarlyStopping(
                    monitor=monitor,
                    patience=int(n_iter_no_change),
                    # No stop on an early plateau: a loss may stay flat for a while
                    # before the network learns what lies many steps back.
                    min_epochs=3 * int(n_iter_no_change),
                    threshold=float(tol),
                    threshold_mode="abs",
                    # The best epoch of the monitored loss, after a divergence too.
                    load_best=True,
                    sink=logger.info,
                ),
            )
        )
    if progress:
        callbacks.append(("progress", ProgressBar()))  # a log file gets the epoch table only
    # A plain attribute: skorch's set_params would try to re-initialize components.
    net.callbacks = callbacks
    if net.initialized_:
        net.initialize_callbacks()
        resume_best_scores(net)
    net.callback_spec = spec


def resume_best_scores(net: SequenceNet) -> None:
    """Give the scorers of ``net`` (skorch's ``PassthroughScoring``, which start from no
    best score and, unlike ``EpochScoring``, do not read the history) the best score
    its history records, so that callbacks built anew for a net with epochs behind it
    (a loaded, unpickled or reconfigured model) mark the epochs that follow as the net
    they continue would: the first epochs after a load were marked best though worse.

    Parameters
    ----------
    net : SequenceNet
    """
    for _, callback in net.callbacks_:
        name = getattr(callback, "name", None)
        if not hasattr(callback, "best_score_") or not isinstance(name, str):
            continue
        for row in reversed(net.history):
            if row.get(f"{name}_best") and name in row:
                callback.best_score_ = row[name]
                break


def _set_printing(net: SequenceNet, progress: bool) -> None:
    """Add or remove the epoch table (skorch's ``print_log``, which the net leaves out
    when silent) and the progress bar as ``net.verbose`` and ``progress`` say, in the
    places a build gives them (the bar last of the engine's, the table last of all),
    leaving the other callbacks as they are: not initialized again, their state kept."""
    net.callbacks = [(name, callback) for name, callback in net.callbacks if name != "progress"]
    callbacks = [(name, callback) for name, callback in net.callbacks_ if name not in ("progress", "print_log")]
    if progress:
        bar = ProgressBar().initialize()
        net.callbacks.append(("progress", bar))
        callbacks.append(("progress", bar))
    table = dict(net.get_default_callbacks()).get("print_log")  # None when silent
    if table is not None:
        callbacks.append(("print_log", table.initialize()))
    net.callbacks_ = callbacks


class FitGuard(TrainingGuard):
    """The training guard of the estimators' calls, quiet about an interrupt before any
    epoch of the call finished: the unfinished epoch is dropped and the state the call
    started from restored, and the estimator re-raises the interrupt (nothing of the
    call is kept, so a Ctrl-C also ends a loop of ``partial_fit`` calls).

    At the end of training it also has the stopping rule ("stop", after the user's
    callbacks) restore its best epoch, so that the user's callbacks' ``on_train_end``
    (a ``TrainEndCheckpoint``) see the weights the estimator keeps; and it checks those
    weights once more, as a user's callback may have changed them after its own check
    of the last epoch."""

    quiet_before_first_epoch = True

    def on_epoch_begin(self, net: Any, **kwargs: Any) -> None:
        # Weights spoiled after this guard's check of the last epoch, by a callback after
        # it, would be the next epoch's start (and its rollback copy): end training
        # there, the epoch just begun dropped, and let on_train_end undo the spoiled one.
        if self._finished_epochs > self._call_start and not _finite_parameters(net.module_):
            net.history.pop()
            raise KeyboardInterrupt  # skorch's way to end its fit loop
        super().on_epoch_begin(net, **kwargs)

    #: Whether this guard's end of training ran: training is over, and an interrupt after
    #: it (in a user's ``on_train_end``, a checkpoint being written) leaves what it kept.
    train_ended_: bool = False

    def on_train_begin(self, net: Any, **kwargs: Any) -> None:
        super().on_train_begin(net, **kwargs)
        self.train_ended_ = False

    def on_train_end(self, net: Any, **kwargs: Any) -> None:
        self._end_training(net, **kwargs)
        self.train_ended_ = True

    def _end_training(self, net: Any, **kwargs: Any) -> None:
        super().on_train_end(net, **kwargs)
        stop = dict(net.callbacks_).get("stop")
        spoiled = not _finite_parameters(net.module_) and self._snapshot is not None
        if spoiled and isinstance(stop, EarlyStopping) and stop.best_epoch_ == len(net.history):
            # The stopping rule took the spoiled weights as its best epoch's: it keeps
            # those the epoch started from, as the last finished before it.
            stop.best_model_weights_ = self._snapshot["module"]
            stop.best_start_weights_ = None
        if isinstance(stop, EarlyStopping):
            stop.finish(net, **kwargs)
        if _finite_parameters(net.module_) or self._snapshot is None:
            return
        # Spoiled after this guard's check of the last epoch, by a callback after it.
        epoch = len(net.history)
        net.history.pop()
        _restore(net, self._snapshot)
        if isinstance(stop, EarlyStopping) and stop.best_epoch_ == epoch:
            stop.best_epoch_ = epoch - 1  # the epoch whose weights are kept
        warn(
            f"{self.owner}: the weights became non-finite at the end of epoch {epoch}, after "
            "the training guard's check of them: in a callback after it (a user's callback "
            f"that edits the weights?). Training stopped and {_kept(epoch - 1, False)}.",
            ConvergenceWarning,
            stacklevel=outside_stacklevel(),
        )


class Rollback:
    """The state of a fitted network before continued training, restored when that
    training fails with an exception (a rejected call never gets this far): the weights,
    the optimizer, the history, the dropout generators and the scorers' best scores (a
    discarded epoch's score stayed their best, and the retried epoch was not marked best:
    a ``Checkpoint`` on ``train_loss_best`` skipped it)."""

    def __init__(self, net: SequenceNet) -> None:
        self.state = _snapshot(net)  # the weights and the optimizer, as the training guard copies them
        self.epochs = len(net.history)
        generators = getattr(net.module_, "_dropout_generators", {})
        self.generators = {key: generator.get_state() for key, generator in generators.items()}
        self.best_scores = [(callback, callback.best_score_) for _, callback in net.callbacks_
                            if hasattr(callback, "best_score_")]

    def restore(self, net: SequenceNet) -> None:
        _restore(net, self.state)
        while len(net.history) > self.epochs:
            net.history.pop()
        for callback, best in self.best_scores:
            callback.best_score_ = best
        generators = getattr(net.module_, "_dropout_generators", {})
        for key in list(generators):
            if key in self.generators:
                generators[key].set_state(self.generators[key])
            else:
                del generators[key]


#: The network's components and records, which :class:`Rollback` restores (or which
#: training changes only through them): a settings snapshot leaves them out.
_COMPONENTS = frozenset({"module_", "optimizer_", "criterion_", "history_"})


def _plain(owner: Any) -> dict[str, Any]:
    """The public attributes of ``owner`` that hold plain values (a criterion's
    ``label_smoothing``, an optimizer's ``switch_threshold``)."""
    return {
        key: value for key, value in vars(owner).items()
        if not key.startswith("_") and (value is None or type(value) in (bool, int, float, str))
    }


class TrainingSettings:
    """The settings a training call gives a fitted network (step size, batch size,
    epochs, callbacks, the criterion's label smoothing, the optimizer's thresholds),
    put back when the call fails, so that the network reads as it did before it.

    Taken before the call checks anything; :class:`Rollback` restores the weights.
    """

    def __init__(self, net: SequenceNet) -> None:
        self.attributes = {
            key: list(value) if type(value) is list else value
            for key, value in vars(net).items() if key not in _COMPONENTS
        }
        self.criterion = _plain(net.criterion_)
        self.optimizer = _plain(net.optimizer_)
        self.groups = [
            {key: value for key, value in group.items() if key != "params"}
            for group in net.optimizer_.param_groups
        ]

    def restore(self, net: SequenceNet) -> None:
        for key in [key for key in vars(net) if key not in _COMPONENTS]:
            if key not in self.attributes:
                del vars(net)[key]
        vars(net).update(self.attributes)
        vars(net.criterion_).update(self.criterion)
        vars(net.optimizer_).update(self.optimizer)
        for group, saved in zip(net.optimizer_.param_groups, self.groups):
            group.update(saved)


def make_grad_scaler(device_type: str) -> Any:
    """float16's loss scaler on ``device_type``: :class:`torch.amp.GradScaler` (torch 2.3
    and later), or on torch 2.2 the CUDA one; torch 2.2 has none for the CPU.

    >>> make_grad_scaler("cpu").get_scale()
    65536.0
    """
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type)
    if device_type == "cuda":
        return torch.cuda.amp.GradScaler()
    raise RuntimeError(
        f"precision='float16' scales the loss with torch.amp.GradScaler, which torch "
        f"{torch.__version__} lacks on the {device_type} (it came with torch 2.3). Upgrade "
        "torch, or use precision='bfloat16' (no scaling) or 'float32'."
    )


class ValidationScore:
    """skorch scoring callable: an estimator's validation score of the network being
    trained, run over the validation data by :func:`~sklearn_rnn._inference.run_network`
    (the inference path of prediction)."""

    def __init__(self, score: Any) -> None:
        self.score = score

    def __call__(self, net: SequenceNet, X: SequenceDataset, y: Any = None) -> float:
        order, outputs, targets = run_network(
            net.module_, X, batch_size=net.batch_size, steps=net.output_steps, targets=True
        )
        if not net.output_steps.finite(outputs).all():  # the training guard stops on it
            return float("nan")
        weight = None if X.sample_weight is None else X.sample_weight.cpu().numpy()[order]
        return self.score(targets, outputs, score_weights(weight))
