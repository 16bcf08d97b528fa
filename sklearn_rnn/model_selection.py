"""Model selection that trains every network of a grid search together."""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from joblib import effective_n_jobs
from scipy.stats import rankdata
from sklearn.base import _fit_context, clone, is_classifier
from sklearn.exceptions import FitFailedWarning
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.model_selection._search import BaseSearchCV, _yield_masked_array_for_each_param
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing, indexable
from sklearn.utils.metadata_routing import _routing_enabled
from sklearn.utils.validation import _num_samples
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from ._estimators import BaseRNN
from .sequences._panel import by_instance, check_targets_follow_instances, is_panel
from .sequences._validation import check_container, numpy_readable
from ._stacked import MAX_STACKED, StackedMember, _ChunkTrainer, check_stackable

__all__ = ["RNNGridSearchCV"]

logger = logging.getLogger(__name__)


class RNNGridSearchCV(BaseSearchCV):
    """Grid search over an RNN estimator whose networks are all trained at once.

    The same search as :class:`~sklearn.model_selection.GridSearchCV`: every setting
    of ``param_grid`` is fitted on every training split of ``cv`` and scored on the
    held-out split, the setting with the best mean score is refitted on all the data,
    and ``cv_results_``, ``best_params_``, ``best_score_`` and ``best_estimator_`` have
    GridSearchCV's shape. What differs is how the networks are trained: instead of
    one ``fit`` after another, the (setting, split) networks are stacked along a model
    dimension and trained together, every update of every network in one vectorized
    pass (see :ref:`stacked_search`). Each network is the one its own ``fit`` would
    train: the same initialization (its ``spectral_radius`` and ``random_state``), the
    same batches in the same order, the same update (eq. 3.6 with its own
    ``clip_threshold``, clipped Adam, or the simplex direction with its own random
    stream), the same stopping rule and restore of the best epoch, and networks that
    stop leave the stack. On a CPU, where a small
    network's update costs per-operation overhead rather than arithmetic, that is
    several times faster than fitting them one by one.

    Parameters
    ----------
    estimator : RNNClassifier, RNNRegressor or Pipeline
        The estimator to tune, or a pipeline whose last step is one (its other steps,
        e.g. a :class:`~sklearn_rnn.SequenceStandardScaler`, are fitted on each
        training split as GridSearchCV fits them). Its networks must be stackable:
        any of the package's cells ('tanh', 'relu', 'gru', 'lstm', 'decay'; the
        first four run as a loop over steps in plain tensor operations instead of
        their fused kernel), any number of layers, no dropout, float32, and any
        ``optimizer`` ('simplex' with the cells that have temporal gradients, all but
        'decay'). Anything else is refused with the reason; search it with
        GridSearchCV instead.
    param_grid : dict or list of dict
        Parameter names (with the pipeline's ``step__`` prefix where there is one) to
        lists of values, as for GridSearchCV. Typically ``spectral_radius``,
        ``clip_threshold`` and ``random_state`` (seeds of an ensemble), but any
        parameter works: settings that change the architecture or the optimizer are
        trained in separate stacks.
    scoring : str, callable or None, default=None
        A scikit-learn scorer (e.g. ``'roc_auc'``, ``'neg_log_loss'``); None uses the
        estimator's ``score`` method. One metric only.
    cv : int, cross-validation generator or iterable, default=None
        Splitting strategy, as for GridSearchCV (None: 5-fold, stratified for a
        classifier).
    refit : bool, default=True
        Refit the best setting on all the data with the estimator's ordinary ``fit``;
        needed for :meth:`predict` and :meth:`predict_proba`.
    error_score : 'raise' or float, default=np.nan
        The score of a (setting, split) whose preparation or scoring fails, as for
        GridSearchCV: the failures are summed up in a ``FitFailedWarning`` (each
        naming its setting and split); 'raise' raises the first, with them named.
    return_train_score : bool, default=False
        Also score every network on its training split.
    max_stacked : int, default=64
        Networks trained together at most; larger grids are trained in chunks of this
        many. The networks are prepared one by one (each with its own encoded copy of
        its training split), a chunk is trained as soon as it is complete, and its
        networks are let go once scored, which bounds memory: at most this many
        networks of each architecture of the grid are held at once (``n_jobs`` times
        as many with several jobs).
    n_jobs : int or None, default=None
        Stacks trained at the same time, in joblib worker processes: the networks are
        cut into at least ``n_jobs`` stacks. With 2 on a 2-core machine, two stacks of
        half the networks each use both cores. None means 1 (one stack, this
        process), unless in a :func:`joblib.parallel_backend` context. Stacks of
        other sizes round differently, so scores may differ with ``n_jobs`` (and
        ``max_stacked``) in their last digits (1e-9 seen), enough to swap near-tied
        candidates' ranks.
    verbose : int, default=0
        Log (``logging``, level INFO) how many networks are trained in how many jobs.

    Attributes
    ----------
    cv_results_ : dict of ndarray
        GridSearchCV's table: ``params``, ``param_<name>``,
        ``split<k>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``,
        ``std_score_time`` (and the train scores with ``return_train_score``). A
        network's fit time is its share of its stack's training time plus its own
        preparation; its score time, that of its test scoring, as in GridSearchCV.
    best_estimator_ : estimator
        The best setting refitted on all the data (with ``refit``).
    best_score_ : float
        Mean cross-validated score of the best setting.
    best_params_ : dict
        The best setting.
    best_index_ : int
        Index of the best setting in ``cv_results_``.
    scorer_ : callable
        The scorer used.
    n_splits_ : int
        Cross-validation splits.
    refit_time_ : float
        Seconds of the refit.
    multimetric_ : bool
        False: one metric.
    classes_ : ndarray of shape (n_classes,)
        The refitted classifier's classes.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : The same search, one fit at a time, for
        any estimator.

    Notes
    -----
    The stacked networks train in float32 with batched matrix products, which round
    differently from a single network's kernels: each network matches its own
    ``fit`` to float32 rounding after the same updates, and a score compared with
    GridSearchCV's agrees to the extent that rounding differences do not change
    training (they can grow over hundreds of epochs, as between two machines).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNClassifier, RNNGridSearchCV
    >>> rng = np.random.default_rng(0)
    >>> X = [np.c_[np.cumsum(rng.uniform(1, 3, n)), rng.normal(size=n)]
    ...      for n in rng.integers(2, 8, 60)]          # column 0: visit times
    >>> y = np.array([int(x[-1, 1] > 0) for x in X])
    >>> search = RNNGridSearchCV(
    ...     RNNClassifier(cell="decay", time_feature=0, hidden_size=8, optimizer="adam",
    ...                   max_iter=20, random_state=0, device="cpu"),
    ...     {"spectral_radius": [0.9, 1.2], "clip_threshold": [1.0, 5.0]},
    ...     scoring="roc_auc", cv=3,
    ... ).fit(X, y)
    >>> sorted(search.best_params_)
    ['clip_threshold', 'spectral_radius']
    >>> search.cv_results_["split2_test_score"].shape
    (4,)
    >>> search.predict_proba(X[:2]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"])],
        "param_grid": [dict, list],
        # Several metrics and a refit by name or callable are refused in fit, by name.
        "scoring": [StrOptions(set(get_scorer_names())), callable, None, list, tuple, set, dict],
        "cv": ["cv_object"],
        "refit": ["boolean", str, callable],
        "error_score": [StrOptions({"raise"}), Real],
        "return_train_score": ["boolean"],
        "max_stacked": [Interval(Integral, 1, None, closed="left")],
        # joblib's -1 (every core), -2 ..., or a count; 0 has no meaning.
        "n_jobs": [Interval(Integral, None, -1, closed="right"), Interval(Integral, 1, None, closed="left"),
                   None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator: Any,
        param_grid: dict | list,
        *,
        scoring: Any = None,
        cv: Any = None,
        refit: bool = True,
        error_score: str | float = np.nan,
        return_train_score: bool = False,
        max_stacked: int = MAX_STACKED,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.cv = cv
        self.refit = refit
        self.error_score = error_score
        self.return_train_score = return_train_score
        self.max_stacked = max_stacked
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any, groups: Any = None, **params: Any) -> RNNGridSearchCV:
        """Train every (setting, split) network together, score them, refit the best.

        Parameters
        ----------
        X : sequences in any form accepted by the estimator
            A panel (an (instance, time) MultiIndex frame) is split by instance.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        groups : array-like of shape (n_samples,), optional
            Group labels for a group splitter, one per sequence (a panel's in the order
            of its instances, as y).
        **params
            ``sample_weight`` (``<step>__sample_weight`` for a pipeline's estimator):
            each network trains on its split's weights, and the refit on all of them,
            as GridSearchCV passes fit parameters. The scores weigh the test sequences
            as this scikit-learn's GridSearchCV does: by ``sample_weight=`` of a bare
            estimator where the scorer takes weights (scikit-learn 1.7 and later);
            unweighted otherwise, and always for a pipeline's step.

        Returns
        -------
        self : object
        """
        _final_rnn(self.estimator)  # the type errors before any work
        _check_steps(self.estimator)  # a pipeline its own fit refuses, whatever the grid sets
        # A torch nested tensor as the list of its tensors, as the estimators read it
        # (len() of one is PyTorch's "Internal error: NestedTensorImpl doesn't support sizes").
        X = numpy_readable(X)
        if isinstance(self.scoring, (list, tuple, set, dict)) or not isinstance(self.refit, (bool, np.bool_)):
            raise ValueError(
                f"RNNGridSearchCV scores one metric and refits the best by it (scoring="
                f"{self.scoring!r}, refit={self.refit!r}): give scoring one scorer and refit "
                "True or False, or search several metrics with "
                "sklearn.model_selection.GridSearchCV."
            )
        if y is None:  # as the estimator's own fit refuses it, before any split
            raise ValueError(
                f"{type(_final_rnn(self.estimator)).__name__} requires y to be passed, but the "
                "target y is None: pass one target per sequence to RNNGridSearchCV.fit."
            )
        given_params = sorted(key for key, value in params.items() if value is not None)  # None: not given
        if given_params and _routing_enabled():
            raise ValueError(
                "RNNGridSearchCV does not route metadata, and scikit-learn's metadata routing "
                f"is on (sklearn.set_config(enable_metadata_routing=True)); got {given_params}. "
                "Pass sample_weight with routing off (the sample_weight of a bare estimator, "
                "<step>__sample_weight of a pipeline's), or search with "
                "sklearn.model_selection.GridSearchCV, which routes it."
            )
        weight = self._sample_weight(params)
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid holds no setting: give at least one value per parameter.")
        invalid: dict[int, Exception] = {}  # setting -> why its values are refused
        for i, params_ in enumerate(candidates):  # every setting checked, as its fit would, before any work
            candidate = self._candidate(params_)
            rnn = _final_rnn(candidate)  # an unknown name raises, as in GridSearchCV
            try:
                _check_steps(candidate)  # a sampler put in a scikit-learn Pipeline by the grid
                rnn._validate_params()
                rnn._check_optimizer_cell()  # a combination its fit refuses
            except (ValueError, TypeError) as error:  # InvalidParameterError: an invalid value
                if self.error_score == "raise":
                    raise
                invalid[i] = error  # its networks fail in _prepare and score error_score, as GridSearchCV's
                continue
            check_stackable(rnn)
        check_container(X)  # None, a generator, a scalar: named, before len(X)
        # y too, for every form of X (by_instance checks a panel's): before any network trains.
        check_targets_follow_instances(X, y)
        check_targets_follow_instances(X, groups, name="groups")  # as y and the weights
        given, X = X, by_instance(X, y)  # a panel's rows are steps, which splitters would count
        if not _num_samples(X):
            raise ValueError("X is empty: expected at least one sequence to split and fit.")
        for name, values in (("y", y), ("groups", groups), ("sample_weight", weight)):
            _check_per_sample(given, _num_samples(X), values, name)  # before indexable's bare message
        X, y, groups = indexable(X, y, groups)
        if weight is not None:  # checked once, a scalar spread over the samples, as fit does
            weight = _final_rnn(self.estimator)._check_sample_weight(weight, _num_samples(X), given)
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = list(cv.split(X, y, groups))
        _check_split_indices(splits, _num_samples(X), is_panel(given))
        if not splits:  # as GridSearchCV: no fit was performed, and none failed
            raise ValueError(
                f"cv={self.cv!r} gave no (train, test) split, so there is nothing to fit or "
                "score: expected at least one. Give a splitter or an iterable that yields "
                "(train, test) index pairs (a PredefinedSplit needs a test fold other than -1)."
            )
        scorer = check_scoring(self.estimator, self.scoring)
        failures: dict[tuple[int, int], str] = {}
        n_splits = len(splits)
        test = np.full((len(candidates), n_splits), np.nan)
        train = np.full_like(test, np.nan)
        fit_time, score_time = np.zeros_like(test), np.zeros_like(test)
        scored = np.zeros(test.shape, dtype=bool)
        weighted_scores = self._scores_weighted(params)
        if self.verbose:
            logger.info(
                "RNNGridSearchCV: %d valid settings x %d splits = %d networks, stacks of at most %d, "
                "%s job(s)",
                len(candidates) - len(invalid), n_splits, (len(candidates) - len(invalid)) * n_splits,
                self.max_stacked,
                effective_n_jobs(self.n_jobs),  # as train_stacked counts them: -1, a backend's
            )
        # Each network is prepared, trained in its chunk and scored, then let go with its
        # data: at most a chunk's networks (n_jobs chunks' with more jobs) are held at once
        # per architecture, and the chunks are those train_stacked cuts from all of them.
        prepared: dict[StackedMember, tuple[int, int, Any, float]] = {}

        def score(chunk: list[StackedMember]) -> None:
            for member in chunk:
                i, k, model, prepare_seconds = prepared.pop(member)
                trained = member.estimator  # worker processes send back copies
                if isinstance(model, Pipeline):
                    model.steps[-1] = (model.steps[-1][0], trained)
                else:
                    model = trained
                fit_time[i, k] = member.seconds + prepare_seconds
                train_index, test_index = splits[k]
                kinds = [("test", test, test_index)]
                if self.return_train_score:
                    kinds.append(("train", train, train_index))
                for kind, scores, index in kinds:
                    began = time.perf_counter()
                    try:
                        score_weight = {} if not weighted_scores else {"sample_weight": _safe_indexing(weight, index)}
                        value = scorer(model, _safe_indexing(X, index), _safe_indexing(y, index), **score_weight)
                    except Exception as error:
                        value = self._failed(failures, candidates, i, k, f"{kind} scoring", error)
                    scores[i, k] = _one_number(value, self.scoring)
                    if kind == "test":  # as GridSearchCV times it: the test scoring alone
                        score_time[i, k] = time.perf_counter() - began
                scored[i, k] = True
                member.train = member.valid = None

        trainer = _ChunkTrainer(self.max_stacked, self.n_jobs, trained=score)
        for i, k, model, member, prepare_seconds in self._prepare(X, y, weight, candidates, splits, failures, invalid):
            prepared[member] = (i, k, model, prepare_seconds)
            trainer.add(member)
        if not trainer.outcomes:  # as GridSearchCV: a search with nothing trained is an error
            raise ValueError(
                f"All the {len(failures)} networks failed, so the search has nothing to "
                "score; the model is likely misconfigured (error_score='raise' raises the "
                "first). The failures:\n" + "\n".join(failures.values())
            )
        trainer.finish(stacklevel=3)  # the caller of fit, past scikit-learn's _fit_context
        test[~scored] = train[~scored] = self.error_score  # its fit failed: no score of either kind
        self._warn_of_failures(failures, len(candidates) * n_splits)
        self.cv_results_ = _results(candidates, test, train if self.return_train_score else None,
                                    fit_time, score_time)
        for kind in ("test", "train") if self.return_train_score else ("test",):
            means = self.cv_results_[f"mean_{kind}_score"]
            if not np.isfinite(means).all():  # as GridSearchCV warns, of either kind
                warnings.warn(
                    f"One or more of the mean {kind} scores are non-finite: {means.tolist()}",
                    UserWarning,
                    stacklevel=3,  # the caller of fit, past scikit-learn's _fit_context
                )
        self.best_index_ = int(self.cv_results_["rank_test_score"].argmin())
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.best_params_ = candidates[self.best_index_]
        self.scorer_ = scorer
        self.multimetric_ = False
        self.n_splits_ = n_splits
        if self.refit:
            began = time.perf_counter()
            # Set before the fit, as GridSearchCV sets it: a refit that raises leaves an
            # unfitted model, not the fitted one of an earlier search.
            self.best_estimator_ = self._candidate(self.best_params_)
            self.best_estimator_.fit(X, y, **params)
            self.refit_time_ = time.perf_counter() - began
            if hasattr(self.best_estimator_, "feature_names_in_"):
                self.feature_names_in_ = self.best_estimator_.feature_names_in_
        return self

    def _scores_weighted(self, params: dict[str, Any]) -> bool:
        """Whether the scores weigh each sequence by its ``sample_weight``, as this
        scikit-learn's GridSearchCV does: from scikit-learn 1.7 it gives a bare
        estimator's weights (``sample_weight=``, not a pipeline step's) to a scorer
        that takes them; earlier versions score unweighted."""
        if params.get("sample_weight") is None or not hasattr(self, "_check_scorers_accept_sample_weight"):
            return False
        return bool(self._check_scorers_accept_sample_weight())

    def _sample_weight(self, params: dict[str, Any]) -> Any:
        """The sample weights among ``fit``'s parameters (the only one it takes)."""
        key = "sample_weight"
        if isinstance(self.estimator, Pipeline):
            key = f"{self.estimator.steps[-1][0]}__sample_weight"
        unknown = sorted(set(params) - {key})
        if unknown:
            raise TypeError(
                f"RNNGridSearchCV.fit takes the sample weights ({key}=...) besides X, y and "
                f"groups; got {unknown}. Search with sklearn.model_selection.GridSearchCV to "
                "pass other fit parameters."
            )
        return params.get(key)

    def _candidate(self, params: dict[str, Any]) -> Any:
        """A clone of the estimator with ``params`` set. The values are cloned too, as
        GridSearchCV clones them: an estimator or a RandomState in the grid is not
        shared by the networks of several splits and the refit, nor changed."""
        return clone(self.estimator).set_params(**clone(params, safe=False))

    def _failed(self, failures: dict, candidates: list[dict], i: int, k: int,
                stage: str, error: Exception) -> float:
        """Record the failure of setting ``i`` on split ``k`` (after any earlier one of
        the same network) and return its score, ``error_score``; or raise it
        (error_score='raise')."""
        where = f"setting {candidates[i]} on split {k} ({stage})"
        if self.error_score == "raise":
            if hasattr(error, "add_note"):  # Python 3.11 on
                error.add_note(f"RNNGridSearchCV: {where}; error_score=np.nan scores such a "
                               "network instead of stopping the search.")
            raise error
        failure = f"{where}: {type(error).__name__}: {error}"
        # One network, every failure named: its test scoring's stays beside its train scoring's.
        failures[i, k] = f"{failures[i, k]}\n{failure}" if (i, k) in failures else failure
        return float(self.error_score)

    def _warn_of_failures(self, failures: dict, total: int) -> None:
        if failures:
            warnings.warn(
                f"{len(failures)} of the {total} networks failed and score "
                f"error_score={self.error_score!r}; error_score='raise' raises the first.\n"
                + "\n".join(failures.values()),
                FitFailedWarning,
                stacklevel=4,  # the caller of fit, past fit and scikit-learn's _fit_context
            )

    def _prepare(
        self, X: Any, y: Any, weight: Any, candidates: list[dict],
        splits: list[tuple[np.ndarray, np.ndarray]], failures: dict, invalid: dict[int, Exception],
    ) -> Iterator[tuple[int, int, Any, StackedMember, float]]:
        """Clone, set and prepare one estimator per (setting, split), as its fit would, one
        at a time as they are asked for: the setting, the split, the model (a pipeline or
        the estimator), its member and the seconds it took. A setting of ``invalid``
        values fails on every split."""
        for i, params in enumerate(candidates):
            for k, (train_index, _) in enumerate(splits):
                if i in invalid:  # refused by fit's checks before any work
                    self._failed(failures, candidates, i, k, "fit", invalid[i])
                    continue
                began = time.perf_counter()
                model = self._candidate(params)
                rnn = _final_rnn(model)
                X_train, y_train = _safe_indexing(X, train_index), _safe_indexing(y, train_index)
                try:
                    split_weight = None if weight is None else _safe_indexing(weight, train_index)
                    X_train, y_train = _fit_steps(model, X_train, y_train, split_weight)
                    train, valid = rnn._prepare(X_train, y_train, split_weight, incremental=False)
                except Exception as error:
                    self._failed(failures, candidates, i, k, "fit", error)
                    continue
                yield i, k, model, StackedMember(rnn, train, valid), time.perf_counter() - began

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.three_d_array = True
        return tags


def _check_steps(model: Any) -> None:
    """Refuse the steps a pipeline's own ``fit`` refuses, before any network trains: a
    scikit-learn Pipeline takes no sampler (``fit_resample``) before its last step,
    imbalanced-learn's does (:func:`_fit_steps` resamples through either)."""
    if not isinstance(model, Pipeline):
        return
    try:
        model._validate_steps()
    except TypeError as error:
        samplers = [name for name, step in model.steps[:-1] if hasattr(step, "fit_resample")]
        if not samplers:
            raise
        raise TypeError(
            f"{error} The step(s) {samplers} resample (fit_resample), which scikit-learn's "
            "Pipeline does not run: build the pipeline with imblearn.pipeline.Pipeline (or "
            "imblearn.pipeline.make_pipeline)."
        ) from error


def _fit_steps(model: Any, X: Any, y: Any, weight: Any) -> tuple[Any, Any]:
    """Fit a pipeline's steps before its estimator on ``(X, y)``, as the pipeline's own
    ``fit`` would, and return what reaches the estimator: transformers transform X
    (``fit_transform``, or ``fit`` then ``transform`` for one without it), an
    imbalanced-learn sampler (``fit_resample``) resamples X and y; 'passthrough' and
    None pass. A bare estimator gets ``(X, y)`` as they are. The sample weights
    ``weight`` reach the estimator as they came, as the pipeline passes them: a sampler
    that changes the number of sequences is refused."""
    if not isinstance(model, Pipeline):
        return X, y
    for name, step in model.steps[:-1]:
        if step is None or step == "passthrough":
            continue
        if hasattr(step, "fit_resample"):
            given = _num_samples(X)
            X, y = step.fit_resample(X, y)
            if weight is not None and _num_samples(X) != given:
                raise ValueError(
                    f"the pipeline's step {name!r} resamples the training sequences ({given} "
                    f"came, {_num_samples(X)} left), which leaves sample_weight without its "
                    "sequences: weigh the classes with the sampler or with class_weight "
                    "instead of sample_weight."
                )
        elif hasattr(step, "fit_transform"):
            X = step.fit_transform(X, y)
        else:  # a transformer with fit and transform only, which Pipeline fits as such
            X = step.fit(X, y).transform(X)
    return X, y


def _one_number(value: Any, scoring: Any) -> float:
    """A scorer's value as a float, a one-element array unwrapped (``.item()``) as
    GridSearchCV unwraps it; several metrics (a dict, as a callable scoring them all
    returns) and anything that is not a number are refused."""
    if isinstance(value, dict):
        raise ValueError(
            f"scoring={scoring!r} returned several metrics ({sorted(value)}); RNNGridSearchCV "
            "scores one metric and refits the best by it: give scoring one scorer, or "
            "search several metrics with sklearn.model_selection.GridSearchCV."
        )
    if hasattr(value, "item"):
        with contextlib.suppress(ValueError):  # several elements: refused below
            value = value.item()
    if (isinstance(value, (bool, np.bool_)) or np.ndim(value) != 0
            or not np.issubdtype(np.asarray(value).dtype, np.number)):
        raise ValueError(
            f"scoring={scoring!r} returned {value!r} ({type(value).__name__}); expected a "
            "number, as scikit-learn's scorers return."
        )
    return float(value)


def _final_rnn(estimator: Any) -> BaseRNN:
    """The RNN estimator itself, or the last step of a pipeline."""
    final = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    if isinstance(final, type):  # the class itself: it has fit, as the constraint asks
        raise TypeError(
            f"RNNGridSearchCV expected an estimator instance, e.g. {final.__name__}(); got the "
            f"class {final.__name__} itself. Create one: {final.__name__}(...)."
        )
    if isinstance(final, Pipeline):
        raise TypeError(
            "RNNGridSearchCV takes a pipeline whose last step is the RNN estimator itself; got "
            "a pipeline ending in another pipeline. Join them into one, e.g. "
            "Pipeline([*outer.steps[:-1], *outer.steps[-1][1].steps]) (the parameter names "
            "then lose the inner pipeline's prefix)."
        )
    if not isinstance(final, BaseRNN):
        raise TypeError(
            "RNNGridSearchCV trains the networks of an RNNClassifier or RNNRegressor (or of "
            f"a pipeline ending in one) together; got {type(final).__name__}. Use "
            "sklearn.model_selection.GridSearchCV for other estimators."
        )
    return final


def _check_per_sample(X: Any, n_instances: int, values: Any, name: str) -> None:
    """Refuse ``y``, ``groups`` or ``sample_weight`` (``name``) that do not hold one entry
    per sequence of ``X`` (``n_instances`` of them), in the estimator's words where
    scikit-learn's ``indexable`` said "inconsistent numbers of samples: [24, 23]" (and
    the weights' check told of a sampler, which has not run yet); for a panel, one entry
    per instance, as a column of the panel, one entry per row, does not hold."""
    if values is None or (name == "sample_weight" and np.ndim(values) == 0):
        return  # a scalar weight is spread over the samples
    if not is_panel(X):
        try:
            count = _num_samples(values)
        except TypeError:
            raise ValueError(
                f"{name} is a scalar ({values!r}): expected one entry per sequence of X, an "
                f"array-like of {n_instances} entries."
            ) from None
        if count != n_instances:
            entry = {"y": "target", "groups": "group label", "sample_weight": "weight"}[name]
            raise ValueError(
                f"{name} has {count} entries, but X has {n_instances} sequences: pass one "
                f"{entry} per sequence, in the order of X."
            )
        return
    if isinstance(values, (str, bytes, dict, set)):  # counted by its letters or keys
        fix = (" Pass the values themselves, not a column's name: e.g. "
               f"X[{values!r}].groupby(level=0, sort=False).first()." if isinstance(values, str) else "")
        raise ValueError(
            f"{name} is a {type(values).__name__}: expected one entry per instance of the panel "
            f"X ({n_instances}), in the order of X.index.unique(level=0).{fix}"
        )
    if _num_samples(values) == n_instances:
        return
    first = (f"{name}.groupby(level=0, sort=False).first()" if hasattr(values, "groupby") else
             f"pandas.Series({name}, index=X.index).groupby(level=0, sort=False).first()")
    raise ValueError(
        f"{name} has {_num_samples(values)} entries, but the panel X has {n_instances} "
        f"instances: a panel is split by instance, so {name} holds one entry per instance, "
        "in the order of X.index.unique(level=0). For a column of the panel, one entry per "
        f"row, take each instance's first: {first}."
    )


def _check_split_indices(splits: list[tuple[Any, Any]], n_samples: int, panel: bool) -> None:
    """Refuse a split whose indices run past the samples (a panel: its instances),
    naming the index, as ``cv`` built on a panel's rows gives them, or whose boolean mask
    has another length."""
    for number, split in enumerate(splits):
        for part, indices in zip(("train", "test"), split):
            indices = np.asarray(indices)
            what = (f"the panel X has {n_samples} instances: a panel is split by instance, so "
                    "the splits index X.index.unique(level=0), not the panel's rows (build them "
                    "on one entry per instance, e.g. groups of X.index.unique(level=0))"
                    if panel else f"X has {n_samples} sequences")
            if indices.dtype == bool:  # a mask of another length was cut short, or failed bare
                if indices.shape != (n_samples,):
                    raise ValueError(
                        f"cv gave a boolean mask of shape {indices.shape} in the {part} part of "
                        f"split {number}, but {what}."
                    )
                continue
            if not indices.size:
                continue
            largest, smallest = int(indices.max()), int(indices.min())
            if largest < n_samples and smallest >= -n_samples:
                continue
            bad = largest if largest >= n_samples else smallest
            raise ValueError(
                f"cv gave index {bad} in the {part} part of split {number}, but {what}."
            )


def _results(
    candidates: list[dict],
    test: np.ndarray,
    train: np.ndarray | None,
    fit_time: np.ndarray,
    score_time: np.ndarray,
) -> dict[str, Any]:
    """``cv_results_`` in GridSearchCV's layout (one metric)."""
    results: dict[str, Any] = {
        "mean_fit_time": fit_time.mean(axis=1),
        "std_fit_time": fit_time.std(axis=1),
        "mean_score_time": score_time.mean(axis=1),
        "std_score_time": score_time.std(axis=1),
    }
    # GridSearchCV's own param_<name> columns (masked arrays, dtype inferred).
    results.update(_yield_masked_array_for_each_param(candidates))
    results["params"] = candidates
    for kind, scores in (("test", test), ("train", train)):
        if scores is None:
            continue
        for k in range(scores.shape[1]):
            results[f"split{k}_{kind}_score"] = scores[:, k]
        results[f"mean_{kind}_score"] = scores.mean(axis=1)
        results[f"std_{kind}_score"] = scores.std(axis=1)
        if kind == "test":
            means = results["mean_test_score"]
            if np.isnan(means).all():
                rank = np.ones(len(means), dtype=np.int32)
            else:
                filled = np.nan_to_num(means, nan=np.nanmin(means) - 1)
                rank = rankdata(-filled, method="min").astype(np.int32)
            results["rank_test_score"] = rank
    return results
