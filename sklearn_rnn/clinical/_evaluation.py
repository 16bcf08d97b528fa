"""Pooled cross-validated evaluation of a binary classifier, as in the thesis' lupus study.

With a few hundred patients there is no room for a test set: every patient is
predicted once by a model that did not see it (k stratified folds), and the k test
folds' probabilities are pooled into one ROC curve. The pooled AUC also judges whether
the k models agree on the scale of their probabilities; the mean of the k fold AUCs
does not, so both are reported.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd
import torch
from joblib import effective_n_jobs
from numpy.typing import NDArray
from sklearn.base import clone
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import RepeatedStratifiedKFold
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils.parallel import Parallel, delayed  # the caller's config and warning filters

from .._parallel import _task_share, threads_chosen, with_callers_context
from ..sequences._panel import by_instance
from ..sequences._validation import numpy_readable

__all__ = ["PooledCVResult", "auc_intervals", "pooled_cross_validate"]


@dataclass(eq=False)
class PooledCVResult:
    """Out-of-fold probabilities of :func:`pooled_cross_validate` and their scores.

    Attributes
    ----------
    y_true : ndarray of shape (n_samples,), dtype int
        1 for the positive class, 0 otherwise (both present; other values are
        refused with a ValueError, as are the arrays below in another shape).
    y_score : ndarray of shape (n_repeats, n_samples)
        Out-of-fold probability of the positive class: each sample predicted by the
        model of the fold that held it out, for every repeat (shuffle); finite.
    folds : ndarray of shape (n_repeats, n_samples), dtype int
        The test fold of each sample in each repeat, numbered 0 to k-1 without gaps;
        every test fold holds both classes.
    threshold : float
        Probability in [0, 1] at or above which a sample is predicted positive.
    pos_label : object
        The label of the positive class in the ``y`` given.
    fit_seconds : float
        Wall-clock time of all fits and predictions.
    pooled_auc : ndarray of shape (n_repeats,)
        ROC AUC of the pooled out-of-fold probabilities, per repeat.
    fold_auc : ndarray of shape (n_repeats, n_splits)
        ROC AUC within each test fold.
    precision, recall, specificity : ndarray of shape (n_repeats,)
        At ``threshold``, on the pooled probabilities: ``TP / (TP + FP)`` (0 without
        positive predictions), ``TP / P`` (the sensitivity) and ``TN / N``.

    Examples
    --------
    Usually returned by :func:`pooled_cross_validate`; built here from literal
    out-of-fold probabilities of 6 samples in 2 folds:

    >>> import numpy as np
    >>> from sklearn_rnn.clinical import PooledCVResult
    >>> result = PooledCVResult(
    ...     y_true=np.array([0, 0, 1, 0, 1, 1]),
    ...     y_score=np.array([[0.1, 0.4, 0.35, 0.2, 0.8, 0.7]]),
    ...     folds=np.array([[0, 0, 0, 1, 1, 1]]),
    ...     threshold=0.5, pos_label=1, fit_seconds=0.0)
    >>> result.pooled_auc, result.fold_auc
    (array([0.88888889]), array([[0.5, 1. ]]))
    >>> result.precision, result.recall, result.specificity
    (array([1.]), array([0.66666667]), array([1.]))
    """

    y_true: NDArray[np.int64] = field(repr=False)
    y_score: NDArray[np.float64] = field(repr=False)
    folds: NDArray[np.int64] = field(repr=False)
    threshold: float
    pos_label: Any
    fit_seconds: float
    pooled_auc: NDArray[np.float64] = field(init=False)
    fold_auc: NDArray[np.float64] = field(init=False, repr=False)
    precision: NDArray[np.float64] = field(init=False, repr=False)
    recall: NDArray[np.float64] = field(init=False, repr=False)
    specificity: NDArray[np.float64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.y_true, self.y_score, self.folds = _check_result(self.y_true, self.y_score, self.folds)
        _check_threshold(self.threshold, "PooledCVResult.threshold")
        self.pooled_auc = np.array([roc_auc_score(self.y_true, s) for s in self.y_score])
        n_splits = int(self.folds.max()) + 1
        self.fold_auc = np.array(
            [
                [roc_auc_score(self.y_true[f == k], s[f == k]) for k in range(n_splits)]
                for s, f in zip(self.y_score, self.folds, strict=True)
            ]
        )
        counts = [_confusion(self.y_true, s >= self.threshold) for s in self.y_score]
        tp, fp, tn, fn = (np.array(column, dtype=float) for column in zip(*counts, strict=True))
        predicted = tp + fp
        self.precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
        self.recall = tp / (tp + fn)
        self.specificity = tn / (tn + fp)

    def _check_repeat(self, repeat: Any) -> None:
        """Refuse a ``repeat`` that is not one of the result's, before a figure is made."""
        if isinstance(repeat, bool) or not isinstance(repeat, Integral) or not 0 <= repeat < self.n_repeats:
            raise ValueError(
                f"repeat must be an int in [0, n_repeats) = [0, {self.n_repeats}); got {repeat!r}."
            )

    @property
    def n_repeats(self) -> int:
        """Repeats (shuffles) of the k-fold split."""
        return int(self.y_score.shape[0])

    @property
    def mean_pooled_auc(self) -> float:
        """Pooled AUC, averaged over the repeats."""
        return float(self.pooled_auc.mean())

    @property
    def mean_fold_auc(self) -> float:
        """Mean of the fold AUCs over every fold of every repeat."""
        return float(self.fold_auc.mean())

    def summary(self) -> dict[str, float]:
        """The scores averaged over the repeats.

        Returns
        -------
        dict of str to float
            ``pooled_auc``, ``pooled_auc_std`` (over repeats), ``mean_fold_auc``,
            ``precision``, ``recall``, ``specificity``, ``threshold``.
        """
        return {
            "pooled_auc": self.mean_pooled_auc,
            "pooled_auc_std": float(self.pooled_auc.std()),
            "mean_fold_auc": self.mean_fold_auc,
            "precision": float(self.precision.mean()),
            "recall": float(self.recall.mean()),
            "specificity": float(self.specificity.mean()),
            "threshold": self.threshold,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row of scores per repeat.

        Returns
        -------
        pandas.DataFrame
            Columns ``pooled_auc``, ``mean_fold_auc``, ``precision``, ``recall``,
            ``specificity``, indexed by ``repeat``.
        """
        return pd.DataFrame(
            {
                "pooled_auc": self.pooled_auc,
                "mean_fold_auc": self.fold_auc.mean(axis=1),
                "precision": self.precision,
                "recall": self.recall,
                "specificity": self.specificity,
            },
            index=pd.RangeIndex(self.n_repeats, name="repeat"),
        )

    # ----------------------------------------------------------------- plots
    def plot_roc(self, ax: Any = None, *, repeat: int = 0, name: str | None = None) -> Any:
        """ROC curve of the pooled probabilities, with the chosen threshold marked.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure when None.
        repeat : int, default=0
            Which repeat's probabilities.
        name : str, optional
            Legend label of the curve.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from sklearn.metrics import RocCurveDisplay

        self._check_repeat(repeat)
        display = RocCurveDisplay.from_predictions(
            self.y_true, self.y_score[repeat], ax=ax, name=name, plot_chance_level=True
        )
        _name_positive_class(display.ax_, self.pos_label, "False Positive Rate", "True Positive Rate")
        fpr = 1 - self.specificity[repeat]
        display.ax_.plot(fpr, self.recall[repeat], "o", color="black",
                         label=f"threshold {self.threshold:g}")
        display.ax_.legend(loc="lower right")
        return display.ax_

    def plot_sensitivity_specificity(self, ax: Any = None, *, repeat: int = 0) -> Any:
        """Sensitivity and specificity of the pooled probabilities against the threshold.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure when None.
        repeat : int, default=0
            Which repeat's probabilities.

        Returns
        -------
        matplotlib.axes.Axes
        """
        import matplotlib.pyplot as plt

        self._check_repeat(repeat)  # before a figure is made
        if ax is None:
            _, ax = plt.subplots()
        fpr, tpr, thresholds = roc_curve(self.y_true, self.y_score[repeat],
                                         drop_intermediate=False)
        thresholds = np.clip(thresholds, 0.0, 1.0)  # the first one is +inf
        # Down to a threshold of 0, where every sequence is called positive (the curves
        # ended at the lowest score, and the axis below it stayed blank).
        thresholds, tpr, fpr = np.append(thresholds, 0.0), np.append(tpr, 1.0), np.append(fpr, 1.0)
        ax.step(thresholds, tpr, where="post", label="sensitivity (recall)")
        ax.step(thresholds, 1 - fpr, where="post", label="specificity")
        ax.axvline(self.threshold, color="gray", linestyle=":",
                   label=f"threshold {self.threshold:g}")
        ax.set(xlabel="threshold on the predicted probability", ylabel="rate",
               xlim=(0, 1), ylim=(0, 1.02))
        ax.legend(loc="center right")
        return ax

    def plot_precision_recall(
        self, ax: Any = None, *, repeat: int = 0, name: str | None = None
    ) -> Any:
        """Precision-recall curve of the pooled probabilities.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure when None.
        repeat : int, default=0
            Which repeat's probabilities.
        name : str, optional
            Legend label of the curve.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from sklearn.metrics import PrecisionRecallDisplay

        self._check_repeat(repeat)
        display = PrecisionRecallDisplay.from_predictions(
            self.y_true, self.y_score[repeat], ax=ax, name=name, plot_chance_level=True
        )
        _name_positive_class(display.ax_, self.pos_label, "Recall", "Precision")
        display.ax_.plot(self.recall[repeat], self.precision[repeat], "o", color="black",
                         label=f"threshold {self.threshold:g}")
        display.ax_.legend(loc="lower left")
        return display.ax_

    def plot(self, axes: Any = None, *, repeat: int = 0, name: str | None = None) -> Any:
        """The three plots side by side: ROC, sensitivity-specificity, precision-recall.

        Parameters
        ----------
        axes : sequence of 3 matplotlib.axes.Axes, optional
            Where to draw; a new figure of three panels when None.
        repeat : int, default=0
            Which repeat's probabilities.
        name : str, optional
            Legend label of the curves.

        Returns
        -------
        ndarray of 3 matplotlib.axes.Axes
        """
        import matplotlib.pyplot as plt

        self._check_repeat(repeat)
        if axes is not None and np.asarray(axes, dtype=object).size != 3:
            raise ValueError(
                "PooledCVResult.plot draws 3 panels (ROC, sensitivity-specificity, "
                f"precision-recall): axes must hold 3 Axes; got {np.asarray(axes, dtype=object).size}. "
                "E.g. plt.subplots(1, 3)[1], or leave axes out."
            )
        if axes is None:
            _, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        axes = np.asarray(axes).ravel()
        self.plot_roc(axes[0], repeat=repeat, name=name)
        self.plot_sensitivity_specificity(axes[1], repeat=repeat)
        self.plot_precision_recall(axes[2], repeat=repeat, name=name)
        return axes


def _name_positive_class(ax: Any, pos_label: Any, xlabel: str, ylabel: str) -> None:
    """Label the axes of a curve drawn from the 0/1 ``y_true`` as scikit-learn does, but
    with the result's positive class (its "Positive label: 1" named the coding)."""
    ax.set(xlabel=f"{xlabel} (Positive label: {pos_label})",
           ylabel=f"{ylabel} (Positive label: {pos_label})")


def pooled_cross_validate(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    n_splits: int = 8,
    n_repeats: int = 1,
    threshold: float = 0.5,
    pos_label: Any = None,
    random_state: int | np.random.RandomState | None = None,
    n_jobs: int | None = None,
    on_fold: Any = None,
) -> PooledCVResult:
    """Cross-validate a binary classifier and pool its out-of-fold probabilities.

    The samples are split into ``n_splits`` stratified folds (shuffled), ``n_repeats``
    times with different shuffles. For each fold a clone of ``estimator`` is fitted on
    the other folds and predicts the probability of the positive class for the held
    out one; the ``n_splits`` test folds together give one probability per sample,
    scored by one ROC AUC (the *pooled* AUC of the thesis' lupus study), by the AUC
    within each fold, and by precision, recall and specificity at ``threshold``.
    Only the public ``fit`` and ``predict_proba`` of the estimator are called.

    Parameters
    ----------
    estimator : classifier
        Any scikit-learn classifier with ``predict_proba``: an ``RNNClassifier``, a
        :class:`~sklearn.pipeline.Pipeline`, a ``GridSearchCV`` (a nested search).
    X : sequences, array-like or DataFrame
        What ``estimator.fit`` takes; indexed by sample (a list of ``(T_i, d)`` arrays
        stays a list; a panel, an (instance, time) MultiIndex frame, becomes a list of
        one frame per instance, and a torch nested tensor the list of its sequences).
    y : array-like of shape (n_samples,)
        Two classes.
    n_splits : int, default=8
        Folds; every class needs at least ``n_splits`` samples.
    n_repeats : int, default=1
        Repeats of the whole k-fold split with different shuffles.
    threshold : float, default=0.5
        Predicted positive when the probability is at or above it.
    pos_label : object, optional
        The positive class; by default the greater of the two labels (1 of 0/1).
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles of the folds (the estimator keeps its own
        ``random_state``).
    n_jobs : int, optional
        Folds fitted in parallel (joblib; -1 for every core). Each parallel fit runs
        torch on one thread, so that ``n_jobs`` fits share the cores instead of
        oversubscribing them; a :func:`~sklearn_rnn.torch_threads` block around the
        call chooses another count, within each task's share of the CPU.
    on_fold : callable, optional
        Called as ``on_fold(done, total)`` each time a fold's fit and prediction
        finish (in order), e.g. to show progress.

    Returns
    -------
    PooledCVResult
        Probabilities, fold assignment and scores; ``plot_roc``,
        ``plot_sensitivity_specificity``, ``plot_precision_recall`` and ``plot`` draw
        the curves.

    Raises
    ------
    ValueError
        ``y`` without exactly two classes, a class with fewer than ``n_splits``
        samples, a threshold outside [0, 1], or ``n_jobs`` 0 or not an int; and, when
        its fit ends, a fold whose model predicts probabilities that are not finite.
    TypeError
        An estimator that predicts at every step (:class:`~sklearn_rnn.RNNStepClassifier`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_rnn.clinical import pooled_cross_validate
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3))
    >>> y = (X[:, 0] + rng.normal(size=80) > 0).astype(int)
    >>> result = pooled_cross_validate(LogisticRegression(), X, y, n_splits=4,
    ...                                n_repeats=2, random_state=0)
    >>> result.y_score.shape, result.fold_auc.shape
    ((2, 80), (2, 4))
    >>> bool(result.mean_pooled_auc > 0.7)
    True
    >>> sorted(result.summary())
    ['mean_fold_auc', 'pooled_auc', 'pooled_auc_std', 'precision', 'recall', 'specificity', 'threshold']
    """
    _check_one_output_per_sequence(estimator)
    if not hasattr(estimator, "predict_proba"):  # found after the first fold's fit
        raise TypeError(
            f"pooled_cross_validate pools each fold's probabilities of the positive class; "
            f"{type(estimator).__name__} has no predict_proba. Pass a probabilistic classifier, "
            f"e.g. sklearn.calibration.CalibratedClassifierCV({type(estimator).__name__}())."
        )
    labels, pos_label = _binary_labels(y, pos_label)
    _check_params(labels, n_splits, n_repeats, threshold)
    _check_n_jobs(n_jobs)
    if type(X).__name__ == "Cohort" and hasattr(X, "sequences"):  # len() of it: a bare TypeError
        raise TypeError(
            "X is a Cohort: pass its sequences and labels, "
            "pooled_cross_validate(estimator, cohort.sequences, cohort.y, ...)."
        )
    X = by_instance(X, y)  # a panel has a row per step
    if getattr(X, "is_nested", False) is True:  # a torch nested tensor: no shape, no indexing
        X = numpy_readable(X)  # the list of its sequences, which fit takes as well
    n_samples = len(labels)
    if _num_samples(X) != n_samples:
        raise ValueError(
            f"X has {_num_samples(X)} samples but y has {n_samples}: pass one label per "
            "sample (sequence) of X, in the same order."
        )
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
    splitter = RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=n_repeats, random_state=seed)
    splits = list(splitter.split(np.zeros(n_samples), labels))
    y_fit = np.asarray(y)
    parallel = effective_n_jobs(n_jobs) != 1  # joblib.parallel_config's n_jobs too
    start = time.perf_counter()
    task = delayed(with_callers_context(_fit_predict))  # a torch_threads choice too
    tasks = Parallel(n_jobs=n_jobs, return_as="generator")(
        task(estimator, X, y_fit, train, test, pos_label, parallel) for train, test in splits
    )
    scores = []
    try:
        for score in tasks:
            scores.append(score)
            _check_fold_scores(score, *divmod(len(scores) - 1, n_splits))
            if on_fold is not None:
                on_fold(len(scores), len(splits))
    except BaseException:
        # The folds not started are cancelled: with a kept traceback (IPython keeps the
        # last), the generator lived on and its pool fitted every remaining fold.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*tasks have been successfully executed")
            tasks.close()
        raise
    seconds = time.perf_counter() - start
    y_score = np.empty((n_repeats, n_samples))
    folds = np.empty((n_repeats, n_samples), dtype=np.int64)
    for index, ((_, test), score) in enumerate(zip(splits, scores, strict=True)):
        repeat, fold = divmod(index, n_splits)
        y_score[repeat, test] = score
        folds[repeat, test] = fold
    return PooledCVResult(labels, y_score, folds, float(threshold), pos_label, seconds)


def _check_result(
    y_true: Any, y_score: Any, folds: Any
) -> tuple[NDArray[Any], NDArray[np.float64], NDArray[Any]]:
    """The arrays of a :class:`PooledCVResult`, refused where its scores cannot be
    computed from them (or would disagree: an AUC of the greater label, the recall of 1)."""
    y_true, folds = np.asarray(y_true), np.asarray(folds)
    y_score = np.asarray(y_score, dtype=np.float64)
    if y_true.ndim != 1:
        raise ValueError(
            f"PooledCVResult.y_true must be 1D, one 0/1 label per sample; got shape {y_true.shape}."
        )
    values = np.unique(y_true)
    if not np.isin(values, [0, 1]).all():
        raise ValueError(
            f"PooledCVResult.y_true must hold 1 for the positive class and 0 otherwise; got the "
            f"values {values.tolist()[:10]}. Code the labels first, e.g. "
            "(labels == pos_label).astype(int)."
        )
    if len(values) != 2:
        raise ValueError(
            "PooledCVResult.y_true must hold both classes (0 and 1), which an AUC compares; "
            f"got only {values.tolist()}."
        )
    n_samples = len(y_true)
    if y_score.ndim != 2 or y_score.shape[1] != n_samples:
        one = ": pass y_score[None] for one repeat" if y_score.shape == (n_samples,) else ""
        raise ValueError(
            f"PooledCVResult.y_score must have shape (n_repeats, n_samples) = (n_repeats, "
            f"{n_samples}), one row of out-of-fold probabilities per repeat; got shape "
            f"{y_score.shape}{one}."
        )
    if folds.shape != y_score.shape:
        raise ValueError(
            f"PooledCVResult.folds must have the shape of y_score, {y_score.shape}, the test fold "
            f"of each sample in each repeat; got shape {folds.shape}."
        )
    if not np.issubdtype(folds.dtype, np.integer) or (folds.size and folds.min() < 0):
        raise ValueError(
            "PooledCVResult.folds must hold the test fold numbers 0, 1, ... as ints; got "
            f"dtype {folds.dtype}, values {np.unique(folds).tolist()[:10]}."
        )
    for repeat, row in enumerate(folds):  # fold_auc scores folds 0 .. max: each one is needed
        numbers = np.unique(row)
        if not np.array_equal(numbers, np.arange(len(numbers))):
            raise ValueError(
                f"PooledCVResult.folds must number the test folds of each repeat 0, 1, ..., k-1 "
                f"without gaps; repeat {repeat} has {numbers.tolist()[:10]}. Renumber them, e.g. "
                "np.unique(folds[i], return_inverse=True)[1] for each repeat i."
            )
        if len(numbers) != len(np.unique(folds[0])):  # fold_auc is (n_repeats, n_splits)
            raise ValueError(
                f"PooledCVResult.folds must use the same number of test folds in every repeat "
                f"(fold_auc holds n_splits per repeat); repeat 0 has {len(np.unique(folds[0]))} "
                f"and repeat {repeat} has {len(numbers)}."
            )
        for fold in numbers:
            if len(np.unique(y_true[row == fold])) != 2:
                raise ValueError(
                    f"PooledCVResult: test fold {fold} of repeat {repeat} holds only "
                    f"{np.unique(y_true[row == fold]).tolist()} of y_true, and its AUC compares "
                    "both classes: every test fold needs both (a stratified split keeps them)."
                )
    bad = ~np.isfinite(y_score)
    if bad.any():
        repeat, sample = np.argwhere(bad)[0]
        raise ValueError(
            f"PooledCVResult.y_score holds {int(bad.sum())} values that are not finite (NaN or "
            f"infinite), e.g. sample {sample} of repeat {repeat}: expected the probabilities of "
            "the positive class."
        )
    return y_true, y_score, folds


def _check_fold_scores(score: NDArray[np.float64], repeat: int, fold: int) -> None:
    """Refuse a fold's probabilities that are not finite when its fit ends, naming it
    (the others were all fitted before the result refused them, naming none)."""
    bad = int(np.sum(~np.isfinite(score)))
    if bad:
        raise ValueError(
            f"the model of fold {fold} (repeat {repeat}) predicted {bad} probabilities that are "
            f"not finite (NaN or infinite) for its {len(score)} test samples: expected "
            "probabilities. Its fit may have diverged: check the estimator's training on that "
            "fold (e.g. a lower learning rate), or its predict_proba."
        )


def _fit_predict(
    estimator: Any,
    X: Any,
    y: NDArray[Any],
    train: NDArray[np.int64],
    test: NDArray[np.int64],
    pos_label: Any,
    one_thread: bool,
) -> NDArray[np.float64]:
    """Fit a clone on ``train`` and return its positive-class probabilities on ``test``."""
    # A task of a pool (n_jobs > 1): the task's share, restored as the estimators' own
    # tasks restore it (a thread's own reading while another task runs is the lowered count).
    # One thread per fold unless a torch_threads block chose a count (None: torch's own,
    # within the task's share), which the fit applies (it forced 1 under torch_threads(None)).
    one_thread = one_thread and not threads_chosen()
    with _task_share() if one_thread else contextlib.nullcontext():
        threads = torch.get_num_threads()
        if one_thread:
            torch.set_num_threads(1)  # n_jobs parallel fits share the cores
        try:
            model = clone(estimator).fit(_safe_indexing(X, train), y[train])
            probabilities = model.predict_proba(_safe_indexing(X, test))
        finally:
            if one_thread:
                torch.set_num_threads(threads)
    column = list(model.classes_).index(pos_label)
    return np.asarray(probabilities[:, column], dtype=np.float64)


def _check_one_output_per_sequence(estimator: Any) -> None:
    """Refuse an estimator (alone, a pipeline's last step, or wrapped by a search)
    that predicts at every step: the pooled scores are one probability per sequence."""
    final = estimator
    while hasattr(final, "steps") or hasattr(final, "estimator"):
        final = final.steps[-1][1] if hasattr(final, "steps") else final.estimator
    if getattr(getattr(final, "_output_steps", None), "every_step", False):
        raise TypeError(
            f"pooled_cross_validate scores one probability per sequence; "
            f"{type(final).__name__} predicts at every step. Use RNNClassifier for a "
            "label per sequence, or score per-step predictions with nll_per_step on "
            "each fold of sklearn.model_selection.cross_validate."
        )


def _binary_labels(y: Any, pos_label: Any) -> tuple[NDArray[np.int64], Any]:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1D, one label per sample; got shape {y.shape}.")
    missing = np.flatnonzero(pd.isna(y))
    if len(missing):
        raise ValueError(
            f"y has {len(missing)} missing label(s) (NaN or None), at positions "
            f"{missing[:5].tolist()}: every sequence needs its class to be scored. Drop those "
            "sequences, or label them, before cross-validating."
        )
    classes = np.unique(y)
    if len(classes) != 2:
        raise ValueError(
            f"pooled_cross_validate scores a binary classifier: y must hold exactly 2 "
            f"classes; got {len(classes)}: {classes.tolist()[:10]}."
        )
    if pos_label is None:
        pos_label = classes[1]
    elif pos_label not in classes:
        raise ValueError(
            f"pos_label={pos_label!r} is not a class of y ({classes.tolist()}); pass one of "
            "them, or None for the greater."
        )
    pos_label = classes[classes == pos_label][0]  # as y holds it: 1, not the 1.0 given
    pos_label = pos_label.item() if isinstance(pos_label, np.generic) else pos_label
    return (y == pos_label).astype(np.int64), pos_label


def _check_params(labels: NDArray[np.int64], n_splits: Any, n_repeats: Any, threshold: Any) -> None:
    for name, value, low in (("n_splits", n_splits, 2), ("n_repeats", n_repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
            raise ValueError(f"{name} must be an int >= {low}; got {value!r}.")
    smallest = int(np.bincount(labels).min())
    if smallest < n_splits:
        raise ValueError(
            f"the smaller class of y has {smallest} samples, fewer than n_splits={n_splits}: "
            "every stratified fold needs both classes to have an AUC. Lower n_splits to at "
            f"most {smallest}."
        )
    _check_threshold(threshold)


def _check_threshold(threshold: Any, name: str = "threshold") -> None:
    """Refuse a ``threshold`` that is not a probability, by ``name``."""
    if isinstance(threshold, bool) or not isinstance(threshold, Real) or not 0 <= threshold <= 1:
        raise ValueError(f"{name} must be a probability in [0, 1]; got {threshold!r}.")


def _check_n_jobs(n_jobs: Any, name: str = "n_jobs") -> None:
    """Refuse an ``n_jobs`` joblib gives no meaning (0) or does not take, by ``name``."""
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0
    ):
        raise ValueError(f"{name} must be None or a nonzero int (-1: all cores); got {n_jobs!r}.")


def _num_samples(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else len(X)


def _confusion(y_true: NDArray[np.int64], predicted: NDArray[np.bool_]) -> tuple[int, int, int, int]:
    """``TP, FP, TN, FN``."""
    positive = y_true == 1
    return (
        int((predicted & positive).sum()),
        int((predicted & ~positive).sum()),
        int((~predicted & ~positive).sum()),
        int((~predicted & positive).sum()),
    )


def _bootstrap_aucs(
    result: PooledCVResult, positives: NDArray[np.intp], negatives: NDArray[np.intp]
) -> NDArray[np.float64]:
    """Mean pooled AUC over the repeats on each bootstrap sample of patients.

    ``positives`` (B, P) and ``negatives`` (B, N) index the resampled positive and
    negative samples; the AUC is the Mann-Whitney statistic with average ranks for ties.
    """
    from scipy.stats import rankdata

    n_pos = positives.shape[1]
    n_neg = negatives.shape[1]
    total = np.zeros(positives.shape[0])
    for scores in result.y_score:  # (n_samples,) per repeat
        sample = np.concatenate([scores[positives], scores[negatives]], axis=1)  # (B, P + N)
        ranks = rankdata(sample, axis=1)
        total += (ranks[:, :n_pos].sum(axis=1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return total / result.n_repeats


def auc_intervals(
    results: Mapping[str, PooledCVResult],
    *,
    reference: str | None = None,
    n_bootstraps: int = 2000,
    confidence: float = 0.95,
    random_state: int | np.random.RandomState | None = 0,
) -> pd.DataFrame:
    """Bootstrap confidence intervals of pooled AUCs and of their paired differences.

    The samples (patients) are resampled with replacement, positives and negatives
    separately (a stratified bootstrap, so every resample has both classes), and every
    model's mean pooled AUC over its repeats is recomputed on the same resamples: the
    percentile interval of a model's AUC, and of its difference to ``reference``, come
    from those. The difference is *paired*: both models are scored on the same
    resampled patients, which cancels the patients' shared difficulty. An interval of
    the difference that contains 0 means the data cannot tell the two models apart.
    The out-of-fold probabilities are held fixed (the models are not refitted), so the
    intervals reflect which patients happened to be in the cohort, not the variation
    of training.

    Parameters
    ----------
    results : mapping of str to PooledCVResult
        Results of :func:`pooled_cross_validate` on the same samples (same ``y``).
    reference : str, optional
        The model the differences are taken against (``model - reference``); by
        default the one with the highest mean pooled AUC.
    n_bootstraps : int, default=2000
        Resamples.
    confidence : float, default=0.95
        Coverage of the percentile intervals.
    random_state : int, RandomState instance or None, default=0
        Seeds the resampling.

    Returns
    -------
    pandas.DataFrame
        Indexed by model: ``auc`` (mean pooled AUC), ``auc_low``, ``auc_high``,
        ``diff`` (``auc`` minus the reference's), ``diff_low``, ``diff_high``; the
        reference's own difference is 0 with no interval (NaN).

    Raises
    ------
    ValueError
        Results on different samples, an unknown reference, or bad settings.
    TypeError
        ``results`` not a mapping of names to :class:`PooledCVResult`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_rnn.clinical import auc_intervals, pooled_cross_validate
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 3))
    >>> y = (X[:, 0] + rng.normal(size=120) > 0).astype(int)
    >>> results = {
    ...     "all features": pooled_cross_validate(LogisticRegression(), X, y, random_state=0),
    ...     "feature 2 only": pooled_cross_validate(LogisticRegression(), X[:, 2:], y,
    ...                                             random_state=0),
    ... }
    >>> table = auc_intervals(results, reference="all features", n_bootstraps=500)
    >>> list(table.columns)
    ['auc', 'auc_low', 'auc_high', 'diff', 'diff_low', 'diff_high']
    >>> bool(table.loc["feature 2 only", "diff_high"] < 0)  # clearly worse
    True
    """
    if not isinstance(results, Mapping):
        raise TypeError(
            "results must be a mapping from model name to PooledCVResult, e.g. "
            f"{{'LR': result_lr, 'RNN': result_rnn}}; got {type(results).__name__}."
        )
    for name, result in results.items():
        if not isinstance(result, PooledCVResult):
            raise TypeError(
                f"results[{name!r}] is a {type(result).__name__}, not a PooledCVResult: pass "
                "what pooled_cross_validate returned for each model, by name."
            )
    if not results:
        raise ValueError("results is empty: pass at least one PooledCVResult by name.")
    if not (isinstance(n_bootstraps, Integral) and n_bootstraps >= 10):
        raise ValueError(f"n_bootstraps must be an integer >= 10; got {n_bootstraps!r}.")
    if not (isinstance(confidence, Real) and 0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}.")
    names = list(results)
    y_true = results[names[0]].y_true
    for name in names[1:]:
        if results[name].pos_label != results[names[0]].pos_label:
            raise ValueError(
                f"results {names[0]!r} and {name!r} score different positive classes "
                f"(pos_label={results[names[0]].pos_label!r} and {results[name].pos_label!r}): "
                "paired intervals need every model scored for the same class; cross-validate "
                "them with the same pos_label."
            )
        if not np.array_equal(results[name].y_true, y_true):
            raise ValueError(
                f"results {names[0]!r} and {name!r} were scored on different samples: paired "
                "intervals need every model cross-validated on the same X and y."
            )
    if reference is None:
        reference = max(names, key=lambda name: results[name].mean_pooled_auc)
    elif reference not in results:
        raise ValueError(f"reference {reference!r} is not one of the results {names}.")
    rng = check_random_state(random_state)
    positive = np.flatnonzero(y_true == 1)
    negative = np.flatnonzero(y_true == 0)
    draws_pos = positive[rng.randint(len(positive), size=(n_bootstraps, len(positive)))]
    draws_neg = negative[rng.randint(len(negative), size=(n_bootstraps, len(negative)))]
    boot = {name: _bootstrap_aucs(results[name], draws_pos, draws_neg) for name in names}
    tail = 100 * (1 - confidence) / 2
    rows = {}
    for name in names:
        auc = results[name].mean_pooled_auc
        low, high = np.percentile(boot[name], [tail, 100 - tail])
        diff = auc - results[reference].mean_pooled_auc
        if name == reference:
            diff_low = diff_high = np.nan
        else:
            diff_low, diff_high = np.percentile(boot[name] - boot[reference], [tail, 100 - tail])
        rows[name] = {"auc": auc, "auc_low": low, "auc_high": high, "diff": diff,
                      "diff_low": diff_low, "diff_high": diff_high}
    return pd.DataFrame.from_dict(rows, orient="index")
