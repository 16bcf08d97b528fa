"""Plots of fitted estimators (matplotlib is imported only when a plot is drawn)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted

__all__ = ["plot_training_history"]


def plot_training_history(estimator: Any, ax: Any = None) -> Any:
    """Plot the training loss per epoch, the validation score and the best epoch.

    The training loss ``loss_curve_`` is drawn against the epoch on ``ax``. When the
    estimator was fitted with ``early_stopping=True``, its per-epoch validation score
    ``validation_scores_`` (accuracy for a classifier, R^2 for a regressor, the
    log-likelihood per step for :class:`~sklearn_rnn.RNNStepClassifier`) is drawn on
    a second y axis sharing the epochs, and a star and a dotted vertical line mark the
    best epoch: the one whose weights the estimator kept, chosen by the validation
    loss (so the star need not sit on the highest score). The epochs run from 0.5 to
    the last epoch + 0.5; on axes that already show something, or share their x axis
    with axes that do (``plt.subplots(..., sharex=True)``), the x limits are widened to
    them, never cut, so that each panel shows all of its history.

    Parameters
    ----------
    estimator : RNNClassifier, RNNRegressor, Pipeline or search
        A fitted estimator with a ``loss_curve_`` attribute, a
        :class:`~sklearn.pipeline.Pipeline` ending in one, or a fitted search such as
        :class:`~sklearn.model_selection.GridSearchCV` (its ``best_estimator_`` is
        plotted). scikit-learn's ``MLPClassifier`` and ``MLPRegressor`` work too.
    ax : matplotlib.axes.Axes, optional
        Where to draw the loss; a new figure and axes when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes of the training loss. The validation score, when drawn, is on a twin
        axes created by ``ax.twinx()`` (the last axes of ``ax.figure`` right after the
        call).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.
    TypeError
        If the fitted estimator records no training history (no ``loss_curve_``).

    See Also
    --------
    sklearn_rnn.RNNClassifier : Records ``loss_curve_`` and ``validation_scores_``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_rnn import RNNClassifier
    >>> from sklearn_rnn.plotting import plot_training_history
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(rng.integers(3, 9), 2)) for _ in range(100)]
    >>> y = np.array([int(x[:, 0].sum() > 0) for x in X])
    >>> clf = RNNClassifier(hidden_size=8, max_iter=100, early_stopping=True,
    ...                     n_iter_no_change=3, random_state=0).fit(X, y)
    >>> ax = plot_training_history(clf)
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('epoch', 'training loss')
    >>> list(ax.lines[0].get_ydata()) == clf.loss_curve_
    True
    """
    model = _final_estimator(estimator)
    loss_curve = np.asarray(model.loss_curve_, dtype=float)
    epochs = np.arange(1, len(loss_curve) + 1)

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    _check_axes(ax, "plot_training_history")
    # Axes that share the epochs with drawn ones (plt.subplots(..., sharex=True)) share
    # their limits too: these are widened to this history's epochs, never cut to them.
    shown = any(other.has_data() for other in ax.get_shared_x_axes().get_siblings(ax))
    (loss_line,) = ax.plot(epochs, loss_curve, color="C0", label="training loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    handles = [loss_line]

    scores = getattr(model, "validation_scores_", None)
    if scores is not None and len(scores) > 0:
        scores = np.asarray(scores, dtype=float)
        score_ax = ax.twinx()
        # Keep the loss axes (and the legend drawn on it) above the twin's lines.
        ax.set_zorder(score_ax.get_zorder() + 1)
        ax.patch.set_visible(False)
        name = _score_name(model)
        validated = _validated_epochs(model, len(scores))
        (score_line,) = score_ax.plot(validated, scores, color="C1", label=f"validation {name}")
        score_ax.set_ylabel(f"validation {name}")
        handles.append(score_line)
        best = _best_epoch(model, scores, validated)
        if best is not None:
            ax.axvline(best, color="0.4", linestyle=":", linewidth=1)
            (best_marker,) = score_ax.plot(
                [best],
                [scores[list(validated).index(best)]],
                linestyle="none",
                marker="*",
                markersize=12,
                color="k",
                label=f"best epoch ({best})",
            )
            handles.append(best_marker)
    low, high = 0.5, max(len(loss_curve), 1) + 0.5
    if shown:
        low, high = min(low, ax.get_xlim()[0]), max(high, ax.get_xlim()[1])
    ax.set_xlim(low, high)
    ax.legend(handles=handles, loc="best")
    ax.set_title(f"Training history of {type(model).__name__}")
    return ax


def _final_estimator(estimator: Any) -> Any:
    """The fitted model that holds the history: last step of a pipeline, best of a search
    (given alone or as a pipeline's last step)."""
    from .inspection import _refitted

    check_is_fitted(estimator)
    model = _refitted(estimator, "whose history could be plotted")
    if hasattr(model, "steps"):
        model = _refitted(model.steps[-1][1], "whose history could be plotted")
    if not hasattr(model, "loss_curve_"):
        raise TypeError(
            "plot_training_history needs a fitted estimator that records its training "
            f"history in loss_curve_ (such as RNNClassifier or RNNRegressor); got "
            f"{type(model).__name__}, which has no loss_curve_."
        )
    return model


def _score_name(model: Any) -> str:
    if getattr(getattr(model, "_output_steps", None), "every_step", False):
        return "log-likelihood per step"  # RNNStepClassifier's score
    if is_classifier(model):
        return "accuracy"
    if is_regressor(model):
        return "R²"
    return "score"


def _validated_epochs(model: Any, n_scores: int) -> NDArray[np.int64]:
    """The 1-based epochs that ``validation_scores_`` belong to.

    The epochs of the history that hold a validation score: a warm start keeps the
    epochs of earlier calls, which a fit without a held-out split did not validate.
    Epochs 1 to ``n_scores`` for a model without such a history.
    """
    history = getattr(getattr(model, "net_", None), "history", None)
    if history is not None:
        epochs = [int(row["epoch"]) for row in history if "valid_score" in row]
        if len(epochs) == n_scores:
            return np.asarray(epochs, dtype=np.int64)
    return np.arange(1, n_scores + 1, dtype=np.int64)


def _best_epoch(model: Any, scores: np.ndarray, validated: NDArray[np.int64]) -> int | None:
    """The 1-based epoch whose weights the model kept, or None when it is unknown.

    For this package's estimators that is their ``best_epoch_`` (the epoch early
    stopping restored); for other models with validation scores, the best score.
    """
    if hasattr(model, "best_epoch_"):
        best = model.best_epoch_
        return best if best is not None and best in validated else None
    if not np.isfinite(scores).any():
        return None
    return int(validated[int(np.nanargmax(scores))])


def _check_axes(ax: Any, owner: str) -> None:
    """Refuse an ``ax`` that is not one matplotlib Axes (the whole array of
    ``plt.subplots(1, 2)``, a list, a Figure), naming what came and the fix."""
    from matplotlib.axes import Axes

    if isinstance(ax, Axes):
        return
    figure_first = isinstance(ax, tuple) and bool(ax) and type(ax[0]).__name__ in ("Figure", "SubFigure")
    fix = ("unpack what plt.subplots() returns: fig, ax = plt.subplots(), then pass ax=ax" if figure_first
           else "pass one of them, e.g. ax=axs[0]" if isinstance(ax, (list, tuple, np.ndarray))
           else "pass one of its Axes, e.g. ax=fig.gca()" if type(ax).__name__ in ("Figure", "SubFigure")
           else "pass a matplotlib Axes, e.g. from fig, ax = plt.subplots()")
    raise TypeError(f"{owner}: ax must be one matplotlib Axes; got {type(ax).__name__}: {fix}.")
