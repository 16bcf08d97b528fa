"""Which feature, which visit: importances and attributions for sequence models.

scikit-learn's :func:`~sklearn.inspection.permutation_importance` shuffles the columns
of a table; sequences have no columns to shuffle. Here:

- :func:`sequence_permutation_importance` shuffles one feature *across sequences*:
  the sequences are aligned at their last step (where the estimators read out), and at
  every step back from the end the feature's observed values are permuted among the
  sequences that have that step (missing values keep their places). A time column is permuted through its gaps, so times keep
  increasing. The importance is the drop of the score.
- :func:`visit_importance` exchanges the k-th last visit between sequences, for
  k = 0, 1, ..., and measures the drop of the score: which visits, counted back from
  the prediction, the model relies on.
- :func:`integrated_gradients` attributes one prediction to each step and feature of
  its sequence (integrated gradients, Sundararajan et al. 2017, on the network's
  inputs), and :func:`plot_attributions` draws them as a steps x features map.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from sklearn.metrics import check_scoring
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted

from ._estimators import BaseRNN, frame_sequences
from ._inference import module_copy
from ._parallel import fitting_threads
from .sequences import check_sequences, input_layout, restore_layout
from .sequences._encoding import _resolve_time_feature
from .sequences._panel import check_targets_follow_instances, is_panel
from .sequences._validation import _column_cells, frames_like, numpy_readable, step_feature_names

__all__ = [
    "integrated_gradients",
    "plot_attributions",
    "sequence_permutation_importance",
    "visit_importance",
]


def _refitted(estimator: Any, purpose: str) -> Any:
    """A fitted search's (GridSearchCV, RNNGridSearchCV) refitted ``best_estimator_``;
    any other estimator as it is. A search fitted with ``refit=False`` holds no trained
    model: refused, saying what it was wanted for (``purpose``)."""
    # refit=False: a best_estimator_ left by an earlier refit=True fit is of another
    # search (scikit-learn keeps it, and guards the search's own predict).
    if hasattr(estimator, "cv_results_") and (
        not hasattr(estimator, "best_estimator_") or not getattr(estimator, "refit", True)
    ):
        raise TypeError(
            f"{type(estimator).__name__} was fitted with refit=False, so it holds no trained "
            f"model {purpose}; fit it with refit=True, or use an estimator fitted with the "
            "best parameters (search.best_params_)."
        )
    return getattr(estimator, "best_estimator_", estimator)


def _final_step(estimator: Any) -> tuple[Any, Any]:
    """The preprocessing of a pipeline (or None) and its final estimator; a fitted search
    (GridSearchCV, RNNGridSearchCV) stands for its refitted ``best_estimator_``, given
    alone or as a pipeline's last step."""
    estimator = _refitted(estimator, "to inspect")
    if hasattr(estimator, "steps"):
        preprocess = estimator[:-1] if len(estimator.steps) > 1 else None
        if preprocess is not None and all(
            hasattr(step, "fit_resample") or step is None or step == "passthrough" for _, step in preprocess.steps
        ):  # imbalanced-learn's samplers act at fit only: the identity at predict (no transform)
            preprocess = None
        model = _refitted(estimator[-1], "to inspect")
    else:
        preprocess, model = None, estimator
    if getattr(getattr(model, "_output_steps", None), "every_step", False):
        raise TypeError(
            f"the inspection functions read one output per sequence; {type(model).__name__} "
            "predicts at every step. Use them with RNNClassifier or RNNRegressor."
        )
    return preprocess, model


def _time_column(estimator: Any, n_features: int, names: Any) -> int | None:
    """The time column of ``X`` (``n_features`` per step, named ``names`` or None): the
    final estimator's ``time_feature``, an index or one of the names; for a meta-estimator
    (VotingClassifier, CalibratedClassifierCV, ...), that of the networks inside it, which
    must agree; for a pipeline whose last step reads none (the LogisticRegression after
    ``VisitFeatures(time_feature=0)``), that of its steps, which must agree too."""
    preprocess, model = _final_step(estimator)
    if not hasattr(model, "time_feature") and hasattr(model, "get_params"):
        within = model if preprocess is None else _refitted(estimator, "to inspect")
        return _nested_time_column(within, n_features, names)
    time_feature = getattr(model, "time_feature", None)
    fitted = getattr(getattr(model, "_encoder", None), "time_feature", None)
    if names is None and isinstance(time_feature, str) and fitted is not None:
        return int(fitted)  # a name fitted on frames, given arrays: the column fit found, as predict reads
    return _resolve_time_feature(time_feature, n_features, names)


def _nested_time_column(model: Any, n_features: int, names: Any) -> int | None:
    """The time column that the networks inside a meta-estimator, or the steps of a
    pipeline, read, from their nested parameters (``..._time_feature``); refused where
    they read different columns, or name it and ``X`` has no names."""
    found = {key: value for key, value in model.get_params(deep=True).items()
             if key.endswith("__time_feature") and value is not None}
    kind = type(model).__name__
    inside_a_step = hasattr(model, "steps") and all(key.count("__") == 1 for key in found)
    way_out = "" if inside_a_step else (
        ", or inspect one fitted network inside it, e.g. voting.estimators_[i] of a "
        "VotingClassifier or calibrated.calibrated_classifiers_[i].estimator of a "
        "CalibratedClassifierCV"
    )
    if names is None and any(isinstance(value, str) for value in found.values()):
        raise ValueError(
            f"the estimators inside {kind} name their time column ({found}), but X came "
            "without column names, so the column cannot be found to permute it through its "
            "gaps: pass X as DataFrames with that column, as they were fitted"
            f"{way_out}."
        )
    columns = {key: _resolve_time_feature(value, n_features, names) for key, value in found.items()}
    if len(set(columns.values())) > 1:
        raise ValueError(
            f"the estimators inside {kind} read different time columns ({found}): the "
            "importances permute the time column through its gaps, so that times keep "
            "increasing, and every other column as values, which needs one time column for "
            f"all of them. Give them the same time_feature{way_out}."
        )
    return next(iter(columns.values()), None)


def _aligned_positions(lengths: NDArray[np.intp]) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """For each step k back from the end: (sequences that have it, their row index)."""
    positions = []
    for back in range(int(lengths.max())):
        have = np.flatnonzero(lengths > back)
        positions.append((have, lengths[have] - 1 - back))
    return positions


def _permute_feature(
    sequences: list[NDArray[np.float64]],
    feature: int,
    is_time: bool,
    rng: np.random.RandomState,
) -> list[NDArray[np.float64]]:
    """A copy of ``sequences`` with ``feature`` permuted across sequences, step by step
    back from the end (a time column through its gaps)."""
    lengths = np.array([len(sequence) for sequence in sequences])
    out = [sequence.copy() for sequence in sequences]
    if is_time:
        gaps = [np.diff(sequence[:, feature], prepend=sequence[0, feature]) for sequence in sequences]
        shuffled = [gap.copy() for gap in gaps]
        for have, rows in _aligned_positions(lengths):
            inner = rows > 0  # a first step has no gap to exchange
            have, rows = have[inner], rows[inner]
            values = np.array([gaps[i][row] for i, row in zip(have, rows)])
            for i, row, value in zip(have, rows, rng.permutation(values)):
                shuffled[i][row] = value
        for i, sequence in enumerate(out):
            sequence[:, feature] = sequences[i][0, feature] + np.cumsum(shuffled[i])
        return out
    for have, rows in _aligned_positions(lengths):
        values = np.array([sequences[i][row, feature] for i, row in zip(have, rows)])
        # Missing values keep their places: a NaN moved into a last step whose other
        # features are missing would make it padding (a visit lost, or a sequence emptied).
        observed = ~np.isnan(values)
        for i, row, value in zip(have[observed], rows[observed], rng.permutation(values[observed])):
            out[i][row, feature] = value
    return out


def _scoring_setup(
    estimator: Any, X: Any, y: Any, scoring: Any, random_state: Any, **counts: int
) -> tuple[list[NDArray[np.float64]], Callable[[list[NDArray[np.float64]]], float], float,
           np.random.RandomState, int | None]:
    """What both importances start from: checked counts and data, the score of changed
    sequences, the unchanged score, the random generator and the time column.

    The changed sequences reach the estimator as ``X`` held them: as DataFrames with
    its column names where ``X`` named its features, so that a model fitted on named
    features checks them as in ``predict`` (and does not warn that they are missing)."""
    for name, value in counts.items():
        if not (isinstance(value, (int, np.integer)) and value >= 1):
            raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    check_is_fitted(_final_step(estimator)[1])
    sequences = check_sequences(X)
    names = step_feature_names(X)
    check_targets_follow_instances(X, y)  # as fit and score: a Series in another order
    y = np.asarray(y)
    if isinstance(scoring, (list, tuple, set, dict)):
        if len(scoring) == 1:
            only = next(iter(scoring.values() if isinstance(scoring, dict) else scoring))
            raise ValueError(
                f"scoring={scoring!r} is a collection; the importances are the change of one "
                f"score: pass the metric itself, scoring={only!r}."
            )
        raise ValueError(
            f"scoring={scoring!r} names several metrics; the importances are the change of "
            "one score. Pass one metric (a name or a callable), and call the function once "
            "per metric."
        )
    scorer = check_scoring(estimator, scoring=scoring)

    layout = input_layout(X)

    def score(changed: list[NDArray[np.float64]]) -> float:
        # In X's own form: a pipeline's first step may read it (a ColumnTransformer of a
        # sequence column, a reshape of a padded array), which a plain list failed.
        # Named steps as frames again, in X's container (a sequence column of frames, a
        # panel, which a pipeline's first step read and a plain list of frames failed).
        named = names is not None and not is_panel(X)
        given = restore_layout(frames_like(changed, X, names) if named else changed, layout, X)
        return float(scorer(estimator, given, y))

    time_column = _time_column(estimator, sequences[0].shape[1], names)
    return sequences, score, score(sequences), check_random_state(random_state), time_column


def sequence_permutation_importance(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    scoring: Any = None,
    n_repeats: int = 5,
    random_state: int | np.random.RandomState | None = None,
) -> Bunch:
    """Importance of each feature: the drop of the score when it is shuffled across sequences.

    Sequences are aligned at their last step; at every step back from the end, the
    feature's observed values are permuted among the sequences that have that step
    (missing values keep their places, so no step becomes all-missing padding), which
    keeps each step's distribution and breaks the link between the feature and the target.
    The time column (``time_feature`` of the estimator, of a pipeline's last step, of
    the networks inside a meta-estimator, or of the steps before a last step that reads
    none, such as ``VisitFeatures``) is permuted through its gaps, so times keep
    increasing within each sequence.

    Parameters
    ----------
    estimator : fitted estimator, Pipeline, search or meta-estimator
        An ``RNNClassifier`` or ``RNNRegressor``, a pipeline ending in one, a fitted
        search (its ``best_estimator_``), or a meta-estimator over such networks (a
        ``VotingClassifier``, a ``CalibratedClassifierCV``, ...; alone or as a pipeline's
        last step), whose networks must then read the same time column; or a baseline
        pipeline such as ``VisitFeatures(time_feature=0)`` and a ``LogisticRegression``.
    X : sequences in any accepted form
        Held-out sequences, ideally.
    y : array-like of shape (n_samples,)
        Their targets.
    scoring : str or callable, optional
        One scikit-learn scorer (several are refused: call once per metric); the
        estimator's ``score`` by default.
    n_repeats : int, default=5
        Permutations per feature.
    random_state : int, RandomState instance or None, default=None
        Seeds the permutations.

    Returns
    -------
    sklearn.utils.Bunch
        ``importances`` (n_features, n_repeats), ``importances_mean``,
        ``importances_std`` (n_features,): the score without permutation minus the
        score with it, and ``baseline_score``; ``feature_names``: the columns of the
        sequences where DataFrames hold them (None otherwise), in the rows' order.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNClassifier
    >>> from sklearn_rnn.inspection import sequence_permutation_importance
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(int(n), 2)) for n in rng.integers(3, 8, size=120)]
    >>> y = np.array([int(x[-1, 0] > 0) for x in X])  # only feature 0 matters
    >>> model = RNNClassifier(hidden_size=8, max_iter=40, random_state=0).fit(X, y)
    >>> result = sequence_permutation_importance(model, X, y, n_repeats=3, random_state=0)
    >>> int(np.argmax(result.importances_mean))
    0
    """
    sequences, score, baseline, rng, time_column = _scoring_setup(
        estimator, X, y, scoring, random_state, n_repeats=n_repeats
    )
    names = step_feature_names(X)
    n_features = sequences[0].shape[1]
    importances = np.empty((n_features, n_repeats))
    for feature in range(n_features):
        for repeat in range(n_repeats):
            permuted = _permute_feature(sequences, feature, feature == time_column, rng)
            importances[feature, repeat] = baseline - score(permuted)
    return Bunch(
        importances=importances,
        importances_mean=importances.mean(axis=1),
        importances_std=importances.std(axis=1),
        baseline_score=baseline,
        feature_names=names,
    )


def visit_importance(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    scoring: Any = None,
    max_visits: int = 10,
    n_repeats: int = 5,
    random_state: int | np.random.RandomState | None = None,
) -> Bunch:
    """Importance of each visit, counted back from the prediction, by exchanging it.

    The importance is the drop of the score when that visit is exchanged between
    sequences. For k = 0 (the last visit), 1 (the one before), ... up to ``max_visits - 1``, the
    measured values of the k-th last step are permuted, all together, among the
    sequences that have such a step; the time column stays in place. Exchanging a
    visit rather than deleting it keeps every sequence's length and times, which a
    model may read to locate its visits (deleting one shifts all the others).

    Parameters
    ----------
    estimator : fitted estimator, Pipeline, search or meta-estimator
        An ``RNNClassifier`` or ``RNNRegressor``, a pipeline ending in one, a fitted
        search (its ``best_estimator_``), or a meta-estimator over such networks (a
        ``VotingClassifier``, a ``CalibratedClassifierCV``, ...; alone or as a pipeline's
        last step), whose networks must then read the same time column; or a baseline
        pipeline such as ``VisitFeatures(time_feature=0)`` and a ``LogisticRegression``.
    X : sequences in any accepted form
        The visit histories to score (held-out data), as the estimator's ``predict``
        takes them, the time column included.
    y : array-like of shape (n_samples,)
        Their targets.
    scoring : str or callable, optional
        One scikit-learn scorer (several are refused: call once per metric); the
        estimator's ``score`` by default.
    max_visits : int, default=10
        Visits looked at, from the last.
    n_repeats : int, default=5
        Permutations per visit.
    random_state : int, RandomState instance or None, default=None
        Seeds the permutations.

    Returns
    -------
    sklearn.utils.Bunch
        ``importances`` (max_visits, n_repeats), ``importances_mean`` and
        ``importances_std`` (max_visits,): the score minus the score with the k-th last
        visit exchanged (NaN where fewer than two sequences have one);
        ``n_sequences`` (max_visits,): the sequences that have it; ``baseline_score``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNClassifier
    >>> from sklearn_rnn.inspection import visit_importance
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(int(n), 1)) for n in rng.integers(3, 8, size=120)]
    >>> y = np.array([int(x[-1, 0] > 0) for x in X])  # only the last visit matters
    >>> model = RNNClassifier(hidden_size=8, max_iter=40, random_state=0).fit(X, y)
    >>> result = visit_importance(model, X, y, max_visits=3, n_repeats=2, random_state=0)
    >>> int(np.argmax(result.importances_mean))  # the last visit
    0
    """
    sequences, score, baseline, rng, time_column = _scoring_setup(
        estimator, X, y, scoring, random_state, max_visits=max_visits, n_repeats=n_repeats
    )
    n_features = sequences[0].shape[1]
    values = [j for j in range(n_features) if j != time_column]
    lengths = np.array([len(sequence) for sequence in sequences])
    positions = _aligned_positions(lengths)
    importances = np.full((max_visits, n_repeats), np.nan)
    counts = np.zeros(max_visits, dtype=np.int64)
    for back, (have, rows) in enumerate(positions[:max_visits]):
        counts[back] = len(have)
        if len(have) < 2:
            continue
        visits = np.array([sequences[i][row, values] for i, row in zip(have, rows)])
        for repeat in range(n_repeats):
            exchanged = [sequence.copy() for sequence in sequences]
            for i, row, visit in zip(have, rows, visits[rng.permutation(len(have))]):
                exchanged[i][row, values] = visit
            importances[back, repeat] = baseline - score(exchanged)
    return Bunch(
        importances=importances,
        importances_mean=importances.mean(axis=1),
        importances_std=importances.std(axis=1),
        n_sequences=counts,
        baseline_score=baseline,
    )


def integrated_gradients(
    estimator: Any,
    sequence: Any,
    *,
    target: Any = None,
    n_steps: int = 64,
) -> Bunch:
    """Attribute one prediction to the steps and features of its sequence.

    Integrated gradients: the gradient of the model's output with respect to its
    inputs, averaged along the straight path from a *baseline* sequence to the actual
    one, times the difference between them. The attributions add up to the output at
    the sequence minus the output at the baseline (up to the integration error of
    ``n_steps`` midpoints). The baseline keeps the sequence's steps and times and
    puts every measured value at its training mean (after any preprocessing of a
    pipeline): an attribution says how much that value, at that step, moved the
    output away from what an average patient with the same visit times would get.
    Missing values are attributed through the value carried forward in their place;
    the time column gets no attribution (it is the baseline's too). A model that reads
    frames of several steps (``frame``) is attributed step by step all the same; one
    that reads a channel per sequence (``instance_norm``) keeps the sequence's level
    and scale in the baseline, so the attributions are those of the shape of its values.

    The output attributed is the log-odds of ``target`` (default: the positive class,
    ``classes_[1]``) for a binary classifier, the log-probability of ``target`` for more
    classes, and the prediction (column ``target``, default 0) for a regressor.

    Parameters
    ----------
    estimator : fitted estimator, Pipeline or search
        An ``RNNClassifier`` or ``RNNRegressor`` (or a fitted search: its
        ``best_estimator_``), or a pipeline whose last step is
        one and whose other steps transform each step's features one to one (such as
        :class:`~sklearn_rnn.SequenceStandardScaler`). A meta-estimator that combines
        networks (``VotingClassifier``, ``CalibratedClassifierCV``, ...) is refused:
        explain one fitted network inside it, e.g. ``voting.estimators_[i]`` or
        ``calibrated.calibrated_classifiers_[i].estimator``.
    sequence : array-like of shape (T, n_features)
        One sequence, as given to ``predict``: an array, a DataFrame, one instance of a
        panel (``X.loc[[instance]]``, read in the order of its time level, as
        ``predict`` reads it; the rows of ``attributions`` follow that order), or one
        row of a table for a model fitted on a table (``X.iloc[[0]]``).
    target : class label or int, optional
        For a classifier, the class (default: the positive class of two, the one
        predicted of more); for a multi-output regressor, the output column.
    n_steps : int, default=64
        Points on the path.

    Returns
    -------
    sklearn.utils.Bunch
        ``attributions`` (T, n_features): the contribution of each step and feature
        (0 in the time column); ``output``, ``baseline_output``: the attributed
        quantity at the sequence and at the baseline; ``target``;
        ``feature_names``: the sequence's column names where it is a DataFrame
        (None otherwise); ``time_feature``, ``times``: the time column's index and
        its values as given (None without ``time_feature``).
        :func:`plot_attributions` draws the whole result.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNRegressor
    >>> from sklearn_rnn.inspection import integrated_gradients
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(5, 2)) for _ in range(100)]
    >>> y = np.array([x[2, 1] for x in X])  # feature 1 at step 2
    >>> model = RNNRegressor(hidden_size=8, max_iter=60, random_state=0).fit(X, y)
    >>> result = integrated_gradients(model, X[0])
    >>> result.attributions.shape
    (5, 2)
    >>> total = result.attributions.sum()
    >>> bool(abs(total - (result.output - result.baseline_output)) < 1e-2)
    True
    """
    if not (isinstance(n_steps, (int, np.integer)) and n_steps >= 1):
        raise ValueError(f"n_steps must be a positive integer; got {n_steps!r}.")
    preprocess, model = _final_step(estimator)
    # A pipeline whose first step reads a sequence column (a ColumnTransformer) takes the
    # one-row column itself: its sequence alone failed there.
    _check_one_sequence(sequence, column_ok=preprocess is not None)
    inner = getattr(model, "regressor_", None)
    if not isinstance(model, BaseRNN) and isinstance(inner, BaseRNN):
        raise TypeError(
            f"integrated_gradients attributes the output of one network; got "
            f"{type(model).__name__}, which transforms that network's targets. Explain the "
            "network it holds, e.g. integrated_gradients(ttr.regressor_, sequence): the "
            "attributions are then in the transformed target's units (log y for func=np.log)."
        )
    if not isinstance(model, BaseRNN):
        raise TypeError(
            "integrated_gradients attributes the output of one RNNClassifier or RNNRegressor "
            f"(alone, as a pipeline's last step or as a search's best_estimator_); got "
            f"{type(model).__name__}, whose output is no one network's (a meta-estimator "
            "such as VotingClassifier or CalibratedClassifierCV combines several). Explain a "
            "fitted network inside it, e.g. voting.estimators_[i] or "
            "calibrated.calibrated_classifiers_[i].estimator (after a pipeline's other "
            "steps: make_pipeline(pipeline[:-1], network))."
        )
    check_is_fitted(model)
    given: Any = _as_given(model, sequence)  # a frame's names are checked as in predict
    original = check_sequences(given)[0]
    names = step_feature_names(given)
    if preprocess is not None:
        shape = original.shape
        given = preprocess.transform(given)
        transformed = check_sequences(given)[0].shape
        if transformed != shape:
            raise ValueError(
                f"the pipeline's steps before {type(model).__name__} change the sequence's "
                f"shape from {shape} to {transformed}: attributions need steps "
                "that transform each feature one to one, such as SequenceStandardScaler."
            )
    raw = model._validate_sequences(given, reset=False)[0]
    encoder = model._encoder
    frame = int(model._frame)
    encoded = encoder.encode_arrays(frame_sequences([raw], frame))[0]  # (ceil(T / frame), n_inputs)
    baseline = encoded.copy()
    baseline[:, : encoder.n_values] = encoder.fill_values  # measured values at their mean
    filled = len(raw) % frame
    if filled:  # the last frame's copies of the last step repeat the baseline's last step
        last = baseline[-1, : encoder.n_values].reshape(frame, -1)
        last[filled:] = last[filled - 1]
        baseline[-1, : encoder.n_values] = last.ravel()
    # The path is differentiated also where the caller turned gradients off, as predict
    # runs there (the network copy too: made in inference mode, it could not be).
    # The fits' thread rule (one thread for a small network, a torch_threads choice, a
    # pool task's share): the attribution ran on every core whatever the rule.
    points = max(1, PATH_CHUNK_STEPS // len(encoded))  # sequences per pass
    with torch.inference_mode(False), torch.enable_grad(), fitting_threads(model.hidden_size, points):
        network = module_copy(model.module_).double().train(False).cpu()  # its hooks run, as in predict
        output_of, target = _attributed_output(model, target, network, encoded)
        alphas = (np.arange(n_steps) + 0.5) / n_steps
        # The path's points in chunks of about PATH_CHUNK_STEPS steps in all: the backward
        # pass keeps every point's states, so memory stays bounded on long sequences.
        per_chunk = points
        total = np.zeros_like(encoded)
        for start in range(0, n_steps, per_chunk):
            chunk = alphas[start : start + per_chunk]
            path = torch.as_tensor(
                baseline[None] + chunk[:, None, None] * (encoded - baseline)[None], dtype=torch.float64
            ).requires_grad_(True)  # (points, T, n_inputs)
            lengths = torch.full((len(chunk),), len(encoded), dtype=torch.int64)
            outputs = output_of(network(path, lengths))  # (points,)
            (gradients,) = torch.autograd.grad(outputs.sum(), path)
            total += gradients.sum(dim=0).numpy()
    channels = total / n_steps * (encoded - baseline)  # (T, n_inputs)
    attributions = np.zeros_like(raw)
    value_features = [j for j in range(raw.shape[1]) if j != encoder.time_feature]
    # A frame's value channels are its raw steps side by side (no time column with
    # frames); the copies of the last step that fill the last frame add to that step.
    values = channels[:, : encoder.n_values].reshape(-1, len(value_features))  # (frames * frame, d)
    values[len(raw) - 1] += values[len(raw):].sum(axis=0)
    attributions[:, value_features] = values[: len(raw)]
    with torch.no_grad():
        ends = torch.as_tensor(np.stack([baseline, encoded]), dtype=torch.float64)
        baseline_output, output = output_of(network(ends, torch.full((2,), len(encoded))))
    time_feature = encoder.time_feature
    return Bunch(
        attributions=attributions,
        output=float(output),
        baseline_output=float(baseline_output),
        target=target,
        feature_names=names,
        time_feature=time_feature,
        times=None if time_feature is None else original[:, time_feature].copy(),
    )


#: Path points times steps that :func:`integrated_gradients` differentiates at once.
PATH_CHUNK_STEPS = 2**16


def _label(value: Any) -> str:
    """A step's column label: a number written short (``g``), anything else as text."""
    if isinstance(value, (Real, np.number)) and not isinstance(value, (bool, np.bool_)):
        return f"{float(value):g}"
    return str(value)


def _check_one_sequence(sequence: Any, *, column_ok: bool = False) -> None:
    """Refuse several sequences where one is explained (``column_ok``: a one-row column
    of sequences is taken as it is, for a pipeline whose first step reads the column)."""
    sequence = numpy_readable(sequence)  # a torch nested tensor: the list of sequences it holds
    first = "[0]"  # how the first sequence is read from what was given
    if isinstance(sequence, (list, tuple)) and sequence and all(np.ndim(item) >= 2 for item in sequence):
        count = len(sequence)
    elif is_panel(sequence):  # an (instance, time) frame: one sequence per instance
        count = len(sequence.index.unique(level=0))
        if count == 1:
            return
    elif _column_cells(sequence) is not None:  # a column of sequences
        count = len(sequence)
        if count == 1 and column_ok:
            return
        kind = type(sequence).__name__
        first = {"Series": ".iloc[0]", "DataFrame": ".iloc[0, 0]"}.get(kind, "[0, 0]")  # (n, 1) array
    elif type(sequence).__name__ != "DataFrame" and np.ndim(sequence) >= 3:
        count = np.shape(sequence)[0]
    else:
        return
    if count == 1:
        raise ValueError(
            "integrated_gradients explains one sequence, a (T, n_features) array or frame; "
            f"got a collection holding one sequence. Pass the sequence itself: sequence{first}."
        )
    raise ValueError(
        f"integrated_gradients explains one sequence, a (T, n_features) array or frame; got "
        f"{count} sequences. Pass one of them, e.g. X{first} (of a panel, one instance's rows: "
        "X.loc[[instance]]), once for each sequence to explain."
    )


def _as_given(model: Any, sequence: Any) -> Any:
    """``sequence`` as ``predict`` would be given it: a list of it; or, for a model fitted
    on a 2D table (one univariate sequence a row), a one-row table, which a table's row
    (``X.iloc[0]``, a Series, or ``X.iloc[[0]]``) becomes, so that its column names are
    checked as in ``predict`` (a row was read as a sequence of one step a column, or
    warned of missing feature names)."""
    if getattr(model, "_fitted_layout", None) == "table":
        if type(sequence).__name__ == "Series":
            return sequence.to_frame().T
        if np.ndim(sequence) == 2 and np.shape(sequence)[0] == 1:
            return sequence
        if np.ndim(sequence) == 2 and np.shape(sequence)[1] != 1:  # rows of the table: one sequence each
            raise ValueError(
                f"integrated_gradients explains one sequence; got {np.shape(sequence)[0]} rows "
                f"of a table, one sequence each, for a {type(model).__name__} fitted on a "
                "table. Pass one row, e.g. X.iloc[[0]] (or X[[0]] of an array), once for "
                "each sequence to explain."
            )
    if is_panel(sequence) or _column_cells(sequence) is not None:
        return sequence  # one instance's rows, or a one-row column: as predict reads them
    _check_not_flat(model, sequence)
    return [sequence]


def _check_not_flat(model: Any, sequence: Any) -> None:
    """Refuse a 1D array for a model of several features per step, fitted on sequences:
    wrapped as ``[sequence]`` it would be a one-row table, refused in a table's terms.
    (For one feature per step it is the sequence's one column, read as such.)"""
    features = getattr(model, "_n_step_features", None) or model.n_features_in_
    ndim = getattr(sequence, "ndim", None)
    if ndim is None:
        try:
            ndim = np.ndim(sequence)
        except ValueError:  # ragged rows: refused as a sequence would be
            return
    if ndim != 1 or features == 1:
        return
    count = len(sequence)
    step = (f"; if they are one step's features, np.reshape(x, (1, -1))"
            if count == features else "")
    raise ValueError(
        f"integrated_gradients explains one sequence, a (T, {features}) array or frame for "
        f"this {type(model).__name__}; got a one-dimensional {type(sequence).__name__} of "
        f"{count} values. Pass the sequence with its {features} features at each step{step}."
    )


def _attributed_output(
    model: Any, target: Any, network: torch.nn.Module, encoded: NDArray[np.float64]
) -> tuple[Any, Any]:
    """The function of the network's outputs that is attributed, and the target."""
    classes = getattr(model, "classes_", None)
    if classes is None:  # a regressor: outputs in the units of y
        outputs = np.ravel(model._y_scale).size
        column = 0 if target is None else target
        if not (isinstance(column, Integral) and 0 <= column < outputs):
            raise ValueError(
                f"target={target!r}: this regressor predicts {outputs} output(s); expected "
                f"an output column in [0, {outputs - 1}], or None for column 0."
            )
        scale = float(np.ravel(model._y_scale)[column])
        mean = float(np.ravel(model._y_mean)[column])
        return (lambda out: out[:, column] * scale + mean), int(column)
    if target is None and len(classes) == 2:
        target_index = 1
    elif target is None:
        with torch.no_grad():
            x = torch.as_tensor(encoded[None], dtype=torch.float64)
            target_index = int(network(x, torch.tensor([len(encoded)])).argmax(dim=1)[0])
    else:
        matches = np.flatnonzero(np.asarray(classes) == target)
        if not len(matches):
            raise ValueError(
                f"target {target!r} is not a class of the model: expected one of "
                f"{np.asarray(classes).tolist()}, or None for the predicted class."
            )
        target_index = int(matches[0])
    if len(classes) == 2:  # the log-odds in favour of the target class
        other = 1 - target_index
        return (lambda out: out[:, target_index] - out[:, other]), classes[target_index]
    return (lambda out: torch.log_softmax(out, dim=1)[:, target_index]), classes[target_index]


def plot_attributions(
    attributions: Any,
    *,
    feature_names: Any = None,
    times: Any = None,
    ax: Any = None,
) -> Any:
    """Draw per-step attributions as a steps x features map (red raises, blue lowers).

    Parameters
    ----------
    attributions : array-like of shape (T, n_features), or the result of integrated_gradients
        The attributions, e.g. ``integrated_gradients(model, x).attributions``, or the
        whole result of :func:`integrated_gradients`: then the time column, which gets
        no attribution, is left out, the rows are named by the sequence's columns and
        the columns labelled by its times, unless ``feature_names`` or ``times`` say
        otherwise.
    feature_names : list of str, optional
        Row labels.
    times : array-like of shape (T,), optional
        Column labels (e.g. the visit days, or dates as text): numbers are written
        short, anything else as text; the step numbers by default.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when None.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.inspection import plot_attributions
    >>> ax = plot_attributions(np.array([[0.1, -0.2], [0.5, 0.0]]), feature_names=["a", "b"])
    >>> ax.get_xlabel()
    'step'
    """
    import matplotlib.pyplot as plt

    if isinstance(attributions, Bunch):  # integrated_gradients' result
        result = attributions
        attributions = result.attributions
        kept = [j for j in range(attributions.shape[1]) if j != result.get("time_feature")]
        attributions = attributions[:, kept]
        if feature_names is None:
            names = result.get("feature_names")
            feature_names = kept if names is None else [names[j] for j in kept]
        if times is None:
            times = result.get("times")
    values = np.asarray(attributions, dtype=np.float64)
    if values.ndim != 2 or 0 in values.shape:
        raise ValueError(
            f"attributions must be 2D (steps, features) with at least one of each; got shape "
            f"{values.shape}. Pass integrated_gradients(...).attributions, or the whole result."
        )
    n_steps, n_features = values.shape
    if feature_names is not None and len(feature_names) != n_features:
        raise ValueError(
            f"feature_names needs {n_features} names, one per column of the attributions; got "
            f"{len(feature_names)}. (The time column gets no attribution: leave its name out, "
            "or pass the whole result of integrated_gradients, which does.)"
        )
    if times is not None and len(times) != n_steps:
        raise ValueError(f"times needs {n_steps} values, one per step of the attributions; got {len(times)}.")
    if ax is None:
        # Wide enough for a label per step up to 30 steps; longer sequences keep 12 inches.
        width = min(12.0, max(4.0, 0.5 * n_steps + 2))
        _, ax = plt.subplots(figsize=(width, 0.35 * n_features + 1.5), layout="constrained")
    finite = np.abs(values[np.isfinite(values)])
    limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0  # NaN cells left blank
    image = ax.imshow(values.T, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.figure.colorbar(image, ax=ax, label="attribution")
    ax.set_yticks(range(n_features))
    ax.set_yticklabels(feature_names if feature_names is not None else range(n_features))
    labels = [_label(t) for t in times] if times is not None else list(range(n_steps))
    shown = range(0, n_steps, max(1, int(np.ceil(n_steps / 30))))  # at most 30 labels
    ax.set_xticks(list(shown))
    ax.set_xticklabels([labels[k] for k in shown])
    ax.set_xlabel("step" if times is None else "time")
    return ax
