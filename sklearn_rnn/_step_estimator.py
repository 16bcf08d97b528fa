"""Per-step binary targets: an independent Bernoulli per output at every step."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from ._estimators import BaseRNN, _partial_fit_context, _wrong_outputs, reads_one_model
from ._inference import EVERY_STEP, OutputSteps
from .sequences import FlatSequences
from .sequences._validation import readable_targets

__all__ = ["RNNStepClassifier"]


class RNNStepClassifier(BaseRNN):
    """Recurrent network with binary targets at every step (multi-label per step).

    The network of :class:`RNNClassifier` reads each sequence and a sigmoid readout at
    *every* step gives ``k`` independent probabilities, for example which of the 88
    piano keys sound at the next beat (thesis section 4.2). Training minimizes the
    Bernoulli negative log-likelihood of eq. 4.2, the cross-entropy summed over the
    ``k`` outputs, averaged over the valid steps of each mini-batch (each step counts
    once, whatever the length of its sequence; eq. 4.2 averages within each sequence
    first). The mean over steps makes the loss a *negative log-likelihood per step*,
    the measure of the polyphonic-music literature: :meth:`nll_per_step` computes it
    on any data, and :meth:`score` is its negative (greater is better).

    Why a separate estimator rather than an option of :class:`RNNClassifier`: there
    ``y`` is one label per sequence and ``predict`` returns one label per sequence, as
    scikit-learn's classifier contract, its checks and scorers (accuracy, ROC AUC)
    expect. Here ``y`` is a ragged list of ``(T_i, k)`` arrays and every method returns
    one such array per sequence; an option that changed the shape of ``y``, of the
    predictions and the meaning of ``score`` would make every other parameter and
    tool of the classifier behave differently. The training machinery (network,
    length-bucketed batches, optimizers including ``'simplex'`` with losses at every
    step, early stopping, seeds, ``partial_fit``, ``save``/``load``) is shared through
    the same base class. Since ``y`` is not one label per sample, the estimator does
    not declare itself a classifier to scikit-learn (``is_classifier`` is False):
    cross-validation splits it with plain K-fold, and model selection uses its own
    :meth:`score`.

    Parameters
    ----------
    hidden_size : int, default=50
        Recurrent units.
    cell : {'auto', 'tanh', 'relu', 'gru', 'lstm', 'decay'}, default='auto'
        The recurrent cell (see :class:`RNNClassifier`); 'auto' is 'tanh' unless
        ``time_feature`` is set.
    time_feature : int, str or None, default=None
        Column of each step's time stamp, by index or by name (DataFrames' columns),
        read as gaps (see :class:`RNNClassifier`).
    frame : int or 'auto', default='auto'
        Only 1 here ('auto' is 1): a frame would mix the targets of several steps.
    instance_norm : bool or 'auto', default='auto'
        Only False here ('auto' is False; True is refused): a sequence's own mean and
        standard deviation would let the output at a step read the steps after it.
    readout : {'auto', 'last'}, default='auto'
        Only 'last' here ('auto' is 'last'): every step's output reads that step's state.
    conv_kernels, conv_channels, conv_pool : default='auto', 32, 'auto'
        No convolutional stage here ('auto' is none; a stage is refused): its kernels
        read steps ahead of the one predicted, and pooling would merge the targets of
        several steps.
    bidirectional : bool, default=False
        Only False here (True is refused): a backward pass would let the output at a
        step read the steps after it.
    num_layers : int, default=1
        Stacked recurrent layers.
    dropout : float, default=0.0
        Drop probability between layers and before the readout (training only).
    hidden_init : {'zero', 'learned'}, default='zero'
        The state before the first step: zero, or learned per layer.
    spectral_radius : float, None or 'auto', default='auto'
        Spectral radius of the initial recurrent matrix (thesis algorithm 3.1); None
        keeps PyTorch's initialization; 'auto' is 1.2 for the 'tanh', 'relu' and
        'decay' cells (the thesis' setting: the defaults study of :ref:`defaults`
        covered one target per sequence) and None for 'gru' and 'lstm', as in
        :class:`RNNClassifier`.
    optimizer : {'adam', 'sgd', 'simplex'}, default='adam'
        'sgd' is the clipped anti-gradient (eq. 3.6); 'simplex' the thesis' simplex
        method, whose temporal gradients here include the readout's gradient at
        every step (thesis section 3.3); 'adam' clips the gradient norm first.
    learning_rate : float or 'auto', default='auto'
        Step size; 'auto' is 0.01 for 'adam' and 0.05 for 'sgd' and 'simplex' (see
        :class:`RNNClassifier`).
    clip_threshold : float or None, default=1.0
        Gradient-norm threshold ``tau``; None never clips. The thesis used 3 for music.
    switch_threshold : float or None, default=None
        ``psi`` of the simplex method; None never switches.
    batch_size : int, default=32
        Sequences per update, grouped by length.
    max_iter : int, default=200
        Maximum number of epochs.
    early_stopping : bool or 'auto', default='auto'
        'auto' is False here. Hold out ``validation_fraction`` of the sequences, stop
        when their loss has not improved by ``tol`` for ``n_iter_no_change`` epochs,
        and restore the best epoch's weights; otherwise stop on the training loss and
        restore its best epoch (the rule of :class:`RNNClassifier`). That loss is, as
        the training loss, the NLL per step of each batch averaged over the batches by
        their numbers of sequences; ``validation_scores_`` are minus the NLL per step
        over all the held-out steps, which weighs a long sequence's steps as much as a
        short one's. The patience is counted after ``3 * n_iter_no_change`` epochs.
    validation_fraction : float, default=0.1
        Share of the sequences held out for early stopping, drawn from those of
        positive ``sample_weight`` (those of weight 0 train with the rest). The input
        encoding (fill values, time scale) is fitted on all of ``X``, the held-out
        sequences included (no label reaches it).
    n_iter_no_change : int, default=10
        Patience, in epochs.
    tol : float or 'auto', default='auto'
        Smallest improvement of the monitored loss that counts; 'auto' is 1e-4 here
        (the thesis' configuration).
    alpha : float or 'auto', default='auto'
        L2 penalty on the weight matrices, ``alpha / (2 n_samples) * ||W||^2`` ('auto':
        10 for the 'decay' cell, 0 otherwise; not used by 'simplex').
    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where to train.
    precision : {'float32', 'bfloat16', 'float16'}, default='float32'
        Arithmetic of training. 'bfloat16' and 'float16' are mixed precision: the
        parameters and the optimizer stay in float32, the forward pass runs under
        :func:`torch.autocast` in that type and the loss in float32. 'float16' also
        scales the loss with a :class:`torch.amp.GradScaler`: gradients (and the
        simplex method's temporal gradients) are unscaled before the clipping rule, and
        an update whose gradients overflow is skipped; it needs a GPU. 'bfloat16' has
        float32's range (no scaling) and runs on the CPU too, where the simplex
        method's step-by-step recurrence stays in float32 (with ``cell='lstm'`` only on
        a CPU with bfloat16 instructions: elsewhere it is refused). Prediction is
        unaffected (float64).
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
        not write under the history's own records (``name='valid_loss'``, ...), and an
        ``EpochScoring`` must be skorch's own class, not a subclass (its batches of other
        lengths are joined by the engine's): a :class:`skorch.callbacks.LRScheduler`,
        :class:`~skorch.callbacks.Checkpoint` (which saves; to resume, continue the fitted
        estimator with ``warm_start`` or ``partial_fit``: a
        :class:`~skorch.callbacks.LoadInitState` is refused),
        :class:`~skorch.callbacks.EarlyStopping` (which ends training as the built-in rule does; leave its ``load_best`` False:
        ``fit`` refuses a callback that loads weights of its own as training ends,
        since the rule restores its best epoch itself), an
        :class:`~skorch.callbacks.EpochScoring` of a callable ``scoring(net, X, y)``,
        where ``net.forward(X)`` (a tensor) and ``y`` are the epoch's outputs and targets,
        row by row, padded with NaN to ``(n, T, k)`` past each sequence's last step (a
        scikit-learn scorer, by name or a ``make_scorer`` object, takes one target per
        sequence and is refused; with
        ``use_caching=False``, ``y`` is None and ``net.forward(X)`` runs the network over
        ``X`` again, in its order) or a logger. Training uses deep copies, so the
        objects given here are never changed (what cannot be deep-copied, a logger's
        open file or lock, is shared with the copy, and keeps the fitted estimator from being
        pickled: ``set_params(callbacks=None)`` first); they are made when the network is built
        and again when the training settings change (a stream of ``partial_fit``
        calls, or warm-started fits, keep them with their state; a change of ``verbose``
        only adds or removes the epoch table and progress bar). Every training call
        starts at ``learning_rate`` and runs the schedule of a
        :class:`~skorch.callbacks.LRScheduler` from its start, as a first fit does
        (unless the callback names its own ``last_epoch``): what a scheduler did to the
        step size does not carry over to the next call (over a stream of ``partial_fit``
        calls, lower ``learning_rate`` with ``set_params`` between calls). The fitted
        ones are in ``net_.callbacks_``. The names 'clip', 'valid_score',
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
    n_features_in_ : int
        Features per step of ``X``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the step features seen in fit, when the sequences were DataFrames
        whose columns are all strings; prediction refuses other names or order.
    n_outputs_ : int
        Binary targets per step, ``k``.
    n_iter_ : int
        Epochs run by the last call to ``fit``; after ``partial_fit``, the epochs of
        ``net_.history``, every call's (a ``fit`` before them included), as
        ``loss_curve_`` counts them.
    loss_curve_ : list of float
        Training loss (NLL per step, averaged over the epoch's batches) of every epoch.
    validation_scores_ : list of float or None
        With ``early_stopping``: minus the validation NLL per step of every epoch, each
        sequence's steps weighted by its ``sample_weight``.
    best_validation_score_ : float or None
        Minus the validation NLL per step of the restored epoch.
    best_validation_loss_ : float or None
        Validation loss of the restored epoch (the batches' mean, see
        ``early_stopping``).
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

    See Also
    --------
    RNNClassifier : One label per sequence.
    sklearn_rnn.datasets.load_bach_chorales : Piano rolls for next-step prediction.

    Notes
    -----
    ``X`` and ``y`` are paired step by step: for next-step prediction, pass
    ``X = [r[:-1] for r in rolls]`` and ``y = [r[1:] for r in rolls]``. As in every
    form of ``X``, a sequence's trailing all-NaN steps are padding: the outputs cover
    its steps up to the last with an observed value, and ``y`` may be padded with NaN
    the same way (a NaN-padded ``(n, T, k)`` array beside a padded ``X``). Fitted models
    pickle and save like the other estimators (:meth:`save`, :func:`sklearn_rnn.load`).
    scikit-learn's ``parametrize_with_checks`` does not apply: its checks feed one
    target per sample. Cloning, pickling, parameters and ``GridSearchCV`` are tested
    directly.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNStepClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.integers(0, 2, size=(rng.integers(5, 15), 1)).astype(float) for _ in range(80)]
    >>> # targets: this step's bit and the previous step's (0 before the first)
    >>> y = [np.hstack([x, np.vstack([[0.0], x[:-1]])]) for x in X]
    >>> model = RNNStepClassifier(hidden_size=8, learning_rate=0.05, max_iter=60,
    ...                           random_state=0).fit(X, y)
    >>> [p.shape for p in model.predict_proba(X[:2])]
    [(13, 2), (14, 2)]
    >>> bool(model.nll_per_step(X, y) < 0.2)  # 2 * log(2) = 1.39 for coin flips
    True
    """

    _output_steps: OutputSteps = EVERY_STEP  # an output, target and loss term at every step
    #: 'auto' settings keep the thesis' configuration ('tanh', radius 1.2, the training-
    #: loss plateau rule): the defaults study (``benchmarks/bench_defaults.py``) covered
    #: one target per sequence.
    _thesis_auto = True

    # ----------------------------------------------------------------- targets
    def _encode_targets(
        self, y: Any, *, reset: bool, classes: Any = None, weight: np.ndarray | None = None,
        lengths: list[int] | None = None,
    ) -> list[np.ndarray]:
        table = type(y).__name__ == "DataFrame"
        if table or type(y).__module__.split(".")[0] == "torch":
            y = np.asarray(y)  # a tensor or table of targets: one array, as numpy's are checked
        if isinstance(y, np.ndarray) and y.dtype != object and y.ndim != 3:
            # (n_samples, T) is not read as one output's steps: it is also the shape of
            # one target per sequence for k outputs, which this estimator has no use for.
            # (A table's list() is its column names: its rows are y.to_numpy()'s.)
            rows = "y.to_numpy()" if table else "y"
            fix = (
                " If each row holds one sequence's targets at its steps (one output), pass "
                f"list({rows}) or {rows}[:, :, None]." if y.ndim == 2 else ""
            )
            raise ValueError(
                f"y is an array of shape {y.shape}: {type(self).__name__} expects one (T_i, k) "
                "array of 0/1 targets per sequence (a list, or an (n_samples, T, k) array), "
                f"a target for each output at each step of X.{fix}"
            )
        targets = []
        first_ndim = None
        for index, target in enumerate(y):  # by position: a Series' labels may lack 0
            if first_ndim is None:
                first_ndim = np.ndim(target)
            try:
                target = np.asarray(readable_targets(target, f"y[{index}]"), dtype=np.float64)
            except (TypeError, ValueError) as error:
                raise ValueError(
                    f"y[{index}] is not numeric ({error}): expected a (T_i, k) array of 0/1. "
                    "Binarize labels first: for two classes, [(t == 'yes').astype(float) for t in y] "
                    "with your positive label; for more, one output per class, e.g. "
                    "sklearn.preprocessing.LabelBinarizer fitted on all labels, applied to each t."
                ) from error
            if target.ndim == 1:
                target = target[:, None]
            if target.ndim != 2 or target.shape[1] == 0:
                raise ValueError(
                    f"y[{index}] has shape {target.shape}: expected (T_i, k) with k >= 1, one "
                    f"row of k binary targets per step of sequence {index} of X."
                )
            # Trailing all-NaN rows are padding, as in X (a NaN-padded (n, T, k) array).
            observed = np.flatnonzero(~np.isnan(target).all(axis=1))
            target = target[: observed[-1] + 1 if len(observed) else 0]
            outside = ~np.isin(target, (0.0, 1.0))
            if outside.any():
                step, column = np.argwhere(outside)[0]
                if np.isnan(target[step, column]):
                    raise ValueError(
                        f"y[{index}] holds NaN at step {step}, output {column}: a missing target "
                        "is not supported (NaN pads a sequence only as trailing all-NaN rows, "
                        "after its last observed step). Fill it with 0 or 1, or drop step "
                        f"{step} from both X[{index}] and y[{index}]."
                    )
                value = float(target[step, column])
                # Every row from there on that one value: padding (-1, PyTorch's -100), which
                # thresholding would turn into targets.
                # Past the end of X's sequence, where X says so (a last step's 2 is a label).
                padding = bool((target[step:] == value).all()) and (lengths is None or step >= lengths[index])
                fix = (f"If {value!r} pads y past the end of sequence {index} of X, pad with NaN "
                       "instead (trailing all-NaN rows are padding)." if padding else
                       "Threshold or binarize them first (per-step class labels: one output per "
                       "class, e.g. sklearn.preprocessing.LabelBinarizer).")
                raise ValueError(
                    f"y[{index}] holds {value!r} at step {step}, output {column}: the targets "
                    f"must be 0 or 1 (a Bernoulli variable per output and step). {fix}"
                )
            targets.append(target)
        widths = {target.shape[1] for target in targets}
        if len(widths) > 1:
            first = targets[0].shape[1]
            odd = next(i for i, target in enumerate(targets) if target.shape[1] != first)
            raise ValueError(
                f"y[{odd}] has {targets[odd].shape[1]} outputs per step but y[0] has {first}: "
                "every sequence's targets need the same number of columns k."
            )
        width = targets[0].shape[1]
        if reset:
            self.n_outputs_ = width
            self._y_ndim = first_ndim
        elif width != self.n_outputs_:
            raise ValueError(_wrong_outputs(width, self.n_outputs_, " per step"))
        return targets

    @staticmethod
    def _target_ndim(y: Any) -> int:
        """The number of dimensions of the first sequence's targets (checked)."""
        return np.ndim(next(iter(np.asarray(y) if type(y).__name__ == "DataFrame" else y)))

    def _check_target_steps(self, y: list[np.ndarray], sequences: list[np.ndarray]) -> None:
        for index, (target, sequence) in enumerate(zip(y, sequences)):
            if len(target) != len(sequence):
                raise ValueError(
                    f"y[{index}] has {len(target)} steps but sequence {index} of X has "
                    f"{len(sequence)}: pass one row of targets per step of X (for next-step "
                    "prediction, X = r[:-1] and y = r[1:] of each sequence r). Trailing "
                    "all-NaN rows, of X and of y, are padding and are not counted: pad y "
                    "with NaN where X is padded, and give a step that ends a sequence at "
                    "least one observed value."
                )

    @property
    def _n_outputs(self) -> int:
        return self.n_outputs_

    def _criterion(self) -> torch.nn.Module:
        return torch.nn.BCEWithLogitsLoss(reduction="none")

    def _target_tensor(self, y: list[np.ndarray], device: torch.device) -> FlatSequences:
        return FlatSequences.from_arrays(y, dtype=torch.float32, device=device)

    @staticmethod
    def _validation_score(
        y_true: list[np.ndarray], outputs: list[np.ndarray], sample_weight: np.ndarray | None
    ) -> float:
        """Minus the NLL per step of logits ``outputs`` against 0/1 targets, each
        sequence's steps weighted by its weight."""
        if sample_weight is None:
            total = sum(float(_bernoulli_nll(o, t).sum()) for o, t in zip(outputs, y_true))
            return -total / sum(len(t) for t in y_true)
        sample_weight = np.asarray(sample_weight) / np.max(sample_weight)  # a large sum could overflow
        total = sum(float(w * _bernoulli_nll(o, t).sum()) for o, t, w in zip(outputs, y_true, sample_weight))
        return -total / float(sum(w * len(t) for t, w in zip(y_true, sample_weight)))

    # ---------------------------------------------------------------- training
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> RNNStepClassifier:
        """Train the network on sequences ``X`` with 0/1 targets at every step ``y``.

        Parameters
        ----------
        X : list of array-like of shape (T_i, n_features), or ndarray of shape (n_samples, T, n_features)
            Ragged sequences, or NaN-padded ones (trailing all-NaN steps are padding).
            Any other NaN is a missing value: the network gets the last observed value
            and a mask.
        y : list of array-like of shape (T_i, k), or ndarray of shape (n_samples, T, k)
            0/1 targets at every step of each sequence, as many steps as its sequence
            (trailing all-NaN rows are padding, as in ``X``), in the order of its steps
            as ``X`` is read: a panel's sorted by its time level (a pandas target
            indexed by times in another order is refused).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weight of each sequence's steps in the loss.

        Returns
        -------
        self : object
            The fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, max_iter=5, random_state=0).fit(X, X)
        >>> [p.shape for p in model.predict(X)]  # an output row at every step
        [(3, 2), (2, 2)]
        """
        return super().fit(X, y, sample_weight)

    @_partial_fit_context
    def partial_fit(self, X: Any, y: Any, sample_weight: Any = None) -> RNNStepClassifier:
        """Train for one epoch over ``X`` (one update when it holds at most ``batch_size``).

        The first call builds the network (``k`` is taken from its ``y``); later calls
        continue from the current weights. The first call also fixes the input
        encoding (see :class:`~sklearn_rnn.sequences.InputEncoder`) from its ``X``: the
        fill values of missing values, whether mask channels are used and the time
        scale of a ``time_feature`` (give it sequences of two or more steps at
        different times). Stopping rules do not apply.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
            The sequences, each with the step features seen in fit.
        y : list of array-like of shape (T_i, k)
            0/1 targets at every step of each sequence.
        sample_weight : array-like of shape (n_samples,), optional
            Weight of each sequence's steps in the loss.

        Returns
        -------
        self : object

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, random_state=0)
        >>> for _ in range(3):
        ...     model = model.partial_fit(X, X)  # predict each step's own input
        >>> model.n_iter_, model.n_outputs_
        (3, 2)
        """
        return self._fit(X, y, sample_weight, incremental=True)

    # -------------------------------------------------------------- prediction
    @reads_one_model
    def decision_function(self, X: Any) -> list[np.ndarray]:
        """Logits of every output at every step (before the sigmoid).

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
            The sequences, each with the step features seen in fit.

        Returns
        -------
        list of ndarray of shape (T_i, k)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, X)
        >>> [logits.shape for logits in model.decision_function(X)]
        [(3, 2), (2, 2)]
        """
        return self._forward(X)

    @reads_one_model
    def predict_proba(self, X: Any) -> list[np.ndarray]:
        """Probability that each output is 1, at every step of each sequence.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
            The sequences, each with the step features seen in fit.

        Returns
        -------
        list of ndarray of shape (T_i, k)
            Independent Bernoulli probabilities (they need not sum to 1 over ``k``).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, X)
        >>> proba = model.predict_proba(X)
        >>> proba[0].shape, bool(((proba[0] > 0) & (proba[0] < 1)).all())
        ((3, 2), True)
        """
        return [_sigmoid(logits) for logits in self._forward(X)]

    @reads_one_model
    def predict(self, X: Any) -> list[np.ndarray]:
        """Outputs predicted to be 1 (probability above 0.5), at every step.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
            The sequences, each with the step features seen in fit.

        Returns
        -------
        list of ndarray of shape (T_i, k), dtype int64
            Zeros and ones (shape ``(T_i,)`` when ``fit`` got 1D targets per sequence).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, learning_rate=0.1, max_iter=50,
        ...                           random_state=0).fit(X, X)
        >>> model.predict(X)[0].tolist()
        [[1, 0], [0, 1], [1, 0]]
        """
        labels = [(logits > 0).astype(np.int64) for logits in self._forward(X)]
        return [label.ravel() for label in labels] if self._y_ndim == 1 else labels

    @reads_one_model
    def nll_per_step(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Negative log-likelihood per step (in nats), the loss of eq. 4.2.

        The Bernoulli log-likelihood of the targets summed over the ``k`` outputs and
        over all steps of all sequences, divided by the number of steps (with
        ``sample_weight``: each sequence's sum weighted, divided by the weighted
        number of steps). Published polyphonic-music results use this measure.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
            The sequences, each with the step features seen in fit.
        y : list of array-like of shape (T_i, k)
            0/1 targets at every step.
        sample_weight : array-like of shape (n_samples,), optional
            Weight of each sequence.

        Returns
        -------
        float
            Lower is better; ``k * log(2)`` for a model that says 0.5 everywhere.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, learning_rate=0.1, max_iter=50,
        ...                           random_state=0).fit(X, X)
        >>> bool(model.nll_per_step(X, X) < 0.1)
        True
        """
        check_is_fitted(self)
        sequences = self._validate_sequences(X, reset=False)
        targets = self._check_y(y, X, sequences, reset=False)
        self._check_target_steps(targets, sequences)
        weight = self._check_sample_weight(sample_weight, len(sequences), X)
        weight = weight / weight.max()  # a sum of large weights could overflow; only ratios count
        logits = self._forward(X, sequences)  # validated above: its warnings once
        totals = np.array([_bernoulli_nll(o, t).sum() for o, t in zip(logits, targets)])
        steps = np.array([len(t) for t in targets])
        return float((weight * totals).sum() / (weight * steps).sum())

    @reads_one_model
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Minus the negative log-likelihood per step: the log-likelihood per step.

        Greater is better, as scikit-learn's model selection expects; ``0`` is a
        perfect model. ``-score(X, y)`` is :meth:`nll_per_step`.

        Parameters
        ----------
        X : sequences in any form accepted by :meth:`fit`
            The sequences, each with the step features seen in fit.
        y : list of array-like of shape (T_i, k)
            0/1 targets at every step.
        sample_weight : array-like of shape (n_samples,), optional
            Weight of each sequence.

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn import RNNStepClassifier
        >>> X = [np.eye(2)[[0, 1, 0]], np.eye(2)[[1, 1]]]
        >>> model = RNNStepClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, X)
        >>> model.score(X, X) == -model.nll_per_step(X, X)
        True
        """
        return -self.nll_per_step(X, y, sample_weight)

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -logits))


def _bernoulli_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``-log p(targets)`` of independent Bernoullis with these logits, elementwise."""
    # -[t log s(z) + (1 - t) log(1 - s(z))] = log(1 + e^z) - t z, computed stably.
    return np.logaddexp(0.0, logits) - targets * logits
