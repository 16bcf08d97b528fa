"""skorch callbacks that keep a fitted estimator usable when training goes wrong.

:class:`TrainingGuard` keeps a copy of the weights (and of the optimizer's state) of
the last epoch whose loss and weights are finite. When a training batch gives
a non-finite loss, or an epoch ends with non-finite weights or a non-finite validation
loss or score, it stops training with a :class:`~sklearn.exceptions.ConvergenceWarning`
and restores that copy. When training is
interrupted (``KeyboardInterrupt``, which skorch catches in its fit loop) in the middle
of an epoch, it restores the same copy and drops the unfinished epoch from the history,
so that the weights, ``n_iter_`` and ``loss_curve_`` all describe the last finished
epoch.

Copies are taken per epoch, not per batch: an epoch is the unit that ``n_iter_`` and
``loss_curve_`` count, so the restored state always matches them. The copy of a
finished epoch's state is taken when the next epoch begins, not when it ends: until
then nothing changes the weights, so a training call whose last epoch finishes (every
``partial_fit`` call is one epoch) makes one copy per epoch it trains, not one more.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from skorch.callbacks import Callback, GradientNormClipping, PrintLog
from skorch.callbacks import EarlyStopping as _SkorchEarlyStopping
from skorch.utils import Ansi
from sklearn.exceptions import ConvergenceWarning

from ._gathered import outside_stacklevel, warn

__all__ = [
    "Divergence", "EarlyStopping", "GradientClipping", "TrainingGuard", "TrainingOutcome",
    "non_finite_validation",
]


class TrainingGuard(Callback):
    """Stop on divergence and keep the state of the last finished epoch.

    The state an epoch starts from is copied when the epoch begins, before its first
    batch; on divergence or an interrupt in the middle of the epoch, that copy is
    restored. An epoch that finishes needs no copy of its own: the weights stay as it
    left them until the next epoch begins and copies them.

    Put it before any callback that may end training at the end of an epoch (skorch's
    :class:`~skorch.callbacks.EarlyStopping` raises ``KeyboardInterrupt`` there), so
    that the epoch is recorded as finished first.

    Parameters
    ----------
    owner : str, default='the network'
        Name used in warnings, e.g. the estimator's class name.
    restores_best : bool, default=False
        Whether an early-stopping callback after this one restores the weights of the
        best finished epoch at the end of training (said so in the warnings).

    Attributes
    ----------
    diverged_ : Divergence or None
        What diverged in the last training call, or None.
    interrupted_ : bool
        Whether the last training call was interrupted in the middle of an epoch, or,
        under :func:`noting_interrupts`, by a Ctrl-C anywhere.
    sigint_ : bool
        Whether :func:`noting_interrupts` saw a Ctrl-C (SIGINT) during the call.

    Examples
    --------
    >>> import torch
    >>> from skorch import NeuralNetRegressor
    >>> from sklearn_rnn._callbacks import TrainingGuard
    >>> net = NeuralNetRegressor(torch.nn.Linear(1, 1), max_epochs=3, lr=0.1,
    ...                          train_split=None, verbose=0, callbacks=[("guard", TrainingGuard())])
    >>> X = torch.linspace(-1, 1, 16).reshape(-1, 1)
    >>> _ = net.fit(X, 2 * X)
    >>> len(net.history), dict(net.callbacks_)["guard"].diverged_
    (3, None)
    """

    #: Whether an interrupt before any epoch of the call finished is left to the caller,
    #: without a warning: the state the call started from is restored and
    #: ``interrupted_`` set (the estimators then raise the interrupt again).
    quiet_before_first_epoch: bool = False

    #: A copy (as ``_snapshot`` takes it) of the state the next training call starts
    #: from, given by the caller when nothing can change the weights between that copy
    #: and the first epoch: that epoch then keeps it instead of copying the same state
    #: again (one copy per epoch trained, a rollback copy included). Used once.
    start_state: dict[str, Any] | None = None

    sigint_: bool = False

    #: The largest sample weight of the call, when they are trained as given
    #: (``partial_fit``): the divergence warning blames huge ones (see ``Divergence.outcome``).
    largest_weight: float = 1.0

    def __init__(self, owner: str = "the network", restores_best: bool = False) -> None:
        self.owner = owner
        self.restores_best = restores_best

    def initialize(self) -> TrainingGuard:
        self.diverged_: Divergence | None = None
        self.interrupted_ = False
        self._finished_epochs = self._call_start = 0
        self._snapshot: dict[str, Any] | None = None
        # Whether the weights still are those of the last finished epoch (or of the
        # start of the call), which _snapshot does not hold yet.
        self._unchanged = True
        self._batch = 0
        return self

    def on_train_begin(self, net: Any, **kwargs: Any) -> None:
        self.initialize()
        self._finished_epochs = self._call_start = len(net.history)

    def on_epoch_begin(self, net: Any, **kwargs: Any) -> None:
        self._batch = 0
        # The state of the last finished epoch, or of the call's start.
        self._snapshot, self.start_state = self.start_state or _snapshot(net), None
        self._unchanged = False

    def on_batch_end(self, net: Any, batch: Any = None, training: bool = False, **kwargs: Any) -> None:
        if not training:
            return
        self._batch += 1
        loss = net.history[-1, "batches", -1, "train_loss"]  # already a Python float
        if not math.isfinite(loss):
            self.diverged_ = Divergence("training loss", loss, len(net.history), self._batch)
            raise KeyboardInterrupt  # skorch's way to end its fit loop

    def on_epoch_end(self, net: Any, **kwargs: Any) -> None:
        loss = net.history[-1, "train_loss"]
        row = net.history[-1]
        if not math.isfinite(loss):
            self.diverged_ = Divergence("training loss", loss, len(net.history))
        elif not _finite_parameters(net.module_):
            self.diverged_ = Divergence("weights", None, len(net.history))
        else:
            self.diverged_ = non_finite_validation(
                len(net.history), row.get("valid_loss"), row.get("valid_score"))
        if self.diverged_ is not None:
            raise KeyboardInterrupt
        self._finished_epochs = len(net.history)
        self._unchanged = True  # copied only if another epoch begins

    def on_train_end(self, net: Any, **kwargs: Any) -> None:
        unfinished = len(net.history) - self._finished_epochs
        if unfinished <= 0 and self.diverged_ is None:
            if self.sigint_:  # it landed in a callback after this one's epoch end
                self.interrupted_ = True
                warn(
                    f"{self.owner}: training was interrupted after epoch {self._finished_epochs} "
                    f"finished; {_kept(self._finished_epochs, self.restores_best)}.",
                    UserWarning,
                    stacklevel=outside_stacklevel(),
                )
            return
        for _ in range(unfinished):
            net.history.pop()
        if not self._unchanged:
            _restore(net, self._snapshot)
        if self.diverged_ is None and self.quiet_before_first_epoch and (
            self._finished_epochs == self._call_start
        ):
            self.interrupted_ = True
            return
        if self.diverged_ is not None:
            outcome = self.diverged_.outcome(self.owner, self.restores_best, self.largest_weight)
            warn(outcome.message, ConvergenceWarning, stacklevel=outside_stacklevel())
        else:
            self.interrupted_ = True
            warn(
                f"{self.owner}: training was interrupted during epoch "
                f"{self._finished_epochs + 1}; {_kept(self._finished_epochs, self.restores_best)}.",
                UserWarning,
                stacklevel=outside_stacklevel(),
            )


class EarlyStopping(_SkorchEarlyStopping):
    """skorch's early stopping, safe when no epoch finished (an interrupted first epoch),
    counting its patience only after ``min_epochs`` epochs of the call.

    A loss often stays flat for a while before a recurrent network starts to use what
    lies many steps back; a patience counted from the first epoch would stop there. Up
    to ``min_epochs`` the best epoch is tracked (and, with ``load_best``, its weights
    kept) but no epoch counts as a miss; the earliest stop is after
    ``min_epochs + patience`` epochs.

    **Which weights of the best epoch.** A validation loss is the loss of the weights an
    epoch ends with. A training loss (``monitor`` 'train_loss' or 'train_objective') is
    the mean over the epoch's batches, each computed before that batch's update: the
    weights it describes are those during the epoch, and its last update is in no
    batch's loss. One bad last update (a small last batch's, under Adam) leaves an epoch
    whose mean is the best and whose weights are spoiled. So with ``load_best`` and a
    training loss, the weights the best epoch started from are kept too, and at the end
    of training the two are compared by their loss on the whole training set
    (``net.training_loss``, one pass each): the lower is kept. Without a training set
    at the end (``X`` not given to ``on_train_end``) the epoch's end weights are kept,
    as skorch keeps them. Where the best epoch is a later one, the weights training
    started from are compared too (one more pass): a learning rate too high for any
    epoch to get below them kept a network worse than the untrained one, silently;
    they are then kept, as after a first best epoch, which the estimators warn of.

    **A continued call watching the validation loss.** When training continues (earlier
    epochs in the history) with the validation loss watched, the weights the call
    started from are kept aside, and at the end scored on the validation data against
    the best epoch's (``net.training_loss`` of the served validation data, one pass
    each, so that both are averaged alike): where no epoch got below them, they are kept (a warm fit at too high a
    learning rate kept a network worse on the held-out data than the one it was given,
    silently), with their validation loss and score in ``start_validation_``.

    Parameters
    ----------
    min_epochs : int, default=0
        Epochs of the training call before misses count.
    **kwargs
        skorch's :class:`~skorch.callbacks.EarlyStopping` parameters.

    Attributes
    ----------
    best_start_weights_ : dict or None
        With ``load_best`` and a training loss: the weights the best epoch started from.
    kept_start_ : bool
        Whether the last training call kept them (their training-set loss was lower), or
        kept the weights a continued call started from (their validation loss was lower).
    kept_call_start_ : bool
        Whether the last training call kept the weights it started from (no epoch beat
        them); ``best_epoch_`` then names the last epoch before the call, whose weights
        they are (the first epoch, whose start they are, for a first fit).
    start_validation_ : tuple of float or None
        When a continued call kept the weights it started from by their validation loss:
        that loss and the validation score (``nan`` without a ``valid_score`` callback).

    Examples
    --------
    >>> from sklearn_rnn._callbacks import EarlyStopping
    >>> EarlyStopping(patience=3, min_epochs=6).patience
    3
    """

    def __init__(self, *, min_epochs: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.min_epochs = min_epochs

    def on_train_begin(self, net: Any, **kwargs: Any) -> None:
        super().on_train_begin(net, **kwargs)
        self._epochs_before = len(net.history)
        self.best_start_weights_: dict[str, torch.Tensor] | None = None
        self.kept_start_ = self.kept_call_start_ = False
        self.stopped_ = False
        self._decided = len(net.history)  # the last epoch the rule judged
        self._finished = False
        # The weights the next epoch starts from, kept when the training loss is watched;
        # the first of them, training's start, as a candidate at the end too (shared).
        self._epoch_start = _weights(net) if self._watches_training_loss() else None
        self._initial = self._epoch_start
        self.start_validation_: tuple[float, float] | None = None
        # A continued call watching the validation loss: the weights it starts from.
        continued = bool(self.load_best) and self.monitor == "valid_loss" and self._epochs_before > 0
        self._valid_start = _weights(net) if continued and _served_validation(net) is not None else None

    def _watches_training_loss(self) -> bool:
        return bool(self.load_best) and self.monitor in ("train_loss", "train_objective")

    def on_epoch_end(self, net: Any, **kwargs: Any) -> None:
        self._decided = len(net.history)
        if len(net.history) - self._epochs_before > self.min_epochs:
            try:
                self._decide(net, **kwargs)
            except KeyboardInterrupt:  # the stop
                self.stopped_ = True
                # skorch runs the epoch table last, so the stop would skip its row.
                for table in _epoch_tables(net):
                    table.on_epoch_end(net, **kwargs)
                raise
            return
        self._track(net, **kwargs)

    def _track(self, net: Any, **kwargs: Any) -> None:
        """Judge the last epoch as a possible best one, without counting a miss or stopping."""
        patience = self.patience
        self.patience = math.inf  # track the best epoch, never stop
        try:
            self._decide(net, **kwargs)
        finally:
            self.patience = patience
        self.misses_ = 0  # the patience is counted from min_epochs on

    def _decide(self, net: Any, **kwargs: Any) -> None:
        """skorch's rule for the epoch, with the best epoch's weights copied here.

        skorch copies them with ``copy.deepcopy`` of the module's ``state_dict``, about
        40 us per tensor; a clone of each tensor gives the same dictionary for
        ``load_state_dict`` in a few us (the stacked grid search runs this rule for
        every network every epoch)."""
        load_best, self.load_best = self.load_best, False
        try:
            super().on_epoch_end(net, **kwargs)
        finally:
            self.load_best = load_best
            watched = self._watches_training_loss()
            # skorch names the epoch best only in the epoch it improves.
            improved = load_best and self.best_epoch_ == net.history[-1, "epoch"]
            # Copied when kept: as the best epoch's, or as the next epoch's start.
            end = _weights(net) if improved or watched else None
            if improved:
                self.best_model_weights_ = end
                if watched:
                    self.best_start_weights_ = self._epoch_start
            if watched:
                self._epoch_start = end  # never changed in place: shared, not copied

    def on_train_end(self, net: Any, X: Any = None, **kwargs: Any) -> None:
        if not getattr(self, "_finished", False):  # done by finish() before the user's callbacks
            self.finish(net, X, **kwargs)

    def finish(self, net: Any, X: Any = None, **kwargs: Any) -> None:
        """End training: judge an epoch left unjudged, restore the best epoch's weights and
        say so. The estimators' training guard calls it before the user's callbacks'
        ``on_train_end``, which then see the weights kept; ``on_train_end`` then does
        nothing."""
        self._finished = True
        if len(net.history) <= self._epochs_before:
            # No epoch of the call finished (its first diverged, or was interrupted): the
            # weights it started from stay, as the training guard's warning says.
            return
        if len(net.history) > self._decided:
            # A finished epoch that a callback before the rule ended training in (a
            # user's budget or EarlyStopping, a Ctrl-C there): skorch skipped the rule and
            # the epoch table, which judge and print it here.
            self._decided = len(net.history)
            self._track(net)
            for table in _epoch_tables(net):
                table.on_epoch_end(net)
        self._restore_best(net, X, **kwargs)
        last = net.history[-1, "epoch"]
        if self.load_best:
            # Under the epoch table: why training ended, and which weights it keeps.
            if self.stopped_:
                why = (f"stopped after epoch {last}: {self.monitor} did not improve by more "
                       f"than {self.threshold:g} in {self.patience} epochs")
            elif last - self._epochs_before >= net.max_epochs:
                why = f"reached max_iter={net.max_epochs} after epoch {last}"
            else:
                why = f"ended after epoch {last}"
            if self.kept_call_start_:
                kept = (f"the weights training started from: no epoch lowered {self.monitor} "
                        "below theirs")
            else:
                kept = (f"the weights epoch {self.best_epoch_} started from" if self.kept_start_
                        else f"the weights of epoch {self.best_epoch_}")
                kept += f", the last to improve {self.monitor} by more than {self.threshold:g}"
            for table in _epoch_tables(net):
                table.sink(f"Training {why}; keeping {kept}.")

    def _restore_best(self, net: Any, X: Any = None, **kwargs: Any) -> None:
        self.kept_start_ = self.kept_call_start_ = False
        if getattr(self, "_valid_start", None) is not None and self.best_model_weights_ is not None:
            self._restore_best_of_continued(net)
            return
        start = self.best_start_weights_
        if X is None or start is None or not self._watches_training_loss():
            super().on_train_end(net, **kwargs)
            return
        # The loss training minimizes: on class-balanced batches, with the classes weighed
        # as they draw them.
        loss = functools.partial(net.training_loss, objective=self.monitor == "train_objective",
                                 balanced=bool(getattr(net, "iterator_train__balanced", False)))
        end = self.best_model_weights_
        net.module_.load_state_dict(end)
        try:
            end_loss = loss(X)
            net.module_.load_state_dict(start)
            start_loss = loss(X)
        except KeyboardInterrupt:  # a Ctrl-C here would have discarded the whole fit
            net.module_.load_state_dict(end)
            warn(
                f"training was interrupted while the weights epoch {self.best_epoch_} started "
                "from were compared with those it ended with; the ones it ended with are kept.",
                UserWarning,
                stacklevel=outside_stacklevel(),
            )
            return
        self.kept_start_ = start_loss < end_loss
        chosen = start if self.kept_start_ else end
        initial = getattr(self, "_initial", None)
        if self.kept_start_ and initial is start:  # the best epoch is the call's first: its start kept
            self.kept_call_start_ = True
            self.best_epoch_ = net.history[max(self._epochs_before - 1, 0), "epoch"]
        if initial is not None and initial is not start:  # a later best epoch
            net.module_.load_state_dict(initial)
            try:
                initial_loss = loss(X)
            except KeyboardInterrupt:  # as above: the best epoch's weights stay
                net.module_.load_state_dict(chosen)
                warn("training was interrupted while the weights training started from were "
                     f"compared with epoch {self.best_epoch_}'s; epoch {self.best_epoch_}'s are kept.",
                     UserWarning, stacklevel=outside_stacklevel())
                return
            if initial_loss < min(start_loss, end_loss):  # no epoch got below training's start
                self.kept_start_ = self.kept_call_start_ = True
                self.best_epoch_ = net.history[max(self._epochs_before - 1, 0), "epoch"]
                if self.sink is not print or net.verbose:
                    self.sink(f"Restoring the weights training started from (training-set loss "
                              f"{initial_loss:.4g}, against {min(start_loss, end_loss):.4g} at best).")
                return
        net.module_.load_state_dict(chosen)
        which, other = ("start", "end") if self.kept_start_ else ("end", "start")
        if self.sink is not print or net.verbose:  # as skorch's own message goes out
            self.sink(
                f"Restoring the weights of epoch {self.best_epoch_}'s {which} (training-set "
                f"loss {min(start_loss, end_loss):.4g}, against {max(start_loss, end_loss):.4g} "
                f"at its {other})."
            )


    def _restore_best_of_continued(self, net: Any) -> None:
        """Keep the best epoch's weights of a continued call watching the validation loss,
        or the weights the call started from where their validation loss is lower."""
        valid = _served_validation(net)
        best = self.best_model_weights_
        net.module_.load_state_dict(best)
        try:
            # In the weights' dtype, as the recorded valid_loss is: not under bfloat16.
            best_loss = net.training_loss(valid, autocast=False)
            net.module_.load_state_dict(self._valid_start)
            start_loss = net.training_loss(valid, autocast=False)
        except KeyboardInterrupt:  # a Ctrl-C here would have discarded the whole fit
            net.module_.load_state_dict(best)
            warn(f"training was interrupted while epoch {self.best_epoch_}'s weights were "
                 "compared with those training started from; epoch "
                 f"{self.best_epoch_}'s are kept.", UserWarning, stacklevel=outside_stacklevel())
            return
        if not start_loss < best_loss:
            net.module_.load_state_dict(best)
            return
        scorer = dict(net.callbacks_).get("valid_score")
        score = float(scorer.scoring(net, valid, None)) if scorer is not None else math.nan
        # The weights the last epoch before the call left (a continued call has one).
        self.kept_start_ = self.kept_call_start_ = True
        self.best_epoch_ = net.history[self._epochs_before - 1, "epoch"]
        self.start_validation_ = (float(start_loss), score)
        if self.sink is not print or net.verbose:
            self.sink(f"Restoring the weights training started from (validation loss "
                      f"{start_loss:.4g}, against {best_loss:.4g} at best).")


def _served_validation(net: Any) -> Any:
    """The validation data the net's split serves during the training call, or None."""
    return getattr(getattr(net, "train_split", None), "valid", None)


@contextlib.contextmanager
def noting_interrupts(guard: TrainingGuard) -> Iterator[None]:
    """Tell ``guard`` of a Ctrl-C (SIGINT) during the block, wherever it lands.

    One that lands in a callback after the guard's epoch end (the stopping rule's copy
    of the best weights, the log, a user's callback) ends training as a stopping rule
    would: the guard alone cannot tell it from one. Only in the main thread, where
    Python's default handler is in place (another handler, the user's, is left alone);
    the default one is put back after the block.

    Parameters
    ----------
    guard : TrainingGuard
        Its ``sigint_`` is set when a Ctrl-C arrives, before the interrupt is raised.

    Yields
    ------
    None

    Examples
    --------
    >>> import signal
    >>> from sklearn_rnn._callbacks import TrainingGuard, noting_interrupts
    >>> guard = TrainingGuard()
    >>> with noting_interrupts(guard):
    ...     noted = signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    >>> noted, guard.sigint_, signal.getsignal(signal.SIGINT) is signal.default_int_handler
    (True, False, True)
    """
    guard.sigint_ = False
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def note(signum: int, frame: Any) -> None:
        guard.sigint_ = True
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _kept(finished: int, restores_best: bool) -> str:
    """Which weights training that ended after ``finished`` epochs of the call keeps."""
    if not finished:
        return "the initial weights are kept"
    if restores_best:
        return f"training ends as after epoch {finished}, with the weights of the best epoch so far"
    return f"the weights of epoch {finished} are kept"


#: Sample weights from which an infinite training loss is blamed on them: their product
#: with a loss and its sum over a batch's terms nears float32's largest value (3.4e38)
#: only for weights this large or for a loss that diverged anyway.
HUGE_WEIGHT = 1e6


@dataclass(frozen=True)
class Divergence:
    """What became non-finite in training, and when: the facts a divergence warning
    states, whether a fit's :class:`TrainingGuard` or the stacked trainer saw it.

    Attributes
    ----------
    what : {'training loss', 'weights', 'validation loss', 'validation score'}
        What became non-finite.
    value : float or None
        Its value (None for the weights).
    epoch : int
        The epoch it came in, counted over the network's whole history.
    batch : int or None, default=None
        The training batch of the epoch whose loss it was (None: the epoch's).

    Examples
    --------
    >>> from sklearn_rnn._callbacks import Divergence
    >>> Divergence("training loss", float("inf"), 3, batch=2).sentence()
    'the training loss became inf in epoch 3, batch 2'
    >>> Divergence("weights", None, 3).outcome("RNNClassifier", False).message[:88]
    'RNNClassifier: the weights became non-finite in epoch 3, so training stopped and the wei'
    """

    what: str
    value: float | None
    epoch: int
    batch: int | None = None

    def sentence(self) -> str:
        """The clause a warning starts with."""
        if self.what == "weights":
            return f"the weights became non-finite in epoch {self.epoch}"
        if self.what == "training loss":
            where = f", batch {self.batch}" if self.batch is not None else ""
            return f"the training loss became {self.value} in epoch {self.epoch}{where}"
        return (f"the {self.what} of epoch {self.epoch} is {self.value} (the network's outputs "
                "on the held-out sequences are not finite)")

    def outcome(self, owner: str, restores_best: bool, largest_weight: float = 1.0) -> TrainingOutcome:
        """The outcome ``owner``'s training warns of: it stops after the epoch before this
        one, with the best epoch's weights where ``restores_best`` (a stopping rule then
        restores them), else with the last finished epoch's. ``largest_weight``: of the
        sample weights trained as given (``partial_fit``); from ``HUGE_WEIGHT`` on, an
        infinite loss is blamed on them."""
        if self.what == "training loss" and self.value == math.inf and largest_weight >= HUGE_WEIGHT:
            advice = (
                f"The sample weights reach {largest_weight:g}, which partial_fit trains as "
                "given: the weighted loss overflows float32. Scale the weights of every call "
                "down by one constant (only their ratios between calls count)."
            )
        else:
            advice = ("Lower learning_rate, set a clip_threshold, or scale the inputs (e.g. with "
                      "SequenceStandardScaler).")
        message = (
            f"{owner}: {self.sentence()}, so training stopped and "
            f"{_kept(self.epoch - 1, restores_best)}. {advice}"
        )
        value = None if self.value is None else str(self.value)
        return TrainingOutcome(owner, "diverged", (self.what, value), self.epoch, message)


@dataclass(frozen=True)
class TrainingOutcome:
    """An outcome of training that ``fit`` warns of, as facts, so that many networks
    trained together (:func:`~sklearn_rnn._stacked.train_stacked`) can be summarized by
    cause rather than by the wording of their warnings.

    Attributes
    ----------
    estimator : str
        The estimator's class name.
    cause : {'diverged', 'kept_start', 'max_iter'}
        A divergence, the weights training started from kept by the stopping rule,
        or ``max_iter`` reached while the monitored loss still improved.
    detail : tuple
        What outcomes of one cause differ in: what became non-finite and its value
        (``('training loss', 'nan')``, ``('weights', None)``); the monitored loss
        (``('train_loss',)``); ``max_iter`` and the monitored loss.
    epoch : int
        The epoch a divergence came in; else the epochs trained.
    message : str
        The warning ``fit`` gives.

    Examples
    --------
    >>> TrainingOutcome("RNNClassifier", "max_iter", (30, "valid_loss"), 30, "...").kind
    ('RNNClassifier', 'max_iter', (30, 'valid_loss'))
    """

    estimator: str
    cause: str
    detail: tuple
    epoch: int
    message: str

    @property
    def kind(self) -> tuple:
        """What the outcomes counted in one summary share."""
        return (self.estimator, self.cause, self.detail)


def _epoch_tables(net: Any) -> list[PrintLog]:
    """The network's epoch tables (skorch's ``PrintLog``; none when ``verbose=0``)."""
    return [callback for _, callback in net.callbacks_ if isinstance(callback, PrintLog)]


def _weights(net: Any) -> dict[str, torch.Tensor]:
    """A copy of the network's weights, as ``load_state_dict`` takes them."""
    return {name: value.detach().clone() for name, value in net.module_.state_dict().items()}


class GradientClipping(GradientNormClipping):
    """skorch's gradient norm clipping (Euclidean norm), in four calls per update.

    The arithmetic of :func:`torch.nn.utils.clip_grad_norm_`, bit for bit: the norm of
    every gradient, the norm of those norms, and every gradient scaled by
    ``min(1, threshold / (norm + 1e-6))``. The parameters are read once per training
    call instead of gathered again for every update, and the per-call grouping by
    device and type is left out (one network's parameters share both): in the default
    network's fits on ItalyPowerDemand the clip cost half of what skorch's callback did
    (0.07 against 0.13 ms an update).

    Parameters
    ----------
    gradient_clip_value : float
        The largest gradient norm that is left as it is.

    Examples
    --------
    >>> import torch
    >>> from skorch import NeuralNetRegressor
    >>> from sklearn_rnn._callbacks import GradientClipping
    >>> net = NeuralNetRegressor(torch.nn.Linear(1, 1), max_epochs=2, lr=0.1, train_split=None,
    ...                          verbose=0, callbacks=[("clip", GradientClipping(0.5))])
    >>> X = torch.linspace(-1, 1, 16).reshape(-1, 1)
    >>> _ = net.fit(X, 2 * X)
    >>> len(net.history)
    2
    """

    def __init__(self, gradient_clip_value: float) -> None:
        super().__init__(gradient_clip_value=gradient_clip_value, gradient_clip_norm_type=2)

    def initialize(self) -> GradientClipping:
        self._parameters: list[torch.Tensor] | None = None
        return self

    def on_train_begin(self, net: Any, **kwargs: Any) -> None:
        self._parameters = [parameter for _, parameter in net.get_all_learnable_params()]

    def on_grad_computed(self, net: Any, named_parameters: Any = (), **kwargs: Any) -> None:
        # The parameters given with the call only outside a training call (a step run
        # by hand), where on_train_begin has not read them.
        parameters = self._parameters
        if parameters is None:
            parameters = [parameter for _, parameter in named_parameters]
        grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
        if not grads:
            return
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
        clip_coef = self.gradient_clip_value / (total + 1e-6)
        torch._foreach_mul_(grads, torch.clamp(clip_coef, max=1.0))


class PlainPrintLog(PrintLog):
    """skorch's epoch table, without terminal colour codes when the output is no terminal.

    skorch marks each epoch's best scores with ANSI colour codes; written to a log file
    or a notebook's captured output they show as ``\\x1b[32m`` clutter. This table
    colours them only when standard output is a terminal (through skorch's public
    ``format_row``).

    Examples
    --------
    >>> from sklearn_rnn._callbacks import PlainPrintLog
    >>> row = {"epoch": 1, "train_loss": 0.5, "train_loss_best": True}
    >>> table = PlainPrintLog(sink=lambda text: None).initialize()
    >>> table.format_row(row, "train_loss", color="\\x1b[32m")  # best, not coloured
    '0.5000'
    """

    def format_row(self, row: dict[str, Any], key: str, color: str) -> Any:
        plain = not _is_terminal(sys.stdout)
        text = super().format_row(row, key, "" if plain else color)
        if plain and isinstance(text, str):
            text = text.replace(Ansi.ENDC.value, "")
        return text


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (not a file, a pipe or a capture)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def still_improving(losses: Sequence[float], window: int, tol: float) -> tuple[bool, str]:
    """Whether a loss curve cut off by ``max_iter`` was still clearly falling.

    Mini-batch losses fluctuate from epoch to epoch, so a new best value now and then
    says little; the question a warning should answer is whether more epochs would
    keep lowering the loss. Over the last ``window`` epochs (at least 3, at most half
    the curve) a least-squares line is fitted to the loss: the curve is still
    improving when that line falls over the window by more than ``tol``, at least
    half as fast per epoch as the loss fell on average since the first epoch (training
    is still making real progress, not polishing a loss near its floor), and its slope
    is negative beyond two standard errors (a trend, not noise). A curve of 2 to 5
    epochs, too short for a trend, is still improving when its last epoch set a new
    low and the loss fell by more than ``tol``.

    Parameters
    ----------
    losses : sequence of float
        The monitored loss of every epoch.
    window : int
        Epochs looked at (the stopping rule's patience, ``n_iter_no_change``).
    tol : float
        The smallest fall that counts, as for the stopping rule.

    Returns
    -------
    improving : bool
    description : str
        The fall over the window, in words, for the warning.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn._callbacks import still_improving
    >>> still_improving(np.linspace(1.0, 0.5, 30), window=10, tol=1e-4)[0]  # a steady fall
    True
    >>> noisy = 0.3 + 0.1 * np.random.default_rng(0).standard_normal(30)  # a level plus noise
    >>> still_improving(noisy, window=10, tol=1e-4)[0]
    False
    """
    values = np.asarray(losses, dtype=np.float64)
    width = min(max(3, int(window)), len(values) // 2)
    if width < 3 and len(values) >= 2 and np.isfinite(values).all():
        # Too few epochs for a trend: still improving when the last epoch set a new
        # low (a flat end is no fall) and the loss fell by more than tol.
        fall = float(values[0] - values[-1])
        improving = bool(values[-1] < values[:-1].min() and fall > tol)
        return improving, f"it fell by {fall:.3g} in {len(values)} epochs, to {values[-1]:.4g}"
    if width < 3 or not np.isfinite(values[-width:]).all():
        return False, ""
    tail = values[-width:]
    steps = np.arange(width, dtype=np.float64)
    steps -= steps.mean()
    slope = float(steps @ (tail - tail.mean()) / (steps @ steps))
    residuals = tail - tail.mean() - slope * steps
    stderr = math.sqrt(float(residuals @ residuals) / (width - 2) / float(steps @ steps))
    fall = -slope * (width - 1)
    progress = values[0] - tail.mean() + fall / 2  # the fall from the first epoch to the window's end
    average_rate = progress / (len(values) - 1)  # per epoch since the first
    pace = -slope / average_rate if average_rate > 0 else np.inf
    improving = slope < 0 and fall > tol and pace >= 0.5 and slope + 2 * stderr < 0
    description = (
        f"it fell steadily by {fall:.3g} over the last {width} epochs, at {pace:.0%} of "
        f"its average pace since the first epoch, to {tail[-1]:.4g}"
    )
    return improving, description


def _snapshot(net: Any) -> dict[str, Any]:
    return {"module": _weights(net), "optimizer": _copied(net.optimizer_.state_dict())}


def _copied(value: Any) -> Any:
    """A deep copy of an optimizer's ``state_dict()``: plain dicts, lists and tuples
    rebuilt, tensors cloned, numbers and strings shared, anything else deep-copied
    (``copy.deepcopy`` of the whole cost a streaming update up to 0.2 ms)."""
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return kind(_copied(item) for item in value)
    if isinstance(value, torch.Tensor):
        return copy.deepcopy(value) if value.requires_grad else value.detach().clone()
    if value is None or kind in (bool, int, float, str):
        return value
    return copy.deepcopy(value)


def _restore(net: Any, snapshot: dict[str, Any] | None) -> None:
    if snapshot is None:
        return
    net.module_.load_state_dict(snapshot["module"])
    net.optimizer_.load_state_dict(snapshot["optimizer"])


def non_finite_validation(epoch: int, loss: float | None, score: float | None) -> Divergence | None:
    """The divergence of an epoch whose validation loss or score (None: not recorded) is
    not a number, which no other epoch's compares with; None otherwise.

    >>> from sklearn_rnn._callbacks import non_finite_validation
    >>> non_finite_validation(3, 0.5, float("nan")).sentence()[:37]
    'the validation score of epoch 3 is na'
    """
    for name, value in (("validation loss", loss), ("validation score", score)):
        if value is not None and not math.isfinite(value):
            return Divergence(name, value, epoch)
    return None


def score_weights(weight: np.ndarray | None) -> np.ndarray | None:
    """The weights a validation score reads, as the validation loss weighs the sequences:
    None when all are equal (the unweighted score, bit for bit), else float64.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn._callbacks import score_weights
    >>> score_weights(np.ones(3)) is None, score_weights(np.array([1.0, 0.0]))
    (True, array([1., 0.]))
    """
    if weight is None or not len(weight) or bool((weight == weight[0]).all()):
        return None
    return np.asarray(weight, dtype=np.float64)


def _finite_parameters(module: torch.nn.Module) -> bool:
    """Whether every weight is finite: one check over all of them (a check and a
    device sync per parameter cost a streaming update about 0.15 ms)."""
    values = [parameter.detach().reshape(-1) for parameter in module.parameters()]
    # The largest magnitude is NaN or infinite if any weight is: one reduction.
    return not values or math.isfinite(torch.cat(values).abs().amax().item())
