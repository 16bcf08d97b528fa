"""Diagnostics of vanishing gradients: temporal-gradient norms and the thesis' figures 3.1-3.3.

A recurrent network's gradient is the sum of its temporal gradients, one per step
(:func:`sklearn_rnn.optim.temporal_gradients`). When the norms of distant steps are
orders of magnitude below those of recent ones the gradient vanishes: it carries no
information about long-range dependencies. :func:`temporal_gradient_norms` measures
this on a batch; :func:`plot_temporal_gradient_norms` draws it on a log scale, for
example for several spectral radii of the initial recurrent matrix (thesis figure 3.1)
or before and after some training (figures 3.2 and 3.3, with the cosines of each step's
gradient with the full gradient).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ._engine import gradient_mode
from ._estimators import BaseRNN
from ._inference import module_copy
from .nn import RecurrentNetwork
from .nn.cells import cell_names, get_cell
from .optim import temporal_gradients
from .optim._temporal import _check_lengths
from .plotting import _check_axes

if TYPE_CHECKING:  # matplotlib is an optional dependency, imported when plotting
    from matplotlib.axes import Axes

__all__ = ["TemporalGradientNorms", "plot_temporal_gradient_norms", "temporal_gradient_norms"]


class TemporalGradientNorms(NamedTuple):
    """Per-step temporal-gradient statistics of one batch.

    Attributes
    ----------
    steps : ndarray of shape (n_steps,)
        Aligned step numbers ``1 .. n_steps``. For last-step losses ``n_steps`` is every
        sequence's last valid step (the loss step) and step ``n_steps - k`` lies ``k``
        steps before it; for losses at every step they are absolute positions. Steps
        of the network: for an estimator with ``frame > 1``, frames of ``frame`` raw
        steps.
    norms : ndarray of shape (n_steps,)
        Norm of each step's gradient over all parameters together.
    cosines : ndarray of shape (n_steps,)
        Cosine between each step's gradient and the full gradient (NaN where a step's
        gradient is zero).
    parameter_norms : dict of str to ndarray of shape (n_steps,)
        Norm of each parameter's temporal gradient, one entry per trainable parameter,
        named as :func:`~sklearn_rnn.optim.temporal_gradients` names them: ``'W_rec'``,
        ``'W_in'``, ``'b'``, ``'W_out'``, ``'b_out'``; the GRU's ``'b_rec'``; ``'[k]'``
        appended for layer ``k`` above the first (``'W_rec[1]'``); ``'h_0'`` (and the
        LSTM's ``'c_0'``) for a learned initial state.
    counts : ndarray of shape (n_steps,)
        Number of sequences that reach each aligned step.
    gradient_norm : float
        Norm of the full gradient.
    loss : float
        The loss on the batch.
    alignment : {'last', 'absolute'}
        How steps of sequences of different lengths were lined up.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.diagnostics import temporal_gradient_norms
    >>> net = RecurrentNetwork(1, 4, 1, generator=torch.Generator().manual_seed(0))
    >>> stats = temporal_gradient_norms(net, torch.ones(2, 3, 1), torch.zeros(2))
    >>> stats.steps, stats.counts
    (array([1, 2, 3]), array([2, 2, 2]))
    """

    steps: np.ndarray
    norms: np.ndarray
    cosines: np.ndarray
    parameter_norms: dict[str, np.ndarray]
    counts: np.ndarray
    gradient_norm: float
    loss: float
    alignment: str


def temporal_gradient_norms(
    model: torch.nn.Module,
    X: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    *,
    lengths: torch.Tensor | np.ndarray | None = None,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    every_step: bool = False,
) -> TemporalGradientNorms:
    """Norm of each step's gradient, and its cosine with the full gradient, on one batch.

    The model is left as it is: no parameter and no ``.grad`` changes. The gradients
    are those of the network in evaluation mode (dropout off), so repeated calls agree;
    the network's training mode is restored afterwards.

    Parameters
    ----------
    model : RNNClassifier, RNNRegressor, RNNStepClassifier or RecurrentNetwork
        A fitted estimator (its trained network, its encoding of ``X`` and ``y``, its
        training loss, ``class_weight`` weighed in as ``fit`` weighs it); an unfitted
        estimator (the network its parameters initialize, e.g. to compare
        ``spectral_radius`` values; the estimator stays unfitted); or a network,
        freshly initialized or trained. Temporal gradients need the readout at the
        last step and no convolutional stage: the estimators' defaults on untimed
        sequences pool the states (and may add the stage), so set
        ``readout='last', conv_kernels=None`` (as ``optimizer='simplex'`` has them).
        Nor a bidirectional network (``bidirectional=True``): the gradients follow
        one direction of time; nor the time-aware cell ``'decay'``, which ``'auto'``
        chooses for timed input. When the median sequence is longer than 128 steps,
        ``frame='auto'`` reads several raw steps as one, and a step of the result is
        then a frame: set ``frame=1`` to measure raw steps.
    X : sequences, or tensor or ndarray of shape (n_sequences, n_steps, n_features)
        With an estimator: sequences in any form it accepts. With a network: a
        right-padded batch.
    y : array-like
        With an estimator: targets as given to ``fit`` (labels, values). With a
        network: class indices (integers) of shape ``(n_sequences,)``, or values of
        shape ``(n_sequences,)`` or ``(n_sequences, n_outputs)``; with
        ``every_step=True`` one per step, ``(n_sequences, n_steps[, n_outputs])``, whose
        padded steps the default loss does not read (they may hold NaN, or -100 as
        PyTorch's ``ignore_index``).
    lengths : tensor or ndarray of shape (n_sequences,), optional
        Valid steps of each sequence; all ``n_steps`` when None.
    loss : callable, optional
        ``loss(outputs, y) -> scalar``, where ``outputs`` is ``(n_sequences, n_outputs)``
        or, with ``every_step=True``, ``(n_sequences, n_steps, n_outputs)`` (then the loss
        must give padded steps zero weight). With an estimator, ``y`` reaches it encoded
        as the estimator trains on it: class indices (int64) for a classifier, the
        targets standardized by ``fit``'s mean and scale as a float32
        ``(n_sequences, n_outputs)`` tensor for a regressor, the 0/1 targets as a float32
        ``(n_sequences, n_steps, k)`` tensor for an :class:`~sklearn_rnn.RNNStepClassifier`,
        whose padded steps hold 0, a target too: such a loss needs the lengths of ``X``'s
        sequences (``[len(x) for x in X]`` for a list) to weigh them zero. When None: cross-entropy
        for integer targets, otherwise half the squared error summed over the outputs,
        averaged over sequences (or valid steps).
    every_step : bool, default=False
        Put the loss at every step instead of each sequence's last valid step
        (always the case for :class:`~sklearn_rnn.RNNStepClassifier`).

    Returns
    -------
    TemporalGradientNorms

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.diagnostics import temporal_gradient_norms
    >>> gen = torch.Generator().manual_seed(0)
    >>> X, y = torch.randn(100, 50, 6, generator=gen), torch.randint(0, 4, (100,), generator=gen)
    >>> first_vs_last = {}
    >>> for rho in (0.8, 1.2):
    ...     net = RecurrentNetwork(6, 50, 4, spectral_radius=rho, generator=torch.Generator().manual_seed(1))
    ...     stats = temporal_gradient_norms(net, X, y)
    ...     first_vs_last[rho] = stats.norms[0] / stats.norms[-1]
    >>> stats.norms.shape, stats.alignment
    ((50,), 'last')
    >>> bool(first_vs_last[0.8] < 1e-5 < first_vs_last[1.2])  # rho < 1: the gradient vanishes
    True
    """
    # Under a caller's inference_mode or autocast too, as predict runs there: the batch,
    # a network built or copied here, and the pass are made with autograd, in float32.
    with gradient_mode("cpu"):
        return _temporal_gradient_norms(model, X, y, lengths, loss, every_step)


def _temporal_gradient_norms(
    model: torch.nn.Module,
    X: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    lengths: torch.Tensor | np.ndarray | None,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
    every_step: bool,
) -> TemporalGradientNorms:
    """:func:`temporal_gradient_norms`, in :func:`~sklearn_rnn._engine.gradient_mode`."""
    if isinstance(model, BaseRNN):
        # A fitted estimator is judged by the network it holds, not by settings changed since.
        network = getattr(getattr(model, "net_", None), "module_", None)
        fitted = " (its fitted network)" if network is not None else ""
        if (network.bidirectional if network is not None else model.bidirectional):
            raise ValueError(
                f"temporal_gradient_norms follows the gradient back one step at a time, in one "
                f"direction of time; this {type(model).__name__}{fitted} has bidirectional=True. "
                "Measure it with bidirectional=False (set_params, then fit or pass it unfitted)."
            )
        cell = network.cell if network is not None else model._resolved_cell()
        if not get_cell(cell).temporal_gradients:
            chosen = (fitted or " (what cell='auto' chooses for timed input)") if model.cell != cell else fitted
            raise ValueError(
                f"temporal_gradient_norms follows the gradient back through the recurrent "
                f"weights alone, which cell={cell!r}{chosen} does not read alone (its recurrence "
                "also reads the time since the previous step). Measure it with one of "
                f"{cell_names(temporal_gradients=True)} (set_params(cell=...), then fit or "
                "pass it unfitted)."
            )
        if lengths is not None:
            raise ValueError(
                "lengths is for a network's padded batch; an estimator reads each sequence's "
                "length from X itself. Leave lengths out."
            )
        if every_step and not model._output_steps.every_step:
            raise ValueError(
                f"every_step=True puts the loss at every step, but {type(model).__name__} has one "
                "target per sequence, read at its last step. Leave every_step out (an "
                "RNNStepClassifier's loss is at every step already)."
            )
        every_step = every_step or model._output_steps.every_step  # the estimator class says where it reads out
        model, X, lengths, y, estimator_loss = model._diagnostic_batch(X, y)
        loss = estimator_loss if loss is None else loss
    elif not isinstance(model, RecurrentNetwork):
        raise TypeError(
            "temporal_gradient_norms takes an RNNClassifier, RNNRegressor or RNNStepClassifier (fitted, or "
            "unfitted for its initialization) or a sklearn_rnn.nn.RecurrentNetwork; got "
            f"{type(model).__name__}."
            + (" For a pipeline, pass its last step and the sequences its other steps "
               "give: temporal_gradient_norms(pipe[-1], pipe[:-1].transform(X), y)."
               if hasattr(model, "steps") else
               " For a fitted search, pass its refitted model: search.best_estimator_."
               if hasattr(model, "cv_results_") else "")
        )
    elif isinstance(X, (list, tuple)) or getattr(X, "is_nested", False) is True:
        kind = "a nested tensor" if isinstance(X, torch.Tensor) else f"a {type(X).__name__} of {len(X)} sequences"
        raise ValueError(
            "with a network, X must be one right-padded batch of shape (n_sequences, n_steps, "
            f"n_features), with their lengths; got {kind}. Pad them, e.g. "
            "torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True) with "
            "lengths=[len(s) for s in sequences], or pass the fitted estimator, which reads "
            "sequences as they come."
        )
    reference = model.recurrent_weight
    X = torch.as_tensor(X).to(device=reference.device, dtype=reference.dtype)
    if X.ndim != 3:
        raise ValueError(
            "X must be a right-padded batch of shape (n_sequences, n_steps, n_features); got "
            f"shape {tuple(X.shape)}."
        )
    batch, steps, _ = X.shape
    if batch == 0 or steps == 0:
        raise ValueError(
            f"X holds no {'sequence' if batch == 0 else 'step'}: got shape {tuple(X.shape)}. "
            "Temporal gradients are measured on a batch of at least one sequence of at least "
            "one step."
        )
    if lengths is None:
        lengths = torch.full((batch,), steps, device=X.device)
    lengths = torch.as_tensor(lengths)
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must hold integers, each sequence's valid steps; got dtype {lengths.dtype} "
            f"({lengths.tolist()[:5]}...). Pass them as integers."
        )
    lengths, _ = _check_lengths(lengths, batch, steps, X.device)
    valid = torch.arange(steps, device=X.device)[None, :] < lengths[:, None]  # (n, T)
    _check_finite_at_valid_steps(X, valid, "X")
    y = torch.as_tensor(y, device=X.device)
    if y.ndim == 0 or y.shape[0] != batch:
        raise ValueError(f"y must have one target per sequence ({batch}); got shape {tuple(y.shape)}.")
    if loss is None:
        _check_default_targets(y, int(model.readout.out_features), every_step, steps, lengths)
        if torch.is_floating_point(y):  # padded steps may hold NaN; the default loss skips them
            _check_finite_at_valid_steps(y, valid if every_step else valid[:, :1], "y")
        loss = _default_loss(y, lengths, every_step)
    # Dropout off, so that the same call gives the same answer: on a copy in evaluation
    # mode, as the caller's module may be used by another thread (switching its mode
    # and back left it in eval mode, and ran other calls with dropout on).
    if model.training:
        model = module_copy(model).eval()  # the caller's hooks run, as in predict
    with gradient_mode(X.device):  # and autocast off on the batch's device
        if X.is_inference():  # the caller's own batch, made in inference mode
            X, y = X.clone(), (y.clone() if y.is_inference() else y)
        states = model.forward_states(X, lengths, every_step=every_step)
        value = loss(states.outputs, y)
        if isinstance(value, torch.Tensor) and not bool(torch.isfinite(value.detach()).all()):
            # Every norm came back NaN without a word, and the plot drew nothing.
            unbounded = [cell.name for cell, _, _ in model.stack() if not cell.bounded_state] \
                if hasattr(model, "stack") else []
            cause = (f" (the {unbounded[0]!r} cell's state is unbounded: a spectral radius above 1 "
                     "lets it grow past float32 over long sequences)" if unbounded else "")
            raise ValueError(
                f"the loss of this batch is not finite ({float(value.detach())}): the network's outputs "
                f"overflowed{cause}, so no temporal gradient can be measured. Lower spectral_radius, "
                "use shorter sequences, or a cell with a bounded state ('tanh', 'gru', 'lstm')."
            )
        tg = temporal_gradients(model, states, value, lengths, accumulate_grad=False)
    norms = tg.norms()
    return TemporalGradientNorms(
        steps=np.arange(1, tg.steps + 1),
        norms=norms.cpu().numpy(),
        cosines=tg.cosines().cpu().numpy(),
        parameter_norms={k: v.cpu().numpy() for k, v in tg.parameter_norms().items()},
        counts=tg.counts.cpu().numpy(),
        gradient_norm=tg.gradient_norm,
        loss=float(tg.loss),
        alignment=tg.alignment,
    )


def plot_temporal_gradient_norms(
    results: TemporalGradientNorms | Mapping[Any, TemporalGradientNorms],
    *,
    cosines: bool = False,
    ax: Axes | Sequence[Axes] | None = None,
    title: str | None = None,
) -> Any:
    """Draw temporal-gradient norms by step on a log scale (thesis figures 3.1-3.3).

    One line per result: pass ``{label: temporal_gradient_norms(...)}`` to compare, for
    example, several spectral radii (figure 3.1) or tasks (figures 3.2-3.3, with
    ``cosines=True`` for their second row).

    Parameters
    ----------
    results : TemporalGradientNorms or mapping of labels to TemporalGradientNorms
        What to draw; a mapping's keys label the lines (as ``str(key)``: names, or
        numbers such as the updates trained, ``{0: before, 300: after}``).
    cosines : bool, default=False
        Also draw each step's cosine with the full gradient, in a second panel below.
    ax : matplotlib Axes, or a pair of them with ``cosines=True``, optional
        Where to draw, top first (an array of any shape, such as a column of
        ``plt.subplots(2, 1, squeeze=False)``, is read in order); a new figure when None.
    title : str, optional
        Title of the (top) panel.

    Returns
    -------
    matplotlib.axes.Axes, or ndarray of two Axes with ``cosines=True``
        The norms panel (and the cosines panel).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.diagnostics import plot_temporal_gradient_norms, temporal_gradient_norms
    >>> gen = torch.Generator().manual_seed(0)
    >>> X, y = torch.randn(100, 50, 6, generator=gen), torch.randint(0, 4, (100,), generator=gen)
    >>> radii = (0.8, 0.9, 1.0, 1.1, 1.2)
    >>> results = {
    ...     f"rho = {rho}": temporal_gradient_norms(
    ...         RecurrentNetwork(6, 50, 4, spectral_radius=rho, generator=torch.Generator().manual_seed(1)),
    ...         X, y)
    ...     for rho in radii
    ... }
    >>> ax = plot_temporal_gradient_norms(results, title="Figure 3.1")
    >>> ax.get_yscale(), len(ax.get_lines())
    ('log', 5)
    """
    import matplotlib.pyplot as plt

    if isinstance(results, TemporalGradientNorms):
        results = {"": results}
    if (not isinstance(results, Mapping) or not results
            or not all(isinstance(r, TemporalGradientNorms) for r in results.values())):
        got, empty = type(results).__name__, hasattr(results, "__len__") and len(results) == 0
        if isinstance(results, Mapping) and results:
            got += " holding " + ", ".join(sorted({type(r).__name__ for r in results.values()}))
        raise TypeError(
            "results must be a TemporalGradientNorms or a non-empty mapping of labels to "
            f"them (from temporal_gradient_norms); got {'an empty' if empty else 'a'} {got}."
            + (" Give each result a label: {label: result, ...}, or dict(enumerate(results))."
               if isinstance(results, (list, tuple)) else "")
        )
    labels = {key: str(key) for key in results}  # a key 0 labels its line too
    panels = 2 if cosines else 1
    if ax is None:
        _, axes = plt.subplots(panels, 1, sharex=True, squeeze=False, figsize=(6, 3 * panels))
        axes = axes[:, 0]
    else:
        if isinstance(ax, tuple) and ax and type(ax[0]).__name__ in ("Figure", "SubFigure"):
            _check_axes(ax, "plot_temporal_gradient_norms")  # plt.subplots()'s (fig, ax): unpack it
        axes = np.asarray(ax, dtype=object).ravel()
        for each in axes:  # every one before anything is drawn (a None drew half a figure)
            _check_axes(each, "plot_temporal_gradient_norms")
        if len(axes) != panels:
            raise ValueError(
                f"ax must hold {panels} Axes (norms{', cosines' if cosines else ''}); got {len(axes)}."
            )
    # Steps before the loss only when every line is aligned on it: then lines of different
    # lengths are right-aligned, their loss steps at one x (each sat at its own length).
    last = all(result.alignment == "last" for result in results.values())
    longest = max(len(result.steps) for result in results.values())
    for key, result in results.items():
        steps = result.steps + (longest - len(result.steps) if last else 0)
        # Zero norms (steps no sequence reaches) cannot be drawn on a log scale.
        norms = np.where(result.norms > 0, result.norms, np.nan)
        axes[0].plot(steps, norms, label=labels[key] or None)
        if cosines:
            axes[1].plot(steps, result.cosines, label=labels[key] or None)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("temporal gradient norm")
    if title:
        axes[0].set_title(title)
    if cosines:
        axes[1].set_ylabel("cosine with the gradient")
        axes[1].set_ylim(-1.05, 1.05)
    axes[-1].set_xlabel("step (the loss is at the last)" if last else "step")
    if any(labels.values()):
        axes[0].legend(fontsize="small")
    return axes if cosines else axes[0]


def _check_finite_at_valid_steps(values: torch.Tensor, valid: torch.Tensor, name: str) -> None:
    """Refuse a value of ``values`` (``X`` of shape ``(n, T, d)``, or targets ``(n[, T][, k])``)
    that is not finite at a valid step of ``valid`` ``(n, T)`` (one per sequence for
    ``(n[, k])`` targets): a NaN there made the loss and every norm NaN, without a word."""
    lead = values.reshape(values.shape[0], -1) if values.ndim <= 2 and valid.shape[1] == 1 else None
    if lead is not None:  # one target (or k) per sequence
        bad = ~torch.isfinite(lead).all(dim=1)
        where = lambda sequence: f"sequence {sequence}"  # noqa: E731
    else:
        flat = values.reshape(values.shape[0], values.shape[1], -1)
        bad = ~torch.isfinite(flat).all(dim=2) & valid
        where = lambda sequence: f"valid step {int(bad[sequence].nonzero()[0, 0])} of sequence {sequence}"  # noqa: E731
    if bool(bad.any()):
        sequence = int(bad.reshape(bad.shape[0], -1).any(dim=1).nonzero()[0, 0])
        raise ValueError(
            f"{name} is not finite (NaN or infinite) at {where(sequence)}: padded steps (past each "
            f"sequence's length) may hold anything, valid ones must be finite. Fill or drop the "
            f"missing values first (the estimators fill missing inputs: pass the fitted estimator)."
        )


def _check_default_targets(
    y: torch.Tensor, outputs: int, every_step: bool, steps: int, lengths: torch.Tensor
) -> None:
    """Refuse targets the default loss cannot read against ``outputs`` network outputs:
    class indices in ``[0, outputs)`` of shape ``(n,)`` (``(n, steps)`` at every step, the
    range checked at the valid steps of ``lengths`` alone), or values of shape ``(n,)``
    or ``(n, outputs)`` (after ``steps`` at every step)."""
    lead = (y.shape[0], steps) if every_step else (y.shape[0],)
    if not torch.is_floating_point(y):
        if tuple(y.shape) != lead:
            raise ValueError(
                f"y holds integers, read as class indices: expected shape {lead}, one class a "
                f"{'step' if every_step else 'sequence'}; got {tuple(y.shape)}. Give values as floats "
                "for a regression loss, or pass loss=."
            )
        if every_step:  # padded steps are not read: -100 (PyTorch's ignore_index) is padding too
            y = y[torch.arange(steps, device=y.device)[None, :] < lengths[:, None]]
        if len(y) and (int(y.min()) < 0 or int(y.max()) >= outputs):
            raise ValueError(
                f"y holds class indices from {int(y.min())} to {int(y.max())}"
                f"{' at the valid steps' if every_step else ''}, but the network has "
                f"{outputs} outputs: expected indices in [0, {outputs - 1}]. Encode the labels "
                "as 0..k-1 (sklearn.preprocessing.LabelEncoder), or give float values for a "
                "regression loss."
            )
        return
    if tuple(y.shape) not in (lead, (*lead, outputs)) or (tuple(y.shape) == lead and outputs != 1):
        raise ValueError(
            f"y holds floats, read as values: expected shape {(*lead, outputs)}"
            + (f" or {lead}" if outputs == 1 else "")
            + f" for a network of {outputs} outputs; got {tuple(y.shape)}. Give class indices as "
            "integers for a classification loss, or pass loss=."
        )


def _default_loss(
    y: torch.Tensor, lengths: torch.Tensor, every_step: bool
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cross-entropy for integer targets, half the squared error otherwise; padding ignored,
    whatever the padded steps' targets hold."""
    classification = not torch.is_floating_point(y)

    def loss(outputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if every_step:
            valid = torch.arange(outputs.shape[1], device=outputs.device)[None, :] < lengths[:, None]  # (n, T)
            # A padded step's target is set to 0 before the loss: its zero weight would not
            # cancel a NaN (NaN * 0 is NaN, in the loss and in its gradient), nor would
            # cross_entropy take a class index such as -100.
            target = target.masked_fill(~valid.reshape(valid.shape + (1,) * (target.ndim - 2)), 0)
        if classification:
            flat = outputs.reshape(-1, outputs.shape[-1])  # (N, k)
            per_item = F.cross_entropy(flat, target.reshape(-1).long(), reduction="none")  # (N,)
        else:
            target = target.to(outputs.dtype).reshape(outputs.shape)
            per_item = 0.5 * (outputs - target).square().reshape(-1, outputs.shape[-1]).sum(1)  # (N,)
        if not every_step:
            return per_item.mean()
        mask = valid.reshape(-1)  # (N,)
        # Selected, not multiplied: a padded step's output that is not finite gives NaN times 0.
        return torch.where(mask, per_item, 0.0).sum() / mask.sum()

    return loss
